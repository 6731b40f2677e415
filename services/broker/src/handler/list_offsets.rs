//! ListOffsets: earliest (-2), latest (-1), the record with the largest timestamp (-3, v7+),
//! the earliest local offset (-4, v8+: the log start, since every segment is local), the
//! latest tiered offset (-5, v9+: none, -1) or the first offset at or after a timestamp.
//! The v10 timeout is moot: a single broker answers at once.

use kafka_protocol::messages::ApiKey;

use crate::router::{Api, Call};

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use kafka_protocol::ResponseError;
use skein_auth::Operation;

use super::partition_error_code;
use crate::replica::OffsetSpec;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
/// v9+: the newest offset in tiered storage; nothing is tiered, so there is none.
const LATEST_TIERED: i64 = -5;

pub(crate) fn handle(call: &Call<'_>, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let (broker, access, version) = (call.broker, call.access(), call.version);
    // Leader epochs travel from v4 on; earlier versions must leave the field at its default.
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.as_str().to_owned();
            let described = access.topic(Operation::Describe, &name);
            let kept = call.scope.qualify(&name);
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let answer = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1);
                    if !described {
                        return answer
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let current_epoch = if version >= 4 {
                        p.current_leader_epoch
                    } else {
                        -1
                    };
                    let found = broker
                        .replicas
                        .leader(&kept, p.partition_index, current_epoch);
                    let partition = match found {
                        Ok(partition) => partition,
                        Err(e) => return answer.with_error_code(partition_error_code(&e)),
                    };
                    let spec = match p.timestamp {
                        LATEST if request.isolation_level == 1 => OffsetSpec::LastStable,
                        LATEST => OffsetSpec::Latest,
                        EARLIEST | EARLIEST_LOCAL => OffsetSpec::Earliest,
                        LATEST_TIERED => return answer,
                        MAX_TIMESTAMP => OffsetSpec::MaxTimestamp,
                        ts => OffsetSpec::Timestamp(ts),
                    };
                    match partition.offset(spec) {
                        Ok(Some((offset, timestamp))) => answer
                            .with_offset(offset)
                            .with_timestamp(timestamp)
                            .with_leader_epoch(if version >= 4 {
                                partition.leader_epoch()
                            } else {
                                -1
                            }),
                        Ok(None) => answer,
                        Err(e) => answer.with_error_code(partition_error_code(&e)),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// ListOffsets versions 1 to 10.
pub(crate) struct ListOffsets;

impl Api for ListOffsets {
    type Request = kafka_protocol::messages::ListOffsetsRequest;
    type Response = kafka_protocol::messages::ListOffsetsResponse;
    const KEY: ApiKey = ApiKey::ListOffsets;
    const VERSIONS: (i16, i16) = (1, 10);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(handle(call, request))
    }
}
