//! Record batches (magic v2) built from [`ProduceRecord`]s and read into
//! [`ConsumerRecord`]s, through kafka-protocol's batch codec.
//!
//! gzip, snappy (in the xerial framing the Java client writes) and zstd come from
//! kafka-protocol. LZ4 frames are written and read with `lz4_flex`, as in `skein-log`, so
//! the client needs no C LZ4 library.

use std::io::{Read, Write};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};

use crate::error::BoxError;
use crate::record::{ConsumerRecord, ProduceRecord, RecordHeader};

/// Upper bound on the decompressed size of one LZ4 batch.
const MAX_DECOMPRESSED: u64 = 256 * 1024 * 1024;

/// Offset of the batch length field in a batch header.
const LENGTH_AT: usize = 8;
/// Bytes before the batch length counts: base offset and the length itself.
const LOG_OVERHEAD: usize = 12;
/// Offset of the attributes field.
const ATTRIBUTES_AT: usize = 21;
/// Offset of the last-offset-delta field.
const LAST_OFFSET_DELTA_AT: usize = 23;
/// Offset of the magic byte.
const MAGIC_AT: usize = 16;

/// An idempotent producer's identity for one batch: the broker writes a batch of a given
/// producer id, epoch and sequence range once, and answers a repeat with the first write's
/// offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IdempotentProducer {
    pub(crate) id: i64,
    pub(crate) epoch: i16,
    /// The sequence number of the batch's first record.
    pub(crate) base_sequence: i32,
}

/// Encodes records as one batch with base offset 0 (the broker assigns offsets).
/// `now_ms` stands in for records without a timestamp.
pub(crate) fn encode(
    records: &[&ProduceRecord],
    compression: Compression,
    now_ms: i64,
    producer: Option<IdempotentProducer>,
) -> Result<Bytes, BoxError> {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: producer.map_or(NO_PRODUCER_ID, |p| p.id),
            producer_epoch: producer.map_or(NO_PRODUCER_EPOCH, |p| p.epoch),
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder keeps records in one batch while `offset - sequence` is constant;
            // without a producer this makes the batch's base sequence -1 (none).
            sequence: match producer {
                Some(p) => p.base_sequence.wrapping_add(i as i32),
                None => (i as i32).wrapping_sub(1),
            },
            timestamp: r.timestamp.unwrap_or(now_ms),
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r
                .headers
                .iter()
                .map(|h| (StrBytes::from_string(h.key.clone()), h.value.clone()))
                .collect::<IndexMap<_, _>>(),
        })
        .collect();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    let mut buf = BytesMut::new();
    if compression == Compression::Lz4 {
        RecordBatchEncoder::encode_with_custom_compression(
            &mut buf,
            &records,
            &options,
            Some(|raw: &mut BytesMut, out: &mut BytesMut, _| {
                let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
                encoder.write_all(raw)?;
                let compressed = encoder.finish()?;
                out.extend_from_slice(&compressed);
                Ok(())
            }),
        )?;
    } else {
        RecordBatchEncoder::encode(&mut buf, &records, &options)?;
    }
    Ok(buf.freeze())
}

/// What [`decode`] found in a fetched record set.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub(crate) records: Vec<ConsumerRecord>,
    /// The offset after the last complete batch, if there was one.
    pub(crate) next_offset: Option<i64>,
}

