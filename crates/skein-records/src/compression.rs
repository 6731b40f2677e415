//! The four record-batch codecs. Every decompression is bounded by a limit the caller
//! chooses, never by a size the compressed bytes declare.

use std::io::{Read, Write};

use crate::{BatchError, Compression};

/// The most that the records of one batch may decompress to, for every writer and reader:
/// the broker refuses a batch that inflates past its topic's limit (see
/// [`decompression_limit`]), which is never above this, so every reader can decode whatever
/// was stored with this bound.
pub const MAX_DECOMPRESSED: usize = 64 * 1024 * 1024;

/// The least that a topic's limit is, whatever its `max.message.bytes`.
const MIN_DECOMPRESSION_LIMIT: usize = 16 * 1024 * 1024;

/// How far the records of one batch of a topic may inflate: 32 times the topic's
/// `max.message.bytes`, at least 16 MiB and at most [`MAX_DECOMPRESSED`].
pub fn decompression_limit(max_message_bytes: u64) -> usize {
    usize::try_from(max_message_bytes.saturating_mul(32))
        .unwrap_or(usize::MAX)
        .clamp(MIN_DECOMPRESSION_LIMIT, MAX_DECOMPRESSED)
}

/// The header that the Java client's snappy stream (xerial) writes before its chunks.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;

/// Decompresses `data` to at most `limit` bytes; past that it stops reading and answers
/// [`BatchError::DecompressedTooLarge`]. Uncompressed data over `limit` is refused too.
pub fn decompress(codec: Compression, data: &[u8], limit: usize) -> Result<Vec<u8>, BatchError> {
    let fail = |source: std::io::Error| BatchError::Decompression { codec, source };
    let too_large = || BatchError::DecompressedTooLarge { codec, limit };
    let out = match codec {
        Compression::None => {
            if data.len() > limit {
                return Err(too_large());
            }
            return Ok(data.to_vec());
        }
        Compression::Gzip => read_bounded(flate2::read::GzDecoder::new(data), limit),
        Compression::Lz4 => read_bounded(lz4_flex::frame::FrameDecoder::new(data), limit),
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::new(data).map_err(fail)?;
            read_bounded(decoder, limit)
        }
        Compression::Snappy => snappy_decompress(data, limit),
    };
    match out {
        Ok(Some(out)) => Ok(out),
        Ok(None) => Err(too_large()),
        Err(source) => Err(fail(source)),
    }
}

pub fn compress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, BatchError> {
    let fail = |source: std::io::Error| BatchError::Decompression { codec, source };
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(data).map_err(fail)?;
            enc.finish().map_err(fail)
        }
        Compression::Lz4 => {
            let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
            enc.write_all(data).map_err(fail)?;
            enc.finish().map_err(|e| fail(std::io::Error::other(e)))
        }
        Compression::Zstd => zstd::bulk::compress(data, 3).map_err(fail),
        Compression::Snappy => {
            // Written in the Java client's framing, which every client reads.
            let mut out = Vec::with_capacity(data.len() / 2 + XERIAL_HEADER_LEN);
            out.extend_from_slice(&XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            for chunk in data.chunks(32 * 1024) {
                let block = snap::raw::Encoder::new()
                    .compress_vec(chunk)
                    .map_err(|e| fail(std::io::Error::other(e)))?;
                out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
    }
}

/// Reads everything, or `None` once more than `limit` bytes came out.
fn read_bounded(reader: impl Read, limit: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    let read = reader
        .take((limit as u64).saturating_add(1))
        .read_to_end(&mut out)?;
    Ok((read <= limit).then_some(out))
}

/// Kafka's snappy batches come in two shapes: a raw snappy block (librdkafka) or the xerial
/// stream of length-prefixed blocks (the Java client).
fn snappy_decompress(data: &[u8], limit: usize) -> std::io::Result<Option<Vec<u8>>> {
    let invalid = |msg: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, msg.to_owned());
    // Appends one block; false once the output would pass the limit.
    let raw = |block: &[u8], out: &mut Vec<u8>| -> std::io::Result<bool> {
        let len = snap::raw::decompress_len(block).map_err(std::io::Error::other)?;
        if out.len().saturating_add(len) > limit {
            return Ok(false);
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new()
            .decompress(block, &mut out[start..])
            .map_err(std::io::Error::other)?;
        Ok(true)
    };
    let mut out = Vec::new();
    if data.len() >= XERIAL_HEADER_LEN && data[..8] == XERIAL_MAGIC {
        let mut pos = XERIAL_HEADER_LEN;
        while pos < data.len() {
            let len_bytes = data
                .get(pos..pos + 4)
                .ok_or_else(|| invalid("truncated snappy chunk length"))?;
            let len = i32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
            pos += 4;
            let len = usize::try_from(len).map_err(|_| invalid("negative snappy chunk length"))?;
            let block = data
                .get(pos..pos + len)
                .ok_or_else(|| invalid("truncated snappy chunk"))?;
            if !raw(block, &mut out)? {
                return Ok(None);
            }
            pos += len;
        }
    } else if !raw(data, &mut out)? {
        return Ok(None);
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let packed = compress(codec, &data).unwrap();
            assert_eq!(
                decompress(codec, &packed, MAX_DECOMPRESSED).unwrap(),
                data,
                "{codec:?}"
            );
        }
    }

    #[test]
    fn output_past_the_limit_is_refused_without_reading_on() {
        // 64 MiB of zeros packs into a few KiB with every codec.
        let data = vec![0u8; 8 * 1024 * 1024];
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let packed = compress(codec, &data).unwrap();
            assert!(
                matches!(
                    decompress(codec, &packed, data.len() - 1),
                    Err(BatchError::DecompressedTooLarge { limit, .. }) if limit == data.len() - 1
                ),
                "{codec:?}"
            );
            assert_eq!(
                decompress(codec, &packed, data.len()).unwrap().len(),
                data.len()
            );
        }
    }

    #[test]
    fn limits_follow_max_message_bytes_within_bounds() {
        assert_eq!(decompression_limit(1), 16 * 1024 * 1024);
        assert_eq!(decompression_limit(1024 * 1024), 32 * 1024 * 1024);
        assert_eq!(decompression_limit(u64::MAX), MAX_DECOMPRESSED);
    }

    #[test]
    fn raw_snappy_blocks_are_read() {
        let data = b"hello hello hello hello".repeat(10);
        let block = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &block, MAX_DECOMPRESSED).unwrap(),
            data
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            assert!(decompress(codec, b"\x82SNAPPY\x00garbage-garbage", 1 << 20).is_err());
        }
    }
}
