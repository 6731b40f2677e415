//! `skein dev` as a person starts and stops it: Ctrl-C stops it cleanly and quickly, with or
//! without the operations listener, so the next start recovers nothing; and a second start
//! on a data directory in use fails at once, naming the pid that holds it.

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

/// A free port on 127.0.0.1 (bound, then let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The leader of each partition of `topic`, as the broker at `kafka` tells it.
fn leaders(kafka: &str, topic: &str) -> Vec<i32> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(common::kafka::name(topic))),
    ]));
    let answer: MetadataResponse = RawKafka::connect(kafka).call(ApiKey::Metadata, 9, &request);
    answer.topics[0]
        .partitions
        .iter()
        .map(|p| p.leader_id.0)
        .collect()
}

/// After a restart, `/readyz` answers 200 only once every partition has its leader back: a
/// probe never sends traffic to a broker that would answer NOT_LEADER.
#[test]
fn after_a_restart_readyz_waits_for_every_partition_to_have_a_leader() {
    let data = tempfile::tempdir().unwrap();
    let (kafka_port, ops_port) = (free_port(), free_port());
    let kafka = format!("127.0.0.1:{kafka_port}");
    let ops = format!("127.0.0.1:{ops_port}");
    let args = ["--ops-listen", &ops];
    {
        let mut dev = Dev::start_with(data.path(), None, &args);
        dev.create_topic("held", 4);
        // A clean stop hands leadership back to the controller: with no other replica, the
        // partitions have no leader until this broker is back and elected again.
        interrupt(&dev);
        assert!(exits_within(&mut dev.process.0, Duration::from_secs(30)).success());
    }
    // Started again on a fixed Kafka port, so that Metadata can be asked the moment the
    // probe first says ready.
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_skein"));
    command
        .args([
            "dev",
            "--kafka-listen",
            &kafka,
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--gateway-listen",
            "127.0.0.1:0",
            "--gateway-grpc-listen",
            "127.0.0.1:0",
        ])
        .args(["--kafka-sasl-listen", "127.0.0.1:0", "--ops-listen", &ops])
        .arg("--data-dir")
        .arg(data.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _again = common::dev::Killed(command.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "never ready");
        let ready = std::net::TcpStream::connect(&ops).is_ok()
            && common::http(&ops, "GET", "/readyz", None, "").0 == 200;
        if ready {
            let leaders = leaders(&kafka, "held");
            assert_eq!(leaders.len(), 4);
            assert!(
                leaders.iter().all(|leader| *leader >= 0),
                "ready while partitions had no leader: {leaders:?}"
            );
            // And the broker serves them: a write to each is taken at the first try.
            let mut client = RawKafka::connect(&kafka);
            for partition in 0..4 {
                let batch = build_batch(
                    &[NewRecord {
                        value: Some(b"after".to_vec()),
                        ..NewRecord::default()
                    }],
                    Compression::None,
                    ProducerFields::NONE,
                )
                .unwrap();
                assert_eq!(
                    client.produce("held", partition, batch),
                    0,
                    "ready while partition {partition} was not served"
                );
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
