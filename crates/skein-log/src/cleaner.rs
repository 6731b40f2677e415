//! Compaction (`cleanup.policy=compact`): keeps the newest record of every key in the closed
//! segments.
//!
//! 1. Build a map from key hash (128-bit xxh3, as Kafka's cleaner keys on a 16-byte MD5) to the
//!    newest offset of that key, over every closed segment.
//! 2. Rewrite each closed segment into `<base>.log.cleaned`, keeping a record when it is the
//!    newest of its key, has no key, or is a tombstone younger than `delete.retention.ms`.
//!    A batch that keeps every record is copied byte for byte; a batch that keeps some is
//!    rebuilt from the kept records' own bytes with the same base offset, last offset delta,
//!    timestamps, producer fields and codec, so offsets and producer state are preserved.
//!    Control batches are kept as they are.
//! 3. Swap atomically: fsync `.cleaned`, rename it to `.log.swap`, fsync the directory,
//!    delete the old indexes, rename `.log.swap` over `.log`, fsync the directory and rebuild
//!    the indexes. A crash before the rename to `.swap` leaves the original (the `.cleaned`
//!    file is deleted on open); after it, open finishes the swap (see `prepare_directory`).

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::sync::Arc;

use xxhash_rust::xxh3::xxh3_128;

use crate::batch::{assemble, set_offset_and_epoch, BatchHeader, BatchParts, DecodedRecords};
use crate::checkpoint;
use crate::error::{LogError, Result};
use crate::log::Log;
use crate::scan::scan_batches;
use crate::segment::Segment;

/// What a compaction run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionReport {
    pub segments_rewritten: usize,
    pub records_removed: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

impl Log {
    /// Compacts the closed segments when the cleanup policy includes compact.
    pub fn compact(&mut self) -> Result<CompactionReport> {
        self.check_fenced()?;
        let mut report = CompactionReport::default();
        if !self.config.cleanup_policy.compacts() {
            return Ok(report);
        }
        let active_base = self.active().base_offset;
        let closed: Vec<u64> = self
            .segments
            .range(..active_base)
            .map(|(b, _)| *b)
            .collect();
        if closed.is_empty() {
            return Ok(report);
        }
        let mut newest: HashMap<u128, i64> = HashMap::new();
        // Whether every key of the closed segments was seen: a record the cleaner cannot
        // read may hold a value that an expired tombstone must keep hidden.
        let mut complete = true;
        for base in &closed {
            let Some(segment) = self.segments.get(base) else {
                continue;
            };
            let files = segment.files(&self.cache)?;
            let stop = scan_batches(
                &files.log,
                &segment.log_path,
                0,
                segment.size,
                |_, header, batch| {
                    if header.is_control() {
                        return Ok(true);
                    }
                    match DecodedRecords::decode(batch, crate::batch::MAX_DECOMPRESSED) {
                        Ok(decoded) => {
                            for record in decoded.iter() {
                                let Ok(record) = record else {
                                    complete = false;
                                    break;
                                };
                                if let Some(key) = record.key {
                                    let offset = header.record_offset(record.offset_delta);
                                    newest.insert(xxh3_128(key), offset);
                                }
                            }
                        }
                        Err(_) => complete = false,
                    }
                    Ok(true)
                },
            )?;
            if stop.is_some() {
                complete = false;
            }
        }
        let now = self.clock.now_ms();
        let tombstone_horizon = if complete {
            now.saturating_sub(self.config.delete_retention_ms)
        } else {
            tracing::warn!(
                log = %self.dir.display(),
                "keeping every tombstone: some closed records could not be read"
            );
            i64::MIN
        };
        for base in closed {
            let Some(segment) = self.segments.get(&base) else {
                continue;
            };
            if let Some(outcome) = clean_segment(self, segment, &newest, tombstone_horizon)? {
                report.segments_rewritten += 1;
                report.records_removed += outcome.records_removed;
                report.bytes_before += segment.size;
                report.bytes_after += outcome.size;
                self.swap_in_cleaned(base)?;
            }
        }
        self.cleaned_to = active_base;
        Ok(report)
    }

    fn swap_in_cleaned(&mut self, base: u64) -> Result<()> {
        let cache = Arc::clone(&self.cache);
        let dir = self.dir.clone();
        let Some(segment) = self.segments.get_mut(&base) else {
            return Ok(());
        };
        let cleaned = cleaned_path(segment);
        let swap = segment.log_path.with_extension("log.swap");
        fs::rename(&cleaned, &swap).map_err(LogError::io(&swap))?;
        checkpoint::sync_dir(&dir)?;
        // From here a crash finishes the swap on open. The old indexes go before the new log
        // takes the name, so no index of the old file ever sits beside the new one.
        cache.remove(segment.id);
        for path in [&segment.index_path, &segment.time_index_path] {
            if let Err(e) = fs::remove_file(path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(LogError::io(path)(e));
                }
            }
        }
        fs::rename(&swap, &segment.log_path).map_err(LogError::io(&segment.log_path))?;
        checkpoint::sync_dir(&dir)?;
        let next_offset = segment.next_offset;
        segment.writable = true;
        let files = segment.files(&cache)?;
        segment.recover(&files)?;
        drop(files);
        segment.next_offset = next_offset;
        segment.seal(&cache, true)
    }
}

