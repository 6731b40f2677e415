//! Who may call the controller: every caller presents a credential for its role, an HS256
//! token signed with the controller's secret (`authorization: Bearer ...`), and each RPC
//! allows only what that role needs.
//!
//! - A **broker** credential names the tenants it may serve: it registers only for them,
//!   changes only their topics, watches only their metadata, and changes their ACLs only if
//!   the credential says so (`acl_changes`), which is for brokers whose Kafka clients may
//!   change ACLs. It names the broker's node id too (`node`), and every call that names a
//!   node (registration, heartbeats, producer ids, controlled shutdown, ISR changes as
//!   leader) is held to it; a credential minted for any node (`--any-node`) is held to the
//!   tenants of the node's registration instead.
//! - A **gateway** credential watches every tenant's metadata, checks API keys and keeps
//!   idempotency keys; it changes nothing else.
//!
//! An operator mints credentials with `skein controller-token`; `skein dev` mints its own.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use skein_token::{Claims, Hs256Signer, TokenError, Verifier, VerifyingKey};
use tonic::{Request, Status};

/// The audience of every controller credential, so that no other token of the same secret
/// passes for one.
pub const AUDIENCE: &str = "skein-controller";
/// The tenant entry that covers every tenant.
pub const ANY_TENANT: &str = "*";

/// Why a call is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    #[error("a controller credential is required")]
    Missing,
    #[error("the controller credential is refused: {0}")]
    Refused(#[source] TokenError),
    #[error("the controller credential's claims are malformed")]
    Malformed,
    #[error("{held} credentials may not make this call; it is for {needed}s")]
    WrongRole {
        held: &'static str,
        needed: &'static str,
    },
    #[error("the broker credential {name:?} does not cover tenant {tenant:?}")]
    OtherTenant { name: String, tenant: String },
    #[error("this broker credential may not change ACLs; use the admin API")]
    NoAclChanges,
    #[error("the broker credential {name:?} is node {holds}'s, not node {named}'s")]
    OtherNode {
        name: String,
        holds: i32,
        named: i32,
    },
    #[error("node {0} is not registered")]
    Unregistered(i32),
}

impl From<CredentialError> for Status {
    fn from(e: CredentialError) -> Self {
        match e {
            CredentialError::Missing | CredentialError::Refused(_) | CredentialError::Malformed => {
                Status::unauthenticated(e.to_string())
            }
            CredentialError::WrongRole { .. }
            | CredentialError::OtherTenant { .. }
            | CredentialError::NoAclChanges
            | CredentialError::OtherNode { .. } => Status::permission_denied(e.to_string()),
            CredentialError::Unregistered(_) => Status::failed_precondition(e.to_string()),
        }
    }
}

/// What a caller is to the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Broker,
    Gateway,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Broker => "broker",
            Role::Gateway => "gateway",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "broker" => Some(Role::Broker),
            "gateway" => Some(Role::Gateway),
            _ => None,
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| format!("{s:?} is not a role: broker or gateway"))
    }
}

/// An authenticated caller of the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerCaller {
    /// The credential's subject, for the logs.
    pub name: String,
    pub role: Role,
    /// The tenants a broker may serve (`*` for any); empty for a gateway.
    pub tenants: Vec<String>,
    /// Whether a broker may change its tenants' ACLs.
    pub acl_changes: bool,
    /// The node a broker credential is for; `None` for any node (and for a gateway).
    pub node: Option<i32>,
}

impl ControllerCaller {
    /// Refuses unless the caller is a broker whose credential is for node `node` (or for
    /// any node).
    pub fn require_node(&self, node: i32) -> Result<(), CredentialError> {
        self.require(Role::Broker)?;
        match self.node {
            Some(holds) if holds != node => Err(CredentialError::OtherNode {
                name: self.name.clone(),
                holds,
                named: node,
            }),
            _ => Ok(()),
        }
    }

    /// Refuses unless the caller has `role`.
    pub fn require(&self, role: Role) -> Result<(), CredentialError> {
        if self.role != role {
            return Err(CredentialError::WrongRole {
                held: self.role.name(),
                needed: role.name(),
            });
        }
        Ok(())
    }

    /// Whether a broker credential covers `tenant`.
    pub fn serves(&self, tenant: &str) -> bool {
        self.role == Role::Broker && self.tenants.iter().any(|t| t == ANY_TENANT || t == tenant)
    }

    /// Refuses unless the caller is a broker of `tenant`.
    pub fn require_tenant(&self, tenant: &str) -> Result<(), CredentialError> {
        self.require(Role::Broker)?;
        if !self.serves(tenant) {
            return Err(CredentialError::OtherTenant {
                name: self.name.clone(),
                tenant: tenant.to_owned(),
            });
        }
        Ok(())
    }

    /// Refuses unless the caller is a broker of `tenant` whose credential allows ACL
    /// changes: ACLs are changed through the admin API, or by a broker an operator let its
    /// Kafka clients change them.
    pub fn require_acl_changes(&self, tenant: &str) -> Result<(), CredentialError> {
        self.require_tenant(tenant)?;
        if !self.acl_changes {
            return Err(CredentialError::NoAclChanges);
        }
        Ok(())
    }
}

/// A credential to mint.
#[derive(Debug, Clone)]
pub struct NewCredential {
    pub name: String,
    pub role: Role,
    pub tenants: Vec<String>,
    pub acl_changes: bool,
    /// The broker's node id; `None` for any node (and for a gateway).
    pub node: Option<i32>,
    pub valid_for: Duration,
}

