//! Exactly once through failures: three broker processes of one tenant on a control-plane
//! process and a real PostgreSQL; a confluent-kafka copier (consume-transform-produce with
//! `send_offsets_to_transaction`, `tests/clients/txn_copier.py`) copies a topic of six
//! partitions (RF=3, `min.insync.replicas=2`) to another while the test kills the copier
//! with SIGKILL and restarts it, and kills brokers (the leaders of the source's partitions,
//! and with them at times the transaction or group coordinator) and restarts them.
//! Afterwards the copy, read `read_committed`, holds every source record exactly once, in
//! the source's order.
//!
//! `SKEIN_TXN_KILLS` sets how many kills of each kind (default 10).

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster;
use common::processes::*;

const PARTITIONS: u32 = 6;
const RECORDS: u32 = 6000;

fn broker(controller: &str, dir: &std::path::Path, node: i32) -> (Process, String) {
    tenant_broker_with(
        controller,
        dir,
        "acme",
        node,
        &[("SKEIN_BROKER_REPLICA_LAG_TIME_MAX_MS", "3000")],
    )
}

fn copier(python: &str, bootstrap: &str, log: &std::path::Path) -> Child {
    let script = format!(
        "{}/../../tests/clients/txn_copier.py",
        env!("CARGO_MANIFEST_DIR")
    );
    Command::new(python)
        .arg(script)
        .arg(bootstrap)
        .args(["copy", "source", "copy", &PARTITIONS.to_string()])
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap(),
        )
        .spawn()
        .unwrap()
}

/// A pause of 0.5 to 2 s, different each time.
fn random_pause() -> Duration {
    let noise = RandomState::new().hash_one(Instant::now()) % 1500;
    Duration::from_millis(500 + noise)
}

#[test]
fn a_transactional_copy_is_exact_while_the_copier_and_the_brokers_are_killed() {
    let kills: usize = std::env::var("SKEIN_TXN_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("transactions").unwrap();
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
    for topic in ["source", "copy"] {
        cluster::create_topic(
            &python,
            &all,
            topic,
            PARTITIONS,
            3,
            &["min.insync.replicas=2"],
        );
    }
    script(
        &python,
        "txn_copier.py",
        &all,
        &[
            "fill",
            "source",
            &PARTITIONS.to_string(),
            &RECORDS.to_string(),
        ],
    );

    let work = tempfile::tempdir().unwrap();
    let log = work.path().join("copier.log");
    let mut running = copier(&python, &all, &log);
    let (mut copier_kills, mut broker_kills, mut copier_failures) = (0, 0, 0);
    let mut finished_early = false;
    while copier_kills < kills || broker_kills < kills {
        std::thread::sleep(random_pause());
        if let Some(status) = running.try_wait().unwrap() {
            if status.success() {
                finished_early = true;
                break;
            }
            // A fatal error of the client (a broker died under it): start it again.
            copier_failures += 1;
            running = copier(&python, &cluster::addresses(&brokers), &log);
            continue;
        }
        if copier_kills <= broker_kills {
            let _ = running.kill();
            let _ = running.wait();
            copier_kills += 1;
            running = copier(&python, &cluster::addresses(&brokers), &log);
            continue;
        }
        // Everyone back in every ISR before the next broker dies, so min.insync.replicas=2
        // always has a quorum of copies.
        let victim = wait_for(|| {
            let addresses = cluster::addresses(&brokers);
            let placements: Option<Vec<(usize, usize)>> = (0..PARTITIONS)
                .map(|p| cluster::leader_of(&python, &addresses, "source", p))
                .collect();
            let placements = placements?;
            placements
                .iter()
                .all(|(leader, isr)| *leader > 0 && *isr == 3)
                .then(|| placements[broker_kills % PARTITIONS as usize].0)
        });
        let (process, _) = brokers[victim - 1].take().unwrap();
        process.kill();
        broker_kills += 1;
        std::thread::sleep(random_pause());
        brokers[victim - 1] = Some(broker(&controller, dirs[victim - 1].path(), victim as i32));
    }
    assert!(
        !finished_early,
        "the copy finished after {copier_kills} copier and {broker_kills} broker kills; \
         the test needs a longer copy"
    );
    // Let it finish, starting it again if a late failure stopped it.
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        match running.try_wait().unwrap() {
            Some(status) if status.success() => break,
            Some(_) => {
                copier_failures += 1;
                running = copier(&python, &cluster::addresses(&brokers), &log);
            }
            None => std::thread::sleep(Duration::from_millis(200)),
        }
        if Instant::now() > deadline {
            let _ = running.kill();
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: String = tail.lines().rev().take(40).collect::<Vec<_>>().join("\n");
            panic!("the copier did not finish:\n{tail}");
        }
    }
    let report = script(
        &python,
        "txn_copier.py",
        &cluster::addresses(&brokers),
        &["verify", "source", "copy", &PARTITIONS.to_string()],
    );
    let report: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    println!(
        "copier killed {copier_kills} times, brokers {broker_kills} times, copier failed \
         {copier_failures} times: {report}"
    );
    assert_eq!(report["source"], RECORDS, "{report}");
    assert_eq!(report["copied"], RECORDS, "{report}");
    assert_eq!(report["missing"], 0, "{report}");
    assert_eq!(report["duplicated"], 0, "{report}");
    assert_eq!(report["out_of_order"], 0, "{report}");
    for (process, _) in brokers.into_iter().flatten() {
        process.stop();
    }
    cp.stop();
}
