//! Dropping a file's pages from the page cache, so a read measures the disk.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Asks the kernel to drop the cached pages of `path` (they must be clean: fsync first).
#[allow(unsafe_code)]
pub(crate) fn drop_file(path: &Path) -> std::io::Result<()> {
    let file = File::open(path)?;
    file.sync_all()?;
    // SAFETY: posix_fadvise only reads its integer arguments; the descriptor is valid for the
    // duration of the call because `file` is alive.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Drops every file under `dir`.
pub(crate) fn drop_dir(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            drop_dir(&path)?;
        } else {
            drop_file(&path)?;
        }
    }
    Ok(())
}
