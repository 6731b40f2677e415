//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): the SCRAM users of
//! the broker's tenant, kept by the control plane. An alteration carries a salted password;
//! the broker derives the stored and server keys from it, so neither the password nor the
//! salted password travels further. Describing takes DESCRIBE on the cluster, altering
//! ALTER on the cluster (and on a listener without authentication, an operator's leave), as
//! in Kafka; each user is answered on its own, with Kafka's codes.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_auth::Operation;
use skein_proto::controller as pb;
use skein_scram::{Credential, Mechanism};

use crate::controller_link::{ControllerError, Reason};
use crate::router::{Api, Call};

/// The most users one request may name.
const MAX_USERS: usize = 1000;

const NO_CONTROLLER: &str = "this broker has no controller, so it keeps no SCRAM credentials";

fn text(message: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(message.into()))
}

fn controller_error(e: &ControllerError) -> (ResponseError, String) {
    let code = match (e.reason, e.code) {
        (Reason::NotActive, _) | (_, tonic::Code::Unavailable) => ResponseError::NotController,
        (Reason::NotFound, _) => ResponseError::ResourceNotFound,
        (Reason::InvalidRequest | Reason::InvalidName, _) => ResponseError::UnacceptableCredential,
        _ => ResponseError::UnknownServerError,
    };
    (code, e.message.clone())
}

/// DescribeUserScramCredentials version 0.
pub(crate) struct DescribeUserScramCredentials;

impl Api for DescribeUserScramCredentials {
    type Request = DescribeUserScramCredentialsRequest;
    type Response = DescribeUserScramCredentialsResponse;
    const KEY: ApiKey = ApiKey::DescribeUserScramCredentials;
    const VERSIONS: (i16, i16) = (0, 0);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        let refused = |code: ResponseError, message: String| {
            Some(
                DescribeUserScramCredentialsResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(text(message)),
            )
        };
        let Some(link) = &call.broker.controller else {
            return refused(ResponseError::SecurityDisabled, NO_CONTROLLER.to_owned());
        };
        let Some(tenant) = call.tenant_name() else {
            return refused(
                ResponseError::ClusterAuthorizationFailed,
                "the cluster's own connections describe no tenant's SCRAM credentials".to_owned(),
            );
        };
        if !call.access().cluster(Operation::Describe) {
            return refused(
                ResponseError::ClusterAuthorizationFailed,
                "DESCRIBE on the cluster is needed to describe SCRAM credentials".to_owned(),
            );
        }
        let asked: Option<Vec<String>> = request
            .users
            .map(|users| users.iter().map(|u| u.name.to_string()).collect());
        if asked.as_ref().is_some_and(|users| users.len() > MAX_USERS) {
            return refused(
                ResponseError::InvalidRequest,
                format!("at most {MAX_USERS} users a request"),
            );
        }
        let mut seen = HashSet::new();
        let duplicated: HashSet<String> = asked
            .iter()
            .flatten()
            .filter(|u| !seen.insert(u.as_str()))
            .cloned()
            .collect();
        let unique: Vec<String> = seen.into_iter().map(str::to_owned).collect();
        let found = match link.describe_scram_credentials(tenant, unique).await {
            Ok(found) => found,
            Err(e) => {
                let (code, message) = controller_error(&e);
                return refused(code, message);
            }
        };
        let found: BTreeMap<String, Vec<pb::ScramCredentialInfo>> =
            found.into_iter().map(|u| (u.user, u.credentials)).collect();
        let described = |user: &str, credentials: &[pb::ScramCredentialInfo]| {
            DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user.to_owned()))
                .with_credential_infos(
                    credentials
                        .iter()
                        .filter_map(|c| {
                            Some(
                                CredentialInfo::default()
                                    .with_mechanism(Mechanism::from_name(&c.mechanism)?.code())
                                    .with_iterations(i32::try_from(c.iterations).ok()?),
                            )
                        })
                        .collect(),
                )
        };
        let failed = |user: &str, code: ResponseError, message: String| {
            DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user.to_owned()))
                .with_error_code(code.code())
                .with_error_message(text(message))
        };
        let results = match asked {
            // Every user with a credential.
            None => found.iter().map(|(u, c)| described(u, c)).collect(),
            Some(asked) => {
                let mut answered = HashSet::new();
                asked
                    .iter()
                    .filter(|u| answered.insert(u.as_str()))
                    .map(|user| {
                        if duplicated.contains(user) {
                            failed(
                                user,
                                ResponseError::DuplicateResource,
                                format!("user {user:?} is named more than once"),
                            )
                        } else if let Some(credentials) = found.get(user) {
                            described(user, credentials)
                        } else {
                            failed(
                                user,
                                ResponseError::ResourceNotFound,
                                format!("user {user:?} has no SCRAM credentials"),
                            )
                        }
                    })
                    .collect()
            }
        };
        Some(DescribeUserScramCredentialsResponse::default().with_results(results))
    }
}

