//! Rows into the target table inside the caller's transaction: a whole batch in one
//! statement (arrays through `UNNEST`), and, when PostgreSQL refuses the batch's data, row
//! by row under savepoints so the rows it refuses can go to the dead-letter topic while the
//! rest are written.

use std::collections::BTreeMap;

use sqlx::postgres::PgConnection;

use crate::row::{Change, EnvelopeRow};
use crate::spec::{quoted, quoted_table, Mode, SinkSpec};
use crate::target::TableShape;

/// The statements of one sink against its table.
#[derive(Debug, Clone)]
pub struct Writer {
    insert: String,
    delete: Option<String>,
    /// Columns (key first) in the order `Change::Upsert` values come.
    width: usize,
    envelope: bool,
}

/// Whether a database error is about the data (a value that does not fit, a constraint),
/// rather than the connection or the server: SQLSTATE classes 22 and 23.
fn refuses_data(error: &sqlx::Error) -> Option<String> {
    match error {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            (code.starts_with("22") || code.starts_with("23"))
                .then(|| format!("the database refused the row: {} ({code})", db.message()))
        }
        _ => None,
    }
}

impl Writer {
    pub fn new(spec: &SinkSpec, shape: &TableShape) -> Self {
        let table = quoted_table(&spec.table);
        match &spec.mode {
            Mode::Envelope => Self {
                insert: format!(
                    "INSERT INTO {table} (\"topic\", \"partition\", \"offset\", \"timestamp\", \
                       \"key\", \"value\", \"headers\") \
                     SELECT t, p, o, to_timestamp(ts / 1000.0), k, v, h::jsonb \
                     FROM UNNEST($1::text[], $2::int4[], $3::int8[], $4::int8[], $5::bytea[], \
                       $6::bytea[], $7::text[]) AS u(t, p, o, ts, k, v, h)"
                ),
                delete: None,
                width: 7,
                envelope: true,
            },
            Mode::Columns {
                columns,
                key_column,
            } => {
                let names: Vec<&str> = key_column
                    .iter()
                    .map(String::as_str)
                    .chain(columns.iter().map(|m| m.column.as_str()))
                    .collect();
                let sql_type = |name: &str| {
                    shape
                        .columns
                        .get(name)
                        .map_or("text".to_owned(), |c| c.base_type.clone())
                };
                let targets: Vec<String> = names.iter().map(|n| quoted(n)).collect();
                let casts: Vec<String> = names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| format!("u.c{i}::{}", sql_type(n)))
                    .collect();
                let arrays: Vec<String> =
                    (1..=names.len()).map(|i| format!("${i}::text[]")).collect();
                let aliases: Vec<String> = (0..names.len()).map(|i| format!("c{i}")).collect();
                let mut insert = format!(
                    "INSERT INTO {table} ({}) SELECT {} FROM UNNEST({}) AS u({})",
                    targets.join(", "),
                    casts.join(", "),
                    arrays.join(", "),
                    aliases.join(", ")
                );
                let delete = key_column.as_ref().map(|key| {
                    let updates: Vec<String> = names[1..]
                        .iter()
                        .map(|n| format!("{} = EXCLUDED.{}", quoted(n), quoted(n)))
                        .collect();
                    insert.push_str(&format!(" ON CONFLICT ({}) ", quoted(key)));
                    if updates.is_empty() {
                        insert.push_str("DO NOTHING");
                    } else {
                        insert.push_str(&format!("DO UPDATE SET {}", updates.join(", ")));
                    }
                    format!(
                        "DELETE FROM {table} WHERE {} IN (SELECT k::{} FROM UNNEST($1::text[]) AS u(k))",
                        quoted(key),
                        sql_type(key)
                    )
                });
                Self {
                    insert,
                    delete,
                    width: names.len(),
                    envelope: false,
                }
            }
        }
    }

    /// Writes `changes` (each with the index of its record); answers the records the
    /// database refused, with its reason. Errors other than refused data end the
    /// transaction's usefulness and are returned.
    pub async fn write(
        &self,
        conn: &mut PgConnection,
        changes: &[(usize, Change)],
    ) -> Result<Vec<(usize, String)>, sqlx::Error> {
        // With a key, only each key's last change in the batch counts, and one statement
        // may not touch a row twice.
        let finals: Vec<&(usize, Change)> = if self.delete.is_some() {
            let mut last: BTreeMap<&str, &(usize, Change)> = BTreeMap::new();
            for change in changes {
                let key = match &change.1 {
                    Change::Delete(key) => key.as_str(),
                    Change::Upsert(values) => values
                        .first()
                        .and_then(|k| k.as_deref())
                        .unwrap_or_default(),
                    Change::Envelope(_) => continue,
                };
                last.insert(key, change);
            }
            let mut finals: Vec<&(usize, Change)> = last.into_values().collect();
            finals.sort_by_key(|c| c.0);
            finals
        } else {
            changes.iter().collect()
        };
        if finals.is_empty() {
            return Ok(Vec::new());
        }
        sqlx::query("SAVEPOINT skein_batch")
            .execute(&mut *conn)
            .await?;
        match self.execute(conn, &finals).await {
            Ok(()) => {
                sqlx::query("RELEASE SAVEPOINT skein_batch")
                    .execute(&mut *conn)
                    .await?;
                return Ok(Vec::new());
            }
            Err(e) if refuses_data(&e).is_some() => {
                sqlx::query("ROLLBACK TO SAVEPOINT skein_batch")
                    .execute(&mut *conn)
                    .await?;
            }
            Err(e) => return Err(e),
        }
        // Row by row, to find the rows refused.
        let mut refused = Vec::new();
        for change in finals {
            sqlx::query("SAVEPOINT skein_row")
                .execute(&mut *conn)
                .await?;
            match self.execute(conn, &[change]).await {
                Ok(()) => {}
                Err(e) => match refuses_data(&e) {
                    Some(reason) => {
                        sqlx::query("ROLLBACK TO SAVEPOINT skein_row")
                            .execute(&mut *conn)
                            .await?;
                        refused.push((change.0, reason));
                    }
                    None => return Err(e),
                },
            }
            sqlx::query("RELEASE SAVEPOINT skein_row")
                .execute(&mut *conn)
                .await?;
        }
        Ok(refused)
    }

    async fn execute(
        &self,
        conn: &mut PgConnection,
        changes: &[&(usize, Change)],
    ) -> Result<(), sqlx::Error> {
        if self.envelope {
            let rows: Vec<&EnvelopeRow> = changes
                .iter()
                .filter_map(|c| match &c.1 {
                    Change::Envelope(row) => Some(row),
                    _ => None,
                })
                .collect();
            sqlx::query(&self.insert)
                .bind(rows.iter().map(|r| r.topic.clone()).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.partition).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.offset).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.timestamp_ms).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.value.clone()).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.headers.clone()).collect::<Vec<_>>())
                .execute(&mut *conn)
                .await?;
            return Ok(());
        }
        let mut columns: Vec<Vec<Option<String>>> = vec![Vec::new(); self.width];
        let mut deleted: Vec<String> = Vec::new();
        for change in changes {
            match &change.1 {
                Change::Upsert(values) => {
                    for (column, value) in columns.iter_mut().zip(values) {
                        column.push(value.clone());
                    }
                }
                Change::Delete(key) => deleted.push(key.clone()),
                Change::Envelope(_) => {}
            }
        }
        if columns.first().is_some_and(|c| !c.is_empty()) {
            let mut query = sqlx::query(&self.insert);
            for column in columns {
                query = query.bind(column);
            }
            query.execute(&mut *conn).await?;
        }
        if let (Some(delete), false) = (&self.delete, deleted.is_empty()) {
            sqlx::query(delete)
                .bind(deleted)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }
}
