//! Idempotent producers: producer ids, and per partition the recent sequence numbers of each
//! producer, so a retried batch is answered with its first offset instead of being written
//! twice and a gap is refused. The state is rebuilt from the batch headers in the log the
//! first time a partition sees a producer after the broker starts.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use skein_log::batch::BatchHeader;
use skein_log::{Log, LogError, TopicPartition};

use crate::scope::Tenancy;

/// How many recent batches per producer are remembered for deduplication (Kafka's
/// `max.in.flight.requests.per.connection` limit for idempotence).
const REMEMBERED_BATCHES: usize = 5;
/// Producer ids are handed out from blocks; a block's end is persisted before any id in it
/// is used, so no id is ever handed out twice, even across crashes.
const ID_BLOCK: i64 = 1000;

/// Allocates producer ids.
#[derive(Debug)]
pub(crate) struct ProducerIds {
    source: IdSource,
    /// (next id, end of the current block)
    next: Mutex<(i64, i64)>,
}

/// Where blocks of producer ids come from.
#[derive(Debug)]
enum IdSource {
    /// The end of the last block handed out, persisted before use in `<data>/producer-ids`.
    File(PathBuf),
    /// The controller, which hands out cluster-wide blocks that never overlap.
    Controller(Box<crate::controller_link::ControllerLink>),
}

/// Why no producer id could be handed out.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProducerIdError {
    #[error("failed to persist the producer id block: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Controller(#[from] crate::controller_link::ControllerError),
}

impl ProducerIds {
    pub(crate) fn open(data_dir: &Path) -> Self {
        let path = data_dir.join("producer-ids");
        let persisted = fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse::<i64>().ok())
            .unwrap_or(0)
            .max(0);
        Self {
            source: IdSource::File(path),
            next: Mutex::new((persisted, persisted)),
        }
    }

    /// Ids from the controller's blocks.
    pub(crate) fn controlled(link: crate::controller_link::ControllerLink) -> Self {
        Self {
            source: IdSource::Controller(Box::new(link)),
            next: Mutex::new((0, 0)),
        }
    }

    pub(crate) async fn allocate(&self) -> Result<i64, ProducerIdError> {
        match &self.source {
            IdSource::File(path) => {
                let mut next = self.next.lock();
                if next.0 >= next.1 {
                    let end = next.1 + ID_BLOCK;
                    let tmp = path.with_extension("tmp");
                    let mut file = fs::File::create(&tmp)?;
                    writeln!(file, "{end}")?;
                    file.sync_all()?;
                    fs::rename(&tmp, path)?;
                    next.1 = end;
                }
                let id = next.0;
                next.0 += 1;
                Ok(id)
            }
            IdSource::Controller(link) => loop {
                {
                    let mut next = self.next.lock();
                    if next.0 < next.1 {
                        let id = next.0;
                        next.0 += 1;
                        return Ok(id);
                    }
                }
                // The block is used up: fetch another (a concurrent fetch wastes one block,
                // never hands out an id twice).
                let (first, size) = link.allocate_producer_ids().await?;
                let mut next = self.next.lock();
                if next.0 >= next.1 {
                    *next = (first, first + i64::from(size));
                }
            },
        }
    }
}

#[derive(Debug, Default)]
struct ProducerEntry {
    epoch: i16,
    /// (first sequence, last sequence, base offset) of recent batches, oldest first.
    batches: VecDeque<(i32, i32, i64)>,
    /// When this broker last wrote (or, after a start, loaded) a batch of the producer, in
    /// wall-clock milliseconds: its state expires `producer.id.expiration.ms` after that.
    last_write_ms: i64,
    /// Counted against the tenant's bound: made by a write to this broker, not rebuilt from
    /// the log.
    counted: bool,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// What to do with an incoming batch of an idempotent producer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Append,
    /// Already written at this base offset: answer with it, write nothing.
    Duplicate {
        base_offset: i64,
    },
    Reject(ResponseError),
}

fn last_sequence(h: &BatchHeader) -> i32 {
    ((h.base_sequence as i64 + h.last_offset_delta as i64) % (i32::MAX as i64 + 1)) as i32
}

fn next_sequence(last: i32) -> i32 {
    if last == i32::MAX {
        0
    } else {
        last + 1
    }
}

/// A producer as DescribeProducers shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProducerView {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    /// The last sequence number written, -1 when none is remembered.
    pub(crate) last_sequence: i32,
    pub(crate) last_write_ms: i64,
    /// The first offset of its open transaction in the partition.
    pub(crate) open_since: Option<u64>,
}

#[derive(Debug, Default)]
pub(crate) struct PartitionProducers {
    loaded: bool,
    producers: HashMap<i64, ProducerEntry>,
    /// The producer states of every partition of the partition's tenant.
    held: Held,
    /// Transactional producers (id, epoch) whose coordinator confirmed that their open
    /// transaction includes this partition; forgotten at the transaction's marker.
    verified: HashMap<i64, i16>,
}

