//! Pure: the JSON record stored for one envelope, and its optional gzip encoding.
//!
//! The record has exactly the reference's keys, sorted, compact (or indented with `pretty`),
//! followed by a newline; in a later epoch of the stream it also has `stream_epoch`. The payload is embedded as the normalized raw JSON text, so a
//! published JSON payload is stored byte for byte (big integers and decimal spellings survive).
//! Gzip output has mtime 0 and no file name, so the same record always compresses to the same
//! bytes.

use std::io::Read;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use sinks_contract::Envelope;
use sinks_contract::payload::{self, NormalizedPayload, PayloadError};
use sinks_toolkit::metadata::{self, MetadataScope};
use time::OffsetDateTime;

use crate::config::{Compression, FileSinkConfig};

/// `schema` value of every record.
pub(crate) const SCHEMA: &str = "nats_sinks.file.message.v1";
/// `schema_version` value of every record.
pub(crate) const SCHEMA_VERSION: u32 = 1;
/// Most bytes read back from an existing file when checking for a conflict.
const MAX_STORED_RECORD_BYTES: u64 = 512 * 1024 * 1024;

/// The stored document. Fields are declared in alphabetical order, which is the order serde
/// writes them in: the output has sorted keys like the reference's `sort_keys=True`.
#[derive(Serialize)]
struct Record<'a> {
    classification: Option<&'a str>,
    /// This delivery's consumer and its sequence: only under `metadata_scope: delivery`.
    #[serde(skip_serializing_if = "Option::is_none")]
    consumer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    consumer_sequence: Option<u64>,
    custody: Option<&'a Value>,
    labels: Option<String>,
    labels_list: &'a [String],
    message_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<metadata::MetadataDoc<'a>>,
    mission_metadata: Option<&'a Value>,
    payload: &'a RawValue,
    payload_info: Value,
    priority: Option<&'a str>,
    schema: &'static str,
    schema_version: u32,
    security_labels: Option<&'a Value>,
    stream: &'a str,
    /// The stream's epoch, only in a later epoch of it (`Envelope::stream_epoch`): a record
    /// of a stream that never changed has exactly the reference's keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_epoch: Option<&'a str>,
    stream_sequence: u64,
    subject: &'a str,
}

/// Why no record could be built for a message. Permanent for that message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    /// The payload cannot be stored under the configured payload mode.
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// Serializing or compressing the record failed.
    #[error("record cannot be encoded ({0})")]
    Encode(String),
    /// Keyed by `origin_sequence`, and where the event was first stored cannot be told.
    #[error(transparent)]
    Origin(#[from] sinks_contract::idempotency::IdempotencyError),
}

/// A record ready to be written.
#[derive(Debug)]
pub(crate) struct EncodedRecord {
    /// File content (JSON plus newline, possibly gzip-compressed).
    pub(crate) bytes: Vec<u8>,
    /// SHA-256 of the original payload bytes (`payload_info.sha256`).
    pub(crate) payload_sha256: String,
}

/// The record JSON (with trailing newline) for `envelope` and its normalized payload.
pub(crate) fn record_json(
    envelope: &Envelope,
    payload: &NormalizedPayload,
    include_metadata: bool,
    pretty: bool,
    (stored_at, scope): (OffsetDateTime, MetadataScope),
) -> Result<Vec<u8>, RecordError> {
    let js = envelope.jetstream();
    let app = envelope.app();
    let delivery = metadata::DeliveryFields::of(envelope, stored_at, scope);
    let record = Record {
        classification: app.classification.as_deref(),
        consumer: delivery.consumer,
        consumer_sequence: delivery.consumer_sequence,
        custody: envelope.custody(),
        labels: app.labels_string(),
        labels_list: &app.labels,
        message_id: envelope.message_id(),
        metadata: include_metadata.then(|| metadata::MetadataDoc::scoped(envelope, stored_at, scope)),
        mission_metadata: envelope.mission_metadata(),
        payload: &payload.value,
        payload_info: payload.info_json(),
        priority: app.priority.as_deref(),
        schema: SCHEMA,
        schema_version: SCHEMA_VERSION,
        security_labels: envelope.security_labels(),
        stream: &js.stream,
        stream_epoch: envelope.stream_epoch(),
        stream_sequence: js.stream_sequence,
        subject: envelope.subject(),
    };
    let mut out = if pretty { serde_json::to_vec_pretty(&record) } else { serde_json::to_vec(&record) }
        .map_err(|e| RecordError::Encode(e.to_string()))?;
    out.push(b'\n');
    Ok(out)
}

