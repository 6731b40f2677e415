//! Keys from an issuer's JSON Web Key Set (JWKS) URL beside the configured ones, as the
//! gateway and the brokers' SASL/OAUTHBEARER trust them (feature `jwks`).
//!
//! The key set is fetched at start and again every [`JwksSource::refresh_every`], so a key
//! the issuer removed stops being trusted after the next refresh; a refresh that fails keeps
//! the keys fetched before. A token naming a `kid` no key has makes the set be fetched at
//! once, at most once per [`REFETCH_EVERY`], so a rotated key is picked up without letting
//! a flood of bogus tokens hammer the issuer. A key set is read only up to [`MAX_BYTES`] and
//! [`MAX_KEYS`].

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::{Claims, TokenError, Verifier, VerifyingKey};

/// The least time between two fetches of the JWKS prompted by unknown `kid`s.
pub const REFETCH_EVERY: Duration = Duration::from_secs(10);

/// How often the JWKS is fetched anyway, unless configured otherwise.
pub const REFRESH_EVERY: Duration = Duration::from_secs(5 * 60);

/// The shortest refresh interval honoured (a shorter one would hammer the issuer).
const REFRESH_AT_LEAST: Duration = Duration::from_secs(1);

/// The largest JWKS body read; a longer one fails the fetch.
pub const MAX_BYTES: usize = 1024 * 1024;

/// The most keys a JWKS may hold; a larger set fails the fetch whole.
pub const MAX_KEYS: usize = 100;

/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Where an issuer publishes its keys, and how often they are fetched again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwksSource {
    pub url: String,
    /// [`REFRESH_EVERY`] by default; at least a second.
    pub refresh_every: Duration,
}

impl JwksSource {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            refresh_every: REFRESH_EVERY,
        }
    }
}

/// The keys tokens are checked with: the configured ones, and the JWKS's as last fetched.
#[derive(Debug)]
pub struct TrustedKeys {
    configured: Verifier,
    source: Option<JwksSource>,
    /// When the JWKS was last fetched (or tried); held while fetching, so that one fetch
    /// runs at a time.
    fetched_at: tokio::sync::Mutex<Option<Instant>>,
    verifier: Mutex<Arc<Verifier>>,
    http: reqwest::Client,
}

