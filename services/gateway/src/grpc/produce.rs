//! Produce and ProduceStream: records become `ProduceRecord`s and go through the same write
//! path as REST (`crate::produce`). The stream reads ahead at most [`WINDOW`] records that
//! have no report yet, and at most its byte budget of them, counted as each message arrives
//! and before anything else is done with it, against the stream's own budget and the
//! gateway's for all streams (`ReadAheadBudget`); it writes what has arrived as one batch,
//! and reports each record in order.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use prost::Message;
use skein_client::{ProduceRecord, RecordHeader};
use skein_proto::gateway as pb;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use super::code;
use crate::call::Call;
use crate::error::GatewayError;
use crate::produce::{produce, Written};
use crate::Gateway;

/// The most records a stream reads ahead of their reports.
pub(super) const WINDOW: usize = 1024;

/// The most records one Produce call may carry.
pub(super) const MAX_RECORDS: usize = 10_000;

/// Bytes of messages read ahead and not yet reported, per stream and for the whole gateway.
#[derive(Debug, Clone)]
pub struct ReadAheadBudget {
    per_stream: u32,
    gateway_total: u32,
    gateway: Arc<Semaphore>,
}

impl ReadAheadBudget {
    /// `per_stream` bytes for each stream, `gateway` bytes for all of them together.
    pub fn new(per_stream: u32, gateway: u32) -> Self {
        Self {
            per_stream: per_stream.max(1),
            gateway_total: gateway.max(1),
            gateway: Arc::new(Semaphore::new(gateway.max(1) as usize)),
        }
    }
}

/// What one message read ahead holds of the budgets, given back once it is reported.
type Held = (OwnedSemaphorePermit, OwnedSemaphorePermit);

/// Takes `size` bytes of the stream's and the gateway's budgets, waiting while they are
/// spent (the client is then held back by HTTP/2 flow control); refuses a message larger
/// than either budget, which could never be taken.
async fn hold(
    stream: &Arc<Semaphore>,
    budget: &ReadAheadBudget,
    size: u32,
) -> Result<Held, Status> {
    if size > budget.per_stream || size > budget.gateway_total {
        return Err(Status::resource_exhausted(format!(
            "a message of {size} bytes is over the read-ahead budget of {} bytes",
            budget.per_stream.min(budget.gateway_total)
        )));
    }
    let refused = |_| Status::unavailable("the gateway is shutting down");
    let own = Arc::clone(stream)
        .acquire_many_owned(size)
        .await
        .map_err(refused)?;
    let shared = Arc::clone(&budget.gateway)
        .acquire_many_owned(size)
        .await
        .map_err(refused)?;
    Ok((own, shared))
}

fn record(record: pb::Record) -> ProduceRecord {
    ProduceRecord {
        key: record.key.map(Bytes::from),
        value: record.value.map(Bytes::from),
        headers: record
            .headers
            .into_iter()
            .map(|h| RecordHeader {
                key: h.key,
                value: h.value.map(Bytes::from),
            })
            .collect(),
        timestamp: record.timestamp,
        partition: record.partition,
    }
}

fn result(outcome: Result<Written, GatewayError>) -> pb::RecordResult {
    match outcome {
        Ok(w) => pb::RecordResult {
            partition: w.partition,
            offset: w.offset,
            timestamp: w.timestamp,
            code: 0,
            message: String::new(),
        },
        Err(e) => pb::RecordResult {
            partition: -1,
            offset: -1,
            timestamp: -1,
            code: code(&e),
            message: e.to_string(),
        },
    }
}

pub(super) async fn unary(
    gateway: &Gateway,
    call: &Call,
    request: pb::ProduceRequest,
    idempotency_key: Option<&str>,
) -> Result<Vec<pb::RecordResult>, Status> {
    if request.records.is_empty() || request.records.len() > MAX_RECORDS {
        return Err(Status::invalid_argument(format!(
            "send between 1 and {MAX_RECORDS} records"
        )));
    }
    let records = request.records.into_iter().map(|r| Ok(record(r))).collect();
    let produced = produce(gateway, call, &request.topic, records, idempotency_key).await?;
    Ok(produced.outcomes.into_iter().map(result).collect())
}

/// Why a ProduceStream's reader stopped before the client closed its side.
#[derive(Clone)]
enum ReadEnd {
    /// The gateway is shutting down.
    Stopping,
    /// The client's side broke off.
    Broken(Status),
}

