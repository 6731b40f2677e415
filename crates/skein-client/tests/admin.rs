//! Topic administration and metadata against a real broker.
#![allow(clippy::unwrap_used)]

mod common;

use common::TestBroker;
use skein_client::{NewTopic, OffsetSpec, ProduceRecord, Producer, ProducerConfig, ResponseError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_describe_and_delete_a_topic() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("admin", 2).with_config("retention.ms", "3600000")])
        .await
        .unwrap();
    let topic = client.reload_topic("admin").await.unwrap();
    assert_eq!(topic.partitions.len(), 2);
    assert!(!topic.id.is_nil());
    assert_eq!(topic.leader(1), Some(0));

    let configs = client.describe_topic_configs("admin").await.unwrap();
    let retention = &configs["retention.ms"];
    assert_eq!(retention.value.as_deref(), Some("3600000"));
    assert!(!retention.is_default);

    let again = client
        .create_topics(&[NewTopic::new("admin", 2)])
        .await
        .unwrap_err();
    assert_eq!(again.kafka_error(), Some(ResponseError::TopicAlreadyExists));

    client.delete_topics(&["admin"]).await.unwrap();
    assert!(client.metadata().topic("admin").is_none());
    let gone = client.reload_topic("admin").await.unwrap_err();
    assert_eq!(
        gone.kafka_error(),
        Some(ResponseError::UnknownTopicOrPartition)
    );
    let missing = client.delete_topics(&["admin"]).await.unwrap_err();
    assert_eq!(
        missing.kafka_error(),
        Some(ResponseError::UnknownTopicOrPartition)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_earliest_latest_and_by_timestamp() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("offsets", 1)])
        .await
        .unwrap();
    let earliest = client
        .list_offset("offsets", 0, OffsetSpec::Earliest)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(earliest.offset, 0);
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    producer
        .send(
            "offsets",
            (0..10).map(|i| ProduceRecord::new(format!("{i}")).with_timestamp(1_000 + i * 100)),
        )
        .await
        .unwrap();
    let latest = client
        .list_offset("offsets", 0, OffsetSpec::Latest)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.offset, 10);
    let at = client
        .list_offset("offsets", 0, OffsetSpec::Timestamp(1_450))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(at.offset, 5);
    assert_eq!(at.timestamp, Some(1_500));
    let after_all = client
        .list_offset("offsets", 0, OffsetSpec::Timestamp(1_000_000))
        .await
        .unwrap();
    assert_eq!(after_all, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_sees_partitions_added_by_create_partitions() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    let other = broker.client().await;
    client
        .create_topics(&[NewTopic::new("growing", 2)])
        .await
        .unwrap();
    assert_eq!(other.topic("growing").await.unwrap().partitions.len(), 2);
    client.create_partitions("growing", 5).await.unwrap();
    assert_eq!(
        client.metadata().topic("growing").unwrap().partitions.len(),
        5
    );
    // Another client keeps its cached view until it refreshes.
    assert_eq!(other.topic("growing").await.unwrap().partitions.len(), 2);
    other.refresh_metadata().await.unwrap();
    assert_eq!(other.topic("growing").await.unwrap().partitions.len(), 5);
    // Producing to a new partition works right after.
    let producer = Producer::new(other.clone(), ProducerConfig::default());
    let batches = producer
        .send("growing", [ProduceRecord::new("x").with_partition(4)])
        .await
        .unwrap();
    assert_eq!(batches[0].partition, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_negotiates_versions_within_both_ranges() {
    use kafka_protocol::messages::ApiKey;
    use skein_client::Connection;
    let broker = TestBroker::start().await;
    let connection = Connection::connect(&broker.bootstrap(), &broker.client_config())
        .await
        .unwrap();
    // The broker offers Fetch 4..=16; this client implements up to 12.
    assert_eq!(connection.version(ApiKey::Fetch).unwrap(), 12);
    assert_eq!(connection.version(ApiKey::Produce).unwrap(), 11);
    assert_eq!(connection.version(ApiKey::ApiVersions).unwrap(), 3);
    // The broker does not offer ListTransactions: no common version.
    assert!(connection.version(ApiKey::ListTransactions).is_err());
}
