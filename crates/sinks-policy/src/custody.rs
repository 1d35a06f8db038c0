//! Tamper-evident custody: hashes of the sink-bound payload and of the message metadata,
//! computed before the sink write and stored with the record (the reference's `custody`
//! section and `nats_sinks.custody.v1` object).
//!
//! - `payload_hash` = H(canonical JSON of the payload as sinks store it under
//!   `json_or_envelope`: the JSON itself, or the text / bytes envelope; ciphertext when
//!   encryption is on).
//! - `metadata_hash` = H(canonical JSON of the standard metadata document). With
//!   `metadata_hash_scope: "delivery"` this is the reference's input: the document as of the
//!   receive time without `stored_at`, which includes the receive time, consumer sequence,
//!   redelivery flag and pending count, so it changes on every redelivery. With the default
//!   `"message"`, those per-delivery fields ([`PER_DELIVERY_FIELDS`]) and `freshness` are left
//!   out, so every delivery of the same message gets the same custody object; the object
//!   then says `"metadata_hash_scope": "message"`.
//! - `record_hash` = H({schema, schema_version, algorithm, key_id, payload_hash,
//!   metadata_hash, previous_record_hash, subject, stream, stream_sequence, message_id}).
//!
//! Reason codes: `custody_hash_input_too_large` (an input over `max_hash_input_bytes`),
//! `custody_previous_hash_invalid` (the previous-hash header is not 64 or 128 hex digits),
//! `custody_input_not_canonical` (a value JSON cannot hold).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256, Sha512};

use super::{Rejection, Step};
use crate::canonical::CanonicalBuf;
use sinks_contract::config::Issues;
use sinks_contract::envelope::Envelope;
use sinks_contract::json::JsonDoc;
use sinks_contract::payload::{self, PayloadMode};
use sinks_toolkit::metadata::{DocWriter as _, LeftOut, MetadataDoc};

/// Schema of the custody object.
pub const SCHEMA: &str = "nats_sinks.custody.v1";
/// Per-delivery fields left out of the metadata hash under `metadata_hash_scope: "message"`
/// (`freshness` is left out as a whole).
pub const PER_DELIVERY_FIELDS: [(&str, &str); 7] = [
    ("timestamps", "received_at"),
    ("timestamps", "received_at_epoch_ns"),
    ("jetstream", "consumer"),
    ("jetstream", "consumer_sequence"),
    ("jetstream", "delivered"),
    ("jetstream", "redelivered"),
    ("jetstream", "pending"),
];

/// `custody` config section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CustodyConfig {
    /// Compute custody objects (default false).
    pub enabled: bool,
    /// `sha256` (default) or `sha512`.
    pub algorithm: HashAlgorithm,
    /// Hash the payload (default true).
    pub hash_payload: bool,
    /// Hash the metadata (default true). At least one of the two when enabled.
    pub hash_metadata: bool,
    /// Record a producer-supplied previous record hash from `previous_hash_header`.
    pub include_previous_hash: bool,
    /// Header carrying the previous record hash (64 or 128 hex digits).
    pub previous_hash_header: String,
    /// Non-secret policy or key-version label stored in the object (at most 128 characters).
    pub key_id: Option<String>,
    /// Largest canonical input hashed (1 KiB–1 GiB, default 16 MiB); a larger one rejects
    /// the message.
    pub max_hash_input_bytes: u64,
    /// What the metadata hash covers: `message` (default; the same for every delivery) or
    /// `delivery` (the reference's input, which changes on every redelivery). nats-sinks
    /// extension.
    pub metadata_hash_scope: HashScope,
}

impl Default for CustodyConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            algorithm: HashAlgorithm::Sha256,
            hash_payload: true,
            hash_metadata: true,
            include_previous_hash: false,
            previous_hash_header: "Nats-Sinks-Previous-Custody-Hash".into(),
            key_id: None,
            max_hash_input_bytes: 16 * 1024 * 1024,
            metadata_hash_scope: HashScope::Message,
        }
    }
}

/// Custody hash algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HashAlgorithm {
    /// SHA-256.
    Sha256,
    /// SHA-512.
    Sha512,
}

impl<'de> Deserialize<'de> for HashAlgorithm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        match text.trim().to_lowercase().replace(['_', '-'], "").as_str() {
            "sha256" => Ok(Self::Sha256),
            "sha512" => Ok(Self::Sha512),
            _ => Err(serde::de::Error::custom("must be `sha256` or `sha512`")),
        }
    }
}

