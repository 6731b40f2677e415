//! [`Producer`]: records to partitions, one batch per partition, one request per leader.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use crate::batch;
use crate::error::{ClientError, Result};
use crate::partitioner::Partitioner;
use crate::record::ProduceRecord;
use crate::Client;

/// How many replicas must have a batch before the broker answers (`acks`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Acks {
    /// No answer at all (`acks=0`): offsets are unknown and errors go unseen.
    None,
    /// The leader has written it (`acks=1`).
    Leader,
    /// Every in-sync replica has it (`acks=all`).
    #[default]
    All,
}

impl Acks {
    fn code(self) -> i16 {
        match self {
            Self::None => 0,
            Self::Leader => 1,
            Self::All => -1,
        }
    }
}

/// How a [`Producer`] writes.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProducerConfig {
    /// Acknowledgement level.
    pub acks: Acks,
    /// Batch compression (`compression.type`).
    pub compression: Compression,
    /// How long the broker may wait for replicas before answering (the request's
    /// `timeout_ms`).
    pub ack_timeout: Duration,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            acks: Acks::All,
            compression: Compression::None,
            ack_timeout: Duration::from_secs(30),
        }
    }
}

impl ProducerConfig {
    /// Sets the acknowledgement level.
    pub fn with_acks(mut self, acks: Acks) -> Self {
        self.acks = acks;
        self
    }

    /// Sets the compression.
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }
}

/// One batch written to one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducedBatch {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset of the batch's first record; `None` with [`Acks::None`].
    pub base_offset: Option<i64>,
    /// How many records the batch holds, in the order they were given.
    pub record_count: usize,
    /// The broker's append time, for topics with `message.timestamp.type=LogAppendTime`.
    pub log_append_time: Option<i64>,
}

/// Writes records to topics.
///
/// Each [`Producer::send`] call puts the records for one partition into one batch, in the
/// order given, and sends one request per partition leader. Retriable errors are retried
/// after a metadata refresh, up to [`ClientConfig::retries`](crate::ClientConfig::retries)
/// times; a retried batch may be written twice if the first answer was lost.
#[derive(Debug)]
pub struct Producer {
    client: Client,
    config: ProducerConfig,
    partitioner: Partitioner,
}

struct PendingBatch {
    partition: i32,
    records: Bytes,
    record_count: usize,
}

impl Producer {
    /// A producer writing through `client`.
    pub fn new(client: Client, config: ProducerConfig) -> Self {
        Self {
            client,
            config,
            partitioner: Partitioner::default(),
        }
    }

    /// Writes records to a topic; returns one [`ProducedBatch`] per partition written,
    /// ordered by partition.
    ///
    /// A missing topic is [`ClientError::Kafka`] with UNKNOWN_TOPIC_OR_PARTITION. If a
    /// partition fails for good its error is returned, and batches to other partitions may
    /// have been written.
    pub async fn send(
        &self,
        topic: &str,
        records: impl IntoIterator<Item = ProduceRecord>,
    ) -> Result<Vec<ProducedBatch>> {
        let records: Vec<ProduceRecord> = records.into_iter().collect();
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let metadata = self.client.topic(topic).await?;
        let partitions = i32::try_from(metadata.partitions.len()).unwrap_or(i32::MAX);
        let mut by_partition: BTreeMap<i32, Vec<&ProduceRecord>> = BTreeMap::new();
        for record in &records {
            let partition = self.partitioner.partition(
                topic,
                partitions,
                record.partition,
                record.key.as_deref(),
            );
            if partition < 0 || partition >= partitions {
                return Err(ClientError::UnknownPartition {
                    topic: topic.to_owned(),
                    partition,
                    partitions: metadata.partitions.len(),
                });
            }
            by_partition.entry(partition).or_default().push(record);
        }
        let pending = self.encode(topic, &by_partition, None)?;
        self.send_batches(topic, pending).await
    }

    /// Writes records, each with an explicit partition, as an idempotent producer whose
    /// batches start at `base_sequence` in every partition (0 for a producer id's first
    /// batch; a set of records sent as several batches continues the count). Sending the same records again with the same id writes nothing twice:
    /// the broker answers the repeated batches with their first offsets. Retries are
    /// therefore always safe.
    pub async fn send_once(
        &self,
        topic: &str,
        records: impl IntoIterator<Item = ProduceRecord>,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
    ) -> Result<Vec<ProducedBatch>> {
        let mut by_partition: BTreeMap<i32, Vec<ProduceRecord>> = BTreeMap::new();
        for record in records {
            let Some(partition) = record.partition else {
                return Err(ClientError::InvalidArgument {
                    reason: "send_once needs every record's partition".to_owned(),
                });
            };
            by_partition.entry(partition).or_default().push(record);
        }
        let producer = batch::IdempotentProducer {
            id: producer_id,
            epoch: producer_epoch,
            base_sequence,
        };
        let by_partition: BTreeMap<i32, Vec<&ProduceRecord>> = by_partition
            .iter()
            .map(|(p, records)| (*p, records.iter().collect()))
            .collect();
        let pending = self.encode(topic, &by_partition, Some(producer))?;
        self.send_batches(topic, pending).await
    }

