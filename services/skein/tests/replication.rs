//! Three broker processes of one tenant on a control-plane process and a real PostgreSQL:
//! followers copy their leaders' logs with replica fetches, the high watermark is the
//! smallest log end in the ISR (consumers never see past it), `acks=all` answers only when
//! every in-sync replica has the records, a stopped follower leaves the ISR (so writes go
//! on) and rejoins once resumed and caught up, and the replicas' segment files end up
//! identical.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::cluster;
use common::kafka::{name, RawKafka};
use common::processes::*;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use skein_records::{build_batch, Compression, NewRecord, ProducerFields};

fn batch(count: usize) -> Vec<u8> {
    let records: Vec<NewRecord> = (0..count)
        .map(|i| NewRecord {
            key: None,
            value: Some(format!("raw-{i}").into_bytes()),
            headers: vec![],
            timestamp: 1_700_000_000_000,
        })
        .collect();
    build_batch(&records, Compression::None, ProducerFields::NONE).unwrap()
}

/// A Produce of one batch of `count` records to one partition of `topic`.
fn produce_request(
    topic: &str,
    partition: i32,
    count: usize,
    acks: i16,
    timeout_ms: i32,
) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch(count).into()))])])
}

/// Produces one batch of `count` records with `acks`; answers the partition's error code.
fn produce(raw: &mut RawKafka, partition: i32, count: usize, acks: i16, timeout_ms: i32) -> i16 {
    let request = produce_request("replicated", partition, count, acks, timeout_ms);
    let response: ProduceResponse = raw.call(ApiKey::Produce, 9, &request);
    error_code(&response)
}

fn error_code(response: &ProduceResponse) -> i16 {
    response.responses[0].partition_responses[0].error_code
}

