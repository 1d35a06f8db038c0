//! Payload encryption before any sink sees the data, and the envelope format readers share.
//!
//! Only the message body is encrypted; subject, headers and JetStream metadata stay clear
//! so sinks can route and key messages. The body is replaced by a JSON envelope:
//!
//! - **version 1** (`nats_sinks.encrypted_payload.v1`, the default): the reference's
//!   envelope, field for field (`algorithm`, `key_id`, base64 `nonce`, base64 `ciphertext`
//!   with the tag appended, `tag_length`, `plaintext_sha256`, `plaintext_size_bytes`), so the
//!   reference decrypts what nats-sink wrote and the other way round. No AAD: a ciphertext
//!   copied into another record still decrypts (reference weakness W13).
//! - **version 2** (`nats_sinks.encrypted_payload.v2`, opt-in): the ciphertext is bound as
//!   AAD to what it belongs to ([`Binding`]: the message's subject, stream and sequence, or
//!   a spool record's identity) and to its own key id and schema, so a ciphertext moved to
//!   another record fails to decrypt; the plaintext hash is not written (it leaks equality).
//!
//! Readers ([`Keyring`]) accept both versions, pick the key by `key_id` (the active key or a
//! configured decryption-only key, for rotation) and fail closed on an unknown one. AES-GCM
//! and AES-CCM come from RustCrypto (`aes-gcm`, `ccm`: constant time, no hand-written
//! crypto). A nonce is synthetic by default ([`NonceMode::Derived`]: a PRF of the key, the
//! record and the plaintext, so one message always seals to the same envelope and a
//! redelivery sends the same bytes), or fresh OS randomness per message
//! ([`NonceMode::Random`], the reference's). Key bytes never reach logs, errors or `Debug`
//! output.

pub mod config;

use std::collections::BTreeMap;

use aes_gcm::aead::consts::{U4, U6, U7, U8, U9, U10, U11, U12, U13, U14, U16};
use aes_gcm::aead::generic_array::GenericArray;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::aes::Aes256;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use sinks_contract::config::ConfigError;
use sinks_contract::envelope::Envelope;

use self::config::{Algorithm, EncryptionConfig, NonceMode, Policy};

/// Object key of the envelope inside the payload document.
pub const ENVELOPE_KEY: &str = "_nats_sinks_encryption";
/// Schema of version 1 (the reference's).
pub const SCHEMA_V1: &str = "nats_sinks.encrypted_payload.v1";
/// Schema of version 2 (AAD-bound).
pub const SCHEMA_V2: &str = "nats_sinks.encrypted_payload.v2";

/// A 32-byte AES key; its bytes never appear in `Debug` output.
#[derive(Clone)]
pub struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// Decodes the base64 of exactly 32 bytes.
    pub fn from_b64(text: &str) -> Result<Self, String> {
        let bytes = B64.decode(text.trim()).map_err(|_| "is not valid base64".to_owned())?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| format!("decodes to {} bytes, not 32", b.len()))?;
        Ok(Self(bytes))
    }

    /// Reads and decodes the key named by environment variable `name`; `path` is the config
    /// field that names it (for the error).
    pub fn from_env(name: &str, path: &str) -> Result<Self, ConfigError> {
        Self::from_lookup(name, path, &|name| std::env::var(name).ok())
    }

    /// [`Key::from_env`] reading the variable through `lookup`.
    pub fn from_lookup(name: &str, path: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let value =
            lookup(name).ok_or_else(|| ConfigError::single(path, format!("environment variable {name} is not set")))?;
        Self::from_b64(&value).map_err(|e| {
            ConfigError::single(path, format!("environment variable {name} {e} (an AES-256 key is 32 bytes)"))
        })
    }
}

/// What a version-2 ciphertext is bound to (its AAD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding<'a> {
    /// Nothing (version 1, or a reader that cannot tell).
    None,
    /// One message: its subject, stream and stream sequence.
    Message {
        /// Subject.
        subject: &'a str,
        /// Stream name.
        stream: &'a str,
        /// Stream sequence.
        stream_sequence: u64,
    },
    /// One stored record with this identity (the spool's `idempotency_key_sha256`).
    Record(&'a str),
}

