//! Records of `__transaction_state`, in Kafka's layout (key version 0, value version 0):
//!
//! ```text
//! key   = version: i16 (0) | transactional_id: string
//! value = version: i16 (0) | producer_id: i64 | producer_epoch: i16 | timeout_ms: i32
//!         | status: i8 | partitions: i32 count, each topic: string
//!           | partitions: i32 count, each i32 | last_update_ms: i64 | start_ms: i64
//! ```
//! where `string` is an i16 length and UTF-8 bytes. A null value forgets the id.
//!
//! The log is this broker's or a replica's copy of one: it is read within bounds, and every
//! count is checked against the bytes left before anything is allocated for it.

use std::collections::BTreeSet;

/// Where a transaction is (Kafka's `TransactionState` ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnStatus {
    fn id(self) -> i8 {
        match self {
            Self::Empty => 0,
            Self::Ongoing => 1,
            Self::PrepareCommit => 2,
            Self::PrepareAbort => 3,
            Self::CompleteCommit => 4,
            Self::CompleteAbort => 5,
        }
    }

    fn of_id(id: i8) -> Option<Self> {
        Some(match id {
            0 => Self::Empty,
            1 => Self::Ongoing,
            2 => Self::PrepareCommit,
            3 => Self::PrepareAbort,
            4 => Self::CompleteCommit,
            5 => Self::CompleteAbort,
            _ => return None,
        })
    }

    /// The name Kafka's DescribeTransactions and ListTransactions give it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::PrepareCommit => "PrepareCommit",
            Self::PrepareAbort => "PrepareAbort",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
        }
    }
}

/// What the coordinator keeps of one transactional id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMeta {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub status: TxnStatus,
    /// The partitions of the transaction, by the names the broker keeps.
    pub partitions: BTreeSet<(String, i32)>,
    pub last_update_ms: i64,
    /// When the transaction began (its first partition was added); -1 when none is open.
    pub start_ms: i64,
}

/// Why bytes are not a `__transaction_state` record.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateRecordError {
    #[error("the record ends before its {0}")]
    Truncated(&'static str),
    #[error("unknown {what} version {version}")]
    Version { what: &'static str, version: i16 },
    #[error("unknown transaction status {0}")]
    Status(i8),
    #[error("a name is not UTF-8")]
    NotUtf8,
    #[error("a count is negative")]
    NegativeCount,
}

pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&0i16.to_be_bytes());
    put_string(&mut out, transactional_id);
    out
}

pub fn encode_value(meta: &TxnMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&meta.producer_id.to_be_bytes());
    out.extend_from_slice(&meta.producer_epoch.to_be_bytes());
    out.extend_from_slice(&meta.timeout_ms.to_be_bytes());
    out.push(meta.status.id() as u8);
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in &meta.partitions {
        match topics.last_mut() {
            Some((t, ps)) if t == topic => ps.push(*partition),
            _ => topics.push((topic, vec![*partition])),
        }
    }
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for (topic, partitions) in topics {
        put_string(&mut out, topic);
        out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
        for p in partitions {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    out.extend_from_slice(&meta.last_update_ms.to_be_bytes());
    out.extend_from_slice(&meta.start_ms.to_be_bytes());
    out
}

pub fn decode_key(key: &[u8]) -> Result<String, StateRecordError> {
    let mut r = Reader(key);
    let version = r.i16("key version")?;
    if version != 0 {
        return Err(StateRecordError::Version {
            what: "key",
            version,
        });
    }
    r.string("transactional id")
}

pub fn decode_value(value: &[u8]) -> Result<TxnMeta, StateRecordError> {
    let mut r = Reader(value);
    let version = r.i16("value version")?;
    if !(0..=1).contains(&version) {
        return Err(StateRecordError::Version {
            what: "value",
            version,
        });
    }
    let producer_id = r.i64("producer id")?;
    let producer_epoch = r.i16("producer epoch")?;
    let timeout_ms = r.i32("timeout")?;
    let status_id = r.i8("status")?;
    let status = TxnStatus::of_id(status_id).ok_or(StateRecordError::Status(status_id))?;
    let mut partitions = BTreeSet::new();
    // Each topic takes at least 6 bytes and each partition 4: a count larger than the
    // bytes left can hold is refused before the loop runs.
    let topics = r.count("topics", 6)?;
    for _ in 0..topics {
        let topic = r.string("topic")?;
        let count = r.count("partitions", 4)?;
        for _ in 0..count {
            partitions.insert((topic.clone(), r.i32("partition")?));
        }
    }
    let last_update_ms = r.i64("last update")?;
    let start_ms = r.i64("start")?;
    Ok(TxnMeta {
        producer_id,
        producer_epoch,
        timeout_ms,
        status,
        partitions,
        last_update_ms,
        start_ms,
    })
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    out.extend_from_slice(&(bytes.len() as i16).to_be_bytes());
    out.extend_from_slice(bytes);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], StateRecordError> {
        if self.0.len() < n {
            return Err(StateRecordError::Truncated(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn i8(&mut self, what: &'static str) -> Result<i8, StateRecordError> {
        Ok(self.take(1, what)?[0] as i8)
    }

    fn i16(&mut self, what: &'static str) -> Result<i16, StateRecordError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, StateRecordError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i64(&mut self, what: &'static str) -> Result<i64, StateRecordError> {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(self.take(8, what)?);
        Ok(i64::from_be_bytes(bytes))
    }

    /// A count of items of at least `min_size` bytes each, checked against what is left.
    fn count(&mut self, what: &'static str, min_size: usize) -> Result<usize, StateRecordError> {
        let n = self.i32(what)?;
        let n = usize::try_from(n).map_err(|_| StateRecordError::NegativeCount)?;
        if n.saturating_mul(min_size) > self.0.len() {
            return Err(StateRecordError::Truncated(what));
        }
        Ok(n)
    }

    fn string(&mut self, what: &'static str) -> Result<String, StateRecordError> {
        let len = self.i16(what)?;
        let len = usize::try_from(len).map_err(|_| StateRecordError::NegativeCount)?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| StateRecordError::NotUtf8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_hostile_counts_are_refused() {
        let meta = TxnMeta {
            producer_id: 42,
            producer_epoch: 3,
            timeout_ms: 60_000,
            status: TxnStatus::Ongoing,
            partitions: BTreeSet::from([
                ("a".to_owned(), 0),
                ("a".to_owned(), 2),
                ("b".to_owned(), 1),
            ]),
            last_update_ms: 5,
            start_ms: 4,
        };
        let value = encode_value(&meta);
        assert_eq!(decode_value(&value), Ok(meta));
        assert_eq!(decode_key(&encode_key("tx-1")), Ok("tx-1".to_owned()));
        // A topic count of two billion in a short record allocates nothing.
        let mut hostile = value[..17].to_vec();
        hostile.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(
            decode_value(&hostile),
            Err(StateRecordError::Truncated("topics"))
        );
        for cut in 0..value.len() {
            assert!(decode_value(&value[..cut]).is_err());
        }
    }
}
