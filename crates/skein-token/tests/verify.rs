//! Tokens minted with real keys (tests/keys) and refused for every reason a gateway or the
//! admin API must refuse them.

#![allow(clippy::unwrap_used)]

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use skein_token::{Claims, TokenError, Verifier, VerifyingKey, MAX_TOKEN_BYTES};

fn key(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/keys/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn claims(extra: Value) -> Claims {
    let mut claims = json!({"sub": "alice", "tenant": "acme", "exp": now() + 600});
    for (k, v) in extra.as_object().unwrap() {
        claims[k] = v.clone();
    }
    claims.as_object().unwrap().clone()
}

fn encoding_key(algorithm: Algorithm) -> EncodingKey {
    match algorithm {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&key("rsa.pem")).unwrap(),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&key("ec.pk8.pem")).unwrap(),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(&key("ed.pem")).unwrap(),
        Algorithm::HS256 => EncodingKey::from_secret(b"dev-secret").unwrap(),
        other => panic!("{other:?}"),
    }
}

fn mint(algorithm: Algorithm, kid: Option<&str>, claims: &Claims) -> String {
    let mut header = Header::new(algorithm);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, &encoding_key(algorithm)).unwrap()
}

fn b64(bytes: impl AsRef<[u8]>) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A token whose header and payload segments are exactly `header` and `payload` (encoded or
/// not), with a real RS256 signature over them: it gets past the signature check, so what
/// follows is what refuses it.
fn signed_segments(header: &str, payload: &str) -> String {
    let message = format!("{header}.{payload}");
    let signature = jsonwebtoken::crypto::sign(
        message.as_bytes(),
        &encoding_key(Algorithm::RS256),
        Algorithm::RS256,
    )
    .unwrap();
    format!("{message}.{signature}")
}

/// The RS256 header of the configured key `rsa-1`, encoded.
fn rs256_header() -> String {
    b64(r#"{"alg":"RS256","typ":"JWT","kid":"rsa-1"}"#)
}

fn verifier() -> Verifier {
    let mut verifier = Verifier::new(vec![
        VerifyingKey::public_pem(Algorithm::RS256, &key("rsa.pub.pem"), Some("rsa-1".into()))
            .unwrap(),
        VerifyingKey::public_pem(Algorithm::ES256, &key("ec.pub.pem"), None).unwrap(),
        VerifyingKey::public_pem(Algorithm::EdDSA, &key("ed.pub.pem"), None).unwrap(),
    ]);
    verifier.issuer = Some("https://id.example".into());
    verifier.audience = Some("skein".into());
    verifier
}

fn good() -> Claims {
    claims(json!({"iss": "https://id.example", "aud": "skein"}))
}

/// `good()` with `extra` claims set (a null sets null, it does not remove).
fn with(extra: Value) -> Claims {
    let mut c = good();
    for (k, val) in extra.as_object().unwrap() {
        c.insert(k.clone(), val.clone());
    }
    c
}

/// `good()` without `claim`.
fn without(claim: &str) -> Claims {
    let mut c = good();
    c.remove(claim);
    c
}

/// Verifies an RS256 token carrying `claims` with the usual expectations.
fn check(claims: &Claims) -> Result<Claims, TokenError> {
    verifier().verify(
        &mint(Algorithm::RS256, Some("rsa-1"), claims),
        &["sub", "tenant"],
    )
}

/// The claim and the type a `WrongClaimType` refusal names.
fn wrong_type(result: Result<Claims, TokenError>) -> (String, &'static str) {
    match result {
        Err(TokenError::WrongClaimType { claim, found, .. }) => (claim, found),
        other => panic!("expected a WrongClaimType refusal, got {other:?}"),
    }
}

#[test]
fn each_accepted_algorithm_verifies_with_its_key() {
    let v = verifier();
    for (algorithm, kid) in [
        (Algorithm::RS256, Some("rsa-1")),
        (Algorithm::ES256, None),
        (Algorithm::EdDSA, None),
    ] {
        let verified = v
            .verify(&mint(algorithm, kid, &good()), &["sub", "tenant"])
            .unwrap();
        assert_eq!(verified["tenant"], "acme", "{algorithm:?}");
    }
}

#[test]
fn refusals_say_why() {
    assert_eq!(
        check(&with(json!({"exp": now() - 3600}))),
        Err(TokenError::Expired)
    );
    assert!(
        check(&with(json!({"exp": now() - 5}))).is_ok(),
        "within the leeway"
    );
    assert_eq!(
        check(&with(json!({"nbf": now() + 3600}))),
        Err(TokenError::NotYetValid)
    );
    assert!(
        check(&with(json!({"nbf": now() + 5}))).is_ok(),
        "within the leeway"
    );
    assert_eq!(
        check(&with(json!({"iss": "https://evil.example"}))),
        Err(TokenError::WrongIssuer)
    );
    assert_eq!(
        check(&with(json!({"aud": "someone-else"}))),
        Err(TokenError::WrongAudience)
    );
    let v = verifier();
    let verify = |token: String| v.verify(&token, &["sub", "tenant"]);
    assert_eq!(
        verify(mint(Algorithm::RS256, Some("rsa-9"), &good())),
        Err(TokenError::UnknownKey(Some("rsa-9".into())))
    );
    assert_eq!(
        check(&without("tenant")),
        Err(TokenError::MissingClaim("tenant".into()))
    );
    // HS256 is not configured here, even though a secret could sign it.
    assert_eq!(
        verify(mint(Algorithm::HS256, None, &good())),
        Err(TokenError::AlgorithmNotAllowed("HS256".into()))
    );
    // The classic confusion: HS256 "signed" with the RSA public key as the secret.
    let confused = encode(
        &Header::new(Algorithm::HS256),
        &good(),
        &EncodingKey::from_secret(&key("rsa.pub.pem")).unwrap(),
    )
    .unwrap();
    assert!(matches!(
        verify(confused),
        Err(TokenError::AlgorithmNotAllowed(_))
    ));
    // A payload changed after signing.
    let token = mint(Algorithm::ES256, None, &good());
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    let forged = mint(Algorithm::ES256, None, &with(json!({"tenant": "beta"})));
    parts[1] = forged.split('.').nth(1).unwrap().to_owned();
    assert_eq!(verify(parts.join(".")), Err(TokenError::BadSignature));
    // alg none, unsigned.
    let none = format!(
        "{}.{}.",
        b64(r#"{"alg":"none","typ":"JWT"}"#),
        b64(serde_json::to_string(&good()).unwrap())
    );
    assert_eq!(
        verify(none),
        Err(TokenError::AlgorithmNotAllowed("none".into()))
    );
    assert!(matches!(
        verify("not a token".to_owned()),
        Err(TokenError::Malformed(_))
    ));
}

/// The finding: a signed token whose `nbf` is a string naming a time to come was accepted.
#[test]
fn a_string_nbf_in_the_future_is_refused_for_every_algorithm() {
    let v = verifier();
    let claims = with(json!({"nbf": (now() + 3600).to_string()}));
    for (algorithm, kid) in [
        (Algorithm::RS256, Some("rsa-1")),
        (Algorithm::ES256, None),
        (Algorithm::EdDSA, None),
    ] {
        let result = v.verify(&mint(algorithm, kid, &claims), &["sub", "tenant"]);
        assert_eq!(
            wrong_type(result),
            ("nbf".to_owned(), "a string"),
            "{algorithm:?}"
        );
    }
    // A string in the past is no better.
    assert_eq!(
        wrong_type(check(&with(json!({"nbf": (now() - 3600).to_string()})))),
        ("nbf".to_owned(), "a string")
    );
}

#[test]
fn time_claims_of_any_other_json_type_are_refused() {
    let soon = (now() + 3600).to_string();
    let wrong: [(Value, &str); 7] = [
        (json!(soon), "a string"),
        (json!(true), "a boolean"),
        (json!(false), "a boolean"),
        (json!({"secs": now() + 3600}), "an object"),
        (json!([now() + 3600]), "an array"),
        (Value::Null, "null"),
        (json!(-1), "a negative number"),
    ];
    for claim in ["exp", "nbf", "iat"] {
        for (value, found) in &wrong {
            let result = check(&with(json!({ claim: value })));
            assert_eq!(
                wrong_type(result),
                (claim.to_owned(), *found),
                "{claim}: {value}"
            );
        }
        let result = check(&with(json!({ claim: 1e300 })));
        assert_eq!(
            wrong_type(result),
            (claim.to_owned(), "a number too large to be a time"),
            "{claim}"
        );
    }
}

/// RFC 7519 lets a NumericDate hold fractions of a second.
#[test]
fn fractional_times_are_numeric_dates() {
    let now = now() as f64;
    let fractional = with(json!({"exp": now + 600.5, "nbf": now - 10.25, "iat": now - 10.75}));
    assert!(check(&fractional).is_ok());
    assert_eq!(
        check(&with(json!({"exp": now - 3600.5}))),
        Err(TokenError::Expired)
    );
    assert_eq!(
        check(&with(json!({"nbf": now + 3600.5}))),
        Err(TokenError::NotYetValid)
    );
}

#[test]
fn exp_is_required() {
    assert_eq!(
        check(&without("exp")),
        Err(TokenError::MissingClaim("exp".into()))
    );
    // Also where no issuer or audience is expected.
    let v = Verifier::new(verifier().keys().to_vec());
    let mut bare = claims(json!({}));
    bare.remove("exp");
    assert_eq!(
        v.verify(&mint(Algorithm::EdDSA, None, &bare), &["sub"]),
        Err(TokenError::MissingClaim("exp".into()))
    );
}

#[test]
fn issuer_and_audience_are_required_once_configured() {
    assert_eq!(
        check(&without("iss")),
        Err(TokenError::MissingClaim("iss".into()))
    );
    assert_eq!(
        check(&without("aud")),
        Err(TokenError::MissingClaim("aud".into()))
    );
    let mut only_issuer = verifier();
    only_issuer.audience = None;
    let token = mint(Algorithm::ES256, None, &without("aud"));
    assert!(only_issuer.verify(&token, &["sub"]).is_ok());
    let token = mint(Algorithm::ES256, None, &without("iss"));
    assert_eq!(
        only_issuer.verify(&token, &["sub"]),
        Err(TokenError::MissingClaim("iss".into()))
    );
    let mut only_audience = verifier();
    only_audience.issuer = None;
    assert!(only_audience.verify(&token, &["sub"]).is_ok());
    let token = mint(Algorithm::ES256, None, &without("aud"));
    assert_eq!(
        only_audience.verify(&token, &["sub"]),
        Err(TokenError::MissingClaim("aud".into()))
    );
}

#[test]
fn audience_may_be_an_array_of_strings_and_nothing_else() {
    assert!(check(&with(json!({"aud": ["other", "skein"]}))).is_ok());
    assert_eq!(
        check(&with(json!({"aud": ["other"]}))),
        Err(TokenError::WrongAudience)
    );
    assert_eq!(
        check(&with(json!({"aud": []}))),
        Err(TokenError::WrongAudience)
    );
    assert_eq!(
        wrong_type(check(&with(json!({"aud": 5})))),
        ("aud".to_owned(), "a number")
    );
    assert_eq!(
        wrong_type(check(&with(json!({"aud": ["skein", 5]})))),
        ("aud".to_owned(), "an array with a non-string member")
    );
    assert_eq!(
        wrong_type(check(&with(json!({"aud": {"skein": true}})))),
        ("aud".to_owned(), "an object")
    );
    assert_eq!(
        wrong_type(check(&with(json!({"aud": null})))),
        ("aud".to_owned(), "null")
    );
}

#[test]
fn string_claims_of_another_type_are_refused() {
    for (claim, value, found) in [
        ("iss", json!(["https://id.example"]), "an array"),
        ("iss", json!(7), "a number"),
        ("iss", Value::Null, "null"),
        ("sub", json!(42), "a number"),
        ("sub", json!({"name": "alice"}), "an object"),
        ("jti", json!(1), "a number"),
        ("jti", json!(false), "a boolean"),
    ] {
        let result = check(&with(json!({ claim: value })));
        assert_eq!(wrong_type(result), (claim.to_owned(), found), "{claim}");
    }
}

/// Types are checked whether or not an issuer or an audience is expected.
#[test]
fn registered_claims_are_typed_even_when_not_configured() {
    let v = Verifier::new(verifier().keys().to_vec());
    for (claim, value) in [
        ("aud", json!(5)),
        ("iss", json!(true)),
        ("nbf", json!("0")),
        ("iat", json!({})),
    ] {
        let token = mint(Algorithm::EdDSA, None, &with(json!({ claim: value })));
        let result = v.verify(&token, &["sub"]);
        assert_eq!(wrong_type(result).0, claim);
    }
}

#[test]
fn malformed_tokens_are_refused_as_malformed() {
    let v = verifier();
    let malformed = |token: &str| {
        let result = v.verify(token, &["sub"]);
        assert!(
            matches!(result, Err(TokenError::Malformed(_))),
            "{token:.80}: {result:?}"
        );
    };
    let token = mint(Algorithm::RS256, Some("rsa-1"), &good());
    let parts: Vec<&str> = token.split('.').collect();
    let payload = b64(serde_json::to_vec(&good()).unwrap());
    // Segment counts.
    malformed("");
    malformed(".");
    malformed("..");
    malformed(parts[0]);
    malformed(&parts[..2].join("."));
    malformed(&format!("{token}.{}", parts[2]));
    malformed(&format!("{}.{}", parts[0], token));
    // Bad base64 in each segment.
    malformed(&format!("{}!.{}.{}", parts[0], parts[1], parts[2]));
    malformed(&format!("{}.{}.{}*", parts[0], parts[1], parts[2]));
    malformed(&signed_segments(&rs256_header(), "e30=")); // padding
    malformed(&signed_segments(&rs256_header(), "not base64!"));
    malformed(&format!("{}=.{}.{}", parts[0], parts[1], parts[2]));
    // Headers that are not a JSON object naming a known algorithm.
    for header in [
        "not json",
        "",
        "[]",
        r#""RS256""#,
        r#"{"alg":5}"#,
        r#"{"typ":"JWT"}"#,
        r#"{"alg":"RS256","kid":5}"#,
        r#"{"alg":"RS256""#,
    ] {
        malformed(&format!("{}.{payload}.{}", b64(header), parts[2]));
    }
    // Payloads that are not a JSON object, signed, so that only the payload refuses them.
    for payload in [
        "not json",
        "",
        "null",
        "[]",
        "42",
        r#""claims""#,
        r#"{"exp":1"#,
    ] {
        malformed(&signed_segments(&rs256_header(), &b64(payload)));
    }
    // Deeper than the JSON parser recurses.
    let nested = format!("{}1{}", r#"{"a":"#.repeat(5_000), "}".repeat(5_000));
    malformed(&signed_segments(&rs256_header(), &b64(nested)));
    // Not UTF-8.
    malformed(&signed_segments(&rs256_header(), &b64([0xff, 0xfe, 0x7b])));
}

#[test]
fn huge_tokens_are_refused_before_decoding() {
    let v = verifier();
    // Signed, and otherwise good.
    let padded = mint(
        Algorithm::RS256,
        Some("rsa-1"),
        &with(json!({"padding": "x".repeat(MAX_TOKEN_BYTES)})),
    );
    assert_eq!(
        v.verify(&padded, &["sub"]),
        Err(TokenError::TooLarge {
            len: padded.len(),
            max: MAX_TOKEN_BYTES
        })
    );
    let garbage = "a.".repeat(512 * 1024);
    assert!(matches!(
        v.verify(&garbage, &["sub"]),
        Err(TokenError::TooLarge { .. })
    ));
    // Just under the bound is decoded as usual.
    let big = mint(
        Algorithm::RS256,
        Some("rsa-1"),
        &with(json!({"padding": "x".repeat(MAX_TOKEN_BYTES / 2)})),
    );
    assert!(v.verify(&big, &["sub"]).is_ok());
}

#[test]
fn hs256_works_only_where_configured() {
    let v = Verifier::new(vec![VerifyingKey::hs256(b"dev-secret", None)]);
    assert!(v
        .verify(&mint(Algorithm::HS256, None, &good()), &["sub"])
        .is_ok());
    assert!(matches!(
        v.verify(&mint(Algorithm::RS256, None, &good()), &["sub"]),
        Err(TokenError::AlgorithmNotAllowed(_))
    ));
    let signer = skein_token::Hs256Signer::new(b"dev-secret");
    let token = signer.sign(&good()).unwrap();
    assert_eq!(v.verify(&token, &["sub"]).unwrap()["sub"], "alice");
}

#[test]
fn an_empty_hs256_secret_signs_and_verifies_nothing() {
    let v = Verifier::new(vec![VerifyingKey::hs256(b"", None)]);
    assert_eq!(
        v.verify(&mint(Algorithm::HS256, None, &good()), &["sub"]),
        Err(TokenError::AlgorithmNotAllowed("HS256".into()))
    );
    assert_eq!(skein_token::Hs256Signer::new(b"").sign(&good()), None);
}

#[test]
fn keys_from_a_jwks_verify_tokens_naming_their_kid() {
    let set: jsonwebtoken::jwk::JwkSet = serde_json::from_slice(&key("jwks.json")).unwrap();
    let keys: Vec<VerifyingKey> = set
        .keys
        .iter()
        .map(|jwk| VerifyingKey::from_jwk(jwk).unwrap())
        .collect();
    assert_eq!(
        keys.iter().map(VerifyingKey::algorithm).collect::<Vec<_>>(),
        [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA]
    );
    let v = verifier().with_keys(keys);
    for (algorithm, kid) in [
        (Algorithm::RS256, "rsa-jwk"),
        (Algorithm::ES256, "ec-jwk"),
        (Algorithm::EdDSA, "ed-jwk"),
    ] {
        let verified = v.verify(&mint(algorithm, Some(kid), &good()), &["sub"]);
        assert_eq!(verified.unwrap()["sub"], "alice", "{algorithm:?}");
    }
    assert_eq!(
        v.verify(&mint(Algorithm::RS256, Some("rotated"), &good()), &["sub"]),
        Err(TokenError::UnknownKey(Some("rotated".into())))
    );
    // A kid no key has, of another accepted algorithm than the keys in force: perhaps a
    // key the issuer has just published, so unknown rather than not allowed.
    let only_rsa = verifier().with_keys(vec![VerifyingKey::public_pem(
        Algorithm::RS256,
        &key("rsa.pub.pem"),
        Some("rsa-1".into()),
    )
    .unwrap()]);
    assert_eq!(
        only_rsa.verify(&mint(Algorithm::ES256, Some("ec-new"), &good()), &["sub"]),
        Err(TokenError::UnknownKey(Some("ec-new".into())))
    );
    // But a known kid, or none, with another algorithm than its key's is not allowed.
    assert_eq!(
        only_rsa.verify(&mint(Algorithm::ES256, Some("rsa-1"), &good()), &["sub"]),
        Err(TokenError::AlgorithmNotAllowed("ES256".into()))
    );
    assert_eq!(
        only_rsa.verify(&mint(Algorithm::ES256, None, &good()), &["sub"]),
        Err(TokenError::AlgorithmNotAllowed("ES256".into()))
    );
    assert_eq!(
        only_rsa.verify(&mint(Algorithm::HS256, Some("hs-new"), &good()), &["sub"]),
        Err(TokenError::AlgorithmNotAllowed("HS256".into()))
    );
    // A symmetric key in a key set is never accepted.
    let oct: jsonwebtoken::jwk::Jwk =
        serde_json::from_value(json!({"kty": "oct", "k": "c2VjcmV0", "kid": "x"})).unwrap();
    assert!(VerifyingKey::from_jwk(&oct).is_err());
}
