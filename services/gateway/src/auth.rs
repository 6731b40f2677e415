//! Who is calling: a bearer JWT (tenant and principal from its claims), or an API key
//! presented as HTTP Basic credentials (`key id : secret`), checked by the control plane and
//! remembered for a minute.
//!
//! Keys come from configuration and, optionally, a JWKS URL. The key set is fetched at start
//! and again every [`AuthConfig::jwks_refresh_every`], so a key the issuer removed stops
//! being trusted after the next refresh; a refresh that fails keeps the keys fetched before.
//! A token naming a `kid` no key has makes the gateway fetch the key set at once, at most
//! once per [`JWKS_REFETCH_EVERY`], so a rotated key is picked up without letting a flood of
//! bogus tokens hammer the issuer. A key set is read only up to [`JWKS_MAX_BYTES`] and
//! [`JWKS_MAX_KEYS`].

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use parking_lot::Mutex;
use skein_auth::Principal;
use skein_proto::controller as pb;
use skein_proto::replicas::ControllerReplicas;
use skein_token::{Claims, TokenError, Verifier, VerifyingKey};

use crate::cluster::ClusterView;
use crate::error::GatewayError;

/// The least time between two fetches of the JWKS prompted by unknown `kid`s.
pub const JWKS_REFETCH_EVERY: Duration = Duration::from_secs(10);

/// How often the JWKS is fetched anyway, unless configured otherwise.
pub const JWKS_REFRESH_EVERY: Duration = Duration::from_secs(5 * 60);

/// The shortest refresh interval honoured (a shorter one would hammer the issuer).
const JWKS_REFRESH_AT_LEAST: Duration = Duration::from_secs(1);

/// The largest JWKS body read; a longer one fails the fetch.
pub const JWKS_MAX_BYTES: usize = 1024 * 1024;

/// The most keys a JWKS may hold; a larger set fails the fetch whole.
pub const JWKS_MAX_KEYS: usize = 100;

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
    /// How often the JWKS is fetched again ([`JWKS_REFRESH_EVERY`] by default; at least a
    /// second).
    pub jwks_refresh_every: Duration,
    /// The claim naming the tenant.
    pub tenant_claim: String,
}

/// A verified API key: its secret, its caller, and when it was checked.
type RememberedKey = (String, Caller, Instant);

/// The keys tokens are checked with: the configured ones, and the JWKS's as last fetched.
#[derive(Debug)]
struct Keys {
    config: Arc<AuthConfig>,
    /// When the JWKS was last fetched (or tried); held while fetching, so that one fetch
    /// runs at a time.
    fetched_at: tokio::sync::Mutex<Option<Instant>>,
    verifier: Mutex<Arc<Verifier>>,
    http: reqwest::Client,
}

impl Keys {
    fn new(config: Arc<AuthConfig>) -> Self {
        let verifier = Arc::new(config.verifier.clone());
        Self {
            config,
            fetched_at: tokio::sync::Mutex::new(None),
            verifier: Mutex::new(verifier),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap_or_default(),
        }
    }

    /// The verifier in force.
    fn current(&self) -> Arc<Verifier> {
        Arc::clone(&self.verifier.lock())
    }

    /// Fetches the key set again, for a token naming an unknown `kid`, unless that happened
    /// less than [`JWKS_REFETCH_EVERY`] ago.
    async fn refetch(&self) {
        let Some(url) = &self.config.jwks_url else {
            return;
        };
        let mut fetched_at = self.fetched_at.lock().await;
        if fetched_at.is_some_and(|at| at.elapsed() < JWKS_REFETCH_EVERY) {
            return;
        }
        if let Err(e) = self.fetch(url, &mut fetched_at).await {
            tracing::warn!(url, error = %e, "could not fetch the JWKS; keeping the keys in force");
        }
    }

