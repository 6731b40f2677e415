//! `LogManager`: one maintenance pass over every partition, going on past one that fails.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{batch_of, record, small_config, T0};
use skein_log::{LogConfig, LogManager, LogManagerConfig, ManualClock, TopicPartition};

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