/// The file content for `envelope` under `config`, stored at `stored_at`.
pub(crate) fn encode(
    envelope: &Envelope,
    config: &FileSinkConfig,
    stored_at: OffsetDateTime,
) -> Result<EncodedRecord, RecordError> {
    let normalized = payload::normalize(envelope.payload(), config.payload_mode)?;
    // Keyed by the origin, the record is the event as its origin stored it, whatever the path.
    let origin_keyed = config.filename_strategy == crate::FilenameStrategy::OriginSequence;
    let event = config.metadata_scope.content_of(envelope, origin_keyed)?;
    let json =
        record_json(&event, &normalized, config.include_metadata, config.pretty, (stored_at, config.metadata_scope))?;
    let bytes =
        config.compression.apply(json, config.compression_level).map_err(|e| RecordError::Encode(e.to_string()))?;
    Ok(EncodedRecord { bytes, payload_sha256: normalized.sha256 })
}

/// `payload_info.sha256` of a stored record read from `reader`, or `None` when the content
/// is not a readable record (foreign file, truncated, wrong compression, too large).
pub(crate) fn stored_payload_sha256(reader: impl Read, compression: Compression) -> Option<String> {
    let raw =
        sinks_toolkit::compression::read_decoded(reader, compression == Compression::Gzip, MAX_STORED_RECORD_BYTES)?;
    payload::stored_payload_sha256(&raw)
}

