//! The Kafka APIs operators use on a cluster, through confluent-kafka's admin client against
//! three broker processes on a control-plane process and a real PostgreSQL: ElectLeaders
//! bringing leadership home to the preferred replica (with the controller's automatic
//! rebalance off, so nothing else would), and refusing elections that are not needed; and
//! manual replica assignments in CreateTopics and CreatePartitions.

#![allow(clippy::unwrap_used)]

mod common;

use common::cluster;
use common::processes::*;

fn elect(python: &str, bootstrap: &str, kind: &str, topic: &str, partition: u32) -> String {
    let out = script(
        python,
        "cluster_placement.py",
        bootstrap,
        &["elect", kind, topic, &partition.to_string()],
    );
    let answer: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    answer["error"].as_str().unwrap().to_owned()
}

/// Runs a phase of `cluster_placement.py` that prints `{"error": ...}`; answers the error.
fn error_of(python: &str, bootstrap: &str, args: &[&str]) -> String {
    let out = script(python, "cluster_placement.py", bootstrap, args);
    let answer: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    answer["error"].as_str().unwrap().to_owned()
}

/// Each partition's replicas as Metadata names them, by partition index.
fn replicas_of(python: &str, bootstrap: &str, topic: &str) -> Vec<Vec<i64>> {
    let out = script(
        python,
        "cluster_placement.py",
        bootstrap,
        &["describe", topic],
    );
    let described: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let partitions = described["partitions"].as_object().unwrap();
    (0..partitions.len())
        .map(|p| {
            partitions[&p.to_string()]["replicas"]
                .as_array()
                .unwrap()
                .iter()
                .map(|id| id.as_i64().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn manual_replica_assignments_put_partitions_where_the_operator_says() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("assignments").unwrap();
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
    let brokers: Vec<Option<(Process, String)>> = (1..=3)
        .map(|node| {
            Some(tenant_broker(
                &controller,
                dirs[node - 1].path(),
                "acme",
                node as i32,
            ))
        })
        .collect();
    let all = cluster::addresses(&brokers);
    // Wait until all three brokers have registered: a topic of RF 3 can then be made.
    cluster::create_topic(&python, &all, "probe", 1, 3, &[]);

    let create =
        |name: &str, assigned: &str| error_of(&python, &all, &["create-assigned", name, assigned]);
    assert_eq!(create("manual", "[[3, 1], [2, 3], [1, 2]]"), "ok");
    assert_eq!(
        replicas_of(&python, &all, "manual"),
        [[3, 1], [2, 3], [1, 2]],
        "the replicas, preferred leader first, as assigned"
    );
    for (name, refused) in [
        ("twice", "[[1, 1]]"),
        ("unknown", "[[1, 9]]"),
        ("uneven", "[[1, 2], [3]]"),
    ] {
        assert_eq!(
            create(name, refused),
            "INVALID_REPLICA_ASSIGNMENT",
            "{refused}"
        );
    }

    let grow = |count: &str, assigned: &str| {
        error_of(&python, &all, &["grow-assigned", "manual", count, assigned])
    };
    assert_eq!(
        grow("5", "[[1, 2]]"),
        "INVALID_REPLICA_ASSIGNMENT",
        "too few"
    );
    assert_eq!(
        grow("4", "[[1]]"),
        "INVALID_REPLICA_ASSIGNMENT",
        "not the topic's replication factor"
    );
    assert_eq!(grow("4", "[[2, 1]]"), "ok");
    // Each broker's metadata takes the controller's next snapshot in its own time, and a
    // producer that asks one still without the new partition fails at once (librdkafka's
    // Unknown partition): every broker must show it first.
    let grown = vec![vec![3, 1], vec![2, 3], vec![1, 2], vec![2, 1]];
    for (_, address) in brokers.iter().flatten() {
        wait_for(|| (replicas_of(&python, address, "manual") == grown).then_some(()));
    }
    // Every assigned partition takes writes and serves them.
    let out = script(
        &python,
        "cluster_placement.py",
        &all,
        &["round-trip", "manual", "4", "200"],
    );
    let trip: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (trip["acked"].as_i64(), trip["read"].as_i64()),
        (Some(200), Some(200)),
        "{out}"
    );

    for (process, _) in brokers.into_iter().flatten() {
        process.stop();
    }
    cp.stop();
}

#[test]
fn elect_leaders_brings_leadership_home_to_the_preferred_replica() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("elect_leaders").unwrap();
    let (cp, admin, controller) =
        control_plane_with(&url, 2, &["--auto-leader-rebalance-enable", "false"]);
    let created = common::http(
        &admin,
        "POST",
        "/v1/tenants",
        Some(TOKEN),
        r#"{"name":"acme"}"#,
    );
    assert_eq!(created.0, 201);
    let env = [("SKEIN_BROKER_REPLICA_LAG_TIME_MAX_MS", "3000")];
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut brokers: Vec<Option<(Process, String)>> = (1..=3)
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
    cluster::create_topic(&python, &all, "elected", 1, 3, &[]);
    // The first replica leads a new partition: it is the preferred leader.
    let (preferred, _) = wait_for(|| {
        cluster::leader_of(&python, &all, "elected", 0).filter(|(l, isr)| *l > 0 && *isr == 3)
    });
    assert_eq!(
        elect(&python, &all, "preferred", "elected", 0),
        "ELECTION_NOT_NEEDED"
    );
    assert_eq!(
        elect(&python, &all, "unclean", "elected", 0),
        "ELECTION_NOT_NEEDED"
    );
    assert_eq!(
        elect(&python, &all, "preferred", "nowhere", 0),
        // librdkafka's name of UNKNOWN_TOPIC_OR_PARTITION.
        "UNKNOWN_TOPIC_OR_PART"
    );

    // The preferred leader dies, another replica leads, and it comes back in sync.
    brokers[preferred - 1].take().unwrap().0.kill();
    let (stand_in, _) = wait_for(|| {
        let live = cluster::addresses(&brokers);
        cluster::leader_of(&python, &live, "elected", 0).filter(|(l, _)| *l > 0 && *l != preferred)
    });
    brokers[preferred - 1] = Some(tenant_broker_with(
        &controller,
        dirs[preferred - 1].path(),
        "acme",
        preferred as i32,
        &env,
    ));
    let all = cluster::addresses(&brokers);
    // A broker may answer with no leader (0) for a moment while it learns the partition's.
    let (leader, _) = wait_for(|| {
        cluster::leader_of(&python, &all, "elected", 0).filter(|(l, isr)| *l > 0 && *isr == 3)
    });
    assert_eq!(
        leader, stand_in,
        "without the automatic rebalance, leadership stays"
    );

    assert_eq!(
        elect(&python, &all, "unclean", "elected", 0),
        "ELECTION_NOT_NEEDED"
    );
    assert_eq!(elect(&python, &all, "preferred", "elected", 0), "ok");
    wait_for(|| cluster::leader_of(&python, &all, "elected", 0).filter(|(l, _)| *l == preferred));
    assert_eq!(
        elect(&python, &all, "preferred", "elected", 0),
        "ELECTION_NOT_NEEDED"
    );

    for (process, _) in brokers.into_iter().flatten() {
        process.stop();
    }
    cp.stop();
}
