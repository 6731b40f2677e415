//! `skein dev`: everything Skein has, in one process, with embedded defaults.
//!
//! Today that is one broker speaking the Kafka protocol over the log engine, with its data
//! under `./skein-data`: it opens (and recovers) every partition, serves Kafka clients, runs
//! retention, compaction and time-based flushes, and closes every log cleanly on Ctrl-C
//! (SIGINT) or SIGTERM. Beside it, the control plane (admin API and controller) runs on a
//! SQLite catalog in the same directory; the broker joins that controller as `skein broker`
//! would, serving the `dev` tenant, and an admin token is printed. The REST gateway runs too,
//! with a development token that may write and read every topic and group of `dev`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use skein_broker::controller_link::ControllerLink;
use skein_broker::listeners::{ListenerInfo, SecurityProtocol};
use skein_broker::Node;
use skein_catalog::{Catalog, CatalogError};
use skein_control_plane::{
    controller_server, credentials, ControllerConfig, ControllerService, CredentialVerifier,
    Leadership, LeaseKeeper, NewCredential, Role, TopicOpError, TopicOps,
};
use skein_proto::replicas::Credential;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio_stream::wrappers::TcpListenerStream;

use crate::listener_args::{identity, ListenerArgs};

#[derive(Debug, clap::Args)]
pub(crate) struct DevArgs {
    #[command(flatten)]
    listener: ListenerArgs,
    /// Address the admin REST API binds (port 0 picks a free one)
    #[arg(long, env = "SKEIN_ADMIN_LISTEN", default_value = "127.0.0.1:8081")]
    admin_listen: SocketAddr,
    /// Address the gateway's REST API binds (port 0 picks a free one)
    #[arg(long, env = "SKEIN_GATEWAY_LISTEN", default_value = "127.0.0.1:8080")]
    gateway_listen: SocketAddr,
    /// Address the gateway's gRPC API binds (port 0 picks a free one)
    #[arg(
        long,
        env = "SKEIN_GATEWAY_GRPC_LISTEN",
        default_value = "127.0.0.1:9090"
    )]
    gateway_grpc_listen: SocketAddr,
    /// Address of the SASL_PLAINTEXT Kafka listener, where clients authenticate with an API
    /// key over SASL/PLAIN (port 0 picks a free one); not bound when --listeners is given
    #[arg(
        long,
        env = "SKEIN_KAFKA_SASL_LISTEN",
        default_value = "127.0.0.1:9192"
    )]
    kafka_sasl_listen: SocketAddr,
    /// Brokers in the cluster (1 to 9): brokers 1 and up run as child `skein broker`
    /// processes on the Kafka ports after this one's (free ones when it has port 0), so
    /// killing one shows failover; topics get min(3, N) replicas
    #[arg(long, env = "SKEIN_DEV_BROKERS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=9))]
    brokers: u16,
    #[command(flatten)]
    ops: crate::ops::OpsArgs,
}

pub(crate) fn run(args: DevArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    runtime.block_on(serve(args))
}

/// The tenant `skein dev`'s Kafka listener serves.
pub(crate) const DEV_TENANT: &str = "dev";

/// How long `skein dev` waits at start for its broker to be ready before it says it runs.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// The principal of the development token.
const DEV_PRINCIPAL: &str = "dev";