/// The content check of `nats-sink reconcile`: true when the stored record's recorded
/// fingerprint (`payload_info.sha256`) equals `fingerprint` (of the original bytes) and the
/// SHA-256 of the payload it actually holds equals `stored_form` (of the payload as the sink
/// stores it: JSON is stored without surrounding whitespace, so the two differ for such a
/// payload). A record edited behind the sink's back fails the second test.
pub(crate) fn stored_matches(
    reader: impl Read,
    compression: Compression,
    fingerprint: &str,
    stored_form: &str,
) -> bool {
    #[derive(serde::Deserialize)]
    struct Stored<'a> {
        #[serde(borrow)]
        payload: &'a RawValue,
    }
    let Some(raw) =
        sinks_toolkit::compression::read_decoded(reader, compression == Compression::Gzip, MAX_STORED_RECORD_BYTES)
    else {
        return false;
    };
    if payload::stored_payload_sha256(&raw).as_deref() != Some(fingerprint) {
        return false;
    }
    let Ok(stored) = serde_json::from_slice::<Stored<'_>>(&raw) else { return false };
    let bytes = payload::decode_stored(stored.payload.get());
    crate::path::sha256_hex(&bytes) == stored_form
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use serde::Deserialize;
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    use sinks_contract::testing::{envelope, envelope_with};
    use sinks_contract::{AppMetadata, Headers, PayloadMode};

    use super::*;

    /// The keys of a JSON object in the order they appear in the text.
    struct KeyOrder(Vec<String>);

    impl<'de> Deserialize<'de> for KeyOrder {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = KeyOrder;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeyOrder, A::Error> {
                    let mut keys = Vec::new();
                    while let Some(k) = map.next_key::<String>()? {
                        map.next_value::<IgnoredAny>()?;
                        keys.push(k);
                    }
                    Ok(KeyOrder(keys))
                }
            }
            d.deserialize_map(V)
        }
    }

    fn keys_of(text: &str) -> Vec<String> {
        serde_json::from_str::<KeyOrder>(text).expect("object").0
    }

    fn at() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_700_000_000).expect("timestamp")
    }

    /// The reference's record (`metadata_scope: delivery`).
    fn json_of(e: &Envelope, include_metadata: bool, pretty: bool) -> String {
        scoped_json_of(e, include_metadata, pretty, at(), MetadataScope::Delivery)
    }

    fn scoped_json_of(
        e: &Envelope,
        include_metadata: bool,
        pretty: bool,
        stored: OffsetDateTime,
        scope: MetadataScope,
    ) -> String {
        let p = payload::normalize(e.payload(), PayloadMode::JsonOrEnvelope).expect("payload");
        String::from_utf8(record_json(e, &p, include_metadata, pretty, (stored, scope)).expect("record"))
            .expect("utf-8")
    }

    #[test]
    fn under_the_message_scope_a_redelivery_writes_the_same_bytes() {
        let first =
            envelope_with("ORDERS", 9, "orders.created", "{\"n\":1}", Headers::new().with("Nats-Msg-Id", "m-9"), 1);
        let again = sinks_contract::testing::redelivery(&first, time::Duration::seconds(30));
        for (include_metadata, pretty) in [(true, false), (true, true), (false, false)] {
            let one = scoped_json_of(&first, include_metadata, pretty, at(), MetadataScope::Message);
            let two = scoped_json_of(
                &again,
                include_metadata,
                pretty,
                at() + time::Duration::seconds(31),
                MetadataScope::Message,
            );
            assert_eq!(one, two, "metadata {include_metadata}, pretty {pretty}");
            let value: Value = serde_json::from_str(&one).expect("json");
            assert!(value.get("consumer").is_none() && value.get("consumer_sequence").is_none());
            assert_eq!(value["stream_sequence"], 9);
        }
        assert_ne!(json_of(&first, true, false), json_of(&again, true, false), "the reference's record differs");
    }

    #[test]
    fn compact_record_without_metadata_is_exact() {
        let e = envelope("ORDERS", 7, "orders.created", " {\"n\": 12345678901234567890123, \"d\": 1.50} ");
        let text = json_of(&e, false, false);
        let expected_sha = crate::path::sha256_hex(e.payload());
        let expected = concat!(
            r#"{"classification":null,"consumer":"test-consumer","consumer_sequence":7,"custody":null,"#,
            r#""labels":null,"labels_list":[],"message_id":null,"mission_metadata":null,"#,
            r#""payload":{"n": 12345678901234567890123, "d": 1.50},"#,
            r#""payload_info":{"original_format":"json","sha256":"SHA","size_bytes":SIZE,"wrapped":false},"#,
            r#""priority":null,"schema":"nats_sinks.file.message.v1","schema_version":1,"security_labels":null,"#,
            r#""stream":"ORDERS","stream_sequence":7,"subject":"orders.created"}"#,
            "\n"
        )
        .replace("SHA", &expected_sha)
        .replace("SIZE", &e.payload().len().to_string());
        assert_eq!(text, expected);
    }

    #[test]
    fn keys_are_sorted_at_every_level_with_metadata() {
        let e = envelope_with("ORDERS", 1, "orders.created", "{}", Headers::new().with("Nats-Msg-Id", "m-1"), 2);
        let text = json_of(&e, true, false);
        let top = keys_of(text.trim_end());
        let mut sorted = top.clone();
        sorted.sort();
        assert_eq!(top, sorted);
        assert!(top.contains(&"metadata".to_owned()));
        assert_eq!(top.len(), 18);
        let value: Value = serde_json::from_str(&text).expect("json");
        let metadata_text = serde_json::to_string(&value["metadata"]).expect("metadata");
        let inner = keys_of(&metadata_text);
        let mut inner_sorted = inner.clone();
        inner_sorted.sort();
        assert_eq!(inner, inner_sorted);
        assert_eq!(value["metadata"]["metadata_version"], 1);
        assert_eq!(value["message_id"], "m-1");
        assert_eq!(value["metadata"]["jetstream"]["redelivered"], true);
        assert_eq!(value["metadata"]["timestamps"]["stored_at_epoch_ns"], 1_700_000_000_000_000_000_i64);
    }

    #[test]
    fn policy_documents_are_stored_at_the_top_and_in_the_metadata() {
        let mission = serde_json::json!({"phase": "find", "track": {"id": 7}});
        let labels = serde_json::json!({"profile": "nats-sinks.security-label.v1", "releasability": ["NATO"]});
        let custody = serde_json::json!({"schema": "nats_sinks.custody.v1", "record_hash": "ab"});
        let e = envelope("ORDERS", 1, "s", "{}")
            .with_mission_metadata(Some(mission.clone()))
            .with_security_labels(Some(labels.clone()))
            .with_custody(Some(custody.clone()));
        let value: Value = serde_json::from_str(&json_of(&e, true, false)).expect("json");
        assert_eq!(value["mission_metadata"], mission);
        assert_eq!(value["security_labels"], labels);
        assert_eq!(value["custody"], custody);
        assert_eq!(value["metadata"]["mission_metadata"], mission);
        assert_eq!(value["metadata"]["security_labels"], labels);
    }

    #[test]
    fn include_metadata_false_drops_the_key() {
        let e = envelope("ORDERS", 1, "orders.created", "{}");
        let value: Value = serde_json::from_str(&json_of(&e, false, false)).expect("json");
        assert!(value.get("metadata").is_none());
        assert_eq!(value.as_object().map(serde_json::Map::len), Some(17));
    }

    #[test]
    fn a_later_epoch_adds_its_epoch_and_nothing_else() {
        let e = envelope("ORDERS", 1, "orders.created", "{}");
        let first: Value = serde_json::from_str(&json_of(&e, true, false)).expect("json");
        assert!(first.get("stream_epoch").is_none(), "a stream that never changed keeps the reference's keys");
        let text = json_of(&e.with_stream_epoch(Some("e17".into())), true, false);
        let later: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(later["stream"], "ORDERS");
        assert_eq!(later["stream_epoch"], "e17");
        assert_eq!(later["metadata"]["jetstream"]["stream_epoch"], "e17");
        assert_eq!(later.as_object().map(serde_json::Map::len), Some(19));
        let top = keys_of(text.trim_end());
        let mut sorted = top.clone();
        sorted.sort();
        assert_eq!(top, sorted, "keys stay sorted");
    }

    #[test]
    fn labels_are_null_or_joined() {
        let plain = envelope("ORDERS", 1, "s", "{}");
        let value: Value = serde_json::from_str(&json_of(&plain, false, false)).expect("json");
        assert_eq!(value["labels"], Value::Null, "never the string \"null\"");
        assert_eq!(value["labels_list"], serde_json::json!([]));

        let app = AppMetadata {
            priority: Some("flash".into()),
            classification: Some("NATO UNCLASSIFIED".into()),
            labels: vec!["a".into(), "b".into()],
        };
        let labelled = envelope("ORDERS", 1, "s", "{}").with_app_metadata(app);
        let value: Value = serde_json::from_str(&json_of(&labelled, false, false)).expect("json");
        assert_eq!(value["labels"], "a;b");
        assert_eq!(value["labels_list"], serde_json::json!(["a", "b"]));
        assert_eq!(value["priority"], "flash");
        assert_eq!(value["classification"], "NATO UNCLASSIFIED");
    }

    #[test]
    fn pretty_indents_but_keeps_the_payload_as_published() {
        let e = envelope("ORDERS", 1, "s", "{\"b\":1,   \"a\":2}");
        let text = json_of(&e, false, true);
        assert!(text.starts_with("{\n  \"classification\": null,\n"));
        assert!(text.contains("\"payload\": {\"b\":1,   \"a\":2},\n"));
        assert!(text.ends_with("}\n"));
    }

    #[test]
    fn non_json_is_wrapped_or_refused() {
        let e = envelope("ORDERS", 1, "s", "plain text");
        let mut config = FileSinkConfig::new("x");
        let record = encode(&e, &config, at()).expect("wrapped");
        let value: Value = serde_json::from_slice(&record.bytes).expect("json");
        assert_eq!(value["payload"]["payload"], "plain text");
        assert_eq!(value["payload_info"]["wrapped"], true);
        config.payload_mode = PayloadMode::JsonOnly;
        assert!(matches!(encode(&e, &config, at()), Err(RecordError::Payload(PayloadError::NotJson { .. }))));
    }

    #[test]
    fn gzip_is_deterministic_and_round_trips() {
        let e = envelope("ORDERS", 3, "orders.created", "{\"a\":1}");
        let config = FileSinkConfig { compression: Compression::Gzip, ..FileSinkConfig::new("x") };
        let first = encode(&e, &config, at()).expect("first");
        let second = encode(&e, &config, at()).expect("second");
        assert_eq!(first.bytes, second.bytes);
        assert_eq!(&first.bytes[..2], &[0x1f, 0x8b], "gzip magic");
        assert_eq!(&first.bytes[4..8], &[0, 0, 0, 0], "mtime is zero");
        assert_eq!(first.bytes[3] & 0x08, 0, "no file name in the header");
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(first.bytes.as_slice()).read_to_end(&mut plain).expect("decode");
        let uncompressed = FileSinkConfig { include_metadata: true, ..FileSinkConfig::new("x") };
        assert_eq!(plain, encode(&e, &uncompressed, at()).expect("plain").bytes);
        assert_eq!(stored_payload_sha256(first.bytes.as_slice(), Compression::Gzip), Some(first.payload_sha256));
    }

    #[test]
    fn stored_sha_of_foreign_content_is_unknown() {
        assert_eq!(stored_payload_sha256(&b"not json"[..], Compression::None), None);
        assert_eq!(stored_payload_sha256(&b"{\"a\":1}"[..], Compression::None), None);
        assert_eq!(stored_payload_sha256(&b"{\"payload_info\":{}}"[..], Compression::Gzip), None);
        let e = envelope("ORDERS", 3, "orders.created", "{\"a\":1}");
        let record = encode(&e, &FileSinkConfig::new("x"), at()).expect("record");
        assert_eq!(stored_payload_sha256(record.bytes.as_slice(), Compression::None), Some(record.payload_sha256));
    }
}
