//! One partition's log: an ordered set of segments, the last of which takes appends.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::batch::{
    decompression_limit, set_log_append_time, set_offset_and_epoch, validate_batch,
    validate_records, TimestampType,
};
use crate::checkpoint::{self, CLEAN_SHUTDOWN, LOG_START, RECOVERY_POINT};
use crate::clock::Clock;
use crate::config::LogConfig;
use crate::epoch::{EpochEntry, LeaderEpochCache};
use crate::error::{LogError, Result};
use crate::files::HandleCache;
use crate::index;
use crate::partition_dir;
use crate::read::{FileRegion, ReadSlice};
use crate::segment::{
    file_name, BatchMeta, Segment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};
use crate::transactions::{Transactions, TxnBatch};

mod txn;

/// Who wrote the batches of an append, which decides how they are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// A producer: every record is checked, and control batches are refused.
    Producer,
    /// A transaction coordinator: transaction markers only.
    Coordinator,
    /// A leader this log follows: headers and CRCs only (the leader checked the records).
    Replica,
}

/// What an append wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: u64,
    pub last_offset: u64,
    /// The largest timestamp of the appended batches (the append time for LogAppendTime).
    pub max_timestamp: i64,
    /// The time the log stamped on the batches, when the topic uses LogAppendTime.
    pub log_append_time: Option<i64>,
    pub batches: usize,
    pub records: u64,
    pub bytes: u64,
}

/// How a log was found when it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The clean-shutdown marker was present: no data was scanned.
    pub clean_shutdown: bool,
    pub segments: usize,
    /// Segments scanned batch by batch (with CRC checks).
    pub segments_recovered: usize,
    /// Bytes of data read by those scans.
    pub bytes_scanned: u64,
    /// Bytes cut off torn or corrupt tails, including whole segments after the damage.
    pub bytes_truncated: u64,
    /// Segments whose indexes were missing or inconsistent and were rebuilt.
    pub indexes_rebuilt: usize,
}

/// What a retention run deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
}

/// Counters of work done by lookups, for benchmarks and metrics.
#[derive(Debug, Default)]
pub struct LogStats {
    /// Bytes of log that offset and timestamp lookups passed over after the index.
    pub lookup_bytes_scanned: AtomicU64,
}

/// A partition's log. See the crate documentation for the files it keeps.
///
/// Writers take `&mut self`; reads take `&self` and return file regions that stay valid after
/// the call, so a caller can hold the log in a `RwLock` and send data outside the lock.
#[derive(Debug)]
pub struct Log {
    pub(crate) dir: PathBuf,
    pub(crate) config: LogConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) cache: Arc<HandleCache>,
    pub(crate) segments: BTreeMap<u64, Segment>,
    log_start_offset: u64,
    /// Offsets made durable, also by background flushes of rolled segments.
    durable: Arc<Durability>,
    epochs: LeaderEpochCache,
    /// A segment file was created since the directory was last fsynced.
    dir_dirty: bool,
    /// Segments below this base offset were compacted since the log was opened.
    pub(crate) cleaned_to: u64,
    /// Background fsyncs of rolled segments still running.
    flushers: Vec<std::thread::JoinHandle<()>>,
    unflushed_records: i64,
    first_unflushed_ms: Option<i64>,
    fenced: bool,
    report: RecoveryReport,
    stats: LogStats,
    /// Open and aborted transactions, from the batches in the log.
    txns: Transactions,
}

