//! What the relational sinks (MySQL, Oracle) share beyond the column mapping
//! ([`crate::columns`]): the key settings, table routes and conflict policy of their
//! configurations, the mapping of an envelope to the neutral cells of a row, and what a row
//! whose key exists becomes.
//!
//! The cells are driver-neutral ([`Cell`]): each sink turns them into its driver's values
//! (`mysql_async::Value`, the Oracle binds of its driver seam), so both sinks store a message
//! the same way and no driver type is named here.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, MapAccess};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::columns::{ColumnMapping, Field};
use crate::existing::{self, ExistingKeyPolicy, KeepFirstOverwriteDeadLetter, KeyBasis, Stored};
use crate::metadata::MetadataDoc;
use sinks_contract::idempotency::IdempotencyStrategy;
use sinks_contract::payload::{self, PayloadMode};
use sinks_contract::sink::{ConflictResolution, MessageOutcome};
use sinks_contract::{Envelope, SinkError};

/// What to do when a redelivered key arrives with different content (`keep_first`,
/// `overwrite`, `dead_letter`; needs the fingerprint column, which `conflict_policy` adds).
pub type ConflictPolicy = ExistingKeyPolicy<KeepFirstOverwriteDeadLetter>;

/// The reference's default key columns; with another strategy they mean `[MESSAGE_ID]`.
const DEFAULT_KEY: [&str; 2] = ["STREAM_NAME", "STREAM_SEQUENCE"];

/// How each row's key is derived, and which columns hold it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdempotencyConfig {
    /// `stream_sequence` (default), `message_id` or `payload_field`.
    #[serde(default)]
    pub strategy: IdempotencyStrategy,
    /// Key columns; default `[STREAM_NAME, STREAM_SEQUENCE]`, or `[MESSAGE_ID]` for the
    /// other strategies (as in the reference, the default pair given explicitly with
    /// another strategy also means `[MESSAGE_ID]`).
    #[serde(default)]
    pub columns: Option<Vec<String>>,
    /// Dotted path into the normalized payload (`payload_field` strategy); the value is
    /// stored in the message id column.
    #[serde(default)]
    pub payload_field: Option<String>,
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        Self { strategy: IdempotencyStrategy::StreamSequence, columns: None, payload_field: None }
    }
}

impl IdempotencyConfig {
    /// The key columns in effect (as configured; identifiers are normalized by the plan).
    pub fn key_columns(&self, columns: &ColumnMapping) -> Vec<String> {
        let default_pair = self
            .columns
            .as_ref()
            .is_some_and(|c| c.len() == 2 && c.iter().zip(DEFAULT_KEY).all(|(a, b)| a.eq_ignore_ascii_case(b)));
        match (&self.columns, self.strategy) {
            (Some(_), s) if default_pair && s != IdempotencyStrategy::StreamSequence => {
                vec![columns.message_id.clone()]
            }
            (Some(c), _) => c.clone(),
            (None, IdempotencyStrategy::StreamSequence) => {
                vec![columns.stream_name.clone(), columns.stream_sequence.clone()]
            }
            (None, _) => vec![columns.message_id.clone()],
        }
    }

    /// What the keys are made of: the stream sequence when the key columns include the
    /// stream sequence column (the default pair), else the publisher's identity.
    pub fn basis(&self, columns: &ColumnMapping) -> KeyBasis {
        let sequence = &columns.stream_sequence;
        if self.key_columns(columns).iter().any(|c| c.eq_ignore_ascii_case(sequence)) {
            KeyBasis::StreamSequence
        } else {
            KeyBasis::Publisher
        }
    }
}

/// The name a sink gives a route's update columns (the reference's: `upsert_update_columns`
/// for MySQL, `merge_update_columns` for Oracle).
pub trait UpdateColumnsField: Copy + Eq + fmt::Debug + Send + Sync + 'static {
    /// The field's name.
    const NAME: &'static str;
    /// Every field of a route, in order, as a refusal lists them.
    const FIELDS: &'static [&'static str];
}

/// Routes name their update columns `upsert_update_columns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpsertUpdateColumns;

