//! [`Call`]: an authenticated REST or gRPC call, with the cluster view it is served from.
//! Making one checks the credential and the caller's request-rate quota.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use skein_auth::{Operation, ResourceType};
use skein_http::Problem;

use crate::auth::Caller;
use crate::brokers::TenantClient;
use crate::cluster::{TopicSummary, View};
use crate::error::GatewayError;
use crate::quota::Metered;
use crate::Gateway;

#[derive(Debug)]
pub struct Call {
    pub caller: Caller,
    pub view: Arc<View>,
    /// The client's address, for host-restricted ACL bindings.
    pub host: String,
    /// When the caller was authenticated.
    pub authenticated_at: Instant,
    /// Whether the metadata stream has listed the caller's API key since then (shared by
    /// the refreshed copies of a stream's call).
    key_listed: Arc<AtomicBool>,
}

/// How long a new API key may be missing from the metadata stream's list of keys in force
/// (the controller lists it within a second of its creation) before a stream using it
/// counts it as revoked; once listed, a key missing from the list is revoked at once.
const NEW_KEY_LISTED_WITHIN: Duration = Duration::from_secs(5);

impl FromRequestParts<Arc<Gateway>> for Call {
    type Rejection = Problem;

    async fn from_request_parts(
        parts: &mut Parts,
        gateway: &Arc<Gateway>,
    ) -> Result<Self, Problem> {
        let authorization = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let caller = gateway.auth.authenticate(authorization).await?;
        let host = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string())
            .unwrap_or_default();
        Ok(Call::new(gateway, caller, host)?)
    }
}

impl Call {
    /// A call by `caller`, refused when the gateway has no cluster view yet or the caller's
    /// request rate is used up.
    pub fn new(gateway: &Gateway, caller: Caller, host: String) -> Result<Self, GatewayError> {
        let view = gateway.view.now();
        if !view.received {
            return Err(GatewayError::Unavailable(
                "the gateway has not heard from the control plane yet".to_owned(),
            ));
        }
        gateway.quotas.take(&view, &caller, Metered::Requests, 1)?;
        let key_listed = caller
            .api_key
            .as_ref()
            .is_some_and(|key| view.api_keys.contains(key));
        Ok(Self {
            caller,
            view,
            host,
            authenticated_at: Instant::now(),
            key_listed: Arc::new(AtomicBool::new(key_listed)),
        })
    }

    /// The same caller against the cluster as it is now, if its credential still holds: a
    /// token before its `exp`, an API key the metadata stream still lists. Long streams
    /// call this before each step and check their ACLs on the answer, so they follow ACL
    /// changes and end when the credential expires or is revoked.
    pub fn current(&self, gateway: &Gateway) -> Result<Self, GatewayError> {
        if self
            .caller
            .expires_at
            .is_some_and(|at| at <= SystemTime::now())
        {
            return Err(GatewayError::Unauthenticated(
                "the token has expired".to_owned(),
            ));
        }
        let view = gateway.view.now();
        if let Some(key) = &self.caller.api_key {
            let listed = view.api_keys.contains(key);
            if listed {
                self.key_listed.store(true, Ordering::Relaxed);
            } else if view.received
                && (self.key_listed.load(Ordering::Relaxed)
                    || self.authenticated_at.elapsed() > NEW_KEY_LISTED_WITHIN)
            {
                return Err(GatewayError::Unauthenticated(
                    "the API key has been revoked".to_owned(),
                ));
            }
        }
        Ok(Self {
            caller: self.caller.clone(),
            view,
            host: self.host.clone(),
            authenticated_at: self.authenticated_at,
            key_listed: Arc::clone(&self.key_listed),
        })
    }

    /// Refuses unless the ACLs allow `operation` on the resource.
    pub fn check(
        &self,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> Result<(), GatewayError> {
        crate::access::check(
            &self.view,
            &self.caller,
            &self.host,
            operation,
            resource_type,
            name,
        )
    }

    /// A topic of the caller's tenant, after checking `operation` on it (so a caller without
    /// access learns nothing of whether it exists).
    pub fn topic(&self, name: &str, operation: Operation) -> Result<TopicSummary, GatewayError> {
        self.check(operation, ResourceType::Topic, name)?;
        self.view
            .tenant(&self.caller.tenant)
            .and_then(|t| t.topics.get(name))
            .cloned()
            .ok_or_else(|| GatewayError::NotFound(format!("there is no topic {name}")))
    }

    /// [`Call::topic`], asking the controller when the metadata stream has not brought the
    /// topic yet (one created a moment ago): read-your-writes across every API. The
    /// controller's "no such topic" is believed for a moment, so a caller naming unknown
    /// topics costs it little.
    pub async fn topic_known(
        &self,
        gateway: &crate::Gateway,
        name: &str,
        operation: Operation,
    ) -> Result<TopicSummary, GatewayError> {
        let known = self.topic(name, operation);
        let (Err(GatewayError::NotFound(_)), Some(controller)) = (&known, &gateway.controller)
        else {
            return known;
        };
        // Internal topics are never a tenant's (see `View::from_snapshot`).
        if name.starts_with("__") {
            return known;
        }
        // Tenant names cannot hold a NUL, so the key names one tenant's topic.
        let key = format!("{}\0{name}", self.caller.tenant);
        if !gateway.topic_lookups.may_ask(&key) {
            return known;
        }
        let request = skein_proto::controller::DescribeTopicRequest {
            tenant: self.caller.tenant.clone(),
            name: name.to_owned(),
        };
        match controller
            .call(request, |mut c, r| async move { c.describe_topic(r).await })
            .await
        {
            Ok(answer) => match answer.topic {
                Some(topic) => Ok(TopicSummary {
                    id: topic.id,
                    partitions: i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX),
                    configs: topic.configs.into_iter().collect(),
                }),
                None => known,
            },
            Err(status) => {
                if status.code() != tonic::Code::NotFound {
                    tracing::debug!(topic = %name, %status, "could not ask the controller for a topic");
                }
                gateway.topic_lookups.missed(key);
                known
            }
        }
    }

    /// The caller's tenant's topics it may DESCRIBE, by name (as Kafka's metadata lists
    /// them).
    pub fn describable_topics(&self) -> Vec<(String, TopicSummary)> {
        self.view
            .tenant(&self.caller.tenant)
            .map(|tenant| {
                tenant
                    .topics
                    .iter()
                    .filter(|(name, _)| {
                        self.check(Operation::Describe, ResourceType::Topic, name)
                            .is_ok()
                    })
                    .map(|(name, t)| (name.clone(), t.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The Kafka client of the caller's tenant.
    pub async fn client(&self, gateway: &Gateway) -> Result<TenantClient, GatewayError> {
        gateway
            .brokers
            .tenant(&self.view, &self.caller.tenant)
            .await
    }
}
