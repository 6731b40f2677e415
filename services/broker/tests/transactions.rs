//! Transactions at the protocol level, against a real broker over TCP: the requests a
//! transactional producer sends, what a `read_committed` fetch answers (the last stable
//! offset, the aborted transactions), the operator APIs (DescribeTransactions,
//! ListTransactions, DescribeProducers), fencing, and that all of it survives a restart.

#![allow(clippy::unwrap_used)]

mod common;

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, BrokerId, DescribeProducersRequest,
    DescribeProducersResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, FetchRequest, FetchResponse, InitProducerIdRequest,
    InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse, ListTransactionsRequest,
    ListTransactionsResponse, ProduceRequest, ProduceResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_log::batch::{BatchWriter, Compression, ProducerFields};

use common::raw::{name, Client};
use common::TestBroker;

const TOPIC: &str = "tx";

/// A fetch answer's aborted transactions: (producer id, first offset); null for
/// read_uncommitted.
type Aborted = Option<Vec<(i64, i64)>>;

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

fn init(client: &mut Client, id: &str, timeout_ms: i32) -> InitProducerIdResponse {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    client.call(22, 3, &request)
}

fn add_partitions(client: &mut Client, id: &str, producer: (i64, i16), parts: &[i32]) -> Vec<i16> {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(id))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(parts.to_vec())]);
    let response: AddPartitionsToTxnResponse = client.call(24, 3, &request);
    response
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        })
        .collect()
}

fn produce(
    client: &mut Client,
    id: &str,
    producer: (i64, i16),
    partition: i32,
    sequence: i32,
    n: usize,
) -> i16 {
    let mut writer = BatchWriter::new();
    for i in 0..n {
        writer.push(1, None, Some(format!("v{i}").as_bytes()), &[]);
    }
    let batch = writer
        .finish_transactional(
            Compression::None,
            ProducerFields {
                producer_id: producer.0,
                producer_epoch: producer.1,
                base_sequence: sequence,
            },
        )
        .unwrap();
    let request = ProduceRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(TOPIC))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(Bytes::from(batch)))])]);
    let response: ProduceResponse = client.call(0, 7, &request);
    response.responses[0].partition_responses[0].error_code
}

fn end(client: &mut Client, id: &str, producer: (i64, i16), commit: bool) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    let response: EndTxnResponse = client.call(26, 3, &request);
    response.error_code
}

/// (records bytes, high watermark, last stable offset, aborted (producer, first offset)).
fn fetch(client: &mut Client, partition: i32, isolation: i8) -> (usize, i64, i64, Aborted) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(TOPIC))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response: FetchResponse = client.call(1, 11, &request);
    let p = &response.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    (
        p.records.as_ref().map_or(0, Bytes::len),
        p.high_watermark,
        p.last_stable_offset,
        p.aborted_transactions.as_ref().map(|list| {
            list.iter()
                .map(|t| (t.producer_id.0, t.first_offset))
                .collect()
        }),
    )
}

fn describe(
    client: &mut Client,
    id: &str,
) -> kafka_protocol::messages::describe_transactions_response::TransactionState {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]);
    let mut response: DescribeTransactionsResponse = client.call(65, 0, &request);
    response.transaction_states.remove(0)
}

/// Waits until the coordinator has written the markers of `id`'s transaction: EndTxn is
/// answered once the decision is stored, and the markers follow (as in Kafka).
fn settled(client: &mut Client, id: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let state = describe(client, id).transaction_state.to_string();
        if state.starts_with("Complete") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{id} is still {state}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn list(client: &mut Client, states: &[&str]) -> ListTransactionsResponse {
    let request = ListTransactionsRequest::default()
        .with_state_filters(
            states
                .iter()
                .map(|s| StrBytes::from_string((*s).to_owned()))
                .collect(),
        )
        .with_duration_filter(-1);
    client.call(66, 1, &request)
}

fn latest_stable(client: &mut Client, partition: i32) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(1)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(-1)])]);
    let response: ListOffsetsResponse = client.call(2, 5, &request);
    response.topics[0].partitions[0].offset
}

