//! Arbitrary bytes, where a file or a producer could put them, never panic the engine: batch
//! parsing and record decoding return errors, and a log opened over garbage segment files
//! recovers to a prefix of valid batches.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use proptest::prelude::*;
use skein_log::batch::{validate_batch, BatchHeader, DecodedRecords};
use skein_log::{HandleCache, Log, LogConfig, ManualClock};

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = BatchHeader::parse(&bytes);
        let _ = validate_batch(&bytes);
        if let Ok(decoded) = DecodedRecords::decode(&bytes, skein_log::batch::MAX_DECOMPRESSED) {
            for record in decoded.iter() {
                let _ = record.map(|r| decoded.timestamp_of(&r));
            }
        }
    }

    #[test]
    fn a_valid_header_over_arbitrary_records_never_panics(
        records in proptest::collection::vec(any::<u8>(), 0..300),
        count in -2i32..50,
        codec in 0i16..8,
        delta in -2i32..60,
    ) {
        // Build a batch whose header and CRC are right but whose records are noise.
        let mut batch = sized_batch(1, 1, T0);
        batch.truncate(61);
        batch.extend_from_slice(&records);
        let len = (batch.len() - 12) as i32;
        batch[8..12].copy_from_slice(&len.to_be_bytes());
        batch[21..23].copy_from_slice(&codec.to_be_bytes());
        batch[23..27].copy_from_slice(&delta.to_be_bytes());
        batch[57..61].copy_from_slice(&count.to_be_bytes());
        let crc = crc32c::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        if let Ok(decoded) = DecodedRecords::decode(&batch, skein_log::batch::MAX_DECOMPRESSED) {
            for record in decoded.iter() {
                let _ = record;
            }
        }
        // The log takes it or refuses it, and reads back only what it took.
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let mut log = Log::open(dir.path(), LogConfig::default(), clock, HandleCache::new(4)).unwrap();
        let mut input = batch.clone();
        if log.append(&mut input, 0).is_ok() {
            let read = log.read(0, 1 << 20, None).unwrap().to_verified_bytes().unwrap();
            prop_assert_eq!(read, input);
        } else {
            prop_assert_eq!(log.log_end_offset(), 0);
        }
    }

    #[test]
    fn a_log_opened_over_garbage_recovers_to_valid_batches(
        garbage in proptest::collection::vec(any::<u8>(), 0..2000),
        keep in 0usize..6,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let mut batches = Vec::new();
        {
            let mut log = Log::open(dir.path(), LogConfig::default(), clock.clone(), HandleCache::new(4)).unwrap();
            for _ in 0..keep {
                let mut b = sized_batch(2, 10, T0);
                log.append(&mut b, 0).unwrap();
                batches.push(b);
            }
        }
        let path = dir.path().join("00000000000000000000.log");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&garbage);
        std::fs::write(&path, &bytes).unwrap();
        let log = Log::open(dir.path(), LogConfig::default(), clock, HandleCache::new(4)).unwrap();
        let all = read_all(&log);
        // Everything written before the garbage is there, in order; whatever the garbage adds
        // passed every check (it would have to be a valid batch with a matching CRC).
        prop_assert!(all.len() >= keep * 2);
        for (i, r) in all.iter().take(keep * 2).enumerate() {
            prop_assert_eq!(r.0, i as u64);
        }
    }
}
