//! Bearer-token (JWT) verification, shared by the admin API and the gateway.
//!
//! - Only RS256, ES256 and EdDSA are accepted from configured public keys, and HS256 only
//!   from a shared secret the deployment configured on purpose (development); the token's
//!   `alg` header never picks a key type: a key verifies only tokens of its own algorithm,
//!   and `none` is not an algorithm here at all.
//! - A key may carry a `kid`; a token naming a `kid` is checked against that key only.
//! - Tokens longer than [`MAX_TOKEN_BYTES`] are refused before any decoding.
//! - Once the signature verifies, the registered claims (RFC 7519 §4.1) are read by this
//!   crate itself, not only by jsonwebtoken (whose claim checks have let values of the wrong
//!   JSON type through before): `exp`, `nbf` and `iat` must be NumericDates (non-negative
//!   numbers), `iss`, `sub` and `jti` strings, `aud` a string or an array of strings; a
//!   present claim of any other type is refused, whatever its value.
//! - `exp` is required; `iss` and `aud` are required whenever an issuer or an audience is
//!   configured; `exp` and `nbf` are checked with a small leeway for clock skew.
//!
//! With the `jwks` feature, [`jwks::TrustedKeys`] adds the keys of an issuer's JWKS URL,
//! refreshed as the issuer rotates them.
//!
//! [`TokenError`] says why a token was refused; callers answer every case with 401 /
//! UNAUTHENTICATED and log the reason.

use std::time::{SystemTime, UNIX_EPOCH};

#[cfg(feature = "jwks")]
pub mod jwks;

use base64::Engine;
use jsonwebtoken::errors::{Error as JwtError, ErrorKind};
use jsonwebtoken::Validation;
use jsonwebtoken::{decode, decode_header, encode, Algorithm, DecodingKey, EncodingKey, Header};
use serde_json::{Map, Value};

/// A token's claims.
pub type Claims = Map<String, Value>;

/// The longest token accepted, in bytes. Real tokens are a few KiB at most; anything longer
/// is refused before it is decoded.
pub const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// What a time claim (`exp`, `nbf`, `iat`) must hold.
const NUMERIC_DATE: &str = "a NumericDate (a non-negative number of seconds since the epoch)";
/// What `iss`, `sub` and `jti` must hold.
const STRING: &str = "a string";
/// What `aud` must hold.
const AUDIENCE: &str = "a string or an array of strings";

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is not a well-formed JWT: {0}")]
    Malformed(String),
    #[error("the token is {len} bytes long; at most {max} are accepted")]
    TooLarge { len: usize, max: usize },
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
    /// A registered claim holds a value of the wrong JSON type (or a negative or
    /// out-of-range time).
    #[error("the token's {claim} claim is {found}; it must be {expected}")]
    WrongClaimType {
        claim: String,
        expected: &'static str,
        found: &'static str,
    },
}

impl TokenError {
    /// A short name of the refusal, for metrics (one of a fixed few).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Malformed(_) | Self::WrongClaimType { .. } => "malformed",
            Self::TooLarge { .. } => "too_large",
            Self::AlgorithmNotAllowed(_) => "algorithm",
            Self::UnknownKey(_) => "unknown_key",
            Self::BadSignature => "bad_signature",
            Self::Expired => "expired",
            Self::NotYetValid => "not_yet_valid",
            Self::WrongIssuer => "issuer",
            Self::WrongAudience => "audience",
            Self::MissingClaim(_) => "missing_claim",
        }
    }
}

