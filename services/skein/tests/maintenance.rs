//! Retention against `skein dev`: a partition whose files are gone from under the broker
//! (a volume lost, a disk pulled) fails its maintenance, and the pass goes on to every other
//! partition, whose old segments are still deleted on time; the failure is logged by name.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::dev::Dev;
use common::kafka::RawKafka;
use skein_records::{build_batch, Compression, NewRecord, ProducerFields};

fn batch(value: &str) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    build_batch(
        &[NewRecord {
            key: None,
            value: Some(value.as_bytes().to_vec()),
            headers: vec![],
            timestamp: now,
        }],
        Compression::None,
        ProducerFields::NONE,
    )
    .unwrap()
}

/// The directories named `name` under `root`.
fn find_dirs(root: &std::path::Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if entry.file_name() == name {
                    found.push(path.clone());
                }
                pending.push(path);
            }
        }
    }
    found
}

#[test]
fn retention_goes_on_past_a_partition_whose_files_are_gone() {
    let data = tempfile::tempdir().unwrap();
    let log = data.path().join("skein.log");
    let dev = Dev::start_with(
        &data.path().join("dev"),
        Some(&log),
        &["--maintenance-interval-secs", "1"],
    );
    // Segments of about one batch, kept for two seconds.
    for name in ["a", "b"] {
        let (status, body) = common::http(
            &dev.admin,
            "POST",
            "/v1/tenants/dev/topics",
            Some(&dev.admin_token),
            &format!(
                r#"{{"topic_name":"{name}","partitions_count":1,
                    "configs":{{"segment.bytes":"300","retention.ms":"2000"}}}}"#
            ),
        );
        assert_eq!(status, 201, "{body}");
        dev.wait_for_topic(name);
    }
    let mut kafka = RawKafka::connect(&dev.kafka);
    for name in ["a", "b"] {
        for i in 0..5 {
            let value = format!("{name}-{i}-{}", "x".repeat(300));
            assert_eq!(kafka.produce(name, 0, batch(&value)), 0);
        }
        assert_eq!(kafka.latest_offset(name, 0), 5);
        assert_eq!(kafka.earliest_offset(name, 0), 0);
    }

    // "a-0" comes before "b-0" in the pass. Its files leave for somewhere else.
    let partitions = find_dirs(data.path(), "a-0");
    assert_eq!(partitions.len(), 1, "{partitions:?}");
    std::fs::rename(&partitions[0], data.path().join("gone")).unwrap();

    // b's four closed segments pass their retention and are deleted; a's cannot be.
    let deadline = Instant::now() + Duration::from_secs(30);
    while kafka.earliest_offset("b", 0) < 4 {
        assert!(
            Instant::now() < deadline,
            "retention stopped: b starts at {}",
            kafka.earliest_offset("b", 0)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The broker goes on serving b, and says which partition failed.
    assert_eq!(kafka.produce("b", 0, batch("after")), 0);
    assert_eq!(kafka.latest_offset("b", 0), 6);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.lines().any(|l| l.contains("a-0")),
        "no log line names a-0:\n{logged}"
    );
}
