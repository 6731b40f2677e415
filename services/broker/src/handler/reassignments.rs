//! AlterPartitionReassignments and ListPartitionReassignments (KIP-455): a partition moves to
//! new replicas, which copy the leader's log by replication; the controller drops the old
//! ones once every new one is in the ISR. Decided by the controller; a broker on its own has
//! nowhere to move a partition to.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_proto::controller::reassignment_result::Outcome;

use super::controller_error;
use crate::router::{Api, Call};
use crate::Broker;

/// The most partitions one request may name: a request is bounded by its frame already,
/// and this keeps one controller call from holding its transactions for long.
pub(crate) const MAX_REASSIGNMENTS: usize = 10_000;

fn message(text: String) -> Option<StrBytes> {
    (!text.is_empty()).then(|| StrBytes::from_string(text))
}

fn refused(code: ResponseError, text: &str) -> AlterPartitionReassignmentsResponse {
    AlterPartitionReassignmentsResponse::default()
        .with_error_code(code.code())
        .with_error_message(Some(StrBytes::from_string(text.to_owned())))
}

pub(crate) async fn alter(
    broker: &Broker,
    tenant: &str,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let asked: Vec<(String, i32, Option<Vec<i32>>)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.0.as_str().to_owned(),
                    p.partition_index,
                    p.replicas
                        .as_ref()
                        .map(|r| r.iter().map(|id| id.0).collect()),
                )
            })
        })
        .collect();
    if asked.len() > MAX_REASSIGNMENTS {
        return refused(
            ResponseError::InvalidRequest,
            &format!("at most {MAX_REASSIGNMENTS} partitions per request"),
        );
    }
    let Some(link) = &broker.controller else {
        return refused(
            ResponseError::InvalidReplicaAssignment,
            "this broker is on its own: its partitions have nowhere to move",
        );
    };
    let results = match link.alter_reassignments(tenant, asked).await {
        Ok(results) => results,
        Err(e) => {
            tracing::debug!(error = %e, "the controller did not reassign");
            return refused(controller_error(&e), &e.to_string());
        }
    };
    let mut by_topic: Vec<ReassignableTopicResponse> = Vec::new();
    for r in results {
        let outcome = Outcome::try_from(r.outcome).unwrap_or(Outcome::Unspecified);
        let code = match outcome {
            Outcome::Accepted => 0,
            Outcome::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition.code(),
            Outcome::NoReassignmentInProgress => ResponseError::NoReassignmentInProgress.code(),
            Outcome::InvalidReplicaAssignment => ResponseError::InvalidReplicaAssignment.code(),
            Outcome::Unspecified => ResponseError::UnknownServerError.code(),
        };
        let answer = ReassignablePartitionResponse::default()
            .with_partition_index(r.partition)
            .with_error_code(code)
            .with_error_message(message(r.message));
        match by_topic.iter_mut().find(|t| t.name.0.as_str() == r.topic) {
            Some(t) => t.partitions.push(answer),
            None => by_topic.push(
                ReassignableTopicResponse::default()
                    .with_name(TopicName(StrBytes::from_string(r.topic)))
                    .with_partitions(vec![answer]),
            ),
        }
    }
    AlterPartitionReassignmentsResponse::default().with_responses(by_topic)
}

pub(crate) async fn list(
    broker: &Broker,
    tenant: &str,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let Some(link) = &broker.controller else {
        // Nothing ever moves on a broker on its own.
        return ListPartitionReassignmentsResponse::default();
    };
    let asked: Vec<(String, Vec<i32>)> = request
        .topics
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.name.0.as_str().to_owned(), t.partition_indexes))
        .collect();
    let ongoing = match link.list_reassignments(tenant, asked).await {
        Ok(ongoing) => ongoing,
        Err(e) => {
            tracing::debug!(error = %e, "the controller did not list reassignments");
            return ListPartitionReassignmentsResponse::default()
                .with_error_code(controller_error(&e).code())
                .with_error_message(Some(StrBytes::from_string(e.to_string())));
        }
    };
    let ids = |ids: Vec<i32>| ids.into_iter().map(BrokerId).collect::<Vec<_>>();
    let mut topics: Vec<OngoingTopicReassignment> = Vec::new();
    for r in ongoing {
        let partition = OngoingPartitionReassignment::default()
            .with_partition_index(r.partition)
            .with_replicas(ids(r.replicas))
            .with_adding_replicas(ids(r.adding))
            .with_removing_replicas(ids(r.removing));
        match topics.iter_mut().find(|t| t.name.0.as_str() == r.topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                OngoingTopicReassignment::default()
                    .with_name(TopicName(StrBytes::from_string(r.topic)))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}

/// AlterPartitionReassignments version 0.
pub(crate) struct AlterPartitionReassignments;

impl Api for AlterPartitionReassignments {
    type Request = AlterPartitionReassignmentsRequest;
    type Response = AlterPartitionReassignmentsResponse;
    const KEY: ApiKey = ApiKey::AlterPartitionReassignments;
    const VERSIONS: (i16, i16) = (0, 0);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        if !call.access().cluster(skein_auth::Operation::Alter) {
            return Some(
                kafka_protocol::messages::AlterPartitionReassignmentsResponse::default()
                    .with_error_code(
                        kafka_protocol::ResponseError::ClusterAuthorizationFailed.code(),
                    )
                    .with_error_message(Some(kafka_protocol::protocol::StrBytes::from_static_str(
                        "ALTER on the cluster is needed",
                    ))),
            );
        }
        Some(alter(call.broker, call.tenant_name().unwrap_or_default(), request).await)
    }
}

/// ListPartitionReassignments version 0.
pub(crate) struct ListPartitionReassignments;

impl Api for ListPartitionReassignments {
    type Request = ListPartitionReassignmentsRequest;
    type Response = ListPartitionReassignmentsResponse;
    const KEY: ApiKey = ApiKey::ListPartitionReassignments;
    const VERSIONS: (i16, i16) = (0, 0);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        if !call.access().cluster(skein_auth::Operation::Describe) {
            return Some(
                kafka_protocol::messages::ListPartitionReassignmentsResponse::default()
                    .with_error_code(
                        kafka_protocol::ResponseError::ClusterAuthorizationFailed.code(),
                    ),
            );
        }
        Some(list(call.broker, call.tenant_name().unwrap_or_default(), request).await)
    }
}
