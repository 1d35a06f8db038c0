//! The `sink.mode` and `sink.batch` settings shared by the file and S3 sinks: the object
//! format and compression, when an object is closed, how objects are partitioned, and the
//! typed Parquet columns. Every problem names its field as `sink.batch.<field>`.

use serde::{Deserialize, Serialize};

use super::partition::Template;
use sinks_contract::config::Issues;

/// Most messages one object may be configured to hold.
pub const MAX_MESSAGES_LIMIT: u64 = 10_000_000;
/// Smallest and largest `max_bytes`.
pub const MAX_BYTES_RANGE: (u64, u64) = (1024, 5 * 1024 * 1024 * 1024);
/// Smallest and largest `max_age_ms` (100 ms to one day).
pub const MAX_AGE_RANGE_MS: (u64, u64) = (100, 86_400_000);

/// How messages are laid out: `one_file_per_message` (the default, and the reference's only
/// value) or `batch` (many messages per object, see [`BatchConfig`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteMode {
    /// One document per message, each in its own file or object.
    #[default]
    OneFilePerMessage,
    /// Many messages per object (NDJSON or Parquet), named by the stream sequences it holds.
    Batch,
}

/// The encoding of a batch object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// One JSON row document per line.
    #[default]
    Ndjson,
    /// Apache Parquet, one row per message (cargo feature `parquet`).
    Parquet,
}

impl Format {
    /// The configuration word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ndjson => "ndjson",
            Self::Parquet => "parquet",
        }
    }
}

/// Compression of a batch object: for NDJSON the whole stream (`none`, `gzip`, `zstd`), for
/// Parquet its pages (`snappy`, `zstd`, `none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchCompression {
    /// No compression.
    None,
    /// gzip (NDJSON only).
    Gzip,
    /// Zstandard.
    Zstd,
    /// Snappy (Parquet only).
    Snappy,
}

impl BatchCompression {
    /// The configuration word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
            Self::Snappy => "snappy",
        }
    }
}

/// The type of a declared Parquet column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnType {
    /// UTF-8 text (a JSON string).
    String,
    /// 64-bit signed integer (a JSON integer).
    Int64,
    /// 64-bit float (any JSON number).
    Float64,
    /// Boolean (a JSON `true` or `false`).
    Boolean,
    /// UTC timestamp in microseconds (an RFC 3339 string).
    Timestamp,
    /// The value's JSON text (any JSON value).
    Json,
}

/// One typed column of the Parquet schema, taken from the payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnConfig {
    /// Column name: `[a-z_][a-z0-9_]*`, at most 64 characters, not one of the standard
    /// columns.
    pub name: String,
    /// Dotted path of the value in the JSON payload (`order.id`).
    pub path: String,
    /// `string`, `int64`, `float64`, `boolean`, `timestamp` or `json`.
    #[serde(rename = "type")]
    pub kind: ColumnType,
    /// Whether a message may lack the value (the column is then null); default true. A
    /// message whose value is missing from a non-nullable column, or has the wrong type,
    /// fails alone (dead-lettered) and its object goes on without it.
    #[serde(default = "default_true")]
    pub nullable: bool,
}

/// The standard columns every object row carries, in schema order.
pub const STANDARD_COLUMNS: [&str; 8] =
    ["subject", "stream", "stream_sequence", "message_id", "timestamp", "headers", "payload_sha256", "payload"];

