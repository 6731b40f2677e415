//! Tokens minted with real keys (tests/keys) and refused for every reason a gateway or the
//! admin API must refuse them.

#![allow(clippy::unwrap_used)]

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use skein_token::{Claims, TokenError, Verifier, VerifyingKey};

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

fn mint(algorithm: Algorithm, kid: Option<&str>, claims: &Claims) -> String {
    let encoding = match algorithm {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&key("rsa.pem")).unwrap(),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&key("ec.pk8.pem")).unwrap(),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(&key("ed.pem")).unwrap(),
        Algorithm::HS256 => EncodingKey::from_secret(b"dev-secret"),
        other => panic!("{other:?}"),
    };
    let mut header = Header::new(algorithm);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, &encoding).unwrap()
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
    let v = verifier();
    let check = |token: String| v.verify(&token, &["sub", "tenant"]);
    let with = |extra: Value| {
        let mut c = good();
        for (k, val) in extra.as_object().unwrap() {
            c.insert(k.clone(), val.clone());
        }
        c
    };
    assert_eq!(
        check(mint(
            Algorithm::RS256,
            Some("rsa-1"),
            &with(json!({"exp": now() - 3600}))
        )),
        Err(TokenError::Expired)
    );
    assert!(
        check(mint(
            Algorithm::RS256,
            Some("rsa-1"),
            &with(json!({"exp": now() - 5}))
        ))
        .is_ok(),
        "within the leeway"
    );
    assert_eq!(
        check(mint(
            Algorithm::RS256,
            Some("rsa-1"),
            &with(json!({"nbf": now() + 3600}))
        )),
        Err(TokenError::NotYetValid)
    );
    assert_eq!(
        check(mint(
            Algorithm::RS256,
            Some("rsa-1"),
            &with(json!({"iss": "https://evil.example"}))
        )),
        Err(TokenError::WrongIssuer)
    );
    assert_eq!(
        check(mint(
            Algorithm::RS256,
            Some("rsa-1"),
            &with(json!({"aud": "someone-else"}))
        )),
        Err(TokenError::WrongAudience)
    );
    assert_eq!(
        check(mint(Algorithm::RS256, Some("rsa-9"), &good())),
        Err(TokenError::UnknownKey(Some("rsa-9".into())))
    );
    let mut no_tenant = good();
    no_tenant.remove("tenant");
    assert_eq!(
        check(mint(Algorithm::RS256, Some("rsa-1"), &no_tenant)),
        Err(TokenError::MissingClaim("tenant".into()))
    );
    // HS256 is not configured here, even though a secret could sign it.
    assert_eq!(
        check(mint(Algorithm::HS256, None, &good())),
        Err(TokenError::AlgorithmNotAllowed("HS256".into()))
    );
    // The classic confusion: HS256 "signed" with the RSA public key as the secret.
    let confused = encode(
        &Header::new(Algorithm::HS256),
        &good(),
        &EncodingKey::from_secret(&key("rsa.pub.pem")),
    )
    .unwrap();
    assert!(matches!(
        check(confused),
        Err(TokenError::AlgorithmNotAllowed(_))
    ));
    // A payload changed after signing.
    let token = mint(Algorithm::ES256, None, &good());
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    let forged = mint(Algorithm::ES256, None, &with(json!({"tenant": "beta"})));
    parts[1] = forged.split('.').nth(1).unwrap().to_owned();
    assert_eq!(check(parts.join(".")), Err(TokenError::BadSignature));
    // alg none, unsigned.
    let b64 = |s: &str| {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for chunk in s.as_bytes().chunks(3) {
            let n =
                chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
            for i in 0..=chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    };
    let none = format!(
        "{}.{}.",
        b64(r#"{"alg":"none","typ":"JWT"}"#),
        b64(&serde_json::to_string(&good()).unwrap())
    );
    assert_eq!(
        check(none),
        Err(TokenError::AlgorithmNotAllowed("none".into()))
    );
    assert!(matches!(
        check("not a token".to_owned()),
        Err(TokenError::Malformed(_))
    ));
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
    // A symmetric key in a key set is never accepted.
    let oct: jsonwebtoken::jwk::Jwk =
        serde_json::from_value(json!({"kty": "oct", "k": "c2VjcmV0", "kid": "x"})).unwrap();
    assert!(VerifyingKey::from_jwk(&oct).is_err());
}
