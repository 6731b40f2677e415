//! SCRAM credentials: one per principal and mechanism, kept as the salt, the iteration
//! count and the stored and server keys; never the password.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use skein_scram::{Credential, Mechanism};
use sqlx::Row;

use crate::{now_ms, Catalog, CatalogError, Result};

/// What may be shown of a credential: its mechanism and iteration count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScramCredentialInfo {
    pub mechanism: Mechanism,
    pub iterations: u32,
    pub updated_at: i64,
}

fn corrupt(reason: impl std::fmt::Display) -> CatalogError {
    CatalogError::Corrupt {
        what: "SCRAM credential",
        reason: reason.to_string(),
    }
}

fn mechanism(row: &sqlx::any::AnyRow) -> Result<Mechanism> {
    let name: String = row.try_get("mechanism")?;
    Mechanism::from_name(&name).ok_or_else(|| corrupt(name))
}

fn iterations(row: &sqlx::any::AnyRow) -> Result<u32> {
    let iterations: i64 = row.try_get("iterations")?;
    u32::try_from(iterations).map_err(corrupt)
}

fn bytes(row: &sqlx::any::AnyRow, column: &str) -> Result<Vec<u8>> {
    let text: String = row.try_get(column)?;
    BASE64.decode(text).map_err(corrupt)
}

fn credential(row: &sqlx::any::AnyRow) -> Result<Credential> {
    Credential::from_parts(
        mechanism(row)?,
        bytes(row, "salt")?,
        iterations(row)?,
        bytes(row, "stored_key")?,
        bytes(row, "server_key")?,
    )
    .map_err(corrupt)
}

impl Catalog {
    /// Sets a principal's credential for its mechanism, replacing the one it had.
    pub async fn put_scram_credential(
        &self,
        principal_id: &str,
        credential: &Credential,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO scram_credentials \
               (principal_id, mechanism, salt, iterations, stored_key, server_key, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (principal_id, mechanism) DO UPDATE SET salt = excluded.salt, \
               iterations = excluded.iterations, stored_key = excluded.stored_key, \
               server_key = excluded.server_key, updated_at = excluded.updated_at",
        )
        .bind(principal_id)
        .bind(credential.mechanism.name())
        .bind(BASE64.encode(&credential.salt))
        .bind(i64::from(credential.iterations))
        .bind(BASE64.encode(&credential.stored_key))
        .bind(BASE64.encode(&credential.server_key))
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(|e| match &e {
            sqlx::Error::Database(db) if db.is_foreign_key_violation() => CatalogError::NotFound {
                what: "principal",
                name: principal_id.to_owned(),
            },
            _ => CatalogError::Database(e),
        })?;
        Ok(())
    }

    /// A principal's credentials, by mechanism.
    pub async fn scram_credentials(&self, principal_id: &str) -> Result<Vec<ScramCredentialInfo>> {
        let rows = sqlx::query(
            "SELECT mechanism, iterations, updated_at FROM scram_credentials \
             WHERE principal_id = $1 ORDER BY mechanism",
        )
        .bind(principal_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(ScramCredentialInfo {
                    mechanism: mechanism(row)?,
                    iterations: iterations(row)?,
                    updated_at: row.try_get("updated_at")?,
                })
            })
            .collect()
    }

    /// The credential a user of `tenant` (by name) authenticates with over `mechanism`, and
    /// when it was set.
    pub async fn scram_credential(
        &self,
        tenant: &str,
        user: &str,
        mechanism: Mechanism,
    ) -> Result<Option<(Credential, i64)>> {
        let row = sqlx::query(
            "SELECT c.mechanism, c.salt, c.iterations, c.stored_key, c.server_key, \
               c.updated_at \
             FROM scram_credentials c JOIN principals p ON p.id = c.principal_id \
             JOIN tenants t ON t.id = p.tenant_id \
             WHERE t.name = $1 AND p.name = $2 AND c.mechanism = $3",
        )
        .bind(tenant)
        .bind(user)
        .bind(mechanism.name())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref()
            .map(|row| Ok((credential(row)?, row.try_get("updated_at")?)))
            .transpose()
    }

    /// Removes a principal's credential for `mechanism`.
    pub async fn delete_scram_credential(
        &self,
        principal_id: &str,
        mechanism: Mechanism,
    ) -> Result<()> {
        let deleted =
            sqlx::query("DELETE FROM scram_credentials WHERE principal_id = $1 AND mechanism = $2")
                .bind(principal_id)
                .bind(mechanism.name())
                .execute(&self.pool)
                .await?;
        crate::found(deleted, "SCRAM credential", mechanism.name())
    }

    /// Every credential with its tenant and user, by tenant, user and mechanism: brokers
    /// close connections whose credential was deleted or replaced, and describe them.
    pub async fn all_scram_credentials(
        &self,
    ) -> Result<Vec<(String, String, ScramCredentialInfo)>> {
        let rows = sqlx::query(
            "SELECT t.name AS tenant_name, p.name AS user_name, c.mechanism, c.iterations, \
               c.updated_at \
             FROM scram_credentials c JOIN principals p ON p.id = c.principal_id \
             JOIN tenants t ON t.id = p.tenant_id ORDER BY t.name, p.name, c.mechanism",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("tenant_name")?,
                    row.try_get("user_name")?,
                    ScramCredentialInfo {
                        mechanism: mechanism(row)?,
                        iterations: iterations(row)?,
                        updated_at: row.try_get("updated_at")?,
                    },
                ))
            })
            .collect()
    }
}
