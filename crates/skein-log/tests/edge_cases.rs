//! Inputs and states at the edges: what producers, followers and damaged files may hand the
//! log, each found in review and pinned here.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::sync::Arc;

use common::*;
use skein_log::batch::{validate_batch, DecodedRecords};
use skein_log::{CleanupPolicy, LogConfig, LogError, ManualClock};

fn set_base_offset(batch: &mut [u8], base: i64) {
    batch[0..8].copy_from_slice(&base.to_be_bytes());
}

fn set_last_offset_delta(batch: &mut [u8], delta: i32) {
    batch[23..27].copy_from_slice(&delta.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn a_producer_base_offset_is_ignored_whatever_it_says() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), LogConfig::default(), &clock);
    for base in [-10, i64::MAX, 7] {
        let mut batch = sized_batch(5, 3, T0);
        set_base_offset(&mut batch, base);
        log.append(&mut batch, 0).unwrap();
    }
    assert_eq!(log.log_end_offset(), 15);
    let offsets: Vec<u64> = read_all(&log).iter().map(|r| r.0).collect();
    assert_eq!(offsets, (0..15).collect::<Vec<_>>());
}

#[test]
fn a_producer_batch_whose_count_does_not_match_its_offsets_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), LogConfig::default(), &clock);
    let mut batch = sized_batch(1, 3, T0);
    set_last_offset_delta(&mut batch, i32::MAX);
    assert!(matches!(
        log.append(&mut batch, 0),
        Err(LogError::InconsistentRecordCount { .. })
    ));
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn replicated_batches_with_negative_or_huge_gaps_are_handled() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), LogConfig::default(), &clock);
    let mut negative = sized_batch(1, 3, T0);
    set_base_offset(&mut negative, -1);
    assert!(matches!(
        log.append_replicated(&negative),
        Err(LogError::NonMonotonicOffset { .. })
    ));
    // A leader's compacted log can have gaps of more than 2^32 offsets between batches; one
    // request carrying both sides of such a gap still lands with every offset intact.
    let mut first = sized_batch(1, 3, T0);
    set_base_offset(&mut first, 0);
    let mut far = sized_batch(1, 3, T0);
    set_base_offset(&mut far, 6_000_000_000);
    let request = [first, far].concat();
    log.append_replicated(&request).unwrap();
    assert_eq!(log.log_end_offset(), 6_000_000_001);
    assert_eq!(log.segment_count(), 2);
    let offsets: Vec<u64> = read_all(&log).iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![0, 6_000_000_000]);
    drop(log);
    let log = open(dir.path(), LogConfig::default(), &clock);
    assert_eq!(log.recovery_report().bytes_truncated, 0);
    assert_eq!(log.log_end_offset(), 6_000_000_001);
}

#[test]
fn rebuilt_indexes_are_written_so_the_next_open_trusts_them() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    for i in 0..60 {
        log.append(&mut sized_batch(2, 40, T0 + i), 0).unwrap();
    }
    log.close().unwrap();
    // Cut the final entry off the first segment's time index: its entries are still in order,
    // but it no longer ends at the segment's last batch.
    let time_index = dir.path().join("00000000000000000000.timeindex");
    let len = fs::metadata(&time_index).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&time_index)
        .unwrap()
        .set_len(len - 12)
        .unwrap();
    let log = open(dir.path(), small_config(), &clock);
    assert_eq!(log.recovery_report().indexes_rebuilt, 1);
    let all = read_all(&log);
    log.close().unwrap();
    let log = open(dir.path(), small_config(), &clock);
    assert_eq!(log.recovery_report().indexes_rebuilt, 0);
    assert_eq!(read_all(&log), all);
}

#[test]
fn rot_in_a_synced_segment_costs_that_segment_s_tail_not_the_segments_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    for i in 0..60 {
        log.append(&mut sized_batch(2, 40, T0 + i), 0).unwrap();
    }
    let end = log.log_end_offset();
    log.close().unwrap();
    let first = dir.path().join("00000000000000000000.log");
    let mut bytes = fs::read(&first).unwrap();
    let second_batch = validate_batch(&bytes).unwrap().size();
    bytes[second_batch + 70] ^= 0xff;
    fs::write(&first, &bytes).unwrap();
    fs::remove_file(dir.path().join("00000000000000000000.timeindex")).unwrap();
    let log = open(dir.path(), small_config(), &clock);
    assert_eq!(log.log_end_offset(), end);
    let all = read_all(&log);
    assert_eq!(all[0].0, 0);
    assert_eq!(all[1].0, 1);
    // The damaged batch and the rest of its segment are gone; everything after remains.
    let second_segment = log.segment_base_offsets()[1];
    assert_eq!(all[2].0, second_segment);
    assert_eq!(all.last().unwrap().0, end - 1);
}

#[test]
fn tombstones_stay_while_some_closed_record_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig {
        cleanup_policy: CleanupPolicy::Compact,
        delete_retention_ms: 1000,
        ..small_config()
    };
    let mut log = open(dir.path(), config, &clock);
    log.append(&mut batch_of(&[record("a", Some("old"), T0)]), 0)
        .unwrap();
    // A gzip batch whose payload is not gzip: valid CRC, unreadable records. A producer's
    // append refuses it; one written before records were validated, or copied from a
    // leader, is still in the log.
    let mut unreadable = batch_of(&[record("b", Some("x"), T0)]);
    unreadable[22] |= 1;
    let crc = crc32c::crc32c(&unreadable[21..]);
    unreadable[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(log.append(&mut unreadable.clone(), 0).is_err());
    unreadable[..8].copy_from_slice(&log.log_end_offset().to_be_bytes());
    log.append_replicated(&unreadable).unwrap();
    log.append(&mut batch_of(&[record("a", None, T0)]), 0)
        .unwrap();
    log.roll_now().unwrap();
    clock.advance(10_000);
    log.compact().unwrap();
    // Read batch by batch, skipping the one nobody can decode.
    let mut all = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let slice = log.read(offset, 1, None).unwrap();
        let bytes = slice.to_verified_bytes().unwrap();
        if let Ok(decoded) = DecodedRecords::decode(&bytes, skein_log::batch::MAX_DECOMPRESSED) {
            for r in decoded.iter() {
                let r = r.unwrap();
                all.push((r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec)));
            }
        }
        offset = slice.last_offset + 1;
    }
    assert!(
        all.iter()
            .any(|r| r.0.as_deref() == Some(&b"a"[..]) && r.1.is_none()),
        "the tombstone went: {all:?}"
    );
    assert!(!all.iter().any(|r| r.1.as_deref() == Some(&b"old"[..])));
}
