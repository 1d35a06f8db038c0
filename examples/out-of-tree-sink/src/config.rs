//! [`SqliteSinkConfig`]: the `sink` section of a `type = "sqlite"` configuration.
//!
//! Unknown fields are refused, and every problem names its field as `sink.<field>`, like
//! the sinks of the nats-sinks repository.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sinks_contract::config::{ConfigError, Issues, SinkSection};
use sinks_contract::existing::{ExistingKeyPolicy, KeepFirstOverwriteDeadLetter};
use sinks_contract::idempotency::KeySource;

/// What happens when a message's key already holds a row with a different payload:
/// `keep_first` (the default: keep the stored row, report a conflict), `overwrite` (replace
/// it) or `dead_letter` (refuse the message). The contract's one policy type, in the words
/// of the relational sinks. Under stream-sequence keys a different payload is a reused
/// sequence and is refused whatever this says (`sinks_contract::existing`).
pub type ConflictPolicy = ExistingKeyPolicy<KeepFirstOverwriteDeadLetter>;

/// The `sink` section of the SQLite sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteSinkConfig {
    /// Path of the SQLite database file (its directory must exist).
    pub path: PathBuf,
    /// Table the rows go to (letters, digits and `_`, at most 64 characters).
    #[serde(default = "default_table")]
    pub table: String,
    /// Create the database file and the table when they are missing (default on). Off: a
    /// missing file or table stops start-up.
    #[serde(default = "default_true")]
    pub create_table: bool,
    /// What identifies a message (the row's primary key): `idempotency_key` (the default:
    /// stream sequence, else message id, else payload hash), `stream_sequence`,
    /// `origin_sequence` (the stream the event was first stored in, through a mirror or a
    /// source), `message_id` or `payload_sha256`.
    #[serde(default)]
    pub key: KeySource,
    /// What a different payload under a stored key does (see [`ConflictPolicy`]).
    #[serde(default)]
    pub conflict_policy: ConflictPolicy,
    /// Largest payload written, in bytes (default 8 MiB); a larger message is refused
    /// permanently (dead-lettered) with the reason `payload_too_large`.
    #[serde(default = "default_max_payload_bytes")]
    pub max_payload_bytes: usize,
}

fn default_table() -> String {
    "messages".to_owned()
}

fn default_true() -> bool {
    true
}

fn default_max_payload_bytes() -> usize {
    8 * 1024 * 1024
}

impl SqliteSinkConfig {
    /// A configuration with every default, writing to the database at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            table: default_table(),
            create_table: true,
            key: KeySource::default(),
            conflict_policy: ConflictPolicy::default(),
            max_payload_bytes: default_max_payload_bytes(),
        }
    }

    /// Parses and validates a `sink` section (`SinkSection::parse` leaves out its `type`).
    pub fn from_section(section: &SinkSection) -> Result<Self, ConfigError> {
        let config: Self = section.parse()?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the values serde cannot: a usable path and table name, a positive limit.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Issues::default();
        if self.path.as_os_str().is_empty() {
            issues.push("sink.path", "must not be empty");
        }
        if !is_identifier(&self.table) {
            issues.push("sink.table", "must be 1 to 64 letters, digits or `_`, not starting with a digit");
        }
        if self.max_payload_bytes == 0 {
            issues.push("sink.max_payload_bytes", "must be at least 1");
        }
        issues.finish()
    }
}

/// True for a plain SQL identifier, safe to put in a statement as it is.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(value: serde_json::Value) -> SinkSection {
        serde_json::from_value(value).expect("a sink section")
    }

    fn fields_in_error(value: serde_json::Value) -> Vec<String> {
        match SqliteSinkConfig::from_section(&section(value)) {
            Ok(c) => panic!("expected an error, got {c:?}"),
            Err(e) => e.issues.into_iter().map(|i| i.path).collect(),
        }
    }

    #[test]
    fn defaults_fill_a_minimal_section() {
        let c = SqliteSinkConfig::from_section(&section(serde_json::json!({"type": "sqlite", "path": "/tmp/x.db"})))
            .expect("valid");
        assert_eq!(c, SqliteSinkConfig::new("/tmp/x.db"));
        assert_eq!(c.table, "messages");
    }

    #[test]
    fn problems_name_their_field() {
        assert_eq!(
            fields_in_error(serde_json::json!({"type": "sqlite", "path": "x.db", "table": "a b"})),
            ["sink.table"]
        );
        assert_eq!(fields_in_error(serde_json::json!({"type": "sqlite", "path": ""})), ["sink.path"]);
        let unknown = fields_in_error(serde_json::json!({"type": "sqlite", "path": "x.db", "tabel": "t"}));
        assert_eq!(unknown.len(), 1, "{unknown:?}");
        let policy = fields_in_error(serde_json::json!({"type": "sqlite", "path": "x.db", "conflict_policy": "keep"}));
        assert_eq!(policy, ["sink.conflict_policy"]);
    }

    #[test]
    fn identifiers_are_plain() {
        assert!(is_identifier("messages") && is_identifier("_t2"));
        assert!(
            !is_identifier("2t") && !is_identifier("t;drop") && !is_identifier("") && !is_identifier(&"t".repeat(65))
        );
    }
}
