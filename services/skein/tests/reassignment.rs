//! A partition moved between brokers with kafkajs's AlterPartitionReassignments: the new
//! replica copies the leader's log by replication, ListPartitionReassignments shows the move
//! while it runs, and once the target is in sync the old replicas (the leader among them)
//! leave: the first target replica leads, every record acknowledged before the move reads
//! back from it, writes go on, and the broker moved away from deletes its copy. A topic that
//! lists its replicas in `leader.replication.throttled.replicas` is copied no faster than
//! the leader's `leader.replication.throttled.rate`, and one listing them in
//! `follower.replication.throttled.replicas` no faster than the new replica's
//! `follower.replication.throttled.rate`. Refusals come back with Kafka's error codes.
//!
//! Three broker processes of one tenant, a control-plane process and a real PostgreSQL.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::cluster;
use common::kafka::{name, RawKafka};
use common::processes::*;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId,
};
use skein_records::{build_batch, Compression, NewRecord, ProducerFields};

/// The leaders' throttle on every broker, bytes a second.
const THROTTLE_RATE: u64 = 200_000;
/// The followers' throttle on every broker, bytes a second.
const FOLLOWER_RATE: u64 = 1_000_000;
/// What a follower asks of one partition in one fetch (`replica_fetcher.rs`).
const FOLLOWER_PARTITION_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// Each partition's (replicas, leader) as Metadata names them.
fn described(python: &str, bootstrap: &str, topic: &str) -> (Vec<i64>, i64) {
    let out = script(
        python,
        "cluster_placement.py",
        bootstrap,
        &["describe", topic],
    );
    let described: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let p = &described["partitions"]["0"];
    let replicas = p["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_i64().unwrap())
        .collect();
    (replicas, p["leader"].as_i64().unwrap())
}

fn round_trip(python: &str, bootstrap: &str, count: &str, base: &str) {
    let out = script(
        python,
        "cluster_placement.py",
        bootstrap,
        &["round-trip", "moving", "1", count, base],
    );
    let trip: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (trip["acked"].as_i64(), trip["read"].as_i64()),
        (count.parse().ok(), count.parse().ok()),
        "{out}"
    );
}

/// One raw AlterPartitionReassignments for partition 0 of `topic`; answers its error code.
fn reassign_raw(raw: &mut RawKafka, topic: &str, replicas: Option<Vec<i32>>) -> i16 {
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(0)
                .with_replicas(
                    replicas.map(|r| r.into_iter().map(BrokerId).collect()),
                )])]);
    let response: AlterPartitionReassignmentsResponse =
        raw.call(ApiKey::AlterPartitionReassignments, 0, &request);
    assert_eq!(response.error_code, 0, "{response:?}");
    response.responses[0].partitions[0].error_code
}

/// Writes `megabytes` MB to partition 0 of `topic` through `raw`: batches of four records
/// of 50 kB.
fn write_megabytes(raw: &mut RawKafka, topic: &str, megabytes: usize) {
    let record = |i: usize| NewRecord {
        key: Some(i.to_string().into_bytes()),
        value: Some(vec![b'a' + (i % 26) as u8; 50_000]),
        headers: vec![],
        timestamp: 1_700_000_000_000,
    };
    for batch in 0..megabytes * 5 {
        let records: Vec<NewRecord> = (0..4).map(|i| record(batch * 4 + i)).collect();
        let bytes = build_batch(&records, Compression::None, ProducerFields::NONE).unwrap();
        assert_eq!(raw.produce(topic, 0, bytes), 0);
    }
}