impl PartitionProducers {
    /// Rebuilds the state from the log's batch headers, once.
    pub(crate) fn load(&mut self, log: &Log) -> Result<(), LogError> {
        if self.loaded {
            return Ok(());
        }
        let mut producers: HashMap<i64, ProducerEntry> = HashMap::new();
        log.for_each_batch_header(log.log_start_offset(), |h| {
            if h.producer_id >= 0 && h.is_control() {
                let entry = producers.entry(h.producer_id).or_default();
                if h.producer_epoch > entry.epoch {
                    entry.batches.clear();
                    entry.epoch = h.producer_epoch;
                }
            } else if h.producer_id >= 0 {
                let entry = producers.entry(h.producer_id).or_default();
                if h.producer_epoch != entry.epoch {
                    entry.batches.clear();
                    entry.epoch = h.producer_epoch;
                }
                remember(entry, h, h.base_offset);
            }
        })?;
        // Rebuilt producers are kept as written now, so that a retry after a failover is
        // still a duplicate (a batch's own timestamp is the client's, and may be old). They
        // are not counted against the tenant's bound: each stands for batches the log
        // already holds, bounded by the tenant's retention and storage, and counting them
        // would lock a tenant out of new producers after a failover for a day.
        let loaded_at = now_ms();
        for entry in producers.values_mut() {
            entry.last_write_ms = loaded_at;
        }
        self.held.less(self.counted());
        self.producers = producers;
        self.loaded = true;
        Ok(())
    }

    /// The state of a producer that just wrote here, made (and counted against the
    /// tenant's bound) when it is new.
    fn written(&mut self, producer_id: i64) -> &mut ProducerEntry {
        let held = &self.held;
        self.producers.entry(producer_id).or_insert_with(|| {
            held.more(1);
            ProducerEntry {
                counted: true,
                ..ProducerEntry::default()
            }
        })
    }

    /// How many of the producers here count against the tenant's bound.
    fn counted(&self) -> usize {
        self.producers.values().filter(|p| p.counted).count()
    }

    pub(crate) fn check(&self, h: &BatchHeader) -> Verdict {
        let Some(entry) = self.producers.get(&h.producer_id) else {
            return if h.base_sequence != 0 {
                Verdict::Reject(ResponseError::OutOfOrderSequenceNumber)
            } else if self.held.is_full() {
                // A producer new to the partition would take one more of the tenant's
                // states: refused until idle ones expire.
                Verdict::Reject(ResponseError::PolicyViolation)
            } else {
                Verdict::Append
            };
        };
        if h.producer_epoch < entry.epoch {
            return Verdict::Reject(ResponseError::InvalidProducerEpoch);
        }
        if h.producer_epoch > entry.epoch {
            return if h.base_sequence == 0 {
                Verdict::Append
            } else {
                Verdict::Reject(ResponseError::OutOfOrderSequenceNumber)
            };
        }
        let last = last_sequence(h);
        if let Some(&(_, _, base)) = entry
            .batches
            .iter()
            .find(|(first, l, _)| *first == h.base_sequence && *l == last)
        {
            return Verdict::Duplicate { base_offset: base };
        }
        match entry.batches.back() {
            Some(&(_, l, _)) if next_sequence(l) == h.base_sequence => Verdict::Append,
            None if h.base_sequence == 0 => Verdict::Append,
            _ => Verdict::Reject(ResponseError::OutOfOrderSequenceNumber),
        }
    }

    /// Records a batch just appended at `base_offset`.
    pub(crate) fn record(&mut self, h: &BatchHeader, base_offset: i64) {
        let entry = self.written(h.producer_id);
        if h.producer_epoch != entry.epoch {
            entry.batches.clear();
            entry.epoch = h.producer_epoch;
        }
        remember(entry, h, base_offset);
        entry.last_write_ms = now_ms();
    }

    /// Follows a transaction marker just written: a marker of a later epoch (a
    /// transaction the coordinator aborted when it fenced the producer) fences the
    /// producer's older epochs here; its sequence numbers go on in the same epoch.
    pub(crate) fn record_marker(&mut self, h: &BatchHeader) {
        self.verified.remove(&h.producer_id);
        let entry = self.written(h.producer_id);
        if h.producer_epoch > entry.epoch {
            entry.batches.clear();
            entry.epoch = h.producer_epoch;
        }
        entry.last_write_ms = now_ms();
    }

    /// Whether the coordinator confirmed this producer's transaction includes the
    /// partition (since its last marker here).
    pub(crate) fn is_verified(&self, producer_id: i64, epoch: i16) -> bool {
        self.verified.get(&producer_id) == Some(&epoch)
    }

