//! The fixed 61-byte header of a Kafka RecordBatch (magic 2).
//!
//! ```text
//! offset  size  field
//!      0     8  base_offset              rewritten by the log on append
//!      8     4  batch_length             bytes after this field
//!     12     4  partition_leader_epoch   rewritten by the log on append
//!     16     1  magic                    always 2
//!     17     4  crc                      CRC-32C of bytes 21..end
//!     21     2  attributes
//!     23     4  last_offset_delta
//!     27     8  base_timestamp
//!     35     8  max_timestamp
//!     43     8  producer_id
//!     51     2  producer_epoch
//!     53     4  base_sequence
//!     57     4  records_count
//!     61     -  records
//! ```
//!
//! All integers are big-endian, as on the wire.

use crate::BatchError;

/// Bytes in a batch header, up to and including `records_count`.
pub const HEADER_LEN: usize = 61;
/// Bytes before `batch_length` counts: `base_offset` and `batch_length` itself.
pub const LOG_OVERHEAD: usize = 12;
/// The only record batch format the log stores.
pub const MAGIC: i8 = 2;

pub(crate) const BASE_OFFSET: usize = 0;
pub(crate) const BATCH_LENGTH: usize = 8;
pub(crate) const PARTITION_LEADER_EPOCH: usize = 12;
pub(crate) const MAGIC_AT: usize = 16;
pub(crate) const CRC: usize = 17;
pub(crate) const ATTRIBUTES: usize = 21;
pub(crate) const LAST_OFFSET_DELTA: usize = 23;
pub(crate) const BASE_TIMESTAMP: usize = 27;
pub(crate) const MAX_TIMESTAMP: usize = 35;
pub(crate) const PRODUCER_ID: usize = 43;
pub(crate) const PRODUCER_EPOCH: usize = 51;
pub(crate) const BASE_SEQUENCE: usize = 53;
pub(crate) const RECORDS_COUNT: usize = 57;

pub(crate) const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
pub(crate) const TRANSACTIONAL_BIT: i16 = 0x10;
pub(crate) const CONTROL_BIT: i16 = 0x20;

/// How the records of a batch are compressed (attributes bits 0-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub(crate) fn from_attributes(attributes: i16) -> Result<Self, BatchError> {
        match attributes & COMPRESSION_MASK {
            0 => Ok(Self::None),
            1 => Ok(Self::Gzip),
            2 => Ok(Self::Snappy),
            3 => Ok(Self::Lz4),
            4 => Ok(Self::Zstd),
            other => Err(BatchError::UnknownCompression { codec: other as u8 }),
        }
    }

    /// The attribute bits for this codec.
    pub fn attribute_bits(self) -> i16 {
        match self {
            Self::None => 0,
            Self::Gzip => 1,
            Self::Snappy => 2,
            Self::Lz4 => 3,
            Self::Zstd => 4,
        }
    }
}

/// Where a batch's timestamps come from (attributes bit 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimestampType {
    /// The producer's timestamps are kept.
    #[default]
    CreateTime,
    /// The log sets `max_timestamp` to the append time; records read it as their timestamp.
    LogAppendTime,
}

/// A parsed batch header. Parsing reads only these 61 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

pub(crate) fn read_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}

pub(crate) fn read_i32(buf: &[u8], at: usize) -> i32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    i32::from_be_bytes(b)
}

pub(crate) fn read_i64(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(b)
}

impl BatchHeader {
    /// Parses the header at the start of `buf` and checks what can be checked without the
    /// records: length fields, magic and offset delta. The CRC is checked by
    /// [`BatchHeader::verify_crc`] once the whole batch is at hand.
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < HEADER_LEN {
            return Err(BatchError::Truncated {
                need: HEADER_LEN,
                have: buf.len(),
            });
        }
        let header = Self {
            base_offset: read_i64(buf, BASE_OFFSET),
            batch_length: read_i32(buf, BATCH_LENGTH),
            partition_leader_epoch: read_i32(buf, PARTITION_LEADER_EPOCH),
            magic: buf[MAGIC_AT] as i8,
            crc: read_i32(buf, CRC) as u32,
            attributes: read_i16(buf, ATTRIBUTES),
            last_offset_delta: read_i32(buf, LAST_OFFSET_DELTA),
            base_timestamp: read_i64(buf, BASE_TIMESTAMP),
            max_timestamp: read_i64(buf, MAX_TIMESTAMP),
            producer_id: read_i64(buf, PRODUCER_ID),
            producer_epoch: read_i16(buf, PRODUCER_EPOCH),
            base_sequence: read_i32(buf, BASE_SEQUENCE),
            records_count: read_i32(buf, RECORDS_COUNT),
        };
        if header.magic != MAGIC {
            return Err(BatchError::UnsupportedMagic {
                magic: header.magic,
            });
        }
        if (header.batch_length as i64) < (HEADER_LEN - LOG_OVERHEAD) as i64 {
            return Err(BatchError::InvalidLength {
                batch_length: header.batch_length,
            });
        }
        if header.last_offset_delta < 0 || header.records_count < 0 {
            return Err(BatchError::InvalidOffsetDelta {
                last_offset_delta: header.last_offset_delta,
                records_count: header.records_count,
            });
        }
        Ok(header)
    }

    /// Total bytes of the batch, header included.
    pub fn size(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }

    /// Offset of the last record the batch was written with (compaction keeps this even when
    /// it removes that record).
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(self.last_offset_delta as i64)
    }

    /// The offset of the record with `offset_delta` (saturating: the base offset lies outside
    /// the CRC and the delta is the producer's, so neither is trusted to be sane).
    pub fn record_offset(&self, offset_delta: i32) -> i64 {
        self.base_offset.saturating_add(offset_delta as i64)
    }

    pub fn compression(&self) -> Result<Compression, BatchError> {
        Compression::from_attributes(self.attributes)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// Checks the CRC-32C stored in the header against the bytes of the whole batch.
    pub fn verify_crc(&self, batch: &[u8]) -> Result<(), BatchError> {
        let actual = crc32c::crc32c(&batch[ATTRIBUTES..self.size()]);
        if actual != self.crc {
            return Err(BatchError::CrcMismatch {
                stored: self.crc,
                computed: actual,
            });
        }
        Ok(())
    }
}

/// Parses and fully validates the one batch at the start of `buf`: header, length within
/// `buf`, and CRC. Returns the header; the batch is `&buf[..header.size()]`.
pub fn validate_batch(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    if header.size() > buf.len() {
        return Err(BatchError::Truncated {
            need: header.size(),
            have: buf.len(),
        });
    }
    header.verify_crc(buf)?;
    Ok(header)
}

/// Rewrites the fields that lie outside the CRC: base offset and partition leader epoch.
pub fn set_offset_and_epoch(batch: &mut [u8], base_offset: i64, leader_epoch: i32) {
    batch[BASE_OFFSET..BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
    batch[PARTITION_LEADER_EPOCH..PARTITION_LEADER_EPOCH + 4]
        .copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Marks a batch as LogAppendTime with the given time and recomputes its CRC. The records are
/// not touched.
pub fn set_log_append_time(batch: &mut [u8], size: usize, now_ms: i64) {
    let attributes = read_i16(batch, ATTRIBUTES) | TIMESTAMP_TYPE_BIT;
    batch[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES..size]);
    batch[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
}
