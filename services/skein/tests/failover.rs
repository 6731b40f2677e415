//! Acknowledged means durable: three broker processes of one tenant on a control-plane
//! process and a real PostgreSQL; an idempotent confluent-kafka producer (`acks=all`)
//! writes numbered records to a topic of six partitions (RF=3, `min.insync.replicas=2`)
//! while partition leaders are killed with SIGKILL one at a time and restarted. Afterwards
//! every acknowledged record is read back exactly once, at the offset its acknowledgement
//! named.
//!
//! `SKEIN_FAILOVER_KILLS` sets how many leaders die (default 20).

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster;
use common::processes::*;

const PARTITIONS: usize = 6;

fn broker(controller: &str, dir: &std::path::Path, node: i32) -> (Process, String) {
    broker_at(controller, dir, node, "127.0.0.1:0")
}

fn broker_at(
    controller: &str,
    dir: &std::path::Path,
    node: i32,
    listen: &str,
) -> (Process, String) {
    tenant_broker_at(
        controller,
        dir,
        "acme",
        node,
        &[("SKEIN_BROKER_REPLICA_LAG_TIME_MAX_MS", "3000")],
        listen,
    )
}

/// Each partition's (leader, ISR size), from whichever broker answers.
fn leaders(python: &str, bootstrap: &str) -> Option<Vec<(i64, usize)>> {
    let script_path = format!(
        "{}/../../tests/clients/cluster_placement.py",
        std::env::var("CARGO_MANIFEST_DIR").unwrap()
    );
    let out = Command::new("timeout")
        .args(["30", python, &script_path, bootstrap, "describe", "durable"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let described: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    (0..PARTITIONS)
        .map(|p| {
            let partition = &described["partitions"][p.to_string()];
            Some((
                partition["leader"].as_i64()?,
                partition["isr"].as_array()?.len(),
            ))
        })
        .collect()
}

#[test]
fn no_acknowledged_record_is_lost_or_duplicated_while_leaders_are_killed() {
    let kills: usize = std::env::var("SKEIN_FAILOVER_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("failover").unwrap();
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
        .map(|node| Some(broker(&controller, dirs[node - 1].path(), node as i32)))
        .collect();
    let all = cluster::addresses(&brokers);
    cluster::create_topic(&python, &all, "durable", 6, 3, &["min.insync.replicas=2"]);

    let work = tempfile::tempdir().unwrap();
    let acked = work.path().join("acked");
    let stop = work.path().join("stop");
    let durable = format!(
        "{}/../../tests/clients/durable.py",
        std::env::var("CARGO_MANIFEST_DIR").unwrap()
    );
    let mut producer = Command::new(&python)
        .arg(&durable)
        .arg(&all)
        .args(["produce", "durable", "6"])
        .arg(&acked)
        .arg(&stop)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(work.path().join("producer.log")).unwrap())
        .spawn()
        .unwrap();

    let mut failovers = Vec::new();
    for kill in 0..kills {
        // Everyone back in every ISR before the next leader dies.
        let full = wait_for(|| {
            let current = leaders(&python, &cluster::addresses(&brokers))?;
            current
                .iter()
                .all(|(leader, isr)| *leader > 0 && *isr == 3)
                .then_some(current)
        });
        let (victim, _) = full[kill % PARTITIONS];
        let victim = victim as usize;
        let (process, address) = brokers[victim - 1].take().unwrap();
        let killed_at = Instant::now();
        process.kill();
        // A new leader for every partition the victim led.
        wait_for(|| {
            let current = leaders(&python, &cluster::addresses(&brokers))?;
            current
                .iter()
                .all(|(leader, _)| *leader > 0 && *leader as usize != victim)
                .then_some(())
        });
        failovers.push(killed_at.elapsed());
        // Back on its own address, as a broker in a StatefulSet comes back under its pod's
        // name: the producer's bootstrap list stays true, as it does in a deployment.
        brokers[victim - 1] = Some(broker_at(
            &controller,
            dirs[victim - 1].path(),
            victim as i32,
            &address,
        ));
    }
    std::fs::write(&stop, b"").unwrap();
    let status = exits_within(&mut producer, Duration::from_secs(300));
    let mut out = String::new();
    producer
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let log = std::fs::read_to_string(work.path().join("producer.log")).unwrap_or_default();
    // The producer's own account (librdkafka's idempotence events), kept short.
    let err: String = log
        .lines()
        .filter(|l| !l.contains("Partition ") || l.contains("rror"))
        .rev()
        .take(200)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    assert!(status.success(), "{out}\n{err}");
    let produced: serde_json::Value = serde_json::from_str(out.trim()).unwrap();

    let checked = script(
        &python,
        "durable.py",
        &cluster::addresses(&brokers),
        &["verify", "durable", "6", acked.to_str().unwrap()],
    );
    let checked: serde_json::Value = serde_json::from_str(checked.trim()).unwrap();
    failovers.sort();
    println!(
        "kills {kills}: acknowledged {} / lost {} / duplicated {} / moved {} (acknowledged without an offset {}) / failed-and-retried {} {}; \
         leader elected after (ms) min {} median {} max {}",
        checked["acked"],
        checked["lost"],
        checked["duplicated"],
        checked["moved"],
        checked["acked_without_offset"],
        produced["failed"],
        produced["errors"],
        failovers.first().map_or(0, Duration::as_millis),
        failovers.get(failovers.len() / 2).map_or(0, Duration::as_millis),
        failovers.last().map_or(0, Duration::as_millis),
    );
    assert!(checked["acked"].as_u64().unwrap() > 0, "{checked}");
    assert_eq!(produced["unflushed"], 0, "{produced}");
    assert_eq!(checked["lost"], 0, "{checked}");
    assert_eq!(checked["duplicated"], 0, "{checked}\n{err}");
    assert_eq!(checked["moved"], 0, "{checked}");
    for (process, _) in brokers.into_iter().flatten() {
        process.stop();
    }
    cp.stop();
}
