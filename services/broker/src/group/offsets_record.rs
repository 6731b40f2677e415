//! The records of `__consumer_offsets`, in Kafka's own layout:
//!
//! ```text
//! key   = version: i16 (1) | group: string | topic: string | partition: i32
//! value = version: i16 (3) | offset: i64 | leader_epoch: i32 | metadata: string
//!         | commit_timestamp: i64                        (null value: offset deleted)
//! ```
//! where `string` is an i16 length and UTF-8 bytes.
//!
//! A string longer than an i16 can say is refused when written, never wrapped: a wrapped
//! length would read back as another key, or drop an acknowledged commit. Reading takes
//! exactly the bytes written, and nothing after them, so a key reads back only as itself.

/// The longest string a record holds: what its i16 length can say.
pub const MAX_STRING: usize = i16::MAX as usize;

/// A committed offset's key: group, topic and partition, as the broker keeps them.
pub type Key = (String, String, i32);

/// One committed offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

/// Why a record could not be written or read.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum OffsetsRecordError {
    #[error("the {what} is {len} bytes, over the {MAX_STRING} an offsets record can hold")]
    TooLong { what: &'static str, len: usize },
    #[error("an offsets key that is malformed or of an unknown version")]
    MalformedKey,
    #[error("an offsets value that is malformed or of an unknown version")]
    MalformedValue,
}

fn put_string(out: &mut Vec<u8>, what: &'static str, s: &str) -> Result<(), OffsetsRecordError> {
    let len =
        i16::try_from(s.len()).map_err(|_| OffsetsRecordError::TooLong { what, len: s.len() })?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if buf.len() < n {
        return None;
    }
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Some(head)
}

fn get_i16(buf: &mut &[u8]) -> Option<i16> {
    take(buf, 2).map(|b| i16::from_be_bytes([b[0], b[1]]))
}

fn get_i32(buf: &mut &[u8]) -> Option<i32> {
    take(buf, 4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn get_i64(buf: &mut &[u8]) -> Option<i64> {
    take(buf, 8).map(|b| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        i64::from_be_bytes(a)
    })
}

/// A string of the length its i16 prefix says (never negative, so at most [`MAX_STRING`]):
/// only as many bytes as the buffer holds are ever taken.
fn get_string(buf: &mut &[u8]) -> Option<String> {
    let len = usize::try_from(get_i16(buf)?).ok()?;
    String::from_utf8(take(buf, len)?.to_vec()).ok()
}

/// The key of `group`'s committed offset of `topic`'s `partition`.
pub fn encode_key(group: &str, topic: &str, partition: i32) -> Result<Vec<u8>, OffsetsRecordError> {
    let mut out = Vec::with_capacity(10 + group.len() + topic.len());
    out.extend_from_slice(&1i16.to_be_bytes());
    put_string(&mut out, "group id", group)?;
    put_string(&mut out, "topic name", topic)?;
    out.extend_from_slice(&partition.to_be_bytes());
    Ok(out)
}

/// The key a record carries; the bytes must be exactly one key of version 0 or 1.
pub fn decode_key(mut buf: &[u8]) -> Result<Key, OffsetsRecordError> {
    let malformed = OffsetsRecordError::MalformedKey;
    let version = get_i16(&mut buf).ok_or(malformed.clone())?;
    if !(0..=1).contains(&version) {
        return Err(malformed);
    }
    let key = (
        get_string(&mut buf).ok_or(malformed.clone())?,
        get_string(&mut buf).ok_or(malformed.clone())?,
        get_i32(&mut buf).ok_or(malformed.clone())?,
    );
    if !buf.is_empty() {
        return Err(malformed);
    }
    Ok(key)
}

/// The value of a commit made at `now_ms`.
pub fn encode_value(c: &Committed, now_ms: i64) -> Result<Vec<u8>, OffsetsRecordError> {
    let mut out = Vec::with_capacity(32 + c.metadata.len());
    out.extend_from_slice(&3i16.to_be_bytes());
    out.extend_from_slice(&c.offset.to_be_bytes());
    out.extend_from_slice(&c.leader_epoch.to_be_bytes());
    put_string(&mut out, "commit metadata", &c.metadata)?;
    out.extend_from_slice(&now_ms.to_be_bytes());
    Ok(out)
}

/// The commit a (non-null) value carries; the bytes must be exactly one value of version 3.
pub fn decode_value(mut buf: &[u8]) -> Result<Committed, OffsetsRecordError> {
    let malformed = OffsetsRecordError::MalformedValue;
    if get_i16(&mut buf) != Some(3) {
        return Err(malformed);
    }
    let offset = get_i64(&mut buf).ok_or(malformed.clone())?;
    let leader_epoch = get_i32(&mut buf).ok_or(malformed.clone())?;
    let metadata = get_string(&mut buf).ok_or(malformed.clone())?;
    let _commit_timestamp = get_i64(&mut buf).ok_or(malformed.clone())?;
    if !buf.is_empty() {
        return Err(malformed);
    }
    Ok(Committed {
        offset,
        leader_epoch,
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys_and_values_round_trip_and_a_cut_record_does_not_read() {
        let key = encode_key("g", "orders", 7).unwrap();
        assert_eq!(decode_key(&key), Ok(("g".into(), "orders".into(), 7)));
        let c = Committed {
            offset: 42,
            leader_epoch: 3,
            metadata: "meta".into(),
        };
        let value = encode_value(&c, 1).unwrap();
        assert_eq!(decode_value(&value), Ok(c));
        for cut in 0..key.len() {
            assert!(decode_key(&key[..cut]).is_err());
        }
        for cut in 0..value.len() {
            assert!(decode_value(&value[..cut]).is_err());
        }
        let mut longer = key.clone();
        longer.push(0);
        assert!(decode_key(&longer).is_err());
    }

    #[test]
    fn a_string_too_long_for_its_length_is_refused_not_wrapped() {
        // 65,536 + 7 bytes would wrap to 7 in an i16 (or go negative at 40,000).
        for len in [40_000, 65_536 + 7] {
            let long = "g".repeat(len);
            assert_eq!(
                encode_key(&long, "t", 0),
                Err(OffsetsRecordError::TooLong {
                    what: "group id",
                    len
                })
            );
            let c = Committed {
                offset: 1,
                leader_epoch: -1,
                metadata: long,
            };
            assert!(matches!(
                encode_value(&c, 0),
                Err(OffsetsRecordError::TooLong { .. })
            ));
        }
        let longest = "g".repeat(MAX_STRING);
        let key = encode_key(&longest, "t", 0).unwrap();
        assert_eq!(decode_key(&key), Ok((longest, "t".into(), 0)));
    }

    proptest! {
        #[test]
        fn any_key_and_value_written_reads_back_as_itself(
            group in ".{0,300}",
            topic in "[a-z._-]{1,40}",
            partition in any::<i32>(),
            offset in any::<i64>(),
            leader_epoch in any::<i32>(),
            metadata in ".{0,300}",
            now in any::<i64>(),
        ) {
            let key = encode_key(&group, &topic, partition).unwrap();
            prop_assert_eq!(decode_key(&key), Ok((group, topic, partition)));
            let c = Committed { offset, leader_epoch, metadata };
            prop_assert_eq!(decode_value(&encode_value(&c, now).unwrap()), Ok(c));
        }
    }
}
