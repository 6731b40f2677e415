//! What a partition directory holds beyond its log: the id of the topic it belongs to
//! (`partition.metadata`, as Kafka writes it), and how it goes away (renamed to
//! `<topic>-<partition>.<topic id in hex>-delete`, then removed), so that a topic created
//! again under the same name never finds the old topic's records.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use uuid::Uuid;

use crate::checkpoint;
use crate::error::{LogError, Result};

/// The file that names the topic a partition directory belongs to.
pub const PARTITION_METADATA: &str = "partition.metadata";
/// The end of the name of a partition directory being deleted.
pub(crate) const DELETE_SUFFIX: &str = "-delete";
/// The only version of `partition.metadata` there is, as in Kafka.
const METADATA_VERSION: &str = "0";
/// The longest file name Linux file systems take.
const MAX_NAME_BYTES: usize = 255;

/// Writes `partition.metadata` saying that `dir` belongs to topic `topic_id`, atomically: a
/// temporary file, fsynced, renamed over the old one, then the directory fsynced.
pub fn write_topic_id(dir: &Path, topic_id: Uuid) -> Result<()> {
    let text = format!(
        "version: {METADATA_VERSION}\ntopic_id: {}\n",
        URL_SAFE_NO_PAD.encode(topic_id.as_bytes())
    );
    checkpoint::write_atomic(dir, PARTITION_METADATA, &text)
}

/// The topic `dir` belongs to, from its `partition.metadata`; `None` when there is no such
/// file (a directory written before topic ids, or no directory at all). A file that does not
/// parse is an error, never taken as absent: which topic owns the records is not known.
pub fn read_topic_id(dir: &Path) -> Result<Option<Uuid>> {
    let path = dir.join(PARTITION_METADATA);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(&path)(e)),
    };
    parse_metadata(&text)
        .map(Some)
        .map_err(|(line, reason)| LogError::InvalidPartitionMetadata { path, line, reason })
}

/// The topic id in the text of a `partition.metadata`, or the line (from 1) that is wrong
/// and why.
fn parse_metadata(text: &str) -> std::result::Result<Uuid, (usize, &'static str)> {
    let mut lines = text.lines();
    let version = field(lines.next(), 1, "version")?;
    if version != METADATA_VERSION {
        return Err((1, "unknown version (only 0 is known)"));
    }
    let id = field(lines.next(), 2, "topic_id")?;
    let bytes = URL_SAFE_NO_PAD
        .decode(id)
        .map_err(|_| (2, "topic_id is not URL-safe base64 without padding"))?;
    Uuid::from_slice(&bytes).map_err(|_| (2, "topic_id does not hold 16 bytes"))
}

/// The value of a `key: value` line that must name `key`.
fn field<'a>(
    line: Option<&'a str>,
    number: usize,
    key: &str,
) -> std::result::Result<&'a str, (usize, &'static str)> {
    let line = line.ok_or((number, "the file ends before this line"))?;
    let (name, value) = line
        .split_once(':')
        .ok_or((number, "expected `key: value`"))?;
    if name.trim() != key {
        return Err((
            number,
            if number == 1 {
                "expected `version: 0`"
            } else {
                "expected `topic_id: <id>`"
            },
        ));
    }
    Ok(value.trim())
}

/// The name a partition directory called `dir_name` takes while it is deleted: Kafka's
/// `<topic>-<partition>.<topic id as 32 hex digits>-delete`, the front cut short when the
/// whole would not fit in a file name.
pub(crate) fn delete_dir_name(dir_name: &str, topic_id: Uuid) -> String {
    let suffix = format!(".{}{DELETE_SUFFIX}", topic_id.simple());
    let mut keep = dir_name.len().min(MAX_NAME_BYTES - suffix.len());
    while !dir_name.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{suffix}", &dir_name[..keep])
}

/// Whether `name` is that of a partition directory being deleted (`<...>.<32 hex>-delete`).
/// No partition directory is named so: its name ends in `-<partition number>`.
pub(crate) fn is_delete_dir_name(name: &str) -> bool {
    let Some((_, hex)) = name
        .strip_suffix(DELETE_SUFFIX)
        .and_then(|rest| rest.rsplit_once('.'))
    else {
        return false;
    };
    hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Renames `dir` to its deletion name (for `topic_id`, or a random id when the directory
/// names no topic) and fsyncs its parent: from then on no open takes it for a partition,
/// whatever happens next. Answers the new path; `None` when `dir` does not exist.
pub(crate) fn rename_for_deletion(dir: &Path, topic_id: Option<Uuid>) -> Result<Option<PathBuf>> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name().and_then(|n| n.to_str()))
    else {
        return Err(LogError::InvalidPartitionDir {
            path: dir.to_path_buf(),
        });
    };
    let target = parent.join(delete_dir_name(name, topic_id.unwrap_or_else(Uuid::new_v4)));
    // Only an earlier deletion of this same partition and topic, cut short, leaves this name.
    remove_dir(&target)?;
    match fs::rename(dir, &target) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(dir)(e)),
    }
    checkpoint::sync_dir(parent)?;
    Ok(Some(target))
}

