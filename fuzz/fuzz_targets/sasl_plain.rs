//! A SASL/PLAIN token as a client sends it in SaslAuthenticate (or bare after SaslHandshake
//! v0): parsing may refuse it; it must never panic, and what it accepts is a key id and
//! secret without separators, within the token bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_broker::sasl::{parse_plain, MAX_TOKEN_BYTES};

fuzz_target!(|data: &[u8]| {
    if let Ok(credentials) = parse_plain(data) {
        assert!(data.len() <= MAX_TOKEN_BYTES);
        assert!(!credentials.key_id.is_empty() && !credentials.secret.is_empty());
        assert!(!credentials.key_id.contains('\0') && !credentials.secret.contains('\0'));
    }
});
