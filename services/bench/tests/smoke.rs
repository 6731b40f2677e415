//! The benchmark's workloads run end to end against Skein at a small scale: every record
//! produced is delivered and read back, the latency run samples every record after its
//! warm-up, and a group of two splits its partitions; through the gateway of `skein dev`,
//! every record written over REST and gRPC is reported and gRPC reads back every record
//! librdkafka wrote. No timing is asserted.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::Duration;

use skein_bench::{
    measure_cluster, measure_recovery, workload, BrokerUnderTest, ChildBroker, ClusterArgs,
    GatewaySpec, LatencySpec, ProduceSpec, RecoveryArgs, SkeinBroker, TxnSpec,
};

#[test]
fn every_workload_moves_every_record_through_skein() {
    let dir = tempfile::tempdir().unwrap();
    let broker = SkeinBroker::start(dir.path()).unwrap();
    let bootstrap = broker.bootstrap();

    let specs = ProduceSpec::matrix(256 * 1024);
    assert_eq!(specs.len(), 8, "acks x record size x partitions");
    for spec in &specs {
        let topic = spec.topic();
        let produced = workload::produce(&bootstrap, &topic, spec).unwrap();
        assert_eq!(produced.records, spec.records, "{spec}");
        if spec.consumed() {
            let consumed =
                workload::consume(&bootstrap, &topic, spec.partitions, spec.records).unwrap();
            assert_eq!(consumed.records, spec.records, "{spec}");
            assert_eq!(consumed.bytes, produced.bytes, "{spec}");
        }
        // The replayed load: whole pre-encoded batches, at least the records asked for, and
        // the replayed fetch reads every one of them back.
        let topic = format!("{topic}-replay");
        let replayed = workload::replay_produce(&bootstrap, &topic, spec).unwrap();
        assert!(replayed.records >= spec.records, "{spec}: {replayed:?}");
        if spec.consumed() {
            let read = workload::replay_fetch(
                &bootstrap,
                &topic,
                spec.partitions,
                spec.record_bytes,
                replayed.records,
            )
            .unwrap();
            assert_eq!(read.records, replayed.records, "{spec}");
        }
    }

    let spec = LatencySpec {
        rate: 2000,
        duration: Duration::from_secs(1),
        warmup: Duration::from_millis(500),
        record_bytes: 100,
        acks: 1,
        replication: 1,
    };
    let latency = workload::latency(&bootstrap, "latency", &spec).unwrap();
    assert_eq!(latency.samples, 2000);
    assert!(latency.p50 <= latency.p99 && latency.p99 <= latency.max);

    let group = workload::GroupSpec {
        partitions: 6,
        heartbeat_ms: 100,
        trials: 1,
    };
    let times = workload::group_assignment(&bootstrap, &group).unwrap();
    assert_eq!(times.len(), 1);

    // Transactions of 100 records from four producers, every one committed: a
    // read_committed consumer (librdkafka's default) reads them all back.
    let txn = TxnSpec {
        records: 1000,
        ..TxnSpec::standard(0)
    };
    let transactional = workload::produce_transactional(&bootstrap, "txn", &txn).unwrap();
    let idempotent = workload::produce_idempotent(&bootstrap, "idempotent", &txn).unwrap();
    assert_eq!(transactional.records, idempotent.records);
    let back = workload::read_back(&bootstrap, "txn", txn.partitions, txn.records).unwrap();
    assert_eq!(back.bytes, transactional.bytes);
}

/// A killed `skein dev` with a few hundred partitions comes back, every partition takes a
/// write again, and its memory and CPU time are read from `/proc`.
#[test]
fn the_recovery_workload_restarts_a_killed_dev_broker() {
    let report = measure_recovery(&RecoveryArgs {
        skein: Some(skein_binary()),
        partitions: 200,
        topics: 20,
        dir: None,
    })
    .unwrap();
    assert_eq!(report.partitions, 200);
    assert!(report.rss_bytes.is_some_and(|rss| rss > 0));
    assert!(report.listening <= report.ready);
    assert!(report.to_string().contains("every partition written after"));

    let dir = tempfile::tempdir().unwrap();
    let broker = ChildBroker::skein(&skein_binary(), dir.path()).unwrap();
    let before = broker.cpu_time().unwrap();
    let spec = ProduceSpec {
        acks: 1,
        record_bytes: 100,
        partitions: 2,
        records: 20_000,
        replication: 1,
    };
    workload::replay_produce(&broker.bootstrap(), "cpu", &spec).unwrap();
    assert!(
        broker.cpu_time().unwrap() > before,
        "the broker's CPU time did not move"
    );
}

