//! Builds record batches: for compaction (which rewrites a batch from the records it keeps)
//! and for tests and benchmarks (which play the producer).

use crate::header::{
    ATTRIBUTES, BASE_OFFSET, BATCH_LENGTH, CRC, HEADER_LEN, LOG_OVERHEAD, MAGIC, MAGIC_AT,
};
use crate::records::{write_varint, write_varlong};
use crate::{compress, BatchError, Compression};

/// A record to put in a new batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewRecord {
    pub key: Option<Vec<u8>>,
    /// `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub timestamp: i64,
}

/// The producer fields of a batch header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerFields {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

impl ProducerFields {
    /// A producer that is neither idempotent nor transactional.
    pub const NONE: Self = Self {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
}

/// Encodes `records` as one batch with offset deltas 0.., as a producer would send it (base
/// offset 0, leader epoch -1).
pub fn build_batch(
    records: &[NewRecord],
    compression: Compression,
    producer: ProducerFields,
) -> Result<Vec<u8>, BatchError> {
    let base_timestamp = records.first().map_or(0, |r| r.timestamp);
    let max_timestamp = records.iter().map(|r| r.timestamp).max().unwrap_or(-1);
    let mut body = Vec::new();
    for (i, record) in records.iter().enumerate() {
        encode_record(
            &mut body,
            record,
            i as i32,
            record.timestamp - base_timestamp,
        );
    }
    let last_offset_delta = records.len().saturating_sub(1) as i32;
    assemble(
        &body,
        BatchParts {
            base_offset: 0,
            attributes: compression.attribute_bits(),
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer,
            records_count: records.len() as i32,
        },
    )
}

fn encode_record(out: &mut Vec<u8>, record: &NewRecord, offset_delta: i32, timestamp_delta: i64) {
    let mut body = Vec::with_capacity(
        16 + record.key.as_ref().map_or(0, Vec::len) + record.value.as_ref().map_or(0, Vec::len),
    );
    body.push(0); // attributes
    write_varlong(&mut body, timestamp_delta);
    write_varint(&mut body, offset_delta);
    write_opt_bytes(&mut body, record.key.as_deref());
    write_opt_bytes(&mut body, record.value.as_deref());
    write_varint(&mut body, record.headers.len() as i32);
    for (k, v) in &record.headers {
        write_opt_bytes(&mut body, Some(k));
        write_opt_bytes(&mut body, v.as_deref());
    }
    write_varint(out, body.len() as i32);
    out.extend_from_slice(&body);
}

fn write_opt_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => write_varint(out, -1),
        Some(b) => {
            write_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

/// Header fields for [`assemble`].
#[derive(Clone, Copy, Debug)]
pub struct BatchParts {
    pub base_offset: i64,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer: ProducerFields,
    pub records_count: i32,
}

/// Puts a header in front of already-encoded records, compressing them with the codec named
/// in `attributes`, and computes length and CRC.
pub fn assemble(records: &[u8], parts: BatchParts) -> Result<Vec<u8>, BatchError> {
    let compression = Compression::from_attributes(parts.attributes)?;
    let payload = compress(compression, records)?;
    let size = HEADER_LEN + payload.len();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&parts.base_offset.to_be_bytes());
    out.extend_from_slice(&((size - LOG_OVERHEAD) as i32).to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    out.push(MAGIC as u8);
    out.extend_from_slice(&0u32.to_be_bytes()); // crc, filled below
    out.extend_from_slice(&parts.attributes.to_be_bytes());
    out.extend_from_slice(&parts.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&parts.base_timestamp.to_be_bytes());
    out.extend_from_slice(&parts.max_timestamp.to_be_bytes());
    out.extend_from_slice(&parts.producer.producer_id.to_be_bytes());
    out.extend_from_slice(&parts.producer.producer_epoch.to_be_bytes());
    out.extend_from_slice(&parts.producer.base_sequence.to_be_bytes());
    out.extend_from_slice(&parts.records_count.to_be_bytes());
    debug_assert_eq!(out.len(), HEADER_LEN);
    debug_assert_eq!(out[MAGIC_AT] as i8, MAGIC);
    debug_assert_eq!(BASE_OFFSET, 0);
    debug_assert_eq!(BATCH_LENGTH, 8);
    out.extend_from_slice(&payload);
    let crc = crc32c::crc32c(&out[ATTRIBUTES..]);
    out[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}
