//! Counting gRPC calls: a tower layer around the gateway's routes that times each call to
//! its answer's head and counts it by method and final status. A status is final in the
//! answer's head (a call refused before it starts) or in its trailers (a unary answer or a
//! stream that ended); a stream whose client went away without either counts as
//! `Cancelled`. The method label is the path only for the methods served: a path no service
//! answers (`Unimplemented` in the head) counts as `unmatched`, so no client can grow the
//! family by calling made-up names.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{HeaderMap, Request, Response};
use http_body::{Body, Frame, SizeHint};
use tonic::Code;
use tower_layer::Layer;
use tower_service::Service;

use crate::metrics::GatewayMetrics;

/// What a call to a path no service answers is counted under.
pub const UNMATCHED: &str = "unmatched";

/// Counts and times the calls of the service it wraps.
#[derive(Debug, Clone)]
pub struct MetricsLayer {
    metrics: GatewayMetrics,
}

impl MetricsLayer {
    pub fn new(metrics: GatewayMetrics) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = Metrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Metrics {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// A service whose calls are counted ([`MetricsLayer`]).
#[derive(Debug, Clone)]
pub struct Metrics<S> {
    inner: S,
    metrics: GatewayMetrics,
}

type Answer<B, E> = Pin<Box<dyn Future<Output = Result<Response<Metered<B>>, E>> + Send>>;

impl<S, RequestBody, ResponseBody> Service<Request<RequestBody>> for Metrics<S>
where
    S: Service<Request<RequestBody>, Response = Response<ResponseBody>>,
    S::Future: Send + 'static,
    ResponseBody: Body + Unpin,
{
    type Response = Response<Metered<ResponseBody>>;
    type Error = S::Error;
    type Future = Answer<ResponseBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let path = request.uri().path().trim_start_matches('/').to_owned();
        let started = Instant::now();
        let answer = self.inner.call(request);
        let metrics = self.metrics.clone();
        Box::pin(async move {
            let response = answer.await?;
            let (parts, body) = response.into_parts();
            let code = status_of(&parts.headers);
            let method = if code == Some(Code::Unimplemented) {
                UNMATCHED.to_owned()
            } else {
                path
            };
            metrics.grpc_answered(&method, started.elapsed());
            let outcome = Outcome {
                metrics,
                method,
                code,
            };
            Ok(Response::from_parts(
                parts,
                Metered {
                    inner: body,
                    outcome: Some(outcome),
                },
            ))
        })
    }
}

/// The `grpc-status` in a head or trailers.
fn status_of(headers: &HeaderMap) -> Option<Code> {
    headers
        .get("grpc-status")
        .map(|value| Code::from_bytes(value.as_bytes()))
}

/// A call not counted yet: counted, with the status it ended with, when its answer's body is
/// done or dropped.
#[derive(Debug)]
struct Outcome {
    metrics: GatewayMetrics,
    method: String,
    code: Option<Code>,
}

impl Drop for Outcome {
    fn drop(&mut self) {
        self.metrics
            .grpc_call(&self.method, self.code.unwrap_or(Code::Cancelled));
    }
}

/// An answer's body, watched for the status in its trailers.
#[derive(Debug)]
pub struct Metered<B> {
    inner: B,
    outcome: Option<Outcome>,
}

impl<B: Body + Unpin> Body for Metered<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(Some(Ok(frame))) => frame.trailers_ref().map(status_of),
            Poll::Ready(Some(Err(_))) => Some(Some(Code::Internal)),
            // Ended without trailers: the status, if any, was in the head.
            Poll::Ready(None) => Some(None),
            Poll::Pending => None,
        };
        if let Some(code) = ended {
            if let Some(mut outcome) = this.outcome.take() {
                outcome.code = outcome.code.or(code).or(Some(Code::Unknown));
                // Counted as it drops here.
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
