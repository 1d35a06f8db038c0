//! Pure mapping of an envelope to the bind values of one row (no IO).
//!
//! JSON documents are canonical (sorted keys, compact) except the payload, which is the
//! published JSON text (trimmed) or the reference's envelope. Missing optional values are
//! SQL NULL, never the string `null`; mission metadata and security labels are NULL when
//! the message has none. The metadata document carries `custody` when the core attached it.
//!
//! Also the comparison of `nats-sink reconcile` ([`presence`]): what a bulk key lookup read
//! back for a row against the row the sink would write.

use sha2::{Digest, Sha256};
use sinks_contract::payload::PayloadMode;
use sinks_contract::{Envelope, Presence, SinkError};
use sinks_toolkit::metadata::MetadataScope;
use sinks_toolkit::relational::{self, Cell, Cells};
use time::OffsetDateTime;

use crate::config::JsonColumnType;
use crate::driver::Value;
use crate::sql::{Field, TablePlan};

/// Deepest JSON nesting stored as JSON. Oracle's JSON type and `IS JSON` accept deeper
/// documents than most producers send, but not without bound; deeper payloads are stored in
/// the text envelope (or refused under `json_only`).
pub(crate) const MAX_JSON_DEPTH: usize = 500;

/// One row ready to bind: values in plan order, plus the key as text for matching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    /// Values parallel to `TablePlan::fields`.
    pub(crate) values: Vec<Value>,
    /// The key values rendered as text, joined with U+001F (matches [`key_of`]).
    pub(crate) key: String,
    /// SHA-256 of the stored payload JSON (the fingerprint), hex.
    pub(crate) fingerprint: String,
}

/// Text form of a key made of `values` (as a query would return them).
pub(crate) fn key_of<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> String {
    values.into_iter().map(|v| v.unwrap_or("\u{0}")).collect::<Vec<_>>().join("\u{1f}")
}

/// The key text of `row` under `plan`.
pub(crate) fn key_text(plan: &TablePlan, values: &[Value]) -> String {
    let texts: Vec<Option<String>> = plan.key.iter().map(|i| values[*i].as_text()).collect();
    key_of(texts.iter().map(Option::as_deref))
}

/// The bind of a neutral cell: JSON documents as `CLOB`s (they can exceed 32 KiB).
fn bind(cell: Cell) -> Value {
    match cell {
        Cell::Text(v) => Value::Text(v),
        Cell::Int(v) => Value::Int(v),
        Cell::UInt(u) => Value::UInt(u),
        Cell::Json(v) => Value::Clob(v),
    }
}

/// Maps `envelope` to a row of `plan` (`sinks_toolkit::relational::map_row`, with Oracle's
/// JSON depth). Errors are permanent for that message (bad payload under the mode, missing
/// key material). An empty key value is refused like a null one (Oracle stores `''` as NULL).
pub(crate) fn map(
    envelope: &Envelope,
    plan: &TablePlan,
    mode: PayloadMode,
    stored_at: (OffsetDateTime, MetadataScope),
) -> Result<Row, SinkError> {
    let Cells { cells, fingerprint } =
        relational::map_row(envelope, &plan.fields, &plan.idempotency, mode, MAX_JSON_DEPTH, stored_at)?;
    let values: Vec<Value> = cells.into_iter().map(bind).collect();
    if plan.key.iter().any(|i| values[*i].as_text().is_none_or(|t| t.is_empty())) {
        return Err(SinkError::permanent("a key column would be null").with_error_type("ValidationError"));
    }
    Ok(Row { key: key_text(plan, &values), values, fingerprint })
}

/// What reconcile's key lookup read back for one key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StoredContent {
    /// The payload column as text (`JSON_SERIALIZE`d for a native JSON column).
    pub(crate) payload: Option<String>,
    /// The fingerprint column, when the plan has one.
    pub(crate) fingerprint: Option<String>,
}

