//! Behaviour of one partition log through its public API, on real files.

mod common;

use std::sync::Arc;

use common::*;
use skein_log::batch::{
    build_batch, validate_batch, Compression, NewRecord, ProducerFields, TimestampType,
};
use skein_log::{CleanupPolicy, LogConfig, LogError, ManualClock};

#[test]
fn appended_batches_get_consecutive_offsets_and_read_back_identical() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    let mut expected = Vec::new();
    for i in 0..50 {
        let mut batch = batch_of(&[
            record(&format!("k{i}"), Some("a"), T0),
            record("x", Some("b"), T0),
        ]);
        let info = log.append(&mut batch, 3).unwrap();
        assert_eq!(info.first_offset, i * 2);
        assert_eq!(info.last_offset, i * 2 + 1);
        let header = validate_batch(&batch).unwrap();
        assert_eq!(header.base_offset as u64, i * 2);
        assert_eq!(header.partition_leader_epoch, 3);
        expected.push(batch);
    }
    assert_eq!(log.log_end_offset(), 100);
    assert!(log.segment_count() > 3, "small segments must have rolled");
    // Reading from the start of each batch returns that batch first, byte for byte.
    for (i, batch) in expected.iter().enumerate() {
        let slice = log.read(i as u64 * 2, 1, None).unwrap();
        assert_eq!(&slice.to_verified_bytes().unwrap(), batch);
        // An offset inside a batch returns the whole batch that holds it.
        let inner = log.read(i as u64 * 2 + 1, 1, None).unwrap();
        assert_eq!(inner.first_offset, i as u64 * 2);
    }
    assert_eq!(read_all(&log).len(), 100);
    assert_eq!(log.latest_epoch(), Some(3));
}

#[test]
fn reads_respect_max_bytes_upper_bound_and_range() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), LogConfig::default(), &clock);
    let size = sized_batch(1, 100, T0).len() as u64;
    for _ in 0..10 {
        log.append(&mut sized_batch(1, 100, T0), 0).unwrap();
    }
    let slice = log.read(0, size * 3 + 5, None).unwrap();
    assert_eq!(slice.len(), size * 3);
    assert_eq!(slice.last_offset, 2);
    // The first batch is returned even when it alone is over the limit.
    assert_eq!(log.read(0, 1, None).unwrap().len(), size);
    // Nothing at or past the upper bound (the high watermark).
    assert_eq!(log.read(0, u64::MAX, Some(4)).unwrap().last_offset, 3);
    assert!(log.read(4, u64::MAX, Some(4)).unwrap().is_empty());
    assert!(log.read(10, 100, None).unwrap().is_empty());
    assert!(matches!(
        log.read(11, 100, None),
        Err(LogError::OffsetOutOfRange { offset: 11, .. })
    ));
}

#[test]
fn invalid_input_is_rejected_and_leaves_the_log_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig {
        max_message_bytes: 2000,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config, &clock);
    log.append(&mut sized_batch(2, 10, T0), 0).unwrap();
    let size = log.size_bytes();

    let good = sized_batch(2, 10, T0);
    let mut corrupt = good.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    // A valid batch followed by a corrupt one: neither is written.
    let mut both = [good.clone(), corrupt.clone()].concat();
    assert!(matches!(
        log.append(&mut both, 0),
        Err(LogError::InvalidBatch { index: 1, .. })
    ));
    let mut truncated = good[..good.len() - 3].to_vec();
    assert!(matches!(
        log.append(&mut truncated, 0),
        Err(LogError::InvalidBatch { index: 0, .. })
    ));
    let mut old_magic = good.clone();
    old_magic[16] = 1;
    assert!(log.append(&mut old_magic, 0).is_err());
    assert!(matches!(log.append(&mut [], 0), Err(LogError::EmptyAppend)));
    let mut big = sized_batch(3, 1000, T0);
    assert!(matches!(
        log.append(&mut big, 0),
        Err(LogError::BatchTooLarge { .. })
    ));

    assert_eq!(log.size_bytes(), size);
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(read_all(&log).len(), 2);
}

