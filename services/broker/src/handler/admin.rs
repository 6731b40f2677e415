//! The topic admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords and
//! DescribeCluster.

use skein_auth::Operation;

use kafka_protocol::messages::ApiKey;

use crate::router::{Api, Call};

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteRecordsRequest, DeleteRecordsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, DescribeClusterResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::partition_error_code;
use crate::controller_link::{Reason, TopicShape};
use crate::scope::Scope;
use crate::topics::TopicError;
use crate::Broker;

/// The Kafka error code and message for a refused topic operation, naming topics as the
/// client of `scope` knows them.
fn topic_error(err: &TopicError, scope: &Scope) -> (i16, Option<StrBytes>) {
    let code = match err {
        TopicError::InvalidName { .. } => ResponseError::InvalidTopicException,
        TopicError::InvalidPartitions { .. } | TopicError::PartitionsNotIncreased { .. } => {
            ResponseError::InvalidPartitions
        }
        TopicError::AlreadyExists { .. } => ResponseError::TopicAlreadyExists,
        TopicError::NotFound { .. } => ResponseError::UnknownTopicOrPartition,
        TopicError::Io { .. } => ResponseError::KafkaStorageError,
        TopicError::Controller(e) => match (e.reason, e.code) {
            // Kafka clients retry NOT_CONTROLLER after refreshing metadata.
            (Reason::NotActive, _) | (_, tonic::Code::Unavailable) => ResponseError::NotController,
            (Reason::AlreadyExists, _) => ResponseError::TopicAlreadyExists,
            (Reason::NotFound, _) => ResponseError::UnknownTopicOrPartition,
            (Reason::InvalidName, _) => ResponseError::InvalidTopicException,
            (Reason::InvalidPartitions, _) => ResponseError::InvalidPartitions,
            (Reason::InvalidReplicationFactor, _) => ResponseError::InvalidReplicationFactor,
            (Reason::InvalidReplicaAssignment, _) => ResponseError::InvalidReplicaAssignment,
            (Reason::InvalidConfig, _) => ResponseError::InvalidConfig,
            // The tenant's partitions quota.
            (Reason::QuotaExceeded, _) => ResponseError::PolicyViolation,
            (Reason::InvalidAcl | Reason::InvalidRequest, _) => ResponseError::InvalidRequest,
            (Reason::Conflict | Reason::Unspecified, _) => ResponseError::UnknownServerError,
        },
    };
    (code.code(), Some(StrBytes::from_string(err.shown(scope))))
}

pub(crate) async fn create_topics(
    call: &Call<'_>,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let access = call.access();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        // CREATE on the cluster or on the topic; a denied topic is not made.
        if !access.may_create_topic(topic.name.as_str()) {
            topics.push(
                CreatableTopicResult::default()
                    .with_name(topic.name)
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        "CREATE on the cluster or the topic is needed",
                    ))),
            );
            continue;
        }
        topics.push(create_topic(call, topic, request.validate_only).await);
    }
    CreateTopicsResponse::default().with_topics(topics)
}

/// Why `adding` partitions would take the tenant past its `partitions` quota, by this
/// broker's view of its topics; `None` when they fit.
fn over_partitions_quota(call: &Call<'_>, adding: i64) -> Option<String> {
    let limit = call.tenant.quotas.partitions()?;
    let used: i64 = call
        .broker
        .topics
        .list_in(&call.scope)
        .iter()
        .map(|t| i64::from(t.partitions))
        .sum();
    (used + adding > limit).then(|| {
        format!(
            "the tenant's partitions quota is {limit}; this would make it {}",
            used + adding
        )
    })
}

