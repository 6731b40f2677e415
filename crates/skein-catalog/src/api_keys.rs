//! API keys: an id and a secret shown once, stored only as an argon2 hash; revocable, with
//! the time each was last used.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use rand::RngCore;
use sqlx::Row;

use crate::{found, new_id, now_ms, Catalog, CatalogError, Result};

/// A new key: the only time its secret is known outside the caller's hands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApiKey {
    pub id: String,
    pub secret: String,
    pub principal_id: String,
}

/// A stored key, without its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub id: String,
    pub principal_id: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
    pub last_used_at: Option<i64>,
}

/// Why a key was refused. The caller answers every case the same way (401), so a guesser
/// learns nothing; the cases are for logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRefusal {
    Unknown,
    Revoked,
    WrongSecret,
}

fn api_key(row: &sqlx::any::AnyRow) -> Result<ApiKey> {
    Ok(ApiKey {
        id: row.try_get("id")?,
        principal_id: row.try_get("principal_id")?,
        created_at: row.try_get("created_at")?,
        revoked_at: row.try_get("revoked_at")?,
        last_used_at: row.try_get("last_used_at")?,
    })
}

/// Argon2 is slow by design; it runs on the blocking pool, not on an async worker.
async fn hash(secret: String) -> Result<String> {
    let hashed = tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut rand::rngs::OsRng);
        Argon2::default()
            .hash_password(secret.as_bytes(), &salt)
            .map(|h| h.to_string())
    })
    .await
    .map_err(|e| CatalogError::Invalid {
        what: "API key secret",
        reason: e.to_string(),
    })?;
    hashed.map_err(|e| CatalogError::Invalid {
        what: "API key secret",
        reason: e.to_string(),
    })
}

/// Whether `secret` matches the stored PHC-format hash, checked on the blocking pool.
async fn matches(secret: &str, stored: String) -> Result<bool> {
    let secret = secret.to_owned();
    tokio::task::spawn_blocking(move || {
        let parsed = PasswordHash::new(&stored).map_err(|e| CatalogError::Corrupt {
            what: "API key hash",
            reason: e.to_string(),
        })?;
        Ok(Argon2::default()
            .verify_password(secret.as_bytes(), &parsed)
            .is_ok())
    })
    .await
    .map_err(|e| CatalogError::Corrupt {
        what: "API key check",
        reason: e.to_string(),
    })?
}

impl Catalog {
    /// Issues a key for a principal; the returned secret is not stored anywhere.
    pub async fn create_api_key(&self, principal_id: &str) -> Result<NewApiKey> {
        let mut secret = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut secret);
        let secret: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let key = NewApiKey {
            id: new_id(),
            secret,
            principal_id: principal_id.to_owned(),
        };
        sqlx::query(
            "INSERT INTO api_keys (id, principal_id, secret_hash, created_at) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(&key.id)
        .bind(&key.principal_id)
        .bind(hash(key.secret.clone()).await?)
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
        Ok(key)
    }

    /// A principal's keys, oldest first.
    pub async fn api_keys(&self, principal_id: &str) -> Result<Vec<ApiKey>> {
        let rows = sqlx::query(
            "SELECT id, principal_id, created_at, revoked_at, last_used_at FROM api_keys \
             WHERE principal_id = $1 ORDER BY created_at, id",
        )
        .bind(principal_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(api_key).collect()
    }

    /// Every key in force with its tenant's name: (key id, tenant), in id order.
    pub async fn active_api_keys_with_tenants(&self) -> Result<Vec<(String, String)>> {
        let rows = sqlx::query(
            "SELECT k.id AS id, t.name AS tenant_name FROM api_keys k \
             JOIN principals p ON p.id = k.principal_id JOIN tenants t ON t.id = p.tenant_id \
             WHERE k.revoked_at IS NULL ORDER BY k.id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("id")?, row.try_get("tenant_name")?)))
            .collect()
    }

    /// Revokes a key; later checks refuse it. Revoking twice keeps the first time.
    pub async fn revoke_api_key(&self, id: &str) -> Result<()> {
        let updated =
            sqlx::query("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2")
                .bind(now_ms())
                .bind(id)
                .execute(&self.pool)
                .await?;
        found(updated, "API key", id)
    }

    /// Checks a presented key; on success records its use and returns the key's principal id.
    pub async fn verify_api_key(
        &self,
        id: &str,
        secret: &str,
    ) -> Result<Result<String, KeyRefusal>> {
        let row =
            sqlx::query("SELECT principal_id, secret_hash, revoked_at FROM api_keys WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        let Some(row) = row else {
            return Ok(Err(KeyRefusal::Unknown));
        };
        let revoked: Option<i64> = row.try_get("revoked_at")?;
        if revoked.is_some() {
            return Ok(Err(KeyRefusal::Revoked));
        }
        if !matches(secret, row.try_get("secret_hash")?).await? {
            return Ok(Err(KeyRefusal::WrongSecret));
        }
        sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
            .bind(now_ms())
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(Ok(row.try_get("principal_id")?))
    }

    /// Checks a presented key like [`Catalog::verify_api_key`]; on success answers the
    /// names of its tenant and principal.
    pub async fn authenticate_api_key(
        &self,
        id: &str,
        secret: &str,
    ) -> Result<Result<(String, String), KeyRefusal>> {
        let principal_id = match self.verify_api_key(id, secret).await? {
            Ok(principal_id) => principal_id,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let row = sqlx::query(
            "SELECT t.name AS tenant_name, p.name AS principal_name \
             FROM principals p JOIN tenants t ON t.id = p.tenant_id WHERE p.id = $1",
        )
        .bind(&principal_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(Err(KeyRefusal::Unknown));
        };
        Ok(Ok((
            row.try_get("tenant_name")?,
            row.try_get("principal_name")?,
        )))
    }
}
