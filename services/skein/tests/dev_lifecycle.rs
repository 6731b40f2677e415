//! `skein dev` as a person starts and stops it: Ctrl-C stops it cleanly and quickly, with or
//! without the operations listener, so the next start recovers nothing; and a second start
//! on a data directory in use fails at once, naming the pid that holds it; a restart after
//! SIGKILL takes the dead run's controller lease at once.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::dev::Dev;
use common::kafka::RawKafka;
use common::metrics::{ops_of, scrape};
use common::processes::exits_within;
use skein_records::{build_batch, Compression, NewRecord, ProducerFields};

/// How long Ctrl-C may take to stop `skein dev`.
const STOPS_WITHIN: Duration = Duration::from_secs(2);

fn interrupt(dev: &Dev) {
    let sent = std::process::Command::new("kill")
        .args(["-INT", &dev.process.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

#[test]
fn ctrl_c_stops_skein_dev_cleanly_within_two_seconds_with_or_without_the_ops_listener() {
    for ops in [true, false] {
        let data = tempfile::tempdir().unwrap();
        let args: &[&str] = if ops {
            &["--ops-listen", "127.0.0.1:0"]
        } else {
            &[]
        };
        let mut dev = Dev::start_with(data.path(), None, args);
        dev.create_topic("kept", 2);
        let batch = build_batch(
            &[NewRecord {
                value: Some(b"one".to_vec()),
                ..NewRecord::default()
            }],
            Compression::None,
            ProducerFields::NONE,
        )
        .unwrap();
        assert_eq!(RawKafka::connect(&dev.kafka).produce("kept", 0, batch), 0);
        if ops {
            // The ops listener has served a scrape and a readiness check.
            assert!(scrape(&ops_of(&dev)).contains("skein_"));
        }

        let asked = Instant::now();
        interrupt(&dev);
        let status = exits_within(&mut dev.process.0, Duration::from_secs(30));
        let took = asked.elapsed();
        assert!(
            status.success(),
            "ops {ops}: skein dev exited with {status}"
        );
        assert!(took < STOPS_WITHIN, "ops {ops}: Ctrl-C took {took:?}");

        // Everything was closed cleanly: the next start recovers no partition.
        let again = Dev::start_with(data.path(), None, args);
        assert!(
            again
                .printed
                .contains(", 0 recovered after an unclean shutdown"),
            "ops {ops}: {}",
            again.printed
        );
    }
}

#[test]
fn a_second_skein_dev_on_the_same_data_directory_fails_at_once_naming_the_first() {
    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start(data.path());
    let started = Instant::now();
    let second = common::dev::command(data.path()).output().unwrap();
    assert!(!second.status.success(), "{second:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the second start took {:?}",
        started.elapsed()
    );
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(
        said.contains(&format!("(pid {})", dev.process.0.id())),
        "{said}"
    );
    // The first goes on serving.
    let (status, _) = common::http(&dev.admin, "GET", "/v1/tenants", Some(&dev.admin_token), "");
    assert_eq!(status, 200);
}

/// A `skein dev` killed with SIGKILL leaves its controller lease live in the catalog for
/// the lease's 10 s. The next start on the same directory holds the directory's lock, so it
/// knows that lease is a dead run's and takes it over at once instead of waiting it out.
#[test]
fn a_restart_after_sigkill_takes_the_dead_runs_controller_lease_at_once() {
    const LEASE_TTL: Duration = Duration::from_secs(10);
    let data = tempfile::tempdir().unwrap();
    let mut dev = Dev::start(data.path());
    dev.process.0.kill().unwrap();
    dev.process.0.wait().unwrap();
    let started = Instant::now();
    let dev = Dev::start(data.path());
    let took = started.elapsed();
    assert!(
        took < LEASE_TTL / 2,
        "the restart took {took:?}, as if it waited out the killed run's lease"
    );
    let (status, _) = common::http(&dev.admin, "GET", "/v1/tenants", Some(&dev.admin_token), "");
    assert_eq!(status, 200);
}
