//! The server's side of SCRAM against RFC 7677's published exchange and against a client
//! written from RFC 5802 here, and its refusals of every malformed or wrong message.

#![allow(clippy::unwrap_used)]

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use skein_scram::{ClientFirst, Credential, Mechanism, ScramError, MAX_MESSAGE_BYTES};

/// RFC 7677, section 3: user "user", password "pencil".
const RFC_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const RFC_SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
const RFC_SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const RFC_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const RFC_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn rfc_credential() -> Credential {
    let salt = BASE64.decode(RFC_SALT).unwrap();
    Credential::from_password(Mechanism::Sha256, "pencil", &salt, 4096).unwrap()
}

#[test]
fn the_rfc_7677_exchange_is_answered_byte_for_byte() {
    let first = ClientFirst::parse(RFC_CLIENT_FIRST.as_bytes()).unwrap();
    assert_eq!(first.user, "user");
    let (server_first, state) = first.reply(rfc_credential(), RFC_SERVER_NONCE).unwrap();
    assert_eq!(server_first, RFC_SERVER_FIRST);
    assert_eq!(
        state.finish(RFC_CLIENT_FINAL.as_bytes()).unwrap(),
        RFC_SERVER_FINAL
    );
}

/// A client's proof and expected server signature, computed as RFC 5802 says.
fn client_final(
    mechanism: Mechanism,
    password: &str,
    client_first_bare: &str,
    server_first: &str,
) -> (String, String) {
    client_final_with_nonce(mechanism, password, client_first_bare, server_first, None)
}

/// [`client_final`], sending `nonce` instead of the combined one when given.
fn client_final_with_nonce(
    mechanism: Mechanism,
    password: &str,
    client_first_bare: &str,
    server_first: &str,
    nonce: Option<&str>,
) -> (String, String) {
    fn mac<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
        let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key).unwrap();
        mac.update(data);
        mac.finalize().into_bytes().to_vec()
    }
    let field = |name: &str| {
        server_first
            .split(',')
            .find_map(|f| f.strip_prefix(name))
            .unwrap()
            .to_owned()
    };
    let nonce_override = nonce;
    let (nonce, salt, iterations) = (
        field("r="),
        BASE64.decode(field("s=")).unwrap(),
        field("i=").parse::<u32>().unwrap(),
    );
    let without_proof = format!("c=biws,r={}", nonce_override.unwrap_or(&nonce));
    let auth = format!("{client_first_bare},{server_first},{without_proof}");
    let (proof, server_signature) = match mechanism {
        Mechanism::Sha256 => {
            let mut salted = [0u8; 32];
            pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), &salt, iterations, &mut salted);
            let client_key = mac::<Hmac<Sha256>>(&salted, b"Client Key");
            let stored = Sha256::digest(&client_key);
            let signature = mac::<Hmac<Sha256>>(&stored, auth.as_bytes());
            let server_key = mac::<Hmac<Sha256>>(&salted, b"Server Key");
            (
                client_key
                    .iter()
                    .zip(&signature)
                    .map(|(a, b)| a ^ b)
                    .collect::<Vec<_>>(),
                mac::<Hmac<Sha256>>(&server_key, auth.as_bytes()),
            )
        }
        Mechanism::Sha512 => {
            let mut salted = [0u8; 64];
            pbkdf2::pbkdf2_hmac::<Sha512>(password.as_bytes(), &salt, iterations, &mut salted);
            let client_key = mac::<Hmac<Sha512>>(&salted, b"Client Key");
            let stored = Sha512::digest(&client_key);
            let signature = mac::<Hmac<Sha512>>(&stored, auth.as_bytes());
            let server_key = mac::<Hmac<Sha512>>(&salted, b"Server Key");
            (
                client_key
                    .iter()
                    .zip(&signature)
                    .map(|(a, b)| a ^ b)
                    .collect::<Vec<_>>(),
                mac::<Hmac<Sha512>>(&server_key, auth.as_bytes()),
            )
        }
    };
    (
        format!("{without_proof},p={}", BASE64.encode(proof)),
        format!("v={}", BASE64.encode(server_signature)),
    )
}

fn exchange(mechanism: Mechanism, stored: Credential, password: &str) -> Result<(), ScramError> {
    let bare = "n=alice,r=fyko+d2lbbFgONRv9qkxdawL";
    let first = ClientFirst::parse(format!("n,,{bare}").as_bytes())?;
    let (server_first, state) = first.reply(stored, "3rfcNHYJY1ZVvWVs7j")?;
    let (last, expected) = client_final(mechanism, password, bare, &server_first);
    let answer = state.finish(last.as_bytes())?;
    assert_eq!(
        answer, expected,
        "the server's signature proves it to the client"
    );
    Ok(())
}