impl UpdateColumnsField for UpsertUpdateColumns {
    const NAME: &'static str = "upsert_update_columns";
    const FIELDS: &'static [&'static str] = &["subject", "table", "idempotency", "upsert_update_columns"];
}

/// Routes name their update columns `merge_update_columns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeUpdateColumns;

impl UpdateColumnsField for MergeUpdateColumns {
    const NAME: &'static str = "merge_update_columns";
    const FIELDS: &'static [&'static str] = &["subject", "table", "idempotency", "merge_update_columns"];
}

/// Route messages whose subject matches to another table. `U` names the update columns'
/// field as the sink's configuration spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRoute<U> {
    /// Subject pattern; the first matching route wins.
    pub subject: String,
    /// Table (or `schema.table`) for matching messages.
    pub table: String,
    /// Key settings for this table (default: the sink's).
    pub idempotency: Option<IdempotencyConfig>,
    /// Update columns for this table in the sink's updating mode, `upsert_update_columns`
    /// or `merge_update_columns` (default: the sink's).
    pub update_columns: Option<Vec<String>>,
    /// The field name of `update_columns`.
    pub name: PhantomData<U>,
}

impl<U: UpdateColumnsField> Serialize for TableRoute<U> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut route = serializer.serialize_struct("TableRoute", 4)?;
        route.serialize_field("subject", &self.subject)?;
        route.serialize_field("table", &self.table)?;
        route.serialize_field("idempotency", &self.idempotency)?;
        route.serialize_field(U::NAME, &self.update_columns)?;
        route.end()
    }
}

impl<'de, U: UpdateColumnsField> Deserialize<'de> for TableRoute<U> {
    /// Reads a route the way a derived struct that denies unknown fields does, so messages
    /// name the same fields.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields<U>(PhantomData<U>);

        impl<'de, U: UpdateColumnsField> de::Visitor<'de> for Fields<U> {
            type Value = TableRoute<U>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("struct TableRoute")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (mut subject, mut table, mut idempotency, mut update_columns) = (None, None, None, None);
                while let Some(key) = map.next_key::<String>()? {
                    let field = U::FIELDS.iter().copied().find(|f| *f == key);
                    let taken = match field {
                        Some("subject") => subject.replace(map.next_value()?).is_some(),
                        Some("table") => table.replace(map.next_value()?).is_some(),
                        Some("idempotency") => idempotency.replace(map.next_value()?).is_some(),
                        Some(_) => update_columns.replace(map.next_value()?).is_some(),
                        None => return Err(de::Error::unknown_field(&key, U::FIELDS)),
                    };
                    if let (true, Some(field)) = (taken, field) {
                        return Err(de::Error::duplicate_field(field));
                    }
                }
                Ok(TableRoute {
                    subject: subject.ok_or_else(|| de::Error::missing_field("subject"))?,
                    table: table.ok_or_else(|| de::Error::missing_field("table"))?,
                    idempotency: idempotency.flatten(),
                    update_columns: update_columns.flatten(),
                    name: PhantomData,
                })
            }
        }

        deserializer.deserialize_struct("TableRoute", U::FIELDS, Fields(PhantomData))
    }
}

/// One value of a row, independent of the driver that binds it; `None` is SQL NULL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// Text (identifiers, subject, labels, the fingerprint).
    Text(Option<String>),
    /// A signed integer (epoch nanoseconds).
    Int(Option<i64>),
    /// An unsigned counter (the stream sequence).
    UInt(u64),
    /// A JSON document (payload, headers, metadata, mission metadata, security labels).
    Json(Option<String>),
}

/// A message mapped to one row: its cells in field order and the fingerprint of the stored
/// payload JSON (SHA-256, hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cells {
    /// One cell per field, in the order given.
    pub cells: Vec<Cell>,
    /// SHA-256 of the stored payload JSON, hex.
    pub fingerprint: String,
}

/// Canonical JSON text of a document.
fn json_text(value: &impl Serialize) -> String {
    String::from_utf8(sinks_contract::json::to_canonical_vec(value)).unwrap_or_default()
}

