//! The sink runner of one control-plane replica. Every tick it beats in the catalog, takes
//! the live replicas in name order, and deals every running sink's partitions out among
//! them; it starts a worker task for its share of each sink, stops the workers of shares it
//! no longer holds, and reports each partition's position, log end and rates to the
//! catalog. A replica that dies stops beating and its share moves to the others at their
//! next tick; the new owner's claim in the target database fences the old one, so even a
//! replica that was only paused commits nothing once it wakes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use skein_catalog::{Catalog, SinkPartitionReport, SinkRecord};
use skein_client::{Client, ClientConfig, OffsetSpec, SaslPlain};
use skein_sink::{connect_target, SinkError, SinkSpec, SinkStats, SinkWorker};
use tokio::task::JoinHandle;

use super::metrics::{SinkLabels, SinkMetrics};
use super::SinkKey;
use crate::credentials::{mint, NewCredential, Role};

/// How a runner runs.
#[derive(Debug, Clone)]
pub struct SinkRunnerConfig {
    /// This replica's name among the sink runners.
    pub worker: String,
    /// The controller's secret, to log in to brokers that serve every tenant.
    pub controller_secret: Option<Vec<u8>>,
    pub key: Arc<SinkKey>,
    /// Between ticks.
    pub interval: Duration,
    /// A replica that has not beaten for this long is taken for dead.
    pub worker_ttl: Duration,
    /// Where the workers' rows, dead letters, lag and transactions are counted.
    pub metrics: SinkMetrics,
    /// Where sinks may connect.
    pub targets: skein_sink::TargetPolicy,
}

impl SinkRunnerConfig {
    pub fn new(worker: impl Into<String>, key: Arc<SinkKey>) -> Self {
        Self {
            worker: worker.into(),
            controller_secret: None,
            key,
            interval: Duration::from_secs(1),
            worker_ttl: Duration::from_secs(6),
            metrics: SinkMetrics::default(),
            targets: skein_sink::TargetPolicy::default(),
        }
    }
}

/// Partitions of one sink, by topic.
type Share = BTreeMap<String, Vec<i32>>;

/// Per partition: when it was last reported, its rows then, and its rate.
type Rates = BTreeMap<(String, i32), (Instant, u64, f64)>;

/// A worker task of this replica.
struct Running {
    share: Share,
    labels: SinkLabels,
    stats: Arc<SinkStats>,
    /// Rows and dead letters of `stats` already added to the metrics.
    counted: Mutex<(u64, u64)>,
    log_ends: Arc<Mutex<BTreeMap<(String, i32), i64>>>,
    /// Each partition's rows at the last report, and when, for its rate.
    reported: Mutex<Rates>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: JoinHandle<()>,
    /// The error its predecessor stopped on, shown (the sink `failing`) until this worker
    /// applies a row or has run [`RECOVERED_AFTER`] without failing.
    inherited_error: Mutex<Option<String>>,
    started: Instant,
    /// The definition's `updated_at` it runs: a changed sink's workers start over.
    updated_at: i64,
}

/// How long a worker started again after a failure runs without failing before its sink
/// counts as recovered, when it has no record to apply meanwhile.
const RECOVERED_AFTER: Duration = Duration::from_secs(60);

