//! Helpers shared by the log engine's integration tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use skein_log::batch::{build_batch, Compression, DecodedRecords, NewRecord, ProducerFields};
use skein_log::{HandleCache, Log, LogConfig, ManualClock};

pub const T0: i64 = 1_700_000_000_000;

pub fn record(key: &str, value: Option<&str>, timestamp: i64) -> NewRecord {
    NewRecord {
        key: Some(key.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
        headers: Vec::new(),
        timestamp,
    }
}

pub fn batch_of(records: &[NewRecord]) -> Vec<u8> {
    build_batch(records, Compression::None, ProducerFields::NONE).unwrap()
}

/// A batch of `n` records with keys `k{i}`, values of `value_len` bytes and timestamp `ts`.
pub fn sized_batch(n: usize, value_len: usize, ts: i64) -> Vec<u8> {
    let records: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord {
            key: Some(format!("k{i}").into_bytes()),
            value: Some(vec![b'x'; value_len]),
            headers: Vec::new(),
            timestamp: ts,
        })
        .collect();
    batch_of(&records)
}

pub fn open(dir: &Path, config: LogConfig, clock: &Arc<ManualClock>) -> Log {
    Log::open(dir, config, clock.clone(), HandleCache::new(64)).unwrap()
}

/// A config with small segments and dense indexes, so tests cross many segment boundaries.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        segment_index_bytes: 1024,
        ..LogConfig::default()
    }
}

/// One record as read back: (offset, key, value, timestamp).
pub type Seen = (u64, Option<Vec<u8>>, Option<Vec<u8>>, i64);

/// Reads every record from the log start to the end through `Log::read`, checking CRCs.
pub fn read_all(log: &Log) -> Vec<Seen> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let slice = log.read(offset, 64 * 1024, None).unwrap();
        if slice.is_empty() {
            break;
        }
        let bytes = slice.to_verified_bytes().unwrap();
        assert!(
            !bytes.is_empty(),
            "read at {offset} returned no whole batch"
        );
        out.extend(decode_all(&bytes).into_iter().filter(|r| r.0 >= offset));
        offset = slice.last_offset + 1;
    }
    out
}

/// Decodes every record of a run of whole batches.
pub fn decode_all(mut bytes: &[u8]) -> Vec<Seen> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let decoded = DecodedRecords::decode(bytes, skein_log::batch::MAX_DECOMPRESSED).unwrap();
        let size = decoded.header.size();
        for r in decoded.iter() {
            let r = r.unwrap();
            out.push((
                (decoded.header.base_offset + r.offset_delta as i64) as u64,
                r.key.map(<[u8]>::to_vec),
                r.value.map(<[u8]>::to_vec),
                decoded.timestamp_of(&r),
            ));
        }
        bytes = &bytes[size..];
    }
    out
}