/// The reference broker, where its wheel can be installed (services/bench/install-tansu.sh):
/// the replayed load moves every record through it, as through Skein.
#[test]
fn the_replayed_load_moves_every_record_through_tansu_where_it_installs() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/install-tansu.sh");
    let installed = std::process::Command::new("bash")
        .arg(script)
        .output()
        .unwrap();
    if !installed.status.success() {
        eprintln!(
            "Tansu not installed, its smoke skipped: {}",
            String::from_utf8_lossy(&installed.stderr)
        );
        return;
    }
    let binary = PathBuf::from(String::from_utf8(installed.stdout).unwrap().trim());
    let tansu = ChildBroker::tansu(&binary).unwrap();
    let spec = ProduceSpec {
        acks: 1,
        record_bytes: 1024,
        partitions: 2,
        records: 4_000,
        replication: 1,
    };
    let produced = workload::replay_produce(&tansu.bootstrap(), "replay", &spec).unwrap();
    let read =
        workload::replay_fetch(&tansu.bootstrap(), "replay", 2, 1024, produced.records).unwrap();
    assert_eq!(read.records, produced.records);
    assert!(tansu.cpu_time().is_some());
}

/// The `skein` binary: `SKEIN_BENCH_SKEIN`, else the one of this build (`target/<profile>/`,
/// which `cargo test --workspace` builds for the skein package's own tests; after
/// `cargo test -p skein-bench` alone, build it with `cargo build -p skein`).
fn skein_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SKEIN_BENCH_SKEIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/smoke-<hash> -> target/<profile>/skein
    let binary = exe.parent().unwrap().parent().unwrap().join("skein");
    assert!(
        binary.is_file(),
        "no skein binary at {}: build it (cargo build -p skein) or set SKEIN_BENCH_SKEIN",
        binary.display()
    );
    binary
}

/// The SASL_SSL run's listener moves every record produced and consumed over TLS with an
/// API key, and refuses a client that brings no credentials.
#[test]
fn the_sasl_ssl_workload_moves_every_record_through_skein_dev() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, secured) = ChildBroker::skein_secured(&skein_binary(), dir.path()).unwrap();
    assert!(secured.contains("security.protocol=SASL_SSL"), "{secured}");
    let spec = ProduceSpec {
        acks: -1,
        record_bytes: 1024,
        partitions: 4,
        records: 512,
        replication: 1,
    };
    let produced = workload::produce(&secured, "secured", &spec).unwrap();
    assert_eq!(produced.records, spec.records);
    let consumed = workload::consume(&secured, "secured", spec.partitions, spec.records).unwrap();
    assert_eq!(consumed.records, spec.records);
    assert_eq!(consumed.bytes, produced.bytes);
    // Three producers at once deliver every record between them.
    let parallel = workload::produce_with(&secured, "secured-parallel", &spec, 3).unwrap();
    assert_eq!(parallel.records, spec.records);
    let read =
        workload::consume(&secured, "secured-parallel", spec.partitions, spec.records).unwrap();
    assert_eq!(read.records, spec.records);
    // skein-client, in TLS with the same API key, delivers every record too.
    let native = workload::produce_native(&secured, "secured-native", &spec).unwrap();
    assert_eq!(native.records, spec.records);
    let read =
        workload::consume(&secured, "secured-native", spec.partitions, spec.records).unwrap();
    assert_eq!(read.records, spec.records);
    // The same listener without the API key gets nowhere.
    let (address, settings) = secured.split_once('?').unwrap();
    let anonymous = format!(
        "{address}?{}",
        settings
            .split('&')
            .filter(|s| !s.starts_with("sasl.password"))
            .chain(["sasl.password=wrong", "socket.timeout.ms=5000"])
            .collect::<Vec<_>>()
            .join("&")
    );
    assert!(workload::produce(&anonymous, "refused", &spec).is_err());
}

