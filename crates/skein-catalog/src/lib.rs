//! The catalog: the control plane's durable state, over sqlx, on PostgreSQL (production) or
//! SQLite (the embedded default of `skein dev`). It is the only crate with SQL.
//!
//! - [`Catalog`] connects to either backend through sqlx's `Any` driver and applies the
//!   migrations of `migrations/postgres` or `migrations/sqlite` (embedded at build time);
//! - `tenants.rs`, `principals.rs`, `api_keys.rs`, `scram.rs`, `acls.rs`, `quotas.rs`,
//!   `topics.rs` and `sinks.rs` hold one table family each; `cluster.rs` the brokers, producer-id blocks and leases;
//! - `names.rs` checks names before they reach the database;
//! - [`CatalogError`] says what went wrong, with unique-key violations as
//!   [`CatalogError::AlreadyExists`].
//!
//! Every integer column is 64-bit and every identifier a UUID as text, so both backends
//! return the same values for the same rows.

mod acls;
mod api_keys;
mod cluster;
mod error;
mod idempotency;
mod names;
mod partition_change;
mod principals;
mod quotas;
mod scram;
mod sinks;
mod tenants;
mod topics;

use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::AnyPool;

pub use acls::AclRecord;
pub use api_keys::{ApiKey, KeyRefusal, NewApiKey};
pub use cluster::{BrokerRegistration, Lease, NewBroker};
pub use error::{CatalogError, Result};
pub use idempotency::{IdempotencyClaim, IDEMPOTENCY_KEY_TTL_MS};
pub use names::{
    is_internal_topic, refuse_internal_topic, validate_tenant_name, validate_tenant_topic_name,
    validate_topic_name, CONSUMER_OFFSETS, INTERNAL_TOPICS, MAX_QUALIFIED_TOPIC_NAME,
    TRANSACTION_STATE,
};
pub use principals::{Principal, PrincipalKind};
pub use quotas::{Quota, QuotaRecord};
pub use scram::ScramCredentialInfo;
pub use sinks::{SinkPartitionReport, SinkRecord};
pub use tenants::Tenant;
pub use topics::{NewTopic, Partition, PartitionUpdate, Topic};

static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/postgres");
static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/sqlite");

/// Which database holds the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    /// The backend a URL names: `postgres://` / `postgresql://` or `sqlite:`.
    pub fn of_url(url: &str) -> Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres)
        } else if url.starts_with("sqlite:") {
            Ok(Self::Sqlite)
        } else {
            Err(CatalogError::Invalid {
                what: "database URL",
                reason: "must start with postgres://, postgresql:// or sqlite:".to_owned(),
            })
        }
    }
}

/// A connection pool to the catalog's database.
#[derive(Debug, Clone)]
pub struct Catalog {
    pool: AnyPool,
    backend: Backend,
}

impl Catalog {
    /// Connects to `url` (`postgres://...`, or `sqlite:path`, a file created when missing
    /// unless the URL says otherwise with `mode=`); does not migrate.
    pub async fn connect(url: &str) -> Result<Self> {
        let backend = Backend::of_url(url)?;
        sqlx::any::install_default_drivers();
        let url = match backend {
            Backend::Sqlite if !url.contains("mode=") => {
                let separator = if url.contains('?') { '&' } else { '?' };
                format!("{url}{separator}mode=rwc")
            }
            _ => url.to_owned(),
        };
        let options = AnyConnectOptions::from_str(&url).map_err(CatalogError::Database)?;
        let pool = AnyPoolOptions::new()
            // SQLite allows one writer; more connections only wait on its lock.
            .max_connections(match backend {
                Backend::Postgres => 10,
                Backend::Sqlite => 1,
            })
            .connect_with(options)
            .await
            .map_err(CatalogError::Database)?;
        Ok(Self { pool, backend })
    }

    /// Connects and applies every pending migration.
    pub async fn open(url: &str) -> Result<Self> {
        let catalog = Self::connect(url).await?;
        catalog.migrate().await?;
        Ok(catalog)
    }

    /// Applies the migrations not yet applied (recorded in `_sqlx_migrations`); returns how
    /// many the schema has in all.
    pub async fn migrate(&self) -> Result<usize> {
        let migrator = match self.backend {
            Backend::Postgres => &POSTGRES_MIGRATIONS,
            Backend::Sqlite => &SQLITE_MIGRATIONS,
        };
        migrator
            .run(&self.pool)
            .await
            .map_err(CatalogError::Migrate)?;
        Ok(migrator.iter().count())
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Whether the database answers, and the schema is migrated (readiness).
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT COUNT(*) FROM _sqlx_migrations")
            .execute(&self.pool)
            .await
            .map_err(CatalogError::Database)?;
        Ok(())
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `NotFound` when a change by key touched no row.
pub(crate) fn found(
    result: sqlx::any::AnyQueryResult,
    what: &'static str,
    name: &str,
) -> Result<()> {
    if result.rows_affected() == 0 {
        return Err(CatalogError::NotFound {
            what,
            name: name.to_owned(),
        });
    }
    Ok(())
}

pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
