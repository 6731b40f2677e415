//! The JSON shapes of records going in and coming out.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use skein_client::{ConsumerRecord, ProduceRecord, RecordHeader};
use utoipa::ToSchema;

use super::format::{base64, Format};
use crate::error::GatewayError;
use crate::produce::Written;

/// How a request's or response's keys, values and header values are encoded.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct Formats {
    /// Default `string`.
    pub key_format: Option<Format>,
    /// Default `json`.
    pub value_format: Option<Format>,
    /// Default `string`.
    pub header_format: Option<Format>,
}

impl Formats {
    pub fn key(&self) -> Format {
        self.key_format.unwrap_or(Format::String)
    }
    pub fn value(&self) -> Format {
        self.value_format.unwrap_or(Format::Json)
    }
    pub fn header(&self) -> Format {
        self.header_format.unwrap_or(Format::String)
    }
}

/// A record header.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderBody {
    pub key: String,
    /// In the header format; `null` for no value.
    #[serde(default)]
    pub value: Value,
}

/// A record to write.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordIn {
    /// In the key format; absent or `null` for no key.
    #[serde(default)]
    pub key: Value,
    /// In the value format; absent or `null` for no value (a tombstone).
    #[serde(default)]
    pub value: Value,
    #[serde(default)]
    pub headers: Vec<HeaderBody>,
    /// An explicit partition; else chosen from the key, else one for the whole request.
    pub partition: Option<i32>,
    /// Creation time in milliseconds since the epoch; default now.
    pub timestamp: Option<i64>,
}

impl RecordIn {
    /// The record to produce, or why this one cannot be.
    pub fn decode(&self, formats: &Formats) -> Result<ProduceRecord, GatewayError> {
        let invalid = |field: &str, e: String| GatewayError::Invalid(format!("{field}: {e}"));
        let mut headers = Vec::with_capacity(self.headers.len());
        for header in &self.headers {
            headers.push(RecordHeader {
                key: header.key.clone(),
                value: formats
                    .header()
                    .decode(&header.value)
                    .map_err(|e| invalid("header value", e))?,
            });
        }
        if self.timestamp.is_some_and(|t| t < 0) {
            return Err(GatewayError::Invalid(
                "timestamp: must not be negative".to_owned(),
            ));
        }
        Ok(ProduceRecord {
            key: formats
                .key()
                .decode(&self.key)
                .map_err(|e| invalid("key", e))?,
            value: formats
                .value()
                .decode(&self.value)
                .map_err(|e| invalid("value", e))?,
            headers,
            timestamp: self.timestamp,
            partition: self.partition,
        })
    }
}

/// A batch of records to write.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProduceBody {
    /// Default `string`.
    pub key_format: Option<Format>,
    /// Default `json`.
    pub value_format: Option<Format>,
    /// Default `string`.
    pub header_format: Option<Format>,
    #[schema(min_items = 1, max_items = 10000)]
    pub records: Vec<RecordIn>,
}

impl ProduceBody {
    pub fn formats(&self) -> Formats {
        Formats {
            key_format: self.key_format,
            value_format: self.value_format,
            header_format: self.header_format,
        }
    }
}

/// Why one record was not written.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RecordError {
    /// The HTTP status the failure alone would get.
    pub status: u16,
    pub detail: String,
}

/// What became of one record.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RecordResult {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordError>,
}

impl From<Result<Written, GatewayError>> for RecordResult {
    fn from(outcome: Result<Written, GatewayError>) -> Self {
        match outcome {
            Ok(w) => Self {
                partition: Some(w.partition),
                offset: Some(w.offset),
                timestamp: Some(w.timestamp),
                error: None,
            },
            Err(e) => {
                let problem = skein_http::Problem::from(e);
                Self {
                    partition: None,
                    offset: None,
                    timestamp: None,
                    error: Some(RecordError {
                        status: problem.status,
                        detail: problem.detail,
                    }),
                }
            }
        }
    }
}

/// One outcome per record, in the order they were sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProduceResults {
    pub results: Vec<RecordResult>,
}

/// A record read.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RecordOut {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    /// In the key format; `null` for no key.
    pub key: Value,
    /// In the value format; `null` for no value.
    pub value: Value,
    pub headers: Vec<HeaderBody>,
    /// Fields given in base64 because their bytes do not fit the asked format (`key`,
    /// `value`, `headers.<index>`); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub base64: Vec<String>,
}

impl RecordOut {
    pub fn encode(record: &ConsumerRecord, formats: &Formats) -> Self {
        let mut fallbacks = Vec::new();
        let mut field = |name: String, bytes: &Option<Bytes>, format: Format| match bytes {
            None => Value::Null,
            Some(bytes) => format.encode(bytes).unwrap_or_else(|| {
                fallbacks.push(name);
                base64(bytes)
            }),
        };
        let key = field("key".to_owned(), &record.key, formats.key());
        let value = field("value".to_owned(), &record.value, formats.value());
        let headers = record
            .headers
            .iter()
            .enumerate()
            .map(|(i, h)| HeaderBody {
                key: h.key.clone(),
                value: field(format!("headers.{i}"), &h.value, formats.header()),
            })
            .collect();
        Self {
            topic: record.topic.clone(),
            partition: record.partition,
            offset: record.offset,
            timestamp: record.timestamp,
            key,
            value,
            headers,
            base64: fallbacks,
        }
    }
}
