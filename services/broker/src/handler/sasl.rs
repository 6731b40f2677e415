//! SaslHandshake and SaslAuthenticate. On a SASL listener a client handshakes, authenticates
//! with PLAIN (an API key), SCRAM-SHA-256/512 (a user's password, in two rounds) or
//! OAUTHBEARER (a JWT), and only then reaches any other API; a
//! failed step is answered and the connection then closed, as Kafka does. After SaslHandshake
//! v1 the token travels inside SaslAuthenticate (KIP-152); after v0 it comes as a bare frame,
//! which the connection hands to [`crate::connection`]'s raw path (PLAIN only). An
//! authenticated client may handshake again to re-authenticate (KIP-368), as the same
//! principal. A listener without SASL (PLAINTEXT, SSL) takes a SASL exchange from another
//! broker alone, presenting its controller credential: that is how a broker proves itself
//! there before the inter-broker APIs.

use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::router::{Api, Call};
use crate::sasl::{
    parse_oauthbearer, parse_plain, Authenticated, SaslError, SaslState, OAUTHBEARER, PLAIN,
    SCRAM_SHA_256, SCRAM_SHA_512,
};
use crate::Broker;

/// The mechanisms this broker offers: PLAIN, SCRAM, and OAUTHBEARER when it can check
/// tokens.
fn mechanisms(broker: &Broker) -> Vec<&'static str> {
    let mut offered = vec![PLAIN, SCRAM_SHA_256, SCRAM_SHA_512];
    if broker.config.oauthbearer.is_some() {
        offered.push(OAUTHBEARER);
    }
    offered
}

pub(crate) struct SaslHandshake;

impl Api for SaslHandshake {
    type Request = SaslHandshakeRequest;
    type Response = SaslHandshakeResponse;
    const KEY: ApiKey = ApiKey::SaslHandshake;
    const VERSIONS: (i16, i16) = (0, 1);
    const EXEMPT_FROM_REQUEST_TIME: bool = true;

    async fn handle(call: &Call<'_>, request: SaslHandshakeRequest) -> Option<Self::Response> {
        let offered = mechanisms(call.broker);
        let answer = |error: Option<ResponseError>| {
            Some(
                SaslHandshakeResponse::default()
                    .with_error_code(error.map_or(0, |e| e.code()))
                    .with_mechanisms(
                        offered
                            .iter()
                            .map(|m| StrBytes::from_static_str(m))
                            .collect(),
                    ),
            )
        };
        let session = call.session;
        // A first handshake, or a re-authentication of an authenticated session.
        let previous = match session.state() {
            SaslState::Start => Ok(None),
            SaslState::Authenticated(who) if call.version >= 1 => {
                Ok(Some((who.principal, who.tenant)))
            }
            _ => Err(()),
        };
        // A listener without SASL takes one exchange: another broker of the cluster proving
        // it is one with its controller credential (PLAIN, in SaslAuthenticate), so that
        // the inter-broker APIs are served to brokers alone on any listener.
        let open_listener = !session.listener.protocol.requires_sasl();
        let previous = match previous {
            Ok(previous)
                if !open_listener || (call.version >= 1 && request.mechanism.as_str() == PLAIN) =>
            {
                previous
            }
            _ => {
                session.set_state(SaslState::Failed);
                return answer(Some(ResponseError::IllegalSaslState));
            }
        };
        let asked = request.mechanism.as_str();
        match offered.iter().find(|m| m.eq_ignore_ascii_case(asked)) {
            // A bare token after v0 is PLAIN's framing only.
            Some(&mechanism) if call.version >= 1 || mechanism == PLAIN => {
                session.set_state(SaslState::Handshaken {
                    mechanism,
                    raw: call.version == 0,
                    previous,
                });
                answer(None)
            }
            _ => {
                tracing::info!(peer = %session.peer, mechanism = %asked.escape_debug(),
                    "refused SASL mechanism");
                session.set_state(SaslState::Failed);
                answer(Some(ResponseError::UnsupportedSaslMechanism))
            }
        }
    }
}

