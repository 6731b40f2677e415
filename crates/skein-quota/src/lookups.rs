//! How often a process may ask the controller about names it does not know: a name the
//! controller said it has not is believed for [`Lookups::MISS_FOR`], and at most
//! [`Lookups::PER_SECOND`] questions are asked a second in all, so a client naming ever
//! new unknown topics costs the shared catalog a bounded number of reads.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::Bucket;

#[derive(Debug)]
struct State {
    misses: HashMap<String, Instant>,
    bucket: Bucket,
}

/// Rate and negative cache for "does this topic exist?" questions.
#[derive(Debug)]
pub struct Lookups {
    state: Mutex<State>,
}

impl Default for Lookups {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                misses: HashMap::new(),
                bucket: Bucket::new(Self::PER_SECOND, Instant::now()),
            }),
        }
    }
}

impl Lookups {
    /// How long a "no such name" is believed.
    pub const MISS_FOR: Duration = Duration::from_millis(500);
    /// Questions asked a second, at most (and at once, after a quiet second).
    pub const PER_SECOND: f64 = 100.0;
    /// Misses remembered, at most; past it they are all forgotten.
    pub const MAX_MISSES: usize = 10_000;

    /// Whether `key` may be asked about now; a yes takes one question from the budget.
    pub fn may_ask(&self, key: &str) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state
            .misses
            .get(key)
            .is_some_and(|at| at.elapsed() < Self::MISS_FOR)
        {
            return false;
        }
        state.bucket.refill(Self::PER_SECOND, Instant::now());
        if state.bucket.level() < 1.0 {
            return false;
        }
        state.bucket.take(1.0);
        true
    }

    /// The controller said it has no `key`.
    pub fn missed(&self, key: String) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.misses.len() >= Self::MAX_MISSES {
            state.misses.clear();
        }
        state.misses.insert(key, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misses_are_believed_and_questions_are_rationed() {
        let lookups = Lookups::default();
        assert!(lookups.may_ask("a"));
        lookups.missed("a".to_owned());
        assert!(!lookups.may_ask("a"), "a miss is believed");
        let asked = (0..1000)
            .filter(|i| lookups.may_ask(&format!("n{i}")))
            .count();
        assert!((99..=101).contains(&asked), "{asked}");
    }
}
