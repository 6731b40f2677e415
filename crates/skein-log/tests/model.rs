//! Model-based property test: random sequences of appends, reads, timestamp lookups, rolls,
//! truncations, retention runs (by size, by time and by DeleteRecords), compactions, flushes
//! and reopenings (clean, and after a simulated process crash), checked after every step
//! against a plain in-memory model of the partition.
//!
//! proptest prints the smallest failing sequence and records it under
//! `proptest-regressions/`; set `PROPTEST_CASES` to run more cases.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{decode_all, read_all, Seen, T0};
use proptest::prelude::*;
use skein_log::batch::{build_batch, Compression, NewRecord, ProducerFields};
use skein_log::{CleanupPolicy, Clock, Log, LogConfig, ManualClock};

const DELETE_RETENTION_MS: i64 = 500;

#[derive(Clone, Debug)]
enum Op {
    Append {
        records: Vec<(u8, Option<u8>, i64)>,
        codec: u8,
    },
    Read {
        at: u16,
        max_bytes: u16,
    },
    FindTimestamp(i64),
    Roll,
    Truncate(u16),
    DeleteRecords(u16),
    RetainBytes(u16),
    RetainMs(i64),
    Compact,
    Flush,
    AdvanceClock(i64),
    Reopen {
        clean: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let record = (
        0u8..8,
        proptest::option::weighted(0.85, 0u8..200),
        0i64..1000,
    );
    prop_oneof![
        8 => (proptest::collection::vec(record, 1..6), 0u8..5)
            .prop_map(|(records, codec)| Op::Append { records, codec }),
        3 => (any::<u16>(), 1u16..2000).prop_map(|(at, max_bytes)| Op::Read { at, max_bytes }),
        2 => (0i64..1100).prop_map(Op::FindTimestamp),
        1 => Just(Op::Roll),
        1 => any::<u16>().prop_map(Op::Truncate),
        1 => any::<u16>().prop_map(Op::DeleteRecords),
        1 => (0u16..4000).prop_map(Op::RetainBytes),
        1 => (0i64..1500).prop_map(Op::RetainMs),
        2 => Just(Op::Compact),
        1 => Just(Op::Flush),
        1 => (0i64..400).prop_map(Op::AdvanceClock),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

/// A batch as the model sees it: its offset range and the records still in it.
#[derive(Clone, Debug)]
struct ModelBatch {
    base: u64,
    last: u64,
    records: Vec<Seen>,
}

#[derive(Debug, Default)]
struct Model {
    batches: Vec<ModelBatch>,
    log_start: u64,
    log_end: u64,
}

impl Model {
    fn visible(&self) -> Vec<Seen> {
        self.batches
            .iter()
            .flat_map(|b| b.records.iter().cloned())
            .filter(|r| r.0 >= self.log_start)
            .collect()
    }

    fn raise_log_start(&mut self, to: u64) {
        assert!(
            to >= self.log_start,
            "log start moved back: {} -> {to}",
            self.log_start
        );
        assert!(to <= self.log_end);
        self.log_start = to;
        self.batches.retain(|b| b.last >= to);
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        index_interval_bytes: 100,
        segment_index_bytes: 240,
        cleanup_policy: CleanupPolicy::CompactDelete,
        retention_ms: -1,
        delete_retention_ms: DELETE_RETENTION_MS,
        ..LogConfig::default()
    }
}

fn pick(at: u16, lo: u64, hi: u64) -> u64 {
    lo + (at as u64) % (hi - lo + 1)
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let cache = skein_log::HandleCache::new(8);
    let open = |clock: &Arc<ManualClock>| {
        Log::open(dir.path(), config(), clock.clone(), cache.clone()).unwrap()
    };
    let mut log = Some(open(&clock));
    let mut model = Model::default();
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for (step, op) in ops.into_iter().enumerate() {
        let l = log.as_mut().unwrap();
        match op {
            Op::Append { records, codec } => {
                let new: Vec<NewRecord> = records
                    .iter()
                    .map(|(k, v, ts)| NewRecord {
                        key: Some(vec![b'k', *k]),
                        value: v.map(|len| vec![b'v'; len as usize]),
                        headers: Vec::new(),
                        timestamp: T0 + ts,
                    })
                    .collect();
                let mut batch =
                    build_batch(&new, codecs[codec as usize], ProducerFields::NONE).unwrap();
                let info = l.append(&mut batch, 0).unwrap();
                assert_eq!(info.first_offset, model.log_end);
                let base = model.log_end;
                let seen: Vec<Seen> = new
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (base + i as u64, r.key.clone(), r.value.clone(), r.timestamp))
                    .collect();
                model.log_end = base + new.len() as u64;
                model.batches.push(ModelBatch {
                    base,
                    last: model.log_end - 1,
                    records: seen,
                });
            }
            Op::Read { at, max_bytes } => {
                let offset = pick(at, model.log_start, model.log_end);
                let expected: Vec<Seen> = model
                    .visible()
                    .into_iter()
                    .filter(|r| r.0 >= offset)
                    .collect();
                // Read as a consumer does: a batch emptied by compaction moves it past the
                // batch's last offset.
                let mut position = offset;
                let got = loop {
                    let slice = l.read(position, max_bytes as u64, None).unwrap();
                    if slice.is_empty() {
                        break Vec::new();
                    }
                    assert!(slice.last_offset >= position);
                    let got: Vec<Seen> = decode_all(&slice.to_verified_bytes().unwrap())
                        .into_iter()
                        .filter(|r| r.0 >= offset)
                        .collect();
                    if !got.is_empty() {
                        break got;
                    }
                    position = slice.last_offset + 1;
                };
                assert_eq!(
                    got.is_empty(),
                    expected.is_empty(),
                    "step {step}: read at {offset}"
                );
                assert_eq!(
                    &expected[..got.len()],
                    &got[..],
                    "step {step}: read at {offset}"
                );
            }
            Op::FindTimestamp(ts) => {
                let expected = model
                    .visible()
                    .into_iter()
                    .find(|r| r.3 >= T0 + ts)
                    .map(|r| (r.0, r.3));
                assert_eq!(
                    l.offset_for_timestamp(T0 + ts).unwrap(),
                    expected,
                    "step {step}"
                );
            }
            Op::Roll => l.roll_now().unwrap(),
            Op::Truncate(at) => {
                let offset = pick(at, model.log_start.saturating_sub(2), model.log_end);
                let old_start = model.log_start;
                l.truncate_to(offset).unwrap();
                if offset < model.log_end {
                    if offset < old_start {
                        model.batches.clear();
                        model.log_start = offset;
                        model.log_end = offset;
                    } else {
                        let first_removed = model.batches.iter().position(|b| b.last >= offset);
                        let new_end = first_removed
                            .map_or(offset, |i| model.batches[i].base.min(offset))
                            .max(old_start);
                        if let Some(i) = first_removed {
                            model.batches.truncate(i);
                        }
                        model.log_end = new_end;
                        let start = l.log_start_offset();
                        assert!(start >= old_start && start <= new_end.max(old_start));
                        assert!(model.visible().iter().all(|r| r.0 >= start));
                        model.log_start = start;
                    }
                }
            }
            Op::DeleteRecords(at) => {
                let offset = pick(at, model.log_start, model.log_end);
                l.advance_log_start(offset).unwrap();
                model.raise_log_start(offset);
            }
            Op::RetainBytes(bytes) => {
                l.set_config(LogConfig {
                    retention_bytes: bytes as i64,
                    ..config()
                })
                .unwrap();
                l.enforce_retention().unwrap();
                l.set_config(config()).unwrap();
                let start = l.log_start_offset();
                model.raise_log_start(start);
            }
            Op::RetainMs(ms) => {
                let cutoff = clock.now_ms() - ms;
                l.set_config(LogConfig {
                    retention_ms: ms,
                    ..config()
                })
                .unwrap();
                l.enforce_retention().unwrap();
                l.set_config(config()).unwrap();
                let start = l.log_start_offset();
                // Only whole segments whose newest record is older than the cutoff go.
                for r in model.visible().iter().filter(|r| r.0 < start) {
                    assert!(
                        r.3 < cutoff,
                        "step {step}: record {} at {} deleted, cutoff {cutoff}",
                        r.0,
                        r.3
                    );
                }
                model.raise_log_start(start);
            }
            Op::Compact => {
                let active_base = *l.segment_base_offsets().last().unwrap();
                let horizon = clock.now_ms() - DELETE_RETENTION_MS;
                let mut newest: HashMap<Option<Vec<u8>>, u64> = HashMap::new();
                // Over every record still stored, hidden ones below the log start included.
                for r in model
                    .batches
                    .iter()
                    .flat_map(|b| b.records.iter())
                    .filter(|r| r.0 < active_base)
                {
                    newest.insert(r.1.clone(), r.0);
                }
                for batch in &mut model.batches {
                    batch.records.retain(|r| {
                        r.0 >= active_base
                            || (newest.get(&r.1) == Some(&r.0) && !(r.2.is_none() && r.3 < horizon))
                    });
                }
                model.batches.retain(|b| !b.records.is_empty());
                l.compact().unwrap();
            }
            Op::Flush => {
                l.flush().unwrap();
                assert_eq!(l.recovery_point(), model.log_end);
            }
            Op::AdvanceClock(ms) => clock.advance(ms),
            Op::Reopen { clean } => {
                let old = log.take().unwrap();
                if clean {
                    old.close().unwrap();
                } else {
                    // The process dies: nothing more is written, the page cache survives.
                    drop(old);
                }
                let reopened = open(&clock);
                assert_eq!(reopened.recovery_report().clean_shutdown, clean);
                assert_eq!(reopened.recovery_report().bytes_truncated, 0, "step {step}");
                log = Some(reopened);
            }
        }
        let l = log.as_ref().unwrap();
        assert_eq!(l.log_end_offset(), model.log_end, "step {step}: log end");
        assert_eq!(
            l.log_start_offset(),
            model.log_start,
            "step {step}: log start"
        );
        assert_eq!(read_all(l), model.visible(), "step {step}: contents");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(100),
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn log_behaves_like_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops);
    }
}