/// The `sink.batch` section: what a batch object is and when it is closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchConfig {
    /// Object format: `ndjson` (default) or `parquet` (needs the cargo feature `parquet`).
    #[serde(default)]
    pub format: Format,
    /// NDJSON: `none` (default), `gzip` or `zstd`; Parquet: `snappy` (default), `zstd` or
    /// `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<BatchCompression>,
    /// Most messages per object, 1–10,000,000 (default 10,000).
    #[serde(default = "default_max_messages")]
    pub max_messages: u64,
    /// Most uncompressed row bytes per object, 1 KiB–5 GiB (default 64 MiB); a message whose
    /// row alone is larger fails alone.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// The longest a message waits for its object, in ms, 100–86,400,000 (default 60,000):
    /// an object is closed when its oldest message has waited this long. Messages waiting
    /// are kept alive with in-progress heartbeats, so AckWait does not limit it.
    #[serde(default = "default_max_age_ms")]
    pub max_age_ms: u64,
    /// Where an object goes: `/`-separated segments of text and tokens (`{stream}`,
    /// `{subject}`, `{subject_token[N]}` (0-based), `{yyyy}`, `{mm}`, `{dd}`, `{hh}` from
    /// the JetStream timestamp in UTC, `{field:path}` from the JSON payload). Default
    /// `{stream}/{yyyy}/{mm}/{dd}/{hh}`.
    #[serde(default = "default_template")]
    pub partition_template: String,
    /// What a token without a value becomes (a payload without the field, a subject with
    /// fewer tokens): a named fallback partition, never an error (default `_missing`).
    #[serde(default = "default_fallback")]
    pub partition_fallback: String,
    /// Parquet only: typed columns taken from the payload, after the standard ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<ColumnConfig>,
    /// How long a finished object's commit is retried while the destination fails
    /// temporarily, in seconds, 0–3,600 (default 300): its messages stay pending (kept
    /// alive, not redelivered) and the commit is tried again with backoff, so an outage
    /// of seconds or minutes is waited out instead of turning the object's messages into
    /// redeliveries and dead letters. 0 gives up at once (the messages come back).
    #[serde(default = "default_commit_retry_seconds")]
    pub commit_retry_seconds: u64,
    /// Commit every object into a table as well (`{format: delta}`): see [`TableConfig`]
    /// and docs/delta-lake.md. Needs `format: parquet` and a Hive-style
    /// `partition_template` (every segment `column=…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<TableConfig>,
}

/// The table format of `sink.batch.table.format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TableFormat {
    /// A Delta Lake table: `_delta_log/` at the sink's root or prefix.
    #[default]
    Delta,
}

/// The `sink.batch.table` section: every committed object is added to a table at the
/// sink's root directory or prefix, in one table commit that records how far the
/// partition's manifest log was added (a Delta `txn` action).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableConfig {
    /// The table format: `delta` (the only one).
    #[serde(default)]
    pub format: TableFormat,
    /// Write a Delta checkpoint (`_delta_log/<version>.checkpoint.parquet`, the table's
    /// state in one Parquet file, and `_delta_log/_last_checkpoint` pointing at it) after
    /// every this many table commits, so a reader (and the sink at start-up) reads the
    /// latest checkpoint and the commits after it instead of the whole log. 1–100,000,
    /// default 10; 0 writes none (checkpoints written by another tool are still read). A
    /// checkpoint is written after the commit it follows has landed and never holds it up:
    /// a failed one is logged and tried again after the next commit.
    #[serde(default = "default_checkpoint_interval")]
    pub checkpoint_interval: u64,
}

impl Default for TableConfig {
    fn default() -> Self {
        Self { format: TableFormat::default(), checkpoint_interval: default_checkpoint_interval() }
    }
}

/// The largest `sink.batch.table.checkpoint_interval`.
pub const MAX_CHECKPOINT_INTERVAL: u64 = 100_000;

fn default_checkpoint_interval() -> u64 {
    10
}

fn default_true() -> bool {
    true
}
fn default_max_messages() -> u64 {
    10_000
}
fn default_max_bytes() -> u64 {
    64 * 1024 * 1024
}
fn default_max_age_ms() -> u64 {
    60_000
}
fn default_commit_retry_seconds() -> u64 {
    300
}
fn default_template() -> String {
    "{stream}/{yyyy}/{mm}/{dd}/{hh}".into()
}
fn default_fallback() -> String {
    "_missing".into()
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            format: Format::default(),
            compression: None,
            max_messages: default_max_messages(),
            max_bytes: default_max_bytes(),
            max_age_ms: default_max_age_ms(),
            partition_template: default_template(),
            partition_fallback: default_fallback(),
            columns: Vec::new(),
            commit_retry_seconds: default_commit_retry_seconds(),
            table: None,
        }
    }
}

impl BatchConfig {
    /// The compression in effect: the configured one, else the format's default.
    pub fn effective_compression(&self) -> BatchCompression {
        self.compression.unwrap_or(match self.format {
            Format::Ndjson => BatchCompression::None,
            Format::Parquet => BatchCompression::Snappy,
        })
    }

