//! `skein gateway`: the REST and gRPC gateway in front of a cluster's brokers, following a control
//! plane's metadata stream. It keeps no state of its own, so any number may run side by
//! side behind a plain load balancer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use skein_gateway::client_state::ClientStateKeys;
use skein_gateway::cluster::ClusterView;
use skein_gateway::{AuthConfig, Gateway, HttpOptions};
use skein_proto::replicas::ControllerReplicas;
use skein_token::{Verifier, VerifyingKey};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

#[derive(Debug, Args)]
pub(crate) struct GatewayArgs {
    /// gRPC URLs of the control-plane replicas (http://, or https:// in TLS), comma-separated
    #[arg(
        long,
        env = "SKEIN_CONTROL_PLANE",
        value_delimiter = ',',
        required = true
    )]
    control_plane: Vec<String>,
    /// PEM file with the authorities the control plane's certificates chain to (for
    /// https:// addresses)
    #[arg(long, env = "SKEIN_CONTROL_PLANE_CA_FILE")]
    control_plane_ca_file: Option<PathBuf>,
    /// Address the REST API binds
    #[arg(long, env = "SKEIN_GATEWAY_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Address the gRPC API binds
    #[arg(
        long,
        env = "SKEIN_GATEWAY_GRPC_LISTEN",
        default_value = "127.0.0.1:9090"
    )]
    grpc_listen: SocketAddr,
    #[command(flatten)]
    auth: GatewayAuthArgs,
    /// Origins browsers may call from (`*` for any), comma-separated; none: no CORS
    #[arg(long, env = "SKEIN_CORS_ORIGINS", value_delimiter = ',')]
    cors_origin: Vec<String>,
    /// The largest request body, in bytes
    #[arg(long, env = "SKEIN_GATEWAY_MAX_BODY_BYTES", default_value_t = 8 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Bytes of messages one gRPC ProduceStream may read ahead of their reports
    #[arg(
        long,
        env = "SKEIN_GATEWAY_STREAM_READ_AHEAD_BYTES",
        default_value_t = 16 * 1024 * 1024
    )]
    stream_read_ahead_bytes: u32,
    /// Bytes of messages every gRPC ProduceStream together may read ahead of their reports
    #[arg(
        long,
        env = "SKEIN_GATEWAY_READ_AHEAD_BYTES",
        default_value_t = 256 * 1024 * 1024
    )]
    read_ahead_bytes: u32,
    /// Streams (SSE tails, gRPC Consume) one tenant may hold open on this replica; each
    /// long-polls the brokers over connections of its own
    #[arg(
        long,
        env = "SKEIN_GATEWAY_MAX_STREAMS_PER_TENANT",
        default_value_t = 100
    )]
    max_streams_per_tenant: usize,
    /// Streams every tenant together may hold open on this replica
    #[arg(long, env = "SKEIN_GATEWAY_MAX_STREAMS", default_value_t = 1000)]
    max_streams: usize,
    /// On SIGTERM, how long open requests may take to finish before their connections are
    /// closed (streams end at once, telling their clients to resume elsewhere)
    #[arg(long, env = "SKEIN_GATEWAY_SHUTDOWN_GRACE_SECS", default_value_t = 20)]
    shutdown_grace_secs: u64,
    /// Files holding the keys (32 bytes or more each) that seal the state clients hold —
    /// group cursors, resume tokens, event ids — comma-separated; the first seals, all
    /// open, so a new key goes first while the old one stays for the rotation overlap.
    /// Every replica needs the same keys; without any, a random key of this process alone
    /// is used
    #[arg(
        long = "client-state-key-file",
        env = "SKEIN_GATEWAY_CLIENT_STATE_KEY_FILES",
        value_delimiter = ','
    )]
    client_state_key_files: Vec<PathBuf>,
    /// A file holding this gateway's controller credential (`skein controller-token --role
    /// gateway`)
    #[arg(long, env = "SKEIN_CONTROLLER_TOKEN_FILE")]
    controller_token_file: Option<PathBuf>,
    /// PEM file with the authorities the brokers' certificates chain to: with it the
    /// gateway reaches the brokers' registered listeners in TLS (for brokers whose
    /// inter-broker listener is SASL_SSL), checking each certificate against the host it
    /// dials
    #[arg(long, env = "SKEIN_GATEWAY_KAFKA_SSL_CA_LOCATION")]
    kafka_ssl_ca_location: Option<PathBuf>,
    #[command(flatten)]
    grpc_tls: crate::grpc_tls::GrpcTlsArgs,
    #[command(flatten)]
    ops: crate::ops::OpsArgs,
}