#[test]
fn both_mechanisms_accept_the_password_and_refuse_any_other() {
    for mechanism in Mechanism::ALL {
        let stored =
            Credential::from_password(mechanism, "s3cret", b"0123456789abcdef", 4096).unwrap();
        assert_eq!(exchange(mechanism, stored.clone(), "s3cret"), Ok(()));
        assert_eq!(
            exchange(mechanism, stored, "s3cret!"),
            Err(ScramError::BadProof)
        );
    }
}

#[test]
fn a_credential_from_a_salted_password_is_the_one_from_the_password() {
    for mechanism in Mechanism::ALL {
        let salt = b"kafka-client-salt";
        let from_password = Credential::from_password(mechanism, "pw", salt, 8192).unwrap();
        let mut salted = vec![0u8; mechanism.output_len()];
        match mechanism {
            Mechanism::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(b"pw", salt, 8192, &mut salted),
            Mechanism::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(b"pw", salt, 8192, &mut salted),
        }
        let from_salted = Credential::from_salted_password(mechanism, &salted, salt, 8192).unwrap();
        assert_eq!(from_salted, from_password);
        let parts = Credential::from_parts(
            mechanism,
            salt.to_vec(),
            8192,
            from_password.stored_key.clone(),
            from_password.server_key.clone(),
        )
        .unwrap();
        assert_eq!(parts, from_password);
    }
}

#[test]
fn credentials_outside_the_bounds_are_refused() {
    let m = Mechanism::Sha512;
    assert_eq!(
        Credential::from_password(m, "pw", b"salt", 4095),
        Err(ScramError::Iterations(4095))
    );
    assert_eq!(
        Credential::from_password(m, "pw", b"salt", 16385),
        Err(ScramError::Iterations(16385))
    );
    assert_eq!(
        Credential::from_password(m, "pw", b"", 4096),
        Err(ScramError::Salt)
    );
    assert_eq!(
        Credential::from_password(m, "pw", &[1; 129], 4096),
        Err(ScramError::Salt)
    );
    assert!(matches!(
        Credential::from_salted_password(m, &[0; 32], b"salt", 4096),
        Err(ScramError::KeyLength { expected: 64, .. })
    ));
    assert!(matches!(
        Credential::from_parts(m, b"salt".to_vec(), 4096, vec![0; 64], vec![0; 63]),
        Err(ScramError::KeyLength { .. })
    ));
}

#[test]
fn a_decoy_runs_the_exchange_to_its_end_and_fails_there_like_a_wrong_password() {
    let decoy = Credential::decoy(Mechanism::Sha512, "nobody", b"server secret");
    assert_eq!(
        decoy.salt,
        Credential::decoy(Mechanism::Sha512, "nobody", b"server secret").salt,
        "the same user sees the same salt on every attempt"
    );
    assert_ne!(
        decoy.salt,
        Credential::decoy(Mechanism::Sha512, "somebody", b"server secret").salt
    );
    assert_eq!(
        exchange(Mechanism::Sha512, decoy, ""),
        Err(ScramError::BadProof)
    );
}

#[test]
fn user_names_are_unescaped_and_authorization_ids_must_name_the_user() {
    let first = ClientFirst::parse(b"n,,n=a=2Cb=3Dc,r=abc").unwrap();
    assert_eq!(first.user, "a,b=c");
    let first = ClientFirst::parse(b"n,a=bob,n=bob,r=abc").unwrap();
    assert_eq!(first.user, "bob");
    assert_eq!(
        ClientFirst::parse(b"n,a=mallory,n=bob,r=abc"),
        Err(ScramError::OtherAuthzid)
    );
}

#[test]
fn malformed_first_messages_are_refused() {
    let cases: &[(&[u8], ScramError)] = &[
        (b"", ScramError::Malformed("no GS2 header")),
        (b"n,,", ScramError::Malformed("an attribute is missing")),
        (b"p=tls-unique,,n=bob,r=abc", ScramError::ChannelBinding),
        (
            b"x,,n=bob,r=abc",
            ScramError::Malformed("the GS2 header is not n or y"),
        ),
        (
            b"n,,n=bob",
            ScramError::Malformed("an attribute is missing"),
        ),
        (b"n,,r=abc,n=bob", ScramError::Extension),
        (b"n,,m=ext,n=bob,r=abc", ScramError::Extension),
        (b"n,,n=bob,r=abc,tokenauth=true", ScramError::Extension),
        (
            b"n,,n=,r=abc",
            ScramError::Malformed("the user name is empty, long or unprintable"),
        ),
        (
            b"n,,n=bob=2,r=abc",
            ScramError::Malformed("a user name has a bad escape"),
        ),
        (
            b"n,,n=bob=41,r=abc",
            ScramError::Malformed("a user name has a bad escape"),
        ),
        (
            b"n,,n=bob,r=",
            ScramError::Malformed("the client nonce is not printable"),
        ),
        (
            b"n,,n=bob,r=a b",
            ScramError::Malformed("the client nonce is not printable"),
        ),
        (b"n,,n=b\xffb,r=abc", ScramError::Malformed("not UTF-8")),
    ];
    for (message, error) in cases {
        assert_eq!(
            ClientFirst::parse(message).as_ref().err(),
            Some(error),
            "{}",
            String::from_utf8_lossy(message)
        );
    }
    let long = format!("n,,n={},r=abc", "u".repeat(256));
    assert!(ClientFirst::parse(long.as_bytes()).is_err());
    let huge = vec![b'n'; MAX_MESSAGE_BYTES + 1];
    assert_eq!(ClientFirst::parse(&huge), Err(ScramError::TooLarge));
}