impl Log {
    /// Opens the log in `dir`, creating it if needed. After an unclean shutdown, segments
    /// written since the last flush are scanned and cut at the first bad batch.
    pub fn open(
        dir: impl AsRef<Path>,
        config: LogConfig,
        clock: Arc<dyn Clock>,
        cache: Arc<HandleCache>,
    ) -> Result<Self> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(LogError::io(&dir))?;
        let clean_marker = dir.join(CLEAN_SHUTDOWN);
        let clean = clean_marker
            .try_exists()
            .map_err(LogError::io(&clean_marker))?;
        let bases = prepare_directory(&dir)?;
        // A new log has nothing to recover: it counts as cleanly shut down.
        let clean = clean || bases.is_empty();
        let mut log = Self {
            epochs: LeaderEpochCache::load(&dir),
            log_start_offset: checkpoint::read_offset(&dir, LOG_START)
                .filter(|&o| o < i64::MAX as u64)
                .unwrap_or(0),
            durable: Arc::new(Durability::new(
                &dir,
                checkpoint::read_offset(&dir, RECOVERY_POINT).unwrap_or(0),
            )),
            dir,
            config,
            clock,
            cache,
            segments: BTreeMap::new(),
            dir_dirty: false,
            flushers: Vec::new(),
            cleaned_to: 0,
            unflushed_records: 0,
            first_unflushed_ms: None,
            fenced: false,
            report: RecoveryReport {
                clean_shutdown: clean,
                ..RecoveryReport::default()
            },
            stats: LogStats::default(),
            txns: Transactions::default(),
        };
        log.load_segments(&bases, clean)?;
        if clean_marker
            .try_exists()
            .map_err(LogError::io(&clean_marker))?
        {
            fs::remove_file(&clean_marker).map_err(LogError::io(&clean_marker))?;
            checkpoint::sync_dir(&log.dir)?;
        }
        let first_base = log.segments.keys().next().copied().unwrap_or(0);
        log.log_start_offset = log.log_start_offset.max(first_base);
        let end = log.log_end_offset();
        if log.log_start_offset > end {
            // A checkpoint ahead of the data: the data was lost, start empty at that offset.
            let start = log.log_start_offset;
            log.truncate_fully_and_start_at(start)?;
        }
        log.rebuild_transactions()?;
        let recovery_point = log.durable.offset().min(log.log_end_offset());
        log.durable.reset(recovery_point);
        if log.dir_dirty {
            checkpoint::sync_dir(&log.dir)?;
            log.dir_dirty = false;
        }
        let end = log.log_end_offset();
        log.epochs.truncate_from_end(end)?;
        let start = log.log_start_offset;
        log.epochs.truncate_from_start(start)?;
        log.report.segments = log.segments.len();
        let now = log.clock.now_ms();
        let active = log.active_mut();
        if active.size > 0 {
            active.rolling_started_ms = Some(now);
        }
        Ok(log)
    }

    fn new_segment(&self, base_offset: u64) -> Segment {
        Segment::new(
            &self.cache,
            &self.dir,
            base_offset,
            self.config.segment_index_bytes,
            self.config.index_interval_bytes,
        )
    }

    fn load_segments(&mut self, bases: &[u64], clean: bool) -> Result<()> {
        // Segments below the one holding the recovery point were fsynced: trusted.
        let scan_from = if clean {
            u64::MAX
        } else {
            bases
                .iter()
                .copied()
                .filter(|&b| b <= self.durable.offset())
                .max()
                .unwrap_or(0)
        };
        let mut damaged_at: Option<usize> = None;
        for (i, &base) in bases.iter().enumerate() {
            let mut segment = self.new_segment(base);
            let is_last = i + 1 == bases.len();
            let trusted = base < scan_from && segment.load(&self.cache, is_last)?;
            if !trusted {
                // `load` may have cached the files read-only; recovery writes the indexes.
                self.cache.remove(segment.id);
                if base < scan_from {
                    self.report.indexes_rebuilt += 1;
                } else {
                    self.report.segments_recovered += 1;
                }
                segment.writable = true;
                let files = segment.files(&self.cache)?;
                let cut = segment.recover(&files)?;
                drop(files);
                self.report.bytes_scanned += segment.size + cut;
                self.report.bytes_truncated += cut;
                if !is_last {
                    segment.seal(&self.cache, true)?;
                }
                if cut > 0 && base >= scan_from {
                    damaged_at = Some(i);
                    self.segments.insert(base, segment);
                    break;
                }
                if cut > 0 {
                    // Damage in a segment that was fsynced (bit rot, not a crash): its tail is
                    // cut, but the later segments were written and synced after it and stay.
                    tracing::warn!(
                        segment = %segment.log_path.display(),
                        bytes = cut,
                        "cut a damaged tail from a segment below the recovery point"
                    );
                }
            }
            self.segments.insert(base, segment);
        }
        if let Some(i) = damaged_at {
            // Offsets must stay contiguous: everything after a damaged batch is gone.
            for &base in &bases[i + 1..] {
                let segment = self.new_segment(base);
                self.report.bytes_truncated += fs::metadata(&segment.log_path)
                    .map(|m| m.len())
                    .unwrap_or(0);
                segment.delete_files(&self.cache)?;
            }
        }
        // Closed segments end where the next one starts.
        let bases: Vec<u64> = self.segments.keys().copied().collect();
        for pair in bases.windows(2) {
            if let Some(seg) = self.segments.get_mut(&pair[0]) {
                seg.next_offset = pair[1];
            }
        }
        match self.segments.values_mut().next_back() {
            Some(active) => {
                if !active.writable {
                    active.unseal(&self.cache);
                }
            }
            None => {
                let mut segment = self.new_segment(self.log_start_offset);
                segment.writable = true;
                segment.files(&self.cache)?;
                self.dir_dirty = true;
                self.segments.insert(segment.base_offset, segment);
            }
        }
        Ok(())
    }

    /// The directory this log lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Replaces the configuration (topic config changes); takes effect from the next append
    /// or maintenance run.
    pub fn set_config(&mut self, config: LogConfig) -> Result<()> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    pub fn recovery_report(&self) -> RecoveryReport {
        self.report
    }

    pub fn stats(&self) -> &LogStats {
        &self.stats
    }

    /// The first offset a consumer may read.
    pub fn log_start_offset(&self) -> u64 {
        self.log_start_offset
    }

    /// The offset the next appended record will get.
    pub fn log_end_offset(&self) -> u64 {
        self.active().next_offset
    }

    /// Offsets below this were fsynced.
    pub fn recovery_point(&self) -> u64 {
        self.durable.offset().min(self.log_end_offset())
    }

    /// Bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size).sum()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<u64> {
        self.segments.keys().copied().collect()
    }

    /// The epoch entries of the leader-epoch checkpoint.
    pub fn leader_epochs(&self) -> &[EpochEntry] {
        self.epochs.entries()
    }

    /// The latest leader epoch written to this log.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.latest_epoch()
    }

    /// OffsetForLeaderEpoch: the largest epoch at or below `epoch` and where it ends.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<EpochEntry> {
        self.epochs.end_offset_for(epoch, self.log_end_offset())
    }

    pub(crate) fn active(&self) -> &Segment {
        match self.segments.values().next_back() {
            Some(s) => s,
            None => unreachable!("a log always has an active segment"),
        }
    }

    fn active_mut(&mut self) -> &mut Segment {
        match self.segments.values_mut().next_back() {
            Some(s) => s,
            None => unreachable!("a log always has an active segment"),
        }
    }

    pub(crate) fn check_fenced(&self) -> Result<()> {
        if self.fenced || self.durable.failed() {
            return Err(LogError::Fenced {
                path: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Validates every batch in `buf` (magic, lengths, CRC, size limit) without writing
    /// anything. A producer's batches are also checked record by record
    /// ([`validate_records`]), so that whatever the log holds decodes within bounds for
    /// every reader; a replicated batch was checked so by its leader.
    fn validate(&self, buf: &[u8], source: Source) -> Result<Vec<BatchMeta>> {
        let from_producer = source != Source::Replica;
        let mut metas = Vec::new();
        let mut at = 0usize;
        while at < buf.len() {
            let index = metas.len();
            let header = validate_batch(&buf[at..])
                .and_then(|h| h.compression().map(|_| h))
                .map_err(|source| LogError::InvalidBatch { index, source })?;
            if header.size() as u64 > self.config.max_message_bytes {
                return Err(LogError::BatchTooLarge {
                    index,
                    size: header.size(),
                    max: self.config.max_message_bytes as usize,
                });
            }
            // A producer's batch holds exactly one record per offset it spans (Kafka's rule);
            // a replicated batch may have fewer after compaction on the leader.
            let count_fits = if from_producer {
                header.records_count >= 1
                    && header.records_count as i64 == header.last_offset_delta as i64 + 1
            } else {
                header.records_count as i64 <= header.last_offset_delta as i64 + 1
            };
            if !count_fits {
                return Err(LogError::InconsistentRecordCount {
                    index,
                    records_count: header.records_count,
                    last_offset_delta: header.last_offset_delta,
                });
            }
            let batch = &buf[at..at + header.size()];
            if source == Source::Producer {
                let limit = decompression_limit(self.config.max_message_bytes);
                validate_records(batch, &header, limit)
                    .map_err(|source| LogError::InvalidBatch { index, source })?;
            }
            let txn = txn::classify(batch, &header);
            if source == Source::Coordinator && !matches!(txn, TxnBatch::Marker { .. }) {
                return Err(LogError::NotAMarker { index });
            }
            metas.push(BatchMeta {
                txn,
                ..BatchMeta::from_header(at, &header)
            });
            at += header.size();
        }
        if metas.is_empty() {
            return Err(LogError::EmptyAppend);
        }
        Ok(metas)
    }

    /// Appends the batches of a producer: validates all of them, then gives them the next
    /// offsets and `leader_epoch` by rewriting their headers in `batches` (never re-encoding
    /// records), and writes them. On error nothing is written.
    pub fn append(&mut self, batches: &mut [u8], leader_epoch: i32) -> Result<AppendInfo> {
        self.append_from(Source::Producer, batches, leader_epoch)
    }

    /// Appends transaction markers (control batches a coordinator built with
    /// [`crate::batch::build_marker`]) as [`Log::append`] appends a producer's batches.
    /// Anything but a marker is refused and nothing is written.
    pub fn append_markers(&mut self, batches: &mut [u8], leader_epoch: i32) -> Result<AppendInfo> {
        self.append_from(Source::Coordinator, batches, leader_epoch)
    }

    fn append_from(
        &mut self,
        source: Source,
        batches: &mut [u8],
        leader_epoch: i32,
    ) -> Result<AppendInfo> {
        self.check_fenced()?;
        let mut metas = self.validate(batches, source)?;
        let now = self.clock.now_ms();
        let span: u64 = metas
            .iter()
            .map(|m| m.last_offset - m.base_offset + 1)
            .sum();
        let end = self.log_end_offset();
        if end.saturating_add(span) > i64::MAX as u64 {
            return Err(LogError::OffsetOverflow {
                offset: end.saturating_add(span),
            });
        }
        let log_append_time = self.config.message_timestamp_type == TimestampType::LogAppendTime;
        let mut next = self.log_end_offset();
        for meta in &mut metas {
            let delta = meta.last_offset - meta.base_offset;
            let batch = &mut batches[meta.at..meta.at + meta.size];
            set_offset_and_epoch(batch, next as i64, leader_epoch);
            if log_append_time {
                set_log_append_time(batch, meta.size, now);
                meta.max_timestamp = now;
            }
            meta.base_offset = next;
            meta.last_offset = next + delta;
            next = meta.last_offset + 1;
        }
        let info = self.write(batches, &metas, now)?;
        if leader_epoch >= 0 {
            self.assign_epoch(leader_epoch, info.first_offset)?;
        }
        self.flush_if_due(now)?;
        Ok(AppendInfo {
            log_append_time: log_append_time.then_some(now),
            ..info
        })
    }

    /// Appends batches that already carry their offsets and epochs (a follower copying its
    /// leader). They must start at or after the log end offset.
    pub fn append_replicated(&mut self, batches: &[u8]) -> Result<AppendInfo> {
        self.check_fenced()?;
        let metas = self.validate(batches, Source::Replica)?;
        let mut expected = self.log_end_offset();
        for meta in &metas {
            if meta.declared_base_offset < 0 || (meta.declared_base_offset as u64) < expected {
                return Err(LogError::NonMonotonicOffset {
                    base_offset: meta.declared_base_offset,
                    log_end: expected,
                });
            }
            if meta.last_offset >= i64::MAX as u64 {
                return Err(LogError::OffsetOverflow {
                    offset: meta.last_offset,
                });
            }
            expected = meta.last_offset + 1;
        }
        let now = self.clock.now_ms();
        let first = metas[0].base_offset;
        let last = metas[metas.len() - 1].last_offset;
        let info = if last - first > u32::MAX as u64 {
            // Offsets in a segment are 32-bit relative to its base: a request spanning more
            // (gaps left by compaction on the leader) is written batch by batch, so each
            // batch can start a segment of its own.
            let mut total: Option<AppendInfo> = None;
            for meta in &metas {
                let one = BatchMeta { at: 0, ..*meta };
                let info = self.write(&batches[meta.at..meta.at + meta.size], &[one], now)?;
                total = Some(match total {
                    None => info,
                    Some(t) => AppendInfo {
                        last_offset: info.last_offset,
                        max_timestamp: t.max_timestamp.max(info.max_timestamp),
                        batches: t.batches + 1,
                        records: t.records + info.records,
                        bytes: t.bytes + info.bytes,
                        ..t
                    },
                });
            }
            match total {
                Some(t) => t,
                None => return Err(LogError::EmptyAppend),
            }
        } else {
            self.write(batches, &metas, now)?
        };
        for meta in &metas {
            self.assign_epoch(meta.leader_epoch, meta.base_offset)?;
        }
        self.flush_if_due(now)?;
        Ok(info)
    }

    fn assign_epoch(&mut self, epoch: i32, start_offset: u64) -> Result<()> {
        if let Err(e) = self.epochs.assign(epoch, start_offset) {
            self.fenced = true;
            return Err(e);
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8], metas: &[BatchMeta], now: i64) -> Result<AppendInfo> {
        let first = metas[0];
        let last = metas[metas.len() - 1];
        if let Err(e) = self.maybe_roll(
            bytes.len() as u64,
            metas.len() as u64,
            first.base_offset,
            last.last_offset,
            now,
        ) {
            self.fenced = true;
            return Err(e);
        }
        let cache = Arc::clone(&self.cache);
        let active = self.active_mut();
        active.rolling_started_ms.get_or_insert(now);
        let result = active
            .files(&cache)
            .and_then(|files| active.append(&files, bytes, metas));
        if let Err(e) = result {
            self.fenced = true;
            return Err(e);
        }
        self.observe_transactions(metas)?;
        let records: u64 = metas.iter().map(|m| m.records).sum();
        self.unflushed_records = self.unflushed_records.saturating_add(records as i64);
        self.first_unflushed_ms.get_or_insert(now);
        Ok(AppendInfo {
            first_offset: first.base_offset,
            last_offset: last.last_offset,
            max_timestamp: metas.iter().map(|m| m.max_timestamp).max().unwrap_or(-1),
            log_append_time: None,
            batches: metas.len(),
            records,
            bytes: bytes.len() as u64,
        })
    }

    fn maybe_roll(
        &mut self,
        bytes: u64,
        batches: u64,
        first_offset: u64,
        last_offset: u64,
        now: i64,
    ) -> Result<()> {
        let active = self.active();
        if active.size == 0 {
            if first_offset > active.base_offset
                && last_offset - active.base_offset > u32::MAX as u64
            {
                // An empty segment far below the append (a follower jumping a gap).
                return self.roll(first_offset);
            }
            return Ok(());
        }
        let too_big = active.size + bytes > self.config.segment_bytes;
        let too_old = active
            .rolling_started_ms
            .is_some_and(|ts| now.saturating_sub(ts) >= self.config.segment_ms);
        let index_full = active.index_entries + batches >= active.index_capacity_entries()
            || active.time_entries + batches >= active.time_capacity_entries();
        let offsets_overflow = last_offset - active.base_offset > u32::MAX as u64;
        if too_big || too_old || index_full || offsets_overflow {
            self.roll(first_offset)?;
        }
        Ok(())
    }

    /// Closes the active segment and starts a new one at `base_offset`. The closed segment is
    /// fsynced in the background; the recovery point moves once that is done.
    fn roll(&mut self, base_offset: u64) -> Result<()> {
        let result = self.try_roll(base_offset);
        if result.is_err() {
            // Half a roll leaves the files in a state no later call can reason about.
            self.fenced = true;
        }
        result
    }

    fn try_roll(&mut self, base_offset: u64) -> Result<()> {
        let cache = Arc::clone(&self.cache);
        let mut segment = self.new_segment(base_offset);
        segment.writable = true;
        // A leftover file of that name (from a truncation that crashed) holds nothing valid.
        if let Ok(file) = fs::OpenOptions::new().write(true).open(&segment.log_path) {
            file.set_len(0).map_err(LogError::io(&segment.log_path))?;
        }
        // Create the new segment's files first, so a restart finds the log end in the new
        // segment's name even before any append.
        segment.files(&self.cache)?;
        // No fsync here: the append that rolls must not wait for the disk. The background
        // flush below makes the sealed segment durable.
        self.active_mut().seal(&cache, false)?;
        self.segments.insert(base_offset, segment);
        self.dir_dirty = true;
        // Everything from the last durable point to the new segment is fsynced in the
        // background, then the directory; the recovery point moves only once all of it is.
        let floor = self
            .segments
            .range(..=self.durable.offset())
            .next_back()
            .map_or(0, |(b, _)| *b);
        let paths: Vec<PathBuf> = self
            .segments
            .range(floor..base_offset)
            .flat_map(|(_, s)| {
                [
                    s.log_path.clone(),
                    s.index_path.clone(),
                    s.time_index_path.clone(),
                ]
            })
            .collect();
        let durable = Arc::clone(&self.durable);
        let generation = durable.generation();
        let dir = self.dir.clone();
        self.flushers.retain(|f| !f.is_finished());
        let flusher = std::thread::Builder::new()
            .name("skein-log-flush".into())
            .spawn(move || {
                let synced = paths.iter().all(|p| {
                    match fs::File::open(p).and_then(|f| f.sync_all()) {
                        Ok(()) => true,
                        // Deleted meanwhile by retention or truncation: nothing to keep.
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                        Err(e) => {
                            tracing::error!(path = %p.display(), error = %e, "fsync of rolled segment failed");
                            false
                        }
                    }
                }) && checkpoint::sync_dir(&dir).is_ok();
                if synced {
                    durable.raise(generation, base_offset);
                    if let Err(e) = durable.persist() {
                        tracing::warn!(error = %e, "failed to write the recovery point");
                    }
                } else {
                    durable.fail();
                }
            })
            .map_err(LogError::io(&self.dir))?;
        self.flushers.push(flusher);
        Ok(())
    }

    /// Waits for the background fsyncs of rolled segments.
    fn join_flushers(&mut self) {
        for flusher in self.flushers.drain(..) {
            if flusher.join().is_err() {
                self.durable.fail();
            }
        }
    }

    /// Closes the active segment now, if it holds anything, and starts the next one.
    pub fn roll_now(&mut self) -> Result<()> {
        self.check_fenced()?;
        if self.active().size == 0 {
            return Ok(());
        }
        let end = self.log_end_offset();
        self.roll(end)
    }

    /// Fsyncs when `flush.messages` or `flush.ms` says so.
    pub fn flush_if_due(&mut self, now: i64) -> Result<()> {
        let by_count = self.unflushed_records >= self.config.flush_messages;
        let by_time = self
            .first_unflushed_ms
            .is_some_and(|t| now.saturating_sub(t) >= self.config.flush_ms);
        if by_count || by_time {
            self.flush()?;
        }
        Ok(())
    }

    /// Makes everything appended so far durable (fsync of every segment written since the
    /// last flush). Call before acknowledging when durability may not rest on replication.
    pub fn flush(&mut self) -> Result<()> {
        self.check_fenced()?;
        let end = self.log_end_offset();
        let from = self.recovery_point();
        let floor = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(0, |(b, _)| *b);
        let cache = Arc::clone(&self.cache);
        let mut result = Ok(());
        for segment in self.segments.range(floor..).map(|(_, s)| s) {
            result = segment
                .files(&cache)
                .and_then(|f| f.log.sync_data().map_err(LogError::io(&segment.log_path)));
            if result.is_err() {
                break;
            }
        }
        if result.is_ok() && self.dir_dirty {
            // New segment files must be findable after a power loss too.
            result = checkpoint::sync_dir(&self.dir);
            self.dir_dirty = false;
        }
        if let Err(e) = result {
            self.fenced = true;
            return Err(e);
        }
        self.durable.raise(self.durable.generation(), end);
        self.unflushed_records = 0;
        self.first_unflushed_ms = None;
        Ok(())
    }

    /// Reads whole batches starting with the one that holds `offset`, up to `max_bytes` (at
    /// least one batch, as Kafka does so a large batch never blocks a consumer), stopping
    /// before any batch that starts at or after `upper_bound` (the high watermark for
    /// consumers). Reads never cross a segment boundary.
    pub fn read(&self, offset: u64, max_bytes: u64, upper_bound: Option<u64>) -> Result<ReadSlice> {
        let end = self.log_end_offset();
        if offset < self.log_start_offset || offset > end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset,
                log_end: end,
            });
        }
        let bound = upper_bound.unwrap_or(end).min(end);
        if offset >= bound {
            return Ok(ReadSlice::empty());
        }
        let floor = self
            .segments
            .range(..=offset)
            .next_back()
            .map_or(0, |(b, _)| *b);
        let mut scanned = 0;
        for segment in self.segments.range(floor..).map(|(_, s)| s) {
            let files = segment.files(&self.cache)?;
            let Some((position, first)) = segment.locate(&files, offset, &mut scanned)? else {
                continue;
            };
            if first.base_offset as u64 >= bound {
                break;
            }
            let mut len = first.size() as u64;
            let mut last_offset = first.last_offset() as u64;
            // Jump over whole batches with the index rather than reading each header: the
            // last entry that starts within `max_bytes` (and below the bound) ends the run of
            // batches before it.
            let jump = {
                let map = files.index.lock();
                index::last_entry_within(
                    map.bytes(),
                    segment.index_entries,
                    (bound - segment.base_offset).min(u32::MAX as u64) as u32,
                    position.saturating_add(max_bytes).min(u32::MAX as u64) as u32,
                )
            };
            if let Some((rel, pos)) = jump {
                if pos as u64 > position + len {
                    len = pos as u64 - position;
                    last_offset = segment.base_offset + rel as u64 - 1;
                }
            }
            while position + len < segment.size {
                let next = segment.read_header(&files, position + len)?;
                if len + next.size() as u64 > max_bytes || next.base_offset as u64 >= bound {
                    break;
                }
                len += next.size() as u64;
                last_offset = next.last_offset() as u64;
            }
            self.stats
                .lookup_bytes_scanned
                .fetch_add(scanned, Ordering::Relaxed);
            return Ok(ReadSlice {
                region: Some(FileRegion::new(&files, segment.base_offset, position, len)),
                first_offset: first.base_offset as u64,
                last_offset,
            });
        }
        Ok(ReadSlice::empty())
    }

    /// Calls `visit` with the header of every batch from the one holding `from` to the end,
    /// in offset order, reading headers only (producer state is rebuilt this way).
    pub fn for_each_batch_header(
        &self,
        from: u64,
        mut visit: impl FnMut(&crate::batch::BatchHeader),
    ) -> Result<()> {
        let from = from.max(self.log_start_offset);
        let floor = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(0, |(b, _)| *b);
        let mut scanned = 0;
        for segment in self.segments.range(floor..).map(|(_, s)| s) {
            let files = segment.files(&self.cache)?;
            let Some((mut position, _)) = segment.locate(&files, from, &mut scanned)? else {
                continue;
            };
            while position < segment.size {
                let header = segment.read_header(&files, position)?;
                visit(&header);
                position += header.size() as u64;
            }
        }
        Ok(())
    }

    /// The position of the batch holding `offset`: (segment base offset, byte position,
    /// bytes scanned after the index). `None` past the end.
    pub fn locate(&self, offset: u64) -> Result<Option<(u64, u64, u64)>> {
        let floor = self
            .segments
            .range(..=offset)
            .next_back()
            .map_or(0, |(b, _)| *b);
        let mut scanned = 0;
        for segment in self.segments.range(floor..).map(|(_, s)| s) {
            let files = segment.files(&self.cache)?;
            if let Some((position, _)) = segment.locate(&files, offset, &mut scanned)? {
                return Ok(Some((segment.base_offset, position, scanned)));
            }
        }
        Ok(None)
    }

    /// ListOffsets by timestamp: the first offset at or after the log start whose record
    /// timestamp is at least `timestamp`, with that timestamp; `None` if there is none.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(u64, i64)>> {
        let mut scanned = 0;
        for segment in self.segments.values() {
            if segment.max_timestamp < timestamp || segment.size == 0 {
                continue;
            }
            let files = segment.files(&self.cache)?;
            let found =
                segment.find_timestamp(&files, timestamp, self.log_start_offset, &mut scanned)?;
            if found.is_some() {
                self.stats
                    .lookup_bytes_scanned
                    .fetch_add(scanned, Ordering::Relaxed);
                return Ok(found);
            }
        }
        self.stats
            .lookup_bytes_scanned
            .fetch_add(scanned, Ordering::Relaxed);
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: the first record (at or after the log start) carrying the
    /// largest timestamp in the log, with that timestamp; `None` when the log is empty.
    pub fn max_timestamp_offset(&self) -> Result<Option<(u64, i64)>> {
        let largest = self
            .segments
            .values()
            .filter(|s| s.size > 0)
            .map(|s| s.max_timestamp)
            .max();
        match largest {
            // The first record at or above the largest timestamp is a record with it.
            Some(ts) => self.offset_for_timestamp(ts),
            None => Ok(None),
        }
    }

    /// Removes every record at or after `offset` (replication: a follower truncating to its
    /// leader). The batch holding `offset` is removed whole.
    pub fn truncate_to(&mut self, offset: u64) -> Result<()> {
        self.check_fenced()?;
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        if offset < self.log_start_offset {
            return self.truncate_fully_and_start_at(offset);
        }
        let result = self.try_truncate_to(offset);
        if result.is_err() {
            self.fenced = true;
        }
        result
    }

    fn try_truncate_to(&mut self, offset: u64) -> Result<()> {
        // First, so no background flush in flight can vouch for what is about to be cut.
        self.durable.reset(self.durable.offset().min(offset));
        // Newest first, each leaving the map only once its files are gone: a crash or an
        // error midway leaves a shorter suffix, never a hole.
        let doomed: Vec<u64> = self
            .segments
            .range(offset..)
            .rev()
            .map(|(b, _)| *b)
            .collect();
        for base in doomed {
            if self.segments.len() == 1 {
                break;
            }
            if let Some(segment) = self.segments.get(&base) {
                segment.delete_files(&self.cache)?;
            }
            self.segments.remove(&base);
        }
        let cache = Arc::clone(&self.cache);
        let log_start = self.log_start_offset;
        let active = self.active_mut();
        if active.base_offset >= offset {
            // Only the first segment is left and all of it goes.
            let base = active.base_offset;
            return self.try_truncate_fully(base.min(offset).max(log_start));
        }
        if !active.writable {
            active.unseal(&cache);
        }
        let files = active.files(&cache)?;
        // The batch holding `offset` goes whole, but the log never ends below its start.
        let new_end = active.truncate_to(&files, offset)?.max(log_start);
        let physical_end = active.physical_end(&files)?;
        drop(files);
        if physical_end < new_end {
            // Nothing on disk would say where the log ends after a restart: start a segment
            // there, whose name does.
            self.roll(new_end)?;
        }
        self.epochs.truncate_from_end(new_end)?;
        self.durable.reset(self.durable.offset().min(new_end));
        self.durable.persist()?;
        // What closed a transaction may be gone: follow the batches that are left.
        self.rebuild_transactions()
    }

    /// Deletes everything and starts an empty log at `offset` (a follower that fell behind
    /// the leader's log start).
    pub fn truncate_fully_and_start_at(&mut self, offset: u64) -> Result<()> {
        self.check_fenced()?;
        if offset >= i64::MAX as u64 {
            return Err(LogError::OffsetOverflow { offset });
        }
        let result = self.try_truncate_fully(offset);
        if result.is_err() {
            self.fenced = true;
        }
        result
    }

    fn try_truncate_fully(&mut self, offset: u64) -> Result<()> {
        self.durable.reset(offset.min(self.durable.offset()));
        let old: Vec<u64> = self.segments.keys().rev().copied().collect();
        for base in old {
            if let Some(segment) = self.segments.get(&base) {
                segment.delete_files(&self.cache)?;
            }
            self.segments.remove(&base);
        }
        // In the map before its files exist, so the log always has an active segment.
        let mut segment = self.new_segment(offset);
        segment.writable = true;
        self.segments.insert(offset, segment);
        self.active().files(&self.cache)?;
        checkpoint::sync_dir(&self.dir)?;
        self.log_start_offset = offset;
        checkpoint::write_offset(&self.dir, LOG_START, offset)?;
        self.epochs.clear()?;
        self.txns = Transactions::default();
        self.durable.reset(offset);
        self.durable.persist()
    }

    /// DeleteRecords: makes `offset` the first readable offset and deletes the segments that
    /// lie wholly below it.
    pub fn advance_log_start(&mut self, offset: u64) -> Result<RetentionReport> {
        self.check_fenced()?;
        let end = self.log_end_offset();
        if offset > end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset,
                log_end: end,
            });
        }
        if offset > self.log_start_offset {
            self.set_log_start(offset)?;
        }
        self.delete_below_log_start()
    }

    fn set_log_start(&mut self, offset: u64) -> Result<()> {
        self.log_start_offset = offset;
        self.txns.forget_before(offset);
        checkpoint::write_offset(&self.dir, LOG_START, offset)?;
        self.epochs.truncate_from_start(offset)
    }

    fn delete_below_log_start(&mut self) -> Result<RetentionReport> {
        let mut report = RetentionReport::default();
        loop {
            let mut it = self.segments.iter();
            let (Some((&first, _)), Some((&second, _))) = (it.next(), it.next()) else {
                break;
            };
            if second > self.log_start_offset {
                break;
            }
            self.delete_oldest(first, &mut report)?;
        }
        Ok(report)
    }

    fn delete_oldest(&mut self, base: u64, report: &mut RetentionReport) -> Result<()> {
        if let Some(segment) = self.segments.remove(&base) {
            report.segments_deleted += 1;
            report.bytes_deleted += segment.size;
            segment.delete_files(&self.cache)?;
        }
        Ok(())
    }

    /// Deletes closed segments by `retention.ms` and `retention.bytes` (when the cleanup
    /// policy includes delete) and those below the log start offset. An expired active
    /// segment is rolled first so it can go too.
    pub fn enforce_retention(&mut self) -> Result<RetentionReport> {
        self.check_fenced()?;
        let mut report = self.delete_below_log_start()?;
        if !self.config.cleanup_policy.deletes() {
            return Ok(report);
        }
        let now = self.clock.now_ms();
        if self.config.retention_ms >= 0 {
            let cutoff = now.saturating_sub(self.config.retention_ms);
            let active = self.active();
            if active.size > 0 && active.max_timestamp < cutoff {
                let end = self.log_end_offset();
                self.roll(end)?;
            }
            while self.segments.len() > 1 {
                let Some((&base, oldest)) = self.segments.iter().next() else {
                    break;
                };
                if oldest.max_timestamp >= cutoff {
                    break;
                }
                self.delete_oldest(base, &mut report)?;
            }
        }
        if self.config.retention_bytes >= 0 {
            let mut excess = self.size_bytes() as i64 - self.config.retention_bytes;
            while self.segments.len() > 1 {
                let Some((&base, oldest)) = self.segments.iter().next() else {
                    break;
                };
                if excess - (oldest.size as i64) < 0 {
                    break;
                }
                excess -= oldest.size as i64;
                self.delete_oldest(base, &mut report)?;
            }
        }
        let first = self.segments.keys().next().copied().unwrap_or(0);
        if first > self.log_start_offset {
            self.set_log_start(first)?;
        }
        Ok(report)
    }

    /// The share of closed bytes written since the last compaction (0 with nothing closed).
    pub fn dirty_ratio(&self) -> f64 {
        let active_base = self.active().base_offset;
        let (mut dirty, mut total) = (0u64, 0u64);
        for (base, segment) in self.segments.range(..active_base) {
            total += segment.size;
            if *base >= self.cleaned_to {
                dirty += segment.size;
            }
        }
        if total == 0 {
            0.0
        } else {
            dirty as f64 / total as f64
        }
    }

    /// Runs what is due: retention, compaction (when the dirty ratio reaches
    /// `min.cleanable.dirty.ratio`) and the `flush.ms` flush.
    pub fn maintain(&mut self) -> Result<(RetentionReport, crate::CompactionReport)> {
        let retention = self.enforce_retention()?;
        let compaction = if self.dirty_ratio() >= self.config.min_cleanable_dirty_ratio {
            self.compact()?
        } else {
            crate::CompactionReport::default()
        };
        let now = self.clock.now_ms();
        self.flush_if_due(now)?;
        Ok((retention, compaction))
    }

    /// Flushes everything, writes the indexes in their final size and leaves the
    /// clean-shutdown marker, so the next open trusts the files without scanning.
    pub fn close(mut self) -> Result<()> {
        self.join_flushers();
        self.flush()?;
        let cache = Arc::clone(&self.cache);
        self.active_mut().seal(&cache, true)?;
        self.durable.persist()?;
        let marker = self.dir.join(CLEAN_SHUTDOWN);
        fs::File::create(&marker)
            .and_then(|f| f.sync_all())
            .map_err(LogError::io(&marker))?;
        checkpoint::sync_dir(&self.dir)?;
        for segment in self.segments.values() {
            self.cache.remove(segment.id);
        }
        Ok(())
    }

    /// Closes the log's files and deletes its directory (topic deletion): the directory is
    /// first renamed to `<name>.<topic id in hex>-delete` and its parent fsynced, so a crash
    /// midway never leaves a partition directory with part of its files; then it is removed.
    pub fn delete(mut self) -> Result<()> {
        self.retire();
        let topic_id = partition_dir::read_topic_id(&self.dir).ok().flatten();
        partition_dir::delete_dir(&self.dir, topic_id)
    }

    /// Makes the log refuse every further write and lets go of its files, for a log whose
    /// directory is about to be deleted while others still hold it: nothing it does later may
    /// land in a directory a new log of the same name has opened.
    pub(crate) fn retire(&mut self) {
        self.fenced = true;
        self.join_flushers();
        for segment in self.segments.values() {
            self.cache.remove(segment.id);
        }
    }

    /// Points a retired log at `dir`, where its directory was moved to be deleted: reads
    /// still in flight find its files there until they are removed, and never open (or
    /// create) files in a new directory of the old name. Being fenced, it writes nothing.
    pub(crate) fn relocate(&mut self, dir: &Path) {
        debug_assert!(self.fenced, "only a retired log moves");
        self.dir = dir.to_path_buf();
        for segment in self.segments.values_mut() {
            segment.relocate(dir);
        }
    }
}

