//! DescribeAcls, CreateAcls and DeleteAcls: the same bindings as the control plane's catalog.
//! Describe answers from the bindings the controller's metadata stream last sent; creations
//! and deletions are forwarded to the controller. A broker on its own has no ACL store and
//! answers SECURITY_DISABLED, as Kafka does without an authorizer.

use kafka_protocol::messages::ApiKey;

use crate::router::{Api, Call};

use std::collections::BTreeMap;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_auth::{
    AclBinding, AclBindingFilter, AclError, Operation, PatternType, PatternTypeFilter, Permission,
    ResourceType,
};

use crate::controller_link::{ControllerError, ControllerLink, Reason};

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

const NO_AUTHORIZER: &str = "this broker has no controller, so it keeps no ACLs";

/// A filter from the request's codes and strings.
#[allow(clippy::too_many_arguments)]
fn filter(
    resource_type: i8,
    resource_name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclBindingFilter, AclError> {
    Ok(AclBindingFilter {
        principal: principal.map(|p| p.as_str().parse()).transpose()?,
        host: host.map(|h| h.as_str().to_owned()),
        resource_type: ResourceType::filter_from_code(resource_type)?,
        resource_name: resource_name.map(|n| n.as_str().to_owned()),
        pattern_type: PatternTypeFilter::from_code(pattern_type)?,
        operation: Operation::filter_from_code(operation)?,
        permission: Permission::filter_from_code(permission)?,
    })
}

fn controller_error(e: &ControllerError) -> ResponseError {
    match (e.reason, e.code) {
        (Reason::NotActive, _) | (_, tonic::Code::Unavailable) => ResponseError::NotController,
        (Reason::InvalidAcl | Reason::InvalidRequest | Reason::InvalidName, _) => {
            ResponseError::InvalidRequest
        }
        _ => ResponseError::UnknownServerError,
    }
}

pub(crate) fn describe(call: &Call<'_>, request: DescribeAclsRequest) -> DescribeAclsResponse {
    let access = call.access();
    if call.broker.controller.is_none() {
        return DescribeAclsResponse::default()
            .with_error_code(ResponseError::SecurityDisabled.code())
            .with_error_message(Some(s(NO_AUTHORIZER)));
    }
    if !access.cluster(Operation::Describe) {
        return DescribeAclsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(s("DESCRIBE on the cluster is needed")));
    }
    let selector = match filter(
        request.resource_type_filter,
        request.resource_name_filter.as_ref(),
        request.pattern_type_filter,
        request.principal_filter.as_ref(),
        request.host_filter.as_ref(),
        request.operation,
        request.permission_type,
    ) {
        Ok(f) => f,
        Err(e) => {
            return DescribeAclsResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(s(&e.to_string())))
        }
    };
    let mut resources: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for binding in call
        .tenant
        .acls
        .read()
        .iter()
        .filter(|b| selector.matches(b))
    {
        resources
            .entry((
                binding.resource_type.code(),
                binding.resource_name.clone(),
                binding.pattern_type.code(),
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(s(&binding.principal.to_string()))
                    .with_host(s(&binding.host))
                    .with_operation(binding.operation.code())
                    .with_permission_type(binding.permission.code()),
            );
    }
    DescribeAclsResponse::default().with_resources(
        resources
            .into_iter()
            .map(|((resource_type, name, pattern_type), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(s(&name))
                    .with_pattern_type(pattern_type)
                    .with_acls(acls)
            })
            .collect(),
    )
}

fn binding(creation: &AclCreation) -> Result<AclBinding, AclError> {
    let binding = AclBinding {
        principal: creation.principal.as_str().parse()?,
        host: creation.host.as_str().to_owned(),
        resource_type: ResourceType::from_code(creation.resource_type)?,
        resource_name: creation.resource_name.as_str().to_owned(),
        pattern_type: PatternType::from_code(creation.resource_pattern_type)?,
        operation: Operation::from_code(creation.operation)?,
        permission: Permission::from_code(creation.permission_type)?,
    };
    binding.validate()?;
    Ok(binding)
}

/// Where a Kafka client's change of `what` (ACLs, or SCRAM credentials) goes, the
/// controller and the tenant it changes, or why it may not make it: both take ALTER on the
/// cluster, and on a listener without authentication, an operator's leave; the cluster's own
/// connections act for no tenant.
pub(crate) fn security_changes<'a>(
    call: &'a Call<'_>,
    what: &str,
) -> Result<(&'a ControllerLink, &'a str), (ResponseError, String)> {
    let Some(link) = &call.broker.controller else {
        return Err((ResponseError::SecurityDisabled, NO_AUTHORIZER.to_owned()));
    };
    let Some(tenant) = call.tenant_name() else {
        return Err((
            ResponseError::ClusterAuthorizationFailed,
            format!("the cluster's own connections change no tenant's {what}"),
        ));
    };
    let access = call.access();
    // An authenticated principal needs ALTER on the cluster, as in Kafka.
    let refused = if access.is_authenticated() {
        (!access.cluster(Operation::Alter))
            .then(|| format!("ALTER on the cluster is needed to change {what}"))
    } else {
        (!call.broker.config.unauthenticated_acl_changes).then(|| {
            format!(
                "this listener does not authenticate its clients, so they may not change \
                 {what}; use the admin API"
            )
        })
    };
    match refused {
        Some(message) => Err((ResponseError::ClusterAuthorizationFailed, message)),
        None => Ok((link, tenant)),
    }
}