impl Binding<'_> {
    /// The binding of an envelope's message.
    pub fn of(envelope: &Envelope) -> Binding<'_> {
        let js = envelope.jetstream();
        Binding::Message { subject: envelope.subject(), stream: &js.stream, stream_sequence: js.stream_sequence }
    }

    fn kind(&self) -> Option<&'static str> {
        match self {
            Self::None => None,
            Self::Message { .. } => Some("message"),
            Self::Record(_) => Some("record"),
        }
    }

    /// The AAD bytes: canonical JSON of the binding, the key id and the schema.
    fn aad(&self, key_id: &str) -> Vec<u8> {
        let mut doc = BTreeMap::new();
        doc.insert("key_id", serde_json::Value::from(key_id));
        doc.insert("schema", SCHEMA_V2.into());
        match self {
            Self::None => {}
            Self::Message { subject, stream, stream_sequence } => {
                doc.insert("stream", (*stream).into());
                doc.insert("stream_sequence", (*stream_sequence).into());
                doc.insert("subject", (*subject).into());
            }
            Self::Record(identity) => {
                doc.insert("record", (*identity).into());
            }
        }
        serde_json::to_vec(&doc).unwrap_or_default()
    }
}

/// Why an envelope could not be decrypted. Messages name fields and key ids, never key
/// material or plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecryptError {
    /// The bytes are not a nats-sinks encryption envelope.
    #[error("payload is not a nats-sinks encryption envelope")]
    NotEnvelope,
    /// A field is missing or malformed.
    #[error("encryption envelope field `{0}` is missing or malformed")]
    Malformed(&'static str),
    /// Unknown schema or version.
    #[error("encryption envelope schema or version is not supported")]
    Unsupported,
    /// No configured key has this id (fail closed).
    #[error("no key is configured for key_id `{0}`")]
    UnknownKey(String),
    /// The tag did not verify.
    #[error(
        "decryption failed: wrong key, tampered ciphertext or nonce, or a ciphertext that belongs to another record"
    )]
    Authentication,
    /// The version-1 size or digest of the plaintext did not match.
    #[error("decrypted payload failed its size or digest check")]
    Integrity,
    /// A version-2 envelope needs the record it is bound to.
    #[error("a version 2 envelope can only be decrypted with the record it belongs to (subject, stream, sequence)")]
    MissingBinding,
}

/// Encrypts with one policy (algorithm, key, nonce and tag sizes) into one envelope version.
#[derive(Debug, Clone)]
pub struct Cipher {
    algorithm: Algorithm,
    key_id: String,
    key: Key,
    nonce_size: usize,
    tag_length: u8,
    version: u8,
    /// The PRF key of derived nonces (from the encryption key); `None`: random nonces.
    nonce_key: Option<Key>,
}

/// What the PRF key of derived nonces is derived from the encryption key with.
const NONCE_KEY_LABEL: &[u8] = b"nats-sinks/encryption/nonce-key/v1";

impl Cipher {
    /// A cipher for `policy` with `key`, writing envelope `version` (1 or 2).
    pub fn new(policy: &Policy, key: Key, version: u8) -> Self {
        Self {
            algorithm: policy.algorithm,
            key_id: policy.key_id.clone(),
            nonce_size: usize::from(policy.nonce_size_bytes),
            tag_length: policy.tag_length,
            version,
            nonce_key: (policy.nonce == NonceMode::Derived).then(|| Key(hmac_sha256(&key.0, &[NONCE_KEY_LABEL]))),
            key,
        }
    }

