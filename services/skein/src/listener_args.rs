//! What `skein dev` and `skein broker` share: where the data lives, where Kafka clients
//! connect, the broker's configuration file, and the maintenance loop that runs until a
//! signal.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use skein_broker::controller_link::BrokerIdentity;
use skein_broker::listeners::{self, ListenerInfo, SecurityProtocol};
use skein_broker::tls::TlsFiles;
use skein_broker::{BrokerConfig, InterBrokerTls, NodeSettings};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

#[derive(Debug, clap::Args)]
pub(crate) struct ListenerArgs {
    /// Where topics and partition logs live
    #[arg(long, env = "SKEIN_DATA_DIR", default_value = "./skein-data")]
    pub(crate) data_dir: PathBuf,
    /// Address the Kafka listener binds (port 0 picks a free one)
    #[arg(long, env = "SKEIN_KAFKA_LISTEN", default_value = "127.0.0.1:9092")]
    pub(crate) kafka_listen: SocketAddr,
    /// Kafka's `listeners`: NAME://host:port entries, comma-separated, in place of
    /// --kafka-listen. The inter-broker listener (--inter-broker-listener-name, else the
    /// first PLAINTEXT one) is the one the broker registers; the others serve clients
    #[arg(long, env = "SKEIN_LISTENERS", conflicts_with = "kafka_listen")]
    pub(crate) listeners: Option<String>,
    /// Kafka's `inter.broker.listener.name`: the listener brokers replicate over, PLAINTEXT
    /// or SASL_PLAINTEXT (brokers then present their controller credentials to each other)
    #[arg(long, env = "SKEIN_INTER_BROKER_LISTENER_NAME", requires = "listeners")]
    pub(crate) inter_broker_listener_name: Option<String>,
    /// Kafka's `advertised.listeners`: the address clients are told for each listener
    /// (by name); a listener not named here advertises the address it is bound to
    #[arg(long, env = "SKEIN_ADVERTISED_LISTENERS", requires = "listeners")]
    pub(crate) advertised_listeners: Option<String>,
    /// Kafka's `listener.security.protocol.map`: NAME:PROTOCOL pairs for listeners whose
    /// names are not protocols (PLAINTEXT, SASL_PLAINTEXT)
    #[arg(
        long,
        env = "SKEIN_LISTENER_SECURITY_PROTOCOL_MAP",
        requires = "listeners"
    )]
    pub(crate) listener_security_protocol_map: Option<String>,
    /// PEM file with the certificate chain SSL and SASL_SSL listeners present (read again
    /// when it changes)
    #[arg(
        long,
        env = "SKEIN_SSL_CERTIFICATE_LOCATION",
        requires = "ssl_key_location"
    )]
    pub(crate) ssl_certificate_location: Option<PathBuf>,
    /// PEM file with the private key of --ssl-certificate-location
    #[arg(
        long,
        env = "SKEIN_SSL_KEY_LOCATION",
        requires = "ssl_certificate_location"
    )]
    pub(crate) ssl_key_location: Option<PathBuf>,
    /// Whether clients of SSL listeners present certificates (Kafka's `ssl.client.auth`):
    /// none, requested or required; a certificate's subject names the client's principal
    #[arg(long, env = "SKEIN_SSL_CLIENT_AUTH", default_value = "none")]
    pub(crate) ssl_client_auth: ClientAuthMode,
    /// PEM file with the authorities the broker trusts (Kafka's `ssl.truststore.location`,
    /// PEM): those client certificates must be signed by, read again when it changes; and,
    /// on a SASL_SSL inter-broker listener, those of the other brokers' certificates, read
    /// at start
    #[arg(long, env = "SKEIN_SSL_TRUSTSTORE_LOCATION")]
    pub(crate) ssl_truststore_location: Option<PathBuf>,
    /// How a client certificate's subject becomes a principal name (Kafka's
    /// `ssl.principal.mapping.rules`: `RULE:pattern/replacement/[L|U]` entries and DEFAULT)
    #[arg(
        long,
        env = "SKEIN_SSL_PRINCIPAL_MAPPING_RULES",
        default_value = "DEFAULT"
    )]
    pub(crate) ssl_principal_mapping_rules: String,
    /// SASL/OAUTHBEARER: an issuer's public key tokens are checked with, ALG:PATH or
    /// ALG:PATH:KID, ALG one of RS256, ES256, EdDSA (repeatable; the gateway's keys)
    #[arg(
        long = "sasl-oauthbearer-jwt-public-key",
        env = "SKEIN_SASL_OAUTHBEARER_JWT_PUBLIC_KEYS",
        value_delimiter = ','
    )]
    pub(crate) oauthbearer_public_keys: Vec<String>,
    /// SASL/OAUTHBEARER: a file holding an HS256 secret tokens are checked with
    #[arg(long, env = "SKEIN_SASL_OAUTHBEARER_JWT_HS256_SECRET_FILE")]
    pub(crate) sasl_oauthbearer_jwt_hs256_secret_file: Option<PathBuf>,
    /// SASL/OAUTHBEARER: the `iss` tokens must carry
    #[arg(long, env = "SKEIN_SASL_OAUTHBEARER_JWT_ISSUER")]
    pub(crate) sasl_oauthbearer_jwt_issuer: Option<String>,
    /// SASL/OAUTHBEARER: the `aud` tokens must carry
    #[arg(long, env = "SKEIN_SASL_OAUTHBEARER_JWT_AUDIENCE")]
    pub(crate) sasl_oauthbearer_jwt_audience: Option<String>,
    /// SASL/OAUTHBEARER: an issuer's JSON Web Key Set URL (Kafka's
    /// `sasl.oauthbearer.jwks.endpoint.url`), fetched at start, every refresh interval, and
    /// (at most every 10 s) for a token naming an unknown kid
    #[arg(long, env = "SKEIN_SASL_OAUTHBEARER_JWKS_ENDPOINT_URL")]
    pub(crate) sasl_oauthbearer_jwks_endpoint_url: Option<String>,
    /// SASL/OAUTHBEARER: milliseconds between fetches of the JWKS (Kafka's
    /// `sasl.oauthbearer.jwks.endpoint.refresh.ms`; at least 1000)
    #[arg(
        long,
        env = "SKEIN_SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS",
        default_value_t = 300_000
    )]
    pub(crate) sasl_oauthbearer_jwks_endpoint_refresh_ms: u64,
    /// SASL/OAUTHBEARER: the claim naming the token's tenant (it must be the broker's)
    #[arg(
        long,
        env = "SKEIN_SASL_OAUTHBEARER_TENANT_CLAIM",
        default_value = "tenant"
    )]
    pub(crate) sasl_oauthbearer_tenant_claim: String,
    /// A TOML configuration file (see `docs/configuration.md`)
    #[arg(long, env = "SKEIN_BROKER_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Seconds between retention and compaction runs
    #[arg(long, env = "SKEIN_MAINTENANCE_INTERVAL_SECS", default_value_t = 30)]
    pub(crate) maintenance_interval_secs: u64,
}

