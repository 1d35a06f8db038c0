//! Pure: what is written for a message. No I/O here.
//!
//! - The **object key**: `[prefix/][key_prefix:]<raw><object_suffix>`, where `<raw>` is
//!   `idempotency-key/<k>`, `stream-sequence/<stream>/<seq>`, `message-id/<id>` or
//!   `payload-sha256/<subject>/<hex>` with every external value passed through
//!   [`safe_part`]. Unlike the reference (W3), two different values never share a key. In a
//!   later epoch of the stream `<stream>` (and the stream in `<k>`) is `<stream>.<epoch>`
//!   (`Envelope::keyed_stream`), and the documents carry `stream_epoch`.
//! - The **body**: the `nats_sinks.s3.object.v1` document (sorted keys, compact UTF-8, the
//!   payload embedded as its normalized raw JSON text) or the normalized payload alone;
//!   optionally gzip with mtime 0 (deterministic).
//! - The **user metadata** and the optional **sidecar** document.
//! - The **fingerprint** of a message (SHA-256 of its original payload bytes) and how to
//!   recover it from a stored object, for the content check.

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use sinks_contract::Envelope;
use sinks_contract::existing;
use sinks_contract::idempotency::IdempotencyError;
use sinks_contract::payload::{self, NormalizedPayload, PayloadError};
use sinks_toolkit::metadata;
use time::OffsetDateTime;

use crate::config::{Compression, KeyStrategy, MetadataMode, ObjectFormat, S3SinkConfig};

/// What a key is made of under the key strategy (`sinks_contract::existing`), for the
/// existing-key decision and the sink's capabilities.
pub(crate) use sinks_contract::existing::{key_basis, strategy_basis};

/// `schema` of primary envelope objects.
pub(crate) const OBJECT_SCHEMA: &str = "nats_sinks.s3.object.v1";
/// `schema` of sidecar objects.
pub(crate) const SIDECAR_SCHEMA: &str = "nats_sinks.s3.sidecar.v1";
/// User-metadata name of the payload fingerprint (content check).
pub(crate) const FINGERPRINT_METADATA: &str = "nats-sinks-payload-sha256";
/// Longest sanitized value kept before it is shortened (and marked with its digest).
const MAX_PART_LEN: usize = 200;
/// Gzip level of compressed bodies (flate2's default).
const GZIP_LEVEL: u32 = 6;
/// Hex digits of the SHA-256 appended to a value that sanitizing changed (128 bits).
const DIGEST_HEX_LEN: usize = 32;

/// Why nothing can be written for a message. Permanent for that message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ObjectError {
    /// The key strategy needs identity the message does not carry.
    #[error(transparent)]
    Key(#[from] IdempotencyError),
    /// The payload cannot be stored under the configured payload mode.
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// The object key is longer than `max_key_bytes`.
    #[error("object key of {size} bytes exceeds sink.max_key_bytes ({max})")]
    KeyTooLong {
        /// Key size.
        size: usize,
        /// The limit.
        max: u64,
    },
    /// The body (after compression) is larger than `max_object_bytes`.
    #[error("object body of {size} bytes exceeds sink.max_object_bytes ({max})")]
    TooLarge {
        /// Body size.
        size: usize,
        /// The limit.
        max: u64,
    },
    /// The user metadata is larger than `max_metadata_bytes`.
    #[error("object metadata of {size} bytes exceeds sink.max_metadata_bytes ({max})")]
    MetadataTooLarge {
        /// Metadata size.
        size: usize,
        /// The limit.
        max: u64,
    },
    /// Serializing or compressing failed.
    #[error("object cannot be encoded ({0})")]
    Encode(String),
}

/// One object ready to be put.
#[derive(Debug, Clone)]
pub(crate) struct ObjectBody {
    /// Full object key (prefix and suffix included).
    pub(crate) key: String,
    /// Body bytes (compressed when configured).
    pub(crate) body: Bytes,
    /// `Content-Encoding` (`gzip`) when compressed.
    pub(crate) content_encoding: Option<&'static str>,
    /// User metadata, `(name, value)`, names lowercase.
    pub(crate) metadata: Vec<(String, String)>,
}