/// A key tokens are verified with.
#[derive(Clone)]
pub struct VerifyingKey {
    kid: Option<String>,
    algorithm: Algorithm,
    /// `None` for an empty HS256 secret, which verifies nothing.
    key: Option<DecodingKey>,
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
    /// A shared HS256 secret (development: anyone holding it can mint tokens). An empty
    /// secret verifies no token at all.
    pub fn hs256(secret: &[u8], kid: Option<String>) -> Self {
        Self {
            kid,
            algorithm: Algorithm::HS256,
            key: DecodingKey::from_secret(secret).ok(),
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
            key: Some(key),
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
            key: Some(key),
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
    /// The `iss` every token must carry, if set.
    pub issuer: Option<String>,
    /// The audience every token's `aud` must name, if set.
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
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::TooLarge {
                len: token.len(),
                max: MAX_TOKEN_BYTES,
            });
        }
        let header = header(token)?;
        let mut refusal = TokenError::BadSignature;
        for (algorithm, key) in self.candidates(&header)? {
            match decode::<Claims>(token, key, &self.validation(algorithm, required)) {
                Ok(data) => {
                    self.check_claims(&data.claims, required)?;
                    return Ok(data.claims);
                }
                // jsonwebtoken reads the payload only once the signature has verified.
                Err(e) if is_about_payload(&e) => {
                    return Err(self.claims_refusal(token, required, &e));
                }
                Err(e) if is_about_token(&e) => return Err(TokenError::Malformed(e.to_string())),
                // This key's signature or its material: another candidate may verify.
                Err(e) => {
                    refusal = match e.kind() {
                        ErrorKind::InvalidSignature => TokenError::BadSignature,
                        _ => TokenError::Malformed(e.to_string()),
                    }
                }
            }
        }
        Err(refusal)
    }

    /// The keys that may have signed a token with this header: those of its algorithm, and
    /// of its `kid` when it names one (a key without a kid matches any).
    fn candidates(&self, header: &Header) -> Result<Vec<(Algorithm, &DecodingKey)>, TokenError> {
        let of_algorithm: Vec<&VerifyingKey> = self
            .keys
            .iter()
            .filter(|k| k.algorithm == header.alg && k.key.is_some())
            .collect();
        if of_algorithm.is_empty() {
            return Err(self.no_key_of_algorithm(header));
        }
        let candidates: Vec<(Algorithm, &DecodingKey)> = of_algorithm
            .into_iter()
            .filter(|k| match &header.kid {
                Some(kid) => k.kid.as_deref().is_none_or(|own| own == kid),
                None => true,
            })
            .filter_map(|k| k.key.as_ref().map(|key| (k.algorithm, key)))
            .collect();
        if candidates.is_empty() {
            return Err(TokenError::UnknownKey(header.kid.clone()));
        }
        Ok(candidates)
    }

    /// Why no key of a token's algorithm is there: a `kid` no key has, with an algorithm
    /// public keys are accepted for, may be a key its issuer has just published (a caller
    /// with a JWKS fetches it again); anything else is an algorithm not accepted here.
    fn no_key_of_algorithm(&self, header: &Header) -> TokenError {
        let publishable = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];
        match &header.kid {
            Some(kid)
                if publishable.contains(&header.alg)
                    && !self.keys.iter().any(|k| k.kid() == Some(kid.as_str())) =>
            {
                TokenError::UnknownKey(Some(kid.clone()))
            }
            _ => TokenError::AlgorithmNotAllowed(format!("{:?}", header.alg)),
        }
    }

    /// jsonwebtoken's own claim checks, set as strictly as ours: a second line behind
    /// [`Verifier::check_claims`].
    fn validation(&self, algorithm: Algorithm, required: &[&str]) -> Validation {
        let mut validation = Validation::new(algorithm);
        validation.leeway = self.leeway_secs;
        validation.validate_nbf = true;
        let mut spec = vec!["exp"];
        spec.extend(
            required
                .iter()
                .copied()
                .filter(|c| ["iss", "aud", "sub", "nbf"].contains(c)),
        );
        match &self.issuer {
            Some(issuer) => {
                validation.set_issuer(&[issuer]);
                spec.push("iss");
            }
            None => validation.iss = None,
        }
        match &self.audience {
            Some(audience) => {
                validation.set_audience(&[audience]);
                spec.push("aud");
            }
            None => validation.validate_aud = false,
        }
        validation.set_required_spec_claims(&spec);
        validation
    }

    /// Checks the claims of a token whose signature verified: the registered claims' types,
    /// then what must be present, then the issuer and audience, then the times.
    fn check_claims(&self, claims: &Claims, required: &[&str]) -> Result<(), TokenError> {
        let registered = Registered::read(claims)?;
        let exp = registered.exp.ok_or_else(|| missing("exp"))?;
        if let Some(claim) = required.iter().find(|c| !claims.contains_key(**c)) {
            return Err(missing(claim));
        }
        if let Some(issuer) = &self.issuer {
            if registered.iss.ok_or_else(|| missing("iss"))? != issuer.as_str() {
                return Err(TokenError::WrongIssuer);
            }
        }
        if let Some(audience) = &self.audience {
            let named = registered.aud.ok_or_else(|| missing("aud"))?;
            if !named.contains(&audience.as_str()) {
                return Err(TokenError::WrongAudience);
            }
        }
        let now = now_secs();
        if exp.saturating_add(self.leeway_secs) < now {
            return Err(TokenError::Expired);
        }
        if registered
            .nbf
            .is_some_and(|nbf| nbf > now.saturating_add(self.leeway_secs))
        {
            return Err(TokenError::NotYetValid);
        }
        Ok(())
    }

    /// Why a token whose signature verified was refused for its payload: this crate's
    /// reading of the claims, which says more than jsonwebtoken's; jsonwebtoken's reason if
    /// ours finds nothing (a payload that is not a JSON object, or the two reading the clock
    /// a moment apart).
    fn claims_refusal(&self, token: &str, required: &[&str], error: &JwtError) -> TokenError {
        // The signature has verified, so these are the issuer's claims.
        jsonwebtoken::dangerous::insecure_decode_claims::<Claims>(token)
            .ok()
            .and_then(|claims| self.check_claims(&claims, required).err())
            .unwrap_or_else(|| library_claims_refusal(error))
    }
}

