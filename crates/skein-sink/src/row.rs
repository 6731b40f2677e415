//! Records as rows: the envelope, or a JSON value's fields as the mapped columns' values.
//! A record that does not fit is a [`Misfit`] with the reason, for the dead-letter topic.

use base64::Engine;
use serde_json::Value;
use skein_client::ConsumerRecord;

use crate::spec::{Mode, SinkSpec};
use crate::target::{Kind, TableShape};

/// Why a record cannot be a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit(pub String);

/// The envelope's values of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeRow {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// The headers as a JSON array of `{"key", "value"}` (`value_base64` when not UTF-8).
    pub headers: String,
}

/// What one record does to the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Envelope(EnvelopeRow),
    /// The columns' values as text, cast by PostgreSQL to each column's type; with a key
    /// column, the key first.
    Upsert(Vec<Option<String>>),
    /// A tombstone: delete the row with this key.
    Delete(String),
}

fn headers_json(record: &ConsumerRecord) -> String {
    let headers: Vec<Value> = record
        .headers
        .iter()
        .map(|h| {
            let mut entry = serde_json::Map::new();
            entry.insert("key".to_owned(), Value::String(h.key.clone()));
            match h.value.as_deref().map(std::str::from_utf8) {
                None => {
                    entry.insert("value".to_owned(), Value::Null);
                }
                Some(Ok(text)) => {
                    entry.insert("value".to_owned(), Value::String(text.to_owned()));
                }
                Some(Err(_)) => {
                    let bytes = h.value.as_deref().unwrap_or_default();
                    entry.insert(
                        "value_base64".to_owned(),
                        Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
                    );
                }
            }
            Value::Object(entry)
        })
        .collect();
    Value::Array(headers).to_string()
}

/// A JSON value as the text of a column of `kind`, or why it cannot be.
fn column_text(column: &str, kind: Kind, value: &Value) -> Result<Option<String>, Misfit> {
    let wrong = |what: &str| {
        Err(Misfit(format!(
            "column {column} takes {what}, and the value has {}",
            match value {
                Value::Null => "null".to_owned(),
                Value::Bool(_) => "a boolean".to_owned(),
                Value::Number(n) => format!("the number {n}"),
                Value::String(_) => "a string".to_owned(),
                Value::Array(_) => "an array".to_owned(),
                Value::Object(_) => "an object".to_owned(),
            }
        )))
    };
    if value.is_null() {
        return Ok(None);
    }
    match kind {
        Kind::Integer { min, max } => match value.as_i64() {
            Some(n) if n >= min && n <= max => Ok(Some(n.to_string())),
            _ => wrong(&format!("integers from {min} to {max}")),
        },
        Kind::Number => match value {
            Value::Number(n) => Ok(Some(n.to_string())),
            _ => wrong("numbers"),
        },
        Kind::Boolean => match value {
            Value::Bool(b) => Ok(Some(b.to_string())),
            _ => wrong("booleans"),
        },
        Kind::Json => Ok(Some(value.to_string())),
        Kind::Text | Kind::Other | Kind::Timestamp => match value {
            Value::String(s) => Ok(Some(s.clone())),
            Value::Number(n) => Ok(Some(n.to_string())),
            Value::Bool(b) => Ok(Some(b.to_string())),
            _ => wrong("text"),
        },
        Kind::Bytes => wrong("bytes"),
    }
}

/// The change `record` makes under `spec`, against a table of `shape`.
pub fn change_of(
    spec: &SinkSpec,
    shape: &TableShape,
    record: &ConsumerRecord,
) -> Result<Change, Misfit> {
    let (columns, key_column) = match &spec.mode {
        Mode::Envelope => {
            return Ok(Change::Envelope(EnvelopeRow {
                topic: record.topic.clone(),
                partition: record.partition,
                offset: record.offset,
                timestamp_ms: record.timestamp,
                key: record.key.as_ref().map(|k| k.to_vec()),
                value: record.value.as_ref().map(|v| v.to_vec()),
                headers: headers_json(record),
            }))
        }
        Mode::Columns {
            columns,
            key_column,
        } => (columns, key_column),
    };
    let key = match (key_column, &record.key) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(Misfit(
                "the sink upserts by key, and the record has no key".to_owned(),
            ))
        }
        (Some(_), Some(key)) => Some(
            std::str::from_utf8(key)
                .map_err(|_| Misfit("the record key is not UTF-8 text".to_owned()))?
                .to_owned(),
        ),
    };
    let Some(value) = &record.value else {
        return match key {
            Some(key) => Ok(Change::Delete(key)),
            None => Err(Misfit(
                "the record has no value (a tombstone), and the sink does not upsert by key"
                    .to_owned(),
            )),
        };
    };
    let parsed: Value =
        serde_json::from_slice(value).map_err(|e| Misfit(format!("the value is not JSON: {e}")))?;
    let Value::Object(fields) = parsed else {
        return Err(Misfit("the value is JSON but not an object".to_owned()));
    };
    let mut texts = Vec::with_capacity(columns.len() + 1);
    if let Some(key) = key {
        texts.push(Some(key));
    }
    for mapping in columns {
        let kind = shape
            .columns
            .get(&mapping.column)
            .map_or(Kind::Other, |c| c.kind);
        let field = fields.get(&mapping.field).unwrap_or(&Value::Null);
        texts.push(column_text(&mapping.column, kind, field)?);
    }
    Ok(Change::Upsert(texts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_values_are_checked_against_their_columns() {
        let int4 = Kind::Integer {
            min: i64::from(i32::MIN),
            max: i64::from(i32::MAX),
        };
        assert_eq!(
            column_text("qty", int4, &serde_json::json!(3)).unwrap(),
            Some("3".to_owned())
        );
        assert!(column_text("qty", int4, &serde_json::json!("3")).is_err());
        assert!(column_text("qty", int4, &serde_json::json!(1u64 << 40)).is_err());
        assert!(column_text("qty", int4, &serde_json::json!(2.5)).is_err());
        assert_eq!(column_text("qty", int4, &Value::Null).unwrap(), None);
        assert!(column_text("ok", Kind::Boolean, &serde_json::json!(1)).is_err());
        assert_eq!(
            column_text("doc", Kind::Json, &serde_json::json!({"a": [1]})).unwrap(),
            Some(r#"{"a":[1]}"#.to_owned())
        );
        assert!(column_text("name", Kind::Text, &serde_json::json!({})).is_err());
    }
}
