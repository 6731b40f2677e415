//! [`ClusterView`]: what the gateway knows of the cluster, from the controller's metadata
//! stream: per tenant, the brokers that serve it, its topics, its ACL bindings and its
//! quotas. The stream is followed for as long as the gateway runs, reconnecting (to another
//! control-plane replica when needed) after a failure.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use skein_auth::AclBinding;
use skein_proto::controller as pb;
use skein_proto::replicas::ControllerReplicas;
use tokio::sync::watch;

/// One tenant's part of the cluster.
#[derive(Debug, Clone, Default)]
pub struct TenantView {
    /// `host:port` of the brokers serving the tenant's Kafka listener.
    pub brokers: Vec<String>,
    /// Whether those brokers serve every tenant: the gateway then logs in to their
    /// inter-broker listener with its controller credential, acting for this tenant.
    pub shared: bool,
    /// Topic name → partition count.
    pub topics: BTreeMap<String, TopicSummary>,
    pub acls: Vec<AclBinding>,
    /// The tenant-wide quota (`None` key) and per-principal quotas (principal name).
    pub quotas: HashMap<Option<String>, pb::Quota>,
}

/// A topic as the controller describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSummary {
    pub id: String,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
}

/// The cluster at one snapshot.
#[derive(Debug, Default)]
pub struct View {
    /// Whether a snapshot has arrived at all.
    pub received: bool,
    pub tenants: HashMap<String, TenantView>,
    /// The ids of the API keys in force.
    pub api_keys: HashSet<String>,
}

impl View {
    /// The view a snapshot describes.
    pub fn from_snapshot(snapshot: &pb::MetadataSnapshot) -> Self {
        let mut tenants: HashMap<String, TenantView> = HashMap::new();
        // Brokers serving every tenant (a cluster has those or brokers of one tenant each).
        let mut shared = Vec::new();
        for broker in &snapshot.brokers {
            let address = format!("{}:{}", broker.host, broker.port);
            match &broker.tenant {
                Some(tenant) => tenants
                    .entry(tenant.clone())
                    .or_default()
                    .brokers
                    .push(address),
                None => shared.push(address),
            }
        }
        // The cluster's internal topics (`__consumer_offsets`) are no tenant's to read,
        // write or list.
        for topic in snapshot.topics.iter().filter(|t| !t.name.starts_with("__")) {
            tenants
                .entry(topic.tenant.clone())
                .or_default()
                .topics
                .insert(
                    topic.name.clone(),
                    TopicSummary {
                        id: topic.id.clone(),
                        partitions: i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX),
                        configs: topic.configs.clone().into_iter().collect(),
                    },
                );
        }
        for acl in &snapshot.acls {
            match skein_proto::acl::from_wire(acl) {
                Ok(binding) => tenants
                    .entry(acl.tenant.clone())
                    .or_default()
                    .acls
                    .push(binding),
                Err(e) => tracing::warn!(error = %e, "skipping an ACL binding that does not parse"),
            }
        }
        for quota in &snapshot.quotas {
            tenants
                .entry(quota.tenant.clone())
                .or_default()
                .quotas
                .insert(quota.principal.clone(), quota.clone());
        }
        // Every tenant the snapshot names is served by the brokers of every tenant.
        for tenant in snapshot
            .topics
            .iter()
            .map(|t| &t.tenant)
            .chain(snapshot.acls.iter().map(|a| &a.tenant))
            .chain(snapshot.quotas.iter().map(|q| &q.tenant))
        {
            tenants.entry(tenant.clone()).or_default();
        }
        for tenant in tenants.values_mut() {
            if tenant.brokers.is_empty() && !shared.is_empty() {
                tenant.brokers.clone_from(&shared);
                tenant.shared = true;
            }
            tenant.brokers.sort();
        }
        Self {
            received: true,
            tenants,
            api_keys: snapshot.api_keys.iter().cloned().collect(),
        }
    }

    pub fn tenant(&self, name: &str) -> Option<&TenantView> {
        self.tenants.get(name)
    }
}

/// The latest [`View`], shared by every request.
#[derive(Debug, Clone)]
pub struct ClusterView {
    current: watch::Receiver<Arc<View>>,
}

impl ClusterView {
    /// Follows the controller's metadata stream in a task of its own.
    pub fn follow(replicas: ControllerReplicas) -> (Self, tokio::task::JoinHandle<()>) {
        let (sender, current) = watch::channel(Arc::new(View::default()));
        let task = tokio::spawn(async move {
            loop {
                match replicas.watch().await {
                    Ok(mut snapshots) => loop {
                        match snapshots.message().await {
                            Ok(Some(snapshot)) => {
                                let view = View::from_snapshot(&snapshot);
                                if sender.send(Arc::new(view)).is_err() {
                                    return;
                                }
                            }
                            Ok(None) => break,
                            Err(status) => {
                                tracing::warn!(%status, "metadata stream broke; reconnecting");
                                break;
                            }
                        }
                    },
                    Err(status) => {
                        tracing::warn!(%status, "cannot reach the controller; retrying");
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        (Self { current }, task)
    }

    /// A view that never changes (unit tests).
    pub fn fixed(view: View) -> Self {
        // A receiver keeps the last value after its sender is gone.
        let (_, current) = watch::channel(Arc::new(view));
        Self { current }
    }

    /// The latest view.
    pub fn now(&self) -> Arc<View> {
        Arc::clone(&self.current.borrow())
    }

    /// Waits until the view changes (or `timeout` passes).
    pub async fn changed(&self, timeout: Duration) {
        let mut current = self.current.clone();
        let _ = tokio::time::timeout(timeout, current.changed()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(node_id: i32, tenant: Option<&str>) -> pb::BrokerEndpoint {
        pb::BrokerEndpoint {
            node_id,
            host: format!("10.0.0.{node_id}"),
            port: 9093,
            tenant: tenant.map(str::to_owned),
            ..Default::default()
        }
    }

    fn topic(tenant: &str, name: &str) -> pb::Topic {
        pb::Topic {
            tenant: tenant.to_owned(),
            name: name.to_owned(),
            ..Default::default()
        }
    }

    #[test]
    fn brokers_of_every_tenant_serve_each_tenant_through_a_login() {
        let shared = View::from_snapshot(&pb::MetadataSnapshot {
            brokers: vec![broker(2, None), broker(1, None)],
            topics: vec![topic("acme", "orders"), topic("globex", "orders")],
            ..Default::default()
        });
        for tenant in ["acme", "globex"] {
            let view = shared.tenant(tenant).unwrap();
            assert!(view.shared);
            assert_eq!(view.brokers, ["10.0.0.1:9093", "10.0.0.2:9093"]);
            assert!(view.topics.contains_key("orders"));
        }
        let own = View::from_snapshot(&pb::MetadataSnapshot {
            brokers: vec![broker(1, Some("acme"))],
            topics: vec![topic("acme", "orders"), topic("globex", "orders")],
            ..Default::default()
        });
        let acme = own.tenant("acme").unwrap();
        assert!(!acme.shared);
        assert_eq!(acme.brokers, ["10.0.0.1:9093"]);
        assert!(own.tenant("globex").unwrap().brokers.is_empty());
    }
}
