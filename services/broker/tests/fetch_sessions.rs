//! Fetch sessions (KIP-227) over TCP: a full fetch opens a session, incremental fetches
//! carry and return only what changed, and stale or unknown sessions get their error codes.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    FetchRequest, FetchResponse, ProduceRequest, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use skein_log::batch::{build_batch, Compression, NewRecord, ProducerFields};

use common::TestBroker;

struct Client {
    stream: TcpStream,
    next_id: i32,
}

impl Client {
    fn connect(broker: &TestBroker) -> Self {
        let stream = TcpStream::connect(broker.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Self { stream, next_id: 1 }
    }

    fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: i16,
        version: i16,
        request: &Req,
    ) -> Resp {
        let id = self.next_id;
        self.next_id += 1;
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_correlation_id(id)
            .encode(&mut frame, 1)
            .unwrap();
        request.encode(&mut frame, version).unwrap();
        self.stream
            .write_all(&(frame.len() as i32).to_be_bytes())
            .unwrap();
        self.stream.write_all(&frame).unwrap();
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut body).unwrap();
        let mut body = Bytes::from(body);
        assert_eq!(
            ResponseHeader::decode(&mut body, 0).unwrap().correlation_id,
            id
        );
        Resp::decode(&mut body, version).unwrap()
    }

    fn produce(&mut self, topic: &str, partition: i32, value: &str) {
        let record = NewRecord {
            key: None,
            value: Some(value.as_bytes().to_vec()),
            headers: Vec::new(),
            timestamp: 1,
        };
        let batch = build_batch(&[record], Compression::None, ProducerFields::NONE).unwrap();
        let request = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(Bytes::from(batch)))])]);
        let _: kafka_protocol::messages::ProduceResponse = self.call(0, 7, &request);
    }

    fn fetch(&mut self, session_id: i32, epoch: i32, partitions: &[(i32, i64)]) -> FetchResponse {
        let request = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(1 << 20)
            .with_session_id(session_id)
            .with_session_epoch(epoch)
            .with_topics(if partitions.is_empty() {
                Vec::new()
            } else {
                vec![FetchTopic::default()
                    .with_topic(name("sessions"))
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|(p, offset)| {
                                FetchPartition::default()
                                    .with_partition(*p)
                                    .with_fetch_offset(*offset)
                                    .with_partition_max_bytes(1 << 20)
                            })
                            .collect(),
                    )]
            });
        self.call(1, 11, &request)
    }
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// (partition, number of record bytes) of each partition in a response.
fn partitions(response: &FetchResponse) -> Vec<(i32, usize)> {
    response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.records.as_ref().map_or(0, Bytes::len)))
        .collect()
}

#[test]
fn incremental_fetches_carry_only_what_changed() {
    let broker = TestBroker::start();
    broker
        .broker
        .as_ref()
        .unwrap()
        .topics
        .create("sessions", 3)
        .unwrap();
    let mut client = Client::connect(&broker);
    for p in 0..3 {
        client.produce("sessions", p, "first");
    }
    // A full fetch opens the session and answers for every partition.
    let full = client.fetch(0, 0, &[(0, 0), (1, 0), (2, 0)]);
    assert_eq!(full.error_code, 0);
    let session = full.session_id;
    assert!(session > 0);
    assert_eq!(partitions(&full).len(), 3);
    // Nothing new: the incremental answer is empty (positions moved past what was read).
    let quiet = client.fetch(session, 1, &[(0, 1), (1, 1), (2, 1)]);
    assert_eq!(quiet.session_id, session);
    assert!(partitions(&quiet).is_empty(), "{:?}", partitions(&quiet));
    // New data in one partition: only it comes back, with no partition named in the request.
    client.produce("sessions", 1, "second");
    let one = client.fetch(session, 2, &[]);
    let got = partitions(&one);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 1);
    assert!(got[0].1 > 0);
    // A stale epoch and an unknown session get their errors.
    assert_eq!(
        client.fetch(session, 2, &[]).error_code,
        71,
        "INVALID_FETCH_SESSION_EPOCH"
    );
    assert_eq!(
        client.fetch(987_654, 1, &[]).error_code,
        70,
        "FETCH_SESSION_ID_NOT_FOUND"
    );
    // Epoch -1 closes the session and fetches without one.
    let sessionless = client.fetch(session, -1, &[(0, 0)]);
    assert_eq!(sessionless.session_id, 0);
    assert_eq!(partitions(&sessionless).len(), 1);
    assert_eq!(client.fetch(session, 3, &[]).error_code, 70);
}
