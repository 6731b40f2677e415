//! Quotas per tenant (principal `None`) and per principal; an absent limit is unlimited.

use sqlx::Row;

use crate::{found, Catalog, CatalogError, Result};

/// Limits; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    pub produce_bytes_per_sec: Option<i64>,
    pub fetch_bytes_per_sec: Option<i64>,
    pub requests_per_sec: Option<i64>,
    pub partitions: Option<i64>,
    /// Kafka's request-time quota: percent of one request-handling thread's time (100 is
    /// one thread's whole time).
    pub request_percentage: Option<i64>,
    /// The most bytes the tenant's logs may take on one broker's volume (each segment file
    /// charged a file system block beyond its bytes). Tenant-wide only.
    pub storage_bytes: Option<i64>,
}

/// A stored quota and whom it limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaRecord {
    pub tenant_id: String,
    /// `None`: the whole tenant.
    pub principal_id: Option<String>,
    pub quota: Quota,
}

impl Quota {
    fn validate(&self) -> Result<()> {
        for (name, value) in [
            ("produce_bytes_per_sec", self.produce_bytes_per_sec),
            ("fetch_bytes_per_sec", self.fetch_bytes_per_sec),
            ("requests_per_sec", self.requests_per_sec),
            ("partitions", self.partitions),
            ("request_percentage", self.request_percentage),
            ("storage_bytes", self.storage_bytes),
        ] {
            if value.is_some_and(|v| v <= 0) {
                return Err(CatalogError::Invalid {
                    what: "quota",
                    reason: format!("{name} must be positive (leave it out for no limit)"),
                });
            }
        }
        Ok(())
    }
}

impl Catalog {
    /// Sets (replaces) the quota of a tenant or of one of its principals.
    pub async fn set_quota(
        &self,
        tenant_id: &str,
        principal_id: Option<&str>,
        quota: &Quota,
    ) -> Result<()> {
        quota.validate()?;
        sqlx::query(
            "INSERT INTO quotas (tenant_id, principal_id, produce_bytes_per_sec, \
               fetch_bytes_per_sec, requests_per_sec, partitions, request_percentage, \
               storage_bytes) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (tenant_id, principal_id) DO UPDATE SET \
               produce_bytes_per_sec = excluded.produce_bytes_per_sec, \
               fetch_bytes_per_sec = excluded.fetch_bytes_per_sec, \
               requests_per_sec = excluded.requests_per_sec, \
               partitions = excluded.partitions, \
               request_percentage = excluded.request_percentage, \
               storage_bytes = excluded.storage_bytes",
        )
        .bind(tenant_id)
        .bind(principal_id.unwrap_or(""))
        .bind(quota.produce_bytes_per_sec)
        .bind(quota.fetch_bytes_per_sec)
        .bind(quota.requests_per_sec)
        .bind(quota.partitions)
        .bind(quota.request_percentage)
        .bind(quota.storage_bytes)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A tenant's quotas, the tenant-wide one first.
    pub async fn quotas(&self, tenant_id: &str) -> Result<Vec<QuotaRecord>> {
        let rows = sqlx::query(
            "SELECT principal_id, produce_bytes_per_sec, fetch_bytes_per_sec, requests_per_sec, \
               partitions, request_percentage, storage_bytes FROM quotas WHERE tenant_id = $1 \
             ORDER BY principal_id",
        )
        .bind(tenant_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let principal: String = row.try_get("principal_id")?;
                Ok(QuotaRecord {
                    tenant_id: tenant_id.to_owned(),
                    principal_id: (!principal.is_empty()).then_some(principal),
                    quota: Quota {
                        produce_bytes_per_sec: row.try_get("produce_bytes_per_sec")?,
                        fetch_bytes_per_sec: row.try_get("fetch_bytes_per_sec")?,
                        requests_per_sec: row.try_get("requests_per_sec")?,
                        partitions: row.try_get("partitions")?,
                        request_percentage: row.try_get("request_percentage")?,
                        storage_bytes: row.try_get("storage_bytes")?,
                    },
                })
            })
            .collect()
    }

    /// Every quota, with its tenant's name and its principal's name (`None`: tenant-wide).
    pub async fn all_quotas(&self) -> Result<Vec<(String, Option<String>, Quota)>> {
        let rows = sqlx::query(
            "SELECT t.name AS tenant_name, p.name AS principal_name, q.produce_bytes_per_sec, \
               q.fetch_bytes_per_sec, q.requests_per_sec, q.partitions, \
               q.request_percentage, q.storage_bytes \
             FROM quotas q JOIN tenants t ON t.id = q.tenant_id \
             LEFT JOIN principals p ON p.id = q.principal_id \
             ORDER BY t.name, q.principal_id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("tenant_name")?,
                    row.try_get("principal_name")?,
                    Quota {
                        produce_bytes_per_sec: row.try_get("produce_bytes_per_sec")?,
                        fetch_bytes_per_sec: row.try_get("fetch_bytes_per_sec")?,
                        requests_per_sec: row.try_get("requests_per_sec")?,
                        partitions: row.try_get("partitions")?,
                        request_percentage: row.try_get("request_percentage")?,
                        storage_bytes: row.try_get("storage_bytes")?,
                    },
                ))
            })
            .collect()
    }

    /// Removes a quota (the tenant's, or a principal's).
    pub async fn delete_quota(&self, tenant_id: &str, principal_id: Option<&str>) -> Result<()> {
        let deleted = sqlx::query("DELETE FROM quotas WHERE tenant_id = $1 AND principal_id = $2")
            .bind(tenant_id)
            .bind(principal_id.unwrap_or(""))
            .execute(&self.pool)
            .await?;
        found(deleted, "quota", principal_id.unwrap_or("(tenant)"))
    }
}