/// Deletes a partition directory no log has open: renamed first
/// ([`rename_for_deletion`]), then removed.
pub(crate) fn delete_dir(dir: &Path, topic_id: Option<Uuid>) -> Result<()> {
    match rename_for_deletion(dir, topic_id)? {
        Some(doomed) => remove_dir(&doomed),
        None => Ok(()),
    }
}

/// Removes a directory and everything under it; one that is not there is no error.
pub(crate) fn remove_dir(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io(dir)(e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn topic_id_round_trips_in_kafkas_format() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_topic_id(dir.path()).unwrap(), None);
        let id = Uuid::new_v4();
        write_topic_id(dir.path(), id).unwrap();
        assert_eq!(read_topic_id(dir.path()).unwrap(), Some(id));
        let text = fs::read_to_string(dir.path().join(PARTITION_METADATA)).unwrap();
        let encoded = URL_SAFE_NO_PAD.encode(id.as_bytes());
        assert_eq!(text, format!("version: 0\ntopic_id: {encoded}\n"));
        assert_eq!(encoded.len(), 22);
        // Replaced atomically: no temporary file is left.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_file_written_by_kafka_is_read() {
        // Kafka's Uuid.toString of 00000000-0000-0001-0000-000000000002.
        let id = parse_metadata("version: 0\ntopic_id: AAAAAAAAAAEAAAAAAAAAAg\n").unwrap();
        assert_eq!(
            id,
            Uuid::parse_str("00000000-0000-0001-0000-000000000002").unwrap()
        );
    }

    #[test]
    fn a_malformed_file_is_an_error_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        for (text, line) in [
            ("", 1),
            ("version: 1\ntopic_id: AAAAAAAAAAEAAAAAAAAAAg\n", 1),
            ("topic_id: AAAAAAAAAAEAAAAAAAAAAg\n", 1),
            ("version: 0\n", 2),
            ("version: 0\ntopic_id: not base64!\n", 2),
            ("version: 0\ntopic_id: AAAA\n", 2),
            ("version: 0\nversion: 0\n", 2),
        ] {
            fs::write(dir.path().join(PARTITION_METADATA), text).unwrap();
            match read_topic_id(dir.path()) {
                Err(LogError::InvalidPartitionMetadata { line: l, path, .. }) => {
                    assert_eq!(l, line, "{text:?}");
                    assert_eq!(path, dir.path().join(PARTITION_METADATA));
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn deletion_names_carry_the_topic_id_and_fit_in_a_file_name() {
        let id = Uuid::parse_str("7f3c1f3e-2d4b-4a63-9a51-0c9a3f1d2e11").unwrap();
        let name = delete_dir_name("orders-3", id);
        assert_eq!(name, "orders-3.7f3c1f3e2d4b4a639a510c9a3f1d2e11-delete");
        assert!(is_delete_dir_name(&name));
        let long = format!("{}-0", "t".repeat(249));
        let cut = delete_dir_name(&long, id);
        assert_eq!(cut.len(), MAX_NAME_BYTES);
        assert!(is_delete_dir_name(&cut));
        for partition_like in ["orders-3", "orders-delete-0", "x.abc-delete", "-delete"] {
            assert!(!is_delete_dir_name(partition_like), "{partition_like}");
        }
    }

    #[test]
    fn a_directory_is_renamed_before_it_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("t-0");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("00000000000000000000.log"), b"records").unwrap();
        let id = Uuid::new_v4();
        let doomed = rename_for_deletion(&dir, Some(id)).unwrap().unwrap();
        assert!(!dir.try_exists().unwrap());
        assert_eq!(
            doomed.file_name().unwrap().to_str().unwrap(),
            delete_dir_name("t-0", id)
        );
        assert!(doomed.join("00000000000000000000.log").is_file());
        // A leftover under the same name does not stop the next deletion.
        fs::create_dir(&dir).unwrap();
        let again = rename_for_deletion(&dir, Some(id)).unwrap().unwrap();
        assert_eq!(again, doomed);
        assert!(!again.join("00000000000000000000.log").try_exists().unwrap());
        remove_dir(&again).unwrap();
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 0);
        // Nothing to delete is no error.
        assert_eq!(rename_for_deletion(&dir, Some(id)).unwrap(), None);
        delete_dir(&dir, None).unwrap();
    }
}
