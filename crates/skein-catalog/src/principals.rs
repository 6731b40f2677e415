//! Principals: the users and service accounts of a tenant.

use std::fmt;
use std::str::FromStr;

use sqlx::Row;

use crate::{found, new_id, now_ms, Catalog, CatalogError, Result};

/// Who a principal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrincipalKind {
    User,
    ServiceAccount,
}

impl PrincipalKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::ServiceAccount => "service_account",
        }
    }
}

impl fmt::Display for PrincipalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PrincipalKind {
    type Err = CatalogError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "user" => Ok(Self::User),
            "service_account" => Ok(Self::ServiceAccount),
            other => Err(CatalogError::Invalid {
                what: "principal kind",
                reason: format!("{other:?} is not user or service_account"),
            }),
        }
    }
}

/// A user or service account of a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub id: String,
    pub tenant_id: String,
    pub kind: PrincipalKind,
    pub name: String,
    pub created_at: i64,
}

fn principal(row: &sqlx::any::AnyRow) -> Result<Principal> {
    let kind: String = row.try_get("kind")?;
    Ok(Principal {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        kind: kind.parse().map_err(|_| CatalogError::Corrupt {
            what: "principal kind",
            reason: kind,
        })?,
        name: row.try_get("name")?,
        created_at: row.try_get("created_at")?,
    })
}

/// Principal names: 1-255 characters, none of them a control character or ':' (which
/// separates a Kafka principal's type from its name).
fn validate_principal_name(name: &str) -> Result<()> {
    if name.is_empty() || name.chars().count() > 255 {
        return Err(CatalogError::Invalid {
            what: "principal name",
            reason: format!("{name:?} must be 1 to 255 characters long"),
        });
    }
    if let Some(c) = name.chars().find(|c| c.is_control() || *c == ':') {
        return Err(CatalogError::Invalid {
            what: "principal name",
            reason: format!("{name:?} contains {c:?}"),
        });
    }
    Ok(())
}

impl Catalog {
    /// Adds a principal to a tenant; its name must be unused in that tenant.
    pub async fn create_principal(
        &self,
        tenant_id: &str,
        kind: PrincipalKind,
        name: &str,
    ) -> Result<Principal> {
        validate_principal_name(name)?;
        let created = Principal {
            id: new_id(),
            tenant_id: tenant_id.to_owned(),
            kind,
            name: name.to_owned(),
            created_at: now_ms(),
        };
        sqlx::query(
            "INSERT INTO principals (id, tenant_id, kind, name, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&created.id)
        .bind(&created.tenant_id)
        .bind(kind.as_str())
        .bind(&created.name)
        .bind(created.created_at)
        .execute(&self.pool)
        .await
        .map_err(CatalogError::on_insert("principal", name))?;
        Ok(created)
    }

    /// A tenant's principal by name.
    pub async fn principal(&self, tenant_id: &str, name: &str) -> Result<Principal> {
        let row = sqlx::query(
            "SELECT id, tenant_id, kind, name, created_at FROM principals \
             WHERE tenant_id = $1 AND name = $2",
        )
        .bind(tenant_id)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => principal(&row),
            None => Err(CatalogError::NotFound {
                what: "principal",
                name: name.to_owned(),
            }),
        }
    }

    /// A tenant's principals in name order.
    pub async fn principals(&self, tenant_id: &str) -> Result<Vec<Principal>> {
        self.principals_page(tenant_id, None, u32::MAX).await
    }

    /// Up to `limit` of a tenant's principals in name order, after `after` when given.
    pub async fn principals_page(
        &self,
        tenant_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Principal>> {
        let rows = sqlx::query(
            "SELECT id, tenant_id, kind, name, created_at FROM principals \
             WHERE tenant_id = $1 AND name > $2 ORDER BY name LIMIT $3",
        )
        .bind(tenant_id)
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(principal).collect()
    }

    /// Deletes a tenant's principal (and its API keys).
    pub async fn delete_principal(&self, tenant_id: &str, name: &str) -> Result<()> {
        let deleted = sqlx::query("DELETE FROM principals WHERE tenant_id = $1 AND name = $2")
            .bind(tenant_id)
            .bind(name)
            .execute(&self.pool)
            .await?;
        found(deleted, "principal", name)
    }
}
