//! Broker benchmarks: librdkafka load against Skein and, when given, Tansu, with the
//! references every figure is compared to measured in the same run.
//!
//! - `brokers.rs` starts the brokers under test (Skein in this process, Tansu as a child);
//! - `reference.rs` measures loopback TCP and the log engine's raw append rate;
//! - `workload/` holds the librdkafka workloads (produce, consume, latency, group);
//! - `report.rs` prints the figures and their ratios.

mod brokers;
mod reference;
mod report;
pub mod workload;

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

pub use brokers::{BrokerUnderTest, ChildBroker, SkeinBroker};
pub use report::Report;
pub use workload::{GroupSpec, LatencySpec, ProduceSpec};

/// `skein-bench broker` options.
#[derive(Debug, Clone, Args)]
pub struct BrokerArgs {
    /// The `skein` binary to run Skein from (default: `skein` beside this program; without
    /// one, Skein is served from this process)
    #[arg(long, env = "SKEIN_BENCH_SKEIN")]
    pub skein: Option<PathBuf>,
    /// A Tansu 0.6 binary to measure beside Skein (its memory storage engine)
    #[arg(long, env = "SKEIN_BENCH_TANSU")]
    pub tansu: Option<PathBuf>,
    /// MiB produced in each throughput run
    #[arg(long, default_value_t = 128)]
    pub mib: u64,
    /// Records per second in the latency run
    #[arg(long, default_value_t = 20_000)]
    pub rate: u64,
    /// Seconds the latency run lasts (after one second of warm-up)
    #[arg(long, default_value_t = 10)]
    pub latency_secs: u64,
    /// Consumer groups of two formed per broker to time assignment
    #[arg(long, default_value_t = 5)]
    pub group_trials: u32,
    /// Run only the workloads whose label contains this text (`x16p`, `100 B`, `acks=all`,
    /// `latency`, `group`)
    #[arg(long)]
    pub only: Option<String>,
    /// Skein's data directory (default: a new temporary directory, removed afterwards)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

impl BrokerArgs {
    fn selects(&self, label: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| label.contains(only.as_str()))
    }
}

/// Runs every workload on every broker and prints the report.
pub fn run(args: &BrokerArgs) -> anyhow::Result<()> {
    let report = measure(args)?;
    print!("{report}");
    Ok(())
}

/// Runs every workload on every broker.
pub fn measure(args: &BrokerArgs) -> anyhow::Result<Report> {
    let bytes = args.mib * 1024 * 1024;
    eprintln!("references: loopback TCP, raw log append");
    let loopback = reference::loopback_tcp(bytes.max(1 << 30))?;
    let produce_specs = ProduceSpec::matrix(bytes);
    let mut raw_append = Vec::new();
    for record_bytes in [1024, 100] {
        raw_append.push((record_bytes, reference::raw_append(record_bytes, bytes)?));
    }
    let mut report = Report::new(loopback, raw_append);

    let dir = match &args.dir {
        Some(dir) => tempfile::Builder::new()
            .prefix("skein-bench")
            .tempdir_in(dir)?,
        None => tempfile::Builder::new().prefix("skein-bench").tempdir()?,
    };
    let skein_binary = args.skein.clone().or_else(|| {
        let beside = std::env::current_exe().ok()?.with_file_name("skein");
        beside.is_file().then_some(beside)
    });
    let skein: Box<dyn BrokerUnderTest> = match skein_binary {
        Some(binary) => {
            eprintln!("skein: {}", binary.display());
            Box::new(ChildBroker::skein(&binary, dir.path())?)
        }
        None => {
            eprintln!("skein: served from this process (no skein binary beside this one)");
            Box::new(SkeinBroker::start(dir.path())?)
        }
    };
    let mut brokers = vec![skein];
    if let Some(tansu) = &args.tansu {
        brokers.push(Box::new(ChildBroker::tansu(tansu)?));
    }
    for broker in &brokers {
        let name = broker.name();
        let bootstrap = broker.bootstrap();
        for spec in produce_specs
            .iter()
            .filter(|s| args.selects(&s.to_string()))
        {
            eprintln!("{name}: produce {spec}");
            let topic = spec.topic();
            let produced = workload::produce(&bootstrap, &topic, spec)?;
            report.produce(name, spec, produced);
            if spec.consumed() {
                eprintln!("{name}: consume {spec}");
                let consumed =
                    workload::consume(&bootstrap, &topic, spec.partitions, spec.records)?;
                report.consume(name, spec, consumed);
            }
        }
        if args.selects("latency") {
            let latency_spec = LatencySpec {
                rate: args.rate,
                duration: Duration::from_secs(args.latency_secs),
                warmup: Duration::from_secs(1),
                record_bytes: 1024,
            };
            eprintln!("{name}: latency at {} records/s", args.rate);
            let latency = workload::latency(&bootstrap, "bench-latency", &latency_spec)?;
            report.latency(name, latency);
        }
        for heartbeat_ms in GroupSpec::HEARTBEATS {
            if !args.selects("group") {
                break;
            }
            eprintln!("{name}: group of two, heartbeat {heartbeat_ms} ms");
            let spec = GroupSpec {
                partitions: 6,
                heartbeat_ms,
                trials: args.group_trials,
            };
            report.group(name, spec, workload::group_assignment(&bootstrap, &spec)?);
        }
    }
    Ok(report)
}
