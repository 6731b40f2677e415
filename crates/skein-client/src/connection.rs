//! [`Connection`]: one TCP connection to one broker, optionally in TLS
//! ([`ClientConfig::tls`]) and authenticated with SASL/PLAIN ([`ClientConfig::sasl_plain`]).
//!
//! Requests are written through a shared writer half and may be in flight together; a
//! reader task routes each response to its waiting caller by correlation id. The API
//! versions are negotiated once, with ApiVersions, when the connection opens.
//!
//! A broker answers the requests of one connection in order, so a long-polling request
//! (Fetch with `max_wait`, JoinGroup) delays the requests behind it: callers that long-poll
//! should use a connection of their own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

use crate::error::{BoxError, ClientError, Result};
use crate::versions::{client_range, NegotiatedVersions};
use crate::ClientConfig;

/// The reading half of a connection's stream, TCP or TLS.
type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// The writing half of a connection's stream, TCP or TLS.
type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

/// Responses waiting for their requests' callers.
#[derive(Debug, Default)]
struct Pending {
    waiting: HashMap<i32, oneshot::Sender<Bytes>>,
    closed: bool,
}

/// One TCP connection to one broker, TLS or not, with negotiated API versions.
pub struct Connection {
    addr: String,
    client_id: StrBytes,
    request_timeout: Duration,
    versions: OnceLock<NegotiatedVersions>,
    next_correlation_id: AtomicI32,
    writer: tokio::sync::Mutex<FramedWrite<WriteHalf, LengthDelimitedCodec>>,
    pending: Arc<Mutex<Pending>>,
    reader: JoinHandle<()>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.addr)
            .field("client_id", &self.client_id)
            .field("request_timeout", &self.request_timeout)
            .field("versions", &self.versions)
            .finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Removes a caller's entry when it stops waiting (answered, timed out or cancelled).
struct PendingGuard<'a> {
    pending: &'a Mutex<Pending>,
    correlation_id: i32,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.pending.lock().waiting.remove(&self.correlation_id);
    }
}

/// The error a broker answers an ApiVersions request of a version it does not know with.
const UNSUPPORTED_VERSION: i16 = ResponseError::UnsupportedVersion.code();

impl Connection {
    /// Connects to `addr` (`host:port`) and negotiates API versions.
    pub async fn connect(addr: &str, config: &ClientConfig) -> Result<Self> {
        let timeout = |operation: &str| ClientError::Timeout {
            operation: operation.to_owned(),
            addr: addr.to_owned(),
            after: config.connect_timeout,
        };
        let io = |source| ClientError::Io {
            addr: addr.to_owned(),
            source,
        };
        let stream = tokio::time::timeout(config.connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| timeout("connect"))?
            .map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let (read, write): (ReadHalf, WriteHalf) = match &config.tls {
            None => {
                let (read, write) = stream.into_split();
                (Box::new(read), Box::new(write))
            }
            Some(tls) => {
                let name =
                    crate::tls::server_name(addr).ok_or_else(|| ClientError::InvalidArgument {
                        reason: format!("{addr} names no host a certificate can be checked for"),
                    })?;
                let stream = tokio::time::timeout(
                    config.connect_timeout,
                    tls.connector().connect(name, stream),
                )
                .await
                .map_err(|_| timeout("TLS handshake"))?
                .map_err(io)?;
                let (read, write) = tokio::io::split(stream);
                (Box::new(read), Box::new(write))
            }
        };
        let codec = || {
            LengthDelimitedCodec::builder()
                .length_field_length(4)
                .max_frame_length(config.max_response_bytes)
                .new_codec()
        };
        let pending = Arc::new(Mutex::new(Pending::default()));
        let reader = tokio::spawn(read_responses(
            FramedRead::new(read, codec()),
            Arc::clone(&pending),
            addr.to_owned(),
        ));
        let connection = Self {
            addr: addr.to_owned(),
            client_id: StrBytes::from_string(config.client_id.clone()),
            request_timeout: config.request_timeout,
            versions: OnceLock::new(),
            next_correlation_id: AtomicI32::new(0),
            writer: tokio::sync::Mutex::new(FramedWrite::new(write, codec())),
            pending,
            reader,
        };
        let versions = tokio::time::timeout(config.connect_timeout, connection.api_versions())
            .await
            .map_err(|_| timeout("ApiVersions"))??;
        let _ = connection.versions.set(versions);
        if let Some(plain) = &config.sasl_plain {
            tokio::time::timeout(config.connect_timeout, connection.authenticate_plain(plain))
                .await
                .map_err(|_| timeout("SASL authentication"))??;
        }
        Ok(connection)
    }

