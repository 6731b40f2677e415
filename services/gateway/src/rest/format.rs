//! How keys, values and header values travel in JSON: as JSON itself, as a UTF-8 string,
//! or as base64 bytes. Reads say which fields did not fit the asked format and were given
//! in base64 instead, so nothing a native client wrote is lost or mangled.

use base64::Engine;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// Which records a read returns (Kafka's `isolation.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IsolationLevel {
    /// Records of committed transactions and non-transactional ones, up to the last stable
    /// offset; never a record of an aborted transaction.
    #[default]
    ReadCommitted,
    /// Every record up to the high watermark, aborted transactions' too.
    ReadUncommitted,
}

impl IsolationLevel {
    pub fn of(level: Option<Self>) -> skein_client::Isolation {
        match level.unwrap_or_default() {
            Self::ReadCommitted => skein_client::Isolation::ReadCommitted,
            Self::ReadUncommitted => skein_client::Isolation::ReadUncommitted,
        }
    }
}

/// The encoding of a key, value or header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Any JSON value; the bytes are its compact serialization.
    #[default]
    Json,
    /// A JSON string; the bytes are its UTF-8.
    String,
    /// A JSON string holding standard base64.
    Base64,
}

impl Format {
    /// The bytes a JSON field stands for; `null` is no bytes at all.
    pub fn decode(self, value: &Value) -> Result<Option<Bytes>, String> {
        if value.is_null() {
            return Ok(None);
        }
        match self {
            Self::Json => serde_json::to_vec(value)
                .map(|v| Some(Bytes::from(v)))
                .map_err(|e| e.to_string()),
            Self::String => value
                .as_str()
                .map(|s| Some(Bytes::copy_from_slice(s.as_bytes())))
                .ok_or_else(|| "expected a string (format string)".to_owned()),
            Self::Base64 => {
                let text = value
                    .as_str()
                    .ok_or_else(|| "expected a base64 string (format base64)".to_owned())?;
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map(|v| Some(Bytes::from(v)))
                    .map_err(|e| format!("not valid base64: {e}"))
            }
        }
    }

    /// The JSON for some bytes, or `None` when they do not fit this format (then
    /// [`base64`] gives them).
    pub fn encode(self, bytes: &[u8]) -> Option<Value> {
        match self {
            Self::Json => serde_json::from_slice(bytes).ok(),
            Self::String => std::str::from_utf8(bytes)
                .ok()
                .map(|s| Value::String(s.to_owned())),
            Self::Base64 => Some(base64(bytes)),
        }
    }
}

/// Bytes as a base64 JSON string.
pub fn base64(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_format_round_trips_its_own_values() {
        for (format, value) in [
            (Format::Json, json!({"a": [1, 2, "x"]})),
            (Format::Json, json!("text")),
            (Format::String, json!("héllo")),
            (Format::Base64, json!("AAEC/w==")),
        ] {
            let bytes = format.decode(&value).unwrap().unwrap();
            assert_eq!(format.encode(&bytes), Some(value), "{format:?}");
        }
        assert_eq!(Format::String.decode(&Value::Null), Ok(None));
    }

    #[test]
    fn values_that_do_not_fit_are_refused_or_left_to_base64() {
        assert!(Format::String.decode(&json!(12)).is_err());
        assert!(Format::Base64.decode(&json!("not base64!")).is_err());
        assert_eq!(Format::Json.encode(b"\xff\x00"), None);
        assert_eq!(Format::String.encode(b"\xff\x00"), None);
        assert_eq!(base64(b"\xff\x00"), json!("/wA="));
    }
}
