//! Tenants: the unit of isolation. Everything else in the catalog belongs to one.

use sqlx::Row;

use crate::names::validate_tenant_name;
use crate::{found, new_id, now_ms, Catalog, CatalogError, Result};

/// A tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    pub id: String,
    pub name: String,
    pub created_at: i64,
}

fn tenant(row: &sqlx::any::AnyRow) -> Result<Tenant> {
    Ok(Tenant {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        created_at: row.try_get("created_at")?,
    })
}

impl Catalog {
    /// Creates a tenant; its name must be unused.
    pub async fn create_tenant(&self, name: &str) -> Result<Tenant> {
        validate_tenant_name(name)?;
        let created = Tenant {
            id: new_id(),
            name: name.to_owned(),
            created_at: now_ms(),
        };
        sqlx::query("INSERT INTO tenants (id, name, created_at) VALUES ($1, $2, $3)")
            .bind(&created.id)
            .bind(&created.name)
            .bind(created.created_at)
            .execute(&self.pool)
            .await
            .map_err(CatalogError::on_insert("tenant", name))?;
        Ok(created)
    }

    /// The tenant called `name`.
    pub async fn tenant_by_name(&self, name: &str) -> Result<Tenant> {
        let row = sqlx::query("SELECT id, name, created_at FROM tenants WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        match row {
            Some(row) => tenant(&row),
            None => Err(CatalogError::NotFound {
                what: "tenant",
                name: name.to_owned(),
            }),
        }
    }

    /// Up to `limit` tenants in name order, after `after` (a page's last name) when given.
    pub async fn tenants(&self, after: Option<&str>, limit: u32) -> Result<Vec<Tenant>> {
        let rows = sqlx::query(
            "SELECT id, name, created_at FROM tenants WHERE name > $1 ORDER BY name LIMIT $2",
        )
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(tenant).collect()
    }

    /// Deletes a tenant and everything it owns.
    pub async fn delete_tenant(&self, name: &str) -> Result<()> {
        let deleted = sqlx::query("DELETE FROM tenants WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await?;
        found(deleted, "tenant", name)
    }
}