impl Drop for Log {
    /// A log dropped without `close` is left as a crash would leave it (no clean-shutdown
    /// marker), except that its background fsyncs finish first: none of them may touch the
    /// directory after another `Log` has opened it.
    fn drop(&mut self) {
        self.join_flushers();
        for segment in self.segments.values() {
            self.cache.remove(segment.id);
        }
    }
}

/// Finishes or undoes file operations a crash interrupted, removes stray files and returns
/// the base offsets of the segments, ascending.
fn prepare_directory(dir: &Path) -> Result<Vec<u64>> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    let entries = fs::read_dir(dir).map_err(LogError::io(dir))?;
    for entry in entries {
        let entry = entry.map_err(LogError::io(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = entry.path();
        if name.ends_with(".cleaned") || name.ends_with(".tmp") || name.ends_with(".deleted") {
            // An unfinished compaction output or checkpoint write: the original is intact.
            fs::remove_file(&path).map_err(LogError::io(&path))?;
            continue;
        }
        if let Some(stem) = name.strip_suffix(".log.swap") {
            // A compaction output that was complete (fsynced) before the crash: finish the swap.
            if let Some(base) = parse_base(stem) {
                // Same order as the cleaner: old indexes first, then the new log.
                for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
                    let index = dir.join(file_name(base, suffix));
                    if let Err(e) = fs::remove_file(&index) {
                        if e.kind() != std::io::ErrorKind::NotFound {
                            return Err(LogError::io(&index)(e));
                        }
                    }
                }
                let target = dir.join(file_name(base, LOG_SUFFIX));
                fs::rename(&path, &target).map_err(LogError::io(&target))?;
                checkpoint::sync_dir(dir)?;
                logs.push(base);
            }
            continue;
        }
        let Some((stem, suffix)) = name.split_once('.') else {
            continue;
        };
        let Some(base) = parse_base(stem) else {
            continue;
        };
        match suffix {
            LOG_SUFFIX => logs.push(base),
            INDEX_SUFFIX | TIME_INDEX_SUFFIX | TXN_INDEX_SUFFIX => indexes.push((base, path)),
            _ => {}
        }
    }
    logs.sort_unstable();
    logs.dedup();
    for (base, path) in indexes {
        if logs.binary_search(&base).is_err() {
            fs::remove_file(&path).map_err(LogError::io(&path))?;
        }
    }
    Ok(logs)
}

