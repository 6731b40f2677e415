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
    assert!(entries.contains(&(18, 0, 4)), "{entries:?}");
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
        // Produce v3 whose topic array claims ~10^9 entries in a few bytes: the decoder must
        // not reserve memory for them (found by fuzz/fuzz_targets/request_decode.rs).
        (
            "huge declared array",
            frame(
                0,
                3,
                1,
                &[0xff, 0xff, 0, 1, 0, 0, 0x13, 0x88, 0x3a, 0, 0, 0, 0, 0],
            ),
        ),
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

mod produce_errors {
    use std::collections::BTreeMap;
    use std::io::Write;

    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{
        ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
    };
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    use skein_log::batch::{build_batch, Compression, NewRecord, ProducerFields};

    use super::{connect, read_response};
    use crate::common::TestBroker;

    fn produce(broker: &TestBroker, topic: &str, records: Vec<u8>) -> i16 {
        let request = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::from(records)))])]);
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(0)
            .with_request_api_version(7)
            .with_correlation_id(9)
            .encode(&mut frame, 1)
            .unwrap();
        request.encode(&mut frame, 7).unwrap();
        let mut stream = connect(broker);
        stream
            .write_all(&(frame.len() as i32).to_be_bytes())
            .unwrap();
        stream.write_all(&frame).unwrap();
        let mut body = Bytes::from(read_response(&mut stream).unwrap());
        let header = ResponseHeader::decode(&mut body, 0).unwrap();
        assert_eq!(header.correlation_id, 9);
        let response = ProduceResponse::decode(&mut body, 7).unwrap();
        response.responses[0].partition_responses[0].error_code
    }

    fn batch(value_len: usize) -> Vec<u8> {
        let record = NewRecord {
            key: Some(b"k".to_vec()),
            value: Some(vec![b'v'; value_len]),
            headers: Vec::new(),
            timestamp: 1,
        };
        build_batch(&[record], Compression::None, ProducerFields::NONE).unwrap()
    }

    #[test]
    fn a_corrupt_batch_gets_corrupt_message_and_an_oversized_one_message_too_large() {
        let broker = TestBroker::start();
        let b = broker.broker();
        let mut configs = BTreeMap::new();
        configs.insert("max.message.bytes".to_owned(), "1000".to_owned());
        broker
            .runtime
            .block_on(b.topics.create_checked(
                "strict",
                &skein_broker::controller_link::TopicShape::Placed {
                    partitions: 1,
                    replication_factor: 1,
                },
                configs,
                false,
            ))
            .unwrap();

        let mut corrupt = batch(10);
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        assert_eq!(produce(&broker, "strict", corrupt), 2, "CORRUPT_MESSAGE");
        assert_eq!(
            produce(&broker, "strict", batch(2000)),
            10,
            "MESSAGE_TOO_LARGE"
        );
        assert_eq!(
            produce(&broker, "no-such-topic", batch(10)),
            3,
            "UNKNOWN_TOPIC_OR_PARTITION"
        );
        // Nothing of the refused batches was written; a good one lands at offset 0.
        assert_eq!(produce(&broker, "strict", batch(10)), 0);
        let log = b
            .logs()
            .get(&skein_log::TopicPartition::new("strict", 0))
            .unwrap();
        assert_eq!(log.read().log_end_offset(), 1);
    }
}

/// An ApiVersions v0 request on `stream`; whether it was answered.
fn answers(stream: &mut TcpStream) -> bool {
    stream.write_all(&frame(18, 0, 7, &[])).is_ok() && read_response(stream).is_some()
}

#[test]
fn connections_past_max_connections_are_closed_and_the_open_ones_go_on() {
    let broker = TestBroker::start_with(|config| config.max_connections = 2);
    let mut first = connect(&broker);
    let mut second = connect(&broker);
    assert!(answers(&mut first) && answers(&mut second));
    let mut third = connect(&broker);
    assert!(closed(&mut third), "a third connection was served");
    assert!(answers(&mut first) && answers(&mut second));
    // A slot freed is a slot for the next client.
    drop(first);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut stream = connect(&broker);
        if answers(&mut stream) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no slot came free");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_connection_idle_past_connections_max_idle_ms_is_closed() {
    let broker = TestBroker::start_with(|config| config.connections_max_idle_ms = 300);
    let mut idle = connect(&broker);
    assert!(answers(&mut idle));
    std::thread::sleep(Duration::from_millis(900));
    assert!(closed(&mut idle), "an idle connection stayed open");
    // One that keeps talking stays.
    let mut busy = connect(&broker);
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(150));
        assert!(answers(&mut busy));
    }
}
