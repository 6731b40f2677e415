//! The tenant's byte quotas on the Kafka path, enforced as Kafka does: a produce or fetch is
//! answered, its bytes are charged to the tenant's bucket, the answer carries the throttle
//! time (`throttle_time_ms`, which clients honour by backing off), and the next produce or
//! fetch on any of the tenant's connections waits until the debt is paid (and with it what
//! follows on that connection, as Kafka mutes a throttled channel). The gateway's requests
//! pass here too, so a tenant's byte rates are bounded however many gateways it uses. A
//! client authenticated on a SASL listener is also held to its principal's own quota
//! ([`PrincipalQuotas`]), the one the gateway applies to that principal: a request waits for
//! the larger of the two debts and is charged to both.
//!
//! Kafka's request-time quota (`request_percentage`) is metered the same way, in
//! microseconds of a request-handling thread: every request but ApiVersions, the SASL
//! exchange and replication is charged the time the broker spent working on it (the time
//! its handler was being polled, not the time it waited for records or replicas), against
//! the tenant's and the principal's budgets.
//!
//! The request-rate quota is not metered here: it limits calls to the gateway, and every
//! Kafka consumer sends a steady stream of long polls and heartbeats that are not calls a
//! tenant makes.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use skein_proto::controller as pb;
use skein_quota::Bucket;

/// The longest one request is held back, however deep the debt: a large fetch against a
/// small quota must not hold a connection for longer than clients wait for an answer. The
/// debt remains, so the next request waits again.
pub(crate) const MAX_THROTTLE: Duration = Duration::from_secs(5);

/// What a quota meters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Metered {
    ProduceBytes,
    FetchBytes,
    /// Microseconds of request handling.
    RequestTime,
}

impl Metered {
    const ALL: [Self; 3] = [Self::ProduceBytes, Self::FetchBytes, Self::RequestTime];

    fn index(self) -> usize {
        match self {
            Self::ProduceBytes => 0,
            Self::FetchBytes => 1,
            Self::RequestTime => 2,
        }
    }

    /// Units per second: bytes, or microseconds of handling (a percent of one thread's
    /// time is 10 000 µs each second).
    fn rate(self, quota: &pb::Quota) -> Option<i64> {
        match self {
            Self::ProduceBytes => quota.produce_bytes_per_sec,
            Self::FetchBytes => quota.fetch_bytes_per_sec,
            Self::RequestTime => quota
                .request_percentage
                .map(|percent| percent.saturating_mul(10_000)),
        }
    }
}

/// The request-time charge of `busy` handling.
pub(crate) fn micros(busy: Duration) -> u64 {
    u64::try_from(busy.as_micros()).unwrap_or(u64::MAX)
}

/// Runs `work` to completion; answers its output and the time spent polling it, which is
/// the time a thread worked on it (waits for records, replicas or locks are not counted).
pub(crate) async fn timed_polls<F: std::future::Future>(work: F) -> (F::Output, Duration) {
    let mut work = std::pin::pin!(work);
    let mut busy = Duration::ZERO;
    let output = std::future::poll_fn(|cx| {
        let started = Instant::now();
        let polled = work.as_mut().poll(cx);
        busy += started.elapsed();
        polled
    })
    .await;
    (output, busy)
}

#[derive(Debug, Default)]
struct State {
    quota: Option<pb::Quota>,
    buckets: [Option<Bucket>; 3],
}

/// A quota this broker serves (the tenant's, or a principal's), with its buckets.
#[derive(Debug)]
pub(crate) struct TenantQuotas {
    state: Mutex<State>,
    /// Whether anything is limited: without a limit, requests take no lock here.
    limited: AtomicBool,
    /// The `storage_bytes` limit, -1 for none: read on every produce, so kept lock-free.
    storage_bytes: AtomicI64,
}

impl Default for TenantQuotas {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            limited: AtomicBool::new(false),
            storage_bytes: AtomicI64::new(-1),
        }
    }
}

impl TenantQuotas {
    /// Replaces the limits (from the controller's snapshot); buckets keep their level.
    pub(crate) fn set(&self, quota: Option<pb::Quota>) {
        let mut state = self.state.lock();
        if let Some(quota) = &quota {
            for metered in Metered::ALL {
                if metered.rate(quota).is_none_or(|rate| rate <= 0) {
                    state.buckets[metered.index()] = None;
                }
            }
        } else {
            state.buckets = Default::default();
        }
        let limited = quota.as_ref().is_some_and(|q| {
            Metered::ALL
                .iter()
                .any(|m| m.rate(q).is_some_and(|rate| rate > 0))
        });
        self.limited.store(limited, Ordering::Release);
        let storage = quota
            .as_ref()
            .and_then(|q| q.storage_bytes)
            .filter(|b| *b > 0)
            .unwrap_or(-1);
        self.storage_bytes.store(storage, Ordering::Release);
        state.quota = quota;
    }

    /// The tenant's `partitions` limit, if it has one.
    pub(crate) fn partitions(&self) -> Option<i64> {
        self.state.lock().quota.as_ref().and_then(|q| q.partitions)
    }

    /// The tenant's `storage_bytes` limit on one broker's volume, if it has one.
    pub(crate) fn storage_bytes(&self) -> Option<i64> {
        Some(self.storage_bytes.load(Ordering::Acquire)).filter(|b| *b > 0)
    }

    /// How long a request metered by `metered` waits before it is handled.
    pub(crate) fn debt(&self, metered: Metered) -> Duration {
        self.apply(metered, 0.0)
    }