    /// The nonce of `plaintext` bound to `binding`: synthetic (a PRF of the record, the key
    /// id, the version and the plaintext, each part length-prefixed) or random.
    fn nonce(&self, plaintext: &[u8], binding: &Binding<'_>) -> Vec<u8> {
        let mut nonce = vec![0u8; self.nonce_size];
        match &self.nonce_key {
            Some(prf) => {
                let record = binding.aad(&self.key_id);
                let version = [self.version];
                let mac = hmac_sha256(&prf.0, &[&record, &version, plaintext]);
                nonce.copy_from_slice(&mac[..self.nonce_size]);
            }
            None => fill_random(&mut nonce),
        }
        nonce
    }

    /// The key id written into envelopes.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// Encrypts `plaintext` into the canonical JSON of an envelope (compact, sorted keys),
    /// bound to `binding` in version 2.
    pub fn encrypt(&self, plaintext: &[u8], binding: Binding<'_>) -> Vec<u8> {
        let nonce = self.nonce(plaintext, &binding);
        let v2 = self.version == 2;
        let aad = if v2 { binding.aad(&self.key_id) } else { Vec::new() };
        let sealed = seal(self.algorithm, &self.key.0, &nonce, self.tag_length, plaintext, &aad).unwrap_or_default();
        // Keys inserted in sorted order, so the bytes are canonical whatever map type
        // serde_json is built with.
        let mut inner = serde_json::Map::new();
        if v2 {
            inner.insert("aad".into(), binding.kind().unwrap_or("none").into());
        }
        inner.insert("algorithm".into(), self.algorithm.as_str().into());
        inner.insert("ciphertext".into(), B64.encode(&sealed).into());
        inner.insert("ciphertext_encoding".into(), "base64".into());
        inner.insert("key_id".into(), self.key_id.clone().into());
        inner.insert("nonce".into(), B64.encode(&nonce).into());
        inner.insert("nonce_size_bytes".into(), nonce.len().into());
        if !v2 {
            inner.insert("plaintext_sha256".into(), hex::encode(Sha256::digest(plaintext)).into());
        }
        inner.insert("plaintext_size_bytes".into(), plaintext.len().into());
        inner.insert("schema".into(), if v2 { SCHEMA_V2 } else { SCHEMA_V1 }.into());
        inner.insert("tag_length".into(), self.tag_length.into());
        inner.insert("version".into(), self.version.into());
        let mut outer = serde_json::Map::new();
        outer.insert(ENVELOPE_KEY.into(), serde_json::Value::Object(inner));
        serde_json::to_vec(&outer).unwrap_or_default()
    }
}

/// HMAC-SHA256 of `parts` under `key`, each part preceded by its length (8 bytes, big
/// endian), so no two sequences of parts are the same input.
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    use hmac::Mac as _;
    let Ok(mut mac) = <hmac::Hmac<Sha256> as hmac::Mac>::new_from_slice(key) else {
        unreachable!("hmac takes keys of any length")
    };
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

fn fill_random(buf: &mut [u8]) {
    use rand::TryRngCore;
    if rand::rngs::OsRng.try_fill_bytes(buf).is_err() {
        // The OS generator failing is not recoverable; a zero nonce must never be used.
        panic!("the operating system's random number generator failed");
    }
}

/// Runs `op` with the AEAD type selected by algorithm, nonce and tag length.
macro_rules! with_aead {
    ($algorithm:expr, $nonce:expr, $tag:expr, $op:ident, $($arg:expr),*) => {
        match ($algorithm, $nonce, $tag) {
            (Algorithm::Aes256Gcm, 8, _) => $op::<aes_gcm::AesGcm<Aes256, U8>>($($arg),*),
            (Algorithm::Aes256Gcm, 9, _) => $op::<aes_gcm::AesGcm<Aes256, U9>>($($arg),*),
            (Algorithm::Aes256Gcm, 10, _) => $op::<aes_gcm::AesGcm<Aes256, U10>>($($arg),*),
            (Algorithm::Aes256Gcm, 11, _) => $op::<aes_gcm::AesGcm<Aes256, U11>>($($arg),*),
            (Algorithm::Aes256Gcm, 12, _) => $op::<aes_gcm::AesGcm<Aes256, U12>>($($arg),*),
            (Algorithm::Aes256Gcm, 13, _) => $op::<aes_gcm::AesGcm<Aes256, U13>>($($arg),*),
            (Algorithm::Aes256Ccm, n, t) => with_ccm_nonce!(n, t, $op, $($arg),*),
            _ => Err(aes_gcm::aead::Error),
        }
    };
}

