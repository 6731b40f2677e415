//! Records a tenant stored, as a sink turns them into rows: any key, value and headers, in
//! the envelope and in a JSON mapping over every kind of column (with and without upsert
//! by key), are a row, a delete or a reason the record does not fit, never a panic; and a
//! row has exactly the columns the mapping names.
#![no_main]

use std::collections::BTreeMap;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use skein_client::{ConsumerRecord, RecordHeader};
use skein_sink::row::{change_of, Change};
use skein_sink::target::{kind_of, Column, TableShape};
use skein_sink::{ColumnMapping, Mode, SinkSpec};

const TYPES: [&str; 10] = [
    "int2", "int4", "int8", "float8", "numeric", "bool", "jsonb", "text", "uuid", "timestamptz",
];

fn spec(mode: Mode) -> SinkSpec {
    SinkSpec {
        name: "fuzz".to_owned(),
        topics: vec!["t".to_owned()],
        table: "t".to_owned(),
        mode,
        dead_letter_topic: None,
        skip: Vec::new(),
    }
}

fuzz_target!(|data: &[u8]| {
    // key | value | header key | header value, split at 0xff bytes.
    let mut parts = data.split(|b| *b == 0xff);
    let key = parts.next().filter(|k| !k.is_empty()).map(Bytes::copy_from_slice);
    let value = parts.next().filter(|v| v != b"null").map(Bytes::copy_from_slice);
    let headers = match (parts.next(), parts.next()) {
        (Some(k), v) => vec![RecordHeader {
            key: String::from_utf8_lossy(k).into_owned(),
            value: v.map(Bytes::copy_from_slice),
        }],
        _ => Vec::new(),
    };
    let record = ConsumerRecord {
        topic: "t".to_owned(),
        partition: 0,
        offset: 0,
        timestamp: 0,
        key,
        value,
        headers,
    };
    let mut columns = BTreeMap::new();
    let mut mappings = Vec::new();
    for (i, type_name) in TYPES.iter().enumerate() {
        let column = format!("c{i}");
        columns.insert(
            column.clone(),
            Column {
                sql_type: (*type_name).to_owned(),
                base_type: (*type_name).to_owned(),
                kind: kind_of(type_name),
            },
        );
        mappings.push(ColumnMapping {
            field: format!("f{i}"),
            column,
        });
    }
    columns.insert(
        "id".to_owned(),
        Column {
            sql_type: "text".to_owned(),
            base_type: "text".to_owned(),
            kind: kind_of("text"),
        },
    );
    let shape = TableShape {
        columns,
        unique: vec!["id".to_owned()],
    };
    let _ = change_of(&spec(Mode::Envelope), &shape, &record);
    for key_column in [None, Some("id".to_owned())] {
        let keyed = key_column.is_some();
        let mode = Mode::Columns {
            columns: mappings.clone(),
            key_column,
        };
        if let Ok(Change::Upsert(values)) = change_of(&spec(mode), &shape, &record) {
            assert_eq!(values.len(), TYPES.len() + usize::from(keyed));
        }
    }
});
