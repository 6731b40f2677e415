//! State a client hands back to the gateway — a REST group cursor, a gRPC resume token, an
//! SSE event id — decoded as the gateway decodes it: it may be refused, never panic. The
//! input is tried as it is (a forgery), and sealed with the gateway's key as its payload
//! (so the parsers behind the seal are reached); whatever opens names only what its parser
//! allows.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use skein_gateway::client_state::{ClientStateKeys, Kind};
use skein_gateway::grpc::parse_resume_token;
use skein_gateway::rest::events::parse_event_id;
use skein_gateway::rest::groups::cursor_topics;

static KEYS: LazyLock<ClientStateKeys> =
    LazyLock::new(|| ClientStateKeys::new(vec![vec![7u8; 32]]).expect("a valid key"));

fuzz_target!(|data: &[u8]| {
    let keys = &*KEYS;
    let text = String::from_utf8_lossy(data);
    // As sent: refused (a forgery would have to guess the tag), never a panic.
    let _ = keys.open(Kind::GroupCursor, "acme", &text);
    let _ = cursor_topics(&text, "g", keys, "acme");
    let _ = parse_resume_token(keys, "acme", &text);
    let _ = parse_event_id(keys, "acme", "orders", &text);
    // Sealed by the gateway: the parsers behind the seal.
    let cursor = keys.seal(Kind::GroupCursor, "acme", data);
    if cursor_topics(&cursor, "g", keys, "acme").is_ok() {
        assert!(cursor_topics(&cursor, "g", keys, "other").is_err());
    }
    let token = keys.seal(Kind::ResumeToken, "acme", data);
    if let Ok((_, positions)) = parse_resume_token(keys, "acme", &token) {
        assert!(positions.iter().all(|(p, o)| *p >= 0 && *o >= 0));
        assert!(parse_resume_token(keys, "other", &token).is_err());
    }
    let id = keys.seal(Kind::EventId, "acme", data);
    if let Ok(positions) = parse_event_id(keys, "acme", "orders", &id) {
        assert!(positions.iter().all(|(p, o)| *p >= 0 && *o >= 0));
    }
});
