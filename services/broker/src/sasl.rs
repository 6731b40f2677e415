//! SASL on the Kafka path: each connection's authentication state; the PLAIN mechanism
//! (RFC 4616) carrying an API key id and secret, checked against the control plane and
//! remembered for a short while; and OAUTHBEARER (RFC 7628, KIP-255) carrying the JWTs the
//! gateway accepts. A connection authenticated with a key is closed once the controller's
//! metadata no longer lists the key as in force (revoked, or its principal deleted), within
//! a metadata refresh; one authenticated with a token is closed at its first request after
//! the token expires unless the client re-authenticated in time (KIP-368). SCRAM-SHA-256
//! and SCRAM-SHA-512 (RFC 5802, KIP-84) check a user's password against the credential the
//! control plane keeps; a session ends when its credential is deleted or replaced.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use sha2::{Digest, Sha256};
use skein_auth::Principal;

use crate::controller_link::ControllerLink;
use crate::listeners::ListenerInfo;
use skein_proto::controller as pb;

/// The mechanisms a SASL listener can offer; OAUTHBEARER only when tokens can be checked.
pub(crate) const PLAIN: &str = "PLAIN";
pub(crate) const OAUTHBEARER: &str = "OAUTHBEARER";
pub(crate) const SCRAM_SHA_256: &str = "SCRAM-SHA-256";
pub(crate) const SCRAM_SHA_512: &str = "SCRAM-SHA-512";

/// The PLAIN user name under which another broker presents its controller credential as
/// the password (an API key id is never this).
pub const BROKER_USER: &str = skein_proto::BROKER_SASL_USER;

/// The PLAIN user name under which a gateway presents its controller credential, naming
/// the tenant it acts for as the authorization id.
pub const GATEWAY_USER: &str = skein_proto::GATEWAY_SASL_USER;

/// The largest PLAIN token read (a PLAIN message is three fields of at most 255 bytes each).
pub const MAX_TOKEN_BYTES: usize = 1024;

/// The largest OAUTHBEARER message read (a JWT with its framing).
pub const MAX_OAUTHBEARER_BYTES: usize = 16 * 1024;

/// How long a verified key is answered without asking the controller again (a revoked key
/// is dropped at once when the metadata says so).
const VERIFIED_FOR: Duration = Duration::from_secs(60);

/// The most verified keys remembered; past it the memory is cleared and keys are checked
/// again.
const MAX_REMEMBERED_KEYS: usize = 10_000;

/// Who authenticated on a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authenticated {
    pub principal: Principal,
    /// The tenant its credential belongs to; `None` for a client certificate's principal,
    /// which names none, and for another broker.
    pub tenant: Option<String>,
    /// Another broker of the cluster (no tenant) or a gateway acting for `tenant`,
    /// authenticated with its controller credential: held to no tenant's ACLs, as the
    /// inter-broker listener of a broker of one tenant always was (the gateway checks its
    /// callers' ACLs itself).
    pub trusted: bool,
    /// The API key used, which must stay in force (empty for a token).
    pub key_id: String,
    /// When the credential was accepted: a key made a moment ago is missing from the
    /// metadata until the next snapshot, for at most [`NEW_KEY_GRACE`].
    pub verified_at: Instant,
    /// When a token's session ends (its `exp`); `None` for an API key.
    pub expires_at: Option<std::time::SystemTime>,
    /// The node another broker's credential is for: a follower's fetch of such a session
    /// must name it. `None` for clients, and for a credential of any node.
    pub node: Option<i32>,
}

/// How long a key the controller accepted may be missing from the broker's list of keys in
/// force (made just before it was used) before its connection is closed as revoked.
pub(crate) const NEW_KEY_GRACE: Duration = Duration::from_secs(5);

impl Authenticated {
    /// Whether the connection may go on: its key is in force, or was accepted too recently
    /// for the metadata to list it yet.
    pub(crate) fn still_valid(&self, keys: &KeyChecker) -> bool {
        match self.expires_at {
            Some(expires_at) => std::time::SystemTime::now() < expires_at,
            None => {
                keys.in_force(self.tenant.as_deref().unwrap_or_default(), &self.key_id)
                    || self.verified_at.elapsed() < NEW_KEY_GRACE
            }
        }
    }

