//! Transactions in one partition's log: the last stable offset, the aborted transactions a
//! `read_committed` reader skips, and the `.txnindex` files, across reopen, crash and
//! truncation.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use skein_log::batch::{
    build_marker, BatchWriter, Compression, MarkerKind, ProducerFields, TxnMarker,
};
use skein_log::transactions::{decode_index, AbortedTxn};
use skein_log::{LogError, ManualClock};

fn txn_batch(producer_id: i64, sequence: i32, values: usize) -> Vec<u8> {
    let mut writer = BatchWriter::new();
    for i in 0..values {
        writer.push(T0, Some(b"k"), Some(format!("v{i}").as_bytes()), &[]);
    }
    writer
        .finish_transactional(
            Compression::None,
            ProducerFields {
                producer_id,
                producer_epoch: 0,
                base_sequence: sequence,
            },
        )
        .unwrap()
}

fn marker(producer_id: i64, kind: MarkerKind) -> Vec<u8> {
    build_marker(
        TxnMarker {
            kind,
            coordinator_epoch: 1,
        },
        producer_id,
        0,
        T0,
    )
    .unwrap()
}

fn txn_index_entries(dir: &std::path::Path) -> Vec<AbortedTxn> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txnindex"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|p| decode_index(&std::fs::read(p).unwrap()).unwrap())
        .collect()
}

#[test]
fn open_transactions_hold_the_stable_offset_and_aborts_are_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    // 0: plain; 1-2: producer 5; 3-4: producer 6; 5: producer 5 aborts; 6: producer 6
    // commits.
    log.append(&mut batch_of(&[record("a", Some("x"), T0)]), 0)
        .unwrap();
    log.append(&mut txn_batch(5, 0, 2), 0).unwrap();
    assert_eq!(log.last_stable_offset(log.log_end_offset()), 1);
    log.append(&mut txn_batch(6, 0, 2), 0).unwrap();
    assert_eq!(log.open_transactions(), 2);
    log.append_markers(&mut marker(5, MarkerKind::Abort), 0)
        .unwrap();
    // Producer 6 is still open from offset 3.
    assert_eq!(log.last_stable_offset(log.log_end_offset()), 3);
    log.append_markers(&mut marker(6, MarkerKind::Commit), 0)
        .unwrap();
    assert_eq!(log.log_end_offset(), 7);
    assert_eq!(log.last_stable_offset(7), 7);
    // The high watermark bounds it.
    assert_eq!(log.last_stable_offset(4), 4);
    let aborted = AbortedTxn {
        producer_id: 5,
        first_offset: 1,
        last_offset: 5,
        last_stable_offset: 3,
    };
    assert_eq!(log.aborted_transactions(0, 7, 10), vec![aborted]);
    assert_eq!(log.aborted_transactions(6, 7, 10), vec![]);
    assert_eq!(txn_index_entries(dir.path()), vec![aborted]);
    log.close().unwrap();

    // A clean reopen and one after a crash (the index removed) both find the same state.
    let log = open(dir.path(), small_config(), &clock);
    assert_eq!(log.aborted_transactions(0, 7, 10), vec![aborted]);
    assert_eq!(log.open_transactions(), 0);
    drop(log);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "txnindex") {
            std::fs::write(&path, b"torn").unwrap();
        }
    }
    let log = open(dir.path(), small_config(), &clock);
    assert_eq!(log.aborted_transactions(0, 7, 10), vec![aborted]);
    assert_eq!(txn_index_entries(dir.path()), vec![aborted]);
}

#[test]
fn a_transaction_still_open_at_restart_is_open_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    for i in 0..20 {
        log.append(&mut batch_of(&[record("p", Some("x"), T0)]), 0)
            .unwrap();
        if i == 3 {
            log.append(&mut txn_batch(9, 0, 3), 0).unwrap();
        }
    }
    assert!(log.segment_count() > 1);
    drop(log);
    let mut log = open(dir.path(), small_config(), &clock);
    assert_eq!(log.first_unstable_offset(), Some(4));
    assert_eq!(log.last_stable_offset(log.log_end_offset()), 4);
    log.append_markers(&mut marker(9, MarkerKind::Commit), 0)
        .unwrap();
    let end = log.log_end_offset();
    assert_eq!(log.last_stable_offset(end), end);
}

#[test]
fn truncating_below_a_marker_reopens_its_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    log.append(&mut txn_batch(3, 0, 2), 0).unwrap();
    log.append_markers(&mut marker(3, MarkerKind::Abort), 0)
        .unwrap();
    assert_eq!(log.aborted_transactions(0, 3, 10).len(), 1);
    log.truncate_to(2).unwrap();
    assert_eq!(log.aborted_transactions(0, 3, 10), vec![]);
    assert_eq!(log.first_unstable_offset(), Some(0));
    assert_eq!(txn_index_entries(dir.path()), vec![]);
    log.truncate_fully_and_start_at(10).unwrap();
    assert_eq!(log.first_unstable_offset(), None);
}

#[test]
fn only_markers_go_through_the_coordinator_path_and_producers_cannot_write_them() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut log = open(dir.path(), small_config(), &clock);
    assert!(matches!(
        log.append_markers(&mut txn_batch(1, 0, 1), 0),
        Err(LogError::NotAMarker { index: 0 })
    ));
    assert!(matches!(
        log.append(&mut marker(1, MarkerKind::Commit), 0),
        Err(LogError::InvalidBatch { index: 0, .. })
    ));
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn replicated_markers_build_the_same_state_on_a_follower() {
    let dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut leader = open(dir.path(), small_config(), &clock);
    let mut follower = open(follower_dir.path(), small_config(), &clock);
    leader.append(&mut txn_batch(4, 0, 2), 2).unwrap();
    leader
        .append_markers(&mut marker(4, MarkerKind::Abort), 2)
        .unwrap();
    let bytes = leader
        .read(0, 1 << 20, None)
        .unwrap()
        .to_verified_bytes()
        .unwrap();
    follower.append_replicated(&bytes).unwrap();
    assert_eq!(
        follower.aborted_transactions(0, 3, 10),
        leader.aborted_transactions(0, 3, 10)
    );
    assert_eq!(follower.aborted_transactions(0, 3, 10).len(), 1);
}
