//! What a sink does: which topics go into which table, and how a record becomes a row.

use serde::{Deserialize, Serialize};

use crate::SinkError;

/// The longest table or column name PostgreSQL keeps (NAMEDATALEN - 1).
pub const MAX_IDENTIFIER: usize = 63;
/// The most columns a mapping may fill.
pub const MAX_COLUMNS: usize = 256;
/// The most topics one sink may consume.
pub const MAX_TOPICS: usize = 64;

/// A sink's definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkSpec {
    /// Names the sink; its positions are stored under it in the target database.
    pub name: String,
    pub topics: Vec<String>,
    /// The target table, `table` or `schema.table`.
    pub table: String,
    pub mode: Mode,
    /// Where records that do not fit go, with the reason in their headers; `None` stops
    /// the sink at the first such record instead.
    pub dead_letter_topic: Option<String>,
    /// Records an operator asked the sink to pass over (one it could not apply, say): each
    /// goes to the dead-letter topic, or nowhere without one, and is never applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<RecordAt>,
}

/// Where a record is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordAt {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// The most records a sink is told to skip; past it the oldest are forgotten (they lie
/// behind the sink's positions by then).
pub const MAX_SKIPPED: usize = 100;

/// How a record becomes a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Mode {
    /// Every record as one row of the fixed envelope: `topic text, partition integer,
    /// "offset" bigint, "timestamp" timestamptz, key bytea, value bytea, headers jsonb`.
    Envelope,
    /// The record's value, a JSON object, mapped field by field to columns.
    Columns {
        columns: Vec<ColumnMapping>,
        /// Upsert by key (for compacted topics): this column takes the record key (as
        /// text) and must be the table's primary key or have a unique index; a record with
        /// no value (a tombstone) deletes the row.
        #[serde(default)]
        key_column: Option<String>,
    },
}

/// A top-level field of the value and the column it fills.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnMapping {
    pub field: String,
    pub column: String,
}

/// The envelope's columns, in the order rows are written.
pub const ENVELOPE_COLUMNS: [&str; 7] = [
    "topic",
    "partition",
    "offset",
    "timestamp",
    "key",
    "value",
    "headers",
];

/// A name as an SQL identifier, quoted, after checking it is a plain name.
pub(crate) fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `table` or `schema.table` as quoted identifiers.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn quoted_table(table: &str) -> String {
    table.split('.').map(quoted).collect::<Vec<_>>().join(".")
}

fn check_identifier(what: &str, name: &str) -> Result<(), SinkError> {
    let fine = !name.is_empty()
        && name.len() <= MAX_IDENTIFIER
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if fine {
        Ok(())
    } else {
        Err(SinkError::Invalid(format!(
            "{what} {name:?} must be 1 to {MAX_IDENTIFIER} letters, digits or underscores, \
             not starting with a digit"
        )))
    }
}

impl SinkSpec {
    /// Checks the names and shape, before anything touches a database.
    pub fn validate(&self) -> Result<(), SinkError> {
        check_identifier("sink name", &self.name)?;
        if self.skip.len() > MAX_SKIPPED {
            return Err(SinkError::Invalid(format!(
                "a sink skips at most {MAX_SKIPPED} records"
            )));
        }
        if self.topics.is_empty() || self.topics.len() > MAX_TOPICS {
            return Err(SinkError::Invalid(format!(
                "a sink consumes 1 to {MAX_TOPICS} topics"
            )));
        }
        for topic in &self.topics {
            if topic.is_empty() || topic.len() > 249 {
                return Err(SinkError::Invalid(format!("topic name {topic:?}")));
            }
        }
        let parts: Vec<&str> = self.table.split('.').collect();
        if parts.len() > 2 {
            return Err(SinkError::Invalid(format!(
                "table {:?} is not `table` or `schema.table`",
                self.table
            )));
        }
        for part in parts {
            check_identifier("table", part)?;
        }
        if let Mode::Columns {
            columns,
            key_column,
        } = &self.mode
        {
            if columns.is_empty() || columns.len() > MAX_COLUMNS {
                return Err(SinkError::Invalid(format!(
                    "a mapping fills 1 to {MAX_COLUMNS} columns"
                )));
            }
            let mut seen = std::collections::BTreeSet::new();
            for mapping in columns {
                check_identifier("column", &mapping.column)?;
                if mapping.field.is_empty() || mapping.field.len() > 1024 {
                    return Err(SinkError::Invalid(format!(
                        "field {:?} of column {}",
                        mapping.field, mapping.column
                    )));
                }
                if !seen.insert(mapping.column.as_str()) {
                    return Err(SinkError::Invalid(format!(
                        "column {} is mapped twice",
                        mapping.column
                    )));
                }
            }
            if let Some(key) = key_column {
                check_identifier("key column", key)?;
                if seen.contains(key.as_str()) {
                    return Err(SinkError::Invalid(format!(
                        "the key column {key} is also mapped from a field"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The columns rows fill, in order.
    pub fn columns(&self) -> Vec<String> {
        match &self.mode {
            Mode::Envelope => ENVELOPE_COLUMNS.iter().map(|c| (*c).to_owned()).collect(),
            Mode::Columns {
                columns,
                key_column,
            } => key_column
                .iter()
                .cloned()
                .chain(columns.iter().map(|m| m.column.clone()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(table: &str, mode: Mode) -> SinkSpec {
        SinkSpec {
            name: "orders_sink".to_owned(),
            topics: vec!["orders".to_owned()],
            table: table.to_owned(),
            mode,
            dead_letter_topic: None,
            skip: Vec::new(),
        }
    }

    #[test]
    fn names_that_could_reach_sql_are_refused() {
        assert!(spec("orders", Mode::Envelope).validate().is_ok());
        assert!(spec("public.orders", Mode::Envelope).validate().is_ok());
        for table in ["", "a.b.c", "orders; DROP TABLE x", "\"orders\"", "1orders"] {
            assert!(spec(table, Mode::Envelope).validate().is_err(), "{table}");
        }
        let mapped = |column: &str| Mode::Columns {
            columns: vec![ColumnMapping {
                field: "id".to_owned(),
                column: column.to_owned(),
            }],
            key_column: None,
        };
        assert!(spec("orders", mapped("id")).validate().is_ok());
        assert!(spec("orders", mapped("id\" text); --")).validate().is_err());
        assert_eq!(quoted_table("public.orders"), "\"public\".\"orders\"");
    }

    #[test]
    fn a_mapping_names_each_column_once() {
        let twice = Mode::Columns {
            columns: vec![
                ColumnMapping {
                    field: "a".to_owned(),
                    column: "x".to_owned(),
                },
                ColumnMapping {
                    field: "b".to_owned(),
                    column: "x".to_owned(),
                },
            ],
            key_column: None,
        };
        assert!(spec("t", twice).validate().is_err());
    }
}
