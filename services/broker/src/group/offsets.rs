//! Committed offsets: in memory for reads, and in the compacted internal topic
//! `__consumer_offsets` so they survive a restart. Records use Kafka's own layout:
//!
//! ```text
//! key   = version: i16 (1) | group: string | topic: string | partition: i32
//! value = version: i16 (3) | offset: i64 | leader_epoch: i32 | metadata: string
//!         | commit_timestamp: i64                        (null value: offset deleted)
//! ```
//! where `string` is an i16 length and UTF-8 bytes.
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

/// One committed offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Committed {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: String,
}

type Key = (String, String, i32);

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
            Self::Log(_) | Self::Batch(_) => ResponseError::UnknownServerError,
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
            .map(|(t, p, c)| ((t.clone(), *p), Some(encode_value(c, now_ms))));
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
            .map(|(t, p, c)| ((t.clone(), *p), Some(encode_value(c, now_ms))));
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
            Replicated::Done if partition.in_sync() < partition.min_insync_replicas() => Err(
                OffsetStoreError::NotAvailable("too few in-sync replicas after the write".into()),
            ),
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
        let key = encode_key(group, &topic, partition);
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
                    let (Some(key), Some(value)) = (
                        record.key.and_then(decode_key),
                        record.value.and_then(decode_value),
                    ) else {
                        continue;
                    };
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
                let Some(key) = record.key.and_then(decode_key) else {
                    continue;
                };
                match record.value.and_then(decode_value) {
                    Some(value) => {
                        let when = decoded.timestamp_of(&record);
                        let last = state.last_commit.entry(key.0.clone()).or_insert(when);
                        *last = (*last).max(when);
                        state.offsets.insert(key, (value, at));
                    }
                    None => {
                        state.offsets.remove(&key);
                    }
                }
            }
            rest = &rest[decoded.header.size()..];
        }
        position = slice.last_offset + 1;
    }
    Ok(state)
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if buf.len() < n {
        return None;
    }
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Some(head)
}

fn get_i16(buf: &mut &[u8]) -> Option<i16> {
    take(buf, 2).map(|b| i16::from_be_bytes([b[0], b[1]]))
}

fn get_i32(buf: &mut &[u8]) -> Option<i32> {
    take(buf, 4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn get_i64(buf: &mut &[u8]) -> Option<i64> {
    take(buf, 8).map(|b| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        i64::from_be_bytes(a)
    })
}

fn get_string(buf: &mut &[u8]) -> Option<String> {
    let len = usize::try_from(get_i16(buf)?).ok()?;
    String::from_utf8(take(buf, len)?.to_vec()).ok()
}

fn encode_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + group.len() + topic.len());
    out.extend_from_slice(&1i16.to_be_bytes());
    put_string(&mut out, group);
    put_string(&mut out, topic);
    out.extend_from_slice(&partition.to_be_bytes());
    out
}

fn decode_key(mut buf: &[u8]) -> Option<Key> {
    let version = get_i16(&mut buf)?;
    if !(0..=1).contains(&version) {
        return None;
    }
    Some((
        get_string(&mut buf)?,
        get_string(&mut buf)?,
        get_i32(&mut buf)?,
    ))
}

fn encode_value(c: &Committed, now_ms: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + c.metadata.len());
    out.extend_from_slice(&3i16.to_be_bytes());
    out.extend_from_slice(&c.offset.to_be_bytes());
    out.extend_from_slice(&c.leader_epoch.to_be_bytes());
    put_string(&mut out, &c.metadata);
    out.extend_from_slice(&now_ms.to_be_bytes());
    out
}

fn decode_value(mut buf: &[u8]) -> Option<Committed> {
    let version = get_i16(&mut buf)?;
    if version != 3 {
        return None;
    }
    let offset = get_i64(&mut buf)?;
    let leader_epoch = get_i32(&mut buf)?;
    let metadata = get_string(&mut buf)?;
    Some(Committed {
        offset,
        leader_epoch,
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip() {
        let key = encode_key("g", "orders", 7);
        assert_eq!(decode_key(&key), Some(("g".into(), "orders".into(), 7)));
        let c = Committed {
            offset: 42,
            leader_epoch: 3,
            metadata: "meta".into(),
        };
        assert_eq!(decode_value(&encode_value(&c, 1)), Some(c));
        assert_eq!(decode_key(&key[..5]), None);
    }
}