async fn create_topic(
    call: &Call<'_>,
    topic: kafka_protocol::messages::create_topics_request::CreatableTopic,
    validate_only: bool,
) -> CreatableTopicResult {
    let (broker, version) = (call.broker, call.version);
    let name = topic.name.0.as_str().to_owned();
    let result = CreatableTopicResult::default().with_name(topic.name.clone());
    // The client's name by Kafka's rule, and short enough to keep with its tenant's.
    if let Err(e) = crate::topics::validate_client_name(&call.scope, &name) {
        let (code, message) = topic_error(&e, &call.scope);
        return result.with_error_code(code).with_error_message(message);
    }
    let partitions = match topic.num_partitions {
        -1 => broker.config.default_partitions,
        n => n,
    };
    let refuse = |code: ResponseError, message: String| {
        CreatableTopicResult::default()
            .with_name(topic.name.clone())
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    let controlled = broker.topics.is_controlled();
    if !controlled && topic.replication_factor != -1 && topic.replication_factor != 1 {
        return refuse(
            ResponseError::InvalidReplicationFactor,
            format!(
                "replication factor {} is larger than the 1 broker available",
                topic.replication_factor
            ),
        );
    }
    let shape = if topic.assignments.is_empty() {
        TopicShape::Placed {
            partitions,
            replication_factor: match topic.replication_factor {
                -1 => broker.default_replication_factor(),
                n => i32::from(n),
            },
        }
    } else {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return refuse(
                ResponseError::InvalidRequest,
                "replica assignments were given with a partition count or replication factor; \
                 set those to -1"
                    .to_owned(),
            );
        }
        match assigned_by_index(&topic.assignments) {
            Ok(assigned) => TopicShape::Assigned(assigned),
            Err(message) => return refuse(ResponseError::InvalidReplicaAssignment, message),
        }
    };
    if let TopicShape::Assigned(assigned) = &shape {
        if let Err(message) = only_here(broker, assigned) {
            return refuse(ResponseError::InvalidReplicaAssignment, message);
        }
    }
    let partitions = match &shape {
        TopicShape::Placed { partitions, .. } => *partitions,
        TopicShape::Assigned(assigned) => i32::try_from(assigned.len()).unwrap_or(i32::MAX),
    };
    let overrides: std::collections::BTreeMap<String, String> = topic
        .configs
        .iter()
        .filter_map(|c| {
            c.value
                .as_ref()
                .map(|v| (c.name.as_str().to_owned(), v.as_str().to_owned()))
        })
        .collect();
    if let Err(e) = skein_log::topic_config::settings(&broker.replicas.defaults(), &overrides) {
        return refuse(ResponseError::InvalidConfig, e.to_string());
    }
    if let Some(message) = broker
        .config
        .client_topic_floors
        .and_then(|floors| floors.refusal(&overrides))
    {
        return refuse(ResponseError::PolicyViolation, message);
    }
    if validate_only {
        // The controller decides for real; this answers from the last snapshot.
        if let Some(message) = over_partitions_quota(call, i64::from(partitions)) {
            return refuse(ResponseError::PolicyViolation, message);
        }
    }
    let replication_factor = match &shape {
        TopicShape::Placed {
            replication_factor, ..
        } => *replication_factor,
        TopicShape::Assigned(assigned) => assigned
            .first()
            .map_or(0, |r| i32::try_from(r.len()).unwrap_or(i32::MAX)),
    };
    match broker
        .topics
        .create_checked(&call.scope.qualify(&name), &shape, overrides, validate_only)
        .await
    {
        Ok(info) => {
            let result = if version >= 7 {
                result.with_topic_id(info.id)
            } else {
                result
            };
            if version >= 5 {
                result
                    .with_num_partitions(info.partitions)
                    .with_replication_factor(replication_factor as i16)
            } else {
                result
            }
        }
        Err(e) => {
            let (code, message) = topic_error(&e, &call.scope);
            result.with_error_code(code).with_error_message(message)
        }
    }
}

/// CreateTopics assignments as replicas by partition index, which must run 0, 1, 2, ...
fn assigned_by_index(
    assignments: &[kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment],
) -> Result<Vec<Vec<i32>>, String> {
    let mut by_index: Vec<_> = assignments.iter().collect();
    by_index.sort_by_key(|a| a.partition_index);
    by_index
        .iter()
        .enumerate()
        .map(|(expected, a)| {
            if i64::from(a.partition_index) != expected as i64 {
                return Err(format!(
                    "assignments must name partitions 0 to {} once each; partition {} does not fit",
                    assignments.len() - 1,
                    a.partition_index
                ));
            }
            Ok(a.broker_ids.iter().map(|id| id.0).collect())
        })
        .collect()
}

