//! Small text files that hold one fact each, replaced atomically
//! (write a temporary file, fsync it, rename it over the old one, fsync the directory).

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::error::{LogError, Result};

/// Name of the file that says up to which offset the log was fsynced.
pub(crate) const RECOVERY_POINT: &str = "recovery-point-offset-checkpoint";
/// Name of the file that holds a log start offset advanced past the first segment's base.
pub(crate) const LOG_START: &str = "log-start-offset-checkpoint";
/// Name of the file whose presence says the log was closed cleanly.
pub(crate) const CLEAN_SHUTDOWN: &str = ".clean-shutdown";
/// Version line at the top of every checkpoint file, as in Kafka's.
const VERSION: &str = "0";

/// Writes `lines` after the version line, atomically.
pub(crate) fn write_lines(dir: &Path, name: &str, lines: &[String]) -> Result<()> {
    let mut text = String::with_capacity(32 + lines.len() * 16);
    text.push_str(VERSION);
    text.push('\n');
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    write_atomic(dir, name, &text)
}

/// Replaces `dir/name` with `text`: written to `name.tmp`, fsynced, renamed over `name`,
/// then the directory fsynced. A crash leaves either the old file or the new one (and maybe
/// a `.tmp`, which opening a log deletes).
pub(crate) fn write_atomic(dir: &Path, name: &str, text: &str) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = File::create(&tmp).map_err(LogError::io(&tmp))?;
    file.write_all(text.as_bytes())
        .map_err(LogError::io(&tmp))?;
    file.sync_all().map_err(LogError::io(&tmp))?;
    fs::rename(&tmp, &path).map_err(LogError::io(&path))?;
    sync_dir(dir)
}

/// Reads the lines after the version line; `None` when the file is missing or unreadable
/// (a checkpoint is an optimisation or a floor, never the only copy of data).
pub(crate) fn read_lines(dir: &Path, name: &str) -> Option<Vec<String>> {
    let text = fs::read_to_string(dir.join(name)).ok()?;
    let mut lines = text.lines();
    if lines.next()? != VERSION {
        return None;
    }
    Some(lines.map(str::to_owned).collect())
}

pub(crate) fn write_offset(dir: &Path, name: &str, offset: u64) -> Result<()> {
    write_lines(dir, name, &[offset.to_string()])
}

pub(crate) fn read_offset(dir: &Path, name: &str) -> Option<u64> {
    read_lines(dir, name)?.first()?.trim().parse().ok()
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(LogError::io(dir))
}
