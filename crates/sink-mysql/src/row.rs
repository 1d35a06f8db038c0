//! Pure mapping of an envelope to the values of one row (no IO).

use mysql_async::Value;
use sha2::{Digest, Sha256};
use sinks_contract::metadata::MetadataDoc;
use sinks_contract::payload::{self, PayloadMode};
use sinks_contract::{Envelope, IdempotencyStrategy, SinkError};
use time::OffsetDateTime;

use crate::sql::{Field, TablePlan};

/// Deepest JSON nesting stored as JSON: MariaDB's `json_valid` accepts 32 levels (MySQL 100).
/// Deeper payloads are stored in the text envelope (or refused under `json_only`).
pub(crate) const MAX_JSON_DEPTH: usize = 32;

/// One row ready to bind: values in plan order, plus the key as text for matching.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// Values parallel to `TablePlan::fields`.
    pub(crate) values: Vec<Value>,
    /// The key values rendered as text, joined with U+001F (matches [`key_of`]).
    pub(crate) key: String,
    /// SHA-256 of the stored payload JSON (the fingerprint), hex.
    pub(crate) fingerprint: String,
}

/// Text form of a key made of `values` (strings as UTF-8, numbers in decimal).
pub(crate) fn key_of(values: &[Value]) -> String {
    values
        .iter()
        .map(|v| match v {
            Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            Value::NULL => "\u{0}".to_owned(),
            other => format!("{other:?}"),
        })
        .collect::<Vec<_>>()
        .join("\u{1f}")
}

fn text(s: impl Into<String>) -> Value {
    Value::Bytes(s.into().into_bytes())
}

fn opt_text(s: Option<impl Into<String>>) -> Value {
    s.map_or(Value::NULL, text)
}

mod erased {
    //! Compact JSON bytes of any serializable value, usable as a trait object.
    pub(super) trait Json {
        fn bytes(&self) -> Vec<u8>;
    }

    impl<T: serde::Serialize> Json for T {
        fn bytes(&self) -> Vec<u8> {
            sinks_contract::json::to_canonical_vec(self)
        }
    }
}

