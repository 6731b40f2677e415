//! Sinks of a tenant, the control-plane replicas that run their workers, and what each
//! partition's worker last reported.

use sqlx::Row;

use crate::{found, new_id, now_ms, Catalog, CatalogError, Result};

/// A stored sink.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkRecord {
    pub id: String,
    pub tenant_id: String,
    pub name: String,
    /// The definition as JSON.
    pub spec: String,
    /// The target database's URL, sealed.
    pub target_sealed: String,
    pub paused: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What a partition's worker reported.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkPartitionReport {
    pub topic: String,
    pub partition: i64,
    pub worker: String,
    pub next_offset: Option<i64>,
    pub log_end_offset: Option<i64>,
    pub rows_applied: i64,
    pub rows_per_sec: f64,
    pub dead_lettered: i64,
    pub last_error: Option<String>,
    pub reported_at: i64,
}

fn sink(row: &sqlx::any::AnyRow) -> Result<SinkRecord> {
    let state: String = row.try_get("state")?;
    Ok(SinkRecord {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        name: row.try_get("name")?,
        spec: row.try_get("spec")?,
        target_sealed: row.try_get("target_sealed")?,
        paused: state == "paused",
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

const COLUMNS: &str = "id, tenant_id, name, spec, target_sealed, state, created_at, updated_at";

impl Catalog {
    /// A new id for a sink about to be created (its sealed secret is bound to it).
    pub fn new_sink_id() -> String {
        new_id()
    }

    /// Stores a sink, running; its name must be unused in the tenant.
    pub async fn create_sink(
        &self,
        id: &str,
        tenant_id: &str,
        name: &str,
        spec: &str,
        target_sealed: &str,
    ) -> Result<SinkRecord> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO sinks (id, tenant_id, name, spec, target_sealed, state, created_at, \
               updated_at) VALUES ($1, $2, $3, $4, $5, 'running', $6, $6)",
        )
        .bind(id)
        .bind(tenant_id)
        .bind(name)
        .bind(spec)
        .bind(target_sealed)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(CatalogError::on_insert("sink", name))?;
        self.sink(tenant_id, name).await
    }

    /// Replaces a sink's definition and sealed target; its `updated_at` moves, which tells
    /// the runners to start its workers over.
    pub async fn update_sink(
        &self,
        tenant_id: &str,
        name: &str,
        spec: &str,
        target_sealed: &str,
    ) -> Result<SinkRecord> {
        let changed = sqlx::query(
            "UPDATE sinks SET spec = $3, target_sealed = $4, updated_at = $5 \
             WHERE tenant_id = $1 AND name = $2",
        )
        .bind(tenant_id)
        .bind(name)
        .bind(spec)
        .bind(target_sealed)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        if changed.rows_affected() == 0 {
            return Err(CatalogError::NotFound {
                what: "sink",
                name: name.to_owned(),
            });
        }
        self.sink(tenant_id, name).await
    }

    /// A tenant's sink by name.
    pub async fn sink(&self, tenant_id: &str, name: &str) -> Result<SinkRecord> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM sinks WHERE tenant_id = $1 AND name = $2"
        ))
        .bind(tenant_id)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => sink(&row),
            None => Err(CatalogError::NotFound {
                what: "sink",
                name: name.to_owned(),
            }),
        }
    }

    /// A tenant's sinks in name order.
    pub async fn sinks(&self, tenant_id: &str) -> Result<Vec<SinkRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM sinks WHERE tenant_id = $1 ORDER BY name"
        ))
        .bind(tenant_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(sink).collect()
    }

    /// Every sink of every tenant, with its tenant's name.
    pub async fn all_sinks(&self) -> Result<Vec<(String, SinkRecord)>> {
        let rows = sqlx::query(
            "SELECT s.id, s.tenant_id, s.name, s.spec, s.target_sealed, s.state, s.created_at, \
               s.updated_at, t.name AS tenant_name \
             FROM sinks s JOIN tenants t ON t.id = s.tenant_id ORDER BY s.id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("tenant_name")?, sink(row)?)))
            .collect()
    }

    /// Pauses or resumes a sink.
    pub async fn set_sink_paused(&self, tenant_id: &str, name: &str, paused: bool) -> Result<()> {
        let changed = sqlx::query(
            "UPDATE sinks SET state = $3, updated_at = $4 WHERE tenant_id = $1 AND name = $2",
        )
        .bind(tenant_id)
        .bind(name)
        .bind(if paused { "paused" } else { "running" })
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        found(changed, "sink", name)
    }

    /// Deletes a sink (its workers stop at their next look at the catalog).
    pub async fn delete_sink(&self, tenant_id: &str, name: &str) -> Result<()> {
        let deleted = sqlx::query("DELETE FROM sinks WHERE tenant_id = $1 AND name = $2")
            .bind(tenant_id)
            .bind(name)
            .execute(&self.pool)
            .await?;
        found(deleted, "sink", name)
    }

    /// Records that the sink-running replica `worker` is alive.
    pub async fn sink_worker_heartbeat(&self, worker: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO sink_workers (worker, heartbeat_at) VALUES ($1, $2) \
             ON CONFLICT (worker) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
        )
        .bind(worker)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The sink-running replicas that beat since `since` (ms), in name order; older ones are
    /// forgotten.
    pub async fn live_sink_workers(&self, since: i64) -> Result<Vec<String>> {
        sqlx::query("DELETE FROM sink_workers WHERE heartbeat_at < $1")
            .bind(since - 60_000)
            .execute(&self.pool)
            .await?;
        let rows =
            sqlx::query("SELECT worker FROM sink_workers WHERE heartbeat_at >= $1 ORDER BY worker")
                .bind(since)
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(|r| Ok(r.try_get("worker")?)).collect()
    }

    /// Stores what a partition's worker reports.
    pub async fn report_sink_partition(
        &self,
        sink_id: &str,
        report: &SinkPartitionReport,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO sink_partitions (sink_id, topic, partition, worker, next_offset, \
               log_end_offset, rows_applied, rows_per_sec, dead_lettered, last_error, reported_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (sink_id, topic, partition) DO UPDATE SET worker = excluded.worker, \
               next_offset = excluded.next_offset, log_end_offset = excluded.log_end_offset, \
               rows_applied = excluded.rows_applied, rows_per_sec = excluded.rows_per_sec, \
               dead_lettered = excluded.dead_lettered, last_error = excluded.last_error, \
               reported_at = excluded.reported_at",
        )
        .bind(sink_id)
        .bind(&report.topic)
        .bind(report.partition)
        .bind(&report.worker)
        .bind(report.next_offset)
        .bind(report.log_end_offset)
        .bind(report.rows_applied)
        .bind(report.rows_per_sec)
        .bind(report.dead_lettered)
        .bind(report.last_error.as_deref())
        .bind(report.reported_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// What each partition's worker of a sink last reported.
    pub async fn sink_partitions(&self, sink_id: &str) -> Result<Vec<SinkPartitionReport>> {
        let rows = sqlx::query(
            "SELECT topic, partition, worker, next_offset, log_end_offset, rows_applied, \
               rows_per_sec, dead_lettered, last_error, reported_at \
             FROM sink_partitions WHERE sink_id = $1 ORDER BY topic, partition",
        )
        .bind(sink_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(SinkPartitionReport {
                    topic: row.try_get("topic")?,
                    partition: row.try_get("partition")?,
                    worker: row.try_get("worker")?,
                    next_offset: row.try_get("next_offset")?,
                    log_end_offset: row.try_get("log_end_offset")?,
                    rows_applied: row.try_get("rows_applied")?,
                    rows_per_sec: row.try_get("rows_per_sec")?,
                    dead_lettered: row.try_get("dead_lettered")?,
                    last_error: row.try_get("last_error")?,
                    reported_at: row.try_get("reported_at")?,
                })
            })
            .collect()
    }
}
