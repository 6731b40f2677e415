//! Kafka RecordBatch v2, sans I/O: the unit the log stores, exactly as it travels on the
//! wire, and the one place where its bytes are parsed.
//!
//! Batches come from peers, so nothing here trusts a length, count or size a batch declares:
//! decompression stops at a limit the caller chooses ([`decompress`]), records are read
//! without copying and only within the bytes that hold them ([`RecordIter`]), and
//! [`validate_records`] checks that a producer's batch is what its header says, so that
//! whatever the broker stores can be decoded within bounds by every reader.

mod builder;
mod compression;
mod control;
mod header;
mod recompress;
mod records;

pub use builder::{assemble, build_batch, BatchParts, BatchWriter, NewRecord, ProducerFields};
pub use compression::{compress, decompress, decompression_limit, MAX_DECOMPRESSED};
pub use control::{build_marker, read_marker, MarkerError, MarkerKind, TxnMarker};
pub use header::{
    set_log_append_time, set_offset_and_epoch, validate_batch, BatchHeader, Compression,
    TimestampType, HEADER_LEN, LOG_OVERHEAD, MAGIC,
};
pub use recompress::recompress;
pub use records::{Headers, Record, RecordIter};

/// What is wrong with a batch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    #[error("batch is truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("batch has magic {magic}; only magic 2 is stored")]
    UnsupportedMagic { magic: i8 },
    #[error("batch length {batch_length} is shorter than a batch header")]
    InvalidLength { batch_length: i32 },
    #[error("batch has last offset delta {last_offset_delta} and {records_count} records")]
    InvalidOffsetDelta {
        last_offset_delta: i32,
        records_count: i32,
    },
    #[error("batch crc is {stored:#010x} but its bytes give {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("batch uses unknown compression codec {codec}")]
    UnknownCompression { codec: u8 },
    #[error("{codec:?} records could not be decompressed")]
    Decompression {
        codec: Compression,
        #[source]
        source: std::io::Error,
    },
    #[error("{codec:?} records decompress to more than {limit} bytes")]
    DecompressedTooLarge { codec: Compression, limit: usize },
    #[error("record at byte {at} of the records section is malformed")]
    InvalidRecord { at: usize },
    #[error("batch declares {declared} records but its records section holds {found}")]
    RecordCountMismatch { declared: i32, found: usize },
    #[error("record {index} of the batch has offset delta {offset_delta}")]
    OffsetDeltaMismatch { index: usize, offset_delta: i32 },
    #[error("{trailing} bytes follow the last record of the batch")]
    TrailingBytes { trailing: usize },
    #[error("producers may not write control batches")]
    ControlBatch,
    /// A batch being built would not fit the format's 32-bit lengths.
    #[error("a batch of {size} bytes is larger than a batch can be")]
    TooLarge { size: usize },
}

impl BatchError {
    /// Whether the batch's header and CRC are sound and only its records are not what the
    /// header says (Kafka's INVALID_RECORD, where a broken header is CORRUPT_MESSAGE).
    pub fn is_invalid_records(&self) -> bool {
        matches!(
            self,
            Self::DecompressedTooLarge { .. }
                | Self::Decompression { .. }
                | Self::InvalidRecord { .. }
                | Self::RecordCountMismatch { .. }
                | Self::OffsetDeltaMismatch { .. }
                | Self::TrailingBytes { .. }
                | Self::ControlBatch
        )
    }
}

/// Checks the records of a producer's batch the way Kafka's LogValidator does, given its
/// validated header: not a control batch; its records decompress within `limit`; exactly
/// `records_count` records fill the records section with nothing after them; every record's
/// lengths and header count agree with its bytes; and record `i` has offset delta `i`.
/// Whatever passes can be read back with [`DecodedRecords::decode`] and the same limit.
pub fn validate_records(
    batch: &[u8],
    header: &BatchHeader,
    limit: usize,
) -> Result<(), BatchError> {
    if header.is_control() {
        return Err(BatchError::ControlBatch);
    }
    let payload = batch
        .get(HEADER_LEN..header.size())
        .ok_or(BatchError::Truncated {
            need: header.size(),
            have: batch.len(),
        })?;
    match header.compression()? {
        // Read where it lies: no copy for the common case.
        Compression::None if payload.len() <= limit => check_records(header, payload),
        codec => check_records(header, &decompress(codec, payload, limit)?),
    }
}

