//! The log's transactions: followed on every append, rebuilt by reading the batches when the
//! log opens or is truncated, and each abort written to the `.txnindex` of the segment that
//! holds its marker (Kafka's transaction index; `docs/log-format.md` §9).
//!
//! The `.txnindex` files are written without fsync: whatever a crash leaves in them is
//! replaced by the entries the rebuild finds in the batches themselves.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use crate::batch::{read_marker, BatchHeader};
use crate::error::{LogError, Result};
use crate::segment::BatchMeta;
use crate::transactions::{AbortedTxn, Transactions, TxnBatch};

use super::Log;

/// A control batch larger than this is not read as a marker: a coordinator's marker is one
/// record of under 100 bytes.
const MARKER_READ_LIMIT: usize = 4096;

/// What the batch `batch` (header included), whose header is `header`, is to the
/// partition's transactions. A control batch that is no marker changes nothing.
pub(crate) fn classify(batch: &[u8], header: &BatchHeader) -> TxnBatch {
    let producer_id = header.producer_id;
    if producer_id < 0 || !header.is_transactional() {
        return TxnBatch::Plain;
    }
    if !header.is_control() {
        return TxnBatch::Data { producer_id };
    }
    match read_marker(batch, header) {
        Ok(marker) => TxnBatch::Marker {
            producer_id,
            kind: marker.kind,
        },
        Err(_) => TxnBatch::Plain,
    }
}

impl Log {
    /// Follows batches just written to the active segment.
    pub(super) fn observe_transactions(&mut self, metas: &[BatchMeta]) -> Result<()> {
        for meta in metas {
            if let Some(aborted) = self.txns.observe(meta.base_offset, meta.txn) {
                let path = self.active().txn_index_path.clone();
                append_entry(&path, &aborted)?;
            }
        }
        Ok(())
    }

    /// Reads every batch header from the first segment and builds the transaction state
    /// afresh; rewrites each segment's `.txnindex` whose entries differ from what the
    /// batches say. Only control batches are read beyond their header.
    pub(super) fn rebuild_transactions(&mut self) -> Result<()> {
        let mut txns = Transactions::default();
        let mut entries: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for (&base, segment) in &self.segments {
            let files = segment.files(&self.cache)?;
            let mut position = 0u64;
            while position < segment.size {
                let header = segment.read_header(&files, position)?;
                let size = header.size();
                let txn = if header.is_control()
                    && header.is_transactional()
                    && size <= MARKER_READ_LIMIT
                {
                    let batch = segment.read_batch(&files, position, size)?;
                    classify(&batch, &header)
                } else if header.is_control() {
                    TxnBatch::Plain
                } else {
                    classify(&[], &header)
                };
                let offset = header.base_offset.max(0) as u64;
                if let Some(aborted) = txns.observe(offset, txn) {
                    entries.entry(base).or_default().extend(aborted.encode());
                }
                position += size as u64;
            }
        }
        txns.forget_before(self.log_start_offset);
        for segment in self.segments.values() {
            let want = entries
                .get(&segment.base_offset)
                .map_or(&[][..], Vec::as_slice);
            sync_index(&segment.txn_index_path, want)?;
        }
        self.txns = txns;
        Ok(())
    }

    /// The last stable offset given the partition's high watermark: below it every
    /// transaction is decided (`read_committed` reads stop there).
    pub fn last_stable_offset(&self, high_watermark: u64) -> u64 {
        self.txns.last_stable_offset(high_watermark)
    }

    /// The first offset of the earliest transaction still open in this partition.
    pub fn first_unstable_offset(&self) -> Option<u64> {
        self.txns.first_unstable_offset()
    }

    /// The first offset of `producer_id`'s open transaction in this partition.
    pub fn open_transaction_of(&self, producer_id: i64) -> Option<u64> {
        self.txns.open_since(producer_id)
    }

    /// Producers with a transaction open in this partition.
    pub fn open_transactions(&self) -> usize {
        self.txns.open_transactions()
    }

    /// The aborted transactions a `read_committed` read of `from..below` must skip, at most
    /// `max`, in marker order.
    pub fn aborted_transactions(&self, from: u64, below: u64, max: usize) -> Vec<AbortedTxn> {
        self.txns.aborted_in(from, below, max)
    }
}

fn append_entry(path: &Path, entry: &AbortedTxn) -> Result<()> {
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(&entry.encode()))
        .map_err(LogError::io(path))
}

/// Makes the file at `path` hold exactly `want` (no file when `want` is empty).
fn sync_index(path: &Path, want: &[u8]) -> Result<()> {
    match fs::read(path) {
        Ok(have) if have == want => return Ok(()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if want.is_empty() {
                return Ok(());
            }
        }
        Err(e) => return Err(LogError::io(path)(e)),
    }
    if want.is_empty() {
        return fs::remove_file(path).map_err(LogError::io(path));
    }
    let tmp = path.with_extension("txnindex.tmp");
    fs::write(&tmp, want).map_err(LogError::io(&tmp))?;
    fs::rename(&tmp, path).map_err(LogError::io(path))
}
