//! Produce: append each partition's batches to its log; every partition answers for itself.

use bytes::BytesMut;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;

use skein_log::batch::BatchHeader;
use skein_log::{Log, TopicPartition};

use super::log_error_code;
use crate::producer::Verdict;
use crate::Broker;

pub(crate) fn handle(broker: &Broker, request: ProduceRequest, version: i16) -> ProduceResponse {
    let mut responses = Vec::with_capacity(request.topic_data.len());
    let mut appended = false;
    for topic in request.topic_data {
        let name = topic.name.0.as_str().to_owned();
        // Kafka: "Cannot append to internal topic". Only the coordinators write there.
        let internal = crate::topics::is_internal(&name);
        // One replica: acks=all cannot be met when the topic asks for more in sync.
        let too_few_replicas = request.acks == -1
            && broker
                .topics
                .get(&name)
                .is_some_and(|info| broker.min_insync_replicas(&info) > 1);
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let mut answer = PartitionProduceResponse::default()
                .with_index(data.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            if internal {
                partitions
                    .push(answer.with_error_code(ResponseError::InvalidTopicException.code()));
                continue;
            }
            let Some(log) = broker.partition_log(&name, data.index) else {
                partitions
                    .push(answer.with_error_code(ResponseError::UnknownTopicOrPartition.code()));
                continue;
            };
            if too_few_replicas {
                partitions.push(answer.with_error_code(ResponseError::NotEnoughReplicas.code()));
                continue;
            }
            let Some(records) = data.records else {
                partitions.push(answer.with_error_code(ResponseError::InvalidRecord.code()));
                continue;
            };
            let tp = TopicPartition::new(&name, data.index);
            let mut log = log.write();
            match append(broker, &tp, &mut log, &records) {
                Ok((base_offset, append_time)) => {
                    appended = true;
                    answer = answer
                        .with_base_offset(base_offset)
                        .with_log_append_time_ms(append_time.unwrap_or(-1));
                    if version >= 5 {
                        answer = answer.with_log_start_offset(log.log_start_offset() as i64);
                    }
                }
                Err(code) => {
                    tracing::debug!(topic = %name, partition = data.index, code, "produce refused");
                    answer = answer.with_error_code(code);
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

/// Appends a partition's records: in one write when no batch comes from an idempotent
/// producer, else batch by batch through the producer's sequence check. Returns the base
/// offset of the first batch (the original one for a duplicate) and the append time.
fn append(
    broker: &Broker,
    tp: &TopicPartition,
    log: &mut Log,
    records: &[u8],
) -> Result<(i64, Option<i64>), i16> {
    let mut batches = Vec::new();
    let mut at = 0usize;
    while at < records.len() {
        match BatchHeader::parse(&records[at..]) {
            Ok(h) if at + h.size() <= records.len() => {
                batches.push((at, h));
                at += h.size();
            }
            // Malformed: let the log refuse it with the precise reason.
            _ => {
                batches.clear();
                break;
            }
        }
    }
    if !batches.iter().any(|(_, h)| h.producer_id >= 0) {
        // The log rewrites offsets in place: one copy out of the request buffer.
        let mut bytes = BytesMut::from(records);
        let info = log.append(&mut bytes, 0).map_err(|e| log_error_code(&e))?;
        return Ok((info.first_offset as i64, info.log_append_time));
    }
    let state = broker.producers.partition(tp);
    let mut state = state.lock();
    state.load(log).map_err(|e| log_error_code(&e))?;
    let mut first = None;
    let mut append_time = None;
    for (at, header) in batches {
        match state.check(&header) {
            Verdict::Append => {
                let mut bytes = BytesMut::from(&records[at..at + header.size()]);
                let info = log.append(&mut bytes, 0).map_err(|e| log_error_code(&e))?;
                state.record(&header, info.first_offset as i64);
                first.get_or_insert(info.first_offset as i64);
                append_time = append_time.or(info.log_append_time);
            }
            Verdict::Duplicate { base_offset } => {
                first.get_or_insert(base_offset);
            }
            Verdict::Reject(error) => return Err(error.code()),
        }
    }
    Ok((first.unwrap_or(-1), append_time))
}
