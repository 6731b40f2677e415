//! Requests built with `kafka-protocol` and sent over TCP, for what the client libraries in
//! the other tests do not exercise: fetch sessions (KIP-227), where a full fetch opens a
//! session and incremental ones carry only what changed, ListOffsets' special queries,
//! batched OffsetFetch (v8+), many requests pipelined on one connection, and a topic
//! replaced while the broker was down, which must not find the old topic's records.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProduceRequest};
use kafka_protocol::protocol::StrBytes;
use skein_log::batch::{build_batch, Compression, NewRecord, ProducerFields};

use common::raw::{name, Client};
use common::TestBroker;

/// The requests these tests send most.
trait Requests {
    fn produce(&mut self, topic: &str, partition: i32, value: &str);
    fn produce_at(&mut self, topic: &str, partition: i32, value: &str, timestamp: i64);
    fn fetch(&mut self, session_id: i32, epoch: i32, partitions: &[(i32, i64)]) -> FetchResponse;
    fn fetch_as(
        &mut self,
        version: i16,
        topic_id: Option<uuid::Uuid>,
        session_id: i32,
        epoch: i32,
        partitions: &[(i32, i64)],
    ) -> FetchResponse;
}

impl Requests for Client {
    fn produce(&mut self, topic: &str, partition: i32, value: &str) {
        self.produce_at(topic, partition, value, 1);
    }

    fn produce_at(&mut self, topic: &str, partition: i32, value: &str, timestamp: i64) {
        let record = NewRecord {
            key: None,
            value: Some(value.as_bytes().to_vec()),
            headers: Vec::new(),
            timestamp,
        };
        let batch = build_batch(&[record], Compression::None, ProducerFields::NONE).unwrap();
        let request = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(Bytes::from(batch)))])]);
        let _: kafka_protocol::messages::ProduceResponse = self.call(0, 7, &request);
    }

    fn fetch(&mut self, session_id: i32, epoch: i32, partitions: &[(i32, i64)]) -> FetchResponse {
        self.fetch_as(11, None, session_id, epoch, partitions)
    }

    /// A fetch at `version`, naming the topic by `topic_id` when given (v13+).
    fn fetch_as(
        &mut self,
        version: i16,
        topic_id: Option<uuid::Uuid>,
        session_id: i32,
        epoch: i32,
        partitions: &[(i32, i64)],
    ) -> FetchResponse {
        let topic = match topic_id {
            Some(id) => FetchTopic::default().with_topic_id(id),
            None => FetchTopic::default().with_topic(name("sessions")),
        };
        let request = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(1 << 20)
            .with_session_id(session_id)
            .with_session_epoch(epoch)
            .with_topics(if partitions.is_empty() {
                Vec::new()
            } else {
                vec![topic.with_partitions(
                    partitions
                        .iter()
                        .map(|(p, offset)| {
                            FetchPartition::default()
                                .with_partition(*p)
                                .with_fetch_offset(*offset)
                                .with_partition_max_bytes(1 << 20)
                        })
                        .collect(),
                )]
            });
        self.call(1, version, &request)
    }
}

/// (partition, number of record bytes) of each partition in a response.
fn partitions(response: &FetchResponse) -> Vec<(i32, usize)> {
    response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.records.as_ref().map_or(0, Bytes::len)))
        .collect()
}

#[test]
fn incremental_fetches_carry_only_what_changed() {
    let broker = TestBroker::start();
    broker.create_topic("sessions", 3);
    let mut client = Client::connect(&broker);
    for p in 0..3 {
        client.produce("sessions", p, "first");
    }
    // A full fetch opens the session and answers for every partition.
    let full = client.fetch(0, 0, &[(0, 0), (1, 0), (2, 0)]);
    assert_eq!(full.error_code, 0);
    let session = full.session_id;
    assert!(session > 0);
    assert_eq!(partitions(&full).len(), 3);
    // Nothing new: the incremental answer is empty (positions moved past what was read).
    let quiet = client.fetch(session, 1, &[(0, 1), (1, 1), (2, 1)]);
    assert_eq!(quiet.session_id, session);
    assert!(partitions(&quiet).is_empty(), "{:?}", partitions(&quiet));
    // New data in one partition: only it comes back, with no partition named in the request.
    client.produce("sessions", 1, "second");
    let one = client.fetch(session, 2, &[]);
    let got = partitions(&one);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 1);
    assert!(got[0].1 > 0);
    // A stale epoch and an unknown session get their errors.
    assert_eq!(
        client.fetch(session, 2, &[]).error_code,
        71,
        "INVALID_FETCH_SESSION_EPOCH"
    );
    assert_eq!(
        client.fetch(987_654, 1, &[]).error_code,
        70,
        "FETCH_SESSION_ID_NOT_FOUND"
    );
    // Epoch -1 closes the session and fetches without one.
    let sessionless = client.fetch(session, -1, &[(0, 0)]);
    assert_eq!(sessionless.session_id, 0);
    assert_eq!(partitions(&sessionless).len(), 1);
    assert_eq!(client.fetch(session, 3, &[]).error_code, 70);
}

