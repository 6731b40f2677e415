//! Batches crafted to mislead a reader: a valid header and CRC around records that declare
//! more than their bytes hold. Each must be refused by `validate_records` and decoded within
//! bounds (or refused) by `RecordIter`, never allocated for.

#![allow(clippy::unwrap_used)]

use skein_records::{
    assemble, build_batch, compress, validate_batch, validate_records, BatchError, BatchParts,
    Compression, DecodedRecords, NewRecord, ProducerFields, MAX_DECOMPRESSED,
};

fn varint(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// One record's body fields (after its length), with `headers` as the declared count.
fn record_body(offset_delta: i64, headers: i64) -> Vec<u8> {
    let mut body = vec![0u8]; // attributes
    varint(&mut body, 0); // timestamp delta
    varint(&mut body, offset_delta);
    varint(&mut body, 1); // key length
    body.push(b'k');
    varint(&mut body, 1); // value length
    body.push(b'v');
    varint(&mut body, headers);
    body
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, body.len() as i64);
    out.extend_from_slice(body);
    out
}

fn batch(records: &[u8], count: i32, codec: Compression) -> Vec<u8> {
    assemble(
        records,
        BatchParts {
            base_offset: 0,
            attributes: codec as i16,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer: ProducerFields::NONE,
            records_count: count,
        },
    )
    .unwrap()
}

fn check(batch: &[u8]) -> Result<(), BatchError> {
    let header = validate_batch(batch).expect("header and crc are valid");
    validate_records(batch, &header, MAX_DECOMPRESSED)
}

#[test]
fn a_record_declaring_two_billion_headers_is_refused() {
    let records = framed(&record_body(0, i32::MAX as i64));
    let bad = batch(&records, 1, Compression::None);
    assert!(matches!(check(&bad), Err(BatchError::InvalidRecord { .. })));
    // A reader that meets it anyway fails on that record, having allocated nothing for it.
    let decoded = DecodedRecords::decode(&bad, MAX_DECOMPRESSED).unwrap();
    assert!(decoded.iter().next().unwrap().is_err());
}

#[test]
fn header_counts_the_bytes_hold_are_read() {
    let mut body = record_body(0, 2);
    for (k, v) in [("a", "1"), ("b", "2")] {
        varint(&mut body, k.len() as i64);
        body.extend_from_slice(k.as_bytes());
        varint(&mut body, v.len() as i64);
        body.extend_from_slice(v.as_bytes());
    }
    let good = batch(&framed(&body), 1, Compression::None);
    check(&good).unwrap();
    let decoded = DecodedRecords::decode(&good, MAX_DECOMPRESSED).unwrap();
    let record = decoded.iter().next().unwrap().unwrap();
    let headers: Vec<_> = record.headers.iter().collect();
    assert_eq!(
        headers,
        vec![
            (Some(&b"a"[..]), Some(&b"1"[..])),
            (Some(&b"b"[..]), Some(&b"2"[..]))
        ]
    );
}

#[test]
fn fewer_records_than_declared_are_refused() {
    let records = framed(&record_body(0, 0));
    assert!(check(&batch(&records, 2, Compression::None)).is_err());
}

#[test]
fn more_records_than_declared_are_refused() {
    let mut records = framed(&record_body(0, 0));
    records.extend(framed(&record_body(1, 0)));
    assert!(matches!(
        check(&batch(&records, 1, Compression::None)),
        Err(BatchError::TrailingBytes { .. })
    ));
}

#[test]
fn offset_deltas_out_of_order_are_refused() {
    let mut records = framed(&record_body(0, 0));
    records.extend(framed(&record_body(5, 0)));
    assert!(matches!(
        check(&batch(&records, 2, Compression::None)),
        Err(BatchError::OffsetDeltaMismatch {
            index: 1,
            offset_delta: 5
        })
    ));
}

#[test]
fn a_record_length_past_the_section_is_refused() {
    let mut records = Vec::new();
    varint(&mut records, 1 << 30);
    records.extend_from_slice(&record_body(0, 0));
    assert!(matches!(
        check(&batch(&records, 1, Compression::None)),
        Err(BatchError::InvalidRecord { .. })
    ));
}

#[test]
fn a_compression_bomb_is_refused_at_the_limit() {
    // 256 MiB of zeros in one record's value, compressed to well under a MiB.
    let value = vec![0u8; 256 * 1024 * 1024];
    let records = vec![NewRecord {
        key: None,
        value: Some(value),
        headers: vec![],
        timestamp: 0,
    }];
    for codec in [Compression::Zstd, Compression::Lz4, Compression::Gzip] {
        let bomb = build_batch(&records, codec, ProducerFields::NONE).unwrap();
        assert!(bomb.len() < 2 * 1024 * 1024, "{codec:?}: {}", bomb.len());
        assert!(
            matches!(check(&bomb), Err(BatchError::DecompressedTooLarge { .. })),
            "{codec:?}"
        );
        assert!(DecodedRecords::decode(&bomb, MAX_DECOMPRESSED).is_err());
    }
}

#[test]
fn garbage_inside_a_compressed_batch_is_refused() {
    let inner = framed(&record_body(0, i32::MAX as i64));
    let packed = compress(Compression::Zstd, &inner).unwrap();
    let header_len = skein_records::HEADER_LEN;
    let mut bad = batch(&inner, 1, Compression::Zstd);
    assert_eq!(bad.len(), header_len + packed.len());
    assert!(matches!(check(&bad), Err(BatchError::InvalidRecord { .. })));
    // A control batch from a producer is refused whatever its records.
    bad[22] |= 0x20;
    let crc = crc32c::crc32c(&bad[21..]);
    bad[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(check(&bad), Err(BatchError::ControlBatch)));
}
