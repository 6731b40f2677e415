//! Python Kafka clients (confluent-kafka, kafka-python, aiokafka) against a real broker over
//! TCP, driven by the scripts in `tests/clients/`, run by the interpreter of the environment
//! `tests/clients/setup.sh` prepares (or `SKEIN_PYTHON`).

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::TestBroker;

/// The interpreter with the client packages: `SKEIN_PYTHON`, or the environment that
/// `tests/clients/setup.sh` creates (and, on first use, fills from PyPI).
fn python() -> String {
    if let Ok(python) = std::env::var("SKEIN_PYTHON") {
        return python;
    }
    common::setup_clients()
}

fn run_client(script: &str, broker: &TestBroker, args: &[&str]) {
    let python = python();
    let path = format!(
        "{}/../../tests/clients/{script}",
        env!("CARGO_MANIFEST_DIR")
    );
    // A client that hangs fails the test after five minutes instead of holding it up.
    let out = Command::new("timeout")
        .args(["--kill-after=10", "300", python.as_str()])
        .arg(&path)
        .arg(broker.bootstrap())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("failed to run {python} {path}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "{script} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

#[test]
fn confluent_kafka_admin_and_every_codec_round_trip() {
    let broker = TestBroker::start();
    run_client("confluent_admin_and_codecs.py", &broker, &[]);
}

#[test]
fn confluent_kafka_consumer_groups_split_take_over_and_resume_after_a_broker_restart() {
    let mut broker = TestBroker::start();
    run_client("confluent_groups.py", &broker, &["first"]);
    broker.restart();
    run_client("confluent_groups.py", &broker, &["after-restart"]);
}

#[test]
fn confluent_kafka_transactions_commit_abort_fence_copy_exactly_once_and_time_out() {
    let broker = TestBroker::start();
    run_client("confluent_transactions.py", &broker, &[]);
}

#[test]
fn kafka_python_round_trip_and_group_commit_resume() {
    let broker = TestBroker::start();
    run_client("kafka_python_roundtrip.py", &broker, &[]);
}

#[test]
fn aiokafka_round_trip_and_group_commit_resume() {
    let broker = TestBroker::start();
    run_client("aiokafka_roundtrip.py", &broker, &[]);
}

#[test]
fn an_idempotent_producer_loses_and_repeats_nothing_across_a_broker_restart() {
    let mut broker = TestBroker::start();
    let python = python();
    let path = format!(
        "{}/../../tests/clients/confluent_idempotent.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let child = Command::new(&python)
        .arg(&path)
        .arg(broker.bootstrap())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The producer spreads its 20k records over about four seconds; restart mid-stream.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    broker.restart();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn confluent_kafka_topic_configs_and_offsets_for_times() {
    let broker = TestBroker::start();
    run_client("confluent_configs.py", &broker, &[]);
}
