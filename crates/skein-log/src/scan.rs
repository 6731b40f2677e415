//! Sequential reading of whole batches from a `.log` file, with CRC checks: what recovery,
//! index rebuilding and compaction use. Reads go through one reusable buffer.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::batch::{validate_batch, BatchError, BatchHeader, HEADER_LEN};
use crate::error::{LogError, Result};

const READ_CHUNK: usize = 1024 * 1024;

/// Where a scan stopped early: the byte position of the first batch that is torn or corrupt.
#[derive(Debug)]
pub(crate) struct ScanStop {
    pub(crate) position: u64,
    pub(crate) error: BatchError,
}

/// Calls `visit(position, header, batch_bytes)` for every valid batch in `[start, end)` of
/// `file`, in order, until `visit` returns `false`. Returns where and why the scan stopped if
/// it met a batch that is cut short or fails validation; I/O errors are returned as `Err`.
pub(crate) fn scan_batches(
    file: &File,
    path: &Path,
    start: u64,
    end: u64,
    mut visit: impl FnMut(u64, &BatchHeader, &[u8]) -> Result<bool>,
) -> Result<Option<ScanStop>> {
    let mut buf: Vec<u8> = vec![
        0;
        READ_CHUNK
            .min((end.saturating_sub(start)) as usize)
            .max(HEADER_LEN)
    ];
    // `buf[consumed..filled]` holds file bytes starting at file position `pos`.
    let mut filled = 0usize;
    let mut consumed = 0usize;
    let mut pos = start;
    loop {
        if pos >= end {
            return Ok(None);
        }
        let remaining = end - pos;
        if remaining < HEADER_LEN as u64 {
            return Ok(Some(ScanStop {
                position: pos,
                error: BatchError::Truncated {
                    need: HEADER_LEN,
                    have: remaining as usize,
                },
            }));
        }
        fill(
            file,
            path,
            &mut buf,
            &mut filled,
            &mut consumed,
            pos,
            end,
            HEADER_LEN,
        )?;
        let header = match BatchHeader::parse(&buf[consumed..filled]) {
            Ok(h) => h,
            Err(error) => {
                return Ok(Some(ScanStop {
                    position: pos,
                    error,
                }))
            }
        };
        let size = header.size();
        if size as u64 > remaining {
            return Ok(Some(ScanStop {
                position: pos,
                error: BatchError::Truncated {
                    need: size,
                    have: remaining as usize,
                },
            }));
        }
        fill(
            file,
            path,
            &mut buf,
            &mut filled,
            &mut consumed,
            pos,
            end,
            size,
        )?;
        let batch = &buf[consumed..consumed + size];
        if let Err(error) = validate_batch(batch) {
            return Ok(Some(ScanStop {
                position: pos,
                error,
            }));
        }
        if !visit(pos, &header, batch)? {
            return Ok(None);
        }
        consumed += size;
        pos += size as u64;
    }
}

/// Makes sure `buf[consumed..]` holds at least `need` bytes from file position `pos`.
#[allow(clippy::too_many_arguments)]
fn fill(
    file: &File,
    path: &Path,
    buf: &mut Vec<u8>,
    filled: &mut usize,
    consumed: &mut usize,
    pos: u64,
    end: u64,
    need: usize,
) -> Result<()> {
    if *filled - *consumed >= need {
        return Ok(());
    }
    buf.copy_within(*consumed..*filled, 0);
    *filled -= *consumed;
    *consumed = 0;
    if buf.len() < need {
        buf.resize(need, 0);
    }
    while *filled < need {
        let file_pos = pos + *filled as u64;
        let want = (buf.len() - *filled).min((end - file_pos) as usize);
        let n = file
            .read_at(&mut buf[*filled..*filled + want], file_pos)
            .map_err(LogError::io(path))?;
        if n == 0 {
            return Err(LogError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "segment file is shorter than expected",
                ),
            });
        }
        *filled += n;
    }
    Ok(())
}