#[test]
fn an_aborted_transaction_is_hidden_from_read_committed_and_described_to_operators() {
    let mut broker = TestBroker::start();
    broker.create_topic(TOPIC, 2);
    let mut client = Client::connect(&broker);

    let init_answer = init(&mut client, "t", 60_000);
    assert_eq!(init_answer.error_code, 0);
    let producer = (init_answer.producer_id.0, init_answer.producer_epoch);
    assert_eq!(
        add_partitions(&mut client, "t", producer, &[0, 1]),
        vec![0, 0]
    );
    assert_eq!(produce(&mut client, "t", producer, 0, 0, 3), 0);

    // Open: nothing is stable yet, and operators see the transaction.
    let (bytes, high, stable, aborted) = fetch(&mut client, 0, 1);
    assert_eq!((bytes, high, stable), (0, 3, 0));
    assert_eq!(aborted, Some(vec![]));
    assert_eq!(latest_stable(&mut client, 0), 0);
    let state = describe(&mut client, "t");
    assert_eq!(state.error_code, 0);
    assert_eq!(state.transaction_state.as_str(), "Ongoing");
    assert_eq!(state.producer_id.0, producer.0);
    assert_eq!(state.topics.len(), 1);
    assert_eq!(state.topics[0].topic.0.as_str(), TOPIC);
    assert_eq!(state.topics[0].partitions, vec![0, 1]);
    let ongoing = list(&mut client, &["Ongoing", "Bogus"]);
    assert_eq!(ongoing.transaction_states.len(), 1);
    assert_eq!(ongoing.unknown_state_filters.len(), 1);
    assert!(list(&mut client, &["CompleteCommit"])
        .transaction_states
        .is_empty());
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(name(TOPIC))
        .with_partition_indexes(vec![0])]);
    let producers: DescribeProducersResponse = client.call(61, 0, &request);
    let active = &producers.topics[0].partitions[0].active_producers;
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].producer_id.0, producer.0);
    assert_eq!(active[0].last_sequence, 2);
    assert_eq!(active[0].current_txn_start_offset, 0);

    // Aborted: the records (and the marker) are stable and named as aborted.
    assert_eq!(end(&mut client, "t", producer, false), 0);
    settled(&mut client, "t");
    let (bytes, high, stable, aborted) = fetch(&mut client, 0, 1);
    assert!(bytes > 0);
    assert_eq!((high, stable), (4, 4));
    assert_eq!(aborted, Some(vec![(producer.0, 0)]));
    assert_eq!(latest_stable(&mut client, 0), 4);
    // A read_uncommitted fetch is told of no aborts.
    assert_eq!(fetch(&mut client, 0, 0).3, None);
    // The partition added but never written got a marker too, and is stable.
    let (_, high, stable, _) = fetch(&mut client, 1, 1);
    assert_eq!((high, stable), (1, 1));
    assert_eq!(
        describe(&mut client, "t").transaction_state.as_str(),
        "CompleteAbort"
    );

    // A new producer with the id fences the old one.
    let next = init(&mut client, "t", 60_000);
    assert_eq!(next.producer_id.0, producer.0);
    assert_eq!(next.producer_epoch, producer.1 + 1);
    assert_eq!(
        add_partitions(&mut client, "t", producer, &[0]),
        vec![ResponseError::ProducerFenced.code()]
    );
    assert_eq!(
        end(&mut client, "t", producer, true),
        ResponseError::ProducerFenced.code()
    );
    // A timeout above transaction.max.timeout.ms is refused.
    assert_eq!(
        init(&mut client, "greedy", 1_000_000).error_code,
        ResponseError::InvalidTransactionTimeout.code()
    );
    assert_eq!(
        describe(&mut client, "nobody").error_code,
        ResponseError::TransactionalIdNotFound.code()
    );

    // All of it is read back from the logs after a restart.
    drop(client);
    broker.restart();
    let mut client = Client::connect(&broker);
    let (_, _, stable, aborted) = fetch(&mut client, 0, 1);
    assert_eq!(stable, 4);
    assert_eq!(aborted, Some(vec![(producer.0, 0)]));
    let state = describe(&mut client, "t");
    assert_eq!(state.transaction_state.as_str(), "Empty");
    assert_eq!(state.producer_epoch, producer.1 + 1);
}

#[test]
fn a_transaction_left_open_at_restart_still_holds_the_stable_offset_until_it_times_out() {
    let mut broker = TestBroker::start();
    broker.create_topic(TOPIC, 1);
    let mut client = Client::connect(&broker);
    let answer = init(&mut client, "slow", 2_000);
    let producer = (answer.producer_id.0, answer.producer_epoch);
    assert_eq!(add_partitions(&mut client, "slow", producer, &[0]), vec![0]);
    assert_eq!(produce(&mut client, "slow", producer, 0, 0, 2), 0);
    drop(client);
    broker.restart();
    let mut client = Client::connect(&broker);
    assert_eq!(
        fetch(&mut client, 0, 1).2,
        0,
        "the open transaction was forgotten"
    );
    // The coordinator aborts it once its timeout has passed, fencing the producer.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, high, stable, aborted) = fetch(&mut client, 0, 1);
        if stable == 3 {
            assert_eq!(high, 3);
            assert_eq!(aborted, Some(vec![(producer.0, 0)]));
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the transaction never timed out"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(
        end(&mut client, "slow", producer, true),
        ResponseError::ProducerFenced.code()
    );
    assert_eq!(describe(&mut client, "slow").producer_epoch, producer.1 + 1);
}

