//! What a read returns: a region of one segment file holding whole batches.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::batch::validate_batch;
use crate::error::{LogError, Result};
use crate::files::SegmentFiles;

/// A byte range of a segment's `.log` holding whole batches. It keeps the file open, so it
/// stays readable after the log moves on, evicts the segment from the handle cache or
/// deletes it; a broker can hand `file()`, `position()` and `len()` to `sendfile`.
#[derive(Debug, Clone)]
pub struct FileRegion {
    file: Arc<File>,
    segment_base_offset: u64,
    position: u64,
    len: u64,
}

impl FileRegion {
    pub(crate) fn new(
        files: &SegmentFiles,
        segment_base_offset: u64,
        position: u64,
        len: u64,
    ) -> Self {
        Self {
            file: Arc::clone(&files.log),
            segment_base_offset,
            position,
            len,
        }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn segment_base_offset(&self) -> u64 {
        self.segment_base_offset
    }

    pub fn position(&self) -> u64 {
        self.position
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the region's bytes out, as they are in the file.
    pub fn read_to_vec(&self) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.len as usize];
        self.file.read_exact_at(&mut buf, self.position)?;
        Ok(buf)
    }
}

/// The answer to [`crate::Log::read`].
#[derive(Debug, Clone)]
pub struct ReadSlice {
    /// `None` when there is nothing to read at that offset (yet).
    pub region: Option<FileRegion>,
    /// Base offset of the first batch (it may be below the offset asked for).
    pub first_offset: u64,
    /// Reading on from `last_offset + 1` continues after the returned batches. It is the last
    /// offset of the last batch, or one below the base offset of the batch that follows.
    pub last_offset: u64,
}

impl ReadSlice {
    pub(crate) fn empty() -> Self {
        Self {
            region: None,
            first_offset: 0,
            last_offset: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.region.is_none()
    }

    pub fn len(&self) -> u64 {
        self.region.as_ref().map_or(0, FileRegion::len)
    }

    /// The batches as bytes, each checked against its CRC. A batch that fails the check is
    /// never returned: the bytes stop before it, and if it is the first one the read fails
    /// with [`LogError::CorruptSegment`].
    pub fn to_verified_bytes(&self) -> Result<Vec<u8>> {
        let Some(region) = &self.region else {
            return Ok(Vec::new());
        };
        let mut bytes = region.read_to_vec().map_err(|source| LogError::Io {
            path: std::path::PathBuf::from(format!(
                "segment {} at {}",
                region.segment_base_offset, region.position
            )),
            source,
        })?;
        let mut at = 0usize;
        while at < bytes.len() {
            match validate_batch(&bytes[at..]) {
                Ok(header) => at += header.size(),
                Err(source) if at == 0 => {
                    return Err(LogError::CorruptSegment {
                        base_offset: region.segment_base_offset,
                        position: region.position,
                        source,
                    })
                }
                Err(_) => break,
            }
        }
        bytes.truncate(at);
        Ok(bytes)
    }
}