impl HashAlgorithm {
    fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
        }
    }

    fn hex(self, data: &[u8]) -> String {
        match self {
            Self::Sha256 => crate::canonical::lower_hex(&Sha256::digest(data)),
            Self::Sha512 => crate::canonical::lower_hex(&Sha512::digest(data)),
        }
    }
}

/// What the metadata hash covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HashScope {
    /// The message: per-delivery fields left out, stable across redeliveries.
    Message,
    /// One delivery, as the reference computes it.
    Delivery,
}

impl CustodyConfig {
    /// Checks the section (`path` is `custody`).
    pub fn validate_at(&self, path: &str, issues: &mut Issues) {
        if self.enabled && !(self.hash_payload || self.hash_metadata) {
            issues.push(
                &format!("{path}.hash_payload"),
                "hash_payload or hash_metadata must be true when custody is enabled",
            );
        }
        let header = self.previous_hash_header.trim();
        if header.is_empty() {
            issues.push(&format!("{path}.previous_hash_header"), "must not be empty");
        } else if header.chars().any(char::is_control) {
            issues.push(&format!("{path}.previous_hash_header"), "must not contain control characters");
        }
        if let Some(id) = &self.key_id {
            if id.trim().chars().count() > 128 {
                issues.push(&format!("{path}.key_id"), "must not exceed 128 characters");
            } else if id.chars().any(|c| c.is_control()) {
                issues.push(&format!("{path}.key_id"), "must not contain control characters");
            }
        }
        issues.range(&format!("{path}.max_hash_input_bytes"), self.max_hash_input_bytes, 1024, 1 << 30);
    }

    /// What custody does, for `nats-sink validate`.
    pub fn describe(&self) -> Vec<String> {
        let mut hashed = Vec::new();
        if self.hash_payload {
            hashed.push("payload");
        }
        if self.hash_metadata {
            hashed.push(match self.metadata_hash_scope {
                HashScope::Message => "metadata (stable across redeliveries)",
                HashScope::Delivery => "metadata (per delivery, as the reference)",
            });
        }
        let mut line = format!("custody: {} of {} on every message", self.algorithm.name(), hashed.join(" and "));
        if self.include_previous_hash {
            line.push_str(&format!("; previous record hash from header {}", self.previous_hash_header));
        }
        vec![line]
    }

    fn key_id(&self) -> Option<&str> {
        self.key_id.as_deref().map(str::trim).filter(|k| !k.is_empty())
    }

    /// The custody object of `envelope`.
    ///
    /// Each hashed document is rendered once, straight into a reused buffer, and hashed:
    /// the payload from its bytes ([`canonical_payload`]), the metadata document from the
    /// envelope with the left-out fields skipped as it is written ([`canonical_metadata`]),
    /// the record material from borrowed fields. No value tree is built; the bytes are those
    /// of the value-tree route ([`payload_value`], [`metadata_input`]).
    ///
    /// The object itself is written as its canonical text (its members are fixed, in key
    /// order) and attached as such: its value is parsed only if a sink asks for it.
    pub fn compute(&self, envelope: &Envelope) -> Result<JsonDoc, Rejection> {
        crate::canonical::with_buf(|buf| self.compute_with(envelope, buf))
    }

