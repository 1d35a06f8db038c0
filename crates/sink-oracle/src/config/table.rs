//! The table side of the configuration: write modes, column mapping, key settings, table
//! routes and the staging path. Field names, values and defaults are the reference's;
//! `conflict_policy`, `columns.payload_sha256` and `json_column_type` are new.

use serde::{Deserialize, Serialize};
use sinks_contract::IdempotencyStrategy;

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

/// What to do when a redelivered key arrives with different content (needs the fingerprint
/// column, which `conflict_policy` adds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictPolicy {
    /// Keep the stored row; the message is acknowledged and the conflict counted and logged.
    KeepFirst,
    /// Replace the stored row's update columns with the new content.
    Overwrite,
    /// Keep the stored row and send the new message to the dead-letter queue.
    DeadLetter,
}

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

pub use sinks_contract::columns::ColumnMapping;

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
}

/// Route messages whose subject matches to another table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableRoute {
    /// Subject pattern; the first matching route wins.
    pub subject: String,
    /// Table (or `schema.table`) for matching messages.
    pub table: String,
    /// Key settings for this table (default: the sink's).
    #[serde(default)]
    pub idempotency: Option<IdempotencyConfig>,
    /// Update columns for this table in `merge` mode (default: the sink's).
    #[serde(default)]
    pub merge_update_columns: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