    /// The object name extension (without the leading dot): `ndjson`, `ndjson.gz`,
    /// `ndjson.zst` or `parquet`.
    pub fn extension(&self) -> &'static str {
        match (self.format, self.effective_compression()) {
            (Format::Ndjson, BatchCompression::Gzip) => "ndjson.gz",
            (Format::Ndjson, BatchCompression::Zstd) => "ndjson.zst",
            (Format::Ndjson, _) => "ndjson",
            (Format::Parquet, _) => "parquet",
        }
    }

    /// The parsed partition template (call after [`Self::validate`]).
    pub fn template(&self) -> Template {
        Template::parse(&self.partition_template).unwrap_or_default()
    }

    /// Checks every field, recording problems under `sink.batch.<field>`.
    pub fn validate(&self, issues: &mut Issues) {
        let at = |field: &str| format!("sink.batch.{field}");
        issues.range(&at("max_messages"), self.max_messages, 1, MAX_MESSAGES_LIMIT);
        issues.range(&at("max_bytes"), self.max_bytes, MAX_BYTES_RANGE.0, MAX_BYTES_RANGE.1);
        issues.range(&at("max_age_ms"), self.max_age_ms, MAX_AGE_RANGE_MS.0, MAX_AGE_RANGE_MS.1);
        issues.range(&at("commit_retry_seconds"), self.commit_retry_seconds, 0, 3_600);
        let compression = self.effective_compression();
        let allowed: &[BatchCompression] = match self.format {
            Format::Ndjson => &[BatchCompression::None, BatchCompression::Gzip, BatchCompression::Zstd],
            Format::Parquet => &[BatchCompression::Snappy, BatchCompression::Zstd, BatchCompression::None],
        };
        if !allowed.contains(&compression) {
            let names: Vec<&str> = allowed.iter().map(|c| c.as_str()).collect();
            issues.push(
                &at("compression"),
                format!(
                    "`{}` is not available for {}: use {}",
                    compression.as_str(),
                    self.format.as_str(),
                    names.join(", ")
                ),
            );
        }
        if self.format == Format::Parquet && !cfg!(feature = "parquet") {
            issues.push(&at("format"), "parquet is not built into this binary (cargo feature `parquet`)");
        }
        if let Err(e) = Template::parse(&self.partition_template) {
            issues.push(&at("partition_template"), e);
        }
        if let Err(e) = super::partition::check_literal(&self.partition_fallback) {
            issues.push(&at("partition_fallback"), e);
        }
        if !self.columns.is_empty() && self.format != Format::Parquet {
            issues.push(&at("columns"), "typed columns are a parquet feature (sink.batch.format: parquet)");
        }
        if self.table.is_some() {
            self.validate_table(issues);
        }
        let mut seen: Vec<&str> = Vec::new();
        for (i, column) in self.columns.iter().enumerate() {
            let name = &column.name;
            if !column_name_ok(name) {
                issues.push(&at(&format!("columns[{i}].name")), "must be [a-z_][a-z0-9_]*, at most 64 characters");
            } else if STANDARD_COLUMNS.contains(&name.as_str()) {
                issues.push(&at(&format!("columns[{i}].name")), "is a standard column");
            } else if seen.contains(&name.as_str()) {
                issues.push(&at(&format!("columns[{i}].name")), "is declared twice");
            }
            seen.push(name);
            let path_ok = !column.path.is_empty() && column.path.split('.').all(|s| !s.is_empty());
            if !path_ok {
                issues.push(&at(&format!("columns[{i}].path")), "must be a dotted path such as `order.id`");
            }
        }
    }
}

impl BatchConfig {
    /// The partition columns of table mode: the column name of every `column=…` segment of
    /// the template, in order; `Err` names a segment that is not of that form.
    pub fn partition_columns(&self) -> Result<Vec<String>, String> {
        let mut out: Vec<String> = Vec::new();
        for segment in self.partition_template.split('/') {
            let column = segment.split_once('=').map(|(c, _)| c).filter(|c| column_name_ok(c));
            let Some(column) = column.filter(|_| !segment.ends_with('=')) else {
                return Err(format!(
                    "`{segment}` is not a Hive-style segment: a table's partitions are columns, so every segment \
                     must be `column=…` (for example `dt={{yyyy}}-{{mm}}-{{dd}}`)"
                ));
            };
            if STANDARD_COLUMNS.contains(&column) || self.columns.iter().any(|c| c.name == column) {
                return Err(format!("partition column `{column}` is also a data column"));
            }
            if out.iter().any(|c| c == column) {
                return Err(format!("partition column `{column}` appears twice"));
            }
            out.push(column.to_owned());
        }
        Ok(out)
    }