/// The latest offset of partition 0 of "sessions".
fn latest(client: &mut Client) -> i64 {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
    let request = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("sessions"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let response: ListOffsetsResponse = client.call(2, 5, &request);
    let p = &response.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

#[test]
fn a_topic_replaced_while_the_broker_was_down_does_not_serve_the_old_records() {
    let mut broker = TestBroker::start();
    let old = broker.create_topic("sessions", 1);
    let mut client = Client::connect(&broker);
    client.produce("sessions", 0, "old");
    client.produce("sessions", 0, "old");
    assert_eq!(latest(&mut client), 2);
    drop(client);
    // Deleted and created again under the same name, as far as the broker can tell when it
    // starts: its topic has a new id.
    let new = uuid::Uuid::new_v4();
    broker.restart_after(|data| {
        let topics = std::fs::read_to_string(data.join("topics")).unwrap();
        let replaced = topics.replace(&old.id.to_string(), &new.to_string());
        assert_ne!(topics, replaced);
        std::fs::write(data.join("topics"), replaced).unwrap();
    });
    let mut client = Client::connect(&broker);
    assert_eq!(latest(&mut client), 0);
    let fetched = client.fetch(0, 0, &[(0, 0)]);
    assert_eq!(partitions(&fetched), [(0, 0)]);
    client.produce("sessions", 0, "new");
    assert_eq!(latest(&mut client), 1);
    // And so it stays after another restart.
    broker.restart();
    let mut client = Client::connect(&broker);
    assert_eq!(latest(&mut client), 1);
}

#[test]
fn a_partition_from_before_topic_ids_is_adopted_at_start_with_its_topic_settings() {
    let mut broker = TestBroker::start();
    let info = broker.create_topic("sessions", 1);
    let b = broker.broker();
    let configs = [("retention.ms".to_owned(), "1234".to_owned())].into();
    broker
        .runtime
        .block_on(b.topics.set_configs("sessions", configs))
        .unwrap();
    drop(b);
    let mut client = Client::connect(&broker);
    client.produce("sessions", 0, "kept");
    drop(client);
    broker.restart_after(|data| {
        let partition = data.join("logs").join("sessions-0");
        std::fs::remove_file(partition.join(skein_log::PARTITION_METADATA)).unwrap();
    });
    let b = broker.broker();
    let tp = skein_log::TopicPartition::new("sessions", 0);
    assert_eq!(b.logs().topic_id(&tp), Some(info.id));
    let log = b.logs().get(&tp).unwrap();
    assert_eq!(log.read().log_end_offset(), 1);
    assert_eq!(log.read().config().retention_ms, 1234);
    drop((log, b));
    assert_eq!(latest(&mut Client::connect(&broker)), 1);
}

#[test]
fn list_offsets_answers_latest_earliest_and_the_largest_timestamp() {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

    let broker = TestBroker::start();
    broker.create_topic("sessions", 1);
    let mut client = Client::connect(&broker);
    for (value, ts) in [("a", 5), ("b", 90), ("c", 20), ("d", 90), ("e", 7)] {
        client.produce_at("sessions", 0, value, 1_700_000_000_000 + ts);
    }
    let mut query = |timestamp: i64| -> (i64, i64) {
        let request = ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name("sessions"))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(timestamp)])]);
        let response: ListOffsetsResponse = client.call(2, 10, &request);
        let p = &response.topics[0].partitions[0];
        assert_eq!(p.error_code, 0);
        (p.offset, p.timestamp)
    };
    assert_eq!(query(-1).0, 5, "latest");
    assert_eq!(query(-2).0, 0, "earliest");
    assert_eq!(query(-4).0, 0, "earliest local");
    assert_eq!(query(-5), (-1, -1), "latest tiered: nothing is tiered");
    assert_eq!(
        query(-3),
        (1, 1_700_000_000_090),
        "first record with the largest timestamp"
    );
    assert_eq!(
        query(1_700_000_000_010),
        (1, 1_700_000_000_090),
        "by timestamp"
    );
}

