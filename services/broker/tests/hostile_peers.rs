//! What a peer that is no broker, or has not authenticated, can make a broker do, sent as
//! raw frames over TCP: the inter-broker APIs (a follower's Fetch and OffsetForLeaderEpoch,
//! WriteTxnMarkers) are refused to a client on a PLAINTEXT listener, write nothing and open
//! no fetch session; a listener without SASL takes no client's credentials; and on a SASL
//! listener a connection that has not authenticated reads frames of at most 512 KiB, has a
//! deadline, and holds one of a bounded number of places.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse,
    ProducerId, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_log::batch::{build_batch, Compression, NewRecord, ProducerFields};

use common::raw::{name, Client};
use common::TestBroker;

const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

fn produce(client: &mut Client, topic: &str, value: &str) {
    let code = produce_one(client, topic, value, ProducerFields::NONE, 1);
    assert_eq!(code, 0);
}

/// One record of `value` (timestamped `timestamp`, written as `producer`) to partition 0
/// of `topic` with acks=all; answers the partition's error code.
fn produce_one(
    client: &mut Client,
    topic: &str,
    value: &str,
    producer: ProducerFields,
    timestamp: i64,
) -> i16 {
    let record = NewRecord {
        key: None,
        value: Some(value.as_bytes().to_vec()),
        headers: Vec::new(),
        timestamp,
    };
    let batch = build_batch(&[record], Compression::None, producer).unwrap();
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(batch)))])]);
    let answer: ProduceResponse = client.call(0, 7, &request);
    answer.responses[0].partition_responses[0].error_code
}

fn latest(client: &mut Client, topic: &str) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let answer: ListOffsetsResponse = client.call(2, 5, &request);
    answer.topics[0].partitions[0].offset
}

/// A fetch of `topic`'s partition 0 from offset 0 as replica `replica_id` (-1: a consumer),
/// through `session_id` at `epoch`.
fn fetch(
    client: &mut Client,
    topic: &str,
    replica_id: i32,
    session_id: i32,
    epoch: i32,
) -> FetchResponse {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_id(session_id)
        .with_session_epoch(epoch)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    client.call(1, 12, &request)
}

#[test]
fn a_client_on_a_plaintext_listener_is_served_no_inter_broker_api() {
    let broker = TestBroker::start();
    broker.create_topic("orders", 1);
    let mut client = Client::connect(&broker);
    produce(&mut client, "orders", "one");
    assert_eq!(latest(&mut client, "orders"), 1);

    // WriteTxnMarkers for a producer that never existed: refused, nothing written.
    let markers =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(4242))
            .with_producer_epoch(0)
            .with_transaction_result(false)
            .with_coordinator_epoch(0)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(name("orders"))
                .with_partition_indexes(vec![0])])]);
    let answer: WriteTxnMarkersResponse = client.call(27, 1, &markers);
    assert_eq!(
        answer.markers[0].topics[0].partitions[0].error_code,
        CLUSTER_AUTHORIZATION_FAILED
    );
    assert_eq!(latest(&mut client, "orders"), 1, "a marker was written");

    // A follower's fetch: refused whole, and no session is opened for it.
    let answer = fetch(&mut client, "orders", 1, 0, 0);
    assert_eq!(answer.error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(answer.session_id, 0);
    assert!(answer.responses.is_empty());
    // The consumer's own fetch is served as before.
    let answer = fetch(&mut client, "orders", -1, 0, 0);
    assert_eq!(answer.error_code, 0);
    assert_ne!(answer.session_id, 0);
    let session = answer.session_id;
    assert!(answer.responses[0].partitions[0]
        .records
        .as_ref()
        .is_some_and(|r| !r.is_empty()));
    // A follower's fetch naming the consumer's session neither uses nor closes it.
    let answer = fetch(&mut client, "orders", 1, session, 1);
    assert_eq!(answer.error_code, CLUSTER_AUTHORIZATION_FAILED);
    let answer = fetch(&mut client, "orders", -1, session, 1);
    assert_eq!(answer.error_code, 0, "the consumer's session is intact");

    // A follower's OffsetForLeaderEpoch: refused.
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(name("orders"))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_leader_epoch(0)])]);
    let answer: OffsetForLeaderEpochResponse = client.call(23, 3, &request);
    assert_eq!(
        answer.topics[0].partitions[0].error_code,
        CLUSTER_AUTHORIZATION_FAILED
    );

    // A listener without SASL authenticates brokers alone: a client's credentials are
    // refused, and the connection closed.
    let mut client = Client::connect(&broker);
    let handshake: SaslHandshakeResponse = client.call(
        17,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
    );
    assert_eq!(handshake.error_code, 0);
    let answer: SaslAuthenticateResponse = client.call(
        36,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0key\0secret")),
    );
    assert_eq!(
        answer.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    // Any other mechanism there is refused at the handshake.
    let mut client = Client::connect(&broker);
    let handshake: SaslHandshakeResponse = client.call(
        17,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256")),
    );
    assert_eq!(handshake.error_code, ResponseError::IllegalSaslState.code());
}