    /// The session's lifetime for SaslAuthenticate's `session_lifetime_ms`: a token's time
    /// left, 0 (no re-authentication asked) for an API key.
    pub(crate) fn session_lifetime_ms(&self) -> i64 {
        self.expires_at.map_or(0, |at| {
            at.duration_since(std::time::SystemTime::now())
                .map_or(1, |left| {
                    i64::try_from(left.as_millis()).unwrap_or(i64::MAX).max(1)
                })
        })
    }
}

/// The principal and tenant of a session being re-authenticated, which must not change.
pub(crate) type Previous = (Principal, Option<String>);

/// Where a connection's authentication stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SaslState {
    /// Nothing yet: a SASL listener answers only ApiVersions and SaslHandshake.
    Start,
    /// SaslHandshake chose this mechanism; SaslAuthenticate comes next, or with a v0
    /// handshake (`raw`) the bare token in a frame of its own. `previous` is the principal
    /// of a session being re-authenticated (KIP-368), which must not change.
    Handshaken {
        mechanism: &'static str,
        raw: bool,
        previous: Option<Previous>,
    },
    /// SCRAM's first round is answered; the client's proof comes next.
    ScramSent {
        exchange: Box<skein_scram::ServerFirst>,
        /// The credential's id among the keys in force; `None` for a decoy (no such user).
        session_id: Option<String>,
        previous: Option<Previous>,
    },
    Authenticated(Authenticated),
    /// Authentication failed: the connection closes once the answer is sent.
    Failed,
}

/// One connection's listener, peer and authentication.
#[derive(Debug)]
pub(crate) struct Session {
    pub listener: Arc<ListenerInfo>,
    /// `/ip` of the client, as ACL hosts are matched.
    pub peer: String,
    state: Mutex<SaslState>,
    /// Whether the session has ever authenticated: a listener without SASL checks the
    /// session of a broker that did at each request, and no other.
    authenticated: std::sync::atomic::AtomicBool,
}

