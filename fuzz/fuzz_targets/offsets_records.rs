//! Bytes a damaged or replicated `__consumer_offsets` record could hand the group
//! coordinator when it reloads: keys and values are refused or read, never a panic; what
//! reads writes back to the same bytes, so a key reloads only as itself; and reading
//! allocates no more than the bytes hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_broker::group::offsets_record::{decode_key, decode_value, encode_key, encode_value};

fuzz_target!(|data: &[u8]| {
    if let Ok((group, topic, partition)) = decode_key(data) {
        assert!(group.len() + topic.len() <= data.len());
        // Keys are written in version 1 (version 0 is read alike).
        if data.starts_with(&[0, 1]) {
            assert_eq!(encode_key(&group, &topic, partition).as_deref(), Ok(data));
        }
    }
    if let Ok(committed) = decode_value(data) {
        assert!(committed.metadata.len() <= data.len());
        // The commit's timestamp is the last eight bytes.
        let at = i64::from_be_bytes(data[data.len() - 8..].try_into().unwrap_or_default());
        assert_eq!(encode_value(&committed, at).as_deref(), Ok(data));
    }
});
