//! [`ClientTls`]: TLS for every connection of a client (Kafka's `security.protocol=SSL` and
//! `SASL_SSL`), with rustls.
//!
//! The broker's certificate is checked against the authorities given (a PEM file, as
//! librdkafka's `ssl.ca.location`) and against the host the client dialled: the name in the
//! broker's `host:port` as the cluster advertises it, a DNS name or an IP address.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// Why a TLS configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    #[error("{path}: {source}")]
    Pem {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{0}: no certificate authority in the file")]
    NoAuthority(PathBuf),
    #[error("{path}: {source}")]
    Authority {
        path: PathBuf,
        source: rustls::Error,
    },
    #[error("no TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// TLS settings shared by a client's connections: cheap to clone.
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("alpn", &self.config.alpn_protocols)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Trusts the certificate authorities in the PEM file at `path` (`ssl.ca.location`).
    pub fn with_ca_file(path: impl AsRef<Path>) -> Result<Self, TlsConfigError> {
        let path = path.as_ref();
        let pem = |source| TlsConfigError::Pem {
            path: path.to_owned(),
            source,
        };
        let mut roots = rustls::RootCertStore::empty();
        for authority in CertificateDer::pem_file_iter(path).map_err(pem)? {
            roots
                .add(authority.map_err(pem)?)
                .map_err(|source| TlsConfigError::Authority {
                    path: path.to_owned(),
                    source,
                })?;
        }
        if roots.is_empty() {
            return Err(TlsConfigError::NoAuthority(path.to_owned()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self::new(Arc::new(config)))
    }

    /// Uses a rustls configuration made elsewhere (client certificates, other roots).
    pub fn new(config: Arc<rustls::ClientConfig>) -> Self {
        Self { config }
    }

    pub(crate) fn connector(&self) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(Arc::clone(&self.config))
    }
}

/// The name a broker's certificate must carry: the host of `addr` (`host:port`, an IPv6
/// host in brackets).
pub(crate) fn server_name(addr: &str) -> Option<ServerName<'static>> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(host.to_owned()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_name_is_the_dialled_host() {
        assert_eq!(
            server_name("broker-0.skein:9093"),
            ServerName::try_from("broker-0.skein").ok()
        );
        assert!(matches!(
            server_name("127.0.0.1:9093"),
            Some(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("[::1]:9093"),
            Some(ServerName::IpAddress(_))
        ));
        assert_eq!(server_name("not a host:1"), None);
    }

    #[test]
    fn a_file_without_an_authority_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        assert!(matches!(
            ClientTls::with_ca_file(&empty),
            Err(TlsConfigError::NoAuthority(_))
        ));
        assert!(matches!(
            ClientTls::with_ca_file(dir.path().join("missing.pem")),
            Err(TlsConfigError::Pem { .. })
        ));
    }
}
