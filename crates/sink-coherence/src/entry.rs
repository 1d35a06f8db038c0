//! Pure: what is written for a message, in Coherence's JSON wire format. No I/O here.
//!
//! - The **key**: `[key_prefix:]<raw>`, `<raw>` per `key_strategy` (the reference's strings:
//!   `stream-sequence:S:N`, `message-id:ID`, `payload-sha256:SUBJ:HEX`; `stream-sequence:S.EPOCH:N`
//!   in a later epoch of the stream, whose documents also carry `stream_epoch`), sent as a
//!   JSON string. Different identities never share a key (the strings are not sanitized).
//! - The **value**: the reference's `nats_sinks.coherence.event.v1` document (sorted keys,
//!   compact UTF-8): identity, timestamps, headers, the standard metadata document, the
//!   normalized payload and `payload_info`. The proxy re-encodes the JSON it stores (no
//!   whitespace, numbers as Java doubles: `1.50` → `1.5`, integers beyond 2^63 lose
//!   digits), so a JSON payload is also kept byte for byte as the string
//!   `payload_exact`; envelopes (text, base64) are strings already and survive as they are.
//! - The **wire format**: the byte `0x15` followed by the JSON text (Coherence's `json`
//!   serializer), for keys and values alike.
//! - The **fingerprint**: `payload_info.sha256` (SHA-256 of the original payload bytes),
//!   read back from a stored document to tell a duplicate from a conflict.
//! - The **read-back** of `nats-sink reconcile` ([`presence`]): the stored document's
//!   fingerprint and the payload it actually holds, both against the message's.

use bytes::Bytes;
use serde_json::value::RawValue;
use sinks_contract::idempotency::IdempotencyError;
use sinks_contract::payload::{self, NormalizedPayload, PayloadError};
use sinks_contract::{Envelope, Presence};
use sinks_toolkit::metadata::{self, MetadataScope};
use time::OffsetDateTime;

use crate::config::CoherenceSinkConfig;

/// What a key is made of under the key strategy (`sinks_contract::existing`), for the
/// existing-key decision and the sink's capabilities.
pub(crate) use sinks_contract::existing::{key_basis, strategy_basis};

/// `schema` of stored documents.
pub(crate) const EVENT_SCHEMA: &str = "nats_sinks.coherence.event.v1";
/// The first byte of a value in Coherence's JSON serialization format.
pub(crate) const JSON_FORMAT_BYTE: u8 = 0x15;

/// Why nothing can be written for a message. Permanent for that message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EntryError {
    /// The key strategy needs identity the message does not carry.
    #[error(transparent)]
    Key(#[from] IdempotencyError),
    /// The payload cannot be stored under the configured payload mode.
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// The key is longer than `max_key_bytes`.
    #[error("coherence key of {size} bytes exceeds sink.max_key_bytes ({max})")]
    KeyTooLong {
        /// Key size.
        size: usize,
        /// The limit.
        max: u64,
    },
    /// The value is larger than `max_value_bytes`.
    #[error("coherence value of {size} bytes exceeds sink.max_value_bytes ({max})")]
    TooLarge {
        /// Value size.
        size: usize,
        /// The limit.
        max: u64,
    },
    /// Serializing failed.
    #[error("coherence value cannot be encoded ({0})")]
    Encode(String),
}

/// One entry ready to be written.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    /// The key text (for ordering and logs of its length only).
    pub(crate) key: String,
    /// The key on the wire (`0x15` + JSON string).
    pub(crate) wire_key: Bytes,
    /// The value on the wire (`0x15` + JSON document).
    pub(crate) wire_value: Bytes,
    /// SHA-256 of the original payload bytes.
    pub(crate) fingerprint: String,
}

/// The key text of `envelope` (prefix included), checked against `max_key_bytes`.
pub(crate) fn entry_key(envelope: &Envelope, config: &CoherenceSinkConfig) -> Result<String, EntryError> {
    let raw = config.key_strategy.key_of(envelope)?;
    let key = match &config.key_prefix {
        Some(prefix) => format!("{prefix}:{}", raw.as_str()),
        None => raw.as_str().to_owned(),
    };
    if key.len() as u64 > config.max_key_bytes {
        return Err(EntryError::KeyTooLong { size: key.len(), max: config.max_key_bytes });
    }
    Ok(key)
}

