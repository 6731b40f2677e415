//! The API versions this client implements, and negotiation against a broker's ApiVersions
//! answer.
//!
//! Each range is what the request builders in this crate fill in correctly; it is narrower
//! than what kafka-protocol can encode where a newer version changes the request's shape
//! (Fetch v13+ and Produce v13+ name topics by id, OffsetFetch v8+ batches groups).

use std::collections::HashMap;

use kafka_protocol::messages::ApiKey;

/// `(api, min, max)` for every API this client sends.
pub(crate) const CLIENT_VERSIONS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 11),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 8),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::SaslHandshake, 1, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    // Between brokers: a transaction coordinator's markers, and a partition leader asking
    // the coordinator to verify a transaction (KIP-890's `verify_only` form only).
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::AddPartitionsToTxn, 4, 4),
];

/// This client's version range for an API.
pub(crate) fn client_range(api: ApiKey) -> Option<(i16, i16)> {
    CLIENT_VERSIONS
        .iter()
        .find(|(key, _, _)| *key == api)
        .map(|(_, min, max)| (*min, *max))
}

/// What a broker offers and what was agreed, per API.
#[derive(Clone, Debug, Default)]
pub(crate) struct NegotiatedVersions {
    broker: HashMap<i16, (i16, i16)>,
}

/// Why an API cannot be used with a broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NoCommonVersion {
    pub(crate) broker: Option<(i16, i16)>,
    pub(crate) client: (i16, i16),
}

impl NegotiatedVersions {
    /// From a broker's `(api key, min, max)` list.
    pub(crate) fn new(broker: impl IntoIterator<Item = (i16, i16, i16)>) -> Self {
        Self {
            broker: broker
                .into_iter()
                .map(|(key, min, max)| (key, (min, max)))
                .collect(),
        }
    }

    /// The version to use for an API: the highest both sides implement.
    pub(crate) fn pick(&self, api: ApiKey) -> Result<i16, NoCommonVersion> {
        let client = client_range(api).unwrap_or((0, -1));
        let broker = self.broker.get(&(api as i16)).copied();
        let Some((broker_min, broker_max)) = broker else {
            return Err(NoCommonVersion { broker, client });
        };
        let version = client.1.min(broker_max);
        if version < client.0 || version < broker_min {
            return Err(NoCommonVersion { broker, client });
        }
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_lower_of_the_two_maxima() {
        let versions = NegotiatedVersions::new([(ApiKey::Fetch as i16, 0, 17)]);
        assert_eq!(versions.pick(ApiKey::Fetch), Ok(12));
        let versions = NegotiatedVersions::new([(ApiKey::Fetch as i16, 4, 8)]);
        assert_eq!(versions.pick(ApiKey::Fetch), Ok(8));
    }

    #[test]
    fn no_overlap_is_an_error() {
        let versions = NegotiatedVersions::new([(ApiKey::Fetch as i16, 13, 17)]);
        assert_eq!(
            versions.pick(ApiKey::Fetch),
            Err(NoCommonVersion {
                broker: Some((13, 17)),
                client: (4, 12)
            })
        );
        assert!(versions.pick(ApiKey::Produce).is_err());
    }

    #[test]
    fn client_ranges_fit_kafka_protocol() {
        use kafka_protocol::messages::*;
        use kafka_protocol::protocol::Message;
        fn within<M: Message>(api: ApiKey) {
            let (min, max) = client_range(api).unwrap();
            assert!(M::VERSIONS.min <= min && max <= M::VERSIONS.max, "{api:?}");
        }
        within::<ProduceRequest>(ApiKey::Produce);
        within::<FetchRequest>(ApiKey::Fetch);
        within::<ListOffsetsRequest>(ApiKey::ListOffsets);
        within::<MetadataRequest>(ApiKey::Metadata);
        within::<OffsetCommitRequest>(ApiKey::OffsetCommit);
        within::<OffsetFetchRequest>(ApiKey::OffsetFetch);
        within::<FindCoordinatorRequest>(ApiKey::FindCoordinator);
        within::<JoinGroupRequest>(ApiKey::JoinGroup);
        within::<HeartbeatRequest>(ApiKey::Heartbeat);
        within::<LeaveGroupRequest>(ApiKey::LeaveGroup);
        within::<SyncGroupRequest>(ApiKey::SyncGroup);
        within::<ApiVersionsRequest>(ApiKey::ApiVersions);
        within::<CreateTopicsRequest>(ApiKey::CreateTopics);
        within::<DeleteTopicsRequest>(ApiKey::DeleteTopics);
        within::<DescribeConfigsRequest>(ApiKey::DescribeConfigs);
        within::<CreatePartitionsRequest>(ApiKey::CreatePartitions);
        within::<SaslHandshakeRequest>(ApiKey::SaslHandshake);
        within::<SaslAuthenticateRequest>(ApiKey::SaslAuthenticate);
    }
}
