//! Crash tests: a log is written, the process "dies" (the log is dropped without `close`, so
//! no clean-shutdown marker), and the files are damaged the way a crash damages them: cut at
//! a random byte, random bytes flipped, indexes lost or half-written. On reopen, no corrupt
//! record may ever be returned and only the damaged tail may be lost.
//!
//! Each case prints its seed on failure; rerun one with `SKEIN_CRASH_SEED=<seed>`.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use skein_log::batch::validate_batch;
use skein_log::{HandleCache, Log, LogConfig, LogError, ManualClock};

/// Appended batches as the log stored them (offsets assigned), in order.
struct Written {
    batches: Vec<Vec<u8>>,
    /// Offsets below this were flushed before the crash.
    flushed_to: u64,
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 200,
        segment_index_bytes: 800,
        ..LogConfig::default()
    }
}

fn write_and_crash(dir: &Path, rng: &mut StdRng) -> Written {
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = Log::open(dir, config(), clock, HandleCache::new(16)).unwrap();
    let total = rng.gen_range(5..120);
    let flush_at = rng.gen_range(0..total);
    let mut written = Written {
        batches: Vec::new(),
        flushed_to: 0,
    };
    for i in 0..total {
        let records = rng.gen_range(1..5);
        let len = rng.gen_range(0..300);
        let mut batch = sized_batch(records, len, T0 + rng.gen_range(0..1000));
        log.append(&mut batch, i / 20).unwrap();
        written.batches.push(batch);
        if i == flush_at {
            log.flush().unwrap();
            written.flushed_to = log.log_end_offset();
        }
    }
    drop(log); // the crash
    written
}

fn segment_files(dir: &Path, suffix: &str) -> Vec<(u64, PathBuf)> {
    let mut files: Vec<(u64, PathBuf)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some(suffix))
        .map(|p| (p.file_stem().unwrap().to_str().unwrap().parse().unwrap(), p))
        .collect();
    files.sort();
    files
}

/// Where each written batch sits: (segment base, position, size).
fn placement(dir: &Path) -> Vec<(u64, u64, u64, u64)> {
    let mut out = Vec::new();
    for (base, path) in segment_files(dir, "log") {
        let bytes = fs::read(&path).unwrap();
        let mut at = 0;
        while at < bytes.len() {
            let h = validate_batch(&bytes[at..]).unwrap();
            out.push((base, at as u64, h.size() as u64, h.base_offset as u64));
            at += h.size();
        }
    }
    out
}

fn read_batches(log: &Log) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let slice = log.read(offset, 1, None).unwrap();
        if slice.is_empty() {
            break;
        }
        out.push(slice.to_verified_bytes().unwrap());
        offset = slice.last_offset + 1;
    }
    out
}

