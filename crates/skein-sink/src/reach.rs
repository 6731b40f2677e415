//! Where a sink may connect. A sink's database URL is chosen by whoever defines the sink,
//! and the control plane connects to it from inside its own network: the URL's host is
//! resolved here, every address it resolves to is checked against the operator's
//! [`TargetPolicy`], and the connection goes to a checked address (the host name is kept
//! only for `sslmode=verify-full`, whose certificate check names it). A Unix socket is never
//! reached. What the connection attempt fails with is told in words of our own, never the
//! remote side's bytes, so the error of a sink cannot read out a service it was pointed at.

use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgSslMode};

use crate::SinkError;

/// How long resolving the target's host may take.
const RESOLVE_WITHIN: Duration = Duration::from_secs(5);

/// How long connecting to the target may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);

/// The most entries an allow-list holds.
const MAX_ENTRIES: usize = 256;

/// One allow-list entry: a network in CIDR form, or a host name as the URL names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Allowed {
    Network { base: IpAddr, prefix: u8 },
    Host(String),
}

impl Allowed {
    fn permits(&self, host: &str, ip: IpAddr) -> bool {
        match self {
            Allowed::Host(name) => name.eq_ignore_ascii_case(host),
            Allowed::Network { base, prefix } => in_network(ip, *base, *prefix),
        }
    }
}

fn in_network(ip: IpAddr, base: IpAddr, prefix: u8) -> bool {
    match (canonical(ip), base) {
        (IpAddr::V4(ip), IpAddr::V4(base)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(base) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(base)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(ip) & mask == u128::from(base) & mask
        }
        _ => false,
    }
}

/// An IPv4 address written as IPv6 (`::ffff:127.0.0.1`) is the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Addresses of the control plane's own host and of cloud metadata services: loopback,
/// unspecified, link-local (169.254.0.0/16 holds the metadata service of most clouds),
/// multicast and broadcast, and AWS's IPv6 metadata address. A sink reaches them only when
/// the operator's allow-list names them.
pub fn is_internal(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_unspecified()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                // Alibaba Cloud's metadata service.
                || v4.octets() == [100, 100, 100, 200]
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6 == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
        }
    }
}

/// The hosts a sink may reach. By default any address that is not [`is_internal`]; with an
/// operator's allow-list, only the networks and host names it lists (which may name
/// internal ones). `skein dev` allows loopback beside the public addresses, where its own
/// databases run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetPolicy {
    /// Whether every address that is not internal is allowed.
    any_public: bool,
    allowed: Vec<Allowed>,
}

impl Default for TargetPolicy {
    fn default() -> Self {
        Self {
            any_public: true,
            allowed: Vec::new(),
        }
    }
}

impl TargetPolicy {
    /// The policy `skein dev` uses: loopback, beside the public addresses.
    pub fn loopback() -> Self {
        Self {
            any_public: true,
            allowed: vec![
                Allowed::Network {
                    base: IpAddr::from([127, 0, 0, 0]),
                    prefix: 8,
                },
                Allowed::Network {
                    base: IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
                    prefix: 128,
                },
                Allowed::Host("localhost".to_owned()),
            ],
        }
    }

    /// Whether a connection to `ip`, which `host` resolved to, is allowed.
    pub fn permits(&self, host: &str, ip: IpAddr) -> bool {
        (self.any_public && !is_internal(ip)) || self.allowed.iter().any(|a| a.permits(host, ip))
    }
}

impl FromStr for TargetPolicy {
    type Err = String;

    /// A comma-separated list of CIDR networks (`10.0.0.0/8`, `2001:db8::/32`), addresses
    /// (a network of one) and host names.
    fn from_str(list: &str) -> Result<Self, Self::Err> {
        let mut allowed = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if allowed.len() == MAX_ENTRIES {
                return Err(format!("at most {MAX_ENTRIES} entries"));
            }
            let (address, prefix) = match entry.split_once('/') {
                Some((address, prefix)) => (address, Some(prefix)),
                None => (entry, None),
            };
            allowed.push(match address.parse::<IpAddr>() {
                Ok(base) => {
                    let max = if base.is_ipv4() { 32 } else { 128 };
                    let prefix = match prefix {
                        None => max,
                        Some(p) => p
                            .parse::<u8>()
                            .ok()
                            .filter(|p| *p <= max)
                            .ok_or_else(|| format!("{entry:?}: the prefix is not 0 to {max}"))?,
                    };
                    Allowed::Network { base, prefix }
                }
                Err(_) if prefix.is_none() && valid_host(entry) => {
                    Allowed::Host(entry.to_ascii_lowercase())
                }
                Err(_) => return Err(format!("{entry:?} is neither a network nor a host name")),
            });
        }
        Ok(Self {
            any_public: false,
            allowed,
        })
    }
}

