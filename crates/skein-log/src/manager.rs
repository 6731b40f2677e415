//! All partition logs of one data directory, sharing one bound on open files.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::clock::Clock;
use crate::config::LogConfig;
use crate::error::{LogError, Result};
use crate::files::HandleCache;
use crate::log::{Log, RecoveryReport, RetentionReport};
use crate::CompactionReport;

/// A topic name and partition index; its directory is `<topic>-<partition>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }

    fn parse_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty() {
            return None;
        }
        let partition: i32 = partition.parse().ok()?;
        (partition >= 0).then(|| Self::new(topic, partition))
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Settings for a [`LogManager`].
#[derive(Clone, Debug)]
pub struct LogManagerConfig {
    /// Config for partitions that have no override.
    pub default_log: LogConfig,
    /// Upper bound on segments with open files across all partitions.
    pub max_open_segments: usize,
}

impl Default for LogManagerConfig {
    fn default() -> Self {
        Self {
            default_log: LogConfig::default(),
            max_open_segments: 1024,
        }
    }
}

/// Totals of one maintenance pass over every partition, and the partitions whose pass
/// failed (each failure is logged with its reason).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    pub retention: RetentionReport,
    pub compaction: CompactionReport,
    pub failed: Vec<TopicPartition>,
}

/// A shared, lockable partition log.
pub type SharedLog = Arc<RwLock<Log>>;

/// Opens, creates, maintains and closes the partition logs under one directory.
#[derive(Debug)]
pub struct LogManager {
    dir: PathBuf,
    config: LogManagerConfig,
    clock: Arc<dyn Clock>,
    cache: Arc<HandleCache>,
    logs: RwLock<BTreeMap<TopicPartition, SharedLog>>,
}

impl LogManager {
    /// Opens every partition directory found under `dir` (recovering those not closed
    /// cleanly). Directories that are not partitions are left alone.
    pub fn open(
        dir: impl AsRef<Path>,
        config: LogManagerConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(LogError::io(&dir))?;
        let cache = HandleCache::new(config.max_open_segments);
        let mut logs = BTreeMap::new();
        for entry in fs::read_dir(&dir).map_err(LogError::io(&dir))? {
            let entry = entry.map_err(LogError::io(&dir))?;
            if !entry
                .file_type()
                .map_err(LogError::io(entry.path()))?
                .is_dir()
            {
                continue;
            }
            let name = entry.file_name();
            let Some(tp) = name.to_str().and_then(TopicPartition::parse_dir_name) else {
                continue;
            };
            let log = Log::open(
                entry.path(),
                config.default_log.clone(),
                Arc::clone(&clock),
                Arc::clone(&cache),
            )?;
            logs.insert(tp, Arc::new(RwLock::new(log)));
        }
        Ok(Self {
            dir,
            config,
            clock,
            cache,
            logs: RwLock::new(logs),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn handle_cache(&self) -> &Arc<HandleCache> {
        &self.cache
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<SharedLog> {
        self.logs.read().get(tp).cloned()
    }

    /// The log of `tp`, created empty with `config` (or the default) if it does not exist.
    pub fn get_or_create(
        &self,
        tp: &TopicPartition,
        config: Option<LogConfig>,
    ) -> Result<SharedLog> {
        if let Some(log) = self.get(tp) {
            return Ok(log);
        }
        if tp.partition < 0
            || tp.topic.is_empty()
            || tp.topic.contains(['/', '\\', '\0'])
            || tp.topic.starts_with('.')
        {
            return Err(LogError::InvalidPartitionDir {
                path: self.dir.join(tp.to_string()),
            });
        }
        let mut logs = self.logs.write();
        if let Some(log) = logs.get(tp) {
            return Ok(Arc::clone(log));
        }
        let log = Log::open(
            self.dir.join(tp.to_string()),
            config.unwrap_or_else(|| self.config.default_log.clone()),
            Arc::clone(&self.clock),
            Arc::clone(&self.cache),
        )?;
        let log = Arc::new(RwLock::new(log));
        logs.insert(tp.clone(), Arc::clone(&log));
        Ok(log)
    }

    /// Every partition, in name order.
    pub fn partitions(&self) -> Vec<TopicPartition> {
        self.logs.read().keys().cloned().collect()
    }

    /// How each partition was found on open.
    pub fn recovery_reports(&self) -> Vec<(TopicPartition, RecoveryReport)> {
        self.logs
            .read()
            .iter()
            .map(|(tp, log)| (tp.clone(), log.read().recovery_report()))
            .collect()
    }

    /// Removes a partition and its files.
    pub fn delete(&self, tp: &TopicPartition) -> Result<bool> {
        let Some(log) = self.logs.write().remove(tp) else {
            return Ok(false);
        };
        match Arc::try_unwrap(log) {
            Ok(lock) => lock.into_inner().delete()?,
            Err(shared) => {
                // Still in use elsewhere: fence it, then remove the files; readers holding
                // regions finish with the files they have open.
                let mut log = shared.write();
                log.retire();
                let dir = log.dir().to_path_buf();
                fs::remove_dir_all(&dir).map_err(LogError::io(&dir))?;
            }
        }
        Ok(true)
    }

    /// One maintenance pass: retention, compaction and due flushes on every partition.
    pub fn maintain(&self) -> MaintenanceReport {
        let logs: Vec<(TopicPartition, SharedLog)> = self
            .logs
            .read()
            .iter()
            .map(|(tp, log)| (tp.clone(), Arc::clone(log)))
            .collect();
        let mut total = MaintenanceReport::default();
        for (tp, log) in logs {
            // One partition's failure (a fenced log, a full disk) must not stop retention
            // and compaction of every partition after it.
            let result = log.write().maintain();
            let (retention, compaction) = match result {
                Ok(done) => done,
                Err(e) => {
                    tracing::error!(partition = %tp, error = %e, "partition maintenance failed");
                    total.failed.push(tp);
                    continue;
                }
            };
            total.retention.segments_deleted += retention.segments_deleted;
            total.retention.bytes_deleted += retention.bytes_deleted;
            total.compaction.segments_rewritten += compaction.segments_rewritten;
            total.compaction.records_removed += compaction.records_removed;
            total.compaction.bytes_before += compaction.bytes_before;
            total.compaction.bytes_after += compaction.bytes_after;
        }
        total
    }

    /// Closes every log cleanly. Logs still shared elsewhere are flushed but not marked
    /// clean, so they will be checked on the next open.
    pub fn close(self) -> Result<()> {
        let logs = std::mem::take(&mut *self.logs.write());
        let mut first_error = None;
        for (tp, log) in logs {
            let result = match Arc::try_unwrap(log) {
                Ok(lock) => lock.into_inner().close(),
                Err(shared) => shared.write().flush(),
            };
            if let Err(e) = result {
                tracing::error!(partition = %tp, error = %e, "failed to close partition log");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
