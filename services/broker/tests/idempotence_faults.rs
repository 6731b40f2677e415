//! Idempotence, provoked: a TCP proxy between a confluent-kafka producer and the broker
//! forwards every request but, after forwarding some Produce requests whole, cuts the
//! connection before their responses come back. librdkafka cannot know those batches were
//! written and sends them again on a new connection; the broker must recognise each retry by
//! its producer id, epoch and sequence, so the topic holds every record once.
//!
//! The broker advertises the proxy's port, so the client's every connection passes it.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::TestBroker;

/// The proxy's port, which the broker advertises (a `fn` tune cannot capture it).
static PROXY_PORT: AtomicU16 = AtomicU16::new(0);

/// Cuts the connection after forwarding every `EVERY`th Produce request.
const EVERY: usize = 7;

struct Counters {
    produces: AtomicUsize,
    cut: AtomicUsize,
}

fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let len = usize::try_from(i32::from_be_bytes(len)).ok()?;
    if len > 64 << 20 {
        return None;
    }
    let mut frame = len_prefixed(len);
    stream.read_exact(&mut frame[4..]).ok()?;
    Some(frame)
}

fn len_prefixed(len: usize) -> Vec<u8> {
    let mut frame = vec![0u8; 4 + len];
    frame[..4].copy_from_slice(&(len as i32).to_be_bytes());
    frame
}

/// Forwards one client connection to the broker.
fn relay(mut client: TcpStream, broker: std::net::SocketAddr, counters: Arc<Counters>) {
    let Ok(mut upstream) = TcpStream::connect(broker) else {
        return;
    };
    let mut client_back = client.try_clone().unwrap();
    let mut upstream_back = upstream.try_clone().unwrap();
    // Responses: copied as they come, until either side closes.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut upstream_back, &mut client_back);
        let _ = client_back.shutdown(Shutdown::Both);
    });
    while let Some(frame) = read_frame(&mut client) {
        let api_key = i16::from_be_bytes([frame[4], frame[5]]);
        if upstream.write_all(&frame).is_err() {
            break;
        }
        if api_key == 0 {
            let n = counters.produces.fetch_add(1, Ordering::Relaxed) + 1;
            if n % EVERY == 0 {
                // The broker has the whole request; its answer must not arrive. Closing
                // the client side first makes sure of that.
                let _ = client.shutdown(Shutdown::Both);
                std::thread::sleep(Duration::from_millis(50));
                let _ = upstream.shutdown(Shutdown::Both);
                counters.cut.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
    let _ = upstream.shutdown(Shutdown::Both);
}

#[test]
fn retries_of_batches_the_broker_already_wrote_are_written_once() {
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    PROXY_PORT.store(proxy.local_addr().unwrap().port(), Ordering::Relaxed);
    let broker = TestBroker::start_with(|config| {
        config.advertised_port = PROXY_PORT.load(Ordering::Relaxed);
    });
    let counters = Arc::new(Counters {
        produces: AtomicUsize::new(0),
        cut: AtomicUsize::new(0),
    });
    let upstream = broker.addr;
    {
        let counters = Arc::clone(&counters);
        std::thread::spawn(move || {
            for client in proxy.incoming() {
                let Ok(client) = client else { continue };
                let counters = Arc::clone(&counters);
                std::thread::spawn(move || relay(client, upstream, counters));
            }
        });
    }

    let python = std::env::var("SKEIN_PYTHON").unwrap_or_else(|_| common::setup_clients());
    let script = format!(
        "{}/../../tests/clients/idempotent_through_faults.py",
        std::env::var("CARGO_MANIFEST_DIR").unwrap()
    );
    let bootstrap = format!("127.0.0.1:{}", PROXY_PORT.load(Ordering::Relaxed));
    let out = Command::new("timeout")
        .args(["--kill-after=10", "300", python.as_str()])
        .arg(&script)
        .args([bootstrap.as_str(), "faults", "20000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let cut = counters.cut.load(Ordering::Relaxed);
    println!("{report} with {cut} connections cut after a forwarded Produce");
    assert!(cut >= 10, "the proxy cut only {cut} connections: {report}");
    assert_eq!(report["acked"], 20000, "{report}");
    assert_eq!(report["missing"], 0, "{report}");
    assert_eq!(report["duplicated"], 0, "{report}");
    assert_eq!(report["read"], 20000, "{report}");
}