/// Maps `envelope` to the cells of `fields`, keyed per `idempotency`. Payloads nested deeper
/// than `max_json_depth` (what the server's JSON type accepts) are stored in the text
/// envelope, or refused under `json_only`. Errors are permanent for that message (a payload
/// the mode refuses: `SerializationError`; missing key material: `ValidationError`, with the
/// idempotency reason code, which the dead-letter record carries).
pub fn map_row(
    envelope: &Envelope,
    fields: &[Field],
    idempotency: &IdempotencyConfig,
    mode: PayloadMode,
    max_json_depth: usize,
    stored_at: OffsetDateTime,
) -> Result<Cells, SinkError> {
    let serialization =
        |e: payload::PayloadError| SinkError::permanent(e.to_string()).with_error_type("SerializationError");
    let mut normalized = payload::normalize(envelope.payload(), mode).map_err(serialization)?;
    if !normalized.wrapped && sinks_contract::json::depth(normalized.value.get()) > max_json_depth {
        normalized = match mode {
            PayloadMode::JsonOnly => {
                return Err(SinkError::permanent(format!(
                    "payload JSON is nested deeper than {max_json_depth} levels"
                ))
                .with_error_type("SerializationError"));
            }
            _ => payload::normalize(envelope.payload(), PayloadMode::TextEnvelope).map_err(serialization)?,
        };
    }
    let invalid = |e: sinks_contract::idempotency::IdempotencyError| {
        SinkError::permanent(e.to_string()).with_error_type("ValidationError").with_reason(e.reason_code())
    };
    let derived_id = match idempotency.strategy {
        IdempotencyStrategy::PayloadField => Some(
            idempotency
                .strategy
                .key_for(envelope, idempotency.payload_field.as_deref(), Some(&normalized.to_value()))
                .map_err(invalid)?
                .to_string(),
        ),
        strategy => {
            strategy.key_for(envelope, None, None).map_err(invalid)?;
            None
        }
    };
    let metadata = MetadataDoc::new(envelope, stored_at);
    let js = envelope.jetstream();
    let app = envelope.app();
    let payload_text = normalized.value.get().to_owned();
    let fingerprint = hex::encode(Sha256::digest(payload_text.as_bytes()));
    let text = |s: &str| Cell::Text(Some(s.to_owned()));
    let cells = fields
        .iter()
        .map(|f| match f {
            Field::StreamName => text(&envelope.keyed_stream()),
            Field::StreamSequence => Cell::UInt(js.stream_sequence),
            Field::Subject => text(envelope.subject()),
            Field::MessageId => Cell::Text(derived_id.clone().or_else(|| envelope.message_id().map(str::to_owned))),
            Field::Priority => Cell::Text(app.priority.clone()),
            Field::Classification => Cell::Text(app.classification.clone()),
            Field::Labels => Cell::Text(app.labels_string()),
            Field::CreatedAt => Cell::Int(metadata.created_at_epoch_ns()),
            Field::JetStreamTimestamp => Cell::Int(metadata.jetstream_timestamp_epoch_ns()),
            Field::ReceivedAt => Cell::Int(Some(metadata.received_at_epoch_ns())),
            Field::StoredAt => Cell::Int(Some(metadata.stored_at_epoch_ns())),
            Field::Payload => Cell::Json(Some(payload_text.clone())),
            Field::Headers => Cell::Json(Some(json_text(envelope.headers()))),
            Field::Metadata => Cell::Json(Some(json_text(&metadata))),
            Field::MissionMetadata => Cell::Json(envelope.mission_metadata().map(json_text)),
            Field::SecurityLabels => Cell::Json(envelope.security_labels().map(json_text)),
            Field::PayloadSha256 => text(&fingerprint),
        })
        .collect();
    Ok(Cells { cells, fingerprint })
}

/// What a relational sink writes for a row whose key exists, besides reporting its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowWrite {
    /// Nothing: the stored row stays as it is.
    Nothing,
    /// The mode's update columns (an upsert or merge of a duplicate).
    Update,
    /// Every update column, fingerprint included (`conflict_policy: overwrite`).
    Overwrite,
}

