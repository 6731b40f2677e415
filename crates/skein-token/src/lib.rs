//! Bearer-token (JWT) verification, shared by the admin API and the gateway.
//!
//! - Only RS256, ES256 and EdDSA are accepted from configured public keys, and HS256 only
//!   from a shared secret the deployment configured on purpose (development); the token's
//!   `alg` header never picks a key type: a key verifies only tokens of its own algorithm,
//!   and `none` is not an algorithm here at all.
//! - A key may carry a `kid`; a token naming a `kid` is checked against that key only.
//! - `exp` is required; `nbf`, `iss` and `aud` are checked (the latter two when configured)
//!   with a small leeway for clock skew.
//!
//! [`TokenError`] says why a token was refused; callers answer every case with 401 /
//! UNAUTHENTICATED and log the reason.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::Validation;
use jsonwebtoken::{decode, decode_header, encode, Algorithm, DecodingKey, EncodingKey, Header};
use serde_json::{Map, Value};

/// A token's claims.
pub type Claims = Map<String, Value>;

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is not a well-formed JWT: {0}")]
    Malformed(String),
    #[error("tokens signed with {0} are not accepted")]
    AlgorithmNotAllowed(String),
    #[error("no configured key matches the token (kid {0:?})")]
    UnknownKey(Option<String>),
    #[error("the token's signature does not verify")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    #[error("the token's issuer is not the expected one")]
    WrongIssuer,
    #[error("the token's audience is not the expected one")]
    WrongAudience,
    #[error("the token lacks the {0} claim")]
    MissingClaim(String),
}

/// A key tokens are verified with.
#[derive(Clone)]
pub struct VerifyingKey {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

impl std::fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyingKey")
            .field("kid", &self.kid)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl VerifyingKey {
    /// A shared HS256 secret (development: anyone holding it can mint tokens).
    pub fn hs256(secret: &[u8], kid: Option<String>) -> Self {
        Self {
            kid,
            algorithm: Algorithm::HS256,
            key: DecodingKey::from_secret(secret),
        }
    }

    /// An issuer's public key in PEM, for RS256, ES256 or EdDSA.
    pub fn public_pem(
        algorithm: Algorithm,
        pem: &[u8],
        kid: Option<String>,
    ) -> Result<Self, String> {
        let key = match algorithm {
            Algorithm::RS256 => DecodingKey::from_rsa_pem(pem),
            Algorithm::ES256 => DecodingKey::from_ec_pem(pem),
            Algorithm::EdDSA => DecodingKey::from_ed_pem(pem),
            other => return Err(format!("{other:?} is not an accepted algorithm")),
        }
        .map_err(|e| e.to_string())?;
        Ok(Self {
            kid,
            algorithm,
            key,
        })
    }

    /// A key from a JSON Web Key Set: RSA (RS256), EC P-256 (ES256) or OKP Ed25519 (EdDSA).
    /// A key whose `alg` names another algorithm, or that is meant for encryption, is
    /// refused.
    pub fn from_jwk(jwk: &jsonwebtoken::jwk::Jwk) -> Result<Self, String> {
        use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, PublicKeyUse};
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            return Err("the key is for encryption, not signatures".to_owned());
        }
        let algorithm = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
                Algorithm::ES256
            }
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
                Algorithm::EdDSA
            }
            _ => return Err("only RSA, EC P-256 and Ed25519 keys are accepted".to_owned()),
        };
        if let Some(named) = jwk.common.key_algorithm {
            let named = format!("{named:?}");
            if named != format!("{algorithm:?}") {
                return Err(format!("the key's alg {named} is not accepted"));
            }
        }
        let key = DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
        Ok(Self {
            kid: jwk.common.key_id.clone(),
            algorithm,
            key,
        })
    }

    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

/// Checks tokens against configured keys and expectations.
#[derive(Debug, Clone)]
pub struct Verifier {
    keys: Vec<VerifyingKey>,
    pub issuer: Option<String>,
    pub audience: Option<String>,
    /// Seconds of clock skew tolerated on `exp` and `nbf`.
    pub leeway_secs: u64,
}

impl Verifier {
    pub fn new(keys: Vec<VerifyingKey>) -> Self {
        Self {
            keys,
            issuer: None,
            audience: None,
            leeway_secs: 30,
        }
    }

    /// The keys tokens are checked against.
    pub fn keys(&self) -> &[VerifyingKey] {
        &self.keys
    }

