//! Transaction markers: the control batches a transaction coordinator writes to every
//! partition of a transaction when it commits or aborts (KIP-98). A marker batch has the
//! transactional and control attribute bits, the producer's id and epoch, and one record:
//! its key is `version: int16, type: int16` (type 0 ABORT, 1 COMMIT) and its value
//! `version: int16, coordinator_epoch: int32`.
//!
//! Producers may not write control batches ([`crate::validate_records`] refuses them), so a
//! marker in a log was written by a coordinator or copied from a leader; it is still read
//! here within bounds, as every batch is.

use crate::builder::{BatchWriter, ProducerFields};
use crate::header::{BatchHeader, CONTROL_BIT, HEADER_LEN, TRANSACTIONAL_BIT};
use crate::records::RecordIter;
use crate::{decompress, BatchError, Compression};

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerKind {
    Abort,
    Commit,
}

impl MarkerKind {
    fn type_id(self) -> i16 {
        match self {
            Self::Abort => 0,
            Self::Commit => 1,
        }
    }
}

/// A transaction marker read from a control batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnMarker {
    pub kind: MarkerKind,
    /// The coordinator's epoch when it wrote the marker (a marker of an older coordinator
    /// than one already seen is a zombie's).
    pub coordinator_epoch: i32,
}

/// The most bytes a marker's records section may decompress to: one small record.
const MARKER_RECORDS_LIMIT: usize = 1024;

/// What a control batch holds, when it is not a transaction marker.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MarkerError {
    #[error("the batch is not a control batch")]
    NotControl,
    #[error("a control batch holds {count} records, not one")]
    RecordCount { count: i32 },
    #[error("the control record's key or value is too short or has a negative version")]
    Malformed,
    #[error("control record type {type_id} is not a transaction marker")]
    UnknownType { type_id: i16 },
    #[error("the control batch's records do not decode: {0}")]
    Records(String),
}

impl From<BatchError> for MarkerError {
    fn from(e: BatchError) -> Self {
        Self::Records(e.to_string())
    }
}

/// Reads the transaction marker of the control batch `batch` (header included), whose
/// header is `header`.
pub fn read_marker(batch: &[u8], header: &BatchHeader) -> Result<TxnMarker, MarkerError> {
    if !header.is_control() {
        return Err(MarkerError::NotControl);
    }
    if header.records_count != 1 {
        return Err(MarkerError::RecordCount {
            count: header.records_count,
        });
    }
    let payload = batch
        .get(HEADER_LEN..header.size())
        .ok_or(BatchError::Truncated {
            need: header.size(),
            have: batch.len(),
        })?;
    let decompressed;
    let section = match header.compression()? {
        Compression::None => payload,
        codec => {
            decompressed = decompress(codec, payload, MARKER_RECORDS_LIMIT)?;
            &decompressed[..]
        }
    };
    let record = RecordIter::new(section, 1)
        .next()
        .ok_or(MarkerError::RecordCount { count: 0 })??;
    let key = record.key.ok_or(MarkerError::Malformed)?;
    let value = record.value.ok_or(MarkerError::Malformed)?;
    let (Some(key), Some(value)) = (key.get(..4), value.get(..6)) else {
        return Err(MarkerError::Malformed);
    };
    let key_version = i16::from_be_bytes([key[0], key[1]]);
    let value_version = i16::from_be_bytes([value[0], value[1]]);
    if key_version < 0 || value_version < 0 {
        return Err(MarkerError::Malformed);
    }
    let kind = match i16::from_be_bytes([key[2], key[3]]) {
        0 => MarkerKind::Abort,
        1 => MarkerKind::Commit,
        type_id => return Err(MarkerError::UnknownType { type_id }),
    };
    Ok(TxnMarker {
        kind,
        coordinator_epoch: i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
    })
}

/// A marker batch for the producer `producer_id` at `producer_epoch`, as a coordinator
/// writes it: base offset 0 (the log assigns it), uncompressed, stamped `timestamp`.
pub fn build_marker(
    marker: TxnMarker,
    producer_id: i64,
    producer_epoch: i16,
    timestamp: i64,
) -> Result<Vec<u8>, BatchError> {
    let mut key = [0u8; 4];
    key[2..].copy_from_slice(&marker.kind.type_id().to_be_bytes());
    let mut value = [0u8; 6];
    value[2..].copy_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let mut writer = BatchWriter::new();
    writer.push(timestamp, Some(&key), Some(&value), &[]);
    writer.finish_with_attributes(
        TRANSACTIONAL_BIT | CONTROL_BIT,
        ProducerFields {
            producer_id,
            producer_epoch,
            base_sequence: -1,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build_batch, validate_batch, NewRecord};

    #[test]
    fn a_marker_reads_back_as_written() {
        for kind in [MarkerKind::Abort, MarkerKind::Commit] {
            let marker = TxnMarker {
                kind,
                coordinator_epoch: 7,
            };
            let batch = build_marker(marker, 42, 3, 1_700_000_000_000).unwrap();
            let header = validate_batch(&batch).unwrap();
            assert!(header.is_control() && header.is_transactional());
            assert_eq!((header.producer_id, header.producer_epoch), (42, 3));
            assert_eq!(read_marker(&batch, &header), Ok(marker));
            // A producer may not write it.
            assert!(crate::validate_records(&batch, &header, 1 << 20).is_err());
        }
    }

    #[test]
    fn a_data_batch_is_not_a_marker() {
        let batch = build_batch(
            &[NewRecord {
                timestamp: 1,
                key: Some(b"k".to_vec()),
                value: Some(b"v".to_vec()),
                headers: Vec::new(),
            }],
            Compression::None,
            ProducerFields::NONE,
        )
        .unwrap();
        let header = validate_batch(&batch).unwrap();
        assert_eq!(read_marker(&batch, &header), Err(MarkerError::NotControl));
    }

    #[test]
    fn other_control_types_and_short_keys_are_refused() {
        let control = |key: &[u8], value: &[u8]| {
            let mut writer = BatchWriter::new();
            writer.push(1, Some(key), Some(value), &[]);
            let batch = writer
                .finish_with_attributes(CONTROL_BIT, ProducerFields::NONE)
                .unwrap();
            let header = validate_batch(&batch).unwrap();
            read_marker(&batch, &header)
        };
        assert_eq!(
            control(&[0, 0, 0, 2], &[0, 0, 0, 0, 0, 0]),
            Err(MarkerError::UnknownType { type_id: 2 })
        );
        assert_eq!(control(&[0, 0], &[0; 6]), Err(MarkerError::Malformed));
        assert_eq!(control(&[0, 0, 0, 1], &[0; 5]), Err(MarkerError::Malformed));
        assert_eq!(
            control(&[0xff, 0xff, 0, 1], &[0; 6]),
            Err(MarkerError::Malformed)
        );
    }
}
