//! `skein control-plane` (the admin API and the gRPC controller), and the admin API that
//! `skein dev` runs in-process.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use rand::RngCore;
use skein_catalog::Catalog;
use skein_control_plane::sinks::{SinkKey, SinkMetrics, SinkRunnerConfig};
use skein_control_plane::{
    controller_server, AdminAuth, AdminState, ControllerConfig, ControllerService,
    CredentialVerifier, JwtConfig, Leadership, LeaseKeeper, TopicOps,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio_stream::wrappers::TcpListenerStream;

/// How long the controller's open calls may take to finish on shutdown.
pub(crate) const CONTROLLER_DRAIN: Duration = Duration::from_secs(3);

#[derive(Debug, Args)]
pub(crate) struct ControlPlaneArgs {
    /// The catalog's database: postgres://user@host/db, or sqlite:path
    #[arg(long, env = "SKEIN_DATABASE_URL")]
    database_url: String,
    /// Apply pending catalog migrations before serving
    #[arg(long, env = "SKEIN_MIGRATE")]
    migrate: bool,
    #[command(flatten)]
    ops: crate::ops::OpsArgs,
    /// Address the admin REST API binds
    #[arg(long, env = "SKEIN_ADMIN_LISTEN", default_value = "127.0.0.1:8081")]
    admin_listen: SocketAddr,
    /// Address the gRPC controller binds (brokers register, forward changes and watch here)
    #[arg(
        long,
        env = "SKEIN_CONTROLLER_LISTEN",
        default_value = "127.0.0.1:9095"
    )]
    controller_listen: SocketAddr,
    /// TLS on the controller's listener
    #[command(flatten)]
    controller_tls: crate::grpc_tls::GrpcTlsArgs,
    /// This replica's name in the controller lease (default: host name and process id)
    #[arg(long, env = "SKEIN_CONTROL_PLANE_REPLICA")]
    replica_id: Option<String>,
    /// Seconds the controller lease lasts without renewal (a standby takes over after it)
    #[arg(long, env = "SKEIN_LEASE_TTL_SECS", default_value_t = 10)]
    lease_ttl_secs: u64,
    /// Milliseconds a broker stays live without a heartbeat (Kafka's
    /// `broker.session.timeout.ms`, whose default is 9000): after it, the broker leaves
    /// every ISR and its partitions get new leaders. This is what governs failover time.
    #[arg(long, env = "SKEIN_BROKER_SESSION_MS", default_value_t = 6000)]
    broker_session_ms: u64,
    /// Whether leadership moves back to each partition's preferred replica on its own once
    /// that replica is in sync again (Kafka's `auto.leader.rebalance.enable`); without it,
    /// only ElectLeaders moves it
    #[arg(
        long,
        env = "SKEIN_AUTO_LEADER_REBALANCE_ENABLE",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    auto_leader_rebalance_enable: bool,
    /// A static token accepted as an admin credential, for the first login
    #[arg(long, env = "SKEIN_BOOTSTRAP_TOKEN", hide_env_values = true)]
    bootstrap_token: Option<String>,
    /// A file holding the HS256 secret admin JWTs are signed with
    #[arg(
        long,
        env = "SKEIN_ADMIN_JWT_SECRET_FILE",
        conflicts_with = "jwt_public_key"
    )]
    jwt_secret_file: Option<PathBuf>,
    /// A PEM file with the issuer's public key for admin JWTs (see --jwt-algorithm)
    #[arg(long, env = "SKEIN_ADMIN_JWT_PUBLIC_KEY")]
    jwt_public_key: Option<PathBuf>,
    /// The admin JWTs' algorithm with --jwt-public-key: RS256, ES256 or EdDSA
    #[arg(long, env = "SKEIN_ADMIN_JWT_ALGORITHM", default_value = "RS256")]
    jwt_algorithm: String,
    /// The `iss` admin JWTs must carry
    #[arg(long, env = "SKEIN_ADMIN_JWT_ISSUER")]
    jwt_issuer: Option<String>,
    /// The `aud` admin JWTs must carry (every admin JWT carries one)
    #[arg(long, env = "SKEIN_ADMIN_JWT_AUDIENCE", default_value = skein_control_plane::ADMIN_AUDIENCE)]
    jwt_audience: String,
    /// A file holding the secret (32 bytes or more) that brokers' and gateways' controller
    /// credentials are signed with (`skein controller-token` mints them)
    #[arg(long, env = "SKEIN_CONTROLLER_SECRET_FILE")]
    controller_secret_file: PathBuf,
    /// A file holding the secret (32 bytes or more) sinks' database URLs are sealed with in
    /// the catalog; every replica needs the same one. Without it, no sink is created or run
    /// here
    #[arg(long, env = "SKEIN_SINK_SECRET_FILE")]
    sink_secret_file: Option<PathBuf>,
    /// The only hosts sinks may connect to: CIDR networks, addresses and host names,
    /// comma-separated, checked against every address a sink's host resolves to. Without
    /// it, any address but this host's loopback, link-local and cloud-metadata ones
    #[arg(long, env = "SKEIN_SINK_ALLOWED_TARGETS")]
    sink_allowed_targets: Option<skein_control_plane::sinks::TargetPolicy>,
    /// Whether this replica runs sink workers (with --sink-secret-file); without, it only
    /// serves the sink API, and the replicas that do run them share the work
    #[arg(
        long,
        env = "SKEIN_RUN_SINKS",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    run_sinks: bool,
}