/// On a broker on its own, an assignment may only name this broker, once per partition.
fn only_here(broker: &Broker, assigned: &[Vec<i32>]) -> Result<(), String> {
    let node = broker.config.node_id;
    if broker.topics.is_controlled() || assigned.iter().all(|r| r == &[node]) {
        return Ok(());
    }
    Err(format!(
        "this broker is on its own: every partition's replicas must be [{node}]"
    ))
}

pub(crate) async fn delete_topics(
    call: &Call<'_>,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let (broker, access, version, scope) = (call.broker, call.access(), call.version, &call.scope);
    // v6 names topics in `topics` (by name or id); earlier versions in `topic_names`.
    let names: Vec<Option<String>> = if version >= 6 {
        request
            .topics
            .iter()
            .map(|t| match &t.name {
                Some(n) => Some(n.0.as_str().to_owned()),
                None => broker
                    .topics
                    .name_of_id(t.topic_id, Some(scope))
                    .and_then(|name| scope.strip(&name).map(str::to_owned)),
            })
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| Some(n.0.as_str().to_owned()))
            .collect()
    };
    let mut responses = Vec::with_capacity(names.len());
    for name in names {
        // DELETE on the topic; a denied one stays.
        if let Some(denied) = name
            .as_ref()
            .filter(|name| !access.topic(Operation::Delete, name))
        {
            responses.push(
                DeletableTopicResult::default()
                    .with_name(Some(TopicName(StrBytes::from_string(denied.clone()))))
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
            );
            continue;
        }
        responses.push(delete_topic(call, name).await);
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

/// Deletes the topic the client knows as `name`.
async fn delete_topic(call: &Call<'_>, name: Option<String>) -> DeletableTopicResult {
    let (broker, version) = (call.broker, call.version);
    let Some(name) = name else {
        return DeletableTopicResult::default()
            .with_error_code(ResponseError::UnknownTopicId.code());
    };
    let result = DeletableTopicResult::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.clone()))));
    match broker.topics.delete(&call.scope.qualify(&name)).await {
        Ok(info) => {
            broker.replicas.drop_partitions(&info);
            if version >= 6 {
                result.with_topic_id(info.id)
            } else {
                result
            }
        }
        Err(e) => {
            let (code, message) = topic_error(&e, &call.scope);
            let result = result.with_error_code(code);
            if version >= 5 {
                result.with_error_message(message)
            } else {
                result
            }
        }
    }
}

pub(crate) async fn create_partitions(
    call: &Call<'_>,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let access = call.access();
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        // ALTER on the topic.
        if !access.topic(Operation::Alter, topic.name.as_str()) {
            results.push(
                CreatePartitionsTopicResult::default()
                    .with_name(topic.name)
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
            );
            continue;
        }
        results.push(create_partitions_of(call, topic, request.validate_only).await);
    }
    CreatePartitionsResponse::default().with_results(results)
}

