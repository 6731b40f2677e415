//! Fewer wake-ups for requests that arrive in pieces.
//!
//! A client whose TLS library sends each buffer segment as its own record (librdkafka's
//! `SSL_write` per segment sends a 1 MiB produce request as a thousand 1 KiB records) would
//! wake the connection's task once per segment, and every wake-up costs an `epoll` round, a
//! `read` and a pass through TLS and the frame codec for a few hundred bytes. The frame
//! codec knows how many bytes the request it is reading still lacks; while the connection
//! waits, the socket's receive low-water mark (`SO_RCVLOWAT`) is set to that count, so that
//! the kernel wakes the task only once enough has arrived (or the peer closes, or the
//! receive window fills: Linux wakes a reader then whatever the mark).
//!
//! The mark never asks for more than the request still needs, so a waiting connection
//! always wakes: beneath TLS the count is lowered by what the TLS layer may hold undecrypted
//! (at most one record's worth), since those bytes are no longer in the socket.
//!
//! Beneath TLS the socket is also read ahead: rustls reads one record (about 16 KiB) at a
//! time, and on a request larger than that one `read` of up to 64 KiB serves several of
//! its reads. The buffer is held only while the connection reads and is released when it
//! waits, so an idle connection costs nothing.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::io::poll_read_buf;

/// The most a mark asks for: past it wake-ups are already rare, and the kernel holds no more
/// of a slow request than this on the connection's behalf.
const MOST: usize = 256 * 1024;

/// What a TLS layer may hold of the stream without having decrypted it: rustls buffers at
/// most one record on the wire (16 KiB of plaintext, 2 KiB of overhead, a 5-byte header).
pub(crate) const TLS_HELD: usize = 16 * 1024 + 2048 + 5;

/// The bytes the frame being read still lacks, set by the codec and read by the socket.
#[derive(Debug, Clone, Default)]
pub(crate) struct Missing(Arc<AtomicUsize>);