#[test]
fn a_transactional_batch_outside_its_transaction_is_refused_and_nothing_is_written() {
    let broker = TestBroker::start();
    broker.create_topic(TOPIC, 2);
    let mut client = Client::connect(&broker);
    let answer = init(&mut client, "strict", 60_000);
    let producer = (answer.producer_id.0, answer.producer_epoch);
    // No AddPartitionsToTxn yet: the coordinator knows of no open transaction.
    assert_eq!(
        produce(&mut client, "strict", producer, 0, 0, 1),
        ResponseError::InvalidTxnState.code()
    );
    // A producer id the coordinator never handed out for that id.
    assert_eq!(
        produce(&mut client, "strict", (producer.0 + 1000, 0), 0, 0, 1),
        ResponseError::InvalidProducerIdMapping.code()
    );
    // Partition 1 is in the transaction, partition 0 is not.
    assert_eq!(
        add_partitions(&mut client, "strict", producer, &[1]),
        vec![0]
    );
    assert_eq!(
        produce(&mut client, "strict", producer, 0, 0, 1),
        ResponseError::InvalidTxnState.code()
    );
    assert_eq!(produce(&mut client, "strict", producer, 1, 0, 1), 0);
    // Nothing reached partition 0, which stays stable with nothing open.
    let (bytes, high, stable, _) = fetch(&mut client, 0, 0);
    assert_eq!((bytes, high, stable), (0, 0, 0));
    // After the commit the partition needs a new confirmation for the next transaction.
    assert_eq!(end(&mut client, "strict", producer, true), 0);
    settled(&mut client, "strict");
    assert_eq!(
        produce(&mut client, "strict", producer, 1, 1, 1),
        ResponseError::InvalidTxnState.code()
    );
    let (_, high, stable, _) = fetch(&mut client, 1, 1);
    assert_eq!((high, stable), (2, 2));
}

/// A group's committed offset of partition 0 of [`TOPIC`] as OffsetFetch v7 answers it:
/// (offset, error code).
fn fetch_offset(client: &mut Client, group: &str, require_stable: bool) -> (i64, i16) {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse};
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(TOPIC))
            .with_partition_indexes(vec![0])]))
        .with_require_stable(require_stable);
    let response: OffsetFetchResponse = client.call(9, 7, &request);
    let p = &response.topics[0].partitions[0];
    (p.committed_offset, p.error_code)
}

#[test]
fn offsets_of_an_undecided_transaction_are_unstable_to_a_fetch_that_requires_stable_ones() {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{
        AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, GroupId, TxnOffsetCommitRequest,
        TxnOffsetCommitResponse,
    };
    let broker = TestBroker::start();
    broker.create_topic(TOPIC, 1);
    let mut client = Client::connect(&broker);
    let group = GroupId(StrBytes::from_static_str("copier"));

    let answer = init(&mut client, "offsets", 60_000);
    let producer = (answer.producer_id.0, answer.producer_epoch);
    let added: AddOffsetsToTxnResponse = client.call(
        25,
        3,
        &AddOffsetsToTxnRequest::default()
            .with_transactional_id(txn_id("offsets"))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_group_id(group.clone()),
    );
    assert_eq!(added.error_code, 0);
    let commit_offset = |client: &mut Client, offset: i64| -> i16 {
        let committed: TxnOffsetCommitResponse = client.call(
            28,
            3,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id("offsets"))
                .with_group_id(group.clone())
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_generation_id(-1)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(name(TOPIC))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)])]),
        );
        committed.topics[0].partitions[0].error_code
    };
    assert_eq!(commit_offset(&mut client, 7), 0);

    // Undecided: a read_committed consumer is told to ask again; others see the old offset.
    assert_eq!(
        fetch_offset(&mut client, "copier", true),
        (-1, ResponseError::UnstableOffsetCommit.code())
    );
    assert_eq!(fetch_offset(&mut client, "copier", false), (-1, 0));

    assert_eq!(end(&mut client, "offsets", producer, true), 0);
    settled(&mut client, "offsets");
    assert_eq!(fetch_offset(&mut client, "copier", true), (7, 0));

    // The transaction is over: offsets sent for it late (a request that raced its end) are
    // refused, and leave nothing unstable behind them.
    assert_eq!(
        commit_offset(&mut client, 9),
        ResponseError::InvalidTxnState.code()
    );
    assert_eq!(fetch_offset(&mut client, "copier", true), (7, 0));
    // So are offsets of a transaction the group's offsets were never added to.
    assert_eq!(
        add_partitions(&mut client, "offsets", producer, &[0]),
        vec![0]
    );
    assert_eq!(
        commit_offset(&mut client, 9),
        ResponseError::InvalidTxnState.code()
    );
    assert_eq!(fetch_offset(&mut client, "copier", true), (7, 0));
}