/// Everything written for one message.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    /// The primary object.
    pub(crate) primary: ObjectBody,
    /// The metadata sidecar (with `metadata_mode = "sidecar"`).
    pub(crate) sidecar: Option<ObjectBody>,
    /// SHA-256 of the original payload bytes.
    pub(crate) fingerprint: String,
}

/// Lowercase hex SHA-256 of `data`.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

fn is_safe(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// A key segment for the external `value`, collision-free.
///
/// A value made only of `[A-Za-z0-9._-]`, not starting or ending with `.`, `_` or `-` and at
/// most 200 characters long is kept as is (the reference's segment for the same value). Any
/// other value is sanitized the reference's way (each other character becomes `_`, edges
/// trimmed, `value` when nothing is left, cut at 200 characters) and gets `~` plus the
/// first 128 bits of its SHA-256 appended. `~` never occurs in a kept value, so a kept value
/// and a marked one never meet, and two marked ones meet only if their digests do.
pub(crate) fn safe_part(value: &str) -> String {
    let replaced: String = value.chars().map(|c| if is_safe(c) { c } else { '_' }).collect();
    let trimmed = replaced.trim_matches(['.', '_', '-']);
    if trimmed == value && !value.is_empty() && value.len() <= MAX_PART_LEN {
        return value.to_owned();
    }
    // `trimmed` is ASCII, so byte slicing stays on character boundaries.
    let kept = if trimmed.is_empty() { "value" } else { &trimmed[..trimmed.len().min(MAX_PART_LEN)] };
    format!("{kept}~{}", &sha256_hex(value.as_bytes())[..DIGEST_HEX_LEN])
}

/// The key of `envelope` without prefix and suffix.
fn raw_key(envelope: &Envelope, strategy: KeyStrategy) -> Result<String, IdempotencyError> {
    // The shared derivation checks that the message carries the identity the strategy needs.
    let key = strategy.key_of(envelope)?;
    let js = envelope.jetstream();
    Ok(match strategy {
        KeyStrategy::IdempotencyKey => format!("idempotency-key/{}", safe_part(key.as_str())),
        KeyStrategy::StreamSequence => {
            format!("stream-sequence/{}/{}", safe_part(&envelope.keyed_stream()), js.stream_sequence)
        }
        KeyStrategy::OriginSequence => {
            let (stream, sequence) = envelope.origin_sequence()?;
            format!("stream-sequence/{}/{sequence}", safe_part(&stream))
        }
        KeyStrategy::MessageId => format!("message-id/{}", safe_part(envelope.message_id().unwrap_or_default())),
        KeyStrategy::PayloadSha256 => {
            format!("payload-sha256/{}/{}", safe_part(envelope.subject()), sha256_hex(envelope.payload()))
        }
    })
}

/// The primary object key of `envelope`.
pub(crate) fn object_key(envelope: &Envelope, config: &S3SinkConfig) -> Result<String, ObjectError> {
    let raw = raw_key(envelope, config.key_strategy)?;
    let mut key = String::with_capacity(raw.len() + 64);
    if let Some(prefix) = &config.prefix {
        key.push_str(prefix);
        key.push('/');
    }
    if let Some(key_prefix) = &config.key_prefix {
        key.push_str(key_prefix);
        key.push(':');
    }
    key.push_str(&raw);
    key.push_str(&config.object_suffix);
    check_key(key, config.max_key_bytes)
}

/// The sidecar key of the primary key `key`: the object suffix replaced by the sidecar's.
pub(crate) fn sidecar_key(key: &str, config: &S3SinkConfig) -> Result<String, ObjectError> {
    let stem = key.strip_suffix(config.object_suffix.as_str()).unwrap_or(key);
    check_key(format!("{stem}{}", config.sidecar_suffix), config.max_key_bytes)
}

fn check_key(key: String, max: u64) -> Result<String, ObjectError> {
    if key.len() as u64 > max {
        return Err(ObjectError::KeyTooLong { size: key.len(), max });
    }
    Ok(key)
}

/// The sidecar document (sorted keys).
#[derive(Serialize)]
struct SidecarDoc<'a> {
    classification: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    consumer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    consumer_sequence: Option<u64>,
    custody: Option<&'a Value>,
    duplicate_policy: &'static str,
    key_strategy: &'static str,
    labels: Option<String>,
    labels_list: &'a [String],
    message_id: Option<&'a str>,
    metadata: &'a metadata::MetadataDoc<'a>,
    mission_metadata: Option<&'a Value>,
    object_key: &'a str,
    payload_info: Value,
    priority: Option<&'a str>,
    schema: &'static str,
    schema_version: u32,
    security_labels: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stored_at_epoch_ns: Option<i64>,
    stream: &'a str,
    /// Only in a later epoch of the stream (`Envelope::stream_epoch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_epoch: Option<&'a str>,
    stream_sequence: u64,
    subject: &'a str,
}

