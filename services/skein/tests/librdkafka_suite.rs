//! librdkafka's own transaction and idempotence tests, those that need a real broker rather
//! than librdkafka's mock cluster, run against `skein dev --brokers 3` (0103 makes topics of
//! three replicas): the test runner is built from the
//! librdkafka sources rdkafka-sys vendors (`tests/librdkafka/test-runner.sh`).
//!
//! - 0103_transactions: basic, compressed, consume-transform-produce, misuse, fencing, empty
//!   transactions with and without offsets, watermarks per isolation level, and an abort's
//!   control record's leader epoch;
//! - 0129_fetch_aborted_msgs: a read_committed consumer fetches past a large aborted
//!   transaction that spans segments;
//! - 0090_idempotence: an idempotent producer's order and exactly-once writes.
//!
//! 0098_consumer_txn needs a Java producer and is left out.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::dev::Dev;

const TESTS: &str = "0090,0103,0129";

#[test]
fn librdkafkas_transaction_tests_pass_against_skein() {
    let script = format!(
        "{}/../../tests/librdkafka/test-runner.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    let built = Command::new("bash").arg(&script).output().unwrap();
    assert!(
        built.status.success(),
        "building librdkafka's test runner failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let runner = String::from_utf8(built.stdout).unwrap().trim().to_owned();

    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start_with(data.path(), None, &["--brokers", "3"]);
    let work = tempfile::tempdir().unwrap();
    let conf = work.path().join("test.conf");
    std::fs::write(
        &conf,
        format!(
            "bootstrap.servers={}\nbroker.address.family=v4\ntest.topic.random=true\n",
            dev.kafka
        ),
    )
    .unwrap();
    let out = Command::new("timeout")
        .args(["--kill-after=10", "900"])
        .arg(&runner)
        .current_dir(work.path())
        // Cargo points LD_LIBRARY_PATH at rdkafka-sys's build, whose librdkafka.so.1 exports
        // only the public API; the runner must load the library built beside it (its RUNPATH).
        .env_remove("LD_LIBRARY_PATH")
        .env("TESTS", TESTS)
        .env("RDKAFKA_TEST_CONF", &conf)
        // The protocol Skein speaks is Kafka 3.x's.
        .env("TEST_KAFKA_VERSION", "3.7.0")
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{printed}");
    // Each test ran (rather than being skipped) and passed.
    for test in [
        "0090_idempotence",
        "0103_transactions",
        "0129_fetch_aborted_msgs",
    ] {
        assert!(
            printed
                .lines()
                .any(|l| l.contains(test) && l.contains("PASSED")),
            "{test} did not pass:\n{printed}"
        );
    }
}