/// `0x15` followed by `json`.
pub(crate) fn to_wire(json: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 1);
    out.push(JSON_FORMAT_BYTE);
    out.extend_from_slice(json);
    Bytes::from(out)
}

/// The JSON text of a wire value, `None` when it is not in the JSON format.
pub(crate) fn from_wire(wire: &[u8]) -> Option<&[u8]> {
    match wire.split_first() {
        Some((&JSON_FORMAT_BYTE, json)) => Some(json),
        _ => None,
    }
}

/// A key on the wire: the JSON string of `key`.
pub(crate) fn wire_key(key: &str) -> Bytes {
    // Serializing a string cannot fail.
    to_wire(&serde_json::to_vec(key).unwrap_or_default())
}

/// Builds the entry written for `envelope`, stored at `stored_at`.
pub(crate) fn prepare(
    envelope: &Envelope,
    config: &CoherenceSinkConfig,
    stored_at: OffsetDateTime,
) -> Result<Prepared, EntryError> {
    let key = entry_key(envelope, config)?;
    // Keyed by the origin, the entry is the event as its origin stored it, whatever the path.
    let origin_keyed = config.key_strategy == crate::config::KeyStrategy::OriginSequence;
    let event = config.metadata_scope.content_of(envelope, origin_keyed)?;
    let normalized = payload::normalize(event.payload(), config.payload_mode)?;
    let json = document(&event, &normalized, (stored_at, config.metadata_scope))?;
    if json.len() as u64 > config.max_value_bytes {
        return Err(EntryError::TooLarge { size: json.len(), max: config.max_value_bytes });
    }
    Ok(Prepared { wire_key: wire_key(&key), key, wire_value: to_wire(&json), fingerprint: normalized.sha256 })
}

/// The `nats_sinks.coherence.event.v1` document of `envelope`.
pub(crate) fn document(
    envelope: &Envelope,
    normalized: &NormalizedPayload,
    (stored_at, scope): (OffsetDateTime, MetadataScope),
) -> Result<Vec<u8>, EntryError> {
    let doc = metadata::MetadataDoc::scoped(envelope, stored_at, scope);
    let event = metadata::EventDoc {
        payload_exact: (!normalized.wrapped).then(|| normalized.value.get()),
        ..metadata::EventDoc::new(envelope, normalized, &doc, EVENT_SCHEMA).without_policy_documents()
    };
    serde_json::to_vec(&event).map_err(|e| EntryError::Encode(e.to_string()))
}

/// The payload fingerprint (`payload_info.sha256`) of a stored wire value, `None` when the
/// value is not a document this sink can compare.
pub(crate) fn stored_fingerprint(wire: &[u8]) -> Option<String> {
    payload::stored_payload_sha256(from_wire(wire)?)
}

/// What the cache holds for `envelope`, given the wire value `stored` under its key (`None`:
/// no entry). Equal only when the document's recorded fingerprint (`payload_info.sha256`)
/// and the payload it actually holds (`payload_exact`, or the decoded envelope) both match
/// the message's: an entry whose payload was edited behind the sink's back, or a value
/// that is not a document of this sink, is different. A message this sink cannot build an
/// entry for (no identity for its key, a payload the mode refuses) was never written:
/// missing (reconcile then looks for it in the dead-letter stream).
pub(crate) fn presence(envelope: &Envelope, config: &CoherenceSinkConfig, stored: Option<&[u8]>) -> Presence {
    let Some(stored) = stored else { return Presence::Missing };
    let Ok(normalized) = payload::normalize(envelope.payload(), config.payload_mode) else {
        return Presence::Missing;
    };
    // What the sink stored as the payload: the trimmed JSON text, or the original bytes of
    // a wrapped payload.
    let expected: &[u8] = if normalized.wrapped { envelope.payload() } else { normalized.value.get().as_bytes() };
    let same_fingerprint = stored_fingerprint(stored).is_some_and(|f| f == normalized.sha256);
    let same_payload = decode_stored(stored).is_ok_and(|doc| doc.payload == expected);
    if same_fingerprint && same_payload { Presence::Equal } else { Presence::Different }
}