/// What the table holds for `row` (the row the sink writes for a message), given what the
/// lookup found under its key (`None`: no row). Equal only when the fingerprint column, if
/// the table has one, holds the row's fingerprint **and** the stored payload is the row's:
/// byte for byte (its SHA-256 is the fingerprint) in a `CLOB` column, by JSON value in a
/// native JSON column (which keeps values, not text). Anything else is different.
pub(crate) fn presence(row: &Row, plan: &TablePlan, json: JsonColumnType, stored: Option<&StoredContent>) -> Presence {
    let Some(stored) = stored else { return Presence::Missing };
    if plan.fingerprint.is_some() && stored.fingerprint.as_deref() != Some(row.fingerprint.as_str()) {
        return Presence::Different;
    }
    let Some(payload) = stored.payload.as_deref() else { return Presence::Different };
    let same = match json {
        JsonColumnType::Clob => hex::encode(Sha256::digest(payload.as_bytes())) == row.fingerprint,
        JsonColumnType::Json => {
            let expected = plan.fields.iter().position(|f| *f == Field::Payload).and_then(|i| match &row.values[i] {
                Value::Clob(Some(text)) => Some(text.as_str()),
                _ => None,
            });
            let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
            match (expected.and_then(parse), parse(payload)) {
                (Some(expected), Some(stored)) => sinks_contract::json::same_value(&expected, &stored),
                _ => false,
            }
        }
    };
    if same { Presence::Equal } else { Presence::Different }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sinks_contract::Headers;
    use sinks_contract::config::SinkSection;
    use sinks_contract::testing::envelope_with;

    use super::*;
    use crate::OracleSinkConfig;

    fn text(s: impl Into<String>) -> Value {
        Value::Text(Some(s.into()))
    }

    fn plan(extra: serde_json::Value) -> TablePlan {
        let mut v = json!({"type": "oracle", "dsn": "h:1521/s", "user": "u", "password_env": "P"});
        if let (Some(base), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
            base.extend(e);
        }
        let serde_json::Value::Object(m) = v else { unreachable!() };
        let config = OracleSinkConfig::from_section(&SinkSection(m)).unwrap();
        TablePlan::all(&config).unwrap().remove(0)
    }

    fn column(p: &TablePlan, name: &str) -> usize {
        p.columns.iter().position(|c| c == name).unwrap()
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
        assert_eq!(row.values[column(&p, "MESSAGE_ID")], text("m1"));
        assert_eq!(
            row.values[column(&p, "PRIORITY")],
            Value::Text(None),
            "no priority is SQL NULL, never the string null"
        );
        assert_eq!(row.values[column(&p, "PAYLOAD_JSON")], Value::Clob(Some("{\"a\": 1}".into())));
        assert_eq!(row.values[column(&p, "MISSION_METADATA_JSON")], Value::Clob(None), "absent is SQL NULL");
        assert_eq!(row.key, "S\u{1f}9");
        assert_eq!(row.values[column(&p, "PAYLOAD_SHA256")], text(row.fingerprint.clone()));
        let Value::Clob(Some(metadata)) = &row.values[column(&p, "METADATA_JSON")] else { panic!() };
        assert!(metadata.starts_with("{\"custody\":null,"), "{metadata}");
    }

    /// A comparison case: name, row, column type, what the lookup found, expected answer.
    type Case<'a> = (&'a str, &'a Row, JsonColumnType, Option<StoredContent>, Presence);

    #[test]
    fn reconcile_compares_the_fingerprint_column_and_the_stored_payload() {
        let now = OffsetDateTime::now_utc();
        let e = envelope_with("S", 9, "o", &br#" {"b": 2.50, "a": [1e3]} "#[..], Headers::new(), 1);
        let binary = envelope_with("S", 10, "o", &[0xff, 0x00][..], Headers::new(), 1);
        let with_fp = plan(json!({"conflict_policy": "keep_first"}));
        let without_fp = plan(json!({}));
        let row = |p: &TablePlan, e: &Envelope| {
            map(e, p, PayloadMode::JsonOrEnvelope, (now, MetadataScope::Delivery)).unwrap()
        };
        let text_of = |r: &Row, p: &TablePlan| r.values[column(p, "PAYLOAD_JSON")].as_text();
        let stored = |payload: Option<&str>, fingerprint: Option<&str>| StoredContent {
            payload: payload.map(str::to_owned),
            fingerprint: fingerprint.map(str::to_owned),
        };
        let (r, b) = (row(&with_fp, &e), row(&with_fp, &binary));
        let exact = text_of(&r, &with_fp).unwrap();
        let fp = r.fingerprint.as_str();
        // What JSON_SERIALIZE hands back from a native JSON column: values, not the text.
        let serialized = r#"{"a":[1000],"b":2.5}"#;
        let edited = r#"{"a":[1000],"b":3}"#;
        let binary_exact = text_of(&b, &with_fp).unwrap();
        use JsonColumnType::{Clob, Json};
        let rows: Vec<Case<'_>> = vec![
            ("no row", &r, Clob, None, Presence::Missing),
            ("clob as written", &r, Clob, Some(stored(Some(&exact), Some(fp))), Presence::Equal),
            ("clob, fingerprint column edited", &r, Clob, Some(stored(Some(&exact), Some("0"))), Presence::Different),
            ("clob, payload edited", &r, Clob, Some(stored(Some(edited), Some(fp))), Presence::Different),
            ("clob, re-encoded payload", &r, Clob, Some(stored(Some(serialized), Some(fp))), Presence::Different),
            ("clob, payload null", &r, Clob, Some(stored(None, Some(fp))), Presence::Different),
            ("json as serialized", &r, Json, Some(stored(Some(serialized), Some(fp))), Presence::Equal),
            ("json, payload edited", &r, Json, Some(stored(Some(edited), Some(fp))), Presence::Different),
            ("json, fingerprint edited", &r, Json, Some(stored(Some(serialized), Some("0"))), Presence::Different),
            ("json, not json", &r, Json, Some(stored(Some("x"), Some(fp))), Presence::Different),
            ("binary envelope", &b, Clob, Some(stored(Some(&binary_exact), Some(&b.fingerprint))), Presence::Equal),
        ];
        for (case, r, json, stored, want) in rows {
            assert_eq!(presence(r, &with_fp, json, stored.as_ref()), want, "{case}");
        }
        // Without a fingerprint column the payload alone decides.
        let r = row(&without_fp, &e);
        let exact = text_of(&r, &without_fp).unwrap();
        assert_eq!(presence(&r, &without_fp, Clob, Some(&stored(Some(&exact), None))), Presence::Equal);
        assert_eq!(presence(&r, &without_fp, Clob, Some(&stored(Some(edited), None))), Presence::Different);
        assert_eq!(presence(&r, &without_fp, Json, Some(&stored(Some(serialized), None))), Presence::Equal);
        assert_eq!(presence(&r, &without_fp, Json, Some(&stored(Some(edited), None))), Presence::Different);
    }

    #[test]
    fn policy_documents_fill_their_json_columns() {
        let p = plan(json!({}));
        let labels = json!({"profile": "nats-sinks.security-label.v1", "owner": "ops"});
        let e = envelope_with("S", 9, "o", &b"{}"[..], Headers::new(), 1).with_security_labels(Some(labels.clone()));
        let row =
            map(&e, &p, PayloadMode::JsonOrEnvelope, (OffsetDateTime::now_utc(), MetadataScope::Delivery)).unwrap();
        let canonical = String::from_utf8(sinks_contract::json::to_canonical_vec(&labels)).unwrap();
        assert_eq!(row.values[column(&p, "SECURITY_LABELS_JSON")], Value::Clob(Some(canonical)));
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
        assert_eq!(err.error_type(), "ValidationError");
    }

    #[test]
    fn bad_payloads_fail_permanently_and_deep_json_is_wrapped() {
        let p = plan(json!({}));
        let e = envelope_with("S", 1, "o", &b"not json"[..], Headers::new(), 1);
        let err = map(&e, &p, PayloadMode::JsonOnly, (OffsetDateTime::now_utc(), MetadataScope::Delivery)).unwrap_err();
        assert_eq!(err.error_type(), "SerializationError");
        let deep = format!("{}1{}", "[".repeat(MAX_JSON_DEPTH + 1), "]".repeat(MAX_JSON_DEPTH + 1));
        let e = envelope_with("S", 2, "o", deep.clone(), Headers::new(), 1);
        let row =
            map(&e, &p, PayloadMode::JsonOrEnvelope, (OffsetDateTime::now_utc(), MetadataScope::Delivery)).unwrap();
        let Value::Clob(Some(stored)) = &row.values[column(&p, "PAYLOAD_JSON")] else { panic!() };
        assert_eq!(sinks_contract::payload::decode_stored(stored), deep.as_bytes(), "kept, as text");
    }
}