#[test]
fn fetch_v13_names_topics_by_id() {
    let broker = TestBroker::start();
    let info = broker.create_topic("sessions", 1);
    let mut client = Client::connect(&broker);
    client.produce("sessions", 0, "by-id");
    let response = client.fetch_as(17, Some(info.id), 0, -1, &[(0, 0)]);
    assert_eq!(response.responses.len(), 1);
    assert_eq!(response.responses[0].topic_id, info.id);
    assert!(
        response.responses[0].topic.0.is_empty(),
        "v13+ carries no topic name"
    );
    assert!(partitions(&response)[0].1 > 0);
    let unknown = client.fetch_as(16, Some(uuid::Uuid::new_v4()), 0, -1, &[(0, 0)]);
    assert_eq!(
        unknown.responses[0].partitions[0].error_code, 100,
        "UNKNOWN_TOPIC_ID"
    );
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, MetadataRequest};
    use kafka_protocol::messages::{ListOffsetsResponse, MetadataResponse};

    let broker = TestBroker::start();
    broker.create_topic("sessions", 1);
    let mut client = Client::connect(&broker);
    // Twenty requests of three kinds in one write, then the answers.
    let mut frames = Vec::new();
    let mut sent = Vec::new();
    for i in 0..20 {
        let id = client.next_id;
        match i % 3 {
            0 => {
                frames.extend(client.frame(18, 3, &ApiVersionsRequest::default()));
                sent.push((18, 3, id));
            }
            1 => {
                frames.extend(client.frame(3, 13, &MetadataRequest::default().with_topics(None)));
                sent.push((3, 13, id));
            }
            _ => {
                let request = kafka_protocol::messages::ListOffsetsRequest::default()
                    .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                    .with_topics(vec![
                        kafka_protocol::messages::list_offsets_request::ListOffsetsTopic::default()
                            .with_name(name("sessions"))
                            .with_partitions(vec![kafka_protocol::messages::list_offsets_request::ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_timestamp(-1)]),
                    ]);
                frames.extend(client.frame(2, 9, &request));
                sent.push((2, 9, id));
            }
        }
    }
    client.stream.write_all(&frames).unwrap();
    for (key, version, id) in sent {
        match key {
            18 => {
                let r: ApiVersionsResponse = client.receive(key, version, id);
                assert_eq!(r.error_code, 0);
            }
            3 => {
                let r: MetadataResponse = client.receive(key, version, id);
                assert_eq!(r.error_code, 0, "v13 carries a top-level error code");
                assert!(r
                    .topics
                    .iter()
                    .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "sessions")));
            }
            _ => {
                let r: ListOffsetsResponse = client.receive(key, version, id);
                assert_eq!(r.topics[0].partitions[0].offset, 0);
            }
        }
    }
}

/// A group and its committed (topic, partition, offset)s.
type GroupOffsets = (String, Vec<(String, i32, i64)>);

#[test]
fn offset_fetch_v8_answers_several_groups_at_once() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopics,
    };
    use kafka_protocol::messages::{
        GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    };

    let broker = TestBroker::start();
    broker.create_topic("sessions", 2);
    let mut client = Client::connect(&broker);
    let group = |g: &str| GroupId(StrBytes::from_string(g.to_owned()));
    // Standalone commits (no generation), as a consumer with manual assignment makes them.
    for (g, offset) in [("alpha", 11), ("beta", 22)] {
        let request = OffsetCommitRequest::default()
            .with_group_id(group(g))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name("sessions"))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(1)
                    .with_committed_offset(offset)])]);
        let response: OffsetCommitResponse = client.call(8, 9, &request);
        assert_eq!(response.topics[0].partitions[0].error_code, 0);
    }
    let request = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(group("alpha"))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(name("sessions"))
                .with_partition_indexes(vec![0, 1])])),
        OffsetFetchRequestGroup::default()
            .with_group_id(group("beta"))
            .with_topics(None),
        OffsetFetchRequestGroup::default()
            .with_group_id(group("nobody"))
            .with_topics(None),
    ]);
    for version in [8, 9] {
        let response: OffsetFetchResponse = client.call(9, version, &request);
        let groups: Vec<GroupOffsets> = response
            .groups
            .iter()
            .map(|g| {
                (
                    g.group_id.0.to_string(),
                    g.topics
                        .iter()
                        .flat_map(|t| {
                            t.partitions.iter().map(|p| {
                                (t.name.0.to_string(), p.partition_index, p.committed_offset)
                            })
                        })
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            groups,
            vec![
                (
                    "alpha".to_owned(),
                    vec![
                        ("sessions".to_owned(), 0, -1),
                        ("sessions".to_owned(), 1, 11)
                    ]
                ),
                ("beta".to_owned(), vec![("sessions".to_owned(), 1, 22)]),
                ("nobody".to_owned(), vec![]),
            ],
            "v{version}"
        );
    }
}

#[test]
fn a_broker_on_its_own_answers_acl_requests_with_security_disabled() {
    use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};

    let broker = TestBroker::start();
    let mut client = Client::connect(&broker);
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    for version in 1..=3 {
        let response: DescribeAclsResponse = client.call(29, version, &request);
        assert_eq!(response.error_code, 54, "SECURITY_DISABLED at v{version}");
        assert!(response.error_message.is_some());
    }
}

