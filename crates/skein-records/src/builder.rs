//! Builds record batches: for producers (skein-client), for compaction (which rewrites a
//! batch from the records it keeps), and for tests and benchmarks. [`BatchWriter`] writes
//! each record straight into the batch's body, so a key or value is copied once.

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
    let mut writer = BatchWriter::new();
    for record in records {
        let headers: Vec<(&[u8], Option<&[u8]>)> = record
            .headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        writer.push(
            record.timestamp,
            record.key.as_deref(),
            record.value.as_deref(),
            &headers,
        );
    }
    writer.finish(compression, producer)
}

/// The records of one batch being written, as a producer sends them: offset deltas 0.., the
/// first record's timestamp as the batch's base.
#[derive(Debug)]
pub struct BatchWriter {
    body: Vec<u8>,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
}

impl Default for BatchWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl BatchWriter {
    pub fn new() -> Self {
        Self {
            body: Vec::new(),
            count: 0,
            base_timestamp: 0,
            max_timestamp: -1,
        }
    }

    /// Records written so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of records written so far (before compression).
    pub fn body_len(&self) -> usize {
        self.body.len()
    }

    /// Appends a record (`None` value: a tombstone). A record whose length does not fit the
    /// format makes [`BatchWriter::finish`] fail.
    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], Option<&[u8]>)],
    ) {
        if self.count == 0 {
            self.base_timestamp = timestamp;
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        let timestamp_delta = timestamp.wrapping_sub(self.base_timestamp);
        let offset_delta = self.count;
        let size = 1
            + varlong_len(timestamp_delta)
            + varint_len(offset_delta)
            + bytes_len(key)
            + bytes_len(value)
            + varint_len(headers.len() as i32)
            + headers
                .iter()
                .map(|(k, v)| bytes_len(Some(k)) + bytes_len(*v))
                .sum::<usize>();
        let out = &mut self.body;
        out.reserve(size + 5);
        write_varint(out, size as i32);
        out.push(0); // attributes
        write_varlong(out, timestamp_delta);
        write_varint(out, offset_delta);
        write_opt_bytes(out, key);
        write_opt_bytes(out, value);
        write_varint(out, headers.len() as i32);
        for (k, v) in headers {
            write_opt_bytes(out, Some(k));
            write_opt_bytes(out, *v);
        }
        self.count += 1;
    }

    /// The batch: header, then the records, compressed with `compression`.
    pub fn finish(
        self,
        compression: Compression,
        producer: ProducerFields,
    ) -> Result<Vec<u8>, BatchError> {
        self.finish_with_attributes(compression.attribute_bits(), producer)
    }

    /// The batch of a transactional producer: [`BatchWriter::finish`] with the
    /// transactional attribute set (its records count once the transaction commits).
    pub fn finish_transactional(
        self,
        compression: Compression,
        producer: ProducerFields,
    ) -> Result<Vec<u8>, BatchError> {
        self.finish_with_attributes(
            compression.attribute_bits() | crate::header::TRANSACTIONAL_BIT,
            producer,
        )
    }

    /// [`BatchWriter::finish`] with the header's attributes given whole (a control batch's).
    pub(crate) fn finish_with_attributes(
        self,
        attributes: i16,
        producer: ProducerFields,
    ) -> Result<Vec<u8>, BatchError> {
        assemble(
            &self.body,
            BatchParts {
                base_offset: 0,
                attributes,
                last_offset_delta: (self.count - 1).max(0),
                base_timestamp: self.base_timestamp,
                max_timestamp: self.max_timestamp,
                producer,
                records_count: self.count,
            },
        )
    }
}

/// The length of `value` as a zigzag varint.
fn varint_len(value: i32) -> usize {
    unsigned_len(((value << 1) ^ (value >> 31)) as u32 as u64)
}

fn varlong_len(value: i64) -> usize {
    unsigned_len(((value << 1) ^ (value >> 63)) as u64)
}

