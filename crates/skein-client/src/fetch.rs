//! Fetch: records from partitions, decoded from their record batches.

use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::batch;
use crate::error::{ClientError, Result};
use crate::record::ConsumerRecord;
use crate::Client;

/// How much a fetch asks for and how long the broker may wait for it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FetchOptions {
    /// How long the broker may wait for `min_bytes` (`fetch.max.wait.ms`).
    pub max_wait: Duration,
    /// The broker answers once it has this many bytes (`fetch.min.bytes`).
    pub min_bytes: i32,
    /// The most bytes of one answer (`fetch.max.bytes`); the first batch is returned
    /// whole even when larger.
    pub max_bytes: i32,
    /// The most bytes from one partition (`max.partition.fetch.bytes`).
    pub partition_max_bytes: i32,
    /// Which records to see (`isolation.level`): by default only committed ones.
    pub isolation: Isolation,
}

/// Which records a fetch sees (Kafka's `isolation.level`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// Records up to the last stable offset, without those of aborted transactions (as
    /// librdkafka's default).
    #[default]
    ReadCommitted,
    /// Every record up to the high watermark, aborted transactions' too.
    ReadUncommitted,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            isolation: Isolation::default(),
        }
    }
}

impl FetchOptions {
    /// Sets how long the broker may wait.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// Sets the bytes the broker waits for.
    pub fn with_min_bytes(mut self, min_bytes: i32) -> Self {
        self.min_bytes = min_bytes;
        self
    }

    /// Sets the most bytes of one answer.
    pub fn with_max_bytes(mut self, max_bytes: i32) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Sets the most bytes from one partition.
    pub fn with_partition_max_bytes(mut self, partition_max_bytes: i32) -> Self {
        self.partition_max_bytes = partition_max_bytes;
        self
    }

    /// Sets which records to see.
    pub fn with_isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }
}

/// What one partition answered to a fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Records at or after the offset asked for, in offset order, without control records.
    pub records: Vec<ConsumerRecord>,
    /// The offset to fetch next: after the last batch returned, or the offset asked for
    /// when nothing was returned.
    pub next_offset: i64,
    /// The offset after the last committed record.
    pub high_watermark: i64,
    /// The offset after the last stable (non-transactional or decided) record.
    pub last_stable_offset: i64,
    /// The first offset of the log, or -1 when the broker did not say.
    pub log_start_offset: i64,
}

/// A partition and the offset to read it from, for [`Client::fetch_from`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchTarget {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// The most bytes from this partition; the options' `partition_max_bytes` when `None`.
    pub max_bytes: Option<i32>,
}

impl FetchTarget {
    /// `partition` of `topic` from `offset`.
    pub fn new(topic: impl Into<String>, partition: i32, offset: i64) -> Self {
        Self {
            topic: topic.into(),
            partition,
            offset,
            max_bytes: None,
        }
    }

    /// Sets the most bytes from this partition.
    pub fn with_max_bytes(mut self, max_bytes: i32) -> Self {
        self.max_bytes = Some(max_bytes);
        self
    }
}