/// `fetch.max.bytes` bounds what one Fetch answer carries, whatever `max_bytes` the client
/// asks for: the broker never copies more than that (plus the first partition's first
/// batch) into an answer.
#[test]
fn fetch_max_bytes_caps_an_answer_whatever_the_request_asks() {
    let broker = TestBroker::start_with(|config| config.fetch_max_bytes = 64 * 1024);
    broker.create_topic("sessions", 4);
    let mut client = Client::connect(&broker);
    let value = "v".repeat(20 * 1024);
    for partition in 0..4 {
        for _ in 0..5 {
            client.produce("sessions", partition, &value);
        }
    }
    let request = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(i32::MAX)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("sessions"))
            .with_partitions(
                (0..4)
                    .map(|p| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(i32::MAX)
                    })
                    .collect(),
            )]);
    let response: FetchResponse = client.call(1, 11, &request);
    let carried: usize = response.responses[0]
        .partitions
        .iter()
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .sum();
    assert!(carried > 0);
    // At most the cap and one more batch (each ~20 KiB), though 400 KiB were asked for.
    assert!(
        carried <= 64 * 1024 + 21 * 1024,
        "{carried} bytes in one answer"
    );
}

/// A group without members keeps its committed offsets for `offsets.retention.minutes`
/// after its last commit, then they are gone, also after a restart: groups cannot
/// accumulate without bound.
#[test]
fn an_idle_groups_offsets_expire_after_the_retention() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{
        GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    };
    let mut broker = TestBroker::start_with(|config| {
        config.offsets_retention = Duration::from_millis(1500);
    });
    broker.create_topic("sessions", 1);
    let group = |name: &'static str| GroupId(StrBytes::from_static_str(name));
    let commit = |client: &mut Client, name: &'static str| {
        let request = OffsetCommitRequest::default()
            .with_group_id(group(name))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(self::name("sessions"))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(42)])]);
        let response: OffsetCommitResponse = client.call(8, 2, &request);
        assert_eq!(response.topics[0].partitions[0].error_code, 0);
    };
    let committed = |client: &mut Client, name: &'static str| {
        let request = OffsetFetchRequest::default()
            .with_group_id(group(name))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(self::name("sessions"))
                .with_partition_indexes(vec![0])]));
        let response: OffsetFetchResponse = client.call(9, 1, &request);
        response.topics[0].partitions[0].committed_offset
    };
    let mut client = Client::connect(&broker);
    commit(&mut client, "idle");
    commit(&mut client, "busy");
    assert_eq!(committed(&mut client, "idle"), 42);
    // "busy" keeps committing; "idle" does not.
    let deadline = std::time::Instant::now() + Duration::from_secs(4);
    while std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
        commit(&mut client, "busy");
    }
    assert_eq!(committed(&mut client, "idle"), -1, "expired");
    assert_eq!(committed(&mut client, "busy"), 42, "still committing");
    drop(client);
    broker.restart();
    let mut client = Client::connect(&broker);
    assert_eq!(committed(&mut client, "idle"), -1, "expired for good");
    assert_eq!(committed(&mut client, "busy"), 42);
}

/// DescribeConfigs of the BROKER resource answers the broker's own settings under Kafka's
/// names, read-only, each with its type (v3 on) and whether it is the default; another
/// broker's id is refused, the empty name (cluster defaults) has nothing. Topic entries
/// carry their types too.
#[test]
fn describe_configs_of_the_broker_names_its_real_settings_and_their_types() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

    let broker = TestBroker::start_with(|config| {
        config.rack = Some("rack-a".to_owned());
        config.log.retention_ms = 3_600_000;
    });
    broker.create_topic("described", 1);
    let mut client = Client::connect(&broker);
    let resource = |kind: i8, name: &str| {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configuration_keys(None)
    };
    let request = DescribeConfigsRequest::default().with_resources(vec![
        resource(4, "0"),
        resource(4, "7"),
        resource(4, ""),
        resource(2, "described"),
    ]);
    let response: DescribeConfigsResponse = client.call(32, 4, &request);
    let [own, other, cluster, topic] = &response.results[..] else {
        panic!("four results: {response:?}");
    };
    assert_eq!(own.error_code, 0);
    let entry = |name: &str| {
        own.configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    };
    // (name, value, source: 4 static / 5 default, type: 1 boolean, 2 string, 3 int, 5 long, 7 list)
    for (name, value, source, kind) in [
        ("broker.id", "0", 5, 3),
        ("broker.rack", "rack-a", 4, 2),
        ("log.retention.ms", "3600000", 4, 5),
        ("log.segment.bytes", "1073741824", 5, 3),
        ("log.cleanup.policy", "delete", 5, 7),
        ("default.replication.factor", "1", 5, 3),
        ("auto.create.topics.enable", "true", 5, 1),
        ("replica.lag.time.max.ms", "30000", 5, 5),
    ] {
        let e = entry(name);
        assert_eq!(e.value.as_ref().map(|v| v.as_str()), Some(value), "{name}");
        assert_eq!((e.config_source, e.config_type), (source, kind), "{name}");
        assert!(e.read_only, "{name} cannot be altered");
    }
    assert!(
        own.configs.iter().all(|c| c.config_type != 0),
        "every entry has a type"
    );
    assert_eq!(other.error_code, 42, "another broker's id: INVALID_REQUEST");
    assert_eq!((cluster.error_code, cluster.configs.len()), (0, 0));
    let retention = topic
        .configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .unwrap();
    assert_eq!((retention.config_type, retention.config_source), (5, 5));

    // Before v3 there is no type; the rest is the same.
    let request = DescribeConfigsRequest::default().with_resources(vec![resource(4, "0")]);
    let response: DescribeConfigsResponse = client.call(32, 1, &request);
    let rack = response.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == "broker.rack")
        .unwrap();
    assert_eq!(rack.value.as_ref().map(|v| v.as_str()), Some("rack-a"));
}

