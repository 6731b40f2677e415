//! A broker's lifecycle. [`Node::start`] opens the broker (recovering its logs), starts every
//! background task it needs and serves Kafka clients; [`Node::shutdown`] stops accepting,
//! lets open connections finish their current request, stops the tasks and closes every log
//! cleanly. `skein dev`, `skein broker`, the benchmark and the tests all start and stop a
//! broker this way.
//!
//! The background tasks: group expiry (lapsed members removed, stalled rebalances completed,
//! idle groups' offsets and idle producers forgotten), retention and compaction, and on a
//! controller, heartbeats and following the metadata stream.

use crate::listeners::ListenerInfo;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::controller_link::ControllerLink;
use crate::{Broker, BrokerConfig};

/// How often a node does its periodic work.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    /// Between retention and compaction passes.
    pub maintenance_interval: Duration,
    /// Between heartbeats to the controller.
    pub heartbeat_interval: Duration,
}

impl Default for NodeSettings {
    fn default() -> Self {
        Self {
            maintenance_interval: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(2),
        }
    }
}

/// A running broker: its listener and background tasks. Dropped without [`Node::shutdown`],
/// it stops serving and its tasks end, but the logs are left as after a crash.
#[derive(Debug)]
pub struct Node {
    broker: Arc<Broker>,
    address: SocketAddr,
    /// Tells every listener to stop accepting.
    stop_serving: watch::Sender<bool>,
    /// One accept loop per listener.
    servers: Vec<JoinHandle<()>>,
    /// Tasks that stop when told (they may be in the middle of blocking work on the logs).
    stop_tasks: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// Tasks that are aborted (they hold no log work across an await).
    aborted: Vec<AbortOnDrop>,
    /// The controller, for a broker joined to one: asked to move leadership away before
    /// the broker stops.
    link: Option<ControllerLink>,
}

/// One listener's accept loop, until `stop` says so.
fn spawn_server(
    broker: &Arc<Broker>,
    listener: TcpListener,
    info: ListenerInfo,
    stop: &watch::Sender<bool>,
) -> JoinHandle<()> {
    let mut stopping = stop.subscribe();
    tokio::spawn(crate::serve(
        listener,
        Arc::new(info),
        Arc::clone(broker),
        async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        },
    ))
}

/// How long a stopping broker waits for its leaderships to move away.
const CONTROLLED_SHUTDOWN_WITHIN: Duration = Duration::from_secs(30);

/// A task aborted when its handle is dropped, so a node dropped without
/// [`Node::shutdown`] leaves no controller task behind.
#[derive(Debug)]
struct AbortOnDrop(Option<JoinHandle<()>>);

impl AbortOnDrop {
    async fn stop(mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

impl Node {
    /// A broker on its own, its topics in `<data>/topics`, serving on `listener`.
    pub async fn start(
        config: BrokerConfig,
        listener: TcpListener,
        settings: NodeSettings,
    ) -> anyhow::Result<Self> {
        let data_dir = config.data_dir.clone();
        let broker = tokio::task::spawn_blocking(move || Broker::open(config))
            .await?
            .with_context(|| format!("failed to open {}", data_dir.display()))?;
        Self::run(broker, listener, &settings, Vec::new(), None)
    }

    /// A broker joined to the controller through `link` (already registered): its topics,
    /// ACLs and quota come from the metadata stream, which it follows until shutdown.
    pub async fn start_controlled(
        config: BrokerConfig,
        listener: TcpListener,
        link: ControllerLink,
        settings: NodeSettings,
    ) -> anyhow::Result<Self> {
        let data_dir = config.data_dir.clone();
        let (broker, snapshots) = Broker::open_controlled(config, link.clone())
            .await
            .with_context(|| format!("failed to open {}", data_dir.display()))?;
        let heartbeats =
            link.spawn_heartbeats(settings.heartbeat_interval.max(Duration::from_millis(100)));
        let isr = crate::isr::spawn(Arc::clone(&broker), link.clone());
        let controller = link.clone();
        let follower = broker.follow_controller(link, snapshots);
        let fetchers = crate::replica_fetcher::spawn(Arc::clone(&broker));
        let aborted = vec![
            AbortOnDrop(Some(heartbeats)),
            AbortOnDrop(Some(follower)),
            AbortOnDrop(Some(fetchers)),
            AbortOnDrop(Some(isr)),
        ];
        Self::run(broker, listener, &settings, aborted, Some(controller))
    }

    fn run(
        broker: Arc<Broker>,
        listener: TcpListener,
        settings: &NodeSettings,
        aborted: Vec<AbortOnDrop>,
        link: Option<ControllerLink>,
    ) -> anyhow::Result<Self> {
        let address = listener.local_addr()?;
        let (stop_tasks, stopping) = watch::channel(false);
        let tasks = vec![
            spawn_group_expiry(Arc::clone(&broker), stopping.clone()),
            spawn_transaction_timeouts(Arc::clone(&broker), stopping.clone()),
            spawn_maintenance(
                Arc::clone(&broker),
                settings
                    .maintenance_interval
                    .max(Duration::from_millis(100)),
                stopping,
            ),
        ];
        let (stop_serving, _) = watch::channel(false);
        let info = ListenerInfo {
            name: broker.config.inter_broker_listener_name.clone(),
            protocol: broker.config.inter_broker_protocol,
            advertised_host: broker.config.advertised_host.clone(),
            advertised_port: broker.config.advertised_port,
            tls: broker
                .config
                .inter_broker_tls
                .as_ref()
                .map(|tls| Arc::clone(&tls.serve)),
        };
        let server = spawn_server(&broker, listener, info, &stop_serving);
        Ok(Self {
            broker,
            address,
            stop_serving,
            servers: vec![server],
            stop_tasks,
            tasks,
            aborted,
            link,
        })
    }

    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// Serves Kafka clients on one more listener (a SASL one beside the inter-broker
    /// listener the broker registered), until shutdown.
    pub fn add_listener(&mut self, listener: TcpListener, info: ListenerInfo) {
        let server = spawn_server(&self.broker, listener, info, &self.stop_serving);
        self.servers.push(server);
    }

    /// The address the Kafka listener is bound to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops serving (open connections finish their current request), stops every task and
    /// closes the logs cleanly.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let Self {
            broker,
            stop_serving,
            servers,
            stop_tasks,
            tasks,
            aborted,
            link,
            ..
        } = self;
        if let Some(link) = link {
            controlled_shutdown(&broker, &link).await;
        }
        let _ = stop_serving.send(true);
        for server in servers {
            server.await.context("a Kafka listener failed")?;
        }
        for task in aborted {
            task.stop().await;
        }
        let _ = stop_tasks.send(true);
        for task in tasks {
            let _ = task.await;
        }
        // Tasks the stopped ones aborted (each replica fetcher's per-leader task) let go of
        // the broker when the runtime next drops them: moments, not a wait on the network.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while Arc::strong_count(&broker) > 1 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::task::spawn_blocking(move || broker.shutdown())
            .await?
            .context("failed to close the logs cleanly")
    }
}

