//! [`ClientConfig`]: how a [`Client`](crate::Client) reaches the cluster.

use std::time::Duration;

/// Settings shared by every connection of a [`Client`](crate::Client).
///
/// Build one with [`ClientConfig::new`] and change the fields that differ from the defaults.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientConfig {
    /// `host:port` of brokers to ask for the cluster metadata first (`bootstrap.servers`).
    pub bootstrap_servers: Vec<String>,
    /// Sent in every request header (`client.id`).
    pub client_id: String,
    /// How long to wait for a TCP connection and the version handshake.
    pub connect_timeout: Duration,
    /// How long to wait for a response (`request.timeout.ms`). Long-polling requests
    /// (Fetch, JoinGroup, SyncGroup) add their own wait on top.
    pub request_timeout: Duration,
    /// The largest response frame accepted; a larger one closes the connection.
    pub max_response_bytes: usize,
    /// How many times a call is retried after a retriable error (`retries`).
    pub retries: u32,
    /// The pause before each retry (`retry.backoff.ms`).
    pub retry_backoff: Duration,
    /// Whether metadata requests may create missing topics, on brokers configured to
    /// (`allow.auto.create.topics`).
    pub allow_auto_topic_creation: bool,
    /// SASL/PLAIN credentials every connection authenticates with right after the
    /// version handshake (`sasl.mechanism=PLAIN` on SASL_PLAINTEXT); `None`, no
    /// authentication.
    pub sasl_plain: Option<SaslPlain>,
    /// TLS on every connection (`security.protocol=SSL`, or `SASL_SSL` with
    /// [`sasl_plain`](Self::sasl_plain)); `None`, plain TCP.
    pub tls: Option<crate::ClientTls>,
}

/// SASL/PLAIN credentials (RFC 4616).
#[derive(Clone, PartialEq, Eq)]
pub struct SaslPlain {
    /// The identity to act as; empty for the user's own.
    pub authorization_id: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslPlain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslPlain")
            .field("authorization_id", &self.authorization_id)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl ClientConfig {
    /// Defaults for a cluster reached through `bootstrap_servers`.
    pub fn new<S: Into<String>>(bootstrap_servers: impl IntoIterator<Item = S>) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.into_iter().map(Into::into).collect(),
            client_id: "skein-client".to_owned(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_response_bytes: 100 * 1024 * 1024,
            retries: 5,
            retry_backoff: Duration::from_millis(100),
            allow_auto_topic_creation: false,
            sasl_plain: None,
            tls: None,
        }
    }
}