#[test]
fn the_gateway_workloads_move_every_record_through_skein_dev() {
    let dir = tempfile::tempdir().unwrap();
    let broker = ChildBroker::skein(&skein_binary(), dir.path()).unwrap();
    let bootstrap = broker.bootstrap();
    let gateway = broker.gateway().expect("skein dev prints its gateway");

    let specs = GatewaySpec::matrix(2500);
    assert_eq!(specs.len(), 2, "1 KiB and 100 B");
    for spec in &specs {
        // More than one REST request, more than one gRPC window and consume credit.
        assert!(spec.records as usize > 2 * spec.rest_batch());
        assert!(spec.records as usize > spec.stream_window());
        assert!(spec.records > u64::from(workload::GATEWAY_CONSUME_CREDIT));
        let native_topic = spec.topic("kafka");
        let native = ProduceSpec {
            acks: -1,
            record_bytes: spec.record_bytes,
            partitions: 1,
            records: spec.records,
            replication: 1,
        };
        let produced = workload::produce(&bootstrap, &native_topic, &native).unwrap();

        let rest = workload::rest_produce(&bootstrap, gateway, &spec.topic("rest"), spec).unwrap();
        assert_eq!(rest.throughput.records, spec.records, "{spec}");
        let requests = rest.latency.unwrap().samples;
        let batch = spec.rest_batch() as u64;
        assert_eq!(requests, spec.records.div_ceil(batch), "{spec}");

        let grpc = workload::grpc_produce(&bootstrap, gateway, &spec.topic("grpc"), spec).unwrap();
        assert_eq!(grpc.throughput.records, spec.records, "{spec}");
        assert_eq!(grpc.latency.unwrap().samples, spec.records, "{spec}");

        // What the gateway wrote is there for librdkafka to read.
        for path in ["rest", "grpc"] {
            let read = workload::consume(&bootstrap, &spec.topic(path), 1, spec.records).unwrap();
            assert_eq!(read.bytes, produced.bytes, "{spec} through {path}");
        }

        let consumed = workload::grpc_consume(gateway, &native_topic, spec.records).unwrap();
        assert_eq!(consumed.records, spec.records, "{spec}");
        assert_eq!(consumed.bytes, produced.bytes, "{spec}");
        assert!(consumed.to_first <= consumed.elapsed);
    }
}

#[test]
fn the_cluster_workloads_measure_a_three_broker_dev_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let report = measure_cluster(&ClusterArgs {
        skein: Some(skein_binary()),
        mib: 1,
        partitions: 3,
        rate: 500,
        latency_secs: 1,
        kills: 1,
        dir: Some(dir.path().to_path_buf()),
    })
    .unwrap();
    let replications: Vec<i32> = report.produce.iter().map(|(s, _)| s.replication).collect();
    assert_eq!(replications, [1, 3]);
    for (spec, throughput) in &report.produce {
        assert_eq!(throughput.records, spec.records, "{spec}");
    }
    assert!(report.replicated_ratio().is_some());
    assert_eq!(report.latency.len(), 4);
    for latency in &report.latency {
        assert_eq!(
            latency.samples, 500,
            "every record after the warm-up is sampled"
        );
    }
    // One leader killed, and a write to its partition succeeded afterwards.
    assert_eq!(report.failovers.len(), 1);
    assert!(report.to_string().contains("failover over 1 leader kills"));
}

/// The sink benchmark applies every record once and COPY writes the same rows.
#[test]
fn the_sink_workload_applies_every_record_and_copy_the_same_rows() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("bench_sink").unwrap();
    let report = skein_bench::measure_sink(&skein_bench::SinkArgs {
        database_url: url,
        records: 3000,
        record_bytes: 1024,
        partitions: 2,
    })
    .unwrap();
    assert_eq!(report.records, 3000);
}