#[test]
fn compressed_batches_are_stored_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), LogConfig::default(), &clock);
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let records: Vec<NewRecord> = (0..20)
            .map(|i| record(&format!("{i}"), Some("payload payload"), T0 + i))
            .collect();
        let mut batch = build_batch(&records, codec, ProducerFields::NONE).unwrap();
        let original_records = batch[61..].to_vec();
        let info = log.append(&mut batch, 0).unwrap();
        let read = log
            .read(info.first_offset, 1 << 20, None)
            .unwrap()
            .to_verified_bytes()
            .unwrap();
        assert_eq!(
            &read[61..],
            &original_records[..],
            "{codec:?} records changed"
        );
        assert_eq!(read, batch);
    }
    let all = read_all(&log);
    assert_eq!(all.len(), 80);
    assert!(all.iter().enumerate().all(|(i, r)| r.0 == i as u64));
}

#[test]
fn log_append_time_stamps_batches_and_keeps_the_crc_valid() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config, &clock);
    clock.set(T0 + 5000);
    let mut batch = batch_of(&[record("a", Some("1"), 42)]);
    let info = log.append(&mut batch, 0).unwrap();
    assert_eq!(info.log_append_time, Some(T0 + 5000));
    let header = validate_batch(&batch).unwrap();
    assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(read_all(&log)[0].3, T0 + 5000);
}

#[test]
fn offset_and_timestamp_lookups_equal_a_full_scan_over_many_segments() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    // Timestamps wander up and down, as producer clocks do.
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..400 {
        let n = 1 + (next() % 4) as usize;
        let records: Vec<NewRecord> = (0..n)
            .map(|i| record(&format!("{i}"), Some("v"), T0 + (next() % 10_000) as i64))
            .collect();
        log.append(&mut batch_of(&records), 0).unwrap();
    }
    assert!(log.segment_count() > 10);
    let all = read_all(&log);
    for target in 0..log.log_end_offset() {
        let slice = log.read(target, 1, None).unwrap();
        let batch = common::decode_all(&slice.to_verified_bytes().unwrap());
        assert!(
            batch.iter().any(|r| r.0 == target),
            "offset {target} not in its batch"
        );
    }
    for _ in 0..300 {
        let ts = T0 + (next() % 10_500) as i64 - 200;
        let expected = all.iter().find(|r| r.3 >= ts).map(|r| (r.0, r.3));
        assert_eq!(
            log.offset_for_timestamp(ts).unwrap(),
            expected,
            "timestamp {ts}"
        );
    }
}

#[test]
fn truncation_removes_the_tail_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    for i in 0..100 {
        log.append(
            &mut batch_of(&[
                record("k", Some("v"), T0 + i),
                record("k", Some("w"), T0 + i),
            ]),
            i as i32 / 10,
        )
        .unwrap();
    }
    log.truncate_to(51).unwrap(); // mid-batch: the batch 50..=51 goes whole
    assert_eq!(log.log_end_offset(), 50);
    assert_eq!(log.latest_epoch(), Some(2));
    assert_eq!(log.end_offset_for_epoch(2).unwrap().start_offset, 50);
    assert_eq!(log.offset_for_timestamp(T0 + 25).unwrap(), None);
    let info = log
        .append(&mut batch_of(&[record("z", Some("z"), T0)]), 7)
        .unwrap();
    assert_eq!(info.first_offset, 50);
    let all = read_all(&log);
    assert_eq!(all.len(), 51);
    assert_eq!(all.last().unwrap().1.as_deref(), Some(&b"z"[..]));
    // Truncating below the first segment empties the log at that offset.
    log.truncate_to(0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    assert!(read_all(&log).is_empty());
}

