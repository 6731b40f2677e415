//! Writing records for REST and gRPC alike: each record's partition is chosen here (its
//! explicit partition, else Kafka's murmur2 of its key, else one partition picked for the
//! whole call, as Kafka's sticky partitioner does), each partition's records go in one batch
//! with acks=all, and every record gets its own outcome: its offset, or why it failed.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use skein_client::{partition_for_key, ProduceRecord};

use crate::brokers::TenantClient;
use crate::error::GatewayError;

/// Where a record was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub partition: i32,
    pub offset: i64,
    /// The record's timestamp: its own, or the broker's append time on LogAppendTime topics.
    pub timestamp: i64,
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

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Writes `records` (those already refused keep their refusal) to `topic`, which has
/// `partitions` partitions; answers one outcome per record, in order.
pub async fn write(
    tenant: &TenantClient,
    topic: &str,
    partitions: i32,
    records: Vec<Result<ProduceRecord, GatewayError>>,
) -> Vec<Result<Written, GatewayError>> {
    let sticky = (rand::random::<u32>() % partitions.max(1).unsigned_abs()) as i32;
    let now = now_ms();
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
        by_partition
            .entry(partition)
            .or_default()
            .push((index, record));
    }
    let sends = by_partition
        .into_iter()
        .map(|(partition, records)| async move {
            let (indexes, records): (Vec<usize>, Vec<ProduceRecord>) = records.into_iter().unzip();
            let timestamps: Vec<i64> = records.iter().map(|r| r.timestamp.unwrap_or(now)).collect();
            let outcome = tenant.producer.send(topic, records).await;
            (partition, indexes, timestamps, outcome)
        });
    for (partition, indexes, timestamps, outcome) in futures::future::join_all(sends).await {
        match outcome {
            Ok(batches) => {
                let batch = batches.into_iter().find(|b| b.partition == partition);
                let base = batch.as_ref().and_then(|b| b.base_offset);
                let append_time = batch.as_ref().and_then(|b| b.log_append_time);
                for (i, (index, timestamp)) in indexes.into_iter().zip(timestamps).enumerate() {
                    outcomes[index] = Some(match base {
                        Some(base) => Ok(Written {
                            partition,
                            offset: base + i as i64,
                            timestamp: append_time.filter(|t| *t >= 0).unwrap_or(timestamp),
                        }),
                        None => Err(GatewayError::Internal(
                            "the broker did not say where the records went".to_owned(),
                        )),
                    });
                }
            }
            Err(e) => {
                let error = GatewayError::from(e);
                for index in indexes {
                    outcomes[index] = Some(Err(error.clone()));
                }
            }
        }
    }
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err(GatewayError::Internal("record not written".to_owned()))))
        .collect()
}
