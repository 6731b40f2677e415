//! TLS on the gRPC services: a control plane serving its controller in TLS, a broker and a
//! gateway reaching it at an `https://` address with the authority of
//! `--control-plane-ca-file`, and the gateway's own gRPC in TLS, which a client trusting
//! the authority calls while a plaintext client and one trusting another authority are
//! refused.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::time::Duration;

use common::processes::{controller_token_file, field, Process, SKEIN};
use common::tls::certificates;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// The health service's answer for the gateway over `channel`.
async fn health(channel: Channel) -> Result<i32, tonic::Status> {
    let answer = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: "skein.v1.Gateway".to_owned(),
        })
        .await?;
    Ok(answer.into_inner().status)
}

/// A channel to `address` in TLS, trusting the authority in `ca`.
async fn tls_channel(address: &str, ca: &std::path::Path) -> Result<Channel, String> {
    let pem = std::fs::read(ca).unwrap();
    tonic::transport::Endpoint::from_shared(format!("https://{address}"))
        .unwrap()
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("{e:?}"))
}

#[test]
fn brokers_and_gateways_reach_the_controller_in_tls_and_the_gateway_serves_grpc_in_tls() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path(), "grpc");
    certificates(dir.path(), "other");
    let (ca, cert, key) = (
        dir.path().join("grpc-ca.pem"),
        dir.path().join("grpc.pem"),
        dir.path().join("grpc.key"),
    );
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("grpc_tls").unwrap();
    let control_plane = Process::start(
        Command::new(SKEIN)
            .args(["control-plane", "--migrate", "--database-url", &url])
            .args(["--admin-listen", "127.0.0.1:0"])
            .args(["--controller-listen", "127.0.0.1:0"])
            .args(["--bootstrap-token", common::processes::TOKEN])
            .arg("--controller-secret-file")
            .arg(common::processes::controller_secret_file())
            .arg("--grpc-tls-cert-file")
            .arg(&cert)
            .arg("--grpc-tls-key-file")
            .arg(&key)
            .env_remove("SKEIN_DATABASE_URL"),
    );
    let controller = format!(
        "https://{}",
        field(&control_plane.first_line, "controller on https://")
    );
    let admin = field(&control_plane.first_line, "admin API on http://");
    let (status, body) = common::http(
        &admin,
        "POST",
        "/v1/tenants",
        Some(common::processes::TOKEN),
        r#"{"name":"acme"}"#,
    );
    assert_eq!(status, 201, "{body}");

    // Without the authority, an https address is refused at once, naming the flag.
    let data = tempfile::tempdir().unwrap();
    let refused = Command::new(SKEIN)
        .args(["broker", "--control-plane", &controller, "--tenant", "acme"])
        .env(
            "SKEIN_CONTROLLER_TOKEN_FILE",
            controller_token_file("broker", &["acme"]),
        )
        .args(["--kafka-listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(data.path())
        .env_remove("SKEIN_CONTROL_PLANE_CA_FILE")
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("--control-plane-ca-file"), "{said}");

    // With it, the broker registers (it says where it serves only once it has) and serves.
    let broker = Process::start(
        Command::new(SKEIN)
            .args(["broker", "--control-plane", &controller, "--tenant", "acme"])
            .env(
                "SKEIN_CONTROLLER_TOKEN_FILE",
                controller_token_file("broker", &["acme"]),
            )
            .env("SKEIN_CONTROL_PLANE_CA_FILE", &ca)
            .env("SKEIN_BROKER_NODE_ID", "0")
            .args([
                "--kafka-listen",
                "127.0.0.1:0",
                "--heartbeat-interval-secs",
                "1",
            ])
            .arg("--data-dir")
            .arg(data.path()),
    );
    let bootstrap = field(&broker.first_line, " on ");
    // CreateTopics goes to the controller over TLS.
    let python = common::processes::python();
    common::cluster::create_topic(&python, &bootstrap, "secured", 1, 1, &[]);
    let produced = Command::new("kcat")
        .args(["-b", &bootstrap, "-t", "secured", "-P", "-X"])
        .arg("message.timeout.ms=20000")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut kcat| {
            use std::io::Write;
            kcat.stdin.take().unwrap().write_all(b"over-tls\n")?;
            kcat.wait()
        })
        .unwrap();
    assert!(produced.success());

    // The gateway follows the controller in TLS and serves its own gRPC in TLS.
    let secret = dir.path().join("hs256");
    std::fs::write(&secret, "a-development-secret-of-enough-length").unwrap();
    let gateway = Process::start(
        Command::new(SKEIN)
            .args(["gateway", "--control-plane", &controller])
            .arg("--controller-token-file")
            .arg(controller_token_file("gateway", &[]))
            .arg("--control-plane-ca-file")
            .arg(&ca)
            .args(["--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"])
            .arg("--jwt-hs256-secret-file")
            .arg(&secret)
            .arg("--grpc-tls-cert-file")
            .arg(&cert)
            .arg("--grpc-tls-key-file")
            .arg(&key),
    );
    let grpc = field(&gateway.first_line, "gRPC on https://");
    let rest = field(&gateway.first_line, "REST on http://");
    // It answers 503 until its first metadata, which comes over the controller's TLS.
    common::processes::wait_for(|| {
        let (status, _) = common::http(&rest, "GET", "/v1/topics", None, "");
        (status == 401).then_some(())
    });

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let channel = tls_channel(&grpc, &ca).await.unwrap();
        assert_eq!(
            health(channel).await.unwrap(),
            ServingStatus::Serving as i32
        );
        // A client trusting another authority fails the handshake.
        let other = dir.path().join("other-ca.pem");
        let distrusted = match tls_channel(&grpc, &other).await {
            Err(e) => e,
            Ok(channel) => format!("{:?}", health(channel).await.unwrap_err()),
        };
        assert!(
            distrusted.to_lowercase().contains("certificate"),
            "{distrusted}"
        );
        // A plaintext client gets no gRPC answer from a TLS listener.
        let plain = match Channel::from_shared(format!("http://{grpc}"))
            .unwrap()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(5))
            .connect()
            .await
        {
            Err(e) => Err(format!("{e:?}")),
            Ok(channel) => health(channel).await.map_err(|e| format!("{e:?}")),
        };
        assert!(plain.is_err(), "{plain:?}");
    });
    drop((gateway, broker, control_plane));
}
