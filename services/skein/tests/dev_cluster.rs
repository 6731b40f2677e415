//! `skein dev --brokers 3`: one command starts a three-broker cluster (this process's broker
//! and two child `skein broker` processes); topics get three replicas by default, a killed
//! broker's partitions fail over while clients keep writing and reading, and the broker is
//! started again, catches up and rejoins every ISR. Stopping `skein dev` stops them all.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::dev::Dev;

fn python() -> String {
    common::processes::python()
}

fn run(python: &str, bootstrap: &str, args: &[&str]) -> serde_json::Value {
    let out = common::processes::script(python, "cluster_placement.py", bootstrap, args);
    serde_json::from_str(out.trim()).unwrap()
}

/// The pid of the child broker whose data directory is `dir`.
fn pid_of(dir: &std::path::Path) -> Option<String> {
    let out = Command::new("pgrep")
        .args(["-f", "--", &format!("--data-dir {}", dir.display())])
        .output()
        .ok()?;
    String::from_utf8(out.stdout)
        .ok()?
        .lines()
        .next()
        .map(str::to_owned)
}

#[test]
fn skein_dev_runs_a_three_broker_cluster_that_rides_through_a_killed_broker() {
    let python = python();
    let data = tempfile::tempdir().unwrap();
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut dev = Dev::start_with(data.path(), Some(log.path()), &["--brokers", "3"]);
    assert!(
        dev.printed.contains("cluster: 3 brokers"),
        "{}",
        dev.printed
    );

    let created = run(&python, &dev.kafka, &["create", "watch", "3", "-1"]);
    assert_eq!(created["error"], "ok", "{created}");
    let described = run(&python, &dev.kafka, &["describe", "watch"]);
    assert_eq!(
        described["brokers"].as_object().unwrap().len(),
        3,
        "{described}"
    );
    for partition in described["partitions"].as_object().unwrap().values() {
        assert_eq!(
            partition["replicas"].as_array().unwrap().len(),
            3,
            "{described}"
        );
    }
    let trip = run(&python, &dev.kafka, &["round-trip", "watch", "3", "300"]);
    assert_eq!(
        (trip["acked"].as_u64(), trip["read"].as_u64()),
        (Some(300), Some(300)),
        "{trip}"
    );

    // Broker 1 dies: its partitions move; writes and reads go on.
    let child = data.path().join("broker-1");
    let pid = pid_of(&child).expect("broker 1 is running");
    assert!(Command::new("kill")
        .args(["-9", &pid])
        .status()
        .unwrap()
        .success());
    let trip = run(
        &python,
        &dev.kafka,
        &["round-trip", "watch", "3", "300", "300"],
    );
    assert_eq!(
        (trip["acked"].as_u64(), trip["read"].as_u64()),
        (Some(300), Some(300)),
        "{trip}"
    );

    // It comes back (a new process) and rejoins every ISR.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let described = run(&python, &dev.kafka, &["describe", "watch"]);
        let full = described["partitions"]
            .as_object()
            .unwrap()
            .values()
            .all(|p| p["isr"].as_array().unwrap().len() == 3);
        if full && pid_of(&child).is_some_and(|p| p != pid) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "broker 1 never rejoined: {described}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // Stopping skein dev stops every broker cleanly.
    let pid = dev.process.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = common::processes::exits_within(&mut dev.process.0, Duration::from_secs(60));
    assert!(status.success(), "{status}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_of(&child).is_some() || pid_of(&data.path().join("broker-2")).is_some() {
        assert!(
            Instant::now() < deadline,
            "child brokers outlived skein dev"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
