//! A bearer token as a caller could send it, to the verifier the gateway and the admin API
//! use (HS256 with a fixed secret, an issuer and an audience configured). Three readings of
//! the bytes: the token itself; the payload of a token signed with the secret, so that the
//! checks behind the signature are reached; and one claim's JSON value spliced into
//! otherwise good claims, signed too. Verification may refuse; it must never panic, and a
//! token it accepts must meet every expectation.
#![no_main]

use std::sync::LazyLock;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use skein_token::{Claims, Verifier, VerifyingKey};

const SECRET: &[u8] = b"a fixed secret for fuzzing";
const ISSUER: &str = "https://id.example";
const AUDIENCE: &str = "skein";
const REGISTERED: [&str; 7] = ["exp", "nbf", "iat", "iss", "aud", "sub", "jti"];

static VERIFIER: LazyLock<Verifier> = LazyLock::new(|| {
    let mut verifier = Verifier::new(vec![VerifyingKey::hs256(SECRET, None)]);
    verifier.issuer = Some(ISSUER.to_owned());
    verifier.audience = Some(AUDIENCE.to_owned());
    verifier
});

static SIGNING: LazyLock<EncodingKey> =
    LazyLock::new(|| EncodingKey::from_secret(SECRET).expect("a non-empty secret"));

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

fn b64(bytes: impl AsRef<[u8]>) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An HS256 token whose payload segment encodes `payload`, signed with the secret.
fn signed(payload: &[u8]) -> String {
    let message = format!("{}.{}", b64(r#"{"alg":"HS256","typ":"JWT"}"#), b64(payload));
    let signature = jsonwebtoken::crypto::sign(message.as_bytes(), &SIGNING, Algorithm::HS256)
        .expect("HS256 signs anything");
    format!("{message}.{signature}")
}

/// Good claims with `claim` set to the JSON text `value` (which may not parse).
fn spliced(claim: &str, value: &[u8]) -> Vec<u8> {
    let mut good = serde_json::json!({
        "sub": "alice",
        "exp": now() as u64 + 600,
        "iss": ISSUER,
        "aud": AUDIENCE,
    });
    if let Some(object) = good.as_object_mut() {
        object.remove(claim);
    }
    let mut payload = serde_json::to_vec(&good).expect("claims serialize");
    payload.pop(); // the closing brace
    payload.extend_from_slice(format!(r#","{claim}":"#).as_bytes());
    payload.extend_from_slice(value);
    payload.push(b'}');
    payload
}

/// Panics unless accepted claims meet every expectation.
fn check_accepted(claims: &Claims) {
    let leeway = VERIFIER.leeway_secs as f64;
    let date = |name: &str| {
        claims.get(name).map(|value| {
            value
                .as_f64()
                .filter(|secs| *secs >= 0.0)
                .unwrap_or_else(|| panic!("accepted a token whose {name} is {value}"))
        })
    };
    let now = now();
    let exp = date("exp").expect("accepted a token without exp");
    // A second of slack for rounding and the clock moving on.
    assert!(
        exp + leeway + 1.0 >= now,
        "accepted an expired token: {claims:?}"
    );
    if let Some(nbf) = date("nbf") {
        assert!(
            nbf <= now + leeway + 1.0,
            "accepted a token not valid yet: {claims:?}"
        );
    }
    date("iat");
    assert_eq!(
        claims.get("iss").and_then(Value::as_str),
        Some(ISSUER),
        "{claims:?}"
    );
    let audience_ok = match claims.get("aud") {
        Some(Value::String(aud)) => aud == AUDIENCE,
        Some(Value::Array(auds)) => {
            auds.iter().all(Value::is_string) && auds.iter().any(|a| a == AUDIENCE)
        }
        _ => false,
    };
    assert!(
        audience_ok,
        "accepted a token for another audience: {claims:?}"
    );
    for name in ["sub", "jti"] {
        if let Some(value) = claims.get(name) {
            assert!(
                value.is_string(),
                "accepted a token whose {name} is {value}"
            );
        }
    }
    assert!(claims.get("sub").is_some(), "accepted a token without sub");
}

fn verify(token: &str) {
    if let Ok(claims) = VERIFIER.verify(token, &["sub"]) {
        check_accepted(&claims);
    }
}

fuzz_target!(|data: &[u8]| {
    verify(&String::from_utf8_lossy(data));
    verify(&signed(data));
    if let Some((selector, value)) = data.split_first() {
        let claim = REGISTERED[usize::from(*selector) % REGISTERED.len()];
        verify(&signed(&spliced(claim, value)));
    }
});
