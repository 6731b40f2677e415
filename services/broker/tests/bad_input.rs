//! Bad input over raw TCP: the broker answers with the right error or closes that connection,
//! stays up, and other clients are not disturbed.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::TestBroker;

fn connect(broker: &TestBroker) -> TcpStream {
    let stream = TcpStream::connect(broker.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// A request frame: api key, version, correlation id, client id "t", then `body`.
fn frame(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend_from_slice(&api_key.to_be_bytes());
    payload.extend_from_slice(&version.to_be_bytes());
    payload.extend_from_slice(&correlation_id.to_be_bytes());
    payload.extend_from_slice(&1i16.to_be_bytes());
    payload.push(b't');
    payload.extend_from_slice(body);
    let mut out = (payload.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&payload);
    out
}

fn read_response(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(body)
}

fn closed(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(stream.read(&mut buf), Ok(0) | Err(_))
}

/// ApiVersions v0 works on a fresh connection: the broker is still serving.
fn assert_healthy(broker: &TestBroker) {
    let mut stream = connect(broker);
    stream.write_all(&frame(18, 0, 7, &[])).unwrap();
    let response = read_response(&mut stream).unwrap();
    assert_eq!(&response[0..4], &7i32.to_be_bytes());
    assert_eq!(&response[4..6], &0i16.to_be_bytes(), "error code");
}

#[test]
fn an_unsupported_api_versions_version_gets_error_35_in_v0_format() {
    let broker = TestBroker::start();
    let mut stream = connect(&broker);
    stream.write_all(&frame(18, 99, 42, &[])).unwrap();
    let response = read_response(&mut stream).unwrap();
    assert_eq!(&response[0..4], &42i32.to_be_bytes());
    assert_eq!(i16::from_be_bytes([response[4], response[5]]), 35);
    // v0 body: an array of (key, min, max) follows, listing ApiVersions itself.
    let count = i32::from_be_bytes([response[6], response[7], response[8], response[9]]);
    assert!(count >= 5);
    let entries: Vec<(i16, i16, i16)> = response[10..]
        .chunks(6)
        .take(count as usize)
        .map(|c| {
            (
                i16::from_be_bytes([c[0], c[1]]),
                i16::from_be_bytes([c[2], c[3]]),
                i16::from_be_bytes([c[4], c[5]]),
            )
        })
        .collect();
    assert!(entries.contains(&(18, 0, 3)), "{entries:?}");
    assert_healthy(&broker);
}

#[test]
fn unknown_keys_unsupported_versions_garbage_and_oversized_frames_close_only_that_connection() {
    let broker = TestBroker::start();
    let bystander = {
        let mut s = connect(&broker);
        s.write_all(&frame(18, 0, 1, &[])).unwrap();
        read_response(&mut s).unwrap();
        s
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("unknown api key", frame(9999, 0, 1, &[])),
        ("unsupported produce version", frame(0, 99, 1, &[])),
        (
            "garbage",
            vec![0, 0, 0, 12, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8],
        ),
        ("short header", vec![0, 0, 0, 2, 0, 18]),
        ("frame over the cap", (2_000_000i32).to_be_bytes().to_vec()),
        ("truncated metadata body", frame(3, 1, 1, &[0, 0, 0, 5])),
    ];
    for (what, bytes) in cases {
        let mut stream = connect(&broker);
        stream.write_all(&bytes).unwrap();
        assert!(closed(&mut stream), "{what}: connection stayed open");
        assert_healthy(&broker);
    }
    // A truncated frame (length says more than arrives) just waits; closing it is harmless.
    let mut stream = connect(&broker);
    stream.write_all(&[0, 0, 0, 50, 0, 18]).unwrap();
    drop(stream);
    assert_healthy(&broker);
    let mut bystander = bystander;
    bystander.write_all(&frame(18, 0, 2, &[])).unwrap();
    assert!(
        read_response(&mut bystander).is_some(),
        "an unrelated client was disturbed"
    );
}
