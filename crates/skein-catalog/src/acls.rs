//! ACL bindings per tenant, stored by Kafka's upper-case names and read back as
//! [`skein_auth::AclBinding`]s; decisions are `skein_auth::authorize`'s, never SQL's.

use skein_auth::{AclBinding, AclBindingFilter};
use sqlx::Row;

use crate::{new_id, Catalog, CatalogError, Result};

/// A stored binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclRecord {
    pub id: String,
    pub binding: AclBinding,
}

fn corrupt(column: &'static str, value: String) -> CatalogError {
    CatalogError::Corrupt {
        what: column,
        reason: value,
    }
}

fn record(row: &sqlx::any::AnyRow) -> Result<AclRecord> {
    let text = |column: &'static str| -> Result<String> { Ok(row.try_get(column)?) };
    let parse =
        |column: &'static str| -> Result<(String, &'static str)> { Ok((text(column)?, column)) };
    let (principal, c) = parse("principal")?;
    let principal = principal.parse().map_err(|_| corrupt(c, principal))?;
    let (resource_type, c) = parse("resource_type")?;
    let resource_type = resource_type
        .parse()
        .map_err(|_| corrupt(c, resource_type))?;
    let (pattern_type, c) = parse("pattern_type")?;
    let pattern_type = pattern_type.parse().map_err(|_| corrupt(c, pattern_type))?;
    let (operation, c) = parse("operation")?;
    let operation = operation.parse().map_err(|_| corrupt(c, operation))?;
    let (permission, c) = parse("permission")?;
    let permission = permission.parse().map_err(|_| corrupt(c, permission))?;
    Ok(AclRecord {
        id: text("id")?,
        binding: AclBinding {
            principal,
            host: text("host")?,
            resource_type,
            resource_name: text("resource_name")?,
            pattern_type,
            operation,
            permission,
        },
    })
}

impl Catalog {
    /// Stores a binding for a tenant, after [`AclBinding::validate`]; storing one that exists
    /// already changes nothing (as Kafka's CreateAcls). Returns the stored record.
    pub async fn create_acl(&self, tenant_id: &str, binding: &AclBinding) -> Result<AclRecord> {
        binding.validate().map_err(|e| CatalogError::Invalid {
            what: "ACL binding",
            reason: e.to_string(),
        })?;
        // One statement: a binding that already exists is left as it is (the no-op update
        // only makes RETURNING answer the stored row, with its first id).
        let row = sqlx::query(
            "INSERT INTO acls (id, tenant_id, principal, host, resource_type, resource_name, \
               pattern_type, operation, permission) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (tenant_id, principal, host, resource_type, resource_name, \
               pattern_type, operation, permission) DO UPDATE SET id = acls.id \
             RETURNING id, principal, host, resource_type, resource_name, pattern_type, \
               operation, permission",
        )
        .bind(new_id())
        .bind(tenant_id)
        .bind(binding.principal.to_string())
        .bind(&binding.host)
        .bind(binding.resource_type.to_string())
        .bind(&binding.resource_name)
        .bind(binding.pattern_type.to_string())
        .bind(binding.operation.to_string())
        .bind(binding.permission.to_string())
        .fetch_one(&self.pool)
        .await?;
        record(&row)
    }

    /// Every tenant's bindings, with the tenant's name.
    pub async fn all_acls(&self) -> Result<Vec<(String, AclRecord)>> {
        let rows = sqlx::query(
            "SELECT a.id, a.principal, a.host, a.resource_type, a.resource_name, a.pattern_type, \
               a.operation, a.permission, t.name AS tenant_name \
             FROM acls a JOIN tenants t ON t.id = a.tenant_id \
             ORDER BY t.name, a.resource_type, a.resource_name, a.id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("tenant_name")?, record(row)?)))
            .collect()
    }

    /// A tenant's bindings that `filter` selects.
    pub async fn acls(&self, tenant_id: &str, filter: &AclBindingFilter) -> Result<Vec<AclRecord>> {
        let rows = sqlx::query(
            "SELECT id, principal, host, resource_type, resource_name, pattern_type, operation, \
               permission FROM acls WHERE tenant_id = $1 ORDER BY resource_type, resource_name, id",
        )
        .bind(tenant_id)
        .fetch_all(&self.pool)
        .await?;
        let mut selected = Vec::new();
        for row in &rows {
            let record = record(row)?;
            if filter.matches(&record.binding) {
                selected.push(record);
            }
        }
        Ok(selected)
    }

    /// Deletes a tenant's bindings that `filter` selects, in one transaction; returns them.
    pub async fn delete_acls(
        &self,
        tenant_id: &str,
        filter: &AclBindingFilter,
    ) -> Result<Vec<AclRecord>> {
        let selected = self.acls(tenant_id, filter).await?;
        let mut tx = self.pool.begin().await?;
        for record in &selected {
            sqlx::query("DELETE FROM acls WHERE id = $1")
                .bind(&record.id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(selected)
    }
}
