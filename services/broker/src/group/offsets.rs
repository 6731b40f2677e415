//! Committed offsets: in memory for reads, and in the compacted internal topic
//! `__consumer_offsets` so they survive a restart, in Kafka's own record layout
//! ([`super::offsets_record`]).
//!
//! A broker on its own keeps the topic in a local log. In a cluster it is a replicated
//! topic like any other (partition 0, made by the controller), and the broker leading that
//! partition coordinates the tenant's groups: it loads the offsets from the log when it
//! takes the lead ([`OffsetStore::take_up`]), writes each commit with `acks=all` and answers
//! only once every in-sync replica has it, so a commit acknowledged survives the loss of its
//! coordinator. **Invariant:** what is in memory was read from, or replicated into, the log
//! of the leader epoch it was loaded in; a commit is visible only after it is replicated.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use kafka_protocol::ResponseError;
use parking_lot::RwLock;
use skein_log::batch::{
    build_marker, BatchWriter, Compression, DecodedRecords, MarkerKind, ProducerFields, TxnMarker,
};
use skein_log::{CleanupPolicy, Log, LogConfig, LogError, LogManager, SharedLog, TopicPartition};

use crate::replica::{PartitionError, ReplicaManager, Replicated};

pub(crate) const TOPIC: &str = "__consumer_offsets";

/// How long a commit waits for the in-sync replicas (Kafka's `offsets.commit.timeout.ms`).
const COMMIT_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) use super::offsets_record::Committed;
use super::offsets_record::{
    decode_key, decode_value, encode_key, encode_value, Key, OffsetsRecordError,
};

/// A producer's epoch and the offsets it committed in its open transaction, each with the
/// log offset of its record.
type Pending = (i16, Vec<(Key, Committed, i64)>);

