//! A token bucket for rate quotas. A bucket holds at most one second of its rate; taking
//! more than it holds leaves it in debt, which it pays off at the rate. Callers decide what a
//! debt means: the gateway refuses requests while in debt, the brokers hold a connection
//! back (Kafka's throttling) for as long as the debt lasts.

mod lookups;

pub use lookups::Lookups;

use std::time::{Duration, Instant};

/// One rate's bucket.
#[derive(Debug, Clone)]
pub struct Bucket {
    rate: f64,
    level: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket for `rate` units per second.
    pub fn new(rate: f64, now: Instant) -> Self {
        Self {
            rate,
            level: rate,
            at: now,
        }
    }

    /// Adds what accrued since the last refill, at `rate` (which may have changed since: a
    /// lower rate caps what the bucket holds at once).
    pub fn refill(&mut self, rate: f64, now: Instant) {
        if (self.rate - rate).abs() > f64::EPSILON {
            self.rate = rate;
            self.level = self.level.min(rate);
        }
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.level = (self.level + elapsed * rate).min(rate);
        self.at = now;
    }

    /// Takes `amount`, whatever the level.
    pub fn take(&mut self, amount: f64) {
        self.level -= amount;
    }

    /// What the bucket holds now (negative: in debt).
    pub fn level(&self) -> f64 {
        self.level
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// How long until the bucket is out of debt (zero when it is not in debt).
    pub fn debt(&self) -> Duration {
        if self.level >= 0.0 || self.rate <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.level / self.rate)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_holds_one_second_and_pays_debt_off_at_its_rate() {
        let start = Instant::now();
        let mut bucket = Bucket::new(100.0, start);
        bucket.take(100.0);
        assert_eq!(bucket.debt(), Duration::ZERO);
        bucket.take(50.0);
        assert_eq!(bucket.debt(), Duration::from_millis(500));
        bucket.refill(100.0, start + Duration::from_millis(250));
        assert_eq!(bucket.debt(), Duration::from_millis(250));
        // Idle time never stores more than one second of the rate.
        bucket.refill(100.0, start + Duration::from_secs(60));
        assert!((bucket.level() - 100.0).abs() < f64::EPSILON);
    }

    #[test]
    fn a_lower_rate_caps_what_the_bucket_holds() {
        let start = Instant::now();
        let mut bucket = Bucket::new(1000.0, start);
        bucket.refill(10.0, start);
        assert!((bucket.level() - 10.0).abs() < f64::EPSILON);
        bucket.take(30.0);
        assert_eq!(bucket.debt(), Duration::from_secs(2));
    }
}
