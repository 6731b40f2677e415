//! The transactions of one partition's log (KIP-98): which producers have a transaction
//! open and from which offset, and which transactions were aborted; from those, the last
//! stable offset (LSO) and the aborted ranges a `read_committed` fetch is told of.
//!
//! The state follows the batches in offset order ([`Transactions::observe`]): a
//! transactional data batch opens its producer's transaction unless one is open; a marker
//! closes it, and an abort marker yields an [`AbortedTxn`], the entry Kafka keeps in a
//! segment's `.txnindex` file (34 bytes, [`AbortedTxn::encode`]). A log truncated below a
//! marker has lost what closed a transaction, so truncation starts the state afresh and it
//! is rebuilt by reading the batches again.
//!
//! Bounds: one open transaction per producer id, and one aborted entry per abort marker
//! still in the log; [`Transactions::forget_before`] drops the entries below the log start.

use std::collections::{BTreeSet, HashMap, VecDeque};

use skein_records::MarkerKind;

/// Bytes of one `.txnindex` entry: version (int16, 0), producer id (int64), first offset,
/// last offset and last stable offset (int64 each), big-endian.
pub const ABORTED_TXN_ENTRY: usize = 34;

/// A transaction that ended with an abort marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// The offset of the transaction's first batch in this partition.
    pub first_offset: u64,
    /// The offset of the abort marker.
    pub last_offset: u64,
    /// The partition's first unstable offset once this transaction ended (the marker's
    /// offset + 1 when no other transaction was open).
    pub last_stable_offset: u64,
}

/// Why bytes are not a `.txnindex` entry.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TxnIndexError {
    #[error("a transaction index entry is {len} bytes, not {ABORTED_TXN_ENTRY}")]
    Length { len: usize },
    #[error("transaction index entry version {version} is not 0")]
    Version { version: i16 },
    #[error("transaction index entry has offsets first {first}, last {last}, stable {stable}")]
    Offsets { first: i64, last: i64, stable: i64 },
}

impl AbortedTxn {
    pub fn encode(&self) -> [u8; ABORTED_TXN_ENTRY] {
        let mut entry = [0u8; ABORTED_TXN_ENTRY];
        entry[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        entry[10..18].copy_from_slice(&(self.first_offset as i64).to_be_bytes());
        entry[18..26].copy_from_slice(&(self.last_offset as i64).to_be_bytes());
        entry[26..34].copy_from_slice(&(self.last_stable_offset as i64).to_be_bytes());
        entry
    }

    /// Reads one entry; offsets must be non-negative with the first at or before the last.
    pub fn decode(entry: &[u8]) -> Result<Self, TxnIndexError> {
        let entry: &[u8; ABORTED_TXN_ENTRY] = entry
            .try_into()
            .map_err(|_| TxnIndexError::Length { len: entry.len() })?;
        let version = i16::from_be_bytes([entry[0], entry[1]]);
        if version != 0 {
            return Err(TxnIndexError::Version { version });
        }
        let int64 = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&entry[at..at + 8]);
            i64::from_be_bytes(bytes)
        };
        let (first, last, stable) = (int64(10), int64(18), int64(26));
        if first < 0 || last < first || stable < 0 {
            return Err(TxnIndexError::Offsets {
                first,
                last,
                stable,
            });
        }
        Ok(Self {
            producer_id: int64(2),
            first_offset: first as u64,
            last_offset: last as u64,
            last_stable_offset: stable as u64,
        })
    }
}

/// Reads a whole `.txnindex` file's bytes. A last entry cut short (a crash while it was
/// written) is left out; any other bad entry is an error. Allocates one entry per 34 bytes
/// given, never more.
pub fn decode_index(bytes: &[u8]) -> Result<Vec<AbortedTxn>, TxnIndexError> {
    bytes
        .chunks_exact(ABORTED_TXN_ENTRY)
        .map(AbortedTxn::decode)
        .collect()
}

/// What a batch is to the transaction state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnBatch {
    /// Neither transactional nor a marker: no effect.
    Plain,
    /// Records of `producer_id`'s transaction.
    Data { producer_id: i64 },
    /// `producer_id`'s transaction ended.
    Marker { producer_id: i64, kind: MarkerKind },
}