macro_rules! with_ccm_nonce {
    ($nonce:expr, $tag:expr, $op:ident, $($arg:expr),*) => {
        match $nonce {
            7 => with_ccm_tag!(U7, $tag, $op, $($arg),*),
            8 => with_ccm_tag!(U8, $tag, $op, $($arg),*),
            9 => with_ccm_tag!(U9, $tag, $op, $($arg),*),
            10 => with_ccm_tag!(U10, $tag, $op, $($arg),*),
            11 => with_ccm_tag!(U11, $tag, $op, $($arg),*),
            12 => with_ccm_tag!(U12, $tag, $op, $($arg),*),
            13 => with_ccm_tag!(U13, $tag, $op, $($arg),*),
            _ => Err(aes_gcm::aead::Error),
        }
    };
}

macro_rules! with_ccm_tag {
    ($n:ty, $tag:expr, $op:ident, $($arg:expr),*) => {
        match $tag {
            4 => $op::<ccm::Ccm<Aes256, U4, $n>>($($arg),*),
            6 => $op::<ccm::Ccm<Aes256, U6, $n>>($($arg),*),
            8 => $op::<ccm::Ccm<Aes256, U8, $n>>($($arg),*),
            10 => $op::<ccm::Ccm<Aes256, U10, $n>>($($arg),*),
            12 => $op::<ccm::Ccm<Aes256, U12, $n>>($($arg),*),
            14 => $op::<ccm::Ccm<Aes256, U14, $n>>($($arg),*),
            16 => $op::<ccm::Ccm<Aes256, U16, $n>>($($arg),*),
            _ => Err(aes_gcm::aead::Error),
        }
    };
}

fn seal_with<A: Aead + KeyInit>(
    key: &[u8],
    nonce: &[u8],
    msg: &[u8],
    aad: &[u8],
) -> Result<Vec<u8>, aes_gcm::aead::Error> {
    let cipher = A::new_from_slice(key).map_err(|_| aes_gcm::aead::Error)?;
    cipher.encrypt(GenericArray::from_slice(nonce), Payload { msg, aad })
}

fn open_with<A: Aead + KeyInit>(
    key: &[u8],
    nonce: &[u8],
    msg: &[u8],
    aad: &[u8],
) -> Result<Vec<u8>, aes_gcm::aead::Error> {
    let cipher = A::new_from_slice(key).map_err(|_| aes_gcm::aead::Error)?;
    cipher.decrypt(GenericArray::from_slice(nonce), Payload { msg, aad })
}

fn seal(
    algorithm: Algorithm,
    key: &[u8; 32],
    nonce: &[u8],
    tag: u8,
    msg: &[u8],
    aad: &[u8],
) -> Result<Vec<u8>, aes_gcm::aead::Error> {
    with_aead!(algorithm, nonce.len(), tag, seal_with, key, nonce, msg, aad)
}

fn open(
    algorithm: Algorithm,
    key: &[u8; 32],
    nonce: &[u8],
    tag: u8,
    msg: &[u8],
    aad: &[u8],
) -> Result<Vec<u8>, aes_gcm::aead::Error> {
    with_aead!(algorithm, nonce.len(), tag, open_with, key, nonce, msg, aad)
}

/// Keys by id, for reading envelopes.
#[derive(Debug, Clone, Default)]
pub struct Keyring {
    keys: BTreeMap<String, Key>,
}

impl Keyring {
    /// An empty keyring (decrypts nothing).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `key` under `key_id` (replacing one of the same id).
    pub fn insert(&mut self, key_id: impl Into<String>, key: Key) {
        self.keys.insert(key_id.into(), key);
    }