struct CleanOutcome {
    records_removed: u64,
    size: u64,
}

fn cleaned_path(segment: &Segment) -> std::path::PathBuf {
    segment.log_path.with_extension("log.cleaned")
}

/// Writes the cleaned copy of `segment`; `None` (and no file) when nothing would change.
fn clean_segment(
    log: &Log,
    segment: &Segment,
    newest: &HashMap<u128, i64>,
    tombstone_horizon: i64,
) -> Result<Option<CleanOutcome>> {
    let files = segment.files(&log.cache)?;
    let mut kept_batches: Vec<Vec<u8>> = Vec::new();
    let mut removed = 0u64;
    let mut changed = false;
    let stop = scan_batches(
        &files.log,
        &segment.log_path,
        0,
        segment.size,
        |_, header, batch| {
            match clean_batch(header, batch, newest, tombstone_horizon) {
                BatchFate::Keep => kept_batches.push(batch.to_vec()),
                BatchFate::Rewrite { bytes, removed: r } => {
                    changed = true;
                    removed += r;
                    if let Some(bytes) = bytes {
                        kept_batches.push(bytes);
                    }
                }
            }
            Ok(true)
        },
    )?;
    if let Some(stop) = stop {
        // Never rewrite a segment that cannot be read to its end: the rest would be lost.
        tracing::warn!(
            segment = %segment.log_path.display(),
            position = stop.position,
            error = %stop.error,
            "skipping compaction of a segment with an unreadable batch"
        );
        return Ok(None);
    }
    if !changed {
        return Ok(None);
    }
    let path = cleaned_path(segment);
    let file = File::create(&path).map_err(LogError::io(&path))?;
    let mut out = BufWriter::new(file);
    let mut size = 0u64;
    for batch in &kept_batches {
        out.write_all(batch).map_err(LogError::io(&path))?;
        size += batch.len() as u64;
    }
    let file = out
        .into_inner()
        .map_err(|e| LogError::io(&path)(e.into_error()))?;
    file.sync_all().map_err(LogError::io(&path))?;
    Ok(Some(CleanOutcome {
        records_removed: removed,
        size,
    }))
}

enum BatchFate {
    Keep,
    /// `bytes` is `None` when nothing of the batch remains.
    Rewrite {
        bytes: Option<Vec<u8>>,
        removed: u64,
    },
}

fn clean_batch(
    header: &BatchHeader,
    batch: &[u8],
    newest: &HashMap<u128, i64>,
    tombstone_horizon: i64,
) -> BatchFate {
    if header.is_control() {
        return BatchFate::Keep;
    }
    // A batch the cleaner cannot read is kept whole: compaction never loses what it
    // does not understand.
    let Ok(decoded) = DecodedRecords::decode(batch, crate::batch::MAX_DECOMPRESSED) else {
        return BatchFate::Keep;
    };
    let mut kept = Vec::with_capacity(decoded.records.len());
    let mut kept_count = 0i32;
    let mut removed = 0u64;
    for record in decoded.iter() {
        let Ok(record) = record else {
            return BatchFate::Keep;
        };
        let offset = header.record_offset(record.offset_delta);
        let keep = match record.key {
            None => true,
            Some(key) => {
                let is_newest = newest.get(&xxh3_128(key)).is_none_or(|&o| o == offset);
                let expired_tombstone =
                    record.value.is_none() && decoded.timestamp_of(&record) < tombstone_horizon;
                is_newest && !expired_tombstone
            }
        };
        if keep {
            kept.extend_from_slice(record.raw);
            kept_count += 1;
        } else {
            removed += 1;
        }
    }
    if removed == 0 {
        return BatchFate::Keep;
    }
    if kept_count == 0 && header.producer_id < 0 {
        return BatchFate::Rewrite {
            bytes: None,
            removed,
        };
    }
    // An idempotent producer's batch keeps its (possibly empty) header so its last sequence
    // survives, as in Kafka.
    let parts = BatchParts {
        records_count: kept_count,
        ..BatchParts::of(header)
    };
    match assemble(&kept, parts) {
        Ok(mut bytes) => {
            set_offset_and_epoch(
                &mut bytes,
                header.base_offset,
                header.partition_leader_epoch,
            );
            BatchFate::Rewrite {
                bytes: Some(bytes),
                removed,
            }
        }
        Err(_) => BatchFate::Keep,
    }
}
