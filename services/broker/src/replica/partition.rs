//! One hosted partition and what handlers do with it: append a producer's records, read for a
//! consumer, look up offsets, delete records. Every operation takes the partition log's lock
//! itself, for as long as it needs it.

use bytes::{Bytes, BytesMut};
use skein_log::batch::BatchHeader;
use skein_log::{LogError, SharedLog, TopicPartition};

use super::{PartitionError, ReplicaManager};
use crate::producer::Verdict;
use crate::topics::PartitionPlacement;
use crate::TopicInfo;
use skein_replication::LeaderView;

/// A partition of a known topic, with its log open.
pub(crate) struct Partition<'a> {
    pub(super) manager: &'a ReplicaManager,
    pub(super) tp: TopicPartition,
    pub(super) info: TopicInfo,
    /// The epoch this broker leads the partition in: appended batches carry it.
    pub(super) leader_epoch: i32,
    /// Its replicas and ISR as the controller last decided them.
    pub(super) placement: PartitionPlacement,
    pub(super) log: SharedLog,
}

/// A write's outcome: the base offset of the first batch (the original one for a duplicate
/// from an idempotent producer), the append time when the topic uses `LogAppendTime`, and
/// the log start offset after the write.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Appended {
    pub base_offset: i64,
    /// The offset after the last record written: `acks=all` waits for the high watermark
    /// to reach it.
    pub end_offset: i64,
    pub log_append_time: Option<i64>,
    pub log_start_offset: i64,
}

/// How an `acks=all` wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replicated {
    /// Every in-sync replica has the records.
    Done,
    /// Every in-sync replica has the records, but they are fewer than the topic's
    /// `min.insync.replicas` (the ISR shrank after the write was taken).
    BelowMinInsync,
    TimedOut,
    /// This broker no longer leads the partition (in the epoch it wrote in).
    NotLeader {
        leader: Option<(i32, i32)>,
    },
}

/// What a leader's write still owes its producer once it is in the log.
pub(crate) enum Acknowledgement<'a> {
    /// Nothing: `acks` 0 or 1.
    Now,
    /// `acks=all`: the high watermark must reach `end_offset` by `deadline`.
    OnReplication(Box<Replication<'a>>),
}

/// An `acks=all` write waiting for the ISR.
pub(crate) struct Replication<'a> {
    partition: Partition<'a>,
    end_offset: i64,
    deadline: tokio::time::Instant,
}

impl Acknowledgement<'_> {
    /// How the write ended for its producer.
    pub(crate) async fn outcome(self) -> Replicated {
        match self {
            Self::Now => Replicated::Done,
            Self::OnReplication(wait) => {
                wait.partition
                    .replicated(wait.end_offset, wait.deadline)
                    .await
            }
        }
    }
}

/// How much a read may return.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ReadLimit {
    /// Nothing: only the partition's offsets.
    Nothing,
    /// Whole batches within this many bytes, or nothing.
    Within(u64),
    /// Whole batches within this many bytes, but at least one batch, however large (the first
    /// partition of a fetch, so a large batch never blocks a consumer).
    AtLeastOneBatch(u64),
}

/// Which records a consumer's read may see (Kafka's `isolation.level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// Everything below the high watermark.
    ReadUncommitted,
    /// Everything below the last stable offset; the answer names the aborted transactions
    /// among it, which the client skips.
    ReadCommitted,
}

impl Isolation {
    /// From the protocol's `isolation_level` (0 or 1); anything else reads uncommitted, as
    /// Kafka does.
    pub(crate) fn of_level(level: i8) -> Self {
        if level == 1 {
            Self::ReadCommitted
        } else {
            Self::ReadUncommitted
        }
    }
}

/// What a read found: the partition's offsets, and records or why there are none.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub records: Result<Option<Bytes>, PartitionError>,
    /// For a `read_committed` read, the aborted transactions that overlap the records.
    pub aborted: Vec<skein_log::transactions::AbortedTxn>,
}