/// The process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Whether the broker closed the connection (a read finds its end, or a reset).
fn closed_within(stream: &mut std::net::TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

#[test]
fn before_authentication_a_connection_holds_little_and_not_for_long() {
    let mut broker = TestBroker::start_with(|config| {
        config.max_request_bytes = 100 * 1024 * 1024;
        config.sasl_authenticate_within = Duration::from_secs(2);
    });
    let sasl = broker.add_sasl_listener();

    // Eight connections each declare a 64 MiB frame and send 16 MiB of it: each is closed
    // at the declaration, and the broker holds none of it.
    let before = rss_kib();
    let chunk = vec![0x41u8; 1024 * 1024];
    let mut refused = 0;
    for _ in 0..8 {
        let mut stream = std::net::TcpStream::connect(sasl).unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.write_all(&(64u32 << 20).to_be_bytes()).unwrap();
        let mut sent = 0;
        for _ in 0..16 {
            if stream.write_all(&chunk).is_err() {
                break;
            }
            sent += 1;
        }
        if sent < 16 || closed_within(&mut stream, Duration::from_secs(5)) {
            refused += 1;
        }
    }
    assert_eq!(refused, 8, "a 64 MiB frame was read before authentication");
    let grown = rss_kib().saturating_sub(before);
    assert!(
        grown < 48 * 1024,
        "the broker grew by {grown} KiB for frames before authentication"
    );

    // A frame just under the cap is read (an ApiVersions padded out is still answered).
    let mut client = Client::connect_to(sasl);
    let versions: kafka_protocol::messages::ApiVersionsResponse = client.call(
        18,
        3,
        &kafka_protocol::messages::ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_string("x".repeat(300 * 1024))),
    );
    assert_eq!(versions.error_code, 0);

    // A connection that never authenticates is closed at the deadline.
    let started = Instant::now();
    let mut idle = std::net::TcpStream::connect(sasl).unwrap();
    assert!(closed_within(&mut idle, Duration::from_secs(10)));
    assert!(started.elapsed() < Duration::from_secs(8));

    // One address holds at most 256 unauthenticated connections: the next is closed at once,
    // and a place comes back when one of them goes.
    let mut held: Vec<std::net::TcpStream> = (0..skein_broker::unauthenticated::MAX_PER_ADDRESS)
        .map(|_| std::net::TcpStream::connect(sasl).unwrap())
        .collect();
    // Each is known to the broker once it answers a request.
    for stream in &mut held {
        let mut client = Client {
            stream: stream.try_clone().unwrap(),
            next_id: 1,
        };
        let _: kafka_protocol::messages::ApiVersionsResponse = client.call(
            18,
            3,
            &kafka_protocol::messages::ApiVersionsRequest::default(),
        );
    }
    let mut extra = std::net::TcpStream::connect(sasl).unwrap();
    assert!(closed_within(&mut extra, Duration::from_secs(1)));
    drop(held.pop());
    std::thread::sleep(Duration::from_millis(200));
    let mut client = Client::connect_to(sasl);
    let versions: kafka_protocol::messages::ApiVersionsResponse = client.call(
        18,
        3,
        &kafka_protocol::messages::ApiVersionsRequest::default(),
    );
    assert_eq!(versions.error_code, 0);
}

#[test]
fn a_client_cannot_make_every_record_a_segment_of_its_own() {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    // As a broker serving every tenant holds its clients (`skein broker` without --tenant).
    let broker = TestBroker::start_with(|config| {
        config.client_topic_floors = Some(skein_broker::limits::TopicConfigFloors::default());
    });
    let mut client = Client::connect(&broker);
    let create = |client: &mut Client, topic: &str, configs: &[(&str, &str)]| {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(name(topic))
                .with_num_partitions(1)
                .with_replication_factor(1)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(StrBytes::from_string((*k).to_owned()))
                                .with_value(Some(StrBytes::from_string((*v).to_owned())))
                        })
                        .collect(),
                )]);
        let answer: CreateTopicsResponse = client.call(19, 5, &request);
        answer.topics[0].error_code
    };
    assert_eq!(
        create(
            &mut client,
            "churn",
            &[("segment.ms", "1"), ("retention.ms", "-1")]
        ),
        ResponseError::PolicyViolation.code()
    );
    assert_eq!(
        create(&mut client, "tiny", &[("segment.bytes", "300")]),
        ResponseError::PolicyViolation.code()
    );
    assert!(broker.broker().topics.get("churn").is_none());
    assert_eq!(
        create(&mut client, "hourly", &[("segment.ms", "3600000")]),
        0
    );
}

