//! Kafka-style listeners: `listeners` and `advertised.listeners` as `NAME://host:port`
//! lists, each name with a security protocol (`listener.security.protocol.map`, or the name
//! itself when it is one of Kafka's protocols). A connection knows which listener it came
//! in on: whether it must authenticate, and which address the broker advertises to it.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

/// How clients of a listener connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// No authentication: the listener's clients act as the broker's tenant, unchecked.
    Plaintext,
    /// SASL authentication (PLAIN, with the control plane's API keys) before any other
    /// request; every request is then authorized against the tenant's ACLs.
    SaslPlaintext,
    /// TLS, no authentication: like PLAINTEXT, encrypted.
    Ssl,
    /// TLS, then SASL as on SASL_PLAINTEXT.
    SaslSsl,
}

impl SecurityProtocol {
    /// Whether a client must authenticate before anything but ApiVersions and SASL.
    pub fn requires_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }

    /// Whether the listener speaks TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Plaintext => "PLAINTEXT",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslSsl => "SASL_SSL",
        })
    }
}

/// Why a listener setting was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ListenerError {
    #[error("listener {0:?} is not NAME://host:port")]
    Malformed(String),
    #[error("security protocol {0:?} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")]
    UnsupportedProtocol(String),
    #[error("listener {0:?} has no security protocol: name it in listener.security.protocol.map")]
    NoProtocol(String),
    #[error("listener {0:?} is named twice")]
    Duplicate(String),
    #[error("advertised listener {0:?} is not one of the listeners")]
    UnknownAdvertised(String),
    #[error("no listeners")]
    Empty,
}

impl FromStr for SecurityProtocol {
    type Err = ListenerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(Self::Plaintext),
            "SASL_PLAINTEXT" => Ok(Self::SaslPlaintext),
            "SSL" => Ok(Self::Ssl),
            "SASL_SSL" => Ok(Self::SaslSsl),
            _ => Err(ListenerError::UnsupportedProtocol(s.to_owned())),
        }
    }
}

/// One `NAME://host:port` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// A listener to bind: its name, protocol, bind address and the address clients are told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    pub name: String,
    pub protocol: SecurityProtocol,
    /// Where to bind (`host:port`; port 0 picks a free one).
    pub bind: String,
    /// The advertised address, when `advertised.listeners` names one; otherwise the bound
    /// address is advertised.
    pub advertised: Option<(String, u16)>,
}

/// The most listeners one broker binds.
const MAX_LISTENERS: usize = 16;

/// Parses a comma-separated `NAME://host:port` list (an IPv6 host in brackets).
pub fn parse_endpoints(list: &str) -> Result<Vec<Endpoint>, ListenerError> {
    let mut endpoints = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if endpoints.len() == MAX_LISTENERS {
            return Err(ListenerError::Malformed(entry.to_owned()));
        }
        let malformed = || ListenerError::Malformed(entry.to_owned());
        let (name, address) = entry.split_once("://").ok_or_else(malformed)?;
        let (host, port) = address.rsplit_once(':').ok_or_else(malformed)?;
        let port: u16 = port.parse().map_err(|_| malformed())?;
        let valid_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(malformed());
        }
        let name = name.to_ascii_uppercase();
        if endpoints.iter().any(|e: &Endpoint| e.name == name) {
            return Err(ListenerError::Duplicate(name));
        }
        endpoints.push(Endpoint {
            name,
            host: host.to_owned(),
            port,
        });
    }
    Ok(endpoints)
}

/// Parses `listener.security.protocol.map`: `NAME:PROTOCOL` pairs, comma-separated.
pub fn parse_protocol_map(map: &str) -> Result<HashMap<String, SecurityProtocol>, ListenerError> {
    map.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .take(MAX_LISTENERS + 1)
        .map(|entry| {
            let (name, protocol) = entry
                .split_once(':')
                .ok_or_else(|| ListenerError::Malformed(entry.to_owned()))?;
            Ok((name.trim().to_ascii_uppercase(), protocol.trim().parse()?))
        })
        .collect()
}

