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

/// The operations listener while it serves. Its checks hold what they look at (a broker,
/// whose logs close only once nothing else holds it), so a service stops it
/// ([`OpsServer::stop`]) before closing what it serves; dropped, it goes on until the
/// process ends.
#[derive(Debug)]
pub(crate) struct OpsServer {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// How long open scrapes may take to finish when the listener stops.
const STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

impl OpsServer {
    /// Stops serving and lets go of everything the checks hold: open requests have
    /// [`STOP_WITHIN`] to finish, then they are dropped.
    pub(crate) async fn stop(self) {
        let Self { stop, mut task } = self;
        let _ = stop.send(());
        if tokio::time::timeout(STOP_WITHIN, &mut task).await.is_err() {
            task.abort();
            let _ = task.await;
        }
    }
}

/// Stops `server`, if there is one.
pub(crate) async fn stop(server: Option<OpsServer>) {
    if let Some(server) = server {
        server.stop().await;
    }
}

/// Serves `ops` on `listener` (when bound) until stopped; prints its address.
pub(crate) fn spawn(
    listener: Option<tokio::net::TcpListener>,
    ops: skein_ops::Ops,
) -> Option<OpsServer> {
    let listener = listener?;
    if let Ok(address) = listener.local_addr() {
        println!("ops: health, readiness and metrics on http://{address}");
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let stopped = async {
            let _ = stopped.await;
        };
        if let Err(error) = skein_ops::serve(listener, ops, stopped).await {
            tracing::warn!(%error, "the ops listener stopped");
        }
    });
    Some(OpsServer { stop, task })
}

/// A registry for a service's metrics, every name under `skein_`.
pub(crate) fn registry() -> skein_ops::prometheus_client::registry::Registry {
    skein_ops::prometheus_client::registry::Registry::with_prefix("skein")
}