/// Maps `envelope` to a row of `plan`. Errors are permanent for that message (bad payload
/// under the mode, missing key material).
pub(crate) fn map(
    envelope: &Envelope,
    plan: &TablePlan,
    mode: PayloadMode,
    stored_at: OffsetDateTime,
) -> Result<Row, SinkError> {
    let mut normalized = payload::normalize(envelope.payload(), mode)
        .map_err(|e| SinkError::permanent(e.to_string()).with_error_type("SerializationError"))?;
    if !normalized.wrapped && sinks_contract::json::depth(normalized.value.get()) > MAX_JSON_DEPTH {
        // The server's JSON type refuses deeper documents: keep the bytes as text instead.
        normalized = match mode {
            PayloadMode::JsonOnly => {
                return Err(SinkError::permanent(format!(
                    "payload JSON is nested deeper than {MAX_JSON_DEPTH} levels"
                ))
                .with_error_type("SerializationError"));
            }
            _ => payload::normalize(envelope.payload(), PayloadMode::TextEnvelope)
                .map_err(|e| SinkError::permanent(e.to_string()).with_error_type("SerializationError"))?,
        };
    }
    let idem = &plan.idempotency;
    let derived_id = match idem.strategy {
        IdempotencyStrategy::PayloadField => Some(
            idem.strategy
                .key_for(envelope, idem.payload_field.as_deref(), Some(&normalized.to_value()))
                .map_err(|e| SinkError::permanent(e.to_string()).with_error_type("ValidationError"))?
                .to_string(),
        ),
        strategy => {
            strategy
                .key_for(envelope, None, None)
                .map_err(|e| SinkError::permanent(e.to_string()).with_error_type("ValidationError"))?;
            None
        }
    };
    let metadata = MetadataDoc::new(envelope, stored_at);
    let js = envelope.jetstream();
    let app = envelope.app();
    let json_bytes = |v: &dyn erased::Json| Value::Bytes(v.bytes());
    let payload_text = normalized.value.get().to_owned();
    let fingerprint = hex::encode(Sha256::digest(payload_text.as_bytes()));
    let values: Vec<Value> = plan
        .fields
        .iter()
        .map(|f| match f {
            Field::StreamName => text(js.stream.clone()),
            Field::StreamSequence => Value::UInt(js.stream_sequence),
            Field::Subject => text(envelope.subject()),
            Field::MessageId => opt_text(derived_id.clone().or_else(|| envelope.message_id().map(str::to_owned))),
            Field::Priority => opt_text(app.priority.clone()),
            Field::Classification => opt_text(app.classification.clone()),
            Field::Labels => opt_text(app.labels_string()),
            Field::CreatedAt => metadata.created_at_epoch_ns().map_or(Value::NULL, Value::Int),
            Field::JetStreamTimestamp => metadata.jetstream_timestamp_epoch_ns().map_or(Value::NULL, Value::Int),
            Field::ReceivedAt => Value::Int(metadata.received_at_epoch_ns()),
            Field::StoredAt => Value::Int(metadata.stored_at_epoch_ns()),
            Field::Payload => text(payload_text.clone()),
            Field::Headers => json_bytes(envelope.headers()),
            Field::Metadata => json_bytes(&metadata),
            Field::MissionMetadata => envelope.mission_metadata().map_or(Value::NULL, |v| json_bytes(v)),
            Field::SecurityLabels => envelope.security_labels().map_or(Value::NULL, |v| json_bytes(v)),
            Field::PayloadSha256 => text(fingerprint.clone()),
        })
        .collect();
    let key_values: Vec<Value> = plan.key.iter().map(|i| values[*i].clone()).collect();
    if key_values.contains(&Value::NULL) {
        return Err(SinkError::permanent("a key column would be null").with_error_type("ValidationError"));
    }
    Ok(Row { key: key_of(&key_values), values, fingerprint })
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sinks_contract::Headers;
    use sinks_contract::config::SinkSection;
    use sinks_contract::testing::envelope_with;

    use super::*;
    use crate::MySqlSinkConfig;

    fn plan(extra: serde_json::Value) -> TablePlan {
        let mut v = json!({"type": "mysql", "database": "d", "user": "u"});
        if let (Some(base), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
            base.extend(e);
        }
        let serde_json::Value::Object(m) = v else { unreachable!() };
        let config = MySqlSinkConfig::from_section(&SinkSection(m)).unwrap();
        TablePlan::all(&config).unwrap().remove(0)
    }

    #[test]
    fn maps_every_column_in_plan_order() {
        let p = plan(json!({"conflict_policy": "keep_first"}));
        let e = envelope_with("S", 9, "orders.x", &b" {\"a\": 1} "[..], Headers::new().with("Nats-Msg-Id", "m1"), 1);
        let row = map(&e, &p, PayloadMode::JsonOrEnvelope, OffsetDateTime::now_utc()).unwrap();
        assert_eq!(row.values.len(), p.columns.len());
        assert_eq!(row.values[0], text("S"));
        assert_eq!(row.values[1], Value::UInt(9));
        assert_eq!(row.values[3], text("m1"));
        assert_eq!(row.values[4], Value::NULL, "no priority is SQL NULL, never the string null");
        assert_eq!(row.values[11], text("{\"a\": 1}"));
        assert_eq!(row.key, "S\u{1f}9");
        assert_eq!(row.values[16], text(row.fingerprint.clone()));
    }

    #[test]
    fn policy_documents_fill_their_json_columns() {
        let p = plan(json!({}));
        let labels = json!({"profile": "nats-sinks.security-label.v1", "owner": "ops"});
        let e = envelope_with("S", 9, "o", &b"{}"[..], Headers::new(), 1).with_security_labels(Some(labels.clone()));
        let row = map(&e, &p, PayloadMode::JsonOrEnvelope, OffsetDateTime::now_utc()).unwrap();
        let column = |name: &str| p.columns.iter().position(|c| c.eq_ignore_ascii_case(name)).unwrap();
        assert_eq!(
            row.values[column("SECURITY_LABELS_JSON")],
            Value::Bytes(sinks_contract::json::to_canonical_vec(&labels))
        );
        assert_eq!(row.values[column("MISSION_METADATA_JSON")], Value::NULL, "absent is SQL NULL");
    }

    #[test]
    fn payload_field_key_goes_into_the_message_id_column() {
        let p = plan(json!({"idempotency": {"strategy": "payload_field", "payload_field": "order.id"}}));
        let e = envelope_with("S", 1, "o", &br#"{"order":{"id":"A-7"}}"#[..], Headers::new(), 1);
        let row = map(&e, &p, PayloadMode::JsonOrEnvelope, OffsetDateTime::now_utc()).unwrap();
        assert_eq!(row.key, "A-7");
        let missing = envelope_with("S", 2, "o", &br#"{"order":{}}"#[..], Headers::new(), 1);
        let err = map(&missing, &p, PayloadMode::JsonOrEnvelope, OffsetDateTime::now_utc()).unwrap_err();
        assert!(err.is_permanent());
    }

    #[test]
    fn json_only_rejects_text_permanently() {
        let p = plan(json!({}));
        let e = envelope_with("S", 1, "o", &b"not json"[..], Headers::new(), 1);
        let err = map(&e, &p, PayloadMode::JsonOnly, OffsetDateTime::now_utc()).unwrap_err();
        assert_eq!(err.error_type(), "SerializationError");
    }
}