impl Session {
    pub(crate) fn new(listener: Arc<ListenerInfo>, peer: String) -> Self {
        Self {
            listener,
            peer,
            state: Mutex::new(SaslState::Start),
            authenticated: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(crate) fn state(&self) -> SaslState {
        self.state.lock().clone()
    }

    pub(crate) fn set_state(&self, state: SaslState) {
        if matches!(state, SaslState::Authenticated(_)) {
            self.authenticated
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        *self.state.lock() = state;
    }

    /// Whether the session authenticated at some point (its state may have moved on).
    pub(crate) fn has_authenticated(&self) -> bool {
        self.authenticated
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The authenticated principal; `None` on a listener without authentication.
    pub(crate) fn principal(&self) -> Option<Principal> {
        match &*self.state.lock() {
            SaslState::Authenticated(who) => Some(who.principal.clone()),
            _ => None,
        }
    }

    /// Whether the session is another broker's, authenticated with its controller
    /// credential: every tenant's traffic, and the only caller of the inter-broker APIs
    /// (a follower's Fetch and OffsetForLeaderEpoch, WriteTxnMarkers, AddPartitionsToTxn's
    /// verification), whatever the listener.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(&*self.state.lock(), SaslState::Authenticated(who) if who.trusted && who.tenant.is_none())
    }

    /// The node another broker's session speaks for, when its credential names one.
    pub(crate) fn broker_node(&self) -> Option<i32> {
        match &*self.state.lock() {
            SaslState::Authenticated(who) if who.trusted && who.tenant.is_none() => who.node,
            _ => None,
        }
    }

    /// Whether the session is held to no ACLs: another broker, or a gateway.
    pub(crate) fn is_trusted(&self) -> bool {
        matches!(&*self.state.lock(), SaslState::Authenticated(who) if who.trusted)
    }

    /// The tenant the session's credential belongs to, once authenticated with one that
    /// names a tenant.
    pub(crate) fn tenant(&self) -> Option<String> {
        match &*self.state.lock() {
            SaslState::Authenticated(who) => who.tenant.clone(),
            _ => None,
        }
    }
}

/// Why SASL refused a client.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SaslError {
    #[error("the SASL/PLAIN message is malformed")]
    MalformedPlain,
    #[error("the SASL token is over {MAX_TOKEN_BYTES} bytes")]
    TokenTooLarge,
    #[error("authentication failed: invalid API key id or secret")]
    BadCredentials,
    #[error("authentication failed: the control plane cannot check credentials now")]
    Unavailable,
    #[error("authentication failed: this broker has no control plane to check API keys")]
    NoController,
    #[error("authentication failed: too many authentications to check now; try again")]
    Rationed,
    #[error("the SASL/OAUTHBEARER message is malformed")]
    MalformedOAuthBearer,
    #[error("the SASL/OAUTHBEARER message is over {MAX_OAUTHBEARER_BYTES} bytes")]
    OAuthBearerTooLarge,
    #[error("authentication failed: the token was refused: {0}")]
    BadToken(String),
    #[error(
        "authentication failed: the token names tenant {found:?}, this listener serves {serves:?}"
    )]
    OtherTenant { found: String, serves: String },
    #[error("authentication failed: a user here is named USER@TENANT")]
    NoTenant,
    #[error("authentication failed: this listener authenticates the cluster's brokers only")]
    BrokersOnly,
    #[error("re-authentication must keep the principal {0}")]
    PrincipalChanged(Principal),
    #[error("authentication failed during SCRAM: {0}")]
    Scram(#[from] skein_scram::ScramError),
}

impl SaslError {
    /// A short name of the refusal, for metrics (one of a fixed few).
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::MalformedPlain | Self::MalformedOAuthBearer => "malformed",
            Self::TokenTooLarge | Self::OAuthBearerTooLarge => "too_large",
            Self::BadCredentials => "bad_credentials",
            Self::Unavailable | Self::NoController => "unavailable",
            Self::Rationed => "rationed",
            Self::BadToken(_) => "bad_token",
            Self::OtherTenant { .. } | Self::NoTenant => "wrong_tenant",
            Self::BrokersOnly => "brokers_only",
            Self::PrincipalChanged(_) => "principal_changed",
            Self::Scram(_) => "bad_credentials",
        }
    }
}

/// The bearer token of an OAUTHBEARER client message: a GS2 header, then `key=value`
/// pairs separated by 0x01, one of them `auth=Bearer <token>`, and a final 0x01.
pub fn parse_oauthbearer(message: &[u8]) -> Result<&str, SaslError> {
    if message.len() > MAX_OAUTHBEARER_BYTES {
        return Err(SaslError::OAuthBearerTooLarge);
    }
    let text = std::str::from_utf8(message).map_err(|_| SaslError::MalformedOAuthBearer)?;
    let mut parts = text.split('\u{1}');
    let header = parts.next().unwrap_or_default();
    // No channel binding: "n," (or "y,"), an optional authzid, and ",".
    if !(header.starts_with("n,") || header.starts_with("y,")) || !header.ends_with(',') {
        return Err(SaslError::MalformedOAuthBearer);
    }
    let mut token = None;
    let mut ended = false;
    for pair in parts.by_ref() {
        if pair.is_empty() {
            ended = true;
            break;
        }
        let (key, value) = pair
            .split_once('=')
            .ok_or(SaslError::MalformedOAuthBearer)?;
        if key == "auth" {
            let (scheme, bearer) = value
                .split_once(' ')
                .ok_or(SaslError::MalformedOAuthBearer)?;
            if !scheme.eq_ignore_ascii_case("bearer") || token.is_some() {
                return Err(SaslError::MalformedOAuthBearer);
            }
            token = Some(bearer.trim());
        }
    }
    // The message ends with the empty pair's separator, and nothing follows.
    if !ended || parts.next() != Some("") || parts.next().is_some() {
        return Err(SaslError::MalformedOAuthBearer);
    }
    token
        .filter(|t| !t.is_empty())
        .ok_or(SaslError::MalformedOAuthBearer)
}

