//! Three broker processes of one tenant, each on its own rack, joined to a control-plane
//! process on a real PostgreSQL, with confluent-kafka as the client: the controller places
//! partitions as Kafka does (leaders spread, replicas on distinct brokers and racks, a factor
//! the brokers cannot meet refused), every broker answers the same metadata, clients write
//! to and read from each partition's leader, and a broker that does not lead a partition
//! says so with NOT_LEADER_OR_FOLLOWER.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::kafka::{name, RawKafka};
use common::processes::*;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse};

fn placement(python: &str, bootstrap: &str, topic: &str) -> serde_json::Value {
    let out = script(
        python,
        "cluster_placement.py",
        bootstrap,
        &["describe", topic],
    );
    serde_json::from_str(out.trim()).unwrap()
}

/// Each partition's (leader, replicas, ISR).
fn partitions(described: &serde_json::Value) -> BTreeMap<i32, (i64, Vec<i64>, Vec<i64>)> {
    let ids = |v: &serde_json::Value| -> Vec<i64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_i64().unwrap())
            .collect()
    };
    described["partitions"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(p, v)| {
            (
                p.parse().unwrap(),
                (
                    v["leader"].as_i64().unwrap(),
                    ids(&v["replicas"]),
                    ids(&v["isr"]),
                ),
            )
        })
        .collect()
}

