//! Reading a partition for REST, SSE and gRPC alike: from an offset (or the earliest or
//! latest one), up to a number of records and bytes, waiting up to a bound for records to
//! arrive.

use std::sync::Arc;
use std::time::Duration;

use skein_client::{Client, ConsumerRecord, FetchOptions, Isolation, OffsetSpec};

use crate::brokers::TenantClient;
use crate::error::GatewayError;
use crate::long_polls::LongPolls;

/// The longest a read may wait for records.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// Where a read starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Offset(i64),
    Earliest,
    Latest,
}

impl std::str::FromStr for Start {
    type Err = GatewayError;

    fn from_str(s: &str) -> Result<Self, GatewayError> {
        match s {
            "earliest" => Ok(Self::Earliest),
            "latest" => Ok(Self::Latest),
            other => other
                .parse::<i64>()
                .ok()
                .filter(|o| *o >= 0)
                .map(Self::Offset)
                .ok_or_else(|| {
                    GatewayError::Invalid(format!(
                        "offset {other:?} is not a non-negative number, earliest or latest"
                    ))
                }),
        }
    }
}

/// What a read returned.
#[derive(Debug, Clone)]
pub struct ReadBatch {
    pub records: Vec<ConsumerRecord>,
    /// The offset to read next.
    pub next_offset: i64,
    pub high_watermark: i64,
    /// The bytes of keys, values and headers returned (for fetch quotas).
    pub bytes: usize,
}

/// The offset `start` names in a partition.
pub async fn resolve(
    tenant: &TenantClient,
    topic: &str,
    partition: i32,
    start: Start,
) -> Result<i64, GatewayError> {
    let spec = match start {
        Start::Offset(offset) => return Ok(offset),
        Start::Earliest => OffsetSpec::Earliest,
        Start::Latest => OffsetSpec::Latest,
    };
    let listed = tenant.client.list_offset(topic, partition, spec).await?;
    Ok(listed.map_or(0, |l| l.offset))
}

/// How a read reaches the brokers.
#[derive(Debug, Clone)]
pub enum Reader {
    /// Over the tenant's shared client: for reads that answer at once.
    Now(Client),
    /// Gathered with the tenant's other waiting reads into one fetch per broker
    /// ([`LongPolls`]), over connections of their own, since a broker answers a
    /// connection's requests in order and a waiting fetch would hold up every other call.
    Waiting(Arc<LongPolls>),
}

/// The reader for reads waiting up to `max_wait`.
pub fn reader(tenant: &TenantClient, max_wait: Duration) -> Reader {
    if max_wait.is_zero() {
        Reader::Now(tenant.client.clone())
    } else {
        Reader::Waiting(Arc::clone(&tenant.long_polls))
    }
}

/// How much one read may return and wait, and which records it may see.
#[derive(Debug, Clone, Copy)]
pub struct ReadLimits {
    pub max_records: usize,
    pub max_bytes: i32,
    pub max_wait: Duration,
    /// `ReadCommitted` (the gateway's default) stops at the last stable offset and never
    /// returns a record of an aborted transaction.
    pub isolation: Isolation,
}

/// Reads one partition from `offset` with `reader`.
pub async fn read(
    reader: &Reader,
    topic: &str,
    partition: i32,
    offset: i64,
    limits: ReadLimits,
) -> Result<ReadBatch, GatewayError> {
    let ReadLimits {
        max_records,
        max_bytes,
        max_wait,
        isolation,
    } = limits;
    let max_wait = max_wait.min(MAX_WAIT);
    let fetched = match reader {
        Reader::Now(client) => {
            let options = FetchOptions::default()
                .with_isolation(isolation)
                .with_max_wait(max_wait)
                .with_max_bytes(max_bytes)
                .with_partition_max_bytes(max_bytes);
            client.fetch(topic, partition, offset, &options).await?
        }
        Reader::Waiting(polls) => {
            polls
                .read(topic, partition, offset, max_bytes, max_wait, isolation)
                .await?
        }
    };
    let mut records = fetched.records;
    let mut next_offset = fetched.next_offset;
    if records.len() > max_records {
        records.truncate(max_records);
        next_offset = records.last().map_or(offset, |r| r.offset + 1);
    }
    let bytes = records.iter().map(ConsumerRecord::size).sum();
    Ok(ReadBatch {
        records,
        next_offset,
        high_watermark: fetched.high_watermark,
        bytes,
    })
}
