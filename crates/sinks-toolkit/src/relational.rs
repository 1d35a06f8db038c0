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
use crate::metadata::{MetadataDoc, MetadataScope};
use sinks_contract::existing::{self, ExistingKeyPolicy, KeepFirstOverwriteDeadLetter, KeyBasis, Stored};
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
            (Some(_), s) if default_pair && !s.is_sequence() => vec![columns.message_id.clone()],
            (Some(c), _) => c.clone(),
            (None, IdempotencyStrategy::StreamSequence | IdempotencyStrategy::OriginSequence) => {
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

/// The table side of a relational sink's configuration, as its [`TablePlan`]s read it, with
/// what the sink's SQL dialect and write modes decide. `U` names the update columns' field
/// (`upsert_update_columns`, `merge_update_columns`) in the paths of problems.
#[derive(Debug, Clone, Copy)]
pub struct PlanConfig<'a, U> {
    /// The default table (or `schema.table`), as configured.
    pub table: &'a str,
    /// The subject routes to other tables.
    pub routes: &'a [TableRoute<U>],
    /// The column mapping.
    pub columns: &'a ColumnMapping,
    /// The sink's key settings (a route may have its own).
    pub idempotency: &'a IdempotencyConfig,
    /// The sink's update columns (a route may have its own): `None` = every non-key column.
    pub update_columns: Option<&'a [String]>,
    /// The write mode has key columns (every mode but `append`).
    pub keyed: bool,
    /// The write mode plans update columns (MySQL plans them in every mode, Oracle in
    /// `merge` only; otherwise a plan updates nothing).
    pub updates: bool,
    /// A conflict policy is set: every table has the fingerprint column.
    pub conflict_policy: bool,
    /// The dialect's identifier rule: `name` as the plan keeps it (Oracle upper-cases it),
    /// or `None` when it fails the dialect's allow-list; `qualified` also allows
    /// `schema.table`. Names compare without regard to ASCII case.
    pub identifier: fn(&str, bool) -> Option<String>,
}

impl<U> PlanConfig<'_, U> {
    /// False when the key strategy is `payload_field` without its path: the configuration
    /// reports that itself, and its plans are not checked.
    pub fn plannable(&self) -> bool {
        !(self.idempotency.strategy == IdempotencyStrategy::PayloadField && self.idempotency.payload_field.is_none())
    }
}

/// Everything a relational sink's statements need to know about one table: the fields and
/// their columns in bind order, the key columns, the columns an upsert or merge updates,
/// and the fingerprint column. Each sink builds its dialect's SQL from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePlan {
    /// Table name, as the dialect keeps it (`schema.table` or `table`).
    pub table: String,
    /// Fields bound per row, in order.
    pub fields: Vec<Field>,
    /// Column names, as the dialect keeps them, parallel to `fields`.
    pub columns: Vec<String>,
    /// Key columns (indexes into `fields`); empty without a key (`append`).
    pub key: Vec<usize>,
    /// Columns an upsert or merge updates on an existing key (indexes into `fields`).
    pub update: Vec<usize>,
    /// Index of the fingerprint column, when the table has one.
    pub fingerprint: Option<usize>,
    /// Key strategy.
    pub idempotency: IdempotencyConfig,
}

