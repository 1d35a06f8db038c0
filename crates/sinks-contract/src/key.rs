//! The idempotency key as a value: its text ([`IdempotencyKey`], in the reference's forms)
//! and why none could be derived ([`IdempotencyError`]). It knows no envelope, so the
//! envelope can name it; how a key is derived from an envelope is [`crate::idempotency`],
//! which re-exports both (their public path).

use std::fmt;

use sha2::{Digest, Sha256};

/// A stable identity for one logical event.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Wraps an already formatted key.
    pub fn from_raw(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Lowercase hex SHA-256 of the key text (used where the key itself must not leak).
    pub fn sha256_hex(&self) -> String {
        format!("{:x}", Sha256::digest(self.0.as_bytes()))
    }

    /// `stream-sequence:{stream}:{seq}`.
    pub fn stream_sequence(stream: &str, seq: u64) -> Self {
        Self(format!("stream-sequence:{stream}:{seq}"))
    }

    /// `message-id:{id}`.
    pub fn message_id(id: &str) -> Self {
        Self(format!("message-id:{id}"))
    }

    /// `payload-sha256:{subject}:{hex}`.
    pub fn payload_sha256(subject: &str, payload: &[u8]) -> Self {
        Self(format!("payload-sha256:{subject}:{:x}", Sha256::digest(payload)))
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why no idempotency key could be derived. Always a permanent problem for that message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdempotencyError {
    /// Headers-only delivery without stream sequence or message id: a payload hash would
    /// collide for every omitted body.
    #[error("payload omitted by headers-only delivery; refusing the payload-hash key")]
    PayloadOmitted,
    /// The `message_id` strategy was chosen but the message carries no id header.
    #[error("message has no Nats-Msg-Id, Nats-Message-Id or message-id header")]
    MissingMessageId,
    /// The `stream_sequence` strategy was chosen but stream metadata is missing.
    #[error("message has no stream sequence")]
    MissingStreamSequence,
    /// The `origin_sequence` strategy was chosen but the stream the event was first stored
    /// in could not be told (a `Nats-Stream-Source` header that does not parse, a chain
    /// whose earlier copy is gone).
    #[error("the origin of the message cannot be told: {0}")]
    OriginUnresolved(String),
    /// The payload field strategy could not find a usable scalar.
    #[error("payload field `{path}` {problem}")]
    PayloadField {
        /// Dotted path that was looked up.
        path: String,
        /// What was wrong (missing, null, not a scalar, empty, ...).
        problem: &'static str,
    },
}

impl IdempotencyError {
    /// Reason code recorded in DLQ records (`idempotency_key_unavailable_reason`).
    pub fn reason_code(&self) -> &'static str {
        match self {
            Self::PayloadOmitted => "payload_omitted",
            Self::MissingMessageId => "message_id_missing",
            Self::MissingStreamSequence => "stream_sequence_missing",
            Self::OriginUnresolved(_) => "origin_unresolved",
            Self::PayloadField { .. } => "payload_field_unusable",
        }
    }
}
