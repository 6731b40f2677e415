//! Cluster coordination state: broker registrations, producer-id blocks and leases.
//!
//! Each change is one conditional statement (or one transaction) so that concurrent control
//! plane replicas and brokers cannot interleave into an inconsistent state: a lease has one
//! holder, producer-id blocks never overlap, a broker's old incarnation cannot heartbeat.

use sqlx::Row;

use crate::{now_ms, Catalog, CatalogError, Result};

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// The tenant its Kafka listener serves; `None` serves every tenant.
    pub tenant: Option<String>,
    /// Every listener it advertises, `NAME://host:port,...`.
    pub advertised_listeners: Option<String>,
    /// Changes on every broker start; heartbeats must name the current one.
    pub incarnation: String,
    pub registered_at: i64,
    pub heartbeat_at: i64,
}

/// What a broker registers: where it is and whom it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewBroker<'a> {
    pub node_id: i32,
    /// Its inter-broker listener's address.
    pub host: &'a str,
    pub port: i32,
    pub rack: Option<&'a str>,
    /// The tenant its Kafka listener serves; `None` serves every tenant.
    pub tenant: Option<&'a str>,
    /// Every listener it advertises, `NAME://host:port,...`.
    pub advertised_listeners: Option<&'a str>,
}

/// A held lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub name: String,
    pub holder: String,
    /// Grows by one with every new holder: a fencing token for what the holder writes.
    pub epoch: i64,
    pub expires_at: i64,
}

fn registration(row: &sqlx::any::AnyRow) -> Result<BrokerRegistration> {
    let int = |column: &str| -> Result<i32> {
        let value: i64 = row.try_get(column)?;
        i32::try_from(value).map_err(|_| CatalogError::Corrupt {
            what: "broker registration",
            reason: format!("{column} = {value}"),
        })
    };
    Ok(BrokerRegistration {
        node_id: int("node_id")?,
        host: row.try_get("host")?,
        port: int("port")?,
        rack: row.try_get("rack")?,
        tenant: row.try_get("tenant")?,
        advertised_listeners: row.try_get("advertised_listeners")?,
        incarnation: row.try_get("incarnation")?,
        registered_at: row.try_get("registered_at")?,
        heartbeat_at: row.try_get("heartbeat_at")?,
    })
}