impl TablePlan {
    /// Builds the plan of `table` with the given key and update settings; `with_fp`: the
    /// table has the fingerprint column (a conflict policy adds it; an existing table may
    /// have it without one). A problem is `(path, message)`, the path as a top-level
    /// setting (`sink.table`, `sink.idempotency.columns`, …).
    pub fn new<U: UpdateColumnsField>(
        config: &PlanConfig<'_, U>,
        table: &str,
        idempotency: &IdempotencyConfig,
        update_columns: Option<&[String]>,
        with_fp: bool,
    ) -> Result<Self, (String, String)> {
        let identifier = config.identifier;
        let Some(table) = identifier(table, true) else {
            return Err(("sink.table".into(), format!("`{table}` is not a valid table name (table or schema.table)")));
        };
        let fields: Vec<Field> = Field::ALL.iter().copied().filter(|f| with_fp || *f != Field::PayloadSha256).collect();
        let mut columns: Vec<String> = Vec::new();
        for f in &fields {
            let (name, column) = f.column(config.columns);
            let Some(column) = identifier(column, false) else {
                return Err((format!("sink.columns.{name}"), format!("`{column}` is not a valid column name")));
            };
            if columns.iter().any(|c| c.eq_ignore_ascii_case(&column)) {
                return Err(("sink.columns".into(), format!("column `{column}` is mapped twice")));
            }
            columns.push(column);
        }
        let index_of =
            |name: &str| identifier(name, false).and_then(|n| columns.iter().position(|c| c.eq_ignore_ascii_case(&n)));
        let mut key = Vec::new();
        if config.keyed {
            let path = "sink.idempotency.columns";
            for k in idempotency.key_columns(config.columns) {
                match index_of(&k) {
                    Some(i) if !key.contains(&i) => key.push(i),
                    Some(_) => return Err((path.into(), format!("`{k}` is listed twice"))),
                    None => return Err((path.into(), format!("`{k}` is not a mapped column"))),
                }
            }
            if key.is_empty() {
                return Err((path.into(), "at least one key column is required".into()));
            }
        }
        let update = match (config.updates, update_columns) {
            (false, _) => Vec::new(),
            (true, None) => (0..fields.len()).filter(|i| !key.contains(i)).collect(),
            (true, Some(list)) => {
                let path = format!("sink.{}", U::NAME);
                let mut update = Vec::new();
                for c in list {
                    match index_of(c) {
                        Some(i) if key.contains(&i) => {
                            return Err((path, format!("`{c}` is a key column and cannot be updated")));
                        }
                        Some(i) if !update.contains(&i) => update.push(i),
                        Some(_) => return Err((path, format!("`{c}` is listed twice"))),
                        None => return Err((path, format!("`{c}` is not a mapped column"))),
                    }
                }
                update
            }
        };
        let fingerprint = fields.iter().position(|f| *f == Field::PayloadSha256);
        Ok(Self { table, fields, columns, key, update, fingerprint, idempotency: idempotency.clone() })
    }

    /// Plans for the default table and every route, once per table (routes sharing a table
    /// must agree), with the fingerprint column when a conflict policy is set or `has_fp`
    /// names the table (as the dialect keeps the name: an existing table that has the column
    /// without a conflict policy; under stream-sequence keys its fingerprint is written and
    /// compared, so a reused sequence is detected). A route's problem names the route.
    pub fn all_with<U: UpdateColumnsField>(
        config: &PlanConfig<'_, U>,
        has_fp: impl Fn(&str) -> bool,
    ) -> Result<Vec<Self>, (String, String)> {
        let with_fp =
            |table: &str| config.conflict_policy || (config.identifier)(table, true).is_some_and(|t| has_fp(&t));
        let mut plans =
            vec![Self::new(config, config.table, config.idempotency, config.update_columns, with_fp(config.table))?];
        let update_path = format!("sink.{}", U::NAME);
        for (i, r) in config.routes.iter().enumerate() {
            let idempotency = r.idempotency.as_ref().unwrap_or(config.idempotency);
            let update = r.update_columns.as_deref().or(config.update_columns);
            let plan = Self::new(config, &r.table, idempotency, update, with_fp(&r.table)).map_err(|(path, m)| {
                let own = match path.as_str() {
                    "sink.table" => true,
                    "sink.idempotency.columns" => r.idempotency.is_some(),
                    p => p == update_path && r.update_columns.is_some(),
                };
                if own { (format!("sink.table_routes[{i}].{}", &path["sink.".len()..]), m) } else { (path, m) }
            })?;
            match plans.iter().find(|p| p.table == plan.table) {
                Some(existing) if *existing != plan => {
                    return Err((
                        format!("sink.table_routes[{i}]"),
                        format!("table `{}` is used with a different key or update policy elsewhere", r.table),
                    ));
                }
                Some(_) => {}
                None => plans.push(plan),
            }
        }
        Ok(plans)
    }

