//! Long streams (a Server-Sent Events tail, a gRPC Consume) hold a task, buffers and a
//! client's connection each, and their reads join their tenant's long polls
//! ([`crate::long_polls`]). So that one tenant's streams cannot take every other tenant's
//! place on a replica, it holds at most
//! [`StreamLimits::per_tenant`] open streams of one tenant and [`StreamLimits::total`] in
//! all; past either a new stream is refused (429, RESOURCE_EXHAUSTED) until one ends. A
//! stream whose reads fail waits before trying again, longer each time and by a random part
//! ([`Backoff`]), so failing streams do not hammer a broker.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::GatewayError;

/// How many streams a gateway replica holds open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    pub per_tenant: usize,
    pub total: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            per_tenant: 100,
            total: 1000,
        }
    }
}

#[derive(Debug, Default)]
struct Open {
    by_tenant: HashMap<String, usize>,
    total: usize,
}

/// The streams open on this replica.
#[derive(Debug)]
pub struct Streams {
    limits: StreamLimits,
    open: Mutex<Open>,
}

/// One open stream's place; dropped when the stream ends.
#[derive(Debug)]
pub struct StreamSlot {
    of: Arc<Streams>,
    tenant: String,
}

impl Streams {
    pub fn new(limits: StreamLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            open: Mutex::default(),
        })
    }

    /// A place for one more stream of `tenant`, or why there is none.
    pub fn open(self: &Arc<Self>, tenant: &str) -> Result<StreamSlot, GatewayError> {
        let mut open = self.open.lock();
        let of_tenant = open.by_tenant.get(tenant).copied().unwrap_or(0);
        if of_tenant >= self.limits.per_tenant || open.total >= self.limits.total {
            return Err(GatewayError::QuotaExceeded {
                what: "open streams".to_owned(),
                retry_after: Duration::from_secs(1),
            });
        }
        *open.by_tenant.entry(tenant.to_owned()).or_default() += 1;
        open.total += 1;
        Ok(StreamSlot {
            of: Arc::clone(self),
            tenant: tenant.to_owned(),
        })
    }

    /// How many streams are open, of `tenant` and in all.
    pub fn count(&self, tenant: &str) -> (usize, usize) {
        let open = self.open.lock();
        (open.by_tenant.get(tenant).copied().unwrap_or(0), open.total)
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.of.open.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_tenant.get_mut(&self.tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.by_tenant.remove(&self.tenant);
            }
        }
    }
}

/// Waits between a stream's failed reads: from [`Backoff::FIRST`] doubling to
/// [`Backoff::MOST`], each wait between half and all of its step, chosen at random; a
/// success starts it over.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    pub const FIRST: Duration = Duration::from_millis(250);
    pub const MOST: Duration = Duration::from_secs(10);

    /// The wait after one more failure.
    pub fn after_failure(&mut self) -> Duration {
        let step = Self::FIRST
            .saturating_mul(1 << self.failures.min(10))
            .min(Self::MOST);
        self.failures = self.failures.saturating_add(1);
        let half = step / 2;
        half + half.mul_f64(rand::random::<f64>())
    }

    /// After a success.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_tenant_cannot_take_every_place_and_places_come_back() {
        let streams = Streams::new(StreamLimits {
            per_tenant: 3,
            total: 5,
        });
        let acme: Vec<StreamSlot> = (0..3).map(|_| streams.open("acme").unwrap()).collect();
        assert!(matches!(
            streams.open("acme"),
            Err(GatewayError::QuotaExceeded { .. })
        ));
        // Another tenant still gets its places, up to the total.
        let globex: Vec<StreamSlot> = (0..2).map(|_| streams.open("globex").unwrap()).collect();
        assert!(streams.open("initech").is_err());
        drop(acme);
        assert_eq!(streams.count("acme"), (0, 2));
        assert!(streams.open("initech").is_ok());
        drop(globex);
    }

    #[test]
    fn waits_grow_to_a_bound_with_jitter_and_start_over_after_a_success() {
        let mut backoff = Backoff::default();
        let first = backoff.after_failure();
        assert!(first >= Backoff::FIRST / 2 && first <= Backoff::FIRST);
        let waits: Vec<Duration> = (0..20).map(|_| backoff.after_failure()).collect();
        assert!(waits.iter().all(|w| *w <= Backoff::MOST));
        assert!(waits[10..].iter().all(|w| *w >= Backoff::MOST / 2));
        // Not all the same: jittered.
        assert!(waits[10..].windows(2).any(|w| w[0] != w[1]));
        backoff.reset();
        assert!(backoff.after_failure() <= Backoff::FIRST);
    }
}