impl Client {
    /// Reads records from one partition, starting at `offset`.
    ///
    /// An offset outside the log is [`ClientError::OffsetOutOfRange`]; an unknown topic or
    /// partition is [`ClientError::Kafka`] with UNKNOWN_TOPIC_OR_PARTITION (after the
    /// configured retries, since a topic may just have been created).
    pub async fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        options: &FetchOptions,
    ) -> Result<FetchedPartition> {
        let target = FetchTarget::new(topic, partition, offset);
        let mut attempt = 0;
        loop {
            let outcome = match self.leader(topic, partition).await {
                Ok(leader) => self
                    .fetch_from(leader, std::slice::from_ref(&target), options)
                    .await
                    .and_then(|mut answers| {
                        answers.pop().unwrap_or_else(|| {
                            Err(ClientError::InvalidArgument {
                                reason: "empty fetch answer".to_owned(),
                            })
                        })
                    }),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(fetched) => return Ok(fetched),
                Err(e) => {
                    if !self.prepare_retry(&e, attempt, &[topic]).await {
                        return Err(e);
                    }
                    attempt += 1;
                }
            }
        }
    }

    /// Reads several partitions led by `leader` in one request (as a consumer reads its
    /// assignment); one answer per target, in the same order. `Err` when the request itself
    /// failed. A partition named twice is answered, both times, as its first target asked.
    pub async fn fetch_from(
        &self,
        leader: i32,
        targets: &[FetchTarget],
        options: &FetchOptions,
    ) -> Result<Vec<Result<FetchedPartition>>> {
        let connection = self.connection(leader).await?;
        let mut topics: Vec<FetchTopic> = Vec::new();
        for target in targets {
            let partition = FetchPartition::default()
                .with_partition(target.partition)
                .with_fetch_offset(target.offset)
                .with_partition_max_bytes(target.max_bytes.unwrap_or(options.partition_max_bytes));
            match topics
                .iter_mut()
                .find(|t| t.topic.0.as_str() == target.topic)
            {
                Some(topic) => topic.partitions.push(partition),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(target.topic.clone())))
                        .with_partitions(vec![partition]),
                ),
            }
        }
        let max_wait_ms = i32::try_from(options.max_wait.as_millis()).unwrap_or(i32::MAX);
        let request = FetchRequest::default()
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(options.min_bytes)
            .with_max_bytes(options.max_bytes)
            .with_isolation_level(match options.isolation {
                Isolation::ReadCommitted => 1,
                Isolation::ReadUncommitted => 0,
            })
            .with_topics(topics);
        let timeout = options.max_wait + self.config().request_timeout;
        let response = connection.send_with_timeout(&request, timeout).await?;
        ClientError::check(ApiKey::Fetch, connection.addr(), response.error_code, None)?;
        let mut answers = Vec::with_capacity(targets.len());
        for target in targets {
            let resource = || format!("{}-{}", target.topic, target.partition);
            let data = response
                .responses
                .iter()
                .filter(|t| t.topic.0.as_str() == target.topic)
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == target.partition);
            let Some(data) = data else {
                answers.push(Err(ClientError::Kafka {
                    api: ApiKey::Fetch,
                    resource: resource(),
                    error: ResponseError::UnknownServerError,
                    code: ResponseError::UnknownServerError.code(),
                    message: Some("the answer left out this partition".to_owned()),
                }));
                continue;
            };
            if data.error_code == ResponseError::OffsetOutOfRange.code() {
                answers.push(Err(ClientError::OffsetOutOfRange {
                    topic: target.topic.clone(),
                    partition: target.partition,
                    offset: target.offset,
                    log_start_offset: data.log_start_offset,
                    high_watermark: data.high_watermark,
                }));
                continue;
            }
            if let Some(error) =
                ClientError::from_code(ApiKey::Fetch, resource(), data.error_code, None)
            {
                answers.push(Err(error));
                continue;
            }
            let aborted: Vec<(i64, i64)> = data
                .aborted_transactions
                .iter()
                .flatten()
                .map(|t| (t.producer_id.0, t.first_offset))
                .collect();
            let decoded = match &data.records {
                Some(records) => batch::decode_committed(
                    &target.topic,
                    target.partition,
                    records.clone(),
                    target.offset,
                    &mut batch::AbortedFilter::new(&aborted),
                )
                .map_err(|source| ClientError::RecordBatch {
                    topic: target.topic.clone(),
                    partition: target.partition,
                    source,
                }),
                None => Ok(batch::Decoded::default()),
            };
            answers.push(decoded.map(|decoded| {
                FetchedPartition {
                    topic: target.topic.clone(),
                    partition: target.partition,
                    records: decoded.records,
                    next_offset: decoded
                        .next_offset
                        .map_or(target.offset, |next| next.max(target.offset)),
                    high_watermark: data.high_watermark,
                    last_stable_offset: data.last_stable_offset,
                    log_start_offset: data.log_start_offset,
                }
            }));
        }
        Ok(answers)
    }
}