pub(crate) fn run(args: ControlPlaneArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    runtime.block_on(serve(args))
}

fn jwt(args: &ControlPlaneArgs) -> anyhow::Result<Option<JwtConfig>> {
    let mut config = match (&args.jwt_secret_file, &args.jwt_public_key) {
        (Some(file), _) => {
            let secret = std::fs::read(file)
                .with_context(|| format!("failed to read {}", file.display()))?;
            if trim(&secret).is_empty() {
                anyhow::bail!("the JWT secret file {} is empty", file.display());
            }
            JwtConfig::hs256(trim(&secret))
        }
        (None, Some(file)) => {
            let pem = std::fs::read(file)
                .with_context(|| format!("failed to read {}", file.display()))?;
            let algorithm = args
                .jwt_algorithm
                .parse()
                .map_err(|_| anyhow::anyhow!("unknown JWT algorithm {:?}", args.jwt_algorithm))?;
            JwtConfig::public_key_pem(algorithm, &pem).map_err(anyhow::Error::msg)?
        }
        (None, None) => return Ok(None),
    };
    config.verifier.issuer = args.jwt_issuer.clone();
    config.verifier.audience = Some(args.jwt_audience.clone());
    Ok(Some(config))
}

fn trim(bytes: &[u8]) -> &[u8] {
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    &bytes[..end]
}

async fn serve(args: ControlPlaneArgs) -> anyhow::Result<()> {
    let jwt = jwt(&args)?;
    if jwt.is_none() && args.bootstrap_token.is_none() {
        anyhow::bail!(
            "no admin credential is configured: give --bootstrap-token, --jwt-secret-file or \
             --jwt-public-key"
        );
    }
    let catalog = Catalog::connect(&args.database_url)
        .await
        .context("failed to connect to the catalog's database")?;
    if args.migrate {
        catalog.migrate().await?;
    }
    let listener = TcpListener::bind(args.admin_listen)
        .await
        .with_context(|| format!("failed to bind the admin API on {}", args.admin_listen))?;
    let controller_listener = TcpListener::bind(args.controller_listen)
        .await
        .with_context(|| {
            format!(
                "failed to bind the controller on {}",
                args.controller_listen
            )
        })?;
    let controller_tls = args.controller_tls.open()?;
    println!(
        "control plane: {:?} catalog; admin API on http://{}; controller on {}://{}",
        catalog.backend(),
        listener.local_addr()?,
        if controller_tls.is_some() {
            "https"
        } else {
            "http"
        },
        controller_listener.local_addr()?
    );
    let ops_listener = args.ops.bind().await?;
    let replica_id = args.replica_id.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    });
    let mut config = ControllerConfig::new(replica_id);
    config.lease_ttl = Duration::from_secs(args.lease_ttl_secs.max(1));
    config.broker_session = Duration::from_millis(args.broker_session_ms.max(100));
    config.auto_leader_rebalance = args.auto_leader_rebalance_enable;
    let leadership = Arc::new(Leadership::default());
    let keeper = LeaseKeeper::spawn(catalog.clone(), config.clone(), Arc::clone(&leadership));
    let elector = skein_control_plane::election::spawn(
        catalog.clone(),
        config.clone(),
        Arc::clone(&leadership),
        config.watch_interval,
    );
    let sink_metrics = SinkMetrics::default();
    let _ops = crate::ops::spawn(
        ops_listener,
        control_plane_ops(catalog.clone(), Arc::clone(&leadership), &sink_metrics),
    );
    let controller_secret =
        crate::controller_credentials::read_secret(&args.controller_secret_file)?;
    let credentials = CredentialVerifier::new(&controller_secret);
    let sink_key = match &args.sink_secret_file {
        Some(file) => {
            let secret = std::fs::read(file)
                .with_context(|| format!("failed to read {}", file.display()))?;
            anyhow::ensure!(
                trim(&secret).len() >= 32,
                "the sink secret in {} is shorter than 32 bytes",
                file.display()
            );
            Some(Arc::new(SinkKey::from_secret(trim(&secret))))
        }
        None => None,
    };
    let sink_targets = args.sink_allowed_targets.clone().unwrap_or_default();
    let (sinks_stop, sinks_stopped) = tokio::sync::oneshot::channel::<()>();
    let sinks = sink_key.clone().filter(|_| args.run_sinks).map(|key| {
        let mut runner = SinkRunnerConfig::new(config.replica_id.clone(), key);
        runner.controller_secret = Some(controller_secret.clone());
        runner.metrics = sink_metrics.clone();
        runner.targets = sink_targets.clone();
        tokio::spawn(skein_control_plane::sinks::run(
            catalog.clone(),
            runner,
            async move {
                let _ = sinks_stopped.await;
            },
        ))
    });
    let (controller_stop, controller_stopped) = tokio::sync::oneshot::channel::<()>();
    let controller_router = tonic::transport::Server::builder().add_service(controller_server(
        ControllerService::new(catalog.clone(), config.clone(), Arc::clone(&leadership)),
        credentials,
    ));
    let controller_stopping = async {
        let _ = controller_stopped.await;
    };
    let controller = match controller_tls {
        Some(tls) => tokio::spawn(controller_router.serve_with_incoming_shutdown(
            crate::grpc_tls::incoming(controller_listener, tls),
            controller_stopping,
        )),
        None => tokio::spawn(controller_router.serve_with_incoming_shutdown(
            TcpListenerStream::new(controller_listener),
            controller_stopping,
        )),
    };
    let auth = AdminAuth {
        bootstrap_token: args.bootstrap_token,
        jwt,
    };
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let state = AdminState {
        catalog: catalog.clone(),
        auth,
        topics: Some(TopicOps::new(
            catalog.clone(),
            config.clone(),
            Arc::clone(&leadership),
        )),
        sink_key,
        sink_targets,
    };
    skein_control_plane::serve_admin(listener, state, async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
    .await?;
    let _ = controller_stop.send(());
    let _ = sinks_stop.send(());
    if let Some(sinks) = sinks {
        let _ = tokio::time::timeout(Duration::from_secs(6), sinks).await;
    }
    // Brokers and gateways hold metadata streams open for as long as they run: give the
    // calls in flight a moment, then stop waiting; what is left closes when the process
    // exits, and they fail over to another replica.
    let mut controller = controller;
    match tokio::time::timeout(CONTROLLER_DRAIN, &mut controller).await {
        Ok(served) => served?.context("the controller failed")?,
        Err(_) => controller.abort(),
    }
    keeper.abort();
    elector.abort();
    // Let a standby take over at once rather than after the lease lapses.
    if let Err(e) = catalog
        .release_lease(
            skein_control_plane::controller::CONTROLLER_LEASE,
            &config.replica_id,
        )
        .await
    {
        tracing::warn!(error = %e, "failed to release the controller lease");
    }
    catalog.close().await;
    println!("control plane stopped");
    Ok(())
}