    /// Adds every key of `other` (its keys win on equal ids).
    pub fn extend(&mut self, other: &Self) {
        self.keys.extend(other.keys.iter().map(|(id, key)| (id.clone(), key.clone())));
    }

    /// The configured key ids.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Every key of `config` (active key, rule keys, decryption-only keys), read from the
    /// environment; an error names the field.
    pub fn from_config(config: &EncryptionConfig, path: &str) -> Result<Self, ConfigError> {
        Self::from_config_with(config, path, &|name| std::env::var(name).ok())
    }

    /// [`Keyring::from_config`] reading the variables through `lookup`.
    pub fn from_config_with(
        config: &EncryptionConfig,
        path: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut ring = Self::new();
        if let Some(env) = &config.key_b64_env {
            ring.insert(config.key_id.clone(), Key::from_lookup(env, &format!("{path}.key_b64_env"), lookup)?);
        }
        for (i, rule) in config.rules.iter().enumerate() {
            if let Some(policy) = config.rule_policy(rule) {
                let field = if rule.key_b64_env.is_some() {
                    format!("{path}.rules[{i}].key_b64_env")
                } else {
                    format!("{path}.key_b64_env")
                };
                ring.insert(policy.key_id.clone(), Key::from_lookup(&policy.key_b64_env, &field, lookup)?);
            }
        }
        for (i, key) in config.decrypt_keys.iter().enumerate() {
            let field = format!("{path}.decrypt_keys[{i}].key_b64_env");
            ring.insert(key.key_id.clone(), Key::from_lookup(&key.key_b64_env, &field, lookup)?);
        }
        Ok(ring)
    }

    /// Decrypts the envelope in `payload` (JSON bytes), checking its binding (version 2)
    /// or its plaintext size and digest (version 1).
    pub fn decrypt(&self, payload: &[u8], binding: Binding<'_>) -> Result<Vec<u8>, DecryptError> {
        let text = std::str::from_utf8(payload).map_err(|_| DecryptError::NotEnvelope)?;
        let value = sinks_contract::json::parse_strict(text).map_err(|_| DecryptError::NotEnvelope)?;
        self.decrypt_value(&value, binding)
    }

    /// [`Keyring::decrypt`] on a parsed document (`{"_nats_sinks_encryption": {…}}`).
    pub fn decrypt_value(&self, value: &serde_json::Value, binding: Binding<'_>) -> Result<Vec<u8>, DecryptError> {
        let envelope =
            value.get(ENVELOPE_KEY).and_then(serde_json::Value::as_object).ok_or(DecryptError::NotEnvelope)?;
        let field = |name: &'static str| envelope.get(name).ok_or(DecryptError::Malformed(name));
        let version = field("version")?.as_u64().ok_or(DecryptError::Malformed("version"))?;
        let schema = field("schema")?.as_str().ok_or(DecryptError::Malformed("schema"))?;
        let v2 = match (schema, version) {
            (SCHEMA_V1, 1) => false,
            (SCHEMA_V2, 2) => true,
            _ => return Err(DecryptError::Unsupported),
        };
        let algorithm =
            field("algorithm")?.as_str().and_then(Algorithm::parse).ok_or(DecryptError::Malformed("algorithm"))?;
        let key_id = field("key_id")?.as_str().filter(|k| !k.is_empty()).ok_or(DecryptError::Malformed("key_id"))?;
        let key = self.keys.get(key_id).ok_or_else(|| DecryptError::UnknownKey(key_id.to_owned()))?;
        let b64 = |name: &'static str| {
            field(name)?.as_str().and_then(|s| B64.decode(s).ok()).ok_or(DecryptError::Malformed(name))
        };
        let nonce = b64("nonce")?;
        let ciphertext = b64("ciphertext")?;
        let tag = match algorithm {
            Algorithm::Aes256Gcm => 16,
            Algorithm::Aes256Ccm => field("tag_length")?
                .as_u64()
                .and_then(|t| u8::try_from(t).ok())
                .ok_or(DecryptError::Malformed("tag_length"))?,
        };
        let aad = if v2 {
            let kind = field("aad")?.as_str().ok_or(DecryptError::Malformed("aad"))?;
            if binding.kind() != Some(kind) {
                return Err(DecryptError::MissingBinding);
            }
            binding.aad(key_id)
        } else {
            Vec::new()
        };
        let plaintext =
            open(algorithm, &key.0, &nonce, tag, &ciphertext, &aad).map_err(|_| DecryptError::Authentication)?;
        if let Some(size) = envelope.get("plaintext_size_bytes").and_then(serde_json::Value::as_u64)
            && size != plaintext.len() as u64
        {
            return Err(DecryptError::Integrity);
        }
        if let Some(digest) = envelope.get("plaintext_sha256").and_then(serde_json::Value::as_str)
            && digest != hex::encode(Sha256::digest(&plaintext))
        {
            return Err(DecryptError::Integrity);
        }
        Ok(plaintext)
    }
}

