//! TLS on the gRPC services (the controller's and the gateway's) and to the controller.
//!
//! A service given `--grpc-tls-cert-file` and `--grpc-tls-key-file` serves only TLS, with
//! the certificate read again when its files change (`skein_broker::tls::TlsFiles`, offering
//! HTTP/2 by ALPN). Handshakes run beside the accept loop, each within
//! [`HANDSHAKE_WITHIN`] and at most [`PENDING_HANDSHAKES`] at once: a client that connects
//! and says nothing holds up no one, and a flood of them is turned away at the door.
//!
//! Brokers and gateways reach `https://` control-plane addresses with the authorities of
//! `--control-plane-ca-file`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use skein_broker::tls::{TlsFiles, HANDSHAKE_WITHIN};
use skein_proto::replicas::ControllerTls;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;

/// TLS handshakes in progress on one listener, at most; connections past it are closed.
pub(crate) const PENDING_HANDSHAKES: usize = 256;

/// A gRPC service's certificate.
#[derive(Debug, Args)]
pub(crate) struct GrpcTlsArgs {
    /// PEM certificate chain for the gRPC listener; with it the listener serves TLS only.
    /// Read again when the file changes
    #[arg(long, env = "SKEIN_GRPC_TLS_CERT_FILE", requires = "grpc_tls_key_file")]
    grpc_tls_cert_file: Option<PathBuf>,
    /// PEM private key of --grpc-tls-cert-file
    #[arg(long, env = "SKEIN_GRPC_TLS_KEY_FILE", requires = "grpc_tls_cert_file")]
    grpc_tls_key_file: Option<PathBuf>,
}

impl GrpcTlsArgs {
    /// The certificate files, loaded now, when TLS was asked for.
    pub(crate) fn open(&self) -> anyhow::Result<Option<Arc<TlsFiles>>> {
        let (Some(certificate), Some(key)) = (&self.grpc_tls_cert_file, &self.grpc_tls_key_file)
        else {
            return Ok(None);
        };
        let files = TlsFiles::for_http2(certificate, key)
            .context("the gRPC listener's certificate does not load")?;
        Ok(Some(Arc::new(files)))
    }
}

/// How to reach `https://` control-plane addresses: the authorities in `ca_file`.
pub(crate) fn controller_tls(ca_file: Option<&Path>) -> anyhow::Result<Option<ControllerTls>> {
    let Some(file) = ca_file else {
        return Ok(None);
    };
    let pem = std::fs::read(file).with_context(|| format!("failed to read {}", file.display()))?;
    // Every certificate is parsed as a trust anchor now, so that a damaged file is refused
    // at start with its name rather than at the first connection.
    let mut authorities = tokio_rustls::rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        let certificate = certificate
            .with_context(|| format!("{} holds a PEM block that does not parse", file.display()))?;
        authorities.add(certificate).with_context(|| {
            format!(
                "{} holds a certificate that is not a usable authority",
                file.display()
            )
        })?;
    }
    anyhow::ensure!(
        !authorities.is_empty(),
        "{} holds no PEM certificate",
        file.display()
    );
    Ok(Some(ControllerTls::new(pem)))
}

/// The connections of `listener` once their TLS handshakes succeed; a handshake that fails
/// or takes too long is logged and the connection dropped. Accepting stops when the stream
/// is dropped.
pub(crate) fn incoming(
    listener: TcpListener,
    tls: Arc<TlsFiles>,
) -> ReceiverStream<Result<TlsStream<TcpStream>, std::io::Error>> {
    let (ready, receiver) = mpsc::channel(64);
    let pending = Arc::new(Semaphore::new(PENDING_HANDSHAKES));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = ready.closed() => return,
                accepted = listener.accept() => accepted,
            };
            let (tcp, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, say: wait rather than spin.
                    tracing::warn!(error = %e, "the gRPC listener could not accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(permit) = Arc::clone(&pending).try_acquire_owned() else {
                tracing::warn!(%peer, "too many TLS handshakes in progress; closing a connection");
                continue;
            };
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "could not set TCP_NODELAY");
            }
            let acceptor = tls.acceptor();
            let ready = ready.clone();
            tokio::spawn(async move {
                let _permit = permit;
                match tokio::time::timeout(HANDSHAKE_WITHIN, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let _ = ready.send(Ok(stream)).await;
                    }
                    Ok(Err(e)) => {
                        tracing::info!(%peer, error = %e, "a gRPC client's TLS handshake failed");
                    }
                    Err(_) => {
                        tracing::info!(%peer, "a gRPC client did not finish its TLS handshake in time");
                    }
                }
            });
        }
    });
    ReceiverStream::new(receiver)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_plane_authority_file_is_parsed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ca.pem");
        assert!(controller_tls(None).unwrap().is_none());
        std::fs::write(&file, "no certificate here\n").unwrap();
        let empty = controller_tls(Some(&file)).unwrap_err().to_string();
        assert!(empty.contains("holds no PEM certificate"), "{empty}");
        // A well-formed PEM block whose contents are not a certificate.
        std::fs::write(
            &file,
            "-----BEGIN CERTIFICATE-----\nAAECAwQFBgcICQ==\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let damaged = format!("{:#}", controller_tls(Some(&file)).unwrap_err());
        assert!(damaged.contains("not a usable authority"), "{damaged}");
        assert!(damaged.contains("ca.pem"), "{damaged}");
    }
}
