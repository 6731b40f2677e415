//! Who is calling: a bearer JWT (tenant and principal from its claims), or an API key
//! presented as HTTP Basic credentials (`key id : secret`), checked by the control plane and
//! remembered for a minute.
//!
//! Keys come from configuration and, optionally, a JWKS URL. A token naming a `kid` no key
//! has makes the gateway fetch the key set again, at most once per [`JWKS_REFETCH_EVERY`], so
//! a rotated key is picked up without letting a flood of bogus tokens hammer the issuer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use parking_lot::Mutex;
use skein_auth::Principal;
use skein_proto::controller as pb;
use skein_proto::replicas::ControllerReplicas;
use skein_token::{TokenError, Verifier, VerifyingKey};

use crate::cluster::ClusterView;
use crate::error::GatewayError;

/// The least time between two fetches of the JWKS.
pub const JWKS_REFETCH_EVERY: Duration = Duration::from_secs(10);

/// How long a verified API key is remembered.
const API_KEY_CACHE: Duration = Duration::from_secs(60);

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub tenant: String,
    /// The principal's name; ACLs name it `User:<name>`.
    pub name: String,
    /// When the credential stops being valid (a token's `exp`); long streams end then.
    pub expires_at: Option<SystemTime>,
    /// The API key the caller authenticated with, if it did: long streams end once the
    /// metadata stream stops listing it (revoked, or its principal deleted).
    pub api_key: Option<String>,
}

impl Caller {
    pub fn principal(&self) -> Principal {
        Principal::user(self.name.clone())
    }
}

/// How tokens are checked.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// Keys from configuration, and the expected issuer and audience.
    pub verifier: Verifier,
    /// Where the issuer publishes its keys, if anywhere.
    pub jwks_url: Option<String>,
    /// The claim naming the tenant.
    pub tenant_claim: String,
}

/// A verified API key: its secret, its caller, and when it was checked.
type RememberedKey = (String, Caller, Instant);

#[derive(Debug)]
struct Jwks {
    keys: Vec<VerifyingKey>,
    fetched_at: Option<Instant>,
}

/// Checks credentials.
#[derive(Debug, Clone)]
pub struct Authenticator {
    config: Arc<AuthConfig>,
    jwks: Arc<tokio::sync::Mutex<Jwks>>,
    verifier: Arc<Mutex<Arc<Verifier>>>,
    controller: Option<ControllerReplicas>,
    api_keys: Arc<Mutex<HashMap<String, RememberedKey>>>,
    /// The cluster's view, whose list of keys in force ends a remembered key at once when
    /// it is revoked.
    view: Option<ClusterView>,
    http: reqwest::Client,
}

impl Authenticator {
    /// Forgets a remembered API key as soon as `view` no longer lists it as in force.
    pub fn following(mut self, view: ClusterView) -> Self {
        self.view = Some(view);
        self
    }

    /// `controller` checks API keys; without it only tokens are accepted.
    pub fn new(config: AuthConfig, controller: Option<ControllerReplicas>) -> Self {
        let verifier = Arc::new(config.verifier.clone());
        Self {
            config: Arc::new(config),
            jwks: Arc::new(tokio::sync::Mutex::new(Jwks {
                keys: Vec::new(),
                fetched_at: None,
            })),
            verifier: Arc::new(Mutex::new(verifier)),
            controller,
            api_keys: Arc::new(Mutex::new(HashMap::new())),
            view: None,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap_or_default(),
        }
    }

