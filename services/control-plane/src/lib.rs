//! The control plane: the admin REST API over the catalog (`admin/`, served by
//! [`serve_admin`]), the cluster's controller over gRPC (`controller.rs`: broker
//! registration, topic placement, the controller lease and the metadata stream), and the
//! runners of sinks' workers (`sinks/`).

pub mod admin;
pub mod controller;
pub mod credentials;
pub mod election;
pub mod placement;
mod scram_credentials;
pub mod sinks;
pub mod topic_ops;
pub mod watchers;

use std::future::Future;

pub use admin::{admin_router, AdminApi, AdminAuth, AdminState, JwtConfig, ADMIN_AUDIENCE};
pub use controller::{
    controller_server, ControllerConfig, ControllerService, Leadership, LeaseKeeper,
};
pub use credentials::{ControllerCaller, CredentialVerifier, NewCredential, Role};
pub use topic_ops::{TopicOpError, TopicOps};

/// Serves the admin API on `listener` until `shutdown` completes.
pub async fn serve_admin(
    listener: tokio::net::TcpListener,
    state: AdminState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, admin_router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
