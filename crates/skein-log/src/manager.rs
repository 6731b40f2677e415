//! All partition logs of one data directory, sharing one bound on open files.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use uuid::Uuid;

use crate::checkpoint;
use crate::clock::Clock;
use crate::config::LogConfig;
use crate::error::{LogError, Result};
use crate::files::HandleCache;
use crate::log::{Log, RecoveryReport, RetentionReport};
use crate::partition_dir::{self, DELETE_SUFFIX};
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

    /// The partition a directory name stands for. A directory being deleted
    /// (`<topic>-<partition>.<id>-delete`) is none, nor is any name not ending in
    /// `-<partition number>`.
    fn parse_dir_name(name: &str) -> Option<Self> {
        if name.ends_with(DELETE_SUFFIX) {
            return None;
        }
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
    /// Threads that open (and recover) partitions at start, as Kafka's
    /// `num.recovery.threads.per.data.dir`: a partition's open waits mostly on fsyncs, so
    /// several run at once even on few cores.
    pub recovery_threads: usize,
}

impl Default for LogManagerConfig {
    fn default() -> Self {
        Self {
            default_log: LogConfig::default(),
            max_open_segments: 1024,
            recovery_threads: 8,
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

/// Runs `open` over every item of `found` on up to `threads` threads; answers the results
/// in the order of `found`.
fn open_all<T: Sync, R: Send>(
    found: &[(TopicPartition, T)],
    threads: usize,
    open: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, found.len().max(1));
    if threads == 1 {
        return found.iter().map(|(_, item)| open(item)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((_, item)) = found.get(i) else {
                            return done;
                        };
                        done.push((i, open(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| match worker.join() {
                Ok(done) => done,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// A shared, lockable partition log.
pub type SharedLog = Arc<RwLock<Log>>;

/// An open partition and the topic its directory belongs to.
#[derive(Debug)]
struct Partition {
    log: SharedLog,
    /// From `partition.metadata`; `None` for a directory written before topic ids (until a
    /// topic adopts it) and for the broker's own logs, which belong to no topic id.
    topic_id: Option<Uuid>,
}

/// Opens, creates, maintains and closes the partition logs under one directory.
///
/// A partition of a topic is reached by the topic's id ([`LogManager::get_for`],
/// [`LogManager::get_or_create_for`]): a directory that belongs to another id (a topic of
/// the same name, deleted) is deleted instead of served, so records never outlive their
/// topic, whatever was missed while the process was down.
#[derive(Debug)]
pub struct LogManager {
    dir: PathBuf,
    config: LogManagerConfig,
    clock: Arc<dyn Clock>,
    cache: Arc<HandleCache>,
    logs: RwLock<BTreeMap<TopicPartition, Partition>>,
}

impl LogManager {
    /// Opens every partition directory found under `dir` (recovering those not closed
    /// cleanly) and removes the `*-delete` directories that deletions cut short by a crash
    /// left behind. Other directories that are not partitions are left alone.
    pub fn open(
        dir: impl AsRef<Path>,
        config: LogManagerConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(LogError::io(&dir))?;
        let cache = HandleCache::new(config.max_open_segments);
        let mut found = Vec::new();
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
            let Some(name) = name.to_str() else {
                continue;
            };
            if partition_dir::is_delete_dir_name(name) {
                remove_leftover(&entry.path());
                continue;
            }
            let Some(tp) = TopicPartition::parse_dir_name(name) else {
                continue;
            };
            found.push((tp, entry.path()));
        }
        let open_one = |path: &PathBuf| -> Result<Partition> {
            let topic_id = partition_dir::read_topic_id(path)?;
            let log = Log::open(
                path,
                config.default_log.clone(),
                Arc::clone(&clock),
                Arc::clone(&cache),
            )?;
            Ok(Partition {
                log: Arc::new(RwLock::new(log)),
                topic_id,
            })
        };
        let opened = open_all(&found, config.recovery_threads, open_one);
        let mut logs = BTreeMap::new();
        for ((tp, _), partition) in found.into_iter().zip(opened) {
            logs.insert(tp, partition?);
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

    /// The log of `tp`, whichever topic its directory belongs to.
    pub fn get(&self, tp: &TopicPartition) -> Option<SharedLog> {
        self.logs.read().get(tp).map(|p| Arc::clone(&p.log))
    }

    /// The topic id the directory of `tp` belongs to; `None` when it names none or `tp` is
    /// not open.
    pub fn topic_id(&self, tp: &TopicPartition) -> Option<Uuid> {
        self.logs.read().get(tp).and_then(|p| p.topic_id)
    }

    /// The log of `tp` if its directory belongs to topic `topic_id`.
    pub fn get_for(&self, tp: &TopicPartition, topic_id: Uuid) -> Option<SharedLog> {
        self.logs
            .read()
            .get(tp)
            .filter(|p| p.topic_id == Some(topic_id))
            .map(|p| Arc::clone(&p.log))
    }

    /// The log of `tp`, created empty with `config` (or the default) if it does not exist,
    /// with no topic id: for the broker's own logs (`__consumer_offsets`). A topic's
    /// partition goes through [`LogManager::get_or_create_for`].
    pub fn get_or_create(
        &self,
        tp: &TopicPartition,
        config: Option<LogConfig>,
    ) -> Result<SharedLog> {
        if let Some(log) = self.get(tp) {
            return Ok(log);
        }
        self.check_name(tp)?;
        let mut logs = self.logs.write();
        if let Some(p) = logs.get(tp) {
            return Ok(Arc::clone(&p.log));
        }
        let log = self.open_log(&self.dir.join(tp.to_string()), config)?;
        logs.insert(
            tp.clone(),
            Partition {
                log: Arc::clone(&log),
                topic_id: None,
            },
        );
        Ok(log)
    }

    /// The log of partition `tp` of topic `topic_id`, created empty with `config` (or the
    /// default) if there is none. Its directory is identified by its `partition.metadata`:
    /// - written with `topic_id` (fsynced) before a new log takes any append;
    /// - a directory written before topic ids (no such file) is adopted by `topic_id` once,
    ///   and takes `config` if it is open already;
    /// - a directory of another topic id (a topic of this name, deleted) is deleted
    ///   ([`LogManager::delete`]) and a new empty log takes its place: it is never served.
    pub fn get_or_create_for(
        &self,
        tp: &TopicPartition,
        topic_id: Uuid,
        config: Option<LogConfig>,
    ) -> Result<SharedLog> {
        if let Some(log) = self.get_for(tp, topic_id) {
            return Ok(log);
        }
        self.check_name(tp)?;
        let mut logs = self.logs.write();
        let dir = self.dir.join(tp.to_string());
        match logs.get_mut(tp) {
            Some(p) if p.topic_id == Some(topic_id) => return Ok(Arc::clone(&p.log)),
            Some(p) if p.topic_id.is_none() => {
                partition_dir::write_topic_id(&dir, topic_id)?;
                tracing::info!(partition = %tp, %topic_id, "partition adopted by its topic");
                p.topic_id = Some(topic_id);
                if let Some(config) = config {
                    p.log.write().set_config(config)?;
                }
                return Ok(Arc::clone(&p.log));
            }
            Some(p) => {
                tracing::info!(partition = %tp, stale = ?p.topic_id, %topic_id,
                    "deleting the partition of a deleted topic of the same name");
                self.remove(&mut logs, tp)?;
            }
            None => {}
        }
        // Not open: a directory a failed deletion left in place is checked all the same.
        let found = partition_dir::read_topic_id(&dir)?;
        if found.is_some_and(|id| id != topic_id) {
            partition_dir::delete_dir(&dir, found)?;
        }
        self.create_dir(&dir)?;
        if found != Some(topic_id) {
            partition_dir::write_topic_id(&dir, topic_id)?;
        }
        let log = self.open_log(&dir, config)?;
        logs.insert(
            tp.clone(),
            Partition {
                log: Arc::clone(&log),
                topic_id: Some(topic_id),
            },
        );
        Ok(log)
    }

    /// Refuses a partition whose directory name would be unsafe or not parse back.
    fn check_name(&self, tp: &TopicPartition) -> Result<()> {
        if tp.partition < 0
            || tp.topic.is_empty()
            || tp.topic.contains(['/', '\\', '\0'])
            || tp.topic.starts_with('.')
        {
            return Err(LogError::InvalidPartitionDir {
                path: self.dir.join(tp.to_string()),
            });
        }
        Ok(())
    }

    /// Creates a partition directory, durably (the data directory is fsynced), unless it
    /// exists.
    fn create_dir(&self, dir: &Path) -> Result<()> {
        match fs::create_dir(dir) {
            Ok(()) => checkpoint::sync_dir(&self.dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(LogError::io(dir)(e)),
        }
    }

    fn open_log(&self, dir: &Path, config: Option<LogConfig>) -> Result<SharedLog> {
        let log = Log::open(
            dir,
            config.unwrap_or_else(|| self.config.default_log.clone()),
            Arc::clone(&self.clock),
            Arc::clone(&self.cache),
        )?;
        Ok(Arc::new(RwLock::new(log)))
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
            .map(|(tp, p)| (tp.clone(), p.log.read().recovery_report()))
            .collect()
    }

    /// Removes a partition and its files, whichever topic it belongs to.
    pub fn delete(&self, tp: &TopicPartition) -> Result<bool> {
        let mut logs = self.logs.write();
        self.remove(&mut logs, tp)
    }

    /// Removes partition `tp` of topic `topic_id` and its files, unless its directory
    /// belongs to another topic (a newer one of the same name, which keeps its records).
    /// A directory that names no topic is removed. Answers whether anything was removed.
    pub fn delete_for(&self, tp: &TopicPartition, topic_id: Uuid) -> Result<bool> {
        let mut logs = self.logs.write();
        if let Some(p) = logs.get(tp) {
            if p.topic_id.is_some_and(|id| id != topic_id) {
                return Ok(false);
            }
            return self.remove(&mut logs, tp);
        }
        // Not open: a directory left by a deletion that failed midway.
        let dir = self.dir.join(tp.to_string());
        let found = partition_dir::read_topic_id(&dir)?;
        if found.is_some_and(|id| id != topic_id) {
            return Ok(false);
        }
        match partition_dir::rename_for_deletion(&dir, found)? {
            Some(doomed) => partition_dir::remove_dir(&doomed).map(|()| true),
            None => Ok(false),
        }
    }

    /// Takes `tp` out of `logs` and deletes its directory: the log is fenced (others may
    /// still hold it), the directory renamed to `<topic>-<partition>.<topic id>-delete` and
    /// its parent fsynced, so from then on neither a lookup nor an open after a crash finds
    /// it; then its files are removed. Reads in flight keep the descriptors they hold, and
    /// the log, pointed at the renamed directory, never touches one a new log of the same
    /// name opens.
    fn remove(
        &self,
        logs: &mut BTreeMap<TopicPartition, Partition>,
        tp: &TopicPartition,
    ) -> Result<bool> {
        let Some(partition) = logs.remove(tp) else {
            return Ok(false);
        };
        let doomed = {
            let mut log = partition.log.write();
            log.retire();
            let doomed = partition_dir::rename_for_deletion(log.dir(), partition.topic_id)?;
            if let Some(doomed) = &doomed {
                log.relocate(doomed);
            }
            doomed
        };
        drop(partition);
        if let Some(doomed) = doomed {
            partition_dir::remove_dir(&doomed)?;
        }
        Ok(true)
    }

    /// One maintenance pass: retention, compaction and due flushes on every partition.
    pub fn maintain(&self) -> MaintenanceReport {
        let logs: Vec<(TopicPartition, SharedLog)> = self
            .logs
            .read()
            .iter()
            .map(|(tp, p)| (tp.clone(), Arc::clone(&p.log)))
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
        for (tp, Partition { log, .. }) in logs {
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

/// Removes a directory a deletion left behind; a failure is only logged, since the
/// directory is never opened as a partition and costs nothing but space.
fn remove_leftover(dir: &Path) {
    match partition_dir::remove_dir(dir) {
        Ok(()) => tracing::info!(dir = %dir.display(), "removed a partition left being deleted"),
        Err(e) => tracing::warn!(dir = %dir.display(), error = %e,
            "failed to remove a partition left being deleted"),
    }
}
