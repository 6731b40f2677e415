//! `leader.replication.throttled.rate`: the bytes per second a leader serves to followers
//! that are catching up (out of the ISR) on partitions its topic lists in
//! `leader.replication.throttled.replicas`, as Kafka throttles a reassignment's copy. Over
//! the rate, such a follower's fetch gets no records until the budget refills; followers in
//! the ISR are never held back, so `acks=all` and the high watermark do not wait on it.

use std::time::Instant;

use parking_lot::Mutex;

/// A token bucket: `rate` bytes a second, at most one second's worth saved up. The rate is
/// the broker's setting until IncrementalAlterConfigs of the broker changes it (Kafka's
/// dynamic broker config); the change lasts until the broker restarts.
#[derive(Debug)]
pub(crate) struct ReplicationThrottle {
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    rate: Option<u64>,
    /// Bytes that may be served now; below zero after a batch larger than what was left.
    available: f64,
    refilled: Instant,
}

impl ReplicationThrottle {
    /// `None`: no limit (Kafka's default).
    pub(crate) fn new(rate: Option<u64>) -> Self {
        Self {
            bucket: Mutex::new(Bucket {
                rate,
                available: rate.unwrap_or(0) as f64,
                refilled: Instant::now(),
            }),
        }
    }

    /// The rate now; `None`, no limit.
    pub(crate) fn rate(&self) -> Option<u64> {
        self.bucket.lock().rate
    }

    /// Changes the rate; the budget starts again from one second's worth.
    pub(crate) fn set_rate(&self, rate: Option<u64>) {
        let mut bucket = self.bucket.lock();
        bucket.rate = rate;
        bucket.available = rate.unwrap_or(0) as f64;
        bucket.refilled = Instant::now();
    }

    /// How many bytes a throttled follower may be served now: `None` without a limit,
    /// `Some(0)` while over it.
    pub(crate) fn available(&self) -> Option<u64> {
        let mut bucket = self.bucket.lock();
        let rate = bucket.rate?;
        let now = Instant::now();
        let elapsed = now.duration_since(bucket.refilled).as_secs_f64();
        bucket.available = (bucket.available + elapsed * rate as f64).min(rate as f64);
        bucket.refilled = now;
        Some(bucket.available.max(0.0) as u64)
    }

    /// Counts `bytes` served to a throttled follower.
    pub(crate) fn spend(&self, bytes: usize) {
        let mut bucket = self.bucket.lock();
        if bucket.rate.is_some() {
            bucket.available -= bytes as f64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_spent_and_refills_at_the_rate() {
        let unlimited = ReplicationThrottle::new(None);
        unlimited.spend(usize::MAX);
        assert_eq!(unlimited.available(), None);

        let throttle = ReplicationThrottle::new(Some(1000));
        assert_eq!(
            throttle.available(),
            Some(1000),
            "a second's worth to begin with"
        );
        throttle.spend(1500);
        assert_eq!(throttle.available(), Some(0), "over the rate");
        // 0.6 s later the 500 bytes of debt are paid, with about 100 to spare.
        throttle.bucket.lock().refilled -= std::time::Duration::from_millis(600);
        let spare = throttle.available().unwrap();
        assert!((90..=110).contains(&spare), "{spare}");
        throttle.set_rate(None);
        assert_eq!(throttle.available(), None, "lifted");
    }
}
