//! The controller's SCRAM calls: a broker fetches the credential its client authenticates
//! with, and forwards Kafka's DescribeUserScramCredentials and AlterUserScramCredentials.
//! Every call is held to the tenants the broker's credential covers.

// tonic's `Status` is the error type gRPC handlers must return; it is large by design.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;

use skein_catalog::{Catalog, CatalogError, PrincipalKind};
use skein_proto::controller as pb;
use skein_proto::refusal::{self, Reason};
use skein_scram::{Credential, Mechanism};
use tonic::{Code, Status};

use crate::credentials::ControllerCaller;

/// The most users one describe names; Kafka clients name a few.
pub(crate) const MAX_DESCRIBED_USERS: usize = 1000;

fn mechanism(name: &str) -> Result<Mechanism, Status> {
    Mechanism::from_name(name).ok_or_else(|| {
        refusal::status(
            Code::InvalidArgument,
            format!("{name:?} is not a SCRAM mechanism"),
            Reason::InvalidRequest,
        )
    })
}

fn invalid(e: impl std::fmt::Display) -> Status {
    refusal::status(Code::InvalidArgument, e.to_string(), Reason::InvalidRequest)
}

/// The credential `user` of `tenant` authenticates with over `mechanism`.
pub(crate) async fn get(
    catalog: &Catalog,
    caller: &ControllerCaller,
    request: pb::GetScramCredentialRequest,
) -> Result<pb::GetScramCredentialResponse, CatalogOrStatus> {
    caller
        .require_tenant(&request.tenant)
        .map_err(Status::from)?;
    let mechanism = mechanism(&request.mechanism)?;
    let found = catalog
        .scram_credential(&request.tenant, &request.user, mechanism)
        .await?;
    Ok(pb::GetScramCredentialResponse {
        credential: found.map(|(c, updated_at)| pb::ScramCredential {
            mechanism: c.mechanism.name().to_owned(),
            salt: c.salt,
            iterations: c.iterations,
            stored_key: c.stored_key,
            server_key: c.server_key,
            updated_at,
        }),
    })
}

/// The mechanisms and iterations of the users asked about (all, when none are named).
pub(crate) async fn describe(
    catalog: &Catalog,
    caller: &ControllerCaller,
    request: pb::DescribeScramCredentialsRequest,
) -> Result<pb::DescribeScramCredentialsResponse, CatalogOrStatus> {
    caller
        .require_tenant(&request.tenant)
        .map_err(Status::from)?;
    if request.users.len() > MAX_DESCRIBED_USERS {
        return Err(invalid(format!("at most {MAX_DESCRIBED_USERS} users a call")).into());
    }
    let mut users: BTreeMap<String, Vec<pb::ScramCredentialInfo>> = BTreeMap::new();
    for (tenant, user, info) in catalog.all_scram_credentials().await? {
        if tenant != request.tenant || !(request.users.is_empty() || request.users.contains(&user))
        {
            continue;
        }
        users
            .entry(user)
            .or_default()
            .push(pb::ScramCredentialInfo {
                mechanism: info.mechanism.name().to_owned(),
                iterations: info.iterations,
            });
    }
    Ok(pb::DescribeScramCredentialsResponse {
        users: users
            .into_iter()
            .map(|(user, credentials)| pb::UserScramCredentials { user, credentials })
            .collect(),
    })
}

/// Sets and deletes one user's credentials, creating the user if it does not exist.
pub(crate) async fn alter(
    catalog: &Catalog,
    caller: &ControllerCaller,
    request: pb::AlterScramCredentialsRequest,
) -> Result<(), CatalogOrStatus> {
    caller
        .require_acl_changes(&request.tenant)
        .map_err(Status::from)?;
    let mut puts = Vec::with_capacity(request.upsertions.len().min(2));
    for put in request.upsertions {
        let credential = Credential::from_parts(
            mechanism(&put.mechanism)?,
            put.salt,
            put.iterations,
            put.stored_key,
            put.server_key,
        )
        .map_err(invalid)?;
        puts.push(credential);
    }
    let deletions = request
        .deletions
        .iter()
        .map(|name| mechanism(name))
        .collect::<Result<Vec<_>, _>>()?;
    let tenant = catalog.tenant_by_name(&request.tenant).await?;
    let principal = match catalog.principal(&tenant.id, &request.user).await {
        Ok(principal) => principal,
        Err(CatalogError::NotFound { .. }) if !puts.is_empty() => {
            match catalog
                .create_principal(&tenant.id, PrincipalKind::User, &request.user)
                .await
            {
                // Made by another call meanwhile: that one is the user.
                Err(CatalogError::AlreadyExists { .. }) => {
                    catalog.principal(&tenant.id, &request.user).await?
                }
                made => made?,
            }
        }
        Err(e) => return Err(e.into()),
    };
    for mechanism in deletions {
        catalog
            .delete_scram_credential(&principal.id, mechanism)
            .await?;
    }
    for credential in &puts {
        catalog
            .put_scram_credential(&principal.id, credential)
            .await?;
    }
    Ok(())
}

/// A refusal the caller turns into a status, from the catalog or already made.
#[derive(Debug)]
pub(crate) enum CatalogOrStatus {
    Catalog(CatalogError),
    Status(Status),
}

impl From<CatalogError> for CatalogOrStatus {
    fn from(e: CatalogError) -> Self {
        Self::Catalog(e)
    }
}

impl From<Status> for CatalogOrStatus {
    fn from(e: Status) -> Self {
        Self::Status(e)
    }
}
