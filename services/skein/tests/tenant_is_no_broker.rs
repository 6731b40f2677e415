//! A tenant's client is never the cluster: on a broker process serving two tenants (a
//! control-plane process on a real PostgreSQL), acme's authenticated client, allowed every
//! topic of its own tenant, asks the inter-broker APIs about globex's topic, raw frames
//! since no client library sends them. A follower's Fetch naming globex's topic id is
//! refused whole and leaves no fetch session behind, so the next consumer Fetch has none to
//! read globex's records through; WriteTxnMarkers writes no marker; OffsetForLeaderEpoch as
//! a follower is refused. The broker's paths and inter-broker address are not shown to the
//! tenant. Another broker, presenting its controller credential, is served, as the node its
//! credential names.

#![allow(clippy::unwrap_used)]

mod common;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse, FetchRequest,
    FetchResponse, MetadataRequest, MetadataResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, ProducerId, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};

use common::admin::{issue_api_key, new_principal, TOPICS_AND_GROUPS};
use common::kafka::{name, RawKafka};
use common::processes::*;
use kafka_protocol::protocol::StrBytes;

const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

/// A Fetch v13 of partition 0 of the topic `topic_id` from offset 0, as replica
/// `replica_id` (-1: a consumer), through `session_id` at `epoch`.
fn fetch(
    client: &mut RawKafka,
    topic_id: uuid::Uuid,
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
            .with_topic_id(topic_id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    client.call(ApiKey::Fetch, 13, &request)
}

/// The record bytes an answer carries, over every partition.
fn record_bytes(answer: &FetchResponse) -> usize {
    answer
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .sum()
}

#[test]
fn a_tenants_client_is_served_no_inter_broker_api_and_reads_nothing_of_another_tenant() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("tenant_is_no_broker").unwrap();
    let (_cp, admin_addr, controller) = control_plane(&url);
    let mut keys = Vec::new();
    for tenant in ["acme", "globex"] {
        common::admin::admin(
            &admin_addr,
            "POST",
            "/v1/tenants",
            &format!(r#"{{"name":"{tenant}"}}"#),
        );
        let mut allowed = TOPICS_AND_GROUPS.to_vec();
        allowed.extend([
            ("CLUSTER", "kafka-cluster", "DESCRIBE"),
            ("CLUSTER", "kafka-cluster", "DESCRIBE_CONFIGS"),
        ]);
        new_principal(&admin_addr, tenant, "app", &allowed);
        keys.push(issue_api_key(&admin_addr, tenant, "app"));
    }
    let (acme, globex) = (&keys[0], &keys[1]);
    let data = tempfile::tempdir().unwrap();
    let broker = Process::start(&mut every_tenant_broker(
        &controller,
        data.path(),
        1,
        EVERY_TENANT_LISTENERS,
    ));
    let sasl = field(&broker.first_line, "(SASL_PLAINTEXT) on ");
    let internal = field(&broker.first_line, "serving every tenant on ");

    // globex keeps a record in `secret`.
    let mut owner = RawKafka::connect(&sasl);
    assert_eq!(owner.authenticate(&globex.0, &globex.1), 0);
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name("secret"))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    let created: CreateTopicsResponse = owner.call(ApiKey::CreateTopics, 5, &create);
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let topic_id = wait_for(|| {
        let request = MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("secret")))
            ]));
        let answer: MetadataResponse = owner.call(ApiKey::Metadata, 12, &request);
        let topic = &answer.topics[0];
        (topic.error_code == 0 && !topic.topic_id.is_nil()).then_some(topic.topic_id)
    });
    let records = skein_log::batch::build_batch(
        &[skein_log::batch::NewRecord {
            key: None,
            value: Some(b"payroll".to_vec()),
            headers: Vec::new(),
            timestamp: 1,
        }],
        skein_log::batch::Compression::None,
        skein_log::batch::ProducerFields::NONE,
    )
    .unwrap();
    wait_for(|| (owner.produce("secret", 0, records.clone()) == 0).then_some(()));
    assert_eq!(owner.latest_offset("secret", 0), 1);
    let answer = fetch(&mut owner, topic_id, -1, 0, -1);
    assert!(record_bytes(&answer) > 0, "globex reads its own records");

    // acme, as a follower: refused whole, no session.
    let mut intruder = RawKafka::connect(&sasl);
    assert_eq!(intruder.authenticate(&acme.0, &acme.1), 0);
    let answer = fetch(&mut intruder, topic_id, 1, 0, 0);
    assert_eq!(answer.error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(answer.session_id, 0, "a refused fetch opened a session");
    assert_eq!(record_bytes(&answer), 0);
    // As a consumer, globex's topic id is no topic of acme's: no records, with or without
    // a session, and through no session a refused fetch could have named.
    for (session, epoch) in [(0, 0), (0, -1), (answer.session_id, 1)] {
        let answer = fetch(&mut intruder, topic_id, -1, session, epoch);
        assert_eq!(record_bytes(&answer), 0, "acme read globex's records");
    }

    // WriteTxnMarkers for an invented producer, on globex's topic by either name: refused,
    // and nothing written.
    for topic in ["secret", "globex.secret"] {
        let markers =
            WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
                .with_producer_id(ProducerId(4242))
                .with_producer_epoch(0)
                .with_transaction_result(false)
                .with_coordinator_epoch(0)
                .with_topics(vec![WritableTxnMarkerTopic::default()
                    .with_name(name(topic))
                    .with_partition_indexes(vec![0])])]);
        let answer: WriteTxnMarkersResponse = intruder.call(ApiKey::WriteTxnMarkers, 1, &markers);
        assert_eq!(
            answer.markers[0].topics[0].partitions[0].error_code,
            CLUSTER_AUTHORIZATION_FAILED
        );
    }
    assert_eq!(owner.latest_offset("secret", 0), 1, "a marker was written");

    // OffsetForLeaderEpoch as a follower: refused.
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(name("globex.secret"))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_leader_epoch(0)])]);
    let answer: OffsetForLeaderEpochResponse =
        intruder.call(ApiKey::OffsetForLeaderEpoch, 3, &request);
    assert_eq!(
        answer.topics[0].partitions[0].error_code,
        CLUSTER_AUTHORIZATION_FAILED
    );

    // The broker's own paths and inter-broker address are the cluster's: a tenant allowed
    // to describe the cluster sees neither in DescribeConfigs nor in DescribeLogDirs.
    let data_dir = data.path().display().to_string();
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(None)]);
    let answer: DescribeConfigsResponse = intruder.call(ApiKey::DescribeConfigs, 4, &request);
    let configs = &answer.results[0];
    assert_eq!(configs.error_code, 0, "{answer:?}");
    assert!(!configs.configs.is_empty());
    for entry in &configs.configs {
        let value = entry.value.as_ref().map_or("", |v| v.as_str());
        assert!(
            !value.contains(&data_dir) && !value.contains(&internal),
            "{} = {value}",
            entry.name.as_str()
        );
    }
    let answer: DescribeLogDirsResponse = intruder.call(
        ApiKey::DescribeLogDirs,
        4,
        &DescribeLogDirsRequest::default().with_topics(None),
    );
    assert_eq!(answer.error_code, 0);
    for dir in &answer.results {
        assert!(
            !dir.log_dir.as_str().contains(&data_dir),
            "{}",
            dir.log_dir.as_str()
        );
    }

    // Another broker, with its controller credential on the inter-broker listener, is
    // served the follower's fetch: past authorization, node 2 is told it is no replica of
    // this partition.
    let token = std::fs::read_to_string(controller_token_file("broker", &["*"])).unwrap();
    let mut peer = RawKafka::connect(&internal);
    assert_eq!(peer.authenticate("skein-broker", token.trim()), 0);
    let answer = fetch(&mut peer, topic_id, 2, 0, -1);
    assert_eq!(answer.error_code, 0);
    let code = answer.responses[0].partitions[0].error_code;
    assert!(
        ![0, 29, 31, 100].contains(&code),
        "a broker's fetch of a partition it holds no replica of: {code}"
    );

    // A broker whose credential names its node fetches as that node only.
    let minted = std::process::Command::new(SKEIN)
        .args(["controller-token", "--role", "broker", "--tenant", "*"])
        .args(["--node", "7", "--secret-file"])
        .arg(controller_secret_file())
        .output()
        .unwrap();
    assert!(minted.status.success(), "{minted:?}");
    let node_7 = String::from_utf8(minted.stdout).unwrap();
    let mut peer = RawKafka::connect(&internal);
    assert_eq!(peer.authenticate("skein-broker", node_7.trim()), 0);
    let answer = fetch(&mut peer, topic_id, 2, 0, -1);
    assert_eq!(answer.error_code, CLUSTER_AUTHORIZATION_FAILED);
    let answer = fetch(&mut peer, topic_id, 7, 0, -1);
    assert_eq!(answer.error_code, 0);
}
