//! Bytes a producer or a damaged file could hand the log: batch validation and record
//! decoding may refuse them, never panic, and never allocate for what the bytes declare.
//! What the broker's validation accepts, every reader must decode: the log's own record
//! iteration and skein-client's (the gateway's) decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_log::batch::{
    validate_batch, validate_records, BatchHeader, DecodedRecords, MAX_DECOMPRESSED,
};

/// Small enough that a compression bomb is cut off quickly.
const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let _ = BatchHeader::parse(data);
    if let Ok(decoded) = DecodedRecords::decode(data, LIMIT) {
        for record in decoded.iter().flatten() {
            let _ = decoded.timestamp_of(&record);
            let _ = record.headers.iter().count();
        }
    }
    // The same bytes made a whole batch, with its length and CRC put right, as a producer
    // crafting one would: so that the records' validation is reached.
    let mut owned = data.to_vec();
    if owned.len() >= 61 {
        let length = (owned.len() - 12) as i32;
        owned[8..12].copy_from_slice(&length.to_be_bytes());
        owned[16] = 2;
        let crc = crc32c::crc32c(&owned[21..]);
        owned[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    let data = &owned[..];
    let Ok(header) = validate_batch(data) else {
        return;
    };
    if validate_records(data, &header, LIMIT).is_err() {
        return;
    }
    // Accepted: every record decodes, with the log's iterator and the client's decoder.
    let decoded =
        DecodedRecords::decode(data, MAX_DECOMPRESSED).expect("an accepted batch decodes");
    let mut count = 0;
    for record in decoded.iter() {
        let record = record.expect("every record of an accepted batch decodes");
        assert_eq!(record.headers.iter().count(), record.headers.len());
        count += 1;
    }
    assert_eq!(count, header.records_count as usize);
    let batch = bytes::Bytes::copy_from_slice(&data[..header.size()]);
    let (records, next) = skein_client::decode_record_set("t", 0, batch, header.base_offset)
        .expect("skein-client decodes an accepted batch");
    if !header.is_control() {
        assert_eq!(records.len(), count);
    }
    assert_eq!(next, Some(header.last_offset().saturating_add(1)));
});