/// Concurrent gRPC streams one client connection may hold.
const MAX_STREAMS_PER_CONNECTION: u32 = 100;

/// The client-state keys from their files, or a random key of this process alone.
fn client_state_keys(files: &[PathBuf]) -> anyhow::Result<ClientStateKeys> {
    if files.is_empty() {
        tracing::warn!(
            "no --client-state-key-file: cursors, resume tokens and event ids this gateway \
             issues are accepted by this process only"
        );
        return Ok(ClientStateKeys::random());
    }
    let mut keys = Vec::with_capacity(files.len());
    for file in files {
        let key =
            std::fs::read(file).with_context(|| format!("failed to read {}", file.display()))?;
        keys.push(key.trim_ascii().to_vec());
    }
    ClientStateKeys::new(keys).context("invalid --client-state-key-file")
}

/// How the gateway checks tokens.
#[derive(Debug, Args)]
pub(crate) struct GatewayAuthArgs {
    /// An issuer's public key: ALG:PATH or ALG:PATH:KID, ALG one of RS256, ES256, EdDSA
    /// (repeatable)
    #[arg(
        long = "jwt-public-key",
        env = "SKEIN_GATEWAY_JWT_PUBLIC_KEYS",
        value_delimiter = ','
    )]
    jwt_public_keys: Vec<String>,
    /// Where the issuer publishes its keys (JWKS); fetched at start, every
    /// --jwks-refresh-secs, and on an unknown `kid` (at most every 10 s)
    #[arg(long, env = "SKEIN_GATEWAY_JWKS_URL")]
    jwks_url: Option<String>,
    /// How often the JWKS is fetched again, in seconds; a key removed from it stops being
    /// trusted after the next fetch
    #[arg(
        long,
        env = "SKEIN_GATEWAY_JWKS_REFRESH_SECS",
        default_value_t = skein_gateway::auth::JWKS_REFRESH_EVERY.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    jwks_refresh_secs: u64,
    /// A file holding an HS256 secret (development only: whoever holds it mints tokens)
    #[arg(long, env = "SKEIN_GATEWAY_JWT_HS256_SECRET_FILE")]
    jwt_hs256_secret_file: Option<PathBuf>,
    /// The `iss` tokens must carry
    #[arg(long, env = "SKEIN_GATEWAY_JWT_ISSUER")]
    jwt_issuer: Option<String>,
    /// The `aud` tokens must carry
    #[arg(long, env = "SKEIN_GATEWAY_JWT_AUDIENCE")]
    jwt_audience: Option<String>,
    /// The claim naming the caller's tenant
    #[arg(long, env = "SKEIN_GATEWAY_TENANT_CLAIM", default_value = "tenant")]
    tenant_claim: String,
}

impl GatewayAuthArgs {
    pub(crate) fn config(&self) -> anyhow::Result<AuthConfig> {
        let keys = verifying_keys(&self.jwt_public_keys, self.jwt_hs256_secret_file.as_deref())?;
        if keys.is_empty() && self.jwks_url.is_none() {
            anyhow::bail!(
                "no way to check tokens: give --jwt-public-key, --jwks-url or \
                 --jwt-hs256-secret-file"
            );
        }
        let mut verifier = Verifier::new(keys);
        verifier.issuer = self.jwt_issuer.clone();
        verifier.audience = self.jwt_audience.clone();
        Ok(AuthConfig {
            verifier,
            jwks: self
                .jwks_url
                .clone()
                .map(|url| skein_token::jwks::JwksSource {
                    url,
                    refresh_every: Duration::from_secs(self.jwks_refresh_secs),
                }),
            tenant_claim: self.tenant_claim.clone(),
        })
    }
}

