//! The sizes a client chooses and the broker keeps, each bounded here by a limit the broker
//! sets, with Kafka's name where Kafka has one: a name or a string stored per group, member,
//! producer or commit never grows the shared broker by what the client declares.

/// `offset.metadata.max.bytes`: the longest metadata string an offset commit may carry
/// (Kafka's default); a longer one is answered OFFSET_METADATA_TOO_LARGE and not stored.
pub const OFFSET_METADATA_MAX_BYTES: usize = 4096;

/// The longest group id, in bytes: a longer one is answered INVALID_GROUP_ID by every API
/// that would keep state under it.
pub const MAX_GROUP_ID_BYTES: usize = 255;

/// The longest transactional id, in bytes: a longer one is answered INVALID_REQUEST.
pub const MAX_TRANSACTIONAL_ID_BYTES: usize = 255;

/// The longest member id or group instance id, in bytes (a broker-made member id is a
/// client id and a UUID): a longer one is answered INVALID_REQUEST.
pub const MAX_MEMBER_ID_BYTES: usize = 512;

/// The most consumer groups one tenant keeps state for (members, or committed offsets); a
/// new group past it is answered POLICY_VIOLATION until idle ones expire.
pub const MAX_GROUPS_PER_TENANT: usize = 10_000;

/// The most members (and members waiting to rejoin with the id they were given) one group
/// holds; one more is answered GROUP_MAX_SIZE_REACHED (Kafka's `group.max.size`).
pub const MAX_MEMBERS_PER_GROUP: usize = 1000;

/// The longest client id kept, in bytes: a longer one is cut to this length where the
/// broker keeps it (group members, metric labels), as the request itself is bounded.
pub const MAX_CLIENT_ID_BYTES: usize = 255;

/// The floors a client's topic configs are held to on a broker serving every tenant
/// (`BrokerConfig::client_topic_floors`): a topic that rolls a segment for every record
/// fills the volume every tenant shares with files, so `segment.ms` and `segment.bytes` below these are refused (POLICY_VIOLATION),
/// as Confluent Cloud holds `segment.ms` to 10 minutes at least.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicConfigFloors {
    pub segment_ms: i64,
    pub segment_bytes: u64,
}

impl Default for TopicConfigFloors {
    fn default() -> Self {
        Self {
            segment_ms: 600_000,
            segment_bytes: 1024 * 1024,
        }
    }
}

impl TopicConfigFloors {
    /// Why `overrides` go below a floor, if they do (a value that is not a number is left
    /// to the config's own check).
    pub fn refusal<'a>(
        &self,
        overrides: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Option<String> {
        for (name, value) in overrides {
            let below = match name.as_str() {
                "segment.ms" => value
                    .trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|v| *v < self.segment_ms)
                    .map(|_| self.segment_ms.to_string()),
                "segment.bytes" => value
                    .trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|v| *v < 0 || (*v as u64) < self.segment_bytes)
                    .map(|_| self.segment_bytes.to_string()),
                _ => None,
            };
            if let Some(floor) = below {
                return Some(format!(
                    "{name} must be at least {floor} on this cluster (it is {value})"
                ));
            }
        }
        None
    }
}

/// Whether `group` is a group id the broker keeps state under.
pub fn valid_group_id(group: &str) -> bool {
    group.len() <= MAX_GROUP_ID_BYTES
}

/// `s` cut to at most `max` bytes, at a character boundary.
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_configs_below_the_floors_are_refused_with_the_floor() {
        let floors = TopicConfigFloors::default();
        let config = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            floors.refusal(&config(&[("segment.ms", "1"), ("retention.ms", "-1")])),
            Some("segment.ms must be at least 600000 on this cluster (it is 1)".to_owned())
        );
        assert!(floors
            .refusal(&config(&[("segment.bytes", "300")]))
            .is_some());
        assert!(floors
            .refusal(&config(&[("segment.bytes", "-5")]))
            .is_some());
        assert_eq!(
            floors.refusal(&config(&[("segment.ms", "600000"), ("retention.ms", "-1")])),
            None
        );
    }

    #[test]
    fn a_cut_keeps_whole_characters_within_the_bound() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("abcdef", 3), "abc");
        // "é" is two bytes: a cut inside it falls back before it.
        assert_eq!(cut("aé", 2), "a");
        assert!(valid_group_id(&"g".repeat(MAX_GROUP_ID_BYTES)));
        assert!(!valid_group_id(&"g".repeat(MAX_GROUP_ID_BYTES + 1)));
    }
}
