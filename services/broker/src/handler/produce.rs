//! Produce: append each partition's batches to its log; every partition answers for itself.

use skein_auth::Operation;

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use std::time::Duration;

use skein_log::LogError;
use tokio::time::Instant;

use super::partition_error_code;
use crate::quota::Metered;
use crate::replica::{Acknowledgement, PartitionError, Replicated};
use crate::router::{Answer, Api, Call};

/// The longest an `acks=all` produce waits for the ISR, whatever its `timeout_ms` says.
const MAX_ACKS_WAIT: Duration = Duration::from_secs(300);

/// Writes each partition's batches, in request order, and answers. An `acks=all` answer
/// is [`Answer::Later`]: it waits for the ISR beside the connection's next requests, which
/// are written meanwhile, so a pipelining producer's requests share replication rounds.
pub(crate) async fn answer<'c, 'a: 'c>(
    call: &'c Call<'a>,
    request: ProduceRequest,
) -> Answer<'a, ProduceResponse> {
    let (broker, access, version) = (call.broker, call.access(), call.version);
    // A transactional write needs WRITE on its transactional id, or nothing is written.
    let transaction_denied = request
        .transactional_id
        .as_ref()
        .is_some_and(|id| !access.transactional_id(Operation::Write, id.as_str()));
    // The client's timeout, but no more than MAX_ACKS_WAIT: an acks=all request holds its
    // bytes while it waits.
    let wait = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    let deadline = Instant::now() + wait.min(MAX_ACKS_WAIT);
    let mut responses = Vec::with_capacity(request.topic_data.len());
    // acks=all answers wait for the ISR: ((topic, partition) index in the answer, the wait).
    let mut waiting: Vec<((usize, usize), Acknowledgement<'a>)> = Vec::new();
    for topic in request.topic_data {
        let name = topic.name.0.as_str().to_owned();
        // Kafka: "Cannot append to internal topic". Only the coordinators write there.
        let internal = crate::topics::is_internal(&name);
        // Kafka answers an unauthorized topic so whether or not it exists.
        let denied = if transaction_denied {
            Some(ResponseError::TransactionalIdAuthorizationFailed)
        } else if !access.topic(Operation::Write, &name) {
            Some(ResponseError::TopicAuthorizationFailed)
        } else {
            None
        };
        let kept = call.scope.qualify(&name);
        if denied.is_none() && !internal && !broker.topics.contains(&kept) {
            // A topic created a moment ago elsewhere is known before it is refused.
            let _ = broker.topics.lookup(&kept).await;
        }
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let answer = PartitionProduceResponse::default()
                .with_index(data.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            if let Some(denied) = denied {
                partitions.push(answer.with_error_code(denied.code()));
                continue;
            }
            if internal {
                partitions
                    .push(answer.with_error_code(ResponseError::InvalidTopicException.code()));
                continue;
            }
            let partition = match broker.replicas.leader(&kept, data.index, -1) {
                Ok(partition) => partition,
                Err(e) => {
                    partitions.push(refused(answer, &name, data.index, &e, version));
                    continue;
                }
            };
            // A tenant whose logs take its storage quota on this broker writes no more here.
            // The quota first: without one, nothing more is looked up.
            let refusal =
                call.tenant.quotas.storage_bytes().and_then(|quota| {
                    crate::storage::refusal(broker.storage.held(&kept), Some(quota))
                });
            if let Some(reason) = refusal {
                tracing::debug!(%name, partition = data.index, %reason, "produce refused");
                let answer = answer.with_error_code(ResponseError::PolicyViolation.code());
                partitions.push(if version >= 8 {
                    answer.with_error_message(Some(StrBytes::from_string(reason)))
                } else {
                    answer
                });
                continue;
            }
            // A transactional batch is taken only once the producer's coordinator confirms
            // the partition is in its open transaction (once per transaction here).
            if let Some(records) = data.records.as_deref() {
                if let Err(e) =
                    verify_transactions(call, &request.transactional_id, &partition, records).await
                {
                    tracing::debug!(%name, partition = data.index, error = ?e, "transactional produce refused");
                    partitions.push(answer.with_error_code(e.code()));
                    continue;
                }
            }
            let span = append_span(&name, data.index, data.records.as_deref());
            let written = span.in_scope(|| {
                data.records
                    .as_deref()
                    .ok_or(PartitionError::Log(LogError::EmptyAppend))
                    .and_then(|records| partition.append_and_wait(records, request.acks, deadline))
            });
            if let Ok((appended, _)) = &written {
                span.record("messaging.kafka.offset", appended.base_offset);
            }
            drop(span);
            let answer = match written {
                Ok((appended, acknowledgement)) => {
                    broker.metrics.produced(
                        &kept,
                        appended.end_offset.saturating_sub(appended.base_offset) as u64,
                        data.records.as_ref().map_or(0, |r| r.len() as u64),
                    );
                    let answer = answer
                        .with_base_offset(appended.base_offset)
                        .with_log_append_time_ms(appended.log_append_time.unwrap_or(-1));
                    let answer = if version >= 5 {
                        answer.with_log_start_offset(appended.log_start_offset)
                    } else {
                        answer
                    };
                    if let Acknowledgement::OnReplication(_) = &acknowledgement {
                        waiting.push(((responses.len(), partitions.len()), acknowledgement));
                    }
                    answer
                }
                Err(e) => refused(answer, &name, data.index, &e, version),
            };
            partitions.push(answer);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partitions),
        );
    }
    let response = ProduceResponse::default().with_responses(responses);
    if waiting.is_empty() {
        return Answer::Now(response);
    }
    Answer::Later(Box::pin(acknowledged(response, waiting, version)))
}

