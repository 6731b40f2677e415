//! A broker joined to the controller (here `skein dev`'s) forwards topic changes to it; what
//! the controller refuses reaches Kafka clients as the error code that fits, read from the
//! typed reason the refusal carries, not guessed back from its gRPC status code.

#![allow(clippy::unwrap_used)]

mod common;

use common::dev::Dev;
use common::kafka::{name, RawKafka};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse,
};

const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICATION_FACTOR: i16 = 38;

fn create(kafka: &mut RawKafka, topic: &str, partitions: i32, replication: i16) -> (i16, String) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(replication)]);
    let response: CreateTopicsResponse = kafka.call(ApiKey::CreateTopics, 5, &request);
    let topic = &response.topics[0];
    let message = topic
        .error_message
        .as_ref()
        .map(|m| m.as_str().to_owned())
        .unwrap_or_default();
    (topic.error_code, message)
}

fn grow(kafka: &mut RawKafka, topic: &str, count: i32) -> i16 {
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name(topic))
            .with_count(count)
            .with_assignments(None)]);
    let response: CreatePartitionsResponse = kafka.call(ApiKey::CreatePartitions, 1, &request);
    response.results[0].error_code
}

#[test]
fn the_controllers_refusals_reach_kafka_clients_as_the_fitting_error_codes() {
    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start(data.path());
    let mut kafka = RawKafka::connect(&dev.kafka);

    // More partitions than the controller allows a topic (the broker itself lets it pass).
    let (code, message) = create(&mut kafka, "huge", 20_000, 1);
    assert_eq!(code, INVALID_PARTITIONS, "{message}");
    assert!(message.contains("10000"), "{message}");
    // More replicas than live brokers.
    let (code, message) = create(&mut kafka, "copied", 1, 3);
    assert_eq!(code, INVALID_REPLICATION_FACTOR, "{message}");

    assert_eq!(create(&mut kafka, "orders", 2, 1).0, 0);
    // Created elsewhere (the admin API) and not yet in this broker's metadata: the
    // controller says it exists.
    let (status, body) = common::http(
        &dev.admin,
        "POST",
        "/v1/tenants/dev/topics",
        Some(&dev.admin_token),
        r#"{"topic_name":"elsewhere","partitions_count":1}"#,
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        create(&mut kafka, "elsewhere", 1, 1).0,
        TOPIC_ALREADY_EXISTS
    );

    assert_eq!(grow(&mut kafka, "orders", 20_000), INVALID_PARTITIONS);
    assert_eq!(grow(&mut kafka, "orders", 3), 0);
}
