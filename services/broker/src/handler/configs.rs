//! DescribeConfigs and IncrementalAlterConfigs for topics (and, read-only, the broker).

use kafka_protocol::messages::ApiKey;

use crate::router::{Api, Call};

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::Broker;
use skein_log::topic_config::{self, TopicSettings, NAMES};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// `config_source` values.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;
const SET: i8 = 0;
const DELETE: i8 = 1;

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
                    .with_config_source(source),
            )
        })
        .collect()
}

pub(crate) fn describe(
    broker: &Broker,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            match resource.resource_type {
                TOPIC => match broker.topics.get(resource.resource_name.as_str()) {
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
                BROKER => {
                    let defaults = broker.replicas.defaults();
                    result.with_configs(entries(
                        &defaults,
                        &BTreeMap::new(),
                        resource.configuration_keys.as_ref(),
                        STATIC_BROKER_CONFIG,
                    ))
                }
                _ => result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(s("only topic and broker configs can be described"))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

pub(crate) async fn incremental_alter(
    broker: &Broker,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        responses.push(alter_one(broker, resource, request.validate_only).await);
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

async fn alter_one(
    broker: &Broker,
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
    if resource.resource_type != TOPIC {
        return refuse(
            ResponseError::InvalidRequest,
            "only topic configs can be altered".to_owned(),
        );
    }
    let Some(info) = broker.topics.get(resource.resource_name.as_str()) else {
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
    if let Err(e) = topic_config::settings(&broker.replicas.defaults(), &overrides) {
        return refuse(ResponseError::InvalidConfig, e.to_string());
    }
    if validate_only {
        return response;
    }
    match broker.topics.set_configs(&info.name, overrides).await {
        Ok(updated) => {
            broker.replicas.apply_settings(&updated);
            response
        }
        Err(e) => refuse(ResponseError::KafkaStorageError, e.to_string()),
    }
}

/// DescribeConfigs versions 1 to 4.
pub(crate) struct DescribeConfigs;

impl Api for DescribeConfigs {
    type Request = kafka_protocol::messages::DescribeConfigsRequest;
    type Response = kafka_protocol::messages::DescribeConfigsResponse;
    const KEY: ApiKey = ApiKey::DescribeConfigs;
    const VERSIONS: (i16, i16) = (1, 4);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(describe(call.broker, request))
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
        Some(incremental_alter(call.broker, request).await)
    }
}
