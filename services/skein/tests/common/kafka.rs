//! Kafka requests built with `kafka-protocol` and sent as raw frames, for what no client
//! library will send: batches crafted to attack the broker.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse,
    ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

pub struct RawKafka {
    stream: TcpStream,
    next_id: i32,
}

pub fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

impl RawKafka {
    pub fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Self { stream, next_id: 1 }
    }

    /// Sends one request and reads its response.
    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Resp {
        let id = self.send(key, version, request);
        self.receive(key, version, id)
    }

    /// Sends one request without reading its response; answers its correlation id.
    pub fn send<Req: Encodable>(&mut self, key: ApiKey, version: i16, request: &Req) -> i32 {
        let id = self.next_id;
        self.next_id += 1;
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(id)
            .encode(&mut frame, key.request_header_version(version))
            .unwrap();
        request.encode(&mut frame, version).unwrap();
        let mut out = (frame.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&frame);
        self.stream.write_all(&out).unwrap();
        id
    }

    /// Whether a response has arrived that is not read yet.
    pub fn has_response(&mut self) -> bool {
        self.stream.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        let waiting = match self.stream.peek(&mut byte) {
            Ok(n) => n > 0,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(e) => panic!("peek: {e}"),
        };
        self.stream.set_nonblocking(false).unwrap();
        waiting
    }

    /// Reads the next response, which must answer request `id`.
    pub fn receive<Resp: Decodable>(&mut self, key: ApiKey, version: i16, id: i32) -> Resp {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut body).unwrap();
        let mut body = Bytes::from(body);
        let header =
            ResponseHeader::decode(&mut body, key.response_header_version(version)).unwrap();
        assert_eq!(header.correlation_id, id);
        Resp::decode(&mut body, version).unwrap()
    }

    /// Authenticates with SASL/PLAIN as `username` (an API key id) with `password`; answers
    /// SaslAuthenticate's error code.
    pub fn authenticate(&mut self, username: &str, password: &str) -> i16 {
        use kafka_protocol::messages::{
            SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
            SaslHandshakeResponse,
        };
        let handshake: SaslHandshakeResponse = self.call(
            ApiKey::SaslHandshake,
            1,
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        );
        if handshake.error_code != 0 {
            return handshake.error_code;
        }
        let token = format!("\0{username}\0{password}");
        let answer: SaslAuthenticateResponse = self.call(
            ApiKey::SaslAuthenticate,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token.into_bytes())),
        );
        answer.error_code
    }

    /// Commits `offset` for `group` (as a client outside the group's generation, as an
    /// admin tool does) on one partition, with `metadata`; answers the partition's error.
    pub fn offset_commit(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        offset: i64,
        metadata: &str,
    ) -> i16 {
        use kafka_protocol::messages::offset_commit_request::{
            OffsetCommitRequestPartition, OffsetCommitRequestTopic,
        };
        use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetCommitResponse};
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::from_static_str(""))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)
                    .with_committed_metadata(Some(StrBytes::from_string(
                        metadata.to_owned(),
                    )))])]);
        let response: OffsetCommitResponse = self.call(ApiKey::OffsetCommit, 8, &request);
        response.topics[0].partitions[0].error_code
    }

    /// Produces `records` (batches as bytes) to one partition with acks=1; answers the
    /// partition's error code.
    pub fn produce(&mut self, topic: &str, partition: i32, records: Vec<u8>) -> i16 {
        let request = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(Bytes::from(records)))])]);
        let response: ProduceResponse = self.call(ApiKey::Produce, 7, &request);
        response.responses[0].partition_responses[0].error_code
    }

    /// A new idempotent (not transactional) producer's id and epoch.
    pub fn init_producer_id(&mut self) -> (i64, i16) {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1)
            .with_producer_id(kafka_protocol::messages::ProducerId(-1))
            .with_producer_epoch(-1);
        let response: InitProducerIdResponse = self.call(ApiKey::InitProducerId, 4, &request);
        assert_eq!(response.error_code, 0, "InitProducerId");
        (response.producer_id.0, response.producer_epoch)
    }

    /// The partition's latest offset (its high watermark).
    pub fn latest_offset(&mut self, topic: &str, partition: i32) -> i64 {
        self.list_offset(topic, partition, -1)
    }

    /// The partition's earliest offset (its log start).
    pub fn earliest_offset(&mut self, topic: &str, partition: i32) -> i64 {
        self.list_offset(topic, partition, -2)
    }

    /// The partition's latest offset, or the error code this broker answers instead (say
    /// NOT_LEADER_OR_FOLLOWER while leadership is moving to it).
    pub fn try_latest_offset(&mut self, topic: &str, partition: i32) -> Result<i64, i16> {
        let response = self.list_offsets(topic, partition, -1);
        let answer = &response.topics[0].partitions[0];
        match answer.error_code {
            0 => Ok(answer.offset),
            code => Err(code),
        }
    }

    fn list_offsets(&mut self, topic: &str, partition: i32, timestamp: i64) -> ListOffsetsResponse {
        let request = ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(timestamp)])]);
        self.call(ApiKey::ListOffsets, 5, &request)
    }

    fn list_offset(&mut self, topic: &str, partition: i32, timestamp: i64) -> i64 {
        let response = self.list_offsets(topic, partition, timestamp);
        let answer = &response.topics[0].partitions[0];
        assert_eq!(answer.error_code, 0, "ListOffsets of {topic}-{partition}");
        answer.offset
    }
}
