//! The Delta Lake log, as far as table mode writes and reads it (no I/O here): the table's
//! schema from the batch config ([`TableSchema`]), the actions of a commit (`protocol`,
//! `metaData`, `add` with statistics, `txn`, `commitInfo`) as newline-delimited JSON, and a
//! [`Snapshot`] of what the log's commits say so far (the latest version, the metadata, the
//! version of every application's transaction), and [`TableState`], what a writer keeps of
//! its table between commits.
//!
//! Protocol subset: reader version 1, writer version 2; no deletion vectors, column mapping
//! or other table features; partition values are strings. A snapshot also keeps the live
//! files (every `add` not removed since), which a checkpoint holds
//! ([`super::checkpoint`] reads and writes them).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use serde_json::{Value, json};

use super::config::{BatchConfig, ColumnType, STANDARD_COLUMNS};
use super::index::PartKey;

/// The directory of the log below the table's root.
pub const LOG_DIR: &str = "_delta_log";
/// The reader version table mode declares.
pub const MIN_READER_VERSION: u64 = 1;
/// The writer version table mode declares.
pub const MIN_WRITER_VERSION: u64 = 2;

/// The log entry of commit `version`: `_delta_log/00000000000000000007.json`.
pub fn commit_name(version: u64) -> String {
    format!("{LOG_DIR}/{version:020}.json")
}

/// What a writer knows of its table, shared by its clones (the commits themselves are made
/// by the engine's table module).
#[derive(Debug)]
pub struct TableState {
    /// The schema the config asks for.
    pub(super) schema: TableSchema,
    /// The log as read so far; held while a commit is made (one committer per process).
    pub(super) snapshot: tokio::sync::Mutex<Snapshot>,
    /// Slot reached per application id, known to be in the table (read without the lock).
    pub(super) known: Mutex<HashMap<String, u64>>,
    /// Manifest logs waiting for a table commit.
    pub(super) dirty: Mutex<HashSet<PartKey>>,
    /// Commits between checkpoints (`checkpoint_interval`; 0: none written).
    pub(super) checkpoint_interval: u64,
    /// Checkpoints: the latest one written or read, and the snapshot due for the next.
    pub(super) checkpoints: Mutex<Checkpoints>,
}

/// What a writer knows of its checkpoints.
#[derive(Debug, Default)]
pub struct Checkpoints {
    /// The version of the latest checkpoint this writer wrote or started from.
    pub last: Option<u64>,
    /// A snapshot to write as a checkpoint (taken by the next write or flush).
    pub due: Option<Snapshot>,
    /// A checkpoint is being written (one at a time).
    pub writing: bool,
}

impl TableState {
    /// The table of `config`, when it has one.
    pub fn of(config: &BatchConfig) -> Option<Self> {
        config.table.as_ref().map(|t| Self {
            schema: TableSchema::of(config),
            snapshot: tokio::sync::Mutex::new(Snapshot::default()),
            known: Mutex::new(HashMap::new()),
            dirty: Mutex::new(HashSet::new()),
            checkpoint_interval: t.checkpoint_interval,
            checkpoints: Mutex::new(Checkpoints::default()),
        })
    }

    /// After a commit landed (`snap` includes it): when `checkpoint_interval` commits have
    /// passed since the latest checkpoint, `snap` is due as the next one (replacing an older
    /// due one).
    pub fn committed(&self, snap: &Snapshot) {
        let mut c = self.checkpoints.lock().unwrap_or_else(PoisonError::into_inner);
        if self.is_due(&c, snap.version) {
            c.due = Some(snap.clone());
        }
    }

    fn is_due(&self, c: &Checkpoints, version: Option<u64>) -> bool {
        let interval = self.checkpoint_interval;
        version.is_some_and(|v| interval > 0 && v >= c.last.map_or(interval, |l| l + interval))
    }

    /// The snapshot due as a checkpoint, when one is (still) and none is being written (it
    /// is then being written until [`TableState::checkpointed`]).
    pub fn take_due(&self) -> Option<Snapshot> {
        let mut c = self.checkpoints.lock().unwrap_or_else(PoisonError::into_inner);
        if c.writing {
            return None;
        }
        let due = c.due.take().filter(|d| self.is_due(&c, d.version))?;
        c.writing = true;
        Some(due)
    }

