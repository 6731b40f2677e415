//! Who is calling: a bearer JWT (tenant and principal from its claims), or an API key
//! presented as HTTP Basic credentials (`key id : secret`), checked by the control plane and
//! remembered for a minute.
//!
//! Keys come from configuration and, optionally, a JWKS URL, as `skein_token::jwks` keeps
//! them: refreshed now and then, fetched again (rationed) for a token naming an unknown kid,
//! and read only within bounds.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use parking_lot::Mutex;
use skein_auth::Principal;
use skein_proto::controller as pb;
use skein_proto::replicas::ControllerReplicas;
use skein_token::jwks::{JwksSource, TrustedKeys};
use skein_token::{Claims, Verifier};

use crate::cluster::ClusterView;
use crate::error::GatewayError;

/// How often the JWKS is fetched anyway, unless configured otherwise.
pub const JWKS_REFRESH_EVERY: Duration = skein_token::jwks::REFRESH_EVERY;

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
    /// Where the issuer publishes its keys, if anywhere, and how often they are fetched
    /// again.
    pub jwks: Option<JwksSource>,
    /// The claim naming the tenant.
    pub tenant_claim: String,
}

/// A verified API key: its secret, its caller, and when it was checked.
type RememberedKey = (String, Caller, Instant);

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
    keys: Arc<TrustedKeys>,
    controller: Option<ControllerReplicas>,
    api_keys: Arc<Mutex<HashMap<String, RememberedKey>>>,
    /// The cluster's view, whose list of keys in force ends a remembered key at once when
    /// it is revoked.
    view: Option<ClusterView>,
    /// Counts refusals by reason.
    metrics: crate::metrics::GatewayMetrics,
}

impl Authenticator {
    /// Counts its refusals in `metrics`.
    pub(crate) fn counting(mut self, metrics: crate::metrics::GatewayMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Forgets a remembered API key as soon as `view` no longer lists it as in force.
    pub fn following(mut self, view: ClusterView) -> Self {
        self.view = Some(view);
        self
    }

    /// `controller` checks API keys; without it only tokens are accepted. With a JWKS URL,
    /// and inside a Tokio runtime, this starts the key set's periodic refresh, which ends
    /// once the authenticator and its clones are dropped.
    pub fn new(config: AuthConfig, controller: Option<ControllerReplicas>) -> Self {
        let keys = TrustedKeys::new(config.verifier.clone(), config.jwks.clone());
        let config = Arc::new(config);
        Self {
            config,
            keys,
            controller,
            api_keys: Arc::new(Mutex::new(HashMap::new())),
            view: None,
            metrics: crate::metrics::GatewayMetrics::default(),
        }
    }

    /// The caller an `Authorization` header value names.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Caller, GatewayError> {
        let (caller, reason) = self.check(authorization).await;
        if let Some(reason) = reason {
            self.metrics.auth_rejected(reason);
        }
        caller
    }

    /// The caller, or the refusal with its reason for metrics.
    async fn check(
        &self,
        authorization: Option<&str>,
    ) -> (Result<Caller, GatewayError>, Option<&'static str>) {
        let refused = |reason: &'static str| move |e: GatewayError| (Err(e), Some(reason));
        let Some(value) = authorization else {
            return refused("missing")(GatewayError::Unauthenticated(
                "send `Authorization: Bearer <token>` or an API key as Basic credentials"
                    .to_owned(),
            ));
        };
        let (scheme, credential) = value.trim().split_once(' ').unwrap_or((value, ""));
        let credential = credential.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            match self.token(credential).await {
                Ok(caller) => (Ok(caller), None),
                Err((e, reason)) => (Err(e), Some(reason)),
            }
        } else if scheme.eq_ignore_ascii_case("basic") {
            match self.api_key(credential).await {
                Ok(caller) => (Ok(caller), None),
                Err(e @ GatewayError::Unauthenticated(_)) => (Err(e), Some("bad_api_key")),
                Err(e) => (Err(e), None),
            }
        } else {
            refused("scheme")(GatewayError::Unauthenticated(format!(
                "the {scheme} scheme is not accepted; use Bearer or Basic"
            )))
        }
    }

    async fn token(&self, token: &str) -> Result<Caller, (GatewayError, &'static str)> {
        let required = ["sub", self.config.tenant_claim.as_str()];
        let claims = self.keys.verify(token, &required).await.map_err(|e| {
            tracing::debug!(reason = %e, "token refused");
            (
                GatewayError::Unauthenticated(format!("the token was refused: {e}")),
                e.reason(),
            )
        })?;
        let text = |name: &str| {
            claims
                .get(name)
                .and_then(serde_json::Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| {
                    (
                        GatewayError::Unauthenticated(format!(
                            "the token's {name} claim is not a name"
                        )),
                        "missing_claim",
                    )
                })
        };
        let tenant = text(&self.config.tenant_claim)?;
        if !skein_auth::is_tenant_name(&tenant) {
            return Err((
                GatewayError::Unauthenticated(format!(
                    "the token's {} claim is not a tenant name",
                    self.config.tenant_claim
                )),
                "missing_claim",
            ));
        }
        Ok(Caller {
            tenant,
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
    use skein_token::VerifyingKey;

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
            jwks: Some(JwksSource {
                url: issuer.url.clone(),
                refresh_every,
            }),
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

        let too_many =
            json!({"keys": vec![jwks()["keys"][0].clone(); skein_token::jwks::MAX_KEYS + 1]});
        let padding = "x".repeat(skein_token::jwks::MAX_BYTES);
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
        auth.keys.forget_last_fetch().await;
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
