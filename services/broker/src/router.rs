//! The request router: one table, [`ROUTES`], of every API this broker answers, the versions
//! it implements and the handler behind it. ApiVersions is derived from the table, so it
//! lists exactly what the handlers implement, and quota throttling is one wrapper
//! ([`serve`]) around every handler: byte quotas for produce and fetch, the request-time
//! quota for everything a client asks but ApiVersions and the SASL exchange.

use std::future::Future;

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use kafka_protocol::messages::{self, ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::connection::ConnectionError;
use crate::handler;
use crate::quota::{micros, throttle_ms, timed_polls, Metered, TenantQuotas};
use crate::sasl::Session;
use crate::scope::{Scope, Tenancy};
use crate::tenants::Tenant;
use crate::Broker;
use std::sync::Arc;

/// What the connection sends back.
pub(crate) enum Reply<'a> {
    Response(Bytes),
    /// `acks=0` produce: no response at all.
    None,
    /// An answer that is still waiting (an `acks=all` produce on the ISR): the connection
    /// reads and handles its next requests meanwhile and sends this answer in its turn.
    Later(BoxFuture<'a, Result<Bytes, ConnectionError>>),
}

/// A handler's answer: ready, or still waiting on something the connection's next
/// requests need not wait for.
pub(crate) enum Answer<'a, R> {
    Now(R),
    Later(BoxFuture<'a, R>),
}

/// One request, decoded past its header.
pub(crate) struct Call<'a> {
    pub broker: &'a Broker,
    pub version: i16,
    pub client_id: kafka_protocol::protocol::StrBytes,
    pub peer: &'a str,
    /// The connection's listener and authentication.
    pub session: &'a Session,
    /// Whose names the request speaks.
    pub scope: Scope,
    /// The tenant it acts for: its bindings and quotas (none for the cluster's traffic).
    pub tenant: Arc<Tenant>,
    correlation_id: i32,
}

impl<'a> Call<'a> {
    /// What this request's principal may do; another broker of the cluster, or a gateway,
    /// is held to no ACLs (the gateway checks its own callers').
    pub(crate) fn access(&self) -> crate::authz::Access<'_> {
        let principal = self
            .session
            .principal()
            .filter(|_| !self.session.is_trusted());
        crate::authz::Access::new(self.broker, &self.tenant, &self.scope, principal, self.peer)
    }

    /// Whether the request comes from another broker of the cluster, proven by its
    /// controller credential: the inter-broker APIs are answered for it alone, never for a
    /// client, whatever its listener, principal or ACLs.
    pub(crate) fn is_from_broker(&self) -> bool {
        self.session.is_cluster()
    }

    /// Whether the request may speak as follower `replica`: it comes from another broker,
    /// and that broker's credential names `replica` (or any node).
    pub(crate) fn is_follower(&self, replica: i32) -> bool {
        self.is_from_broker()
            && self
                .session
                .broker_node()
                .is_none_or(|node| node == replica)
    }

    /// The tenant the request acts for, by name ([`Broker::tenant_of`]).
    pub(crate) fn tenant_name(&self) -> Option<&str> {
        self.broker.tenant_of(&self.scope)
    }
}

/// A Kafka API: its message types, the versions answered and the handler.
pub(crate) trait Api {
    type Request: Decodable + Send + 'static;
    type Response: Encodable + Send + Throttle + 'static;
    const KEY: ApiKey;
    /// Lowest and highest version answered.
    const VERSIONS: (i16, i16);
    /// The byte quota the API is metered against, if any.
    const METERED: Option<Metered> = None;
    /// Whether the request-time quota leaves the API alone: what a client must be able to
    /// send however far over its quota it is (ApiVersions, and the SASL exchange that
    /// re-authenticates its connection), as Kafka exempts them.
    const EXEMPT_FROM_REQUEST_TIME: bool = false;

    /// The answer; `None` sends nothing back (produce with `acks=0`).
    fn handle<'a>(
        call: &'a Call<'a>,
        request: Self::Request,
    ) -> impl Future<Output = Option<Self::Response>> + Send + 'a;

    /// The answer as the connection takes it: what [`Api::handle`] answers, now, unless the
    /// API lets part of it wait beside the connection's next requests.
    fn answer<'c, 'a: 'c>(
        call: &'c Call<'a>,
        request: Self::Request,
    ) -> impl Future<Output = Option<Answer<'a, Self::Response>>> + Send + 'c {
        async move { Self::handle(call, request).await.map(Answer::Now) }
    }

    /// Whether this request counts against the quotas (a follower's fetch, the cluster's
    /// own traffic, does not).
    fn is_metered(_request: &Self::Request) -> bool {
        true
    }

    /// The bytes a metered call charges: the request's size or the answer's records.
    fn charged(_request_bytes: usize, _response: Option<&Self::Response>) -> u64 {
        0
    }
}