    /// What table mode needs beyond the rest: Parquet objects and Hive-style partitions.
    fn validate_table(&self, issues: &mut Issues) {
        if self.format != Format::Parquet {
            issues.push("sink.batch.table.format", "a delta table holds parquet files: set sink.batch.format: parquet");
        }
        if let Err(e) = self.partition_columns() {
            issues.push("sink.batch.partition_template", e);
        }
        if self.table.as_ref().is_some_and(|t| t.checkpoint_interval > MAX_CHECKPOINT_INTERVAL) {
            issues.push(
                "sink.batch.table.checkpoint_interval",
                format!("must be 0 (no checkpoints) to {MAX_CHECKPOINT_INTERVAL} commits"),
            );
        }
    }
}

/// A column name: `[a-z_][a-z0-9_]*`, at most 64 characters.
fn column_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// Checks the combination of `sink.mode` and `sink.batch`: a `batch` section only with
/// `mode: batch`, and a valid one.
pub fn validate_mode(mode: WriteMode, batch: Option<&BatchConfig>, issues: &mut Issues) {
    match (mode, batch) {
        (WriteMode::OneFilePerMessage, Some(_)) => {
            issues.push("sink.batch", "is only used with sink.mode: batch");
        }
        (WriteMode::Batch, Some(batch)) => batch.validate(issues),
        (WriteMode::Batch, None) => BatchConfig::default().validate(issues),
        (WriteMode::OneFilePerMessage, None) => {}
    }
}

