//! The gateway: REST (axum) and gRPC (tonic) in front of the brokers, for web apps and
//! services that do not speak Kafka.
//!
//! It keeps no consumer state: a reader's position lives in the request, in a resume token
//! the client holds, or in the brokers' group coordinator, so any replica serves any call.
//! Every call is authenticated (`auth`), authorized by the tenant's ACLs (`access`) and
//! metered by its quotas (`quota`); what the gateway knows of tenants, brokers, topics, ACLs
//! and quotas comes from the controller's metadata stream (`cluster`). It reaches the
//! brokers through the project's own Kafka client (`brokers`).

pub mod access;
pub mod auth;
pub mod brokers;
pub mod call;
pub mod client_state;
pub mod cluster;
pub mod error;
pub mod grpc;
pub mod idempotency;
pub mod long_polls;
pub mod metrics;
pub mod produce;
pub mod quota;
pub mod read;
pub mod rest;
pub mod streams;

use std::sync::Arc;

use auth::Authenticator;
use brokers::Brokers;
use cluster::ClusterView;
use quota::Quotas;

pub use auth::{AuthConfig, Caller};
pub use error::GatewayError;

/// Limits and browser settings of the HTTP side.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Origins allowed to call from a browser (`*` for any); none means no CORS headers.
    pub cors_origins: Vec<String>,
    /// The largest request body accepted.
    pub max_body_bytes: usize,
    /// Bytes one ProduceStream may read ahead of their reports.
    pub stream_read_ahead_bytes: u32,
    /// Bytes all ProduceStreams together may read ahead of their reports.
    pub read_ahead_bytes: u32,
    /// Open streams (SSE tails, gRPC Consume) per tenant and in all.
    pub streams: streams::StreamLimits,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            cors_origins: Vec::new(),
            max_body_bytes: 8 * 1024 * 1024,
            stream_read_ahead_bytes: 16 * 1024 * 1024,
            read_ahead_bytes: 256 * 1024 * 1024,
            streams: streams::StreamLimits::default(),
        }
    }
}

/// What every REST and gRPC call reaches.
#[derive(Debug)]
pub struct Gateway {
    pub view: ClusterView,
    pub auth: Authenticator,
    pub brokers: Brokers,
    pub quotas: Quotas,
    pub http: HttpOptions,
    /// The control plane, for idempotency keys; `None` where there is none (then requests
    /// with an idempotency key are refused as unavailable).
    pub controller: Option<skein_proto::replicas::ControllerReplicas>,
    /// Seals and opens the state clients hold: cursors, resume tokens, event ids.
    pub client_state: client_state::ClientStateKeys,
    /// Bytes that ProduceStream may read ahead of their reports.
    pub read_ahead: grpc::ReadAheadBudget,
    /// Rations the gateway's questions to the controller about topics it does not know.
    pub topic_lookups: skein_quota::Lookups,
    /// The long streams open, per tenant.
    pub streams: Arc<streams::Streams>,
    /// Set once the gateway begins to shut down.
    stopping: tokio::sync::watch::Sender<bool>,
    /// What operators scrape (`metrics.rs`).
    pub metrics: metrics::GatewayMetrics,
}

impl Gateway {
    pub fn new(
        view: ClusterView,
        auth: Authenticator,
        http: HttpOptions,
        controller: Option<skein_proto::replicas::ControllerReplicas>,
        client_state: client_state::ClientStateKeys,
        broker_tls: Option<skein_client::ClientTls>,
    ) -> Arc<Self> {
        let (stream_read_ahead_bytes, read_ahead_bytes, stream_limits) = (
            http.stream_read_ahead_bytes,
            http.read_ahead_bytes,
            http.streams,
        );
        let metrics = metrics::GatewayMetrics::default();
        Arc::new(Self {
            view,
            auth: auth.counting(metrics.clone()),
            metrics,
            brokers: Brokers::new(
                controller
                    .as_ref()
                    .and_then(|c| c.credential().token())
                    .map(str::to_owned),
                broker_tls,
            ),
            quotas: Quotas::default(),
            http,
            controller,
            read_ahead: grpc::ReadAheadBudget::new(stream_read_ahead_bytes, read_ahead_bytes),
            client_state,
            topic_lookups: skein_quota::Lookups::default(),
            streams: streams::Streams::new(stream_limits),
            stopping: tokio::sync::watch::Sender::new(false),
        })
    }

    /// Begins the shutdown: every stream ends with a status that tells its client to resume
    /// elsewhere (gRPC UNAVAILABLE), and SSE tails end so that browsers reconnect.
    pub fn begin_shutdown(&self) {
        self.stopping.send_replace(true);
    }

    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Resolves once the shutdown has begun.
    pub async fn stopping(&self) {
        let mut stopping = self.stopping.subscribe();
        let _ = stopping.wait_for(|stopping| *stopping).await;
    }
}
