//! A topic deleted and created again under the same name starts empty: its partitions are
//! told apart by topic id, so the new topic never serves the old one's records, whether it
//! is created right away, after a restart, or after a deletion made while `skein dev` was
//! down. Before, the old logs stayed on disk (for a 5 s grace, or for good when the broker
//! stopped within it or was down) and the new topic served them.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::dev::Dev;
use common::kafka::{name, RawKafka};
use common::{http, request};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};
use skein_records::{build_batch, Compression, NewRecord, ProducerFields};

fn batch(value: &str) -> Vec<u8> {
    build_batch(
        &[NewRecord {
            key: Some(b"k".to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: vec![],
            timestamp: 1_700_000_000_000,
        }],
        Compression::None,
        ProducerFields::NONE,
    )
    .unwrap()
}

/// Creates a topic of one partition through the admin API; answers its id.
fn create(dev: &Dev, topic: &str) -> String {
    let (status, body) = http(
        &dev.admin,
        "POST",
        "/v1/tenants/dev/topics",
        Some(&dev.admin_token),
        &format!(r#"{{"topic_name":"{topic}","partitions_count":1}}"#),
    );
    assert_eq!(status, 201, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    body["topic_id"].as_str().unwrap().to_owned()
}

fn delete(dev: &Dev, topic: &str) {
    let (status, body) = http(
        &dev.admin,
        "DELETE",
        &format!("/v1/tenants/dev/topics/{topic}"),
        Some(&dev.admin_token),
        "",
    );
    assert_eq!(status, 204, "{body}");
}

/// The id the broker gives `topic` in its Metadata answer, if it knows the topic.
fn broker_topic_id(kafka: &mut RawKafka, topic: &str) -> Option<String> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(topic)))
        ]))
        .with_allow_auto_topic_creation(false);
    let response: MetadataResponse = kafka.call(ApiKey::Metadata, 12, &request);
    let described = &response.topics[0];
    (described.error_code == 0).then(|| described.topic_id.to_string())
}

/// Waits until the broker serves `topic` under `id`, and the gateway knows the topic.
fn wait_for_id(dev: &Dev, kafka: &mut RawKafka, topic: &str, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = broker_topic_id(kafka, topic);
        if seen.as_deref() == Some(id) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the broker never served {topic} as {id}: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    dev.wait_for_topic(topic);
}

/// The values of partition 0 of `topic` from offset 0, through the gateway.
fn rest_values(dev: &Dev, topic: &str) -> Vec<String> {
    let answer = request(
        &dev.rest,
        "GET",
        &format!(
            "/v1/topics/{topic}/partitions/0/records?offset=0&max_wait_ms=0&value_format=string"
        ),
        &[("Authorization", &format!("Bearer {}", dev.dev_token))],
        "",
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].as_str().unwrap().to_owned())
        .collect()
}

/// What kcat reads of `topic` from the beginning, one value a line.
fn kcat_values(dev: &Dev, topic: &str) -> String {
    let kcat = Command::new("timeout")
        .args(["60", "kcat", "-b", &dev.kafka, "-C", "-t", topic])
        .args(["-o", "beginning", "-e", "-q", "-f", "%s\\n"])
        .output()
        .unwrap();
    assert!(
        kcat.status.success(),
        "{}",
        String::from_utf8_lossy(&kcat.stderr)
    );
    String::from_utf8_lossy(&kcat.stdout).into_owned()
}

/// Every reader finds partition 0 of `topic` holding exactly `values`.
fn assert_holds(dev: &Dev, kafka: &mut RawKafka, topic: &str, values: &[&str]) {
    assert_eq!(kafka.latest_offset(topic, 0), values.len() as i64);
    assert_eq!(rest_values(dev, topic), values);
    let expected: String = values.iter().map(|v| format!("{v}\n")).collect();
    assert_eq!(kcat_values(dev, topic), expected);
}

/// Creates `topic`, produces two records and checks that every reader sees them.
fn fill(dev: &Dev, kafka: &mut RawKafka, topic: &str) -> String {
    let id = create(dev, topic);
    wait_for_id(dev, kafka, topic, &id);
    assert_eq!(kafka.produce(topic, 0, batch("old-1")), 0);
    assert_eq!(kafka.produce(topic, 0, batch("old-2")), 0);
    assert_holds(dev, kafka, topic, &["old-1", "old-2"]);
    id
}

/// Creates `topic` again and checks that it is empty, then that it takes new records.
fn assert_recreated_empty(dev: &Dev, old_id: &str, topic: &str) {
    let mut kafka = RawKafka::connect(&dev.kafka);
    let id = create(dev, topic);
    assert_ne!(id, old_id);
    wait_for_id(dev, &mut kafka, topic, &id);
    assert_holds(dev, &mut kafka, topic, &[]);
    assert_eq!(kafka.produce(topic, 0, batch("new")), 0);
    assert_holds(dev, &mut kafka, topic, &["new"]);
}

#[test]
fn a_topic_created_again_right_after_its_deletion_is_empty() {
    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start(data.path());
    let mut kafka = RawKafka::connect(&dev.kafka);
    let old = fill(&dev, &mut kafka, "t");
    delete(&dev, "t");
    assert_recreated_empty(&dev, &old, "t");
    // And it stays so across a restart.
    drop(dev);
    let dev = Dev::start(data.path());
    let mut kafka = RawKafka::connect(&dev.kafka);
    dev.wait_for_topic("t");
    assert_holds(&dev, &mut kafka, "t", &["new"]);
}

#[test]
fn a_topic_deleted_just_before_a_stop_is_empty_when_created_after_the_restart() {
    let data = tempfile::tempdir().unwrap();
    let old = {
        let dev = Dev::start(data.path());
        let mut kafka = RawKafka::connect(&dev.kafka);
        let old = fill(&dev, &mut kafka, "t");
        delete(&dev, "t");
        old
        // Stopped at once: any deletion still pending in memory is lost.
    };
    let dev = Dev::start(data.path());
    assert_recreated_empty(&dev, &old, "t");
}

#[test]
fn a_topic_deleted_while_skein_dev_was_down_is_empty_when_created_again() {
    let data = tempfile::tempdir().unwrap();
    let old = {
        let dev = Dev::start(data.path());
        let mut kafka = RawKafka::connect(&dev.kafka);
        fill(&dev, &mut kafka, "t")
    };
    // The deletion reaches the catalog while no broker runs.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let url = format!("sqlite:{}", data.path().join("catalog.db").display());
        let catalog = skein_catalog::Catalog::open(&url).await.unwrap();
        let tenant = catalog.tenant_by_name("dev").await.unwrap();
        catalog.delete_topic(&tenant.id, "t").await.unwrap();
    });
    let dev = Dev::start(data.path());
    assert_recreated_empty(&dev, &old, "t");
    assert!(
        !data.path().join("logs").read_dir().unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with("-delete")),
        "a deleted partition directory was left behind"
    );
}