impl ListenerArgs {
    /// Binds the Kafka listeners and builds the broker's configuration (file, environment,
    /// and the address clients are given): the inter-broker listener, and any others to
    /// add once the node runs ([`skein_broker::Node::add_listener`]).
    pub(crate) async fn bind(&self) -> anyhow::Result<Bound> {
        let mut config = BrokerConfig::new(&self.data_dir);
        crate::config::apply(&mut config, self.config.as_deref(), std::env::vars())?;
        let keys = crate::gateway::verifying_keys(
            &self.oauthbearer_public_keys,
            self.sasl_oauthbearer_jwt_hs256_secret_file.as_deref(),
        )?;
        let jwks = self.sasl_oauthbearer_jwks_endpoint_url.clone().map(|url| {
            skein_token::jwks::JwksSource {
                url,
                refresh_every: Duration::from_millis(
                    self.sasl_oauthbearer_jwks_endpoint_refresh_ms,
                ),
            }
        });
        if !keys.is_empty() || jwks.is_some() {
            let mut verifier = skein_token::Verifier::new(keys);
            verifier.issuer = self.sasl_oauthbearer_jwt_issuer.clone();
            verifier.audience = self.sasl_oauthbearer_jwt_audience.clone();
            config.oauthbearer = Some(Arc::new(skein_broker::OAuthBearer {
                keys: skein_token::jwks::TrustedKeys::new(verifier, jwks),
                tenant_claim: self.sasl_oauthbearer_tenant_claim.clone(),
            }));
        }
        let Some(listeners) = &self.listeners else {
            let listener = bind(&self.kafka_listen.to_string(), "PLAINTEXT").await?;
            let address = listener.local_addr()?;
            config.advertised_host = address.ip().to_string();
            config.advertised_port = address.port();
            return Ok(Bound {
                listener,
                config,
                extra: Vec::new(),
            });
        };
        let protocols = listeners::parse_protocol_map(
            self.listener_security_protocol_map.as_deref().unwrap_or(""),
        )?;
        let specs =
            listeners::listener_specs(listeners, self.advertised_listeners.as_deref(), &protocols)?;
        let inter_broker = match &self.inter_broker_listener_name {
            Some(name) => specs
                .iter()
                .position(|s| s.name == *name)
                .with_context(|| {
                    format!("--inter-broker-listener-name {name} is not one of --listeners")
                })?,
            None => specs
                .iter()
                .position(|s| s.protocol == SecurityProtocol::Plaintext)
                .context(
                    "--listeners needs a PLAINTEXT listener, or --inter-broker-listener-name: \
                     brokers replicate over it (and register its address with the controller)",
                )?,
        };
        let inter_broker_protocol = specs[inter_broker].protocol;
        anyhow::ensure!(
            matches!(
                inter_broker_protocol,
                SecurityProtocol::Plaintext
                    | SecurityProtocol::SaslPlaintext
                    | SecurityProtocol::SaslSsl
            ),
            "the inter-broker listener {} is {}: brokers replicate over PLAINTEXT, \
             SASL_PLAINTEXT or SASL_SSL",
            specs[inter_broker].name,
            inter_broker_protocol
        );
        let client_auth = match self.ssl_client_auth {
            ClientAuthMode::None => None,
            mode => Some(skein_broker::tls::ClientAuth {
                truststore: self.ssl_truststore_location.clone().context(
                    "--ssl-client-auth needs --ssl-truststore-location, the authorities client \
                     certificates are signed by",
                )?,
                required: mode == ClientAuthMode::Required,
                mapper: self
                    .ssl_principal_mapping_rules
                    .parse()
                    .context("--ssl-principal-mapping-rules")?,
            }),
        };
        let tls = match (&self.ssl_certificate_location, &self.ssl_key_location) {
            (Some(certificate), Some(key)) => Some(Arc::new(
                TlsFiles::open_with(certificate, key, client_auth)
                    .context("the TLS certificate does not load")?,
            )),
            _ => None,
        };
        if let Some(spec) = specs.iter().find(|s| s.protocol.uses_tls()) {
            anyhow::ensure!(
                tls.is_some(),
                "listener {} is {}: give --ssl-certificate-location and --ssl-key-location",
                spec.name,
                spec.protocol
            );
        }
        if inter_broker_protocol.uses_tls() {
            let truststore = self.ssl_truststore_location.as_ref().context(
                "a SASL_SSL inter-broker listener needs --ssl-truststore-location, the \
                 authorities other brokers' certificates are signed by",
            )?;
            let trust = skein_client::ClientTls::with_ca_file(truststore)
                .context("--ssl-truststore-location does not load")?;
            config.inter_broker_tls = tls.clone().map(|serve| InterBrokerTls { serve, trust });
        }
        let mut main = None;
        let mut extra = Vec::new();
        let mut advertised = Vec::new();
        for (index, spec) in specs.into_iter().enumerate() {
            let listener = bind(&spec.bind, &spec.name).await?;
            let address = listener.local_addr()?;
            let (host, port) = spec
                .advertised
                .unwrap_or_else(|| (address.ip().to_string(), address.port()));
            advertised.push(format!("{}://{host}:{port}", spec.name));
            if index == inter_broker {
                config.advertised_host = host;
                config.advertised_port = port;
                config.inter_broker_listener_name = spec.name;
                config.inter_broker_protocol = inter_broker_protocol;
                main = Some(listener);
            } else {
                let info = ListenerInfo {
                    name: spec.name,
                    protocol: spec.protocol,
                    advertised_host: host,
                    advertised_port: port,
                    tls: tls.clone().filter(|_| spec.protocol.uses_tls()),
                };
                extra.push((listener, info));
            }
        }
        let listener = main.context("the inter-broker listener was not bound")?;
        config.advertised_listeners = advertised.join(",");
        Ok(Bound {
            listener,
            config,
            extra,
        })
    }
}