    /// Checks that the plans of `config` can be built, for the configuration's validation
    /// (a `payload_field` strategy without its path is the configuration's own problem).
    pub fn validate_all<U: UpdateColumnsField>(config: &PlanConfig<'_, U>) -> Result<(), (String, String)> {
        if !config.plannable() {
            return Ok(());
        }
        Self::all_with(config, |_| false).map(drop)
    }

    /// What the keys are made of: the stream sequence when it is a key column (the default
    /// pair), else the publisher's identity ([`sinks_contract::existing`]).
    pub fn basis(&self) -> KeyBasis {
        if self.key.iter().any(|i| self.fields[*i] == Field::StreamSequence) {
            KeyBasis::StreamSequence
        } else {
            KeyBasis::Publisher
        }
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
    (stored_at, scope): (OffsetDateTime, MetadataScope),
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
    // Keyed by the origin, the row is the event as its origin stored it, whatever the path.
    let origin_keyed = idempotency.strategy == IdempotencyStrategy::OriginSequence;
    let event = scope.content_of(envelope, origin_keyed).map_err(invalid)?;
    let envelope = &*event;
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
    let metadata = MetadataDoc::scoped(envelope, stored_at, scope);
    // The key pair holds the stream the event was first stored in under `origin_sequence`.
    let (key_stream, key_sequence) = match idempotency.strategy {
        IdempotencyStrategy::OriginSequence => envelope.origin_sequence().map_err(invalid)?,
        _ => (envelope.keyed_stream(), envelope.jetstream().stream_sequence),
    };
    let app = envelope.app();
    let payload_text = normalized.value.get().to_owned();
    let fingerprint = hex::encode(Sha256::digest(payload_text.as_bytes()));
    let text = |s: &str| Cell::Text(Some(s.to_owned()));
    let cells = fields
        .iter()
        .map(|f| match f {
            Field::StreamName => text(&key_stream),
            Field::StreamSequence => Cell::UInt(key_sequence),
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

    /// An Oracle-like dialect: letters first, then letters, digits and `_`; names kept in
    /// upper case.
    fn upper(name: &str, qualified: bool) -> Option<String> {
        let part_ok = |p: &str| {
            p.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        let ok = match name.split('.').collect::<Vec<_>>().as_slice() {
            [one] => part_ok(one),
            [schema, table] => qualified && part_ok(schema) && part_ok(table),
            _ => false,
        };
        ok.then(|| name.to_ascii_uppercase())
    }

    /// The table side of a configuration, owned, for [`PlanConfig`] to borrow.
    struct Tables {
        table: String,
        routes: Vec<Upsert>,
        columns: ColumnMapping,
        idempotency: IdempotencyConfig,
        update_columns: Option<Vec<String>>,
        keyed: bool,
        updates: bool,
        conflict_policy: bool,
    }

    impl Tables {
        fn new() -> Self {
            Self {
                table: "events".into(),
                routes: Vec::new(),
                columns: ColumnMapping::default(),
                idempotency: IdempotencyConfig::default(),
                update_columns: None,
                keyed: true,
                updates: true,
                conflict_policy: false,
            }
        }

        fn config(&self) -> PlanConfig<'_, UpsertUpdateColumns> {
            PlanConfig {
                table: &self.table,
                routes: &self.routes,
                columns: &self.columns,
                idempotency: &self.idempotency,
                update_columns: self.update_columns.as_deref(),
                keyed: self.keyed,
                updates: self.updates,
                conflict_policy: self.conflict_policy,
                identifier: upper,
            }
        }

        fn plans(&self) -> Result<Vec<TablePlan>, (String, String)> {
            TablePlan::all_with(&self.config(), |_| false)
        }

        fn problem(&self) -> (String, String) {
            self.plans().expect_err("a problem")
        }
    }

    fn route(table: &str) -> Upsert {
        serde_json::from_value(json!({"subject": "a.*", "table": table})).unwrap()
    }

    fn strings(names: &[&str]) -> Option<Vec<String>> {
        Some(names.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn a_plan_maps_every_field_to_its_column_in_the_dialects_spelling() {
        let t = Tables::new();
        let plan = t.plans().unwrap().remove(0);
        assert_eq!(plan.table, "EVENTS");
        assert_eq!(plan.fields, Field::ALL.iter().copied().filter(|f| *f != Field::PayloadSha256).collect::<Vec<_>>());
        assert_eq!(plan.columns.len(), plan.fields.len());
        let names = |indexes: &[usize]| indexes.iter().map(|i| plan.columns[*i].clone()).collect::<Vec<_>>();
        assert_eq!(names(&plan.key), DEFAULT_KEY);
        assert_eq!(plan.update.len(), plan.fields.len() - 2, "every non-key column");
        assert!(plan.update.iter().all(|i| !plan.key.contains(i)));
        assert_eq!((plan.fingerprint, plan.basis()), (None, KeyBasis::StreamSequence));
        let conflict = Tables { conflict_policy: true, ..Tables::new() };
        let plan = conflict.plans().unwrap().remove(0);
        assert_eq!(plan.fingerprint.map(|i| plan.columns[i].as_str()), Some("PAYLOAD_SHA256"));
    }

    #[test]
    fn the_mode_decides_keys_and_updates() {
        let append = Tables { keyed: false, ..Tables::new() }.plans().unwrap().remove(0);
        assert!(append.key.is_empty());
        assert_eq!(append.update.len(), append.fields.len(), "no key: every column");
        assert_eq!(append.basis(), KeyBasis::Publisher);
        let no_updates = Tables { updates: false, update_columns: strings(&["nope"]), ..Tables::new() };
        assert!(no_updates.plans().unwrap()[0].update.is_empty(), "not planned, not checked");
        let some = Tables { update_columns: strings(&["payload_json", "Headers_Json"]), ..Tables::new() };
        let plan = some.plans().unwrap().remove(0);
        let updated: Vec<&str> = plan.update.iter().map(|i| plan.columns[*i].as_str()).collect();
        assert_eq!(updated, ["PAYLOAD_JSON", "HEADERS_JSON"], "matched without regard to case");
        let none = Tables { update_columns: strings(&[]), ..Tables::new() };
        assert!(none.plans().unwrap()[0].update.is_empty());
        let by_id = Tables {
            idempotency: IdempotencyConfig { strategy: IdempotencyStrategy::MessageId, ..Default::default() },
            ..Tables::new()
        };
        let plan = by_id.plans().unwrap().remove(0);
        assert_eq!((plan.key.len(), plan.basis()), (1, KeyBasis::Publisher));
    }

    #[test]
    fn every_problem_names_its_setting() {
        let columns = ColumnMapping { subject: "a b".into(), ..Default::default() };
        let twice = ColumnMapping { subject: "payload_json".into(), ..Default::default() };
        let key = |names: &[&str]| IdempotencyConfig { columns: strings(names), ..Default::default() };
        let rows: Vec<(Tables, (&str, &str))> = vec![
            (
                Tables { table: "bad table".into(), ..Tables::new() },
                ("sink.table", "`bad table` is not a valid table name (table or schema.table)"),
            ),
            (Tables { columns, ..Tables::new() }, ("sink.columns.subject", "`a b` is not a valid column name")),
            (Tables { columns: twice, ..Tables::new() }, ("sink.columns", "column `PAYLOAD_JSON` is mapped twice")),
            (
                Tables { idempotency: key(&["MESSAGE_ID", "message_id"]), ..Tables::new() },
                ("sink.idempotency.columns", "`message_id` is listed twice"),
            ),
            (
                Tables { idempotency: key(&["NOPE"]), ..Tables::new() },
                ("sink.idempotency.columns", "`NOPE` is not a mapped column"),
            ),
            (
                Tables { idempotency: key(&[]), ..Tables::new() },
                ("sink.idempotency.columns", "at least one key column is required"),
            ),
            (
                Tables { update_columns: strings(&["stream_name"]), ..Tables::new() },
                ("sink.upsert_update_columns", "`stream_name` is a key column and cannot be updated"),
            ),
            (
                Tables { update_columns: strings(&["SUBJECT", "subject"]), ..Tables::new() },
                ("sink.upsert_update_columns", "`subject` is listed twice"),
            ),
            (
                Tables { update_columns: strings(&["NOPE"]), ..Tables::new() },
                ("sink.upsert_update_columns", "`NOPE` is not a mapped column"),
            ),
        ];
        for (tables, (path, message)) in rows {
            assert_eq!(tables.problem(), (path.to_owned(), message.to_owned()));
        }
    }

    #[test]
    fn a_routes_own_settings_are_named_as_the_routes() {
        let mut bad_table = Tables::new();
        bad_table.routes = vec![route("T2"), route("1x")];
        assert_eq!(bad_table.problem().0, "sink.table_routes[1].table");
        let mut own_key = Tables::new();
        let mut r = route("T2");
        r.idempotency = Some(IdempotencyConfig { columns: strings(&["NOPE"]), ..Default::default() });
        own_key.routes = vec![r];
        assert_eq!(own_key.problem().0, "sink.table_routes[0].idempotency.columns");
        let mut own_update = Tables::new();
        let mut r = route("T2");
        r.update_columns = strings(&["NOPE"]);
        own_update.routes = vec![r];
        assert_eq!(own_update.problem().0, "sink.table_routes[0].upsert_update_columns");
        // An inherited setting is the sink's own problem (found at the default table first).
        let inherited = Tables {
            idempotency: IdempotencyConfig { columns: strings(&["NOPE"]), ..Default::default() },
            ..Tables::new()
        };
        assert_eq!(inherited.problem().0, "sink.idempotency.columns");
        let mut disagree = Tables::new();
        let mut r = route("Events");
        r.update_columns = strings(&[]);
        disagree.routes = vec![route("t2"), r];
        assert_eq!(
            disagree.problem(),
            (
                "sink.table_routes[1]".to_owned(),
                "table `Events` is used with a different key or update policy elsewhere".to_owned()
            )
        );
    }

    #[test]
    fn one_plan_per_table_and_the_fingerprint_where_a_table_has_it() {
        let mut t = Tables::new();
        t.routes = vec![route("t2"), route("T2"), route("events")];
        let plans = t.plans().unwrap();
        let tables: Vec<&str> = plans.iter().map(|p| p.table.as_str()).collect();
        assert_eq!(tables, ["EVENTS", "T2"]);
        let found = TablePlan::all_with(&t.config(), |table| table == "T2").unwrap();
        assert_eq!((found[0].fingerprint, found[1].fingerprint.is_some()), (None, true), "asked by the kept name");
    }

    #[test]
    fn validation_leaves_a_missing_payload_field_to_the_configuration() {
        let idempotency = IdempotencyConfig {
            strategy: IdempotencyStrategy::PayloadField,
            columns: strings(&["NOPE"]),
            payload_field: None,
        };
        let t = Tables { idempotency, ..Tables::new() };
        assert_eq!(TablePlan::validate_all(&t.config()), Ok(()));
        let mut with_path = t;
        with_path.idempotency.payload_field = Some("order.id".into());
        assert_eq!(TablePlan::validate_all(&with_path.config()).unwrap_err().0, "sink.idempotency.columns");
        assert_eq!(TablePlan::validate_all(&Tables::new().config()), Ok(()));
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
            (OffsetDateTime::now_utc(), MetadataScope::Delivery),
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
    fn under_the_message_scope_a_redelivery_maps_to_the_same_row_but_its_insert_times() {
        let e = envelope_with("S", 9, "orders.x", &b"{\"a\": 1}"[..], Headers::new(), 1);
        let again = sinks_contract::testing::redelivery(&e, time::Duration::seconds(30));
        let map = |e: &Envelope, at, scope| {
            map_row(e, &Field::ALL, &IdempotencyConfig::default(), PayloadMode::JsonOrEnvelope, 32, (at, scope))
                .unwrap()
        };
        let now = OffsetDateTime::now_utc();
        let later = now + time::Duration::seconds(31);
        let (one, two) = (map(&e, now, MetadataScope::Message), map(&again, later, MetadataScope::Message));
        for (i, field) in Field::ALL.iter().enumerate() {
            if matches!(field, Field::ReceivedAt | Field::StoredAt) {
                assert_ne!(one.cells[i], two.cells[i], "{field:?} is the row's own insert");
            } else {
                assert_eq!(one.cells[i], two.cells[i], "{field:?}");
            }
        }
        let metadata = Field::ALL.iter().position(|f| *f == Field::Metadata).unwrap();
        let (one, two) = (map(&e, now, MetadataScope::Delivery), map(&again, later, MetadataScope::Delivery));
        assert_ne!(one.cells[metadata], two.cells[metadata], "the reference's document holds the delivery");
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
        let err = map_row(&e, &Field::ALL, &by_field, PayloadMode::JsonOrEnvelope, 32, (now, MetadataScope::Delivery))
            .unwrap_err();
        assert!(err.is_permanent());
        assert_eq!(err.error_type(), "ValidationError");
        assert!(err.reason().is_some_and(|r| !r.is_empty()), "the dead-letter record names why: {:?}", err.reason());
        let found = envelope_with("S", 1, "o", &br#"{"order":{"id":"A-7"}}"#[..], Headers::new(), 1);
        let row = map_row(
            &found,
            &[Field::MessageId],
            &by_field,
            PayloadMode::JsonOrEnvelope,
            32,
            (now, MetadataScope::Delivery),
        )
        .unwrap();
        assert_eq!(row.cells, [Cell::Text(Some("A-7".into()))]);
        let text = envelope_with("S", 1, "o", &b"not json"[..], Headers::new(), 1);
        let err = map_row(
            &text,
            &Field::ALL,
            &IdempotencyConfig::default(),
            PayloadMode::JsonOnly,
            32,
            (now, MetadataScope::Delivery),
        )
        .unwrap_err();
        assert_eq!(err.error_type(), "SerializationError");
        let deep = format!("{}1{}", "[".repeat(4), "]".repeat(4));
        let e = envelope_with("S", 2, "o", deep.clone(), Headers::new(), 1);
        let row = map_row(
            &e,
            &[Field::Payload],
            &IdempotencyConfig::default(),
            PayloadMode::JsonOrEnvelope,
            3,
            (now, MetadataScope::Delivery),
        )
        .unwrap();
        let Cell::Json(Some(stored)) = &row.cells[0] else { panic!("{row:?}") };
        assert_eq!(payload::decode_stored(stored), deep.as_bytes(), "deeper than allowed: kept as text");
        let err = map_row(
            &e,
            &[Field::Payload],
            &IdempotencyConfig::default(),
            PayloadMode::JsonOnly,
            3,
            (now, MetadataScope::Delivery),
        )
        .unwrap_err();
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
            map_row(
                e,
                &[Field::StreamName],
                &IdempotencyConfig::default(),
                PayloadMode::JsonOrEnvelope,
                32,
                (now, MetadataScope::Delivery),
            )
            .unwrap()
            .cells
        };
        assert_eq!(cells(&e), [Cell::Text(Some("ORDERS".into()))]);
        let later = e.with_stream_epoch(Some("e17".into()));
        assert_eq!(cells(&later), [Cell::Text(Some("ORDERS.e17".into()))]);
    }
}
