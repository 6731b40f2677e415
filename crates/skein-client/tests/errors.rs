//! The typed errors users rely on.
#![allow(clippy::unwrap_used)]

mod common;

use common::TestBroker;
use skein_client::{
    ClientError, FetchOptions, NewTopic, ProduceRecord, Producer, ProducerConfig, ResponseError,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_to_unknown_topic_returns_unknown_topic_or_partition() {
    let broker = TestBroker::start_with(|c| c.auto_create_topics = false).await;
    let mut config = broker.client_config();
    config.allow_auto_topic_creation = true;
    config.retries = 1;
    let client = skein_client::Client::connect(config).await.unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let err = producer
        .send("missing", [ProduceRecord::new("v")])
        .await
        .unwrap_err();
    assert_eq!(
        err.kafka_error(),
        Some(ResponseError::UnknownTopicOrPartition),
        "{err}"
    );
    assert!(matches!(err, ClientError::Kafka { ref resource, .. } if resource == "missing"));
    assert!(client.metadata().topic("missing").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_out_of_range_returns_offset_out_of_range() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("short", 1)])
        .await
        .unwrap();
    Producer::new(client.clone(), ProducerConfig::default())
        .send("short", [ProduceRecord::new("a"), ProduceRecord::new("b")])
        .await
        .unwrap();
    let err = client
        .fetch("short", 0, 10, &FetchOptions::default())
        .await
        .unwrap_err();
    match err {
        ClientError::OffsetOutOfRange {
            ref topic,
            partition,
            offset,
            high_watermark,
            ..
        } => {
            assert_eq!((topic.as_str(), partition, offset), ("short", 0, 10));
            assert_eq!(high_watermark, 2);
        }
        other => panic!("expected OffsetOutOfRange, got {other}"),
    }
    assert_eq!(err.kafka_error(), Some(ResponseError::OffsetOutOfRange));
    assert!(!err.is_retriable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_partition_beyond_the_topic_is_rejected() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("two", 2)])
        .await
        .unwrap();
    let err = Producer::new(client, ProducerConfig::default())
        .send("two", [ProduceRecord::new("v").with_partition(2)])
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::UnknownPartition { partitions: 2, .. }),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_bootstrap_is_bootstrap_failed() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let err = skein_client::Client::connect(skein_client::ClientConfig::new([addr]))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::BootstrapFailed { .. }), "{err}");
}
