//! DescribeConfigs, IncrementalAlterConfigs and the legacy AlterConfigs for topics, and
//! DescribeConfigs of the
//! broker: its own settings under Kafka's broker names (`log.retention.ms`,
//! `default.replication.factor`, `broker.rack`, ...), read-only, each with its type and
//! whether it is the default.

use skein_auth::Operation;

use crate::authz::Access;
use kafka_protocol::messages::ApiKey;

use crate::router::{Api, Call};
use crate::scope::Scope;

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as AlterConfigsResponseEntry;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::{Broker, BrokerConfig};
use skein_log::topic_config::{self, TopicSettings, NAMES};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// `config_source` values.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;
const SET: i8 = 0;
const DELETE: i8 = 1;
/// `config_type` values (DescribeConfigs v3).
const BOOLEAN: i8 = 1;
const STRING: i8 = 2;
const INT: i8 = 3;
const LONG: i8 = 5;
const DOUBLE: i8 = 6;
const LIST: i8 = 7;

/// Each topic config: its type, and the broker setting that is its default (Kafka's names;
/// empty for one with none).
const TOPIC_CONFIGS: &[(&str, i8, &str)] = &[
    ("cleanup.policy", LIST, "log.cleanup.policy"),
    ("compression.type", STRING, "compression.type"),
    (
        "delete.retention.ms",
        LONG,
        "log.cleaner.delete.retention.ms",
    ),
    ("flush.messages", LONG, "log.flush.interval.messages"),
    ("flush.ms", LONG, "log.flush.interval.ms"),
    ("follower.replication.throttled.replicas", LIST, ""),
    ("index.interval.bytes", INT, "log.index.interval.bytes"),
    // A topic's own: no broker setting stands behind it.
    ("leader.replication.throttled.replicas", LIST, ""),
    ("max.message.bytes", INT, "message.max.bytes"),
    (
        "message.timestamp.type",
        STRING,
        "log.message.timestamp.type",
    ),
    (
        "min.cleanable.dirty.ratio",
        DOUBLE,
        "log.cleaner.min.cleanable.ratio",
    ),
    ("min.insync.replicas", INT, "min.insync.replicas"),
    ("retention.bytes", LONG, "log.retention.bytes"),
    ("retention.ms", LONG, "log.retention.ms"),
    ("segment.bytes", INT, "log.segment.bytes"),
    ("segment.index.bytes", INT, "log.index.size.max.bytes"),
    ("segment.ms", LONG, "log.roll.ms"),
    (
        "unclean.leader.election.enable",
        BOOLEAN,
        "unclean.leader.election.enable",
    ),
];

/// The broker configs IncrementalAlterConfigs may change while the broker runs (Kafka's
/// dynamic broker configs), as the partition reassignment tool's `--throttle` does.
const LEADER_RATE: &str = "leader.replication.throttled.rate";
const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";

/// Kafka's config source of a dynamic config of one broker.
const DYNAMIC_BROKER_CONFIG: i8 = 2;

/// A replication throttle's rate as Kafka shows it: `Long.MAX_VALUE` for no limit.
fn rate(rate: Option<u64>) -> String {
    rate.map_or(i64::MAX, |rate| i64::try_from(rate).unwrap_or(i64::MAX))
        .to_string()
}

