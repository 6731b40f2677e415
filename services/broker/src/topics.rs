//! The topics this broker serves: the one interface handlers read metadata through. Here it
//! is kept in a file under the data directory; the control plane will serve the same
//! interface later.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::RwLock;
use uuid::Uuid;

/// What is known of one topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    /// Topic config overrides by Kafka name (checked before they are stored).
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("topic name {name:?} is invalid: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("{partitions} is not a valid partition count")]
    InvalidPartitions { partitions: i32 },
    #[error("topic {name} already exists")]
    AlreadyExists { name: String },
    #[error("topic {name} does not exist")]
    NotFound { name: String },
    #[error("topic {name} has {current} partitions; a new count must be larger")]
    PartitionsNotIncreased { name: String, current: i32 },
    #[error("failed to persist topics in {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Topics persisted as lines `name partitions uuid [config=value ...]` in `<data>/topics`,
/// replaced atomically.
#[derive(Debug)]
pub struct TopicRegistry {
    path: PathBuf,
    topics: RwLock<BTreeMap<String, TopicInfo>>,
}

/// Kafka's rule for topic names: 1-249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_name(name: &str) -> Result<(), TopicError> {
    let invalid = |reason| TopicError::InvalidName {
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() || name.len() > 249 {
        return Err(invalid("must be 1 to 249 characters"));
    }
    if name == "." || name == ".." {
        return Err(invalid("cannot be '.' or '..'"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(invalid(
            "may contain only ASCII letters, digits, '.', '_' and '-'",
        ));
    }
    Ok(())
}

impl TopicRegistry {
    pub fn open(data_dir: &Path) -> Result<Self, TopicError> {
        let path = data_dir.join("topics");
        let mut topics = BTreeMap::new();
        if let Ok(text) = fs::read_to_string(&path) {
            for line in text.lines() {
                let mut parts = line.split_whitespace();
                let (Some(name), Some(partitions), Some(id)) =
                    (parts.next(), parts.next(), parts.next())
                else {
                    continue;
                };
                let (Ok(partitions), Ok(id)) = (partitions.parse(), Uuid::parse_str(id)) else {
                    continue;
                };
                let configs = parts
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                topics.insert(
                    name.to_owned(),
                    TopicInfo {
                        name: name.to_owned(),
                        id,
                        partitions,
                        configs,
                    },
                );
            }
        }
        Ok(Self {
            path,
            topics: RwLock::new(topics),
        })
    }

    pub fn get(&self, name: &str) -> Option<TopicInfo> {
        self.topics.read().get(name).cloned()
    }

    pub fn list(&self) -> Vec<TopicInfo> {
        self.topics.read().values().cloned().collect()
    }

    pub fn create(&self, name: &str, partitions: i32) -> Result<TopicInfo, TopicError> {
        self.create_checked(name, partitions, BTreeMap::new(), false)
    }

    /// Creates a topic, or with `validate_only` only checks that it could be created.
    pub fn create_checked(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicInfo, TopicError> {
        validate_name(name)?;
        if !(1..=100_000).contains(&partitions) {
            return Err(TopicError::InvalidPartitions { partitions });
        }
        let mut topics = self.topics.write();
        if topics.contains_key(name) {
            return Err(TopicError::AlreadyExists {
                name: name.to_owned(),
            });
        }
        let info = TopicInfo {
            name: name.to_owned(),
            id: Uuid::new_v4(),
            partitions,
            configs,
        };
        if validate_only {
            return Ok(info);
        }
        topics.insert(name.to_owned(), info.clone());
        if let Err(e) = self.persist(&topics) {
            topics.remove(name);
            return Err(e);
        }
        Ok(info)
    }

    /// Replaces a topic's config overrides (already checked by the caller).
    pub fn set_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicInfo, TopicError> {
        let mut topics = self.topics.write();
        let Some(info) = topics.get(name).cloned() else {
            return Err(TopicError::NotFound {
                name: name.to_owned(),
            });
        };
        let updated = TopicInfo {
            configs,
            ..info.clone()
        };
        topics.insert(name.to_owned(), updated.clone());
        if let Err(e) = self.persist(&topics) {
            topics.insert(name.to_owned(), info);
            return Err(e);
        }
        Ok(updated)
    }

    /// Removes a topic; its logs are the caller's to delete.
    pub fn delete(&self, name: &str) -> Result<TopicInfo, TopicError> {
        let mut topics = self.topics.write();
        let Some(info) = topics.remove(name) else {
            return Err(TopicError::NotFound {
                name: name.to_owned(),
            });
        };
        if let Err(e) = self.persist(&topics) {
            topics.insert(name.to_owned(), info);
            return Err(e);
        }
        Ok(info)
    }

    /// Raises a topic's partition count (partitions are never removed).
    pub fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<TopicInfo, TopicError> {
        let mut topics = self.topics.write();
        let Some(info) = topics.get(name).cloned() else {
            return Err(TopicError::NotFound {
                name: name.to_owned(),
            });
        };
        if count <= info.partitions {
            return Err(TopicError::PartitionsNotIncreased {
                name: name.to_owned(),
                current: info.partitions,
            });
        }
        if count > 100_000 {
            return Err(TopicError::InvalidPartitions { partitions: count });
        }
        let updated = TopicInfo {
            partitions: count,
            ..info.clone()
        };
        if validate_only {
            return Ok(updated);
        }
        topics.insert(name.to_owned(), updated.clone());
        if let Err(e) = self.persist(&topics) {
            topics.insert(name.to_owned(), info);
            return Err(e);
        }
        Ok(updated)
    }

    fn persist(&self, topics: &BTreeMap<String, TopicInfo>) -> Result<(), TopicError> {
        let io = |source| TopicError::Io {
            path: self.path.clone(),
            source,
        };
        let tmp = self.path.with_extension("tmp");
        let mut file = fs::File::create(&tmp).map_err(io)?;
        for t in topics.values() {
            write!(file, "{} {} {}", t.name, t.partitions, t.id).map_err(io)?;
            for (k, v) in &t.configs {
                write!(file, " {k}={v}").map_err(io)?;
            }
            writeln!(file).map_err(io)?;
        }
        file.sync_all().map_err(io)?;
        fs::rename(&tmp, &self.path).map_err(io)
    }
}
