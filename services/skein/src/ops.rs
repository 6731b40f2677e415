//! `--ops-listen`, which every service takes: its health, readiness and Prometheus metrics
//! (`skein_ops`) on a listener of their own.

use std::net::SocketAddr;

use anyhow::Context;

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct OpsArgs {
    /// Address the operations listener binds: /healthz, /readyz and /metrics (Prometheus);
    /// without it none is served
    #[arg(long, env = "SKEIN_OPS_LISTEN")]
    pub(crate) ops_listen: Option<SocketAddr>,
}

impl OpsArgs {
    /// Binds the listener, if one is asked for.
    pub(crate) async fn bind(&self) -> anyhow::Result<Option<tokio::net::TcpListener>> {
        match self.ops_listen {
            Some(address) => Ok(Some(
                tokio::net::TcpListener::bind(address)
                    .await
                    .with_context(|| format!("failed to bind the ops listener on {address}"))?,
            )),
            None => Ok(None),
        }
    }
}

/// Serves `ops` on `listener` (when bound) until the process ends; prints its address.
pub(crate) fn spawn(listener: Option<tokio::net::TcpListener>, ops: skein_ops::Ops) {
    let Some(listener) = listener else {
        return;
    };
    if let Ok(address) = listener.local_addr() {
        println!("ops: health, readiness and metrics on http://{address}");
    }
    tokio::spawn(async move {
        if let Err(error) = skein_ops::serve(listener, ops, std::future::pending()).await {
            tracing::warn!(%error, "the ops listener stopped");
        }
    });
}

/// A registry for a service's metrics, every name under `skein_`.
pub(crate) fn registry() -> skein_ops::prometheus_client::registry::Registry {
    skein_ops::prometheus_client::registry::Registry::with_prefix("skein")
}
