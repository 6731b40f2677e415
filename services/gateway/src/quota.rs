//! Tenant and principal quotas, enforced with token buckets: each quota holds one second of
//! its rate. A request is refused (429 / RESOURCE_EXHAUSTED, with the time after which it
//! may be retried) while a bucket is in debt. Produced bytes are taken before the write;
//! fetched bytes after the read, so a large read puts the bucket in debt and delays the next.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use skein_proto::controller as pb;
use skein_quota::Bucket;

use crate::auth::Caller;
use crate::cluster::View;
use crate::error::GatewayError;

/// What a quota limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metered {
    Requests,
    ProduceBytes,
    FetchBytes,
}

impl Metered {
    fn rate(self, quota: &pb::Quota) -> Option<i64> {
        match self {
            Self::Requests => quota.requests_per_sec,
            Self::ProduceBytes => quota.produce_bytes_per_sec,
            Self::FetchBytes => quota.fetch_bytes_per_sec,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Requests => "request rate",
            Self::ProduceBytes => "produce byte rate",
            Self::FetchBytes => "fetch byte rate",
        }
    }
}

type Key = (String, Option<String>, Metered);

/// The buckets of every tenant and principal this gateway has seen.
#[derive(Debug, Clone, Default)]
pub struct Quotas {
    buckets: Arc<Mutex<HashMap<Key, Bucket>>>,
}

impl Quotas {
    /// Refuses when a bucket of the caller is in debt or `amount` more would put it there
    /// (`amount` 0 only checks); otherwise takes `amount`.
    pub fn take(
        &self,
        view: &View,
        caller: &Caller,
        metered: Metered,
        amount: u64,
    ) -> Result<(), GatewayError> {
        self.apply(view, caller, metered, amount, true)
    }

    /// Takes `amount` whatever the level (bytes already read); later calls wait off the debt.
    pub fn charge(&self, view: &View, caller: &Caller, metered: Metered, amount: u64) {
        let _ = self.apply(view, caller, metered, amount, false);
    }

    fn apply(
        &self,
        view: &View,
        caller: &Caller,
        metered: Metered,
        amount: u64,
        refuse: bool,
    ) -> Result<(), GatewayError> {
        let Some(tenant) = view.tenant(&caller.tenant) else {
            return Ok(());
        };
        let limits: Vec<(Option<String>, f64)> = [None, Some(caller.name.clone())]
            .into_iter()
            .filter_map(|who| {
                let rate = metered.rate(tenant.quotas.get(&who)?)?;
                (rate > 0).then_some((who, rate as f64))
            })
            .collect();
        if limits.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock();
        let amount = amount as f64;
        let mut wait = Duration::ZERO;
        for (who, rate) in &limits {
            let bucket = buckets
                .entry((caller.tenant.clone(), who.clone(), metered))
                .or_insert_with(|| Bucket::new(*rate, now));
            bucket.refill(*rate, now);
            if refuse {
                // A request larger than a whole second of the rate may still pass when the
                // bucket is full, else it could never pass.
                let level = bucket.level();
                let short = if amount > *rate {
                    *rate - level
                } else {
                    amount - level
                };
                if level < 0.0 || short > 0.0 {
                    wait = wait.max(Duration::from_secs_f64(short.max(-level) / rate));
                }
            }
        }
        if refuse && !wait.is_zero() {
            return Err(GatewayError::QuotaExceeded {
                what: metered.name().to_owned(),
                retry_after: wait,
            });
        }
        for (who, _) in limits {
            if let Some(bucket) = buckets.get_mut(&(caller.tenant.clone(), who, metered)) {
                bucket.take(amount);
            }
        }
        Ok(())
    }

    /// How long the caller's bucket for `metered` stays in debt.
    pub fn debt(&self, caller: &Caller, metered: Metered) -> Duration {
        let buckets = self.buckets.lock();
        [None, Some(caller.name.clone())]
            .into_iter()
            .filter_map(|who| buckets.get(&(caller.tenant.clone(), who, metered)))
            .map(Bucket::debt)
            .max()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::TenantView;

    fn view(quota: pb::Quota) -> View {
        let mut tenant = TenantView::default();
        tenant.quotas.insert(quota.principal.clone(), quota);
        let mut view = View::default();
        view.tenants.insert("acme".into(), tenant);
        view
    }

    fn caller() -> Caller {
        Caller {
            tenant: "acme".into(),
            name: "alice".into(),
            expires_at: None,
            api_key: None,
        }
    }

    #[test]
    fn a_request_rate_refuses_the_request_past_one_second_of_it() {
        let view = view(pb::Quota {
            tenant: "acme".into(),
            principal: Some("alice".into()),
            requests_per_sec: Some(5),
            ..Default::default()
        });
        let quotas = Quotas::default();
        for _ in 0..5 {
            quotas.take(&view, &caller(), Metered::Requests, 1).unwrap();
        }
        match quotas.take(&view, &caller(), Metered::Requests, 1) {
            Err(GatewayError::QuotaExceeded { retry_after, .. }) => {
                assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_millis(200));
            }
            other => panic!("{other:?}"),
        }
        // Another principal of the tenant has no quota.
        let bob = Caller {
            name: "bob".into(),
            ..caller()
        };
        for _ in 0..50 {
            quotas.take(&view, &bob, Metered::Requests, 1).unwrap();
        }
    }

    #[test]
    fn charged_bytes_put_the_bucket_in_debt() {
        let view = view(pb::Quota {
            tenant: "acme".into(),
            principal: None,
            fetch_bytes_per_sec: Some(1000),
            ..Default::default()
        });
        let quotas = Quotas::default();
        quotas.charge(&view, &caller(), Metered::FetchBytes, 3000);
        let debt = quotas.debt(&caller(), Metered::FetchBytes);
        assert!(debt > Duration::from_millis(1500), "{debt:?}");
        assert!(matches!(
            quotas.take(&view, &caller(), Metered::FetchBytes, 0),
            Err(GatewayError::QuotaExceeded { .. })
        ));
    }
}
