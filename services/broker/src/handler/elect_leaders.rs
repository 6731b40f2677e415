//! ElectLeaders: preferred-leader elections (leadership back to each partition's first
//! replica where it is live and in sync) and unclean ones (a leader for a partition without
//! a live one, out of sync if need be), decided by the controller. A broker on its own
//! leads every partition already: each partition named is ELECTION_NOT_NEEDED.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_proto::controller::election_result::Outcome;

use super::controller_error;
use crate::router::{Api, Call};
use crate::Broker;

/// ElectLeaders' election type of an unclean election (0 is preferred).
const UNCLEAN: i8 = 1;

fn answer_code(outcome: Outcome) -> ResponseError {
    match outcome {
        Outcome::Elected | Outcome::Unspecified => ResponseError::UnknownServerError,
        Outcome::ElectionNotNeeded => ResponseError::ElectionNotNeeded,
        Outcome::PreferredLeaderNotAvailable => ResponseError::PreferredLeaderNotAvailable,
        Outcome::EligibleLeadersNotAvailable => ResponseError::EligibleLeadersNotAvailable,
        Outcome::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
    }
}

pub(crate) async fn elect_leaders(
    broker: &Broker,
    tenant: &str,
    access: &crate::authz::Access<'_>,
    request: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    // ALTER on the cluster; every partition asked for is refused without it.
    let allowed = access.cluster(skein_auth::Operation::Alter);
    let unclean = version >= 1 && request.election_type == UNCLEAN;
    let asked: Vec<(String, Vec<i32>)> = request
        .topic_partitions
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.topic.0.as_str().to_owned(), t.partitions))
        .collect();
    // (topic, partition, error code)
    let results: Vec<(String, i32, i16)> = match &broker.controller {
        _ if !allowed => asked
            .into_iter()
            .flat_map(|(topic, partitions)| {
                partitions.into_iter().map(move |p| {
                    (
                        topic.clone(),
                        p,
                        ResponseError::ClusterAuthorizationFailed.code(),
                    )
                })
            })
            .collect(),
        None => asked
            .into_iter()
            .flat_map(|(topic, partitions)| {
                let known = broker.topics.get(&topic).map_or(0, |t| t.partitions);
                partitions.into_iter().map(move |p| {
                    let code = if (0..known).contains(&p) {
                        ResponseError::ElectionNotNeeded.code()
                    } else {
                        ResponseError::UnknownTopicOrPartition.code()
                    };
                    (topic.clone(), p, code)
                })
            })
            .collect(),
        Some(link) => match link.elect_leaders(tenant, unclean, asked).await {
            Ok(results) => results
                .into_iter()
                .map(|r| {
                    let outcome = Outcome::try_from(r.outcome).unwrap_or(Outcome::Unspecified);
                    let code = match outcome {
                        Outcome::Elected => 0,
                        outcome => answer_code(outcome).code(),
                    };
                    (r.topic, r.partition, code)
                })
                .collect(),
            Err(e) => {
                tracing::debug!(error = %e, "the controller did not run the elections");
                let response =
                    ElectLeadersResponse::default().with_error_code(controller_error(&e).code());
                return response;
            }
        },
    };
    let mut by_topic: Vec<ReplicaElectionResult> = Vec::new();
    for (topic, partition, code) in results {
        let result = PartitionResult::default()
            .with_partition_id(partition)
            .with_error_code(code)
            .with_error_message(
                ResponseError::try_from_code(code).map(|e| StrBytes::from_string(e.to_string())),
            );
        match by_topic.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(t) => t.partition_result.push(result),
            None => by_topic.push(
                ReplicaElectionResult::default()
                    .with_topic(TopicName(StrBytes::from_string(topic)))
                    .with_partition_result(vec![result]),
            ),
        }
    }
    let response = ElectLeadersResponse::default().with_replica_election_results(by_topic);
    if !allowed && version >= 1 {
        response.with_error_code(ResponseError::ClusterAuthorizationFailed.code())
    } else {
        response
    }
}

/// ElectLeaders versions 0 to 2.
pub(crate) struct ElectLeaders;

impl Api for ElectLeaders {
    type Request = ElectLeadersRequest;
    type Response = ElectLeadersResponse;
    const KEY: ApiKey = ApiKey::ElectLeaders;
    const VERSIONS: (i16, i16) = (0, 2);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        let tenant = call.tenant_name().unwrap_or_default();
        Some(elect_leaders(call.broker, tenant, &call.access(), request, call.version).await)
    }
}
