//! `skein-bench cluster`: Skein as a three-broker cluster (`skein dev --brokers 3`, default
//! timeouts). Produce throughput and end-to-end latency with `acks=all` on three replicas
//! (`min.insync.replicas=2`) beside `acks=1` on one replica, measured in the same run on the
//! same brokers; then failover time: a partition leader is killed with SIGKILL, again and
//! again, while an idempotent `acks=all` producer keeps writing, and each kill's time to the
//! first successful produce to that partition is recorded.
//!
//! Failover time is governed by the broker session (`--broker-session-ms` of the control
//! plane, 6 s by default; Kafka's `broker.session.timeout.ms`): a broker is taken for gone
//! only once it has missed its heartbeats for that long.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::util::Timeout;
use rdkafka::ClientContext;

use crate::brokers::{BrokerUnderTest, ChildBroker};
use crate::workload::{self, client_config, create_replicated_topic, Latency, LatencySpec};
use crate::workload::{ProduceSpec, Throughput};

/// `skein-bench cluster` options.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// The `skein` binary (default: `skein` beside this program)
    #[arg(long, env = "SKEIN_BENCH_SKEIN")]
    pub skein: Option<PathBuf>,
    /// MiB produced in each throughput run
    #[arg(long, default_value_t = 64)]
    pub mib: u64,
    /// Partitions of the throughput runs' topics
    #[arg(long, default_value_t = 6)]
    pub partitions: i32,
    /// Records per second in the latency runs
    #[arg(long, default_value_t = 5_000)]
    pub rate: u64,
    /// Seconds each latency run lasts (after one second of warm-up)
    #[arg(long, default_value_t = 10)]
    pub latency_secs: u64,
    /// Partition leaders killed in the failover run
    #[arg(long, default_value_t = 20)]
    pub kills: usize,
    /// The cluster's data directory (default: a new temporary directory, removed afterwards)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// What one cluster run measured.
#[derive(Debug)]
pub struct ClusterReport {
    /// (spec, throughput): acks=1 RF=1 first, then acks=all RF=3.
    pub produce: Vec<(ProduceSpec, Throughput)>,
    pub latency: Vec<Latency>,
    /// Each kill's time from SIGKILL to the first successful produce to the partition.
    pub failovers: Vec<Duration>,
}

impl ClusterReport {
    /// acks=all RF=3 throughput as a share of acks=1 RF=1's.
    pub fn replicated_ratio(&self) -> Option<f64> {
        let single = self.produce.iter().find(|(s, _)| s.replication == 1)?;
        let replicated = self.produce.iter().find(|(s, _)| s.replication > 1)?;
        Some(replicated.1.mib_per_sec() / single.1.mib_per_sec())
    }
}

/// Runs the cluster workloads and prints the report.
pub fn run_cluster(args: &ClusterArgs) -> anyhow::Result<()> {
    let report = measure_cluster(args)?;
    print!("{report}");
    Ok(())
}

/// Starts `skein dev --brokers 3` and measures it.
pub fn measure_cluster(args: &ClusterArgs) -> anyhow::Result<ClusterReport> {
    let binary = skein_binary(args.skein.as_ref())?;
    let dir = match &args.dir {
        Some(dir) => tempfile::Builder::new()
            .prefix("skein-bench")
            .tempdir_in(dir)?,
        None => tempfile::Builder::new().prefix("skein-bench").tempdir()?,
    };
    eprintln!("cluster: {} dev --brokers 3", binary.display());
    let cluster = ChildBroker::skein_with(&binary, dir.path(), &["--brokers", "3"])?;
    let bootstrap = cluster.bootstrap();
    wait_for_brokers(&bootstrap, 3)?;

    let mut report = ClusterReport {
        produce: Vec::new(),
        latency: Vec::new(),
        failovers: Vec::new(),
    };
    let records = (args.mib * 1024 * 1024 / 1024).max(1);
    for (acks, replication) in [(1, 1), (-1, 3)] {
        let spec = ProduceSpec {
            acks,
            record_bytes: 1024,
            partitions: args.partitions,
            records,
            replication,
        };
        eprintln!("cluster: produce {spec}");
        let topic = format!("bench-cluster-rf{replication}");
        report
            .produce
            .push((spec, workload::produce(&bootstrap, &topic, &spec)?));
    }
    // acks=all RF=3 against acks=1 RF=1, with the two halves of the difference between them:
    // acks=all alone, and replication alone (a consumer reads only what the ISR has).
    for (acks, replication) in [(1, 1), (-1, 1), (1, 3), (-1, 3)] {
        let spec = LatencySpec {
            rate: args.rate,
            duration: Duration::from_secs(args.latency_secs),
            warmup: Duration::from_secs(1),
            record_bytes: 1024,
            acks,
            replication,
        };
        eprintln!(
            "cluster: latency at {} records/s, {}",
            args.rate,
            spec_label(acks, replication)
        );
        let topic = format!("bench-cluster-latency-{}-rf{replication}", -acks);
        report
            .latency
            .push(workload::latency(&bootstrap, &topic, &spec)?);
    }
    if args.kills > 0 {
        report.failovers = failovers(&bootstrap, dir.path(), args.kills)?;
    }
    drop(cluster);
    Ok(report)
}

