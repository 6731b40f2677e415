//! Records inside a batch (after decompression), read without copying.
//!
//! ```text
//! length: varint          bytes after this field
//! attributes: int8
//! timestamp_delta: varlong
//! offset_delta: varint
//! key_length: varint      -1 for a null key
//! key: bytes
//! value_length: varint    -1 for a null value (a tombstone)
//! value: bytes
//! headers_count: varint
//! headers: [header_key_length: varint, header_key, header_value_length: varint, header_value]
//! ```
//!
//! Varints are zig-zag encoded, as in protobuf.

use crate::BatchError;

/// One record, borrowed from the decompressed records section of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The record's headers, already checked to lie within the record.
    pub headers: Headers<'a>,
    /// The whole record, its length prefix included, as stored.
    pub raw: &'a [u8],
}

/// The headers of one record: `count` (key, value) pairs in `raw`, each key and value a
/// length-prefixed byte string. [`RecordIter`] has checked that they fill `raw` exactly, so
/// `count` is at most half of `raw.len()` whatever the record declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers<'a> {
    raw: &'a [u8],
    count: usize,
}

impl<'a> Headers<'a> {
    /// How many headers there are.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The headers in order: a key (`None` only if the record says so, which Kafka's
    /// clients never write) and a value (`None` for a null value).
    pub fn iter(&self) -> impl Iterator<Item = (Option<&'a [u8]>, Option<&'a [u8]>)> + 'a {
        let raw = self.raw;
        let mut pos = 0usize;
        (0..self.count).map_while(move |_| {
            let key = read_bytes(raw, &mut pos).ok()?;
            let value = read_bytes(raw, &mut pos).ok()?;
            Some((key, value))
        })
    }
}

/// Iterates the records of an uncompressed records section.
#[derive(Debug)]
pub struct RecordIter<'a> {
    buf: &'a [u8],
    pos: usize,
    remaining: i32,
}

impl<'a> RecordIter<'a> {
    pub fn new(records: &'a [u8], count: i32) -> Self {
        Self {
            buf: records,
            pos: 0,
            remaining: count,
        }
    }

    fn next_record(&mut self) -> Result<Record<'a>, BatchError> {
        let start = self.pos;
        let length = read_varint(self.buf, &mut self.pos)?;
        let body_start = self.pos;
        let end = usize::try_from(length)
            .ok()
            .and_then(|l| body_start.checked_add(l))
            .filter(|&e| e <= self.buf.len())
            .ok_or(BatchError::InvalidRecord { at: start })?;
        let body = &self.buf[..end];
        let mut p = body_start;
        if p >= end {
            return Err(BatchError::InvalidRecord { at: start });
        }
        p += 1; // attributes
        let timestamp_delta = read_varlong(body, &mut p)?;
        let offset_delta = read_varint(body, &mut p)?;
        let key = read_bytes(body, &mut p)?;
        let value = read_bytes(body, &mut p)?;
        let headers = read_varint(body, &mut p)?;
        if headers < 0 {
            return Err(BatchError::InvalidRecord { at: start });
        }
        // Each header takes at least two bytes, so a count the bytes cannot hold fails here,
        // before any header is read.
        let headers_start = p;
        let count = headers as usize;
        if count > (end - p) / 2 {
            return Err(BatchError::InvalidRecord { at: start });
        }
        for _ in 0..count {
            read_bytes(body, &mut p)?;
            read_bytes(body, &mut p)?;
        }
        if p != end {
            return Err(BatchError::InvalidRecord { at: start });
        }
        self.pos = end;
        Ok(Record {
            timestamp_delta,
            offset_delta,
            key,
            value,
            headers: Headers {
                raw: &self.buf[headers_start..end],
                count,
            },
            raw: &self.buf[start..end],
        })
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining <= 0 {
            return None;
        }
        self.remaining -= 1;
        match self.next_record() {
            Ok(r) => Some(Ok(r)),
            Err(e) => {
                self.remaining = 0;
                Some(Err(e))
            }
        }
    }
}

fn read_bytes<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, BatchError> {
    let at = *pos;
    let len = read_varint(buf, pos)?;
    if len < 0 {
        return Ok(None);
    }
    let end = pos
        .checked_add(len as usize)
        .filter(|&e| e <= buf.len())
        .ok_or(BatchError::InvalidRecord { at })?;
    let bytes = &buf[*pos..end];
    *pos = end;
    Ok(Some(bytes))
}

fn read_unsigned(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Result<u64, BatchError> {
    let at = *pos;
    let mut value: u64 = 0;
    for i in 0..max_bytes {
        let byte = *buf.get(*pos).ok_or(BatchError::InvalidRecord { at })?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(BatchError::InvalidRecord { at })
}

pub(crate) fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, BatchError> {
    let raw = read_unsigned(buf, pos, 5)? as u32;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

pub(crate) fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, BatchError> {
    let raw = read_unsigned(buf, pos, 10)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

pub(crate) fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, ((value << 1) ^ (value >> 31)) as u32 as u64);
}

pub(crate) fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, -1, 63, -64, 64, 300, -300, i32::MAX, i32::MIN] {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            let mut pos = 0;
            assert_eq!(read_varint(&out, &mut pos).unwrap(), v);
            assert_eq!(pos, out.len());
        }
        for v in [0i64, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            let mut pos = 0;
            assert_eq!(read_varlong(&out, &mut pos).unwrap(), v);
        }
    }

    #[test]
    fn overlong_varint_is_rejected() {
        let buf = [0xff; 11];
        let mut pos = 0;
        assert!(read_varint(&buf, &mut pos).is_err());
    }
}
