//! The four record-batch codecs, used only where the log must look inside a batch
//! (compaction and timestamp lookup). Appends and reads never decompress.

use std::io::{Read, Write};

use super::{BatchError, Compression};

/// Upper bound on the decompressed size of one batch's records, so a hostile batch cannot
/// make the log allocate without limit.
pub const MAX_DECOMPRESSED: usize = 256 * 1024 * 1024;

/// The header that the Java client's snappy stream (xerial) writes before its chunks.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;

pub fn decompress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, BatchError> {
    let fail = |source: std::io::Error| BatchError::Decompression { codec, source };
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => read_bounded(flate2::read::GzDecoder::new(data)).map_err(fail),
        Compression::Lz4 => read_bounded(lz4_flex::frame::FrameDecoder::new(data)).map_err(fail),
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::new(data).map_err(fail)?;
            read_bounded(decoder).map_err(fail)
        }
        Compression::Snappy => snappy_decompress(data).map_err(fail),
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

fn read_bounded(reader: impl Read) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let read = reader
        .take(MAX_DECOMPRESSED as u64 + 1)
        .read_to_end(&mut out)?;
    if read > MAX_DECOMPRESSED {
        return Err(std::io::Error::other(
            "decompressed batch exceeds the size limit",
        ));
    }
    Ok(out)
}

/// Kafka's snappy batches come in two shapes: a raw snappy block (librdkafka) or the xerial
/// stream of length-prefixed blocks (the Java client).
fn snappy_decompress(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let invalid = |msg: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, msg.to_owned());
    let raw = |block: &[u8], out: &mut Vec<u8>| -> std::io::Result<()> {
        let len = snap::raw::decompress_len(block).map_err(std::io::Error::other)?;
        if out.len() + len > MAX_DECOMPRESSED {
            return Err(invalid("decompressed batch exceeds the size limit"));
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new()
            .decompress(block, &mut out[start..])
            .map_err(std::io::Error::other)?;
        Ok(())
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
            raw(block, &mut out)?;
            pos += len;
        }
    } else {
        raw(data, &mut out)?;
    }
    Ok(out)
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
            assert_eq!(decompress(codec, &packed).unwrap(), data, "{codec:?}");
        }
    }

    #[test]
    fn raw_snappy_blocks_are_read() {
        let data = b"hello hello hello hello".repeat(10);
        let block = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(Compression::Snappy, &block).unwrap(), data);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            assert!(decompress(codec, b"\x82SNAPPY\x00garbage-garbage").is_err());
        }
    }
}
