//! Pure: what is written for a message. No I/O here.
//!
//! - The **row key**: `[key_prefix:]<raw>`, where `<raw>` is the key string of
//!   `key_strategy` (`stream-sequence:S:N`, `message-id:ID`, `payload-sha256:SUBJECT:HEX`),
//!   exactly the reference's (`stream-sequence:S.EPOCH:N` in a later epoch of the stream,
//!   whose event documents also carry `stream_epoch`); a key over `max_key_bytes` fails its
//!   message permanently.
//! - The **event document** stored in the JSON column: the reference's
//!   `nats_sinks.oracle_nosql.event.v1` fields (identity, timestamps, headers, the standard
//!   metadata document, the payload as a JSON value or wrapped per `payload_mode`, and
//!   `payload_info` with the payload's SHA-256), plus `payload_text`, the published JSON
//!   text byte for byte (with `store_payload_text`), because the NoSQL JSON type keeps
//!   values, not text. Its compact JSON size is checked against `max_value_bytes`.
//! - The conversion of JSON text to the SDK's [`FieldValue`] (a small parser of its own:
//!   payloads are validated strict JSON and may nest deeper than serde_json's default limit;
//!   integers stay exact, big ones as NUMBER) and back, for read-backs.
//! - The **fingerprint** of a stored row (its `payload_info.sha256`), for the duplicate /
//!   conflict decision.
//! - The **read-back** of `nats-sink reconcile` ([`presence`]): a stored row's fingerprint
//!   and the payload it actually holds, both against the message's.

use std::str::FromStr;

use bigdecimal::BigDecimal;
use oracle_nosql_rust_sdk::types::{FieldValue, MapValue};
use serde_json::Value;
use sinks_contract::idempotency::IdempotencyError;
use sinks_contract::payload::{self, NormalizedPayload, PayloadError};
use sinks_contract::{Envelope, Presence};
use sinks_toolkit::metadata;
use time::OffsetDateTime;

use crate::config::NoSqlSinkConfig;

/// What a key is made of under the key strategy (`sinks_contract::existing`), for the
/// existing-key decision and the sink's capabilities.
pub(crate) use sinks_contract::existing::{key_basis, strategy_basis};

/// `schema` of every event document.
pub const EVENT_SCHEMA: &str = "nats_sinks.oracle_nosql.event.v1";

/// Why nothing can be written for a message. Permanent for that message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RowError {
    /// The key strategy needs identity the message does not carry.
    #[error(transparent)]
    Key(#[from] IdempotencyError),
    /// The payload cannot be stored under the configured payload mode.
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// The row key is longer than `max_key_bytes`.
    #[error("row key of {size} bytes exceeds sink.max_key_bytes ({max})")]
    KeyTooLong {
        /// Key size.
        size: usize,
        /// The limit.
        max: u64,
    },
    /// The event document is larger than `max_value_bytes`.
    #[error("event document of {size} bytes exceeds sink.max_value_bytes ({max})")]
    TooLarge {
        /// Document size.
        size: usize,
        /// The limit.
        max: u64,
    },
    /// Serializing failed.
    #[error("event document cannot be encoded ({0})")]
    Encode(String),
}

/// One row ready to be put.
#[derive(Debug)]
pub(crate) struct PreparedRow {
    /// The primary-key value.
    pub(crate) key: String,
    /// The event document (compact JSON, sorted keys).
    pub(crate) document: String,
    /// SHA-256 of the original payload bytes.
    pub(crate) fingerprint: String,
    /// When the row was written, ns since the epoch.
    pub(crate) stored_at_epoch_ns: i64,
}

impl PreparedRow {
    /// The row as the SDK sends it: key, event document, stored-at time.
    pub(crate) fn to_map(&self, config: &NoSqlSinkConfig) -> Result<MapValue, RowError> {
        let mut row = MapValue::new();
        row.put_str(&config.key_field, &self.key);
        row.put_field_value(&config.value_field, json_to_field(&self.document).map_err(RowError::Encode)?);
        row.put_i64(&config.stored_at_field, self.stored_at_epoch_ns);
        Ok(row)
    }
}

