//! SaslHandshake and SaslAuthenticate. On a SASL listener a client handshakes, authenticates
//! with PLAIN (an API key) or OAUTHBEARER (a JWT), and only then reaches any other API; a
//! failed step is answered and the connection then closed, as Kafka does. After SaslHandshake
//! v1 the token travels inside SaslAuthenticate (KIP-152); after v0 it comes as a bare frame,
//! which the connection hands to [`crate::connection`]'s raw path (PLAIN only). An
//! authenticated client may handshake again to re-authenticate (KIP-368), as the same
//! principal.

use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::router::{Api, Call};
use crate::sasl::{parse_oauthbearer, parse_plain, SaslError, SaslState, OAUTHBEARER, PLAIN};
use crate::Broker;

/// The mechanisms this broker offers: PLAIN, and OAUTHBEARER when it can check tokens.
fn mechanisms(broker: &Broker) -> Vec<&'static str> {
    let mut offered = vec![PLAIN];
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
            SaslState::Authenticated(who) if call.version >= 1 => Ok(Some(who.principal)),
            _ => Err(()),
        };
        let previous = match previous {
            Ok(previous) if session.listener.protocol.requires_sasl() => previous,
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
            _ => {
                return refuse(
                    ResponseError::IllegalSaslState,
                    "SaslAuthenticate must follow a SaslHandshake on a SASL listener".to_owned(),
                )
            }
        };
        let authenticated = if mechanism == OAUTHBEARER {
            authenticate_token(call.broker, &request.auth_bytes)
        } else {
            match parse_plain(&request.auth_bytes) {
                Ok(credentials) => call.broker.authenticate(&credentials).await,
                Err(e) => Err(e),
            }
        };
        let authenticated = authenticated.and_then(|who| match previous {
            Some(previous) if previous != who.principal => {
                Err(SaslError::PrincipalChanged(previous))
            }
            _ => Ok(who),
        });
        match authenticated {
            Ok(who) => {
                tracing::debug!(peer = %session.peer, principal = %who.principal,
                    listener = %session.listener.name, mechanism, "authenticated");
                let lifetime = who.session_lifetime_ms();
                session.set_state(SaslState::Authenticated(who));
                // A token's session ends with it: the client re-authenticates before then
                // (KIP-368). An API key does not expire.
                let answer = SaslAuthenticateResponse::default();
                Some(if call.version >= 1 {
                    answer.with_session_lifetime_ms(lifetime)
                } else {
                    answer
                })
            }
            Err(e) => {
                tracing::info!(peer = %session.peer, mechanism, reason = %e,
                    "SASL authentication failed");
                refuse(ResponseError::SaslAuthenticationFailed, e.to_string())
            }
        }
    }
}

/// An OAUTHBEARER client message checked as the gateway checks tokens, for this broker's
/// tenant.
fn authenticate_token(
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
    let tenant = broker
        .controller
        .as_ref()
        .map(|link| link.identity().tenant.as_str())
        .ok_or_else(|| SaslError::BadToken("this broker serves no tenant".to_owned()))?;
    crate::sasl::authenticate_token(oauth, tenant, token)
}