#[test]
fn describe_log_dirs_names_the_partitions_held_and_their_sizes() {
    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
    use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};

    let broker = TestBroker::start();
    broker.create_topic("sessions", 2);
    let mut client = Client::connect(&broker);
    for i in 0..50 {
        client.produce("sessions", 1, &format!("record {i}"));
    }
    let sizes = |response: &DescribeLogDirsResponse| -> Vec<(String, i32, i64)> {
        assert_eq!(response.error_code, 0);
        assert_eq!(response.results.len(), 1);
        response.results[0]
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    (
                        t.name.0.as_str().to_owned(),
                        p.partition_index,
                        p.partition_size,
                    )
                })
            })
            .collect()
    };

    let every: DescribeLogDirsResponse =
        client.call(35, 4, &DescribeLogDirsRequest::default().with_topics(None));
    let result = &every.results[0];
    assert_eq!(result.error_code, 0);
    assert!(
        result.log_dir.as_str().ends_with("logs"),
        "{}",
        result.log_dir.as_str()
    );
    assert!(
        result.total_bytes > 0 && result.usable_bytes >= 0,
        "{result:?}"
    );
    assert!(result.usable_bytes <= result.total_bytes);
    let listed = sizes(&every);
    assert_eq!(
        listed
            .iter()
            .map(|(t, p, _)| (t.as_str(), *p))
            .collect::<Vec<_>>(),
        [("sessions", 0), ("sessions", 1)],
        "the tenant's partitions, never the internal offsets log"
    );
    let (empty, written) = (listed[0].2, listed[1].2);
    // 50 batches of one record are on disk in partition 1; partition 0 holds none.
    assert!(written > empty + 50 * 61, "{listed:?}");

    // Only what is asked: a partition not held and an unknown topic are left out.
    let asked = DescribeLogDirsRequest::default().with_topics(Some(vec![
        DescribableLogDirTopic::default()
            .with_topic(name("sessions"))
            .with_partitions(vec![1, 7]),
        DescribableLogDirTopic::default()
            .with_topic(name("nowhere"))
            .with_partitions(vec![0]),
    ]));
    let some: DescribeLogDirsResponse = client.call(35, 1, &asked);
    assert_eq!(sizes(&some), [("sessions".to_owned(), 1, written)]);
}

#[test]
fn describe_topic_partitions_pages_through_every_partition_in_order() {
    use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
    use kafka_protocol::messages::{
        DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
    };

    let broker = TestBroker::start();
    broker.create_topic("beta", 2);
    broker.create_topic("alpha", 3);
    let mut client = Client::connect(&broker);
    let mut page = |cursor: Option<(&str, i32)>, topics: &[&str]| {
        let request = DescribeTopicPartitionsRequest::default()
            .with_topics(
                topics
                    .iter()
                    .map(|t| TopicRequest::default().with_name(name(t)))
                    .collect(),
            )
            .with_response_partition_limit(2)
            .with_cursor(cursor.map(|(t, p)| {
                Cursor::default()
                    .with_topic_name(name(t))
                    .with_partition_index(p)
            }));
        let response: DescribeTopicPartitionsResponse = client.call(75, 0, &request);
        let listed: Vec<(String, i16, Vec<i32>)> = response
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.as_ref().unwrap().0.as_str().to_owned(),
                    t.error_code,
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect();
        let next = response
            .next_cursor
            .map(|c| (c.topic_name.0.as_str().to_owned(), c.partition_index));
        (listed, next)
    };
    let owned = |t: &str| t.to_owned();
    // Every topic, two partitions a page, in name order.
    assert_eq!(
        page(None, &[]),
        (
            vec![(owned("alpha"), 0, vec![0, 1])],
            Some((owned("alpha"), 2))
        )
    );
    assert_eq!(
        page(Some(("alpha", 2)), &[]),
        (
            vec![(owned("alpha"), 0, vec![2]), (owned("beta"), 0, vec![0])],
            Some((owned("beta"), 1))
        )
    );
    assert_eq!(
        page(Some(("beta", 1)), &[]),
        (vec![(owned("beta"), 0, vec![1])], None)
    );
    // Named topics: an unknown one is answered as such; a cursor outside them is refused.
    let (listed, next) = page(None, &["beta", "missing"]);
    assert_eq!(
        listed,
        [
            (owned("beta"), 0, vec![0, 1]),
            (owned("missing"), 3, vec![])
        ]
    );
    assert_eq!(next, None);
    let (listed, _) = page(Some(("alpha", 0)), &["beta"]);
    assert_eq!(listed, [(owned("alpha"), 42, vec![])]);
}

