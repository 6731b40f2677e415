//! Recovery: how soon a broker killed with SIGKILL serves every partition again, and what
//! the broker holds in memory with that many partitions holding data.
//!
//! `skein dev` with its data in a new directory gets `--topics` topics sharing
//! `--partitions` partitions, one record written to each; its resident memory is read from
//! `/proc`; it is killed, started again on the same directory, and timed from the new
//! process's start until a librdkafka producer has written one more record to every
//! partition.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::util::Timeout;

use crate::brokers::{BrokerUnderTest, ChildBroker};
use crate::workload::{client_config, send_blocking, CountingContext};

/// `skein-bench recovery` options.
#[derive(Debug, Clone, Args)]
pub struct RecoveryArgs {
    /// The `skein` binary (default: `skein` beside this program)
    #[arg(long, env = "SKEIN_BENCH_SKEIN")]
    pub skein: Option<PathBuf>,
    /// Partitions in all
    #[arg(long, default_value_t = 1000)]
    pub partitions: i32,
    /// Topics they are spread over
    #[arg(long, default_value_t = 100)]
    pub topics: i32,
    /// The broker's data directory (default: a new temporary directory, removed afterwards)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// What one recovery run measured.
#[derive(Debug)]
pub struct RecoveryReport {
    pub partitions: i32,
    /// Resident memory of the broker process with every partition holding a record.
    pub rss_bytes: Option<u64>,
    /// From the restarted process's start to its Kafka port accepting connections.
    pub listening: Duration,
    /// From the restarted process's start to every partition taking a write.
    pub ready: Duration,
}

pub fn run_recovery(args: &RecoveryArgs) -> anyhow::Result<()> {
    let report = measure_recovery(args)?;
    print!("{report}");
    Ok(())
}

pub fn measure_recovery(args: &RecoveryArgs) -> anyhow::Result<RecoveryReport> {
    anyhow::ensure!(
        args.topics >= 1 && args.partitions >= args.topics,
        "at least one partition per topic"
    );
    let binary = crate::cluster::skein_binary(args.skein.as_ref())?;
    let dir = match &args.dir {
        Some(dir) => tempfile::Builder::new()
            .prefix("skein-bench")
            .tempdir_in(dir)?,
        None => tempfile::Builder::new().prefix("skein-bench").tempdir()?,
    };
    let per_topic = args.partitions / args.topics;
    let topics: Vec<(String, i32)> = (0..args.topics)
        .map(|t| {
            let extra = i32::from(t < args.partitions % args.topics);
            (format!("bench-recovery-{t}"), per_topic + extra)
        })
        .collect();
    let broker = ChildBroker::skein(&binary, dir.path())?;
    eprintln!(
        "recovery: {} topics, {} partitions",
        args.topics, args.partitions
    );
    create_topics(&broker.bootstrap(), &topics)?;
    write_everywhere(&broker.bootstrap(), &topics)?;
    let rss_bytes = broker.rss_bytes();
    eprintln!("recovery: SIGKILL, and start again");
    drop(broker);
    let started = Instant::now();
    let broker = ChildBroker::skein(&binary, dir.path())?;
    let listening = started.elapsed();
    write_everywhere(&broker.bootstrap(), &topics)?;
    let ready = started.elapsed();
    drop(broker);
    Ok(RecoveryReport {
        partitions: args.partitions,
        rss_bytes,
        listening,
        ready,
    })
}

fn create_topics(bootstrap: &str, topics: &[(String, i32)]) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for chunk in topics.chunks(25) {
        let new: Vec<NewTopic<'_>> = chunk
            .iter()
            .map(|(name, partitions)| NewTopic::new(name, *partitions, TopicReplication::Fixed(1)))
            .collect();
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(60)));
        for result in runtime.block_on(admin.create_topics(&new, &options))? {
            if let Err((topic, code)) = result {
                bail!("creating {topic}: {code}");
            }
        }
    }
    Ok(())
}

/// Writes one record to every partition and waits until each is acknowledged.
fn write_everywhere(bootstrap: &str, topics: &[(String, i32)]) -> anyhow::Result<()> {
    let context = CountingContext::default();
    let producer: ThreadedProducer<CountingContext> = client_config(bootstrap)
        .set("acks", "1")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "120000")
        .create_with_context(context.clone())?;
    let mut sent = 0u64;
    for (name, partitions) in topics {
        for partition in 0..*partitions {
            let record = BaseRecord::to(name)
                .partition(partition)
                .payload(b"recovery".as_slice());
            send_blocking(&producer, record)?;
            sent += 1;
        }
    }
    producer
        .flush(Timeout::After(Duration::from_secs(120)))
        .context("writing a record to every partition")?;
    let deliveries = &context.0;
    let failed = deliveries.failed.load(std::sync::atomic::Ordering::Relaxed);
    if failed > 0 {
        let first = deliveries.first_error.lock().ok().and_then(|e| e.clone());
        bail!(
            "{failed} of {sent} writes failed: {}",
            first.unwrap_or_default()
        );
    }
    Ok(())
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "recovery of {} partitions after SIGKILL (skein dev)",
            self.partitions
        )?;
        match self.rss_bytes {
            Some(rss) => writeln!(
                f,
                "  broker RSS with every partition holding data: {:.1} MiB",
                rss as f64 / (1024.0 * 1024.0)
            )?,
            None => writeln!(f, "  broker RSS: not readable here")?,
        }
        writeln!(
            f,
            "  restarted process listening after {:.2} s; every partition written after {:.2} s",
            self.listening.as_secs_f64(),
            self.ready.as_secs_f64()
        )
    }
}
