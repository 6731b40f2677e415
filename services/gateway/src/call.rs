//! [`Call`]: an authenticated REST or gRPC call, with the cluster view it is served from.
//! Making one checks the credential and the caller's request-rate quota.

use std::net::SocketAddr;
use std::sync::Arc;

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
}

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
        Ok(Self { caller, view, host })
    }

    /// The same caller against the cluster as it is now (long streams re-check ACLs and
    /// topics as they change).
    pub fn refreshed(&self, gateway: &Gateway) -> Self {
        Self {
            caller: self.caller.clone(),
            view: gateway.view.now(),
            host: self.host.clone(),
        }
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
