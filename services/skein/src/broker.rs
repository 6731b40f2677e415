//! `skein broker`: a broker that joins the cluster's controller. Its topics come from the
//! controller's metadata stream, and topic changes made through Kafka are forwarded to it.
//! With `--tenant` it serves that tenant's topics under their plain names, on every
//! listener. Without, it serves every tenant: a client's tenant is the one its credential
//! belongs to (API key, token, SCRAM user `USER@TENANT`), so every client listener must use
//! SASL, and each tenant sees only its own topics, groups and ACLs; the inter-broker
//! listener carries the cluster's own traffic and must be reachable only by brokers.

use std::time::Duration;

use anyhow::Context;
use skein_broker::controller_link::ControllerLink;
use skein_broker::Node;

use crate::listener_args::{identity, ListenerArgs};
use tokio::signal::unix::{signal, SignalKind};

#[derive(Debug, clap::Args)]
pub(crate) struct BrokerArgs {
    /// The controller: control-plane replicas' gRPC addresses (http://host:port, or
    /// https://host:port in TLS), comma-separated
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
    control_plane_ca_file: Option<std::path::PathBuf>,
    /// The tenant whose topics this broker serves, under their plain names; without it,
    /// every tenant, each by who authenticated (client listeners must then use SASL)
    #[arg(long, env = "SKEIN_TENANT")]
    tenant: Option<String>,
    /// A file holding this broker's controller credential (`skein controller-token --role
    /// broker --tenant T`)
    #[arg(long, env = "SKEIN_CONTROLLER_TOKEN_FILE")]
    controller_token_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    listener: ListenerArgs,
    #[command(flatten)]
    ops: crate::ops::OpsArgs,
    /// Seconds between heartbeats to the controller
    #[arg(long, env = "SKEIN_HEARTBEAT_INTERVAL_SECS", default_value_t = 2)]
    heartbeat_interval_secs: u64,
}

pub(crate) fn run(args: BrokerArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: BrokerArgs) -> anyhow::Result<()> {
    let crate::listener_args::Bound {
        listener,
        mut config,
        extra,
    } = args.listener.bind().await?;
    let address = listener.local_addr()?;
    let ops_listener = args.ops.bind().await?;
    if args.tenant.is_none() {
        // Every tenant's topics share this broker's volume: no client's topic configs may
        // make every record a segment of its own.
        config.client_topic_floors = Some(skein_broker::limits::TopicConfigFloors::default());
        // Serving every tenant, a client's tenant comes from its authentication alone, and
        // other brokers prove they are brokers.
        if let Some((_, info)) = extra
            .iter()
            .find(|(_, info)| !info.protocol.requires_sasl())
        {
            anyhow::bail!(
                "listener {} ({}) does not authenticate its clients: a broker serving every \
                 tenant (no --tenant) needs SASL on every listener",
                info.name,
                info.protocol
            );
        }
        anyhow::ensure!(
            config.inter_broker_protocol.requires_sasl(),
            "the inter-broker listener {} is {}: a broker serving every tenant (no --tenant) \
             needs SASL_PLAINTEXT or SASL_SSL there, where brokers present their controller \
             credentials (--inter-broker-listener-name)",
            config.inter_broker_listener_name,
            config.inter_broker_protocol
        );
    }
    let identity = identity(&config, args.tenant.as_deref());
    let credential =
        crate::controller_credentials::read_credential(args.controller_token_file.as_deref())?;
    let controller_tls = crate::grpc_tls::controller_tls(args.control_plane_ca_file.as_deref())?;
    let link = ControllerLink::connect(&args.control_plane, identity, credential, controller_tls)
        .await
        .with_context(|| {
            format!(
                "failed to register with the controller at {}",
                args.control_plane.join(", ")
            )
        })?;
    // Listen before serving: a signal that arrives in between must not kill the process
    // before the logs are closed.
    let mut interrupt = signal(SignalKind::interrupt()).context("failed to listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("failed to listen for SIGTERM")?;
    let mut node = Node::start_controlled(
        config,
        listener,
        link,
        args.listener
            .node_settings(Duration::from_secs(args.heartbeat_interval_secs.max(1))),
    )
    .await?;
    let ops = crate::ops::spawn(ops_listener, broker_ops(node.broker()));
    // One line, the other listeners on it too: scripts read the addresses from it.
    let mut others = String::new();
    for (listener, info) in extra {
        others.push_str(&format!(
            "; listener {} ({}) on {} advertised as {}:{}",
            info.name,
            info.protocol,
            listener.local_addr()?,
            info.advertised_host,
            info.advertised_port
        ));
        node.add_listener(listener, info);
    }
    let serving = match &args.tenant {
        Some(tenant) => format!("tenant {tenant:?}"),
        None => "every tenant".to_owned(),
    };
    let config = &node.broker().config;
    println!(
        "skein broker: node {} serving {serving} on {address} ({}, {}); controller {}{others}",
        config.node_id,
        config.inter_broker_listener_name,
        config.inter_broker_protocol,
        args.control_plane.join(",")
    );
    // A broker `skein dev --brokers N` started stops, cleanly, when that process is gone.
    let parent: Option<u32> = std::env::var("SKEIN_DEV_PARENT_PID")
        .ok()
        .and_then(|pid| pid.parse().ok());
    let orphaned = async {
        match parent {
            Some(pid) => {
                loop {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    if std::os::unix::process::parent_id() != pid {
                        println!("skein broker: the skein dev that started this broker is gone; stopping");
                        return;
                    }
                }
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = crate::listener_args::until_signal(&mut interrupt, &mut terminate) => {}
        () = orphaned => {}
    }
    crate::ops::stop(ops).await;
    node.shutdown().await?;
    println!("closed cleanly");
    Ok(())
}

/// A broker's operations endpoint: its metrics, and ready once every partition it follows
/// has caught up with its leader.
pub(crate) fn broker_ops(broker: &std::sync::Arc<skein_broker::Broker>) -> skein_ops::Ops {
    let mut registry = crate::ops::registry();
    broker.metrics().register(&mut registry);
    let (ready, scraped) = (std::sync::Arc::clone(broker), std::sync::Arc::clone(broker));
    skein_ops::Ops::new(registry, move || ready.readiness())
        .on_scrape(move || scraped.metrics().refresh(&scraped))
}