impl TrustedKeys {
    /// `configured` keys (and its issuer and audience), and those of `source`. With a
    /// source, and inside a Tokio runtime, this starts the key set's periodic refresh,
    /// which ends once the keys are dropped; outside one, the set is fetched only for
    /// tokens naming unknown kids.
    pub fn new(configured: Verifier, source: Option<JwksSource>) -> Arc<Self> {
        let keys = Arc::new(Self {
            verifier: Mutex::new(Arc::new(configured.clone())),
            configured,
            source,
            fetched_at: tokio::sync::Mutex::new(None),
            http: reqwest::Client::builder()
                .timeout(FETCH_TIMEOUT)
                .build()
                .unwrap_or_default(),
        });
        if let Some(source) = &keys.source {
            let every = source.refresh_every.max(REFRESH_AT_LEAST);
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(refresh_periodically(Arc::downgrade(&keys), every));
                }
                Err(_) => tracing::warn!(
                    "no async runtime: the JWKS is fetched only for tokens naming unknown kids"
                ),
            }
        }
        keys
    }

    /// The verifier in force.
    pub fn current(&self) -> Arc<Verifier> {
        Arc::clone(&self.verifier.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Checks `token` as [`Verifier::verify`] does, with the keys in force; a token naming
    /// a kid none of them has fetches the key set first (at most every [`REFETCH_EVERY`]).
    pub async fn verify(&self, token: &str, required: &[&str]) -> Result<Claims, TokenError> {
        let verifier = self.current();
        match verifier.verify(token, required) {
            Err(TokenError::UnknownKey(kid)) if self.source.is_some() => {
                self.refetch().await;
                // Keys fetched since, by this call or another, may know the kid.
                let latest = self.current();
                if Arc::ptr_eq(&latest, &verifier) {
                    Err(TokenError::UnknownKey(kid))
                } else {
                    latest.verify(token, required)
                }
            }
            other => other,
        }
    }

    /// Fetches the key set now (the periodic refresh); a failure keeps the keys in force.
    pub async fn refresh(&self) -> Result<(), String> {
        let Some(source) = &self.source else {
            return Ok(());
        };
        let mut fetched_at = self.fetched_at.lock().await;
        let fetched = self.fetch(&source.url, &mut fetched_at).await;
        if let Err(e) = &fetched {
            tracing::warn!(url = %source.url, error = %e,
                "could not refresh the JWKS; keeping the keys in force");
        }
        fetched
    }

    /// Forgets when the key set was last fetched, so that the next token naming an unknown
    /// kid fetches it at once.
    pub async fn forget_last_fetch(&self) {
        *self.fetched_at.lock().await = None;
    }

    /// Fetches the key set again, for a token naming an unknown `kid`, unless that happened
    /// less than [`REFETCH_EVERY`] ago.
    async fn refetch(&self) {
        let Some(source) = &self.source else {
            return;
        };
        let mut fetched_at = self.fetched_at.lock().await;
        if fetched_at.is_some_and(|at| at.elapsed() < REFETCH_EVERY) {
            return;
        }
        if let Err(e) = self.fetch(&source.url, &mut fetched_at).await {
            tracing::warn!(url = %source.url, error = %e,
                "could not fetch the JWKS; keeping the keys in force");
        }
    }

    /// Fetches the key set and, if that works, trusts exactly its keys besides the
    /// configured ones: a key it no longer holds is no longer trusted.
    async fn fetch(&self, url: &str, fetched_at: &mut Option<Instant>) -> Result<(), String> {
        *fetched_at = Some(Instant::now());
        let fetched = fetch_jwks(&self.http, url).await?;
        if fetched.is_empty() {
            tracing::warn!(url, "the JWKS holds no usable key");
        }
        let mut all = self.configured.keys().to_vec();
        all.extend(fetched);
        *self.verifier.lock().unwrap_or_else(|e| e.into_inner()) =
            Arc::new(self.configured.with_keys(all));
        Ok(())
    }
}

/// Refreshes the key set now and then every `every`, until the keys are no longer in use.
async fn refresh_periodically(keys: Weak<TrustedKeys>, every: Duration) {
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

/// The usable keys of the JWKS at `url`, read only up to [`MAX_BYTES`] and [`MAX_KEYS`].
async fn fetch_jwks(http: &reqwest::Client, url: &str) -> Result<Vec<VerifyingKey>, String> {
    let mut response = http
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| e.to_string())?;
    if let Some(len) = response.content_length() {
        if len > MAX_BYTES as u64 {
            return Err(format!(
                "the JWKS is {len} bytes long; at most {MAX_BYTES} are read"
            ));
        }
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_BYTES {
            return Err(format!(
                "the JWKS is longer than {MAX_BYTES} bytes, the most read"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    jwks_keys(&body)
}

/// The usable keys of a JWKS body. A key that is not one (another key type, an encryption
/// key, parameters that do not parse) is skipped, so that one odd key does not cost the
/// others; a body that is not a key set, or holds more than [`MAX_KEYS`] keys, is refused
/// whole.
fn jwks_keys(body: &[u8]) -> Result<Vec<VerifyingKey>, String> {
    let set: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| format!("the body is not a JSON Web Key Set: {e}"))?;
    let keys = set
        .get("keys")
        .and_then(serde_json::Value::as_array)
        .ok_or("the body is not a JSON Web Key Set: it has no `keys` array")?;
    if keys.len() > MAX_KEYS {
        return Err(format!(
            "the JWKS holds {} keys; at most {MAX_KEYS} are accepted",
            keys.len()
        ));
    }
    let usable = keys.iter().filter_map(|raw| {
        let jwk = serde_json::from_value::<jsonwebtoken::jwk::Jwk>(raw.clone())
            .map_err(|e| tracing::debug!(error = %e, "skipping a JWK that does not parse"))
            .ok()?;
        VerifyingKey::from_jwk(&jwk)
            .map_err(|reason| tracing::debug!(kid = ?jwk.common.key_id, reason, "skipping a JWK"))
            .ok()
    });
    Ok(usable.collect())
}
