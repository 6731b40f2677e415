//! The server's side of a SCRAM exchange: read the client's first message, answer with the
//! salt, the iteration count and the combined nonce, then check the client's proof and
//! answer with the server's signature.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use subtle::ConstantTimeEq;

use crate::{Credential, Mechanism, ScramError};

/// The longest client message read; real ones are under 300 bytes.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// The longest user name accepted, as principal names are bounded.
pub const MAX_USER_BYTES: usize = 255;
/// The longest nonce accepted from a client, or given by the server.
pub const MAX_NONCE_BYTES: usize = 256;

fn text(message: &[u8]) -> Result<&str, ScramError> {
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(ScramError::TooLarge);
    }
    std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))
}

/// A nonce: printable ASCII other than `,` (RFC 5802, `printable`).
fn is_nonce(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce.len() <= MAX_NONCE_BYTES
        && nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// The value of `attribute=value`, for the one attribute expected there.
fn attribute(part: &str, name: char) -> Result<&str, ScramError> {
    let mut chars = part.chars();
    match (chars.next(), chars.next()) {
        (Some(found), Some('=')) if found == name => Ok(&part[2..]),
        (Some(c), Some('=')) if c.is_ascii_alphabetic() => Err(ScramError::Extension),
        _ => Err(ScramError::Malformed("an attribute is missing")),
    }
}

/// A `saslname` with its `=2C` and `=3D` escapes undone.
fn user_name(saslname: &str) -> Result<String, ScramError> {
    let mut name = String::with_capacity(saslname.len());
    let mut rest = saslname;
    while let Some(at) = rest.find('=') {
        name.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        name.push(match escape {
            Some("=2C") => ',',
            Some("=3D") => '=',
            _ => return Err(ScramError::Malformed("a user name has a bad escape")),
        });
        rest = &rest[at + 3..];
    }
    name.push_str(rest);
    if name.is_empty() || name.len() > MAX_USER_BYTES || name.chars().any(char::is_control) {
        return Err(ScramError::Malformed(
            "the user name is empty, long or unprintable",
        ));
    }
    Ok(name)
}

/// The client's first message, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// Who the client says it is.
    pub user: String,
    client_nonce: String,
    /// `n,,` (or with an authorization id): the final message's `c=` repeats it.
    gs2_header: String,
    /// The message without its GS2 header, part of what both sides sign.
    bare: String,
}

impl ClientFirst {
    /// Reads `n,[a=<authzid>],n=<user>,r=<nonce>`.
    pub fn parse(message: &[u8]) -> Result<Self, ScramError> {
        let text = text(message)?;
        let mut parts = text.splitn(3, ',');
        let (Some(binding), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(ScramError::Malformed("no GS2 header"));
        };
        match binding {
            "n" | "y" => {}
            _ if binding.starts_with("p=") => return Err(ScramError::ChannelBinding),
            _ => return Err(ScramError::Malformed("the GS2 header is not n or y")),
        }
        let gs2_header = text[..binding.len() + authzid.len() + 2].to_owned();
        let mut fields = bare.split(',');
        let user = user_name(attribute(fields.next().unwrap_or_default(), 'n')?)?;
        let client_nonce = attribute(fields.next().unwrap_or_default(), 'r')?;
        if fields.next().is_some() {
            return Err(ScramError::Extension);
        }
        if !is_nonce(client_nonce) {
            return Err(ScramError::Malformed("the client nonce is not printable"));
        }
        if !authzid.is_empty() && user_name(attribute(authzid, 'a')?)? != user {
            return Err(ScramError::OtherAuthzid);
        }
        Ok(Self {
            user,
            client_nonce: client_nonce.to_owned(),
            gs2_header,
            bare: bare.to_owned(),
        })
    }

    /// The server's first message for `credential` (the user's, or a decoy), and the state
    /// that reads the client's final message. `server_nonce` must be fresh and random.
    pub fn reply(
        self,
        credential: Credential,
        server_nonce: &str,
    ) -> Result<(String, ServerFirst), ScramError> {
        if !is_nonce(server_nonce) {
            return Err(ScramError::ServerNonce);
        }
        let nonce = format!("{}{server_nonce}", self.client_nonce);
        let message = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        let state = ServerFirst {
            user: self.user,
            client_nonce_len: self.client_nonce.len(),
            nonce,
            gs2_header: self.gs2_header,
            client_first_bare: self.bare,
            server_first: message.clone(),
            credential,
        };
        Ok((message, state))
    }
}

/// The exchange after the server's first message, waiting for the client's proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFirst {
    /// Who the client says it is.
    pub user: String,
    nonce: String,
    client_nonce_len: usize,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    credential: Credential,
}

impl ServerFirst {
    /// The mechanism of the exchange.
    pub fn mechanism(&self) -> Mechanism {
        self.credential.mechanism
    }

    /// librdkafka before 2.6.1 (Debian 12's kcat among its users) repeats its own nonce in
    /// front of the combined one in its final message. That form still carries the server's
    /// fresh nonce, so the exchange cannot be replayed, and it is taken in exactly that
    /// shape, as Kafka 3.8.1 to 3.9 took it.
    fn is_librdkafka_nonce(&self, nonce: &str) -> bool {
        nonce.len() == self.nonce.len() + self.client_nonce_len
            && nonce.ends_with(&self.nonce)
            && nonce.starts_with(&self.nonce[..self.client_nonce_len])
    }

    /// Checks `c=<binding>,r=<nonce>,p=<proof>`; on success answers the server's final
    /// message, `v=<signature>`, which proves to the client that the server knew its
    /// credential.
    pub fn finish(&self, message: &[u8]) -> Result<String, ScramError> {
        let text = text(message)?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("no proof"))?;
        let mut fields = without_proof.split(',');
        let binding = attribute(fields.next().unwrap_or_default(), 'c')?;
        let nonce = attribute(fields.next().unwrap_or_default(), 'r')?;
        if fields.next().is_some() {
            return Err(ScramError::Extension);
        }
        let binding = BASE64
            .decode(binding)
            .map_err(|_| ScramError::Malformed("the channel binding is not base64"))?;
        if binding != self.gs2_header.as_bytes() {
            return Err(ScramError::BindingMismatch);
        }
        if nonce != self.nonce && !self.is_librdkafka_nonce(nonce) {
            return Err(ScramError::NonceMismatch);
        }
        let mechanism = self.credential.mechanism;
        let proof = BASE64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("the proof is not base64"))?;
        if proof.len() != mechanism.output_len() {
            return Err(ScramError::BadProof);
        }
        let auth_message = [
            self.client_first_bare.as_bytes(),
            b",",
            self.server_first.as_bytes(),
            b",",
            without_proof.as_bytes(),
        ];
        let signature = mechanism.hmac(&self.credential.stored_key, &auth_message);
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let matches: bool = mechanism
            .hash(&client_key)
            .ct_eq(&self.credential.stored_key)
            .into();
        if !matches {
            return Err(ScramError::BadProof);
        }
        let server_signature = mechanism.hmac(&self.credential.server_key, &auth_message);
        Ok(format!("v={}", BASE64.encode(server_signature)))
    }
}
