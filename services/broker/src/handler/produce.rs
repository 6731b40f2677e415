//! Produce: append each partition's batches to its log; every partition answers for itself.

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;

use skein_log::LogError;

use super::partition_error_code;
use crate::quota::Metered;
use crate::replica::PartitionError;
use crate::router::{Api, Call};
use crate::Broker;

pub(crate) fn handle(broker: &Broker, request: ProduceRequest, version: i16) -> ProduceResponse {
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let name = topic.name.0.as_str().to_owned();
        // Kafka: "Cannot append to internal topic". Only the coordinators write there.
        let internal = crate::topics::is_internal(&name);
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let answer = PartitionProduceResponse::default()
                .with_index(data.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            if internal {
                partitions
                    .push(answer.with_error_code(ResponseError::InvalidTopicException.code()));
                continue;
            }
            let written = broker
                .replicas
                .partition(&name, data.index)
                .and_then(|partition| {
                    let records = data
                        .records
                        .as_deref()
                        .ok_or(PartitionError::Log(LogError::EmptyAppend))?;
                    partition.append(records, request.acks)
                });
            let answer = match written {
                Ok(appended) => {
                    let answer = answer
                        .with_base_offset(appended.base_offset)
                        .with_log_append_time_ms(appended.log_append_time.unwrap_or(-1));
                    if version >= 5 {
                        answer.with_log_start_offset(appended.log_start_offset)
                    } else {
                        answer
                    }
                }
                Err(e) => {
                    let code = partition_error_code(&e);
                    tracing::debug!(topic = %name, partition = data.index, code, error = %e, "produce refused");
                    answer.with_error_code(code)
                }
            };
            partitions.push(answer);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partitions),
        );
    }
    ProduceResponse::default().with_responses(responses)
}

/// Produce versions 3 (the first with RecordBatch v2) to 12, metered by request bytes.
pub(crate) struct Produce;

impl Api for Produce {
    type Request = ProduceRequest;
    type Response = ProduceResponse;
    const KEY: ApiKey = ApiKey::Produce;
    const VERSIONS: (i16, i16) = (3, 12);
    const METERED: Option<Metered> = Some(Metered::ProduceBytes);

    async fn handle(call: &Call<'_>, request: ProduceRequest) -> Option<ProduceResponse> {
        let acks = request.acks;
        let response = handle(call.broker, request, call.version);
        (acks != 0).then_some(response)
    }

    /// Written, then charged: what was sent counts, answered or not.
    fn charged(request_bytes: usize, _response: Option<&ProduceResponse>) -> u64 {
        request_bytes as u64
    }

    fn throttled(response: &mut ProduceResponse, ms: i32) {
        response.throttle_time_ms = ms;
    }
}