/// Kafka's controlled shutdown: the controller moves every leadership this broker holds to
/// another in-sync replica, and the broker serves on (answering with NOT_LEADER_OR_FOLLOWER
/// where it no longer leads) until its metadata says it leads nothing, so clients move over
/// without waiting for its session to lapse. Gives up after [`CONTROLLED_SHUTDOWN_WITHIN`]
/// (the controller may be unreachable): then the partitions fail over when the session does.
async fn controlled_shutdown(broker: &Broker, link: &ControllerLink) {
    let deadline = tokio::time::Instant::now() + CONTROLLED_SHUTDOWN_WITHIN;
    loop {
        match link.controlled_shutdown().await {
            Ok(0) if broker.replicas.led().is_empty() => return,
            Ok(remaining) => {
                tracing::info!(
                    remaining,
                    "controlled shutdown: waiting for leadership to move"
                );
            }
            Err(e) => {
                tracing::warn!(error = %e, "controlled shutdown: the controller did not answer")
            }
        }
        if tokio::time::Instant::now() > deadline {
            tracing::warn!("controlled shutdown incomplete; stopping anyway");
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Removes group members whose sessions lapse and completes stalled rebalances, sums what
/// each tenant's logs take every second, and, far less often, forgets idle groups' offsets
/// and idle producers.
fn spawn_group_expiry(broker: Arc<Broker>, mut stopping: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_millis(250));
        let sweep_every = broker
            .config
            .offsets_retention
            .min(broker.config.producer_id_expiration)
            .div_f64(4.0)
            .clamp(Duration::from_millis(250), Duration::from_secs(60));
        let mut last_sweep = tokio::time::Instant::now();
        let mut last_storage = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stopping.changed() => return,
            }
            broker.expire_members();
            if last_storage.elapsed() >= Duration::from_secs(1) {
                last_storage = tokio::time::Instant::now();
                // It takes every log's lock in turn: off the async workers.
                let summing = Arc::clone(&broker);
                if let Err(e) = tokio::task::spawn_blocking(move || summing.refresh_storage()).await
                {
                    tracing::warn!(error = %e, "summing the tenants' storage failed");
                }
            }
            if last_sweep.elapsed() >= sweep_every {
                last_sweep = tokio::time::Instant::now();
                broker.expire_idle_state().await;
            }
        }
    })
}

/// Aborts transactions past their timeout and finishes decided ones, every second.
fn spawn_transaction_timeouts(
    broker: Arc<Broker>,
    mut stopping: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stopping.changed() => return,
            }
            broker.tick_transactions().await;
        }
    })
}

/// Runs retention and compaction every `interval`.
fn spawn_maintenance(
    broker: Arc<Broker>,
    interval: Duration,
    mut stopping: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stopping.changed() => return,
            }
            let b = Arc::clone(&broker);
            let Ok(report) = tokio::task::spawn_blocking(move || b.logs().maintain()).await else {
                continue;
            };
            if report.retention.segments_deleted > 0
                || report.compaction.segments_rewritten > 0
                || !report.failed.is_empty()
            {
                tracing::info!(
                    deleted_segments = report.retention.segments_deleted,
                    compacted_segments = report.compaction.segments_rewritten,
                    failed_partitions = report.failed.len(),
                    "maintenance"
                );
            }
        }
    })
}