/// Decodes the complete batches of a fetched record set, leaving out control records and
/// records before `from_offset` (a fetch answers whole batches). A trailing partial batch,
/// which a broker may send when it cuts an answer at `max_bytes`, is ignored.
pub(crate) fn decode(
    topic: &str,
    partition: i32,
    mut data: Bytes,
    from_offset: i64,
) -> Result<Decoded, BoxError> {
    let mut decoded = Decoded::default();
    while data.len() >= LOG_OVERHEAD {
        let length = (&data[LENGTH_AT..LOG_OVERHEAD]).get_i32();
        let Ok(length) = usize::try_from(length) else {
            return Err(format!("negative batch length {length}").into());
        };
        let Some(size) = length.checked_add(LOG_OVERHEAD) else {
            break;
        };
        if size > data.len() || size < LAST_OFFSET_DELTA_AT + 4 {
            break;
        }
        let mut batch = data.split_to(size);
        let base_offset = (&batch[..8]).get_i64();
        let last_offset_delta = (&batch[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]).get_i32();
        let magic = batch[MAGIC_AT];
        if magic != 2 {
            return Err(format!(
                "message format v{magic} at offset {base_offset} is not supported"
            )
            .into());
        }
        let attributes = (&batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2]).get_i16();
        let set = if attributes & 0x7 == Compression::Lz4 as i16 {
            RecordBatchDecoder::decode_with_custom_compression(
                &mut batch,
                Some(|compressed: &mut Bytes, _| {
                    let mut raw = Vec::new();
                    lz4_flex::frame::FrameDecoder::new(compressed.clone().reader())
                        .take(MAX_DECOMPRESSED)
                        .read_to_end(&mut raw)?;
                    Ok(Bytes::from(raw))
                }),
            )?
        } else {
            RecordBatchDecoder::decode(&mut batch)?
        };
        decoded.next_offset = Some(base_offset + i64::from(last_offset_delta) + 1);
        decoded.records.extend(
            set.records
                .into_iter()
                .filter(|r| !r.control && r.offset >= from_offset)
                .map(|r| ConsumerRecord {
                    topic: topic.to_owned(),
                    partition,
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: r.key,
                    value: r.value,
                    headers: r
                        .headers
                        .into_iter()
                        .map(|(key, value)| RecordHeader {
                            key: key.as_str().to_owned(),
                            value,
                        })
                        .collect(),
                }),
        );
    }
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<ProduceRecord> {
        (0..20)
            .map(|i| {
                ProduceRecord::new(format!("value-{i}").repeat(10))
                    .with_key(format!("key-{i}"))
                    .with_header("h", Some(Bytes::from(format!("{i}"))))
                    .with_timestamp(1_700_000_000_000 + i)
            })
            .collect()
    }

    #[test]
    fn every_codec_round_trips_one_batch() {
        let records = records();
        let refs: Vec<&ProduceRecord> = records.iter().collect();
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let bytes = encode(&refs, codec, 0, None).unwrap();
            // One batch: the length field covers everything after it.
            let length = (&bytes[LENGTH_AT..LOG_OVERHEAD]).get_i32() as usize;
            assert_eq!(length + LOG_OVERHEAD, bytes.len(), "{codec:?}");
            let decoded = decode("t", 0, bytes, 5).unwrap();
            assert_eq!(decoded.next_offset, Some(20), "{codec:?}");
            assert_eq!(decoded.records.len(), 15, "{codec:?}");
            for (got, want) in decoded.records.iter().zip(&records[5..]) {
                assert_eq!(got.key, want.key);
                assert_eq!(got.value, want.value);
                assert_eq!(got.timestamp, want.timestamp.unwrap());
                assert_eq!(got.headers, want.headers);
            }
        }
    }

    #[test]
    fn base_sequence_is_none() {
        let records = records();
        let refs: Vec<&ProduceRecord> = records.iter().collect();
        let bytes = encode(&refs, Compression::None, 0, None).unwrap();
        // Base sequence sits after producer id (8) and epoch (2), at byte 53.
        assert_eq!((&bytes[53..57]).get_i32(), -1);
        assert_eq!((&bytes[43..51]).get_i64(), -1);
    }

    #[test]
    fn partial_trailing_batch_is_ignored() {
        let records = records();
        let refs: Vec<&ProduceRecord> = records.iter().collect();
        let bytes = encode(&refs, Compression::None, 0, None).unwrap();
        let mut two = BytesMut::from(&bytes[..]);
        two.extend_from_slice(&bytes[..bytes.len() / 2]);
        let decoded = decode("t", 0, two.freeze(), 0).unwrap();
        assert_eq!(decoded.records.len(), 20);
    }
}
