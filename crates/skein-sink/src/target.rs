//! The target table as PostgreSQL describes it, and whether a sink's rows fit it: checked
//! when a sink is created, so a mistake is a clear error before anything runs.

use std::collections::BTreeMap;

#[cfg(feature = "postgres")]
use sqlx::{postgres::PgPool, Row};

#[cfg(feature = "postgres")]
use crate::spec::quoted_table;
use crate::spec::{quoted, Mode, SinkSpec, ENVELOPE_COLUMNS};
use crate::SinkError;

/// What values a column takes, as far as the sink checks them before writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `smallint`, `integer`, `bigint`: JSON integers within the bounds.
    Integer {
        min: i64,
        max: i64,
    },
    /// `real`, `double precision`, `numeric`: JSON numbers.
    Number,
    Boolean,
    /// `json`, `jsonb`: any JSON value.
    Json,
    /// `text`, `varchar`, `char`: strings, numbers and booleans (as their text).
    Text,
    Bytes,
    Timestamp,
    /// Anything else (`uuid`, `date`, ...): a string PostgreSQL casts, checked by it.
    Other,
}

/// One column of the target table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The type as SQL (`format_type`), with its modifier: `character varying(10)`.
    pub sql_type: String,
    /// The type without its modifier, which written values are cast to: an explicit cast
    /// to `varchar(10)` would cut a longer string, where storing it into the column
    /// refuses it.
    pub base_type: String,
    pub kind: Kind,
}

/// The target table's columns by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableShape {
    pub columns: BTreeMap<String, Column>,
    /// Columns with a unique index of their own (or a one-column primary key).
    pub unique: Vec<String>,
}

/// The kind of a column of PostgreSQL type `type_name` (`pg_type.typname`).
pub fn kind_of(type_name: &str) -> Kind {
    match type_name {
        "int2" => Kind::Integer {
            min: i64::from(i16::MIN),
            max: i64::from(i16::MAX),
        },
        "int4" => Kind::Integer {
            min: i64::from(i32::MIN),
            max: i64::from(i32::MAX),
        },
        "int8" => Kind::Integer {
            min: i64::MIN,
            max: i64::MAX,
        },
        "float4" | "float8" | "numeric" => Kind::Number,
        "bool" => Kind::Boolean,
        "json" | "jsonb" => Kind::Json,
        "text" | "varchar" | "bpchar" | "name" => Kind::Text,
        "bytea" => Kind::Bytes,
        "timestamptz" | "timestamp" => Kind::Timestamp,
        _ => Kind::Other,
    }
}

/// Reads the shape of `table` (`table` or `schema.table`).
#[cfg(feature = "postgres")]
pub async fn inspect(pool: &PgPool, table: &str) -> Result<TableShape, SinkError> {
    let regclass: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
        .bind(quoted_table(table))
        .fetch_one(pool)
        .await?;
    if regclass.is_none() {
        return Err(SinkError::UnknownTable(table.to_owned()));
    }
    let rows = sqlx::query(
        "SELECT a.attname::text AS name, format_type(a.atttypid, a.atttypmod) AS sql_type, \
           format_type(a.atttypid, NULL) AS base_type, \
           t.typname::text AS type_name \
         FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
         WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped",
    )
    .bind(quoted_table(table))
    .fetch_all(pool)
    .await?;
    let mut columns = BTreeMap::new();
    for row in rows {
        let name: String = row.try_get("name")?;
        let sql_type: String = row.try_get("sql_type")?;
        let base_type: String = row.try_get("base_type")?;
        let type_name: String = row.try_get("type_name")?;
        columns.insert(
            name,
            Column {
                sql_type,
                base_type,
                kind: kind_of(&type_name),
            },
        );
    }
    let unique: Vec<String> = sqlx::query_scalar(
        "SELECT a.attname::text FROM pg_index i \
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
         WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indnkeyatts = 1 \
           AND i.indpred IS NULL",
    )
    .bind(quoted_table(table))
    .fetch_all(pool)
    .await?;
    Ok(TableShape { columns, unique })
}

const INT4: Kind = Kind::Integer {
    min: i32::MIN as i64,
    max: i32::MAX as i64,
};
const INT8: Kind = Kind::Integer {
    min: i64::MIN,
    max: i64::MAX,
};

/// The kinds the envelope's columns must be.
fn envelope_kind(column: &str) -> &'static [Kind] {
    match column {
        "topic" => &[Kind::Text],
        "partition" => &[INT4, INT8],
        "offset" => &[INT8],
        "timestamp" => &[Kind::Timestamp],
        "key" | "value" => &[Kind::Bytes],
        _ => &[Kind::Json],
    }
}

/// Whether `spec`'s rows fit `shape`; the first misfit as an error that names it.
pub fn check(spec: &SinkSpec, shape: &TableShape) -> Result<(), SinkError> {
    let column = |name: &str| {
        shape
            .columns
            .get(name)
            .ok_or_else(|| SinkError::MissingColumn {
                table: spec.table.clone(),
                column: name.to_owned(),
            })
    };
    match &spec.mode {
        Mode::Envelope => {
            for name in ENVELOPE_COLUMNS {
                let found = column(name)?;
                if !envelope_kind(name).contains(&found.kind) {
                    return Err(SinkError::ColumnType {
                        column: name.to_owned(),
                        found: found.sql_type.clone(),
                        needed: match name {
                            "topic" => "text",
                            "partition" => "integer",
                            "offset" => "bigint",
                            "timestamp" => "timestamptz",
                            "key" | "value" => "bytea",
                            _ => "jsonb",
                        }
                        .to_owned(),
                    });
                }
            }
        }
        Mode::Columns {
            columns,
            key_column,
        } => {
            for mapping in columns {
                let found = column(&mapping.column)?;
                if found.kind == Kind::Bytes {
                    return Err(SinkError::ColumnType {
                        column: mapping.column.clone(),
                        found: found.sql_type.clone(),
                        needed: "a type JSON values map to (not bytea)".to_owned(),
                    });
                }
            }
            if let Some(key) = key_column {
                let found = column(key)?;
                if !matches!(found.kind, Kind::Text | Kind::Other) {
                    return Err(SinkError::ColumnType {
                        column: key.clone(),
                        found: found.sql_type.clone(),
                        needed: "text (it takes the record key)".to_owned(),
                    });
                }
                if !shape.unique.contains(key) {
                    return Err(SinkError::Invalid(format!(
                        "upsert by key needs a primary key or unique index on {} alone",
                        quoted(key)
                    )));
                }
            }
        }
    }
    Ok(())
}
