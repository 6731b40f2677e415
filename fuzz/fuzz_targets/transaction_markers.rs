//! Bytes a damaged `.txnindex` file or a leader's replicated batch could hand the log's
//! transaction state, or a replicated `__transaction_state` record its coordinator: index
//! entries, transaction markers and coordinator records are refused or read, never a
//! panic, and reading allocates nothing the bytes declare.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_log::batch::{read_marker, validate_batch};
use skein_broker::txn::state_record;
use skein_log::transactions::{decode_index, Transactions, TxnBatch};

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = decode_index(data) {
        assert!(entries.len() <= data.len() / 34);
    }
    let _ = state_record::decode_key(data);
    if let Ok(meta) = state_record::decode_value(data) {
        // Each partition takes four bytes of the record at least.
        assert!(meta.partitions.len() <= data.len() / 4);
        assert_eq!(state_record::decode_value(&state_record::encode_value(&meta)), Ok(meta));
    }
    // The same bytes as a control batch, its length, magic, attributes and CRC put right,
    // as a leader's marker would arrive.
    let mut owned = data.to_vec();
    if owned.len() < 61 {
        return;
    }
    let length = (owned.len() - 12) as i32;
    owned[8..12].copy_from_slice(&length.to_be_bytes());
    owned[16] = 2;
    owned[22] |= 0x30;
    let crc = crc32c::crc32c(&owned[21..]);
    owned[17..21].copy_from_slice(&crc.to_be_bytes());
    let Ok(header) = validate_batch(&owned) else {
        return;
    };
    if let Ok(marker) = read_marker(&owned, &header) {
        let mut txns = Transactions::default();
        txns.observe(
            0,
            TxnBatch::Data {
                producer_id: header.producer_id,
            },
        );
        let aborted = txns.observe(
            1,
            TxnBatch::Marker {
                producer_id: header.producer_id,
                kind: marker.kind,
            },
        );
        assert_eq!(txns.open_transactions(), 0);
        assert_eq!(txns.last_stable_offset(2), 2);
        assert_eq!(
            aborted.is_some(),
            marker.kind == skein_log::batch::MarkerKind::Abort
        );
    }
});