/// Transactional ids are bounded in length and in number per tenant, and idle ones expire
/// (`transactional.id.expiration.ms`), giving their places back.
#[test]
fn transactional_ids_are_bounded_in_length_and_number_and_idle_ones_expire() {
    use kafka_protocol::messages::{
        InitProducerIdRequest, InitProducerIdResponse, TransactionalId,
    };
    let broker = TestBroker::start_with(|config| {
        config.max_transactional_ids = 3;
        config.transactional_id_expiration = Duration::from_secs(1);
    });
    let mut client = Client::connect(&broker);
    let mut init = |id: &str| {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_string(id.to_owned()))))
            .with_transaction_timeout_ms(10_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let answer: InitProducerIdResponse = client.call(22, 4, &request);
        answer.error_code
    };
    assert_eq!(
        init(&"t".repeat(256 * 1024)),
        ResponseError::InvalidRequest.code()
    );
    // An empty transactional id is no id (as Kafka answers it).
    assert_eq!(init(""), ResponseError::InvalidRequest.code());
    for id in ["a", "b", "c"] {
        assert_eq!(init(id), 0, "{id}");
    }
    assert_eq!(init("d"), ResponseError::PolicyViolation.code());
    // An id already held is served as before.
    assert_eq!(init("a"), 0);
    // Idle ids expire within a second or two of the expiration, and "d" gets a place.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match init("d") {
            0 => break,
            code if code == ResponseError::PolicyViolation.code() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            other => panic!("InitProducerId of d: {other}"),
        }
    }
}

/// A new idempotent producer id (InitProducerId without a transactional id).
fn new_producer(client: &mut Client) -> (i64, i16) {
    use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(10_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let answer: InitProducerIdResponse = client.call(22, 4, &request);
    assert_eq!(answer.error_code, 0);
    (answer.producer_id.0, answer.producer_epoch)
}

/// One record of `producer` at `sequence` (timestamped `timestamp`) to partition 0 of
/// `topic`; answers the error code.
fn write_as(
    client: &mut Client,
    topic: &str,
    producer: (i64, i16),
    sequence: i32,
    timestamp: i64,
) -> i16 {
    let fields = ProducerFields {
        producer_id: producer.0,
        producer_epoch: producer.1,
        base_sequence: sequence,
    };
    produce_one(client, topic, "minted", fields, timestamp)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Idempotent producer states are bounded: a client that mints producer ids and writes one
/// record with each cannot grow the broker past `max_producer_states_per_tenant`; a producer
/// it holds goes on writing, and expired ones give their places back.
#[test]
fn idempotent_producer_states_are_bounded_and_expired_ones_give_their_place_back() {
    let broker = TestBroker::start_with(|config| {
        config.max_producer_states_per_tenant = 3;
        config.producer_id_expiration = Duration::from_secs(1);
    });
    broker.create_topic("minted", 1);
    let mut client = Client::connect(&broker);
    let now = now_ms();
    let held: Vec<(i64, i16)> = (0..3).map(|_| new_producer(&mut client)).collect();
    for producer in &held {
        assert_eq!(write_as(&mut client, "minted", *producer, 0, now), 0);
    }
    let fourth = new_producer(&mut client);
    assert_eq!(
        write_as(&mut client, "minted", fourth, 0, now),
        ResponseError::PolicyViolation.code()
    );
    // A producer the broker holds goes on, and a retry is still answered as a duplicate.
    assert_eq!(write_as(&mut client, "minted", held[0], 1, now), 0);
    assert_eq!(write_as(&mut client, "minted", held[0], 1, now), 0);
    assert_eq!(latest(&mut client, "minted"), 4);
    // Idle states expire (`producer.id.expiration.ms`), and the fourth gets a place.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match write_as(&mut client, "minted", fourth, 0, now_ms()) {
            0 => break,
            code if code == ResponseError::PolicyViolation.code() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            other => panic!("the fourth producer's write: {other}"),
        }
    }
    assert_eq!(latest(&mut client, "minted"), 5);
}