    fn compute_with(&self, envelope: &Envelope, buf: &mut CanonicalBuf) -> Result<JsonDoc, Rejection> {
        let algorithm = self.algorithm;
        let payload_hash = if self.hash_payload {
            canonical_payload(envelope.payload(), buf);
            Some(self.digest(buf.bytes(), "payload")?)
        } else {
            None
        };
        let metadata_hash = if self.hash_metadata {
            canonical_metadata(envelope, self.metadata_hash_scope, buf).map_err(not_canonical("metadata"))?;
            Some(self.digest(buf.bytes(), "metadata")?)
        } else {
            None
        };
        let previous =
            if self.include_previous_hash { previous_hash(envelope, &self.previous_hash_header)? } else { None };
        let js = envelope.jetstream();
        let material = RecordMaterial {
            algorithm: algorithm.name(),
            key_id: self.key_id(),
            message_id: envelope.message_id(),
            metadata_hash: metadata_hash.as_deref(),
            payload_hash: payload_hash.as_deref(),
            previous_record_hash: previous.as_deref(),
            schema: SCHEMA,
            schema_version: 1,
            stream: &js.stream,
            stream_sequence: js.stream_sequence,
            subject: envelope.subject(),
        };
        material.write(buf);
        let record_hash = self.digest(buf.bytes(), "record")?;
        // The object, written in key order (the members of `compute_by_value_tree` in the
        // tests, which compare both).
        let flag = |value: bool| if value { &b"true"[..] } else { &b"false"[..] };
        buf.clear();
        text(buf, b"{\"algorithm\":", Some(algorithm.name()));
        buf.raw(b",\"hash_input_format\":\"canonical-json\",\"hash_metadata\":");
        buf.raw(flag(self.hash_metadata));
        buf.raw(b",\"hash_payload\":");
        buf.raw(flag(self.hash_payload));
        text(buf, b",\"key_id\":", self.key_id());
        text(buf, b",\"metadata_hash\":", metadata_hash.as_deref());
        if self.metadata_hash_scope == HashScope::Message {
            buf.raw(b",\"metadata_hash_scope\":\"message\"");
        }
        text(buf, b",\"payload_hash\":", payload_hash.as_deref());
        text(buf, b",\"previous_record_hash\":", previous.as_deref());
        buf.raw(b",\"privacy\":\"hashes_are_not_encryption\"");
        text(buf, b",\"record_hash\":", Some(&record_hash));
        text(buf, b",\"schema\":", Some(SCHEMA));
        buf.raw(b",\"schema_version\":1}");
        Ok(crate::canonical::doc_from(buf))
    }

    /// The hex digest of one canonical input, or the rejection of an input over
    /// `max_hash_input_bytes`.
    fn digest(&self, bytes: &[u8], what: &str) -> Result<String, Rejection> {
        if bytes.len() as u64 > self.max_hash_input_bytes {
            return Err(Rejection::new(
                Step::Custody,
                "custody_hash_input_too_large",
                format!("{what} is {} bytes, limit {}", bytes.len(), self.max_hash_input_bytes),
            ));
        }
        Ok(self.algorithm.hex(bytes))
    }
}

fn not_canonical(what: &'static str) -> impl Fn(crate::canonical::CanonicalError) -> Rejection {
    move |_| Rejection::new(Step::Custody, "custody_input_not_canonical", format!("{what} holds NaN or infinity"))
}

/// The record hash's input, fields in key order.
#[cfg_attr(test, derive(Serialize))]
struct RecordMaterial<'a> {
    algorithm: &'a str,
    key_id: Option<&'a str>,
    message_id: Option<&'a str>,
    metadata_hash: Option<&'a str>,
    payload_hash: Option<&'a str>,
    previous_record_hash: Option<&'a str>,
    schema: &'a str,
    schema_version: u32,
    stream: &'a str,
    stream_sequence: u64,
    subject: &'a str,
}

impl RecordMaterial<'_> {
    /// The canonical bytes of the material into `buf` (cleared first): its members are fixed,
    /// so they are written in key order as they are, keys included, with only the values
    /// escaped; the same bytes as serializing it (a test compares both).
    fn write(&self, buf: &mut CanonicalBuf) {
        buf.clear();
        text(buf, b"{\"algorithm\":", Some(self.algorithm));
        text(buf, b",\"key_id\":", self.key_id);
        text(buf, b",\"message_id\":", self.message_id);
        text(buf, b",\"metadata_hash\":", self.metadata_hash);
        text(buf, b",\"payload_hash\":", self.payload_hash);
        text(buf, b",\"previous_record_hash\":", self.previous_record_hash);
        text(buf, b",\"schema\":", Some(self.schema));
        buf.raw(b",\"schema_version\":");
        buf.unsigned(u64::from(self.schema_version));
        text(buf, b",\"stream\":", Some(self.stream));
        buf.raw(b",\"stream_sequence\":");
        buf.unsigned(self.stream_sequence);
        text(buf, b",\"subject\":", Some(self.subject));
        buf.raw(b"}");
    }
}

/// A member with a fixed `key` (its comma, quotes and colon included) and a string value
/// (escaped) or `null`.
fn text(buf: &mut CanonicalBuf, key: &[u8], value: Option<&str>) {
    buf.raw(key);
    match value {
        Some(value) => buf.string(value),
        None => buf.raw(b"null"),
    }
}