/// Builds everything written for `envelope`, stored at `stored_at`.
pub(crate) fn prepare(
    envelope: &Envelope,
    config: &S3SinkConfig,
    stored_at: OffsetDateTime,
) -> Result<Prepared, ObjectError> {
    let key = object_key(envelope, config)?;
    // Keyed by the origin, the object is the event as its origin stored it, whatever the path.
    let origin_keyed = config.key_strategy == crate::config::KeyStrategy::OriginSequence;
    let event = config.metadata_scope.content_of(envelope, origin_keyed)?;
    let envelope = &*event;
    let normalized = payload::normalize(envelope.payload(), config.payload_mode)?;
    let doc = metadata::MetadataDoc::scoped(envelope, stored_at, config.metadata_scope);
    let json = match config.object_format {
        ObjectFormat::Payload => normalized.value.get().as_bytes().to_vec(),
        ObjectFormat::Envelope => object_json(envelope, &normalized, &doc)?,
    };
    let body = config.compression.apply(json, GZIP_LEVEL).map_err(|e| ObjectError::Encode(e.to_string()))?;
    check_size(body.len(), config.max_object_bytes)?;
    let fingerprint = normalized.sha256.clone();
    let mut meta = Vec::new();
    if config.metadata_mode != MetadataMode::None {
        meta = base_metadata(config, OBJECT_SCHEMA);
        if let Some(id) = envelope.message_id() {
            meta.push(("nats-sinks-message-id-sha256".into(), sha256_hex(id.as_bytes())));
        }
    }
    if config.content_check
        && existing::conditional(config.duplicate_policy.on_existing(), key_basis(envelope, config.key_strategy))
    {
        meta.push((FINGERPRINT_METADATA.into(), fingerprint.clone()));
    }
    check_metadata(&meta, config.max_metadata_bytes)?;
    let sidecar = match config.metadata_mode {
        MetadataMode::Sidecar => {
            let sidecar_key = sidecar_key(&key, config)?;
            let json = sidecar_json(envelope, &normalized, &doc, &key, config)?;
            check_size(json.len(), config.max_object_bytes)?;
            let meta = base_metadata(config, SIDECAR_SCHEMA);
            check_metadata(&meta, config.max_metadata_bytes)?;
            Some(ObjectBody { key: sidecar_key, body: Bytes::from(json), content_encoding: None, metadata: meta })
        }
        _ => None,
    };
    let content_encoding = (config.compression == Compression::Gzip).then_some("gzip");
    Ok(Prepared {
        primary: ObjectBody { key, body: Bytes::from(body), content_encoding, metadata: meta },
        sidecar,
        fingerprint,
    })
}

fn object_json(
    envelope: &Envelope,
    normalized: &NormalizedPayload,
    doc: &metadata::MetadataDoc<'_>,
) -> Result<Vec<u8>, ObjectError> {
    let object = metadata::EventDoc::new(envelope, normalized, doc, OBJECT_SCHEMA);
    serde_json::to_vec(&object).map_err(|e| ObjectError::Encode(e.to_string()))
}

fn sidecar_json(
    envelope: &Envelope,
    normalized: &NormalizedPayload,
    doc: &metadata::MetadataDoc<'_>,
    object_key: &str,
    config: &S3SinkConfig,
) -> Result<Vec<u8>, ObjectError> {
    let js = envelope.jetstream();
    let app = envelope.app();
    let delivery = doc.delivery_fields();
    let sidecar = SidecarDoc {
        classification: app.classification.as_deref(),
        consumer: delivery.consumer,
        consumer_sequence: delivery.consumer_sequence,
        custody: envelope.custody(),
        duplicate_policy: config.duplicate_policy.as_str(),
        key_strategy: config.key_strategy.as_str(),
        labels: app.labels_string(),
        labels_list: &app.labels,
        message_id: envelope.message_id(),
        metadata: doc,
        mission_metadata: envelope.mission_metadata(),
        object_key,
        payload_info: normalized.info_json(),
        priority: app.priority.as_deref(),
        schema: SIDECAR_SCHEMA,
        schema_version: 1,
        security_labels: envelope.security_labels(),
        stored_at_epoch_ns: delivery.stored_at_epoch_ns,
        stream: &js.stream,
        stream_epoch: envelope.stream_epoch(),
        stream_sequence: js.stream_sequence,
        subject: envelope.subject(),
    };
    serde_json::to_vec(&sidecar).map_err(|e| ObjectError::Encode(e.to_string()))
}