/// The keys tokens are checked with: issuers' public keys given as ALG:PATH or
/// ALG:PATH:KID (RS256, ES256, EdDSA), and a shared HS256 secret from a file.
pub(crate) fn verifying_keys(
    public_keys: &[String],
    hs256_secret_file: Option<&std::path::Path>,
) -> anyhow::Result<Vec<VerifyingKey>> {
    let mut keys = Vec::new();
    for spec in public_keys {
        let mut parts = spec.splitn(3, ':');
        let (Some(algorithm), Some(path)) = (parts.next(), parts.next()) else {
            anyhow::bail!("public key {spec:?} is not ALG:PATH[:KID]");
        };
        let algorithm = algorithm
            .parse()
            .map_err(|_| anyhow::anyhow!("unknown JWT algorithm {algorithm:?}"))?;
        let pem = std::fs::read(path).with_context(|| format!("failed to read {path}"))?;
        keys.push(
            VerifyingKey::public_pem(algorithm, &pem, parts.next().map(str::to_owned))
                .map_err(anyhow::Error::msg)?,
        );
    }
    if let Some(file) = hs256_secret_file {
        let secret =
            std::fs::read(file).with_context(|| format!("failed to read {}", file.display()))?;
        if secret.trim_ascii().is_empty() {
            anyhow::bail!("the HS256 secret file {} is empty", file.display());
        }
        keys.push(VerifyingKey::hs256(secret.trim_ascii(), None));
    }
    Ok(keys)
}

pub(crate) fn run(args: GatewayArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    runtime.block_on(serve(args))
}

/// A running gateway.
pub(crate) struct RunningGateway {
    pub(crate) rest: SocketAddr,
    pub(crate) grpc: SocketAddr,
    /// Whether the gRPC listener serves TLS.
    pub(crate) grpc_tls: bool,
    pub(crate) gateway: Arc<Gateway>,
    stop: tokio::sync::watch::Sender<bool>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    grpc_server: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    follower: tokio::task::JoinHandle<()>,
}

impl RunningGateway {
    /// Waits (at most `within`) until the gateway has its first view of the cluster, before
    /// which it answers 503; answers whether it has.
    pub(crate) async fn ready(&self, within: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.gateway.view.now().received {
                return true;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            self.gateway.view.changed(left).await;
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn start(
        replicas: ControllerReplicas,
        auth: AuthConfig,
        http: HttpOptions,
        client_state: ClientStateKeys,
        broker_tls: Option<skein_client::ClientTls>,
        listen: SocketAddr,
        grpc_listen: SocketAddr,
        grpc_tls: Option<Arc<skein_broker::tls::TlsFiles>>,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("failed to bind the gateway on {listen}"))?;
        let rest = listener.local_addr()?;
        let grpc_listener = TcpListener::bind(grpc_listen)
            .await
            .with_context(|| format!("failed to bind the gateway's gRPC on {grpc_listen}"))?;
        let grpc = grpc_listener.local_addr()?;
        let (view, follower) = ClusterView::follow(replicas.clone());
        let authenticator = skein_gateway::auth::Authenticator::new(auth, Some(replicas.clone()))
            .following(view.clone());
        let gateway = Gateway::new(
            view,
            authenticator,
            http,
            Some(replicas),
            client_state,
            broker_tls,
        );
        let serving = Arc::clone(&gateway);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let app = skein_gateway::rest::router(Arc::clone(&gateway))
            .into_make_service_with_connect_info::<SocketAddr>();
        let mut rest_stopped = stopped.clone();
        // Responses are small writes; without TCP_NODELAY each would wait for the client's
        // delayed ACK (40 ms on Linux).
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "could not set TCP_NODELAY");
            }
        });
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rest_stopped.wait_for(|stop| *stop).await;
                })
                .await
        });
        let routes = skein_gateway::grpc::routes(Arc::clone(&gateway)).await;
        let mut grpc_stopped = stopped;
        let grpc_router = tonic::transport::Server::builder()
            // One client connection holds at most this many streams at once (HTTP/2's
            // SETTINGS_MAX_CONCURRENT_STREAMS); the REST port's HTTP/2 has hyper's 200.
            .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
            .layer(skein_gateway::grpc::MetricsLayer::new(
                gateway.metrics.clone(),
            ))
            .add_routes(routes);
        let grpc_stop = async move {
            let _ = grpc_stopped.wait_for(|stop| *stop).await;
        };
        let serves_tls = grpc_tls.is_some();
        let grpc_server = match grpc_tls {
            Some(tls) => tokio::spawn(grpc_router.serve_with_incoming_shutdown(
                crate::grpc_tls::incoming(grpc_listener, tls),
                grpc_stop,
            )),
            None => tokio::spawn(grpc_router.serve_with_incoming_shutdown(
                tokio_stream::StreamExt::map(
                    tokio_stream::wrappers::TcpListenerStream::new(grpc_listener),
                    |accepted| {
                        accepted.inspect(|tcp| {
                            if let Err(e) = tcp.set_nodelay(true) {
                                tracing::debug!(error = %e, "could not set TCP_NODELAY");
                            }
                        })
                    },
                ),
                grpc_stop,
            )),
        };
        Ok(Self {
            rest,
            grpc,
            grpc_tls: serves_tls,
            gateway: serving,
            stop,
            server,
            grpc_server,
            follower,
        })
    }

    /// Stops accepting, ends every stream (their clients resume on another replica), and
    /// waits up to `grace` for the requests still open. Connections still open after that
    /// are no longer waited for; they close when the process exits.
    pub(crate) async fn stop(mut self, grace: Duration) -> anyhow::Result<()> {
        self.gateway.begin_shutdown();
        let _ = self.stop.send(true);
        let drained = tokio::time::timeout(grace, async {
            let rest = (&mut self.server).await;
            let grpc = (&mut self.grpc_server).await;
            (rest, grpc)
        })
        .await;
        self.follower.abort();
        let Ok((rest, grpc)) = drained else {
            tracing::warn!(
                grace_secs = grace.as_secs_f64(),
                "connections were still open after the shutdown grace; no longer waiting"
            );
            self.server.abort();
            self.grpc_server.abort();
            return Ok(());
        };
        rest?.context("the gateway failed")?;
        grpc?.context("the gateway's gRPC failed")?;
        Ok(())
    }
}

