//! Idempotency keys: the identity a sink uses to make a redelivered message harmless.
//!
//! The key strings match the reference exactly, because spool file names, object keys,
//! table keys and HTTP `Idempotency-Key` headers are all derived from them:
//! `stream-sequence:{stream}:{seq}`, `message-id:{id}`, `payload-sha256:{subject}:{hex}`.
//! The default precedence is stream sequence, then message id, then payload hash. A
//! `payload_field` strategy takes a scalar from the normalized JSON payload instead.

use serde::{Deserialize, Serialize};

use crate::envelope::Envelope;

pub use crate::key::{IdempotencyError, IdempotencyKey};

/// The reason code every sink gives a message refused because its key (a stream sequence,
/// an origin sequence) already holds a different event's record: the record is kept and the
/// message is refused permanently (certification clause C12), and DLQ records, metrics and
/// `redrive` read this code. Sinks that decide through `sinks_contract::existing` use it there.
pub const SEQUENCE_REUSED: &str = "sequence_reused";

impl IdempotencyKey {
    /// `stream-sequence:{origin}:{seq}` of the stream `envelope`'s event was first stored in
    /// ([`Envelope::origin`]; the consumed stream when it has none).
    pub fn origin_sequence(envelope: &Envelope) -> Result<Self, IdempotencyError> {
        envelope.origin_sequence().map(|(stream, sequence)| Self::stream_sequence(&stream, sequence))
    }
}

/// Which single identity a message's key is built from, for sinks that key each message by
/// one identity (HTTP `idempotency.strategy`, S3 `key_strategy`). Values as in the reference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeySource {
    /// The envelope's default key: stream sequence, else message id, else payload hash.
    #[default]
    IdempotencyKey,
    /// `stream-sequence:{stream}:{seq}` only.
    StreamSequence,
    /// `stream-sequence:{origin}:{seq}` of the stream the event was first stored in (through
    /// a mirror or a source; [`Envelope::origin`]): the same event reached by any path gets
    /// one key. For a plain stream, exactly [`KeySource::StreamSequence`]'s key.
    OriginSequence,
    /// `message-id:{id}` only.
    MessageId,
    /// `payload-sha256:{subject}:{hex}` (refused for headers-only deliveries).
    PayloadSha256,
}

impl KeySource {
    /// The value as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::IdempotencyKey => "idempotency_key",
            Self::StreamSequence => "stream_sequence",
            Self::OriginSequence => "origin_sequence",
            Self::MessageId => "message_id",
            Self::PayloadSha256 => "payload_sha256",
        }
    }

    /// The key of `envelope`; an error when the message lacks the identity this source needs.
    pub fn key_of(self, envelope: &Envelope) -> Result<IdempotencyKey, IdempotencyError> {
        let js = envelope.jetstream();
        match self {
            Self::IdempotencyKey => envelope.idempotency_key(),
            Self::StreamSequence if js.stream.is_empty() || js.stream_sequence == 0 => {
                Err(IdempotencyError::MissingStreamSequence)
            }
            Self::StreamSequence => Ok(IdempotencyKey::stream_sequence(&envelope.keyed_stream(), js.stream_sequence)),
            Self::OriginSequence => IdempotencyKey::origin_sequence(envelope),
            Self::MessageId => {
                envelope.message_id().map(IdempotencyKey::message_id).ok_or(IdempotencyError::MissingMessageId)
            }
            Self::PayloadSha256 if envelope.presence().omitted => Err(IdempotencyError::PayloadOmitted),
            Self::PayloadSha256 => Ok(IdempotencyKey::payload_sha256(envelope.subject(), envelope.payload())),
        }
    }
}

/// How a sink derives the key of each message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdempotencyStrategy {
    /// `stream-sequence:{stream}:{seq}`; recommended for a single stream.
    #[default]
    StreamSequence,
    /// The origin's stream sequence (see [`KeySource::OriginSequence`]).
    OriginSequence,
    /// `message-id:{id}` from the publisher's `Nats-Msg-Id` (survives mirrors and sources).
    MessageId,
    /// A scalar taken from the normalized JSON payload at a dotted path.
    PayloadField,
}

impl IdempotencyStrategy {
    /// True for the strategies whose keys are a stream and a sequence.
    pub fn is_sequence(self) -> bool {
        matches!(self, Self::StreamSequence | Self::OriginSequence)
    }

    /// Derives the key for `envelope`. `payload_field` needs the dotted `path` and the
    /// normalized payload as a JSON value.
    pub fn key_for(
        self,
        envelope: &Envelope,
        path: Option<&str>,
        normalized: Option<&serde_json::Value>,
    ) -> Result<IdempotencyKey, IdempotencyError> {
        match self {
            Self::StreamSequence => {
                let js = envelope.jetstream();
                if js.stream.is_empty() || js.stream_sequence == 0 {
                    return Err(IdempotencyError::MissingStreamSequence);
                }
                Ok(IdempotencyKey::stream_sequence(&envelope.keyed_stream(), js.stream_sequence))
            }
            Self::OriginSequence => IdempotencyKey::origin_sequence(envelope),
            Self::MessageId => {
                envelope.message_id().map(IdempotencyKey::message_id).ok_or(IdempotencyError::MissingMessageId)
            }
            Self::PayloadField => {
                let path = path.unwrap_or_default();
                let value = normalized.unwrap_or(&serde_json::Value::Null);
                payload_field(value, path).map(IdempotencyKey::from_raw)
            }
        }
    }
}