/// The canonical bytes of the payload as sinks store it under `json_or_envelope` (those of
/// [`payload_value`]), into `buf`: strict JSON is read once, straight into its canonical
/// form; anything else is wrapped as the sinks wrap it, then rendered.
pub fn canonical_payload(payload: &[u8], buf: &mut CanonicalBuf) {
    if crate::canonical::strict_text_into(payload, buf).is_ok() {
        return;
    }
    // Not strict JSON: the text or bytes envelope, which is strict JSON itself.
    let wrapped = payload::normalize(payload, PayloadMode::JsonOrEnvelope);
    let text = wrapped.as_ref().map_or("null", |w| w.value.get());
    if crate::canonical::strict_text_into(text.as_bytes(), buf).is_err() {
        buf.clear();
    }
}

/// The canonical bytes of the metadata document hashed for `envelope` under `scope` (those of
/// [`metadata_input`]), into `buf` (cleared first): written by the document's own writer in
/// key order, never the sink's own storage time nor the custody object, and under
/// `HashScope::Message` neither `freshness` nor the [`PER_DELIVERY_FIELDS`].
pub fn canonical_metadata(
    envelope: &Envelope,
    scope: HashScope,
    buf: &mut CanonicalBuf,
) -> Result<(), crate::canonical::CanonicalError> {
    let message = scope == HashScope::Message;
    let left_out = LeftOut { custody: true, stored_at: true, freshness: message, delivery: message, consumer: message };
    buf.clear();
    MetadataDoc::new(envelope, envelope.received_at()).write_in_key_order(buf, left_out)
}

/// The payload as sinks store it under `json_or_envelope`, parsed.
pub fn payload_value(envelope: &Envelope) -> Value {
    match payload::normalize(envelope.payload(), PayloadMode::JsonOrEnvelope) {
        Ok(normalized) => normalized.to_value(),
        // json_or_envelope accepts every byte string.
        Err(_) => Value::Null,
    }
}

/// The metadata document hashed for `envelope` under `scope`.
pub fn metadata_input(envelope: &Envelope, scope: HashScope) -> Value {
    let mut doc = serde_json::to_value(MetadataDoc::new(envelope, envelope.received_at())).unwrap_or(Value::Null);
    let Value::Object(map) = &mut doc else { return doc };
    map.remove("custody");
    if let Some(Value::Object(ts)) = map.get_mut("timestamps") {
        ts.remove("stored_at");
        ts.remove("stored_at_epoch_ns");
    }
    if scope == HashScope::Message {
        map.remove("freshness");
        for (section, field) in PER_DELIVERY_FIELDS {
            if let Some(Value::Object(inner)) = map.get_mut(section) {
                inner.remove(field);
            }
        }
    }
    doc
}