    /// A checkpoint write ended: at `version` when it succeeded (or the log already had
    /// one there), `None` when it failed (the next commit makes one due again).
    pub fn checkpointed(&self, version: Option<u64>) {
        let mut c = self.checkpoints.lock().unwrap_or_else(PoisonError::into_inner);
        c.writing = false;
        if let Some(v) = version {
            c.last = Some(c.last.map_or(v, |l| l.max(v)));
        }
    }

    /// The log was read from a checkpoint at `version`.
    pub fn started_at(&self, version: u64) {
        let mut c = self.checkpoints.lock().unwrap_or_else(PoisonError::into_inner);
        c.last = Some(c.last.map_or(version, |l| l.max(version)));
    }

    /// The slot the table is known to have reached for application `app`.
    pub fn reached(&self, app: &str) -> Option<u64> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner).get(app).copied()
    }
}

/// One column of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// Its Delta primitive type (`string`, `long`, `double`, `boolean`, `timestamp`).
    pub kind: String,
    /// Whether it may be null.
    pub nullable: bool,
}

/// What the table looks like from the config: data columns, then partition columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// Every column, data columns first, in the objects' order.
    pub columns: Vec<Column>,
    /// The partition columns (also in `columns`, as nullable strings).
    pub partition_columns: Vec<String>,
}

/// The Delta type of a declared column.
fn delta_type(kind: ColumnType) -> &'static str {
    match kind {
        ColumnType::String | ColumnType::Json => "string",
        ColumnType::Int64 => "long",
        ColumnType::Float64 => "double",
        ColumnType::Boolean => "boolean",
        ColumnType::Timestamp => "timestamp",
    }
}

impl TableSchema {
    /// The schema of a table written with `config` (validated: its partition template is
    /// Hive-style).
    pub fn of(config: &BatchConfig) -> Self {
        let standard = ["string", "string", "long", "string", "timestamp", "string", "string", "string"];
        let nullable = [false, false, false, true, true, true, false, false];
        let mut columns: Vec<Column> = STANDARD_COLUMNS
            .iter()
            .zip(standard.iter().zip(nullable))
            .map(|(name, (kind, nullable))| Column { name: (*name).into(), kind: (*kind).into(), nullable })
            .collect();
        for c in &config.columns {
            columns.push(Column { name: c.name.clone(), kind: delta_type(c.kind).into(), nullable: c.nullable });
        }
        let partition_columns = config.partition_columns().unwrap_or_default();
        for p in &partition_columns {
            columns.push(Column { name: p.clone(), kind: "string".into(), nullable: true });
        }
        Self { columns, partition_columns }
    }

    /// The `schemaString` of a `metaData` action.
    pub fn schema_string(&self) -> String {
        let fields: Vec<Value> = self
            .columns
            .iter()
            .map(|c| json!({"name": c.name, "type": c.kind, "nullable": c.nullable, "metadata": {}}))
            .collect();
        json!({"type": "struct", "fields": fields}).to_string()
    }

    /// The schema a `metaData` action holds, read back; `Err` when it is not a struct of
    /// primitive fields.
    pub fn parse(meta: &Value) -> Result<Self, String> {
        let text = meta.get("schemaString").and_then(Value::as_str).ok_or("the table's metadata has no schema")?;
        let schema: Value = serde_json::from_str(text).map_err(|e| format!("the table's schema is not JSON: {e}"))?;
        let fields = schema.get("fields").and_then(Value::as_array).ok_or("the table's schema has no fields")?;
        let mut columns = Vec::with_capacity(fields.len());
        for f in fields {
            let name = f.get("name").and_then(Value::as_str).ok_or("a column of the table has no name")?;
            let kind = match f.get("type") {
                Some(Value::String(s)) => s.clone(),
                _ => format!("a nested type ({})", f.get("type").map(Value::to_string).unwrap_or_default()),
            };
            let nullable = f.get("nullable").and_then(Value::as_bool).unwrap_or(true);
            columns.push(Column { name: name.into(), kind, nullable });
        }
        let partition_columns = meta
            .get("partitionColumns")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        Ok(Self { columns, partition_columns })
    }