/// The most aborted transactions named beside one partition's records beyond one per
/// 61 bytes of them (each needs a batch of its own there), for those that began before
/// the read.
const ABORTED_BEYOND_BATCHES: usize = 1024;

/// Which offset a lookup asks for (Kafka's ListOffsets timestamps).
#[derive(Debug, Clone, Copy)]
pub(crate) enum OffsetSpec {
    /// The high watermark: where the next record consumers can see will be.
    Latest,
    /// The last stable offset: where a `read_committed` consumer's next record will be.
    LastStable,
    Earliest,
    /// The offset of the record with the largest timestamp.
    MaxTimestamp,
    /// The first offset whose timestamp is at or after this one.
    Timestamp(i64),
}

impl<'a> Partition<'a> {
    /// The epoch this broker leads the partition in.
    pub(crate) fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// Whether this broker still leads the partition in the epoch it was found in; called
    /// with the log's write lock held.
    fn still_leads(&self) -> Result<(), PartitionError> {
        match self.manager.registered_leader(&self.tp) {
            Some(now) if now == (self.manager.node_id, self.leader_epoch) => Ok(()),
            now => Err(PartitionError::NotLeader {
                topic: self.tp.topic.clone(),
                partition: self.tp.partition,
                leader: now.filter(|(leader, _)| *leader >= 0),
            }),
        }
    }