fn unsigned_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// The encoded length of a length-prefixed byte string (`None`: length -1).
fn bytes_len(bytes: Option<&[u8]>) -> usize {
    match bytes {
        None => varint_len(-1),
        Some(b) => varint_len(b.len() as i32) + b.len(),
    }
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

impl BatchParts {
    /// The fields of an existing batch's header, to assemble it anew (recompressed, or with
    /// records removed).
    pub fn of(header: &crate::BatchHeader) -> Self {
        Self {
            base_offset: header.base_offset,
            attributes: header.attributes,
            last_offset_delta: header.last_offset_delta,
            base_timestamp: header.base_timestamp,
            max_timestamp: header.max_timestamp,
            producer: ProducerFields {
                producer_id: header.producer_id,
                producer_epoch: header.producer_epoch,
                base_sequence: header.base_sequence,
            },
            records_count: header.records_count,
        }
    }
}

/// Puts a header in front of already-encoded records, compressing them with the codec named
/// in `attributes`, and computes length and CRC.
pub fn assemble(records: &[u8], parts: BatchParts) -> Result<Vec<u8>, BatchError> {
    // Lengths are 32-bit: a larger batch (or one record larger than that, whose length
    // `BatchWriter::push` could not write) is refused, never written with a wrapped length.
    let too_large = |size: usize| size > i32::MAX as usize - HEADER_LEN;
    if too_large(records.len()) {
        return Err(BatchError::TooLarge {
            size: records.len(),
        });
    }
    let compression = Compression::from_attributes(parts.attributes)?;
    let compressed;
    let payload = if compression == Compression::None {
        records
    } else {
        compressed = compress(compression, records)?;
        &compressed
    };
    if too_large(payload.len()) {
        return Err(BatchError::TooLarge {
            size: payload.len(),
        });
    }
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
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[ATTRIBUTES..]);
    out[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

#[cfg(test)]
mod writer_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{validate_batch, DecodedRecords, MAX_DECOMPRESSED};

    #[test]
    fn varint_lengths_match_what_is_written() {
        for value in [0, 1, -1, 63, 64, -64, -65, 8191, 8192, i32::MAX, i32::MIN] {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            assert_eq!(varint_len(value), out.len(), "{value}");
        }
        for value in [0, -1, 1 << 40, -(1 << 40), i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            write_varlong(&mut out, value);
            assert_eq!(varlong_len(value), out.len(), "{value}");
        }
    }

    #[test]
    fn written_records_read_back_with_every_codec() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut writer = BatchWriter::new();
            let big = vec![b'v'; 300];
            writer.push(
                1_000,
                Some(b"k1"),
                Some(&big),
                &[(b"h", Some(b"x")), (b"e", None)],
            );
            writer.push(990, None, None, &[]);
            writer.push(1_020, Some(b"k3"), Some(b""), &[]);
            assert_eq!(writer.len(), 3);
            let producer = ProducerFields {
                producer_id: 7,
                producer_epoch: 1,
                base_sequence: 40,
            };
            let batch = writer.finish(compression, producer).unwrap();
            let header = validate_batch(&batch).unwrap();
            assert_eq!(header.records_count, 3);
            assert_eq!(header.last_offset_delta, 2);
            assert_eq!(header.base_timestamp, 1_000);
            assert_eq!(header.max_timestamp, 1_020);
            assert_eq!(header.producer_id, 7);
            assert_eq!(header.base_sequence, 40);
            crate::validate_records(&batch, &header, MAX_DECOMPRESSED).unwrap();
            let decoded = DecodedRecords::decode(&batch, MAX_DECOMPRESSED).unwrap();
            let records: Vec<_> = decoded.iter().map(Result::unwrap).collect();
            assert_eq!(records.len(), 3, "{compression:?}");
            assert_eq!(records[0].value, Some(big.as_slice()));
            assert_eq!(records[0].headers.iter().count(), 2);
            assert_eq!(decoded.timestamp_of(&records[1]), 990);
            assert_eq!(records[1].key, None);
            assert_eq!(records[1].value, None);
            assert_eq!(records[2].offset_delta, 2);
            assert_eq!(records[2].value, Some(&b""[..]));
        }
    }
}
