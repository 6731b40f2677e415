//! The sparse indexes of a segment, read and written through memory maps.
//!
//! `.index`: 8-byte entries `relative_offset: u32 | position: u32`, big-endian. An entry
//! names the base offset (relative to the segment's) of a batch and its byte position in
//! the `.log`. Entries ascend in both fields.
//!
//! `.timeindex`: 12-byte entries `timestamp: i64 | relative_offset: u32`, big-endian. An entry
//! says: the largest timestamp of all records at or below this offset is `timestamp`.
//! Timestamps never decrease and relative offsets rise strictly. The last entry of a sealed
//! segment always names its last batch.

#![allow(unsafe_code)]

use std::fs::File;

use memmap2::{Mmap, MmapMut, MmapOptions};

pub(crate) const OFFSET_ENTRY: u64 = 8;
pub(crate) const TIME_ENTRY: u64 = 12;

/// A mapped index file: read-only for closed segments, writable (preallocated) for the
/// active one, or nothing for an empty closed index.
#[derive(Debug)]
pub(crate) enum IndexMap {
    Empty,
    ReadOnly(Mmap),
    Writable(MmapMut),
}

impl IndexMap {
    pub(crate) fn map_read_only(file: &File, len: u64) -> std::io::Result<Self> {
        if len == 0 {
            return Ok(Self::Empty);
        }
        // SAFETY: index files belong to this log alone; they are only resized by this crate
        // after the mapping covering them has been dropped (see `Segment::seal`).
        let map = unsafe { MmapOptions::new().len(len as usize).map(file)? };
        Ok(Self::ReadOnly(map))
    }

    pub(crate) fn map_writable(file: &File, len: u64) -> std::io::Result<Self> {
        if len == 0 {
            return Ok(Self::Empty);
        }
        // SAFETY: as above; the file was extended to `len` before mapping.
        let map = unsafe { MmapOptions::new().len(len as usize).map_mut(file)? };
        Ok(Self::Writable(map))
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Self::Empty => &[],
            Self::ReadOnly(m) => m,
            Self::Writable(m) => m,
        }
    }

    /// Writes `entry` at byte `at`; returns false when the map cannot take it.
    pub(crate) fn write(&mut self, at: u64, entry: &[u8]) -> bool {
        match self {
            Self::Writable(m) => {
                let at = at as usize;
                match m.get_mut(at..at + entry.len()) {
                    Some(slot) => {
                        slot.copy_from_slice(entry);
                        true
                    }
                    None => false,
                }
            }
            Self::Empty | Self::ReadOnly(_) => false,
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

/// Entry `i` of an offset index: (relative offset, position).
pub(crate) fn offset_entry(bytes: &[u8], i: u64) -> (u32, u32) {
    let at = (i * OFFSET_ENTRY) as usize;
    (u32_at(bytes, at), u32_at(bytes, at + 4))
}

/// Entry `i` of a time index: (timestamp, relative offset).
pub(crate) fn time_entry(bytes: &[u8], i: u64) -> (i64, u32) {
    let at = (i * TIME_ENTRY) as usize;
    (i64_at(bytes, at), u32_at(bytes, at + 8))
}

pub(crate) fn encode_offset_entry(relative_offset: u32, position: u32) -> [u8; 8] {
    let mut e = [0u8; 8];
    e[..4].copy_from_slice(&relative_offset.to_be_bytes());
    e[4..].copy_from_slice(&position.to_be_bytes());
    e
}

pub(crate) fn encode_time_entry(timestamp: i64, relative_offset: u32) -> [u8; 12] {
    let mut e = [0u8; 12];
    e[..8].copy_from_slice(&timestamp.to_be_bytes());
    e[8..].copy_from_slice(&relative_offset.to_be_bytes());
    e
}

/// The last offset-index entry whose relative offset is at most `target`.
pub(crate) fn lookup_offset(bytes: &[u8], entries: u64, target: u32) -> Option<(u32, u32)> {
    let (mut lo, mut hi) = (0u64, entries);
    // Invariant: entries below `lo` are <= target; entries at or above `hi` are > target.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if offset_entry(bytes, mid).0 <= target {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.checked_sub(1).map(|i| offset_entry(bytes, i))
}

/// The last offset-index entry whose relative offset is at most `max_relative` and whose
/// position is at most `max_position` (both fields ascend, so those entries form a prefix).
pub(crate) fn last_entry_within(
    bytes: &[u8],
    entries: u64,
    max_relative: u32,
    max_position: u32,
) -> Option<(u32, u32)> {
    let (mut lo, mut hi) = (0u64, entries);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let (rel, pos) = offset_entry(bytes, mid);
        if rel <= max_relative && pos <= max_position {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.checked_sub(1).map(|i| offset_entry(bytes, i))
}

/// The last time-index entry whose timestamp is below `target`.
pub(crate) fn lookup_time_below(bytes: &[u8], entries: u64, target: i64) -> Option<(i64, u32)> {
    let (mut lo, mut hi) = (0u64, entries);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if time_entry(bytes, mid).0 < target {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.checked_sub(1).map(|i| time_entry(bytes, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_search_finds_the_floor_entry() {
        let mut bytes = Vec::new();
        for (rel, pos) in [(0u32, 0u32), (10, 4100), (20, 8200), (35, 12400)] {
            bytes.extend_from_slice(&encode_offset_entry(rel, pos));
        }
        assert_eq!(lookup_offset(&bytes, 4, 0), Some((0, 0)));
        assert_eq!(lookup_offset(&bytes, 4, 19), Some((10, 4100)));
        assert_eq!(lookup_offset(&bytes, 4, 20), Some((20, 8200)));
        assert_eq!(lookup_offset(&bytes, 4, 1000), Some((35, 12400)));
        assert_eq!(lookup_offset(&bytes[8..], 3, 5), None);
        assert_eq!(lookup_offset(&bytes, 0, 5), None);
    }

    #[test]
    fn last_entry_within_respects_both_limits() {
        let mut bytes = Vec::new();
        for (rel, pos) in [(0u32, 0u32), (10, 4100), (20, 8200), (35, 12400)] {
            bytes.extend_from_slice(&encode_offset_entry(rel, pos));
        }
        assert_eq!(last_entry_within(&bytes, 4, 100, 9000), Some((20, 8200)));
        assert_eq!(last_entry_within(&bytes, 4, 19, 90000), Some((10, 4100)));
        assert_eq!(
            last_entry_within(&bytes, 4, 100, 100_000),
            Some((35, 12400))
        );
        assert_eq!(last_entry_within(&bytes[8..], 3, 5, 100), None);
    }

    #[test]
    fn time_lookup_finds_the_last_entry_below() {
        let mut bytes = Vec::new();
        for (ts, rel) in [(100i64, 3u32), (200, 9), (300, 15)] {
            bytes.extend_from_slice(&encode_time_entry(ts, rel));
        }
        assert_eq!(lookup_time_below(&bytes, 3, 100), None);
        assert_eq!(lookup_time_below(&bytes, 3, 101), Some((100, 3)));
        assert_eq!(lookup_time_below(&bytes, 3, 300), Some((200, 9)));
        assert_eq!(lookup_time_below(&bytes, 3, 9999), Some((300, 15)));
    }
}