impl Missing {
    pub(crate) fn set(&self, bytes: usize) {
        self.0.store(bytes, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// How much one `read` beneath TLS takes from the socket: rustls asks for at most one
/// record (about 16 KiB) at a time, and a syscall per record costs more than decrypting it.
const READ_AHEAD: usize = 64 * 1024;

/// A socket whose low-water mark follows [`Missing`] while its reader waits.
#[derive(Debug)]
pub(crate) struct LowWater<S> {
    inner: S,
    missing: Missing,
    /// Bytes of the request that layers above may hold without having passed them on.
    held_above: usize,
    /// The mark last set; the kernel's default is 1.
    mark: usize,
    /// Beneath TLS: bytes read from the socket and not yet passed up. Allocated while the
    /// connection reads and released when it waits.
    ahead: BytesMut,
}

impl<S: AsRawFd> LowWater<S> {
    /// The socket beneath the frame codec (`held_above` 0) or beneath TLS (`TLS_HELD`).
    pub(crate) fn new(inner: S, missing: Missing, held_above: usize) -> Self {
        Self {
            inner,
            missing,
            held_above,
            mark: 1,
            ahead: BytesMut::new(),
        }
    }

    /// Sets the mark for a wait that begins now: what the request lacks, less what layers
    /// above may hold, at least 1 and at most [`MOST`].
    fn mark_for_wait(&mut self) {
        let wanted = self
            .missing
            .get()
            .saturating_sub(self.held_above)
            .clamp(1, MOST);
        if wanted == self.mark {
            return;
        }
        // Lowering the mark would wake the reader at once if enough had arrived meanwhile,
        // and raising it only delays a wake-up the request cannot do without, so the mark
        // may be set after the read that found nothing.
        match set_receive_low_water(&self.inner, wanted) {
            Ok(()) => self.mark = wanted,
            Err(e) => {
                // Not fatal: the connection works with the default mark, only wakes more.
                tracing::debug!(error = %e, "SO_RCVLOWAT not set");
                self.held_above = usize::MAX;
                self.mark = 1;
            }
        }
    }
}

#[allow(unsafe_code)]
fn set_receive_low_water(socket: &impl AsRawFd, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: the descriptor is the caller's open socket for the duration of the call, and
    // the option value points to a live c_int whose size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            std::ptr::from_ref(&value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl<S: AsyncRead + AsRawFd + Unpin> AsyncRead for LowWater<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.ahead.is_empty() {
            // Plaintext reads go straight into the frame's buffer. Beneath TLS, where each
            // read asks for one record, one read fills the read-ahead buffer while the
            // request still lacks more than a record; a small request is read as it asks.
            let direct = this.held_above == 0
                || buf.remaining() >= READ_AHEAD
                || this.missing.get() <= TLS_HELD;
            let read = if direct {
                Pin::new(&mut this.inner).poll_read(cx, buf)
            } else {
                this.ahead.reserve(READ_AHEAD);
                poll_read_buf(Pin::new(&mut this.inner), cx, &mut this.ahead).map_ok(|_| ())
            };
            match read {
                Poll::Pending => {
                    this.ahead = BytesMut::new();
                    this.mark_for_wait();
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) if direct => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {}
            }
        }
        let n = buf.remaining().min(this.ahead.len());
        buf.put_slice(&this.ahead[..n]);
        this.ahead.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for LowWater<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
        (client.unwrap(), accepted.unwrap().0)
    }

    #[tokio::test]
    async fn a_waiting_reader_wakes_once_the_missing_bytes_have_arrived() {
        let (mut client, server) = pair().await;
        let missing = Missing::default();
        missing.set(3000);
        let mut server = LowWater::new(server, missing.clone(), 0);
        let mut buf = vec![0; 8192];
        // Nothing has arrived: the read waits, and the mark is now what the frame lacks.
        let read =
            tokio::time::timeout(std::time::Duration::from_millis(50), server.read(&mut buf));
        assert!(read.await.is_err());
        assert_eq!(server.mark, 3000);
        // Part of it does not wake the reader; the rest does.
        client.write_all(&[1; 1000]).await.unwrap();
        let read =
            tokio::time::timeout(std::time::Duration::from_millis(200), server.read(&mut buf));
        assert!(read.await.is_err(), "woke with 1000 of 3000 bytes");
        client.write_all(&[2; 2000]).await.unwrap();
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), server.read(&mut buf))
            .await
            .expect("the reader did not wake with every byte there")
            .unwrap();
        assert_eq!(n, 3000);
    }

    #[tokio::test]
    async fn the_mark_falls_with_what_is_missing_and_leaves_room_for_layers_above() {
        let (mut client, server) = pair().await;
        let missing = Missing::default();
        missing.set(1_000_000);
        let mut server = LowWater::new(server, missing.clone(), TLS_HELD);
        let mut buf = vec![0; 8192];
        let wait = std::time::Duration::from_millis(50);
        assert!(tokio::time::timeout(wait, server.read(&mut buf))
            .await
            .is_err());
        assert_eq!(server.mark, MOST);
        // A frame nearly read asks only for what the socket must still bring.
        missing.set(TLS_HELD + 10);
        assert!(tokio::time::timeout(wait, server.read(&mut buf))
            .await
            .is_err());
        assert_eq!(server.mark, 10);
        missing.set(100);
        assert!(tokio::time::timeout(wait, server.read(&mut buf))
            .await
            .is_err());
        assert_eq!(server.mark, 1);
        client.write_all(b"x").await.unwrap();
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), server.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, 1);
    }

    #[tokio::test]
    async fn beneath_tls_one_read_serves_many_small_ones_in_order() {
        let (mut client, server) = pair().await;
        let missing = Missing::default();
        let sent: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        missing.set(sent.len());
        let mut server = LowWater::new(server, missing.clone(), TLS_HELD);
        let writer = tokio::spawn({
            let sent = sent.clone();
            async move {
                client.write_all(&sent).await.unwrap();
                client
            }
        });
        let mut received = Vec::new();
        let mut buf = vec![0; 5000];
        let mut reads_ahead = 0;
        while received.len() < sent.len() {
            let n = server.read(&mut buf).await.unwrap();
            assert!(n > 0);
            received.extend_from_slice(&buf[..n]);
            // As the frame codec would: what the request still lacks.
            missing.set(sent.len() - received.len());
            assert!(server.ahead.len() < READ_AHEAD);
            if !server.ahead.is_empty() {
                reads_ahead += 1;
            }
        }
        assert_eq!(received, sent);
        assert!(reads_ahead > 0, "every read went to the socket");
        // A connection that waits holds no read-ahead buffer.
        missing.set(4);
        let wait = std::time::Duration::from_millis(50);
        assert!(tokio::time::timeout(wait, server.read(&mut buf))
            .await
            .is_err());
        assert_eq!(server.ahead.capacity(), 0);
        let mut client = writer.await.unwrap();
        client.shutdown().await.unwrap();
        assert_eq!(server.read(&mut buf).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn beneath_tls_a_small_request_is_read_as_asked() {
        let (mut client, server) = pair().await;
        let missing = Missing::default();
        missing.set(100);
        let mut server = LowWater::new(server, missing, TLS_HELD);
        client.write_all(&[7; 100]).await.unwrap();
        let mut buf = vec![0; 8192];
        let n = server.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], &[7; 100][..n]);
        assert_eq!(server.ahead.capacity(), 0);
    }

    #[tokio::test]
    async fn a_peer_that_closes_wakes_a_reader_waiting_for_more() {
        let (mut client, server) = pair().await;
        let missing = Missing::default();
        missing.set(100_000);
        let mut server = LowWater::new(server, missing, 0);
        let mut buf = vec![0; 8192];
        let wait = std::time::Duration::from_millis(50);
        assert!(tokio::time::timeout(wait, server.read(&mut buf))
            .await
            .is_err());
        client.write_all(b"partial").await.unwrap();
        client.shutdown().await.unwrap();
        drop(client);
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), server.read(&mut buf))
            .await
            .expect("a closed peer did not wake the reader")
            .unwrap();
        assert_eq!(&buf[..n], b"partial");
    }
}
