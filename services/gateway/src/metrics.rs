//! The gateway's metrics: REST requests by route (the route's template, never the path a
//! client sent), method and status, with their latency; gRPC calls by method and status,
//! with their latency (counted by `grpc/metrics.rs`); and refused credentials by reason.
//! While traces are exported, each request is also a server span, the child of the
//! `traceparent` the client sent.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use skein_ops::telemetry;
use tracing::Instrument;

use crate::Gateway;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: String,
    status: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GrpcCallLabels {
    method: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GrpcMethodLabels {
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabels {
    pub(crate) reason: String,
}

/// Every metric the gateway keeps.
#[derive(Debug, Clone)]
pub struct GatewayMetrics {
    requests: Family<RequestLabels, Counter>,
    request_seconds: Family<RouteLabels, Histogram>,
    grpc_calls: Family<GrpcCallLabels, Counter>,
    grpc_seconds: Family<GrpcMethodLabels, Histogram>,
    pub(crate) auth_rejections: Family<ReasonLabels, Counter>,
}

impl Default for GatewayMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0005, 2.0, 16))
            }),
            grpc_calls: Family::default(),
            grpc_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0005, 2.0, 16))
            }),
            auth_rejections: Family::default(),
        }
    }
}

impl GatewayMetrics {
    /// Registers every family in `registry` (under its `skein` prefix).
    pub fn register(&self, registry: &mut Registry) {
        let http = registry.sub_registry_with_prefix("http");
        http.register(
            "requests",
            "REST requests answered, by route, method and status",
            self.requests.clone(),
        );
        http.register_with_unit(
            "request_duration",
            "Time from a REST request's arrival to its answer's head, by route and method",
            Unit::Seconds,
            self.request_seconds.clone(),
        );
        let grpc = registry.sub_registry_with_prefix("grpc");
        grpc.register(
            "calls",
            "gRPC calls ended, by method and status code",
            self.grpc_calls.clone(),
        );
        grpc.register_with_unit(
            "request_duration",
            "Time from a gRPC call's arrival to its answer's head, by method",
            Unit::Seconds,
            self.grpc_seconds.clone(),
        );
        registry.register(
            "gateway_auth_rejections",
            "Credentials the gateway refused, by reason",
            self.auth_rejections.clone(),
        );
    }

    pub(crate) fn grpc_answered(&self, method: &str, after: std::time::Duration) {
        self.grpc_seconds
            .get_or_create(&GrpcMethodLabels {
                method: method.to_owned(),
            })
            .observe(after.as_secs_f64());
    }

    pub(crate) fn grpc_call(&self, method: &str, code: tonic::Code) {
        let code = match code {
            tonic::Code::Ok => "OK".to_owned(),
            other => format!("{other:?}"),
        };
        self.grpc_calls
            .get_or_create(&GrpcCallLabels {
                method: method.to_owned(),
                code,
            })
            .inc();
    }

    pub(crate) fn auth_rejected(&self, reason: &str) {
        self.auth_rejections
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }
}

/// Counts and times every REST request (a layer of the router), in a span of its own while
/// traces are exported.
pub(crate) async fn track(
    State(gateway): State<Arc<Gateway>>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    let span = if telemetry::enabled() {
        let span = tracing::info_span!(
            "http request",
            otel.name = %format!("{method} {route}"),
            otel.kind = "server",
            http.request.method = %method,
            http.route = %route,
            http.response.status_code = tracing::field::Empty,
        );
        if let Some(parent) = request.headers().get(telemetry::TRACEPARENT) {
            telemetry::adopt(&span, [parent.as_bytes()]);
        }
        span
    } else {
        tracing::Span::none()
    };
    let response = next.run(request).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    let metrics = &gateway.metrics;
    metrics
        .request_seconds
        .get_or_create(&RouteLabels {
            route: route.clone(),
            method: method.clone(),
        })
        .observe(started.elapsed().as_secs_f64());
    metrics
        .requests
        .get_or_create(&RequestLabels {
            route,
            method,
            status: u64::from(response.status().as_u16()),
        })
        .inc();
    response
}