/// The answer once every `acks=all` write in it is replicated, timed out or fenced.
async fn acknowledged(
    mut response: ProduceResponse,
    waiting: Vec<((usize, usize), Acknowledgement<'_>)>,
    version: i16,
) -> ProduceResponse {
    let (at, waits): (Vec<_>, Vec<_>) = waiting.into_iter().unzip();
    let outcomes = futures::future::join_all(waits.into_iter().map(Acknowledgement::outcome)).await;
    for ((t, p), replicated) in at.into_iter().zip(outcomes) {
        let answer = &mut response.responses[t].partition_responses[p];
        match replicated {
            Replicated::Done => {}
            Replicated::BelowMinInsync => {
                answer.error_code = ResponseError::NotEnoughReplicasAfterAppend.code();
            }
            Replicated::TimedOut => answer.error_code = ResponseError::RequestTimedOut.code(),
            Replicated::NotLeader { leader } => {
                answer.error_code = ResponseError::NotLeaderOrFollower.code();
                if version >= 10 {
                    answer.current_leader = super::leader_and_epoch(leader);
                }
            }
        }
    }
    response
}

/// How much of a batch's records are decompressed to find the first one's trace context.
const TRACE_DECODE_LIMIT: usize = 1 << 20;

/// While traces are exported, a span over one partition's append: the child of the trace
/// context (`traceparent` header) of its first record, so that a record's trace runs from
/// the request that wrote it through this broker.
fn append_span(topic: &str, partition: i32, records: Option<&[u8]>) -> tracing::Span {
    use skein_ops::telemetry;
    if !telemetry::enabled() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        "append",
        otel.name = %format!("append {topic}"),
        otel.kind = "server",
        messaging.system = "kafka",
        messaging.destination.name = %topic,
        messaging.destination.partition.id = partition,
        messaging.kafka.offset = tracing::field::Empty,
    );
    if let Some(traceparent) = records.and_then(first_traceparent) {
        telemetry::adopt(&span, [traceparent.as_slice()]);
    }
    span
}