/// The bound Kafka listeners, and the configuration that advertises them.
pub(crate) struct Bound {
    /// The inter-broker (PLAINTEXT) listener, the one registered with the controller.
    pub(crate) listener: TcpListener,
    pub(crate) config: BrokerConfig,
    /// Further listeners, each with what its clients are told.
    pub(crate) extra: Vec<(TcpListener, ListenerInfo)>,
}

async fn bind(address: &str, name: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .with_context(|| format!("failed to bind the Kafka listener {name} on {address}"))
}

/// Who a broker with `config` is to the controller, serving `tenant`.
/// Who a broker is to the controller; `tenant` `None`: one serving every tenant.
pub(crate) fn identity(config: &BrokerConfig, tenant: Option<&str>) -> BrokerIdentity {
    BrokerIdentity {
        node_id: config.node_id,
        host: config.advertised_host.clone(),
        port: i32::from(config.advertised_port),
        tenant: tenant.map(str::to_owned),
        rack: config.rack.clone(),
        advertised_listeners: config.advertised_listeners.clone(),
    }
}

impl ListenerArgs {
    /// How often a broker started with these arguments maintains its logs, and heartbeats.
    pub(crate) fn node_settings(&self, heartbeat_interval: std::time::Duration) -> NodeSettings {
        NodeSettings {
            maintenance_interval: std::time::Duration::from_secs(self.maintenance_interval_secs),
            heartbeat_interval,
        }
    }
}

/// Waits for SIGINT or SIGTERM.
pub(crate) async fn until_signal(
    interrupt: &mut tokio::signal::unix::Signal,
    terminate: &mut tokio::signal::unix::Signal,
) {
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}

/// Kafka's `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ClientAuthMode {
    None,
    Requested,
    Required,
}