fn signal(process: &Process, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &process.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn followers_copy_their_leaders_and_the_high_watermark_waits_for_the_isr() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("replication").unwrap();
    let (cp, admin, controller) = control_plane(&url);
    let created = common::http(
        &admin,
        "POST",
        "/v1/tenants",
        Some(TOKEN),
        r#"{"name":"acme"}"#,
    );
    assert_eq!(created.0, 201);
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let brokers: Vec<(Process, String)> = (1..=3)
        .map(|node| {
            tenant_broker_with(
                &controller,
                dirs[node as usize - 1].path(),
                "acme",
                node,
                &[("SKEIN_BROKER_REPLICA_LAG_TIME_MAX_MS", "3000")],
            )
        })
        .collect();
    let bootstrap: Vec<String> = brokers.iter().map(|(_, b)| b.clone()).collect();
    let all = bootstrap.join(",");
    cluster::create_topic(
        &python,
        &all,
        "replicated",
        3,
        3,
        &["min.insync.replicas=2"],
    );
    // One replica per partition: a write there never waits for another broker.
    cluster::create_topic(&python, &all, "solo", 3, 1, &[]);

    // acks=all: every record acknowledged is read back.
    let trip = script(
        &python,
        "cluster_placement.py",
        &all,
        &["round-trip", "replicated", "3", "300"],
    );
    let trip: serde_json::Value = serde_json::from_str(trip.trim()).unwrap();
    assert_eq!(trip["acked"], 300, "{trip}");
    assert_eq!(trip["read"], 300, "{trip}");

    // Partition 0's leader, and a follower of it that leads another partition.
    let described: serde_json::Value = serde_json::from_str(
        script(
            &python,
            "cluster_placement.py",
            &all,
            &["describe", "replicated"],
        )
        .trim(),
    )
    .unwrap();
    let leader_of = |p: &str| described["partitions"][p]["leader"].as_i64().unwrap() as usize;
    let leader = leader_of("0");
    let follower = (1..=3).find(|n| *n != leader).unwrap();
    let mut at_leader = RawKafka::connect(&bootstrap[leader - 1]);
    let before = at_leader.latest_offset("replicated", 0);
    assert_eq!(
        before, 100,
        "the round trip wrote 100 records to each partition"
    );

    // A stopped follower, while still in the ISR, holds the high watermark: an acks=1 write
    // is stored by the leader but consumers do not see it.
    signal(&brokers[follower - 1].0, "-STOP");
    let stopped_at = Instant::now();
    assert_eq!(produce(&mut at_leader, 0, 5, 1, 5000), 0);
    assert_eq!(at_leader.latest_offset("replicated", 0), before);
    // It leaves the ISR once it lags past replica.lag.time.max.ms (or its session lapses):
    // acks=all then answers with the two replicas left, and the mark takes in all ten.
    // Meanwhile the same connection's next request is written at once: an acks=all answer
    // waits beside the requests after it, and the answers still come in request order.
    let solo: serde_json::Value = serde_json::from_str(
        script(&python, "cluster_placement.py", &all, &["describe", "solo"]).trim(),
    )
    .unwrap();
    // Three partitions on three brokers: one leads on each.
    let solo_here = (0..3)
        .find(|p| solo["partitions"][p.to_string()]["leader"].as_i64() == Some(leader as i64))
        .unwrap_or_else(|| panic!("no partition of solo leads on broker {leader}: {solo}"));
    let mut watcher = RawKafka::connect(&bootstrap[leader - 1]);
    let solo_before = watcher.latest_offset("solo", solo_here);
    let waiting = at_leader.send(
        ApiKey::Produce,
        9,
        &produce_request("replicated", 0, 5, -1, 20_000),
    );
    let next = at_leader.send(
        ApiKey::Produce,
        9,
        &produce_request("solo", solo_here, 3, 1, 5000),
    );
    let written_by = Instant::now() + Duration::from_millis(1500);
    while watcher.latest_offset("solo", solo_here) < solo_before + 3 {
        assert!(
            Instant::now() < written_by,
            "a request behind a waiting acks=all write was not written"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        stopped_at.elapsed() < Duration::from_millis(2500),
        "the ISR may have shrunk already: this proves nothing"
    );
    assert!(
        !at_leader.has_response(),
        "the acks=all write was answered before the ISR had it"
    );
    let first: ProduceResponse = at_leader.receive(ApiKey::Produce, 9, waiting);
    assert_eq!(error_code(&first), 0);
    let second: ProduceResponse = at_leader.receive(ApiKey::Produce, 9, next);
    assert_eq!(error_code(&second), 0);
    let shrunk_after = stopped_at.elapsed();
    assert_eq!(at_leader.latest_offset("replicated", 0), before + 10);
    let isr_of_0 = |python: &str| -> Vec<i64> {
        let described: serde_json::Value = serde_json::from_str(
            script(
                python,
                "cluster_placement.py",
                &bootstrap[leader - 1],
                &["describe", "replicated"],
            )
            .trim(),
        )
        .unwrap();
        let mut isr: Vec<i64> = described["partitions"]["0"]["isr"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_i64().unwrap())
            .collect();
        isr.sort_unstable();
        isr
    };
    let without: Vec<i64> = (1..=3).filter(|n| *n != follower as i64).collect();
    // The leader knows at once; the client may ask another broker, whose metadata follows
    // the controller's next snapshot.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let isr = isr_of_0(&python);
        if isr == without {
            break;
        }
        assert!(Instant::now() < deadline, "ISR still {isr:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(shrunk_after < Duration::from_secs(15), "{shrunk_after:?}");

    // Resumed, it catches up and rejoins the ISR through its leader.
    signal(&brokers[follower - 1].0, "-CONT");
    let deadline = Instant::now() + Duration::from_secs(30);
    while isr_of_0(&python).len() < 3 {
        assert!(
            Instant::now() < deadline,
            "the follower never rejoined the ISR"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(produce(&mut at_leader, 0, 5, -1, 5000), 0);
    assert_eq!(at_leader.latest_offset("replicated", 0), before + 15);

    // Controlled shutdown: a leader stopped with SIGTERM hands its partitions over before
    // it exits, so the metadata names another leader the moment it is gone (without it, the
    // controller would wait for the broker's session to lapse).
    std::thread::sleep(Duration::from_secs(1));
    let mut brokers: Vec<Option<(Process, String)>> = brokers.into_iter().map(Some).collect();
    let (mut stopped, _) = brokers[leader - 1].take().unwrap();
    stopped.terminate();
    let other = (1..=3).find(|n| *n != leader).unwrap();
    let after: serde_json::Value = serde_json::from_str(
        script(
            &python,
            "cluster_placement.py",
            &bootstrap[other - 1],
            &["describe", "replicated"],
        )
        .trim(),
    )
    .unwrap();
    for partition in after["partitions"].as_object().unwrap().values() {
        let now = partition["leader"].as_i64().unwrap();
        assert!(now > 0 && now != leader as i64, "{after}");
    }

    // Every replica holds the same bytes: followers copy batches as the leader wrote them.
    for (process, _) in brokers.into_iter().flatten() {
        process.stop();
    }
    for partition in 0..3 {
        let segments: BTreeMap<usize, Vec<u8>> = dirs
            .iter()
            .enumerate()
            .map(|(i, dir)| {
                let path = dir.path().join(format!(
                    "logs/replicated-{partition}/00000000000000000000.log"
                ));
                (
                    i,
                    std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}")),
                )
            })
            .collect();
        assert!(!segments[&0].is_empty());
        assert_eq!(segments[&0], segments[&1], "partition {partition}");
        assert_eq!(segments[&0], segments[&2], "partition {partition}");
    }
    cp.stop();
}