/// What one user's alteration asks, once checked.
#[derive(Default)]
struct Alteration {
    upsertions: Vec<pb::ScramCredential>,
    deletions: Vec<String>,
    refused: Option<(ResponseError, String)>,
}

/// AlterUserScramCredentials version 0.
pub(crate) struct AlterUserScramCredentials;

impl Api for AlterUserScramCredentials {
    type Request = AlterUserScramCredentialsRequest;
    type Response = AlterUserScramCredentialsResponse;
    const KEY: ApiKey = ApiKey::AlterUserScramCredentials;
    const VERSIONS: (i16, i16) = (0, 0);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        // A request past the bound is refused before any of it is read further.
        if request.deletions.len() + request.upsertions.len() > MAX_USERS * 2 {
            tracing::info!(peer = %call.session.peer, "refused an oversized AlterUserScramCredentials");
            return Some(AlterUserScramCredentialsResponse::default());
        }
        let mut users: BTreeMap<String, Alteration> = BTreeMap::new();
        let mut mechanisms_named: HashSet<(String, i8)> = HashSet::new();
        let deletions = request
            .deletions
            .iter()
            .map(|d| (&d.name, d.mechanism, None));
        let upsertions = request
            .upsertions
            .iter()
            .map(|u| (&u.name, u.mechanism, Some(u)));
        for (name, code, upsertion) in deletions.chain(upsertions) {
            let user = name.to_string();
            let named_twice = !mechanisms_named.insert((user.clone(), code));
            let alteration = users.entry(user.clone()).or_default();
            if alteration.refused.is_some() {
                continue;
            }
            let refusal = if user.is_empty() {
                Some((
                    ResponseError::UnacceptableCredential,
                    "a user name is required".to_owned(),
                ))
            } else if named_twice {
                Some((
                    ResponseError::DuplicateResource,
                    format!("a mechanism of user {user:?} is named more than once"),
                ))
            } else {
                None
            };
            if refusal.is_some() {
                alteration.refused = refusal;
                continue;
            }
            let Some(mechanism) = Mechanism::from_code(code) else {
                alteration.refused = Some((
                    ResponseError::UnsupportedSaslMechanism,
                    format!("mechanism {code} is not SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2)"),
                ));
                continue;
            };
            match upsertion {
                None => alteration.deletions.push(mechanism.name().to_owned()),
                Some(u) => {
                    let iterations = u32::try_from(u.iterations).unwrap_or(0);
                    match Credential::from_salted_password(
                        mechanism,
                        &u.salted_password,
                        &u.salt,
                        iterations,
                    ) {
                        Ok(c) => alteration.upsertions.push(pb::ScramCredential {
                            mechanism: mechanism.name().to_owned(),
                            salt: c.salt,
                            iterations: c.iterations,
                            stored_key: c.stored_key,
                            server_key: c.server_key,
                            updated_at: 0,
                        }),
                        Err(e) => {
                            alteration.refused =
                                Some((ResponseError::UnacceptableCredential, e.to_string()))
                        }
                    }
                }
            }
        }
        let changes = super::acls::security_changes(call, "SCRAM credentials");
        let mut results = Vec::with_capacity(users.len());
        for (user, alteration) in users {
            let outcome = match (&changes, alteration.refused) {
                (Err(refusal), _) => Err(refusal.clone()),
                (Ok(_), Some(refusal)) => Err(refusal),
                (Ok((link, tenant)), None) => link
                    .alter_scram_credentials(
                        tenant,
                        &user,
                        alteration.upsertions,
                        alteration.deletions,
                    )
                    .await
                    .map_err(|e| controller_error(&e)),
            };
            let result =
                AlterUserScramCredentialsResult::default().with_user(StrBytes::from_string(user));
            results.push(match outcome {
                Ok(()) => result,
                Err((code, message)) => result
                    .with_error_code(code.code())
                    .with_error_message(text(message)),
            });
        }
        Some(AlterUserScramCredentialsResponse::default().with_results(results))
    }
}