/// Refuses `origin_sequence` (the key knob at `field`) in batch mode: a batch object is named
/// by the consumed stream's sequences and holds rows of that stream, so it cannot key an event
/// by the stream it was first stored in. Refused rather than ignored.
pub fn refuse_origin_keys(mode: WriteMode, field: &str, origin_keyed: bool, issues: &mut Issues) {
    if mode == WriteMode::Batch && origin_keyed {
        issues.push(
            field,
            "`origin_sequence` needs one record per message: batch objects are named by the consumed \
             stream's sequences (see docs/topology.md)",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(json: serde_json::Value) -> Vec<String> {
        let config: BatchConfig = serde_json::from_value(json).expect("parses");
        let mut issues = Issues::default();
        config.validate(&mut issues);
        issues.finish().err().map(|e| e.issues.into_iter().map(|i| i.path).collect()).unwrap_or_default()
    }

    #[test]
    fn origin_keys_are_refused_in_batch_mode_only() {
        let refused = |mode, origin| {
            let mut issues = Issues::default();
            refuse_origin_keys(mode, "sink.key_strategy", origin, &mut issues);
            issues.finish().err().map(|e| e.issues.into_iter().map(|i| i.path).collect::<Vec<_>>())
        };
        assert_eq!(refused(WriteMode::Batch, true), Some(vec!["sink.key_strategy".to_owned()]));
        assert_eq!(refused(WriteMode::Batch, false), None);
        assert_eq!(refused(WriteMode::OneFilePerMessage, true), None);
    }

    #[test]
    fn defaults() {
        let c: BatchConfig = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(c, BatchConfig::default());
        assert_eq!((c.max_messages, c.max_bytes, c.max_age_ms), (10_000, 64 << 20, 60_000));
        assert_eq!(c.partition_template, "{stream}/{yyyy}/{mm}/{dd}/{hh}");
        assert_eq!(
            (c.format, c.effective_compression(), c.extension()),
            (Format::Ndjson, BatchCompression::None, "ndjson")
        );
        let p = BatchConfig { format: Format::Parquet, ..BatchConfig::default() };
        assert_eq!((p.effective_compression(), p.extension()), (BatchCompression::Snappy, "parquet"));
        assert!(problems(serde_json::json!({})).is_empty());
    }

    #[test]
    fn every_problem_names_its_field() {
        let rows: Vec<(serde_json::Value, &[&str])> = vec![
            (serde_json::json!({"max_messages": 0}), &["sink.batch.max_messages"]),
            (serde_json::json!({"max_bytes": 10}), &["sink.batch.max_bytes"]),
            (serde_json::json!({"max_age_ms": 50}), &["sink.batch.max_age_ms"]),
            (serde_json::json!({"compression": "snappy"}), &["sink.batch.compression"]),
            (serde_json::json!({"format": "parquet", "compression": "gzip"}), &["sink.batch.compression"]),
            (serde_json::json!({"partition_template": "{nope}"}), &["sink.batch.partition_template"]),
            (serde_json::json!({"partition_fallback": "a/b"}), &["sink.batch.partition_fallback"]),
            (serde_json::json!({"columns": [{"name": "x", "path": "x", "type": "string"}]}), &["sink.batch.columns"]),
        ];
        for (json, want) in rows {
            let mut got = problems(json.clone());
            got.retain(|p| p != "sink.batch.format");
            assert_eq!(got, want, "{json}");
        }
        if cfg!(feature = "parquet") {
            let columns = serde_json::json!({"format": "parquet", "columns": [
                {"name": "payload", "path": "a", "type": "string"},
                {"name": "Bad", "path": "a", "type": "string"},
                {"name": "ok", "path": "a..b", "type": "int64"},
                {"name": "ok", "path": "a", "type": "int64"},
            ]});
            assert_eq!(
                problems(columns),
                [
                    "sink.batch.columns[0].name",
                    "sink.batch.columns[1].name",
                    "sink.batch.columns[2].path",
                    "sink.batch.columns[3].name"
                ]
            );
        } else {
            assert_eq!(problems(serde_json::json!({"format": "parquet"})), ["sink.batch.format"]);
        }
    }

    #[test]
    fn table_mode_needs_parquet_and_a_hive_style_template() {
        let table = |extra: serde_json::Value| {
            let mut json = serde_json::json!({"format": "parquet", "partition_template": "dt={yyyy}-{mm}/k={subject}",
                                               "table": {"format": "delta"}});
            for (k, v) in extra.as_object().unwrap() {
                json[k] = v.clone();
            }
            let mut got = problems(json);
            got.retain(|p| p != "sink.batch.format");
            got
        };
        assert_eq!(table(serde_json::json!({})), Vec::<String>::new());
        assert_eq!(table(serde_json::json!({"format": "ndjson"})), ["sink.batch.table.format"]);
        for template in ["{stream}/dt={yyyy}", "dt=", "=x", "Dt={yyyy}", "dt={yyyy}/dt={mm}", "payload={stream}"] {
            assert_eq!(
                table(serde_json::json!({"partition_template": template})),
                ["sink.batch.partition_template"],
                "{template}"
            );
        }
        let declared = serde_json::json!({"partition_template": "qty={stream}",
                                          "columns": [{"name": "qty", "path": "q", "type": "int64"}]});
        assert_eq!(table(declared), ["sink.batch.partition_template"]);
        let often = serde_json::json!({"table": {"format": "delta", "checkpoint_interval": 100_001}});
        assert_eq!(table(often), ["sink.batch.table.checkpoint_interval"]);
        for ok in [0, 1, 100_000] {
            assert!(table(serde_json::json!({"table": {"checkpoint_interval": ok}})).is_empty(), "{ok}");
        }
        let defaulted: TableConfig = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(defaulted.checkpoint_interval, 10);
        let c: BatchConfig =
            serde_json::from_value(serde_json::json!({"partition_template": "a={stream}/b=x{hh}"})).unwrap();
        assert_eq!(c.partition_columns().unwrap(), ["a", "b"]);
        let unknown = serde_json::json!({"table": {"format": "iceberg"}});
        assert!(serde_json::from_value::<BatchConfig>(unknown).is_err(), "only delta is built");
    }

    #[test]
    fn a_batch_section_needs_batch_mode() {
        let mut issues = Issues::default();
        validate_mode(WriteMode::OneFilePerMessage, Some(&BatchConfig::default()), &mut issues);
        let paths: Vec<String> = issues.finish().unwrap_err().issues.into_iter().map(|i| i.path).collect();
        assert_eq!(paths, ["sink.batch"]);
        let mut issues = Issues::default();
        validate_mode(WriteMode::Batch, None, &mut issues);
        validate_mode(WriteMode::OneFilePerMessage, None, &mut issues);
        assert!(issues.finish().is_ok());
    }
}