/// The `skein` binary given, or the one beside this program.
pub(crate) fn skein_binary(given: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    given
        .cloned()
        .or_else(|| {
            let beside = std::env::current_exe().ok()?.with_file_name("skein");
            beside.is_file().then_some(beside)
        })
        .context("this runs `skein dev`: give --skein")
}

/// `acks=all RF=3`, as the report says it.
fn spec_label(acks: i16, replication: i32) -> String {
    let acks = if acks < 0 {
        "all".to_owned()
    } else {
        acks.to_string()
    };
    format!("acks={acks} RF={replication}")
}

/// Waits until metadata lists `count` brokers.
fn wait_for_brokers(bootstrap: &str, count: usize) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = admin
            .inner()
            .fetch_metadata(None, Duration::from_secs(5))
            .map(|m| m.brokers().len())
            .unwrap_or(0);
        if seen >= count {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the cluster shows {seen} of {count} brokers after 60 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

const FAILOVER_TOPIC: &str = "bench-failover";
const FAILOVER_PARTITIONS: i32 = 6;

/// Each delivery: (partition, sent at, delivered at, succeeded).
type Deliveries = Arc<Mutex<Vec<(i32, Instant, Instant, bool)>>>;

#[derive(Clone)]
struct Timed(Deliveries);

impl ClientContext for Timed {}

impl ProducerContext for Timed {
    type DeliveryOpaque = Box<Instant>;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: Self::DeliveryOpaque) {
        let now = Instant::now();
        let (partition, ok) = match result {
            Ok(message) => (message.partition(), true),
            Err((_, message)) => (message.partition(), false),
        };
        if let Ok(mut all) = self.0.lock() {
            all.push((partition, *sent, now, ok));
        }
    }
}

