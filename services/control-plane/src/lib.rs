//! The control plane. Today: the admin REST API over the catalog (`admin/`), served by
//! [`serve_admin`]. Next: the cluster's controller (broker registration, placement and the
//! metadata stream) on the same catalog.

pub mod admin;

use std::future::Future;

pub use admin::{admin_router, AdminApi, AdminAuth, AdminState, JwtConfig};

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