/// The `traceparent` header of the first record of the first batch in `records`.
fn first_traceparent(records: &[u8]) -> Option<Vec<u8>> {
    use skein_log::batch::{BatchHeader, DecodedRecords};
    let header = BatchHeader::parse(records).ok()?;
    let decoded = DecodedRecords::decode(records.get(..header.size())?, TRACE_DECODE_LIMIT).ok()?;
    let first = decoded.iter().next()?.ok()?;
    let found = first.headers.iter().find_map(|(key, value)| {
        (key == Some(skein_ops::telemetry::TRACEPARENT.as_bytes()))
            .then_some(value)
            .flatten()
    });
    found.map(<[u8]>::to_vec)
}

/// Verifies, with the tenant's transaction coordinator, each transactional producer of
/// `records` not yet confirmed for this partition.
async fn verify_transactions(
    call: &Call<'_>,
    transactional_id: &Option<kafka_protocol::messages::TransactionalId>,
    partition: &crate::replica::Partition<'_>,
    records: &[u8],
) -> Result<(), ResponseError> {
    let unverified = partition.unverified_transactions(records);
    if unverified.is_empty() {
        return Ok(());
    }
    // Transactional records need the transactional id they belong to (as Kafka answers).
    let Some(id) = transactional_id else {
        return Err(ResponseError::TransactionalIdAuthorizationFailed);
    };
    let target = (partition.topic().to_owned(), partition.index());
    for producer in unverified {
        crate::txn::verify(call.broker, &call.scope, id.as_str(), producer, &target).await?;
        partition.set_transaction_verified(producer);
    }
    Ok(())
}

/// A partition's answer for a write it refused, naming the leader where one is known and
/// the version has the field.
fn refused(
    answer: PartitionProduceResponse,
    topic: &str,
    partition: i32,
    e: &PartitionError,
    version: i16,
) -> PartitionProduceResponse {
    let code = partition_error_code(e);
    tracing::debug!(%topic, partition, code, error = %e, "produce refused");
    let answer = answer.with_error_code(code);
    match (e, version) {
        (PartitionError::NotLeader { leader, .. }, 10..) => {
            answer.with_current_leader(super::leader_and_epoch(*leader))
        }
        // KIP-467: which records, and why.
        (PartitionError::InvalidRecords { records, reason }, 8..) => answer
            .with_record_errors(
                records
                    .iter()
                    .map(|&index| {
                        BatchIndexAndErrorMessage::default()
                            .with_batch_index(index)
                            .with_batch_index_error_message(Some(StrBytes::from_string(
                                reason.clone(),
                            )))
                    })
                    .collect(),
            )
            .with_error_message(Some(StrBytes::from_string(reason.clone()))),
        _ => answer,
    }
}

/// Produce versions 3 (the first with RecordBatch v2) to 12, metered by request bytes.
pub(crate) struct Produce;

impl Api for Produce {
    type Request = ProduceRequest;
    type Response = ProduceResponse;
    const KEY: ApiKey = ApiKey::Produce;
    const VERSIONS: (i16, i16) = (3, 12);
    const METERED: Option<Metered> = Some(Metered::ProduceBytes);

    async fn handle(call: &Call<'_>, request: ProduceRequest) -> Option<ProduceResponse> {
        match Self::answer(call, request).await? {
            Answer::Now(response) => Some(response),
            Answer::Later(waiting) => Some(waiting.await),
        }
    }

    async fn answer<'c, 'a: 'c>(
        call: &'c Call<'a>,
        request: ProduceRequest,
    ) -> Option<Answer<'a, ProduceResponse>> {
        let acks = request.acks;
        let answer = answer(call, request).await;
        (acks != 0).then_some(answer)
    }

    /// Written, then charged: what was sent counts, answered or not.
    fn charged(request_bytes: usize, _response: Option<&ProduceResponse>) -> u64 {
        request_bytes as u64
    }
}