/// The principal and tenant a token names, once `oauth` verifies it: for `tenant` on a
/// broker serving one, for the tenant it names (`None`) on a broker serving every tenant.
pub(crate) async fn authenticate_token(
    oauth: &crate::config::OAuthBearer,
    tenant: Option<&str>,
    token: &str,
) -> Result<Authenticated, SaslError> {
    let required = ["sub", "exp", oauth.tenant_claim.as_str()];
    let claims = oauth
        .keys
        .verify(token, &required)
        .await
        .map_err(|e| SaslError::BadToken(e.to_string()))?;
    let text = |name: &str| {
        claims
            .get(name)
            .and_then(serde_json::Value::as_str)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| SaslError::BadToken(format!("the {name} claim is not a name")))
    };
    let found = text(&oauth.tenant_claim)?;
    if !skein_auth::is_tenant_name(found) {
        return Err(SaslError::BadToken(format!(
            "the {} claim is not a tenant name",
            oauth.tenant_claim
        )));
    }
    if let Some(serves) = tenant.filter(|serves| *serves != found) {
        return Err(SaslError::OtherTenant {
            found: found.to_owned(),
            serves: serves.to_owned(),
        });
    }
    let exp = claims
        .get("exp")
        .and_then(|exp| {
            exp.as_u64()
                .or_else(|| exp.as_f64().map(|secs| secs as u64))
        })
        .ok_or_else(|| SaslError::BadToken("exp is not a time".to_owned()))?;
    Ok(Authenticated {
        principal: Principal::user(text("sub")?),
        tenant: Some(found.to_owned()),
        trusted: false,
        key_id: String::new(),
        verified_at: Instant::now(),
        expires_at: std::time::UNIX_EPOCH.checked_add(Duration::from_secs(exp)),
        node: None,
    })
}

/// A PLAIN message: `[authzid] NUL authcid NUL passwd`, the key id as authcid.
#[derive(Debug, PartialEq, Eq)]
pub struct PlainCredentials<'a> {
    pub key_id: &'a str,
    pub secret: &'a str,
    /// The tenant a gateway acts for ([`GATEWAY_USER`]); empty for everyone else.
    pub tenant: &'a str,
}

pub fn parse_plain(token: &[u8]) -> Result<PlainCredentials<'_>, SaslError> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(SaslError::TokenTooLarge);
    }
    let text = std::str::from_utf8(token).map_err(|_| SaslError::MalformedPlain)?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(key_id), Some(secret), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(SaslError::MalformedPlain);
    };
    if key_id.is_empty() || secret.is_empty() {
        return Err(SaslError::MalformedPlain);
    }
    // A gateway names the tenant it acts for; anyone else's authorization id other than
    // its own would ask to act as someone else.
    if key_id == GATEWAY_USER {
        if authzid.is_empty() {
            return Err(SaslError::MalformedPlain);
        }
        return Ok(PlainCredentials {
            key_id,
            secret,
            tenant: authzid,
        });
    }
    if !(authzid.is_empty() || authzid == key_id) {
        return Err(SaslError::MalformedPlain);
    }
    Ok(PlainCredentials {
        key_id,
        secret,
        tenant: "",
    })
}

/// A key the controller accepted: the SHA-256 of its secret, its tenant and principal's
/// name, and when.
type Verified = ([u8; 32], String, String, Instant);

/// How long a SCRAM credential the controller sent is used without asking again (it is
/// dropped at once when the metadata no longer lists it in force).
const SCRAM_REMEMBERED_FOR: Duration = Duration::from_secs(10);

/// How long "this user has no credential" is believed.
const SCRAM_ABSENT_FOR: Duration = Duration::from_secs(1);

/// A user's credential and its id among the keys in force, or `None` for no credential.
type ScramFound = Option<(skein_scram::Credential, String)>;

/// A SCRAM user as credentials are remembered: (tenant, user, mechanism).
type ScramUser = (String, String, skein_scram::Mechanism);