    fn view(&self, (log_start, log_end): (u64, u64)) -> LeaderView<'_> {
        LeaderView {
            node_id: self.manager.node_id,
            epoch: self.leader_epoch,
            log_start,
            log_end,
            isr: &self.placement.isr,
        }
    }

    /// The log's start and end offsets.
    fn bounds(&self) -> (u64, u64) {
        let log = self.log.read();
        (log.log_start_offset(), log.log_end_offset())
    }

    /// The partition's high watermark: consumers read below it.
    pub(crate) fn high_watermark(&self) -> i64 {
        let (log_start, log_end) = self.bounds();
        self.manager
            .progress
            .high_watermark(&self.tp, log_start, log_end) as i64
    }

    /// The topic's `min.insync.replicas`.
    pub(crate) fn min_insync_replicas(&self) -> i32 {
        self.manager.min_insync_replicas(&self.info)
    }

    /// Works the high watermark out again (after an ISR change), waking `acks=all` writes
    /// it lets through.
    pub(crate) fn recompute_high_watermark(&self) {
        self.manager
            .progress
            .leader_advanced(&self.tp, self.view(self.bounds()));
    }

    /// The ISR this leader should ask the controller for, if it should change: followers
    /// behind for longer than `lag_max` leave, caught-up replicas join.
    pub(crate) fn wanted_isr(&self, lag_max: std::time::Duration) -> Option<Vec<i32>> {
        self.manager.progress.wanted_isr(
            &self.tp,
            self.view(self.bounds()),
            &self.placement.replicas,
            lag_max,
        )
    }

    /// The placement this partition was handed out with.
    pub(crate) fn placement(&self) -> &PartitionPlacement {
        &self.placement
    }

    /// The topic's id.
    pub(crate) fn topic_id(&self) -> uuid::Uuid {
        self.info.id
    }

    /// Whether what this leader serves follower `replica` counts against
    /// `leader.replication.throttled.rate`: the topic throttles this broker's replica of
    /// the partition and the follower is catching up (not in the ISR).
    pub(crate) fn throttles(&self, replica: i32) -> bool {
        if self.placement.isr.contains(&replica) {
            return false;
        }
        self.info
            .configs
            .get("leader.replication.throttled.replicas")
            .and_then(|v| skein_log::topic_config::ThrottledReplicas::parse(v))
            .is_some_and(|t| t.covers(self.tp.partition, self.manager.node_id))
    }

    /// Whether broker `id` holds a replica of the partition.
    pub(crate) fn has_replica(&self, id: i32) -> bool {
        self.placement.replicas.contains(&id)
    }

    /// How many replicas are in sync, this one included.
    pub(crate) fn in_sync(&self) -> i32 {
        i32::try_from(self.placement.isr.len())
            .unwrap_or(i32::MAX)
            .max(1)
    }

    /// Waits until the high watermark reaches `end_offset` (every in-sync replica has the
    /// records before it) or `deadline` passes; answers whether it did, and whether the
    /// ISR that has them is as large as `min.insync.replicas` asks. Only this partition's
    /// advances wake the wait.
    pub(crate) async fn replicated(
        &self,
        end_offset: i64,
        deadline: tokio::time::Instant,
    ) -> Replicated {
        let advanced = self.manager.progress.advanced(&self.tp);
        let done = || {
            if self.in_sync() < self.min_insync_replicas() {
                Replicated::BelowMinInsync
            } else {
                Replicated::Done
            }
        };
        loop {
            let woken = advanced.notified();
            if self.high_watermark() >= end_offset {
                return done();
            }
            // Leadership moved on: the new leader answers the producer's retry.
            let current = self
                .manager
                .topics
                .get(&self.tp.topic)
                .filter(|info| info.id == self.info.id)
                .and_then(|info| info.placement_of(self.tp.partition, self.manager.node_id));
            match current {
                Some(now)
                    if now.leader == self.manager.node_id
                        && now.leader_epoch == self.leader_epoch => {}
                now => {
                    return Replicated::NotLeader {
                        leader: now
                            .filter(|p| p.leader >= 0)
                            .map(|p| (p.leader, p.leader_epoch)),
                    }
                }
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return if self.high_watermark() >= end_offset {
                    done()
                } else {
                    Replicated::TimedOut
                };
            }
        }
    }

    /// A producer's write: appended now ([`Self::append`]), and for `acks=all` what it
    /// still waits for, the ISR by `deadline`, without holding the caller meanwhile.
    pub(crate) fn append_and_wait(
        self,
        records: &[u8],
        acks: i16,
        deadline: tokio::time::Instant,
    ) -> Result<(Appended, Acknowledgement<'a>), PartitionError> {
        let appended = self.append(records, acks)?;
        let acknowledgement = match acks {
            -1 => Acknowledgement::OnReplication(Box::new(Replication {
                end_offset: appended.end_offset,
                partition: self,
                deadline,
            })),
            _ => Acknowledgement::Now,
        };
        Ok((appended, acknowledgement))
    }

    /// Appends a producer's records (`acks` as the request gives it): in one write when no
    /// batch comes from an idempotent producer, else batch by batch through the producer's
    /// sequence check. Waiting fetches are woken.
    pub(crate) fn append(&self, records: &[u8], acks: i16) -> Result<Appended, PartitionError> {
        // acks=all needs min.insync.replicas in sync before anything is written.
        let required = self.manager.min_insync_replicas(&self.info);
        let in_sync = self.in_sync();
        if acks == -1 && in_sync < required {
            return Err(PartitionError::NotEnoughReplicas { required, in_sync });
        }
        let (compacted, limit) = {
            let log = self.log.read();
            let config = log.config();
            (
                !matches!(config.cleanup_policy, skein_log::CleanupPolicy::Delete),
                skein_log::batch::decompression_limit(config.max_message_bytes),
            )
        };
        if compacted {
            let keyless = keyless_records(records, limit);
            if !keyless.is_empty() {
                return Err(PartitionError::InvalidRecords {
                    records: keyless,
                    reason: format!(
                        "compacted topic partition {} cannot accept a record without a key",
                        self.tp
                    ),
                });
            }
        }
        let recompressed;
        let records = match self.manager.compression(&self.info) {
            Some(codec) => {
                recompressed = recompress_all(records, codec, limit)?;
                recompressed.as_deref().unwrap_or(records)
            }
            None => records,
        };
        let appended = self.append_batches(records, true)?;
        self.manager
            .progress
            .leader_advanced(&self.tp, self.view(self.bounds()));
        self.manager.appended.wake(&self.tp);
        Ok(appended)
    }

    /// A group coordinator's write to its offsets partition: the batch of a transactional
    /// producer's TxnOffsetCommit carries the producer's id and epoch but no sequence
    /// numbers, so it is not checked against the producer's sequence here (as Kafka's
    /// coordinator-origin appends are not).
    pub(crate) fn append_as_coordinator(&self, records: &[u8]) -> Result<Appended, PartitionError> {
        let required = self.manager.min_insync_replicas(&self.info);
        let in_sync = self.in_sync();
        if in_sync < required {
            return Err(PartitionError::NotEnoughReplicas { required, in_sync });
        }
        let appended = self.append_batches(records, false)?;
        self.manager
            .progress
            .leader_advanced(&self.tp, self.view(self.bounds()));
        self.manager.appended.wake(&self.tp);
        Ok(appended)
    }

    /// Writes a transaction coordinator's marker batch (one built by
    /// [`skein_log::batch::build_marker`]) as the leader; the producer's epoch it carries
    /// fences any older epoch of that producer here from then on.
    pub(crate) fn append_markers(&self, marker: &[u8]) -> Result<Appended, PartitionError> {
        let header = BatchHeader::parse(marker).map_err(|e| {
            PartitionError::Log(LogError::InvalidBatch {
                index: 0,
                source: e,
            })
        })?;
        let mut log = self.log.write();
        self.still_leads()?;
        let state = self.manager.producers.partition(&self.tp);
        let mut state = state.lock();
        state.load(&log)?;
        let mut bytes = BytesMut::from(marker);
        let info = log.append_markers(&mut bytes, self.leader_epoch)?;
        state.record_marker(&header);
        let appended = Appended {
            base_offset: info.first_offset as i64,
            end_offset: info.last_offset as i64 + 1,
            log_append_time: None,
            log_start_offset: log.log_start_offset() as i64,
        };
        drop(state);
        drop(log);
        self.manager
            .progress
            .leader_advanced(&self.tp, self.view(self.bounds()));
        self.manager.appended.wake(&self.tp);
        Ok(appended)
    }

    fn append_batches(
        &self,
        records: &[u8],
        check_producers: bool,
    ) -> Result<Appended, PartitionError> {
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
        let mut log = self.log.write();
        // Leadership may have moved since the request found this partition: once the
        // registry names another leader, this broker's fetcher may append the new leader's
        // batches, and a write now would be mixed into them.
        self.still_leads()?;
        if !check_producers || !batches.iter().any(|(_, h)| h.producer_id >= 0) {
            // The log rewrites offsets in place: one copy out of the request buffer.
            let mut bytes = BytesMut::from(records);
            let info = log.append(&mut bytes, self.leader_epoch)?;
            return Ok(Appended {
                base_offset: info.first_offset as i64,
                end_offset: info.last_offset as i64 + 1,
                log_append_time: info.log_append_time,
                log_start_offset: log.log_start_offset() as i64,
            });
        }
        let state = self.manager.producers.partition(&self.tp);
        let mut state = state.lock();
        state.load(&log)?;
        let mut first = None;
        let mut log_append_time = None;
        for (at, header) in batches {
            // Checked again under the log's lock: a marker written since the coordinator
            // confirmed the transaction ended it here, and this batch must not open another.
            if header.is_transactional()
                && !state.is_verified(header.producer_id, header.producer_epoch)
            {
                return Err(PartitionError::Producer(
                    kafka_protocol::ResponseError::InvalidTxnState,
                ));
            }
            match state.check(&header) {
                Verdict::Append => {
                    let mut bytes = BytesMut::from(&records[at..at + header.size()]);
                    let info = log.append(&mut bytes, self.leader_epoch)?;
                    state.record(&header, info.first_offset as i64);
                    first.get_or_insert(info.first_offset as i64);
                    log_append_time = log_append_time.or(info.log_append_time);
                }
                Verdict::Duplicate { base_offset } => {
                    first.get_or_insert(base_offset);
                }
                Verdict::Reject(error) => return Err(PartitionError::Producer(error)),
            }
        }
        Ok(Appended {
            base_offset: first.unwrap_or(-1),
            end_offset: log.log_end_offset() as i64,
            log_append_time,
            log_start_offset: log.log_start_offset() as i64,
        })
    }

    /// The transactional producers (id, epoch) of the batches in `records` whose
    /// coordinator has not yet confirmed that their transaction includes this partition.
    /// Batches that do not parse are left to the log to refuse.
    pub(crate) fn unverified_transactions(&self, records: &[u8]) -> Vec<(i64, i16)> {
        let state = self.manager.producers.partition(&self.tp);
        let state = state.lock();
        let mut found = Vec::new();
        let mut at = 0usize;
        while let Some(Ok(header)) = records.get(at..).map(BatchHeader::parse) {
            if header.is_transactional() && header.producer_id >= 0 {
                let producer = (header.producer_id, header.producer_epoch);
                if !state.is_verified(producer.0, producer.1) && !found.contains(&producer) {
                    found.push(producer);
                }
            }
            at += header.size();
        }
        found
    }

    /// Remembers the coordinator's confirmation until the transaction's marker.
    pub(crate) fn set_transaction_verified(&self, producer: (i64, i16)) {
        let state = self.manager.producers.partition(&self.tp);
        state.lock().set_verified(producer.0, producer.1);
    }

    /// The name the broker keeps for the partition's topic.
    pub(crate) fn topic(&self) -> &str {
        &self.tp.topic
    }

    pub(crate) fn index(&self) -> i32 {
        self.tp.partition
    }

    /// The producers that wrote to this partition (DescribeProducers), each with the first
    /// offset of its open transaction, if any.
    pub(crate) fn producers(&self) -> Result<Vec<crate::producer::ProducerView>, PartitionError> {
        let log = self.log.read();
        let state = self.manager.producers.partition(&self.tp);
        let mut state = state.lock();
        state.load(&log)?;
        Ok(state
            .describe()
            .into_iter()
            .map(|p| crate::producer::ProducerView {
                open_since: log.open_transaction_of(p.producer_id),
                ..p
            })
            .collect())
    }

    /// Runs `f` over the whole log, up to its end, under its read lock: for the broker's own
    /// internal topics, which it loads as it takes their lead.
    pub(crate) fn with_log<R>(&self, f: impl FnOnce(&skein_log::Log) -> R) -> R {
        f(&self.log.read())
    }

    /// Reads whole batches from `offset` up to the high watermark, within `limit` (a
    /// consumer's read).
    pub(crate) fn read(&self, offset: i64, limit: ReadLimit, isolation: Isolation) -> Fetched {
        self.read_below(offset, limit, None, isolation)
    }

    /// A follower's read: whole batches from `offset` up to the log end. The fetch offset
    /// reports what the follower has, which may advance the high watermark.
    pub(crate) fn read_for_follower(
        &self,
        follower: i32,
        offset: i64,
        limit: ReadLimit,
    ) -> Fetched {
        self.read_below(offset, limit, Some(follower), Isolation::ReadUncommitted)
    }

    fn read_below(
        &self,
        offset: i64,
        limit: ReadLimit,
        follower: Option<i32>,
        isolation: Isolation,
    ) -> Fetched {
        let log = self.log.read();
        let log_end = log.log_end_offset();
        let high_watermark = match (follower, u64::try_from(offset)) {
            (Some(follower), Ok(fetched)) => self.manager.progress.follower_fetched(
                &self.tp,
                self.view((log.log_start_offset(), log_end)),
                follower,
                fetched,
            ),
            _ => self
                .manager
                .progress
                .high_watermark(&self.tp, log.log_start_offset(), log_end),
        };
        let last_stable = log.last_stable_offset(high_watermark);
        let upper = match (follower, isolation) {
            (Some(_), _) => log_end,
            (None, Isolation::ReadUncommitted) => high_watermark,
            (None, Isolation::ReadCommitted) => last_stable,
        };
        let mut fetched = Fetched {
            high_watermark: high_watermark as i64,
            last_stable_offset: last_stable as i64,
            log_start_offset: log.log_start_offset() as i64,
            records: Ok(None),
            aborted: Vec::new(),
        };
        let Ok(from) = u64::try_from(offset) else {
            fetched.records = Err(PartitionError::OffsetOutOfRange { offset });
            return fetched;
        };
        let (max_bytes, may_exceed) = match limit {
            ReadLimit::Nothing => return fetched,
            ReadLimit::Within(n) => (n, false),
            ReadLimit::AtLeastOneBatch(n) => (n, true),
        };
        if from > upper && from <= log_end {
            // Written but not yet replicated: nothing to read yet, and not out of range.
            return fetched;
        }
        fetched.records = match log.read(from, max_bytes, Some(upper)) {
            Ok(slice) => match slice.region {
                None => Ok(None),
                Some(region) if !may_exceed && region.len() > max_bytes => Ok(None),
                Some(region) => {
                    if isolation == Isolation::ReadCommitted {
                        let most = (region.len() / 61) as usize + ABORTED_BEYOND_BATCHES;
                        fetched.aborted = log.aborted_transactions(
                            slice.first_offset,
                            slice.last_offset + 1,
                            most,
                        );
                    }
                    region
                        .read_to_vec()
                        .map(|bytes| Some(Bytes::from(bytes)))
                        .map_err(PartitionError::Read)
                }
            },
            Err(LogError::OffsetOutOfRange { .. }) => {
                Err(PartitionError::OffsetOutOfRange { offset })
            }
            Err(e) => Err(e.into()),
        };
        fetched
    }

    /// The offset (and the timestamp, for lookups by time) that `spec` names; `None` when no
    /// record matches.
    pub(crate) fn offset(&self, spec: OffsetSpec) -> Result<Option<(i64, i64)>, PartitionError> {
        let log = self.log.read();
        let found = match spec {
            OffsetSpec::Latest => Some((
                self.manager.progress.high_watermark(
                    &self.tp,
                    log.log_start_offset(),
                    log.log_end_offset(),
                ),
                -1,
            )),
            OffsetSpec::LastStable => Some((
                log.last_stable_offset(self.manager.progress.high_watermark(
                    &self.tp,
                    log.log_start_offset(),
                    log.log_end_offset(),
                )),
                -1,
            )),
            OffsetSpec::Earliest => Some((log.log_start_offset(), -1)),
            OffsetSpec::MaxTimestamp => log.max_timestamp_offset()?,
            OffsetSpec::Timestamp(ts) => log.offset_for_timestamp(ts)?,
        };
        Ok(found.map(|(offset, timestamp)| (offset as i64, timestamp)))
    }

    /// OffsetForLeaderEpoch: the largest epoch at or below `epoch` this log holds and the
    /// offset where it ends (the log end for the latest); `None` when it holds none.
    pub(crate) fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        self.log
            .read()
            .end_offset_for_epoch(epoch)
            .map(|entry| (entry.epoch, entry.start_offset as i64))
    }

    /// Deletes every record below `before` (-1: below the high watermark) by moving the log
    /// start; answers the new log start.
    pub(crate) fn delete_records(&self, before: i64) -> Result<i64, PartitionError> {
        let mut log = self.log.write();
        let high_watermark = self.manager.progress.high_watermark(
            &self.tp,
            log.log_start_offset(),
            log.log_end_offset(),
        ) as i64;
        // Kafka: records at or past the high watermark cannot be deleted.
        let target = if before == -1 { high_watermark } else { before };
        if target > high_watermark {
            return Err(PartitionError::OffsetOutOfRange { offset: before });
        }
        let Ok(target) = u64::try_from(target) else {
            return Err(PartitionError::OffsetOutOfRange { offset: before });
        };
        log.advance_log_start(target)?;
        Ok(log.log_start_offset() as i64)
    }
}