    /// Fetches the key set now (the periodic refresh); a failure keeps the keys in force.
    async fn refresh(&self) -> Result<(), String> {
        let Some(url) = &self.config.jwks_url else {
            return Ok(());
        };
        let mut fetched_at = self.fetched_at.lock().await;
        let fetched = self.fetch(url, &mut fetched_at).await;
        if let Err(e) = &fetched {
            tracing::warn!(url, error = %e, "could not refresh the JWKS; keeping the keys in force");
        }
        fetched
    }

    /// Fetches the key set and, if that works, trusts exactly its keys besides the
    /// configured ones: a key it no longer holds is no longer trusted.
    async fn fetch(&self, url: &str, fetched_at: &mut Option<Instant>) -> Result<(), String> {
        *fetched_at = Some(Instant::now());
        let fetched = fetch_jwks(&self.http, url).await?;
        if fetched.is_empty() {
            tracing::warn!(url, "the JWKS holds no usable key");
        }
        let mut all = self.config.verifier.keys().to_vec();
        all.extend(fetched);
        *self.verifier.lock() = Arc::new(self.config.verifier.with_keys(all));
        Ok(())
    }
}

/// Refreshes the key set now and then every `every`, until the keys are no longer in use.
async fn refresh_periodically(keys: Weak<Keys>, every: Duration) {
    loop {
        let Some(in_use) = keys.upgrade() else {
            return;
        };
        // A failure is logged, and the keys in force stay.
        let _ = in_use.refresh().await;
        drop(in_use);
        tokio::time::sleep(every).await;
    }
}

