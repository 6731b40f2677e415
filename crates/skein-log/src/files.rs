//! Open files of segments, shared by every log in the process and bounded in number.
//!
//! A segment's `.log` descriptor and its two index maps are opened on first use and kept in
//! a least-recently-used cache; when the cache is full the coldest segment's files are
//! closed. Anything still reading through an evicted entry (a [`crate::FileRegion`] being
//! sent) keeps it alive until it is done, so eviction never breaks a read.

use std::fs::File;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lru::LruCache;
use parking_lot::Mutex;

use crate::error::Result;
use crate::index::IndexMap;

/// The open files of one segment.
#[derive(Debug)]
pub(crate) struct SegmentFiles {
    /// Shared with the file regions handed out by reads, which need nothing else.
    pub(crate) log: Arc<File>,
    pub(crate) index: Mutex<IndexMap>,
    pub(crate) time_index: Mutex<IndexMap>,
}

/// The process-wide bound on open segments.
#[derive(Debug)]
pub struct HandleCache {
    lru: Mutex<LruCache<u64, Arc<SegmentFiles>>>,
    next_id: AtomicU64,
    opens: AtomicU64,
}

impl HandleCache {
    /// A cache that keeps at most `max_open_segments` segments open (each one file descriptor
    /// and up to two memory maps).
    pub fn new(max_open_segments: usize) -> Arc<Self> {
        let capacity = NonZeroUsize::new(max_open_segments.max(1)).unwrap_or(NonZeroUsize::MIN);
        Arc::new(Self {
            lru: Mutex::new(LruCache::new(capacity)),
            next_id: AtomicU64::new(1),
            opens: AtomicU64::new(0),
        })
    }

    /// Segments whose files are open now, not counting evicted ones still in use by a read.
    pub fn open_segments(&self) -> usize {
        self.lru.lock().len()
    }

    /// How many times a segment's files were opened (a measure of cache misses).
    pub fn opens(&self) -> u64 {
        self.opens.load(Ordering::Relaxed)
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn get_or_open(
        &self,
        id: u64,
        open: impl FnOnce() -> Result<SegmentFiles>,
    ) -> Result<Arc<SegmentFiles>> {
        if let Some(files) = self.lru.lock().get(&id) {
            return Ok(Arc::clone(files));
        }
        let files = Arc::new(open()?);
        self.opens.fetch_add(1, Ordering::Relaxed);
        let evicted = self.lru.lock().push(id, Arc::clone(&files));
        drop(evicted);
        Ok(files)
    }

    /// Closes a segment's files (when it is deleted, replaced or changes mode).
    pub(crate) fn remove(&self, id: u64) -> Option<Arc<SegmentFiles>> {
        self.lru.lock().pop(&id)
    }
}
