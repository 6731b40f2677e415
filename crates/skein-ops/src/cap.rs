//! Bounding a label's values.

use std::collections::HashSet;

use parking_lot::Mutex;

/// What a label takes once its cap is reached.
pub const OTHER: &str = "_other";

/// The longest label value, in bytes: a longer one (a client's name for its group, say) is
/// cut to it, so no single series grows a scrape by what a client chose.
pub const MAX_LABEL_BYTES: usize = 128;

/// `value` cut to at most [`MAX_LABEL_BYTES`], at a character boundary.
pub fn bounded(value: &str) -> &str {
    if value.len() <= MAX_LABEL_BYTES {
        return value;
    }
    let mut end = MAX_LABEL_BYTES;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

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

    /// The label value to count `value` under: `value` cut to [`MAX_LABEL_BYTES`] while
    /// the cap has room, else [`OTHER`].
    pub fn label(&self, value: &str) -> String {
        let value = bounded(value);
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

    #[test]
    fn a_long_value_is_cut_to_the_bound_at_a_character() {
        let cap = LabelCap::new(4);
        let long = "x".repeat(30_000);
        assert_eq!(cap.label(&long).len(), MAX_LABEL_BYTES);
        let accented = format!("{}é", "x".repeat(MAX_LABEL_BYTES - 1));
        assert_eq!(bounded(&accented), "x".repeat(MAX_LABEL_BYTES - 1));
    }
}
