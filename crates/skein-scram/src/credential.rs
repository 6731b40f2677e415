//! What a server keeps of a SCRAM password: the salt, the iteration count, and the stored
//! and server keys derived from the salted password. The password itself is never kept,
//! and neither key lets anyone authenticate as the user.

use crate::{Mechanism, ScramError};

/// The fewest iterations accepted, as Kafka's minimum.
pub const MIN_ITERATIONS: u32 = 4096;
/// The most iterations accepted, as Kafka's maximum: more would only cost clients time.
pub const MAX_ITERATIONS: u32 = 16384;
/// The iterations used when none are asked for.
pub const DEFAULT_ITERATIONS: u32 = 8192;
/// The longest salt accepted.
pub const MAX_SALT_BYTES: usize = 128;

/// A stored SCRAM credential.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// The mechanism it is for.
    pub mechanism: Mechanism,
    /// The salt the client salts its password with.
    pub salt: Vec<u8>,
    /// The PBKDF2 iterations.
    pub iterations: u32,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

fn check_iterations(iterations: u32) -> Result<(), ScramError> {
    if (MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        Ok(())
    } else {
        Err(ScramError::Iterations(iterations))
    }
}

fn check_salt(salt: &[u8]) -> Result<(), ScramError> {
    if salt.is_empty() || salt.len() > MAX_SALT_BYTES {
        return Err(ScramError::Salt);
    }
    Ok(())
}

fn check_key(mechanism: Mechanism, key: &[u8]) -> Result<(), ScramError> {
    if key.len() != mechanism.output_len() {
        return Err(ScramError::KeyLength {
            mechanism,
            expected: mechanism.output_len(),
        });
    }
    Ok(())
}

impl Credential {
    /// The credential of `password` (its UTF-8 bytes, unnormalized, as Kafka takes them).
    /// PBKDF2 runs `iterations` times: callers on an async runtime run this on a blocking
    /// thread.
    pub fn from_password(
        mechanism: Mechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Result<Self, ScramError> {
        check_iterations(iterations)?;
        check_salt(salt)?;
        let salted = mechanism.salted_password(password.as_bytes(), salt, iterations);
        Self::from_salted_password(mechanism, &salted, salt, iterations)
    }

    /// The credential of a password the client already salted with `salt` over
    /// `iterations`, as Kafka's AlterUserScramCredentials sends it.
    pub fn from_salted_password(
        mechanism: Mechanism,
        salted_password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Result<Self, ScramError> {
        check_iterations(iterations)?;
        check_salt(salt)?;
        check_key(mechanism, salted_password)?;
        let client_key = mechanism.hmac(salted_password, &[b"Client Key"]);
        Ok(Self {
            mechanism,
            salt: salt.to_vec(),
            iterations,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, &[b"Server Key"]),
        })
    }

    /// A credential read back from a store, checked as if it came from a peer.
    pub fn from_parts(
        mechanism: Mechanism,
        salt: Vec<u8>,
        iterations: u32,
        stored_key: Vec<u8>,
        server_key: Vec<u8>,
    ) -> Result<Self, ScramError> {
        check_iterations(iterations)?;
        check_salt(&salt)?;
        check_key(mechanism, &stored_key)?;
        check_key(mechanism, &server_key)?;
        Ok(Self {
            mechanism,
            salt,
            iterations,
            stored_key,
            server_key,
        })
    }

    /// A stand-in for a user who has no credential, so that the exchange runs to its end
    /// and fails there, as for a wrong password, instead of telling a guesser which users
    /// exist. Its salt is the same on every attempt for the same user (derived from
    /// `secret`, which the server keeps to itself), and no password matches it: its stored
    /// key is zeros, which is no hash's output anyone can find an input for.
    pub fn decoy(mechanism: Mechanism, user: &str, secret: &[u8]) -> Self {
        let mut salt = Mechanism::Sha256.hmac(
            secret,
            &[mechanism.name().as_bytes(), b"\0", user.as_bytes()],
        );
        salt.truncate(32);
        Self {
            mechanism,
            salt,
            iterations: DEFAULT_ITERATIONS,
            stored_key: vec![0; mechanism.output_len()],
            server_key: vec![0; mechanism.output_len()],
        }
    }
}
