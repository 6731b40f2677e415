//! Record batches crafted to crash or exhaust whoever decodes them, sent to `skein dev`
//! over its Kafka port as raw frames: the broker refuses them with INVALID_RECORD and stores
//! nothing, and a bad batch that is already in a log is reported by the gateway, which goes
//! on serving every other read.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::dev::Dev;
use common::kafka::RawKafka;
use common::request;
use skein_records::{build_batch, BatchParts, Compression, NewRecord, ProducerFields};

const INVALID_RECORD: i16 = 87;

fn record(value: &[u8]) -> NewRecord {
    NewRecord {
        key: Some(b"k".to_vec()),
        value: Some(value.to_vec()),
        headers: vec![],
        timestamp: 1_700_000_000_000,
    }
}

fn honest(value: &str) -> Vec<u8> {
    build_batch(
        &[record(value.as_bytes())],
        Compression::None,
        ProducerFields::NONE,
    )
    .unwrap()
}

/// A batch with a valid header and CRC whose one record declares 2^31-1 headers.
fn two_billion_headers() -> Vec<u8> {
    // attributes, timestamp delta 0, offset delta 0, key "k", value "v", header count.
    let mut body = vec![0, 0, 0, 2, b'k', 2, b'v'];
    body.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
    let mut records = vec![(body.len() as u8) << 1];
    records.extend_from_slice(&body);
    skein_records::assemble(
        &records,
        BatchParts {
            base_offset: 0,
            attributes: 0,
            last_offset_delta: 0,
            base_timestamp: 1_700_000_000_000,
            max_timestamp: 1_700_000_000_000,
            producer: ProducerFields::NONE,
            records_count: 1,
        },
    )
    .unwrap()
}

/// A zstd batch of well under a MiB whose one value inflates to 1 GiB.
fn compression_bomb() -> Vec<u8> {
    let bomb = build_batch(
        &[record(&vec![0u8; 1 << 30])],
        Compression::Zstd,
        ProducerFields::NONE,
    )
    .unwrap();
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    bomb
}

fn read(dev: &Dev, topic: &str, offset: i64) -> common::Answer {
    request(
        &dev.rest,
        "GET",
        &format!("/v1/topics/{topic}/partitions/0/records?offset={offset}&max_wait_ms=0&value_format=string"),
        &[("Authorization", &format!("Bearer {}", dev.dev_token))],
        "",
    )
}

fn healthy(dev: &Dev) -> bool {
    request(&dev.rest, "GET", "/healthz", &[], "").status == 200
}

#[test]
fn hostile_batches_are_refused_with_invalid_record_and_nothing_is_stored() {
    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start(data.path());
    dev.create_topic("victim", 1);
    let mut kafka = RawKafka::connect(&dev.kafka);
    assert_eq!(kafka.produce("victim", 0, honest("before")), 0);

    assert_eq!(
        kafka.produce("victim", 0, two_billion_headers()),
        INVALID_RECORD
    );
    assert_eq!(
        kafka.produce("victim", 0, compression_bomb()),
        INVALID_RECORD
    );
    // A request whose second batch is hostile writes neither.
    let mut mixed = honest("in a request with a bad batch");
    mixed.extend(two_billion_headers());
    assert_eq!(kafka.produce("victim", 0, mixed), INVALID_RECORD);
    assert_eq!(kafka.produce("victim", 0, honest("after")), 0);
    assert_eq!(kafka.latest_offset("victim", 0), 2);

    // Every reader gets exactly the honest records: the gateway, and kcat on the Kafka port.
    let answer = read(&dev, "victim", 0);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let values: Vec<String> = answer.json()["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(values, ["before", "after"]);
    let kcat = Command::new("timeout")
        .args([
            "60",
            "kcat",
            "-b",
            &dev.kafka,
            "-C",
            "-t",
            "victim",
            "-o",
            "beginning",
        ])
        .args(["-e", "-q", "-f", "%s\\n"])
        .output()
        .unwrap();
    assert!(
        kcat.status.success(),
        "{}",
        String::from_utf8_lossy(&kcat.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&kcat.stdout), "before\nafter\n");
    // A read may not ask the brokers for more than the gateway's cap.
    let greedy = request(
        &dev.rest,
        "GET",
        "/v1/topics/victim/partitions/0/records?offset=0&max_bytes=2147483647",
        &[("Authorization", &format!("Bearer {}", dev.dev_token))],
        "",
    );
    assert_eq!(greedy.status, 400, "{}", greedy.body);
    assert!(greedy.body.contains("max_bytes"), "{}", greedy.body);
    assert!(healthy(&dev));
}

#[test]
fn a_bad_batch_already_in_a_log_is_reported_and_every_other_read_goes_on() {
    let data = tempfile::tempdir().unwrap();
    {
        let dev = Dev::start(data.path());
        dev.create_topic("stored", 1);
        dev.create_topic("fine", 1);
        let mut kafka = RawKafka::connect(&dev.kafka);
        assert_eq!(kafka.produce("stored", 0, honest("good")), 0);
        assert_eq!(kafka.produce("fine", 0, honest("fine")), 0);
    }
    // A log written before records were validated (or by a leader that did not check)
    // may hold such a batch: put one there while skein dev is down.
    {
        let dir = data.path().join("logs").join("stored-0");
        let cache = skein_log::HandleCache::new(8);
        let mut log = skein_log::Log::open(
            &dir,
            skein_log::LogConfig::default(),
            std::sync::Arc::new(skein_log::SystemClock),
            cache,
        )
        .unwrap();
        let mut bad = two_billion_headers();
        bad[..8].copy_from_slice(&log.log_end_offset().to_be_bytes());
        log.append_replicated(&bad).unwrap();
        log.close().unwrap();
    }
    let dev = Dev::start(data.path());
    dev.wait_for_topic("stored");
    let mut kafka = RawKafka::connect(&dev.kafka);
    assert_eq!(kafka.latest_offset("stored", 0), 2);

    let answer = read(&dev, "stored", 1);
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert_eq!(
        answer.header("content-type"),
        Some("application/problem+json")
    );
    let problem = answer.json();
    assert!(
        problem["type"]
            .as_str()
            .unwrap()
            .ends_with("corrupt-records"),
        "{problem}"
    );
    assert!(
        problem["detail"].as_str().unwrap().contains("stored-0"),
        "{problem}"
    );
    // The gateway is still up, for this tenant's other topics and the same one.
    assert!(healthy(&dev));
    let fine = read(&dev, "fine", 0);
    assert_eq!(fine.status, 200, "{}", fine.body);
    assert_eq!(fine.json()["records"][0]["value"], "fine");
    assert_eq!(read(&dev, "stored", 1).status, 502);
    assert!(healthy(&dev));
}