    pub(crate) fn set_verified(&mut self, producer_id: i64, epoch: i16) {
        self.verified.insert(producer_id, epoch);
    }

    /// Each producer known here, by id.
    pub(crate) fn describe(&self) -> Vec<ProducerView> {
        let mut all: Vec<_> = self
            .producers
            .iter()
            .map(|(id, p)| ProducerView {
                producer_id: *id,
                epoch: p.epoch,
                last_sequence: p.batches.back().map_or(-1, |(_, last, _)| *last),
                last_write_ms: p.last_write_ms,
                open_since: None,
            })
            .collect();
        all.sort_unstable_by_key(|p| p.producer_id);
        all
    }

    /// Forgets producers that wrote nothing for `expiration_ms` before `now_ms`; answers how
    /// many.
    fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let (before, counted) = (self.producers.len(), self.counted());
        self.producers
            .retain(|_, p| p.last_write_ms.saturating_add(expiration_ms) > now_ms);
        self.held.less(counted - self.counted());
        before - self.producers.len()
    }
}

/// A count of producer states shared by the partitions of one tenant, and its bound.
#[derive(Debug, Clone, Default)]
struct Held {
    count: Arc<AtomicUsize>,
    /// 0: no bound (a partition state made outside [`ProducerStates`]).
    most: usize,
    /// The partition was forgotten, its states given back: a write that still holds its
    /// old state counts nothing more.
    retired: bool,
}

impl Held {
    fn is_full(&self) -> bool {
        self.most > 0 && self.count.load(Ordering::Relaxed) >= self.most
    }

    fn more(&self, n: usize) {
        if !self.retired {
            self.count.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn less(&self, n: usize) {
        if self.retired {
            return;
        }
        let _ = self
            .count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                Some(c.saturating_sub(n))
            });
    }

    /// Gives back the `n` states of a forgotten partition, once.
    fn retire(&mut self, n: usize) {
        self.less(n);
        self.retired = true;
    }
}

fn remember(entry: &mut ProducerEntry, h: &BatchHeader, base_offset: i64) {
    entry
        .batches
        .push_back((h.base_sequence, last_sequence(h), base_offset));
    while entry.batches.len() > REMEMBERED_BATCHES {
        entry.batches.pop_front();
    }
}

/// The producer state of every partition, and how many producer states each tenant holds:
/// a producer new to a partition is refused (POLICY_VIOLATION) once its tenant holds
/// `most_per_tenant`, until idle ones expire, so that a tenant minting producer ids cannot
/// grow the shared broker without bound.
#[derive(Debug)]
pub(crate) struct ProducerStates {
    tenancy: Tenancy,
    most_per_tenant: usize,
    partitions: Mutex<HashMap<TopicPartition, Arc<Mutex<PartitionProducers>>>>,
    /// Per tenant (`None` for a broker serving one), the count its partitions share.
    held: Mutex<HashMap<Option<String>, Arc<AtomicUsize>>>,
}

impl ProducerStates {
    pub(crate) fn new(tenancy: Tenancy, most_per_tenant: usize) -> Self {
        Self {
            tenancy,
            most_per_tenant,
            partitions: Mutex::default(),
            held: Mutex::default(),
        }
    }

    pub(crate) fn partition(&self, tp: &TopicPartition) -> Arc<Mutex<PartitionProducers>> {
        let mut partitions = self.partitions.lock();
        if let Some(state) = partitions.get(tp) {
            return Arc::clone(state);
        }
        let tenant = self.tenancy.split(&tp.topic).0.map(str::to_owned);
        let count = Arc::clone(self.held.lock().entry(tenant).or_default());
        let state = Arc::new(Mutex::new(PartitionProducers {
            held: Held {
                count,
                most: self.most_per_tenant,
                retired: false,
            },
            ..PartitionProducers::default()
        }));
        partitions.insert(tp.clone(), Arc::clone(&state));
        state
    }

    /// Forgets a deleted partition, and gives its producer states back to its tenant.
    pub(crate) fn forget(&self, tp: &TopicPartition) {
        if let Some(state) = self.partitions.lock().remove(tp) {
            let mut state = state.lock();
            let n = state.counted();
            state.held.retire(n);
        }
    }