    /// The caller an `Authorization` header value names.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Caller, GatewayError> {
        let Some(value) = authorization else {
            return Err(GatewayError::Unauthenticated(
                "send `Authorization: Bearer <token>` or an API key as Basic credentials"
                    .to_owned(),
            ));
        };
        let (scheme, credential) = value.trim().split_once(' ').unwrap_or((value, ""));
        let credential = credential.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            self.token(credential).await
        } else if scheme.eq_ignore_ascii_case("basic") {
            self.api_key(credential).await
        } else {
            Err(GatewayError::Unauthenticated(format!(
                "the {scheme} scheme is not accepted; use Bearer or Basic"
            )))
        }
    }

    async fn token(&self, token: &str) -> Result<Caller, GatewayError> {
        let required = ["sub", self.config.tenant_claim.as_str()];
        let verifier = Arc::clone(&self.verifier.lock());
        let claims = match verifier.verify(token, &required) {
            Err(TokenError::UnknownKey(kid)) if self.config.jwks_url.is_some() => {
                if self.refetch_jwks().await {
                    let verifier = Arc::clone(&self.verifier.lock());
                    verifier.verify(token, &required)
                } else {
                    Err(TokenError::UnknownKey(kid))
                }
            }
            other => other,
        }
        .map_err(|e| {
            tracing::debug!(reason = %e, "token refused");
            GatewayError::Unauthenticated(format!("the token was refused: {e}"))
        })?;
        let text = |name: &str| {
            claims
                .get(name)
                .and_then(serde_json::Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| {
                    GatewayError::Unauthenticated(format!("the token's {name} claim is not a name"))
                })
        };
        let expires_at = claims
            .get("exp")
            .and_then(serde_json::Value::as_u64)
            .map(|secs| UNIX_EPOCH + Duration::from_secs(secs));
        Ok(Caller {
            tenant: text(&self.config.tenant_claim)?,
            name: text("sub")?,
            expires_at,
            api_key: None,
        })
    }

    /// Fetches the key set again unless that happened less than [`JWKS_REFETCH_EVERY`] ago;
    /// answers whether new keys arrived.
    async fn refetch_jwks(&self) -> bool {
        let Some(url) = &self.config.jwks_url else {
            return false;
        };
        let mut jwks = self.jwks.lock().await;
        if jwks
            .fetched_at
            .is_some_and(|at| at.elapsed() < JWKS_REFETCH_EVERY)
        {
            return false;
        }
        jwks.fetched_at = Some(Instant::now());
        let set = match self.http.get(url).send().await {
            Ok(response) => response.json::<jsonwebtoken::jwk::JwkSet>().await,
            Err(e) => Err(e),
        };
        let set = match set {
            Ok(set) => set,
            Err(e) => {
                tracing::warn!(url, error = %e, "could not fetch the JWKS");
                return false;
            }
        };
        let keys: Vec<VerifyingKey> = set
            .keys
            .iter()
            .filter_map(|jwk| match VerifyingKey::from_jwk(jwk) {
                Ok(key) => Some(key),
                Err(reason) => {
                    tracing::debug!(kid = ?jwk.common.key_id, reason, "skipping a JWK");
                    None
                }
            })
            .collect();
        let changed = keys.iter().map(VerifyingKey::kid).collect::<Vec<_>>()
            != jwks.keys.iter().map(VerifyingKey::kid).collect::<Vec<_>>();
        jwks.keys = keys;
        let mut all = self.config.verifier.keys().to_vec();
        all.extend(jwks.keys.iter().cloned());
        *self.verifier.lock() = Arc::new(self.config.verifier.with_keys(all));
        changed
    }

    async fn api_key(&self, credential: &str) -> Result<Caller, GatewayError> {
        let refused = || GatewayError::Unauthenticated("the API key is not valid".to_owned());
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(credential)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(refused)?;
        let (id, secret) = decoded.split_once(':').ok_or_else(refused)?;
        let in_force = self.view.as_ref().is_none_or(|view| {
            let now = view.now();
            !now.received || now.api_keys.contains(id)
        });
        if !in_force {
            // Revoked (or its principal deleted): ask the controller, which refuses it.
            self.api_keys.lock().remove(id);
        } else if let Some((known, caller, at)) = self.api_keys.lock().get(id) {
            if known == secret && at.elapsed() < API_KEY_CACHE {
                return Ok(caller.clone());
            }
        }
        let Some(controller) = &self.controller else {
            return Err(GatewayError::Unauthenticated(
                "API keys are not accepted here".to_owned(),
            ));
        };
        let request = pb::AuthenticateApiKeyRequest {
            key_id: id.to_owned(),
            secret: secret.to_owned(),
        };
        let answer = controller
            .call(request, |mut c, r| async move {
                c.authenticate_api_key(r).await
            })
            .await
            .map_err(|status| match status.code() {
                tonic::Code::Unauthenticated => refused(),
                _ => GatewayError::Unavailable(format!(
                    "the control plane cannot check API keys now: {}",
                    status.message()
                )),
            })?;
        let caller = Caller {
            tenant: answer.tenant,
            name: answer.principal,
            expires_at: None,
            api_key: Some(id.to_owned()),
        };
        self.api_keys.lock().insert(
            id.to_owned(),
            (secret.to_owned(), caller.clone(), Instant::now()),
        );
        Ok(caller)
    }
}
