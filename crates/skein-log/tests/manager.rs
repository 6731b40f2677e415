//! `LogManager`: one maintenance pass over every partition, going on past one that fails;
//! partitions told apart by topic id, and deleted by renaming first.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{batch_of, record, small_config, T0};
use skein_log::{LogConfig, LogManager, LogManagerConfig, ManualClock, TopicPartition};
use uuid::Uuid;

#[test]
fn maintenance_goes_on_past_a_failed_partition_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let manager = LogManager::open(dir.path(), LogManagerConfig::default(), clock.clone()).unwrap();
    let config = LogConfig {
        retention_ms: 1000,
        ..small_config()
    };
    // "a-0" comes first in the pass; "b-0" after it.
    let broken = TopicPartition::new("a", 0);
    let healthy = TopicPartition::new("b", 0);
    for tp in [&broken, &healthy] {
        let log = manager.get_or_create(tp, Some(config.clone())).unwrap();
        let mut log = log.write();
        for i in 0..3 {
            log.append(&mut batch_of(&[record(&format!("k{i}"), Some("v"), T0)]), 0)
                .unwrap();
            log.roll_now().unwrap();
        }
    }
    // The first partition's files vanish under it (a disk pulled, a volume lost).
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::rename(dir.path().join("a-0"), elsewhere.path().join("gone")).unwrap();
    clock.advance(10_000);

    let report = manager.maintain();
    assert_eq!(report.failed, vec![broken]);
    assert!(report.retention.segments_deleted >= 3, "{report:?}");
    let healthy = manager.get(&healthy).unwrap();
    assert_eq!(healthy.read().log_start_offset(), 3);
}

fn open_manager(dir: &std::path::Path) -> LogManager {
    LogManager::open(
        dir,
        LogManagerConfig::default(),
        Arc::new(ManualClock::new(T0)),
    )
    .unwrap()
}

fn append(log: &skein_log::SharedLog, value: &str) {
    log.write()
        .append(&mut batch_of(&[record("k", Some(value), T0)]), 0)
        .unwrap();
}

/// The names under the data directory, sorted.
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_new_partition_names_its_topic_id_before_it_takes_appends() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open_manager(dir.path());
    let tp = TopicPartition::new("orders", 0);
    let id = Uuid::new_v4();
    let log = manager.get_or_create_for(&tp, id, None).unwrap();
    let partition = dir.path().join("orders-0");
    assert_eq!(skein_log::read_topic_id(&partition).unwrap(), Some(id));
    assert_eq!(manager.topic_id(&tp), Some(id));
    append(&log, "v");
    drop(log);
    manager.close().unwrap();

    let manager = open_manager(dir.path());
    assert_eq!(manager.topic_id(&tp), Some(id));
    let log = manager.get_for(&tp, id).unwrap();
    assert_eq!(log.read().log_end_offset(), 1);
    assert!(manager.get_for(&tp, Uuid::new_v4()).is_none());
}

#[test]
fn a_partition_of_another_topic_id_is_deleted_instead_of_served() {
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("orders", 0);
    let (old, new) = (Uuid::new_v4(), Uuid::new_v4());
    let manager = open_manager(dir.path());
    let stale = manager.get_or_create_for(&tp, old, None).unwrap();
    append(&stale, "old");
    let before = stale.read().read(0, 1 << 20, None).unwrap();

    let fresh = manager.get_or_create_for(&tp, new, None).unwrap();
    assert_eq!(fresh.read().log_end_offset(), 0);
    assert!(fresh.read().read(0, 1 << 20, None).unwrap().is_empty());
    assert_eq!(manager.topic_id(&tp), Some(new));
    assert_eq!(entries(dir.path()), ["orders-0"]);
    // Whoever still holds the old log can write nothing more, and a region read before the
    // deletion stays readable.
    let refused = stale
        .write()
        .append(&mut batch_of(&[record("k", Some("late"), T0)]), 0);
    assert!(
        matches!(refused, Err(skein_log::LogError::Fenced { .. })),
        "{refused:?}"
    );
    assert!(!before.to_verified_bytes().unwrap().is_empty());
    // Reading the old log now finds its removed files, never the new log's.
    assert!(stale.read().read(0, 1 << 20, None).is_err());
    assert_eq!(
        entries(&dir.path().join("orders-0")).len(),
        4,
        "segment + metadata"
    );
    append(&fresh, "new");
    assert_eq!(fresh.read().log_end_offset(), 1);
}