    /// Charges `amount`; answers the throttle time that leaves (zero when within quota).
    pub(crate) fn charge(&self, metered: Metered, amount: u64) -> Duration {
        self.apply(metered, amount as f64)
    }

    fn apply(&self, metered: Metered, amount: f64) -> Duration {
        if !self.limited.load(Ordering::Acquire) {
            return Duration::ZERO;
        }
        let mut state = self.state.lock();
        let Some(rate) = state
            .quota
            .as_ref()
            .and_then(|q| metered.rate(q))
            .filter(|rate| *rate > 0)
        else {
            return Duration::ZERO;
        };
        let rate = rate as f64;
        let now = Instant::now();
        let bucket = state.buckets[metered.index()].get_or_insert_with(|| Bucket::new(rate, now));
        bucket.refill(rate, now);
        bucket.take(amount);
        bucket.debt().min(MAX_THROTTLE)
    }
}

/// Each principal's own byte quotas (the controller's quotas that name a principal), with
/// their buckets.
#[derive(Debug, Default)]
pub(crate) struct PrincipalQuotas {
    quotas: parking_lot::RwLock<std::collections::HashMap<String, std::sync::Arc<TenantQuotas>>>,
}

impl PrincipalQuotas {
    /// Replaces the limits by principal name; a principal's buckets keep their level while
    /// it keeps a quota.
    pub(crate) fn set(&self, quotas: std::collections::HashMap<String, pb::Quota>) {
        let mut held = self.quotas.write();
        held.retain(|name, _| quotas.contains_key(name));
        for (name, quota) in quotas {
            held.entry(name).or_default().set(Some(quota));
        }
    }

    /// The quotas of `principal`, if it has any.
    pub(crate) fn of(&self, principal: &str) -> Option<std::sync::Arc<TenantQuotas>> {
        self.quotas.read().get(principal).cloned()
    }
}

/// Milliseconds for a response's `throttle_time_ms`.
pub(crate) fn throttle_ms(throttle: Duration) -> i32 {
    i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(produce: Option<i64>) -> pb::Quota {
        pb::Quota {
            tenant: "acme".into(),
            produce_bytes_per_sec: produce,
            ..Default::default()
        }
    }

    #[test]
    fn bytes_past_one_second_of_the_rate_are_throttled_in_proportion() {
        let quotas = TenantQuotas::default();
        assert_eq!(
            quotas.charge(Metered::ProduceBytes, 1 << 30),
            Duration::ZERO
        );
        quotas.set(Some(quota(Some(1000))));
        assert_eq!(quotas.charge(Metered::ProduceBytes, 1000), Duration::ZERO);
        let throttle = quotas.charge(Metered::ProduceBytes, 500);
        assert!(
            throttle > Duration::from_millis(450) && throttle <= Duration::from_millis(500),
            "{throttle:?}"
        );
        assert!(quotas.debt(Metered::ProduceBytes) > Duration::from_millis(400));
        // Other meters are not limited.
        assert_eq!(quotas.charge(Metered::FetchBytes, 1 << 30), Duration::ZERO);
        // A huge debt holds a request back at most MAX_THROTTLE at a time.
        assert_eq!(quotas.charge(Metered::ProduceBytes, 1 << 20), MAX_THROTTLE);
        // Lifting the limit clears the debt.
        quotas.set(Some(quota(None)));
        assert_eq!(quotas.debt(Metered::ProduceBytes), Duration::ZERO);
        quotas.set(Some(quota(Some(1000))));
        assert_eq!(quotas.debt(Metered::ProduceBytes), Duration::ZERO);
    }

    #[test]
    fn request_time_past_the_percentage_is_throttled_in_proportion() {
        let quotas = TenantQuotas::default();
        quotas.set(Some(pb::Quota {
            request_percentage: Some(10),
            ..quota(None)
        }));
        // 10% of a thread: 100 ms of handling each second.
        assert_eq!(quotas.charge(Metered::RequestTime, 100_000), Duration::ZERO);
        let throttle = quotas.charge(Metered::RequestTime, 50_000);
        assert!(
            throttle > Duration::from_millis(450) && throttle <= Duration::from_millis(500),
            "{throttle:?}"
        );
        // Bytes are not limited by it.
        assert_eq!(
            quotas.charge(Metered::ProduceBytes, 1 << 30),
            Duration::ZERO
        );
    }

    #[tokio::test]
    async fn only_the_time_spent_polling_counts_as_handling() {
        let (answer, busy) = timed_polls(async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            std::thread::sleep(Duration::from_millis(20));
            7
        })
        .await;
        assert_eq!(answer, 7);
        assert!(
            busy >= Duration::from_millis(20) && busy < Duration::from_millis(150),
            "{busy:?}"
        );
    }

    #[test]
    fn each_principal_has_its_own_buckets_and_loses_them_with_its_quota() {
        let quotas = PrincipalQuotas::default();
        let limit = |rate| {
            std::collections::HashMap::from([(
                "alice".to_owned(),
                pb::Quota {
                    principal: Some("alice".into()),
                    ..quota(Some(rate))
                },
            )])
        };
        quotas.set(limit(1000));
        assert!(quotas.of("bob").is_none());
        let alice = quotas.of("alice").unwrap();
        alice.charge(Metered::ProduceBytes, 3000);
        // A new snapshot with the same quota keeps the debt.
        quotas.set(limit(1000));
        assert!(quotas.of("alice").unwrap().debt(Metered::ProduceBytes) > Duration::ZERO);
        quotas.set(std::collections::HashMap::new());
        assert!(quotas.of("alice").is_none());
    }
}