/// Why committed offsets could not be read or stored here.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OffsetStoreError {
    /// Another broker leads the offsets partition.
    #[error("this broker does not coordinate the tenant's groups")]
    NotCoordinator,
    /// The offsets partition has no leader yet, too few in-sync replicas, or did not
    /// replicate a commit in time.
    #[error("the offsets topic is not available: {0}")]
    NotAvailable(String),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("encoding the offsets batch: {0}")]
    Batch(#[from] skein_log::batch::BatchError),
    /// A commit whose record cannot be written as it is (a string over an i16's length).
    #[error(transparent)]
    Record(#[from] OffsetsRecordError),
    /// A record of the offsets log that does not read: the log is not loaded rather than
    /// loaded without it (a commit read as a deletion would be lost silently).
    #[error("the offsets record at offset {offset} does not read: {error}")]
    Undecodable {
        offset: i64,
        error: OffsetsRecordError,
    },
    /// A transactional producer whose epoch a later one replaced.
    #[error("the producer was fenced by a newer epoch")]
    Fenced,
    /// A TxnOffsetCommit whose transaction its coordinator has not confirmed open here (or
    /// that ended while the coordinator was asked).
    #[error("the producer's transaction does not include the group's offsets")]
    NotInTransaction,
}

impl OffsetStoreError {
    /// The group API's error for it, as Kafka's coordinator answers.
    pub(crate) fn code(&self) -> ResponseError {
        match self {
            Self::NotCoordinator => ResponseError::NotCoordinator,
            Self::NotAvailable(_) => ResponseError::CoordinatorNotAvailable,
            Self::Log(_) | Self::Batch(_) | Self::Record(_) | Self::Undecodable { .. } => {
                ResponseError::UnknownServerError
            }
            Self::Fenced => ResponseError::ProducerFenced,
            Self::NotInTransaction => ResponseError::InvalidTxnState,
        }
    }

    fn of_partition(e: PartitionError) -> Self {
        match e {
            PartitionError::NotLeader { .. } | PartitionError::FencedLeaderEpoch { .. } => {
                Self::NotCoordinator
            }
            PartitionError::Log(e) => Self::Log(e),
            e => Self::NotAvailable(e.to_string()),
        }
    }
}

impl State {
    /// Forgets when `group` last committed once it has no committed offset left, so it no
    /// longer counts among the tenant's groups.
    fn forget_if_empty(&mut self, group: &str) {
        let held = self
            .offsets
            .range((group.to_owned(), String::new(), i32::MIN)..)
            .next()
            .is_some_and(|((g, _, _), _)| g == group);
        if !held {
            self.last_commit.remove(group);
        }
    }
}

/// The offsets as loaded from the log.
#[derive(Debug, Default)]
struct State {
    /// The offsets partition's leader epoch the state was loaded in (0 for a local log);
    /// `None` until this broker leads it.
    loaded_in: Option<i32>,
    /// Each committed offset with the log offset of its record: of two commits replicated
    /// out of order, the later record wins, as it does in the log.
    offsets: BTreeMap<Key, (Committed, i64)>,
    /// When each group last committed, in milliseconds (the records' timestamps on replay).
    last_commit: HashMap<String, i64>,
    /// Offsets committed in transactions not yet decided, by producer id: the producer's
    /// epoch and each commit with the log offset of its record. A commit marker applies
    /// them, an abort marker drops them (KIP-98's TxnOffsetCommit).
    pending: HashMap<i64, Pending>,
    /// The latest epoch each transactional producer wrote or was decided in here: an
    /// older epoch's TxnOffsetCommit is a zombie's.
    producer_epochs: HashMap<i64, i16>,
    /// Which producers' transaction coordinator confirmed that their open transaction
    /// includes this offsets partition; forgotten at each of their markers.
    verifications: Verifications,
}

/// KIP-890's verification for the offsets partition. A TxnOffsetCommit is written only
/// while its producer's coordinator confirms the transaction is open and holds the group's
/// offsets partition, and only if no marker of that producer was written here since the
/// coordinator was asked. Otherwise a commit racing its transaction's end (an abort at
/// timeout, or by a new instance of the producer) would land after the marker, opening a
/// transaction no coordinator knows: its offsets would stay unstable for ever.
#[derive(Debug, Default)]
struct Verifications {
    next_guard: u64,
    /// Producer id -> (epoch, guard) of a question to the coordinator under way.
    asked: HashMap<i64, (i16, u64)>,
    /// Producer id -> epoch the coordinator confirmed.
    confirmed: HashMap<i64, i16>,
}

impl Verifications {
    fn forget(&mut self, producer_id: i64) {
        self.asked.remove(&producer_id);
        self.confirmed.remove(&producer_id);
    }
}

impl State {
    /// Applies (commit) or drops (abort) the pending offsets of `producer_id`; a marker of
    /// a later epoch than the pending offsets' drops them whatever it says (they were a
    /// fenced producer's).
    fn decide(&mut self, producer_id: i64, epoch: i16, kind: MarkerKind, when: i64) {
        let seen = self.producer_epochs.entry(producer_id).or_insert(epoch);
        *seen = (*seen).max(epoch);
        let Some((pending_epoch, commits)) = self.pending.remove(&producer_id) else {
            return;
        };
        if kind != MarkerKind::Commit || pending_epoch != epoch {
            return;
        }
        for (key, committed, at) in commits {
            let last = self.last_commit.entry(key.0.clone()).or_insert(when);
            *last = (*last).max(when);
            if self.offsets.get(&key).is_none_or(|(_, old)| *old < at) {
                self.offsets.insert(key, (committed, at));
            }
        }
    }
}

#[derive(Debug)]
pub(crate) struct OffsetStore {
    /// The offsets topic's name as the broker keeps it: `__consumer_offsets`, or a tenant's
    /// `<tenant>.__consumer_offsets` on a broker serving every tenant.
    topic: String,
    /// A broker on its own: the local log. `None` in a cluster.
    local: Option<SharedLog>,
    state: RwLock<State>,
}

impl OffsetStore {
    /// A broker on its own: opens the local `__consumer_offsets` and replays it.
    pub(crate) fn open(logs: &LogManager) -> anyhow::Result<Self> {
        let config = LogConfig {
            cleanup_policy: CleanupPolicy::Compact,
            segment_bytes: 100 * 1024 * 1024,
            ..LogConfig::default()
        };
        let log = logs.get_or_create(&TopicPartition::new(TOPIC, 0), Some(config.clone()))?;
        log.write().set_config(config)?;
        let mut state = replay(&log.read())?;
        state.loaded_in = Some(0);
        Ok(Self {
            topic: TOPIC.to_owned(),
            local: Some(log),
            state: RwLock::new(state),
        })
    }

    /// A cluster's broker: nothing is loaded until it leads partition 0 of `topic` (the
    /// name the broker keeps for the tenant's offsets topic).
    pub(crate) fn replicated(topic: String) -> Self {
        Self {
            topic,
            local: None,
            state: RwLock::new(State::default()),
        }
    }

    /// Makes sure this broker may answer for the tenant's groups: on its own always; in a
    /// cluster while it leads the offsets partition, loading the offsets from its log the
    /// first time in each leader epoch. Answers whether it loaded them now (the groups'
    /// memberships from an earlier term are stale then).
    pub(crate) fn take_up(&self, replicas: &ReplicaManager) -> Result<bool, OffsetStoreError> {
        if self.local.is_some() {
            return Ok(false);
        }
        let partition = replicas
            .leader_of_any(&self.topic, 0, -1)
            .map_err(OffsetStoreError::of_partition)?;
        let epoch = partition.leader_epoch();
        if self.state.read().loaded_in == Some(epoch) {
            return Ok(false);
        }
        let mut state = self.state.write();
        if state.loaded_in == Some(epoch) {
            return Ok(false);
        }
        let mut loaded = partition.with_log(replay)?;
        loaded.loaded_in = Some(epoch);
        tracing::info!(
            epoch,
            topic = %self.topic,
            offsets = loaded.offsets.len(),
            "coordinating the groups of an offsets topic"
        );
        *state = loaded;
        Ok(true)
    }

    /// Stores commits durably in the log, then in memory.
    pub(crate) async fn commit(
        &self,
        replicas: &ReplicaManager,
        group: &str,
        commits: &[(String, i32, Committed)],
        now_ms: i64,
    ) -> Result<(), OffsetStoreError> {
        let entries = commits
            .iter()
            .map(|(t, p, c)| Ok(((t.clone(), *p), Some(encode_value(c, now_ms)?))))
            .collect::<Result<Vec<_>, OffsetsRecordError>>()?
            .into_iter();
        let Some((epoch, base)) = self.write(replicas, group, entries, now_ms, None).await? else {
            return Ok(());
        };
        let mut state = self.state.write();
        if state.loaded_in != Some(epoch) {
            return Err(OffsetStoreError::NotCoordinator);
        }
        for (i, (topic, partition, c)) in commits.iter().enumerate() {
            let at = base + i as i64;
            let key = (group.to_owned(), topic.clone(), *partition);
            if state.offsets.get(&key).is_none_or(|(_, old)| *old < at) {
                state.offsets.insert(key, (c.clone(), at));
            }
        }
        state.last_commit.insert(group.to_owned(), now_ms);
        Ok(())
    }

    /// Groups whose last commit is older than `retention_ms` before `now_ms`.
    pub(crate) fn committed_before(&self, now_ms: i64, retention_ms: i64) -> Vec<String> {
        let groups = self.groups();
        let state = self.state.read();
        groups
            .into_iter()
            .filter(|g| {
                state
                    .last_commit
                    .get(g)
                    .is_none_or(|at| at.saturating_add(retention_ms) <= now_ms)
            })
            .collect()
    }

    /// Deletes committed offsets: tombstones in the log, then out of memory.
    pub(crate) async fn delete(
        &self,
        replicas: &ReplicaManager,
        group: &str,
        keys: &[(String, i32)],
        now_ms: i64,
    ) -> Result<(), OffsetStoreError> {
        let entries = keys.iter().map(|(t, p)| ((t.clone(), *p), None));
        let Some((epoch, base)) = self.write(replicas, group, entries, now_ms, None).await? else {
            return Ok(());
        };
        let mut state = self.state.write();
        if state.loaded_in != Some(epoch) {
            return Err(OffsetStoreError::NotCoordinator);
        }
        for (i, (topic, partition)) in keys.iter().enumerate() {
            let key = (group.to_owned(), topic.clone(), *partition);
            if state
                .offsets
                .get(&key)
                .is_some_and(|(_, old)| *old < base + i as i64)
            {
                state.offsets.remove(&key);
            }
        }
        state.forget_if_empty(group);
        Ok(())
    }

    /// Starts KIP-890's verification of `producer`'s transaction for this offsets partition:
    /// `None` when its coordinator already confirmed it (and no marker came since), else the
    /// guard to hand to [`OffsetStore::confirm_verification`] once the coordinator answers.
    pub(crate) fn begin_verification(&self, producer: (i64, i16)) -> Option<u64> {
        let mut state = self.state.write();
        let verifications = &mut state.verifications;
        if verifications.confirmed.get(&producer.0) == Some(&producer.1) {
            return None;
        }
        verifications.next_guard += 1;
        let guard = verifications.next_guard;
        verifications.asked.insert(producer.0, (producer.1, guard));
        Some(guard)
    }

    /// Records the coordinator's confirmation; false if a marker of the producer was
    /// written here since it was asked (the confirmation is stale then).
    pub(crate) fn confirm_verification(&self, producer: (i64, i16), guard: u64) -> bool {
        let mut state = self.state.write();
        let verifications = &mut state.verifications;
        if verifications.asked.get(&producer.0) != Some(&(producer.1, guard)) {
            return false;
        }
        verifications.asked.remove(&producer.0);
        verifications.confirmed.insert(producer.0, producer.1);
        true
    }

    /// Offsets a transactional producer commits (TxnOffsetCommit): written to the log in
    /// its transaction, applied when its commit marker comes ([`OffsetStore::write_marker`]).
    /// A producer epoch older than one already seen here is fenced; a producer whose
    /// transaction is not verified ([`OffsetStore::begin_verification`]) is refused. The
    /// check, the append and the pending offsets happen under one lock, which markers take
    /// too, so the pending offsets are in the order of the log.
    pub(crate) async fn commit_in_transaction(
        &self,
        replicas: &ReplicaManager,
        group: &str,
        producer: (i64, i16),
        commits: &[(String, i32, Committed)],
        now_ms: i64,
    ) -> Result<(), OffsetStoreError> {
        let (producer_id, producer_epoch) = producer;
        let entries = commits
            .iter()
            .map(|(t, p, c)| Ok(((t.clone(), *p), Some(encode_value(c, now_ms)?))))
            .collect::<Result<Vec<_>, OffsetsRecordError>>()?
            .into_iter();
        let Some(mut batch) = encode_batch(group, entries, now_ms, Some(producer))? else {
            return Ok(());
        };
        let (epoch, end) = {
            let mut state = self.state.write();
            if state
                .producer_epochs
                .get(&producer_id)
                .is_some_and(|seen| *seen > producer_epoch)
            {
                return Err(OffsetStoreError::Fenced);
            }
            if state.verifications.confirmed.get(&producer_id) != Some(&producer_epoch) {
                return Err(OffsetStoreError::NotInTransaction);
            }
            let (epoch, base, end) = self.append(&state, replicas, &mut batch, false)?;
            let pending = state
                .pending
                .entry(producer_id)
                .or_insert((producer_epoch, Vec::new()));
            if pending.0 != producer_epoch {
                *pending = (producer_epoch, Vec::new());
            }
            for (i, (topic, partition, c)) in commits.iter().enumerate() {
                let key = (group.to_owned(), topic.clone(), *partition);
                pending.1.push((key, c.clone(), base + i as i64));
            }
            let seen = state
                .producer_epochs
                .entry(producer_id)
                .or_insert(producer_epoch);
            *seen = (*seen).max(producer_epoch);
            (epoch, end)
        };
        self.settle(replicas, epoch, end).await
    }

    /// Writes a transaction marker for `producer_id` (as its transaction coordinator asks)
    /// and then applies or drops the offsets it committed in that transaction.
    pub(crate) async fn write_marker(
        &self,
        replicas: &ReplicaManager,
        producer: (i64, i16),
        marker: TxnMarker,
        now_ms: i64,
    ) -> Result<(), OffsetStoreError> {
        let (producer_id, producer_epoch) = producer;
        let mut batch = build_marker(marker, producer_id, producer_epoch, now_ms)?;
        let (epoch, end) = {
            let mut state = self.state.write();
            let (epoch, _, end) = self.append(&state, replicas, &mut batch, true)?;
            state.verifications.forget(producer_id);
            (epoch, end)
        };
        self.settle(replicas, epoch, end).await?;
        let mut state = self.state.write();
        if state.loaded_in != Some(epoch) {
            return Err(OffsetStoreError::NotCoordinator);
        }
        state.decide(producer_id, producer_epoch, marker.kind, now_ms);
        Ok(())
    }

    /// Appends `batch` (a marker if `marker`) to the offsets partition as its leader in the
    /// epoch `state` was loaded in, without waiting for replicas: answers that epoch, the
    /// batch's first offset and the log's end after it.
    fn append(
        &self,
        state: &State,
        replicas: &ReplicaManager,
        batch: &mut [u8],
        marker: bool,
    ) -> Result<(i32, i64, i64), OffsetStoreError> {
        if let Some(log) = &self.local {
            let mut log = log.write();
            let info = if marker {
                log.append_markers(batch, 0)?
            } else {
                log.append(batch, 0)?
            };
            return Ok((0, info.first_offset as i64, info.last_offset as i64 + 1));
        }
        let Some(epoch) = state.loaded_in else {
            return Err(OffsetStoreError::NotCoordinator);
        };
        let partition = replicas
            .leader_of_any(&self.topic, 0, epoch)
            .map_err(OffsetStoreError::of_partition)?;
        let appended = if marker {
            partition.append_markers(batch)
        } else {
            partition.append_as_coordinator(batch)
        }
        .map_err(OffsetStoreError::of_partition)?;
        Ok((epoch, appended.base_offset, appended.end_offset))
    }

    /// In a cluster, waits until the in-sync replicas of the offsets partition (led in
    /// `epoch`) have it up to `end`.
    async fn settle(
        &self,
        replicas: &ReplicaManager,
        epoch: i32,
        end: i64,
    ) -> Result<(), OffsetStoreError> {
        if self.local.is_some() {
            return Ok(());
        }
        let partition = replicas
            .leader_of_any(&self.topic, 0, epoch)
            .map_err(OffsetStoreError::of_partition)?;
        self.await_replicas(&partition, end).await
    }

    /// Waits until the in-sync replicas have the offsets partition up to `end`.
    async fn await_replicas(
        &self,
        partition: &crate::replica::Partition<'_>,
        end: i64,
    ) -> Result<(), OffsetStoreError> {
        let deadline = tokio::time::Instant::now() + COMMIT_TIMEOUT;
        match partition.replicated(end, deadline).await {
            Replicated::BelowMinInsync => Err(OffsetStoreError::NotAvailable(
                "too few in-sync replicas after the write".into(),
            )),
            Replicated::Done => Ok(()),
            Replicated::TimedOut => Err(OffsetStoreError::NotAvailable(
                "the in-sync replicas did not confirm the write in time".into(),
            )),
            Replicated::NotLeader { .. } => Err(OffsetStoreError::NotCoordinator),
        }
    }

    /// Appends one record per ((topic, partition), value) to `__consumer_offsets` (a `None`
    /// value is a tombstone), in `producer`'s transaction when one is given, and, in a
    /// cluster, waits until the in-sync replicas have it. Answers the leader epoch it was
    /// written in and the offset of its first record, or `None` for nothing to write.
    async fn write(
        &self,
        replicas: &ReplicaManager,
        group: &str,
        entries: impl Iterator<Item = ((String, i32), Option<Vec<u8>>)>,
        now_ms: i64,
        producer: Option<(i64, i16)>,
    ) -> Result<Option<(i32, i64)>, OffsetStoreError> {
        let Some(mut batch) = encode_batch(group, entries, now_ms, producer)? else {
            return Ok(None);
        };
        let (epoch, base, end) = {
            let state = self.state.read();
            self.append(&state, replicas, &mut batch, false)?
        };
        self.settle(replicas, epoch, end).await?;
        Ok(Some((epoch, base)))
    }

    /// The offsets topic's name as the broker keeps it.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// Whether this broker coordinates these groups now: on its own always; in a cluster
    /// while it leads the offsets partition in the epoch it loaded them in.
    pub(crate) fn coordinating(&self, replicas: &ReplicaManager) -> bool {
        if self.local.is_some() {
            return true;
        }
        let loaded_in = self.state.read().loaded_in;
        replicas
            .leader_of_any(&self.topic, 0, -1)
            .is_ok_and(|partition| loaded_in == Some(partition.leader_epoch()))
    }

    /// Every committed offset: (group, topic, partition, offset).
    pub(crate) fn committed_offsets(&self) -> Vec<(String, String, i32, i64)> {
        self.state
            .read()
            .offsets
            .iter()
            .map(|((group, topic, partition), (committed, _))| {
                (group.clone(), topic.clone(), *partition, committed.offset)
            })
            .collect()
    }

    pub(crate) fn get(&self, group: &str, topic: &str, partition: i32) -> Option<Committed> {
        self.state
            .read()
            .offsets
            .get(&(group.to_owned(), topic.to_owned(), partition))
            .map(|(c, _)| c.clone())
    }

    /// Whether a transaction not yet decided holds an offset of `group` for the partition:
    /// OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT for it (KIP-447),
    /// and the client asks again once the transaction's marker is written.
    pub(crate) fn is_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.state.read().pending.values().any(|(_, commits)| {
            commits
                .iter()
                .any(|((g, t, p), _, _)| g == group && t == topic && *p == partition)
        })
    }

    /// The partitions with an offset of `group` pending in a transaction not yet decided.
    pub(crate) fn pending_of(&self, group: &str) -> Vec<(String, i32)> {
        let state = self.state.read();
        let mut found: Vec<(String, i32)> = state
            .pending
            .values()
            .flat_map(|(_, commits)| commits)
            .filter(|((g, _, _), _, _)| g == group)
            .map(|((_, t, p), _, _)| (t.clone(), *p))
            .collect();
        found.sort();
        found.dedup();
        found
    }

    /// Every committed offset of a group: (topic, partition, committed).
    pub(crate) fn all(&self, group: &str) -> Vec<(String, i32, Committed)> {
        self.state
            .read()
            .offsets
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, t, p), (c, _))| (t.clone(), *p, c.clone()))
            .collect()
    }

    /// How many groups have committed here, and whether `group` is one of them.
    pub(crate) fn group_count(&self, group: &str) -> (usize, bool) {
        let state = self.state.read();
        (
            state.last_commit.len(),
            state.last_commit.contains_key(group),
        )
    }

    /// Groups that have committed offsets.
    pub(crate) fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = self
            .state
            .read()
            .offsets
            .keys()
            .map(|(g, _, _)| g.clone())
            .collect();
        groups.dedup();
        groups
    }
}