    /// One batch per partition, in the order given.
    fn encode(
        &self,
        topic: &str,
        by_partition: &BTreeMap<i32, Vec<&ProduceRecord>>,
        producer: Option<batch::IdempotentProducer>,
    ) -> Result<Vec<PendingBatch>> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        by_partition
            .iter()
            .map(|(partition, records)| {
                let encoded = batch::encode(records, self.config.compression, now, producer)
                    .map_err(|source| ClientError::RecordBatch {
                        topic: topic.to_owned(),
                        partition: *partition,
                        source,
                    })?;
                Ok(PendingBatch {
                    partition: *partition,
                    records: encoded,
                    record_count: records.len(),
                })
            })
            .collect()
    }

    async fn send_batches(
        &self,
        topic: &str,
        mut pending: Vec<PendingBatch>,
    ) -> Result<Vec<ProducedBatch>> {
        let mut produced = Vec::with_capacity(pending.len());
        let mut attempt = 0;
        loop {
            let mut by_leader: BTreeMap<i32, Vec<PendingBatch>> = BTreeMap::new();
            let mut failed = Vec::new();
            let mut last_error = None;
            for batch in pending {
                match self.client.leader(topic, batch.partition).await {
                    Ok(leader) => by_leader.entry(leader).or_default().push(batch),
                    Err(e) if e.is_retriable() => {
                        last_error = Some(e);
                        failed.push(batch);
                    }
                    Err(e) => return Err(e),
                }
            }
            let sends = by_leader
                .into_iter()
                .map(|(leader, batches)| self.send_to_leader(topic, leader, batches));
            for (batches, outcome) in futures::future::join_all(sends).await {
                match outcome {
                    Err(e) if e.is_retriable() => {
                        last_error = Some(e);
                        failed.extend(batches);
                    }
                    Err(e) => return Err(e),
                    Ok(answers) => {
                        for (batch, answer) in batches.into_iter().zip(answers) {
                            match answer {
                                Ok(done) => produced.push(done),
                                Err(e) if e.is_retriable() => {
                                    last_error = Some(e);
                                    failed.push(batch);
                                }
                                Err(e) => return Err(e),
                            }
                        }
                    }
                }
            }
            let Some(error) = last_error else {
                produced.sort_by_key(|b| b.partition);
                return Ok(produced);
            };
            if !self.client.prepare_retry(&error, attempt, &[topic]).await {
                return Err(error);
            }
            attempt += 1;
            pending = failed;
        }
    }

    /// Sends the batches of one leader in one request. Returns the batches with, for
    /// each, what the broker answered; `Err` when the request itself failed.
    async fn send_to_leader(
        &self,
        topic: &str,
        leader: i32,
        batches: Vec<PendingBatch>,
    ) -> (Vec<PendingBatch>, Result<Vec<Result<ProducedBatch>>>) {
        let outcome = self.request(topic, leader, &batches).await;
        (batches, outcome)
    }

    async fn request(
        &self,
        topic: &str,
        leader: i32,
        batches: &[PendingBatch],
    ) -> Result<Vec<Result<ProducedBatch>>> {
        let connection = self.client.connection(leader).await?;
        let request = ProduceRequest::default()
            .with_acks(self.config.acks.code())
            .with_timeout_ms(i32::try_from(self.config.ack_timeout.as_millis()).unwrap_or(i32::MAX))
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partition_data(
                    batches
                        .iter()
                        .map(|b| {
                            PartitionProduceData::default()
                                .with_index(b.partition)
                                .with_records(Some(b.records.clone()))
                        })
                        .collect(),
                )]);
        if self.config.acks == Acks::None {
            connection.send_without_response(&request).await?;
            return Ok(batches
                .iter()
                .map(|b| {
                    Ok(ProducedBatch {
                        topic: topic.to_owned(),
                        partition: b.partition,
                        base_offset: None,
                        record_count: b.record_count,
                        log_append_time: None,
                    })
                })
                .collect());
        }
        let timeout = self.config.ack_timeout + self.client.config().request_timeout;
        let response = connection.send_with_timeout(&request, timeout).await?;
        let answers: Vec<_> = response
            .responses
            .into_iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partition_responses)
            .collect();
        Ok(batches
            .iter()
            .map(|b| {
                let resource = format!("{topic}-{}", b.partition);
                let Some(answer) = answers.iter().find(|a| a.index == b.partition) else {
                    return Err(ClientError::Kafka {
                        api: ApiKey::Produce,
                        resource,
                        error: kafka_protocol::ResponseError::UnknownServerError,
                        code: kafka_protocol::ResponseError::UnknownServerError.code(),
                        message: Some("the answer left out this partition".to_owned()),
                    });
                };
                ClientError::check(
                    ApiKey::Produce,
                    resource,
                    answer.error_code,
                    answer.error_message.as_ref().map(|m| m.as_str()),
                )?;
                Ok(ProducedBatch {
                    topic: topic.to_owned(),
                    partition: b.partition,
                    base_offset: Some(answer.base_offset),
                    record_count: b.record_count,
                    log_append_time: Some(answer.log_append_time_ms).filter(|t| *t >= 0),
                })
            })
            .collect())
    }
}