#[test]
fn retention_by_time_and_size_deletes_whole_old_segments() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig {
        retention_ms: 60_000,
        ..small_config()
    };
    let mut log = open(dir.path(), config.clone(), &clock);
    for i in 0..200 {
        clock.set(T0 + i * 1000);
        log.append(&mut sized_batch(1, 50, T0 + i * 1000), 0)
            .unwrap();
    }
    let before = log.segment_count();
    let report = log.enforce_retention().unwrap();
    assert!(report.segments_deleted > 0 && log.segment_count() < before);
    let first = read_all(&log)[0].clone();
    assert_eq!(first.0, log.log_start_offset());
    // Everything deleted was older than the cutoff; the oldest kept segment is not wholly old.
    assert!(first.3 < T0 + 199_000 - 60_000 + 1000 * 40);
    assert!(read_all(&log)
        .iter()
        .all(|r| r.3 >= T0 + 199_000 - 60_000 - 40_000));

    log.set_config(LogConfig {
        retention_ms: -1,
        retention_bytes: 2000,
        ..config.clone()
    })
    .unwrap();
    log.enforce_retention().unwrap();
    assert!(log.size_bytes() <= 2000 + 4096);
    assert_eq!(log.log_end_offset(), 200);

    // Everything expired: the active segment is rolled and deleted too.
    clock.set(T0 + 10_000_000);
    log.set_config(config).unwrap();
    log.enforce_retention().unwrap();
    assert_eq!(log.log_start_offset(), 200);
    assert!(read_all(&log).is_empty());
    assert_eq!(
        log.append(&mut sized_batch(1, 1, T0), 0)
            .unwrap()
            .first_offset,
        200
    );
}

#[test]
fn advancing_the_log_start_hides_and_then_deletes_old_data() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    for _ in 0..100 {
        log.append(&mut sized_batch(1, 50, T0), 0).unwrap();
    }
    log.advance_log_start(37).unwrap();
    assert_eq!(log.log_start_offset(), 37);
    assert!(matches!(
        log.read(36, 10, None),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert_eq!(read_all(&log).first().unwrap().0, 37);
    assert!(log.segment_base_offsets()[0] <= 37);
    assert!(log.advance_log_start(101).is_err());
    drop(log);
    let log = open(dir.path(), small_config(), &clock);
    assert_eq!(log.log_start_offset(), 37);
}

#[test]
fn compaction_keeps_the_newest_value_per_key_and_preserves_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig {
        cleanup_policy: CleanupPolicy::Compact,
        delete_retention_ms: 10_000,
        ..small_config()
    };
    let mut log = open(dir.path(), config.clone(), &clock);
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for i in 0..300u64 {
        let key = format!("key{}", i % 7);
        let value = if i == 295 {
            None
        } else {
            Some(format!("v{i}"))
        };
        let rec = record(&key, value.as_deref(), T0 + i as i64);
        let mut batch = build_batch(&[rec], codecs[i as usize % 5], ProducerFields::NONE).unwrap();
        log.append(&mut batch, 0).unwrap();
    }
    let active_base = *log.segment_base_offsets().last().unwrap();
    let before = read_all(&log);
    let report = log.compact().unwrap();
    assert!(report.records_removed > 0 && report.bytes_after < report.bytes_before);
    let after = read_all(&log);
    // Expected: in the closed part, only each key's newest offset (over the closed part).
    let mut newest = std::collections::HashMap::new();
    for r in before.iter().filter(|r| r.0 < active_base) {
        newest.insert(r.1.clone(), r.0);
    }
    let expected: Vec<_> = before
        .iter()
        .filter(|r| r.0 >= active_base || newest.get(&r.1) == Some(&r.0))
        .cloned()
        .collect();
    assert_eq!(after, expected);
    assert_eq!(log.log_end_offset(), 300);

    // The tombstone (offset 295, the newest of key1) survives until delete.retention.ms has passed.
    log.append(&mut sized_batch(1, 900, T0 + 400), 0).unwrap(); // roll everything closed
    log.append(&mut sized_batch(1, 10, T0 + 400), 0).unwrap();
    log.compact().unwrap();
    assert!(read_all(&log).iter().any(|r| r.0 == 295 && r.2.is_none()));
    clock.set(T0 + 295 + 10_001);
    log.compact().unwrap();
    let after = read_all(&log);
    assert!(!after.iter().any(|r| r.0 == 295));
    assert!(!after.iter().any(|r| r.1.as_deref() == Some(&b"key1"[..])));
    // Offsets survive a reopen, and compacted segments stay readable by offset.
    drop(log);
    let log = open(dir.path(), config, &clock);
    assert_eq!(read_all(&log), after);
    assert_eq!(log.log_end_offset(), 302);
}

