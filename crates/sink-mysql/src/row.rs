//! Pure mapping of an envelope to the values of one row (no IO).

use mysql_async::Value;
use sinks_contract::payload::PayloadMode;
use sinks_contract::{Envelope, SinkError};
use sinks_toolkit::metadata::MetadataScope;
use sinks_toolkit::relational::{self, Cell, Cells};
use time::OffsetDateTime;

use crate::sql::TablePlan;

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

/// The driver value of a neutral cell: text and JSON as UTF-8 bytes, NULL for `None`.
fn value(cell: Cell) -> Value {
    match cell {
        Cell::Text(Some(s)) | Cell::Json(Some(s)) => Value::Bytes(s.into_bytes()),
        Cell::Text(None) | Cell::Json(None) | Cell::Int(None) => Value::NULL,
        Cell::Int(Some(i)) => Value::Int(i),
        Cell::UInt(u) => Value::UInt(u),
    }
}

/// Maps `envelope` to a row of `plan` (`sinks_toolkit::relational::map_row`, with MariaDB's
/// JSON depth). Errors are permanent for that message (bad payload under the mode, missing
/// key material).
pub(crate) fn map(
    envelope: &Envelope,
    plan: &TablePlan,
    mode: PayloadMode,
    stored_at: (OffsetDateTime, MetadataScope),
) -> Result<Row, SinkError> {
    let Cells { cells, fingerprint } =
        relational::map_row(envelope, &plan.fields, &plan.idempotency, mode, MAX_JSON_DEPTH, stored_at)?;
    let values: Vec<Value> = cells.into_iter().map(value).collect();
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

    fn text(s: impl Into<String>) -> Value {
        Value::Bytes(s.into().into_bytes())
    }

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
        let row =
            map(&e, &p, PayloadMode::JsonOrEnvelope, (OffsetDateTime::now_utc(), MetadataScope::Delivery)).unwrap();
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
        let row =
            map(&e, &p, PayloadMode::JsonOrEnvelope, (OffsetDateTime::now_utc(), MetadataScope::Delivery)).unwrap();
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
        let row =
            map(&e, &p, PayloadMode::JsonOrEnvelope, (OffsetDateTime::now_utc(), MetadataScope::Delivery)).unwrap();
        assert_eq!(row.key, "A-7");
        let missing = envelope_with("S", 2, "o", &br#"{"order":{}}"#[..], Headers::new(), 1);
        let err = map(&missing, &p, PayloadMode::JsonOrEnvelope, (OffsetDateTime::now_utc(), MetadataScope::Delivery))
            .unwrap_err();
        assert!(err.is_permanent());
    }

    #[test]
    fn json_only_rejects_text_permanently() {
        let p = plan(json!({}));
        let e = envelope_with("S", 1, "o", &b"not json"[..], Headers::new(), 1);
        let err = map(&e, &p, PayloadMode::JsonOnly, (OffsetDateTime::now_utc(), MetadataScope::Delivery)).unwrap_err();
        assert_eq!(err.error_type(), "SerializationError");
    }

    #[test]
    fn a_missing_payload_field_fails_with_its_reason_code() {
        // The dead-letter record names why (`reason`); MySQL's own copy of the mapping dropped
        // the reason the Oracle sink attached.
        let p = plan(json!({"idempotency": {"strategy": "payload_field", "payload_field": "order.id"}}));
        let missing = envelope_with("S", 2, "o", &br#"{"order":{}}"#[..], Headers::new(), 1);
        let err = map(&missing, &p, PayloadMode::JsonOrEnvelope, (OffsetDateTime::now_utc(), MetadataScope::Delivery))
            .unwrap_err();
        assert_eq!(err.error_type(), "ValidationError");
        assert!(err.reason().is_some_and(|r| !r.is_empty()), "no reason code: {err:?}");
    }
}