/// True when `payload` is a nats-sinks encryption envelope (either version).
pub fn is_encrypted(payload: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(payload) else { return false };
    // Cheap test first: every envelope starts with its key.
    text.trim_start().starts_with(&format!("{{\"{ENVELOPE_KEY}\""))
        && sinks_contract::json::parse_strict(text).is_ok_and(|v| {
            v.get(ENVELOPE_KEY)
                .and_then(|e| e.get("schema"))
                .and_then(serde_json::Value::as_str)
                .is_some_and(|s| s == SCHEMA_V1 || s == SCHEMA_V2)
        })
}

/// The `encryption` section at run time: the cipher of every rule and of the top level,
/// and the keyring for readers. Built once at start-up (reading the keys then: a missing or
/// malformed key is a configuration error naming its field).
#[derive(Debug, Clone)]
pub struct PayloadEncryption {
    default: Option<Cipher>,
    rules: Vec<(String, Option<Cipher>)>,
    keyring: Keyring,
}

impl PayloadEncryption {
    /// `None` when nothing is ever encrypted.
    pub fn from_config(config: &EncryptionConfig, path: &str) -> Result<Option<Self>, ConfigError> {
        Self::from_config_with(config, path, &|name| std::env::var(name).ok())
    }

    /// [`PayloadEncryption::from_config`] reading the keys' variables through `lookup`.
    pub fn from_config_with(
        config: &EncryptionConfig,
        path: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, ConfigError> {
        if !config.is_active() {
            return Ok(None);
        }
        let keyring = Keyring::from_config_with(config, path, lookup)?;
        let cipher = |policy: Option<Policy>| -> Result<Option<Cipher>, ConfigError> {
            let Some(policy) = policy else { return Ok(None) };
            let key =
                keyring.keys.get(&policy.key_id).cloned().ok_or_else(|| {
                    ConfigError::single(format!("{path}.key_b64_env"), "no key for the active key_id")
                })?;
            Ok(Some(Cipher::new(&policy, key, config.format_version)))
        };
        let default = if config.enabled { cipher(config.default_policy())? } else { None };
        let mut rules = Vec::new();
        for rule in &config.rules {
            rules.push((rule.subject.clone(), cipher(config.rule_policy(rule))?));
        }
        Ok(Some(Self { default, rules, keyring }))
    }

    /// The cipher for `subject`: the first matching rule's, else the top level's.
    pub fn cipher_for(&self, subject: &str) -> Option<&Cipher> {
        for (pattern, cipher) in &self.rules {
            if crate::subject::matches(pattern, subject) {
                return cipher.as_ref();
            }
        }
        self.default.as_ref()
    }

    /// `envelope` with its body replaced by an encryption envelope, when a policy covers
    /// its subject.
    pub fn apply(&self, envelope: Envelope) -> Envelope {
        match self.cipher_for(envelope.subject()) {
            Some(cipher) => {
                let sealed = cipher.encrypt(envelope.payload(), Binding::of(&envelope));
                envelope.with_sealed_payload(Bytes::from(sealed))
            }
            None => envelope,
        }
    }

    /// Keys for reading envelopes this section wrote.
    pub fn keyring(&self) -> &Keyring {
        &self.keyring
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encryption::config::Policy;

    fn key(byte: u8) -> Key {
        Key([byte; 32])
    }

    fn policy(algorithm: Algorithm, nonce: u8, tag: u8) -> Policy {
        Policy {
            algorithm,
            key_id: "k1".into(),
            key_b64_env: "UNUSED".into(),
            nonce_size_bytes: nonce,
            tag_length: tag,
            nonce: NonceMode::default(),
        }
    }

    fn ring() -> Keyring {
        let mut r = Keyring::new();
        r.insert("k1", key(7));
        r
    }

    const MSG: Binding<'static> = Binding::Message { subject: "a.b", stream: "S", stream_sequence: 42 };

    #[test]
    fn every_algorithm_nonce_and_tag_round_trips() {
        for (algorithm, nonces, tags) in [
            (Algorithm::Aes256Gcm, 8..=13u8, vec![16u8]),
            (Algorithm::Aes256Ccm, 7..=13u8, vec![4, 6, 8, 10, 12, 14, 16]),
        ] {
            for nonce in nonces {
                for tag in &tags {
                    for version in [1, 2] {
                        let c = Cipher::new(&policy(algorithm, nonce, *tag), key(7), version);
                        let sealed = c.encrypt(b"hello \xff", MSG);
                        let back = ring().decrypt(&sealed, MSG);
                        assert_eq!(back.as_deref(), Ok(&b"hello \xff"[..]), "{algorithm:?} n{nonce} t{tag} v{version}");
                    }
                }
            }
        }
    }

    #[test]
    fn version_1_is_the_reference_envelope() {
        let c = Cipher::new(&policy(Algorithm::Aes256Gcm, 12, 16), key(7), 1);
        let sealed = c.encrypt(b"{\"a\":1}", Binding::None);
        let text = String::from_utf8(sealed).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let e = &v[ENVELOPE_KEY];
        let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "algorithm",
                "ciphertext",
                "ciphertext_encoding",
                "key_id",
                "nonce",
                "nonce_size_bytes",
                "plaintext_sha256",
                "plaintext_size_bytes",
                "schema",
                "tag_length",
                "version"
            ]
        );
        assert_eq!(e["schema"], SCHEMA_V1);
        assert_eq!(e["plaintext_sha256"], hex::encode(Sha256::digest(b"{\"a\":1}")));
        assert!(text.starts_with("{\"_nats_sinks_encryption\":{\"algorithm\":\"aes-256-gcm\",\"ciphertext\":\""));
        assert!(is_encrypted(text.as_bytes()));
    }