pub(crate) async fn create(call: &Call<'_>, request: CreateAclsRequest) -> CreateAclsResponse {
    let mut results = Vec::with_capacity(request.creations.len());
    for creation in &request.creations {
        let failed = |code: ResponseError, message: String| {
            AclCreationResult::default()
                .with_error_code(code.code())
                .with_error_message(Some(s(&message)))
        };
        let (link, tenant) = match security_changes(call, "ACLs") {
            Ok(to) => to,
            Err((code, message)) => {
                results.push(failed(code, message));
                continue;
            }
        };
        let binding = match binding(creation) {
            Ok(b) => b,
            Err(e) => {
                results.push(failed(ResponseError::InvalidRequest, e.to_string()));
                continue;
            }
        };
        results.push(match link.create_acl(tenant, &binding).await {
            Ok(()) => {
                let mut acls = call.tenant.acls.write();
                if !acls.contains(&binding) {
                    acls.push(binding);
                }
                AclCreationResult::default()
            }
            Err(e) => failed(controller_error(&e), e.to_string()),
        });
    }
    CreateAclsResponse::default().with_results(results)
}

fn matching(binding: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(binding.resource_type.code())
        .with_resource_name(s(&binding.resource_name))
        .with_pattern_type(binding.pattern_type.code())
        .with_principal(s(&binding.principal.to_string()))
        .with_host(s(&binding.host))
        .with_operation(binding.operation.code())
        .with_permission_type(binding.permission.code())
}

async fn delete_one(call: &Call<'_>, f: &DeleteAclsFilter) -> DeleteAclsFilterResult {
    let failed = |code: ResponseError, message: String| {
        DeleteAclsFilterResult::default()
            .with_error_code(code.code())
            .with_error_message(Some(s(&message)))
    };
    let (link, tenant) = match security_changes(call, "ACLs") {
        Ok(to) => to,
        Err((code, message)) => return failed(code, message),
    };
    let selector = match filter(
        f.resource_type_filter,
        f.resource_name_filter.as_ref(),
        f.pattern_type_filter,
        f.principal_filter.as_ref(),
        f.host_filter.as_ref(),
        f.operation,
        f.permission_type,
    ) {
        Ok(selector) => selector,
        Err(e) => return failed(ResponseError::InvalidRequest, e.to_string()),
    };
    match link.delete_acls(tenant, &selector).await {
        Ok(deleted) => {
            call.tenant.acls.write().retain(|b| !deleted.contains(b));
            DeleteAclsFilterResult::default()
                .with_matching_acls(deleted.iter().map(matching).collect())
        }
        Err(e) => failed(controller_error(&e), e.to_string()),
    }
}

pub(crate) async fn delete(call: &Call<'_>, request: DeleteAclsRequest) -> DeleteAclsResponse {
    let mut results = Vec::with_capacity(request.filters.len());
    for f in &request.filters {
        results.push(delete_one(call, f).await);
    }
    DeleteAclsResponse::default().with_filter_results(results)
}

/// DescribeAcls versions 1 to 3.
pub(crate) struct DescribeAcls;

impl Api for DescribeAcls {
    type Request = kafka_protocol::messages::DescribeAclsRequest;
    type Response = kafka_protocol::messages::DescribeAclsResponse;
    const KEY: ApiKey = ApiKey::DescribeAcls;
    const VERSIONS: (i16, i16) = (1, 3);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(describe(call, request))
    }
}

/// CreateAcls versions 1 to 3.
pub(crate) struct CreateAcls;

impl Api for CreateAcls {
    type Request = kafka_protocol::messages::CreateAclsRequest;
    type Response = kafka_protocol::messages::CreateAclsResponse;
    const KEY: ApiKey = ApiKey::CreateAcls;
    const VERSIONS: (i16, i16) = (1, 3);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(create(call, request).await)
    }
}

/// DeleteAcls versions 1 to 3.
pub(crate) struct DeleteAcls;

impl Api for DeleteAcls {
    type Request = kafka_protocol::messages::DeleteAclsRequest;
    type Response = kafka_protocol::messages::DeleteAclsResponse;
    const KEY: ApiKey = ApiKey::DeleteAcls;
    const VERSIONS: (i16, i16) = (1, 3);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(delete(call, request).await)
    }
}