/// The outcome of a row whose key exists, and what to write for it. `stored` is what the
/// fingerprint column says of the stored row ([`Stored::Same`] when it is this payload's,
/// [`Stored::Different`] otherwise, a null fingerprint included: the Oracle sink's array-DML
/// check cannot tell it from another one; [`Stored::Unchecked`] when the sink did not read
/// it). Under stream-sequence keys a different row is a reused sequence, whatever the
/// policy ([`existing::sequence_reused`]), and is never updated. Otherwise, without a
/// conflict policy the row is a duplicate (updated when `updates_duplicates`: an upsert or
/// merge with update columns, as the reference does); with one, [`existing::outcome`]
/// decides.
pub fn existing_row(
    conflict_policy: Option<ConflictPolicy>,
    basis: KeyBasis,
    stored: Stored,
    updates_duplicates: bool,
) -> (MessageOutcome, RowWrite) {
    if basis == KeyBasis::StreamSequence && stored == Stored::Different {
        return (existing::sequence_reused("row key"), RowWrite::Nothing);
    }
    let Some(policy) = conflict_policy else {
        let write = if updates_duplicates { RowWrite::Update } else { RowWrite::Nothing };
        return (MessageOutcome::Duplicate, write);
    };
    // With a conflict policy the table has the fingerprint column; a row without a
    // fingerprint (null) counts as different under publisher keys, as the reference's
    // check does, and cannot be compared under stream-sequence keys.
    let stored = match (basis, stored) {
        (_, Stored::Same) => Stored::Same,
        (KeyBasis::StreamSequence, Stored::Different) => Stored::Different,
        (KeyBasis::StreamSequence, _) => Stored::Uncomparable,
        (KeyBasis::Publisher, _) => Stored::Different,
    };
    let outcome = existing::outcome(policy.on_existing(), basis, stored, "row key");
    let write = match outcome {
        MessageOutcome::Conflict(ConflictResolution::Overwritten) => RowWrite::Overwrite,
        _ => RowWrite::Nothing,
    };
    (outcome, write)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use sinks_contract::Headers;
    use sinks_contract::testing::envelope_with;

    #[test]
    fn key_columns_follow_the_strategy_like_the_reference() {
        let m = ColumnMapping::default();
        let cfg = |strategy, columns: Option<&[&str]>| IdempotencyConfig {
            strategy,
            columns: columns.map(|c| c.iter().map(|s| (*s).to_owned()).collect()),
            payload_field: None,
        };
        assert_eq!(cfg(IdempotencyStrategy::StreamSequence, None).key_columns(&m), DEFAULT_KEY);
        assert_eq!(cfg(IdempotencyStrategy::MessageId, None).key_columns(&m), ["MESSAGE_ID"]);
        assert_eq!(cfg(IdempotencyStrategy::MessageId, Some(&DEFAULT_KEY)).key_columns(&m), ["MESSAGE_ID"]);
        assert_eq!(cfg(IdempotencyStrategy::PayloadField, Some(&["ORDER_ID"])).key_columns(&m), ["ORDER_ID"]);
        assert_eq!(cfg(IdempotencyStrategy::StreamSequence, Some(&["MESSAGE_ID"])).key_columns(&m), ["MESSAGE_ID"]);
    }

    type Upsert = TableRoute<UpsertUpdateColumns>;
    type Merge = TableRoute<MergeUpdateColumns>;

    #[test]
    fn routes_read_and_print_their_own_update_field_only() {
        let route: Upsert = serde_json::from_value(json!({"subject": "a.b", "table": "T2",
            "idempotency": {"strategy": "message_id"}, "upsert_update_columns": ["PAYLOAD_JSON"]}))
        .unwrap();
        assert_eq!(route.update_columns.as_deref(), Some(&["PAYLOAD_JSON".to_owned()][..]));
        assert_eq!(route.idempotency.as_ref().map(|i| i.strategy), Some(IdempotencyStrategy::MessageId));
        assert_eq!(
            serde_json::to_value(&route).unwrap(),
            json!({"subject": "a.b", "table": "T2", "upsert_update_columns": ["PAYLOAD_JSON"],
                "idempotency": {"strategy": "message_id", "columns": null, "payload_field": null}})
        );
        let minimal: Merge = serde_json::from_value(json!({"subject": "a", "table": "T"})).unwrap();
        assert_eq!((minimal.idempotency, minimal.update_columns), (None, None));
        let err = |v: serde_json::Value| serde_json::from_value::<Merge>(v).unwrap_err().to_string();
        assert_eq!(
            err(json!({"subject": "a", "table": "T", "upsert_update_columns": []})),
            "unknown field `upsert_update_columns`, expected one of `subject`, `table`, `idempotency`, \
             `merge_update_columns`"
        );
        assert_eq!(err(json!({"table": "T"})), "missing field `subject`");
        assert_eq!(err(json!({"subject": "a"})), "missing field `table`");
        assert!(err(json!("x")).contains("expected struct TableRoute"));
        assert!(err(json!({"subject": 1, "table": "T"})).contains("invalid type"));
    }

    #[test]
    fn a_row_maps_to_neutral_cells_in_field_order() {
        let e = envelope_with("S", 9, "orders.x", &b" {\"a\": 1} "[..], Headers::new().with("Nats-Msg-Id", "m1"), 1);
        let fields = Field::ALL;
        let row = map_row(
            &e,
            &fields,
            &IdempotencyConfig::default(),
            PayloadMode::JsonOrEnvelope,
            32,
            OffsetDateTime::now_utc(),
        )
        .unwrap();
        let at = |f: Field| &row.cells[fields.iter().position(|x| *x == f).unwrap()];
        assert_eq!(at(Field::StreamName), &Cell::Text(Some("S".into())));
        assert_eq!(at(Field::StreamSequence), &Cell::UInt(9));
        assert_eq!(at(Field::MessageId), &Cell::Text(Some("m1".into())));
        assert_eq!(at(Field::Priority), &Cell::Text(None), "no priority is SQL NULL, never the string null");
        assert_eq!(at(Field::Payload), &Cell::Json(Some("{\"a\": 1}".into())));
        assert_eq!(at(Field::MissionMetadata), &Cell::Json(None));
        assert_eq!(at(Field::PayloadSha256), &Cell::Text(Some(row.fingerprint.clone())));
        assert_eq!(row.fingerprint, hex::encode(Sha256::digest(b"{\"a\": 1}")));
        assert!(matches!(at(Field::Metadata), Cell::Json(Some(m)) if m.starts_with("{\"custody\":null,")));
    }

    #[test]
    fn failures_are_permanent_and_carry_their_type_and_reason() {
        let now = OffsetDateTime::now_utc();
        let by_field = IdempotencyConfig {
            strategy: IdempotencyStrategy::PayloadField,
            payload_field: Some("order.id".into()),
            columns: None,
        };
        let e = envelope_with("S", 1, "o", &br#"{"order":{}}"#[..], Headers::new(), 1);
        let err = map_row(&e, &Field::ALL, &by_field, PayloadMode::JsonOrEnvelope, 32, now).unwrap_err();
        assert!(err.is_permanent());
        assert_eq!(err.error_type(), "ValidationError");
        assert!(err.reason().is_some_and(|r| !r.is_empty()), "the dead-letter record names why: {:?}", err.reason());
        let found = envelope_with("S", 1, "o", &br#"{"order":{"id":"A-7"}}"#[..], Headers::new(), 1);
        let row = map_row(&found, &[Field::MessageId], &by_field, PayloadMode::JsonOrEnvelope, 32, now).unwrap();
        assert_eq!(row.cells, [Cell::Text(Some("A-7".into()))]);
        let text = envelope_with("S", 1, "o", &b"not json"[..], Headers::new(), 1);
        let err =
            map_row(&text, &Field::ALL, &IdempotencyConfig::default(), PayloadMode::JsonOnly, 32, now).unwrap_err();
        assert_eq!(err.error_type(), "SerializationError");
        let deep = format!("{}1{}", "[".repeat(4), "]".repeat(4));
        let e = envelope_with("S", 2, "o", deep.clone(), Headers::new(), 1);
        let row =
            map_row(&e, &[Field::Payload], &IdempotencyConfig::default(), PayloadMode::JsonOrEnvelope, 3, now).unwrap();
        let Cell::Json(Some(stored)) = &row.cells[0] else { panic!("{row:?}") };
        assert_eq!(payload::decode_stored(stored), deep.as_bytes(), "deeper than allowed: kept as text");
        let err =
            map_row(&e, &[Field::Payload], &IdempotencyConfig::default(), PayloadMode::JsonOnly, 3, now).unwrap_err();
        assert_eq!(err.error_type(), "SerializationError");
    }

    #[test]
    fn an_existing_row_by_policy_and_fingerprint() {
        use KeyBasis::{Publisher, StreamSequence};
        use Stored::{Different, Same, Unchecked};
        let shape = |(outcome, write): (MessageOutcome, RowWrite)| match &outcome {
            MessageOutcome::Failed(e) if e.reason() == Some(existing::SEQUENCE_REUSED) => ("reused".to_owned(), write),
            _ => (format!("{:?}", outcome.class()), write),
        };
        let policy = |p: ConflictPolicy| Some(p);
        let rows = [
            (None, Publisher, Unchecked, false, ("Duplicate", RowWrite::Nothing)),
            (None, Publisher, Unchecked, true, ("Duplicate", RowWrite::Update)),
            (policy(ConflictPolicy::KeepFirst), Publisher, Same, true, ("Duplicate", RowWrite::Nothing)),
            (policy(ConflictPolicy::KeepFirst), Publisher, Different, true, ("Conflict", RowWrite::Nothing)),
            (policy(ConflictPolicy::Overwrite), Publisher, Different, false, ("Conflict", RowWrite::Overwrite)),
            (policy(ConflictPolicy::Overwrite), Publisher, Same, false, ("Duplicate", RowWrite::Nothing)),
            (policy(ConflictPolicy::DeadLetter), Publisher, Different, false, ("Conflict", RowWrite::Nothing)),
            (policy(ConflictPolicy::DeadLetter), Publisher, Same, false, ("Duplicate", RowWrite::Nothing)),
            // A reused stream sequence is refused and never written over, whatever the policy.
            (None, StreamSequence, Different, true, ("reused", RowWrite::Nothing)),
            (policy(ConflictPolicy::Overwrite), StreamSequence, Different, false, ("reused", RowWrite::Nothing)),
            (policy(ConflictPolicy::KeepFirst), StreamSequence, Different, false, ("reused", RowWrite::Nothing)),
            (None, StreamSequence, Same, true, ("Duplicate", RowWrite::Update)),
            (policy(ConflictPolicy::Overwrite), StreamSequence, Same, false, ("Duplicate", RowWrite::Nothing)),
        ];
        for (p, basis, stored, updates, (class, write)) in rows {
            assert_eq!(
                shape(existing_row(p, basis, stored, updates)),
                (class.to_owned(), write),
                "{p:?} {basis:?} {stored:?} {updates}"
            );
        }
        assert!(matches!(
            existing_row(policy(ConflictPolicy::DeadLetter), Publisher, Different, false).0,
            MessageOutcome::Conflict(ConflictResolution::Rejected)
        ));
        assert!(matches!(
            existing_row(policy(ConflictPolicy::KeepFirst), Publisher, Different, false).0,
            MessageOutcome::Conflict(ConflictResolution::KeptExisting)
        ));
    }

    #[test]
    fn keys_are_stream_sequence_keys_when_the_sequence_column_is_one() {
        let m = ColumnMapping::default();
        assert_eq!(IdempotencyConfig::default().basis(&m), KeyBasis::StreamSequence);
        let by_id = IdempotencyConfig { strategy: IdempotencyStrategy::MessageId, ..Default::default() };
        assert_eq!(by_id.basis(&m), KeyBasis::Publisher);
    }

    #[test]
    fn a_later_epoch_keys_rows_by_its_epoch_scoped_stream_name() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let e = envelope_with("ORDERS", 4, "o", "{}".to_owned(), Headers::new(), 1);
        let cells = |e: &Envelope| {
            map_row(e, &[Field::StreamName], &IdempotencyConfig::default(), PayloadMode::JsonOrEnvelope, 32, now)
                .unwrap()
                .cells
        };
        assert_eq!(cells(&e), [Cell::Text(Some("ORDERS".into()))]);
        let later = e.with_stream_epoch(Some("e17".into()));
        assert_eq!(cells(&later), [Cell::Text(Some("ORDERS.e17".into()))]);
    }
}
