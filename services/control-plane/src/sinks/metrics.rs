//! The sink runner's metrics, per tenant and sink: rows written and records dead-lettered
//! (counted on the replica that wrote them), the records its partitions here still have to
//! apply, and how long each transaction into the target database took. A tenant names its
//! sinks, so the pair is a capped label ([`LabelCap`]): sinks past the cap are counted
//! together under [`OTHER`], without a lag. A deleted sink's series go with it, and its
//! place under the cap is free for another sink.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use skein_ops::{LabelCap, OTHER};

/// Sinks named by their own label values; more share [`OTHER`].
pub const SINK_SERIES: usize = 1000;

/// A sink's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SinkLabels {
    pub tenant: String,
    pub sink: String,
}

/// Every metric of the sink runners in one process.
#[derive(Debug, Clone)]
pub struct SinkMetrics {
    rows: Family<SinkLabels, Counter>,
    dead_lettered: Family<SinkLabels, Counter>,
    lag: Family<SinkLabels, Gauge>,
    transaction_seconds: Family<SinkLabels, Histogram>,
    cap: Arc<LabelCap>,
}

impl Default for SinkMetrics {
    fn default() -> Self {
        Self::with_cap(SINK_SERIES)
    }
}

impl SinkMetrics {
    fn with_cap(sinks: usize) -> Self {
        Self {
            rows: Family::default(),
            dead_lettered: Family::default(),
            lag: Family::default(),
            transaction_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0005, 2.0, 16))
            }),
            cap: Arc::new(LabelCap::new(sinks)),
        }
    }

    /// Registers every family in `registry` (under its `skein` prefix).
    pub fn register(&self, registry: &mut Registry) {
        let sink = registry.sub_registry_with_prefix("sink");
        sink.register(
            "rows",
            "Rows a sink wrote into its target table (inserted or upserted)",
            self.rows.clone(),
        );
        sink.register(
            "dead_lettered",
            "Records a sink sent to its dead-letter topic",
            self.dead_lettered.clone(),
        );
        sink.register(
            "lag_records",
            "Records in a sink's partitions on this replica not yet applied (log end minus \
             stored position)",
            self.lag.clone(),
        );
        sink.register_with_unit(
            "transaction_duration",
            "Time from a sink transaction's start to its commit, rows and offsets together",
            Unit::Seconds,
            self.transaction_seconds.clone(),
        );
    }

    /// The labels `tenant`'s sink `sink` is counted under.
    pub fn labels(&self, tenant: &str, sink: &str) -> SinkLabels {
        if self.cap.label(&format!("{tenant}\u{0}{sink}")) == OTHER {
            return SinkLabels {
                tenant: OTHER.to_owned(),
                sink: OTHER.to_owned(),
            };
        }
        SinkLabels {
            tenant: tenant.to_owned(),
            sink: sink.to_owned(),
        }
    }

    /// The histogram a sink's worker observes its transactions in.
    pub fn transaction_histogram(&self, labels: &SinkLabels) -> Histogram {
        self.transaction_seconds.get_or_create(labels).clone()
    }

    pub(crate) fn counted(&self, labels: &SinkLabels, rows: u64, dead_lettered: u64) {
        if rows > 0 {
            self.rows.get_or_create(labels).inc_by(rows);
        }
        if dead_lettered > 0 {
            self.dead_lettered
                .get_or_create(labels)
                .inc_by(dead_lettered);
        }
    }

    /// Sets a sink's lag; sinks past the cap have none (one gauge cannot hold the lag of
    /// several sinks that each set it).
    pub(crate) fn set_lag(&self, labels: &SinkLabels, lag: i64) {
        if !(labels.tenant == OTHER && labels.sink == OTHER) {
            self.lag.get_or_create(labels).set(lag);
        }
    }

    /// Forgets the sinks for which `exists(tenant, sink)` says no: their series go, and
    /// their places under the cap are free for new sinks.
    pub(crate) fn retain_sinks(&self, exists: impl Fn(&str, &str) -> bool) {
        let gone = self.cap.retain(|key| {
            key.split_once('\u{0}')
                .is_some_and(|(tenant, sink)| exists(tenant, sink))
        });
        for key in gone {
            let Some((tenant, sink)) = key.split_once('\u{0}') else {
                continue;
            };
            let labels = SinkLabels {
                tenant: tenant.to_owned(),
                sink: sink.to_owned(),
            };
            self.rows.remove(&labels);
            self.dead_lettered.remove(&labels);
            self.lag.remove(&labels);
            self.transaction_seconds.remove(&labels);
        }
    }

    /// A sink's partitions left this replica: its lag is another's to say.
    pub(crate) fn forget_lag(&self, labels: &SinkLabels) {
        self.lag.remove(labels);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinks_past_the_cap_are_counted_together_without_a_lag() {
        let metrics = SinkMetrics::with_cap(1);
        let mut registry = Registry::with_prefix("skein");
        metrics.register(&mut registry);
        let first = metrics.labels("acme", "orders");
        let second = metrics.labels("acme", "payments");
        let third = metrics.labels("globex", "orders");
        assert_eq!(first.sink, "orders");
        assert_eq!(
            (second.tenant.as_str(), second.sink.as_str()),
            (OTHER, OTHER)
        );
        assert_eq!(second, third);
        metrics.counted(&second, 2, 0);
        metrics.counted(&third, 3, 1);
        metrics.set_lag(&first, 7);
        metrics.set_lag(&second, 5);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            text.contains(r#"skein_sink_rows_total{tenant="_other",sink="_other"} 5"#),
            "{text}"
        );
        assert!(
            text.contains(r#"skein_sink_lag_records{tenant="acme",sink="orders"} 7"#),
            "{text}"
        );
        assert!(
            !text.contains(r#"skein_sink_lag_records{tenant="_other""#),
            "{text}"
        );
    }

    #[test]
    fn a_deleted_sink_leaves_the_metrics_and_frees_its_place() {
        let metrics = SinkMetrics::with_cap(1);
        let mut registry = Registry::with_prefix("skein");
        metrics.register(&mut registry);
        let first = metrics.labels("acme", "orders");
        metrics.counted(&first, 4, 0);
        metrics.set_lag(&first, 2);
        // "orders" is deleted; the next sink takes its place under the cap.
        metrics.retain_sinks(|tenant, sink| (tenant, sink) != ("acme", "orders"));
        let next = metrics.labels("acme", "payments");
        assert_eq!(next.sink, "payments");
        metrics.counted(&next, 1, 0);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!text.contains(r#"sink="orders""#), "{text}");
        assert!(
            text.contains(r#"skein_sink_rows_total{tenant="acme",sink="payments"} 1"#),
            "{text}"
        );
        // Sinks that still exist keep theirs.
        metrics.retain_sinks(|_, _| true);
        assert_eq!(metrics.labels("acme", "payments").sink, "payments");
    }
}