/// Kills a partition leader `kills` times (one of the child brokers: broker 0 runs in
/// `skein dev` itself, beside the controller) while a producer writes to every partition,
/// waiting before each kill until every partition has its three replicas in sync again.
fn failovers(bootstrap: &str, dir: &Path, kills: usize) -> anyhow::Result<Vec<Duration>> {
    create_replicated_topic(bootstrap, FAILOVER_TOPIC, FAILOVER_PARTITIONS, 3)?;
    let deliveries: Deliveries = Arc::default();
    let producer: ThreadedProducer<Timed> = client_config(bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "120000")
        .create_with_context(Timed(Arc::clone(&deliveries)))?;
    let producer = Arc::new(producer);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let producer = Arc::clone(&producer);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let value = workload::payload(100);
            let mut partition = 0;
            while !stop.load(Ordering::Relaxed) {
                let record: BaseRecord<'_, (), [u8], Box<Instant>> =
                    BaseRecord::with_opaque_to(FAILOVER_TOPIC, Box::new(Instant::now()))
                        .partition(partition)
                        .payload(&value[..]);
                // A full queue while a leader is away drops this one; the next follows.
                let _ = producer.send(record);
                partition = (partition + 1) % FAILOVER_PARTITIONS;
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create()?;
    let mut times = Vec::new();
    for kill in 0..kills {
        let leaders = wait_for_full_isr(&admin)?;
        // Alternate between the two child brokers, where each leads something.
        let wanted = 1 + (kill % 2) as i32;
        let Some((&partition, &victim)) = leaders
            .iter()
            .find(|(_, leader)| **leader == wanted)
            .or_else(|| leaders.iter().find(|(_, leader)| **leader > 0))
        else {
            bail!("no partition is led by a child broker: {leaders:?}");
        };
        let pid = child_pid(&dir.join(format!("broker-{victim}")))
            .with_context(|| format!("broker {victim}'s process"))?;
        let status = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill -9 {pid} failed");
        // Once kill(1) returns the signal is delivered: records sent from here on cannot
        // reach the dead leader.
        let killed = Instant::now();
        let deadline = killed + Duration::from_secs(120);
        let failover = loop {
            let first = deliveries.lock().ok().and_then(|all| {
                all.iter()
                    .filter(|(p, sent, _, ok)| *p == partition && *ok && *sent >= killed)
                    .map(|(_, _, at, _)| *at)
                    .min()
            });
            if let Some(at) = first {
                break at - killed;
            }
            if Instant::now() > deadline {
                bail!("partition {partition} took no write for 120 s after broker {victim} died");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        eprintln!(
            "cluster: kill {}/{kills}: broker {victim} (leader of partition {partition}): first produce after {:.2} s",
            kill + 1,
            failover.as_secs_f64()
        );
        times.push(failover);
        if let Ok(mut all) = deliveries.lock() {
            all.clear();
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("the failover producer panicked"))?;
    producer.flush(Timeout::After(Duration::from_secs(60)))?;
    Ok(times)
}

/// Waits (up to 120 s) until every partition of the failover topic has three in-sync
/// replicas and is led by its preferred replica (so leadership is not about to move back
/// on its own); answers partition -> leader.
fn wait_for_full_isr(
    admin: &AdminClient<DefaultClientContext>,
) -> anyhow::Result<BTreeMap<i32, i32>> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(metadata) = admin
            .inner()
            .fetch_metadata(Some(FAILOVER_TOPIC), Duration::from_secs(5))
        {
            let leaders: Option<BTreeMap<i32, i32>> = metadata
                .topics()
                .iter()
                .find(|t| t.name() == FAILOVER_TOPIC)
                .map(|t| {
                    t.partitions()
                        .iter()
                        .filter(|p| p.isr().len() == 3 && p.replicas().first() == Some(&p.leader()))
                        .map(|p| (p.id(), p.leader()))
                        .collect()
                });
            if let Some(leaders) = leaders.filter(|l| l.len() == FAILOVER_PARTITIONS as usize) {
                return Ok(leaders);
            }
        }
        if Instant::now() > deadline {
            bail!("the failover topic's ISRs did not fill within 120 s");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The process whose command line names `data_dir` (a child broker of `skein dev`).
fn child_pid(data_dir: &Path) -> anyhow::Result<u32> {
    let wanted = data_dir.as_os_str().as_encoded_bytes();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for entry in std::fs::read_dir("/proc")?.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            if cmdline.split(|b| *b == 0).any(|arg| arg == wanted) {
                return Ok(pid);
            }
        }
        if Instant::now() > deadline {
            bail!("no process runs on {}", data_dir.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value at quantile `q` of sorted `times` (nearest rank).
fn quantile(times: &[Duration], q: f64) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * times.len() as f64).ceil() as usize).clamp(1, times.len());
    times[rank - 1]
}

impl fmt::Display for ClusterReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "three-broker cluster (skein dev --brokers 3), same run")?;
        writeln!(f, "{:<28} {:>10} {:>12}", "produce", "MiB/s", "records/s")?;
        for (spec, throughput) in &self.produce {
            writeln!(
                f,
                "{:<28} {:>10.1} {:>12.0}",
                spec.to_string(),
                throughput.mib_per_sec(),
                throughput.records_per_sec()
            )?;
        }
        if let Some(ratio) = self.replicated_ratio() {
            writeln!(
                f,
                "acks=all RF=3 / acks=1 RF=1: {ratio:.2} (target at least 0.40)"
            )?;
        }
        writeln!(
            f,
            "{:<28} {:>10} {:>10} {:>10} {:>10}",
            "latency (1 KiB)", "p50 ms", "p99 ms", "p99.9 ms", "max ms"
        )?;
        for latency in &self.latency {
            let ms = |d: Duration| d.as_secs_f64() * 1000.0;
            let label = format!(
                "{} at {}/s",
                spec_label(latency.spec.acks, latency.spec.replication),
                latency.spec.rate
            );
            writeln!(
                f,
                "{label:<28} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
                ms(latency.p50),
                ms(latency.p99),
                ms(latency.p999),
                ms(latency.max)
            )?;
        }
        if !self.failovers.is_empty() {
            let mut sorted = self.failovers.clone();
            sorted.sort();
            let s = |d: Duration| d.as_secs_f64();
            writeln!(
                f,
                "failover over {} leader kills (SIGKILL to first acks=all produce): min {:.2} s, p50 {:.2} s, p90 {:.2} s, p99 {:.2} s, max {:.2} s (target p99 under 10 s; governed by the broker session, --broker-session-ms, 6 s by default)",
                sorted.len(),
                s(sorted[0]),
                s(quantile(&sorted, 0.5)),
                s(quantile(&sorted, 0.9)),
                s(quantile(&sorted, 0.99)),
                s(sorted[sorted.len() - 1]),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let times: Vec<Duration> = (1..=20).map(Duration::from_secs).collect();
        assert_eq!(quantile(&times, 0.5), Duration::from_secs(10));
        assert_eq!(quantile(&times, 0.99), Duration::from_secs(20));
        assert_eq!(quantile(&times, 0.0), Duration::from_secs(1));
        assert_eq!(quantile(&[], 0.5), Duration::ZERO);
    }
}