async fn create_partitions_of(
    call: &Call<'_>,
    topic: kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic,
    validate_only: bool,
) -> CreatePartitionsTopicResult {
    let broker = call.broker;
    let kept = call.scope.qualify(topic.name.0.as_str());
    let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
    let refuse = |message: String| {
        CreatePartitionsTopicResult::default()
            .with_name(topic.name.clone())
            .with_error_code(ResponseError::InvalidReplicaAssignment.code())
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    let assigned: Vec<Vec<i32>> = topic
        .assignments
        .iter()
        .flatten()
        .map(|a| a.broker_ids.iter().map(|id| id.0).collect())
        .collect();
    if let Err(message) = only_here(broker, &assigned) {
        return refuse(message);
    }
    if let (false, Some(existing)) = (assigned.is_empty(), broker.topics.get(&kept)) {
        // The controller checks this too; a broker on its own has only this check.
        let adding = i64::from(topic.count) - i64::from(existing.partitions);
        if adding > 0 && assigned.len() as i64 != adding {
            return refuse(format!(
                "growing the topic by {adding} partition(s) needs as many assignments, not {}",
                assigned.len()
            ));
        }
    }
    if let (true, Some(existing)) = (validate_only, broker.topics.get(&kept)) {
        let adding = i64::from(topic.count) - i64::from(existing.partitions);
        if let Some(message) = over_partitions_quota(call, adding.max(0)) {
            return result
                .with_error_code(ResponseError::PolicyViolation.code())
                .with_error_message(Some(StrBytes::from_string(message)));
        }
    }
    match broker
        .topics
        .add_partitions(&kept, topic.count, &assigned, validate_only)
        .await
    {
        Ok(_) => result,
        Err(e) => {
            let (code, message) = topic_error(&e, &call.scope);
            result.with_error_code(code).with_error_message(message)
        }
    }
}

pub(crate) fn delete_records(
    call: &Call<'_>,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let (broker, access) = (call.broker, call.access());
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.as_str().to_owned();
            // DELETE on the topic.
            let allowed = access.topic(Operation::Delete, &name);
            let kept = call.scope.qualify(&name);
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    if !allowed {
                        return result
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let deleted = broker
                        .replicas
                        .leader(&kept, p.partition_index, -1)
                        .and_then(|partition| partition.delete_records(p.offset));
                    match deleted {
                        Ok(low_watermark) => result.with_low_watermark(low_watermark),
                        Err(e) => result.with_error_code(partition_error_code(&e)),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}

pub(crate) fn describe_cluster(call: &Call<'_>) -> DescribeClusterResponse {
    let broker = call.broker;
    let node = BrokerId(broker.config.node_id);
    DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_static_str("skein"))
        .with_controller_id(node)
        .with_brokers(
            super::metadata::cluster_brokers(broker, &call.scope, &call.session.listener)
                .into_iter()
                .map(|b| {
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(b.node_id))
                        .with_host(StrBytes::from_string(b.host))
                        .with_port(b.port)
                        .with_rack(b.rack.map(StrBytes::from_string))
                })
                .collect(),
        )
}

/// CreateTopics versions 2 to 7.
pub(crate) struct CreateTopics;

impl Api for CreateTopics {
    type Request = kafka_protocol::messages::CreateTopicsRequest;
    type Response = kafka_protocol::messages::CreateTopicsResponse;
    const KEY: ApiKey = ApiKey::CreateTopics;
    const VERSIONS: (i16, i16) = (2, 7);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(create_topics(call, request).await)
    }
}

/// DeleteTopics versions 1 to 6.
pub(crate) struct DeleteTopics;

impl Api for DeleteTopics {
    type Request = kafka_protocol::messages::DeleteTopicsRequest;
    type Response = kafka_protocol::messages::DeleteTopicsResponse;
    const KEY: ApiKey = ApiKey::DeleteTopics;
    const VERSIONS: (i16, i16) = (1, 6);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(delete_topics(call, request).await)
    }
}

/// CreatePartitions versions 0 to 3.
pub(crate) struct CreatePartitions;

impl Api for CreatePartitions {
    type Request = kafka_protocol::messages::CreatePartitionsRequest;
    type Response = kafka_protocol::messages::CreatePartitionsResponse;
    const KEY: ApiKey = ApiKey::CreatePartitions;
    const VERSIONS: (i16, i16) = (0, 3);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(create_partitions(call, request).await)
    }
}

/// DeleteRecords versions 0 to 2.
pub(crate) struct DeleteRecords;

impl Api for DeleteRecords {
    type Request = kafka_protocol::messages::DeleteRecordsRequest;
    type Response = kafka_protocol::messages::DeleteRecordsResponse;
    const KEY: ApiKey = ApiKey::DeleteRecords;
    const VERSIONS: (i16, i16) = (0, 2);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(delete_records(call, request))
    }
}

/// DescribeCluster versions 0 to 2.
pub(crate) struct DescribeCluster;

impl Api for DescribeCluster {
    type Request = kafka_protocol::messages::DescribeClusterRequest;
    type Response = kafka_protocol::messages::DescribeClusterResponse;
    const KEY: ApiKey = ApiKey::DescribeCluster;
    const VERSIONS: (i16, i16) = (0, 2);

    async fn handle(call: &Call<'_>, _request: Self::Request) -> Option<Self::Response> {
        Some(describe_cluster(call))
    }
}
