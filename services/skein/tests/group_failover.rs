//! A consumer group keeps consuming across coordinator failovers with no committed offset
//! lost: three broker processes of one tenant on a control-plane process and a real
//! PostgreSQL. A confluent-kafka producer writes to a topic of three partitions (RF=3) while
//! one confluent-kafka group member reads it and commits synchronously; the broker leading
//! `__consumer_offsets` (the group's coordinator) is killed with SIGKILL and restarted,
//! again and again. Each failover makes the member join the group anew and resume every
//! partition from the group's committed offset: it must never resume before a commit that
//! was acknowledged. Afterwards the member has read every acknowledged record, and the
//! group holds the last commit.
//!
//! `SKEIN_GROUP_FAILOVER_KILLS` sets how many coordinators die (default 4).

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::cluster;
use common::processes::*;

const PARTITIONS: u32 = 3;

/// A broker of the cluster on `listen`; a restarted one takes its old address back, as a
/// StatefulSet's pod does, so the group's members find their coordinator where they last
/// saw it.
fn broker(controller: &str, dir: &std::path::Path, node: i32, listen: &str) -> (Process, String) {
    tenant_broker_at(
        controller,
        dir,
        "acme",
        node,
        &[("SKEIN_BROKER_REPLICA_LAG_TIME_MAX_MS", "3000")],
        listen,
    )
}

fn coordinator(python: &str, bootstrap: &str) -> Option<usize> {
    let out = script(
        python,
        "group_failover.py",
        bootstrap,
        &["coordinator", "readers"],
    );
    usize::try_from(out.trim().parse::<i64>().ok()?)
        .ok()
        .filter(|id| *id > 0)
}

fn client(name: &str) -> String {
    format!(
        "{}/../../tests/clients/{name}",
        std::env::var("CARGO_MANIFEST_DIR").unwrap()
    )
}

/// The last lines of a client's log, for a failure's message.
fn log_tail(path: &std::path::Path) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