    #[test]
    fn tampering_and_misuse_fail_closed() {
        let c = Cipher::new(&policy(Algorithm::Aes256Gcm, 12, 16), key(7), 2);
        let sealed: serde_json::Value = serde_json::from_slice(&c.encrypt(b"secret", MSG)).unwrap();
        let edit = |f: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
            let mut v = sealed.clone();
            f(v[ENVELOPE_KEY].as_object_mut().unwrap());
            v
        };
        let flip = |s: &str| {
            let mut raw = B64.decode(s).unwrap();
            raw[0] ^= 1;
            B64.encode(raw)
        };
        let flipped = edit(&|e| {
            let c = flip(e["ciphertext"].as_str().unwrap());
            e.insert("ciphertext".into(), c.into());
        });
        let other_nonce = edit(&|e| {
            let n = flip(e["nonce"].as_str().unwrap());
            e.insert("nonce".into(), n.into());
        });
        let unknown_key = edit(&|e| {
            e.insert("key_id".into(), "k9".into());
        });
        let moved = Binding::Message { subject: "a.b", stream: "S", stream_sequence: 43 };
        let r = ring();
        assert_eq!(r.decrypt_value(&flipped, MSG), Err(DecryptError::Authentication));
        assert_eq!(r.decrypt_value(&other_nonce, MSG), Err(DecryptError::Authentication));
        assert_eq!(r.decrypt_value(&unknown_key, MSG), Err(DecryptError::UnknownKey("k9".into())));
        assert_eq!(r.decrypt_value(&sealed, moved), Err(DecryptError::Authentication), "moved to another sequence");
        assert_eq!(r.decrypt_value(&sealed, Binding::None), Err(DecryptError::MissingBinding));
        assert_eq!(r.decrypt_value(&sealed, MSG).as_deref(), Ok(&b"secret"[..]));
        let mut wrong = Keyring::new();
        wrong.insert("k1", key(8));
        assert_eq!(wrong.decrypt_value(&sealed, MSG), Err(DecryptError::Authentication));
        assert_eq!(r.decrypt(b"{\"x\":1}", MSG), Err(DecryptError::NotEnvelope));
    }

    #[test]
    fn random_nonces_are_fresh() {
        let c = Cipher::new(&Policy { nonce: NonceMode::Random, ..policy(Algorithm::Aes256Gcm, 12, 16) }, key(7), 1);
        assert_ne!(c.encrypt(b"same", Binding::None), c.encrypt(b"same", Binding::None));
    }

    #[test]
    fn derived_nonces_seal_one_message_to_one_envelope_and_differ_for_anything_else() {
        let other = Binding::Message { subject: "orders.x", stream: "ORDERS", stream_sequence: 8 };
        for version in [1, 2] {
            for (algorithm, nonce, tag) in [(Algorithm::Aes256Gcm, 12, 16), (Algorithm::Aes256Ccm, 7, 8)] {
                let p = policy(algorithm, nonce, tag);
                assert_eq!(p.nonce, NonceMode::Derived, "the default");
                let c = Cipher::new(&p, key(7), version);
                let first = c.encrypt(b"{\"a\":1}", MSG);
                assert_eq!(first, c.encrypt(b"{\"a\":1}", MSG), "the same message seals to the same bytes");
                let nonce_of = |sealed: &[u8]| {
                    let v: serde_json::Value = serde_json::from_slice(sealed).unwrap();
                    v[ENVELOPE_KEY]["nonce"].as_str().unwrap().to_owned()
                };
                let nonces = [
                    nonce_of(&first),
                    nonce_of(&c.encrypt(b"{\"a\":2}", MSG)),
                    nonce_of(&c.encrypt(b"{\"a\":1}", other)),
                    nonce_of(&Cipher::new(&p, key(8), version).encrypt(b"{\"a\":1}", MSG)),
                    nonce_of(
                        &Cipher::new(&Policy { key_id: "k2".into(), ..p.clone() }, key(7), version)
                            .encrypt(b"{\"a\":1}", MSG),
                    ),
                ];
                let distinct: std::collections::BTreeSet<&String> = nonces.iter().collect();
                assert_eq!(
                    distinct.len(),
                    nonces.len(),
                    "plaintext, record, key and key id each change the nonce: {nonces:?}"
                );
                let mut r = Keyring::new();
                r.insert(&p.key_id, key(7));
                assert_eq!(
                    r.decrypt_value(&serde_json::from_slice(&first).unwrap(), MSG).as_deref(),
                    Ok(&b"{\"a\":1}"[..])
                );
            }
        }
    }

    #[test]
    fn keys_are_32_bytes_of_base64() {
        assert!(Key::from_b64(&B64.encode([1u8; 32])).is_ok());
        assert_eq!(Key::from_b64(&B64.encode([1u8; 16])).unwrap_err(), "decodes to 16 bytes, not 32");
        assert!(Key::from_b64("not base64!").is_err());
        assert_eq!(format!("{:?}", key(1)), "Key(..)");
    }
}
