//! Why a sink cannot be made or cannot go on.

#[cfg(feature = "postgres")]
use skein_client::exactly_once::ExactlyOnceError;
use skein_client::ClientError;

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The definition itself is wrong.
    #[error("{0}")]
    Invalid(String),
    #[error("the target database has no table {0}")]
    UnknownTable(String),
    #[error("table {table} has no column {column}")]
    MissingColumn { table: String, column: String },
    #[error("column {column} is {found}; the sink needs {needed}")]
    ColumnType {
        column: String,
        found: String,
        needed: String,
    },
    /// The target database could not be reached or refused the login.
    #[error("the target database is unreachable: {0}")]
    Unreachable(String),
    /// The target database's address is not one sinks may reach.
    #[error("the target database may not be reached: {0}")]
    NotAllowed(String),
    /// A record does not fit, and the sink has no dead-letter topic to put it in.
    #[error("record {topic}-{partition}@{offset} does not fit: {reason}")]
    Misfit {
        topic: String,
        partition: i32,
        offset: i64,
        reason: String,
    },
    #[cfg(feature = "postgres")]
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    ExactlyOnce(#[from] ExactlyOnceError),
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl SinkError {
    /// Whether the worker lost its partitions to another and must stop.
    pub fn is_fenced(&self) -> bool {
        #[cfg(feature = "postgres")]
        {
            matches!(self, Self::ExactlyOnce(ExactlyOnceError::Fenced { .. }))
        }
        #[cfg(not(feature = "postgres"))]
        {
            false
        }
    }

    /// Whether the error is about the sink's definition or its target's shape, so
    /// retrying cannot help.
    pub fn is_definition(&self) -> bool {
        matches!(
            self,
            Self::Invalid(_)
                | Self::NotAllowed(_)
                | Self::UnknownTable(_)
                | Self::MissingColumn { .. }
                | Self::ColumnType { .. }
                | Self::Misfit { .. }
        )
    }
}