pub(super) fn stream(
    gateway: Arc<Gateway>,
    call: Call,
    mut inbound: Streaming<pb::ProduceStreamRequest>,
) -> ReceiverStream<Result<pb::ProduceReport, Status>> {
    let (reports, receiver) = tokio::sync::mpsc::channel(WINDOW);
    let (queue, mut queued) =
        tokio::sync::mpsc::channel::<(pb::ProduceStreamRequest, Held)>(WINDOW);
    let stream_budget = Arc::new(Semaphore::new(gateway.read_ahead.per_stream as usize));
    // Reads ahead into a bounded queue: when it is full the client is held back by HTTP/2
    // flow control. It reads nothing more once the gateway begins to shut down.
    let reader_gateway = Arc::clone(&gateway);
    let read_end: Arc<Mutex<Option<ReadEnd>>> = Arc::default();
    let reader_end = Arc::clone(&read_end);
    tokio::spawn(async move {
        let end = loop {
            let next = tokio::select! {
                next = inbound.message() => next,
                () = reader_gateway.stopping() => break ReadEnd::Stopping,
            };
            match next {
                Ok(Some(message)) => {
                    let size = u32::try_from(message.encoded_len())
                        .unwrap_or(u32::MAX)
                        .max(1);
                    let held = match hold(&stream_budget, &reader_gateway.read_ahead, size).await {
                        Ok(held) => held,
                        Err(status) => break ReadEnd::Broken(status),
                    };
                    if queue.send((message, held)).await.is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(status) => break ReadEnd::Broken(status),
            }
        };
        // Set before `queue` is dropped, so the writer sees it before the queue's end.
        *reader_end.lock() = Some(end);
    });
    tokio::spawn(async move {
        while let Some(first) = queued.recv().await {
            // What was read ahead is written and reported when the gateway is stopping; when
            // the client's side broke, no report could reach it, so nothing more is written
            // (the client resends what has no report).
            let end = read_end.lock().clone();
            if let Some(ReadEnd::Broken(status)) = end {
                let _ = reports.send(Err(status)).await;
                return;
            }
            // The credential is checked again before every batch, and the ACLs on the
            // cluster as it is now.
            let now = match call.current(&gateway) {
                Ok(now) => now,
                Err(e) => {
                    let _ = reports
                        .send(Err(Status::unauthenticated(format!(
                            "{e}; reconnect with a new credential and resend the records \
                             that have no report"
                        ))))
                        .await;
                    return;
                }
            };
            let mut batch = vec![first];
            while batch.len() < WINDOW {
                match queued.try_recv() {
                    Ok(message) => batch.push(message),
                    Err(_) => break,
                }
            }
            // Consecutive records for the same topic go out together, in order.
            let mut start = 0;
            while start < batch.len() {
                let topic = batch[start].0.topic.clone();
                let end = batch[start..]
                    .iter()
                    .position(|(m, _)| m.topic != topic)
                    .map_or(batch.len(), |n| start + n);
                let sequences: Vec<u64> =
                    batch[start..end].iter().map(|(m, _)| m.sequence).collect();
                let records: Vec<Result<ProduceRecord, GatewayError>> = batch[start..end]
                    .iter_mut()
                    .map(|(m, _)| {
                        m.record.take().map(record).ok_or_else(|| {
                            GatewayError::Invalid("the message has no record".to_owned())
                        })
                    })
                    .collect();
                let outcomes = match produce(&gateway, &now, &topic, records, None).await {
                    Ok(produced) => produced.outcomes,
                    Err(e) => vec![Err(e); sequences.len()],
                };
                for (sequence, outcome) in sequences.into_iter().zip(outcomes) {
                    let report = pb::ProduceReport {
                        sequence,
                        result: Some(result(outcome)),
                    };
                    if reports.send(Ok(report)).await.is_err() {
                        return;
                    }
                }
                start = end;
            }
        }
        let end = read_end.lock().clone();
        match end {
            None => {}
            Some(ReadEnd::Broken(status)) => {
                let _ = reports.send(Err(status)).await;
            }
            // The client may have more to send: tell it to send that elsewhere.
            Some(ReadEnd::Stopping) => {
                let _ = reports
                    .send(Err(Status::unavailable(
                        "the gateway is shutting down; reconnect and send the records that \
                         have no report",
                    )))
                    .await;
            }
        }
    });
    ReceiverStream::new(receiver)
}

#[cfg(test)]
mod budget_tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn read_ahead_waits_past_the_streams_and_the_gateways_budget() {
        const MIB: u32 = 1024 * 1024;
        let budget = ReadAheadBudget::new(2 * MIB, 3 * MIB);
        let first = Arc::new(Semaphore::new(2 * MIB as usize));
        let second = Arc::new(Semaphore::new(2 * MIB as usize));
        let wait = Duration::from_millis(100);
        // The stream's own budget: a third MiB waits until one is reported.
        let a = hold(&first, &budget, MIB).await.unwrap();
        let _b = hold(&first, &budget, MIB).await.unwrap();
        assert!(tokio::time::timeout(wait, hold(&first, &budget, MIB))
            .await
            .is_err());
        // The gateway's: another stream gets one MiB of the three, then waits.
        let _c = hold(&second, &budget, MIB).await.unwrap();
        assert!(tokio::time::timeout(wait, hold(&second, &budget, MIB))
            .await
            .is_err());
        drop(a);
        let _d = tokio::time::timeout(wait, hold(&second, &budget, MIB))
            .await
            .unwrap()
            .unwrap();
        // A message no budget could ever hold is refused rather than waited for.
        let refused = hold(&first, &budget, 4 * MIB).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    }
}