fn previous_hash(envelope: &Envelope, header: &str) -> Result<Option<String>, Rejection> {
    let Some(value) = envelope.headers().get(header).map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if matches!(value.len(), 64 | 128) && value.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(Some(value.to_ascii_lowercase()))
    } else {
        Err(Rejection::new(
            Step::Custody,
            "custody_previous_hash_invalid",
            format!("header {header} must be a sha256 or sha512 hex digest"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use sinks_contract::envelope::Headers;
    use sinks_contract::testing::envelope_with;

    fn enabled() -> CustodyConfig {
        CustodyConfig { enabled: true, ..CustodyConfig::default() }
    }

    /// The custody object as it was computed before the streaming writers: every input built as
    /// a value tree ([`payload_value`], [`metadata_input`], `json!`), then rendered.
    fn compute_by_value_tree(c: &CustodyConfig, envelope: &Envelope) -> Result<Value, Rejection> {
        let hash = |value: &Value, what: &str| -> Result<String, Rejection> {
            let bytes = crate::canonical::to_vec(value).map_err(|_| {
                Rejection::new(Step::Custody, "custody_input_not_canonical", format!("{what} holds NaN or infinity"))
            })?;
            c.digest(&bytes, what)
        };
        let payload_hash = if c.hash_payload { Some(hash(&payload_value(envelope), "payload")?) } else { None };
        let metadata_hash = if c.hash_metadata {
            Some(hash(&metadata_input(envelope, c.metadata_hash_scope), "metadata")?)
        } else {
            None
        };
        let previous = if c.include_previous_hash { previous_hash(envelope, &c.previous_hash_header)? } else { None };
        let js = envelope.jetstream();
        let material = json!({
            "schema": SCHEMA, "schema_version": 1, "algorithm": c.algorithm.name(), "key_id": c.key_id(),
            "payload_hash": payload_hash, "metadata_hash": metadata_hash, "previous_record_hash": previous,
            "subject": envelope.subject(), "stream": js.stream, "stream_sequence": js.stream_sequence,
            "message_id": envelope.message_id(),
        });
        let record_hash = hash(&material, "record")?;
        let mut object = json!({
            "schema": SCHEMA, "schema_version": 1, "algorithm": c.algorithm.name(),
            "hash_input_format": "canonical-json", "key_id": c.key_id(), "payload_hash": payload_hash,
            "metadata_hash": metadata_hash, "record_hash": record_hash, "previous_record_hash": previous,
            "hash_payload": c.hash_payload, "hash_metadata": c.hash_metadata, "privacy": "hashes_are_not_encryption",
        });
        if c.metadata_hash_scope == HashScope::Message {
            object["metadata_hash_scope"] = "message".into();
        }
        Ok(object)
    }

    /// The custody object `compute` attaches, as a value, after checking that its canonical
    /// text is the canonical rendering of that value (what the value route would hash and sign).
    fn object(c: &CustodyConfig, envelope: &Envelope) -> Result<Value, Rejection> {
        let doc = c.compute(envelope)?;
        assert!(doc.canonical().is_some(), "custody keeps the object's canonical text");
        Ok(crate::canonical::checked_value(&doc))
    }

    fn config() -> impl Strategy<Value = CustodyConfig> {
        (
            prop::sample::select(vec![HashAlgorithm::Sha256, HashAlgorithm::Sha512]),
            prop::sample::select(vec![(true, true), (true, false), (false, true)]),
            any::<bool>(),
            prop::option::of(prop::sample::select(vec!["k", " policy-1 ", "", "ä"])),
            prop::sample::select(vec![HashScope::Message, HashScope::Delivery]),
            prop::sample::select(vec![1024u64, 16 * 1024 * 1024]),
        )
            .prop_map(
                |(algorithm, (hash_payload, hash_metadata), include_previous_hash, key_id, scope, max)| CustodyConfig {
                    enabled: true,
                    algorithm,
                    hash_payload,
                    hash_metadata,
                    include_previous_hash,
                    key_id: key_id.map(str::to_owned),
                    max_hash_input_bytes: max,
                    metadata_hash_scope: scope,
                    ..CustodyConfig::default()
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn streamed_custody_is_the_value_tree_custody(c in config(), e in crate::canonical::arbitrary::envelope()) {
            prop_assert_eq!(object(&c, &e), compute_by_value_tree(&c, &e));
        }

        #[test]
        fn streamed_inputs_are_the_value_tree_inputs(e in crate::canonical::arbitrary::envelope()) {
            let mut buf = CanonicalBuf::new();
            canonical_payload(e.payload(), &mut buf);
            prop_assert_eq!(buf.bytes(), &crate::canonical::to_vec(&payload_value(&e)).unwrap()[..]);
            for scope in [HashScope::Message, HashScope::Delivery] {
                canonical_metadata(&e, scope, &mut buf).unwrap();
                let tree = crate::canonical::to_vec(&metadata_input(&e, scope)).unwrap();
                prop_assert_eq!(buf.bytes(), &tree[..], "{:?}", scope);
            }
        }

        #[test]
        fn the_written_record_material_is_the_serialized_one(
            texts in prop::collection::vec(prop::option::of(any::<String>()), 8),
            sequence in any::<u64>(),
        ) {
            let text = |i: usize| texts[i].as_deref();
            let material = RecordMaterial {
                algorithm: text(0).unwrap_or("sha256"),
                key_id: text(1),
                message_id: text(2),
                metadata_hash: text(3),
                payload_hash: text(4),
                previous_record_hash: text(5),
                schema: SCHEMA,
                schema_version: 1,
                stream: text(6).unwrap_or("S"),
                stream_sequence: sequence,
                subject: text(7).unwrap_or("a.b"),
            };
            let mut written = CanonicalBuf::new();
            material.write(&mut written);
            let serialized = crate::canonical::to_vec(&serde_json::to_value(&material).unwrap()).unwrap();
            prop_assert_eq!(written.bytes(), &serialized[..]);
        }
    }

    #[test]
    fn message_scope_is_stable_across_redeliveries_delivery_scope_is_not() {
        let delivery = |delivered: u64, consumer_sequence: u64, pending: u64| {
            let js = sinks_contract::envelope::JetStreamInfo {
                stream: "S".into(),
                consumer: "C".into(),
                stream_sequence: 5,
                consumer_sequence,
                delivered,
                pending,
                timestamp: Some(time::macros::datetime!(2026-11-30 10:00 UTC)),
                domain: None,
            };
            Envelope::new("a.b", &br#"{"x":1}"#[..], Headers::new().with("Nats-Msg-Id", "m-5"), js)
        };
        let first = delivery(1, 5, 100);
        let again = delivery(3, 77, 12).with_received_at(first.received_at() + time::Duration::seconds(40));
        let stable = enabled();
        assert_eq!(object(&stable, &first).unwrap(), object(&stable, &again).unwrap());
        let reference = CustodyConfig { metadata_hash_scope: HashScope::Delivery, ..enabled() };
        let (a, b) = (object(&reference, &first).unwrap(), object(&reference, &again).unwrap());
        assert_eq!(a["payload_hash"], b["payload_hash"]);
        assert_ne!(a["metadata_hash"], b["metadata_hash"]);
        assert!(a.get("metadata_hash_scope").is_none(), "delivery scope keeps the reference's shape");
    }

    #[test]
    fn hashes_follow_the_documented_inputs() {
        let e = envelope_with("S", 9, "a.b", &b"plain text"[..], Headers::new(), 1);
        let c = CustodyConfig { algorithm: HashAlgorithm::Sha512, key_id: Some(" policy-1 ".into()), ..enabled() };
        let o = object(&c, &e).unwrap();
        let payload = crate::canonical::to_vec(&payload_value(&e)).unwrap();
        assert_eq!(o["payload_hash"], hex::encode(Sha512::digest(&payload)));
        assert_eq!(payload_value(&e)["payload"], "plain text", "text is hashed in its envelope");
        let meta = crate::canonical::to_vec(&metadata_input(&e, HashScope::Message)).unwrap();
        assert_eq!(o["metadata_hash"], hex::encode(Sha512::digest(&meta)));
        let material = json!({"schema": SCHEMA, "schema_version": 1, "algorithm": "sha512", "key_id": "policy-1",
            "payload_hash": o["payload_hash"], "metadata_hash": o["metadata_hash"], "previous_record_hash": null,
            "subject": "a.b", "stream": "S", "stream_sequence": 9, "message_id": null});
        assert_eq!(o["record_hash"], hex::encode(Sha512::digest(crate::canonical::to_vec(&material).unwrap())));
        assert_eq!(o["algorithm"], "sha512");
        assert_eq!(o["privacy"], "hashes_are_not_encryption");
        let input = metadata_input(&e, HashScope::Message);
        assert!(input.get("freshness").is_none() && input["jetstream"].get("pending").is_none());
        assert!(input["timestamps"].get("stored_at").is_none() && input["timestamps"].get("received_at").is_none());
    }

    #[test]
    fn previous_hash_and_limits_reject_one_message() {
        let with = |v: &str| {
            envelope_with("S", 1, "a", &b"{}"[..], Headers::new().with("Nats-Sinks-Previous-Custody-Hash", v), 1)
        };
        let c = CustodyConfig { include_previous_hash: true, hash_metadata: false, ..enabled() };
        let table: &[(&str, Result<Option<String>, &str>)] = &[
            (&"AB".repeat(32), Ok(Some("ab".repeat(32)))),
            (&"0f".repeat(64), Ok(Some("0f".repeat(64)))),
            ("", Ok(None)),
            (&"ab".repeat(31), Err("custody_previous_hash_invalid")),
            (&"zz".repeat(32), Err("custody_previous_hash_invalid")),
        ];
        for (value, want) in table {
            let got = object(&c, &with(value)).map(|o| o["previous_record_hash"].as_str().map(str::to_owned));
            assert_eq!(got.map_err(|r| r.reason.into_owned()), want.clone().map_err(str::to_owned), "{value}");
        }
        let big = envelope_with("S", 1, "a", vec![b'x'; 2000], Headers::new(), 1);
        let small = CustodyConfig { max_hash_input_bytes: 1024, ..enabled() };
        assert_eq!(object(&small, &big).unwrap_err().reason, "custody_hash_input_too_large");
    }

    #[test]
    fn config_checks() {
        let c = CustodyConfig { hash_payload: false, hash_metadata: false, max_hash_input_bytes: 10, ..enabled() };
        let mut issues = Issues::default();
        c.validate_at("custody", &mut issues);
        let paths: Vec<String> = issues.finish().unwrap_err().issues.into_iter().map(|i| i.path).collect();
        assert_eq!(paths, ["custody.hash_payload", "custody.max_hash_input_bytes"]);
        let c: CustodyConfig = serde_json::from_value(json!({"algorithm": "SHA_512"})).unwrap();
        assert_eq!(c.algorithm, HashAlgorithm::Sha512);
    }
}