pub(crate) struct SaslAuthenticate;

impl Api for SaslAuthenticate {
    type Request = SaslAuthenticateRequest;
    type Response = SaslAuthenticateResponse;
    const KEY: ApiKey = ApiKey::SaslAuthenticate;
    const VERSIONS: (i16, i16) = (0, 2);
    const EXEMPT_FROM_REQUEST_TIME: bool = true;

    async fn handle(call: &Call<'_>, request: SaslAuthenticateRequest) -> Option<Self::Response> {
        let session = call.session;
        let refuse = |error: ResponseError, message: String| {
            session.set_state(SaslState::Failed);
            Some(
                SaslAuthenticateResponse::default()
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
            )
        };
        let (mechanism, previous) = match session.state() {
            SaslState::Handshaken {
                mechanism,
                raw: false,
                previous,
            } => (mechanism, previous),
            SaslState::ScramSent {
                exchange,
                session_id,
                previous,
            } => {
                let mechanism = exchange.mechanism().name();
                let finished = exchange
                    .finish(&request.auth_bytes)
                    .map_err(SaslError::from);
                return match (finished, session_id) {
                    (Ok(server_final), Some(session_id)) => {
                        let (tenant, user) = match scram_user(call.broker, &exchange.user) {
                            Ok(named) => named,
                            Err(e) => return failed(call, mechanism, e),
                        };
                        let who = Authenticated {
                            principal: skein_auth::Principal::user(user),
                            tenant: Some(tenant.to_owned()),
                            trusted: false,
                            key_id: session_id,
                            verified_at: std::time::Instant::now(),
                            expires_at: None,
                            node: None,
                        };
                        accept(call, who, previous, mechanism, server_final.into_bytes())
                    }
                    // A decoy cannot be passed; were it, no user stands behind it.
                    (Ok(_), None) => failed(
                        call,
                        mechanism,
                        SaslError::Scram(skein_scram::ScramError::BadProof),
                    ),
                    (Err(e), _) => failed(call, mechanism, e),
                };
            }
            _ => {
                return refuse(
                    ResponseError::IllegalSaslState,
                    "SaslAuthenticate must follow a SaslHandshake on a SASL listener".to_owned(),
                )
            }
        };
        if let Some(scram) = skein_scram::Mechanism::from_name(mechanism) {
            return match scram_first(call, scram, &request.auth_bytes).await {
                Ok((server_first, exchange, session_id)) => {
                    session.set_state(SaslState::ScramSent {
                        exchange: Box::new(exchange),
                        session_id,
                        previous,
                    });
                    Some(
                        SaslAuthenticateResponse::default()
                            .with_auth_bytes(server_first.into_bytes().into()),
                    )
                }
                Err(e) => failed(call, mechanism, e),
            };
        }
        let authenticated = if mechanism == OAUTHBEARER {
            authenticate_token(call.broker, &request.auth_bytes).await
        } else {
            match parse_plain(&request.auth_bytes) {
                Ok(credentials)
                    if !session.listener.protocol.requires_sasl()
                        && credentials.key_id != crate::sasl::BROKER_USER =>
                {
                    Err(SaslError::BrokersOnly)
                }
                Ok(credentials) => call.broker.authenticate(&credentials).await,
                Err(e) => Err(e),
            }
        };
        match authenticated {
            Ok(who) => accept(call, who, previous, mechanism, Vec::new()),
            Err(e) => failed(call, mechanism, e),
        }
    }
}