fn parse_base(stem: &str) -> Option<u64> {
    if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
        stem.parse().ok()
    } else {
        None
    }
}

/// How far the log is known to be fsynced, shared with background flush threads, and the
/// `recovery-point-offset-checkpoint` that records it. A truncation starts a new generation,
/// so a flush that began before it cannot vouch for offsets written after it.
///
/// Appends only take the short `state` lock; writing the checkpoint (several fsyncs) holds
/// `persisting`, which orders writers so the last one writes the latest state.
#[derive(Debug)]
struct Durability {
    dir: PathBuf,
    state: Mutex<DurableState>,
    persisting: Mutex<()>,
    failed: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Default)]
struct DurableState {
    generation: u64,
    offset: u64,
}

impl Durability {
    fn new(dir: &Path, offset: u64) -> Self {
        Self {
            dir: dir.to_path_buf(),
            state: Mutex::new(DurableState {
                offset,
                ..DurableState::default()
            }),
            persisting: Mutex::new(()),
            failed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn offset(&self) -> u64 {
        self.state.lock().offset
    }

    fn generation(&self) -> u64 {
        self.state.lock().generation
    }

    fn raise(&self, generation: u64, offset: u64) {
        let mut state = self.state.lock();
        if state.generation == generation {
            state.offset = state.offset.max(offset);
        }
    }

    fn reset(&self, offset: u64) {
        let mut state = self.state.lock();
        state.generation += 1;
        state.offset = offset;
    }

    /// Writes the checkpoint with the state as it is once this writer's turn comes.
    fn persist(&self) -> Result<()> {
        let _turn = self.persisting.lock();
        let offset = self.offset();
        checkpoint::write_offset(&self.dir, RECOVERY_POINT, offset)
    }

    fn fail(&self) {
        self.failed.store(true, Ordering::SeqCst);
    }

    fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }
}
