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
    let summary = call.topic(topic, Operation::Write)?;
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
            outcomes: write(&tenant, topic, summary.partitions, records, Mode::Plain).await,
            replayed: false,
        }),
        Some(key) => {
            crate::idempotency::produce_once(
                gateway,
                call,
                &tenant,
                topic,
                summary.partitions,
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
            let outcome = match mode {
                Mode::Plain => tenant.producer.send(topic, records).await,
                Mode::Once { producer_id, .. } => {
                    tenant
                        .producer
                        .send_once(topic, records, producer_id, 0)
                        .await
                }
            };
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
