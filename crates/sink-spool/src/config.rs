//! [`SpoolSinkConfig`]: the `sink` section of a `type: spool` configuration.
//!
//! The reference's fields, values and defaults, so a reference spool section parses
//! unchanged. The spool fails closed: record encryption is required unless
//! `allow_unencrypted` says otherwise, and the encryption section takes no per-subject
//! rules (a spool record is encrypted whole, with one key). Every problem names its field as
//! `sink.<field>`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sinks_contract::config::{Issues, SinkSection};
use sinks_contract::existing::{ExistingKeyPolicy, SkipOrFail};
use sinks_contract::{ConfigError, PayloadMode};
use sinks_toolkit::encryption::config::EncryptionConfig;
use sinks_toolkit::files::FileMode;

/// What happens when a message's spool file already exists: `skip_existing` (keep the
/// existing file: a duplicate, a conflict when its payload differs) or `fail` (refuse the
/// message as a permanent failure); a spooled record is never replaced. The contract's one
/// policy type, in this sink's words; what each answer means is `sinks_contract::existing`.
pub type DuplicatePolicy = ExistingKeyPolicy<SkipOrFail>;

/// The order replay reads spool records in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrainOrdering {
    /// By priority rank (flash first), then by spool time (default).
    #[default]
    Priority,
    /// By spool time, then by file name.
    Fifo,
}

/// Settings of the spool sink (`sink.type = "spool"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpoolSinkConfig {
    /// Spool directory; one file per message directly inside it. A leading `~/` means the
    /// home directory.
    pub directory: PathBuf,
    /// Most records the spool holds, 1–10,000,000 (default 100,000). A full spool fails
    /// writes temporarily (fail closed): nothing is acknowledged that is not spooled.
    #[serde(default = "default_max_records")]
    pub max_records: u64,
    /// Most bytes the spool files take, 1 MiB–1 TiB (default 10 GiB); full → temporary.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// `skip_existing` (default) or `fail`.
    #[serde(default)]
    pub duplicate_policy: DuplicatePolicy,
    /// How the payload preview inside each record is normalized (replay always uses the
    /// original bytes).
    #[serde(default)]
    pub payload_mode: PayloadMode,
    /// Store the standard metadata document in each record (default true).
    #[serde(default = "default_true")]
    pub include_metadata: bool,
    /// Create the directory when it is missing (default true).
    #[serde(default = "default_true")]
    pub create_directory: bool,
    /// Fsync each record and the directory before a message counts as spooled (default
    /// true).
    #[serde(default = "default_true")]
    pub fsync: bool,
    /// Indented JSON (default false).
    #[serde(default)]
    pub pretty: bool,
    /// Replay order: `priority` (default) or `fifo`.
    #[serde(default)]
    pub drain_ordering: DrainOrdering,
    /// Delete a record once the replay target committed it (default true).
    #[serde(default = "default_true")]
    pub delete_after_replay: bool,
    /// Record encryption: its own key (`key_b64_env`), algorithm and envelope version; no
    /// rules.
    #[serde(default)]
    pub encryption: EncryptionConfig,
    /// Allow plaintext records (development only; default false).
    #[serde(default)]
    pub allow_unencrypted: bool,
    /// Mode of every spool record file, as an octal string (default `"0600"`: only the
    /// sink's user can read them). Applied exactly, whatever the umask; the owner keeps read
    /// and write.
    #[serde(default = "default_file_mode")]
    pub file_mode: FileMode,
    /// Mode of the spool directory when the sink creates it, as an octal string (default
    /// `"0700"`). An existing directory keeps its own; the owner keeps `rwx`.
    #[serde(default = "default_dir_mode")]
    pub dir_mode: FileMode,
}

fn default_max_records() -> u64 {
    100_000
}
fn default_max_bytes() -> u64 {
    10 * 1024 * 1024 * 1024
}
fn default_true() -> bool {
    true
}
fn default_file_mode() -> FileMode {
    FileMode::PRIVATE_FILE
}
fn default_dir_mode() -> FileMode {
    FileMode::PRIVATE_DIR
}

impl SpoolSinkConfig {
    /// Parses and validates the `sink` section (`type` is ignored).
    pub fn from_section(section: &SinkSection) -> Result<Self, ConfigError> {
        let config: Self = section.parse()?;
        config.validate()?;
        Ok(config)
    }

