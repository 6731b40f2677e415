//! The topics this broker serves: the one interface handlers read metadata through. Its
//! source is either a file under the data directory (a broker on its own) or the cluster's
//! controller: then changes are forwarded to it, and the metadata stream keeps this copy
//! current (`replace_all`).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::RwLock;
use uuid::Uuid;

use crate::controller_link::{Reason, TopicShape};
use crate::scope::{Scope, Tenancy};

/// What is known of one topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    /// Topic config overrides by Kafka name (checked before they are stored).
    pub configs: BTreeMap<String, String>,
    /// Which brokers hold each partition and which of them leads it.
    pub placement: Placement,
}

/// Where a topic's partitions live.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// A broker on its own holds the one replica of every partition and leads it, in epoch 0.
    #[default]
    Local,
    /// As the controller placed them, by partition index.
    Assigned(std::sync::Arc<[PartitionPlacement]>),
}

/// One partition's replicas (preferred leader first), in-sync replicas, leader and epochs,
/// as the controller last decided them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionPlacement {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
}

impl TopicInfo {
    /// Partition `index`'s placement; `local` is this broker's node id, the one replica of a
    /// [`Placement::Local`] topic. `None` for an index the topic does not have.
    pub fn placement_of(&self, index: i32, local: i32) -> Option<PartitionPlacement> {
        if index < 0 || index >= self.partitions {
            return None;
        }
        match &self.placement {
            Placement::Local => Some(PartitionPlacement {
                replicas: vec![local],
                isr: vec![local],
                leader: local,
                leader_epoch: 0,
                partition_epoch: 0,
            }),
            Placement::Assigned(partitions) => usize::try_from(index)
                .ok()
                .and_then(|i| partitions.get(i))
                .cloned(),
        }
    }
}

/// Per partition, whichever of two placements has the larger partition epoch.
fn newest(old: &Placement, new: &Placement) -> Placement {
    match (old, new) {
        (Placement::Assigned(old), Placement::Assigned(new)) => {
            let kept: Vec<PartitionPlacement> = new
                .iter()
                .enumerate()
                .map(|(i, fresh)| match old.get(i) {
                    Some(known) if known.partition_epoch > fresh.partition_epoch => known.clone(),
                    _ => fresh.clone(),
                })
                .collect();
            Placement::Assigned(kept.into())
        }
        _ => new.clone(),
    }
}

/// A broker of the cluster, as clients are told to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerEndpoint {
    pub node_id: i32,
    /// Its inter-broker listener's address.
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// Every listener it advertises, by name; empty when it registered only `host:port`.
    pub listeners: Vec<crate::listeners::Endpoint>,
    /// The one tenant it serves; `None`: every tenant.
    pub tenant: Option<String>,
}

