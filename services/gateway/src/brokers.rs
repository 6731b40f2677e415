//! [`Brokers`]: one Kafka client per tenant, bootstrapped from the brokers the cluster view
//! says serve that tenant, and replaced when that set changes.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use skein_client::{Client, ClientConfig, Producer, ProducerConfig};

use crate::cluster::View;
use crate::error::GatewayError;
use crate::long_polls::LongPolls;

/// A tenant's client and producer.
#[derive(Debug, Clone)]
pub struct TenantClient {
    pub client: Client,
    /// Writes with acks=all.
    pub producer: Arc<Producer>,
    /// Reads that wait for records, one fetch per broker for all of them.
    pub long_polls: Arc<LongPolls>,
}

#[derive(Debug, Default)]
pub struct Brokers {
    clients: Mutex<HashMap<String, (Vec<String>, TenantClient)>>,
    /// The gateway's controller credential, which it presents to brokers serving every
    /// tenant (SASL/PLAIN as `skein-gateway`, the tenant as the authorization id).
    credential: Option<String>,
    /// TLS to the brokers' registered (inter-broker) listeners, when those are SASL_SSL.
    tls: Option<skein_client::ClientTls>,
}

impl Brokers {
    /// Clients presenting `credential` to brokers that serve every tenant, in TLS when
    /// `tls` is given.
    pub fn new(credential: Option<String>, tls: Option<skein_client::ClientTls>) -> Self {
        Self {
            clients: Mutex::default(),
            credential,
            tls,
        }
    }

    /// The client for `tenant`, connecting when there is none for its current brokers.
    pub async fn tenant(&self, view: &View, tenant: &str) -> Result<TenantClient, GatewayError> {
        let (brokers, shared) = view
            .tenant(tenant)
            .map(|t| (t.brokers.clone(), t.shared))
            .unwrap_or_default();
        if brokers.is_empty() {
            return Err(GatewayError::Unavailable(format!(
                "no broker serves tenant {tenant} now"
            )));
        }
        if let Some((known, client)) = self.clients.lock().get(tenant) {
            if *known == brokers {
                return Ok(client.clone());
            }
        }
        // Connect without holding the lock, so one tenant's unreachable brokers hold up no
        // other tenant; two callers racing here both connect and the later one is kept.
        let mut config = ClientConfig::new(brokers.clone());
        config.client_id = "skein-gateway".to_owned();
        config.tls = self.tls.clone();
        if shared {
            let credential = self.credential.clone().ok_or_else(|| {
                GatewayError::Unavailable(
                    "the brokers serve every tenant, and this gateway has no controller \
                     credential to log in to them with"
                        .to_owned(),
                )
            })?;
            config.sasl_plain = Some(skein_client::SaslPlain {
                authorization_id: tenant.to_owned(),
                username: skein_proto::GATEWAY_SASL_USER.to_owned(),
                password: credential,
            });
        }
        let client = Client::connect(config).await?;
        let tenant_client = TenantClient {
            producer: Arc::new(Producer::new(client.clone(), ProducerConfig::default())),
            long_polls: LongPolls::new(&client),
            client,
        };
        self.clients
            .lock()
            .insert(tenant.to_owned(), (brokers, tenant_client.clone()));
        Ok(tenant_client)
    }
}