/// Seconds since the epoch, to line kills up with the consumer's record of what it read.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[test]
fn a_group_keeps_consuming_across_coordinator_failovers_and_loses_no_commit() {
    let kills: usize = std::env::var("SKEIN_GROUP_FAILOVER_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("group_failover").unwrap();
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
    let mut brokers: Vec<Option<(Process, String)>> = (1..=3)
        .map(|node| {
            Some(broker(
                &controller,
                dirs[node - 1].path(),
                node as i32,
                "127.0.0.1:0",
            ))
        })
        .collect();
    let all = cluster::addresses(&brokers);
    cluster::create_topic(&python, &all, "events", PARTITIONS, 3, &[]);

    let work = tempfile::tempdir().unwrap();
    let acked = work.path().join("acked");
    let stop = work.path().join("stop");
    // The consumer stops only once the producer has flushed and exited: the high
    // watermarks it reads then include every acknowledged record.
    let drained = work.path().join("drained");
    let read = work.path().join("read.json");
    // The clients' logs go to files: librdkafka logs every refused reconnection while a
    // broker is down, and a pipe nobody reads fills after 64 KiB and blocks the client's
    // broker threads in the middle of the run.
    let producer_log = work.path().join("producer.log");
    let consumer_log = work.path().join("consumer.log");
    let mut producer = Command::new(&python)
        .arg(client("durable.py"))
        .arg(&all)
        .args(["produce", "events", &PARTITIONS.to_string()])
        .arg(&acked)
        .arg(&stop)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&producer_log).unwrap())
        .spawn()
        .unwrap();
    let mut consumer = Command::new(&python)
        .arg(client("group_failover.py"))
        .arg(&all)
        .args(["consume", "events", &PARTITIONS.to_string(), "readers"])
        .arg(&drained)
        .arg(&read)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&consumer_log).unwrap())
        .spawn()
        .unwrap();

    let mut victims = Vec::new();
    for _ in 0..kills {
        // Every replica back in sync and the group served before its coordinator dies.
        let victim = wait_for(|| {
            let bootstrap = cluster::addresses(&brokers);
            let synced = (0..PARTITIONS).all(|p| {
                cluster::leader_of(&python, &bootstrap, "events", p)
                    .is_some_and(|(leader, isr)| leader > 0 && isr == 3)
            });
            if !synced {
                return None;
            }
            coordinator(&python, &bootstrap)
        });
        // Commits keep coming through the coordinator before it dies.
        std::thread::sleep(Duration::from_secs(3));
        let (process, address) = brokers[victim - 1].take().unwrap();
        process.kill();
        victims.push((victim, unix_now()));
        // Another broker takes the group over.
        wait_for(|| coordinator(&python, &cluster::addresses(&brokers)).filter(|c| *c != victim));
        brokers[victim - 1] = Some(broker(
            &controller,
            dirs[victim - 1].path(),
            victim as i32,
            &address,
        ));
    }
    std::thread::sleep(Duration::from_secs(3));
    std::fs::write(&stop, b"").unwrap();
    let produced = exits_within(&mut producer, Duration::from_secs(300));
    assert!(
        produced.success(),
        "the producer failed: {}",
        log_tail(&producer_log)
    );
    std::fs::write(&drained, b"").unwrap();
    let consumed = exits_within(&mut consumer, Duration::from_secs(300));
    assert!(
        consumed.success(),
        "the consumer failed: {}",
        log_tail(&consumer_log)
    );

    let outcome: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&read).unwrap().trim()).unwrap();
    let read: BTreeSet<(u64, u64)> = outcome["read"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| (pair[0].as_u64().unwrap(), pair[1].as_u64().unwrap()))
        .collect();
    let acknowledged: Vec<(u64, u64)> = std::fs::read_to_string(&acked)
        .unwrap()
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields[0].parse().unwrap(), fields[2].parse().unwrap())
        })
        .collect();
    let unread = acknowledged.iter().filter(|r| !read.contains(r)).count();
    let mut lost_commits = BTreeMap::new();
    for p in 0..PARTITIONS {
        let key = p.to_string();
        let acked = outcome["acked"][&key].as_i64().unwrap_or(-1);
        let committed = outcome["committed"][&key].as_i64().unwrap_or(-1);
        if committed < acked {
            lost_commits.insert(p, (acked, committed));
        }
    }
    println!(
        "coordinators killed {victims:?}: records acknowledged {} / read {} / unread {unread}; \
         commits acknowledged {} / failed {}; assignments {}, rewinds {}; acknowledged commit vs held at the end {} / {}; \
         errors {}; last read (offset, when) {}; finished {}; client logs {} / {} bytes",
        acknowledged.len(),
        read.len(),
        outcome["commits_acked"],
        outcome["commits_failed"],
        outcome["assignments"],
        outcome["rewinds"],
        outcome["acked"],
        outcome["committed"],
        outcome["errors"],
        outcome["last_read"],
        outcome["finished"],
        std::fs::metadata(&producer_log).map_or(0, |m| m.len()),
        std::fs::metadata(&consumer_log).map_or(0, |m| m.len()),
    );
    assert!(!acknowledged.is_empty());
    assert!(outcome["commits_acked"].as_u64().unwrap() > 0, "{outcome}");
    assert_eq!(
        unread,
        0,
        "acknowledged records the group never read; the consumer's log ends with: {}",
        log_tail(&consumer_log)
    );
    // The member joined again after the failovers (else nothing was resumed and checked).
    assert!(
        outcome["assignments"].as_u64().unwrap() > 1,
        "{}",
        outcome["assignments"]
    );
    assert_eq!(
        outcome["rewinds"],
        serde_json::json!([]),
        "partitions resumed before an acknowledged commit"
    );
    assert!(
        lost_commits.is_empty(),
        "committed offsets went back (acknowledged, held): {lost_commits:?}"
    );
    for (process, _) in brokers.into_iter().flatten() {
        process.stop();
    }
    cp.stop();
}
