//! Broker settings.

use std::path::PathBuf;

use skein_log::LogConfig;

/// TLS between brokers: the certificate the inter-broker listener serves, and the
/// authorities a replica fetcher trusts when it connects to another broker's.
#[derive(Clone, Debug)]
pub struct InterBrokerTls {
    pub serve: std::sync::Arc<crate::tls::TlsFiles>,
    pub trust: skein_client::ClientTls,
}

#[derive(Clone, Debug)]
pub struct BrokerConfig {
    pub node_id: i32,
    /// `broker.rack`: the controller spreads each partition's replicas over racks.
    pub rack: Option<String>,
    /// Host and port clients are told to connect to.
    pub advertised_host: String,
    pub advertised_port: u16,
    /// The name of the listener at `advertised_host:advertised_port`, the one brokers
    /// replicate over (Kafka's `inter.broker.listener.name`).
    pub inter_broker_listener_name: String,
    /// The inter-broker listener's security protocol: PLAINTEXT, or SASL_PLAINTEXT or
    /// SASL_SSL, where brokers present their controller credentials to each other (required
    /// of a broker serving every tenant).
    pub inter_broker_protocol: crate::listeners::SecurityProtocol,
    /// TLS on a SASL_SSL inter-broker listener.
    pub inter_broker_tls: Option<InterBrokerTls>,
    /// Every listener's advertised address, as `NAME://host:port,...` (Kafka's
    /// `advertised.listeners`); registered with the controller so that each broker tells a
    /// client the other brokers' addresses on the listener the client uses. Empty: the
    /// inter-broker listener alone.
    pub advertised_listeners: String,
    pub data_dir: PathBuf,
    /// `socket.request.max.bytes`: a larger frame closes the connection.
    pub max_request_bytes: usize,
    /// `fetch.max.bytes`: the most record bytes one Fetch answer carries, whatever the
    /// request asks (the first partition may exceed it by one batch, as in Kafka).
    pub fetch_max_bytes: u64,
    /// `offsets.retention.minutes`: how long a group without members keeps its committed
    /// offsets after its last commit (Kafka's default: 7 days).
    pub offsets_retention: std::time::Duration,
    /// `producer.id.expiration.ms`: how long an idempotent producer's state is kept after
    /// its last write (Kafka's default: 1 day).
    pub producer_id_expiration: std::time::Duration,
    /// `transactional.id.expiration.ms`: how long a transactional id with no transaction
    /// open is kept after its last use (Kafka's default: 7 days).
    pub transactional_id_expiration: std::time::Duration,
    /// The most idempotent producer states (a producer id's recent sequences in one
    /// partition) one tenant holds; a producer new to a partition past it is refused
    /// (POLICY_VIOLATION) until idle ones expire (`producer.id.expiration.ms`).
    pub max_producer_states_per_tenant: usize,
    /// The most transactional ids one tenant holds; a new one past it is refused
    /// (POLICY_VIOLATION) until idle ones expire.
    pub max_transactional_ids: usize,
    /// `transaction.max.timeout.ms`: the longest transaction timeout a producer may ask
    /// for (Kafka's default: 15 minutes); a longer one is refused.
    pub transaction_max_timeout_ms: i32,
    /// `max.connections`: connections accepted beyond it are closed at once.
    pub max_connections: usize,
    /// `connections.max.idle.ms`: a connection that sends no request for this long is closed.
    pub connections_max_idle_ms: u64,
    /// The floors the topic configs a client sets are held to (CreateTopics, AlterConfigs,
    /// IncrementalAlterConfigs), if any; the admin API, an operator's, is not held to them.
    /// A broker serving every tenant, whose volume they share, holds its clients to
    /// [`crate::limits::TopicConfigFloors::default`]; a tenant's own broker to none.
    pub client_topic_floors: Option<crate::limits::TopicConfigFloors>,
    /// How long a connection to a SASL listener may take to authenticate before it is
    /// closed ([`crate::unauthenticated::AUTHENTICATE_WITHIN`] by default).
    pub sasl_authenticate_within: std::time::Duration,
    /// Whether Kafka clients may change ACLs (CreateAcls, DeleteAcls). The listener does not
    /// authenticate its clients, so by default they may not: the admin API changes ACLs.
    pub unauthenticated_acl_changes: bool,
    /// `auto.create.topics.enable`.
    pub auto_create_topics: bool,
    /// `num.partitions`: partitions of an auto-created topic.
    pub default_partitions: i32,
    /// `default.replication.factor`: replicas of an auto-created topic, and of one created
    /// without a replication factor of its own.
    pub default_replication_factor: i32,
    /// `group.initial.rebalance.delay.ms`: how long a new group waits for more members.
    pub group_initial_rebalance_delay_ms: u64,
    /// Topic defaults for the log (`retention.ms`, `segment.bytes`, ...).
    pub log: LogConfig,
    /// `replica.lag.time.max.ms`: a follower that has not caught up with its leader for this
    /// long leaves the ISR.
    pub replica_lag_time_max: std::time::Duration,
    /// `min.insync.replicas` for topics without their own.
    pub default_min_insync_replicas: i32,
    /// `compression.type` for topics without their own.
    pub default_compression: skein_log::topic_config::TopicCompression,
    /// `leader.replication.throttled.rate`: bytes per second served to catching-up
    /// followers of throttled replicas; `None`, no limit.
    pub leader_replication_throttled_rate: Option<u64>,
    /// `follower.replication.throttled.rate`: bytes per second a catching-up follower of
    /// throttled replicas fetches; `None`, no limit.
    pub follower_replication_throttled_rate: Option<u64>,
    /// SASL/OAUTHBEARER on the SASL listeners: how the JWTs clients present are checked
    /// (the gateway's keys and tenant claim); `None` offers PLAIN only.
    pub oauthbearer: Option<std::sync::Arc<OAuthBearer>>,
}

