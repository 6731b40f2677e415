//! What the catalog reports.

/// A catalog failure.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{what} {name:?} already exists")]
    AlreadyExists { what: &'static str, name: String },
    #[error("{what} {name:?} does not exist")]
    NotFound { what: &'static str, name: String },
    #[error("invalid {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    /// The change would take the tenant past one of its quotas.
    #[error("the tenant's {what} quota is {limit}; this would make it {requested}")]
    QuotaExceeded {
        what: &'static str,
        limit: i64,
        requested: i64,
    },
    /// A compare-and-set lost: the row changed since it was read.
    #[error("{what} changed concurrently (expected epoch {expected})")]
    Conflict { what: &'static str, expected: i64 },
    #[error("stored {what} is unreadable: {reason}")]
    Corrupt { what: &'static str, reason: String },
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[source] sqlx::migrate::MigrateError),
}

pub type Result<T, E = CatalogError> = std::result::Result<T, E>;

impl CatalogError {
    /// Maps a database error, turning a unique-key violation into `AlreadyExists`.
    pub(crate) fn on_insert(what: &'static str, name: &str) -> impl FnOnce(sqlx::Error) -> Self {
        let name = name.to_owned();
        move |e| match &e {
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                CatalogError::AlreadyExists { what, name }
            }
            _ => CatalogError::Database(e),
        }
    }
}

impl From<sqlx::Error> for CatalogError {
    fn from(e: sqlx::Error) -> Self {
        CatalogError::Database(e)
    }
}