/// The row key of `envelope`: `[key_prefix:]<raw key>`.
pub(crate) fn row_key(envelope: &Envelope, config: &NoSqlSinkConfig) -> Result<String, RowError> {
    let raw = config.key_strategy.key_of(envelope)?;
    let key = match &config.key_prefix {
        Some(prefix) => format!("{prefix}:{}", raw.as_str()),
        None => raw.as_str().to_owned(),
    };
    if key.len() as u64 > config.max_key_bytes {
        return Err(RowError::KeyTooLong { size: key.len(), max: config.max_key_bytes });
    }
    Ok(key)
}

/// Builds the row written for `envelope`, stored at `stored_at`.
pub(crate) fn prepare(
    envelope: &Envelope,
    config: &NoSqlSinkConfig,
    stored_at: OffsetDateTime,
) -> Result<PreparedRow, RowError> {
    let key = row_key(envelope, config)?;
    // Keyed by the origin, the row is the event as its origin stored it, whatever the path.
    let origin_keyed = config.key_strategy == crate::config::KeyStrategy::OriginSequence;
    let event = config.metadata_scope.content_of(envelope, origin_keyed)?;
    let envelope = &*event;
    let normalized = payload::normalize(envelope.payload(), config.payload_mode)?;
    let doc = metadata::MetadataDoc::scoped(envelope, stored_at, config.metadata_scope);
    let document = event_json(envelope, &normalized, &doc, config.store_payload_text)?;
    if document.len() as u64 > config.max_value_bytes {
        return Err(RowError::TooLarge { size: document.len(), max: config.max_value_bytes });
    }
    Ok(PreparedRow {
        key,
        document,
        fingerprint: normalized.sha256.clone(),
        stored_at_epoch_ns: doc.stored_at_epoch_ns(),
    })
}

fn event_json(
    envelope: &Envelope,
    normalized: &NormalizedPayload,
    doc: &metadata::MetadataDoc<'_>,
    keep_text: bool,
) -> Result<String, RowError> {
    let event = metadata::EventDoc {
        idempotency_key: Some(envelope.idempotency_key().ok().map(|k| k.as_str().to_owned())),
        payload_text: (keep_text && !normalized.wrapped).then(|| normalized.value.get()),
        ..metadata::EventDoc::new(envelope, normalized, doc, EVENT_SCHEMA).without_policy_documents()
    };
    serde_json::to_string(&event).map_err(|e| RowError::Encode(e.to_string()))
}