/// How a SASL/OAUTHBEARER token is checked: its signature and registered claims by `keys`
/// (configured ones, and an issuer's JWKS); `sub` names the principal and `tenant_claim`
/// its tenant, which must be the broker's.
#[derive(Debug)]
pub struct OAuthBearer {
    pub keys: std::sync::Arc<skein_token::jwks::TrustedKeys>,
    pub tenant_claim: String,
}

impl BrokerConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            node_id: 0,
            rack: None,
            advertised_host: "127.0.0.1".to_owned(),
            advertised_port: 9092,
            inter_broker_listener_name: "PLAINTEXT".to_owned(),
            inter_broker_protocol: crate::listeners::SecurityProtocol::Plaintext,
            inter_broker_tls: None,
            advertised_listeners: String::new(),
            data_dir: data_dir.into(),
            max_request_bytes: 100 * 1024 * 1024,
            fetch_max_bytes: 57_671_680,
            offsets_retention: std::time::Duration::from_secs(7 * 24 * 3600),
            producer_id_expiration: std::time::Duration::from_secs(24 * 3600),
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration: std::time::Duration::from_secs(7 * 24 * 3600),
            max_transactional_ids: 10_000,
            max_producer_states_per_tenant: 50_000,
            max_connections: 10_000,
            connections_max_idle_ms: 600_000,
            sasl_authenticate_within: crate::unauthenticated::AUTHENTICATE_WITHIN,
            client_topic_floors: None,
            unauthenticated_acl_changes: false,
            auto_create_topics: true,
            default_partitions: 1,
            default_replication_factor: 1,
            group_initial_rebalance_delay_ms: 3000,
            log: LogConfig::default(),
            replica_lag_time_max: std::time::Duration::from_secs(30),
            default_min_insync_replicas: 1,
            default_compression: skein_log::topic_config::TopicCompression::Producer,
            leader_replication_throttled_rate: None,
            follower_replication_throttled_rate: None,
            oauthbearer: None,
        }
    }
}