/// The registered claims this crate reads, once their types are checked.
#[derive(Debug)]
struct Registered<'a> {
    exp: Option<u64>,
    nbf: Option<u64>,
    iss: Option<&'a str>,
    aud: Option<Vec<&'a str>>,
}

impl<'a> Registered<'a> {
    /// Refuses a registered claim of the wrong type, whether or not it is checked further.
    fn read(claims: &'a Claims) -> Result<Self, TokenError> {
        let exp = numeric_date(claims, "exp")?;
        let nbf = numeric_date(claims, "nbf")?;
        numeric_date(claims, "iat")?;
        let iss = string(claims, "iss")?;
        string(claims, "sub")?;
        string(claims, "jti")?;
        let aud = audience(claims)?;
        Ok(Self { exp, nbf, iss, aud })
    }
}

/// A time claim in whole seconds, rounded as jsonwebtoken rounds it; `None` when absent.
fn numeric_date(claims: &Claims, name: &str) -> Result<Option<u64>, TokenError> {
    let Some(value) = claims.get(name) else {
        return Ok(None);
    };
    let wrong = |found| wrong_type(name, NUMERIC_DATE, found);
    let Value::Number(number) = value else {
        return Err(wrong(json_type(value)));
    };
    if let Some(secs) = number.as_u64() {
        return Ok(Some(secs));
    }
    match number.as_f64() {
        Some(secs) if secs < 0.0 => Err(wrong("a negative number")),
        Some(secs) if secs.is_finite() && secs < u64::MAX as f64 => Ok(Some(secs.round() as u64)),
        _ => Err(wrong("a number too large to be a time")),
    }
}

/// A string claim; `None` when absent.
fn string<'a>(claims: &'a Claims, name: &str) -> Result<Option<&'a str>, TokenError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(wrong_type(name, STRING, json_type(other))),
    }
}

/// The audiences `aud` names (one string, or an array of strings); `None` when absent.
fn audience(claims: &Claims) -> Result<Option<Vec<&str>>, TokenError> {
    match claims.get("aud") {
        None => Ok(None),
        Some(Value::String(one)) => Ok(Some(vec![one])),
        Some(Value::Array(many)) => many
            .iter()
            .map(|member| {
                member
                    .as_str()
                    .ok_or_else(|| wrong_type("aud", AUDIENCE, "an array with a non-string member"))
            })
            .collect::<Result<Vec<&str>, TokenError>>()
            .map(Some),
        Some(other) => Err(wrong_type("aud", AUDIENCE, json_type(other))),
    }
}

