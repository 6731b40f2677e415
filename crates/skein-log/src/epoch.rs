//! The leader-epoch checkpoint: for each leader epoch, the first offset written in it.
//! Replication uses it to answer OffsetForLeaderEpoch and to find where a returning replica
//! must truncate.
//!
//! File `leader-epoch-checkpoint`, Kafka's format:
//! ```text
//! 0              version
//! 2              number of entries
//! 0 0            epoch start_offset
//! 3 1200
//! ```

use std::path::{Path, PathBuf};

use crate::checkpoint;
use crate::error::Result;

pub(crate) const FILE: &str = "leader-epoch-checkpoint";

/// An epoch and the first offset written in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: u64,
}

#[derive(Debug)]
pub(crate) struct LeaderEpochCache {
    dir: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub(crate) fn load(dir: &Path) -> Self {
        let mut entries = Vec::new();
        if let Some(lines) = checkpoint::read_lines(dir, FILE) {
            let count: usize = lines
                .first()
                .and_then(|l| l.trim().parse().ok())
                .unwrap_or(0);
            for line in lines.iter().skip(1).take(count) {
                let mut parts = line.split_whitespace();
                let epoch = parts.next().and_then(|p| p.parse().ok());
                let start = parts.next().and_then(|p| p.parse().ok());
                match (epoch, start) {
                    (Some(epoch), Some(start_offset)) => entries.push(EpochEntry {
                        epoch,
                        start_offset,
                    }),
                    _ => break,
                }
            }
        }
        // A damaged file must not yield entries that go backwards.
        let mut clean: Vec<EpochEntry> = Vec::with_capacity(entries.len());
        for e in entries {
            if clean
                .last()
                .is_none_or(|l| e.epoch > l.epoch && e.start_offset >= l.start_offset)
            {
                clean.push(e);
            }
        }
        Self {
            dir: dir.to_path_buf(),
            entries: clean,
        }
    }

    pub(crate) fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub(crate) fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`, if it is newer than the latest epoch.
    pub(crate) fn assign(&mut self, epoch: i32, start_offset: u64) -> Result<()> {
        if epoch < 0 || self.latest_epoch().is_some_and(|l| epoch <= l) {
            return Ok(());
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.persist()
    }

    /// Forgets epochs that start at or after `end_offset` (after a truncation).
    pub(crate) fn truncate_from_end(&mut self, end_offset: u64) -> Result<()> {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        if self.entries.len() != before {
            self.persist()?;
        }
        Ok(())
    }

    /// Drops epochs wholly below `log_start`, moving the start of the one that spans it.
    pub(crate) fn truncate_from_start(&mut self, log_start: u64) -> Result<()> {
        let keep_from = self
            .entries
            .iter()
            .rposition(|e| e.start_offset <= log_start)
            .unwrap_or(0);
        let mut changed = keep_from > 0;
        self.entries.drain(..keep_from);
        if let Some(first) = self.entries.first_mut() {
            if first.start_offset < log_start {
                first.start_offset = log_start;
                changed = true;
            }
        }
        if changed {
            self.persist()?;
        }
        Ok(())
    }

    pub(crate) fn clear(&mut self) -> Result<()> {
        self.entries.clear();
        self.persist()
    }

    /// Kafka's OffsetForLeaderEpoch answer: the largest epoch at or below `epoch` and the
    /// offset where the next epoch starts (the log end offset for the latest epoch).
    pub(crate) fn end_offset_for(&self, epoch: i32, log_end: u64) -> Option<EpochEntry> {
        let idx = self.entries.iter().rposition(|e| e.epoch <= epoch)?;
        let end = self
            .entries
            .get(idx + 1)
            .map_or(log_end, |next| next.start_offset);
        Some(EpochEntry {
            epoch: self.entries[idx].epoch,
            start_offset: end,
        })
    }

    fn persist(&self) -> Result<()> {
        let mut lines = Vec::with_capacity(self.entries.len() + 1);
        lines.push(self.entries.len().to_string());
        lines.extend(
            self.entries
                .iter()
                .map(|e| format!("{} {}", e.epoch, e.start_offset)),
        );
        checkpoint::write_lines(&self.dir, FILE, &lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_persist_and_answer_end_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path());
        cache.assign(0, 0).unwrap();
        cache.assign(2, 100).unwrap();
        cache.assign(1, 150).unwrap(); // older than the latest: ignored
        cache.assign(5, 300).unwrap();
        let cache = LeaderEpochCache::load(dir.path());
        assert_eq!(cache.entries().len(), 3);
        assert_eq!(
            cache.end_offset_for(0, 400),
            Some(EpochEntry {
                epoch: 0,
                start_offset: 100
            })
        );
        assert_eq!(
            cache.end_offset_for(3, 400),
            Some(EpochEntry {
                epoch: 2,
                start_offset: 300
            })
        );
        assert_eq!(
            cache.end_offset_for(5, 400),
            Some(EpochEntry {
                epoch: 5,
                start_offset: 400
            })
        );
        assert_eq!(cache.end_offset_for(-1, 400), None);
    }

    #[test]
    fn truncation_from_both_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path());
        cache.assign(0, 0).unwrap();
        cache.assign(1, 10).unwrap();
        cache.assign(2, 20).unwrap();
        cache.truncate_from_end(20).unwrap();
        assert_eq!(cache.latest_epoch(), Some(1));
        cache.truncate_from_start(15).unwrap();
        assert_eq!(
            cache.entries(),
            &[EpochEntry {
                epoch: 1,
                start_offset: 15
            }]
        );
        assert_eq!(
            LeaderEpochCache::load(dir.path()).entries(),
            cache.entries()
        );
    }
}
