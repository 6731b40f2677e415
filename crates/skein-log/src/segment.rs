//! One segment: a `.log` file of batches and its two sparse indexes, named by base offset.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::batch::{BatchHeader, DecodedRecords, HEADER_LEN};
use crate::error::{LogError, Result};
use crate::files::{HandleCache, SegmentFiles};
use crate::index::{self, IndexMap, OFFSET_ENTRY, TIME_ENTRY};
use crate::scan::{scan_batches, ScanStop};
use crate::transactions::TxnBatch;

pub(crate) const LOG_SUFFIX: &str = "log";
pub(crate) const INDEX_SUFFIX: &str = "index";
pub(crate) const TIME_INDEX_SUFFIX: &str = "timeindex";
pub(crate) const TXN_INDEX_SUFFIX: &str = "txnindex";

/// `00000000000000368769.log` and friends.
pub(crate) fn file_name(base_offset: u64, suffix: &str) -> String {
    format!("{base_offset:020}.{suffix}")
}

/// What the log knows of a batch it is about to write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchMeta {
    /// Byte position of the batch within the appended buffer.
    pub(crate) at: usize,
    pub(crate) size: usize,
    pub(crate) base_offset: u64,
    pub(crate) last_offset: u64,
    pub(crate) max_timestamp: i64,
    pub(crate) records: u64,
    pub(crate) leader_epoch: i32,
    /// The base offset as written in the batch (for replicated appends, which keep it).
    pub(crate) declared_base_offset: i64,
    /// What the batch is to the partition's transactions.
    pub(crate) txn: TxnBatch,
}

impl BatchMeta {
    pub(crate) fn from_header(at: usize, h: &BatchHeader) -> Self {
        Self {
            at,
            size: h.size(),
            base_offset: h.base_offset.max(0) as u64,
            // From the delta, not from the declared base: a producer's base offset means
            // nothing and may be negative.
            last_offset: (h.base_offset.max(0) as u64).saturating_add(h.last_offset_delta as u64),
            max_timestamp: h.max_timestamp,
            records: h.records_count.max(0) as u64,
            leader_epoch: h.partition_leader_epoch,
            declared_base_offset: h.base_offset,
            txn: TxnBatch::Plain,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) id: u64,
    pub(crate) base_offset: u64,
    pub(crate) log_path: PathBuf,
    pub(crate) index_path: PathBuf,
    pub(crate) time_index_path: PathBuf,
    /// The aborted transactions whose markers are in this segment (only when there are any).
    pub(crate) txn_index_path: PathBuf,
    /// Bytes of valid batches in the `.log`.
    pub(crate) size: u64,
    /// One past the last offset written to this segment (for closed segments recovered from
    /// a clean shutdown: the next segment's base offset).
    pub(crate) next_offset: u64,
    /// Largest record timestamp in the segment, -1 when it has none.
    pub(crate) max_timestamp: i64,
    /// Wall-clock time of the first append to this segment since it was opened, which
    /// `segment.ms` is measured from. Producer timestamps are not used: an old timestamp would
    /// make every append roll a new segment.
    pub(crate) rolling_started_ms: Option<i64>,
    pub(crate) index_entries: u64,
    pub(crate) time_entries: u64,
    pub(crate) last_time_entry: i64,
    pub(crate) bytes_since_index: u64,
    /// The active segment keeps its indexes preallocated and mapped for writing.
    pub(crate) writable: bool,
    index_capacity: u64,
    time_capacity: u64,
    index_interval: u64,
}

impl Segment {
    pub(crate) fn new(
        cache: &HandleCache,
        dir: &Path,
        base_offset: u64,
        index_bytes: u64,
        index_interval: u64,
    ) -> Self {
        Self {
            id: cache.next_id(),
            base_offset,
            log_path: dir.join(file_name(base_offset, LOG_SUFFIX)),
            index_path: dir.join(file_name(base_offset, INDEX_SUFFIX)),
            time_index_path: dir.join(file_name(base_offset, TIME_INDEX_SUFFIX)),
            txn_index_path: dir.join(file_name(base_offset, TXN_INDEX_SUFFIX)),
            size: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            rolling_started_ms: None,
            index_entries: 0,
            time_entries: 0,
            last_time_entry: i64::MIN,
            bytes_since_index: 0,
            writable: false,
            index_capacity: (index_bytes / OFFSET_ENTRY) * OFFSET_ENTRY,
            time_capacity: (index_bytes / TIME_ENTRY) * TIME_ENTRY,
            index_interval,
        }
    }

