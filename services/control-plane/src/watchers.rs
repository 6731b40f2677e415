//! The metadata streams (`WatchMetadata`) open per credential: each recomputes a snapshot
//! from the catalog every watch interval, so one credential holds at most
//! [`MAX_STREAMS_PER_CREDENTIAL`] of them; past that a new one is refused
//! (RESOURCE_EXHAUSTED) until one closes.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Metadata streams one credential holds open at most: a broker or a gateway needs one,
/// and a few more while a broken stream is replaced or a credential is shared by brokers.
pub const MAX_STREAMS_PER_CREDENTIAL: usize = 32;

/// Open streams by credential.
#[derive(Debug, Default)]
pub(crate) struct Watchers {
    open: Mutex<HashMap<String, usize>>,
}

/// One open stream's place; dropped when the stream ends.
#[derive(Debug)]
pub(crate) struct Watching {
    of: Arc<Watchers>,
    credential: String,
}

impl Watchers {
    /// A place for one more stream of `credential`, unless it holds the most already.
    pub(crate) fn open(self: &Arc<Self>, credential: &str) -> Option<Watching> {
        let mut open = self.open.lock();
        let count = open.entry(credential.to_owned()).or_default();
        if *count >= MAX_STREAMS_PER_CREDENTIAL {
            return None;
        }
        *count += 1;
        Some(Watching {
            of: Arc::clone(self),
            credential: credential.to_owned(),
        })
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut open = self.of.open.lock();
        if let Some(count) = open.get_mut(&self.credential) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.credential);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_holds_a_bounded_number_of_streams_and_gets_places_back() {
        let watchers = Arc::new(Watchers::default());
        let mut held: Vec<Watching> = (0..MAX_STREAMS_PER_CREDENTIAL)
            .map(|_| watchers.open("broker:b-1"))
            .collect::<Option<_>>()
            .expect("places up to the bound");
        assert!(watchers.open("broker:b-1").is_none());
        // Another credential is not held back by it.
        assert!(watchers.open("gateway:g").is_some());
        held.pop();
        assert!(watchers.open("broker:b-1").is_some());
        drop(held);
        assert!(watchers.open.lock().is_empty());
    }
}
