//! The broker's metrics, under the names operators dashboard for Kafka and Redpanda: requests
//! and their latency per Kafka API, bytes and records in and out per topic, connections per
//! listener, ISR shrinks and expands, SASL rejections by reason, quota throttle time per
//! tenant, and (read at each scrape) the partitions and leaders it holds, those
//! under-replicated and under their minimum ISR, the cluster's offline ones, and the lag
//! of the consumer groups it coordinates.
//!
//! Topic and tenant labels are capped ([`LabelCap`]); every label value is cut to
//! [`skein_ops::MAX_LABEL_BYTES`]; one tenant's groups take at most a share of the lag
//! series; no label names a client, a connection or a record.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use skein_ops::LabelCap;

use crate::Broker;

/// Distinct topics the per-topic families name before folding the rest into `_other`.
const TOPIC_LABELS: usize = 1000;
/// Distinct tenants the per-tenant families name.
const TENANT_LABELS: usize = 200;
/// Consumer-group lag series one scrape reports at most (group x partition).
const LAG_SERIES: usize = 10_000;
/// The share of [`LAG_SERIES`] one tenant's groups take at most, so that one tenant's
/// groups cannot crowd every other tenant's out of the scrape.
const LAG_SERIES_PER_TENANT: usize = 1_000;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ApiLabels {
    pub(crate) api: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TopicLabels {
    pub(crate) topic: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ListenerLabels {
    pub(crate) listener: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabels {
    pub(crate) mechanism: String,
    pub(crate) reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TenantLabels {
    pub(crate) tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LagLabels {
    pub(crate) tenant: String,
    pub(crate) group: String,
    pub(crate) topic: String,
    pub(crate) partition: i32,
}

/// Every metric the broker keeps.
#[derive(Debug)]
pub struct BrokerMetrics {
    requests: Family<ApiLabels, Counter>,
    request_seconds: Family<ApiLabels, Histogram>,
    bytes_in: Family<TopicLabels, Counter>,
    records_in: Family<TopicLabels, Counter>,
    bytes_out: Family<TopicLabels, Counter>,
    replication_bytes_out: Counter,
    connections: Family<ListenerLabels, Gauge>,
    isr_shrinks: Counter,
    isr_expands: Counter,
    sasl_rejections: Family<ReasonLabels, Counter>,
    throttle_seconds: Family<TenantLabels, Counter<f64>>,
    partitions: Gauge,
    leaders: Gauge,
    under_replicated: Gauge,
    under_min_isr: Gauge,
    offline: Gauge,
    group_lag: Family<LagLabels, Gauge>,
    topics: LabelCap,
    tenants: LabelCap,
}

impl Default for BrokerMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(|| {
                // 0.1 ms to about 13 s.
                Histogram::new(exponential_buckets(0.0001, 2.0, 18))
            }),
            bytes_in: Family::default(),
            records_in: Family::default(),
            bytes_out: Family::default(),
            replication_bytes_out: Counter::default(),
            connections: Family::default(),
            isr_shrinks: Counter::default(),
            isr_expands: Counter::default(),
            sasl_rejections: Family::default(),
            throttle_seconds: Family::default(),
            partitions: Gauge::default(),
            leaders: Gauge::default(),
            under_replicated: Gauge::default(),
            under_min_isr: Gauge::default(),
            offline: Gauge::default(),
            group_lag: Family::default(),
            topics: LabelCap::new(TOPIC_LABELS),
            tenants: LabelCap::new(TENANT_LABELS),
        }
    }
}

impl BrokerMetrics {
    /// Registers every family in `registry` (under its `skein` prefix).
    pub fn register(&self, registry: &mut Registry) {
        let kafka = registry.sub_registry_with_prefix("kafka");
        kafka.register(
            "requests",
            "Kafka requests handled, by API",
            self.requests.clone(),
        );
        kafka.register_with_unit(
            "request_duration",
            "Time from a request's decoding to its answer, by API",
            Unit::Seconds,
            self.request_seconds.clone(),
        );
        kafka.register_with_unit(
            "throttle",
            "Time requests were held back by quotas, by tenant",
            Unit::Seconds,
            self.throttle_seconds.clone(),
        );
        kafka.register(
            "sasl_rejections",
            "SASL authentications refused, by mechanism and reason",
            self.sasl_rejections.clone(),
        );
        kafka.register(
            "connections",
            "Open client connections, by listener",
            self.connections.clone(),
        );
        let topics = registry.sub_registry_with_prefix("topic");
        topics.register(
            "bytes_in",
            "Record batch bytes produced, by topic",
            self.bytes_in.clone(),
        );
        topics.register(
            "records_in",
            "Records produced, by topic",
            self.records_in.clone(),
        );
        topics.register(
            "bytes_out",
            "Record batch bytes fetched by consumers, by topic",
            self.bytes_out.clone(),
        );
        let replication = registry.sub_registry_with_prefix("replication");
        replication.register(
            "bytes_out",
            "Record batch bytes fetched by follower replicas",
            self.replication_bytes_out.clone(),
        );
        replication.register(
            "isr_shrinks",
            "ISR shrinks made by this broker as leader",
            self.isr_shrinks.clone(),
        );
        replication.register(
            "isr_expands",
            "ISR expansions made by this broker as leader",
            self.isr_expands.clone(),
        );
        let partitions = registry.sub_registry_with_prefix("partitions");
        partitions.register(
            "replicas",
            "Partition replicas this broker holds",
            self.partitions.clone(),
        );
        partitions.register(
            "leaders",
            "Partitions this broker leads",
            self.leaders.clone(),
        );
        partitions.register(
            "under_replicated",
            "Partitions this broker leads whose ISR lacks a replica",
            self.under_replicated.clone(),
        );
        partitions.register(
            "under_min_isr",
            "Partitions this broker leads whose ISR is below min.insync.replicas",
            self.under_min_isr.clone(),
        );
        partitions.register(
            "offline",
            "Partitions of the cluster without a leader, as this broker's metadata has them",
            self.offline.clone(),
        );
        registry
            .sub_registry_with_prefix("consumer_group")
            .register(
                "lag",
                "Records between a group's committed offset and the partition's high watermark, \
             from the broker coordinating the group",
                self.group_lag.clone(),
            );
    }

    pub(crate) fn request(&self, api: kafka_protocol::messages::ApiKey, seconds: f64) {
        let labels = ApiLabels {
            api: format!("{api:?}"),
        };
        self.requests.get_or_create(&labels).inc();
        self.request_seconds.get_or_create(&labels).observe(seconds);
    }

    /// A produced batch of `records` records and `bytes` bytes to `topic` (as kept).
    pub(crate) fn produced(&self, topic: &str, records: u64, bytes: u64) {
        let labels = TopicLabels {
            topic: self.topics.label(topic),
        };
        self.bytes_in.get_or_create(&labels).inc_by(bytes);
        self.records_in.get_or_create(&labels).inc_by(records);
    }

    /// Bytes a consumer's fetch took from `topic`.
    pub(crate) fn fetched(&self, topic: &str, bytes: u64) {
        let labels = TopicLabels {
            topic: self.topics.label(topic),
        };
        self.bytes_out.get_or_create(&labels).inc_by(bytes);
    }

    pub(crate) fn replicated_out(&self, bytes: u64) {
        self.replication_bytes_out.inc_by(bytes);
    }

    pub(crate) fn connection_opened(&self, listener: &str) {
        self.connections
            .get_or_create(&ListenerLabels {
                listener: listener.to_owned(),
            })
            .inc();
    }

    pub(crate) fn connection_closed(&self, listener: &str) {
        self.connections
            .get_or_create(&ListenerLabels {
                listener: listener.to_owned(),
            })
            .dec();
    }

    pub(crate) fn isr_changed(&self, before: usize, after: usize) {
        if after < before {
            self.isr_shrinks.inc();
        } else if after > before {
            self.isr_expands.inc();
        }
    }

    pub(crate) fn sasl_rejected(&self, mechanism: &str, reason: &str) {
        self.sasl_rejections
            .get_or_create(&ReasonLabels {
                mechanism: mechanism.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub(crate) fn throttled(&self, tenant: &str, seconds: f64) {
        if seconds > 0.0 {
            self.throttle_seconds
                .get_or_create(&TenantLabels {
                    tenant: self.tenants.label(tenant),
                })
                .inc_by(seconds);
        }
    }

    /// Reads the partition gauges off the broker's metadata: called before each scrape.
    pub fn refresh(&self, broker: &Broker) {
        let node = broker.config.node_id;
        let (mut replicas, mut leaders, mut under, mut under_min, mut offline) = (0, 0, 0, 0, 0);
        for topic in broker.topics.list_all() {
            for index in 0..topic.partitions {
                let Some(placement) = topic.placement_of(index, node) else {
                    continue;
                };
                if placement.leader < 0 {
                    offline += 1;
                }
                if !placement.replicas.contains(&node) {
                    continue;
                }
                replicas += 1;
                if placement.leader != node {
                    continue;
                }
                leaders += 1;
                if placement.isr.len() < placement.replicas.len() {
                    under += 1;
                }
                if let Ok(partition) = broker.replicas.leader_of_any(&topic.name, index, -1) {
                    if partition.in_sync() < partition.min_insync_replicas() {
                        under_min += 1;
                    }
                }
            }
        }
        self.partitions.set(replicas);
        self.leaders.set(leaders);
        self.under_replicated.set(under);
        self.under_min_isr.set(under_min);
        self.offline.set(offline);
        self.refresh_lag(broker);
    }

    /// Each committed offset of the groups this broker coordinates against the high
    /// watermark of its partition, where this broker holds a replica of it. Groups and
    /// partitions that are gone leave the family with the next scrape.
    fn refresh_lag(&self, broker: &Broker) {
        self.group_lag.clear();
        let tenancy = broker.topics.tenancy();
        let mut series = 0;
        for groups in broker.groups.all() {
            let offsets = &groups.offsets;
            if !offsets.coordinating(&broker.replicas) {
                continue;
            }
            let scope = match tenancy.split(offsets.topic()).0 {
                Some(tenant) => crate::scope::Scope::Tenant(tenant.into()),
                None => crate::scope::Scope::Plain,
            };
            let tenant = broker.tenant_of(&scope).unwrap_or_default().to_owned();
            let mut tenants_series = 0;
            for (group, topic, partition, offset) in offsets.committed_offsets() {
                if series >= LAG_SERIES {
                    return;
                }
                if tenants_series >= LAG_SERIES_PER_TENANT {
                    break;
                }
                let Some(high_watermark) = broker
                    .replicas
                    .high_watermark_here(&scope.qualify(&topic), partition)
                else {
                    continue;
                };
                self.group_lag
                    .get_or_create(&LagLabels {
                        tenant: self.tenants.label(&tenant),
                        group: skein_ops::bounded(&group).to_owned(),
                        topic: self.topics.label(&topic),
                        partition,
                    })
                    .set((high_watermark - offset).max(0));
                series += 1;
                tenants_series += 1;
            }
        }
    }
}