/// The answer to the client's last message: the session is authenticated as `who`, unless
/// it re-authenticates as someone else.
fn accept(
    call: &Call<'_>,
    who: Authenticated,
    previous: Option<crate::sasl::Previous>,
    mechanism: &str,
    auth_bytes: Vec<u8>,
) -> Option<SaslAuthenticateResponse> {
    let session = call.session;
    if let Some((previous, _)) =
        previous.filter(|(principal, tenant)| *principal != who.principal || *tenant != who.tenant)
    {
        return failed(call, mechanism, SaslError::PrincipalChanged(previous));
    }
    tracing::debug!(peer = %session.peer, principal = %who.principal,
        listener = %session.listener.name, mechanism, "authenticated");
    let lifetime = who.session_lifetime_ms();
    session.set_state(SaslState::Authenticated(who));
    // A token's session ends with it: the client re-authenticates before then (KIP-368).
    // An API key or a password does not expire.
    let answer = SaslAuthenticateResponse::default().with_auth_bytes(auth_bytes.into());
    Some(if call.version >= 1 {
        answer.with_session_lifetime_ms(lifetime)
    } else {
        answer
    })
}

/// A refusal: answered with SASL_AUTHENTICATION_FAILED, then the connection closes.
fn failed(call: &Call<'_>, mechanism: &str, e: SaslError) -> Option<SaslAuthenticateResponse> {
    let session = call.session;
    tracing::info!(peer = %session.peer, mechanism, reason = %e, "SASL authentication failed");
    call.broker.metrics.sasl_rejected(mechanism, e.reason());
    session.set_state(SaslState::Failed);
    // SCRAM's refusals say no more than "invalid credentials" to the client, whatever the
    // reason, so a guesser cannot tell an unknown user from a wrong password.
    let message = match e {
        SaslError::Scram(_) => format!(
            "Authentication failed during authentication due to invalid credentials with SASL \
             mechanism {mechanism}"
        ),
        other => other.to_string(),
    };
    Some(
        SaslAuthenticateResponse::default()
            .with_error_code(ResponseError::SaslAuthenticationFailed.code())
            .with_error_message(Some(StrBytes::from_string(message))),
    )
}

/// SCRAM's first round: the client's first message read, the user's credential (or a decoy)
/// found, and the server's first message with the state that checks the proof.
async fn scram_first(
    call: &Call<'_>,
    mechanism: skein_scram::Mechanism,
    message: &[u8],
) -> Result<(String, skein_scram::ServerFirst, Option<String>), SaslError> {
    let first = skein_scram::ClientFirst::parse(message)?;
    let (tenant, user) = scram_user(call.broker, &first.user)?;
    let (credential, session_id) = call
        .broker
        .keys
        .scram_credential(call.broker.controller.as_ref(), tenant, user, mechanism)
        .await?;
    let (server_first, exchange) = first.reply(credential, &crate::sasl::server_nonce())?;
    Ok((server_first, exchange, session_id))
}

/// The tenant and user a SCRAM user name names: a user of the broker's tenant on a broker
/// serving one; `USER@TENANT` on a broker serving every tenant (tenant names have no `@`).
fn scram_user<'a>(broker: &'a Broker, name: &'a str) -> Result<(&'a str, &'a str), SaslError> {
    match broker.topics.tenancy() {
        crate::scope::Tenancy::One => Ok((broker.own_tenant().unwrap_or_default(), name)),
        crate::scope::Tenancy::Every => name
            .rsplit_once('@')
            .map(|(user, tenant)| (tenant, user))
            .filter(|(tenant, user)| !tenant.is_empty() && !user.is_empty())
            .ok_or(SaslError::NoTenant),
    }
}

/// An OAUTHBEARER client message checked as the gateway checks tokens: for this broker's
/// tenant, or on a broker serving every tenant, for the tenant the token names.
async fn authenticate_token(
    broker: &Broker,
    message: &[u8],
) -> Result<crate::sasl::Authenticated, SaslError> {
    let oauth = broker
        .config
        .oauthbearer
        .as_deref()
        .ok_or_else(|| SaslError::BadToken("this broker accepts no tokens".to_owned()))?;
    let token = parse_oauthbearer(message)?;
    // A broker on its own knows no tenant to hold the token's claim to: it takes none.
    let Some(link) = &broker.controller else {
        return Err(SaslError::BadToken(
            "this broker serves no tenant".to_owned(),
        ));
    };
    crate::sasl::authenticate_token(oauth, link.identity().tenant.as_deref(), token).await
}
