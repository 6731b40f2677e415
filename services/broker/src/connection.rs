//! One client connection: length-prefixed frames in, responses out, in request order.
//! A reader handles requests one after another while a writer task sends their responses.
//! An answer that waits on something other than this connection (an `acks=all` produce on
//! the ISR) waits beside the requests read after it, up to [`ANSWERS_WAITING`] of them, so
//! a producer's pipelined requests share a replication round; answers still leave in
//! request order.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::stream::FuturesOrdered;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;

use kafka_protocol::messages::ApiKey;

use crate::frame::FrameCodec;
use crate::listeners::ListenerInfo;
use crate::low_water::Missing;
use crate::router::{self, Reply};
use crate::sasl::{SaslState, Session};
use crate::Broker;

/// Why a connection was closed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectionError {
    #[error("frame error: {0}")]
    Frame(#[source] std::io::Error),
    #[error("TLS handshake failed: {0}")]
    Tls(#[source] std::io::Error),
    #[error("client certificate refused: {0}")]
    Certificate(#[source] crate::ssl_principal::SslPrincipalError),
    #[error("no TLS handshake within {:?}", crate::tls::HANDSHAKE_WITHIN)]
    TlsTimeout,
    #[error("no request for {idle_ms} ms (connections.max.idle.ms)")]
    Idle { idle_ms: u64 },
    #[error("request header is {len} bytes, too short")]
    ShortHeader { len: usize },
    #[error("unknown api key {api_key}")]
    UnknownApiKey { api_key: i16 },
    #[error("api key {api_key} version {version} is not supported")]
    UnsupportedVersion { api_key: i16, version: i16 },
    #[error("api key {api_key} before SASL authentication on listener {listener}")]
    Unauthenticated { api_key: i16, listener: String },
    #[error("SASL authentication failed")]
    AuthenticationFailed,
    #[error("not authenticated in time (sasl_authenticate_within)")]
    AuthenticationTimeout,
    #[error("too many unauthenticated connections on listener {listener} or from this address")]
    TooManyUnauthenticated { listener: String },
    #[error("the API key {key_id:?} this connection authenticated with is no longer in force")]
    KeyRevoked { key_id: String },
    #[error("the session of {principal} ended with its token, and it did not re-authenticate")]
    SessionExpired { principal: String },
    #[error("malformed request for api key {api_key} version {version}: {reason}")]
    Malformed {
        api_key: i16,
        version: i16,
        reason: String,
    },
}

/// Responses computed but not yet written; reading the next request does not wait for the
/// socket to drain, and a queue of small responses goes out in one write.
const RESPONSES_IN_FLIGHT: usize = 32;

const WRITE_BUFFER: usize = 64 * 1024;

/// Answers of one connection still waiting while later requests are handled; at this many,
/// the next request is not read until the oldest is answered. More lets a producer that
/// pipelines without bound send ever smaller requests: on `skein-bench cluster`, 32 moved
/// a fifth less with acks=all on three replicas than 5 or 8 did, at the same latency.
const ANSWERS_WAITING: usize = 8;

/// Answers in request order, each ready or still waiting.
type Answers<'a> = FuturesOrdered<BoxFuture<'a, Result<Bytes, ConnectionError>>>;

/// A length-prefixed response frame.
async fn write_frame<W: AsyncWrite + Unpin>(
    out: &mut BufWriter<W>,
    body: &[u8],
) -> std::io::Result<()> {
    let len =
        u32::try_from(body.len()).map_err(|_| std::io::Error::other("response over 4 GiB"))?;
    out.write_all(&len.to_be_bytes()).await?;
    out.write_all(body).await
}

/// A connection in the listener's gauge while it lives.
struct Counted {
    broker: Arc<Broker>,
    listener: String,
}

impl Counted {
    fn open(broker: Arc<Broker>, listener: String) -> Self {
        broker.metrics.connection_opened(&listener);
        Self { broker, listener }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.broker.metrics.connection_closed(&self.listener);
    }
}

/// Serves one connection (`peer` is `/ip`, as ACL hosts are matched) over a TCP or TLS
/// stream; the frame codec tells `missing` what the request being read still lacks.
pub(crate) async fn run<S>(
    stream: S,
    missing: Missing,
    peer: String,
    broker: Arc<Broker>,
    listener: Arc<ListenerInfo>,
    certificate: Option<crate::sasl::Authenticated>,
) -> Result<(), ConnectionError>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let _counted = Counted::open(Arc::clone(&broker), listener.name.clone());
    // On a SASL listener a connection holds a place among the unauthenticated ones, and
    // small frames, until it authenticates ([`crate::unauthenticated`]).
    let mut unproven = if listener.protocol.requires_sasl() {
        let address = peer
            .trim_start_matches('/')
            .parse()
            .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
        match broker.unauthenticated.admit(&listener.name, address) {
            Some(place) => Some(place),
            None => {
                return Err(ConnectionError::TooManyUnauthenticated {
                    listener: listener.name.clone(),
                })
            }
        }
    } else {
        None
    };
    let authenticate_by = tokio::time::Instant::now() + broker.config.sasl_authenticate_within;
    let session = Session::new(listener, peer);
    if let Some(who) = certificate {
        tracing::debug!(peer = %session.peer, principal = %who.principal,
            "authenticated by client certificate");
        session.set_state(SaslState::Authenticated(who));
    }
    let (read, write) = tokio::io::split(stream);
    let mut codec = FrameCodec::new(broker.config.max_request_bytes, missing);
    if unproven.is_some() {
        codec.set_max(
            crate::unauthenticated::MAX_FRAME.min(broker.config.max_request_bytes),
            "the frame cap before authentication",
        );
    }
    let mut requests = FramedRead::new(read, codec);
    let idle_ms = broker.config.connections_max_idle_ms;
    let (responses, mut queued) = mpsc::channel::<Bytes>(RESPONSES_IN_FLIGHT);
    let writer = tokio::spawn(async move {
        // Small responses gather in the buffer; one larger than it (a fetch) is written
        // straight from its own bytes, not copied.
        let mut out = BufWriter::with_capacity(WRITE_BUFFER, write);
        while let Some(response) = queued.recv().await {
            write_frame(&mut out, &response).await?;
            while let Ok(response) = queued.try_recv() {
                write_frame(&mut out, &response).await?;
            }
            out.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    // Requests are handled one at a time and answered in request order.
    // A connection that sends no request for `connections.max.idle.ms` is closed; the time
    // spent answering a request (a long poll, an acks=all wait) does not count.
    let mut answers: Answers<'_> = FuturesOrdered::new();
    let handled = async {
        loop {
            if unproven.is_some() && session.has_authenticated() {
                unproven = None;
                requests
                    .decoder_mut()
                    .set_max(broker.config.max_request_bytes, "socket.request.max.bytes");
            }
            let idle = Duration::from_millis(idle_ms);
            let owed = !answers.is_empty();
            let read = async {
                match unproven {
                    Some(_) => tokio::time::timeout_at(
                        authenticate_by.min(tokio::time::Instant::now() + idle),
                        requests.next(),
                    )
                    .await
                    .map_err(|_| {
                        if tokio::time::Instant::now() >= authenticate_by {
                            ConnectionError::AuthenticationTimeout
                        } else {
                            ConnectionError::Idle { idle_ms }
                        }
                    }),
                    // A connection owed answers is not idle: the client waits on us.
                    None if owed => Ok(requests.next().await),
                    None => tokio::time::timeout(idle, requests.next())
                        .await
                        .map_err(|_| ConnectionError::Idle { idle_ms }),
                }
            };
            // Answers that are ready go out while the next request is awaited.
            let next = tokio::select! {
                biased;
                Some(answer) = answers.next() => {
                    if responses.send(answer?).await.is_err() {
                        break; // the writer failed; its error is reported below
                    }
                    continue;
                }
                next = read, if answers.len() < ANSWERS_WAITING => next?,
            };
            let Some(frame) = next else {
                break;
            };
            let frame = frame.map_err(ConnectionError::Frame)?;
            if let SaslState::Handshaken { raw: true, .. } = session.state() {
                // Only PLAIN is accepted after a v0 handshake.
                // After SaslHandshake v0 the token comes bare; an empty frame says yes.
                raw_token(&frame, &broker, &session).await?;
                answers.push_back(Box::pin(std::future::ready(Ok(Bytes::new()))));
                continue;
            }
            // Waiting answers keep moving while this request is handled (a long poll, a
            // join), and go out as they complete.
            let handling = handle_frame(frame, &broker, &session);
            tokio::pin!(handling);
            let reply = loop {
                tokio::select! {
                    reply = &mut handling => break reply?,
                    Some(answer) = answers.next() => {
                        if responses.send(answer?).await.is_err() {
                            return Ok(());
                        }
                    }
                }
            };
            match reply {
                Reply::Response(bytes) => {
                    answers.push_back(Box::pin(std::future::ready(Ok(bytes))));
                }
                Reply::Later(waiting) => answers.push_back(waiting),
                Reply::None => {}
            }
            if session.state() == SaslState::Failed {
                // The refusal is sent; nothing more is read.
                return Err(ConnectionError::AuthenticationFailed);
            }
        }
        Ok(())
    }
    .await;
    // What was answered before the end, or before a bad frame, still reaches the client.
    while let Some(answer) = answers.next().await {
        let Ok(bytes) = answer else { break };
        if responses.send(bytes).await.is_err() {
            break;
        }
    }
    drop(responses);
    let written = match writer.await {
        Ok(result) => result.map_err(ConnectionError::Frame),
        Err(e) => Err(ConnectionError::Frame(std::io::Error::other(e))),
    };
    handled.and(written)
}

async fn handle_frame<'a>(
    frame: BytesMut,
    broker: &'a Broker,
    session: &'a Session,
) -> Result<Reply<'a>, ConnectionError> {
    if frame.len() < 8 {
        return Err(ConnectionError::ShortHeader { len: frame.len() });
    }
    let mut peek = &frame[..];
    let api_key = peek.get_i16();
    let version = peek.get_i16();
    admit(api_key, broker, session)?;
    let bytes: Bytes = frame.freeze();
    router::dispatch(broker, api_key, version, bytes, session).await
}

/// Authenticates with a bare PLAIN token (after SaslHandshake v0); a refusal closes the
/// connection, as Kafka does for this framing.
async fn raw_token(
    token: &[u8],
    broker: &Broker,
    session: &Session,
) -> Result<(), ConnectionError> {
    let authenticated = match crate::sasl::parse_plain(token) {
        Ok(credentials) => broker.authenticate(&credentials).await,
        Err(e) => Err(e),
    };
    match authenticated {
        Ok(who) => {
            session.set_state(SaslState::Authenticated(who));
            Ok(())
        }
        Err(e) => {
            tracing::info!(peer = %session.peer, reason = %e, "SASL authentication failed");
            session.set_state(SaslState::Failed);
            Err(ConnectionError::AuthenticationFailed)
        }
    }
}

/// Whether a request may be handled on this connection: on a SASL listener only ApiVersions
/// and the SASL APIs come before authentication, and a connection whose API key has left
/// force is closed at its next request.
fn admit(api_key: i16, broker: &Broker, session: &Session) -> Result<(), ConnectionError> {
    let listener = &session.listener;
    // Only SASL listeners, and SSL listeners whose clients present certificates (a session
    // that ends when the certificate expires), have a session to check: the others take
    // no lock here.
    let certificates = listener.protocol == crate::listeners::SecurityProtocol::Ssl
        && listener
            .tls
            .as_ref()
            .is_some_and(|tls| tls.client_auth().is_some());
    // A broker that authenticated on a listener without SASL is checked like any session:
    // its credential expires.
    if !listener.protocol.requires_sasl() && !certificates && !session.has_authenticated() {
        return Ok(());
    }
    let state = session.state();
    if !listener.protocol.requires_sasl() && !matches!(state, SaslState::Authenticated(_)) {
        return Ok(());
    }
    match state {
        SaslState::Authenticated(who) => {
            if who.still_valid(&broker.keys) {
                Ok(())
            } else if who.expires_at.is_some() {
                Err(ConnectionError::SessionExpired {
                    principal: who.principal.to_string(),
                })
            } else {
                Err(ConnectionError::KeyRevoked { key_id: who.key_id })
            }
        }
        _ if [
            ApiKey::ApiVersions,
            ApiKey::SaslHandshake,
            ApiKey::SaslAuthenticate,
        ]
        .iter()
        .any(|k| *k as i16 == api_key) =>
        {
            Ok(())
        }
        _ => Err(ConnectionError::Unauthenticated {
            api_key,
            listener: session.listener.name.clone(),
        }),
    }
}