#[test]
fn the_controller_places_replicas_across_brokers_and_racks_and_clients_follow_the_leaders() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("placement").unwrap();
    let (cp, admin, controller) = control_plane(&url);
    assert_eq!(
        common::http(
            &admin,
            "POST",
            "/v1/tenants",
            Some(TOKEN),
            r#"{"name":"acme"}"#
        )
        .0,
        201
    );
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let brokers: Vec<(Process, String)> = (1..=3)
        .map(|node| {
            let rack = format!("rack-{node}");
            tenant_broker_with(
                &controller,
                dirs[node as usize - 1].path(),
                "acme",
                node,
                &[("SKEIN_BROKER_RACK", rack.as_str())],
            )
        })
        .collect();
    let bootstrap: Vec<&str> = brokers.iter().map(|(_, b)| b.as_str()).collect();
    let all = bootstrap.join(",");

    // Every broker registers before the topics are placed.
    wait_for(|| {
        let described = script(
            &python,
            "cluster_placement.py",
            bootstrap[0],
            &["create", "probe", "1", "3"],
        );
        described.contains(r#""error": "ok""#).then_some(())
    });

    // RF=1 over six partitions: two leaders per broker, every broker in the metadata with
    // its rack.
    let created = script(
        &python,
        "cluster_placement.py",
        &all,
        &["create", "spread", "6", "1"],
    );
    assert!(created.contains(r#""error": "ok""#), "{created}");
    let described = placement(&python, bootstrap[1], "spread");
    assert_eq!(
        described["brokers"],
        serde_json::json!({"1": "rack-1", "2": "rack-2", "3": "rack-3"}),
        "{described}"
    );
    let spread = partitions(&described);
    assert_eq!(spread.len(), 6);
    let mut leaders = BTreeMap::new();
    for (leader, replicas, isr) in spread.values() {
        assert_eq!(replicas, &vec![*leader]);
        assert_eq!(isr, &vec![*leader]);
        *leaders.entry(*leader).or_insert(0) += 1;
    }
    assert_eq!(
        leaders,
        BTreeMap::from([(1, 2), (2, 2), (3, 2)]),
        "{described}"
    );
    // Every broker tells the same story.
    for other in &bootstrap {
        assert_eq!(partitions(&placement(&python, other, "spread")), spread);
    }

    // RF=3: each partition on all three brokers (so all three racks), the preferred leader
    // first and leading; leaders spread.
    let created = script(
        &python,
        "cluster_placement.py",
        &all,
        &["create", "triple", "3", "3"],
    );
    assert!(created.contains(r#""error": "ok""#), "{created}");
    let triple = partitions(&placement(&python, bootstrap[2], "triple"));
    let mut triple_leaders = BTreeSet::new();
    for (leader, replicas, _) in triple.values() {
        assert_eq!(
            replicas.iter().collect::<BTreeSet<_>>().len(),
            3,
            "{triple:?}"
        );
        assert_eq!(replicas[0], *leader, "{triple:?}");
        triple_leaders.insert(*leader);
    }
    assert_eq!(triple_leaders.len(), 3, "{triple:?}");

    // A factor three brokers cannot meet.
    let refused = script(
        &python,
        "cluster_placement.py",
        &all,
        &["create", "quad", "1", "4"],
    );
    assert!(
        refused.contains(r#""error": "INVALID_REPLICATION_FACTOR""#),
        "{refused}"
    );

    // Records reach each partition's leader and come back, whichever broker bootstraps.
    let trip = script(
        &python,
        "cluster_placement.py",
        bootstrap[0],
        &["round-trip", "spread", "6", "600"],
    );
    let trip: serde_json::Value = serde_json::from_str(trip.trim()).unwrap();
    assert_eq!(trip["acked"], 600, "{trip}");
    assert_eq!(trip["read"], 600, "{trip}");
    assert_eq!(trip["misplaced"], 0, "{trip}");

    // A broker that does not lead a partition refuses it and names the leader; one that
    // does, asked with a leader epoch newer than the partition's, says it does not know it.
    let (partition, (leader, _, _)) = spread.iter().next().unwrap();
    let follower = (1..=3).find(|n| n != leader).unwrap();
    let mut raw = RawKafka::connect(bootstrap[follower as usize - 1]);
    let fetch = |epoch: i32| {
        FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(name("spread"))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(*partition)
                    .with_current_leader_epoch(epoch)
                    .with_partition_max_bytes(1 << 20)])])
    };
    let answer: FetchResponse = raw.call(ApiKey::Fetch, 12, &fetch(-1));
    let data = &answer.responses[0].partitions[0];
    assert_eq!(data.error_code, 6, "NOT_LEADER_OR_FOLLOWER: {data:?}");
    assert_eq!(data.current_leader.leader_id, BrokerId(*leader as i32));
    assert_eq!(data.current_leader.leader_epoch, 0);
    let produced = raw.produce("spread", *partition, Vec::new());
    assert_eq!(produced, 6, "NOT_LEADER_OR_FOLLOWER");
    let mut at_leader = RawKafka::connect(bootstrap[*leader as usize - 1]);
    let answer: FetchResponse = at_leader.call(ApiKey::Fetch, 12, &fetch(7));
    assert_eq!(
        answer.responses[0].partitions[0].error_code, 75,
        "UNKNOWN_LEADER_EPOCH"
    );
    let answer: FetchResponse = at_leader.call(ApiKey::Fetch, 12, &fetch(0));
    let data = &answer.responses[0].partitions[0];
    assert_eq!(data.error_code, 0);
    assert_eq!(data.high_watermark, 100);

    // Read-your-writes: a topic made through the admin API is usable at once on a broker
    // whose metadata stream has not brought it yet (it asks the controller).
    for i in 0..5 {
        let topic = format!("fresh-{i}");
        let (status, body) = common::http(
            &admin,
            "POST",
            "/v1/tenants/acme/topics",
            Some(TOKEN),
            &format!(r#"{{"topic_name":"{topic}","partitions_count":1}}"#),
        );
        assert_eq!(status, 201, "{body}");
        // Whichever broker leads it answers the produce; the others name the leader.
        let codes: Vec<i16> = bootstrap
            .iter()
            .map(|b| RawKafka::connect(b).produce(&topic, 0, Vec::new()))
            .collect();
        // An empty batch is refused by the leader as INVALID_RECORD (87) after it found
        // the partition; the others answer NOT_LEADER_OR_FOLLOWER (6). Nobody says
        // UNKNOWN_TOPIC_OR_PARTITION (3).
        assert_eq!(
            codes.iter().filter(|c| **c == 87).count(),
            1,
            "{topic}: {codes:?}"
        );
        assert_eq!(
            codes.iter().filter(|c| **c == 6).count(),
            2,
            "{topic}: {codes:?}"
        );
    }

    for (process, _) in brokers {
        process.stop();
    }
    cp.stop();
}
