//! A request frame body as the broker decodes it: the header for the API key and version it
//! names, then the request body. Decoding may fail; it must never panic or hang.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let api_key = i16::from_be_bytes([data[0], data[1]]);
    let version = i16::from_be_bytes([data[2], data[3]]);
    let Ok(key) = ApiKey::try_from(api_key) else {
        return;
    };
    let range = key.valid_versions();
    if version < range.min || version > range.max {
        return;
    }
    let mut buf = Bytes::copy_from_slice(data);
    if RequestHeader::decode(&mut buf, key.request_header_version(version)).is_ok() {
        let _ = RequestKind::decode(key, &mut buf, version);
    }
});