impl BrokerEndpoint {
    /// The broker as a client of `listener` reaches it: at that listener's advertised
    /// address, as Kafka answers (every broker of a cluster has the same listener names);
    /// `None` when it lacks that listener. A broker that registered no listener list is
    /// reached at its one address.
    pub fn on(&self, listener: &str) -> Option<Self> {
        if self.listeners.is_empty() {
            return Some(self.clone());
        }
        let endpoint = self.listeners.iter().find(|e| e.name == listener)?;
        Some(Self {
            host: endpoint.host.clone(),
            port: i32::from(endpoint.port),
            ..self.clone()
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("topic name {name:?} is invalid: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("{partitions} is not a valid partition count")]
    InvalidPartitions { partitions: i32 },
    #[error("topic {name} already exists")]
    AlreadyExists { name: String },
    #[error("topic {name} does not exist")]
    NotFound { name: String },
    #[error("topic {name} has {current} partitions; a new count must be larger")]
    PartitionsNotIncreased { name: String, current: i32 },
    #[error(transparent)]
    Controller(#[from] crate::controller_link::ControllerError),
    #[error("failed to persist topics in {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The topics, read from memory; changed through their source.
#[derive(Debug)]
pub struct TopicRegistry {
    source: Source,
    /// Whether names are one tenant's plain ones or every tenant's qualified ones.
    tenancy: Tenancy,
    topics: RwLock<BTreeMap<String, TopicInfo>>,
    /// Ids of topics this broker deleted, or saw replaced under their name: a snapshot that
    /// still carries one was computed before the change and is not applied for that topic.
    /// This keeps the metadata in order (a deleted topic does not come back to life); it
    /// does not guard records, which the topic id on every partition directory keeps apart.
    retired: parking_lot::Mutex<std::collections::HashSet<Uuid>>,
    /// Topics this broker created, until a snapshot shows them (or [`FRESH_FOR`] passes): a
    /// snapshot computed before the creation does not remove them, so clients are not told
    /// a topic they just created is unknown. Also ordering only, like `retired`.
    fresh: parking_lot::Mutex<BTreeMap<String, (Uuid, std::time::Instant)>>,
    /// The cluster's live brokers that serve this broker's tenant, from the controller's
    /// snapshots (empty for a broker on its own).
    brokers: RwLock<Vec<BrokerEndpoint>>,
    /// Rations the questions [`TopicRegistry::lookup`] asks the controller.
    lookups: skein_quota::Lookups,
}

/// How long a topic created here is protected from snapshots that predate it.
const FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// Where topic changes go.
#[derive(Debug)]
enum Source {
    /// Lines `name partitions uuid [config=value ...]` in `<data>/topics`, replaced atomically.
    File(PathBuf),
    /// The cluster's controller, which answers with the changed topic.
    Controller(Box<crate::controller_link::ControllerLink>),
}

/// What a metadata snapshot changed.
#[derive(Debug, Default)]
pub struct Replaced {
    /// Topics gone (or recreated under a new id). Their logs are never served again under
    /// their name (a new topic has a new id); the broker deletes them after its grace.
    pub removed: Vec<TopicInfo>,
    /// Topics whose partition count or configs changed.
    pub changed: Vec<TopicInfo>,
}

/// Whether a name belongs to the cluster rather than a tenant: `__consumer_offsets`,
/// `__transaction_state` and every other name starting with `__`. No client may create,
/// delete, alter, produce to or read such a topic.
pub fn is_internal(name: &str) -> bool {
    name.starts_with("__")
}

/// A tenant's internal topics, which the controller makes (one partition each) when a
/// broker first needs them: its groups' committed offsets and its transactions.
pub const TENANT_INTERNAL: [&str; 2] = [crate::group::OFFSETS_TOPIC, crate::txn::TOPIC];

/// Refuses an internal name ([`is_internal`]) with INVALID_TOPIC_EXCEPTION's error.
pub fn refuse_internal(name: &str) -> Result<(), TopicError> {
    if is_internal(name) {
        return Err(TopicError::InvalidName {
            name: name.to_owned(),
            reason: "names starting with '__' are reserved for the cluster's internal topics",
        });
    }
    Ok(())
}

/// Kafka's rule for topic names: 1-249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`, and
/// not an internal name.
pub fn validate_name(name: &str) -> Result<(), TopicError> {
    let invalid = |reason| TopicError::InvalidName {
        name: name.to_owned(),
        reason,
    };
    refuse_internal(name)?;
    if name.is_empty() || name.len() > 249 {
        return Err(invalid("must be 1 to 249 characters"));
    }
    if name == "." || name == ".." {
        return Err(invalid("cannot be '.' or '..'"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(invalid(
            "may contain only ASCII letters, digits, '.', '_' and '-'",
        ));
    }
    Ok(())
}

impl TopicError {
    /// The error as a client of `scope` reads it: topics named as it knows them.
    pub fn shown(&self, scope: &Scope) -> String {
        let shown = |name: &str| scope.strip(name).unwrap_or(name).to_owned();
        match self {
            TopicError::InvalidName { name, reason } => TopicError::InvalidName {
                name: shown(name),
                reason,
            }
            .to_string(),
            TopicError::AlreadyExists { name } => {
                TopicError::AlreadyExists { name: shown(name) }.to_string()
            }
            TopicError::NotFound { name } => TopicError::NotFound { name: shown(name) }.to_string(),
            TopicError::PartitionsNotIncreased { name, current } => {
                TopicError::PartitionsNotIncreased {
                    name: shown(name),
                    current: *current,
                }
                .to_string()
            }
            other => other.to_string(),
        }
    }
}

/// A topic name as a client of `scope` gives it: Kafka's rule ([`validate_name`]), and
/// short enough to be kept with its tenant's ([`Scope::max_topic_name`]).
pub fn validate_client_name(scope: &Scope, name: &str) -> Result<(), TopicError> {
    validate_name(name)?;
    if name.len() > scope.max_topic_name() {
        return Err(TopicError::InvalidName {
            name: name.to_owned(),
            reason: "too long to keep beside its tenant's name (249 characters in all)",
        });
    }
    Ok(())
}

impl TopicRegistry {
    pub fn open(data_dir: &Path) -> Result<Self, TopicError> {
        let path = data_dir.join("topics");
        let mut topics = BTreeMap::new();
        if let Ok(text) = fs::read_to_string(&path) {
            for line in text.lines() {
                let mut parts = line.split_whitespace();
                let (Some(name), Some(partitions), Some(id)) =
                    (parts.next(), parts.next(), parts.next())
                else {
                    continue;
                };
                let (Ok(partitions), Ok(id)) = (partitions.parse(), Uuid::parse_str(id)) else {
                    continue;
                };
                if is_internal(name) {
                    continue;
                }
                let configs = parts
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                topics.insert(
                    name.to_owned(),
                    TopicInfo {
                        name: name.to_owned(),
                        id,
                        partitions,
                        configs,
                        placement: Placement::Local,
                    },
                );
            }
        }
        Ok(Self {
            source: Source::File(path),
            tenancy: Tenancy::One,
            topics: RwLock::new(topics),
            retired: parking_lot::Mutex::default(),
            fresh: parking_lot::Mutex::default(),
            brokers: RwLock::default(),
            lookups: skein_quota::Lookups::default(),
        })
    }

    /// Topics served from the controller, starting from `initial` (its first snapshot).
    pub fn controlled(
        link: crate::controller_link::ControllerLink,
        initial: Vec<TopicInfo>,
    ) -> Self {
        let topics = initial.into_iter().map(|t| (t.name.clone(), t)).collect();
        Self {
            tenancy: link.tenancy(),
            source: Source::Controller(Box::new(link)),
            topics: RwLock::new(topics),
            retired: parking_lot::Mutex::default(),
            fresh: parking_lot::Mutex::default(),
            brokers: RwLock::default(),
            lookups: skein_quota::Lookups::default(),
        }
    }

    /// Whether names are one tenant's plain ones or every tenant's qualified ones.
    pub fn tenancy(&self) -> Tenancy {
        self.tenancy
    }

    /// Whether a kept name is one of the cluster's internal topics (by its plain part).
    pub fn is_internal(&self, name: &str) -> bool {
        self.tenancy.is_internal(name)
    }

    /// Refuses a kept name of an internal topic ([`refuse_internal`] on its plain part).
    fn refuse_internal(&self, name: &str) -> Result<(), TopicError> {
        refuse_internal(self.tenancy.split(name).1)
    }

    /// Kafka's rule for a kept name ([`validate_name`]), and not internal by its plain part.
    fn validate(&self, name: &str) -> Result<(), TopicError> {
        validate_name(name)?;
        self.refuse_internal(name)
    }

    /// Whether the controller is the source of truth.
    pub fn is_controlled(&self) -> bool {
        matches!(self.source, Source::Controller(_))
    }

    /// Replaces every topic with the controller's view; says what changed. Snapshots may
    /// predate this broker's own changes: a retired id in `latest` is stale and ignored, and
    /// a topic created here a moment ago stays although `latest` lacks it.
    pub fn replace_all(&self, latest: Vec<TopicInfo>) -> Replaced {
        let mut retired = self.retired.lock();
        let mut fresh = self.fresh.lock();
        let mut topics = self.topics.write();
        let mut next: BTreeMap<String, TopicInfo> = BTreeMap::new();
        for topic in latest {
            // The control plane refuses such names from tenants; a catalog from before that
            // rule may still hold one, and its log would be the cluster's own. The offsets
            // topic the controller made is the cluster's.
            if retired.contains(&topic.id)
                || (self.is_internal(&topic.name)
                    && !TENANT_INTERNAL.contains(&self.tenancy.split(&topic.name).1))
            {
                continue;
            }
            if fresh
                .get(&topic.name)
                .is_some_and(|(id, _)| *id == topic.id)
            {
                fresh.remove(&topic.name); // confirmed
            }
            next.insert(topic.name.clone(), topic);
        }
        fresh.retain(|_, (_, since)| since.elapsed() < FRESH_FOR);
        for (name, (id, _)) in fresh.iter() {
            if let Some(local) = topics.get(name).filter(|t| t.id == *id) {
                next.entry(name.clone()).or_insert_with(|| local.clone());
            }
        }
        // A snapshot computed before this broker's own ISR change must not undo it: per
        // partition, the placement of the larger partition epoch stays.
        for (name, new) in next.iter_mut() {
            if let Some(old) = topics.get(name).filter(|old| old.id == new.id) {
                new.placement = newest(&old.placement, &new.placement);
            }
        }
        let mut replaced = Replaced::default();
        for (name, old) in topics.iter() {
            match next.get(name) {
                Some(new) if new.id == old.id => {
                    if new != old {
                        replaced.changed.push(new.clone());
                    }
                }
                Some(_) => {
                    retired.insert(old.id);
                    replaced.removed.push(old.clone());
                }
                None => replaced.removed.push(old.clone()),
            }
        }
        *topics = next;
        replaced
    }

    /// Takes a partition's placement as the controller just stored it (an ISR change this
    /// broker made), unless the registry already has a newer one.
    pub fn set_partition(&self, topic: &str, id: Uuid, index: i32, placement: PartitionPlacement) {
        let mut topics = self.topics.write();
        let Some(info) = topics.get_mut(topic).filter(|t| t.id == id) else {
            return;
        };
        let Placement::Assigned(partitions) = &info.placement else {
            return;
        };
        let Some(slot) = usize::try_from(index)
            .ok()
            .filter(|i| *i < partitions.len())
        else {
            return;
        };
        if partitions[slot].partition_epoch >= placement.partition_epoch {
            return;
        }
        let mut updated = partitions.to_vec();
        updated[slot] = placement;
        info.placement = Placement::Assigned(updated.into());
    }

    /// Replaces the cluster's brokers with the controller's view.
    pub fn set_brokers(&self, brokers: Vec<BrokerEndpoint>) {
        *self.brokers.write() = brokers;
    }

    /// The cluster's brokers serving this tenant (empty for a broker on its own).
    pub fn brokers(&self) -> Vec<BrokerEndpoint> {
        self.brokers.read().clone()
    }

    /// The topic of that name, asking the controller when the metadata stream has not
    /// brought it yet (a topic created a moment ago through another broker or the admin
    /// API): read-your-writes across every API.
    pub async fn lookup(&self, name: &str) -> Option<TopicInfo> {
        if self.is_internal(name) {
            return None;
        }
        if let Some(info) = self.get(name) {
            return Some(info);
        }
        // At most `Lookups::PER_SECOND` questions a second, and a NOT_FOUND believed for a
        // moment: a client naming ever new unknown topics cannot load the shared catalog.
        let Source::Controller(link) = &self.source else {
            return None;
        };
        if self.validate(name).is_err() {
            return None;
        }
        if !self.lookups.may_ask(name) {
            return None;
        }
        match link.describe_topic(name).await {
            Ok(info) => {
                if self.retired.lock().contains(&info.id) {
                    return None;
                }
                self.fresh
                    .lock()
                    .insert(name.to_owned(), (info.id, std::time::Instant::now()));
                let mut topics = self.topics.write();
                Some(topics.entry(name.to_owned()).or_insert(info).clone())
            }
            Err(e) => {
                if e.reason != Reason::NotFound {
                    tracing::debug!(topic = %name, error = %e, "could not ask the controller for a topic");
                }
                self.lookups.missed(name.to_owned());
                None
            }
        }
    }

    /// Whether the registry knows a topic of that name (without copying it).
    pub fn contains(&self, name: &str) -> bool {
        self.topics.read().contains_key(name)
    }

    pub fn get(&self, name: &str) -> Option<TopicInfo> {
        self.topics.read().get(name).cloned()
    }

    /// The topics a client of `scope` may see (not the internal ones), under the names the
    /// broker keeps: a tenant's own, or every topic on a broker serving one tenant.
    pub fn list_in(&self, scope: &Scope) -> Vec<TopicInfo> {
        self.topics
            .read()
            .values()
            .filter(|t| !self.is_internal(&t.name) && scope.strip(&t.name).is_some())
            .cloned()
            .collect()
    }

    /// The kept name of the topic with id `id`, without copying any topic: among the
    /// topics a client of `scope` may see, or with `None` among every topic (the internal
    /// ones too, for other brokers' replica fetches).
    pub fn name_of_id(&self, id: Uuid, scope: Option<&Scope>) -> Option<String> {
        self.topics
            .read()
            .values()
            .find(|t| {
                t.id == id
                    && scope.is_none_or(|scope| {
                        !self.is_internal(&t.name) && scope.strip(&t.name).is_some()
                    })
            })
            .map(|t| t.name.clone())
    }

    /// The brokers a client of `scope` is told of: those serving its tenant (one serving
    /// every tenant, or that tenant alone).
    pub fn brokers_for(&self, scope: &Scope) -> Vec<BrokerEndpoint> {
        let mut brokers = self.brokers();
        if let Some(tenant) = scope.tenant() {
            brokers.retain(|b| b.tenant.as_deref().is_none_or(|t| t == tenant));
        }
        brokers
    }

    /// Every topic, the cluster's internal ones (`__consumer_offsets`) included: the
    /// partitions this broker replicates.
    pub fn list_all(&self) -> Vec<TopicInfo> {
        self.topics.read().values().cloned().collect()
    }

    /// The `__consumer_offsets` of a scope's tenant in a cluster, asking the controller to
    /// make it the first time a group needs it; `None` for a broker on its own, whose
    /// offsets live in a local log, and while the controller cannot answer.
    pub async fn offsets_topic(&self, scope: &Scope) -> Option<TopicInfo> {
        self.internal_topic(scope, crate::group::OFFSETS_TOPIC)
            .await
    }

    /// One of a scope's tenant's internal topics (`__consumer_offsets`,
    /// `__transaction_state`) in a cluster, as [`TopicRegistry::offsets_topic`].
    pub async fn internal_topic(&self, scope: &Scope, internal: &str) -> Option<TopicInfo> {
        let kept = scope.qualify(internal);
        let name = kept.as_ref();
        let Source::Controller(link) = &self.source else {
            return None;
        };
        if let Some(info) = self.get(name) {
            return Some(info);
        }
        // The controller decides the partitions, replication and configs.
        let shape = TopicShape::Placed {
            partitions: 1,
            replication_factor: -1,
        };
        match link.create_topic(name, &shape, BTreeMap::new()).await {
            Ok(info) => {
                self.fresh
                    .lock()
                    .insert(name.to_owned(), (info.id, std::time::Instant::now()));
                let mut topics = self.topics.write();
                Some(topics.entry(name.to_owned()).or_insert(info).clone())
            }
            Err(e) => {
                tracing::warn!(error = %e, topic = internal, "the controller did not make an internal topic");
                None
            }
        }
    }

    pub async fn create(&self, name: &str, partitions: i32) -> Result<TopicInfo, TopicError> {
        let shape = TopicShape::Placed {
            partitions,
            replication_factor: 1,
        };
        self.create_checked(name, &shape, BTreeMap::new(), false)
            .await
    }

    /// Creates a topic, or with `validate_only` only checks that it could be created. The
    /// replicas matter only to a controller (a broker on its own has one replica, and its
    /// caller checks that an assignment names only this broker).
    pub async fn create_checked(
        &self,
        name: &str,
        shape: &TopicShape,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicInfo, TopicError> {
        self.validate(name)?;
        let partitions = match shape {
            TopicShape::Placed { partitions, .. } => *partitions,
            TopicShape::Assigned(assigned) => i32::try_from(assigned.len()).unwrap_or(i32::MAX),
        };
        if !(1..=100_000).contains(&partitions) {
            return Err(TopicError::InvalidPartitions { partitions });
        }
        if let Source::Controller(link) = &self.source {
            if self.get(name).is_some() {
                return Err(TopicError::AlreadyExists {
                    name: name.to_owned(),
                });
            }
            if validate_only {
                return Ok(TopicInfo {
                    name: name.to_owned(),
                    id: Uuid::nil(),
                    partitions,
                    configs,
                    placement: Placement::Local,
                });
            }
            let info =
                link.create_topic(name, shape, configs)
                    .await
                    .map_err(|e| match e.reason {
                        Reason::AlreadyExists => TopicError::AlreadyExists {
                            name: name.to_owned(),
                        },
                        _ => TopicError::Controller(e),
                    })?;
            self.fresh
                .lock()
                .insert(name.to_owned(), (info.id, std::time::Instant::now()));
            self.topics.write().insert(name.to_owned(), info.clone());
            return Ok(info);
        }
        let mut topics = self.topics.write();
        if topics.contains_key(name) {
            return Err(TopicError::AlreadyExists {
                name: name.to_owned(),
            });
        }
        let info = TopicInfo {
            name: name.to_owned(),
            id: Uuid::new_v4(),
            partitions,
            configs,
            placement: Placement::Local,
        };
        if validate_only {
            return Ok(info);
        }
        topics.insert(name.to_owned(), info.clone());
        if let Err(e) = self.persist(&topics) {
            topics.remove(name);
            return Err(e);
        }
        Ok(info)
    }

    /// Replaces a topic's config overrides (already checked by the caller).
    pub async fn set_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicInfo, TopicError> {
        self.refuse_internal(name)?;
        if let Source::Controller(link) = &self.source {
            let info = link.set_configs(name, configs).await?;
            self.topics.write().insert(name.to_owned(), info.clone());
            return Ok(info);
        }
        let mut topics = self.topics.write();
        let Some(info) = topics.get(name).cloned() else {
            return Err(TopicError::NotFound {
                name: name.to_owned(),
            });
        };
        let updated = TopicInfo {
            configs,
            ..info.clone()
        };
        topics.insert(name.to_owned(), updated.clone());
        if let Err(e) = self.persist(&topics) {
            topics.insert(name.to_owned(), info);
            return Err(e);
        }
        Ok(updated)
    }

    /// Removes a topic; its logs are the caller's to delete.
    pub async fn delete(&self, name: &str) -> Result<TopicInfo, TopicError> {
        self.refuse_internal(name)?;
        if let Source::Controller(link) = &self.source {
            let Some(info) = self.get(name) else {
                return Err(TopicError::NotFound {
                    name: name.to_owned(),
                });
            };
            link.delete_topic(name).await.map_err(|e| match e.reason {
                Reason::NotFound => TopicError::NotFound {
                    name: name.to_owned(),
                },
                _ => TopicError::Controller(e),
            })?;
            self.retired.lock().insert(info.id);
            self.topics.write().remove(name);
            return Ok(info);
        }
        let mut topics = self.topics.write();
        let Some(info) = topics.remove(name) else {
            return Err(TopicError::NotFound {
                name: name.to_owned(),
            });
        };
        if let Err(e) = self.persist(&topics) {
            topics.insert(name.to_owned(), info);
            return Err(e);
        }
        Ok(info)
    }

    /// Raises a topic's partition count (partitions are never removed).
    /// Grows a topic to `count` partitions; `assigned`, when not empty, names each new
    /// partition's replicas (checked by the controller, or by the caller on its own).
    pub async fn add_partitions(
        &self,
        name: &str,
        count: i32,
        assigned: &[Vec<i32>],
        validate_only: bool,
    ) -> Result<TopicInfo, TopicError> {
        self.refuse_internal(name)?;
        let Some(info) = self.get(name) else {
            return Err(TopicError::NotFound {
                name: name.to_owned(),
            });
        };
        if count <= info.partitions {
            return Err(TopicError::PartitionsNotIncreased {
                name: name.to_owned(),
                current: info.partitions,
            });
        }
        if count > 100_000 {
            return Err(TopicError::InvalidPartitions { partitions: count });
        }
        let updated = TopicInfo {
            partitions: count,
            ..info.clone()
        };
        if validate_only {
            return Ok(updated);
        }
        if let Source::Controller(link) = &self.source {
            let grown = link.create_partitions(name, count, assigned).await?;
            self.topics.write().insert(name.to_owned(), grown.clone());
            return Ok(grown);
        }
        let mut topics = self.topics.write();
        topics.insert(name.to_owned(), updated.clone());
        if let Err(e) = self.persist(&topics) {
            topics.insert(name.to_owned(), info);
            return Err(e);
        }
        Ok(updated)
    }

    fn persist(&self, topics: &BTreeMap<String, TopicInfo>) -> Result<(), TopicError> {
        let Source::File(path) = &self.source else {
            return Ok(()); // the controller holds them
        };
        let io = |source| TopicError::Io {
            path: path.clone(),
            source,
        };
        let tmp = path.with_extension("tmp");
        let mut file = fs::File::create(&tmp).map_err(io)?;
        for t in topics.values() {
            write!(file, "{} {} {}", t.name, t.partitions, t.id).map_err(io)?;
            for (k, v) in &t.configs {
                write!(file, " {k}={v}").map_err(io)?;
            }
            writeln!(file).map_err(io)?;
        }
        file.sync_all().map_err(io)?;
        fs::rename(&tmp, path).map_err(io)
    }
}

#[cfg(test)]
mod replace_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn topic(name: &str, id: Uuid, partitions: i32) -> TopicInfo {
        TopicInfo {
            name: name.to_owned(),
            id,
            partitions,
            configs: BTreeMap::new(),
            placement: Placement::Local,
        }
    }

    #[test]
    fn snapshots_that_predate_this_brokers_own_changes_do_not_undo_them() {
        let dir = tempfile::tempdir().unwrap();
        let registry = TopicRegistry::open(dir.path()).unwrap();
        let (a, b, a2) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let first = registry.replace_all(vec![topic("a", a, 1), topic("b", b, 1)]);
        assert!(first.removed.is_empty());
        // `a` grows: a change, not a removal.
        let grown = registry.replace_all(vec![topic("a", a, 3), topic("b", b, 1)]);
        assert_eq!(grown.changed, vec![topic("a", a, 3)]);
        assert!(grown.removed.is_empty());
        // Deleted here: a snapshot computed before the deletion does not bring it back.
        registry.retired.lock().insert(a);
        registry.topics.write().remove("a");
        let stale = registry.replace_all(vec![topic("a", a, 3), topic("b", b, 1)]);
        assert!(stale.removed.is_empty() && stale.changed.is_empty());
        assert!(registry.get("a").is_none());
        // Created here: a snapshot computed before the creation does not remove it, and
        // the next one confirms it.
        registry
            .fresh
            .lock()
            .insert("a".to_owned(), (a2, std::time::Instant::now()));
        registry
            .topics
            .write()
            .insert("a".to_owned(), topic("a", a2, 2));
        let stale = registry.replace_all(vec![topic("b", b, 1)]);
        assert!(stale.removed.is_empty(), "{stale:?}");
        assert_eq!(registry.get("a").unwrap().id, a2);
        registry.replace_all(vec![topic("a", a2, 2), topic("b", b, 1)]);
        assert!(registry.fresh.lock().is_empty());
        // Deleted elsewhere: the next snapshot removes it (not retired: absence may be stale
        // only for topics created here).
        let gone = registry.replace_all(vec![topic("b", b, 1)]);
        assert_eq!(gone.removed, vec![topic("a", a2, 2)]);
        // Replaced under its name: the old id is retired.
        let b2 = Uuid::new_v4();
        let replaced = registry.replace_all(vec![topic("b", b2, 1)]);
        assert_eq!(replaced.removed, vec![topic("b", b, 1)]);
        let stale = registry.replace_all(vec![topic("b", b, 1)]);
        assert!(registry.get("b").is_none(), "{stale:?}");
    }
}