fn valid_host(name: &str) -> bool {
    (1..=253).contains(&name.len())
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Connects to the target database named by `url` with at most `connections`
/// connections, after checking where it leads against `policy`.
pub async fn connect_target(
    url: &str,
    connections: u32,
    policy: &TargetPolicy,
) -> Result<PgPool, SinkError> {
    let options = PgConnectOptions::from_str(url)
        .map_err(|_| SinkError::Invalid("the database URL does not parse".to_owned()))?;
    if options.get_socket().is_some() || options.get_host().starts_with('/') {
        return Err(SinkError::NotAllowed(
            "a sink connects over TCP, never to a Unix socket".to_owned(),
        ));
    }
    // An IPv6 address comes in brackets, as the URL writes it.
    let host = options
        .get_host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = options.get_port();
    let resolved = tokio::time::timeout(
        RESOLVE_WITHIN,
        tokio::net::lookup_host((host.as_str(), port)),
    )
    .await
    .map_err(|_| SinkError::Unreachable(format!("resolving {host} timed out")))?
    .map_err(|_| SinkError::Unreachable(format!("{host} does not resolve")))?
    .take(16)
    .collect::<Vec<_>>();
    let Some(first) = resolved.first() else {
        return Err(SinkError::Unreachable(format!("{host} does not resolve")));
    };
    if let Some(refused) = resolved.iter().find(|a| !policy.permits(&host, a.ip())) {
        return Err(SinkError::NotAllowed(format!(
            "{host} resolves to {}, which sinks may not reach (the control plane's \
             --sink-allowed-targets)",
            refused.ip()
        )));
    }
    // The connection goes to the address checked, not to a second resolution of the name;
    // verify-full keeps the name, which its certificate check needs.
    let options = match options.get_ssl_mode() {
        PgSslMode::VerifyFull => options,
        _ => options.host(&first.ip().to_string()),
    };
    PgPoolOptions::new()
        .max_connections(connections.max(1))
        .acquire_timeout(CONNECT_WITHIN)
        .connect_with(options)
        .await
        .map_err(|e| SinkError::Unreachable(in_our_words(&e)))
}

/// Why a connection failed, in words of our own: never the remote side's message.
fn in_our_words(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Io(io) => format!("cannot connect ({})", io.kind()),
        sqlx::Error::Tls(_) => "the TLS handshake failed".to_owned(),
        sqlx::Error::PoolTimedOut => "the connection timed out".to_owned(),
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            let what = match code.as_ref() {
                "28P01" | "28000" => "the login was refused",
                "3D000" => "the database does not exist",
                "53300" => "the database has too many connections",
                "57P03" => "the database is starting up or shutting down",
                _ => "the database refused the connection",
            };
            // A SQLSTATE is five digits or capitals; anything else is not repeated.
            if code.len() == 5 && code.bytes().all(|b| b.is_ascii_alphanumeric()) {
                format!("{what} (SQLSTATE {code})")
            } else {
                what.to_owned()
            }
        }
        sqlx::Error::Protocol(_) => "the target did not answer as PostgreSQL does".to_owned(),
        _ => "the connection failed".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn by_default_a_sink_reaches_no_internal_or_metadata_address() {
        let policy = TargetPolicy::default();
        for internal in [
            "127.0.0.1",
            "127.8.9.10",
            "::1",
            "0.0.0.0",
            "169.254.169.254",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "100.100.100.200",
            "224.0.0.1",
        ] {
            assert!(!policy.permits("db", ip(internal)), "{internal}");
        }
        for public in ["10.1.2.3", "192.168.1.5", "203.0.113.7", "2001:db8::1"] {
            assert!(policy.permits("db", ip(public)), "{public}");
        }
    }

    #[test]
    fn an_allow_list_permits_what_it_names_and_nothing_else() {
        let policy: TargetPolicy = "10.0.0.0/8, db.internal, 2001:db8::/32, 127.0.0.1"
            .parse()
            .expect("a list");
        assert!(policy.permits("x", ip("10.9.8.7")));
        assert!(policy.permits("x", ip("127.0.0.1")));
        assert!(!policy.permits("x", ip("127.0.0.2")));
        assert!(policy.permits("DB.internal", ip("192.168.0.1")));
        assert!(policy.permits("x", ip("2001:db8::5")));
        assert!(!policy.permits("x", ip("203.0.113.7")));
        assert!(!policy.permits("x", ip("169.254.169.254")));
        for bad in ["10.0.0.0/33", "::/129", "not a host!", "a/8"] {
            assert!(bad.parse::<TargetPolicy>().is_err(), "{bad}");
        }
        let dev = TargetPolicy::loopback();
        assert!(dev.permits("localhost", ip("127.0.0.1")));
        assert!(dev.permits("x", ip("203.0.113.7")));
        assert!(!dev.permits("x", ip("169.254.169.254")));
    }

    #[tokio::test]
    async fn a_target_resolving_to_an_internal_address_or_a_socket_is_refused_before_connecting() {
        let policy = TargetPolicy::default();
        for url in [
            "postgres://u:p@127.0.0.1:5432/db",
            "postgres://u:p@localhost:5432/db",
            "postgres://u:p@[::1]:5432/db",
            "postgres://u:p@169.254.169.254:80/db",
            "postgres:///db?host=/var/run/postgresql&user=u",
        ] {
            let refused = connect_target(url, 1, &policy).await.map(|_| ());
            assert!(
                matches!(refused, Err(SinkError::NotAllowed(_))),
                "{url}: {refused:?}"
            );
        }
    }

    #[tokio::test]
    async fn what_a_service_answers_is_never_repeated_in_the_error() {
        // A service that is not PostgreSQL, answering with a secret of its own.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let port = listener.local_addr().expect("an address").port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                use tokio::io::AsyncWriteExt;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\n\r\nsecret-token-123\n")
                    .await;
            }
        });
        let url = format!("postgres://u:p@127.0.0.1:{port}/db?sslmode=disable");
        let error = connect_target(&url, 1, &TargetPolicy::loopback())
            .await
            .map(|_| ())
            .expect_err("not PostgreSQL");
        let said = error.to_string();
        assert!(!said.contains("secret") && !said.contains("HTTP"), "{said}");
    }
}
