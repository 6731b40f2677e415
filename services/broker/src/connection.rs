//! One client connection: length-prefixed frames in, responses out, in request order.

use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use crate::dispatch::{self, Reply};
use crate::Broker;

/// Why a connection was closed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectionError {
    #[error("frame error: {0}")]
    Frame(#[source] std::io::Error),
    #[error("request header is {len} bytes, too short")]
    ShortHeader { len: usize },
    #[error("unknown api key {api_key}")]
    UnknownApiKey { api_key: i16 },
    #[error("api key {api_key} version {version} is not supported")]
    UnsupportedVersion { api_key: i16, version: i16 },
    #[error("malformed request for api key {api_key} version {version}: {reason}")]
    Malformed {
        api_key: i16,
        version: i16,
        reason: String,
    },
}

pub(crate) async fn run(stream: TcpStream, broker: Arc<Broker>) -> Result<(), ConnectionError> {
    let peer = stream
        .peer_addr()
        .map_or_else(|_| String::new(), |a| format!("/{}", a.ip()));
    let codec = LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(broker.config.max_request_bytes)
        .new_codec();
    let mut framed = Framed::new(stream, codec);
    while let Some(frame) = framed.next().await {
        let frame = frame.map_err(ConnectionError::Frame)?;
        match handle_frame(frame, &broker, &peer).await? {
            Reply::Response(bytes) => framed.send(bytes).await.map_err(ConnectionError::Frame)?,
            Reply::None => {}
        }
    }
    Ok(())
}

async fn handle_frame(
    frame: BytesMut,
    broker: &Broker,
    peer: &str,
) -> Result<Reply, ConnectionError> {
    if frame.len() < 8 {
        return Err(ConnectionError::ShortHeader { len: frame.len() });
    }
    let mut peek = &frame[..];
    let api_key = peek.get_i16();
    let version = peek.get_i16();
    let bytes: Bytes = frame.freeze();
    dispatch::dispatch(broker, api_key, version, bytes, peer).await
}