/// The index in its batch of every record without a key (what a compacted topic refuses).
/// Batches that do not parse or decode are left to the log, which refuses them with the
/// precise reason.
/// `records` with every batch that is not under `codec` rewritten to it (a topic's
/// `compression.type`), or `None` when all of them are. A batch that cannot be read is
/// refused here with the reason the log would give.
fn recompress_all(
    records: &[u8],
    codec: skein_log::batch::Compression,
    limit: usize,
) -> Result<Option<Vec<u8>>, PartitionError> {
    let mut out: Option<Vec<u8>> = None;
    let mut at = 0usize;
    let mut index = 0usize;
    while at < records.len() {
        let refused =
            |source| PartitionError::Log(skein_log::LogError::InvalidBatch { index, source });
        let header = BatchHeader::parse(&records[at..]).map_err(refused)?;
        let end = at
            .checked_add(header.size())
            .filter(|end| *end <= records.len())
            .ok_or_else(|| {
                refused(skein_log::batch::BatchError::Truncated {
                    need: header.size(),
                    have: records.len() - at,
                })
            })?;
        let batch = &records[at..end];
        match skein_log::batch::recompress(batch, codec, limit).map_err(refused)? {
            Some(rewritten) => out
                .get_or_insert_with(|| records[..at].to_vec())
                .extend_from_slice(&rewritten),
            None => {
                if let Some(out) = out.as_mut() {
                    out.extend_from_slice(batch);
                }
            }
        }
        at = end;
        index += 1;
    }
    Ok(out)
}