#[test]
fn a_partition_moves_to_new_brokers_and_loses_nothing() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("reassignment").unwrap();
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
    let (rate, follower_rate) = (THROTTLE_RATE.to_string(), FOLLOWER_RATE.to_string());
    let env = [
        (
            "SKEIN_BROKER_LEADER_REPLICATION_THROTTLED_RATE",
            rate.as_str(),
        ),
        (
            "SKEIN_BROKER_FOLLOWER_REPLICATION_THROTTLED_RATE",
            follower_rate.as_str(),
        ),
    ];
    let brokers: Vec<Option<(Process, String)>> = (1..=3)
        .map(|node| {
            Some(tenant_broker_with(
                &controller,
                dirs[node - 1].path(),
                "acme",
                node as i32,
                &env,
            ))
        })
        .collect();
    let all = cluster::addresses(&brokers);
    // Every broker has registered once a topic of RF 3 can be made.
    cluster::create_topic(&python, &all, "probe", 1, 3, &[]);
    let created = script(
        &python,
        "cluster_placement.py",
        &all,
        &["create-assigned", "moving", "[[1, 2]]"],
    );
    assert!(created.contains(r#""error": "ok""#), "{created}");
    wait_for(|| (described(&python, &all, "moving") == (vec![1, 2], 1)).then_some(()));
    round_trip(&python, &all, "300", "0");
    let on_one = dirs[0].path().join("logs").join("moving-0");
    assert!(
        on_one.is_dir(),
        "broker 1 holds the partition before the move"
    );

    let moved = node_script("kafkajs_reassign.js", &all, &["moving", "0", "[3, 2]"]);
    let moved: serde_json::Value = serde_json::from_str(moved.trim()).unwrap();
    assert_eq!(moved["error"], serde_json::Value::Null, "{moved}");
    assert_eq!(moved["done"], true, "the move completed: {moved}");
    println!("unthrottled move of 300 records: {} ms", moved["ms"]);
    for listed in moved["seen"].as_array().unwrap() {
        // While it ran: the target then the leaving replica, 3 added, 1 removed.
        let listed: serde_json::Value = serde_json::from_str(listed.as_str().unwrap()).unwrap();
        assert_eq!(listed["replicas"], serde_json::json!([3, 2, 1]), "{listed}");
        assert_eq!(listed["addingReplicas"], serde_json::json!([3]), "{listed}");
        assert_eq!(
            listed["removingReplicas"],
            serde_json::json!([1]),
            "{listed}"
        );
    }
    // The brokers' metadata follows the controller's next snapshot: the leaving leader
    // hands over to the first target replica.
    wait_for(|| (described(&python, &all, "moving") == (vec![3, 2], 3)).then_some(()));
    let values = cluster::values(&python, &all, "moving", 0);
    let expected: Vec<String> = (0..300).map(|i| i.to_string()).collect();
    assert_eq!(
        values, expected,
        "every acknowledged record, in order, once"
    );
    round_trip(&python, &all, "100", "300");
    let deadline = Instant::now() + Duration::from_secs(20);
    while on_one.try_exists().unwrap() {
        assert!(Instant::now() < deadline, "broker 1 kept its copy");
        std::thread::sleep(Duration::from_millis(200));
    }

    // A throttled topic: 2 MB copied at 200 kB/s takes about ten seconds; the same move of
    // an unthrottled topic took a fraction of that.
    let created = script(
        &python,
        "cluster_placement.py",
        &all,
        &[
            "create-assigned",
            "slow",
            "[[1, 2]]",
            "leader.replication.throttled.replicas=*",
        ],
    );
    assert!(created.contains(r#""error": "ok""#), "{created}");
    wait_for(|| (described(&python, &all, "slow") == (vec![1, 2], 1)).then_some(()));
    let mut at_one = RawKafka::connect(&brokers[0].as_ref().unwrap().1);
    write_megabytes(&mut at_one, "slow", 2);
    let copied = node_script("kafkajs_reassign.js", &all, &["slow", "0", "[3, 2]"]);
    let copied: serde_json::Value = serde_json::from_str(copied.trim()).unwrap();
    assert_eq!(
        copied["done"], true,
        "the throttled move completed: {copied}"
    );
    let took = copied["ms"].as_u64().unwrap();
    println!("throttled move of 2 MB at {THROTTLE_RATE} B/s: {took} ms");
    // 2 MB, less one second's worth saved up and one batch (200 kB) served past the budget
    // at the end, at the rate: a floor however fast the machine.
    let floor = (40 * 50_000 - 2 * THROTTLE_RATE) * 1000 / THROTTLE_RATE;
    assert!(
        took >= floor,
        "copied in {took} ms; the throttle allows no less than {floor}"
    );
    wait_for(|| (described(&python, &all, "slow") == (vec![3, 2], 3)).then_some(()));
    // The new leader knows the high watermark once its follower fetches again.
    let mut at_three = RawKafka::connect(&brokers[2].as_ref().unwrap().1);
    wait_for(|| (at_three.try_latest_offset("slow", 0) == Ok(40)).then_some(()));

    // Throttled on the follower's side: 10 MB at 1 MB/s, less the second saved up and one
    // fetch's worth (4 MiB) taken past the budget.
    let created = script(
        &python,
        "cluster_placement.py",
        &all,
        &[
            "create-assigned",
            "slower",
            "[[1, 2]]",
            "follower.replication.throttled.replicas=*",
        ],
    );
    assert!(created.contains(r#""error": "ok""#), "{created}");
    wait_for(|| (described(&python, &all, "slower") == (vec![1, 2], 1)).then_some(()));
    write_megabytes(&mut at_one, "slower", 10);
    let copied = node_script("kafkajs_reassign.js", &all, &["slower", "0", "[3, 2]"]);
    let copied: serde_json::Value = serde_json::from_str(copied.trim()).unwrap();
    assert_eq!(copied["done"], true, "{copied}");
    let took = copied["ms"].as_u64().unwrap();
    println!("follower-throttled move of 10 MB at {FOLLOWER_RATE} B/s: {took} ms");
    let floor =
        (10 * 1_000_000 - FOLLOWER_RATE - FOLLOWER_PARTITION_MAX_BYTES) * 1000 / FOLLOWER_RATE;
    assert!(
        took >= floor,
        "copied in {took} ms; the throttle allows no less than {floor}"
    );
    wait_for(|| (at_three.try_latest_offset("slower", 0) == Ok(200)).then_some(()));

    // Refusals, in Kafka's codes.
    let mut raw = RawKafka::connect(&brokers[1].as_ref().unwrap().1);
    assert_eq!(
        reassign_raw(&mut raw, "moving", None),
        85,
        "NO_REASSIGNMENT_IN_PROGRESS"
    );
    assert_eq!(
        reassign_raw(&mut raw, "moving", Some(vec![2, 2])),
        39,
        "INVALID_REPLICA_ASSIGNMENT"
    );
    assert_eq!(
        reassign_raw(&mut raw, "moving", Some(vec![2, 9])),
        39,
        "INVALID_REPLICA_ASSIGNMENT: no broker 9"
    );
    assert_eq!(
        reassign_raw(&mut raw, "nowhere", Some(vec![1])),
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );

    for (process, _) in brokers.into_iter().flatten() {
        process.stop();
    }
    cp.stop();
}