/// An answer's `throttle_time_ms`, where its message has one.
pub(crate) trait Throttle {
    fn set_throttle_ms(&mut self, ms: i32);
}

macro_rules! throttle_time_ms {
    ($($response:ty),* $(,)?) => {
        $(impl Throttle for $response {
            fn set_throttle_ms(&mut self, ms: i32) {
                self.throttle_time_ms = ms;
            }
        })*
    };
}

throttle_time_ms!(
    messages::AddOffsetsToTxnResponse,
    messages::AddPartitionsToTxnResponse,
    messages::AlterConfigsResponse,
    messages::AlterPartitionReassignmentsResponse,
    messages::AlterUserScramCredentialsResponse,
    messages::ApiVersionsResponse,
    messages::CreateAclsResponse,
    messages::CreatePartitionsResponse,
    messages::CreateTopicsResponse,
    messages::DeleteAclsResponse,
    messages::DeleteGroupsResponse,
    messages::DeleteRecordsResponse,
    messages::DeleteTopicsResponse,
    messages::DescribeAclsResponse,
    messages::DescribeClusterResponse,
    messages::DescribeConfigsResponse,
    messages::DescribeGroupsResponse,
    messages::DescribeLogDirsResponse,
    messages::DescribeTopicPartitionsResponse,
    messages::DescribeProducersResponse,
    messages::DescribeTransactionsResponse,
    messages::DescribeUserScramCredentialsResponse,
    messages::EndTxnResponse,
    messages::ElectLeadersResponse,
    messages::FetchResponse,
    messages::FindCoordinatorResponse,
    messages::HeartbeatResponse,
    messages::IncrementalAlterConfigsResponse,
    messages::InitProducerIdResponse,
    messages::JoinGroupResponse,
    messages::LeaveGroupResponse,
    messages::ListGroupsResponse,
    messages::ListOffsetsResponse,
    messages::ListTransactionsResponse,
    messages::ListPartitionReassignmentsResponse,
    messages::MetadataResponse,
    messages::OffsetCommitResponse,
    messages::OffsetDeleteResponse,
    messages::OffsetFetchResponse,
    messages::OffsetForLeaderEpochResponse,
    messages::ProduceResponse,
    messages::SyncGroupResponse,
    messages::TxnOffsetCommitResponse,
);

/// Between brokers only: no quota applies, and the message has no throttle time.
impl Throttle for messages::WriteTxnMarkersResponse {
    fn set_throttle_ms(&mut self, _ms: i32) {}
}

/// The SASL messages have no throttle time (their APIs are exempt).
impl Throttle for messages::SaslHandshakeResponse {
    fn set_throttle_ms(&mut self, _ms: i32) {}
}

impl Throttle for messages::SaslAuthenticateResponse {
    fn set_throttle_ms(&mut self, _ms: i32) {}
}

type Serve = for<'a> fn(Call<'a>, Bytes) -> BoxFuture<'a, Result<Reply<'a>, ConnectionError>>;

/// One row of the table.
pub(crate) struct Route {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
    serve: Serve,
}

impl Route {
    const fn of<A: Api + 'static>() -> Self {
        Self {
            key: A::KEY,
            min: A::VERSIONS.0,
            max: A::VERSIONS.1,
            serve: boxed::<A>,
        }
    }
}

fn boxed<'a, A: Api + 'static>(
    call: Call<'a>,
    body: Bytes,
) -> BoxFuture<'a, Result<Reply<'a>, ConnectionError>> {
    Box::pin(serve::<A>(call, body))
}

