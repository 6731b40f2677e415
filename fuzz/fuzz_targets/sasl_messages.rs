//! The SASL messages a client sends in SaslAuthenticate (or bare after SaslHandshake v0):
//! a PLAIN token, an OAUTHBEARER client message, and SCRAM's two client messages (the input
//! split at its first 0xff byte into the first and the final message, run as one exchange
//! against a known credential). Parsing may refuse them; it must never panic, what it
//! accepts is within the bounds and free of separators, and no forged proof passes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_broker::sasl::{parse_oauthbearer, parse_plain, MAX_OAUTHBEARER_BYTES, MAX_TOKEN_BYTES};
use skein_scram::{ClientFirst, Credential, Mechanism, MAX_MESSAGE_BYTES, MAX_USER_BYTES};

fuzz_target!(|data: &[u8]| {
    if let Ok(credentials) = parse_plain(data) {
        assert!(data.len() <= MAX_TOKEN_BYTES);
        assert!(!credentials.key_id.is_empty() && !credentials.secret.is_empty());
        assert!(!credentials.key_id.contains('\0') && !credentials.secret.contains('\0'));
        // Only a gateway names a tenant to act for, and then always one.
        assert_eq!(
            credentials.tenant.is_empty(),
            credentials.key_id != skein_broker::sasl::GATEWAY_USER
        );
    }
    if let Ok(token) = parse_oauthbearer(data) {
        assert!(data.len() <= MAX_OAUTHBEARER_BYTES);
        assert!(!token.is_empty() && !token.contains('\u{1}'));
    }
    let (first, last) = match data.iter().position(|&b| b == 0xff) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    if let Ok(client_first) = ClientFirst::parse(first) {
        assert!(first.len() <= MAX_MESSAGE_BYTES);
        assert!(!client_first.user.is_empty() && client_first.user.len() <= MAX_USER_BYTES);
        // The decoy's stored key is zeros: no final message can pass it.
        let credential = Credential::decoy(Mechanism::Sha256, &client_first.user, b"fuzz");
        if let Ok((_, state)) = client_first.reply(credential, "server-nonce") {
            assert!(state.finish(last).is_err());
        }
    }
});