/// The listeners `listeners`, `advertised.listeners` and the protocol map describe.
pub fn listener_specs(
    listeners: &str,
    advertised: Option<&str>,
    protocols: &HashMap<String, SecurityProtocol>,
) -> Result<Vec<ListenerSpec>, ListenerError> {
    let bound = parse_endpoints(listeners)?;
    if bound.is_empty() {
        return Err(ListenerError::Empty);
    }
    let advertised = advertised
        .map(parse_endpoints)
        .transpose()?
        .unwrap_or_default();
    if let Some(stray) = advertised
        .iter()
        .find(|a| !bound.iter().any(|b| b.name == a.name))
    {
        return Err(ListenerError::UnknownAdvertised(stray.name.clone()));
    }
    bound
        .into_iter()
        .map(|endpoint| {
            let protocol = match protocols.get(&endpoint.name) {
                Some(protocol) => *protocol,
                None => endpoint
                    .name
                    .parse()
                    .map_err(|_| ListenerError::NoProtocol(endpoint.name.clone()))?,
            };
            let advertised = advertised
                .iter()
                .find(|a| a.name == endpoint.name)
                .map(|a| (a.host.clone(), a.port));
            let host = if endpoint.host.is_empty() {
                "0.0.0.0"
            } else {
                endpoint.host.as_str()
            };
            Ok(ListenerSpec {
                bind: format!("{host}:{}", endpoint.port),
                name: endpoint.name,
                protocol,
                advertised,
            })
        })
        .collect()
}

/// A bound listener, as its connections see it.
#[derive(Debug, Clone)]
pub struct ListenerInfo {
    pub name: String,
    pub protocol: SecurityProtocol,
    /// The address the broker gives clients of this listener for itself.
    pub advertised_host: String,
    pub advertised_port: u16,
    /// The certificate a TLS listener (SSL, SASL_SSL) presents.
    pub tls: Option<std::sync::Arc<crate::tls::TlsFiles>>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn kafka_listener_lists_parse_with_names_protocols_and_advertised_addresses() {
        let map = parse_protocol_map("INTERNAL:PLAINTEXT, CLIENT:SASL_PLAINTEXT").unwrap();
        let specs = listener_specs(
            "INTERNAL://0.0.0.0:9092,CLIENT://:9094,PLAINTEXT://[::1]:9095",
            Some("CLIENT://broker-0.skein.svc:9094"),
            &map,
        )
        .unwrap();
        assert_eq!(
            specs,
            vec![
                ListenerSpec {
                    name: "INTERNAL".into(),
                    protocol: SecurityProtocol::Plaintext,
                    bind: "0.0.0.0:9092".into(),
                    advertised: None,
                },
                ListenerSpec {
                    name: "CLIENT".into(),
                    protocol: SecurityProtocol::SaslPlaintext,
                    bind: "0.0.0.0:9094".into(),
                    advertised: Some(("broker-0.skein.svc".into(), 9094)),
                },
                ListenerSpec {
                    name: "PLAINTEXT".into(),
                    protocol: SecurityProtocol::Plaintext,
                    bind: "[::1]:9095".into(),
                    advertised: None,
                },
            ]
        );
    }

    #[test]
    fn wrong_listener_settings_are_refused_with_the_reason() {
        let none = HashMap::new();
        for (listeners, advertised, error) in [
            ("", None, ListenerError::Empty),
            (
                "PLAINTEXT:9092",
                None,
                ListenerError::Malformed("PLAINTEXT:9092".into()),
            ),
            (
                "PLAINTEXT://h:port",
                None,
                ListenerError::Malformed("PLAINTEXT://h:port".into()),
            ),
            (
                "EXTERNAL://h:1",
                None,
                ListenerError::NoProtocol("EXTERNAL".into()),
            ),
            (
                "CLIENT://h:1",
                None,
                ListenerError::NoProtocol("CLIENT".into()),
            ),
            (
                "PLAINTEXT://h:1,plaintext://h:2",
                None,
                ListenerError::Duplicate("PLAINTEXT".into()),
            ),
            (
                "PLAINTEXT://h:1",
                Some("OTHER://x:1"),
                ListenerError::UnknownAdvertised("OTHER".into()),
            ),
        ] {
            assert_eq!(
                listener_specs(listeners, advertised, &none),
                Err(error),
                "{listeners}"
            );
        }
        assert_eq!(
            parse_protocol_map("A:GSSAPI"),
            Err(ListenerError::UnsupportedProtocol("GSSAPI".into()))
        );
        assert_eq!(
            parse_protocol_map("A:sasl_ssl").unwrap()["A"],
            SecurityProtocol::SaslSsl
        );
        let many = (0..=MAX_LISTENERS)
            .map(|i| format!("L{i}://h:{i}"))
            .collect::<Vec<_>>();
        assert!(parse_endpoints(&many.join(",")).is_err());
    }
}