    /// How the table's current schema (`self`) becomes `wanted`: `Ok(false)` when they are
    /// the same, `Ok(true)` when `wanted` only adds nullable columns (a `metaData` action
    /// evolves the table), `Err` for anything else (a removed column, a changed type or
    /// nullability, other partition columns).
    pub fn evolve_to(&self, wanted: &Self) -> Result<bool, String> {
        if self.partition_columns != wanted.partition_columns {
            return Err(format!(
                "the table is partitioned by {:?} and the config by {:?}: a table's partition columns cannot change",
                self.partition_columns, wanted.partition_columns
            ));
        }
        for have in &self.columns {
            let Some(want) = wanted.columns.iter().find(|c| c.name == have.name) else {
                return Err(format!("the table has column `{}`, which the config no longer declares", have.name));
            };
            if want.kind != have.kind || want.nullable != have.nullable {
                return Err(format!(
                    "column `{}` is {} ({}) in the table and {} ({}) in the config",
                    have.name,
                    have.kind,
                    nullability(have.nullable),
                    want.kind,
                    nullability(want.nullable)
                ));
            }
        }
        let added: Vec<&Column> =
            wanted.columns.iter().filter(|w| !self.columns.iter().any(|h| h.name == w.name)).collect();
        if let Some(c) = added.iter().find(|c| !c.nullable) {
            return Err(format!("a column added to a table must be nullable (`{}`: nullable: true)", c.name));
        }
        Ok(!added.is_empty())
    }
}

fn nullability(nullable: bool) -> &'static str {
    if nullable { "nullable" } else { "not null" }
}

/// The `protocol` action.
pub fn protocol_action() -> Value {
    json!({"protocol": {"minReaderVersion": MIN_READER_VERSION, "minWriterVersion": MIN_WRITER_VERSION}})
}

/// A `metaData` action for `schema`: a new table's (`id` fresh) or an evolved one's (`id`
/// and `createdTime` kept from `previous`).
pub fn metadata_action(schema: &TableSchema, previous: Option<&Value>, now_ms: i64) -> Value {
    let id = previous.and_then(|p| p.get("id")).and_then(Value::as_str).map_or_else(table_id, str::to_owned);
    let created = previous.and_then(|p| p.get("createdTime")).and_then(Value::as_i64).unwrap_or(now_ms);
    // An evolved table keeps its properties (another tool's `delta.logRetentionDuration`).
    let configuration = previous.and_then(|p| p.get("configuration")).cloned().unwrap_or_else(|| json!({}));
    json!({"metaData": {
        "id": id,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema.schema_string(),
        "partitionColumns": schema.partition_columns,
        "configuration": configuration,
        "createdTime": created,
    }})
}

/// A random table id (a version 4 UUID).
fn table_id() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// One object added to the table.
#[derive(Debug, Clone)]
pub struct AddFile {
    /// Its key below the table's root (`dt=2026-01-02/ORDERS-…parquet`).
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Rows it holds.
    pub rows: u64,
    /// Its lowest and highest stream sequence.
    pub first: u64,
    /// See `first`.
    pub last: u64,
}

impl AddFile {
    /// The partition values of the object's directory: every `column=value` segment.
    pub fn partition_values(&self) -> BTreeMap<String, String> {
        let dir = self.path.rsplit_once('/').map_or("", |(d, _)| d);
        dir.split('/').filter_map(|s| s.split_once('=')).map(|(c, v)| (c.to_owned(), v.to_owned())).collect()
    }

    /// The `add` action, with statistics on `stream_sequence`.
    pub fn action(&self, now_ms: i64) -> Value {
        let stats = json!({
            "numRecords": self.rows,
            "minValues": {"stream_sequence": self.first},
            "maxValues": {"stream_sequence": self.last},
            "nullCount": {"stream_sequence": 0},
        });
        json!({"add": {
            "path": self.path,
            "partitionValues": self.partition_values(),
            "size": self.size,
            "modificationTime": now_ms,
            "dataChange": true,
            "stats": stats.to_string(),
        }})
    }
}

/// A `txn` action: application `app_id` reached `version`.
pub fn txn_action(app_id: &str, version: u64, now_ms: i64) -> Value {
    json!({"txn": {"appId": app_id, "version": version, "lastUpdated": now_ms}})
}