fn keyless_records(records: &[u8], limit: usize) -> Vec<i32> {
    let mut keyless = Vec::new();
    let mut at = 0usize;
    while at < records.len() {
        let Ok(header) = BatchHeader::parse(&records[at..]) else {
            break;
        };
        let Some(batch) = records.get(at..at + header.size()) else {
            break;
        };
        let Ok(decoded) = skein_log::batch::DecodedRecords::decode(batch, limit) else {
            break;
        };
        for (index, record) in decoded.iter().enumerate() {
            match record {
                Ok(record) if record.key.is_none() => {
                    keyless.push(i32::try_from(index).unwrap_or(i32::MAX));
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        at += header.size();
    }
    keyless
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use skein_log::batch::{build_batch, Compression, NewRecord, ProducerFields};

    use crate::topics::{PartitionPlacement, Placement};
    use crate::{BrokerConfig, TopicInfo, TopicRegistry};

    use super::super::PartitionError;
    use super::ReplicaManager;

    fn placement(leader: i32, leader_epoch: i32) -> PartitionPlacement {
        PartitionPlacement {
            replicas: vec![1, 2],
            isr: vec![1, 2],
            leader,
            leader_epoch,
            partition_epoch: leader_epoch,
        }
    }

    fn record() -> Vec<u8> {
        let record = NewRecord {
            value: Some(b"v".to_vec()),
            ..NewRecord::default()
        };
        build_batch(&[record], Compression::None, ProducerFields::NONE).unwrap()
    }

    #[test]
    fn a_write_that_finds_leadership_moved_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = BrokerConfig::new(dir.path());
        config.node_id = 1;
        let topics = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        let id = uuid::Uuid::new_v4();
        topics.replace_all(vec![TopicInfo {
            name: "t".to_owned(),
            id,
            partitions: 1,
            configs: Default::default(),
            placement: Placement::Assigned(vec![placement(1, 3)].into()),
        }]);
        let manager = ReplicaManager::open(&config, Arc::clone(&topics)).unwrap();
        let partition = manager.leader("t", 0, -1).unwrap();
        partition.append(&record(), 1).unwrap();

        // Broker 2 takes over in epoch 4 while a request holds the partition it found.
        topics.set_partition("t", id, 0, placement(2, 4));
        let late = partition.append(&record(), 1);
        assert!(
            matches!(
                late,
                Err(PartitionError::NotLeader {
                    leader: Some((2, 4)),
                    ..
                })
            ),
            "{late:?}"
        );
        let followed = manager.follower("t", 0).unwrap();
        assert_eq!(followed.log_end(), 1);
        assert_eq!(followed.latest_epoch(), Some(3));
    }
}