/// A JSON value's type, as a refusal names it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn wrong_type(claim: &str, expected: &'static str, found: &'static str) -> TokenError {
    TokenError::WrongClaimType {
        claim: claim.to_owned(),
        expected,
        found,
    }
}

fn missing(claim: &str) -> TokenError {
    TokenError::MissingClaim(claim.to_owned())
}

/// Seconds since the epoch (0 on a clock set before it, where every token is then
/// not-yet-valid or unexpired as its claims say).
fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// The errors jsonwebtoken reports from reading and checking the payload, which it does
/// after the signature verified. A claim of an unexpected type can make its reading of the
/// claims fail as a whole, as a JSON error.
fn is_about_payload(error: &JwtError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::Json(_)
            | ErrorKind::ExpiredSignature
            | ErrorKind::ImmatureSignature
            | ErrorKind::InvalidIssuer
            | ErrorKind::InvalidAudience
            | ErrorKind::InvalidSubject
            | ErrorKind::MissingRequiredClaim(_)
            | ErrorKind::InvalidClaimFormat(_)
    )
}

/// The errors that come from the token's encoding, whichever key checks it.
fn is_about_token(error: &JwtError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::InvalidToken | ErrorKind::Base64(_) | ErrorKind::Utf8(_)
    )
}

/// jsonwebtoken's claim refusal in this crate's terms.
fn library_claims_refusal(error: &JwtError) -> TokenError {
    match error.kind() {
        ErrorKind::ExpiredSignature => TokenError::Expired,
        ErrorKind::ImmatureSignature => TokenError::NotYetValid,
        ErrorKind::InvalidIssuer => TokenError::WrongIssuer,
        ErrorKind::InvalidAudience => TokenError::WrongAudience,
        ErrorKind::MissingRequiredClaim(claim) => missing(claim),
        ErrorKind::InvalidClaimFormat(claim) => {
            let expected = match claim.as_str() {
                "exp" | "nbf" | "iat" => NUMERIC_DATE,
                "aud" => AUDIENCE,
                _ => STRING,
            };
            wrong_type(claim, expected, "of another type")
        }
        _ => TokenError::Malformed(error.to_string()),
    }
}

/// The token's header. One that does not parse is refused for its algorithm when it names
/// one jsonwebtoken does not know (such as `none`), and as malformed otherwise.
fn header(token: &str) -> Result<Header, TokenError> {
    decode_header(token).map_err(|e| match e.kind() {
        ErrorKind::Json(_) | ErrorKind::InvalidAlgorithmName => match header_algorithm(token) {
            Some(alg) if alg.parse::<Algorithm>().is_err() => TokenError::AlgorithmNotAllowed(alg),
            _ => TokenError::Malformed(format!("the header does not parse: {e}")),
        },
        _ => TokenError::Malformed(e.to_string()),
    })
}

/// The `alg` a token's header names, if its header is a JSON object naming one.
fn header_algorithm(token: &str) -> Option<String> {
    let encoded = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .ok()?;
    let header: Value = serde_json::from_slice(&bytes).ok()?;
    header.get("alg")?.as_str().map(str::to_owned)
}

/// Mints HS256 tokens (development: `skein dev` and tests).
#[derive(Clone)]
pub struct Hs256Signer {
    /// `None` for an empty secret, which signs nothing.
    key: Option<EncodingKey>,
}

impl std::fmt::Debug for Hs256Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hs256Signer").finish_non_exhaustive()
    }
}

impl Hs256Signer {
    /// A signer with this secret; an empty secret signs nothing.
    pub fn new(secret: &[u8]) -> Self {
        Self {
            key: EncodingKey::from_secret(secret).ok(),
        }
    }

    /// A token carrying `claims` (the caller sets `exp` and the rest).
    pub fn sign(&self, claims: &Claims) -> Option<String> {
        encode(&Header::new(Algorithm::HS256), claims, self.key.as_ref()?).ok()
    }
}
