//! One `skein dev` per data directory: the first takes an exclusive lock on
//! `<data>/skein.lock` (and writes its pid there) for as long as it runs; a second start on
//! the same directory fails at once, naming the pid that holds it, instead of waiting for
//! the embedded controller's lease. The lock goes with the process, however it ends.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

/// The file the lock is taken on.
const LOCK_FILE: &str = "skein.lock";

/// Held while the process runs.
#[derive(Debug)]
pub(crate) struct DataLock {
    _file: std::fs::File,
}

/// Takes the data directory `dir` for this process, or says who has it.
pub(crate) fn lock(dir: &Path) -> anyhow::Result<DataLock> {
    let path = dir.join(LOCK_FILE);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("failed to open {}", path.display()))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {
            file.set_len(0)?;
            writeln!(file, "{}", std::process::id())?;
            Ok(DataLock { _file: file })
        }
        Err(rustix::io::Errno::WOULDBLOCK) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            let holder: String = holder.trim().chars().take(20).collect();
            anyhow::bail!(
                "the data directory {} is in use by another skein dev (pid {holder}); stop it \
                 or give --data-dir another directory",
                dir.display()
            )
        }
        Err(e) => Err(e).with_context(|| format!("failed to lock {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_second_lock_on_a_directory_is_refused_naming_the_holder_until_the_first_goes() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path()).unwrap();
        let refused = lock(dir.path()).unwrap_err().to_string();
        assert!(
            refused.contains(&format!("pid {}", std::process::id())),
            "{refused}"
        );
        drop(first);
        assert!(lock(dir.path()).is_ok());
    }
}
