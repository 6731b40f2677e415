//! State a client holds and hands back — REST group cursors, gRPC resume tokens, SSE event
//! ids — sealed with an HMAC-SHA256 tag, so that a client can neither forge nor edit it.
//!
//! Every replica of a deployment is given the same keys. The first key seals; every key
//! opens, so a new key is rolled out by putting it first while the old one stays listed for
//! as long as clients may hold state sealed with it (the rotation overlap), then dropping
//! the old one. The tag also covers what the state is (its [`Kind`]) and the caller's
//! tenant, so state is good only where it was issued.
//!
//! A sealed text is `base64url(payload) "." base64url(tag)`.

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The shortest key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 32;
/// The longest sealed text opened; anything longer is refused before it is decoded.
pub const MAX_SEALED_BYTES: usize = 64 * 1024;

/// What a sealed text holds; a text sealed as one kind never opens as another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    GroupCursor,
    ResumeToken,
    EventId,
}

impl Kind {
    fn label(self) -> &'static [u8] {
        match self {
            Kind::GroupCursor => b"skein group cursor v1",
            Kind::ResumeToken => b"skein resume token v1",
            Kind::EventId => b"skein event id v1",
        }
    }
}

/// Why keys were refused.
#[derive(Debug, thiserror::Error)]
pub enum ClientStateKeyError {
    #[error("no client-state key given")]
    NoKeys,
    #[error("client-state key {index} has {len} bytes; at least {MIN_KEY_BYTES} are needed")]
    TooShort { index: usize, len: usize },
}

/// The keys that seal and open client state.
#[derive(Clone)]
pub struct ClientStateKeys {
    keys: Vec<Vec<u8>>,
}

impl std::fmt::Debug for ClientStateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientStateKeys")
            .field("keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl ClientStateKeys {
    /// Keys in order: the first seals, all open.
    pub fn new(keys: Vec<Vec<u8>>) -> Result<Self, ClientStateKeyError> {
        if keys.is_empty() {
            return Err(ClientStateKeyError::NoKeys);
        }
        if let Some((index, key)) = keys
            .iter()
            .enumerate()
            .find(|(_, k)| k.len() < MIN_KEY_BYTES)
        {
            return Err(ClientStateKeyError::TooShort {
                index,
                len: key.len(),
            });
        }
        Ok(Self { keys })
    }

    /// A key of this process alone: what it seals no other replica opens.
    pub fn random() -> Self {
        let key: [u8; 32] = rand::random();
        Self {
            keys: vec![key.to_vec()],
        }
    }

    fn tag(key: &[u8], kind: Kind, tenant: &str, payload: &[u8]) -> HmacSha256 {
        // Every key is at least MIN_KEY_BYTES long, and HMAC takes keys of any length.
        let mut mac = <HmacSha256 as Mac>::new_from_slice(key)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
        for part in [kind.label(), tenant.as_bytes(), payload] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }

    /// Seals `payload` for `tenant`.
    pub fn seal(&self, kind: Kind, tenant: &str, payload: &[u8]) -> String {
        let tag = Self::tag(&self.keys[0], kind, tenant, payload).finalize();
        format!("{}.{}", B64.encode(payload), B64.encode(tag.into_bytes()))
    }

    /// The payload of a text this deployment sealed as `kind` for `tenant`, or `None` for
    /// anything else (edited, forged, sealed for another tenant or kind, too long).
    pub fn open(&self, kind: Kind, tenant: &str, sealed: &str) -> Option<Vec<u8>> {
        if sealed.len() > MAX_SEALED_BYTES {
            return None;
        }
        let (payload, tag) = sealed.trim().split_once('.')?;
        let payload = B64.decode(payload).ok()?;
        let tag = B64.decode(tag).ok()?;
        self.keys
            .iter()
            .any(|key| {
                Self::tag(key, kind, tenant, &payload)
                    .verify_slice(&tag)
                    .is_ok()
            })
            .then_some(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(seeds: &[u8]) -> ClientStateKeys {
        ClientStateKeys::new(seeds.iter().map(|s| vec![*s; 32]).collect()).unwrap()
    }

    #[test]
    fn sealed_state_opens_only_as_issued() {
        let keys = keys(&[1]);
        let sealed = keys.seal(Kind::GroupCursor, "acme", b"positions");
        assert_eq!(
            keys.open(Kind::GroupCursor, "acme", &sealed).as_deref(),
            Some(&b"positions"[..])
        );
        assert!(keys.open(Kind::ResumeToken, "acme", &sealed).is_none());
        assert!(keys.open(Kind::GroupCursor, "other", &sealed).is_none());
        let (payload, tag) = sealed.split_once('.').unwrap();
        let edited = format!("{}.{tag}", B64.encode(b"positionz"));
        assert!(keys.open(Kind::GroupCursor, "acme", &edited).is_none());
        assert!(keys
            .open(Kind::GroupCursor, "acme", &format!("{payload}.AAAA"))
            .is_none());
        assert!(keys.open(Kind::GroupCursor, "acme", payload).is_none());
        assert!(keys.open(Kind::GroupCursor, "acme", "").is_none());
        let huge = "A".repeat(MAX_SEALED_BYTES + 1);
        assert!(keys.open(Kind::GroupCursor, "acme", &huge).is_none());
    }

    #[test]
    fn keys_rotate_with_an_overlap() {
        let old = keys(&[1]);
        let rotated = keys(&[2, 1]);
        let after = keys(&[2]);
        let by_old = old.seal(Kind::EventId, "t", b"x");
        let by_new = rotated.seal(Kind::EventId, "t", b"x");
        assert!(rotated.open(Kind::EventId, "t", &by_old).is_some());
        assert!(old.open(Kind::EventId, "t", &by_new).is_none());
        assert!(after.open(Kind::EventId, "t", &by_new).is_some());
        assert!(after.open(Kind::EventId, "t", &by_old).is_none());
    }

    #[test]
    fn short_or_missing_keys_are_refused() {
        assert!(ClientStateKeys::new(vec![]).is_err());
        assert!(ClientStateKeys::new(vec![vec![0; 31]]).is_err());
    }
}
