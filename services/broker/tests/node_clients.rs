//! kafkajs against a real broker over TCP, driven by the scripts in `tests/clients/`. The
//! packages live where `tests/clients/setup.sh` installs them (`~/.cache/skein/node`, or
//! `SKEIN_NODE_DIR`).

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::TestBroker;

fn node_modules() -> String {
    let dir = std::env::var("SKEIN_NODE_DIR").unwrap_or_else(|_| {
        format!(
            "{}/.cache/skein/node",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let modules = format!("{dir}/node_modules");
    if !std::path::Path::new(&format!("{modules}/kafkajs")).is_dir() {
        common::setup_clients();
    }
    modules
}

fn run_kafkajs(script: &str, broker: &TestBroker) {
    let script = format!(
        "{}/../../tests/clients/{script}",
        env!("CARGO_MANIFEST_DIR")
    );
    // A client that hangs fails the test after five minutes instead of holding it up.
    let out = Command::new("timeout")
        .args(["--kill-after=10", "300", "node"])
        .arg(&script)
        .arg(broker.bootstrap())
        .env("NODE_PATH", node_modules())
        .env("KAFKAJS_NO_PARTITIONER_WARNING", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "kafkajs failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kafkajs_round_trip_with_a_consumer_group() {
    let broker = TestBroker::start();
    run_kafkajs("kafkajs_roundtrip.js", &broker);
}

#[test]
fn kafkajs_transactions_commit_abort_send_offsets_and_fence() {
    let broker = TestBroker::start();
    run_kafkajs("kafkajs_transactions.js", &broker);
}
