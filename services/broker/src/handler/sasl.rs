//! SaslHandshake and SaslAuthenticate. On a SASL listener a client handshakes, authenticates
//! with PLAIN, and only then reaches any other API; a failed step is answered and the
//! connection then closed, as Kafka does. After SaslHandshake v1 the token travels inside
//! SaslAuthenticate (KIP-152); after v0 it comes as a bare frame, which the connection hands
//! to [`crate::connection`]'s raw path.

use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::router::{Api, Call};
use crate::sasl::{parse_plain, SaslState, MECHANISMS};

pub(crate) struct SaslHandshake;

impl Api for SaslHandshake {
    type Request = SaslHandshakeRequest;
    type Response = SaslHandshakeResponse;
    const KEY: ApiKey = ApiKey::SaslHandshake;
    const VERSIONS: (i16, i16) = (0, 1);

    async fn handle(call: &Call<'_>, request: SaslHandshakeRequest) -> Option<Self::Response> {
        let mechanisms = MECHANISMS
            .iter()
            .map(|m| StrBytes::from_static_str(m))
            .collect();
        let answer = |error: Option<ResponseError>| {
            Some(
                SaslHandshakeResponse::default()
                    .with_error_code(error.map_or(0, |e| e.code()))
                    .with_mechanisms(mechanisms),
            )
        };
        let session = call.session;
        if !session.listener.protocol.requires_sasl() || session.state() != SaslState::Start {
            session.set_state(SaslState::Failed);
            return answer(Some(ResponseError::IllegalSaslState));
        }
        let asked = request.mechanism.as_str();
        match MECHANISMS.iter().find(|m| m.eq_ignore_ascii_case(asked)) {
            Some(mechanism) => {
                session.set_state(SaslState::Handshaken {
                    mechanism,
                    raw: call.version == 0,
                });
                answer(None)
            }
            None => {
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
        let handshaken = SaslState::Handshaken {
            mechanism: "PLAIN",
            raw: false,
        };
        if session.state() != handshaken {
            return refuse(
                ResponseError::IllegalSaslState,
                "SaslAuthenticate must follow a SaslHandshake on a SASL listener".to_owned(),
            );
        }
        let credentials = match parse_plain(&request.auth_bytes) {
            Ok(credentials) => credentials,
            Err(e) => return refuse(ResponseError::SaslAuthenticationFailed, e.to_string()),
        };
        match call.broker.authenticate(&credentials).await {
            Ok(who) => {
                tracing::debug!(peer = %session.peer, principal = %who.principal,
                    listener = %session.listener.name, "authenticated");
                session.set_state(SaslState::Authenticated(who));
                // An API key does not expire: no re-authentication is asked for (KIP-368).
                Some(SaslAuthenticateResponse::default().with_session_lifetime_ms(0))
            }
            Err(e) => {
                tracing::info!(peer = %session.peer, key = %credentials.key_id.escape_debug(),
                    reason = %e, "SASL authentication failed");
                refuse(ResponseError::SaslAuthenticationFailed, e.to_string())
            }
        }
    }
}