/// The transaction state of one partition.
#[derive(Debug, Default)]
pub struct Transactions {
    /// Producer id -> the first offset of its open transaction.
    open: HashMap<i64, u64>,
    /// The same, ordered by first offset, for the first unstable offset.
    by_first_offset: BTreeSet<(u64, i64)>,
    /// Aborted transactions in marker (last offset) order.
    aborted: VecDeque<AbortedTxn>,
}

impl Transactions {
    /// Follows the batch at `base_offset` (batches are observed in offset order). Returns
    /// the entry to add to the transaction index when the batch is an abort marker that
    /// ended an open transaction.
    pub fn observe(&mut self, base_offset: u64, batch: TxnBatch) -> Option<AbortedTxn> {
        match batch {
            TxnBatch::Plain => None,
            TxnBatch::Data { producer_id } => {
                if let std::collections::hash_map::Entry::Vacant(slot) =
                    self.open.entry(producer_id)
                {
                    slot.insert(base_offset);
                    self.by_first_offset.insert((base_offset, producer_id));
                }
                None
            }
            TxnBatch::Marker { producer_id, kind } => {
                // A marker for a producer with nothing open here (the coordinator writes
                // one to every partition it added) closes nothing.
                let first_offset = self.open.remove(&producer_id)?;
                self.by_first_offset.remove(&(first_offset, producer_id));
                if kind == MarkerKind::Commit {
                    return None;
                }
                let entry = AbortedTxn {
                    producer_id,
                    first_offset,
                    last_offset: base_offset,
                    last_stable_offset: self
                        .first_unstable_offset()
                        .unwrap_or(base_offset + 1)
                        .min(base_offset + 1),
                };
                self.aborted.push_back(entry);
                Some(entry)
            }
        }
    }

    /// The first offset of the earliest open transaction.
    pub fn first_unstable_offset(&self) -> Option<u64> {
        self.by_first_offset.first().map(|&(offset, _)| offset)
    }

    /// The offset below which every transaction is decided and replicated: the high
    /// watermark, or the first unstable offset if that is lower.
    pub fn last_stable_offset(&self, high_watermark: u64) -> u64 {
        self.first_unstable_offset()
            .map_or(high_watermark, |first| first.min(high_watermark))
    }

    /// The first offset of `producer_id`'s open transaction in this partition.
    pub fn open_since(&self, producer_id: i64) -> Option<u64> {
        self.open.get(&producer_id).copied()
    }

    /// Producers with a transaction open in this partition.
    pub fn open_transactions(&self) -> usize {
        self.open.len()
    }