/// Schema, key strategy and the operator's static metadata.
fn base_metadata(config: &S3SinkConfig, schema: &str) -> Vec<(String, String)> {
    let mut meta = vec![
        ("nats-sinks-schema".to_owned(), schema.to_owned()),
        ("nats-sinks-schema-version".to_owned(), "1".to_owned()),
        ("nats-sinks-key-strategy".to_owned(), config.key_strategy.as_str().to_owned()),
    ];
    meta.extend(config.object_metadata.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.clone())));
    meta
}

fn check_size(size: usize, max: u64) -> Result<(), ObjectError> {
    if size as u64 > max {
        return Err(ObjectError::TooLarge { size, max });
    }
    Ok(())
}

fn check_metadata(meta: &[(String, String)], max: u64) -> Result<(), ObjectError> {
    let size: usize = meta.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size as u64 > max {
        return Err(ObjectError::MetadataTooLarge { size, max });
    }
    Ok(())
}

/// The uncompressed body of a stored object (gzip recognized by its magic bytes), at most
/// `max` bytes of output; `None` when it cannot be decoded.
pub(crate) fn decompress(body: &[u8], max: u64) -> Option<Vec<u8>> {
    sinks_toolkit::compression::read_decoded(body, body.starts_with(&[0x1f, 0x8b]), max)
}

/// The fingerprint (SHA-256 of the original payload) of a stored, uncompressed body written
/// in `format`: `payload_info.sha256` of an envelope document, the hash of the decoded
/// payload for a payload-only object. `None` when the body is not what this sink writes.
pub(crate) fn stored_fingerprint(body: &[u8], format: ObjectFormat) -> Option<String> {
    match format {
        ObjectFormat::Envelope => payload::stored_payload_sha256(body),
        ObjectFormat::Payload => {
            let text = std::str::from_utf8(body).ok()?;
            Some(sha256_hex(&payload::decode_stored(text)))
        }
    }
}

#[cfg(test)]
mod tests {
    use sinks_contract::testing::{envelope, envelope_with};
    use sinks_contract::{Headers, PayloadMode};

    use super::*;
    use crate::config::DuplicatePolicy;
    use sinks_toolkit::metadata::MetadataScope;

    fn config() -> S3SinkConfig {
        S3SinkConfig::new("bucket-a")
    }

