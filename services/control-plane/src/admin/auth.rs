//! Who may call the admin API: a bearer JWT (verified by `skein_token`) whose role claim holds
//! the admin role, or the bootstrap token from configuration for the first login. Missing or invalid credentials get
//! 401; a valid token without the role gets 403.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use jsonwebtoken::Algorithm;
use serde_json::{Map, Value};
use skein_token::{Hs256Signer, Verifier, VerifyingKey};

use super::AdminState;
use skein_http::Problem;

/// How admin JWTs are checked (through `skein_token`: allow-listed algorithms, keys by kid,
/// `exp` required, `nbf`, `aud` always ([`ADMIN_AUDIENCE`] unless configured) and `iss` when
/// configured, with a small leeway) and which claim grants the admin role.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    pub verifier: Verifier,
    /// Present for HS256 only: lets `skein dev` issue its own admin token.
    signer: Option<Hs256Signer>,
    /// The claim holding roles: an array of strings or a space-separated string.
    pub role_claim: String,
    pub admin_role: String,
}

/// The audience admin JWTs carry unless `--jwt-audience` names another: an admin token is
/// always checked for one, so a token the same key signed for another use (a tenant's
/// token, in `skein dev`) is never an admin's, whatever roles it claims.
pub const ADMIN_AUDIENCE: &str = "skein-admin";

impl JwtConfig {
    fn with(mut verifier: Verifier, signer: Option<Hs256Signer>) -> Self {
        verifier.audience = Some(ADMIN_AUDIENCE.to_owned());
        Self {
            verifier,
            signer,
            role_claim: "roles".to_owned(),
            admin_role: "admin".to_owned(),
        }
    }

    /// HS256 with a shared secret (development and tests).
    pub fn hs256(secret: &[u8]) -> Self {
        Self::with(
            Verifier::new(vec![VerifyingKey::hs256(secret, None)]),
            Some(Hs256Signer::new(secret)),
        )
    }

    /// RS256, ES256 or EdDSA with the issuer's public key in PEM.
    pub fn public_key_pem(algorithm: Algorithm, pem: &[u8]) -> Result<Self, String> {
        let key = VerifyingKey::public_pem(algorithm, pem, None)?;
        Ok(Self::with(Verifier::new(vec![key]), None))
    }

    /// A token for `subject` with the admin role, valid for `ttl_secs` (HS256 only).
    pub fn issue_admin_token(&self, subject: &str, ttl_secs: u64) -> Option<String> {
        let signer = self.signer.as_ref()?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_secs();
        let mut claims = Map::new();
        claims.insert("sub".to_owned(), Value::from(subject));
        claims.insert("exp".to_owned(), Value::from(now + ttl_secs));
        claims.insert("iat".to_owned(), Value::from(now));
        claims.insert(
            self.role_claim.clone(),
            Value::from(vec![self.admin_role.clone()]),
        );
        if let Some(issuer) = &self.verifier.issuer {
            claims.insert("iss".to_owned(), Value::from(issuer.clone()));
        }
        if let Some(audience) = &self.verifier.audience {
            claims.insert("aud".to_owned(), Value::from(audience.clone()));
        }
        signer.sign(&claims)
    }
}

/// The admin API's credentials.
#[derive(Debug, Clone, Default)]
pub struct AdminAuth {
    pub bootstrap_token: Option<String>,
    pub jwt: Option<JwtConfig>,
}

/// An authenticated admin; `subject` names who, for logs.
#[derive(Debug, Clone)]
pub struct Admin {
    pub subject: String,
}

/// Equal-length comparison that takes the same time wherever the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn has_role(claims: &Map<String, Value>, claim: &str, role: &str) -> bool {
    match claims.get(claim) {
        Some(Value::Array(roles)) => roles.iter().any(|r| r.as_str() == Some(role)),
        Some(Value::String(roles)) => roles.split_whitespace().any(|r| r == role),
        _ => false,
    }
}

impl AdminAuth {
    /// Checks an `Authorization` header value.
    pub fn check(&self, authorization: Option<&str>) -> Result<Admin, Problem> {
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                Problem::unauthorized("send an admin token as `Authorization: Bearer <token>`")
            })?;
        if let Some(bootstrap) = &self.bootstrap_token {
            if same(token.as_bytes(), bootstrap.as_bytes()) {
                return Ok(Admin {
                    subject: "bootstrap".to_owned(),
                });
            }
        }
        let Some(jwt) = &self.jwt else {
            return Err(Problem::unauthorized("the token is not valid"));
        };
        let claims = jwt
            .verifier
            .verify(token, &["sub"])
            .map_err(|e| Problem::unauthorized(format!("the token is not valid: {e}")))?;
        if !has_role(&claims, &jwt.role_claim, &jwt.admin_role) {
            return Err(Problem::forbidden(format!(
                "the token's {:?} claim does not grant the {:?} role",
                jwt.role_claim, jwt.admin_role
            )));
        }
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(Admin { subject })
    }
}

impl FromRequestParts<Arc<AdminState>> for Admin {
    type Rejection = Problem;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AdminState>,
    ) -> Result<Self, Problem> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        state.auth.check(header)
    }
}