#[test]
fn final_messages_must_carry_this_exchange_binding_and_nonce() {
    let first = ClientFirst::parse(RFC_CLIENT_FIRST.as_bytes()).unwrap();
    let (_, state) = first.reply(rfc_credential(), RFC_SERVER_NONCE).unwrap();
    let nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    let proof = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    let cases: Vec<(String, ScramError)> = vec![
        (
            format!("c=biws,r={nonce}"),
            ScramError::Malformed("no proof"),
        ),
        (
            format!("c=eSws,r={nonce},{proof}"),
            ScramError::BindingMismatch,
        ),
        (
            format!("c=biws,r=rOprNGfwEbeRWgbNEkqO,{proof}"),
            ScramError::NonceMismatch,
        ),
        (
            format!("c=biws,r={nonce},x=1,{proof}"),
            ScramError::Extension,
        ),
        (format!("c=biws,r={nonce},p=AAAA"), ScramError::BadProof),
        (
            format!("c=biws,r={nonce},p=not base64"),
            ScramError::Malformed("the proof is not base64"),
        ),
        (
            format!("c=!!,r={nonce},{proof}"),
            ScramError::Malformed("the channel binding is not base64"),
        ),
        (
            format!("c=biws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVE="),
            ScramError::BadProof,
        ),
    ];
    for (message, error) in cases {
        assert_eq!(state.finish(message.as_bytes()), Err(error), "{message}");
    }
    // The right message still passes after every refusal: refusals leave no state behind.
    assert_eq!(
        state.finish(RFC_CLIENT_FINAL.as_bytes()).unwrap(),
        RFC_SERVER_FINAL
    );
}

/// librdkafka before 2.6.1 sends its own nonce twice in its final message: that exact form
/// passes, and nothing else that merely contains the combined nonce does.
#[test]
fn librdkafkas_repeated_client_nonce_is_taken_and_nothing_looser() {
    let first = ClientFirst::parse(b"n,,n=alice,r=cnonce").unwrap();
    let stored = Credential::from_password(Mechanism::Sha256, "pw", b"salt", 4096).unwrap();
    let (server_first, state) = first.reply(stored, "snonce").unwrap();
    assert_eq!(server_first, "r=cnoncesnonce,s=c2FsdA==,i=4096");
    for (nonce, passes) in [
        ("cnoncesnonce", true),
        ("cnoncecnoncesnonce", true),
        ("xxxxxxcnoncesnonce", false),
        ("cnoncecnoncecnoncesnonce", false),
        ("cnoncesnoncesnonce", false),
    ] {
        // The proof is computed over whatever nonce the client sent, as librdkafka does.
        let (last, expected) = client_final_with_nonce(
            Mechanism::Sha256,
            "pw",
            "n=alice,r=cnonce",
            &server_first,
            Some(nonce),
        );
        let proof_ok = state.finish(last.as_bytes());
        if passes {
            assert_eq!(proof_ok, Ok(expected), "{nonce}");
        } else {
            assert_eq!(proof_ok, Err(ScramError::NonceMismatch), "{nonce}");
        }
    }
}

#[test]
fn server_nonces_must_be_printable() {
    for bad in ["", "a,b", "a b", &"n".repeat(257)] {
        let first = ClientFirst::parse(RFC_CLIENT_FIRST.as_bytes()).unwrap();
        assert_eq!(
            first.reply(rfc_credential(), bad).err(),
            Some(ScramError::ServerNonce)
        );
    }
}

#[test]
fn mechanisms_have_kafkas_names_and_codes() {
    assert_eq!(
        Mechanism::from_name("scram-sha-512"),
        Some(Mechanism::Sha512)
    );
    assert_eq!(
        Mechanism::from_name("SCRAM-SHA-256"),
        Some(Mechanism::Sha256)
    );
    assert_eq!(Mechanism::from_name("PLAIN"), None);
    assert_eq!(Mechanism::from_code(1), Some(Mechanism::Sha256));
    assert_eq!(Mechanism::from_code(2), Some(Mechanism::Sha512));
    assert_eq!(Mechanism::from_code(0), None);
    assert_eq!(Mechanism::Sha512.to_string(), "SCRAM-SHA-512");
}