/// Every API this broker answers.
pub(crate) static ROUTES: &[Route] = {
    use handler::{
        acls, admin, api_versions, configs, describe_topic_partitions, elect_leaders, fetch, group,
        init_producer_id, list_offsets, log_dirs, metadata, offset_for_leader_epoch, produce,
        reassignments, sasl, scram_credentials, transactions,
    };
    &[
        Route::of::<produce::Produce>(),
        Route::of::<fetch::Fetch>(),
        Route::of::<list_offsets::ListOffsets>(),
        Route::of::<metadata::Metadata>(),
        Route::of::<api_versions::ApiVersions>(),
        Route::of::<admin::CreateTopics>(),
        Route::of::<admin::DeleteTopics>(),
        Route::of::<admin::CreatePartitions>(),
        Route::of::<admin::DeleteRecords>(),
        Route::of::<admin::DescribeCluster>(),
        Route::of::<group::FindCoordinator>(),
        Route::of::<group::JoinGroup>(),
        Route::of::<group::SyncGroup>(),
        Route::of::<group::Heartbeat>(),
        Route::of::<group::LeaveGroup>(),
        Route::of::<group::OffsetCommit>(),
        Route::of::<group::OffsetFetch>(),
        Route::of::<group::ListGroups>(),
        Route::of::<group::DescribeGroups>(),
        Route::of::<init_producer_id::InitProducerId>(),
        Route::of::<transactions::AddPartitionsToTxn>(),
        Route::of::<transactions::AddOffsetsToTxn>(),
        Route::of::<transactions::EndTxn>(),
        Route::of::<transactions::TxnOffsetCommit>(),
        Route::of::<transactions::WriteTxnMarkers>(),
        Route::of::<transactions::DescribeTransactions>(),
        Route::of::<transactions::ListTransactions>(),
        Route::of::<transactions::DescribeProducers>(),
        Route::of::<configs::DescribeConfigs>(),
        Route::of::<configs::IncrementalAlterConfigs>(),
        Route::of::<configs::AlterConfigs>(),
        Route::of::<group::DeleteGroups>(),
        Route::of::<group::OffsetDelete>(),
        Route::of::<acls::DescribeAcls>(),
        Route::of::<acls::CreateAcls>(),
        Route::of::<acls::DeleteAcls>(),
        Route::of::<scram_credentials::DescribeUserScramCredentials>(),
        Route::of::<scram_credentials::AlterUserScramCredentials>(),
        Route::of::<offset_for_leader_epoch::OffsetForLeaderEpoch>(),
        Route::of::<log_dirs::DescribeLogDirs>(),
        Route::of::<describe_topic_partitions::DescribeTopicPartitions>(),
        Route::of::<elect_leaders::ElectLeaders>(),
        Route::of::<reassignments::AlterPartitionReassignments>(),
        Route::of::<reassignments::ListPartitionReassignments>(),
        Route::of::<sasl::SaslHandshake>(),
        Route::of::<sasl::SaslAuthenticate>(),
    ]
};

fn route(key: ApiKey) -> Option<&'static Route> {
    ROUTES.iter().find(|route| route.key == key)
}

/// Decodes the request header and hands the request to its route.
pub(crate) async fn dispatch<'a>(
    broker: &'a Broker,
    api_key: i16,
    version: i16,
    frame: Bytes,
    session: &'a Session,
) -> Result<Reply<'a>, ConnectionError> {
    let key = ApiKey::try_from(api_key).map_err(|()| ConnectionError::UnknownApiKey { api_key })?;
    let route = route(key).filter(|route| (route.min..=route.max).contains(&version));
    let Some(route) = route else {
        if key == ApiKey::ApiVersions {
            // Clients learn the supported range from this answer, in the v0 format every
            // client can read.
            let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            let body = handler::api_versions::unsupported_version();
            return encode(ApiKey::ApiVersions, 0, correlation_id, &body).map(Reply::Response);
        }
        return Err(ConnectionError::UnsupportedVersion { api_key, version });
    };
    let mut body = frame;
    let header = RequestHeader::decode(&mut body, key.request_header_version(version))
        .map_err(|e| malformed(key, version, e))?;
    let client_id = header.client_id.unwrap_or_default();
    let scope = scope_of(broker, session);
    let tenant = broker
        .tenant_of(&scope)
        .map_or_else(Arc::default, |name| broker.tenants.of(name));
    let call = Call {
        broker,
        version,
        client_id,
        peer: &session.peer,
        session,
        scope,
        tenant,
        correlation_id: header.correlation_id,
    };
    (route.serve)(call, body).await
}

/// Whose names a request on this session speaks. On a broker serving one tenant, that
/// tenant's plain names. On a broker serving every tenant, the names of the tenant the
/// session authenticated for; every tenant's for another broker of the cluster (which
/// authenticated with its controller credential); and otherwise none (`""` names no
/// tenant: tenant names have 1 to 63 characters).
fn scope_of(broker: &Broker, session: &Session) -> Scope {
    match broker.topics.tenancy() {
        Tenancy::One => Scope::Plain,
        Tenancy::Every if session.is_cluster() => Scope::Cluster,
        Tenancy::Every => match session.tenant() {
            Some(tenant) => Scope::Tenant(tenant.into()),
            None => Scope::Tenant("".into()),
        },
    }
}