#[test]
fn a_compacted_topic_refuses_a_record_without_a_key_naming_it_and_writes_nothing() {
    use kafka_protocol::messages::ProduceResponse;

    let broker = TestBroker::start();
    let mut client = Client::connect(&broker);
    create_with_config(&mut client, "sessions", "cleanup.policy", "compact");

    let produce = |client: &mut Client, keys: &[Option<&str>]| -> ProduceResponse {
        let records: Vec<NewRecord> = keys
            .iter()
            .map(|key| NewRecord {
                key: key.map(|k| k.as_bytes().to_vec()),
                value: Some(b"v".to_vec()),
                headers: Vec::new(),
                timestamp: 1,
            })
            .collect();
        let batch = build_batch(&records, Compression::None, ProducerFields::NONE).unwrap();
        let request = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name("sessions"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::from(batch)))])]);
        client.call(0, 9, &request)
    };
    let refused = produce(&mut client, &[Some("a"), None, Some("c"), None]);
    let answer = &refused.responses[0].partition_responses[0];
    assert_eq!(answer.error_code, 87, "INVALID_RECORD");
    assert_eq!(
        answer
            .record_errors
            .iter()
            .map(|e| e.batch_index)
            .collect::<Vec<_>>(),
        [1, 3]
    );
    let message = answer.error_message.as_ref().unwrap().as_str();
    assert!(message.contains("without a key"), "{message}");
    assert_eq!(
        latest_of(&mut client, "sessions"),
        0,
        "nothing of the batch is written"
    );

    let accepted = produce(&mut client, &[Some("a"), Some("b")]);
    assert_eq!(accepted.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(latest_of(&mut client, "sessions"), 2);
}

/// Creates a one-partition topic with one config set, through CreateTopics.
fn create_with_config(client: &mut Client, topic: &str, config: &'static str, value: &'static str) {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str(config))
                .with_value(Some(StrBytes::from_static_str(value)))])]);
    let created: CreateTopicsResponse = client.call(19, 5, &create);
    assert_eq!(
        created.topics[0].error_code, 0,
        "{topic} with {config}={value}"
    );
}

fn latest_of(client: &mut Client, topic: &str) -> i64 {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
    let request = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let response: ListOffsetsResponse = client.call(2, 7, &request);
    response.topics[0].partitions[0].offset
}

