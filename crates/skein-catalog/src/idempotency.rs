//! Idempotency keys: a request a gateway wrote under a client's `Idempotency-Key`, the
//! producer id its records were written with, and its outcome once known. The first claim of
//! a key stores the producer id it was given; every later claim answers the stored row, so
//! all attempts of one request write with one producer id and the brokers keep only the
//! first write of each batch.

use sqlx::Row;

use crate::{now_ms, Catalog, Result};

/// How long a key is remembered.
pub const IDEMPOTENCY_KEY_TTL_MS: i64 = 24 * 3600 * 1000;

/// A claimed key, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyClaim {
    pub producer_id: i64,
    /// The hash of the request first sent with this key.
    pub request_hash: String,
    /// The recorded outcome; `None` while the request has not completed.
    pub outcome: Option<String>,
    /// When the key was first claimed (milliseconds since the epoch): every attempt gives
    /// records without a timestamp this one.
    pub created_at: i64,
}

impl Catalog {
    /// Claims `key` for a request with `request_hash`, offering `producer_id` for it;
    /// answers the stored claim (which keeps the first claim's producer id and hash).
    pub async fn claim_idempotency_key(
        &self,
        tenant: &str,
        principal: &str,
        key: &str,
        request_hash: &str,
        producer_id: i64,
    ) -> Result<IdempotencyClaim> {
        let now = now_ms();
        sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
            .bind(now - IDEMPOTENCY_KEY_TTL_MS)
            .execute(&self.pool)
            .await?;
        sqlx::query(
            "INSERT INTO idempotency_keys \
               (tenant, principal, key, request_hash, producer_id, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(tenant)
        .bind(principal)
        .bind(key)
        .bind(request_hash)
        .bind(producer_id)
        .bind(now)
        .execute(&self.pool)
        .await?;
        let row = sqlx::query(
            "SELECT producer_id, request_hash, outcome, created_at FROM idempotency_keys \
             WHERE tenant = $1 AND principal = $2 AND key = $3",
        )
        .bind(tenant)
        .bind(principal)
        .bind(key)
        .fetch_one(&self.pool)
        .await?;
        Ok(IdempotencyClaim {
            producer_id: row.try_get("producer_id")?,
            request_hash: row.try_get("request_hash")?,
            outcome: row.try_get("outcome")?,
            created_at: row.try_get("created_at")?,
        })
    }

    /// Records the outcome of a claimed key's request; the first recorded outcome stays.
    pub async fn complete_idempotency_key(
        &self,
        tenant: &str,
        principal: &str,
        key: &str,
        outcome: &str,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE idempotency_keys SET outcome = $1 \
             WHERE tenant = $2 AND principal = $3 AND key = $4 AND outcome IS NULL",
        )
        .bind(outcome)
        .bind(tenant)
        .bind(principal)
        .bind(key)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