async fn serve(args: DevArgs) -> anyhow::Result<()> {
    println!(
        "skein dev: data directory {}",
        args.listener.data_dir.display()
    );
    std::fs::create_dir_all(&args.listener.data_dir)
        .with_context(|| format!("failed to create {}", args.listener.data_dir.display()))?;
    let _data_lock = crate::data_lock::lock(&args.listener.data_dir)?;
    let any_port = args.listener.kafka_listen.port() == 0;
    let crate::listener_args::Bound {
        listener,
        mut config,
        extra,
    } = args.listener.bind().await?;
    let address = listener.local_addr()?;
    // The dev token the gateway accepts works on the SASL listener too (OAUTHBEARER).
    if config.oauthbearer.is_none() {
        let secret = crate::control_plane::dev_signing_secret(&args.listener.data_dir)?;
        config.oauthbearer = Some(Arc::new(skein_broker::OAuthBearer {
            keys: skein_token::jwks::TrustedKeys::new(
                skein_token::Verifier::new(vec![skein_token::VerifyingKey::hs256(&secret, None)]),
                None,
            ),
            tenant_claim: "tenant".to_owned(),
        }));
    }
    let replication_factor = i32::from(args.brokers.min(3));
    if args.brokers > 1 {
        config.default_replication_factor = replication_factor;
    }

    // The control plane, in this process, on a SQLite catalog.
    let catalog_path = args.listener.data_dir.join("catalog.db");
    let catalog = Catalog::open(&format!("sqlite:{}", catalog_path.display()))
        .await
        .with_context(|| format!("failed to open the catalog {}", catalog_path.display()))?;
    match catalog.create_tenant(DEV_TENANT).await {
        Ok(_) | Err(CatalogError::AlreadyExists { .. }) => {}
        Err(e) => return Err(e).context("failed to create the dev tenant"),
    }
    allow_dev_principal(&catalog).await?;
    // The controller authenticates its callers here too: the broker and the gateway get
    // credentials for their roles, signed with a secret kept in the data directory.
    let controller_secret =
        crate::control_plane::dev_secret(&args.listener.data_dir, "controller-signing-key")?;
    let controller =
        DevController::start(catalog.clone(), CredentialVerifier::new(&controller_secret)).await?;
    let token = |role: Role, tenants: &[&str], acl_changes: bool, node: Option<i32>| {
        credentials::mint(
            &controller_secret,
            &NewCredential {
                name: match node {
                    Some(node) => format!("skein-dev-{}-{node}", role.name()),
                    None => format!("skein-dev-{}", role.name()),
                },
                role,
                tenants: tenants.iter().map(|t| (*t).to_owned()).collect(),
                acl_changes,
                node,
                valid_for: Duration::from_secs(365 * 86_400),
            },
        )
        .context("failed to sign a controller credential")
    };
    let bearer =
        |token: &str| Credential::bearer(token).context("failed to sign a controller credential");
    // Each broker's credential names its node: node 0 here, the children theirs.
    let broker_token = |node: i32| {
        token(
            Role::Broker,
            &[DEV_TENANT],
            config.unauthenticated_acl_changes,
            Some(node),
        )
    };
    let broker_credential = bearer(&broker_token(config.node_id)?)?;
    let child_tokens = (1..i32::from(args.brokers))
        .map(|node| broker_token(node).map(|token| (node, token)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let gateway_credential = bearer(&token(Role::Gateway, &[], false, None)?)?;

    // The broker joins it, like `skein broker` does.
    let identity = identity(&config, Some(DEV_TENANT));
    let link = ControllerLink::connect(
        std::slice::from_ref(&controller.url),
        identity,
        broker_credential,
        None,
    )
    .await
    .context("the broker could not register with the in-process controller")?;
    import_local_topics(&args.listener.data_dir, &controller.topics).await?;
    let mut node = Node::start_controlled(
        config,
        listener,
        link,
        args.listener.node_settings(Duration::from_secs(1)),
    )
    .await?;
    let mut sasl_address = extra
        .iter()
        .find(|(_, info)| info.protocol == SecurityProtocol::SaslPlaintext)
        .map(|(_, info)| format!("{}:{}", info.advertised_host, info.advertised_port));
    for (listener, info) in extra {
        node.add_listener(listener, info);
    }
    if args.listener.listeners.is_none() {
        let listener = TcpListener::bind(args.kafka_sasl_listen)
            .await
            .with_context(|| {
                format!(
                    "failed to bind the SASL_PLAINTEXT listener on {}",
                    args.kafka_sasl_listen
                )
            })?;
        let bound = listener.local_addr()?;
        node.add_listener(
            listener,
            ListenerInfo {
                name: "SASL_PLAINTEXT".to_owned(),
                protocol: SecurityProtocol::SaslPlaintext,
                advertised_host: bound.ip().to_string(),
                advertised_port: bound.port(),
                tls: None,
            },
        );
        sasl_address = Some(bound.to_string());
    }
    let dev_key = dev_api_key(&catalog, &args.listener.data_dir).await?;
    let children = crate::dev_brokers::ChildBrokers {
        controller: controller.url.clone(),
        tokens: child_tokens,
        data_dir: args.listener.data_dir.clone(),
        // Asked for any port, the children take free ones too, not the ports after ours.
        kafka_listen: if any_port {
            std::net::SocketAddr::new(address.ip(), 0)
        } else {
            address
        },
        config: args.listener.config.clone(),
        replication_factor,
    }
    .start(args.brokers)?;
    // Topics get replicas on every broker only once all have registered: wait for them.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while node.broker().topics.brokers().len() < usize::from(args.brokers) {
        if tokio::time::Instant::now() > deadline {
            println!("warning: not every broker has joined after 30 s; going on");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reports = node.broker().logs().recovery_reports();
    let recovered = reports.iter().filter(|(_, r)| !r.clean_shutdown).count();
    println!(
        "log engine: {} partition(s) opened, {} recovered after an unclean shutdown",
        reports.len(),
        recovered
    );
    for (tp, report) in reports.iter().filter(|(_, r)| !r.clean_shutdown) {
        println!(
            "  {tp}: scanned {} segment(s), {} bytes; cut {} bytes of damaged tail",
            report.segments_recovered, report.bytes_scanned, report.bytes_truncated
        );
    }

    let secret = crate::control_plane::dev_signing_secret(&args.listener.data_dir)?;
    let jwt = skein_control_plane::JwtConfig::hs256(&secret);
    let token = jwt
        .issue_admin_token("skein-dev", 24 * 3600)
        .context("failed to issue the admin token")?;
    let admin_listener = TcpListener::bind(args.admin_listen)
        .await
        .with_context(|| format!("failed to bind the admin API on {}", args.admin_listen))?;
    let admin_address = admin_listener.local_addr()?;
    let (admin_stop, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    // Sinks: their database URLs sealed with a key of this data directory, their workers
    // run in this process.
    let sink_key = Arc::new(skein_control_plane::sinks::SinkKey::from_secret(
        &crate::control_plane::dev_secret(&args.listener.data_dir, "sink-secret-key")?,
    ));
    let (sinks_stop, sinks_stopped) = tokio::sync::oneshot::channel::<()>();
    let sink_metrics = skein_control_plane::sinks::SinkMetrics::default();
    let sinks = {
        let mut runner = skein_control_plane::sinks::SinkRunnerConfig::new(
            controller.replica.clone(),
            Arc::clone(&sink_key),
        );
        runner.controller_secret = Some(controller_secret.clone());
        runner.metrics = sink_metrics.clone();
        // Sinks of a development process may write to databases on this machine.
        runner.targets = skein_control_plane::sinks::TargetPolicy::loopback();
        tokio::spawn(skein_control_plane::sinks::run(
            catalog.clone(),
            runner,
            async move {
                let _ = sinks_stopped.await;
            },
        ))
    };
    let admin = tokio::spawn(skein_control_plane::serve_admin(
        admin_listener,
        skein_control_plane::AdminState {
            catalog: catalog.clone(),
            auth: skein_control_plane::AdminAuth {
                bootstrap_token: None,
                jwt: Some(jwt),
            },
            topics: Some(controller.topics.clone()),
            sink_key: Some(sink_key),
            sink_targets: skein_control_plane::sinks::TargetPolicy::loopback(),
        },
        async {
            let _ = admin_stopped.await;
        },
    ));
    // Listen before saying so: a Ctrl-C that arrives in between must not kill the process
    // before the logs are closed.
    let mut interrupt = signal(SignalKind::interrupt()).context("failed to listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("failed to listen for SIGTERM")?;
    let gateway = crate::gateway::RunningGateway::start(
        skein_proto::replicas::ControllerReplicas::connect_lazy(
            std::slice::from_ref(&controller.url),
            gateway_credential,
        )?,
        skein_gateway::AuthConfig {
            verifier: skein_token::Verifier::new(vec![skein_token::VerifyingKey::hs256(
                &secret, None,
            )]),
            jwks: None,
            tenant_claim: "tenant".to_owned(),
        },
        skein_gateway::HttpOptions {
            cors_origins: vec!["*".to_owned()],
            ..Default::default()
        },
        skein_gateway::client_state::ClientStateKeys::new(vec![crate::control_plane::dev_secret(
            &args.listener.data_dir,
            "gateway-state-key",
        )?])?,
        None,
        args.gateway_listen,
        args.gateway_grpc_listen,
        None,
    )
    .await?;
    // Say it runs only once the gateway can answer (it needs its first metadata snapshot).
    if !gateway.ready(Duration::from_secs(10)).await {
        println!("warning: the gateway has no metadata from the controller yet");
    }
    // One operations endpoint for everything in this process: node 0, the control plane
    // and the gateway.
    let ops_listener = args.ops.bind().await?;
    let mut registry = crate::ops::registry();
    node.broker().metrics().register(&mut registry);
    gateway.gateway.metrics.register(&mut registry);
    sink_metrics.register(&mut registry);
    let controller_scraped =
        crate::control_plane::controller_metrics(&mut registry, Arc::clone(&controller.leadership));
    let (ready_broker, scraped) = (Arc::clone(node.broker()), Arc::clone(node.broker()));
    let ready_view = gateway.gateway.view.clone();
    let ops = crate::ops::spawn(
        ops_listener,
        skein_ops::Ops::new(registry, move || {
            ready_broker.readiness()?;
            if ready_view.now().received {
                Ok(())
            } else {
                Err("the gateway has not heard from the control plane yet".to_owned())
            }
        })
        .on_scrape(move || {
            scraped.metrics().refresh(&scraped);
            controller_scraped();
        }),
    );
    // Say it runs once the broker can serve its share: every partition it holds has a
    // leader, and it leads those it should (after a restart, leadership comes back from
    // the controller a moment after the logs open).
    let ready_by = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        match node.broker().readiness() {
            Ok(()) => break,
            Err(reason) if tokio::time::Instant::now() >= ready_by => {
                println!("warning: not ready after {READY_WITHIN:?}: {reason}");
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let dev_token = dev_token(&secret)?;
    println!("kafka: bootstrap server {address} (tenant {DEV_TENANT:?}; topics are created on first use)");
    if let Some(sasl) = &sasl_address {
        let (id, secret) = &dev_key;
        println!(
            "kafka (SASL/PLAIN, API key {id} of principal {DEV_PRINCIPAL:?}): bootstrap server {sasl}"
        );
        println!(
            "  kcat -b {sasl} -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=PLAIN \
             -X sasl.username={id} -X sasl.password={secret} -L"
        );
        println!(
            "  confluent-kafka: {{\"bootstrap.servers\": \"{sasl}\", \"security.protocol\": \"SASL_PLAINTEXT\", \
             \"sasl.mechanism\": \"PLAIN\", \"sasl.username\": \"{id}\", \"sasl.password\": \"{secret}\"}}"
        );
    }
    if args.brokers > 1 {
        println!(
            "cluster: {} brokers (node 0 in this process, nodes 1 to {} as child processes, \
             restarted when they exit); topics get {replication_factor} replicas",
            args.brokers,
            args.brokers - 1
        );
    }
    println!(
        "admin API: http://{admin_address} (catalog {})",
        catalog_path.display()
    );
    println!("admin token (24 h): {token}");
    println!(
        "gateway: REST http://{} (OpenAPI at /openapi.json); gRPC http://{} (skein.v1.Gateway, with reflection)",
        gateway.rest, gateway.grpc
    );
    println!(
        "dev token (24 h; writes and reads every topic of tenant {DEV_TENANT:?}; also a \
         SASL/OAUTHBEARER token on the SASL listener): {dev_token}"
    );
    println!(
        "running retention and compaction every {}s; press Ctrl-C to stop",
        args.listener.maintenance_interval_secs
    );
    crate::listener_args::until_signal(&mut interrupt, &mut terminate).await;
    println!("shutting down: flushing and closing every log");
    crate::ops::stop(ops).await;
    let _ = admin_stop.send(());
    let _ = sinks_stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(6), sinks).await;
    gateway.stop(std::time::Duration::from_secs(5)).await?;
    admin.await?.context("the admin API failed")?;
    tokio::task::spawn_blocking(move || children.stop()).await?;
    node.shutdown().await?;
    controller.stop().await?;
    catalog.close().await;
    println!("closed cleanly");
    Ok(())
}

/// The controller `skein dev` runs in-process, on a loopback port of its own.
struct DevController {
    url: String,
    topics: TopicOps,
    leadership: Arc<Leadership>,
    replica: String,
    catalog: Catalog,
    keeper: tokio::task::JoinHandle<()>,
    elector: tokio::task::JoinHandle<()>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl DevController {
    async fn start(catalog: Catalog, credentials: CredentialVerifier) -> anyhow::Result<Self> {
        let replica = format!("skein-dev-{}", std::process::id());
        let config = ControllerConfig::new(replica.clone());
        // This process holds the data directory's lock, so no other `skein dev` runs on
        // this catalog: a lease still live is a killed run's, and is taken over at once
        // rather than waited out.
        catalog
            .expire_lease(skein_control_plane::controller::CONTROLLER_LEASE)
            .await?;
        let leadership = Arc::new(Leadership::default());
        let keeper = LeaseKeeper::spawn(catalog.clone(), config.clone(), Arc::clone(&leadership));
        let elector = skein_control_plane::election::spawn(
            catalog.clone(),
            config.clone(),
            Arc::clone(&leadership),
            config.watch_interval,
        );
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let service =
            ControllerService::new(catalog.clone(), config.clone(), Arc::clone(&leadership));
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(controller_server(service, credentials))
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                    let _ = stopped.await;
                }),
        );
        let deadline = tokio::time::Instant::now() + config.lease_ttl * 2;
        while leadership.active_epoch().is_none() {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "the in-process controller did not get its lease"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self {
            url,
            topics: TopicOps::new(catalog.clone(), config, Arc::clone(&leadership)),
            leadership,
            replica,
            catalog,
            keeper,
            elector,
            stop,
            server,
        })
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        match tokio::time::timeout(crate::control_plane::CONTROLLER_DRAIN, &mut self.server).await {
            Ok(served) => served?.context("the controller failed")?,
            Err(_) => self.server.abort(),
        }
        self.keeper.abort();
        self.elector.abort();
        self.catalog
            .release_lease(
                skein_control_plane::controller::CONTROLLER_LEASE,
                &self.replica,
            )
            .await?;
        Ok(())
    }
}

/// Topics a broker on its own kept in `<data>/topics` move into the catalog once, so their
/// logs stay reachable: the catalog gives each a new id, and the partition directories that
/// name the old one are stamped with it. The file is then renamed `topics.imported`.
async fn import_local_topics(data_dir: &std::path::Path, topics: &TopicOps) -> anyhow::Result<()> {
    let path = data_dir.join("topics");
    if !path
        .try_exists()
        .with_context(|| format!("failed to look for {}", path.display()))?
    {
        return Ok(());
    }
    let local = skein_broker::TopicRegistry::open(data_dir)?;
    for info in local.list_in(&skein_broker::scope::Scope::Plain) {
        let (imported, _) = match topics
            .create(
                DEV_TENANT,
                &info.name,
                info.partitions,
                1,
                info.configs.clone(),
            )
            .await
        {
            Ok(created) => {
                println!("imported topic {} into the catalog", info.name);
                created
            }
            // Imported before a crash cut the import short.
            Err(TopicOpError::Catalog(CatalogError::AlreadyExists { .. })) => topics
                .describe(DEV_TENANT, &info.name)
                .await
                .with_context(|| format!("failed to read topic {}", info.name))?,
            Err(e) => {
                return Err(e).with_context(|| format!("failed to import topic {}", info.name))
            }
        };
        let id = uuid::Uuid::parse_str(&imported.id)
            .with_context(|| format!("the catalog's id of {} is not a UUID", info.name))?;
        restamp_partitions(&data_dir.join("logs"), &info, id)?;
    }
    std::fs::rename(&path, data_dir.join("topics.imported"))?;
    Ok(())
}

/// Stamps the partition directories of `local` (those naming its id) with the id the
/// catalog gave it, so the broker serves them as that topic's.
fn restamp_partitions(
    logs: &std::path::Path,
    local: &skein_broker::TopicInfo,
    id: uuid::Uuid,
) -> anyhow::Result<()> {
    for partition in 0..local.partitions {
        let dir = logs.join(format!("{}-{partition}", local.name));
        if skein_log::read_topic_id(&dir)? == Some(local.id) {
            skein_log::write_topic_id(&dir, id)?;
        }
    }
    Ok(())
}

/// ACLs letting the development principal do anything with the dev tenant's topics and
/// groups (created once; creating them again changes nothing).
async fn allow_dev_principal(catalog: &Catalog) -> anyhow::Result<()> {
    use skein_auth::{
        AclBinding, Operation, PatternType, Permission, Principal, ResourceType, ANY_HOST,
    };
    let tenant = catalog.tenant_by_name(DEV_TENANT).await?;
    for resource_type in [ResourceType::Topic, ResourceType::Group] {
        let binding = AclBinding {
            principal: Principal::user(DEV_PRINCIPAL),
            host: ANY_HOST.to_owned(),
            resource_type,
            resource_name: "*".to_owned(),
            pattern_type: PatternType::Literal,
            operation: Operation::All,
            permission: Permission::Allow,
        };
        catalog
            .create_acl(&tenant.id, &binding)
            .await
            .context("failed to create the dev principal's ACLs")?;
    }
    Ok(())
}

/// The API key of the dev principal, for SASL/PLAIN clients: made once and kept in
/// `<data>/dev-api-key` (mode 0600) as `id:secret`, since a secret is shown only once; a
/// kept key the catalog no longer accepts (revoked, or the catalog removed) is replaced.
async fn dev_api_key(
    catalog: &Catalog,
    data_dir: &std::path::Path,
) -> anyhow::Result<(String, String)> {
    let path = data_dir.join("dev-api-key");
    if let Ok(kept) = std::fs::read_to_string(&path) {
        if let Some((id, secret)) = kept.trim().split_once(':') {
            if let Ok(Ok(_)) = catalog.authenticate_api_key(id, secret).await {
                return Ok((id.to_owned(), secret.to_owned()));
            }
        }
    }
    let tenant = catalog.tenant_by_name(DEV_TENANT).await?;
    let principal = match catalog.principal(&tenant.id, DEV_PRINCIPAL).await {
        Ok(principal) => principal,
        Err(CatalogError::NotFound { .. }) => {
            catalog
                .create_principal(
                    &tenant.id,
                    skein_catalog::PrincipalKind::ServiceAccount,
                    DEV_PRINCIPAL,
                )
                .await?
        }
        Err(e) => return Err(e).context("failed to find the dev principal"),
    };
    let key = catalog
        .create_api_key(&principal.id)
        .await
        .context("failed to make the dev API key")?;
    let mut file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("failed to write {}", path.display()))?
    };
    std::io::Write::write_all(&mut file, format!("{}:{}\n", key.id, key.secret).as_bytes())?;
    Ok((key.id, key.secret))
}

/// A 24-hour gateway token for the dev principal of the dev tenant.
fn dev_token(secret: &[u8]) -> anyhow::Result<String> {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs()
        + 24 * 3600;
    let claims = serde_json::json!({"sub": DEV_PRINCIPAL, "tenant": DEV_TENANT, "exp": exp});
    let claims = claims.as_object().cloned().unwrap_or_default();
    skein_token::Hs256Signer::new(secret)
        .sign(&claims)
        .context("failed to sign the dev token")
}