    /// Points the segment at its files in `dir`, where its directory was moved.
    pub(crate) fn relocate(&mut self, dir: &Path) {
        self.log_path = dir.join(file_name(self.base_offset, LOG_SUFFIX));
        self.index_path = dir.join(file_name(self.base_offset, INDEX_SUFFIX));
        self.time_index_path = dir.join(file_name(self.base_offset, TIME_INDEX_SUFFIX));
        self.txn_index_path = dir.join(file_name(self.base_offset, TXN_INDEX_SUFFIX));
    }

    pub(crate) fn index_capacity_entries(&self) -> u64 {
        self.index_capacity / OFFSET_ENTRY
    }

    pub(crate) fn time_capacity_entries(&self) -> u64 {
        self.time_capacity / TIME_ENTRY
    }

    /// The segment's files from the shared cache, opened if needed.
    pub(crate) fn files(&self, cache: &HandleCache) -> Result<Arc<SegmentFiles>> {
        cache.get_or_open(self.id, || self.open_files())
    }

    fn open_files(&self) -> Result<SegmentFiles> {
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.log_path)
            .map_err(LogError::io(&self.log_path))?;
        let (index, time_index) = if self.writable {
            (
                open_writable_index(&self.index_path, self.index_capacity)?,
                open_writable_index(&self.time_index_path, self.time_capacity)?,
            )
        } else {
            (
                open_read_only_index(&self.index_path, self.index_entries * OFFSET_ENTRY)?,
                open_read_only_index(&self.time_index_path, self.time_entries * TIME_ENTRY)?,
            )
        };
        Ok(SegmentFiles {
            log: Arc::new(log),
            index: Mutex::new(index),
            time_index: Mutex::new(time_index),
        })
    }

    fn corrupt(&self, position: u64, source: crate::batch::BatchError) -> LogError {
        LogError::CorruptSegment {
            base_offset: self.base_offset,
            position,
            source,
        }
    }

    /// Reads and checks the header of the batch at `position`.
    pub(crate) fn read_header(&self, files: &SegmentFiles, position: u64) -> Result<BatchHeader> {
        let mut buf = [0u8; HEADER_LEN];
        if position + HEADER_LEN as u64 > self.size {
            return Err(self.corrupt(
                position,
                crate::batch::BatchError::Truncated {
                    need: HEADER_LEN,
                    have: self.size.saturating_sub(position) as usize,
                },
            ));
        }
        files
            .log
            .read_exact_at(&mut buf, position)
            .map_err(LogError::io(&self.log_path))?;
        let header = BatchHeader::parse(&buf).map_err(|e| self.corrupt(position, e))?;
        if position + header.size() as u64 > self.size {
            return Err(self.corrupt(
                position,
                crate::batch::BatchError::Truncated {
                    need: header.size(),
                    have: (self.size - position) as usize,
                },
            ));
        }
        Ok(header)
    }

