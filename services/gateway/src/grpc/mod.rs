//! The gRPC API (`proto/skein/v1/gateway.proto`): unary and streaming produce, a
//! credit-based Consume stream (`consume.rs`), and topic listing; beside it the standard
//! health service and server reflection. Calls carry their credential in the
//! `authorization` metadata; refusals are the gRPC status codes of [`GatewayError`].
//! `metrics.rs` counts every call by method and status.

mod consume;
mod metrics;
mod produce;

pub use consume::{parse_resume_token, resume_token};
pub use metrics::{Metered, Metrics, MetricsLayer, UNMATCHED};
pub use produce::ReadAheadBudget;

use std::pin::Pin;
use std::sync::Arc;

use skein_proto::gateway as pb;
use skein_proto::gateway::gateway_server::{Gateway as GatewayRpc, GatewayServer};
use tonic::{Request, Response, Status, Streaming};

use crate::call::Call;
use crate::error::GatewayError;
use crate::Gateway;

/// The largest message a client may send (tonic's default, set here on purpose): it bounds
/// what one ProduceStream message costs before the read-ahead budget counts it.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct GatewayService {
    gateway: Arc<Gateway>,
}

impl GatewayService {
    pub fn new(gateway: Arc<Gateway>) -> Self {
        Self { gateway }
    }

    /// An authenticated call from a request's metadata.
    async fn call<T>(&self, request: &Request<T>) -> Result<Call, Status> {
        let (authorization, host) = credentials(request);
        self.authenticate(authorization, host).await
    }

    async fn authenticate(
        &self,
        authorization: Option<String>,
        host: String,
    ) -> Result<Call, Status> {
        let caller = self
            .gateway
            .auth
            .authenticate(authorization.as_deref())
            .await?;
        Ok(Call::new(&self.gateway, caller, host)?)
    }
}

/// A request's `authorization` metadata and the client's address (read before any await,
/// since a streaming request is not `Sync`).
fn credentials<T>(request: &Request<T>) -> (Option<String>, String) {
    let authorization = request
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let host = request
        .remote_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    (authorization, host)
}

type Stream<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl GatewayRpc for GatewayService {
    async fn produce(
        &self,
        request: Request<pb::ProduceRequest>,
    ) -> Result<Response<pb::ProduceResponse>, Status> {
        let call = self.call(&request).await?;
        let key = request
            .metadata()
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let request = request.into_inner();
        let results = produce::unary(&self.gateway, &call, request, key.as_deref()).await?;
        Ok(Response::new(pb::ProduceResponse { results }))
    }

    type ProduceStreamStream = Stream<pb::ProduceReport>;

    async fn produce_stream(
        &self,
        request: Request<Streaming<pb::ProduceStreamRequest>>,
    ) -> Result<Response<Self::ProduceStreamStream>, Status> {
        let (authorization, host) = credentials(&request);
        let call = self.authenticate(authorization, host).await?;
        let reports = produce::stream(Arc::clone(&self.gateway), call, request.into_inner());
        Ok(Response::new(Box::pin(reports)))
    }

    type ConsumeStream = Stream<pb::ConsumeResponse>;

    async fn consume(
        &self,
        request: Request<Streaming<pb::ConsumeRequest>>,
    ) -> Result<Response<Self::ConsumeStream>, Status> {
        let (authorization, host) = credentials(&request);
        let call = self.authenticate(authorization, host).await?;
        let responses =
            consume::start(Arc::clone(&self.gateway), call, request.into_inner()).await?;
        Ok(Response::new(Box::pin(responses)))
    }

    async fn list_topics(
        &self,
        request: Request<pb::ListTopicsRequest>,
    ) -> Result<Response<pb::ListTopicsResponse>, Status> {
        let call = self.call(&request).await?;
        let topics = call
            .describable_topics()
            .into_iter()
            .map(|(name, t)| pb::TopicInfo {
                name,
                partitions: t.partitions,
            })
            .collect();
        Ok(Response::new(pb::ListTopicsResponse { topics }))
    }
}

/// The status code number a failure gets, for per-record results.
fn code(error: &GatewayError) -> i32 {
    Status::from(error.clone()).code() as i32
}

/// The gateway's gRPC services: the API, health and reflection.
pub async fn routes(gateway: Arc<Gateway>) -> tonic::service::Routes {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<GatewayServer<GatewayService>>()
        .await;
    let mut builder = tonic::service::RoutesBuilder::default();
    builder
        .add_service(
            GatewayServer::new(GatewayService::new(gateway))
                .max_decoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(health);
    match tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(skein_proto::FILE_DESCRIPTOR_SET)
        .build_v1()
    {
        Ok(reflection) => {
            builder.add_service(reflection);
        }
        Err(e) => tracing::warn!(error = %e, "gRPC reflection is not available"),
    }
    builder.routes()
}
