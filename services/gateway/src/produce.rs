//! Writing records for REST and gRPC alike: each record's partition is chosen here (its
//! explicit partition, else Kafka's murmur2 of its key, else one partition picked for the
//! whole call, as Kafka's sticky partitioner does), each partition's records go in one batch
//! with acks=all, and every record gets its own outcome: its offset, or why it failed.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use skein_client::{partition_for_key, ProduceRecord};

use skein_auth::Operation;

use crate::brokers::TenantClient;
use crate::call::Call;
use crate::error::GatewayError;
use crate::quota::Metered;
use crate::Gateway;

/// Where a record was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Written {
    pub partition: i32,
    pub offset: i64,
    /// The record's timestamp: its own, or the broker's append time on LogAppendTime topics.
    pub timestamp: i64,
}

/// The topic's `max.message.bytes`, or Kafka's default.
fn max_message_bytes(summary: &crate::cluster::TopicSummary) -> usize {
    summary
        .configs
        .get("max.message.bytes")
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_MAX_MESSAGE_BYTES)
}

/// What a produce call did.
#[derive(Debug)]
pub struct Produced {
    /// One outcome per record, in order.
    pub outcomes: Vec<Result<Written, GatewayError>>,
    /// Whether this is the recorded outcome of an earlier attempt with the same
    /// idempotency key (nothing was written now).
    pub replayed: bool,
}

/// Checks WRITE and the produce quota, then writes: once per `idempotency_key` when there
/// is one (see [`crate::idempotency`]).
pub async fn produce(
    gateway: &Gateway,
    call: &Call,
    topic: &str,
    records: Vec<Result<ProduceRecord, GatewayError>>,
    idempotency_key: Option<&str>,
) -> Result<Produced, GatewayError> {
    let summary = call.topic_known(gateway, topic, Operation::Write).await?;
    let bytes: usize = records.iter().flatten().map(record_size).sum();
    gateway.quotas.take(
        &call.view,
        &call.caller,
        Metered::ProduceBytes,
        bytes as u64,
    )?;
    let tenant = call.client(gateway).await?;
    match idempotency_key {
        None => Ok(Produced {
            outcomes: write(
                &tenant,
                topic,
                summary.partitions,
                max_message_bytes(&summary),
                records,
                Mode::Plain,
            )
            .await,
            replayed: false,
        }),
        Some(key) => {
            crate::idempotency::produce_once(
                gateway,
                call,
                &tenant,
                topic,
                (summary.partitions, max_message_bytes(&summary)),
                records,
                key,
            )
            .await
        }
    }
}

/// The size a record adds to a request, for quotas and limits.
pub fn record_size(record: &ProduceRecord) -> usize {
    record.key.as_ref().map_or(0, |k| k.len())
        + record.value.as_ref().map_or(0, |v| v.len())
        + record
            .headers
            .iter()
            .map(|h| h.key.len() + h.value.as_ref().map_or(0, |v| v.len()))
            .sum::<usize>()
}

/// Kafka's default `max.message.bytes`: the largest batch a broker takes.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1024 * 1024 + 12;

/// What a batch may hold, in [`record_size`] terms: the broker's limit less the batch
/// header and a margin for the per-record framing estimated in [`chunks`].
fn batch_limit(max_message_bytes: usize) -> usize {
    max_message_bytes.saturating_sub(61 + 1024).max(1)
}