/// The HS256 secret `skein dev` signs admin tokens with: created once per data directory,
/// readable by its owner only, so tokens outlive restarts.
pub(crate) fn dev_signing_secret(data_dir: &Path) -> anyhow::Result<Vec<u8>> {
    dev_secret(data_dir, "admin-signing-key")
}

/// A random secret kept in `data_dir/name` (created on first use, readable by its owner
/// only), so that what it signed stays valid across restarts of `skein dev`.
pub(crate) fn dev_secret(data_dir: &Path, name: &str) -> anyhow::Result<Vec<u8>> {
    let path = data_dir.join(name);
    match std::fs::read(&path) {
        Ok(secret) => return Ok(trim(&secret).to_vec()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("failed to read {}", path.display())),
    }
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::create_dir_all(data_dir)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("failed to create {}", path.display()))?;
    file.write_all(secret.as_bytes())?;
    file.sync_all()?;
    Ok(secret.into_bytes())
}

/// A control-plane replica's operations endpoint: ready while its catalog answers (checked
/// every 2 s), with [`controller_metrics`] and the sink runner's metrics.
pub(crate) fn control_plane_ops(
    catalog: Catalog,
    leadership: Arc<Leadership>,
    sinks: &SinkMetrics,
) -> skein_ops::Ops {
    let mut registry = crate::ops::registry();
    let refresh = controller_metrics(&mut registry, leadership);
    sinks.register(&mut registry);
    let catalog_ok = Arc::new(parking_lot::Mutex::new(Err::<(), String>(
        "the catalog has not been checked yet".to_owned(),
    )));
    let checked = Arc::clone(&catalog_ok);
    tokio::spawn(async move {
        loop {
            let answer = catalog
                .ping()
                .await
                .map_err(|e| format!("the catalog does not answer: {e}"));
            *checked.lock() = answer;
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    });
    skein_ops::Ops::new(registry, move || catalog_ok.lock().clone()).on_scrape(refresh)
}

/// Registers `skein_controller_active` (1 on the replica holding the controller lease, 0 on
/// a standby); answers what refreshes it before a scrape.
pub(crate) fn controller_metrics(
    registry: &mut skein_ops::prometheus_client::registry::Registry,
    leadership: Arc<Leadership>,
) -> impl Fn() + Send + Sync + 'static {
    use skein_ops::prometheus_client::metrics::gauge::Gauge;

    let active: Gauge = Gauge::default();
    registry.register(
        "controller_active",
        "Whether this replica holds the controller lease (1) or stands by (0)",
        active.clone(),
    );
    move || {
        active.set(i64::from(leadership.active_epoch().is_some()));
    }
}