impl Catalog {
    /// Registers (or re-registers, after a restart) a broker under a new incarnation.
    pub async fn register_broker(
        &self,
        broker: &NewBroker<'_>,
        incarnation: &str,
    ) -> Result<BrokerRegistration> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO brokers (node_id, host, port, rack, tenant, advertised_listeners, \
               incarnation, registered_at, heartbeat_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) \
             ON CONFLICT (node_id) DO UPDATE SET host = excluded.host, port = excluded.port, \
               rack = excluded.rack, tenant = excluded.tenant, \
               advertised_listeners = excluded.advertised_listeners, \
               incarnation = excluded.incarnation, \
               registered_at = excluded.registered_at, heartbeat_at = excluded.heartbeat_at",
        )
        .bind(i64::from(broker.node_id))
        .bind(broker.host)
        .bind(i64::from(broker.port))
        .bind(broker.rack)
        .bind(broker.tenant)
        .bind(broker.advertised_listeners)
        .bind(incarnation)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(BrokerRegistration {
            node_id: broker.node_id,
            host: broker.host.to_owned(),
            port: broker.port,
            rack: broker.rack.map(str::to_owned),
            tenant: broker.tenant.map(str::to_owned),
            advertised_listeners: broker.advertised_listeners.map(str::to_owned),
            incarnation: incarnation.to_owned(),
            registered_at: now,
            heartbeat_at: now,
        })
    }

    /// Records a heartbeat; false if the broker is unknown or re-registered since.
    pub async fn broker_heartbeat(&self, node_id: i32, incarnation: &str) -> Result<bool> {
        let updated = sqlx::query(
            "UPDATE brokers SET heartbeat_at = $1 WHERE node_id = $2 AND incarnation = $3",
        )
        .bind(now_ms())
        .bind(i64::from(node_id))
        .bind(incarnation)
        .execute(&self.pool)
        .await?;
        Ok(updated.rows_affected() == 1)
    }

    /// The registration of node `node_id`, live or not; `None` if it never registered.
    pub async fn registered_broker(&self, node_id: i32) -> Result<Option<BrokerRegistration>> {
        let row = sqlx::query(
            "SELECT node_id, host, port, rack, tenant, advertised_listeners, incarnation, \
               registered_at, heartbeat_at FROM brokers WHERE node_id = $1",
        )
        .bind(i64::from(node_id))
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(registration).transpose()
    }

    /// Brokers that heartbeat at or after `since` (ms), by node id.
    pub async fn live_brokers(&self, since: i64) -> Result<Vec<BrokerRegistration>> {
        let rows = sqlx::query(
            "SELECT node_id, host, port, rack, tenant, advertised_listeners, incarnation, \
               registered_at, heartbeat_at FROM brokers WHERE heartbeat_at >= $1 ORDER BY node_id",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(registration).collect()
    }

    /// Allocates the next `size` producer ids to `node_id`; returns the first. Blocks never
    /// overlap: two allocations that race for the same start collide on the primary key, and
    /// the loser retries after it.
    pub async fn allocate_producer_ids(&self, node_id: i32, size: i32) -> Result<i64> {
        if size <= 0 {
            return Err(CatalogError::Invalid {
                what: "producer id block",
                reason: format!("size {size} must be positive"),
            });
        }
        for _ in 0..16 {
            let next: Option<i64> =
                sqlx::query("SELECT MAX(first_id + size) AS next FROM producer_id_blocks")
                    .fetch_one(&self.pool)
                    .await?
                    .try_get("next")?;
            let first = next.unwrap_or(0);
            let inserted = sqlx::query(
                "INSERT INTO producer_id_blocks (first_id, size, node_id, allocated_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .bind(first)
            .bind(i64::from(size))
            .bind(i64::from(node_id))
            .bind(now_ms())
            .execute(&self.pool)
            .await?;
            if inserted.rows_affected() == 1 {
                return Ok(first);
            }
        }
        Err(CatalogError::Conflict {
            what: "producer id blocks",
            expected: 0,
        })
    }

    /// Takes or renews the lease `name` for `holder` for `ttl_ms`. The holder renews its own
    /// unexpired lease (same epoch); anyone takes an expired or absent one (next epoch).
    /// `None`: someone else holds it.
    pub async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<Lease>> {
        let now = now_ms();
        let expires_at = now + ttl_ms;
        sqlx::query(
            "INSERT INTO leases (name, holder, epoch, expires_at) VALUES ($1, $2, 1, $3) \
             ON CONFLICT DO NOTHING",
        )
        .bind(name)
        .bind(holder)
        .bind(expires_at)
        .execute(&self.pool)
        .await?;
        let renewed = sqlx::query(
            "UPDATE leases SET expires_at = $1 WHERE name = $2 AND holder = $3 AND expires_at > $4",
        )
        .bind(expires_at)
        .bind(name)
        .bind(holder)
        .bind(now)
        .execute(&self.pool)
        .await?;
        if renewed.rows_affected() == 0 {
            sqlx::query(
                "UPDATE leases SET holder = $1, epoch = epoch + 1, expires_at = $2 \
                 WHERE name = $3 AND expires_at <= $4",
            )
            .bind(holder)
            .bind(expires_at)
            .bind(name)
            .bind(now)
            .execute(&self.pool)
            .await?;
        }
        let row = sqlx::query("SELECT holder, epoch, expires_at FROM leases WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        let lease = Lease {
            name: name.to_owned(),
            holder: row.try_get("holder")?,
            epoch: row.try_get("epoch")?,
            expires_at: row.try_get("expires_at")?,
        };
        Ok((lease.holder == holder && lease.expires_at == expires_at).then_some(lease))
    }

    /// Ends whatever holds the lease `name` now, whoever it is, so that the next
    /// [`Self::acquire_lease`] takes it at once (in the next epoch): for a caller that knows
    /// the holder is gone, as `skein dev` does of a previous run on its data directory.
    pub async fn expire_lease(&self, name: &str) -> Result<()> {
        sqlx::query("UPDATE leases SET expires_at = 0 WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Gives up a lease early so a standby can take it at once.
    pub async fn release_lease(&self, name: &str, holder: &str) -> Result<()> {
        sqlx::query("UPDATE leases SET expires_at = 0 WHERE name = $1 AND holder = $2")
            .bind(name)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