/// After a restart a partition rebuilds its producers from the log: every one is kept, so
/// that a retry is still a duplicate whatever timestamp its batch carried, and none is
/// counted against the tenant's bound, so that a failover does not lock the tenant out of
/// new producers.
#[test]
fn a_restart_keeps_rebuilt_producers_without_counting_them() {
    let mut broker = TestBroker::start_with(|config| {
        config.max_producer_states_per_tenant = 3;
        config.producer_id_expiration = Duration::from_secs(3600);
    });
    broker.create_topic("minted", 1);
    let mut client = Client::connect(&broker);
    // Three producers whose batches carry a timestamp two hours old: a fourth is refused.
    let long_ago = now_ms() - 2 * 3600 * 1000;
    let old: Vec<(i64, i16)> = (0..3).map(|_| new_producer(&mut client)).collect();
    for producer in &old {
        assert_eq!(write_as(&mut client, "minted", *producer, 0, long_ago), 0);
    }
    let fourth = new_producer(&mut client);
    assert_eq!(
        write_as(&mut client, "minted", fourth, 0, now_ms()),
        ResponseError::PolicyViolation.code()
    );
    drop(client);
    broker.restart();
    let mut client = Client::connect(&broker);
    // A retry of an old producer's batch is still a duplicate: nothing is written twice.
    assert_eq!(write_as(&mut client, "minted", old[0], 0, long_ago), 0);
    assert_eq!(latest(&mut client, "minted"), 3);
    // The rebuilt three take no places: three new producers fit, a fourth does not.
    for _ in 0..3 {
        let producer = new_producer(&mut client);
        assert_eq!(write_as(&mut client, "minted", producer, 0, now_ms()), 0);
    }
    let one_too_many = new_producer(&mut client);
    assert_eq!(
        write_as(&mut client, "minted", one_too_many, 0, now_ms()),
        ResponseError::PolicyViolation.code()
    );
    assert_eq!(latest(&mut client, "minted"), 6);
}

/// Commits `offset` with `metadata` for `group` on partitions 0..`partitions` of `topic`
/// (from outside the group's generation); answers each partition's error code.
fn commit(
    client: &mut Client,
    group: &str,
    topic: &str,
    partitions: i32,
    offset: i64,
    metadata: &str,
) -> Vec<i16> {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetCommitResponse};
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(
                (0..partitions)
                    .map(|p| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(offset)
                            .with_committed_metadata(Some(StrBytes::from_string(
                                metadata.to_owned(),
                            )))
                    })
                    .collect(),
            )]);
    let answer: OffsetCommitResponse = client.call(8, 8, &request);
    answer.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect()
}

/// `group`'s committed offset and metadata of partition 0 of `topic`.
fn committed(client: &mut Client, group: &str, topic: &str) -> (i64, String) {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse};
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(topic))
            .with_partition_indexes(vec![0])]));
    let answer: OffsetFetchResponse = client.call(9, 7, &request);
    let partition = &answer.topics[0].partitions[0];
    (
        partition.committed_offset,
        partition
            .metadata
            .as_ref()
            .map_or(String::new(), |m| m.as_str().to_owned()),
    )
}

/// Client-chosen commit sizes cost the broker nothing past the bounds, and what was
/// acknowledged comes back exactly after a restart, under the key it was written with.
#[test]
fn commits_are_bounded_and_a_restart_rebuilds_exactly_what_was_acknowledged() {
    let mut broker = TestBroker::start();
    broker.create_topic("secret", 8);
    let mut client = Client::connect(&broker);

    // 150 commits of 8 x 120 KiB metadata: each refused, and the broker holds none of it.
    let before = rss_kib();
    let big = "m".repeat(120 * 1024);
    for i in 0..150 {
        let codes = commit(&mut client, &format!("g{i}"), "secret", 8, 1, &big);
        assert!(
            codes
                .iter()
                .all(|c| *c == ResponseError::OffsetMetadataTooLarge.code()),
            "{codes:?}"
        );
    }
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 64 * 1024, "the broker grew by {grown} KiB");

    // What is acknowledged: a commit at the metadata bound, under the longest group id.
    let longest = "g".repeat(skein_broker::limits::MAX_GROUP_ID_BYTES);
    let at_bound = "x".repeat(skein_broker::limits::OFFSET_METADATA_MAX_BYTES);
    assert_eq!(
        commit(&mut client, &longest, "secret", 1, 40, &at_bound),
        [0]
    );
    assert_eq!(commit(&mut client, "payroll", "secret", 1, 5, ""), [0]);
    // Refused, and so never written: 40,000 bytes of metadata, and a 64 KiB group id whose
    // length an i16 would wrap into another group's key.
    assert_eq!(
        commit(&mut client, "payroll", "secret", 1, 9, &"y".repeat(40_000)),
        [ResponseError::OffsetMetadataTooLarge.code()]
    );
    let crafted = format!("{}payroll", "z".repeat(65_536));
    assert_eq!(
        commit(&mut client, &crafted, "secret", 1, 777, ""),
        [ResponseError::InvalidGroupId.code()]
    );

    broker.restart();
    let mut client = Client::connect(&broker);
    assert_eq!(
        committed(&mut client, "payroll", "secret"),
        (5, String::new())
    );
    assert_eq!(committed(&mut client, &longest, "secret"), (40, at_bound));
}
