//! Accepts connections until shutdown.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::connection;
use crate::Broker;

/// Serves Kafka clients on `listener` until `shutdown` completes, then waits for open
/// connections to finish their current request.
pub async fn serve(listener: TcpListener, broker: Arc<Broker>, shutdown: impl Future<Output = ()>) {
    let mut connections = JoinSet::new();
    // Group members whose sessions lapse are removed, and stalled rebalances completed.
    let expiry = {
        let broker = Arc::clone(&broker);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(std::time::Duration::from_millis(250));
            // Idle groups' offsets and producers' states are swept far less often.
            let sweep_every = broker
                .config
                .offsets_retention
                .min(broker.config.producer_id_expiration)
                .div_f64(4.0)
                .clamp(
                    std::time::Duration::from_millis(250),
                    std::time::Duration::from_secs(60),
                );
            let mut last_sweep = tokio::time::Instant::now();
            loop {
                ticks.tick().await;
                broker.groups.expire();
                if last_sweep.elapsed() >= sweep_every {
                    last_sweep = tokio::time::Instant::now();
                    let broker = Arc::clone(&broker);
                    // It writes tombstones to a log: off the async threads.
                    let _ = tokio::task::spawn_blocking(move || broker.expire_idle_state()).await;
                }
            }
        })
    };
    // `max.connections`: past it a new connection is closed at once, and those open go on.
    let slots = Arc::new(Semaphore::new(broker.config.max_connections));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                        tracing::warn!(
                            %peer,
                            max_connections = broker.config.max_connections,
                            "refused connection: max.connections reached"
                        );
                        drop(stream);
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let broker = Arc::clone(&broker);
                    connections.spawn(async move {
                        if let Err(e) = connection::run(stream, broker).await {
                            tracing::info!(%peer, reason = %e, "closed connection");
                        }
                        drop(slot);
                    });
                }
                Err(e) => tracing::warn!(error = %e, "accept failed"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    expiry.abort();
    let _ = expiry.await;
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}
