//! Bytes a producer or a damaged file could hand the log: batch validation and record
//! decoding may refuse them, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_log::batch::{validate_batch, BatchHeader, DecodedRecords};

fuzz_target!(|data: &[u8]| {
    let _ = BatchHeader::parse(data);
    let _ = validate_batch(data);
    if let Ok(decoded) = DecodedRecords::decode(data) {
        for record in decoded.iter() {
            if let Ok(record) = record {
                let _ = decoded.timestamp_of(&record);
            }
        }
    }
});
