//! OffsetForLeaderEpoch (KIP-101, KIP-279): where a leader epoch ends in the leader's log.
//! A follower asks before it follows, and truncates its log to the answer, so a tail written
//! in an epoch the leader does not share is removed; consumers ask to detect truncation
//! (KIP-320).

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use kafka_protocol::ResponseError;
use skein_auth::Operation;

use super::partition_error_code;
use crate::router::{Api, Call};

/// Kafka's answer for an epoch the log has no record of: -1 and -1.
const UNDEFINED: (i32, i64) = (-1, -1);

pub(crate) fn handle(
    call: &Call<'_>,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let (broker, access, scope) = (call.broker, call.access(), &call.scope);
    let replica = request.replica_id.0;
    // A consumer needs DESCRIBE on the topic; a follower must be another broker.
    let replica_allowed = replica < 0 || call.is_follower(replica);
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.topic.0.as_str().to_owned();
            let kept = scope.qualify(&name);
            let denied = if !replica_allowed {
                Some(ResponseError::ClusterAuthorizationFailed)
            } else if !access.topic(Operation::Describe, &name) {
                Some(ResponseError::TopicAuthorizationFailed)
            } else {
                None
            };
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let answer = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    if let Some(denied) = denied {
                        return answer.with_error_code(denied.code());
                    }
                    // Other brokers (a replica id) reconcile the internal topics too.
                    let found = if replica >= 0 {
                        broker
                            .replicas
                            .leader_of_any(&kept, p.partition, p.current_leader_epoch)
                    } else {
                        broker
                            .replicas
                            .leader(&kept, p.partition, p.current_leader_epoch)
                    };
                    match found {
                        Ok(partition) => {
                            let (epoch, end) = partition
                                .end_offset_for_epoch(p.leader_epoch)
                                .unwrap_or(UNDEFINED);
                            answer.with_leader_epoch(epoch).with_end_offset(end)
                        }
                        Err(e) => answer.with_error_code(partition_error_code(&e)),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

/// OffsetForLeaderEpoch versions 2 (the first with the current leader epoch) to 4.
pub(crate) struct OffsetForLeaderEpoch;

impl Api for OffsetForLeaderEpoch {
    type Request = OffsetForLeaderEpochRequest;
    type Response = OffsetForLeaderEpochResponse;
    const KEY: ApiKey = ApiKey::OffsetForLeaderEpoch;
    const VERSIONS: (i16, i16) = (2, 4);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(handle(call, request))
    }
}