fn topic_config_type(name: &str) -> i8 {
    TOPIC_CONFIGS
        .iter()
        .find(|(topic, _, _)| *topic == name)
        .map_or(STRING, |(_, kind, _)| *kind)
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn entries(
    settings: &TopicSettings,
    overrides: &BTreeMap<String, String>,
    wanted: Option<&Vec<StrBytes>>,
    override_source: i8,
) -> Vec<DescribeConfigsResourceResult> {
    NAMES
        .iter()
        .filter(|name| wanted.is_none_or(|w| w.iter().any(|k| k.as_str() == **name)))
        .filter_map(|name| {
            let value = topic_config::value_of(settings, name)?;
            let source = if overrides.contains_key(*name) {
                override_source
            } else {
                DEFAULT_CONFIG
            };
            Some(
                DescribeConfigsResourceResult::default()
                    .with_name(s(name))
                    .with_value(Some(s(&value)))
                    .with_config_source(source)
                    .with_config_type(topic_config_type(name)),
            )
        })
        .collect()
}

/// Broker settings a tenant of a broker serving every tenant is not shown.
const CLUSTER_ONLY: &[&str] = &["advertised.listeners", "log.dirs"];

/// The broker's settings as (Kafka name, value, type), topic defaults included.
fn broker_settings(
    config: &BrokerConfig,
    defaults: &TopicSettings,
) -> Vec<(&'static str, String, i8)> {
    let millis = |d: std::time::Duration| d.as_millis().to_string();
    let mut settings = vec![
        ("broker.id", config.node_id.to_string(), INT),
        ("node.id", config.node_id.to_string(), INT),
        (
            "broker.rack",
            config.rack.clone().unwrap_or_default(),
            STRING,
        ),
        (
            "advertised.listeners",
            format!(
                "PLAINTEXT://{}:{}",
                config.advertised_host, config.advertised_port
            ),
            STRING,
        ),
        (
            "log.dirs",
            config.data_dir.join("logs").display().to_string(),
            STRING,
        ),
        (
            "socket.request.max.bytes",
            config.max_request_bytes.to_string(),
            INT,
        ),
        ("fetch.max.bytes", config.fetch_max_bytes.to_string(), INT),
        (
            "offsets.retention.minutes",
            (config.offsets_retention.as_secs() / 60).to_string(),
            INT,
        ),
        (
            "producer.id.expiration.ms",
            millis(config.producer_id_expiration),
            INT,
        ),
        ("max.connections", config.max_connections.to_string(), INT),
        (
            "connections.max.idle.ms",
            config.connections_max_idle_ms.to_string(),
            LONG,
        ),
        (
            "auto.create.topics.enable",
            config.auto_create_topics.to_string(),
            BOOLEAN,
        ),
        ("num.partitions", config.default_partitions.to_string(), INT),
        (
            "default.replication.factor",
            config.default_replication_factor.to_string(),
            INT,
        ),
        (
            "group.initial.rebalance.delay.ms",
            config.group_initial_rebalance_delay_ms.to_string(),
            INT,
        ),
        (
            "replica.lag.time.max.ms",
            millis(config.replica_lag_time_max),
            LONG,
        ),
        (
            LEADER_RATE,
            rate(config.leader_replication_throttled_rate),
            LONG,
        ),
        (
            FOLLOWER_RATE,
            rate(config.follower_replication_throttled_rate),
            LONG,
        ),
    ];
    for (topic, kind, name) in TOPIC_CONFIGS.iter().filter(|(_, _, name)| !name.is_empty()) {
        if let Some(value) = topic_config::value_of(defaults, topic) {
            settings.push((name, value, *kind));
        }
    }
    settings
}

/// DescribeConfigs of this broker (resource name: its id). The empty name asks for the
/// cluster-wide dynamic defaults, of which there are none.
fn broker_entries(
    broker: &Broker,
    scope: &Scope,
    resource_name: &str,
    wanted: Option<&Vec<StrBytes>>,
) -> Result<Vec<DescribeConfigsResourceResult>, String> {
    if resource_name.is_empty() {
        return Ok(Vec::new());
    }
    if resource_name != broker.config.node_id.to_string() {
        return Err(format!(
            "this is broker {}; ask broker {resource_name} for its configs",
            broker.config.node_id
        ));
    }
    let stock = BrokerConfig::new(&broker.config.data_dir);
    let stock_defaults = TopicSettings {
        log: stock.log.clone(),
        min_insync_replicas: stock.default_min_insync_replicas,
        compression: stock.default_compression,
        ..TopicSettings::default()
    };
    let stock: BTreeMap<&str, String> = broker_settings(&stock, &stock_defaults)
        .into_iter()
        .map(|(name, value, _)| (name, value))
        .collect();
    let entries = broker_settings(&broker.config, &broker.replicas.defaults())
        .into_iter()
        .filter(|(name, _, _)| wanted.is_none_or(|w| w.iter().any(|k| k.as_str() == *name)))
        // A tenant of a broker serving every tenant is not shown where the broker keeps its
        // files or the address brokers reach it at: those are the cluster's.
        .filter(|(name, _, _)| scope.tenant().is_none() || !CLUSTER_ONLY.contains(name))
        .map(|(name, value, kind)| {
            let live = match name {
                LEADER_RATE => Some(rate(broker.leader_throttle.rate())),
                FOLLOWER_RATE => Some(rate(broker.follower_throttle.rate())),
                _ => None,
            };
            let source = match &live {
                Some(live) if *live != value => DYNAMIC_BROKER_CONFIG,
                _ if stock.get(name) == Some(&value) => DEFAULT_CONFIG,
                _ => STATIC_BROKER_CONFIG,
            };
            let read_only = live.is_none();
            let value = live.unwrap_or(value);
            DescribeConfigsResourceResult::default()
                .with_name(s(name))
                .with_value(Some(s(&value)))
                .with_read_only(read_only)
                .with_config_source(source)
                .with_config_type(kind)
        })
        .collect();
    Ok(entries)
}

/// Whether the principal may do `operation` on a config resource: the topic's own ACLs for
/// a topic, the cluster's for a broker; else the authorization error to answer.
fn config_access(
    access: &Access<'_>,
    resource_type: i8,
    name: &str,
    operation: Operation,
) -> Result<(), (ResponseError, String)> {
    match resource_type {
        TOPIC if !access.topic(operation, name) => Err((
            ResponseError::TopicAuthorizationFailed,
            format!("{operation} on topic {name:?} is needed"),
        )),
        TOPIC => Ok(()),
        _ if !access.cluster(operation) => Err((
            ResponseError::ClusterAuthorizationFailed,
            format!("{operation} on the cluster is needed"),
        )),
        _ => Ok(()),
    }
}

pub(crate) fn describe(
    call: &Call<'_>,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let (broker, access) = (call.broker, call.access());
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            if let Err((code, message)) = config_access(
                &access,
                resource.resource_type,
                resource.resource_name.as_str(),
                Operation::DescribeConfigs,
            ) {
                return result
                    .with_error_code(code.code())
                    .with_error_message(Some(s(&message)));
            }
            match resource.resource_type {
                TOPIC => match topic(call, resource.resource_name.as_str()) {
                    Some(info) => result.with_configs(entries(
                        &broker.replicas.settings(&info),
                        &info.configs,
                        resource.configuration_keys.as_ref(),
                        DYNAMIC_TOPIC_CONFIG,
                    )),
                    None => result
                        .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                        .with_error_message(Some(s("unknown topic"))),
                },
                BROKER => match broker_entries(
                    broker,
                    &call.scope,
                    resource.resource_name.as_str(),
                    resource.configuration_keys.as_ref(),
                ) {
                    Ok(configs) => result.with_configs(configs),
                    Err(message) => result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(s(&message))),
                },
                _ => result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(s("only topic and broker configs can be described"))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// The topic a client names, as its scope keeps it; the cluster's internal topics are
/// unknown to clients.
fn topic(call: &Call<'_>, name: &str) -> Option<crate::TopicInfo> {
    if crate::topics::is_internal(name) {
        return None;
    }
    call.broker.topics.get(&call.scope.qualify(name))
}

/// IncrementalAlterConfigs of this broker: only the replication throttles' rates, set
/// (bytes per second, at least 1) or deleted (back to the broker's setting). Checked whole
/// before anything changes.
fn alter_broker(
    call: &Call<'_>,
    resource: &kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let broker = call.broker;
    // A broker's throttles are shared by every tenant it serves: on a broker serving every
    // tenant, no tenant's client changes them.
    if call.scope.tenant().is_some() {
        return Err((
            ResponseError::ClusterAuthorizationFailed,
            "this broker serves every tenant; its configs are the operator's".to_owned(),
        ));
    }
    let node = broker.config.node_id.to_string();
    if resource.resource_name.as_str() != node {
        return Err((
            ResponseError::InvalidRequest,
            format!(
                "this is broker {node}; ask broker {} to change its configs",
                resource.resource_name.as_str()
            ),
        ));
    }
    let mut changes = Vec::with_capacity(resource.configs.len());
    for config in &resource.configs {
        let name = config.name.as_str();
        let throttle = match name {
            LEADER_RATE => &broker.leader_throttle,
            FOLLOWER_RATE => &broker.follower_throttle,
            _ => {
                return Err((
                    ResponseError::InvalidConfig,
                    format!(
                        "{name} cannot change while the broker runs; only {LEADER_RATE} and {FOLLOWER_RATE} can"
                    ),
                ))
            }
        };
        let rate = match config.config_operation {
            SET => {
                let value = config.value.as_ref().map_or("", |v| v.as_str());
                match value.trim().parse::<u64>() {
                    Ok(rate) if rate >= 1 => Some(rate),
                    _ => {
                        return Err((
                            ResponseError::InvalidConfig,
                            format!("{name} must be a number of bytes per second, at least 1"),
                        ))
                    }
                }
            }
            DELETE => match name {
                LEADER_RATE => broker.config.leader_replication_throttled_rate,
                _ => broker.config.follower_replication_throttled_rate,
            },
            _ => {
                return Err((
                    ResponseError::InvalidConfig,
                    format!("{name} can only be set or deleted"),
                ))
            }
        };
        changes.push((throttle, rate));
    }
    if !validate_only {
        for (throttle, rate) in changes {
            throttle.set_rate(rate);
        }
    }
    Ok(())
}

pub(crate) async fn incremental_alter(
    call: &Call<'_>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let access = call.access();
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        if let Err((code, message)) = config_access(
            &access,
            resource.resource_type,
            resource.resource_name.as_str(),
            Operation::AlterConfigs,
        ) {
            responses.push(
                AlterConfigsResourceResponse::default()
                    .with_resource_type(resource.resource_type)
                    .with_resource_name(resource.resource_name)
                    .with_error_code(code.code())
                    .with_error_message(Some(s(&message))),
            );
            continue;
        }
        responses.push(alter_one(call, resource, request.validate_only).await);
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

async fn alter_one(
    call: &Call<'_>,
    resource: kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource,
    validate_only: bool,
) -> AlterConfigsResourceResponse {
    let response = AlterConfigsResourceResponse::default()
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone());
    let refuse = |code: ResponseError, message: String| {
        AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone())
            .with_error_code(code.code())
            .with_error_message(Some(s(&message)))
    };
    if resource.resource_type == BROKER {
        return match alter_broker(call, &resource, validate_only) {
            Ok(()) => response,
            Err((code, message)) => refuse(code, message),
        };
    }
    if resource.resource_type != TOPIC {
        return refuse(
            ResponseError::InvalidRequest,
            "only topic configs and a broker's replication throttles can be altered".to_owned(),
        );
    }
    if let Err(e) = crate::topics::refuse_internal(resource.resource_name.as_str()) {
        return refuse(ResponseError::InvalidTopicException, e.to_string());
    }
    let Some(info) = topic(call, resource.resource_name.as_str()) else {
        return refuse(
            ResponseError::UnknownTopicOrPartition,
            "unknown topic".to_owned(),
        );
    };
    let mut overrides = info.configs.clone();
    for config in &resource.configs {
        let name = config.name.as_str().to_owned();
        match config.config_operation {
                    SET => match &config.value {
                        Some(v) => {
                            overrides.insert(name, v.as_str().to_owned());
                        }
                        None => {
                            return refuse(
                                ResponseError::InvalidConfig,
                                format!("{name}: SET needs a value"),
                            )
                        }
                    },
                    DELETE => {
                        overrides.remove(&name);
                    }
                    _ => {
                        return refuse(
                            ResponseError::InvalidConfig,
                            format!("{name}: APPEND and SUBTRACT apply to list configs, and no topic config here is a list"),
                        )
                    }
                }
    }
    match store_overrides(call, &info, overrides, validate_only).await {
        Ok(()) => response,
        Err((code, message)) => refuse(code, message),
    }
}

/// Checks a topic's new config overrides and, unless only validating, stores them and
/// applies them to its logs.
async fn store_overrides(
    call: &Call<'_>,
    info: &crate::TopicInfo,
    overrides: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let broker = call.broker;
    topic_config::settings(&broker.replicas.defaults(), &overrides)
        .map_err(|e| (ResponseError::InvalidConfig, e.to_string()))?;
    if let Some(message) = broker
        .config
        .client_topic_floors
        .and_then(|floors| floors.refusal(&overrides))
    {
        return Err((ResponseError::PolicyViolation, message));
    }
    if validate_only {
        return Ok(());
    }
    let updated = broker
        .topics
        .set_configs(&info.name, overrides)
        .await
        .map_err(|e| (ResponseError::KafkaStorageError, e.shown(&call.scope)))?;
    broker.replicas.apply_settings(&updated);
    Ok(())
}

/// The legacy AlterConfigs: each topic's overrides become exactly the entries given (a
/// null value sets nothing), everything else back to its default.
pub(crate) async fn alter(call: &Call<'_>, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let access = call.access();
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let answer = AlterConfigsResponseEntry::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        if let Err((code, message)) = config_access(
            &access,
            resource.resource_type,
            resource.resource_name.as_str(),
            Operation::AlterConfigs,
        ) {
            responses.push(
                answer
                    .with_error_code(code.code())
                    .with_error_message(Some(s(&message))),
            );
            continue;
        }
        let outcome = async {
            if resource.resource_type != TOPIC {
                return Err((
                    ResponseError::InvalidRequest,
                    "only topic configs can be altered".to_owned(),
                ));
            }
            crate::topics::refuse_internal(resource.resource_name.as_str())
                .map_err(|e| (ResponseError::InvalidTopicException, e.to_string()))?;
            let info = topic(call, resource.resource_name.as_str()).ok_or((
                ResponseError::UnknownTopicOrPartition,
                "unknown topic".to_owned(),
            ))?;
            let overrides: BTreeMap<String, String> = resource
                .configs
                .iter()
                .filter_map(|c| {
                    Some((
                        c.name.as_str().to_owned(),
                        c.value.as_ref()?.as_str().to_owned(),
                    ))
                })
                .collect();
            store_overrides(call, &info, overrides, request.validate_only).await
        }
        .await;
        responses.push(match outcome {
            Ok(()) => answer,
            Err((code, message)) => answer
                .with_error_code(code.code())
                .with_error_message(Some(s(&message))),
        });
    }
    AlterConfigsResponse::default().with_responses(responses)
}

