//! Bounding a label's values.

use std::collections::HashSet;

use parking_lot::Mutex;

/// What a label takes once its cap is reached.
pub const OTHER: &str = "_other";

/// Keeps at most `limit` distinct values of one label: the first ones seen keep their names,
/// later ones are counted under [`OTHER`], so no peer can grow a metric family without bound.
#[derive(Debug)]
pub struct LabelCap {
    limit: usize,
    seen: Mutex<HashSet<String>>,
}

impl LabelCap {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// The label value to count `value` under.
    pub fn label(&self, value: &str) -> String {
        let mut seen = self.seen.lock();
        if seen.contains(value) {
            return value.to_owned();
        }
        if seen.len() < self.limit {
            seen.insert(value.to_owned());
            return value.to_owned();
        }
        OTHER.to_owned()
    }

    /// Forgets `value` (a deleted topic, say), making room for another.
    pub fn forget(&self, value: &str) {
        self.seen.lock().remove(value);
    }

    /// Forgets every named value for which `keep` says no; answers them.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let mut seen = self.seen.lock();
        let gone: Vec<String> = seen.iter().filter(|v| !keep(v)).cloned().collect();
        for value in &gone {
            seen.remove(value);
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_past_the_cap_share_one_label() {
        let cap = LabelCap::new(2);
        assert_eq!(cap.label("a"), "a");
        assert_eq!(cap.label("b"), "b");
        assert_eq!(cap.label("c"), OTHER);
        assert_eq!(cap.label("a"), "a");
        cap.forget("a");
        assert_eq!(cap.label("c"), "c");
        assert_eq!(cap.label("a"), OTHER);
    }
}
