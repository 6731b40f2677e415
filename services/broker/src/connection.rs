//! One client connection: length-prefixed frames in, responses out, in request order.
//! A reader handles requests one after another while a writer task sends their responses.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures::StreamExt;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;

use crate::frame::FrameCodec;
use crate::router::{self, Reply};
use crate::Broker;

/// Why a connection was closed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectionError {
    #[error("frame error: {0}")]
    Frame(#[source] std::io::Error),
    #[error("no request for {idle_ms} ms (connections.max.idle.ms)")]
    Idle { idle_ms: u64 },
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

/// Responses computed but not yet written; reading the next request does not wait for the
/// socket to drain, and a queue of small responses goes out in one write.
const RESPONSES_IN_FLIGHT: usize = 32;

const WRITE_BUFFER: usize = 64 * 1024;

/// A length-prefixed response frame.
async fn write_frame(out: &mut BufWriter<OwnedWriteHalf>, body: &[u8]) -> std::io::Result<()> {
    let len =
        u32::try_from(body.len()).map_err(|_| std::io::Error::other("response over 4 GiB"))?;
    out.write_all(&len.to_be_bytes()).await?;
    out.write_all(body).await
}

pub(crate) async fn run(stream: TcpStream, broker: Arc<Broker>) -> Result<(), ConnectionError> {
    let peer = stream
        .peer_addr()
        .map_or_else(|_| String::new(), |a| format!("/{}", a.ip()));
    let (read, write) = stream.into_split();
    let mut requests = FramedRead::new(read, FrameCodec::new(broker.config.max_request_bytes));
    let idle_ms = broker.config.connections_max_idle_ms;
    let (responses, mut queued) = mpsc::channel::<Bytes>(RESPONSES_IN_FLIGHT);
    let writer = tokio::spawn(async move {
        // Small responses gather in the buffer; one larger than it (a fetch) is written
        // straight from its own bytes, not copied.
        let mut out = BufWriter::with_capacity(WRITE_BUFFER, write);
        while let Some(response) = queued.recv().await {
            write_frame(&mut out, &response).await?;
            while let Ok(response) = queued.try_recv() {
                write_frame(&mut out, &response).await?;
            }
            out.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    // Requests are handled one at a time, so responses leave in request order.
    // A connection that sends no request for `connections.max.idle.ms` is closed; the time
    // spent answering a request (a long poll) does not count.
    let handled = async {
        loop {
            let next = tokio::time::timeout(Duration::from_millis(idle_ms), requests.next());
            let Some(frame) = next.await.map_err(|_| ConnectionError::Idle { idle_ms })? else {
                break;
            };
            let frame = frame.map_err(ConnectionError::Frame)?;
            if let Reply::Response(bytes) = handle_frame(frame, &broker, &peer).await? {
                if responses.send(bytes).await.is_err() {
                    break; // the writer failed; its error is reported below
                }
            }
        }
        Ok(())
    }
    .await;
    // Whatever was answered before a bad frame still reaches the client.
    drop(responses);
    let written = match writer.await {
        Ok(result) => result.map_err(ConnectionError::Frame),
        Err(e) => Err(ConnectionError::Frame(std::io::Error::other(e))),
    };
    handled.and(written)
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
    router::dispatch(broker, api_key, version, bytes, peer).await
}