    /// The same expectations with another set of keys.
    pub fn with_keys(&self, keys: Vec<VerifyingKey>) -> Self {
        Self {
            keys,
            issuer: self.issuer.clone(),
            audience: self.audience.clone(),
            leeway_secs: self.leeway_secs,
        }
    }

    /// The claims of a token that verifies; `required` claims must be present.
    pub fn verify(&self, token: &str, required: &[&str]) -> Result<Claims, TokenError> {
        let header = decode_header(token).map_err(|e| match e.kind() {
            // An algorithm jsonwebtoken does not know (such as `none`) fails here.
            ErrorKind::Json(_) | ErrorKind::InvalidAlgorithmName => {
                TokenError::AlgorithmNotAllowed(algorithm_name(token))
            }
            _ => TokenError::Malformed(e.to_string()),
        })?;
        let of_algorithm: Vec<&VerifyingKey> = self
            .keys
            .iter()
            .filter(|k| k.algorithm == header.alg)
            .collect();
        if of_algorithm.is_empty() {
            return Err(TokenError::AlgorithmNotAllowed(format!("{:?}", header.alg)));
        }
        let candidates: Vec<&VerifyingKey> = match &header.kid {
            Some(kid) => of_algorithm
                .into_iter()
                .filter(|k| k.kid.as_deref().is_none_or(|own| own == kid))
                .collect(),
            None => of_algorithm,
        };
        if candidates.is_empty() {
            return Err(TokenError::UnknownKey(header.kid));
        }
        let mut refusal = TokenError::BadSignature;
        for key in candidates {
            let mut validation = Validation::new(key.algorithm);
            validation.leeway = self.leeway_secs;
            validation.validate_nbf = true;
            let mut spec = vec!["exp"];
            spec.extend(
                required
                    .iter()
                    .copied()
                    .filter(|c| ["iss", "aud", "sub", "nbf"].contains(c)),
            );
            validation.set_required_spec_claims(&spec);
            match &self.issuer {
                Some(issuer) => validation.set_issuer(&[issuer]),
                None => validation.iss = None,
            }
            match &self.audience {
                Some(audience) => validation.set_audience(&[audience]),
                None => validation.validate_aud = false,
            }
            match decode::<Claims>(token, &key.key, &validation) {
                Ok(data) => {
                    for claim in required {
                        if !data.claims.contains_key(*claim) {
                            return Err(TokenError::MissingClaim((*claim).to_owned()));
                        }
                    }
                    return Ok(data.claims);
                }
                Err(e) => {
                    refusal = match e.kind() {
                        ErrorKind::InvalidSignature => TokenError::BadSignature,
                        ErrorKind::ExpiredSignature => return Err(TokenError::Expired),
                        ErrorKind::ImmatureSignature => return Err(TokenError::NotYetValid),
                        ErrorKind::InvalidIssuer => return Err(TokenError::WrongIssuer),
                        ErrorKind::InvalidAudience => return Err(TokenError::WrongAudience),
                        ErrorKind::MissingRequiredClaim(c) => {
                            return Err(TokenError::MissingClaim(c.clone()))
                        }
                        _ => TokenError::Malformed(e.to_string()),
                    };
                }
            }
        }
        Err(refusal)
    }
}

/// The `alg` a token's header names, for the refusal message.
fn algorithm_name(token: &str) -> String {
    let decoded = token
        .split('.')
        .next()
        .and_then(base64url)
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
    decoded
        .as_ref()
        .and_then(|h| h.get("alg"))
        .and_then(Value::as_str)
        .unwrap_or("an unknown algorithm")
        .to_owned()
}

fn base64url(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for c in text.bytes().filter(|c| *c != b'=') {
        let value = ALPHABET.iter().position(|a| *a == c)? as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

/// Mints HS256 tokens (development: `skein dev` and tests).
#[derive(Clone)]
pub struct Hs256Signer {
    key: EncodingKey,
}

impl std::fmt::Debug for Hs256Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hs256Signer").finish_non_exhaustive()
    }
}

impl Hs256Signer {
    pub fn new(secret: &[u8]) -> Self {
        Self {
            key: EncodingKey::from_secret(secret),
        }
    }

    /// A token carrying `claims` (the caller sets `exp` and the rest).
    pub fn sign(&self, claims: &Claims) -> Option<String> {
        encode(&Header::new(Algorithm::HS256), claims, &self.key).ok()
    }
}
