//! Calls to the control plane's replicas with failover: a call goes to the replica that
//! last answered; one that is unreachable or standing by (UNAVAILABLE) passes the call to
//! the next, so brokers and gateways ride through a controller failover.
//!
//! A replica answering UNAVAILABLE also has its connection replaced by a new one, made on
//! the next call: an address that names several replicas (a Kubernetes headless Service)
//! is resolved again then, and the next connection may reach the one holding the lease.
//!
//! `https://` addresses are reached in TLS, the replicas' certificates checked against the
//! authorities a [`ControllerTls`] names and the host the address gives.

// tonic's `Status` is the error type of every gRPC call; it is large by design.
#![allow(clippy::result_large_err)]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::controller as pb;
use crate::controller::controller_client::ControllerClient;

pub use crate::snapshot::Snapshots;

/// The largest message a controller sends or its clients accept. Metadata snapshots travel
/// in chunks of about [`crate::snapshot::CHUNK_BYTES`], so this bounds one chunk, not the
/// cluster's metadata.
pub const MAX_CONTROLLER_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// The largest request the controller accepts (requests name one topic or binding).
pub const MAX_CONTROLLER_REQUEST_BYTES: usize = 1024 * 1024;

/// A client of one control-plane replica, presenting the caller's credential.
pub type Client = ControllerClient<InterceptedService<Channel, Credential>>;

/// The credential a broker or gateway presents on every call to the controller (a bearer
/// token for its role); its `Debug` shows nothing of it.
#[derive(Clone, Default)]
pub struct Credential(Option<MetadataValue<Ascii>>);

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Credential")
            .field(&self.0.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Credential {
    /// A bearer token; `None` if it cannot travel as a header value.
    pub fn bearer(token: &str) -> Option<Self> {
        let value = format!("Bearer {}", token.trim()).parse().ok()?;
        Some(Self(Some(value)))
    }

    /// The bearer token, to present elsewhere (a broker to another broker).
    pub fn token(&self) -> Option<&str> {
        self.0.as_ref()?.to_str().ok()?.strip_prefix("Bearer ")
    }

    /// No credential (a controller that asks for one refuses every call).
    pub fn none() -> Self {
        Self(None)
    }
}

impl Interceptor for Credential {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// How `https://` control-plane addresses are reached: the authorities (PEM) their
/// certificates chain to.
#[derive(Debug, Clone)]
pub struct ControllerTls {
    authorities: Vec<u8>,
}

impl ControllerTls {
    /// Trusts the certificates in `pem`.
    pub fn new(pem: impl Into<Vec<u8>>) -> Self {
        Self {
            authorities: pem.into(),
        }
    }

    fn config(&self) -> ClientTlsConfig {
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.authorities))
    }
}

/// One control-plane address and its current (lazily connected) client.
#[derive(Debug)]
struct Replica {
    url: String,
    client: std::sync::RwLock<Client>,
}

/// Lazily connected channels to each control-plane replica.
#[derive(Debug, Clone)]
pub struct ControllerReplicas {
    replicas: Arc<[Replica]>,
    /// The credential every call presents.
    credential: Credential,
    tls: Option<ControllerTls>,
    preferred: Arc<AtomicUsize>,
}

/// Why the replicas could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ReplicasError {
    #[error("no control-plane address given")]
    NoAddress,
    #[error("control-plane address {url}: {reason}")]
    BadAddress { url: String, reason: String },
    #[error(
        "control-plane address {0} is https, and no authority to check its certificate \
         against was given (--control-plane-ca-file)"
    )]
    NoAuthority(String),
}

impl ControllerReplicas {
    /// The credential every call presents.
    pub fn credential(&self) -> &Credential {
        &self.credential
    }

    /// Channels to each replica in `urls`, every call carrying `credential`; nothing
    /// connects until the first call.
    pub fn connect_lazy(urls: &[String], credential: Credential) -> Result<Self, ReplicasError> {
        Self::connect_lazy_with(urls, credential, None)
    }

    /// [`ControllerReplicas::connect_lazy`], reaching `https://` addresses in TLS as `tls`
    /// says (an `https://` address without it is an error).
    pub fn connect_lazy_with(
        urls: &[String],
        credential: Credential,
        tls: Option<ControllerTls>,
    ) -> Result<Self, ReplicasError> {
        if urls.is_empty() {
            return Err(ReplicasError::NoAddress);
        }
        let mut replicas = Vec::with_capacity(urls.len());
        for url in urls {
            replicas.push(Replica {
                url: url.clone(),
                client: std::sync::RwLock::new(client(url, &credential, tls.as_ref())?),
            });
        }
        Ok(Self {
            credential,
            tls,
            replicas: replicas.into(),
            preferred: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Sends `request` with `call` to the preferred replica, then to the others while they
    /// answer UNAVAILABLE.
    pub async fn call<Req, T, F, Fut>(&self, request: Req, call: F) -> Result<T, tonic::Status>
    where
        Req: Clone,
        F: Fn(Client, Req) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let count = self.replicas.len();
        let first = self.preferred.load(Ordering::Relaxed) % count;
        let mut last = None;
        for step in 0..count {
            let index = (first + step) % count;
            let replica = &self.replicas[index];
            let current = replica
                .client
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            let url = &replica.url;
            match call(current, request.clone()).await {
                Ok(response) => {
                    self.preferred.store(index, Ordering::Relaxed);
                    return Ok(response.into_inner());
                }
                Err(status) if status.code() == tonic::Code::Unavailable => {
                    tracing::debug!(replica = %url, message = status.message(), "trying another control-plane replica");
                    // The next call connects afresh (resolving the address again).
                    if let Ok(fresh) = client(url, &self.credential, self.tls.as_ref()) {
                        *replica
                            .client
                            .write()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
                    }
                    last = Some(status);
                }
                Err(status) => return Err(status),
            }
        }
        Err(last.unwrap_or_else(|| tonic::Status::unavailable("no control-plane replica")))
    }

    /// The stream of metadata snapshots, from whichever replica answers.
    pub async fn watch(&self) -> Result<Snapshots, tonic::Status> {
        let chunks = self
            .call(pb::WatchMetadataRequest {}, |mut c, r| async move {
                c.watch_metadata(r).await
            })
            .await?;
        Ok(Snapshots::new(chunks))
    }
}

/// A lazily connecting client of the replica at `url`.
fn client(
    url: &str,
    credential: &Credential,
    tls: Option<&ControllerTls>,
) -> Result<Client, ReplicasError> {
    let bad = |e: tonic::transport::Error| ReplicasError::BadAddress {
        url: url.to_owned(),
        reason: e.to_string(),
    };
    let mut endpoint = Endpoint::from_shared(url.to_owned()).map_err(bad)?;
    if endpoint.uri().scheme_str() == Some("https") {
        let tls = tls.ok_or_else(|| ReplicasError::NoAuthority(url.to_owned()))?;
        endpoint = endpoint.tls_config(tls.config()).map_err(bad)?;
    }
    let channel = endpoint
        .connect_timeout(Duration::from_secs(2))
        .connect_lazy();
    Ok(
        ControllerClient::with_interceptor(channel, credential.clone())
            .max_decoding_message_size(MAX_CONTROLLER_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_CONTROLLER_REQUEST_BYTES),
    )
}
