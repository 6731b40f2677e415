//! Committed offsets: in memory for reads, and in the compacted internal topic
//! `__consumer_offsets` so they survive a restart. Records use Kafka's own layout:
//!
//! ```text
//! key   = version: i16 (1) | group: string | topic: string | partition: i32
//! value = version: i16 (3) | offset: i64 | leader_epoch: i32 | metadata: string
//!         | commit_timestamp: i64                        (null value: offset deleted)
//! ```
//! where `string` is an i16 length and UTF-8 bytes.

use std::collections::{BTreeMap, HashMap};

use parking_lot::RwLock;
use skein_log::batch::{build_batch, Compression, DecodedRecords, NewRecord, ProducerFields};
use skein_log::{CleanupPolicy, LogConfig, LogManager, SharedLog, TopicPartition};

pub(crate) const TOPIC: &str = "__consumer_offsets";

/// One committed offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Committed {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: String,
}

type Key = (String, String, i32);

#[derive(Debug)]
pub(crate) struct OffsetStore {
    /// When each group last committed, in milliseconds (the records' timestamps on replay).
    last_commit: RwLock<HashMap<String, i64>>,
    log: SharedLog,
    offsets: RwLock<BTreeMap<Key, Committed>>,
}

impl OffsetStore {
    /// Opens `__consumer_offsets` and replays it.
    pub(crate) fn open(logs: &LogManager) -> anyhow::Result<Self> {
        let config = LogConfig {
            cleanup_policy: CleanupPolicy::Compact,
            segment_bytes: 100 * 1024 * 1024,
            ..LogConfig::default()
        };
        let log = logs.get_or_create(&TopicPartition::new(TOPIC, 0), Some(config.clone()))?;
        log.write().set_config(config)?;
        let mut offsets = BTreeMap::new();
        let mut last_commit: HashMap<String, i64> = HashMap::new();
        {
            let log = log.read();
            let mut position = log.log_start_offset();
            while position < log.log_end_offset() {
                let slice = log.read(position, 1 << 20, None)?;
                if slice.is_empty() {
                    break;
                }
                let bytes = slice.to_verified_bytes()?;
                let mut rest = &bytes[..];
                while !rest.is_empty() {
                    let decoded = DecodedRecords::decode(rest, skein_log::batch::MAX_DECOMPRESSED)?;
                    for record in decoded.iter() {
                        let record = record?;
                        let Some(key) = record.key.and_then(decode_key) else {
                            continue;
                        };
                        match record.value.and_then(decode_value) {
                            Some(value) => {
                                let at = decoded.timestamp_of(&record);
                                let last = last_commit.entry(key.0.clone()).or_insert(at);
                                *last = (*last).max(at);
                                offsets.insert(key, value);
                            }
                            None => {
                                offsets.remove(&key);
                            }
                        }
                    }
                    rest = &rest[decoded.header.size()..];
                }
                position = slice.last_offset + 1;
            }
        }
        Ok(Self {
            last_commit: RwLock::new(last_commit),
            log,
            offsets: RwLock::new(offsets),
        })
    }

    /// Stores commits durably in the log, then in memory.
    pub(crate) fn commit(
        &self,
        group: &str,
        commits: &[(String, i32, Committed)],
        now_ms: i64,
    ) -> anyhow::Result<()> {
        self.write(
            group,
            commits
                .iter()
                .map(|(t, p, c)| (t.as_str(), *p, Some(encode_value(c, now_ms)))),
            now_ms,
        )?;
        let mut offsets = self.offsets.write();
        for (topic, partition, c) in commits {
            offsets.insert((group.to_owned(), topic.clone(), *partition), c.clone());
        }
        self.last_commit.write().insert(group.to_owned(), now_ms);
        Ok(())
    }

    /// Groups whose last commit is older than `retention_ms` before `now_ms`.
    pub(crate) fn committed_before(&self, now_ms: i64, retention_ms: i64) -> Vec<String> {
        let groups = self.groups();
        let last = self.last_commit.read();
        groups
            .into_iter()
            .filter(|g| {
                last.get(g)
                    .is_none_or(|at| at.saturating_add(retention_ms) <= now_ms)
            })
            .collect()
    }