/// Splits a partition's records into runs whose estimated batch size stays within `limit`
/// (a record larger than that goes alone, and the broker refuses it).
fn chunks<T>(records: Vec<(T, ProduceRecord)>, limit: usize) -> Vec<Vec<(T, ProduceRecord)>> {
    let mut chunks = Vec::new();
    let mut current = Vec::new();
    let mut size = 0;
    for (tag, record) in records {
        // Per record: length, attributes, deltas and lengths as varints, and per header its
        // lengths.
        let estimate = record_size(&record) + 24 + 8 * record.headers.len();
        if !current.is_empty() && size + estimate > limit {
            chunks.push(std::mem::take(&mut current));
            size = 0;
        }
        size += estimate;
        current.push((tag, record));
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A plain write: a retry of the request writes again.
    Plain,
    /// Every attempt of one request writes the same batches as one idempotent producer, so
    /// the brokers keep only the first; unkeyed records go to the partition `seed` picks, and
    /// records without a timestamp get `timestamp`.
    Once {
        producer_id: i64,
        seed: u64,
        timestamp: i64,
    },
}

/// Writes `records` (those already refused keep their refusal) to `topic`, which has
/// `partitions` partitions; answers one outcome per record, in order.
pub async fn write(
    tenant: &TenantClient,
    topic: &str,
    partitions: i32,
    max_message_bytes: usize,
    records: Vec<Result<ProduceRecord, GatewayError>>,
    mode: Mode,
) -> Vec<Result<Written, GatewayError>> {
    let seed = match mode {
        Mode::Plain => u64::from(rand::random::<u32>()),
        Mode::Once { seed, .. } => seed,
    };
    let sticky = (seed % u64::from(partitions.max(1).unsigned_abs())) as i32;
    let now = match mode {
        Mode::Plain => now_ms(),
        Mode::Once { timestamp, .. } => timestamp,
    };
    // While traces are exported, each record carries the request's trace context to the
    // broker and to whoever consumes it (unless the client set its own).
    let traceparent = skein_ops::telemetry::traceparent_of(&tracing::Span::current());
    let mut outcomes: Vec<Option<Result<Written, GatewayError>>> = Vec::new();
    let mut by_partition: BTreeMap<i32, Vec<(usize, ProduceRecord)>> = BTreeMap::new();
    for (index, record) in records.into_iter().enumerate() {
        outcomes.push(None);
        let mut record = match record {
            Ok(record) => record,
            Err(e) => {
                outcomes[index] = Some(Err(e));
                continue;
            }
        };
        let partition = match (record.partition, record.key.as_deref()) {
            (Some(p), _) => p,
            (None, Some(key)) if partitions > 0 => partition_for_key(key, partitions),
            (None, _) => sticky,
        };
        if partition < 0 {
            outcomes[index] = Some(Err(GatewayError::Invalid(format!(
                "partition {partition} is negative"
            ))));
            continue;
        }
        if partition >= partitions {
            outcomes[index] = Some(Err(GatewayError::NotFound(format!(
                "{topic} has no partition {partition} (it has {partitions})"
            ))));
            continue;
        }
        record.partition = Some(partition);
        record.timestamp.get_or_insert(now);
        if let Some(traceparent) = &traceparent {
            if !record
                .headers
                .iter()
                .any(|h| h.key == skein_ops::telemetry::TRACEPARENT)
            {
                record.headers.push(skein_client::RecordHeader {
                    key: skein_ops::telemetry::TRACEPARENT.to_owned(),
                    value: Some(bytes::Bytes::from(traceparent.clone().into_bytes())),
                });
            }
        }
        by_partition
            .entry(partition)
            .or_default()
            .push((index, record));
    }
    let limit = batch_limit(max_message_bytes);
    let sends = by_partition
        .into_iter()
        .map(|(partition, records)| async move {
            // Batches up to the broker's limit, sent one after another so the partition
            // keeps the records' order; once one fails, the rest are not sent.
            let mut outcomes = Vec::with_capacity(records.len());
            let mut sequence = 0_i32;
            let mut failure: Option<GatewayError> = None;
            for chunk in chunks(records, limit) {
                let (indexes, records): (Vec<usize>, Vec<ProduceRecord>) =
                    chunk.into_iter().unzip();
                if let Some(error) = &failure {
                    outcomes.extend(indexes.into_iter().map(|i| (i, Err(error.clone()))));
                    continue;
                }
                let timestamps: Vec<i64> =
                    records.iter().map(|r| r.timestamp.unwrap_or(now)).collect();
                let count = i32::try_from(records.len()).unwrap_or(i32::MAX);
                let outcome = match mode {
                    Mode::Plain => tenant.producer.send(topic, records).await,
                    Mode::Once { producer_id, .. } => {
                        tenant
                            .producer
                            .send_once(topic, records, producer_id, 0, sequence)
                            .await
                    }
                };
                sequence = sequence.saturating_add(count);
                match outcome {
                    Ok(batches) => {
                        let batch = batches.into_iter().find(|b| b.partition == partition);
                        let base = batch.as_ref().and_then(|b| b.base_offset);
                        let append_time = batch.as_ref().and_then(|b| b.log_append_time);
                        for (i, (index, timestamp)) in
                            indexes.into_iter().zip(timestamps).enumerate()
                        {
                            outcomes.push((
                                index,
                                match base {
                                    Some(base) => Ok(Written {
                                        partition,
                                        offset: base + i as i64,
                                        timestamp: append_time
                                            .filter(|t| *t >= 0)
                                            .unwrap_or(timestamp),
                                    }),
                                    None => Err(GatewayError::Internal(
                                        "the broker did not say where the records went".to_owned(),
                                    )),
                                },
                            ));
                        }
                    }
                    Err(e) => {
                        let error = GatewayError::from(e);
                        outcomes.extend(indexes.into_iter().map(|i| (i, Err(error.clone()))));
                        failure = Some(error);
                    }
                }
            }
            outcomes
        });
    for partition_outcomes in futures::future::join_all(sends).await {
        for (index, outcome) in partition_outcomes {
            outcomes[index] = Some(outcome);
        }
    }
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err(GatewayError::Internal("record not written".to_owned()))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_split_into_batches_within_the_limit_in_order() {
        let records: Vec<(usize, ProduceRecord)> = (0..10)
            .map(|i| (i, ProduceRecord::new(vec![0u8; 1000])))
            .collect();
        let split = chunks(records, 3_100);
        assert_eq!(split.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 3, 1]);
        let order: Vec<usize> = split.iter().flatten().map(|(i, _)| *i).collect();
        assert_eq!(order, (0..10).collect::<Vec<_>>());
        // A record over the limit goes alone.
        let big = vec![
            (0, ProduceRecord::new(vec![0u8; 5000])),
            (1, ProduceRecord::new("x")),
        ];
        assert_eq!(chunks(big, 3_100).len(), 2);
    }
}
