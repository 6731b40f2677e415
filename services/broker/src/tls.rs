//! TLS on the Kafka listeners (SSL and SASL_SSL): the certificate chain and private key come
//! from PEM files and are read again when either file changes, so a renewed certificate
//! (cert-manager rotating a Secret) applies to new connections without a restart. A renewal
//! that does not load is logged and the last good certificate stays in use. With client
//! authentication (Kafka's `ssl.client.auth`), clients present certificates signed by an
//! authority of the trust store, and an SSL listener takes the principal their subject maps
//! to (`ssl_principal.rs`). The gRPC services take the same files ([`TlsFiles::for_http2`]),
//! offering HTTP/2 by ALPN.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// How often the files' modification times are looked at, at most.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// How long a client has to finish the TLS handshake.
pub const HANDSHAKE_WITHIN: Duration = Duration::from_secs(10);

/// Why the certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Pem {
        path: PathBuf,
        source: rustls_pki_types::pem::Error,
    },
    #[error("{0}: no certificate in the file")]
    NoCertificate(PathBuf),
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("the trust store does not make a client certificate verifier: {0}")]
    Verifier(String),
}

/// Whether and how clients present certificates (Kafka's `ssl.client.auth`).
#[derive(Debug, Clone)]
pub struct ClientAuth {
    /// PEM file with the authorities client certificates must be signed by.
    pub truststore: PathBuf,
    /// `required`: a client without a certificate fails the handshake; otherwise
    /// (`requested`) it is served as on a listener without client authentication.
    pub required: bool,
    /// `ssl.principal.mapping.rules`.
    pub mapper: crate::ssl_principal::PrincipalMapper,
}

/// The modification times of the certificate, the key and the trust store, when they could
/// be read.
type Stamps = [Option<SystemTime>; 3];

/// A listener's certificate and key, and the TLS configuration made from them.
#[derive(Debug)]
pub struct TlsFiles {
    certificate: PathBuf,
    key: PathBuf,
    client_auth: Option<ClientAuth>,
    /// The protocols offered by ALPN (none on a Kafka listener).
    alpn: Vec<Vec<u8>>,
    loaded: Mutex<Loaded>,
}

struct Loaded {
    stamps: Stamps,
    checked: Instant,
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("stamps", &self.stamps)
            .finish_non_exhaustive()
    }
}

impl TlsFiles {
    /// Reads the certificate chain and key now; an error if they do not load.
    pub fn open(
        certificate: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Result<Self, TlsError> {
        Self::open_with(certificate, key, None)
    }

    /// Like [`TlsFiles::open`], with clients' certificates checked as `client_auth` says.
    pub fn open_with(
        certificate: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
        client_auth: Option<ClientAuth>,
    ) -> Result<Self, TlsError> {
        Self::open_offering(certificate.into(), key.into(), client_auth, Vec::new())
    }

    /// The certificate and key of a gRPC service: like [`TlsFiles::open`], offering HTTP/2
    /// (`h2`) by ALPN, as gRPC clients require.
    pub fn for_http2(
        certificate: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Result<Self, TlsError> {
        Self::open_offering(certificate.into(), key.into(), None, vec![b"h2".to_vec()])
    }

    fn open_offering(
        certificate: PathBuf,
        key: PathBuf,
        client_auth: Option<ClientAuth>,
        alpn: Vec<Vec<u8>>,
    ) -> Result<Self, TlsError> {
        let stamps = stamps(&certificate, &key, client_auth.as_ref());
        let acceptor = TlsAcceptor::from(Arc::new(load(
            &certificate,
            &key,
            client_auth.as_ref(),
            &alpn,
        )?));
        Ok(Self {
            certificate,
            key,
            client_auth,
            alpn,
            loaded: Mutex::new(Loaded {
                stamps,
                checked: Instant::now(),
                acceptor,
            }),
        })
    }

    /// The acceptor for a new connection, from the files as they are now.
    pub fn acceptor(&self) -> TlsAcceptor {
        let mut loaded = self.loaded.lock();
        if loaded.checked.elapsed() >= CHECK_EVERY {
            loaded.checked = Instant::now();
            let now = stamps(&self.certificate, &self.key, self.client_auth.as_ref());
            if now != loaded.stamps {
                loaded.stamps = now;
                match load(
                    &self.certificate,
                    &self.key,
                    self.client_auth.as_ref(),
                    &self.alpn,
                ) {
                    Ok(config) => {
                        tracing::info!(certificate = %self.certificate.display(),
                            "loaded the renewed TLS certificate");
                        loaded.acceptor = TlsAcceptor::from(Arc::new(config));
                    }
                    Err(e) => tracing::warn!(error = %e,
                        "the changed TLS certificate does not load; keeping the last good one"),
                }
            }
        }
        loaded.acceptor.clone()
    }

    /// How clients' certificates are checked, if they are.
    pub(crate) fn client_auth(&self) -> Option<&ClientAuth> {
        self.client_auth.as_ref()
    }
}

fn stamps(certificate: &Path, key: &Path, client_auth: Option<&ClientAuth>) -> Stamps {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    [
        modified(certificate),
        modified(key),
        client_auth.and_then(|auth| modified(&auth.truststore)),
    ]
}

/// A PEM error about `path`.
fn pem(path: &Path) -> impl Fn(rustls_pki_types::pem::Error) -> TlsError + '_ {
    move |source| TlsError::Pem {
        path: path.to_owned(),
        source,
    }
}

fn load(
    certificate: &Path,
    key: &Path,
    client_auth: Option<&ClientAuth>,
    alpn: &[Vec<u8>],
) -> Result<ServerConfig, TlsError> {
    let chain = CertificateDer::pem_file_iter(certificate)
        .map_err(pem(certificate))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem(certificate))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(certificate.to_owned()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(pem(key))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?;
    let builder = match client_auth {
        None => builder.with_no_client_auth(),
        Some(auth) => {
            let mut roots = rustls::RootCertStore::empty();
            for authority in
                CertificateDer::pem_file_iter(&auth.truststore).map_err(pem(&auth.truststore))?
            {
                roots.add(authority.map_err(pem(&auth.truststore))?)?;
            }
            if roots.is_empty() {
                return Err(TlsError::NoCertificate(auth.truststore.clone()));
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            );
            let verifier = if auth.required {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| TlsError::Verifier(e.to_string()))?,
            )
        }
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = alpn.to_vec();
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_that_does_not_load_is_refused_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (certificate, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let missing = TlsFiles::open(&certificate, &key);
        assert!(
            matches!(&missing, Err(TlsError::Pem { path, .. }) if *path == certificate),
            "{missing:?}"
        );
        std::fs::write(&certificate, "not a certificate\n").unwrap_or_else(|e| panic!("{e}"));
        let empty = TlsFiles::open(&certificate, &key);
        assert!(
            matches!(&empty, Err(TlsError::NoCertificate(path)) if *path == certificate),
            "{empty:?}"
        );
    }
}
