//! The benchmark's workloads run end to end against Skein at a small scale: every record
//! produced is delivered and read back, the latency run samples every record after its
//! warm-up, and a group of two splits its partitions. No timing is asserted.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use skein_bench::{workload, BrokerUnderTest, LatencySpec, ProduceSpec, SkeinBroker};

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
    }

    let spec = LatencySpec {
        rate: 2000,
        duration: Duration::from_secs(1),
        warmup: Duration::from_millis(500),
        record_bytes: 100,
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
}