/// DescribeConfigs versions 1 to 4.
pub(crate) struct DescribeConfigs;

impl Api for DescribeConfigs {
    type Request = kafka_protocol::messages::DescribeConfigsRequest;
    type Response = kafka_protocol::messages::DescribeConfigsResponse;
    const KEY: ApiKey = ApiKey::DescribeConfigs;
    const VERSIONS: (i16, i16) = (1, 4);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(describe(call, request))
    }
}

/// AlterConfigs (the legacy, whole-set API) versions 0 to 2.
pub(crate) struct AlterConfigs;

impl Api for AlterConfigs {
    type Request = kafka_protocol::messages::AlterConfigsRequest;
    type Response = kafka_protocol::messages::AlterConfigsResponse;
    const KEY: ApiKey = ApiKey::AlterConfigs;
    const VERSIONS: (i16, i16) = (0, 2);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(alter(call, request).await)
    }
}

/// IncrementalAlterConfigs versions 0 to 1.
pub(crate) struct IncrementalAlterConfigs;

impl Api for IncrementalAlterConfigs {
    type Request = kafka_protocol::messages::IncrementalAlterConfigsRequest;
    type Response = kafka_protocol::messages::IncrementalAlterConfigsResponse;
    const KEY: ApiKey = ApiKey::IncrementalAlterConfigs;
    const VERSIONS: (i16, i16) = (0, 1);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(incremental_alter(call, request).await)
    }
}
