//! Rewriting a batch's records under another codec, for a topic whose `compression.type`
//! names one: the records, their offsets and timestamps, and the producer fields stay as
//! the producer wrote them.

use crate::header::COMPRESSION_MASK;
use crate::{assemble, BatchError, BatchHeader, BatchParts, Compression, DecodedRecords};
use crate::{validate_batch, validate_records};

/// `batch` (one whole batch) with its records compressed by `to`, or `None` when they
/// already are or it is a control batch. The batch is checked first (its CRC, and its
/// records within `limit`), so that a damaged one is refused rather than given a new,
/// valid CRC.
pub fn recompress(
    batch: &[u8],
    to: Compression,
    limit: usize,
) -> Result<Option<Vec<u8>>, BatchError> {
    let header: BatchHeader = validate_batch(batch)?;
    if header.is_control() || header.compression()? == to {
        return Ok(None);
    }
    let batch = &batch[..header.size()];
    validate_records(batch, &header, limit)?;
    let decoded = DecodedRecords::decode(batch, limit)?;
    let parts = BatchParts {
        attributes: (header.attributes & !COMPRESSION_MASK) | to.attribute_bits(),
        ..BatchParts::of(&header)
    };
    assemble(&decoded.records, parts).map(Some)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{build_batch, NewRecord, ProducerFields, MAX_DECOMPRESSED};

    fn records() -> Vec<NewRecord> {
        (0..20)
            .map(|i| NewRecord {
                key: Some(format!("k{i}").into_bytes()),
                value: Some(vec![b'x'; 200]),
                headers: vec![(b"h".to_vec(), Some(b"v".to_vec()))],
                timestamp: 1_700_000_000_000 + i,
            })
            .collect()
    }

    /// Each record's key, value and timestamp.
    type Contents = Vec<(Option<Vec<u8>>, Option<Vec<u8>>, i64)>;

    fn contents(batch: &[u8]) -> Contents {
        let decoded = DecodedRecords::decode(batch, MAX_DECOMPRESSED).unwrap();
        decoded
            .iter()
            .map(|r| {
                let r = r.unwrap();
                let ts = decoded.timestamp_of(&r);
                (r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec), ts)
            })
            .collect()
    }

    #[test]
    fn a_batch_changes_codec_and_keeps_its_records_and_producer() {
        let producer = ProducerFields {
            producer_id: 7,
            producer_epoch: 2,
            base_sequence: 40,
        };
        let original = build_batch(&records(), Compression::None, producer).unwrap();
        for to in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let rewritten = recompress(&original, to, MAX_DECOMPRESSED)
                .unwrap()
                .unwrap();
            let header = validate_batch(&rewritten).unwrap();
            assert_eq!(header.compression().unwrap(), to);
            assert!(rewritten.len() < original.len(), "{to:?} compresses");
            assert_eq!(
                (
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence
                ),
                (7, 2, 40)
            );
            assert_eq!(contents(&rewritten), contents(&original), "{to:?}");
            // And back: the same bytes as the producer's uncompressed batch.
            let back = recompress(&rewritten, Compression::None, MAX_DECOMPRESSED)
                .unwrap()
                .unwrap();
            assert_eq!(back, original);
        }
        assert!(recompress(&original, Compression::None, MAX_DECOMPRESSED)
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_damaged_batch_is_refused_not_given_a_new_crc() {
        let mut batch = build_batch(&records(), Compression::Gzip, ProducerFields::NONE).unwrap();
        let last = batch.len() - 1;
        batch[last] ^= 0xff;
        assert!(recompress(&batch, Compression::None, MAX_DECOMPRESSED).is_err());
        let small = build_batch(&records(), Compression::Gzip, ProducerFields::NONE).unwrap();
        assert!(matches!(
            recompress(&small, Compression::Zstd, 100),
            Err(BatchError::DecompressedTooLarge { .. })
        ));
    }
}