/// The usable keys of the JWKS at `url`, read only up to [`JWKS_MAX_BYTES`] and
/// [`JWKS_MAX_KEYS`].
async fn fetch_jwks(http: &reqwest::Client, url: &str) -> Result<Vec<VerifyingKey>, String> {
    let mut response = http
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| e.to_string())?;
    if let Some(len) = response.content_length() {
        if len > JWKS_MAX_BYTES as u64 {
            return Err(format!(
                "the JWKS is {len} bytes long; at most {JWKS_MAX_BYTES} are read"
            ));
        }
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > JWKS_MAX_BYTES {
            return Err(format!(
                "the JWKS is longer than {JWKS_MAX_BYTES} bytes, the most read"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    jwks_keys(&body)
}

/// The usable keys of a JWKS body. A key that is not one (another key type, an encryption
/// key, parameters that do not parse) is skipped, so that one odd key does not cost the
/// others; a body that is not a key set, or holds more than [`JWKS_MAX_KEYS`] keys, is
/// refused whole.
fn jwks_keys(body: &[u8]) -> Result<Vec<VerifyingKey>, String> {
    #[derive(serde::Deserialize)]
    struct KeySet {
        keys: Vec<serde_json::Value>,
    }
    let set: KeySet = serde_json::from_slice(body)
        .map_err(|e| format!("the body is not a JSON Web Key Set: {e}"))?;
    if set.keys.len() > JWKS_MAX_KEYS {
        return Err(format!(
            "the JWKS holds {} keys; at most {JWKS_MAX_KEYS} are accepted",
            set.keys.len()
        ));
    }
    let usable = set.keys.into_iter().filter_map(|raw| {
        let jwk = serde_json::from_value::<jsonwebtoken::jwk::Jwk>(raw)
            .map_err(|e| tracing::debug!(error = %e, "skipping a JWK that does not parse"))
            .ok()?;
        VerifyingKey::from_jwk(&jwk)
            .map_err(|reason| tracing::debug!(kid = ?jwk.common.key_id, reason, "skipping a JWK"))
            .ok()
    });
    Ok(usable.collect())
}

/// When a verified token's `exp` falls, if the clock can say.
fn expiry(claims: &Claims) -> Option<SystemTime> {
    let exp = claims.get("exp")?;
    // Verified: a non-negative number of seconds below 2^64 (fractions are dropped).
    let secs = exp
        .as_u64()
        .or_else(|| exp.as_f64().map(|secs| secs as u64))?;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// Checks credentials.
#[derive(Debug, Clone)]
pub struct Authenticator {
    config: Arc<AuthConfig>,
    keys: Arc<Keys>,
    controller: Option<ControllerReplicas>,
    api_keys: Arc<Mutex<HashMap<String, RememberedKey>>>,
    /// The cluster's view, whose list of keys in force ends a remembered key at once when
    /// it is revoked.
    view: Option<ClusterView>,
}

impl Authenticator {
    /// Forgets a remembered API key as soon as `view` no longer lists it as in force.
    pub fn following(mut self, view: ClusterView) -> Self {
        self.view = Some(view);
        self
    }

    /// `controller` checks API keys; without it only tokens are accepted. With a JWKS URL,
    /// and inside a Tokio runtime, this starts the key set's periodic refresh, which ends
    /// once the authenticator and its clones are dropped.
    pub fn new(config: AuthConfig, controller: Option<ControllerReplicas>) -> Self {
        let config = Arc::new(config);
        let keys = Arc::new(Keys::new(Arc::clone(&config)));
        if config.jwks_url.is_some() {
            let every = config.jwks_refresh_every.max(JWKS_REFRESH_AT_LEAST);
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(refresh_periodically(Arc::downgrade(&keys), every));
                }
                Err(_) => tracing::warn!(
                    "no async runtime: the JWKS is fetched only for tokens naming unknown kids"
                ),
            }
        }
        Self {
            config,
            keys,
            controller,
            api_keys: Arc::new(Mutex::new(HashMap::new())),
            view: None,
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
        let verifier = self.keys.current();
        let claims = match verifier.verify(token, &required) {
            Err(TokenError::UnknownKey(kid)) if self.config.jwks_url.is_some() => {
                self.keys.refetch().await;
                // Keys fetched since, by this call or another, may know the kid.
                let latest = self.keys.current();
                if Arc::ptr_eq(&latest, &verifier) {
                    Err(TokenError::UnknownKey(kid))
                } else {
                    latest.verify(token, &required)
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
        Ok(Caller {
            tenant: text(&self.config.tenant_claim)?,
            name: text("sub")?,
            expires_at: expiry(&claims),
            api_key: None,
        })
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

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    use serde_json::{json, Value};

    use super::*;

    fn key(name: &str) -> Vec<u8> {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../crates/skein-token/tests/keys"
        );
        std::fs::read(format!("{dir}/{name}")).unwrap()
    }

    /// The test key set (`rsa-jwk`, `ec-jwk`, `ed-jwk`).
    fn jwks() -> Value {
        serde_json::from_slice(&key("jwks.json")).unwrap()
    }

    /// The test key set without the key `kid`.
    fn jwks_without(kid: &str) -> Value {
        let mut set = jwks();
        set["keys"]
            .as_array_mut()
            .unwrap()
            .retain(|k| k["kid"] != kid);
        set
    }

    /// A bearer credential for alice of acme, signed by the test key `kid`.
    fn bearer(algorithm: Algorithm, kid: &str) -> String {
        let encoding = match algorithm {
            Algorithm::RS256 => EncodingKey::from_rsa_pem(&key("rsa.pem")).unwrap(),
            Algorithm::ES256 => EncodingKey::from_ec_pem(&key("ec.pk8.pem")).unwrap(),
            other => panic!("{other:?}"),
        };
        let mut header = Header::new(algorithm);
        header.kid = Some(kid.to_owned());
        let exp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 600;
        let claims = json!({"sub": "alice", "tenant": "acme", "exp": exp});
        format!(
            "Bearer {}",
            jsonwebtoken::encode(&header, &claims, &encoding).unwrap()
        )
    }

    /// What the issuer's server answers.
    #[derive(Clone)]
    struct Answer {
        status: u16,
        body: Vec<u8>,
        /// Whether to send a Content-Length (otherwise the body ends with the connection).
        with_length: bool,
    }

    impl Answer {
        fn set(set: &Value) -> Self {
            Self {
                status: 200,
                body: serde_json::to_vec(set).unwrap(),
                with_length: true,
            }
        }
    }

    /// A tiny issuer serving whatever answer it is told to, counting the requests.
    struct Issuer {
        url: String,
        answer: Arc<Mutex<Answer>>,
        requests: Arc<AtomicUsize>,
    }

    impl Issuer {
        fn start(first: Answer) -> Self {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
            let answer = Arc::new(Mutex::new(first));
            let requests = Arc::new(AtomicUsize::new(0));
            let (serving, counting) = (Arc::clone(&answer), Arc::clone(&requests));
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(mut stream) = stream else { continue };
                    read_request(&mut stream);
                    counting.fetch_add(1, Ordering::SeqCst);
                    let answer = serving.lock().clone();
                    let length = if answer.with_length {
                        format!("Content-Length: {}\r\n", answer.body.len())
                    } else {
                        String::new()
                    };
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\n{length}\
                         Connection: close\r\n\r\n",
                        answer.status
                    );
                    let _ = stream.write_all(&answer.body);
                }
            });
            Self {
                url,
                answer,
                requests,
            }
        }

        fn serve(&self, answer: Answer) {
            *self.answer.lock() = answer;
        }

        fn requests(&self) -> usize {
            self.requests.load(Ordering::SeqCst)
        }
    }

    /// Reads a request's head (a GET has no body).
    fn read_request(stream: &mut std::net::TcpStream) {
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
    }

    fn authenticator(issuer: &Issuer, refresh_every: Duration) -> Authenticator {
        let config = AuthConfig {
            verifier: Verifier::new(Vec::new()),
            jwks_url: Some(issuer.url.clone()),
            jwks_refresh_every: refresh_every,
            tenant_claim: "tenant".to_owned(),
        };
        Authenticator::new(config, None)
    }

    /// The kids of the keys in force.
    fn trusted(auth: &Authenticator) -> Vec<String> {
        let verifier = auth.keys.current();
        let kids = verifier.keys().iter().filter_map(VerifyingKey::kid);
        kids.map(str::to_owned).collect()
    }

    /// Waits up to five seconds for `done`.
    async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_key_removed_from_the_jwks_stops_being_trusted_after_the_next_refresh() {
        let issuer = Issuer::start(Answer::set(&jwks()));
        let auth = authenticator(&issuer, Duration::from_secs(1));
        // Fetched at start, before any token asks.
        eventually("the key set is fetched", || trusted(&auth).len() == 3).await;
        let rsa = bearer(Algorithm::RS256, "rsa-jwk");
        let ec = bearer(Algorithm::ES256, "ec-jwk");
        assert_eq!(auth.authenticate(Some(&rsa)).await.unwrap().name, "alice");

        issuer.serve(Answer::set(&jwks_without("rsa-jwk")));
        let before = issuer.requests();
        // No token prompts this: the periodic refresh alone drops the key.
        eventually("the removed key is dropped", || {
            !trusted(&auth).contains(&"rsa-jwk".to_owned())
        })
        .await;
        assert!(issuer.requests() > before);
        assert_eq!(trusted(&auth), ["ec-jwk", "ed-jwk"]);
        assert!(matches!(
            auth.authenticate(Some(&rsa)).await,
            Err(GatewayError::Unauthenticated(_))
        ));
        assert_eq!(auth.authenticate(Some(&ec)).await.unwrap().tenant, "acme");

        // A key added back is trusted after the next refresh too.
        issuer.serve(Answer::set(&jwks()));
        eventually("the key is back", || trusted(&auth).len() == 3).await;
        assert!(auth.authenticate(Some(&rsa)).await.is_ok());
    }

    #[tokio::test]
    async fn a_failed_refresh_keeps_the_keys_in_force() {
        let issuer = Issuer::start(Answer::set(&jwks()));
        let auth = authenticator(&issuer, Duration::from_secs(3600));
        eventually("the key set is fetched", || trusted(&auth).len() == 3).await;
        let all = trusted(&auth);
        let rsa = bearer(Algorithm::RS256, "rsa-jwk");

        let too_many = json!({"keys": vec![jwks()["keys"][0].clone(); JWKS_MAX_KEYS + 1]});
        let padding = "x".repeat(JWKS_MAX_BYTES);
        let too_long = Answer::set(&json!({"keys": jwks()["keys"], "padding": padding}));
        let failures = [
            (
                "a server error",
                Answer {
                    status: 500,
                    ..Answer::set(&jwks_without("rsa-jwk"))
                },
            ),
            (
                "not found",
                Answer {
                    status: 404,
                    ..Answer::set(&json!({"keys": []}))
                },
            ),
            (
                "not JSON",
                Answer {
                    body: b"<html>".to_vec(),
                    ..Answer::set(&json!({}))
                },
            ),
            ("not a key set", Answer::set(&json!({"kid": "rsa-jwk"}))),
            ("too many keys", Answer::set(&too_many)),
            ("too long", too_long.clone()),
            (
                "too long, without a length",
                Answer {
                    with_length: false,
                    ..too_long
                },
            ),
        ];
        for (what, answer) in failures {
            issuer.serve(answer);
            let refused = auth.keys.refresh().await;
            assert!(refused.is_err(), "{what}");
            assert_eq!(trusted(&auth), all, "{what}");
            assert!(auth.authenticate(Some(&rsa)).await.is_ok(), "{what}");
        }
        let error = auth.keys.refresh().await.unwrap_err();
        assert!(error.contains("longer than"), "{error}");

        // A set with keys that are not usable keeps the usable ones, and only those.
        let mut odd = jwks_without("ec-jwk");
        let keys = odd["keys"].as_array_mut().unwrap();
        keys.push(json!({"kty": "oct", "k": "c2VjcmV0", "kid": "symmetric"}));
        keys.push(json!({"kty": "RSA", "kid": "no-modulus", "e": "AQAB"}));
        keys.push(json!({"kty": "unknown", "kid": "future"}));
        issuer.serve(Answer::set(&odd));
        auth.keys.refresh().await.unwrap();
        assert_eq!(trusted(&auth), ["rsa-jwk", "ed-jwk"]);
    }

    #[tokio::test]
    async fn an_unknown_kid_fetches_the_key_set_at_most_every_ten_seconds() {
        let issuer = Issuer::start(Answer::set(&jwks_without("ec-jwk")));
        let auth = authenticator(&issuer, Duration::from_secs(3600));
        eventually("the key set is fetched", || trusted(&auth).len() == 2).await;
        let fetched = issuer.requests();
        // Rotated in since the last fetch, which was just now: not fetched again yet.
        issuer.serve(Answer::set(&jwks()));
        let ec = bearer(Algorithm::ES256, "ec-jwk");
        assert!(auth.authenticate(Some(&ec)).await.is_err());
        assert_eq!(issuer.requests(), fetched);
        // Once the last fetch is old enough, the unknown kid fetches the set.
        *auth.keys.fetched_at.lock().await = Instant::now().checked_sub(JWKS_REFETCH_EVERY);
        assert!(auth.authenticate(Some(&ec)).await.is_ok());
        assert_eq!(issuer.requests(), fetched + 1);
    }

    #[test]
    fn the_expiry_of_any_verified_exp() {
        let claims = |exp: Value| json!({ "exp": exp }).as_object().unwrap().clone();
        assert_eq!(
            expiry(&claims(json!(1_700_000_000))),
            Some(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        );
        assert_eq!(
            expiry(&claims(json!(1_700_000_000.75))),
            Some(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        );
        // Beyond what the clock can represent: no expiry, and no panic.
        assert_eq!(expiry(&claims(json!(u64::MAX))), None);
    }
}