/// Actions as the text of a log entry: one JSON object per line.
pub fn entry(actions: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for a in actions {
        out.extend_from_slice(a.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// A live file of the table: an `add` no later `remove` took away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFile {
    /// Its path (relative to the table's root, as the log has it).
    pub path: String,
    /// Its partition values (a null value is a null partition).
    pub partition_values: BTreeMap<String, Option<String>>,
    /// Its size in bytes.
    pub size: i64,
    /// When it was added, in milliseconds since the epoch.
    pub modification_time: i64,
    /// Whether its `add` changed the data (compaction's do not).
    pub data_change: bool,
    /// Its statistics, as the JSON text of the `add` action.
    pub stats: Option<String>,
}

impl LiveFile {
    /// The file of an `add` action's body.
    pub fn of_add(add: &Value) -> Result<Self, String> {
        let path = add.get("path").and_then(Value::as_str).ok_or("an add action has no path")?;
        let partition_values = add
            .get("partitionValues")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().map(str::to_owned))).collect())
            .unwrap_or_default();
        Ok(Self {
            path: path.to_owned(),
            partition_values,
            size: add.get("size").and_then(Value::as_i64).unwrap_or(0),
            modification_time: add.get("modificationTime").and_then(Value::as_i64).unwrap_or(0),
            data_change: add.get("dataChange").and_then(Value::as_bool).unwrap_or(true),
            stats: add.get("stats").and_then(Value::as_str).map(str::to_owned),
        })
    }
}

/// What the log says after the commits read so far.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The latest commit read; `None` before the first.
    pub version: Option<u64>,
    /// The latest `metaData` action's body.
    pub metadata: Option<Value>,
    /// The latest `protocol` action's body.
    pub protocol: Option<Value>,
    /// The latest version of every application's transaction.
    pub txns: HashMap<String, u64>,
    /// The live files, by path.
    pub files: BTreeMap<String, LiveFile>,
}

impl Snapshot {
    /// The version the next commit is tried at.
    pub fn next_version(&self) -> u64 {
        self.version.map_or(0, |v| v + 1)
    }

