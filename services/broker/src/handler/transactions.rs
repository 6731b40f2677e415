//! The transaction APIs (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
//! TxnOffsetCommit from producers, WriteTxnMarkers between brokers, and DescribeTransactions,
//! ListTransactions and DescribeProducers for operators (KIP-664). InitProducerId with a
//! transactional id is in `init_producer_id.rs`.

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    add_partitions_to_txn_response, describe_producers_response, describe_transactions_response,
    list_transactions_response, AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, DescribeProducersRequest,
    DescribeProducersResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TopicName, TransactionalId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_auth::Operation;
use skein_log::batch::{MarkerKind, TxnMarker};

use crate::group::Committed;
use crate::router::{Api, Call};

/// AddPartitionsToTxn: the partitions join the producer's transaction. Every partition
/// answers: a denied or unknown one with its error, the others OPERATION_NOT_ATTEMPTED
/// then, as Kafka does, since nothing is added unless all can be.
pub(crate) async fn add_partitions(
    call: &Call<'_>,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if call.version >= 4 {
        return verify_partitions(call, request).await;
    }
    let (broker, access) = (call.broker, call.access());
    let id = request.v3_and_below_transactional_id.0.as_str();
    let answer = |errors: Vec<(kafka_protocol::messages::TopicName, Vec<(i32, i16)>)>| {
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(
            errors
                .into_iter()
                .map(|(name, partitions)| {
                    AddPartitionsToTxnTopicResult::default()
                        .with_name(name)
                        .with_results_by_partition(
                            partitions
                                .into_iter()
                                .map(|(index, code)| {
                                    AddPartitionsToTxnPartitionResult::default()
                                        .with_partition_index(index)
                                        .with_partition_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
    };
    let every = |code: i16| {
        request
            .v3_and_below_topics
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    t.partitions.iter().map(|p| (*p, code)).collect(),
                )
            })
            .collect::<Vec<_>>()
    };
    if !access.transactional_id(Operation::Write, id) {
        return answer(every(
            ResponseError::TransactionalIdAuthorizationFailed.code(),
        ));
    }
    let mut wanted = Vec::new();
    let mut refused = false;
    let mut results = Vec::new();
    for topic in &request.v3_and_below_topics {
        let name = topic.name.0.as_str();
        let kept = call.scope.qualify(name);
        let code = if crate::topics::is_internal(name) || !access.topic(Operation::Write, name) {
            ResponseError::TopicAuthorizationFailed.code()
        } else {
            if !broker.topics.contains(&kept) {
                let _ = broker.topics.lookup(&kept).await;
            }
            match broker.topics.get(&kept) {
                Some(info) => {
                    let bad = topic
                        .partitions
                        .iter()
                        .any(|p| *p < 0 || *p >= info.partitions);
                    if bad {
                        ResponseError::UnknownTopicOrPartition.code()
                    } else {
                        0
                    }
                }
                None => ResponseError::UnknownTopicOrPartition.code(),
            }
        };
        refused |= code != 0;
        wanted.extend(topic.partitions.iter().map(|p| (kept.to_string(), *p)));
        results.push((topic.name.clone(), code, topic.partitions.clone()));
    }
    if refused {
        return answer(
            results
                .into_iter()
                .map(|(name, code, partitions)| {
                    let code = if code == 0 {
                        ResponseError::OperationNotAttempted.code()
                    } else {
                        code
                    };
                    (name, partitions.into_iter().map(|p| (p, code)).collect())
                })
                .collect(),
        );
    }
    let done = broker
        .transactions_of(&call.scope)
        .add_partitions(
            broker,
            id,
            request.v3_and_below_producer_id.0,
            request.v3_and_below_producer_epoch,
            &wanted,
        )
        .await;
    let code = match done {
        Ok(()) => 0,
        Err(e) => {
            tracing::debug!(transactional_id = id, error = %e, "AddPartitionsToTxn refused");
            e.code(call.version, 2).code()
        }
    };
    answer(every(code))
}

/// AddPartitionsToTxn v4 with `verify_only`, from another broker leading a partition a
/// transactional producer writes to: is the partition in the producer's open transaction?
/// Names are as the brokers keep them; only the cluster's own connections may ask, and
/// adding partitions this way (without `verify_only`) is not offered.
async fn verify_partitions(
    call: &Call<'_>,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let broker = call.broker;
    let allowed = call.is_from_broker();
    let mut results = Vec::new();
    for txn in request.transactions {
        let mut topic_results = Vec::new();
        for topic in txn.topics {
            let kept = topic.name.0.as_str().to_owned();
            let mut partitions = Vec::new();
            for index in topic.partitions {
                let code = if !allowed {
                    ResponseError::ClusterAuthorizationFailed.code()
                } else if !txn.verify_only {
                    ResponseError::InvalidRequest.code()
                } else {
                    let scope = match broker.topics.tenancy().split(&kept) {
                        (Some(tenant), _) => {
                            crate::scope::Scope::Tenant(std::sync::Arc::from(tenant))
                        }
                        (None, _) => crate::scope::Scope::Plain,
                    };
                    match broker
                        .transactions_of(&scope)
                        .verify(
                            broker,
                            txn.transactional_id.0.as_str(),
                            (txn.producer_id.0, txn.producer_epoch),
                            &(kept.clone(), index),
                        )
                        .await
                    {
                        Ok(()) => 0,
                        Err(e) => e.produce_code().code(),
                    }
                };
                partitions.push(
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(index)
                        .with_partition_error_code(code),
                );
            }
            topic_results.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(topic.name)
                    .with_results_by_partition(partitions),
            );
        }
        results.push(
            add_partitions_to_txn_response::AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id)
                .with_topic_results(topic_results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

/// AddOffsetsToTxn: the group's offsets partition joins the transaction, so that the
/// offsets the producer commits in it (TxnOffsetCommit) count only if it commits.
pub(crate) async fn add_offsets(
    call: &Call<'_>,
    request: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let (broker, access) = (call.broker, call.access());
    let id = request.transactional_id.0.as_str();
    let refused = |e: ResponseError| AddOffsetsToTxnResponse::default().with_error_code(e.code());
    if !access.transactional_id(Operation::Write, id) {
        return refused(ResponseError::TransactionalIdAuthorizationFailed);
    }
    if !access.group(Operation::Read, request.group_id.0.as_str()) {
        return refused(ResponseError::GroupAuthorizationFailed);
    }
    let offsets = call.scope.qualify(crate::group::OFFSETS_TOPIC).into_owned();
    match broker
        .transactions_of(&call.scope)
        .add_partitions(
            broker,
            id,
            request.producer_id.0,
            request.producer_epoch,
            &[(offsets, 0)],
        )
        .await
    {
        Ok(()) => AddOffsetsToTxnResponse::default(),
        Err(e) => refused(e.code(call.version, 2)),
    }
}

/// EndTxn: commit or abort.
pub(crate) async fn end(call: &Call<'_>, request: EndTxnRequest) -> EndTxnResponse {
    let (broker, access) = (call.broker, call.access());
    let id = request.transactional_id.0.as_str();
    if !access.transactional_id(Operation::Write, id) {
        return EndTxnResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    match broker
        .transactions_of(&call.scope)
        .end(
            broker,
            id,
            request.producer_id.0,
            request.producer_epoch,
            request.committed,
        )
        .await
    {
        Ok(()) => EndTxnResponse::default(),
        Err(e) => {
            tracing::debug!(transactional_id = id, error = %e, "EndTxn refused");
            EndTxnResponse::default().with_error_code(e.code(call.version, 2).code())
        }
    }
}

/// TxnOffsetCommit, at the group coordinator: offsets stored in the producer's transaction.
pub(crate) async fn txn_offset_commit(
    call: &Call<'_>,
    request: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let (broker, access) = (call.broker, call.access());
    let id = request.transactional_id.0.as_str();
    let group = request.group_id.0.as_str();
    let every = |code: i16| {
        TxnOffsetCommitResponse::default().with_topics(
            request
                .topics
                .iter()
                .map(|t| {
                    TxnOffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    TxnOffsetCommitResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
    };
    if !access.transactional_id(Operation::Write, id) {
        return every(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if !access.group(Operation::Read, group) {
        return every(ResponseError::GroupAuthorizationFailed.code());
    }
    if !crate::limits::valid_group_id(group) {
        return every(ResponseError::InvalidGroupId.code());
    }
    let groups = broker.groups_of(&call.scope);
    if let Err(e) = broker.coordinate(&call.scope, &groups).await {
        return every(e.code().code());
    }
    let mut commits = Vec::new();
    let mut answer = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let known = broker.topics.get(&call.scope.qualify(name));
        let readable = access.topic(Operation::Read, name);
        let partitions = topic
            .partitions
            .iter()
            .map(|p| {
                let metadata = p.committed_metadata.as_ref().map_or("", |m| m.as_str());
                let code = match &known {
                    _ if !readable => ResponseError::TopicAuthorizationFailed.code(),
                    _ if metadata.len() > crate::limits::OFFSET_METADATA_MAX_BYTES => {
                        ResponseError::OffsetMetadataTooLarge.code()
                    }
                    Some(info) if p.partition_index >= 0 && p.partition_index < info.partitions => {
                        commits.push((
                            name.to_owned(),
                            p.partition_index,
                            Committed {
                                offset: p.committed_offset,
                                leader_epoch: if call.version >= 2 {
                                    p.committed_leader_epoch
                                } else {
                                    -1
                                },
                                metadata: metadata.to_owned(),
                            },
                        ));
                        0
                    }
                    _ => ResponseError::UnknownTopicOrPartition.code(),
                };
                TxnOffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            })
            .collect::<Vec<_>>();
        answer.push(
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    let producer = (request.producer_id.0, request.producer_epoch);
    let stored = match verify_offsets(call, id, &groups.offsets, producer).await {
        Ok(()) => groups
            .offsets
            .commit_in_transaction(
                &broker.replicas,
                group,
                producer,
                &commits,
                crate::group::now_ms(),
            )
            .await
            .map_err(|e| e.code()),
        Err(e) => Err(e),
    };
    if let Err(e) = stored {
        tracing::debug!(group, error = ?e, "TxnOffsetCommit refused");
        let code = e.code();
        for topic in &mut answer {
            for p in &mut topic.partitions {
                if p.error_code == 0 {
                    p.error_code = code;
                }
            }
        }
    }
    TxnOffsetCommitResponse::default().with_topics(answer)
}

/// Asks the transaction coordinator, unless it confirmed it since the producer's last
/// marker here, whether `producer`'s open transaction holds the group's offsets partition
/// (added by AddOffsetsToTxn); see [`crate::group::OffsetStore::begin_verification`].
async fn verify_offsets(
    call: &Call<'_>,
    transactional_id: &str,
    offsets: &crate::group::OffsetStore,
    producer: (i64, i16),
) -> Result<(), ResponseError> {
    let Some(guard) = offsets.begin_verification(producer) else {
        return Ok(());
    };
    let partition = (
        call.scope.qualify(crate::group::OFFSETS_TOPIC).into_owned(),
        0,
    );
    match crate::txn::verify(
        call.broker,
        &call.scope,
        transactional_id,
        producer,
        &partition,
    )
    .await
    {
        Ok(()) if offsets.confirm_verification(producer, guard) => Ok(()),
        // A marker of the producer came while the coordinator was asked: its transaction
        // ended.
        Ok(()) => Err(ResponseError::InvalidTxnState),
        // TxnOffsetCommit names a fenced producer as Kafka's group coordinator does.
        Err(ResponseError::InvalidProducerEpoch) => Err(ResponseError::ProducerFenced),
        Err(e) => Err(e),
    }
}

/// WriteTxnMarkers, from another broker's transaction coordinator: markers for partitions
/// this broker leads. Only the cluster's own connections may send it.
pub(crate) async fn write_markers(
    call: &Call<'_>,
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let broker = call.broker;
    // As a follower's fetch: another broker, never a client.
    let allowed = call.is_from_broker();
    let mut results = Vec::new();
    for marker in request.markers {
        let producer = (marker.producer_id.0, marker.producer_epoch);
        let txn_marker = TxnMarker {
            kind: if marker.transaction_result {
                MarkerKind::Commit
            } else {
                MarkerKind::Abort
            },
            coordinator_epoch: marker.coordinator_epoch,
        };
        let mut topics = Vec::new();
        for topic in marker.topics {
            let mut partitions = Vec::new();
            for index in topic.partition_indexes {
                let code = if !allowed {
                    ResponseError::ClusterAuthorizationFailed.code()
                } else {
                    match crate::txn::markers::write_local(
                        broker,
                        topic.name.0.as_str(),
                        index,
                        producer,
                        txn_marker,
                    )
                    .await
                    {
                        Ok(()) => 0,
                        Err(e) => e.code().code(),
                    }
                };
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(code),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(topic.name)
                    .with_partitions(partitions),
            );
        }
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(marker.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(results)
}

/// AddPartitionsToTxn versions 0 to 3 from producers; version 4, KIP-890's form, between
/// brokers to verify a transaction (`verify_only`).
pub(crate) struct AddPartitionsToTxn;

impl Api for AddPartitionsToTxn {
    type Request = AddPartitionsToTxnRequest;
    type Response = AddPartitionsToTxnResponse;
    const KEY: ApiKey = ApiKey::AddPartitionsToTxn;
    const VERSIONS: (i16, i16) = (0, 4);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(add_partitions(call, request).await)
    }
}

/// AddOffsetsToTxn versions 0 to 3.
pub(crate) struct AddOffsetsToTxn;

impl Api for AddOffsetsToTxn {
    type Request = AddOffsetsToTxnRequest;
    type Response = AddOffsetsToTxnResponse;
    const KEY: ApiKey = ApiKey::AddOffsetsToTxn;
    const VERSIONS: (i16, i16) = (0, 3);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(add_offsets(call, request).await)
    }
}

/// EndTxn versions 0 to 3.
pub(crate) struct EndTxn;

impl Api for EndTxn {
    type Request = EndTxnRequest;
    type Response = EndTxnResponse;
    const KEY: ApiKey = ApiKey::EndTxn;
    const VERSIONS: (i16, i16) = (0, 3);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(end(call, request).await)
    }
}

/// TxnOffsetCommit versions 0 to 3.
pub(crate) struct TxnOffsetCommit;

impl Api for TxnOffsetCommit {
    type Request = TxnOffsetCommitRequest;
    type Response = TxnOffsetCommitResponse;
    const KEY: ApiKey = ApiKey::TxnOffsetCommit;
    const VERSIONS: (i16, i16) = (0, 3);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(txn_offset_commit(call, request).await)
    }
}

/// WriteTxnMarkers version 1.
pub(crate) struct WriteTxnMarkers;

impl Api for WriteTxnMarkers {
    type Request = WriteTxnMarkersRequest;
    type Response = WriteTxnMarkersResponse;
    const KEY: ApiKey = ApiKey::WriteTxnMarkers;
    const VERSIONS: (i16, i16) = (1, 1);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(write_markers(call, request).await)
    }
}

/// DescribeTransactions: the state of each transactional id the principal may describe.
pub(crate) async fn describe(
    call: &Call<'_>,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let (broker, access) = (call.broker, call.access());
    let coordinator = broker.transactions_of(&call.scope);
    let known = coordinator.list(broker).await;
    let states = request
        .transactional_ids
        .into_iter()
        .map(|id| {
            let answer = describe_transactions_response::TransactionState::default()
                .with_transactional_id(id.clone())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1);
            if !access.transactional_id(Operation::Describe, id.as_str()) {
                return answer
                    .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
            }
            let views = match &known {
                Ok(views) => views,
                Err(e) => return answer.with_error_code(e.code(0, 0).code()),
            };
            let Some(view) = views.iter().find(|v| v.transactional_id == id.as_str()) else {
                return answer.with_error_code(ResponseError::TransactionalIdNotFound.code());
            };
            let meta = &view.meta;
            let mut topics: Vec<describe_transactions_response::TopicData> = Vec::new();
            for (topic, partition) in &meta.partitions {
                let shown = call.scope.strip(topic).unwrap_or(topic);
                let name = TopicName(StrBytes::from_string(shown.to_owned()));
                match topics.last_mut() {
                    Some(t) if t.topic == name => t.partitions.push(*partition),
                    _ => topics.push(
                        describe_transactions_response::TopicData::default()
                            .with_topic(name)
                            .with_partitions(vec![*partition]),
                    ),
                }
            }
            answer
                .with_transaction_state(StrBytes::from_static_str(meta.status.name()))
                .with_transaction_timeout_ms(meta.timeout_ms)
                .with_transaction_start_time_ms(meta.start_ms)
                .with_producer_id(ProducerId(meta.producer_id))
                .with_producer_epoch(meta.producer_epoch)
                .with_topics(topics)
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

/// ListTransactions: the transactional ids this coordinator knows that the principal may
/// describe, filtered by state, producer id and (v1) how long they have been open.
pub(crate) async fn list(
    call: &Call<'_>,
    request: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let (broker, access) = (call.broker, call.access());
    let views = match broker.transactions_of(&call.scope).list(broker).await {
        Ok(views) => views,
        Err(e) => return ListTransactionsResponse::default().with_error_code(e.code(0, 0).code()),
    };
    let known_states = [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
    ];
    let unknown: Vec<StrBytes> = request
        .state_filters
        .iter()
        .filter(|s| !known_states.contains(&s.as_str()))
        .cloned()
        .collect();
    let now = crate::group::now_ms();
    let states = views
        .into_iter()
        .filter(|v| access.transactional_id(Operation::Describe, &v.transactional_id))
        .filter(|v| {
            request.state_filters.is_empty()
                || request
                    .state_filters
                    .iter()
                    .any(|s| s.as_str() == v.meta.status.name())
        })
        .filter(|v| {
            request.producer_id_filters.is_empty()
                || request
                    .producer_id_filters
                    .iter()
                    .any(|p| p.0 == v.meta.producer_id)
        })
        .filter(|v| {
            call.version < 1
                || request.duration_filter < 0
                || (v.meta.start_ms >= 0
                    && now.saturating_sub(v.meta.start_ms) >= request.duration_filter)
        })
        .map(|v| {
            list_transactions_response::TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(v.transactional_id)))
                .with_producer_id(ProducerId(v.meta.producer_id))
                .with_transaction_state(StrBytes::from_static_str(v.meta.status.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(states)
}

/// DescribeProducers: the producers of each partition this broker leads.
pub(crate) fn describe_producers(
    call: &Call<'_>,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let (broker, access) = (call.broker, call.access());
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.as_str().to_owned();
            let readable =
                !crate::topics::is_internal(&name) && access.topic(Operation::Read, &name);
            let kept = call.scope.qualify(&name).into_owned();
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|&index| {
                    let answer = describe_producers_response::PartitionResponse::default()
                        .with_partition_index(index);
                    if !readable {
                        return answer
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let producers = broker
                        .replicas
                        .leader(&kept, index, -1)
                        .and_then(|p| p.producers());
                    match producers {
                        Ok(producers) => answer.with_active_producers(
                            producers
                                .into_iter()
                                .map(|p| {
                                    describe_producers_response::ProducerState::default()
                                        .with_producer_id(ProducerId(p.producer_id))
                                        .with_producer_epoch(i32::from(p.epoch))
                                        .with_last_sequence(p.last_sequence)
                                        .with_last_timestamp(p.last_write_ms)
                                        .with_coordinator_epoch(-1)
                                        .with_current_txn_start_offset(
                                            p.open_since.map_or(-1, |o| o as i64),
                                        )
                                })
                                .collect(),
                        ),
                        Err(e) => answer.with_error_code(super::partition_error_code(&e)),
                    }
                })
                .collect();
            describe_producers_response::TopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

/// DescribeTransactions version 0.
pub(crate) struct DescribeTransactions;

impl Api for DescribeTransactions {
    type Request = DescribeTransactionsRequest;
    type Response = DescribeTransactionsResponse;
    const KEY: ApiKey = ApiKey::DescribeTransactions;
    const VERSIONS: (i16, i16) = (0, 0);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(describe(call, request).await)
    }
}

/// ListTransactions versions 0 and 1 (2's id pattern is not offered).
pub(crate) struct ListTransactions;

impl Api for ListTransactions {
    type Request = ListTransactionsRequest;
    type Response = ListTransactionsResponse;
    const KEY: ApiKey = ApiKey::ListTransactions;
    const VERSIONS: (i16, i16) = (0, 1);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(list(call, request).await)
    }
}

/// DescribeProducers version 0.
pub(crate) struct DescribeProducers;

impl Api for DescribeProducers {
    type Request = DescribeProducersRequest;
    type Response = DescribeProducersResponse;
    const KEY: ApiKey = ApiKey::DescribeProducers;
    const VERSIONS: (i16, i16) = (0, 0);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(describe_producers(call, request))
    }
}