#[test]
fn clean_reopen_scans_nothing_and_continues_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    for i in 0..300 {
        log.append(&mut sized_batch(2, 20, T0 + i), 1).unwrap();
    }
    let all = read_all(&log);
    log.close().unwrap();
    let mut log = open(dir.path(), small_config(), &clock);
    let report = log.recovery_report();
    assert!(report.clean_shutdown);
    assert_eq!(
        (
            report.segments_recovered,
            report.bytes_scanned,
            report.indexes_rebuilt
        ),
        (0, 0, 0)
    );
    assert_eq!(log.log_end_offset(), 600);
    assert_eq!(read_all(&log), all);
    assert_eq!(
        log.offset_for_timestamp(T0 + 150).unwrap().map(|x| x.0),
        Some(300)
    );
    assert_eq!(
        log.append(&mut sized_batch(1, 1, T0), 1)
            .unwrap()
            .first_offset,
        600
    );
    // The marker is gone once reopened: a crash now is detected.
    drop(log);
    let log = open(dir.path(), small_config(), &clock);
    assert!(!log.recovery_report().clean_shutdown);
    assert_eq!(log.log_end_offset(), 601);
}

#[test]
fn replicated_appends_keep_their_offsets_and_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut leader = open(&dir.path().join("leader"), small_config(), &clock);
    for i in 0..30 {
        leader.append(&mut sized_batch(2, 10, T0), i / 10).unwrap();
    }
    let mut follower = open(&dir.path().join("follower"), small_config(), &clock);
    let mut offset = 0;
    while offset < leader.log_end_offset() {
        let slice = leader.read(offset, 1000, None).unwrap();
        follower
            .append_replicated(&slice.to_verified_bytes().unwrap())
            .unwrap();
        offset = slice.last_offset + 1;
    }
    assert_eq!(read_all(&follower), read_all(&leader));
    assert_eq!(follower.leader_epochs(), leader.leader_epochs());
    let stale = leader
        .read(0, 1, None)
        .unwrap()
        .to_verified_bytes()
        .unwrap();
    assert!(matches!(
        follower.append_replicated(&stale),
        Err(LogError::NonMonotonicOffset { .. })
    ));
}

#[test]
fn thousands_of_partitions_stay_within_the_open_file_bound() {
    use skein_log::{LogManager, LogManagerConfig, TopicPartition};
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    let before = fds();
    let manager = LogManager::open(
        dir.path(),
        LogManagerConfig {
            default_log: LogConfig {
                segment_index_bytes: 64 * 1024,
                ..LogConfig::default()
            },
            max_open_segments: 100,
            ..LogManagerConfig::default()
        },
        clock.clone(),
    )
    .unwrap();
    let partitions: Vec<TopicPartition> = (0..2000)
        .map(|i| TopicPartition::new(format!("t{}", i % 50), i / 50))
        .collect();
    for round in 0..2 {
        for tp in &partitions {
            let log = manager.get_or_create(tp, None).unwrap();
            log.write()
                .append(&mut sized_batch(1, 10, T0 + round), 0)
                .unwrap();
        }
        assert!(manager.handle_cache().open_segments() <= 100);
        assert!(fds() <= before + 110, "{} descriptors open", fds() - before);
    }
    for tp in &partitions {
        let log = manager.get(tp).unwrap();
        assert_eq!(read_all(&log.read()).len(), 2);
    }
    assert!(fds() <= before + 110);
    manager.close().unwrap();
    let manager = LogManager::open(dir.path(), LogManagerConfig::default(), clock).unwrap();
    assert_eq!(manager.partitions().len(), 2000);
    assert!(manager
        .recovery_reports()
        .iter()
        .all(|(_, r)| r.clean_shutdown));
}

