//! The cluster's internal topics (`__consumer_offsets`, and every name starting with `__`)
//! cannot be created, deleted, altered or produced to by a client: before, creating and
//! deleting `__consumer_offsets` over the Kafka port erased every group's offsets at the
//! next restart.

#![allow(clippy::unwrap_used)]

mod common;

use common::dev::Dev;
use common::kafka::{name, RawKafka};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    GroupId, MetadataRequest, MetadataResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchRequest, OffsetFetchResponse,
};
use kafka_protocol::protocol::StrBytes;
use skein_records::{build_batch, Compression, NewRecord, ProducerFields};

const INVALID_TOPIC_EXCEPTION: i16 = 17;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

fn group() -> GroupId {
    GroupId(StrBytes::from_static_str("billing"))
}

fn commit(kafka: &mut RawKafka, offset: i64) {
    let request = OffsetCommitRequest::default()
        .with_group_id(group())
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name("orders"))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    // The admin API's topic reaches the broker through its metadata stream a moment later:
    // until then the commit gets UNKNOWN_TOPIC_OR_PARTITION.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let response: OffsetCommitResponse = kafka.call(ApiKey::OffsetCommit, 2, &request);
        let code = response.topics[0].partitions[0].error_code;
        if code == UNKNOWN_TOPIC_OR_PARTITION && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(100));
            continue;
        }
        assert_eq!(code, 0);
        return;
    }
}

fn committed(kafka: &mut RawKafka) -> i64 {
    let request = OffsetFetchRequest::default()
        .with_group_id(group())
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name("orders"))
            .with_partition_indexes(vec![0])]));
    let response: OffsetFetchResponse = kafka.call(ApiKey::OffsetFetch, 1, &request);
    response.topics[0].partitions[0].committed_offset
}

fn create(kafka: &mut RawKafka, topic: &str) -> i16 {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    let response: CreateTopicsResponse = kafka.call(ApiKey::CreateTopics, 4, &request);
    response.topics[0].error_code
}

fn delete(kafka: &mut RawKafka, topic: &str) -> i16 {
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topic_names(vec![name(topic)]);
    let response: DeleteTopicsResponse = kafka.call(ApiKey::DeleteTopics, 3, &request);
    response.responses[0].error_code
}

#[test]
fn clients_cannot_create_delete_or_write_internal_topics_and_offsets_survive() {
    let data = tempfile::tempdir().unwrap();
    {
        let dev = Dev::start(data.path());
        dev.create_topic("orders", 1);
        let mut kafka = RawKafka::connect(&dev.kafka);
        commit(&mut kafka, 42);
        assert_eq!(committed(&mut kafka), 42);

        // The attack: create and delete the internal topic, or write into it.
        for topic in ["__consumer_offsets", "__transaction_state", "__anything"] {
            assert_eq!(
                create(&mut kafka, topic),
                INVALID_TOPIC_EXCEPTION,
                "{topic}"
            );
            assert_eq!(
                delete(&mut kafka, topic),
                INVALID_TOPIC_EXCEPTION,
                "{topic}"
            );
        }
        let batch = build_batch(
            &[NewRecord {
                key: Some(b"forged".to_vec()),
                value: Some(b"forged".to_vec()),
                headers: vec![],
                timestamp: 0,
            }],
            Compression::None,
            ProducerFields::NONE,
        )
        .unwrap();
        assert_eq!(
            kafka.produce("__consumer_offsets", 0, batch),
            INVALID_TOPIC_EXCEPTION
        );
        // Metadata neither creates one on first use nor lists the cluster's own.
        let request = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("__consumer_offsets")))
            ]))
            .with_allow_auto_topic_creation(true);
        let response: MetadataResponse = kafka.call(ApiKey::Metadata, 9, &request);
        assert_ne!(response.topics[0].error_code, 0);
        let all: MetadataResponse = kafka.call(
            ApiKey::Metadata,
            9,
            &MetadataRequest::default().with_topics(None),
        );
        let names: Vec<_> = all
            .topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect();
        assert_eq!(names, ["orders"]);

        // The admin API refuses the names too.
        let (status, body) = common::http(
            &dev.admin,
            "POST",
            "/v1/tenants/dev/topics",
            Some(&dev.admin_token),
            r#"{"topic_name":"__consumer_offsets","partitions_count":1}"#,
        );
        assert!(status == 400 || status == 422, "{status} {body}");
        assert!(body.contains("reserved"), "{body}");
    }
    // Every committed offset is still there after a restart.
    let dev = Dev::start(data.path());
    let mut kafka = RawKafka::connect(&dev.kafka);
    assert_eq!(committed(&mut kafka), 42);
}