/// What a stored document says about its message: stream, sequence and original payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// `stream` of the document.
    pub stream: String,
    /// `stream_sequence` of the document.
    pub stream_sequence: u64,
    /// The original payload bytes (from `payload_exact`, else the decoded `payload`).
    pub payload: Bytes,
}

/// Decodes a stored wire value (as read back from the cache) into its message identity and
/// original payload.
pub fn decode_stored(wire: &[u8]) -> Result<StoredEvent, String> {
    #[derive(serde::Deserialize)]
    struct Doc<'a> {
        stream: String,
        stream_sequence: u64,
        #[serde(borrow)]
        payload: &'a RawValue,
        payload_exact: Option<String>,
        payload_info: Info,
    }
    #[derive(serde::Deserialize)]
    struct Info {
        wrapped: bool,
    }
    let json = from_wire(wire).ok_or("stored value is not in the json format")?;
    let doc: Doc<'_> = serde_json::from_slice(json).map_err(|e| format!("not an event document: {e}"))?;
    let payload = match (doc.payload_exact, doc.payload_info.wrapped) {
        (Some(exact), _) => Bytes::from(exact),
        (None, true) => Bytes::from(payload::decode_stored(doc.payload.get())),
        (None, false) => Bytes::copy_from_slice(doc.payload.get().as_bytes()),
    };
    Ok(StoredEvent { stream: doc.stream, stream_sequence: doc.stream_sequence, payload })
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use sinks_contract::testing::{envelope, envelope_with};
    use sinks_contract::{Headers, PayloadMode};

    use super::*;
    use crate::config::KeyStrategy;

    fn config() -> CoherenceSinkConfig {
        CoherenceSinkConfig::default()
    }

    #[test]
    fn a_redelivery_writes_the_same_entry() {
        let e = envelope("ORDERS", 7, "orders.created", r#"{"b": 1}"#);
        let again = sinks_contract::testing::redelivery(&e, time::Duration::seconds(30));
        let later = OffsetDateTime::now_utc() + time::Duration::seconds(31);
        let one = prepare(&e, &config(), OffsetDateTime::now_utc()).unwrap();
        assert_eq!(one.wire_value, prepare(&again, &config(), later).unwrap().wire_value);
        let doc: serde_json::Value = serde_json::from_slice(from_wire(&one.wire_value).unwrap()).unwrap();
        for member in ["consumer", "consumer_sequence", "received_at_epoch_ns", "stored_at_epoch_ns"] {
            assert!(doc.get(member).is_none(), "{member}");
        }
        let reference = CoherenceSinkConfig { metadata_scope: MetadataScope::Delivery, ..config() };
        assert_ne!(
            prepare(&e, &reference, OffsetDateTime::now_utc()).unwrap().wire_value,
            prepare(&again, &reference, later).unwrap().wire_value
        );
    }

    #[test]
    fn keys_are_the_reference_strings_as_json() {
        let e = envelope("ORDERS", 7, "orders.created", "{}");
        let mut c = config();
        assert_eq!(entry_key(&e, &c).unwrap(), "stream-sequence:ORDERS:7");
        c.key_prefix = Some("archive".into());
        assert_eq!(entry_key(&e, &c).unwrap(), "archive:stream-sequence:ORDERS:7");
        assert_eq!(&wire_key("k1")[..], b"\x15\"k1\"");
        c.key_strategy = KeyStrategy::MessageId;
        assert!(matches!(entry_key(&e, &c), Err(EntryError::Key(_))));
        let with_id = envelope_with("S", 1, "s", "{}", Headers::new().with("Nats-Msg-Id", "a\"b"), 1);
        let key = entry_key(&with_id, &c).unwrap();
        assert_eq!(key, "archive:message-id:a\"b");
        assert_eq!(&wire_key(&key)[..], b"\x15\"archive:message-id:a\\\"b\"");
        c.key_prefix = None;
        c.max_key_bytes = 64;
        let long = envelope_with("S", 1, "s", "{}", Headers::new().with("Nats-Msg-Id", "x".repeat(80)), 1);
        assert!(matches!(entry_key(&long, &c), Err(EntryError::KeyTooLong { .. })));
    }

    #[test]
    fn a_later_epoch_keys_its_entries_apart_and_says_so() {
        let e = envelope_with("ORDERS", 7, "o", "{}", Headers::new().with("Nats-Msg-Id", "m-7"), 1);
        let later = e.clone().with_stream_epoch(Some("e17".into()));
        let key = |e: &Envelope, key_strategy| entry_key(e, &CoherenceSinkConfig { key_strategy, ..config() }).unwrap();
        assert_eq!(key(&later, KeyStrategy::IdempotencyKey), "stream-sequence:ORDERS.e17:7");
        assert_eq!(key(&later, KeyStrategy::StreamSequence), "stream-sequence:ORDERS.e17:7");
        assert_eq!(key(&later, KeyStrategy::MessageId), key(&e, KeyStrategy::MessageId));
        let doc = |e: &Envelope| -> Value {
            let p = prepare(e, &config(), OffsetDateTime::now_utc()).unwrap();
            serde_json::from_slice(from_wire(&p.wire_value).unwrap()).unwrap()
        };
        let d = doc(&later);
        assert_eq!((&d["stream"], &d["stream_epoch"]), (&Value::from("ORDERS"), &Value::from("e17")));
        assert!(doc(&e).get("stream_epoch").is_none(), "the reference's document for a stream that never changed");
    }

    #[test]
    fn the_document_has_the_reference_shape_with_sorted_keys() {
        let e = envelope("ORDERS", 7, "orders.created", r#" {"b" : 1.50, "a": 12345678901234567890} "#);
        let reference = CoherenceSinkConfig { metadata_scope: MetadataScope::Delivery, ..config() };
        let p = prepare(&e, &reference, OffsetDateTime::now_utc()).unwrap();
        assert_eq!(p.wire_value[0], JSON_FORMAT_BYTE);
        let json = from_wire(&p.wire_value).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(json).unwrap();
        let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        for field in [
            "schema",
            "schema_version",
            "subject",
            "stream",
            "stream_sequence",
            "consumer",
            "consumer_sequence",
            "message_id",
            "priority",
            "classification",
            "labels",
            "labels_list",
            "message_created_at_epoch_ns",
            "jetstream_timestamp_epoch_ns",
            "received_at_epoch_ns",
            "stored_at_epoch_ns",
            "headers",
            "metadata",
            "mission_metadata",
            "security_labels",
            "custody",
            "payload",
            "payload_info",
        ] {
            assert!(doc.get(field).is_some(), "missing {field}");
        }
        assert_eq!(doc["schema"], EVENT_SCHEMA);
        assert_eq!(doc["payload_info"]["wrapped"], false);
        assert_eq!(doc["payload_exact"], r#"{"b" : 1.50, "a": 12345678901234567890}"#);
        assert!(doc["metadata"].get("custody").is_some(), "metadata carries custody as in the reference");
        assert_eq!(
            p.fingerprint,
            sinks_contract::payload::normalize(e.payload(), PayloadMode::JsonOrEnvelope).unwrap().sha256
        );
        let stored = decode_stored(&p.wire_value).unwrap();
        assert_eq!(stored.payload, e.payload().trim_ascii());
        assert_eq!((stored.stream.as_str(), stored.stream_sequence), ("ORDERS", 7));
        assert_eq!(stored_fingerprint(&p.wire_value), Some(p.fingerprint.clone()));
    }

    #[test]
    fn wrapped_payloads_decode_without_an_exact_copy() {
        let binary = envelope("S", 1, "s", vec![0xff, 0x00, 0x10]);
        let p = prepare(&binary, &config(), OffsetDateTime::now_utc()).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(from_wire(&p.wire_value).unwrap()).unwrap();
        assert!(doc.get("payload_exact").is_none());
        assert_eq!(&decode_stored(&p.wire_value).unwrap().payload[..], &[0xff, 0x00, 0x10]);
        // What the proxy hands back is re-encoded JSON: the envelope still decodes.
        let reencoded = to_wire(serde_json::to_string(&doc).unwrap().as_bytes());
        assert_eq!(&decode_stored(&reencoded).unwrap().payload[..], &[0xff, 0x00, 0x10]);
        let text = envelope("S", 2, "s", "NaN is not JSON");
        let p = prepare(&text, &config(), OffsetDateTime::now_utc()).unwrap();
        assert_eq!(&decode_stored(&p.wire_value).unwrap().payload[..], b"NaN is not JSON");
    }

    #[test]
    fn limits_and_modes_fail_permanently_before_any_request() {
        let mut c = config();
        c.max_value_bytes = 100;
        let e = envelope("S", 1, "s", "{}");
        assert!(matches!(prepare(&e, &c, OffsetDateTime::now_utc()), Err(EntryError::TooLarge { .. })));
        let mut c = config();
        c.payload_mode = PayloadMode::JsonOnly;
        let text = envelope("S", 1, "s", "plain");
        assert!(matches!(prepare(&text, &c, OffsetDateTime::now_utc()), Err(EntryError::Payload(_))));
    }

    #[test]
    fn reconcile_compares_the_recorded_fingerprint_and_the_stored_payload() {
        let c = config();
        let now = OffsetDateTime::now_utc();
        let json = envelope("S", 1, "s", r#" {"b" : 1.50, "a": 12345678901234567890} "#);
        let binary = envelope("S", 2, "s", vec![0xff, 0x00, 0x10]);
        let text = envelope("S", 3, "s", "plain text");
        let stored = |e: &Envelope| prepare(e, &c, now).unwrap().wire_value;
        let doc_of = |e: &Envelope| -> Value { serde_json::from_slice(from_wire(&stored(e)).unwrap()).unwrap() };
        let wire = |doc: &Value| to_wire(serde_json::to_string(doc).unwrap().as_bytes());
        // As the proxy hands it back: re-encoded JSON (1.50 -> 1.5, the big integer rounded).
        let reencoded = |e: &Envelope| {
            let mut doc = doc_of(e);
            if doc["payload_info"]["wrapped"] == false {
                doc["payload"] = serde_json::json!({"a": 1.2345678901234567e19, "b": 1.5});
            }
            wire(&doc)
        };
        let mut edited_exact = doc_of(&json);
        edited_exact["payload_exact"] = r#"{"b" : 9, "a": 1}"#.into();
        let mut edited_fingerprint = doc_of(&json);
        edited_fingerprint["payload_info"]["sha256"] = "0".repeat(64).into();
        let mut edited_binary = doc_of(&binary);
        edited_binary["payload"]["payload"] = "AAAA".into();
        let mut no_exact = doc_of(&json);
        no_exact.as_object_mut().unwrap().remove("payload_exact");
        let rows: Vec<(&str, &Envelope, Option<Bytes>, Presence)> = vec![
            ("no entry", &json, None, Presence::Missing),
            ("as written", &json, Some(stored(&json)), Presence::Equal),
            ("as the proxy re-encodes it", &json, Some(reencoded(&json)), Presence::Equal),
            ("binary as written", &binary, Some(stored(&binary)), Presence::Equal),
            ("binary re-encoded", &binary, Some(reencoded(&binary)), Presence::Equal),
            ("text as written", &text, Some(stored(&text)), Presence::Equal),
            ("another message's entry", &json, Some(stored(&text)), Presence::Different),
            ("payload edited, fingerprint kept", &json, Some(wire(&edited_exact)), Presence::Different),
            ("fingerprint edited, payload kept", &json, Some(wire(&edited_fingerprint)), Presence::Different),
            ("binary payload edited", &binary, Some(wire(&edited_binary)), Presence::Different),
            ("json without its exact copy", &json, Some(wire(&no_exact)), Presence::Different),
            ("not a document", &json, Some(to_wire(br#"{"a":1}"#)), Presence::Different),
            ("not the json format", &json, Some(Bytes::from_static(b"{}")), Presence::Different),
            ("empty value", &json, Some(Bytes::new()), Presence::Different),
        ];
        for (case, e, stored, want) in rows {
            assert_eq!(presence(e, &c, stored.as_deref()), want, "{case}");
        }
        // A payload the mode refuses was never written (it was dead-lettered): missing.
        let mut json_only = config();
        json_only.payload_mode = PayloadMode::JsonOnly;
        assert_eq!(presence(&text, &json_only, Some(&stored(&text))), Presence::Missing);
    }

    #[test]
    fn wire_values_need_the_json_format_byte() {
        assert_eq!(from_wire(b"\x15{}"), Some(&b"{}"[..]));
        assert_eq!(from_wire(b"{}"), None);
        assert_eq!(from_wire(b""), None);
        assert_eq!(stored_fingerprint(b"\x15{\"a\":1}"), None);
        assert!(decode_stored(b"{}").is_err());
    }
}