/// Signs `credential` with the controller's secret; `None` for an empty secret.
pub fn mint(secret: &[u8], credential: &NewCredential) -> Option<String> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    let claims = json!({
        "sub": credential.name,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now.saturating_add(credential.valid_for.as_secs()),
        "role": credential.role.name(),
        "tenants": credential.tenants,
        "acl_changes": credential.acl_changes,
        "node": credential.node,
    });
    let Value::Object(claims) = claims else {
        return None;
    };
    Hs256Signer::new(secret).sign(&claims)
}

/// A credential one broker presented to another, verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presented {
    pub caller: ControllerCaller,
    /// Its `exp`, in seconds since the epoch.
    pub expires_at: i64,
}

/// Checks the credentials callers present.
#[derive(Debug, Clone)]
pub struct CredentialVerifier {
    verifier: Verifier,
}

impl CredentialVerifier {
    pub fn new(secret: &[u8]) -> Self {
        let mut verifier = Verifier::new(vec![VerifyingKey::hs256(secret, None)]);
        verifier.audience = Some(AUDIENCE.to_owned());
        Self { verifier }
    }

    /// The caller a bearer token names, or why it is refused.
    pub fn verify(&self, token: &str) -> Result<ControllerCaller, CredentialError> {
        let claims = self
            .verifier
            .verify(token, &["sub", "role"])
            .map_err(CredentialError::Refused)?;
        caller_from(&claims).ok_or(CredentialError::Malformed)
    }

    /// A credential presented in a call's body (a broker's, to another broker): whose it
    /// is and when it expires (seconds since the epoch).
    pub fn verify_presented(&self, token: &str) -> Result<Presented, CredentialError> {
        let claims = self
            .verifier
            .verify(token, &["sub", "role", "exp"])
            .map_err(CredentialError::Refused)?;
        let caller = caller_from(&claims).ok_or(CredentialError::Malformed)?;
        let expires_at = claims
            .get("exp")
            .and_then(Value::as_i64)
            .ok_or(CredentialError::Malformed)?;
        Ok(Presented { caller, expires_at })
    }

    /// The caller a request's `authorization` metadata names.
    fn authenticate(&self, request: &Request<()>) -> Result<ControllerCaller, CredentialError> {
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or(CredentialError::Missing)?;
        self.verify(token.trim())
    }
}

/// The tonic interceptor: checks the credential and leaves the caller in the request's
/// extensions for the RPCs.
impl tonic::service::Interceptor for CredentialVerifier {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let caller = self.authenticate(&request)?;
        request.extensions_mut().insert(caller);
        Ok(request)
    }
}

fn caller_from(claims: &Claims) -> Option<ControllerCaller> {
    let role = Role::from_name(claims.get("role")?.as_str()?)?;
    let tenants = match claims.get("tenants") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|t| t.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()?,
        Some(_) => return None,
    };
    let acl_changes = match claims.get("acl_changes") {
        None => false,
        Some(value) => value.as_bool()?,
    };
    let node = match claims.get("node") {
        None | Some(Value::Null) => None,
        Some(value) => Some(i32::try_from(value.as_i64()?).ok()?),
    };
    Some(ControllerCaller {
        name: claims.get("sub")?.as_str()?.to_owned(),
        role,
        tenants,
        acl_changes,
        node,
    })
}

/// The caller the interceptor authenticated.
pub fn caller<T>(request: &Request<T>) -> Result<ControllerCaller, CredentialError> {
    request
        .extensions()
        .get::<ControllerCaller>()
        .cloned()
        .ok_or(CredentialError::Missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(role: Role, tenants: &[&str]) -> NewCredential {
        NewCredential {
            name: "b-0".into(),
            role,
            tenants: tenants.iter().map(|t| (*t).to_owned()).collect(),
            acl_changes: false,
            node: None,
            valid_for: Duration::from_secs(60),
        }
    }

    #[test]
    fn minted_credentials_verify_with_their_role_and_tenants() {
        let secret = b"a controller secret of enough bytes";
        let verifier = CredentialVerifier::new(secret);
        let token = mint(secret, &credential(Role::Broker, &["acme"])).unwrap();
        let caller = verifier.verify(&token).unwrap();
        assert_eq!(caller.role, Role::Broker);
        assert!(caller.serves("acme") && !caller.serves("globex"));
        assert!(caller.require_tenant("globex").is_err());
        assert!(caller.require(Role::Gateway).is_err());
        let gateway = verifier
            .verify(&mint(secret, &credential(Role::Gateway, &[])).unwrap())
            .unwrap();
        assert!(!gateway.serves("acme"));
        assert!(gateway.require_tenant("acme").is_err());
    }

    #[test]
    fn other_secrets_audiences_and_garbage_are_refused() {
        let verifier = CredentialVerifier::new(b"the right secret, long enough");
        let forged = mint(
            b"another secret, long enough!!",
            &credential(Role::Gateway, &[]),
        )
        .unwrap();
        assert!(verifier.verify(&forged).is_err());
        let mut claims = Claims::new();
        claims.insert("sub".into(), json!("x"));
        claims.insert("role".into(), json!("gateway"));
        claims.insert("exp".into(), json!(u32::MAX));
        let admin_like = Hs256Signer::new(b"the right secret, long enough")
            .sign(&claims)
            .unwrap();
        assert!(verifier.verify(&admin_like).is_err(), "no audience");
        assert!(verifier.verify("garbage").is_err());
        assert!(CredentialVerifier::new(b"").verify(&forged).is_err());
    }
}