    /// Deletes committed offsets: tombstones in the log, then out of memory.
    pub(crate) fn delete(
        &self,
        group: &str,
        keys: &[(String, i32)],
        now_ms: i64,
    ) -> anyhow::Result<()> {
        self.write(
            group,
            keys.iter().map(|(t, p)| (t.as_str(), *p, None)),
            now_ms,
        )?;
        let mut offsets = self.offsets.write();
        for (topic, partition) in keys {
            offsets.remove(&(group.to_owned(), topic.clone(), *partition));
        }
        Ok(())
    }

    /// Appends one record per (topic, partition, value) to `__consumer_offsets`; a `None`
    /// value is a tombstone.
    fn write<'a>(
        &self,
        group: &str,
        entries: impl Iterator<Item = (&'a str, i32, Option<Vec<u8>>)>,
        now_ms: i64,
    ) -> anyhow::Result<()> {
        let records: Vec<NewRecord> = entries
            .map(|(topic, partition, value)| NewRecord {
                key: Some(encode_key(group, topic, partition)),
                value,
                headers: Vec::new(),
                timestamp: now_ms,
            })
            .collect();
        if records.is_empty() {
            return Ok(());
        }
        let mut batch = build_batch(&records, Compression::None, ProducerFields::NONE)?;
        self.log.write().append(&mut batch, 0)?;
        Ok(())
    }

    pub(crate) fn get(&self, group: &str, topic: &str, partition: i32) -> Option<Committed> {
        self.offsets
            .read()
            .get(&(group.to_owned(), topic.to_owned(), partition))
            .cloned()
    }

    /// Every committed offset of a group: (topic, partition, committed).
    pub(crate) fn all(&self, group: &str) -> Vec<(String, i32, Committed)> {
        self.offsets
            .read()
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, t, p), c)| (t.clone(), *p, c.clone()))
            .collect()
    }

    /// Groups that have committed offsets.
    pub(crate) fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = self
            .offsets
            .read()
            .keys()
            .map(|(g, _, _)| g.clone())
            .collect();
        groups.dedup();
        groups
    }
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if buf.len() < n {
        return None;
    }
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Some(head)
}

fn get_i16(buf: &mut &[u8]) -> Option<i16> {
    take(buf, 2).map(|b| i16::from_be_bytes([b[0], b[1]]))
}

fn get_i32(buf: &mut &[u8]) -> Option<i32> {
    take(buf, 4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn get_i64(buf: &mut &[u8]) -> Option<i64> {
    take(buf, 8).map(|b| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        i64::from_be_bytes(a)
    })
}

fn get_string(buf: &mut &[u8]) -> Option<String> {
    let len = usize::try_from(get_i16(buf)?).ok()?;
    String::from_utf8(take(buf, len)?.to_vec()).ok()
}

fn encode_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + group.len() + topic.len());
    out.extend_from_slice(&1i16.to_be_bytes());
    put_string(&mut out, group);
    put_string(&mut out, topic);
    out.extend_from_slice(&partition.to_be_bytes());
    out
}

fn decode_key(mut buf: &[u8]) -> Option<Key> {
    let version = get_i16(&mut buf)?;
    if !(0..=1).contains(&version) {
        return None;
    }
    Some((
        get_string(&mut buf)?,
        get_string(&mut buf)?,
        get_i32(&mut buf)?,
    ))
}

fn encode_value(c: &Committed, now_ms: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + c.metadata.len());
    out.extend_from_slice(&3i16.to_be_bytes());
    out.extend_from_slice(&c.offset.to_be_bytes());
    out.extend_from_slice(&c.leader_epoch.to_be_bytes());
    put_string(&mut out, &c.metadata);
    out.extend_from_slice(&now_ms.to_be_bytes());
    out
}

fn decode_value(mut buf: &[u8]) -> Option<Committed> {
    let version = get_i16(&mut buf)?;
    if version != 3 {
        return None;
    }
    let offset = get_i64(&mut buf)?;
    let leader_epoch = get_i32(&mut buf)?;
    let metadata = get_string(&mut buf)?;
    Some(Committed {
        offset,
        leader_epoch,
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip() {
        let key = encode_key("g", "orders", 7);
        assert_eq!(decode_key(&key), Some(("g".into(), "orders".into(), 7)));
        let c = Committed {
            offset: 42,
            leader_epoch: 3,
            metadata: "meta".into(),
        };
        assert_eq!(decode_value(&encode_value(&c, 1)), Some(c));
        assert_eq!(decode_key(&key[..5]), None);
    }
}
