//! The gateway's gRPC API as tests call it, through tonic's client.

use std::collections::BTreeMap;
use std::time::Duration;

use skein_proto::gateway as pb;
use skein_proto::gateway::gateway_client::GatewayClient;
pub use tokio::sync::mpsc;
pub use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

pub async fn client(address: &str) -> GatewayClient<Channel> {
    GatewayClient::connect(format!("http://{address}"))
        .await
        .unwrap()
}

pub fn authorized<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

/// An open Consume stream: send with `requests`, read from `responses`.
pub struct Stream {
    pub requests: mpsc::Sender<pb::ConsumeRequest>,
    pub responses: tonic::Streaming<pb::ConsumeResponse>,
}

pub async fn consume(
    client: &mut GatewayClient<Channel>,
    token: &str,
    subscribe: pb::Subscribe,
) -> Result<Stream, tonic::Status> {
    let (requests, receiver) = mpsc::channel(16);
    requests
        .send(pb::ConsumeRequest {
            kind: Some(pb::consume_request::Kind::Subscribe(subscribe)),
        })
        .await
        .unwrap();
    let responses = client
        .consume(authorized(ReceiverStream::new(receiver), token))
        .await?
        .into_inner();
    Ok(Stream {
        requests,
        responses,
    })
}

impl Stream {
    /// The next message that is not a watermark update, or `None` after `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<pb::consume_response::Kind> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let message = tokio::time::timeout_at(deadline, self.responses.message())
                .await
                .ok()?
                .unwrap()?;
            match message.kind {
                Some(pb::consume_response::Kind::Watermarks(_)) | None => {}
                other => return other,
            }
        }
    }

    /// The status the stream ends with, skipping what comes before it; fails after
    /// `wait`, or if the stream ends without one.
    pub async fn end(&mut self, wait: Duration) -> tonic::Status {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.responses.message()).await {
                Err(_) => panic!("the stream was still open after {wait:?}"),
                Ok(Ok(Some(_))) => {}
                Ok(Ok(None)) => panic!("the stream ended without a status"),
                Ok(Err(status)) => return status,
            }
        }
    }

    pub async fn commit(&self, generation: i32, offsets: &BTreeMap<i32, i64>) {
        let commit = pb::Commit {
            offsets: offsets
                .iter()
                .map(|(p, o)| pb::PartitionOffset {
                    partition: *p,
                    offset: *o,
                })
                .collect(),
            generation,
            acknowledge_only: false,
        };
        self.requests
            .send(pb::ConsumeRequest {
                kind: Some(pb::consume_request::Kind::Commit(commit)),
            })
            .await
            .unwrap();
    }
}

/// A ProduceStream sending `records` to `topic` with sequences from 0, then closing its
/// side; answers the reports.
pub async fn produce_stream(
    client: &mut GatewayClient<Channel>,
    token: &str,
    topic: &str,
    records: Vec<pb::Record>,
) -> tonic::Streaming<pb::ProduceReport> {
    let requests: Vec<pb::ProduceStreamRequest> = records
        .into_iter()
        .zip(0_u64..)
        .map(|(record, sequence)| pb::ProduceStreamRequest {
            topic: topic.to_owned(),
            sequence,
            record: Some(record),
        })
        .collect();
    client
        .produce_stream(authorized(tokio_stream::iter(requests), token))
        .await
        .unwrap()
        .into_inner()
}

pub fn group(topic: &str, group: &str, records: u32) -> pb::Subscribe {
    pb::Subscribe {
        topic: topic.to_owned(),
        mode: Some(pb::subscribe::Mode::Group(pb::GroupSubscription {
            group_id: group.to_owned(),
            start: pb::StartFrom::Earliest as i32,
        })),
        isolation: pb::Isolation::ReadCommitted as i32,
        credit: Some(pb::Credit { records, bytes: 0 }),
    }
}

pub fn record(key: &str, value: &str) -> pb::Record {
    pb::Record {
        key: Some(key.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
        ..Default::default()
    }
}