    /// Reads the `len` bytes of the batch at `position` (whose header was read and checked
    /// by [`Segment::read_header`], so they lie within the segment).
    pub(crate) fn read_batch(
        &self,
        files: &SegmentFiles,
        position: u64,
        len: usize,
    ) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        files
            .log
            .read_exact_at(&mut buf, position)
            .map_err(LogError::io(&self.log_path))?;
        Ok(buf)
    }

    /// Writes already-validated batches at the end of the segment and indexes them.
    pub(crate) fn append(
        &mut self,
        files: &SegmentFiles,
        bytes: &[u8],
        batches: &[BatchMeta],
    ) -> Result<()> {
        debug_assert!(self.writable, "append to a sealed segment");
        files
            .log
            .write_all_at(bytes, self.size)
            .map_err(LogError::io(&self.log_path))?;
        let start = self.size;
        for meta in batches {
            self.index_batch(files, start + meta.at as u64, meta);
        }
        self.size += bytes.len() as u64;
        Ok(())
    }

    /// Updates the in-memory state and the indexes for a batch written at `position`.
    fn index_batch(&mut self, files: &SegmentFiles, position: u64, meta: &BatchMeta) {
        self.max_timestamp = self.max_timestamp.max(meta.max_timestamp);
        if self.bytes_since_index > self.index_interval {
            let relative_base = (meta.base_offset - self.base_offset) as u32;
            let entry = index::encode_offset_entry(relative_base, position as u32);
            if files
                .index
                .lock()
                .write(self.index_entries * OFFSET_ENTRY, &entry)
            {
                self.index_entries += 1;
            }
            if self.max_timestamp > self.last_time_entry {
                let relative_last = (meta.last_offset - self.base_offset) as u32;
                let entry = index::encode_time_entry(self.max_timestamp, relative_last);
                if files
                    .time_index
                    .lock()
                    .write(self.time_entries * TIME_ENTRY, &entry)
                {
                    self.time_entries += 1;
                    self.last_time_entry = self.max_timestamp;
                }
            }
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += meta.size as u64;
        self.next_offset = meta.last_offset + 1;
    }

    /// The first batch whose last offset is at or above `target`, found through the index and
    /// a short scan of headers. Adds the bytes passed over to `scanned`.
    pub(crate) fn locate(
        &self,
        files: &SegmentFiles,
        target: u64,
        scanned: &mut u64,
    ) -> Result<Option<(u64, BatchHeader)>> {
        let relative = target.saturating_sub(self.base_offset).min(u32::MAX as u64) as u32;
        let mut position = {
            let map = files.index.lock();
            index::lookup_offset(map.bytes(), self.index_entries, relative)
                .map_or(0, |(_, pos)| pos as u64)
        };
        while position < self.size {
            let header = self.read_header(files, position)?;
            if header.last_offset() as u64 >= target {
                return Ok(Some((position, header)));
            }
            position += header.size() as u64;
            *scanned += header.size() as u64;
        }
        Ok(None)
    }

    /// The first record at or after `min_offset` whose timestamp is at least `timestamp`.
    pub(crate) fn find_timestamp(
        &self,
        files: &SegmentFiles,
        timestamp: i64,
        min_offset: u64,
        scanned: &mut u64,
    ) -> Result<Option<(u64, i64)>> {
        let from_index = {
            let map = files.time_index.lock();
            index::lookup_time_below(map.bytes(), self.time_entries, timestamp)
                .map_or(self.base_offset, |(_, rel)| {
                    self.base_offset + rel as u64 + 1
                })
        };
        let start = from_index.max(min_offset);
        let Some((mut position, _)) = self.locate(files, start, scanned)? else {
            return Ok(None);
        };
        while position < self.size {
            let header = self.read_header(files, position)?;
            let size = header.size() as u64;
            if header.max_timestamp >= timestamp && header.last_offset() as u64 >= start {
                let mut batch = vec![0u8; header.size()];
                files
                    .log
                    .read_exact_at(&mut batch, position)
                    .map_err(LogError::io(&self.log_path))?;
                *scanned += size;
                let decoded = DecodedRecords::decode(&batch, crate::batch::MAX_DECOMPRESSED)
                    .map_err(|e| self.corrupt(position, e))?;
                for record in decoded.iter() {
                    let record = record.map_err(|e| self.corrupt(position, e))?;
                    let offset = header.record_offset(record.offset_delta).max(0) as u64;
                    let ts = decoded.timestamp_of(&record);
                    if offset >= start && ts >= timestamp {
                        return Ok(Some((offset, ts)));
                    }
                }
            } else {
                *scanned += size;
            }
            position += size;
        }
        Ok(None)
    }

    /// Loads a segment without scanning its data: index lengths and order, the first and last
    /// entry of each index checked against the batches they name, and the headers after the
    /// last offset-index entry. For the active segment (`read_tail`) that tail also gives the
    /// end offset. Returns false when the indexes do not fit the log and must be rebuilt.
    pub(crate) fn load(&mut self, cache: &HandleCache, read_tail: bool) -> Result<bool> {
        cache.remove(self.id);
        self.size = fs::metadata(&self.log_path)
            .map_err(LogError::io(&self.log_path))?
            .len();
        let index_len = file_len(&self.index_path)?;
        let time_len = file_len(&self.time_index_path)?;
        let (Some(index_len), Some(time_len)) = (index_len, time_len) else {
            return Ok(false);
        };
        if index_len % OFFSET_ENTRY != 0 || time_len % TIME_ENTRY != 0 {
            return Ok(false);
        }
        if index_len > self.index_capacity || time_len > self.time_capacity {
            return Ok(false);
        }
        self.index_entries = index_len / OFFSET_ENTRY;
        self.time_entries = time_len / TIME_ENTRY;
        let index_bytes =
            std::fs::read(&self.index_path).map_err(LogError::io(&self.index_path))?;
        let time_bytes =
            std::fs::read(&self.time_index_path).map_err(LogError::io(&self.time_index_path))?;
        let mut last_position = 0u64;
        let mut last_relative = 0u32;
        for i in 0..self.index_entries {
            let (rel, pos) = index::offset_entry(&index_bytes, i);
            if (i > 0 && (rel <= last_relative || pos as u64 <= last_position))
                || pos as u64 >= self.size
            {
                return Ok(false);
            }
            last_relative = rel;
            last_position = pos as u64;
        }
        let mut last_ts = i64::MIN;
        let mut last_time_relative = None;
        for i in 0..self.time_entries {
            let (ts, rel) = index::time_entry(&time_bytes, i);
            if ts < last_ts || last_time_relative.is_some_and(|l| rel <= l) {
                return Ok(false);
            }
            last_ts = ts;
            last_time_relative = Some(rel);
        }
        self.last_time_entry = last_ts;
        self.max_timestamp = if self.time_entries > 0 { last_ts } else { -1 };
        self.bytes_since_index = self.size - last_position;
        let files = self.files(cache)?;
        let files = &*files;
        // Ordered entries can still be wrong: check the first and last of each index against
        // the batches they name (a few header reads, no scan).
        let mut scanned = 0;
        for i in [0, self.index_entries.saturating_sub(1)] {
            if i >= self.index_entries {
                break;
            }
            let (rel, pos) = index::offset_entry(&index_bytes, i);
            match self.read_header(files, pos as u64) {
                Ok(h) if h.base_offset == (self.base_offset + rel as u64) as i64 => {}
                Ok(_) | Err(LogError::CorruptSegment { .. }) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        for i in [0, self.time_entries.saturating_sub(1)] {
            if i >= self.time_entries {
                break;
            }
            let (ts, rel) = index::time_entry(&time_bytes, i);
            let offset = self.base_offset + rel as u64;
            match self.locate(files, offset, &mut scanned) {
                Ok(Some((_, h))) if h.last_offset() as u64 == offset && h.max_timestamp <= ts => {}
                Ok(_) | Err(LogError::CorruptSegment { .. }) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        // The batches after the last offset-index entry: where the segment ends, and a check
        // that the time index ends with the final entry sealing wrote.
        let mut position = last_position;
        let mut last_offset = None;
        let mut tail_max = -1;
        while position < self.size {
            let header = match self.read_header(files, position) {
                Ok(h) => h,
                Err(LogError::CorruptSegment { .. }) => return Ok(false),
                Err(e) => return Err(e),
            };
            tail_max = tail_max.max(header.max_timestamp);
            last_offset = Some(header.last_offset() as u64);
            position += header.size() as u64;
        }
        if let Some(last) = last_offset {
            let final_entry_fits = last_time_relative
                .is_some_and(|rel| self.base_offset + rel as u64 == last && tail_max <= last_ts);
            if !final_entry_fits {
                return Ok(false);
            }
            if read_tail {
                self.next_offset = last + 1;
            }
        } else if self.time_entries > 0 {
            return Ok(false);
        }
        Ok(true)
    }

    /// Scans the whole `.log` from the start, checking every batch, rebuilding both indexes
    /// and cutting the file at the first batch that is torn, corrupt or out of order. Returns
    /// the number of bytes cut. The segment must be writable.
    pub(crate) fn recover(&mut self, files: &SegmentFiles) -> Result<u64> {
        debug_assert!(self.writable, "recovering a sealed segment");
        let file_size = files
            .log
            .metadata()
            .map_err(LogError::io(&self.log_path))?
            .len();
        self.size = 0;
        self.next_offset = self.base_offset;
        self.max_timestamp = -1;
        self.rolling_started_ms = None;
        self.index_entries = 0;
        self.time_entries = 0;
        self.last_time_entry = i64::MIN;
        self.bytes_since_index = 0;
        let mut valid_end = 0u64;
        let mut out_of_order = None;
        let log_path = self.log_path.clone();
        let stop = scan_batches(
            &files.log,
            &log_path,
            0,
            file_size,
            |position, header, _| {
                let meta = BatchMeta::from_header(0, header);
                if header.base_offset < 0
                    || (meta.base_offset < self.next_offset && position > 0)
                    || meta.base_offset < self.base_offset
                    || meta.last_offset - self.base_offset > u32::MAX as u64
                {
                    out_of_order = Some(position);
                    return Ok(false);
                }
                self.index_batch(files, position, &meta);
                valid_end = position + meta.size as u64;
                self.size = valid_end;
                Ok(true)
            },
        )?;
        let cut_at = match (stop, out_of_order) {
            (Some(ScanStop { position, error }), _) => {
                tracing::warn!(
                    segment = %self.log_path.display(),
                    position,
                    error = %error,
                    "truncating segment at invalid batch"
                );
                Some(position)
            }
            (None, Some(position)) => {
                tracing::warn!(
                    segment = %self.log_path.display(),
                    position,
                    "truncating segment at out-of-order batch"
                );
                Some(position)
            }
            (None, None) => None,
        };
        if let Some(position) = cut_at {
            files
                .log
                .set_len(position)
                .map_err(LogError::io(&self.log_path))?;
            self.size = position;
        }
        Ok(file_size - self.size)
    }

    /// Cuts the segment before the first batch whose last offset is at or above `offset`.
    /// Returns the new end offset of the segment.
    pub(crate) fn truncate_to(&mut self, files: &SegmentFiles, offset: u64) -> Result<u64> {
        let mut scanned = 0;
        let Some((position, header)) = self.locate(files, offset, &mut scanned)? else {
            self.next_offset = self.next_offset.min(offset);
            return Ok(self.next_offset);
        };
        files
            .log
            .set_len(position)
            .map_err(LogError::io(&self.log_path))?;
        self.size = position;
        let new_end = offset.min(header.base_offset.max(0) as u64);
        self.next_offset = new_end;
        // Drop index entries that point at or past the cut.
        {
            let map = files.index.lock();
            while self.index_entries > 0
                && index::offset_entry(map.bytes(), self.index_entries - 1).1 as u64 >= position
            {
                self.index_entries -= 1;
            }
        }
        let last_time_offset = {
            let map = files.time_index.lock();
            while self.time_entries > 0
                && self.base_offset + index::time_entry(map.bytes(), self.time_entries - 1).1 as u64
                    >= new_end
            {
                self.time_entries -= 1;
            }
            if self.time_entries > 0 {
                let (ts, rel) = index::time_entry(map.bytes(), self.time_entries - 1);
                self.last_time_entry = ts;
                Some(self.base_offset + rel as u64)
            } else {
                self.last_time_entry = i64::MIN;
                None
            }
        };
        // Recompute the largest timestamp from the last time entry on.
        self.max_timestamp = if self.time_entries > 0 {
            self.last_time_entry
        } else {
            -1
        };
        let mut position = match last_time_offset {
            Some(o) => self
                .locate(files, o + 1, &mut scanned)?
                .map_or(self.size, |(p, _)| p),
            None => 0,
        };
        while position < self.size {
            let h = self.read_header(files, position)?;
            self.max_timestamp = self.max_timestamp.max(h.max_timestamp);
            position += h.size() as u64;
        }
        let last_index_position = {
            let map = files.index.lock();
            self.index_entries
                .checked_sub(1)
                .map_or(0, |i| index::offset_entry(map.bytes(), i).1 as u64)
        };
        self.bytes_since_index = self.size - last_index_position;
        if self.size == 0 {
            self.rolling_started_ms = None;
        }
        Ok(new_end)
    }

    /// One past the last offset of the batches physically in the segment (the base offset
    /// when it is empty). Below `next_offset` when compaction or a truncation into a gap left
    /// no batch at the end.
    pub(crate) fn physical_end(&self, files: &SegmentFiles) -> Result<u64> {
        let mut position = {
            let map = files.index.lock();
            self.index_entries
                .checked_sub(1)
                .map_or(0, |i| index::offset_entry(map.bytes(), i).1 as u64)
        };
        let mut end = self.base_offset;
        while position < self.size {
            let header = self.read_header(files, position)?;
            end = header.last_offset() as u64 + 1;
            position += header.size() as u64;
        }
        Ok(end)
    }

    /// Makes the segment read-only: writes the final time-index entry, trims both indexes to
    /// their entries (fsyncing them when `sync`) and closes its cached files.
    pub(crate) fn seal(&mut self, cache: &HandleCache, sync: bool) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        let files = self.files(cache)?;
        // The time index always ends with (largest timestamp, last offset): opening checks for
        // it to tell a complete index from a cut one.
        if self.size > 0 {
            let relative_last = (self.physical_end(&files)? - 1 - self.base_offset) as u32;
            let entry = index::encode_time_entry(self.max_timestamp, relative_last);
            let mut map = files.time_index.lock();
            let last = self
                .time_entries
                .checked_sub(1)
                .map(|i| index::time_entry(map.bytes(), i));
            match last {
                // The last entry names the last batch: make it carry the largest timestamp.
                Some((ts, rel)) if rel == relative_last => {
                    if ts != self.max_timestamp {
                        map.write((self.time_entries - 1) * TIME_ENTRY, &entry);
                    }
                }
                // Full: the final entry replaces the last one, which it dominates in both
                // fields, so the index stays ordered.
                Some(_) if self.time_entries >= self.time_capacity_entries() => {
                    map.write((self.time_entries - 1) * TIME_ENTRY, &entry);
                }
                _ => {
                    if map.write(self.time_entries * TIME_ENTRY, &entry) {
                        self.time_entries += 1;
                    }
                }
            }
            self.last_time_entry = self.max_timestamp;
        }
        // Unmap before trimming: nothing may map a file past its new end. Pages written through
        // the map stay in the page cache and reach the disk with the file's next fsync.
        for map in [&files.index, &files.time_index] {
            *map.lock() = IndexMap::Empty;
        }
        drop(files);
        cache.remove(self.id);
        trim(&self.index_path, self.index_entries * OFFSET_ENTRY, sync)?;
        trim(&self.time_index_path, self.time_entries * TIME_ENTRY, sync)?;
        self.writable = false;
        Ok(())
    }

    /// Makes a sealed segment the active one again (after a truncation).
    pub(crate) fn unseal(&mut self, cache: &HandleCache) {
        cache.remove(self.id);
        self.writable = true;
    }

    /// Deletes the segment's files. Missing files are fine: deletion may be repeated after a
    /// crash.
    pub(crate) fn delete_files(&self, cache: &HandleCache) -> Result<()> {
        cache.remove(self.id);
        for path in [
            &self.log_path,
            &self.index_path,
            &self.time_index_path,
            &self.txn_index_path,
        ] {
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(LogError::io(path)(e)),
            }
        }
        Ok(())
    }
}

fn file_len(path: &Path) -> Result<Option<u64>> {
    match fs::metadata(path) {
        Ok(m) => Ok(Some(m.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LogError::io(path)(e)),
    }
}

fn trim(path: &Path, len: u64, sync: bool) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(LogError::io(path))?;
    file.set_len(len).map_err(LogError::io(path))?;
    if sync {
        file.sync_all().map_err(LogError::io(path))?;
    }
    Ok(())
}

fn open_writable_index(path: &Path, capacity: u64) -> Result<IndexMap> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(LogError::io(path))?;
    file.set_len(capacity).map_err(LogError::io(path))?;
    IndexMap::map_writable(&file, capacity).map_err(LogError::io(path))
}

fn open_read_only_index(path: &Path, len: u64) -> Result<IndexMap> {
    if len == 0 {
        return Ok(IndexMap::Empty);
    }
    let file = File::open(path).map_err(LogError::io(path))?;
    let actual = file.metadata().map_err(LogError::io(path))?.len();
    if actual < len {
        // Changed behind the log's back: refuse rather than read past the map.
        return Err(LogError::IndexTruncated {
            path: path.to_path_buf(),
        });
    }
    IndexMap::map_read_only(&file, len).map_err(LogError::io(path))
}