fn base_seed() -> u64 {
    std::env::var("SKEIN_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen())
}

fn cases() -> u64 {
    if std::env::var("SKEIN_CRASH_SEED").is_ok() {
        1
    } else {
        150
    }
}

#[test]
fn a_cut_or_flipped_unflushed_tail_loses_only_what_follows_the_damage() {
    let base = base_seed();
    for case in 0..cases() {
        let seed = base.wrapping_add(case);
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let written = write_and_crash(dir.path(), &mut rng);
        let layout = placement(dir.path());
        assert_eq!(layout.len(), written.batches.len());

        // Damage one byte range past what the log knows to be fsynced (its explicit flush, or
        // the recovery point its background fsyncs of rolled segments reached), as a crash can.
        let durable = fs::read_to_string(dir.path().join("recovery-point-offset-checkpoint"))
            .ok()
            .and_then(|t| t.lines().nth(1).and_then(|l| l.parse::<u64>().ok()))
            .unwrap_or(0)
            .max(written.flushed_to);
        let first_unflushed = layout.iter().position(|b| b.3 >= durable);
        let Some(first_unflushed) = first_unflushed else {
            continue;
        };
        let victim = rng.gen_range(first_unflushed..layout.len());
        let (seg_base, position, size, _) = layout[victim];
        let path = dir.path().join(format!("{seg_base:020}.log"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        // Bytes 0..8 (base offset) and 12..16 (leader epoch) lie outside the CRC in Kafka's
        // format; damage is aimed at the length, magic, CRC and everything the CRC covers.
        let offset_in_batch = match rng.gen_range(0..3) {
            0 => rng.gen_range(8..12),
            _ => rng.gen_range(16..size),
        };
        let cut = rng.gen_bool(0.4);
        if cut {
            file.set_len(position + offset_in_batch).unwrap();
        } else {
            let mut byte = [0u8; 1];
            file.read_exact_at(&mut byte, position + offset_in_batch)
                .unwrap();
            byte[0] ^= 1 << rng.gen_range(0..8);
            file.write_all_at(&byte, position + offset_in_batch)
                .unwrap();
        }
        drop(file);
        // Half the time the crash also took the indexes of the damaged segment.
        if rng.gen_bool(0.5) {
            let index = dir.path().join(format!("{seg_base:020}.index"));
            match rng.gen_range(0..3) {
                0 => fs::remove_file(index).unwrap(),
                1 => fs::write(index, vec![0u8; 13]).unwrap(),
                _ => fs::write(index, vec![0xffu8; 800]).unwrap(),
            }
        }

        let clock = Arc::new(ManualClock::new(T0));
        let log = Log::open(dir.path(), config(), clock, HandleCache::new(16)).unwrap();
        let report = log.recovery_report();
        assert!(!report.clean_shutdown);
        let recovered = read_batches(&log);
        assert_eq!(
            recovered,
            written.batches[..victim].to_vec(),
            "seed {seed}: recovered batches differ (victim batch {victim}, cut {cut})"
        );
        let expected_end = validate_batch(&written.batches[victim])
            .unwrap()
            .base_offset as u64;
        assert_eq!(log.log_end_offset(), expected_end, "seed {seed}");
        assert!(
            log.log_end_offset() >= written.flushed_to,
            "seed {seed}: flushed data lost"
        );
        // The log takes appends where it now ends, and they survive another crash.
        let mut log = log;
        let info = log.append(&mut sized_batch(1, 5, T0), 9).unwrap();
        assert_eq!(info.first_offset, expected_end, "seed {seed}");
        drop(log);
        let clock = Arc::new(ManualClock::new(T0));
        let log = Log::open(dir.path(), config(), clock, HandleCache::new(16)).unwrap();
        assert_eq!(read_batches(&log).len(), victim + 1, "seed {seed}");
    }
}

#[test]
fn lost_or_garbled_indexes_are_rebuilt_and_lookups_stay_exact() {
    let base = base_seed();
    for case in 0..cases() / 3 {
        let seed = base.wrapping_add(case);
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let written = write_and_crash(dir.path(), &mut rng);
        for suffix in ["index", "timeindex"] {
            for (_, path) in segment_files(dir.path(), suffix) {
                match rng.gen_range(0..4) {
                    0 => fs::remove_file(&path).unwrap(),
                    1 => {
                        let len = fs::metadata(&path).unwrap().len();
                        let file = OpenOptions::new().write(true).open(&path).unwrap();
                        file.set_len(rng.gen_range(0..=len)).unwrap();
                    }
                    2 => fs::write(
                        &path,
                        (0..rng.gen_range(0..64))
                            .map(|_| rng.gen())
                            .collect::<Vec<u8>>(),
                    )
                    .unwrap(),
                    _ => {}
                }
            }
        }
        let clock = Arc::new(ManualClock::new(T0));
        let log = Log::open(dir.path(), config(), clock, HandleCache::new(16)).unwrap();
        assert_eq!(read_batches(&log), written.batches, "seed {seed}");
        let all = read_all(&log);
        for r in &all {
            let found = log.read(r.0, 1, None).unwrap();
            assert!(
                found.first_offset <= r.0 && found.last_offset >= r.0,
                "seed {seed}"
            );
            let ts_hit = log.offset_for_timestamp(r.3).unwrap().unwrap();
            let expected = all.iter().find(|x| x.3 >= r.3).unwrap();
            assert_eq!(ts_hit, (expected.0, expected.3), "seed {seed}");
        }
    }
}

#[test]
fn a_clean_shutdown_with_damaged_indexes_still_never_misreads() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = Log::open(dir.path(), config(), clock.clone(), HandleCache::new(16)).unwrap();
    let mut batches = Vec::new();
    for _ in 0..80 {
        let mut batch = sized_batch(2, 100, T0);
        log.append(&mut batch, 0).unwrap();
        batches.push(batch);
    }
    log.close().unwrap();
    // Entries that are out of order, or point past the end of the log, are caught on open.
    let (_, index) = &segment_files(dir.path(), "index")[0];
    fs::write(
        index,
        [0u8, 0, 0, 9, 0, 0, 0x7f, 0xff, 0, 0, 0, 1, 0, 0, 0, 0],
    )
    .unwrap();
    let log = Log::open(dir.path(), config(), clock, HandleCache::new(16)).unwrap();
    assert_eq!(log.recovery_report().indexes_rebuilt, 1);
    assert_eq!(read_batches(&log), batches);
}

#[test]
fn bit_rot_in_flushed_data_is_refused_on_read_not_returned() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = Log::open(dir.path(), config(), clock.clone(), HandleCache::new(16)).unwrap();
    for _ in 0..40 {
        log.append(&mut sized_batch(2, 100, T0), 0).unwrap();
    }
    log.close().unwrap();
    let layout = placement(dir.path());
    let (seg, position, _, base_offset) = layout[7];
    let path = dir.path().join(format!("{seg:020}.log"));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    file.write_all_at(b"rot", position + 70).unwrap();
    drop(file);
    // A clean shutdown means no scan; the damage is found when the batch is read.
    let log = Log::open(dir.path(), config(), clock, HandleCache::new(16)).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    let slice = log.read(base_offset, 1, None).unwrap();
    assert!(matches!(
        slice.to_verified_bytes(),
        Err(LogError::CorruptSegment { .. })
    ));
    // A read that starts before it stops short of it.
    let earlier = log.read(layout[5].3, 1 << 20, None).unwrap();
    let bytes = earlier.to_verified_bytes().unwrap();
    assert_eq!(decode_all(&bytes).last().unwrap().0, base_offset - 1);
}

#[test]
fn an_interrupted_compaction_swap_is_undone_or_finished_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = Log::open(dir.path(), config(), clock.clone(), HandleCache::new(16)).unwrap();
    for _ in 0..40 {
        log.append(&mut sized_batch(2, 100, T0), 0).unwrap();
    }
    let all = read_all(&log);
    drop(log);
    let (first_base, first_log) = segment_files(dir.path(), "log")[0].clone();
    // A half-written cleaner output: dropped, the original stays.
    fs::write(first_log.with_extension("log.cleaned"), b"partial").unwrap();
    let log = Log::open(dir.path(), config(), clock.clone(), HandleCache::new(16)).unwrap();
    assert_eq!(read_all(&log), all);
    assert!(!first_log
        .with_extension("log.cleaned")
        .try_exists()
        .unwrap());
    drop(log);
    // A complete cleaner output renamed to .swap: the swap is finished. Here the "cleaned"
    // segment keeps only the second batch of the first segment.
    let bytes = fs::read(&first_log).unwrap();
    let first = validate_batch(&bytes).unwrap().size();
    let second = validate_batch(&bytes[first..]).unwrap().size();
    fs::write(
        first_log.with_extension("log.swap"),
        &bytes[first..first + second],
    )
    .unwrap();
    let log = Log::open(dir.path(), config(), clock, HandleCache::new(16)).unwrap();
    let after = read_all(&log);
    let second_base = segment_files(dir.path(), "log")[1].0;
    assert_eq!(after[0].0, first_base + 2);
    assert_eq!(&after[..2], &all[2..4]);
    let rest: Vec<_> = all.iter().filter(|r| r.0 >= second_base).cloned().collect();
    assert_eq!(&after[2..], &rest[..]);
    assert!(!first_log.with_extension("log.swap").try_exists().unwrap());
}
