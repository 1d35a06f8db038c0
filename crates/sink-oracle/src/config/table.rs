//! The table side of the configuration: write modes, column mapping, key settings, table
//! routes and the staging path. Field names, values and defaults are the reference's;
//! `conflict_policy`, `columns.payload_sha256` and `json_column_type` are new.

use serde::{Deserialize, Serialize};
use sinks_toolkit::relational::MergeUpdateColumns;

/// How rows are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteMode {
    /// Insert new keys; an existing key is updated with `merge_update_columns` and reported
    /// as a duplicate (default).
    #[default]
    Merge,
    /// Insert new keys; an existing key is left unchanged and reported as a duplicate.
    InsertIgnore,
    /// Plain `INSERT`; a row whose key exists (ORA-00001 on the key) is reported as a
    /// duplicate, never as success of the batch and never as a poison message.
    Insert,
    /// Insert every delivery as a new row (`/*+ append */`); no key, so not idempotent.
    Append,
}

impl WriteMode {
    /// True for the modes that write by key (every mode but `append`).
    pub fn keyed(self) -> bool {
        self != Self::Append
    }
}

/// What to do when a redelivered key arrives with different content (`keep_first`,
/// `overwrite`, `dead_letter`; needs the fingerprint column, which `conflict_policy` adds).
pub use sinks_toolkit::relational::ConflictPolicy;

/// Column type of the JSON columns in generated DDL (`auto_create`, `nats-sink ddl`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JsonColumnType {
    /// Native `JSON` (Oracle Database 21c and later; the reference's recommended table).
    #[default]
    Json,
    /// `CLOB` with an `IS JSON` check constraint (19c and earlier; keeps the JSON text
    /// byte for byte).
    Clob,
}

/// What happens to staged rows after the merge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StagingCleanup {
    /// Delete the batch's staged rows in the same transaction, before the commit (default).
    #[default]
    DeleteOnSuccess,
    /// Keep them (troubleshooting only: the staging table grows until an operator cleans it).
    Keep,
}

/// The optional staging path: array insert into a staging table, one set-based `MERGE`
/// into the target, cleanup, one commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StagingConfig {
    /// Turns the staging path on (only with `mode` `merge` or `insert_ignore`).
    pub enabled: bool,
    /// Staging table (or `schema.table`); required when enabled.
    pub table: Option<String>,
    /// Column scoping staged rows to one batch.
    pub batch_id_column: String,
    /// `delete_on_success` (default) or `keep`.
    pub cleanup: StagingCleanup,
}

impl Default for StagingConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            table: None,
            batch_id_column: "NATS_SINKS_BATCH_ID".into(),
            cleanup: StagingCleanup::default(),
        }
    }
}

pub use sinks_toolkit::columns::ColumnMapping;

/// How each row's key is derived, and which columns hold it.
pub use sinks_toolkit::relational::IdempotencyConfig;

/// Route messages whose subject matches to another table (`subject`, `table`, `idempotency`,
/// `merge_update_columns`).
pub type TableRoute = sinks_toolkit::relational::TableRoute<MergeUpdateColumns>;
