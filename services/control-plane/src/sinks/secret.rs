//! The target database URLs of sinks, sealed before they reach the catalog: ChaCha20-Poly1305
//! under a key derived from the control plane's sink secret, a random nonce per seal, and the
//! sink's id as associated data, so a sealed URL opens only for the sink it was made for.

use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

/// The prefix of every sealed value, naming the scheme.
const VERSION: &str = "v1:";

/// Why a sealed value does not open.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("the sealed value is malformed")]
    Malformed,
    #[error("the sealed value does not open with this key for this sink")]
    WrongKey,
    #[error("no randomness for a nonce")]
    Random,
}

/// Seals and opens sinks' secrets.
pub struct SinkKey {
    key: LessSafeKey,
    random: SystemRandom,
}

impl std::fmt::Debug for SinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SinkKey(..)")
    }
}

impl SinkKey {
    /// The key of a secret (any length; 32 random bytes or more is what it should be).
    pub fn from_secret(secret: &[u8]) -> Self {
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        context.update(b"skein sink secret key\0");
        context.update(secret);
        let digest = context.finish();
        // A SHA-256 digest is exactly a ChaCha20-Poly1305 key.
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, digest.as_ref())
            .unwrap_or_else(|_| unreachable!("32-byte key"));
        Self {
            key: LessSafeKey::new(unbound),
            random: SystemRandom::new(),
        }
    }

    /// `plaintext` sealed for the sink `sink_id`.
    pub fn seal(&self, sink_id: &str, plaintext: &str) -> Result<String, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| SealError::Random)?;
        let mut sealed = plaintext.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(sink_id.as_bytes()),
                &mut sealed,
            )
            .map_err(|_| SealError::WrongKey)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(format!(
            "{VERSION}{}",
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(out)
        ))
    }

    /// The plaintext of a value sealed for `sink_id`.
    pub fn open(&self, sink_id: &str, sealed: &str) -> Result<String, SealError> {
        let encoded = sealed.strip_prefix(VERSION).ok_or(SealError::Malformed)?;
        // Bounded before decoding: a URL is short.
        if encoded.len() > 16 * 1024 {
            return Err(SealError::Malformed);
        }
        let mut bytes = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(encoded)
            .map_err(|_| SealError::Malformed)?;
        if bytes.len() < NONCE_LEN + CHACHA20_POLY1305.tag_len() {
            return Err(SealError::Malformed);
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&bytes[..NONCE_LEN]);
        let opened = self
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(sink_id.as_bytes()),
                &mut bytes[NONCE_LEN..],
            )
            .map_err(|_| SealError::WrongKey)?;
        String::from_utf8(opened.to_vec()).map_err(|_| SealError::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_url_opens_only_with_its_key_for_its_sink() {
        let key = SinkKey::from_secret(b"a secret of the control plane....");
        let url = "postgres://app:hunter2@db.internal/orders";
        let sealed = key.seal("sink-1", url).unwrap();
        assert!(!sealed.contains("hunter2"));
        assert_ne!(
            sealed,
            key.seal("sink-1", url).unwrap(),
            "a fresh nonce each time"
        );
        assert_eq!(key.open("sink-1", &sealed).unwrap(), url);
        assert!(matches!(
            key.open("sink-2", &sealed),
            Err(SealError::WrongKey)
        ));
        let other = SinkKey::from_secret(b"another secret");
        assert!(matches!(
            other.open("sink-1", &sealed),
            Err(SealError::WrongKey)
        ));
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(key.open("sink-1", &tampered).is_err());
        for junk in ["", "v1:", "v1:!!!", "v2:AAAA", &"v1:".repeat(10_000)] {
            assert!(key.open("sink-1", junk).is_err(), "{junk}");
        }
    }
}