async fn serve(args: GatewayArgs) -> anyhow::Result<()> {
    let auth = args.auth.config()?;
    let credential =
        crate::controller_credentials::read_credential(args.controller_token_file.as_deref())?;
    let replicas = ControllerReplicas::connect_lazy_with(
        &args.control_plane,
        credential,
        crate::grpc_tls::controller_tls(args.control_plane_ca_file.as_deref())?,
    )?;
    let http = HttpOptions {
        cors_origins: args.cors_origin.clone(),
        max_body_bytes: args.max_body_bytes,
        stream_read_ahead_bytes: args.stream_read_ahead_bytes,
        read_ahead_bytes: args.read_ahead_bytes,
        streams: skein_gateway::streams::StreamLimits {
            per_tenant: args.max_streams_per_tenant.max(1),
            total: args.max_streams.max(1),
        },
    };
    let mut interrupt = signal(SignalKind::interrupt()).context("failed to listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("failed to listen for SIGTERM")?;
    let client_state = client_state_keys(&args.client_state_key_files)?;
    let broker_tls = args
        .kafka_ssl_ca_location
        .as_ref()
        .map(skein_client::ClientTls::with_ca_file)
        .transpose()
        .context("--kafka-ssl-ca-location does not load")?;
    let grpc_tls = args.grpc_tls.open()?;
    let gateway = RunningGateway::start(
        replicas,
        auth,
        http,
        client_state,
        broker_tls,
        args.listen,
        args.grpc_listen,
        grpc_tls,
    )
    .await?;
    println!(
        "gateway: REST on http://{}; gRPC on {}://{}",
        gateway.rest,
        if gateway.grpc_tls { "https" } else { "http" },
        gateway.grpc
    );
    let ops_listener = args.ops.bind().await?;
    let mut registry = crate::ops::registry();
    gateway.gateway.metrics.register(&mut registry);
    let ops = crate::ops::spawn(ops_listener, gateway_ops(registry, &gateway));
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    crate::ops::stop(ops).await;
    gateway
        .stop(Duration::from_secs(args.shutdown_grace_secs))
        .await
}

/// A gateway's operations endpoint over `registry`: ready once it has the cluster's
/// metadata.
pub(crate) fn gateway_ops(
    registry: skein_ops::prometheus_client::registry::Registry,
    gateway: &RunningGateway,
) -> skein_ops::Ops {
    let view = gateway.gateway.view.clone();
    skein_ops::Ops::new(registry, move || {
        if view.now().received {
            Ok(())
        } else {
            Err("the gateway has not heard from the control plane yet".to_owned())
        }
    })
}