    /// SASL/PLAIN (RFC 4616) in SaslHandshake and SaslAuthenticate (KIP-152): the broker
    /// answers nothing else until it succeeds, and closes the connection when it fails.
    async fn authenticate_plain(&self, plain: &crate::config::SaslPlain) -> Result<()> {
        let handshake = self
            .send(
                &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            )
            .await?;
        ClientError::check(
            ApiKey::SaslHandshake,
            self.addr.as_str(),
            handshake.error_code,
            None,
        )?;
        let token = format!(
            "{}\0{}\0{}",
            plain.authorization_id, plain.username, plain.password
        );
        let answer = self
            .send(&SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)))
            .await?;
        ClientError::check(
            ApiKey::SaslAuthenticate,
            self.addr.as_str(),
            answer.error_code,
            answer.error_message.as_ref().map(|m| m.as_str()),
        )
    }

    /// Asks the broker for its API versions, at the highest ApiVersions version both sides
    /// know. A broker that does not know the version asked answers UNSUPPORTED_VERSION in
    /// the v0 format, with its own range, and the client asks again within it.
    async fn api_versions(&self) -> Result<NegotiatedVersions> {
        let (_, ours) = client_range(ApiKey::ApiVersions).unwrap_or((0, 0));
        let mut version = ours;
        for _ in 0..2 {
            let request = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("skein-client"))
                .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
            let mut body = self
                .round_trip(&request, version, self.request_timeout)
                .await?;
            let error_code = body
                .get(..2)
                .map_or(0, |b| i16::from_be_bytes([b[0], b[1]]));
            let decode_at = if error_code == UNSUPPORTED_VERSION {
                0
            } else {
                version
            };
            let response = ApiVersionsResponse::decode(&mut body, decode_at)
                .map_err(|e| self.decode_error(ApiKey::ApiVersions, decode_at, e))?;
            if error_code == UNSUPPORTED_VERSION {
                let theirs = response
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                    .map_or(0, |k| k.max_version);
                version = ours.min(theirs);
                continue;
            }
            ClientError::check(ApiKey::ApiVersions, self.addr.as_str(), error_code, None)?;
            return Ok(NegotiatedVersions::new(
                response
                    .api_keys
                    .iter()
                    .map(|k| (k.api_key, k.min_version, k.max_version)),
            ));
        }
        Err(ClientError::UnsupportedVersion {
            api: ApiKey::ApiVersions,
            addr: self.addr.clone(),
            broker: None,
            client_min: 0,
            client_max: ours,
        })
    }

    /// The broker's `host:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether the connection is closed; a closed connection fails every request.
    pub fn is_closed(&self) -> bool {
        self.pending.lock().closed
    }

    /// The version this connection uses for an API: the highest that the broker and this
    /// client both implement.
    pub fn version(&self, api: ApiKey) -> Result<i16> {
        let empty = NegotiatedVersions::default();
        let versions = self.versions.get().unwrap_or(&empty);
        versions
            .pick(api)
            .map_err(|e| ClientError::UnsupportedVersion {
                api,
                addr: self.addr.clone(),
                broker: e.broker,
                client_min: e.client.0,
                client_max: e.client.1,
            })
    }

    /// Sends a request at the negotiated version and waits for its response, up to the
    /// configured request timeout.
    ///
    /// Fields that the negotiated version lacks must keep their defaults, or encoding
    /// fails; [`Connection::version`] tells which version will be used.
    pub async fn send<R: Request>(&self, request: &R) -> Result<R::Response> {
        self.send_with_timeout(request, self.request_timeout).await
    }

    /// [`Connection::send`] with its own timeout, for requests the broker may hold (a
    /// fetch waiting for data, a join waiting for the group).
    pub async fn send_with_timeout<R: Request>(
        &self,
        request: &R,
        timeout: Duration,
    ) -> Result<R::Response> {
        let api = api_key::<R>()?;
        let version = self.version(api)?;
        let mut body = self.round_trip(request, version, timeout).await?;
        R::Response::decode(&mut body, version).map_err(|e| self.decode_error(api, version, e))
    }

    /// Sends a request the broker does not answer (a produce with `acks=0`).
    pub async fn send_without_response<R: Request>(&self, request: &R) -> Result<()> {
        let api = api_key::<R>()?;
        let version = self.version(api)?;
        let (_, frame) = self.encode(request, api, version)?;
        self.write(frame).await
    }

    fn encode<R: Request>(&self, request: &R, api: ApiKey, version: i16) -> Result<(i32, Bytes)> {
        let correlation_id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut frame = BytesMut::new();
        let encode_error = |source: BoxError| ClientError::Encode {
            api,
            version,
            source,
        };
        header
            .encode(&mut frame, api.request_header_version(version))
            .map_err(|e| encode_error(e.into()))?;
        request
            .encode(&mut frame, version)
            .map_err(|e| encode_error(e.into()))?;
        Ok((correlation_id, frame.freeze()))
    }

    async fn write(&self, frame: Bytes) -> Result<()> {
        let mut writer = self.writer.lock().await;
        writer.send(frame).await.map_err(|source| {
            self.pending.lock().closed = true;
            ClientError::Io {
                addr: self.addr.clone(),
                source,
            }
        })
    }

    /// Writes a request and returns the response body (after its header).
    async fn round_trip<R: Request>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<Bytes> {
        let api = api_key::<R>()?;
        let (correlation_id, frame) = self.encode(request, api, version)?;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock();
            if pending.closed {
                return Err(self.closed());
            }
            pending.waiting.insert(correlation_id, tx);
        }
        let _guard = PendingGuard {
            pending: &self.pending,
            correlation_id,
        };
        self.write(frame).await?;
        let mut frame = tokio::time::timeout(timeout, rx)
            .await
            .map_err(|_| ClientError::Timeout {
                operation: format!("{api:?}"),
                addr: self.addr.clone(),
                after: timeout,
            })?
            .map_err(|_| self.closed())?;
        let header = ResponseHeader::decode(&mut frame, api.response_header_version(version))
            .map_err(|e| self.decode_error(api, version, e))?;
        if header.correlation_id != correlation_id {
            return Err(ClientError::UnexpectedCorrelationId {
                addr: self.addr.clone(),
                correlation_id: header.correlation_id,
            });
        }
        Ok(frame)
    }

    fn closed(&self) -> ClientError {
        ClientError::ConnectionClosed {
            addr: self.addr.clone(),
        }
    }

    fn decode_error(&self, api: ApiKey, version: i16, source: impl Into<BoxError>) -> ClientError {
        ClientError::Decode {
            api,
            version,
            addr: self.addr.clone(),
            source: source.into(),
        }
    }
}

