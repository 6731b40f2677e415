//! Broker benchmarks: librdkafka load against Skein and, when given, Tansu, with the
//! references every figure is compared to measured in the same run; and Skein's gateway
//! (REST and gRPC) beside librdkafka moving the same records.
//!
//! - `brokers.rs` starts the brokers under test (Skein as `skein dev` with its gateway, or in
//!   this process; Tansu as a child);
//! - `reference.rs` measures loopback TCP and the log engine's raw append rate;
//! - `workload/` holds the librdkafka workloads (produce, consume, latency, group) and the
//!   gateway's (`gateway.rs`);
//! - `report.rs` prints the figures and their ratios;
//! - `secured.rs` compares a SASL_SSL listener with a PLAINTEXT one on the same broker;
//! - `cluster.rs` measures a three-broker cluster: replicated against unreplicated writes,
//!   and failover time over repeated leader kills;
//! - `sink.rs` measures a sink into PostgreSQL beside a batched COPY of the same rows;
//! - `recovery.rs` times a killed broker's return with many partitions, and its memory.

mod brokers;
mod cluster;
mod recovery;
mod reference;
mod report;
mod secured;
mod sink;
pub mod workload;

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

pub use brokers::{BrokerUnderTest, ChildBroker, SkeinBroker};
pub use cluster::{measure_cluster, run_cluster, ClusterArgs, ClusterReport};
pub use recovery::{measure_recovery, run_recovery, RecoveryArgs, RecoveryReport};
pub use report::{
    CpuRow, GatewayRow, Report, TxnRow, Work, GRPC_PRODUCE_TARGET, TRANSACTIONAL_TARGET,
};
pub use secured::{
    Measured, SecuredRow, SecuredWorkload, SASL_SSL_TARGET, SECURED_PRODUCERS, SECURED_ROUNDS,
};
pub use sink::{measure_sink, run_sink, SinkArgs, SinkReport, SINK_TARGET};
pub use workload::{
    GatewayAccess, GatewayApi, GatewayRun, GatewaySpec, GroupSpec, LatencySpec, ProduceSpec,
    TxnSpec,
};

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
    /// Records of each size (1 KiB, 100 B) in each gateway run and its native comparison
    #[arg(long, default_value_t = 300_000)]
    pub gateway_records: u64,
    /// Run only the workloads whose label contains this text (`x16p`, `100 B`, `acks=all`,
    /// `replay`, `librdkafka`, `latency`, `group`, `gateway`, `REST`, `gRPC`,
    /// `gRPC produce`, `SASL_SSL`, `transactions`)
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
    let skein: Box<dyn BrokerUnderTest> = match &skein_binary {
        Some(binary) => {
            eprintln!("skein: {}", binary.display());
            Box::new(ChildBroker::skein(binary, dir.path())?)
        }
        None => {
            eprintln!("skein: served from this process (no skein binary beside this one)");
            Box::new(SkeinBroker::start(dir.path())?)
        }
    };
    if let (Some(binary), true) = (&skein_binary, args.selects("SASL_SSL")) {
        report.secured(secured::measure_secured(binary, dir.path(), bytes)?);
    }
    let mut brokers = vec![skein];
    if let Some(tansu) = &args.tansu {
        brokers.push(Box::new(ChildBroker::tansu(tansu)?));
    }
    for broker in &brokers {
        let name = broker.name();
        let bootstrap = broker.bootstrap();
        for spec in &produce_specs {
            let topic = spec.topic();
            if args.selects(&format!("librdkafka {spec}")) {
                eprintln!("{name}: produce {spec}");
                let before = broker.cpu_time();
                let produced = workload::produce(&bootstrap, &topic, spec)?;
                report.produce(name, spec, produced);
                report.cpu(broker.as_ref(), before, Work::Produce, spec, &produced);
                if spec.consumed() {
                    eprintln!("{name}: consume {spec}");
                    let before = broker.cpu_time();
                    let consumed =
                        workload::consume(&bootstrap, &topic, spec.partitions, spec.records)?;
                    report.consume(name, spec, consumed);
                    report.cpu(broker.as_ref(), before, Work::Consume, spec, &consumed);
                }
            }
            if args.selects(&format!("replay {spec}")) {
                let topic = format!("{topic}-replay");
                eprintln!("{name}: replayed produce {spec}");
                let before = broker.cpu_time();
                let produced = workload::replay_produce(&bootstrap, &topic, spec)?;
                report.cpu(
                    broker.as_ref(),
                    before,
                    Work::ReplayProduce,
                    spec,
                    &produced,
                );
                report.replayed_produce(name, spec, produced);
                if spec.consumed() {
                    eprintln!("{name}: replayed fetch {spec}");
                    let before = broker.cpu_time();
                    let read = workload::replay_fetch(
                        &bootstrap,
                        &topic,
                        spec.partitions,
                        spec.record_bytes,
                        produced.records,
                    )?;
                    report.cpu(broker.as_ref(), before, Work::ReplayFetch, spec, &read);
                    report.replayed_fetch(name, spec, read);
                }
            }
        }
        for txn_spec in TxnSpec::matrix(bytes)
            .into_iter()
            .filter(|s| name == "skein" && args.selects(&s.to_string()))
        {
            eprintln!("{name}: {txn_spec}, and idempotent for reference");
            let suffix = format!("{}x", txn_spec.producers);
            let idempotent = workload::produce_idempotent(
                &bootstrap,
                &format!("bench-idempotent-{suffix}"),
                &txn_spec,
            )?;
            let transactional = workload::produce_transactional(
                &bootstrap,
                &format!("bench-transactional-{suffix}"),
                &txn_spec,
            )?;
            report.transactions(TxnRow {
                broker: name,
                spec: txn_spec,
                transactional,
                idempotent,
            });
        }
        if let Some(gateway) = broker.gateway() {
            for spec in GatewaySpec::matrix(args.gateway_records) {
                measure_gateway(&mut report, name, &bootstrap, gateway, &spec, args)?;
            }
        }
        if args.selects("latency") {
            let latency_spec = LatencySpec {
                rate: args.rate,
                duration: Duration::from_secs(args.latency_secs),
                warmup: Duration::from_secs(1),
                record_bytes: 1024,
                acks: 1,
                replication: 1,
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

/// The gateway workloads `args` selects for one record size, each beside librdkafka moving
/// the same records through the Kafka listener: producing them with acks=all to a topic of
/// its own, and consuming that topic (which gRPC consume then reads too).
fn measure_gateway(
    report: &mut Report,
    name: &'static str,
    bootstrap: &str,
    gateway: &GatewayAccess,
    spec: &GatewaySpec,
    args: &BrokerArgs,
) -> anyhow::Result<()> {
    let apis: Vec<GatewayApi> = GatewayApi::ALL
        .into_iter()
        .filter(|api| args.selects(&api.label(spec)))
        .collect();
    if apis.is_empty() {
        return Ok(());
    }
    let native_topic = spec.topic("kafka");
    eprintln!("{name}: produce {spec} with librdkafka, acks=all, for the gateway");
    let native_produced = workload::produce(
        bootstrap,
        &native_topic,
        &ProduceSpec {
            acks: -1,
            record_bytes: spec.record_bytes,
            partitions: 1,
            records: spec.records,
            replication: 1,
        },
    )?;
    for api in apis {
        let (run, native, native_to_first) = match api {
            GatewayApi::RestProduce | GatewayApi::GrpcProduce => {
                eprintln!("{name}: {}", api.label(spec));
                let run = if api == GatewayApi::RestProduce {
                    workload::rest_produce(bootstrap, gateway, &spec.topic("rest"), spec)?
                } else {
                    workload::grpc_produce(bootstrap, gateway, &spec.topic("grpc"), spec)?
                };
                (run, native_produced, None)
            }
            GatewayApi::GrpcConsume => {
                eprintln!("{name}: consume {spec} with librdkafka, for the gateway");
                let native = workload::read_back(bootstrap, &native_topic, 1, spec.records)?;
                eprintln!("{name}: {}", api.label(spec));
                let read = workload::grpc_consume(gateway, &native_topic, spec.records)?;
                anyhow::ensure!(
                    read.bytes == native.bytes,
                    "gRPC consume read {} bytes, librdkafka {}",
                    read.bytes,
                    native.bytes
                );
                // Both from their first record on: librdkafka takes about half a second from
                // assign() to its first fetch, which would otherwise swamp the comparison.
                let run = GatewayRun {
                    throughput: read.after_first(),
                    latency: None,
                    to_first: Some(read.to_first),
                };
                (run, native.after_first(), Some(native.to_first))
            }
        };
        report.gateway(GatewayRow {
            broker: name,
            api,
            spec: *spec,
            gateway: run,
            native,
            native_to_first,
        });
    }
    Ok(())
}