impl Running {
    /// The error to report: this worker's own, else the one it inherited while it has not
    /// shown it is past it.
    fn last_error(&self) -> Option<String> {
        if let Some(own) = self.stats.last_error.lock().clone() {
            return Some(own);
        }
        let mut inherited = self.inherited_error.lock();
        let rows = self.stats.rows.load(std::sync::atomic::Ordering::Relaxed)
            + self
                .stats
                .dead_lettered
                .load(std::sync::atomic::Ordering::Relaxed);
        if rows > 0 || self.started.elapsed() >= RECOVERED_AFTER {
            *inherited = None;
        }
        inherited.clone()
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // A round in progress finishes or is cut off; either way its transaction commits
        // or rolls back as a whole.
        if tokio::time::timeout(Duration::from_secs(5), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Runs sink workers until `stop` resolves.
pub async fn run(
    catalog: Catalog,
    config: SinkRunnerConfig,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut running: HashMap<String, Running> = HashMap::new();
    // When a sink's worker last ended, and on what error, so a failing one is restarted at
    // a bounded pace and its sink shows as failing meanwhile.
    let mut ended: HashMap<String, (Instant, Option<String>)> = HashMap::new();
    let mut ticks = tokio::time::interval(config.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = &mut stop => break,
            _ = ticks.tick() => {}
        }
        if let Err(e) = tick(&catalog, &config, &mut running, &mut ended).await {
            tracing::warn!(error = %e, "the sink runner's tick failed");
        }
    }
    for (_, worker) in running.drain() {
        config.metrics.forget_lag(&worker.labels);
        worker.stop().await;
    }
}

async fn tick(
    catalog: &Catalog,
    config: &SinkRunnerConfig,
    running: &mut HashMap<String, Running>,
    ended: &mut HashMap<String, (Instant, Option<String>)>,
) -> Result<(), skein_catalog::CatalogError> {
    catalog.sink_worker_heartbeat(&config.worker).await?;
    let since = now_ms() - config.worker_ttl.as_millis() as i64;
    let live = catalog.live_sink_workers(since).await?;
    let Some(me) = live.iter().position(|w| *w == config.worker) else {
        return Ok(());
    };
    let mut desired: HashMap<String, (String, SinkRecord, Share)> = HashMap::new();
    let sinks = catalog.all_sinks().await?;
    let existing: HashSet<(String, String)> = sinks
        .iter()
        .map(|(tenant, record)| (tenant.clone(), record.name.clone()))
        .collect();
    for (tenant, record) in sinks {
        if record.paused {
            continue;
        }
        let Ok(spec) = serde_json::from_str::<SinkSpec>(&record.spec) else {
            continue;
        };
        let mut all = Vec::new();
        for topic in &spec.topics {
            // A topic deleted since leaves its partitions out.
            if let Ok(found) = catalog.topic(&record.tenant_id, topic).await {
                all.extend((0..found.partitions).map(|p| (topic.clone(), p)));
            }
        }
        // Dealt out from an offset that differs by sink, so one replica does not get
        // every sink's first partition.
        let offset = record.id.bytes().map(usize::from).sum::<usize>();
        let mut share = Share::new();
        for (index, (topic, partition)) in all.into_iter().enumerate() {
            if (index + offset) % live.len() == me {
                share.entry(topic).or_default().push(partition);
            }
        }
        if !share.is_empty() {
            desired.insert(record.id.clone(), (tenant, record, share));
        }
    }

    // Stop what is no longer ours, or whose share changed, or that ended.
    let ids: Vec<String> = running.keys().cloned().collect();
    for id in ids {
        let keep = match (desired.get(&id), running.get(&id)) {
            (Some((_, record, share)), Some(worker)) => {
                *share == worker.share
                    && !worker.task.is_finished()
                    && worker.updated_at == record.updated_at
            }
            _ => false,
        };
        if !keep {
            if let Some(worker) = running.remove(&id) {
                if worker.task.is_finished() {
                    ended.insert(id.clone(), (Instant::now(), worker.last_error()));
                }
                report(catalog, config, &id, &worker).await;
                config.metrics.forget_lag(&worker.labels);
                worker.stop().await;
            }
        }
    }
    for (id, (tenant, record, share)) in desired {
        if running.contains_key(&id) {
            continue;
        }
        if ended
            .get(&id)
            .is_some_and(|(at, _)| at.elapsed() < Duration::from_secs(3))
        {
            continue;
        }
        let inherited = ended.remove(&id).and_then(|(_, error)| error);
        running.insert(id, start(catalog, config, tenant, record, share, inherited));
    }
    for (id, worker) in running.iter() {
        report(catalog, config, id, worker).await;
    }
    // After the workers of deleted sinks have stopped and reported, their series go.
    config
        .metrics
        .retain_sinks(|tenant, sink| existing.contains(&(tenant.to_owned(), sink.to_owned())));
    Ok(())
}

fn start(
    catalog: &Catalog,
    config: &SinkRunnerConfig,
    tenant: String,
    record: SinkRecord,
    share: Share,
    inherited_error: Option<String>,
) -> Running {
    let labels = config.metrics.labels(&tenant, &record.name);
    let updated_at = record.updated_at;
    let stats = Arc::new(SinkStats::timed(
        config.metrics.transaction_histogram(&labels),
    ));
    let log_ends = Arc::new(Mutex::new(BTreeMap::new()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn({
        let (catalog, config, share) = (catalog.clone(), config.clone(), share.clone());
        let (stats, log_ends) = (Arc::clone(&stats), Arc::clone(&log_ends));
        async move {
            let sink = record.name.clone();
            let outcome = work(
                &catalog, &config, &tenant, record, &share, &stats, &log_ends, stopped,
            )
            .await;
            if let Err(e) = outcome {
                tracing::warn!(tenant = %tenant, sink = %sink, error = %e, "a sink worker stopped");
                *stats.last_error.lock() = Some(e.to_string());
            }
        }
    });
    Running {
        share,
        labels,
        stats,
        counted: Mutex::new((0, 0)),
        log_ends,
        reported: Mutex::new(BTreeMap::new()),
        stop: Some(stop),
        task,
        inherited_error: Mutex::new(inherited_error),
        started: Instant::now(),
        updated_at,
    }
}

/// A Kafka client for `tenant`'s brokers, as the catalog lists the live ones.
async fn tenant_client(
    catalog: &Catalog,
    config: &SinkRunnerConfig,
    tenant: &str,
) -> Result<Client, SinkError> {
    let brokers = catalog
        .live_brokers(now_ms() - 30_000)
        .await
        .map_err(|e| SinkError::Invalid(format!("the catalog: {e}")))?;
    let own: Vec<String> = brokers
        .iter()
        .filter(|b| b.tenant.as_deref() == Some(tenant))
        .map(|b| format!("{}:{}", b.host, b.port))
        .collect();
    let (addresses, shared) = if own.is_empty() {
        let shared: Vec<String> = brokers
            .iter()
            .filter(|b| b.tenant.is_none())
            .map(|b| format!("{}:{}", b.host, b.port))
            .collect();
        (shared, true)
    } else {
        (own, false)
    };
    if addresses.is_empty() {
        return Err(SinkError::Client(
            skein_client::ClientError::InvalidArgument {
                reason: format!("no live broker serves tenant {tenant}"),
            },
        ));
    }
    let mut client_config = ClientConfig::new(addresses);
    client_config.client_id = "skein-sink".to_owned();
    if shared {
        let credential = config
            .controller_secret
            .as_deref()
            .and_then(|secret| {
                mint(
                    secret,
                    &NewCredential {
                        name: format!("sinks-{}", config.worker),
                        role: Role::Gateway,
                        tenants: vec![crate::credentials::ANY_TENANT.to_owned()],
                        acl_changes: false,
                        node: None,
                        valid_for: Duration::from_secs(24 * 3600),
                    },
                )
            })
            .ok_or_else(|| {
                SinkError::Invalid(
                    "the tenant's brokers serve every tenant, and this control plane has no \
                     controller secret to log in to them with"
                        .to_owned(),
                )
            })?;
        client_config.sasl_plain = Some(SaslPlain {
            authorization_id: tenant.to_owned(),
            username: skein_proto::GATEWAY_SASL_USER.to_owned(),
            password: credential,
        });
    }
    Ok(Client::connect(client_config).await?)
}

#[allow(clippy::too_many_arguments)]
async fn work(
    catalog: &Catalog,
    config: &SinkRunnerConfig,
    tenant: &str,
    record: SinkRecord,
    share: &Share,
    stats: &Arc<SinkStats>,
    log_ends: &Arc<Mutex<BTreeMap<(String, i32), i64>>>,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> Result<(), SinkError> {
    let spec: SinkSpec = serde_json::from_str(&record.spec)
        .map_err(|e| SinkError::Invalid(format!("the stored definition: {e}")))?;
    let url = config
        .key
        .open(&record.id, &record.target_sealed)
        .map_err(|e| SinkError::Invalid(format!("the target database's URL: {e}")))?;
    let pool = connect_target(&url, 2, &config.targets).await?;
    let client = tenant_client(catalog, config, tenant).await?;
    // Positions are kept under the tenant's name and the sink's, so sinks of two tenants
    // with one name, writing into one database, never share them.
    let positions = format!("{tenant}.{}", record.name);
    let worker = SinkWorker::start_as(
        &positions,
        client.clone(),
        pool,
        spec,
        share,
        Arc::clone(stats),
    )
    .await?;
    tracing::info!(tenant = %tenant, sink = %record.name, partitions = ?share, "sink worker started");
    // The log end offsets, for the lag in the sink's status.
    let watcher = tokio::spawn({
        let (share, log_ends) = (share.clone(), Arc::clone(log_ends));
        async move {
            loop {
                for (topic, partitions) in &share {
                    for &partition in partitions {
                        if let Ok(Some(end)) = client
                            .list_offset(topic, partition, OffsetSpec::Latest)
                            .await
                        {
                            log_ends
                                .lock()
                                .insert((topic.clone(), partition), end.offset);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    });
    let outcome = worker
        .run(async move {
            let _ = stop.await;
        })
        .await;
    watcher.abort();
    outcome
}

/// Writes each partition's figures of `worker` to the catalog, and its totals to the
/// metrics.
async fn report(catalog: &Catalog, config: &SinkRunnerConfig, sink_id: &str, worker: &Running) {
    let positions = worker.stats.positions.lock().clone();
    let log_ends = worker.log_ends.lock().clone();
    let counts = worker.stats.counts.lock().clone();
    let last_error = worker.last_error();
    {
        use std::sync::atomic::Ordering;
        let rows = worker.stats.rows.load(Ordering::Relaxed);
        let dead_lettered = worker.stats.dead_lettered.load(Ordering::Relaxed);
        let mut counted = worker.counted.lock();
        config.metrics.counted(
            &worker.labels,
            rows.saturating_sub(counted.0),
            dead_lettered.saturating_sub(counted.1),
        );
        *counted = (rows, dead_lettered);
        let lag: i64 = positions
            .iter()
            .filter_map(|(key, next)| Some((log_ends.get(key)? - next).max(0)))
            .sum();
        config.metrics.set_lag(&worker.labels, lag);
    }
    for (topic, owned) in &worker.share {
        for &partition in owned {
            let key = (topic.clone(), partition);
            let count = counts.get(&key).copied().unwrap_or_default();
            let rate = {
                let mut reported = worker.reported.lock();
                let now = Instant::now();
                let rate = match reported.get(&key) {
                    Some((at, rows, rate)) => {
                        let elapsed = now.duration_since(*at).as_secs_f64();
                        if elapsed < 0.5 {
                            *rate
                        } else {
                            count.rows.saturating_sub(*rows) as f64 / elapsed
                        }
                    }
                    None => 0.0,
                };
                if reported
                    .get(&key)
                    .is_none_or(|(at, _, _)| now.duration_since(*at).as_secs_f64() >= 0.5)
                {
                    reported.insert(key.clone(), (now, count.rows, rate));
                }
                rate
            };
            let report = SinkPartitionReport {
                topic: topic.clone(),
                partition: i64::from(partition),
                worker: config.worker.clone(),
                next_offset: positions.get(&key).copied(),
                log_end_offset: log_ends.get(&key).copied(),
                rows_applied: count.rows as i64,
                rows_per_sec: rate,
                dead_lettered: count.dead_lettered as i64,
                last_error: last_error.clone(),
                reported_at: now_ms(),
            };
            if let Err(e) = catalog.report_sink_partition(sink_id, &report).await {
                tracing::warn!(error = %e, "failed to report a sink partition");
            }
        }
    }
}