/// Extracts the scalar at dotted `path` from a JSON value, rendered as text.
///
/// Missing, null, object, array and empty-string values are refused. Numbers are rendered
/// canonically (integers as written, other numbers as the shortest text of their `f64`:
/// `1e3` → `1000.0`), booleans as `true` / `false`. The rendering does not depend on
/// serde_json's `arbitrary_precision` feature (which the Oracle NoSQL SDK turns on for the
/// whole build), so a key never changes with the set of sinks compiled in.
pub fn payload_field(value: &serde_json::Value, path: &str) -> Result<String, IdempotencyError> {
    let err = |problem| IdempotencyError::PayloadField { path: path.to_owned(), problem };
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(err("is not a valid dotted path"));
    }
    let mut current = value;
    for part in path.split('.') {
        current = match current {
            serde_json::Value::Object(map) => map.get(part).ok_or_else(|| err("is missing"))?,
            serde_json::Value::Array(items) => {
                part.parse::<usize>().ok().and_then(|i| items.get(i)).ok_or_else(|| err("is missing"))?
            }
            _ => return Err(err("is missing")),
        };
    }
    match current {
        serde_json::Value::Null => Err(err("is null")),
        serde_json::Value::Object(_) | serde_json::Value::Array(_) => Err(err("is not a scalar")),
        serde_json::Value::String(s) if s.trim().is_empty() => Err(err("is empty")),
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Bool(b) => Ok(b.to_string()),
        serde_json::Value::Number(n) => Ok(canonical_number(n)),
    }
}

/// `n` as serde_json renders it without `arbitrary_precision`.
fn canonical_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        n.as_f64().and_then(serde_json::Number::from_f64).map_or_else(|| n.to_string(), |f| f.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{Headers, JetStreamInfo};

    fn env(stream: &str, seq: u64, headers: Headers, body: &'static [u8]) -> Envelope {
        Envelope::new(
            "orders.created",
            body,
            headers,
            JetStreamInfo {
                stream: stream.into(),
                consumer: "c".into(),
                stream_sequence: seq,
                consumer_sequence: 1,
                delivered: 1,
                pending: 0,
                timestamp: None,
                domain: None,
            },
        )
    }

    #[test]
    fn payload_field_numbers_render_the_same_in_every_build() {
        let doc: serde_json::Value =
            serde_json::from_str(r#"{"i":42,"n":-7,"f":2.50,"e":1e3,"big":123456789012345678901234567890}"#).unwrap();
        assert_eq!(payload_field(&doc, "i").unwrap(), "42");
        assert_eq!(payload_field(&doc, "n").unwrap(), "-7");
        assert_eq!(payload_field(&doc, "f").unwrap(), "2.5");
        assert_eq!(payload_field(&doc, "e").unwrap(), "1000.0");
        assert_eq!(payload_field(&doc, "big").unwrap(), "1.2345678901234568e+29");
    }

    #[test]
    fn precedence_matches_the_reference() {
        let with_id = Headers::new().with("nats-msg-id", "abc");
        assert_eq!(
            env("ORDERS", 7, with_id.clone(), b"{}").idempotency_key().unwrap().as_str(),
            "stream-sequence:ORDERS:7"
        );
        assert_eq!(env("", 0, with_id, b"{}").idempotency_key().unwrap().as_str(), "message-id:abc");
        assert_eq!(
            env("", 0, Headers::new(), b"hi").idempotency_key().unwrap().as_str(),
            "payload-sha256:orders.created:8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4"
        );
    }

    #[test]
    fn message_id_headers_are_case_insensitive_and_ordered() {
        let h = Headers::new().with("MESSAGE-ID", "third").with("nats-message-id", "second");
        assert_eq!(env("", 0, h, b"").message_id(), Some("second"));
    }

    #[test]
    fn headers_only_refuses_the_payload_hash() {
        let h = Headers::new().with("Nats-Msg-Size", "42");
        let e = env("", 0, h, b"");
        assert!(e.presence().omitted);
        assert_eq!(e.presence().original_size_bytes, Some(42));
        assert_eq!(e.idempotency_key(), Err(IdempotencyError::PayloadOmitted));
    }

    #[test]
    fn payload_field_extracts_scalars_only() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{"a":{"id":"x-1","n":12,"z":null,"o":{},"e":" "},"l":[5]}"#).unwrap();
        assert_eq!(payload_field(&v, "a.id").unwrap(), "x-1");
        assert_eq!(payload_field(&v, "a.n").unwrap(), "12");
        assert_eq!(payload_field(&v, "l.0").unwrap(), "5");
        for (path, problem) in [
            ("a.missing", "is missing"),
            ("a.z", "is null"),
            ("a.o", "is not a scalar"),
            ("a.e", "is empty"),
            ("a..b", "is not a valid dotted path"),
        ] {
            match payload_field(&v, path) {
                Err(IdempotencyError::PayloadField { problem: p, .. }) => assert_eq!(p, problem),
                other => panic!("{path}: {other:?}"),
            }
        }
    }
}