    /// Applies log entry `version` (its text); `Err` when a line is not a JSON object or
    /// an action is malformed.
    pub fn apply(&mut self, version: u64, text: &[u8]) -> Result<(), String> {
        for line in text.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)) {
            let action: Value = serde_json::from_slice(line)
                .map_err(|e| format!("log entry {version} holds a line that is not JSON: {e}"))?;
            self.apply_action(&action).map_err(|e| format!("log entry {version}: {e}"))?;
        }
        self.version = Some(version);
        Ok(())
    }

    /// Applies one action (a JSON object with one key naming it).
    pub fn apply_action(&mut self, action: &Value) -> Result<(), String> {
        if let Some(meta) = action.get("metaData") {
            self.metadata = Some(meta.clone());
        }
        if let Some(protocol) = action.get("protocol") {
            self.protocol = Some(protocol.clone());
        }
        if let Some(txn) = action.get("txn") {
            let app = txn.get("appId").and_then(Value::as_str);
            let v = txn.get("version").and_then(Value::as_u64);
            let (Some(app), Some(v)) = (app, v) else {
                return Err("a malformed txn action".into());
            };
            self.txns.insert(app.to_owned(), v);
        }
        if let Some(add) = action.get("add") {
            let file = LiveFile::of_add(add)?;
            self.files.insert(file.path.clone(), file);
        }
        if let Some(remove) = action.get("remove") {
            let path = remove.get("path").and_then(Value::as_str).ok_or("a remove action has no path")?;
            self.files.remove(path);
        }
        Ok(())
    }

    /// The table's protocol versions (reader, writer); `(1, 2)` before any was read.
    pub fn protocol_versions(&self) -> (i64, i64) {
        let get = |k: &str, d: i64| self.protocol.as_ref().and_then(|p| p.get(k)).and_then(Value::as_i64).unwrap_or(d);
        (get("minReaderVersion", 1), get("minWriterVersion", 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::config::{ColumnConfig, Format};

    fn config(columns: &[(&str, ColumnType, bool)]) -> BatchConfig {
        BatchConfig {
            format: Format::Parquet,
            partition_template: "source={stream}/dt={yyyy}-{mm}-{dd}".into(),
            columns: columns
                .iter()
                .map(|(n, k, nullable)| ColumnConfig {
                    name: (*n).into(),
                    path: (*n).into(),
                    kind: *k,
                    nullable: *nullable,
                })
                .collect(),
            ..BatchConfig::default()
        }
    }

    #[test]
    fn the_schema_holds_the_row_columns_then_declared_then_partition_columns() {
        let schema = TableSchema::of(&config(&[("qty", ColumnType::Int64, true)]));
        let names: Vec<&str> = schema.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "subject",
                "stream",
                "stream_sequence",
                "message_id",
                "timestamp",
                "headers",
                "payload_sha256",
                "payload",
                "qty",
                "source",
                "dt"
            ]
        );
        assert_eq!(schema.partition_columns, ["source", "dt"]);
        let meta = metadata_action(&schema, None, 5);
        let back = TableSchema::parse(&meta["metaData"]).unwrap();
        assert_eq!(back, schema);
        assert_eq!(meta["metaData"]["id"].as_str().unwrap().len(), 36);
    }

    #[test]
    fn adding_a_nullable_column_evolves_anything_else_is_refused() {
        let base = TableSchema::of(&config(&[("qty", ColumnType::Int64, true)]));
        assert_eq!(base.evolve_to(&base), Ok(false));
        let added = TableSchema::of(&config(&[("qty", ColumnType::Int64, true), ("who", ColumnType::String, true)]));
        assert_eq!(base.evolve_to(&added), Ok(true));
        let not_null =
            TableSchema::of(&config(&[("qty", ColumnType::Int64, true), ("who", ColumnType::String, false)]));
        assert!(base.evolve_to(&not_null).unwrap_err().contains("`who`"));
        let retyped = TableSchema::of(&config(&[("qty", ColumnType::String, true)]));
        assert!(base.evolve_to(&retyped).unwrap_err().contains("column `qty` is long"));
        let removed = TableSchema::of(&config(&[]));
        assert!(base.evolve_to(&removed).unwrap_err().contains("no longer declares"));
        let mut repartitioned = config(&[("qty", ColumnType::Int64, true)]);
        repartitioned.partition_template = "dt={yyyy}".into();
        assert!(base.evolve_to(&TableSchema::of(&repartitioned)).unwrap_err().contains("partition columns"));
    }

    #[test]
    fn an_add_carries_its_partition_values_and_statistics() {
        let add = AddFile {
            path: "source=ORDERS/dt=2026-01-02/ORDERS-1-9.parquet".into(),
            size: 10,
            rows: 9,
            first: 1,
            last: 9,
        };
        let a = add.action(7);
        assert_eq!(a["add"]["partitionValues"], json!({"source": "ORDERS", "dt": "2026-01-02"}));
        let stats: Value = serde_json::from_str(a["add"]["stats"].as_str().unwrap()).unwrap();
        assert_eq!(stats["numRecords"], 9);
        assert_eq!(
            (stats["minValues"]["stream_sequence"].as_u64(), stats["maxValues"]["stream_sequence"].as_u64()),
            (Some(1), Some(9))
        );
    }

    #[test]
    fn a_snapshot_follows_txns_and_metadata_through_the_entries() {
        let schema = TableSchema::of(&config(&[]));
        let mut snap = Snapshot::default();
        assert_eq!(snap.next_version(), 0);
        snap.apply(0, &entry(&[protocol_action(), metadata_action(&schema, None, 1)])).unwrap();
        snap.apply(1, &entry(&[txn_action("a", 3, 1), txn_action("b", 0, 1)])).unwrap();
        snap.apply(2, &entry(&[txn_action("a", 5, 1)])).unwrap();
        assert!(snap.protocol.is_some() && snap.metadata.is_some());
        assert_eq!((snap.next_version(), snap.txns["a"], snap.txns["b"]), (3, 5, 0));
        assert!(snap.apply(3, b"{\"txn\":{\"appId\":\"a\"}}\n").is_err());
        assert!(snap.apply(3, b"not json\n").is_err());
    }
}
