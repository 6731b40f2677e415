//! Accepts connections until shutdown.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::connection::{self, ConnectionError};
use crate::listeners::ListenerInfo;
use crate::low_water::{self, LowWater, Missing};
use crate::Broker;

/// Serves Kafka clients on `listener` until `shutdown` completes, then waits for open
/// connections to finish their current request. [`crate::Node`] runs it beside the broker's
/// background tasks.
pub(crate) async fn serve(
    listener: TcpListener,
    info: Arc<ListenerInfo>,
    broker: Arc<Broker>,
    shutdown: impl Future<Output = ()>,
) {
    let mut connections = JoinSet::new();
    // `max.connections`: past it a new connection is closed at once, and those open go on.
    let slots = Arc::new(Semaphore::new(broker.config.max_connections));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, address)) => {
                    let peer = address;
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
                    let missing = Missing::default();
                    let held_above = if info.tls.is_some() { low_water::TLS_HELD } else { 0 };
                    let stream = LowWater::new(stream, missing.clone(), held_above);
                    let broker = Arc::clone(&broker);
                    let info = Arc::clone(&info);
                    connections.spawn(async move {
                        let client = format!("/{}", address.ip());
                        let served = match info.tls.as_ref().map(|tls| tls.acceptor()) {
                            None => {
                                connection::run(stream, missing, client, broker, info, None).await
                            }
                            Some(acceptor) => {
                                match tokio::time::timeout(
                                    crate::tls::HANDSHAKE_WITHIN,
                                    acceptor.accept(stream),
                                )
                                .await
                                {
                                    Ok(Ok(stream)) => match certificate_session(&info, &stream) {
                                        Ok(who) => {
                                            connection::run(
                                                stream, missing, client, broker, info, who,
                                            )
                                            .await
                                        }
                                        Err(e) => Err(ConnectionError::Certificate(e)),
                                    },
                                    Ok(Err(e)) => Err(ConnectionError::Tls(e)),
                                    Err(_) => Err(ConnectionError::TlsTimeout),
                                }
                            }
                        };
                        if let Err(e) = served {
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
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

/// The session of a client that presented a certificate on an SSL listener with client
/// authentication: its mapped principal. `None` elsewhere, and for a client without one
/// where certificates are only requested; on SASL_SSL, SASL decides who the client is.
fn certificate_session<S>(
    info: &ListenerInfo,
    stream: &tokio_rustls::server::TlsStream<S>,
) -> Result<Option<crate::sasl::Authenticated>, crate::ssl_principal::SslPrincipalError> {
    let Some(auth) = info.tls.as_ref().and_then(|tls| tls.client_auth()) else {
        return Ok(None);
    };
    if info.protocol != crate::listeners::SecurityProtocol::Ssl {
        return Ok(None);
    }
    match stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
    {
        Some(leaf) => crate::ssl_principal::authenticate(&auth.mapper, leaf).map(Some),
        None => Ok(None),
    }
}