fn api_key<R: Request>() -> Result<ApiKey> {
    ApiKey::try_from(R::KEY).map_err(|()| ClientError::InvalidArgument {
        reason: format!("unknown api key {}", R::KEY),
    })
}

/// Routes responses to their callers until the connection closes, then fails every caller
/// still waiting.
async fn read_responses(
    mut frames: FramedRead<ReadHalf, LengthDelimitedCodec>,
    pending: Arc<Mutex<Pending>>,
    addr: String,
) {
    loop {
        match frames.next().await {
            Some(Ok(frame)) => {
                if frame.len() < 4 {
                    tracing::warn!(broker = %addr, len = frame.len(), "response shorter than its header");
                    break;
                }
                let correlation_id = (&frame[..4]).get_i32();
                let waiting = pending.lock().waiting.remove(&correlation_id);
                match waiting {
                    Some(tx) => {
                        let _ = tx.send(frame.freeze());
                    }
                    // The caller stopped waiting (timed out or was cancelled).
                    None => tracing::debug!(
                        broker = %addr,
                        correlation_id,
                        "dropping response nobody waits for"
                    ),
                }
            }
            Some(Err(error)) => {
                tracing::warn!(broker = %addr, %error, "connection failed");
                break;
            }
            None => {
                tracing::debug!(broker = %addr, "connection closed by broker");
                break;
            }
        }
    }
    let mut pending = pending.lock();
    pending.closed = true;
    pending.waiting.clear();
}