/// One batch of a record per ((topic, partition), value) of `group` (a `None` value is a
/// tombstone), in `producer`'s transaction when one is given; `None` for nothing to write.
fn encode_batch(
    group: &str,
    entries: impl Iterator<Item = ((String, i32), Option<Vec<u8>>)>,
    now_ms: i64,
    producer: Option<(i64, i16)>,
) -> Result<Option<Vec<u8>>, OffsetStoreError> {
    let mut writer = BatchWriter::new();
    for ((topic, partition), value) in entries {
        let key = encode_key(group, &topic, partition)?;
        writer.push(now_ms, Some(&key), value.as_deref(), &[]);
    }
    if writer.is_empty() {
        return Ok(None);
    }
    let batch = match producer {
        None => writer.finish(Compression::None, ProducerFields::NONE)?,
        // Sequence numbers are not checked on this partition: the transaction
        // coordinator fences the producer, and the epochs above its zombies.
        Some((producer_id, producer_epoch)) => writer.finish_transactional(
            Compression::None,
            ProducerFields {
                producer_id,
                producer_epoch,
                base_sequence: -1,
            },
        )?,
    };
    Ok(Some(batch))
}

/// Reads every record of an offsets log into the state it describes.
fn replay(log: &Log) -> Result<State, OffsetStoreError> {
    let mut state = State::default();
    let mut position = log.log_start_offset();
    while position < log.log_end_offset() {
        let slice = log.read(position, 1 << 20, None)?;
        if slice.is_empty() {
            break;
        }
        let bytes = slice.to_verified_bytes()?;
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let decoded = DecodedRecords::decode(rest, skein_log::batch::MAX_DECOMPRESSED)?;
            let header = decoded.header;
            if header.is_control() {
                let batch = &rest[..header.size()];
                if let Ok(marker) = skein_log::batch::read_marker(batch, &header) {
                    state.decide(
                        header.producer_id,
                        header.producer_epoch,
                        marker.kind,
                        header.max_timestamp,
                    );
                }
                rest = &rest[header.size()..];
                continue;
            }
            if header.is_transactional() && header.producer_id >= 0 {
                // Pending until its marker, which a later batch holds.
                let mut commits = Vec::new();
                for record in decoded.iter() {
                    let record = record?;
                    let at = header.base_offset + i64::from(record.offset_delta);
                    let undecodable = |error| OffsetStoreError::Undecodable { offset: at, error };
                    let key = decode_key(record.key.unwrap_or_default()).map_err(undecodable)?;
                    // A transaction commits offsets, never deletes them.
                    let value =
                        decode_value(record.value.unwrap_or_default()).map_err(undecodable)?;
                    commits.push((key, value, at));
                }
                let pending = state
                    .pending
                    .entry(header.producer_id)
                    .or_insert((header.producer_epoch, Vec::new()));
                if pending.0 != header.producer_epoch {
                    *pending = (header.producer_epoch, Vec::new());
                }
                pending.1.extend(commits);
                let seen = state
                    .producer_epochs
                    .entry(header.producer_id)
                    .or_insert(header.producer_epoch);
                *seen = (*seen).max(header.producer_epoch);
                rest = &rest[header.size()..];
                continue;
            }
            for record in decoded.iter() {
                let record = record?;
                let at = decoded.header.base_offset + i64::from(record.offset_delta);
                let undecodable = |error| OffsetStoreError::Undecodable { offset: at, error };
                let key = decode_key(record.key.unwrap_or_default()).map_err(undecodable)?;
                // A null value deletes; any other must read as a commit.
                match record
                    .value
                    .map(decode_value)
                    .transpose()
                    .map_err(undecodable)?
                {
                    Some(value) => {
                        let when = decoded.timestamp_of(&record);
                        let last = state.last_commit.entry(key.0.clone()).or_insert(when);
                        *last = (*last).max(when);
                        state.offsets.insert(key, (value, at));
                    }
                    None => {
                        let group = key.0.clone();
                        state.offsets.remove(&key);
                        state.forget_if_empty(&group);
                    }
                }
            }
            rest = &rest[decoded.header.size()..];
        }
        position = slice.last_offset + 1;
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use proptest::prelude::*;

    use crate::config::BrokerConfig;
    use crate::topics::TopicRegistry;

    /// Group ids as clients may choose them: short, non-ASCII, and as long as allowed.
    fn group_of(index: usize) -> String {
        match index {
            0 => "payroll".to_owned(),
            1 => "ünïcödé-group".to_owned(),
            2 => "g".repeat(crate::limits::MAX_GROUP_ID_BYTES),
            _ => format!("group-{index}"),
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Commit {
            group: usize,
            topic: usize,
            partition: i32,
            offset: i64,
            metadata: usize,
        },
        Delete {
            group: usize,
            topic: usize,
            partition: i32,
        },
        /// Every offset of the group goes, as when its offsets expire.
        Expire { group: usize },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..4usize, 0..2usize, 0..3i32, any::<i64>(), 0..=crate::limits::OFFSET_METADATA_MAX_BYTES)
                .prop_map(|(group, topic, partition, offset, metadata)| Op::Commit {
                    group, topic, partition, offset, metadata
                }),
            1 => (0..4usize, 0..2usize, 0..3i32)
                .prop_map(|(group, topic, partition)| Op::Delete { group, topic, partition }),
            1 => (0..4usize).prop_map(|group| Op::Expire { group }),
        ]
    }

    /// Opens the broker's logs in `dir` and the local offsets store over them.
    fn open(dir: &std::path::Path) -> (ReplicaManager, OffsetStore) {
        let topics = Arc::new(TopicRegistry::open(dir).unwrap());
        let replicas = ReplicaManager::open(&BrokerConfig::new(dir), topics).unwrap();
        let store = OffsetStore::open(replicas.logs()).unwrap();
        (replicas, store)
    }

    type Model = BTreeMap<(String, String, i32), Committed>;

    fn apply(
        runtime: &tokio::runtime::Runtime,
        replicas: &ReplicaManager,
        store: &OffsetStore,
        model: &mut Model,
        op: &Op,
    ) {
        let topics = ["orders", "secret"];
        match op {
            Op::Commit {
                group,
                topic,
                partition,
                offset,
                metadata,
            } => {
                let group = group_of(*group);
                let committed = Committed {
                    offset: *offset,
                    leader_epoch: -1,
                    metadata: "m".repeat(*metadata),
                };
                let commits = [(topics[*topic].to_owned(), *partition, committed.clone())];
                runtime
                    .block_on(store.commit(replicas, &group, &commits, 1))
                    .unwrap();
                model.insert((group, topics[*topic].to_owned(), *partition), committed);
            }
            Op::Delete {
                group,
                topic,
                partition,
            } => {
                let group = group_of(*group);
                let keys = [(topics[*topic].to_owned(), *partition)];
                runtime
                    .block_on(store.delete(replicas, &group, &keys, 1))
                    .unwrap();
                model.remove(&(group, topics[*topic].to_owned(), *partition));
            }
            Op::Expire { group } => {
                let group = group_of(*group);
                let keys: Vec<(String, i32)> = store
                    .all(&group)
                    .into_iter()
                    .map(|(t, p, _)| (t, p))
                    .collect();
                runtime
                    .block_on(store.delete(replicas, &group, &keys, 1))
                    .unwrap();
                model.retain(|(g, _, _), _| *g != group);
            }
        }
    }

    fn held(store: &OffsetStore) -> Model {
        (0..4)
            .map(group_of)
            .flat_map(|group| {
                store
                    .all(&group)
                    .into_iter()
                    .map(move |(t, p, c)| ((group.clone(), t, p), c))
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Whatever commits, deletions and expiries were acknowledged, a restart reloads
        /// exactly them, each under the key it was written with.
        #[test]
        fn a_reload_rebuilds_exactly_what_was_acknowledged(ops in proptest::collection::vec(op(), 1..40)) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let mut model = Model::new();
            {
                let (replicas, store) = open(dir.path());
                for op in &ops {
                    apply(&runtime, &replicas, &store, &mut model, op);
                }
                prop_assert_eq!(held(&store), model.clone());
            }
            let (_replicas, store) = open(dir.path());
            prop_assert_eq!(held(&store), model);
        }
    }

    #[test]
    fn a_group_whose_offsets_are_all_deleted_no_longer_counts_among_the_groups() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let committed = Committed {
            offset: 1,
            leader_epoch: -1,
            metadata: String::new(),
        };
        {
            let (replicas, store) = open(dir.path());
            for group in ["a", "b"] {
                let commits = [
                    ("t".to_owned(), 0, committed.clone()),
                    ("t".to_owned(), 1, committed.clone()),
                ];
                runtime
                    .block_on(store.commit(&replicas, group, &commits, 1))
                    .unwrap();
            }
            assert_eq!(store.group_count("a"), (2, true));
            let keys = [("t".to_owned(), 0), ("t".to_owned(), 1)];
            runtime
                .block_on(store.delete(&replicas, "a", &keys, 1))
                .unwrap();
            assert_eq!(store.group_count("a"), (1, false));
        }
        // The same after a reload.
        let (_replicas, store) = open(dir.path());
        assert_eq!(store.group_count("a"), (1, false));
        assert_eq!(store.group_count("b"), (1, true));
    }

    #[test]
    fn an_offsets_record_that_does_not_read_stops_the_load_instead_of_deleting() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        {
            let (replicas, store) = open(dir.path());
            let commits = [(
                "orders".to_owned(),
                0,
                Committed {
                    offset: 5,
                    leader_epoch: -1,
                    metadata: String::new(),
                },
            )];
            runtime
                .block_on(store.commit(&replicas, "payroll", &commits, 1))
                .unwrap();
            // A record whose value is not a commit (a future encoding, or damage).
            let key = encode_key("payroll", "orders", 0).unwrap();
            let mut writer = BatchWriter::new();
            writer.push(2, Some(&key), Some(b"\x00\x09garbage"), &[]);
            let mut batch = writer
                .finish(Compression::None, ProducerFields::NONE)
                .unwrap();
            let log = replicas
                .logs()
                .get_or_create(&TopicPartition::new(TOPIC, 0), None)
                .unwrap();
            log.write().append(&mut batch, 0).unwrap();
        }
        let topics = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        let replicas = ReplicaManager::open(&BrokerConfig::new(dir.path()), topics).unwrap();
        let error = OffsetStore::open(replicas.logs()).unwrap_err();
        assert!(error.to_string().contains("does not read"), "{error}");
    }
}