/// A secret of this process's own, from which unknown users' decoy salts are derived.
#[derive(Debug)]
struct DecoySecret([u8; 32]);

impl Default for DecoySecret {
    fn default() -> Self {
        let mut secret = [0; 32];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut secret);
        Self(secret)
    }
}

/// A fresh server nonce: 24 random bytes as hex.
pub(crate) fn server_nonce() -> String {
    let mut nonce = [0u8; 24];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut nonce);
    nonce.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks API keys with the controller and remembers the answers briefly, by key id; and
/// fetches SCRAM credentials, remembered as briefly.
#[derive(Debug, Default)]
pub(crate) struct KeyChecker {
    scram: Mutex<HashMap<ScramUser, (ScramFound, Instant)>>,
    decoy: DecoySecret,
    verified: Mutex<HashMap<String, Verified>>,
    /// Other brokers' and gateways' credentials the controller accepted, by their SHA-256.
    peers: Mutex<HashMap<[u8; 32], (pb::AuthenticatePeerResponse, Instant)>>,
    /// The (tenant, id) of every served tenant's keys in force, once the controller has
    /// said; `None` before.
    in_force: RwLock<Option<HashSet<(String, String)>>>,
    /// Questions to the controller, rationed as unknown-topic lookups are: a refused
    /// (key, secret) is not asked about again for a moment, and at most so many a second
    /// are asked in all, so failed attempts cost the control plane a bounded load.
    asked: skein_quota::Lookups,
}

impl KeyChecker {
    /// Takes the controller's list of the keys in force, as (tenant, id); keys gone from it
    /// are forgotten.
    pub(crate) fn set_in_force(&self, keys: HashSet<(String, String)>) {
        let listed = |tenant: &str, id: &str| keys.contains(&(tenant.to_owned(), id.to_owned()));
        self.verified
            .lock()
            .retain(|id, (_, tenant, _, _)| listed(tenant, id));
        self.scram.lock().retain(|(tenant, _, _), (found, _)| {
            found.as_ref().is_none_or(|(_, id)| listed(tenant, id))
        });
        *self.in_force.write() = Some(keys);
    }

    /// Whether `tenant`'s key may still be used: it is in the list (or no list came yet).
    pub(crate) fn in_force(&self, tenant: &str, key_id: &str) -> bool {
        self.in_force
            .read()
            .as_ref()
            .is_none_or(|keys| keys.contains(&(tenant.to_owned(), key_id.to_owned())))
    }

    /// The principal `credentials` authenticate, asking the controller unless a recent
    /// answer stands; [`BROKER_USER`] is another broker of the cluster, whose credential
    /// must cover every tenant this broker serves (`serves`: its one tenant, `None` for
    /// every tenant).
    pub(crate) async fn authenticate(
        &self,
        controller: Option<&ControllerLink>,
        serves: Option<&str>,
        credentials: &PlainCredentials<'_>,
    ) -> Result<Authenticated, SaslError> {
        let digest: [u8; 32] = Sha256::digest(credentials.secret.as_bytes()).into();
        if credentials.key_id == BROKER_USER || credentials.key_id == GATEWAY_USER {
            return self
                .authenticate_peer(controller, serves, credentials, digest)
                .await;
        }
        if let Some((hash, tenant, principal, at)) = self.verified.lock().get(credentials.key_id) {
            let known = self.in_force(tenant, credentials.key_id);
            if known && *hash == digest && at.elapsed() < VERIFIED_FOR {
                return Ok(Authenticated {
                    principal: Principal::user(principal.clone()),
                    tenant: Some(tenant.clone()),
                    trusted: false,
                    key_id: credentials.key_id.to_owned(),
                    verified_at: *at,
                    expires_at: None,
                    node: None,
                });
            }
        }
        let controller = controller.ok_or(SaslError::NoController)?;
        let (tenant, principal) = self
            .ask(
                attempt(credentials.key_id, &digest),
                "API key",
                controller.authenticate_api_key(credentials.key_id, credentials.secret),
            )
            .await?;
        let mut verified = self.verified.lock();
        if verified.len() >= MAX_REMEMBERED_KEYS {
            verified.clear();
        }
        verified.insert(
            credentials.key_id.to_owned(),
            (digest, tenant.clone(), principal.clone(), Instant::now()),
        );
        Ok(Authenticated {
            principal: Principal::user(principal),
            tenant: Some(tenant),
            trusted: false,
            key_id: credentials.key_id.to_owned(),
            verified_at: Instant::now(),
            expires_at: None,
            node: None,
        })
    }
}

