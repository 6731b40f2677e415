//! The SASL messages a client sends in SaslAuthenticate (or bare after SaslHandshake v0):
//! a PLAIN token and an OAUTHBEARER client message. Parsing may refuse them; it must never
//! panic, and what it accepts is within the bounds and free of separators.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_broker::sasl::{
    parse_oauthbearer, parse_plain, MAX_OAUTHBEARER_BYTES, MAX_TOKEN_BYTES,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(credentials) = parse_plain(data) {
        assert!(data.len() <= MAX_TOKEN_BYTES);
        assert!(!credentials.key_id.is_empty() && !credentials.secret.is_empty());
        assert!(!credentials.key_id.contains('\0') && !credentials.secret.contains('\0'));
    }
    if let Ok(token) = parse_oauthbearer(data) {
        assert!(data.len() <= MAX_OAUTHBEARER_BYTES);
        assert!(!token.is_empty() && !token.contains('\u{1}'));
    }
});