fn check_records(header: &BatchHeader, section: &[u8]) -> Result<(), BatchError> {
    let mut found = 0usize;
    let mut end = 0usize;
    for (index, record) in RecordIter::new(section, header.records_count).enumerate() {
        let record = record?;
        if i64::from(record.offset_delta) != index as i64 {
            return Err(BatchError::OffsetDeltaMismatch {
                index,
                offset_delta: record.offset_delta,
            });
        }
        found += 1;
        end += record.raw.len();
    }
    if found as i64 != i64::from(header.records_count) {
        return Err(BatchError::RecordCountMismatch {
            declared: header.records_count,
            found,
        });
    }
    if end != section.len() {
        return Err(BatchError::TrailingBytes {
            trailing: section.len() - end,
        });
    }
    Ok(())
}

/// The decompressed records of a batch, with the header they belong to.
#[derive(Debug)]
pub struct DecodedRecords {
    pub header: BatchHeader,
    pub records: Vec<u8>,
}

impl DecodedRecords {
    /// Decompresses the records of a whole, valid batch to at most `limit` bytes.
    pub fn decode(batch: &[u8], limit: usize) -> Result<Self, BatchError> {
        let header = BatchHeader::parse(batch)?;
        let payload = batch
            .get(HEADER_LEN..header.size())
            .ok_or(BatchError::Truncated {
                need: header.size(),
                have: batch.len(),
            })?;
        let records = decompress(header.compression()?, payload, limit)?;
        Ok(Self { header, records })
    }

    pub fn iter(&self) -> RecordIter<'_> {
        RecordIter::new(&self.records, self.header.records_count)
    }

    /// The timestamp of a record as a consumer sees it.
    pub fn timestamp_of(&self, record: &Record<'_>) -> i64 {
        match self.header.timestamp_type() {
            TimestampType::LogAppendTime => self.header.max_timestamp,
            TimestampType::CreateTime => self
                .header
                .base_timestamp
                .saturating_add(record.timestamp_delta),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str, value: Option<&str>, ts: i64) -> NewRecord {
        NewRecord {
            key: Some(key.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            headers: vec![(b"h".to_vec(), Some(b"v".to_vec()))],
            timestamp: ts,
        }
    }

    #[test]
    fn built_batches_validate_and_decode_with_every_codec() {
        let records = vec![
            record("a", Some("1"), 10),
            record("b", None, 12),
            record("c", Some("3"), 11),
        ];
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let batch = build_batch(&records, codec, ProducerFields::NONE).unwrap();
            let header = validate_batch(&batch).unwrap();
            assert_eq!(header.compression().unwrap(), codec);
            assert_eq!(header.last_offset_delta, 2);
            assert_eq!(header.max_timestamp, 12);
            let decoded = DecodedRecords::decode(&batch, MAX_DECOMPRESSED).unwrap();
            validate_records(&batch, &header, MAX_DECOMPRESSED).unwrap();
            let got: Vec<_> = decoded.iter().map(|r| r.unwrap()).collect();
            assert_eq!(got.len(), 3);
            assert_eq!(got[1].key, Some(&b"b"[..]));
            assert_eq!(got[1].value, None);
            assert_eq!(decoded.timestamp_of(&got[2]), 11);
        }
    }

    #[test]
    fn a_flipped_byte_fails_the_crc() {
        let batch = build_batch(
            &[record("k", Some("v"), 1)],
            Compression::None,
            ProducerFields::NONE,
        )
        .unwrap();
        for i in 21..batch.len() {
            let mut bad = batch.clone();
            bad[i] ^= 0x40;
            assert!(validate_batch(&bad).is_err(), "flip at {i} went unnoticed");
        }
    }

    #[test]
    fn short_and_wrong_headers_are_rejected() {
        let batch = build_batch(
            &[record("k", Some("v"), 1)],
            Compression::None,
            ProducerFields::NONE,
        )
        .unwrap();
        assert!(matches!(
            validate_batch(&batch[..30]),
            Err(BatchError::Truncated { .. })
        ));
        assert!(matches!(
            validate_batch(&batch[..batch.len() - 1]),
            Err(BatchError::Truncated { .. })
        ));
        let mut old = batch.clone();
        old[16] = 1;
        assert!(matches!(
            validate_batch(&old),
            Err(BatchError::UnsupportedMagic { magic: 1 })
        ));
    }
}