    #[test]
    fn a_redelivery_writes_the_same_object_and_sidecar() {
        let e = envelope_with("ORDERS", 5, "orders.x", Bytes::from_static(br#"{"n": 1}"#), Headers::new(), 1);
        let again = sinks_contract::testing::redelivery(&e, time::Duration::seconds(30));
        let later = at() + time::Duration::seconds(31);
        for metadata_mode in [MetadataMode::ObjectMetadata, MetadataMode::Sidecar] {
            let c = S3SinkConfig { metadata_mode, ..config() };
            let (one, two) = (prepare(&e, &c, at()).unwrap(), prepare(&again, &c, later).unwrap());
            assert_eq!(one.primary.body, two.primary.body, "{metadata_mode:?}");
            assert_eq!(one.sidecar.map(|s| s.body), two.sidecar.map(|s| s.body), "{metadata_mode:?}");
            let doc: Value = serde_json::from_slice(&one.primary.body).unwrap();
            for member in ["consumer", "consumer_sequence", "received_at_epoch_ns", "stored_at_epoch_ns"] {
                assert!(doc.get(member).is_none(), "{member}");
            }
        }
        let reference = S3SinkConfig { metadata_scope: MetadataScope::Delivery, ..config() };
        assert_ne!(
            prepare(&e, &reference, at()).unwrap().primary.body,
            prepare(&again, &reference, later).unwrap().primary.body
        );
    }

    fn at() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap()
    }

    #[test]
    fn safe_part_keeps_plain_values_and_marks_changed_ones() {
        assert_eq!(safe_part("ORDERS"), "ORDERS");
        assert_eq!(safe_part("a.b-c_d9"), "a.b-c_d9");
        let colon = safe_part("stream-sequence:ORDERS:42");
        assert!(colon.starts_with("stream-sequence_ORDERS_42~"), "{colon}");
        assert_eq!(colon.len(), "stream-sequence_ORDERS_42~".len() + DIGEST_HEX_LEN);
        assert!(safe_part("").starts_with("value~"));
        assert!(safe_part("..").starts_with("value~"));
        assert!(safe_part("-edge").starts_with("edge~"));
        assert!(safe_part("ünï").starts_with("value~") || safe_part("ünï").contains('~'));
        let long = "x".repeat(300);
        let cut = safe_part(&long);
        assert!(cut.len() <= MAX_PART_LEN + 1 + DIGEST_HEX_LEN, "{}", cut.len());
        assert!(cut.contains('~'));
    }

    #[test]
    fn values_the_reference_merges_get_different_keys() {
        // Reference W3: `a/b`, `a_b`, `a b` and `a:b` all became `a_b`.
        let values = ["a/b", "a_b", "a b", "a:b", "a_b~", "a__b", "_a_b", "a_b_"];
        let parts: std::collections::BTreeSet<String> = values.iter().map(|v| safe_part(v)).collect();
        assert_eq!(parts.len(), values.len(), "{parts:?}");
        // A value crafted to look like a marked one is itself marked (`~` is not kept).
        let marked = safe_part("a/b");
        assert_ne!(safe_part(&marked), marked);
    }

    #[test]
    fn keys_per_strategy() {
        let headers = Headers::new().with("Nats-Msg-Id", "order-7");
        let e = envelope_with("ORDERS", 42, "orders.created", Bytes::from_static(b"{}"), headers, 1);
        let mut c = config();
        c.prefix = Some("mission/events".into());
        assert!(object_key(&e, &c).unwrap().starts_with("mission/events/idempotency-key/stream-sequence_ORDERS_42~"));
        c.key_strategy = KeyStrategy::StreamSequence;
        c.key_prefix = Some("archive".into());
        assert_eq!(object_key(&e, &c).unwrap(), "mission/events/archive:stream-sequence/ORDERS/42.json");
        c.key_strategy = KeyStrategy::MessageId;
        assert_eq!(object_key(&e, &c).unwrap(), "mission/events/archive:message-id/order-7.json");
        c.key_strategy = KeyStrategy::PayloadSha256;
        let key = object_key(&e, &c).unwrap();
        assert!(key.starts_with("mission/events/archive:payload-sha256/orders.created/"), "{key}");
        assert!(key.ends_with(&format!("{}.json", sha256_hex(b"{}"))));
        assert_eq!(sidecar_key(&key, &c).unwrap(), key.replace(".json", ".metadata.json"));
    }

    #[test]
    fn missing_identity_and_long_keys_are_errors() {
        let e = envelope("S", 1, "x", "{}");
        let mut c = config();
        c.key_strategy = KeyStrategy::MessageId;
        assert!(matches!(object_key(&e, &c), Err(ObjectError::Key(IdempotencyError::MissingMessageId))));
        c.key_strategy = KeyStrategy::StreamSequence;
        c.prefix = Some("p".repeat(100));
        c.max_key_bytes = 64;
        assert!(matches!(object_key(&e, &c), Err(ObjectError::KeyTooLong { .. })));
    }

    #[test]
    fn policy_documents_are_stored_in_object_and_metadata() {
        let mission = serde_json::json!({"phase": "track"});
        let custody = serde_json::json!({"schema": "nats_sinks.custody.v1"});
        let e = envelope_with("ORDERS", 5, "orders.x", Bytes::from_static(b"{}"), Headers::new(), 1)
            .with_mission_metadata(Some(mission.clone()))
            .with_custody(Some(custody.clone()));
        let p = prepare(&e, &config(), at()).unwrap();
        let doc: Value = serde_json::from_slice(&p.primary.body).unwrap();
        assert_eq!((&doc["mission_metadata"], &doc["custody"]), (&mission, &custody));
        assert_eq!(doc["security_labels"], Value::Null, "absent is null");
        assert_eq!(doc["metadata"]["mission_metadata"], mission);
    }

    #[test]
    fn envelope_document_has_the_reference_fields_sorted() {
        let headers = Headers::new().with("Nats-Msg-Id", "m-1").with("x-trace", "t");
        let e = envelope_with("ORDERS", 5, "orders.x", Bytes::from_static(br#"{"n": 1.50}"#), headers, 1);
        let reference = S3SinkConfig { metadata_scope: MetadataScope::Delivery, ..config() };
        let p = prepare(&e, &reference, at()).unwrap();
        let text = std::str::from_utf8(&p.primary.body).unwrap();
        // the published JSON is kept byte for byte
        assert!(text.contains(r#""payload":{"n": 1.50}"#), "{text}");
        let doc: Value = serde_json::from_str(text).unwrap();
        let keys: Vec<&str> = doc.as_object().unwrap().keys().map(String::as_str).collect();
        let expected = [
            "classification",
            "consumer",
            "consumer_sequence",
            "custody",
            "headers",
            "jetstream_timestamp_epoch_ns",
            "labels",
            "labels_list",
            "message_created_at_epoch_ns",
            "message_id",
            "metadata",
            "mission_metadata",
            "payload",
            "payload_info",
            "priority",
            "received_at_epoch_ns",
            "schema",
            "schema_version",
            "security_labels",
            "stored_at_epoch_ns",
            "stream",
            "stream_sequence",
            "subject",
        ];
        assert_eq!(keys, expected);
        assert_eq!(doc["schema"], OBJECT_SCHEMA);
        assert_eq!(doc["headers"]["x-trace"], "t");
        assert_eq!(doc["stored_at_epoch_ns"], 1_700_000_000_000_000_000_i64);
        assert_eq!(doc["labels"], Value::Null);
        assert_eq!(stored_fingerprint(&p.primary.body, ObjectFormat::Envelope).unwrap(), p.fingerprint);
        let names: Vec<&str> = p.primary.metadata.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "nats-sinks-schema",
                "nats-sinks-schema-version",
                "nats-sinks-key-strategy",
                "nats-sinks-message-id-sha256",
                FINGERPRINT_METADATA
            ]
        );
        assert!(p.sidecar.is_none());
    }

    #[test]
    fn payload_format_gzip_and_fingerprints() {
        let mut c = config();
        c.object_format = ObjectFormat::Payload;
        c.compression = Compression::Gzip;
        c.object_suffix = ".json.gz".into();
        c.payload_mode = PayloadMode::JsonOrEnvelope;
        let e = envelope("S", 1, "x", Bytes::from_static(&[0xff, 0x00, 0x01]));
        let p = prepare(&e, &c, at()).unwrap();
        assert_eq!(p.primary.content_encoding, Some("gzip"));
        let again = prepare(&e, &c, at() + time::Duration::seconds(5)).unwrap();
        assert_eq!(p.primary.body, again.primary.body, "gzip output is deterministic");
        let plain = decompress(&p.primary.body, 1 << 20).unwrap();
        assert_eq!(stored_fingerprint(&plain, ObjectFormat::Payload).unwrap(), sha256_hex(&[0xff, 0x00, 0x01]));
        assert_eq!(p.fingerprint, sha256_hex(&[0xff, 0x00, 0x01]));
        let json = envelope("S", 2, "x", r#"{"a":1}"#);
        let p = prepare(&json, &c, at()).unwrap();
        let plain = decompress(&p.primary.body, 1 << 20).unwrap();
        assert_eq!(plain, br#"{"a":1}"#);
        assert_eq!(stored_fingerprint(&plain, ObjectFormat::Payload).unwrap(), p.fingerprint);
    }

    #[test]
    fn metadata_modes() {
        let e = envelope("S", 1, "x", "{}");
        let mut c = config();
        c.metadata_mode = MetadataMode::None;
        let p = prepare(&e, &c, at()).unwrap();
        assert_eq!(p.primary.metadata, vec![(FINGERPRINT_METADATA.to_owned(), p.fingerprint.clone())]);
        c.content_check = false;
        assert!(prepare(&e, &c, at()).unwrap().primary.metadata.is_empty());
        c.metadata_mode = MetadataMode::Sidecar;
        c.object_metadata.insert("Purpose".into(), "archive".into());
        let p = prepare(&e, &c, at()).unwrap();
        let sidecar = p.sidecar.unwrap();
        assert!(sidecar.key.ends_with(".metadata.json"));
        let doc: Value = serde_json::from_slice(&sidecar.body).unwrap();
        assert_eq!(doc["schema"], SIDECAR_SCHEMA);
        assert_eq!(doc["object_key"], p.primary.key);
        assert_eq!(doc["duplicate_policy"], "skip_existing");
        assert!(sidecar.metadata.contains(&("purpose".into(), "archive".into())));
        c.duplicate_policy = DuplicatePolicy::Replace;
        c.content_check = true;
        c.metadata_mode = MetadataMode::None;
        // Replace writes conditionally under stream-sequence keys, and compares.
        assert_eq!(prepare(&e, &c, at()).unwrap().primary.metadata.len(), 1, "compared under stream-sequence keys");
        c.key_strategy = KeyStrategy::PayloadSha256;
        assert!(prepare(&e, &c, at()).unwrap().primary.metadata.is_empty(), "no fingerprint without a check");
    }

    #[test]
    fn a_later_epoch_has_keys_of_its_own_and_says_so_in_its_documents() {
        let e =
            envelope_with("ORDERS", 42, "o", Bytes::from_static(b"{}"), Headers::new().with("Nats-Msg-Id", "m-1"), 1);
        let later = e.clone().with_stream_epoch(Some("e17".into()));
        let mut c = config();
        c.metadata_mode = MetadataMode::Sidecar;
        for strategy in [KeyStrategy::IdempotencyKey, KeyStrategy::StreamSequence] {
            c.key_strategy = strategy;
            assert_ne!(object_key(&e, &c).unwrap(), object_key(&later, &c).unwrap(), "{strategy:?}");
        }
        c.key_strategy = KeyStrategy::StreamSequence;
        assert_eq!(object_key(&later, &c).unwrap(), "stream-sequence/ORDERS.e17/42.json");
        c.key_strategy = KeyStrategy::MessageId;
        assert_eq!(object_key(&e, &c).unwrap(), object_key(&later, &c).unwrap(), "publisher keys do not change");
        let p = prepare(&later, &c, at()).unwrap();
        let doc: Value = serde_json::from_slice(&p.primary.body).unwrap();
        assert_eq!((&doc["stream"], &doc["stream_epoch"]), (&Value::from("ORDERS"), &Value::from("e17")));
        let sidecar: Value = serde_json::from_slice(&p.sidecar.unwrap().body).unwrap();
        assert_eq!(sidecar["stream_epoch"], "e17");
        let first: Value = serde_json::from_slice(&prepare(&e, &c, at()).unwrap().primary.body).unwrap();
        assert!(first.get("stream_epoch").is_none(), "the reference's document for a stream that never changed");
    }

    #[test]
    fn limits_are_permanent_errors() {
        let e = envelope("S", 1, "x", "{\"big\":\"".to_owned() + &"x".repeat(500) + "\"}");
        let mut c = config();
        c.max_object_bytes = 100;
        assert!(matches!(prepare(&e, &c, at()), Err(ObjectError::TooLarge { .. })));
        let mut c = config();
        c.max_metadata_bytes = 128;
        c.object_metadata.insert("note".into(), "n".repeat(120));
        assert!(matches!(prepare(&e, &c, at()), Err(ObjectError::MetadataTooLarge { .. })));
        let mut c = config();
        c.payload_mode = PayloadMode::JsonOnly;
        let text = envelope("S", 2, "x", "not json");
        assert!(matches!(prepare(&text, &c, at()), Err(ObjectError::Payload(_))));
    }

    #[test]
    fn decompress_is_bounded() {
        let big = Compression::Gzip.apply(vec![b'a'; 10_000], GZIP_LEVEL).unwrap();
        assert!(decompress(&big, 100).is_none());
        assert_eq!(decompress(&big, 10_000).unwrap().len(), 10_000);
        assert_eq!(decompress(b"{}", 10).unwrap(), b"{}");
    }
}
