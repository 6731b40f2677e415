//! Produce: append each partition's batches to its log; every partition answers for itself.

use bytes::BytesMut;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;

use super::log_error_code;
use crate::Broker;

pub(crate) fn handle(broker: &Broker, request: ProduceRequest, version: i16) -> ProduceResponse {
    let mut responses = Vec::with_capacity(request.topic_data.len());
    let mut appended = false;
    for topic in request.topic_data {
        let name = topic.name.0.as_str().to_owned();
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let mut answer = PartitionProduceResponse::default()
                .with_index(data.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            let Some(log) = broker.partition_log(&name, data.index) else {
                partitions
                    .push(answer.with_error_code(ResponseError::UnknownTopicOrPartition.code()));
                continue;
            };
            let Some(records) = data.records else {
                partitions.push(answer.with_error_code(ResponseError::InvalidRecord.code()));
                continue;
            };
            // The log rewrites offsets in place: one copy out of the request buffer.
            let mut batches = BytesMut::from(&records[..]);
            let mut log = log.write();
            match log.append(&mut batches, 0) {
                Ok(info) => {
                    appended = true;
                    answer = answer
                        .with_base_offset(info.first_offset as i64)
                        .with_log_append_time_ms(info.log_append_time.unwrap_or(-1));
                    if version >= 5 {
                        answer = answer.with_log_start_offset(log.log_start_offset() as i64);
                    }
                }
                Err(e) => {
                    tracing::debug!(topic = %name, partition = data.index, error = %e, "produce refused");
                    answer = answer.with_error_code(log_error_code(&e));
                }
            }
            partitions.push(answer);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partitions),
        );
    }
    if appended {
        broker.appended.notify_waiters();
    }
    ProduceResponse::default().with_responses(responses)
}
