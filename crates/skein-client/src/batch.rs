//! Record batches (magic v2) built from [`ProduceRecord`]s and read into
//! [`ConsumerRecord`]s.
//!
//! Both ways go through `skein-records`, the batch format the broker validates and the log
//! stores with: writing with its `BatchWriter` (every codec; snappy in the xerial framing the
//! Java client writes, LZ4 frames with `lz4_flex`, so the client needs no C library), reading
//! with its bounded parser.

use bytes::Bytes;
use kafka_protocol::records::Compression;
use skein_records::{
    decompress, BatchError, BatchHeader, BatchWriter, Compression as SkeinCompression,
    ProducerFields, RecordIter, TimestampType as SkeinTimestampType, HEADER_LEN, LOG_OVERHEAD,
    MAX_DECOMPRESSED,
};

use crate::error::BoxError;
use crate::record::{ConsumerRecord, ProduceRecord, RecordHeader};

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

/// Encodes records as one batch with base offset 0 (the broker assigns offsets), through
/// `skein-records`' writer, the one batch format the broker and the log use too.
/// `now_ms` stands in for records without a timestamp.
pub(crate) fn encode(
    records: &[&ProduceRecord],
    compression: Compression,
    now_ms: i64,
    producer: Option<IdempotentProducer>,
) -> Result<Bytes, BoxError> {
    let mut writer = BatchWriter::new();
    let mut headers = Vec::new();
    for record in records {
        headers.clear();
        headers.extend(
            record
                .headers
                .iter()
                .map(|h| (h.key.as_bytes(), h.value.as_deref())),
        );
        writer.push(
            record.timestamp.unwrap_or(now_ms),
            record.key.as_deref(),
            record.value.as_deref(),
            &headers,
        );
    }
    let producer = producer.map_or(ProducerFields::NONE, |p| ProducerFields {
        producer_id: p.id,
        producer_epoch: p.epoch,
        base_sequence: p.base_sequence,
    });
    let codec = match compression {
        Compression::None => SkeinCompression::None,
        Compression::Gzip => SkeinCompression::Gzip,
        Compression::Snappy => SkeinCompression::Snappy,
        Compression::Lz4 => SkeinCompression::Lz4,
        Compression::Zstd => SkeinCompression::Zstd,
    };
    Ok(Bytes::from(writer.finish(codec, producer)?))
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
///
/// The bytes come from a broker, and the records in them from whoever produced them, so they
/// are read through `skein-records`: every batch's CRC is checked, its records decompress to
/// at most [`MAX_DECOMPRESSED`] (what a broker stores is within that), and nothing is
/// allocated for a count or length the bytes cannot back. Keys and values of uncompressed
/// batches are slices of `data`, not copies.
/// The aborted transactions a `read_committed` answer named, as (producer id, first
/// offset): a transactional batch of such a producer from that offset up to its abort
/// marker is left out, as Kafka's consumers do.
#[derive(Debug, Default)]
pub(crate) struct AbortedFilter {
    /// Not yet reached, by first offset, latest first (popped from the end).
    ahead: Vec<(i64, i64)>,
    /// Producers inside an aborted transaction at the current batch.
    inside: std::collections::HashSet<i64>,
}

impl AbortedFilter {
    pub(crate) fn new(aborted: &[(i64, i64)]) -> Self {
        let mut ahead: Vec<(i64, i64)> = aborted.iter().map(|&(p, first)| (first, p)).collect();
        ahead.sort_unstable_by(|a, b| b.cmp(a));
        Self {
            ahead,
            inside: std::collections::HashSet::new(),
        }
    }

    /// Whether the batch `header` belongs to an aborted transaction (control batches are
    /// left out anyway; a marker closes its producer's transaction).
    fn skips(&mut self, header: &BatchHeader) -> bool {
        while self
            .ahead
            .last()
            .is_some_and(|&(first, _)| first <= header.last_offset())
        {
            if let Some((_, producer)) = self.ahead.pop() {
                self.inside.insert(producer);
            }
        }
        if header.is_control() {
            self.inside.remove(&header.producer_id);
            return false;
        }
        header.is_transactional() && self.inside.contains(&header.producer_id)
    }
}

pub(crate) fn decode(
    topic: &str,
    partition: i32,
    data: Bytes,
    from_offset: i64,
) -> Result<Decoded, BoxError> {
    decode_committed(
        topic,
        partition,
        data,
        from_offset,
        &mut AbortedFilter::default(),
    )
}

/// [`decode`], leaving out the batches of aborted transactions `aborted` names.
pub(crate) fn decode_committed(
    topic: &str,
    partition: i32,
    data: Bytes,
    from_offset: i64,
    aborted: &mut AbortedFilter,
) -> Result<Decoded, BoxError> {
    let mut decoded = Decoded::default();
    let mut at = 0usize;
    while data.len() - at >= LOG_OVERHEAD {
        let header = match BatchHeader::parse(&data[at..]) {
            Ok(header) => header,
            // A partial trailing batch is shorter than a header.
            Err(BatchError::Truncated { .. }) => break,
            Err(error) => return Err(error.into()),
        };
        if header.size() > data.len() - at {
            break;
        }
        let batch = &data[at..at + header.size()];
        header.verify_crc(batch)?;
        if aborted.skips(&header) {
            at += header.size();
            decoded.next_offset = Some(header.last_offset().saturating_add(1));
            continue;
        }
        let records = match header.compression()? {
            SkeinCompression::None => data.slice(at + HEADER_LEN..at + header.size()),
            codec => Bytes::from(decompress(codec, &batch[HEADER_LEN..], MAX_DECOMPRESSED)?),
        };
        at += header.size();
        decoded.next_offset = Some(header.last_offset().saturating_add(1));
        if header.is_control() {
            continue;
        }
        let timestamp_of = |delta: i64| match header.timestamp_type() {
            SkeinTimestampType::LogAppendTime => header.max_timestamp,
            SkeinTimestampType::CreateTime => header.base_timestamp.saturating_add(delta),
        };
        let slice = |part: Option<&[u8]>| part.map(|p| records.slice_ref(p));
        for record in RecordIter::new(&records, header.records_count) {
            let record = record?;
            let offset = header.record_offset(record.offset_delta);
            if offset < from_offset {
                continue;
            }
            decoded.records.push(ConsumerRecord {
                topic: topic.to_owned(),
                partition,
                offset,
                timestamp: timestamp_of(record.timestamp_delta),
                key: slice(record.key),
                value: slice(record.value),
                headers: record
                    .headers
                    .iter()
                    .map(|(key, value)| RecordHeader {
                        key: String::from_utf8_lossy(key.unwrap_or_default()).into_owned(),
                        value: slice(value),
                    })
                    .collect(),
            });
        }
    }
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use bytes::{Buf, BytesMut};

    use super::*;

    /// Offset of the batch length field in a batch header.
    const LENGTH_AT: usize = 8;

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

    #[test]
    fn a_record_declaring_more_headers_than_its_bytes_is_an_error() {
        // attributes, timestamp delta 0, offset delta 0, key "k", value "v", then a header
        // count of 2^31-1 (zig-zag varint) with no headers after it.
        let mut body = vec![0, 0, 0, 2, b'k', 2, b'v'];
        body.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
        let mut records = vec![(body.len() as u8) << 1];
        records.extend_from_slice(&body);
        let forged = skein_records::assemble(
            &records,
            skein_records::BatchParts {
                base_offset: 0,
                attributes: 0,
                last_offset_delta: 0,
                base_timestamp: 0,
                max_timestamp: 0,
                producer: skein_records::ProducerFields::NONE,
                records_count: 1,
            },
        )
        .unwrap();
        assert!(decode("t", 0, Bytes::from(forged), 0).is_err());
    }
}
