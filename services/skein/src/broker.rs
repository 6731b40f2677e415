//! `skein broker`: a broker that joins the cluster's controller. Its topics come from the
//! controller's metadata stream, and topic changes made through Kafka are forwarded to it.
//! Its Kafka listener serves one tenant's topics, under their plain names; clients act as one
//! principal (authentication and ACLs on the Kafka path come later).

use std::time::Duration;

use anyhow::Context;
use skein_broker::controller_link::ControllerLink;
use skein_broker::Node;

use crate::listener_args::{identity, ListenerArgs};
use tokio::signal::unix::{signal, SignalKind};

#[derive(Debug, clap::Args)]
pub(crate) struct BrokerArgs {
    /// The controller: control-plane replicas' gRPC addresses (http://host:port), comma-separated
    #[arg(
        long,
        env = "SKEIN_CONTROL_PLANE",
        value_delimiter = ',',
        required = true
    )]
    control_plane: Vec<String>,
    /// The tenant whose topics this broker's Kafka listener serves
    #[arg(long, env = "SKEIN_TENANT")]
    tenant: String,
    /// A file holding this broker's controller credential (`skein controller-token --role
    /// broker --tenant T`)
    #[arg(long, env = "SKEIN_CONTROLLER_TOKEN_FILE")]
    controller_token_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    listener: ListenerArgs,
    /// Seconds between heartbeats to the controller
    #[arg(long, default_value_t = 2)]
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
        config,
        extra,
    } = args.listener.bind().await?;
    let address = listener.local_addr()?;
    let identity = identity(&config, &args.tenant);
    let credential =
        crate::controller_credentials::read_credential(args.controller_token_file.as_deref())?;
    let link = ControllerLink::connect(&args.control_plane, identity, credential)
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
    println!(
        "skein broker: node {} serving tenant {:?} on {address}; controller {}{others}",
        node.broker().config.node_id,
        args.tenant,
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
    node.shutdown().await?;
    println!("closed cleanly");
    Ok(())
}