#[test]
fn a_topic_with_a_compression_type_stores_every_batch_under_that_codec() {
    use kafka_protocol::messages::ProduceResponse;
    use skein_log::batch::{BatchHeader, DecodedRecords, MAX_DECOMPRESSED};

    let broker = TestBroker::start();
    let mut client = Client::connect(&broker);
    create_with_config(&mut client, "sessions", "compression.type", "zstd");

    let batch_of = |label: &str, codec: Compression| {
        let records: Vec<NewRecord> = (0..10)
            .map(|i| NewRecord {
                key: Some(format!("{label}-{i}").into_bytes()),
                value: Some(format!("{label} value {i}").repeat(20).into_bytes()),
                headers: vec![(b"h".to_vec(), Some(label.as_bytes().to_vec()))],
                timestamp: 1_700_000_000_000 + i,
            })
            .collect();
        build_batch(&records, codec, ProducerFields::NONE).unwrap()
    };
    let produce = |client: &mut Client, batch: Vec<u8>| -> i16 {
        let request = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name("sessions"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::from(batch)))])]);
        let answer: ProduceResponse = client.call(0, 9, &request);
        answer.responses[0].partition_responses[0].error_code
    };
    let sent = [
        batch_of("plain", Compression::None),
        batch_of("gzip", Compression::Gzip),
        batch_of("zstd", Compression::Zstd),
    ];
    for batch in &sent {
        assert_eq!(produce(&mut client, batch.clone()), 0);
    }
    // A damaged batch is refused as it would be on any topic, never given a fresh CRC.
    let mut damaged = batch_of("damaged", Compression::Gzip);
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    assert_eq!(produce(&mut client, damaged), 2, "CORRUPT_MESSAGE");
    assert_eq!(latest_of(&mut client, "sessions"), 30);

    let contents = |batch: &[u8]| -> Vec<(Vec<u8>, Vec<u8>, i64)> {
        let decoded = DecodedRecords::decode(batch, MAX_DECOMPRESSED).unwrap();
        decoded
            .iter()
            .map(|r| {
                let r = r.unwrap();
                let ts = decoded.timestamp_of(&r);
                (r.key.unwrap().to_vec(), r.value.unwrap().to_vec(), ts)
            })
            .collect()
    };
    let fetched = client.fetch(0, -1, &[(0, 0)]);
    let records = fetched.responses[0].partitions[0].records.clone().unwrap();
    let mut at = 0;
    let mut stored = Vec::new();
    while at < records.len() {
        let header = BatchHeader::parse(&records[at..]).unwrap();
        stored.push((header.compression().unwrap(), at, header.size()));
        at += header.size();
    }
    assert_eq!(
        stored
            .iter()
            .map(|(codec, _, _)| *codec)
            .collect::<Vec<_>>(),
        [Compression::Zstd; 3],
        "every batch under the topic's codec"
    );
    for ((_, at, size), sent) in stored.iter().zip(&sent) {
        assert_eq!(contents(&records[*at..*at + *size]), contents(sent));
    }
}

#[test]
fn a_brokers_replication_throttles_change_while_it_runs_and_nothing_else_does() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    };

    let broker = TestBroker::start_with(|config| {
        config.follower_replication_throttled_rate = Some(5_000_000);
    });
    let mut client = Client::connect(&broker);
    let alter = |client: &mut Client, name: &str, op: i8, value: Option<&str>| -> i16 {
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str("0"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_string(name.to_owned()))
                    .with_config_operation(op)
                    .with_value(value.map(|v| StrBytes::from_string(v.to_owned())))]),
        ]);
        let response: IncrementalAlterConfigsResponse = client.call(44, 1, &request);
        response.responses[0].error_code
    };
    // (value, source, read-only) of a broker config.
    let described = |client: &mut Client, name: &str| {
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str("0"))
                .with_configuration_keys(Some(vec![StrBytes::from_string(name.to_owned())])),
        ]);
        let response: DescribeConfigsResponse = client.call(32, 4, &request);
        let entry = &response.results[0].configs[0];
        (
            entry.value.as_ref().unwrap().as_str().to_owned(),
            entry.config_source,
            entry.read_only,
        )
    };
    let unlimited = i64::MAX.to_string();
    let leader = "leader.replication.throttled.rate";
    let follower = "follower.replication.throttled.rate";
    assert_eq!(
        described(&mut client, leader),
        (unlimited.clone(), 5, false)
    );
    assert_eq!(
        described(&mut client, follower),
        ("5000000".to_owned(), 4, false)
    );

    // Set (source 2: a dynamic config of this broker), then deleted: back to its setting.
    assert_eq!(alter(&mut client, leader, 0, Some("1000")), 0);
    assert_eq!(alter(&mut client, follower, 0, Some("2000")), 0);
    assert_eq!(
        described(&mut client, leader),
        ("1000".to_owned(), 2, false)
    );
    assert_eq!(
        described(&mut client, follower),
        ("2000".to_owned(), 2, false)
    );
    assert_eq!(alter(&mut client, leader, 1, None), 0);
    assert_eq!(alter(&mut client, follower, 1, None), 0);
    assert_eq!(described(&mut client, leader).0, unlimited);
    assert_eq!(described(&mut client, follower).0, "5000000");

    // INVALID_CONFIG: a bad rate, or any other broker config.
    assert_eq!(alter(&mut client, leader, 0, Some("0")), 40);
    assert_eq!(alter(&mut client, leader, 0, Some("fast")), 40);
    assert_eq!(alter(&mut client, "log.retention.ms", 0, Some("1")), 40);
    assert_eq!(
        described(&mut client, leader).0,
        unlimited,
        "nothing changed"
    );
}