    /// The aborted transactions a read of offsets `from..below` must skip: those whose
    /// marker is at or after `from` and whose first batch is before `below`, in marker
    /// order, at most `max`.
    pub fn aborted_in(&self, from: u64, below: u64, max: usize) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|t| t.last_offset < from);
        self.aborted
            .range(start..)
            .filter(|t| t.first_offset < below)
            .take(max)
            .copied()
            .collect()
    }

    /// Drops the aborted entries whose markers are below `log_start` (their segments are
    /// gone). Open transactions stay: they still hold the stable offset back.
    pub fn forget_before(&mut self, log_start: u64) {
        while self
            .aborted
            .front()
            .is_some_and(|t| t.last_offset < log_start)
        {
            self.aborted.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(producer_id: i64) -> TxnBatch {
        TxnBatch::Data { producer_id }
    }

    fn marker(producer_id: i64, kind: MarkerKind) -> TxnBatch {
        TxnBatch::Marker { producer_id, kind }
    }

    #[test]
    fn an_open_transaction_holds_the_stable_offset_until_its_marker() {
        let mut txns = Transactions::default();
        assert_eq!(txns.observe(0, TxnBatch::Plain), None);
        assert_eq!(txns.last_stable_offset(1), 1);
        txns.observe(1, data(7));
        txns.observe(2, TxnBatch::Plain);
        txns.observe(3, data(7));
        assert_eq!(txns.first_unstable_offset(), Some(1));
        assert_eq!(txns.last_stable_offset(4), 1);
        // The high watermark bounds it too.
        assert_eq!(txns.last_stable_offset(0), 0);
        assert_eq!(txns.observe(4, marker(7, MarkerKind::Commit)), None);
        assert_eq!(txns.last_stable_offset(5), 5);
        assert_eq!(txns.open_transactions(), 0);
        assert!(txns.aborted_in(0, 5, 10).is_empty());
    }

    #[test]
    fn an_abort_is_indexed_with_the_stable_offset_after_it() {
        let mut txns = Transactions::default();
        txns.observe(10, data(1));
        txns.observe(11, data(2));
        txns.observe(12, data(1));
        let aborted = txns.observe(13, marker(1, MarkerKind::Abort)).unwrap();
        // Producer 2's transaction, open from 11, is still unstable.
        assert_eq!(
            aborted,
            AbortedTxn {
                producer_id: 1,
                first_offset: 10,
                last_offset: 13,
                last_stable_offset: 11,
            }
        );
        assert_eq!(txns.last_stable_offset(14), 11);
        let alone = txns.observe(14, marker(2, MarkerKind::Abort)).unwrap();
        assert_eq!(alone.last_stable_offset, 15);
        // A second transaction of producer 1 opens at its next data batch.
        txns.observe(15, data(1));
        assert_eq!(txns.first_unstable_offset(), Some(15));
    }

    #[test]
    fn a_marker_with_nothing_open_changes_nothing() {
        let mut txns = Transactions::default();
        assert_eq!(txns.observe(0, marker(9, MarkerKind::Abort)), None);
        assert_eq!(txns.observe(1, marker(9, MarkerKind::Commit)), None);
        assert_eq!(txns.open_transactions(), 0);
        assert!(txns.aborted_in(0, u64::MAX, 10).is_empty());
    }

    #[test]
    fn a_read_is_told_of_the_aborts_that_overlap_it() {
        let mut txns = Transactions::default();
        // Producer 1: 0..=2 aborted; producer 2: 3..=6 aborted; producer 3: 7..=8 aborted.
        for (first, last, producer) in [(0, 2, 1), (3, 6, 2), (7, 8, 3)] {
            txns.observe(first, data(producer));
            txns.observe(last, marker(producer, MarkerKind::Abort));
        }
        let producers = |txns: &Transactions, from, below| -> Vec<i64> {
            txns.aborted_in(from, below, 10)
                .iter()
                .map(|t| t.producer_id)
                .collect()
        };
        assert_eq!(producers(&txns, 0, 9), vec![1, 2, 3]);
        assert_eq!(producers(&txns, 3, 9), vec![2, 3]);
        assert_eq!(producers(&txns, 5, 7), vec![2]);
        assert_eq!(producers(&txns, 9, 20), Vec::<i64>::new());
        assert_eq!(txns.aborted_in(0, 9, 2).len(), 2);
        txns.forget_before(4);
        assert_eq!(producers(&txns, 0, 9), vec![2, 3]);
    }

    #[test]
    fn index_entries_round_trip_and_bad_ones_are_refused() {
        let entry = AbortedTxn {
            producer_id: 1 << 40,
            first_offset: 5,
            last_offset: 9,
            last_stable_offset: 10,
        };
        let bytes = entry.encode();
        assert_eq!(AbortedTxn::decode(&bytes), Ok(entry));
        let mut file = bytes.to_vec();
        file.extend_from_slice(&bytes);
        // A torn last entry is left out.
        file.extend_from_slice(&bytes[..20]);
        assert_eq!(decode_index(&file), Ok(vec![entry, entry]));
        assert_eq!(
            AbortedTxn::decode(&bytes[..33]),
            Err(TxnIndexError::Length { len: 33 })
        );
        let mut versioned = bytes;
        versioned[1] = 1;
        assert_eq!(
            AbortedTxn::decode(&versioned),
            Err(TxnIndexError::Version { version: 1 })
        );
        let backwards = AbortedTxn {
            first_offset: 9,
            last_offset: 5,
            ..entry
        }
        .encode();
        assert!(matches!(
            AbortedTxn::decode(&backwards),
            Err(TxnIndexError::Offsets { .. })
        ));
    }
}