/// How a credential check is known to the ration: `who` and the first bytes of the
/// secret's digest (a refused pair is not asked about again for a moment).
fn attempt(who: &str, digest: &[u8; 32]) -> String {
    let prefix: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{who}:{prefix}")
}

impl KeyChecker {
    /// Asks the controller `question` about a credential (`attempt`, [`attempt`]) under the
    /// ration every question takes: a refusal is remembered for a moment and answered as
    /// bad credentials, any other failure as the controller being unavailable.
    async fn ask<T>(
        &self,
        attempt: String,
        what: &str,
        question: impl std::future::Future<Output = Result<T, crate::controller_link::ControllerError>>,
    ) -> Result<T, SaslError> {
        if !self.asked.may_ask(&attempt) {
            return Err(SaslError::Rationed);
        }
        question.await.map_err(|e| {
            if e.code == tonic::Code::Unauthenticated {
                self.asked.missed(attempt);
                SaslError::BadCredentials
            } else {
                tracing::warn!(error = %e, "{what} check failed");
                SaslError::Unavailable
            }
        })
    }

    /// Another broker, or a gateway acting for a tenant, by the controller credential it
    /// presented: asked of the controller under the ration other questions take, and
    /// remembered (by the credential's digest) for [`VERIFIED_FOR`] or until it expires. A
    /// broker's credential must cover every tenant this one serves (`serves`: its one
    /// tenant, `None` for every tenant); a gateway acts for a tenant this broker serves.
    async fn authenticate_peer(
        &self,
        controller: Option<&ControllerLink>,
        serves: Option<&str>,
        credentials: &PlainCredentials<'_>,
        digest: [u8; 32],
    ) -> Result<Authenticated, SaslError> {
        let remembered = self
            .peers
            .lock()
            .get(&digest)
            .filter(|(_, at)| at.elapsed() < VERIFIED_FOR)
            .map(|(peer, _)| peer.clone());
        let peer = match remembered {
            Some(peer) => peer,
            None => {
                let controller = controller.ok_or(SaslError::NoController)?;
                let peer = self
                    .ask(
                        attempt("peer", &digest),
                        "peer credential",
                        controller.authenticate_peer(credentials.secret),
                    )
                    .await?;
                let mut peers = self.peers.lock();
                if peers.len() >= MAX_REMEMBERED_KEYS {
                    peers.clear();
                }
                peers.insert(digest, (peer.clone(), Instant::now()));
                peer
            }
        };
        let expires_at = std::time::UNIX_EPOCH.checked_add(Duration::from_secs(
            u64::try_from(peer.expires_at).unwrap_or(0),
        ));
        if expires_at.is_none_or(|at| at <= std::time::SystemTime::now()) {
            return Err(SaslError::BadCredentials);
        }
        let tenant = match (credentials.key_id, peer.role.as_str()) {
            (BROKER_USER, "broker") => {
                let covers = |t: &str| peer.tenants.iter().any(|c| c == "*" || c == t);
                if !covers(serves.unwrap_or("*")) {
                    return Err(SaslError::BadCredentials);
                }
                None
            }
            (GATEWAY_USER, "gateway") if serves.is_none_or(|own| own == credentials.tenant) => {
                Some(credentials.tenant.to_owned())
            }
            _ => return Err(SaslError::BadCredentials),
        };
        Ok(Authenticated {
            principal: Principal::user(peer.name),
            tenant,
            trusted: true,
            key_id: String::new(),
            verified_at: Instant::now(),
            expires_at,
            node: peer.node,
        })
    }