    /// A config for `directory` with plaintext records (tests and examples).
    pub fn plaintext(directory: impl Into<PathBuf>) -> Self {
        Self {
            directory: directory.into(),
            max_records: default_max_records(),
            max_bytes: default_max_bytes(),
            duplicate_policy: DuplicatePolicy::SkipExisting,
            payload_mode: PayloadMode::default(),
            include_metadata: true,
            create_directory: true,
            fsync: true,
            pretty: false,
            drain_ordering: DrainOrdering::Priority,
            delete_after_replay: true,
            encryption: EncryptionConfig::default(),
            allow_unencrypted: true,
            file_mode: FileMode::PRIVATE_FILE,
            dir_mode: FileMode::PRIVATE_DIR,
        }
    }

    /// Checks every field; each problem names `sink.<field>`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Issues::default();
        if self.directory.as_os_str().is_empty() {
            issues.push("sink.directory", "must not be empty");
        }
        issues.range("sink.max_records", self.max_records, 1, 10_000_000);
        issues.range("sink.max_bytes", self.max_bytes, 1024 * 1024, 1024 * 1024 * 1024 * 1024);
        self.encryption.validate_at("sink.encryption", &mut issues);
        sinks_toolkit::files::check_modes(self.file_mode, self.dir_mode, &mut issues);
        if !self.encryption.rules.is_empty() {
            issues.push("sink.encryption.rules", "a spool record is encrypted whole with one key: rules do not apply");
        }
        if !self.encryption.enabled && !self.allow_unencrypted {
            issues.push(
                "sink.encryption.enabled",
                "the spool requires record encryption (sink.encryption.enabled with key_b64_env); set \
                 sink.allow_unencrypted only for local development",
            );
        }
        issues.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue_paths(value: serde_json::Value) -> Vec<String> {
        let serde_json::Value::Object(map) = value else { unreachable!() };
        match SpoolSinkConfig::from_section(&SinkSection(map)) {
            Ok(_) => Vec::new(),
            Err(e) => e.issues.into_iter().map(|i| i.path).collect(),
        }
    }

    #[test]
    fn the_reference_example_section_parses_with_its_defaults() {
        let section = serde_json::json!({
            "type": "spool", "directory": ".local/spool/edge-events", "max_records": 100000,
            "max_bytes": 10737418240u64, "duplicate_policy": "skip_existing", "payload_mode": "json_or_envelope",
            "include_metadata": true, "create_directory": true, "fsync": true, "pretty": false,
            "drain_ordering": "priority", "delete_after_replay": true,
            "encryption": {"enabled": true, "algorithm": "aes-256-gcm", "key_id": "edge-spool-key",
                           "key_b64_env": "NATS_SINKS_SPOOL_KEY_B64"},
            "allow_unencrypted": false
        });
        assert_eq!(issue_paths(section), Vec::<String>::new());
        let minimal = serde_json::json!({"directory": "/x", "encryption": {"enabled": true, "key_b64_env": "K"}});
        let serde_json::Value::Object(map) = minimal else { unreachable!() };
        let c = SpoolSinkConfig::from_section(&SinkSection(map)).unwrap();
        assert_eq!(
            (c.max_records, c.max_bytes, c.drain_ordering),
            (100_000, 10 * 1024 * 1024 * 1024, DrainOrdering::Priority)
        );
    }

    #[test]
    fn fails_closed() {
        let cases: &[(serde_json::Value, &[&str])] = &[
            (serde_json::json!({"directory": "/x"}), &["sink.encryption.enabled"]),
            (serde_json::json!({"directory": "/x", "allow_unencrypted": true}), &[]),
            (serde_json::json!({"directory": "/x", "encryption": {"enabled": true}}), &["sink.encryption.key_b64_env"]),
            (
                serde_json::json!({"directory": "/x", "allow_unencrypted": true,
                                   "encryption": {"rules": [{"subject": "a", "enabled": false}]}}),
                &["sink.encryption.rules"],
            ),
            (serde_json::json!({"directory": "/x", "allow_unencrypted": true, "max_bytes": 5}), &["sink.max_bytes"]),
            (serde_json::json!({"directory": "/x", "allow_unencrypted": true, "colour": 1}), &["sink.colour"]),
        ];
        for (value, expected) in cases {
            assert_eq!(issue_paths(value.clone()), *expected, "{value}");
        }
    }
}