#[test]
fn segment_ms_rolls_by_wall_clock_not_by_old_producer_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig {
        segment_ms: 60_000,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config, &clock);
    // Timestamps a year old must not roll a segment per append.
    for _ in 0..20 {
        log.append(&mut sized_batch(1, 10, T0 - 365 * 86_400_000), 0)
            .unwrap();
    }
    assert_eq!(log.segment_count(), 1);
    clock.advance(60_000);
    log.append(&mut sized_batch(1, 10, T0), 0).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 20]);
}

#[test]
fn maintenance_compacts_only_once_enough_closed_data_is_dirty() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig {
        cleanup_policy: CleanupPolicy::Compact,
        min_cleanable_dirty_ratio: 0.5,
        ..small_config()
    };
    let mut log = open(dir.path(), config, &clock);
    for i in 0..60 {
        let key = format!("key{}", i % 50);
        log.append(&mut batch_of(&[record(&key, Some("v"), T0 + i)]), 0)
            .unwrap();
    }
    assert_eq!(log.dirty_ratio(), 1.0);
    let (_, first) = log.maintain().unwrap();
    assert!(first.records_removed > 0);
    assert_eq!(log.dirty_ratio(), 0.0);
    // A little new closed data is below the ratio: no pass.
    log.append(&mut batch_of(&[record("key7", Some("w"), T0)]), 0)
        .unwrap();
    log.roll_now().unwrap();
    assert!(
        log.dirty_ratio() > 0.0 && log.dirty_ratio() < 0.5,
        "{}",
        log.dirty_ratio()
    );
    let (_, second) = log.maintain().unwrap();
    assert_eq!(second.segments_rewritten, 0);
    // An explicit compaction still runs.
    assert!(log.compact().unwrap().records_removed > 0);
}

#[test]
fn flush_messages_and_flush_ms_move_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig {
        flush_messages: 5,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config, &clock);
    log.append(&mut sized_batch(2, 10, T0), 0).unwrap();
    log.append(&mut sized_batch(2, 10, T0), 0).unwrap();
    assert_eq!(log.recovery_point(), 0, "4 records: not yet");
    log.append(&mut sized_batch(2, 10, T0), 0).unwrap();
    assert_eq!(log.recovery_point(), 6, "6 records: flushed");

    let config = LogConfig {
        flush_ms: 1000,
        ..LogConfig::default()
    };
    log.set_config(config).unwrap();
    log.append(&mut sized_batch(1, 10, T0), 0).unwrap();
    clock.advance(999);
    log.maintain().unwrap();
    assert_eq!(log.recovery_point(), 6);
    clock.advance(1);
    log.maintain().unwrap();
    assert_eq!(log.recovery_point(), 7);
    // An explicit flush needs no policy.
    log.set_config(LogConfig::default()).unwrap();
    log.append(&mut sized_batch(1, 10, T0), 0).unwrap();
    assert_eq!(log.recovery_point(), 7);
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), 8);
}

#[test]
fn batch_headers_can_be_walked_without_reading_records() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    for _ in 0..30 {
        log.append(&mut sized_batch(2, 40, T0), 0).unwrap();
    }
    let mut bases = Vec::new();
    log.for_each_batch_header(0, |h| bases.push(h.base_offset))
        .unwrap();
    assert_eq!(bases, (0..30).map(|i| i * 2).collect::<Vec<i64>>());
    let mut tail = Vec::new();
    log.for_each_batch_header(41, |h| tail.push(h.base_offset))
        .unwrap();
    assert_eq!(tail.first(), Some(&40));
}

#[test]
fn the_record_with_the_largest_timestamp_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    assert_eq!(log.max_timestamp_offset().unwrap(), None);
    for (i, ts) in [5, 90, 20, 90, 7].iter().enumerate() {
        log.append(
            &mut batch_of(&[record(&format!("{i}"), Some("v"), T0 + ts)]),
            0,
        )
        .unwrap();
    }
    assert_eq!(log.max_timestamp_offset().unwrap(), Some((1, T0 + 90)));
}
