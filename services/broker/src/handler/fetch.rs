//! Fetch: whole batches from each partition's log, waiting up to `max_wait_ms` for
//! `min_bytes`, woken by appends.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::log_error_code;
use crate::Broker;

pub(crate) async fn handle(broker: &Broker, request: FetchRequest, version: i16) -> FetchResponse {
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    loop {
        // Register for the wake-up before reading, so an append in between is not missed.
        let appended = broker.appended.notified();
        let (response, bytes) = read_once(broker, &request, version);
        if bytes >= request.min_bytes.max(0) as u64 || Instant::now() >= deadline {
            return response;
        }
        if tokio::time::timeout_at(deadline, appended).await.is_err() {
            return read_once(broker, &request, version).0;
        }
    }
}

fn read_once(broker: &Broker, request: &FetchRequest, version: i16) -> (FetchResponse, u64) {
    let mut budget = request.max_bytes.max(0) as u64;
    let mut total = 0u64;
    let mut first = true;
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.topic.0.as_str();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let answer = PartitionData::default()
                        .with_partition_index(p.partition)
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1);
                    let Some(log) = broker.partition_log(name, p.partition) else {
                        return answer.with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    };
                    let log = log.read();
                    let end = log.log_end_offset() as i64;
                    let mut answer = answer.with_high_watermark(end).with_last_stable_offset(end);
                    if version >= 5 {
                        answer = answer.with_log_start_offset(log.log_start_offset() as i64);
                    }
                    if p.fetch_offset < 0 {
                        return answer.with_error_code(ResponseError::OffsetOutOfRange.code());
                    }
                    let limit = (p.partition_max_bytes.max(0) as u64).min(budget);
                    if limit == 0 && !first {
                        return answer;
                    }
                    match log.read(p.fetch_offset as u64, limit, None) {
                        Ok(slice) => {
                            let Some(region) = slice.region else { return answer };
                            // The first partition may exceed the budget by one batch, as in Kafka,
                            // so a large batch never blocks a consumer; others must fit.
                            if !first && region.len() > limit {
                                return answer;
                            }
                            match region.read_to_vec() {
                                Ok(bytes) => {
                                    first = false;
                                    budget = budget.saturating_sub(bytes.len() as u64);
                                    total += bytes.len() as u64;
                                    answer.with_records(Some(Bytes::from(bytes)))
                                }
                                Err(e) => {
                                    tracing::warn!(topic = %name, partition = p.partition, error = %e, "fetch read failed");
                                    answer.with_error_code(ResponseError::KafkaStorageError.code())
                                }
                            }
                        }
                        Err(e) => answer.with_error_code(log_error_code(&e)),
                    }
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    (FetchResponse::default().with_responses(topics), total)
}