/// Decodes the request, holds it back while a quota it counts against is in debt, handles
/// it, charges what it moved and the time it took, and encodes the answer with the throttle
/// time that leaves.
async fn serve<'a, A: Api>(call: Call<'a>, mut body: Bytes) -> Result<Reply<'a>, ConnectionError> {
    let request_bytes = body.len();
    let decoding_started = std::time::Instant::now();
    let request = A::Request::decode(&mut body, call.version)
        .map_err(|e| malformed(A::KEY, call.version, e))?;
    let decoding = decoding_started.elapsed();
    let counted = A::is_metered(&request);
    let bytes = A::METERED.filter(|_| counted);
    let timed = counted && !A::EXEMPT_FROM_REQUEST_TIME;
    // The tenant's quotas, and an authenticated principal's own beside them.
    let own = call
        .session
        .principal()
        .and_then(|principal| call.tenant.principal_quotas.of(&principal.name));
    let quotas: [Option<&TenantQuotas>; 2] = [Some(&call.tenant.quotas), own.as_deref()];
    let meters = [bytes, timed.then_some(Metered::RequestTime)];
    // Over a quota, the call waits here: that holds its connection back, as Kafka mutes a
    // throttled channel.
    let hold = meters
        .iter()
        .flatten()
        .flat_map(|m| quotas.iter().flatten().map(|q| q.debt(*m)))
        .max()
        .unwrap_or_default();
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
    let started = std::time::Instant::now();
    let (answer, handling) = timed_polls(A::answer(&call, request)).await;
    let (broker, version, correlation_id) = (call.broker, call.version, call.correlation_id);
    let took = move || {
        let took = decoding + started.elapsed();
        broker.metrics.request(A::KEY, took.as_secs_f64());
    };
    // Handled, then charged: the throttle applies to what comes next. An answer still
    // waiting is charged now, by what its request carried.
    let ready = match &answer {
        Some(Answer::Now(response)) => Some(response),
        _ => None,
    };
    let mut throttle = std::time::Duration::ZERO;
    if let Some(metered) = bytes {
        let charged = A::charged(request_bytes, ready);
        for quota in quotas.iter().flatten() {
            throttle = throttle.max(quota.charge(metered, charged));
        }
    }
    if timed {
        let busy = micros(decoding + handling);
        for quota in quotas.iter().flatten() {
            throttle = throttle.max(quota.charge(Metered::RequestTime, busy));
        }
    }
    if let Some(tenant) = call.broker.tenant_of(&call.scope) {
        call.broker
            .metrics
            .throttled(tenant, throttle.as_secs_f64());
    }
    let throttle_ms = throttle_ms(throttle);
    match answer {
        Some(Answer::Now(mut response)) => {
            took();
            response.set_throttle_ms(throttle_ms);
            encode(A::KEY, version, correlation_id, &response).map(Reply::Response)
        }
        Some(Answer::Later(waiting)) => Ok(Reply::Later(Box::pin(async move {
            let mut response = waiting.await;
            took();
            response.set_throttle_ms(throttle_ms);
            encode(A::KEY, version, correlation_id, &response)
        }))),
        None => {
            took();
            Ok(Reply::None)
        }
    }
}

/// The versions of every routed API, for ApiVersions.
pub(crate) fn versions() -> impl Iterator<Item = (ApiKey, i16, i16)> {
    ROUTES.iter().map(|route| (route.key, route.min, route.max))
}

fn malformed(key: ApiKey, version: i16, e: anyhow::Error) -> ConnectionError {
    ConnectionError::Malformed {
        api_key: key as i16,
        version,
        reason: e.to_string(),
    }
}

fn encode<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Result<Bytes, ConnectionError> {
    let mut out = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut out, key.response_header_version(version))
        .map_err(|e| malformed(key, version, e))?;
    body.encode(&mut out, version)
        .map_err(|e| malformed(key, version, e))?;
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_has_one_route_with_an_ordered_version_range() {
        let mut keys: Vec<i16> = ROUTES.iter().map(|route| route.key as i16).collect();
        let count = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), count, "an API is routed twice");
        for route in ROUTES {
            assert!(route.min <= route.max, "{:?}", route.key);
            assert!(
                route.max <= route.key.valid_versions().max,
                "{:?}",
                route.key
            );
        }
    }
}