    /// How many producer states the tenant of `topic` holds.
    #[cfg(test)]
    fn held_by(&self, topic: &str) -> usize {
        let tenant = self.tenancy.split(topic).0.map(str::to_owned);
        self.held
            .lock()
            .get(&tenant)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Forgets every producer idle for `producer.id.expiration.ms` (as Kafka does), so that
    /// the state does not grow with every producer id ever seen; answers how many.
    pub(crate) fn expire(&self, expiration_ms: i64) -> usize {
        let now = now_ms();
        let partitions: Vec<_> = self.partitions.lock().values().cloned().collect();
        partitions
            .iter()
            .map(|p| p.lock().expire(now, expiration_ms))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_producers_expire_and_active_ones_stay() {
        let header = |producer_id: i64| BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id,
            producer_epoch: 0,
            base_sequence: 0,
            records_count: 1,
        };
        let mut state = PartitionProducers::default();
        state.record(&header(1), 0);
        state.record(&header(2), 1);
        // A retry of producer 1's batch is a duplicate while its state is kept.
        assert_eq!(
            state.check(&header(1)),
            Verdict::Duplicate { base_offset: 0 }
        );
        state.producers.get_mut(&1).unwrap().last_write_ms -= 10_000;
        assert_eq!(state.expire(now_ms(), 5_000), 1);
        assert!(state.producers.contains_key(&2));
        // Forgotten: its sequence starts over, as for a new producer.
        assert_eq!(state.check(&header(1)), Verdict::Append);
    }

    fn header(pid: i64, epoch: i16, seq: i32, delta: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 49,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: delta,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: delta + 1,
        }
    }

    #[test]
    fn sequences_deduplicate_and_refuse_gaps() {
        let mut state = PartitionProducers::default();
        let b0 = header(7, 0, 0, 4);
        assert_eq!(state.check(&b0), Verdict::Append);
        state.record(&b0, 100);
        assert_eq!(state.check(&b0), Verdict::Duplicate { base_offset: 100 });
        let b1 = header(7, 0, 5, 2);
        assert_eq!(state.check(&b1), Verdict::Append);
        state.record(&b1, 105);
        assert_eq!(
            state.check(&header(7, 0, 10, 0)),
            Verdict::Reject(ResponseError::OutOfOrderSequenceNumber)
        );
        assert_eq!(state.check(&header(7, 1, 0, 0)), Verdict::Append);
        state.record(&header(7, 1, 0, 0), 108);
        assert_eq!(
            state.check(&header(7, 0, 8, 0)),
            Verdict::Reject(ResponseError::InvalidProducerEpoch)
        );
        assert_eq!(
            state.check(&header(8, 0, 3, 0)),
            Verdict::Reject(ResponseError::OutOfOrderSequenceNumber)
        );
    }

    #[test]
    fn a_tenants_producer_states_are_bounded_across_its_partitions() {
        let states = ProducerStates::new(Tenancy::Every, 3);
        let tp = |topic: &str, partition| TopicPartition::new(topic, partition);
        let write = |tp: &TopicPartition, pid: i64| {
            let state = states.partition(tp);
            let mut state = state.lock();
            let verdict = state.check(&header(pid, 0, 0, 0));
            if verdict == Verdict::Append {
                state.record(&header(pid, 0, 0, 0), 0);
            }
            verdict
        };
        assert_eq!(write(&tp("acme.a", 0), 1), Verdict::Append);
        assert_eq!(write(&tp("acme.a", 1), 1), Verdict::Append);
        assert_eq!(write(&tp("acme.b", 0), 2), Verdict::Append);
        // acme holds three states, over three partitions: a fourth is refused ...
        assert_eq!(
            write(&tp("acme.b", 0), 3),
            Verdict::Reject(ResponseError::PolicyViolation)
        );
        // ... while a producer it holds goes on, and another tenant is not touched.
        let state = states.partition(&tp("acme.a", 0));
        assert_eq!(state.lock().check(&header(1, 0, 1, 0)), Verdict::Append);
        assert_eq!(write(&tp("globex.a", 0), 9), Verdict::Append);
        assert_eq!(states.held_by("acme.a"), 3);
        // A deleted partition, and expired producers, give their places back; a write that
        // still held the forgotten partition's state counts nothing.
        let forgotten = states.partition(&tp("acme.a", 1));
        states.forget(&tp("acme.a", 1));
        assert_eq!(states.held_by("acme.a"), 2);
        forgotten.lock().record(&header(5, 0, 0, 0), 1);
        assert_eq!(states.held_by("acme.a"), 2);
        assert_eq!(write(&tp("acme.b", 0), 3), Verdict::Append);
        states
            .partition(&tp("acme.b", 0))
            .lock()
            .producers
            .values_mut()
            .for_each(|p| p.last_write_ms -= 10_000);
        assert_eq!(states.expire(5_000), 2);
        assert_eq!(states.held_by("acme.a"), 1);
        assert_eq!(states.held_by("globex.a"), 1);
    }

    #[tokio::test]
    async fn producer_ids_are_never_handed_out_twice_across_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIds::open(dir.path());
        let mut first = Vec::new();
        for _ in 0..3 {
            first.push(ids.allocate().await.unwrap());
        }
        let ids = ProducerIds::open(dir.path());
        let next = ids.allocate().await.unwrap();
        assert!(first.iter().all(|&id| id < next));
    }
}