/// `payload_info.sha256` of a stored row's event document; `None` when the row is not one
/// this sink can compare (written by something else).
pub(crate) fn stored_fingerprint(row: &MapValue, config: &NoSqlSinkConfig) -> Option<String> {
    let doc = row.get_map(&config.value_field)?;
    let info = doc.get_map("payload_info")?;
    match info.get_field_value("sha256")? {
        FieldValue::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// What the table holds for `envelope`, given the row `stored` under its key (`None`: no
/// row). Equal only when the event document's recorded fingerprint (`payload_info.sha256`)
/// matches the message's **and** so does the payload it holds: a wrapped payload decodes
/// to the published bytes; a JSON payload equals the published JSON as a value (the JSON
/// column keeps values, not text) and, when the row has `payload_text`, that text equals
/// the published text. A row edited behind the sink's back, or one this sink did not write,
/// is different. A message the sink cannot build a row for (no identity for its key, a
/// payload the mode refuses) was never written: missing.
pub(crate) fn presence(envelope: &Envelope, config: &NoSqlSinkConfig, stored: Option<&MapValue>) -> Presence {
    let Some(stored) = stored else { return Presence::Missing };
    let Ok(normalized) = payload::normalize(envelope.payload(), config.payload_mode) else {
        return Presence::Missing;
    };
    if stored_fingerprint(stored, config).as_deref() != Some(normalized.sha256.as_str()) {
        return Presence::Different;
    }
    let Some(document) = stored.get_field_value(&config.value_field).map(field_to_json) else {
        return Presence::Different;
    };
    let same = if normalized.wrapped {
        stored_payload(&document).is_some_and(|bytes| bytes == envelope.payload().as_ref())
    } else {
        let text = normalized.value.get();
        let same_value = serde_json::from_str::<Value>(text)
            .is_ok_and(|v| document.get("payload").is_some_and(|p| sinks_contract::json::same_value(p, &v)));
        let same_text = match document.get("payload_text") {
            None => true,
            Some(Value::String(stored)) => stored == text,
            Some(_) => false,
        };
        same_value && same_text
    };
    if same { Presence::Equal } else { Presence::Different }
}

/// The published payload bytes of a stored event document (`payload_text`, else the
/// wrapped payload decoded, else the stored JSON value re-serialized), for read-backs.
pub fn stored_payload(document: &Value) -> Option<Vec<u8>> {
    if let Some(Value::String(text)) = document.get("payload_text") {
        return Some(text.as_bytes().to_vec());
    }
    let payload = document.get("payload")?;
    let text = serde_json::to_string(payload).ok()?;
    Some(payload::decode_stored(&text))
}

/// A stored row as a JSON object.
pub fn map_to_json(row: &MapValue) -> Value {
    Value::Object(row.iter().map(|(k, v)| (k.clone(), field_to_json(v))).collect())
}

/// A stored value as JSON (maps, arrays and scalars; binary as base64; numbers exact).
pub fn field_to_json(value: &FieldValue) -> Value {
    use base64::Engine as _;
    match value {
        FieldValue::Map(m) => map_to_json(m),
        FieldValue::Array(items) => Value::Array(items.iter().map(field_to_json).collect()),
        FieldValue::String(s) => Value::String(s.clone()),
        FieldValue::Boolean(b) => Value::Bool(*b),
        FieldValue::Integer(i) => Value::from(*i),
        FieldValue::Long(l) => Value::from(*l),
        FieldValue::Double(d) => serde_json::Number::from_f64(*d).map_or(Value::Null, Value::Number),
        FieldValue::Number(n) => serde_json::from_str(&n.to_string()).unwrap_or(Value::Null),
        FieldValue::Binary(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        FieldValue::Timestamp(t) => Value::String(t.to_rfc3339()),
        FieldValue::JsonNull | FieldValue::Null | FieldValue::Empty | FieldValue::Uninitialized => Value::Null,
    }
}

/// Parses JSON text (already known to be valid) into a [`FieldValue`]: objects become maps,
/// `null` the JSON null, integers INTEGER / LONG (or an exact NUMBER when larger), other
/// numbers DOUBLE (or an exact NUMBER when a double cannot hold them). Nesting is limited
/// only by the stack (the strict validator bounds it upstream).
pub(crate) fn json_to_field(text: &str) -> Result<FieldValue, String> {
    let mut parser = Parser { bytes: text.as_bytes(), pos: 0 };
    let value = parser.value(0)?;
    parser.skip_ws();
    if parser.pos != parser.bytes.len() {
        return Err(format!("trailing characters at {}", parser.pos));
    }
    Ok(value)
}

/// Deepest nesting converted (far above what any JSON column accepts in practice).
const MAX_DEPTH: usize = 10_000;

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.bytes.len() && matches!(self.bytes[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        self.skip_ws();
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected `{}` at {}", byte as char, self.pos))
        }
    }

    fn value(&mut self, depth: usize) -> Result<FieldValue, String> {
        if depth > MAX_DEPTH {
            return Err("json nests too deeply".into());
        }
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(FieldValue::String),
            Some(b't') => self.literal("true", FieldValue::Boolean(true)),
            Some(b'f') => self.literal("false", FieldValue::Boolean(false)),
            Some(b'n') => self.literal("null", FieldValue::JsonNull),
            Some(_) => self.number(),
            None => Err("unexpected end of json".into()),
        }
    }

    fn literal(&mut self, word: &str, value: FieldValue) -> Result<FieldValue, String> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(format!("invalid literal at {}", self.pos))
        }
    }

    fn object(&mut self, depth: usize) -> Result<FieldValue, String> {
        self.pos += 1;
        let mut map = MapValue::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(FieldValue::Map(map));
        }
        loop {
            self.skip_ws();
            let key = self.string()?;
            self.expect(b':')?;
            let value = self.value(depth + 1)?;
            map.put_field_value(&key, value);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(FieldValue::Map(map));
                }
                _ => return Err(format!("expected `,` or `}}` at {}", self.pos)),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<FieldValue, String> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(FieldValue::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(FieldValue::Array(items));
                }
                _ => return Err(format!("expected `,` or `]` at {}", self.pos)),
            }
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.skip_ws();
        let start = self.pos;
        if self.peek() != Some(b'"') {
            return Err(format!("expected a string at {start}"));
        }
        self.pos += 1;
        let mut escaped = false;
        while let Some(b) = self.peek() {
            self.pos += 1;
            match b {
                b'\\' => {
                    escaped = true;
                    self.pos += 1;
                }
                b'"' => {
                    let raw = std::str::from_utf8(&self.bytes[start..self.pos]).map_err(|e| e.to_string())?;
                    if !escaped {
                        return Ok(raw[1..raw.len() - 1].to_owned());
                    }
                    return serde_json::from_str::<String>(raw).map_err(|e| e.to_string());
                }
                _ => {}
            }
        }
        Err("unterminated string".into())
    }

    fn number(&mut self) -> Result<FieldValue, String> {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E') {
                self.pos += 1;
            } else {
                break;
            }
        }
        let text = std::str::from_utf8(&self.bytes[start..self.pos]).map_err(|e| e.to_string())?;
        if text.is_empty() {
            return Err(format!("unexpected character at {start}"));
        }
        let integral = !text.contains(['.', 'e', 'E']);
        if integral {
            if let Ok(i) = text.parse::<i32>() {
                return Ok(FieldValue::Integer(i));
            }
            if let Ok(l) = text.parse::<i64>() {
                return Ok(FieldValue::Long(l));
            }
        } else if let Ok(d) = text.parse::<f64>()
            && d.is_finite()
            && BigDecimal::from_str(&d.to_string()).ok() == BigDecimal::from_str(text).ok()
        {
            return Ok(FieldValue::Double(d));
        }
        BigDecimal::from_str(text).map(FieldValue::Number).map_err(|e| format!("bad number at {start}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use sinks_contract::testing::{envelope, envelope_with};
    use sinks_contract::{Headers, PayloadMode};

    use super::*;
    use crate::config::KeyStrategy;
    use sinks_toolkit::metadata::MetadataScope;

    fn config() -> NoSqlSinkConfig {
        NoSqlSinkConfig::new("127.0.0.1:8080", "t")
    }

    fn doc(row: &PreparedRow) -> Value {
        serde_json::from_str(&row.document).unwrap()
    }

    #[test]
    fn a_redelivery_writes_the_same_document() {
        let e = envelope("S", 3, "orders.x", "{\"b\": 1}");
        let again = sinks_contract::testing::redelivery(&e, time::Duration::seconds(30));
        let later = OffsetDateTime::now_utc() + time::Duration::seconds(31);
        let one = prepare(&e, &config(), OffsetDateTime::now_utc()).unwrap();
        let two = prepare(&again, &config(), later).unwrap();
        assert_eq!(one.document, two.document);
        assert!(two.stored_at_epoch_ns > one.stored_at_epoch_ns, "the row's stored-at column is its own insert's");
        for member in ["consumer", "consumer_sequence", "received_at_epoch_ns", "stored_at_epoch_ns"] {
            assert!(doc(&one).get(member).is_none(), "{member}");
        }
        let reference = NoSqlSinkConfig { metadata_scope: MetadataScope::Delivery, ..config() };
        assert_ne!(
            prepare(&e, &reference, OffsetDateTime::now_utc()).unwrap().document,
            prepare(&again, &reference, later).unwrap().document
        );
        assert!(doc(&prepare(&e, &reference, later).unwrap())["consumer"].is_string());
    }

    #[test]
    fn keys_follow_the_reference() {
        let e = envelope_with("S", 7, "a.b", Bytes::from_static(b"{}"), Headers::new().with("Nats-Msg-Id", "id-1"), 1);
        let at = |strategy: crate::KeyStrategy, prefix: Option<&str>| {
            let c = NoSqlSinkConfig { key_strategy: strategy, key_prefix: prefix.map(str::to_owned), ..config() };
            row_key(&e, &c).unwrap()
        };
        assert_eq!(at(crate::KeyStrategy::IdempotencyKey, None), "stream-sequence:S:7");
        assert_eq!(at(crate::KeyStrategy::StreamSequence, Some("prod")), "prod:stream-sequence:S:7");
        assert_eq!(at(crate::KeyStrategy::MessageId, None), "message-id:id-1");
        assert!(at(crate::KeyStrategy::PayloadSha256, None).starts_with("payload-sha256:a.b:44136fa355b3678a"));
        let no_id = envelope("S", 1, "a", "{}");
        let c = NoSqlSinkConfig { key_strategy: crate::KeyStrategy::MessageId, ..config() };
        assert!(matches!(row_key(&no_id, &c), Err(RowError::Key(_))));
        let c = NoSqlSinkConfig { max_key_bytes: 10, ..config() };
        assert!(matches!(row_key(&e, &c), Err(RowError::KeyTooLong { .. })));
    }

    #[test]
    fn a_later_epoch_keys_its_rows_apart_and_says_so() {
        let e = envelope_with("S", 7, "a.b", Bytes::from_static(b"{}"), Headers::new().with("Nats-Msg-Id", "id-1"), 1);
        let later = e.clone().with_stream_epoch(Some("e17".into()));
        let key = |e: &Envelope, strategy| row_key(e, &NoSqlSinkConfig { key_strategy: strategy, ..config() }).unwrap();
        assert_eq!(key(&later, KeyStrategy::IdempotencyKey), "stream-sequence:S.e17:7");
        assert_eq!(key(&later, KeyStrategy::StreamSequence), "stream-sequence:S.e17:7");
        assert_eq!(key(&later, KeyStrategy::MessageId), key(&e, KeyStrategy::MessageId));
        let d = doc(&prepare(&later, &config(), OffsetDateTime::now_utc()).unwrap());
        assert_eq!(
            (&d["stream"], &d["stream_epoch"], &d["idempotency_key"]),
            (&Value::from("S"), &Value::from("e17"), &Value::from("stream-sequence:S.e17:7"))
        );
        assert_eq!(d["metadata"]["jetstream"]["stream_epoch"], "e17");
        let first = doc(&prepare(&e, &config(), OffsetDateTime::now_utc()).unwrap());
        assert!(first.get("stream_epoch").is_none());
    }

    #[test]
    fn document_has_the_reference_fields_and_the_exact_text() {
        let e = envelope("S", 3, "orders.x", " {\"b\": 1.50, \"a\": [1, 2]}\n");
        let row = prepare(&e, &config(), OffsetDateTime::now_utc()).unwrap();
        let d = doc(&row);
        assert_eq!(d["schema"], EVENT_SCHEMA);
        assert_eq!(d["schema_version"], 1);
        assert_eq!(d["subject"], "orders.x");
        assert_eq!(d["stream_sequence"], 3);
        assert_eq!(d["idempotency_key"], "stream-sequence:S:3");
        assert_eq!(d["payload_text"], "{\"b\": 1.50, \"a\": [1, 2]}");
        assert_eq!(d["payload_info"]["sha256"], row.fingerprint);
        assert!(d["metadata"]["jetstream"].is_object());
        let keys: Vec<&String> = d.as_object().unwrap().keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "sorted keys");
        assert_eq!(stored_payload(&d).unwrap(), b"{\"b\": 1.50, \"a\": [1, 2]}");
    }

    #[test]
    fn wrapped_payloads_read_back_and_text_is_optional() {
        let e = envelope("S", 4, "x", Bytes::from_static(&[0xff, 0x00, 0x10]));
        let row = prepare(&e, &config(), OffsetDateTime::now_utc()).unwrap();
        let d = doc(&row);
        assert!(d.get("payload_text").is_none(), "wrapped payloads carry no second copy");
        assert_eq!(stored_payload(&d).unwrap(), vec![0xff, 0x00, 0x10]);
        let c = NoSqlSinkConfig { store_payload_text: false, ..config() };
        let row = prepare(&envelope("S", 5, "x", "{\"a\":1}"), &c, OffsetDateTime::now_utc()).unwrap();
        assert!(doc(&row).get("payload_text").is_none());
    }

    #[test]
    fn payload_modes_and_size_limits_are_permanent_errors() {
        let c = NoSqlSinkConfig { payload_mode: PayloadMode::JsonOnly, ..config() };
        assert!(matches!(
            prepare(&envelope("S", 1, "x", "text"), &c, OffsetDateTime::now_utc()),
            Err(RowError::Payload(_))
        ));
        let c = NoSqlSinkConfig { max_value_bytes: 2000, ..config() };
        let big = format!("{{\"x\":\"{}\"}}", "y".repeat(4000));
        let err = prepare(&envelope("S", 1, "x", big), &c, OffsetDateTime::now_utc()).unwrap_err();
        assert!(matches!(err, RowError::TooLarge { .. }));
        assert!(!err.to_string().contains("yyyy"), "no payload in the error");
    }

    #[test]
    fn json_converts_exactly() {
        let v = json_to_field(r#"{"i":1,"l":9007199254740993,"big":123456789012345678901234567890,"d":2.5,"e":1e3,"s":"a\"b\u00e9","n":null,"t":true,"a":[[],{}]}"#).unwrap();
        let FieldValue::Map(m) = v else { panic!("map") };
        assert!(matches!(m.get_field_value("i"), Some(FieldValue::Integer(1))));
        assert!(matches!(m.get_field_value("l"), Some(FieldValue::Long(9_007_199_254_740_993))));
        assert!(matches!(m.get_field_value("big"), Some(FieldValue::Number(_))));
        assert!(matches!(m.get_field_value("d"), Some(FieldValue::Double(d)) if (*d - 2.5).abs() < f64::EPSILON));
        assert!(matches!(m.get_field_value("e"), Some(FieldValue::Double(d)) if (*d - 1000.0).abs() < f64::EPSILON));
        assert_eq!(m.get_string("s").as_deref(), Some("a\"bé"));
        assert!(matches!(m.get_field_value("n"), Some(FieldValue::JsonNull)));
        let back = field_to_json(&FieldValue::Map(m));
        assert_eq!(back["big"].to_string(), "123456789012345678901234567890");
        assert_eq!(back["s"], "a\"bé");
    }

    #[test]
    fn deep_nesting_converts() {
        let deep = format!("{}1{}", "[".repeat(1000), "]".repeat(1000));
        assert!(json_to_field(&deep).is_ok());
        assert!(json_to_field("[1,").is_err());
        assert!(json_to_field("{} x").is_err());
    }

    #[test]
    fn reconcile_compares_the_recorded_fingerprint_and_the_stored_payload() {
        let c = config();
        let now = OffsetDateTime::now_utc();
        let json = envelope("S", 1, "s", " {\"b\": 1.50, \"a\": [1, 12345678901234567890, -2, 1e3]}\n");
        let binary = envelope("S", 2, "s", Bytes::from_static(&[0xff, 0x00, 0x10]));
        let text = envelope("S", 3, "s", "plain text");
        let stored = |e: &Envelope, c: &NoSqlSinkConfig| prepare(e, c, now).unwrap().to_map(c).unwrap();
        // A row whose event document was edited by `edit` (through JSON, as another writer
        // would put it).
        let edited = |e: &Envelope, edit: &dyn Fn(&mut Value)| {
            let mut row = stored(e, &c);
            let mut document = field_to_json(row.get_field_value(&c.value_field).unwrap());
            edit(&mut document);
            row.put_field_value(&c.value_field, json_to_field(&document.to_string()).unwrap());
            row
        };
        let no_text = NoSqlSinkConfig { store_payload_text: false, ..config() };
        let rows: Vec<(&str, &Envelope, &NoSqlSinkConfig, Option<MapValue>, Presence)> = vec![
            ("no row", &json, &c, None, Presence::Missing),
            ("as written", &json, &c, Some(stored(&json, &c)), Presence::Equal),
            ("without payload_text", &json, &no_text, Some(stored(&json, &no_text)), Presence::Equal),
            ("round trip through JSON", &json, &c, Some(edited(&json, &|_| {})), Presence::Equal),
            ("binary as written", &binary, &c, Some(stored(&binary, &c)), Presence::Equal),
            ("text as written", &text, &c, Some(stored(&text, &c)), Presence::Equal),
            ("another message's row", &json, &c, Some(stored(&text, &c)), Presence::Different),
            (
                "payload edited, fingerprint and text kept",
                &json,
                &c,
                Some(edited(&json, &|d| d["payload"]["b"] = 2.into())),
                Presence::Different,
            ),
            (
                "payload_text edited",
                &json,
                &c,
                Some(edited(&json, &|d| d["payload_text"] = "{}".into())),
                Presence::Different,
            ),
            (
                "fingerprint edited",
                &json,
                &c,
                Some(edited(&json, &|d| d["payload_info"]["sha256"] = "0".repeat(64).into())),
                Presence::Different,
            ),
            (
                "binary payload edited",
                &binary,
                &c,
                Some(edited(&binary, &|d| d["payload"]["payload"] = "AAAA".into())),
                Presence::Different,
            ),
            (
                "not this sink's row",
                &json,
                &c,
                Some(MapValue::new().str("sink_key", "k").column("event_json", FieldValue::Map(MapValue::new()))),
                Presence::Different,
            ),
            ("no event document", &json, &c, Some(MapValue::new().str("sink_key", "k")), Presence::Different),
        ];
        for (case, e, c, row, want) in rows {
            assert_eq!(presence(e, c, row.as_ref()), want, "{case}");
        }
        // A payload the mode refuses was never written (it was dead-lettered): missing.
        let json_only = NoSqlSinkConfig { payload_mode: PayloadMode::JsonOnly, ..config() };
        assert_eq!(presence(&text, &json_only, Some(&stored(&text, &c))), Presence::Missing);
    }

    #[test]
    fn fingerprint_is_read_from_the_stored_row() {
        let c = config();
        let row = prepare(&envelope("S", 1, "x", "{\"a\":1}"), &c, OffsetDateTime::now_utc()).unwrap();
        let map = row.to_map(&c).unwrap();
        assert_eq!(stored_fingerprint(&map, &c).as_deref(), Some(row.fingerprint.as_str()));
        let foreign = MapValue::new().str("sink_key", "k").column("event_json", FieldValue::Map(MapValue::new()));
        assert_eq!(stored_fingerprint(&foreign, &c), None);
    }
}