    /// The credential `tenant`'s `user` authenticates with over `mechanism` and its
    /// session id, or a decoy and `None` when the user has none, asking the controller
    /// unless a recent answer stands.
    pub(crate) async fn scram_credential(
        &self,
        controller: Option<&ControllerLink>,
        tenant: &str,
        user: &str,
        mechanism: skein_scram::Mechanism,
    ) -> Result<(skein_scram::Credential, Option<String>), SaslError> {
        let key = (tenant.to_owned(), user.to_owned(), mechanism);
        let remembered = self.scram.lock().get(&key).and_then(|(found, at)| {
            let fresh = match found {
                Some(_) => at.elapsed() < SCRAM_REMEMBERED_FOR,
                None => at.elapsed() < SCRAM_ABSENT_FOR,
            };
            fresh.then(|| found.clone())
        });
        let found = match remembered {
            Some(found) => found,
            None => {
                let controller = controller.ok_or(SaslError::NoController)?;
                if !self
                    .asked
                    .may_ask(&format!("scram:{mechanism}:{tenant}:{user}"))
                {
                    return Err(SaslError::Rationed);
                }
                let answer = controller
                    .scram_credential(tenant, user, mechanism.name())
                    .await
                    .map_err(|e| {
                        tracing::warn!(error = %e, "SCRAM credential lookup failed");
                        SaslError::Unavailable
                    })?;
                let found = match answer {
                    Some(c) => {
                        let id =
                            skein_proto::scram_session_id(mechanism.name(), user, c.updated_at);
                        let credential = skein_scram::Credential::from_parts(
                            mechanism,
                            c.salt,
                            c.iterations,
                            c.stored_key,
                            c.server_key,
                        )?;
                        Some((credential, id))
                    }
                    None => None,
                };
                let mut remembered = self.scram.lock();
                if remembered.len() >= MAX_REMEMBERED_KEYS {
                    remembered.clear();
                }
                remembered.insert(key, (found.clone(), Instant::now()));
                found
            }
        };
        Ok(match found {
            Some((credential, id)) => (credential, Some(id)),
            None => (
                skein_scram::Credential::decoy(
                    mechanism,
                    &format!("{user}@{tenant}"),
                    &self.decoy.0,
                ),
                None,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_parse_into_a_key_id_and_secret() {
        assert_eq!(
            parse_plain(b"\0key-1\0s3cret"),
            Ok(PlainCredentials {
                key_id: "key-1",
                secret: "s3cret",
                tenant: "",
            })
        );
        assert_eq!(
            parse_plain(b"key-1\0key-1\0s3cret").map(|c| c.key_id),
            Ok("key-1")
        );
        // A gateway names the tenant it acts for; nobody else may name another.
        assert_eq!(
            parse_plain(b"acme\0skein-gateway\0token").map(|c| (c.key_id, c.tenant)),
            Ok(("skein-gateway", "acme"))
        );
        assert_eq!(
            parse_plain(b"\0skein-gateway\0token"),
            Err(SaslError::MalformedPlain)
        );
        for bad in [
            &b""[..],
            b"key-1\0s3cret",
            b"\0\0s3cret",
            b"\0key-1\0",
            b"other\0key-1\0s3cret",
            b"\0key-1\0s3cret\0more",
            b"\0key\xff\0s3cret",
        ] {
            assert_eq!(parse_plain(bad), Err(SaslError::MalformedPlain), "{bad:?}");
        }
        let long = [b'a'; MAX_TOKEN_BYTES + 1];
        assert_eq!(parse_plain(&long), Err(SaslError::TokenTooLarge));
    }

    #[test]
    fn oauthbearer_messages_yield_their_bearer_token() {
        assert_eq!(
            parse_oauthbearer(b"n,,\x01auth=Bearer abc.def.ghi\x01\x01"),
            Ok("abc.def.ghi")
        );
        assert_eq!(
            parse_oauthbearer(b"n,a=alice,\x01host=h\x01auth=bearer t\x01\x01"),
            Ok("t")
        );
        for bad in [
            &b""[..],
            b"n,,\x01\x01",
            b"p=x,,\x01auth=Bearer t\x01\x01",
            b"n,,\x01auth=Basic t\x01\x01",
            b"n,,\x01auth=Bearer t\x01",
            b"n,,\x01auth=Bearer t\x01\x01more",
            b"n,,\x01auth=Bearer a\x01auth=Bearer b\x01\x01",
            b"n,,\x01novalue\x01\x01",
        ] {
            assert_eq!(
                parse_oauthbearer(bad),
                Err(SaslError::MalformedOAuthBearer),
                "{bad:?}"
            );
        }
        let long = vec![b'a'; MAX_OAUTHBEARER_BYTES + 1];
        assert_eq!(
            parse_oauthbearer(&long),
            Err(SaslError::OAuthBearerTooLarge)
        );
    }

    #[tokio::test]
    async fn a_token_names_its_principal_and_tenant_and_bounds_the_session() {
        let secret = b"0123456789abcdef0123456789abcdef";
        let oauth = crate::config::OAuthBearer {
            keys: skein_token::jwks::TrustedKeys::new(
                skein_token::Verifier::new(vec![skein_token::VerifyingKey::hs256(secret, None)]),
                None,
            ),
            tenant_claim: "tenant".to_owned(),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let sign = |claims: serde_json::Value| {
            let claims = claims.as_object().cloned().unwrap_or_default();
            skein_token::Hs256Signer::new(secret)
                .sign(&claims)
                .unwrap_or_default()
        };
        let token = sign(serde_json::json!({"sub": "alice", "tenant": "acme", "exp": now + 60}));
        let who = match authenticate_token(&oauth, Some("acme"), &token).await {
            Ok(who) => who,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(who.principal, Principal::user("alice"));
        assert_eq!(who.tenant.as_deref(), Some("acme"));
        // A broker serving every tenant takes the token's.
        match authenticate_token(&oauth, None, &token).await {
            Ok(any) => assert_eq!(any.tenant.as_deref(), Some("acme")),
            Err(e) => panic!("{e}"),
        }
        let lifetime = who.session_lifetime_ms();
        assert!((50_000..=60_000).contains(&lifetime), "{lifetime}");
        assert!(who.still_valid(&KeyChecker::default()));
        assert!(matches!(
            authenticate_token(&oauth, Some("globex"), &token).await,
            Err(SaslError::OtherTenant { .. })
        ));
        let expired = sign(serde_json::json!({"sub": "alice", "tenant": "acme", "exp": now - 600}));
        assert!(matches!(
            authenticate_token(&oauth, Some("acme"), &expired).await,
            Err(SaslError::BadToken(_))
        ));
        let no_tenant = sign(serde_json::json!({"sub": "alice", "exp": now + 60}));
        assert!(authenticate_token(&oauth, None, &no_tenant).await.is_err());
    }

    #[test]
    fn a_key_leaves_force_when_the_controller_stops_listing_it() {
        let checker = KeyChecker::default();
        let key = |tenant: &str, id: &str| (tenant.to_owned(), id.to_owned());
        assert!(
            checker.in_force("acme", "k1"),
            "before any list, nothing is refused"
        );
        checker.set_in_force(HashSet::from([key("acme", "k1")]));
        assert!(checker.in_force("acme", "k1"));
        assert!(!checker.in_force("acme", "k2"));
        // A key is in force for its own tenant only.
        assert!(!checker.in_force("globex", "k1"));
        checker.set_in_force(HashSet::new());
        assert!(!checker.in_force("acme", "k1"));
        // A key accepted a moment ago is not yet listed; one accepted long ago must be.
        let who = |verified_at| Authenticated {
            principal: Principal::user("alice"),
            tenant: Some("acme".to_owned()),
            trusted: false,
            key_id: "k3".to_owned(),
            verified_at,
            expires_at: None,
            node: None,
        };
        assert!(who(Instant::now()).still_valid(&checker));
        let long_ago = Instant::now().checked_sub(NEW_KEY_GRACE * 2);
        if let Some(long_ago) = long_ago {
            assert!(!who(long_ago).still_valid(&checker));
        }
    }
}