#[test]
fn a_partition_of_a_topic_deleted_while_the_process_was_down_is_not_served() {
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("orders", 0);
    let (old, new) = (Uuid::new_v4(), Uuid::new_v4());
    {
        let manager = open_manager(dir.path());
        append(&manager.get_or_create_for(&tp, old, None).unwrap(), "old");
        manager.close().unwrap();
    }
    let manager = open_manager(dir.path());
    let log = manager.get_or_create_for(&tp, new, None).unwrap();
    assert_eq!(log.read().log_end_offset(), 0);
    assert_eq!(
        skein_log::read_topic_id(&dir.path().join("orders-0")).unwrap(),
        Some(new)
    );
}

#[test]
fn a_partition_written_before_topic_ids_is_adopted_once() {
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("orders", 0);
    {
        let cache = skein_log::HandleCache::new(8);
        let mut log = skein_log::Log::open(
            dir.path().join("orders-0"),
            LogConfig::default(),
            Arc::new(ManualClock::new(T0)),
            cache,
        )
        .unwrap();
        log.append(&mut batch_of(&[record("k", Some("kept"), T0)]), 0)
            .unwrap();
        log.close().unwrap();
    }
    let id = Uuid::new_v4();
    let manager = open_manager(dir.path());
    assert_eq!(manager.topic_id(&tp), None);
    assert!(manager.get_for(&tp, id).is_none());
    let config = LogConfig {
        retention_ms: 1234,
        ..LogConfig::default()
    };
    let log = manager.get_or_create_for(&tp, id, Some(config)).unwrap();
    assert_eq!(log.read().log_end_offset(), 1, "the records stay");
    assert_eq!(
        log.read().config().retention_ms,
        1234,
        "and take the topic's config"
    );
    assert_eq!(
        skein_log::read_topic_id(&dir.path().join("orders-0")).unwrap(),
        Some(id)
    );
    // Adopted: another id no longer gets it.
    let other = manager
        .get_or_create_for(&tp, Uuid::new_v4(), None)
        .unwrap();
    assert_eq!(other.read().log_end_offset(), 0);
}

#[test]
fn deleting_for_a_topic_id_spares_a_newer_topic_of_the_same_name() {
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("orders", 0);
    let (old, new) = (Uuid::new_v4(), Uuid::new_v4());
    let manager = open_manager(dir.path());
    append(&manager.get_or_create_for(&tp, old, None).unwrap(), "old");
    append(&manager.get_or_create_for(&tp, new, None).unwrap(), "new");
    // A late deletion of the old topic leaves the new one alone.
    assert!(!manager.delete_for(&tp, old).unwrap());
    assert_eq!(
        manager.get_for(&tp, new).unwrap().read().log_end_offset(),
        1
    );
    assert!(manager.delete_for(&tp, new).unwrap());
    assert!(manager.get(&tp).is_none());
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    assert!(!manager.delete_for(&tp, new).unwrap());
}

#[test]
fn open_removes_partitions_a_crash_left_being_deleted_and_never_opens_them() {
    let dir = tempfile::tempdir().unwrap();
    let id = Uuid::new_v4();
    {
        let manager = open_manager(dir.path());
        let tp = TopicPartition::new("orders", 0);
        append(&manager.get_or_create_for(&tp, id, None).unwrap(), "old");
        manager.close().unwrap();
    }
    // As a crash right after the rename leaves it.
    let doomed = format!("orders-0.{}-delete", id.simple());
    std::fs::rename(dir.path().join("orders-0"), dir.path().join(&doomed)).unwrap();
    std::fs::create_dir(dir.path().join("not-a-partition")).unwrap();

    let manager = open_manager(dir.path());
    assert!(manager.partitions().is_empty());
    assert_eq!(entries(dir.path()), ["not-a-partition"]);
}
