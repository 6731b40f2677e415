//! Requests built with `kafka-protocol`, sent over a blocking TCP connection: for tests of
//! what client libraries do not exercise.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::TestBroker;

pub struct Client {
    pub stream: TcpStream,
    pub next_id: i32,
}

impl Client {
    pub fn connect(broker: &TestBroker) -> Self {
        Self::connect_to(broker.addr)
    }

    pub fn connect_to(addr: std::net::SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Self { stream, next_id: 1 }
    }

    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: i16,
        version: i16,
        request: &Req,
    ) -> Resp {
        let id = self.next_id;
        let frame = self.frame(key, version, request);
        self.stream.write_all(&frame).unwrap();
        self.receive(key, version, id)
    }

    /// A length-prefixed request frame with the next correlation id.
    pub fn frame<Req: Encodable>(&mut self, key: i16, version: i16, request: &Req) -> Vec<u8> {
        let id = self.next_id;
        self.next_id += 1;
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_correlation_id(id)
            .encode(&mut frame, api(key).request_header_version(version))
            .unwrap();
        request.encode(&mut frame, version).unwrap();
        let mut out = (frame.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&frame);
        out
    }

    /// Reads one response and checks it answers correlation id `id`.
    pub fn receive<Resp: Decodable>(&mut self, key: i16, version: i16, id: i32) -> Resp {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut body).unwrap();
        let mut body = Bytes::from(body);
        let header_version = api(key).response_header_version(version);
        let header = ResponseHeader::decode(&mut body, header_version).unwrap();
        assert_eq!(header.correlation_id, id);
        Resp::decode(&mut body, version).unwrap()
    }
}

pub fn api(key: i16) -> kafka_protocol::messages::ApiKey {
    kafka_protocol::messages::ApiKey::try_from(key).unwrap()
}

pub fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}