/// Whether the broker closed the connection (a read finds its end).
fn closed(client: &mut Client) -> bool {
    let mut byte = [0u8; 1];
    matches!(client.stream.read(&mut byte), Ok(0))
        || matches!(client.stream.read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
}

#[test]
fn a_sasl_listener_answers_nothing_but_sasl_before_authentication() {
    use kafka_protocol::messages::{
        ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, SaslAuthenticateRequest,
        SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
    };
    use kafka_protocol::ResponseError;
    let mut broker = TestBroker::start();
    let sasl = broker.add_sasl_listener();

    // ApiVersions is answered, and names the SASL APIs.
    let mut client = Client::connect_to(sasl);
    let versions: ApiVersionsResponse = client.call(18, 3, &ApiVersionsRequest::default());
    let range = |key: i16| {
        versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key)
            .map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(range(17), Some((0, 1)));
    assert_eq!(range(36), Some((0, 2)));
    // Anything else before authentication closes the connection, unanswered.
    let frame = client.frame(3, 12, &MetadataRequest::default());
    client.stream.write_all(&frame).unwrap();
    assert!(closed(&mut client));

    // A mechanism not offered is refused with the list, and the connection closed.
    let mut client = Client::connect_to(sasl);
    let refused: SaslHandshakeResponse = client.call(
        17,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("GSSAPI")),
    );
    assert_eq!(
        refused.error_code,
        ResponseError::UnsupportedSaslMechanism.code()
    );
    assert_eq!(
        refused.mechanisms,
        ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"].map(StrBytes::from_static_str)
    );
    assert!(closed(&mut client));

    // PLAIN: a malformed token, and a well-formed one this broker on its own cannot check
    // (it has no control plane), are both refused with SASL_AUTHENTICATION_FAILED.
    for token in [&b"no separators"[..], b"\0key\0secret"] {
        let mut client = Client::connect_to(sasl);
        let handshake: SaslHandshakeResponse = client.call(
            17,
            1,
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("plain")),
        );
        assert_eq!(handshake.error_code, 0);
        let answer: SaslAuthenticateResponse = client.call(
            36,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(token)),
        );
        assert_eq!(
            answer.error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
        assert!(answer.error_message.is_some());
        assert!(closed(&mut client));
    }

    // SCRAM: a first message with an extension (Kafka's delegation tokens), and a
    // well-formed one whose user this broker on its own cannot look up, are refused alike.
    for message in [
        &b"n,,n=alice,r=nonce,tokenauth=true"[..],
        b"n,,n=alice,r=nonce",
    ] {
        let mut client = Client::connect_to(sasl);
        let handshake: SaslHandshakeResponse = client.call(
            17,
            1,
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str("SCRAM-SHA-512")),
        );
        assert_eq!(handshake.error_code, 0);
        let answer: SaslAuthenticateResponse = client.call(
            36,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(message)),
        );
        assert_eq!(
            answer.error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
        assert!(closed(&mut client));
    }
    // SCRAM's two rounds need SaslAuthenticate: a v0 handshake offers PLAIN's bare token only.
    let mut client = Client::connect_to(sasl);
    let v0: SaslHandshakeResponse = client.call(
        17,
        0,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256")),
    );
    assert_eq!(
        v0.error_code,
        ResponseError::UnsupportedSaslMechanism.code()
    );

    // SaslAuthenticate without a handshake is out of order.
    let mut client = Client::connect_to(sasl);
    let answer: SaslAuthenticateResponse = client.call(
        36,
        1,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0k\0s")),
    );
    assert_eq!(answer.error_code, ResponseError::IllegalSaslState.code());

    // On a listener without SASL, a handshake is out of place, but for the PLAIN one other
    // brokers prove themselves with (tests/hostile_peers.rs: a client's key is refused).
    let mut client = Client::connect(&broker);
    let answer: SaslHandshakeResponse = client.call(
        17,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("SCRAM-SHA-512")),
    );
    assert_eq!(answer.error_code, ResponseError::IllegalSaslState.code());
}

/// A consumer's fetch waiting on partition 1 (`min_bytes` 1, `max_wait_ms` 20 s) is woken by
/// an append to partition 1 and answers it at once; an append to partition 0 before it does
/// not wake it into an empty answer.
#[test]
fn a_waiting_fetch_is_woken_by_an_append_to_its_own_partition() {
    let broker = TestBroker::start();
    broker.create_topic("sessions", 2);
    let mut waiting = Client::connect(&broker);
    let mut writer = Client::connect(&broker);
    let request = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(20_000)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("sessions"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(1)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let started = std::time::Instant::now();
    let id = waiting.next_id;
    let frame = waiting.frame(1, 11, &request);
    waiting.stream.write_all(&frame).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    writer.produce("sessions", 0, "elsewhere");
    std::thread::sleep(Duration::from_millis(300));
    writer.produce("sessions", 1, "here");
    let answer: FetchResponse = waiting.receive(1, 11, id);
    assert_eq!(partitions(&answer).len(), 1, "{answer:?}");
    assert!(
        partitions(&answer)[0].1 > 0,
        "the answer carries partition 1's record"
    );
    // Woken by the append, long before its 20 s were up.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the fetch waited {:?}",
        started.elapsed()
    );
}
