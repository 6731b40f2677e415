//! Kafka RecordBatch v2: the unit the log stores, exactly as it travels on the wire.
//!
//! The log reads batch headers on every append and read; it looks at records only to
//! compact and to find an offset by timestamp.

mod builder;
mod compression;
mod header;
mod records;

pub(crate) use builder::{assemble, BatchParts};
pub use builder::{build_batch, NewRecord, ProducerFields};
pub use compression::{compress, decompress, MAX_DECOMPRESSED};
pub(crate) use header::{set_log_append_time, set_offset_and_epoch};
pub use header::{
    validate_batch, BatchHeader, Compression, TimestampType, HEADER_LEN, LOG_OVERHEAD, MAGIC,
};
pub use records::{Record, RecordIter};

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
    #[error("record at byte {at} of the records section is malformed")]
    InvalidRecord { at: usize },
}

/// The decompressed records of a batch, with the header they belong to.
#[derive(Debug)]
pub struct DecodedRecords {
    pub header: BatchHeader,
    pub records: Vec<u8>,
}

impl DecodedRecords {
    /// Decompresses the records of a whole, valid batch.
    pub fn decode(batch: &[u8]) -> Result<Self, BatchError> {
        let header = BatchHeader::parse(batch)?;
        let payload = batch
            .get(HEADER_LEN..header.size())
            .ok_or(BatchError::Truncated {
                need: header.size(),
                have: batch.len(),
            })?;
        let records = decompress(header.compression()?, payload)?;
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
            let decoded = DecodedRecords::decode(&batch).unwrap();
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
