//! Kafka's framing: a 4-byte big-endian length, then that many bytes.
//!
//! Unlike tokio-util's `LengthDelimitedCodec`, which reserves a declared frame's whole length
//! as soon as it reads the prefix, the buffer here grows only as bytes arrive: a peer that
//! declares a 100 MiB frame and sends nothing costs nothing. What the frame being read still
//! lacks is told to the socket beneath ([`crate::low_water`]), so that a request arriving in
//! small pieces wakes the connection only when enough of it is there.

use bytes::{Buf, BytesMut};
use tokio_util::codec::Decoder;

use crate::low_water::Missing;

/// Bytes in the length prefix.
const PREFIX: usize = 4;

/// Decodes length-prefixed frames of at most `max_frame` bytes (`socket.request.max.bytes`);
/// a longer declared frame is an error, which closes the connection.
#[derive(Debug, Clone)]
pub(crate) struct FrameCodec {
    max_frame: usize,
    /// The setting the cap comes from, for the error.
    limit: &'static str,
    missing: Missing,
}

impl FrameCodec {
    pub(crate) fn new(max_frame: usize, missing: Missing) -> Self {
        Self {
            max_frame,
            limit: "socket.request.max.bytes",
            missing,
        }
    }

    /// Caps frames at `max_frame` bytes from the next one on; `limit` names the setting.
    pub(crate) fn set_max(&mut self, max_frame: usize, limit: &'static str) {
        self.max_frame = max_frame;
        self.limit = limit;
    }
}

impl Decoder for FrameCodec {
    type Item = BytesMut;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, Self::Error> {
        let Some(prefix) = src.get(..PREFIX) else {
            self.missing.set(PREFIX - src.len());
            return Ok(None);
        };
        let declared = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        if declared > self.max_frame {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "frame of {declared} bytes is over {} ({})",
                    self.limit, self.max_frame
                ),
            ));
        }
        if src.len() - PREFIX < declared {
            self.missing.set(PREFIX + declared - src.len());
            return Ok(None);
        }
        src.advance(PREFIX);
        Ok(Some(src.split_to(declared)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_length_reserves_nothing_until_its_bytes_arrive() {
        let mut codec = FrameCodec::new(100 * 1024 * 1024, Missing::default());
        let mut buf = BytesMut::with_capacity(64);
        buf.extend_from_slice(&(100u32 * 1024 * 1024).to_be_bytes());
        buf.extend_from_slice(b"abc");
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(buf.capacity() < 1024, "{}", buf.capacity());
    }

    #[test]
    fn frames_split_and_join_as_they_arrive() {
        let missing = Missing::default();
        let mut codec = FrameCodec::new(16, missing.clone());
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&3u32.to_be_bytes()[..2]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert_eq!(missing.get(), 2, "the rest of the prefix");
        buf.extend_from_slice(&3u32.to_be_bytes()[2..]);
        buf.extend_from_slice(b"ab");
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert_eq!(missing.get(), 1);
        buf.extend_from_slice(b"c");
        buf.extend_from_slice(&0u32.to_be_bytes());
        buf.extend_from_slice(&2u32.to_be_bytes());
        assert_eq!(&codec.decode(&mut buf).unwrap().unwrap()[..], b"abc");
        assert_eq!(&codec.decode(&mut buf).unwrap().unwrap()[..], b"");
        assert!(codec.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"xy");
        assert_eq!(&codec.decode(&mut buf).unwrap().unwrap()[..], b"xy");
    }

    #[test]
    fn a_frame_over_the_limit_is_an_error() {
        let mut codec = FrameCodec::new(16, Missing::default());
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&17u32.to_be_bytes());
        assert!(codec.decode(&mut buf).is_err());
    }
}
