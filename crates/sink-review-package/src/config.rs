//! [`ReviewPackageSinkConfig`]: the `sink` section of a `type: review_package` configuration.
//!
//! The reference's fields, values and defaults, so its JSON section loads unchanged:
//! `enabled` (must be `true`: the sink is opt-in, as in the reference), `directory`,
//! `duplicate_policy` (`skip_existing`, `fail`), `create_directory`, `fsync`,
//! `include_payload`, `max_payload_bytes` (0–512 MiB, 16 MiB) and `pretty`; plus this
//! project's `file_mode` and `dir_mode` (the file sink's). Unknown fields are refused, and
//! every problem names its field as `sink.<field>`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sinks_contract::ConfigError;
use sinks_contract::config::{Issues, SinkSection};
use sinks_contract::existing::{ExistingKeyPolicy, SkipOrFail};
use sinks_toolkit::files::FileMode;

/// The reference's default `max_payload_bytes`: 16 MiB.
pub const DEFAULT_MAX_PAYLOAD_BYTES: u64 = 16 * 1024 * 1024;
/// The largest `max_payload_bytes` the reference accepts: 512 MiB.
pub const MAX_MAX_PAYLOAD_BYTES: u64 = 512 * 1024 * 1024;

/// What happens when a message's package already exists: `skip_existing` (the default: the
/// package is kept and the message is a duplicate) or `fail` (a package not proven to be
/// this message's fails the message permanently). Either way the package is never
/// replaced, a package holding the same payload is a duplicate, and one holding a different
/// payload under the message's stream sequence is a reused sequence (`sequence_reused`,
/// refused); `sinks_contract::existing` has the whole table.
pub type DuplicatePolicy = ExistingKeyPolicy<SkipOrFail>;

/// Settings of the review package sink (`sink.type = "review_package"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewPackageSinkConfig {
    /// Must be `true`: the sink writes nothing unless the operator turned it on explicitly
    /// (the reference refuses the section otherwise, and so does this one). Default false.
    #[serde(default)]
    pub enabled: bool,
    /// Root directory; each package is a directory directly inside it, named by its package
    /// id. A leading `~/` means the home directory.
    pub directory: PathBuf,
    /// `skip_existing` (default) or `fail`.
    #[serde(default)]
    pub duplicate_policy: DuplicatePolicy,
    /// What names a package: `idempotency_key` (default, the reference's: the message's
    /// stream sequence) or `origin_sequence` (the stream the event was first stored in and
    /// its sequence there: one package per event through a mirror or a source, describing
    /// the event as its origin stored it).
    #[serde(default)]
    pub key_strategy: sinks_contract::idempotency::KeySource,
    /// Create `directory` at start-up when it does not exist (default true).
    #[serde(default = "default_true")]
    pub create_directory: bool,
    /// Fsync every file and the package directory before it is renamed into place, and the
    /// root after, before a message counts as written (default true).
    #[serde(default = "default_true")]
    pub fsync: bool,
    /// Write the message's bytes as `payload.bin` (default true). Without it the manifest
    /// keeps the payload's SHA-256 (`payload_sha256`), so a redelivery is still told from a
    /// different event.
    #[serde(default = "default_true")]
    pub include_payload: bool,
    /// Largest payload written into a package, in bytes, 0 to 512 MiB (default 16 MiB); a
    /// larger one fails permanently (dead-lettered) when `include_payload` is on.
    #[serde(default = "default_max_payload_bytes")]
    pub max_payload_bytes: u64,
    /// Indent the JSON files as the reference does (`indent=2`; default true); compact
    /// otherwise.
    #[serde(default = "default_true")]
    pub pretty: bool,
    /// Mode of every file the sink writes, as an octal string (default `"0600"`: only the
    /// sink's user can read them; `"0640"` lets a reviewers' group read them). Applied
    /// exactly, whatever the umask; the owner keeps read and write.
    #[serde(default = "default_file_mode")]
    pub file_mode: FileMode,
    /// Mode of every directory the sink creates, packages included, as an octal string
    /// (default `"0700"`, the reference's; `"0750"` lets the group in). The owner keeps `rwx`.
    #[serde(default = "default_dir_mode")]
    pub dir_mode: FileMode,
}

fn default_true() -> bool {
    true
}

fn default_max_payload_bytes() -> u64 {
    DEFAULT_MAX_PAYLOAD_BYTES
}

fn default_file_mode() -> FileMode {
    FileMode::PRIVATE_FILE
}

fn default_dir_mode() -> FileMode {
    FileMode::PRIVATE_DIR
}

impl ReviewPackageSinkConfig {
    /// An enabled configuration writing below `directory`, every other field at its default.
    pub fn new(directory: impl Into<PathBuf>) -> Self {
        Self {
            enabled: true,
            directory: directory.into(),
            duplicate_policy: DuplicatePolicy::default(),
            key_strategy: sinks_contract::idempotency::KeySource::default(),
            create_directory: true,
            fsync: true,
            include_payload: true,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            pretty: true,
            file_mode: FileMode::PRIVATE_FILE,
            dir_mode: FileMode::PRIVATE_DIR,
        }
    }

    /// Parses and validates the `sink` section.
    pub fn from_section(section: &SinkSection) -> Result<Self, ConfigError> {
        let config: Self = section.parse()?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every field; each problem is reported as `sink.<field>`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Issues::default();
        if !self.enabled {
            issues.push(
                "sink.enabled",
                "the review_package sink requires enabled = true (it is off unless turned on explicitly)",
            );
        }
        validate_directory(&self.directory, &mut issues);
        issues.range("sink.max_payload_bytes", self.max_payload_bytes, 0, MAX_MAX_PAYLOAD_BYTES);
        sinks_toolkit::files::check_modes(self.file_mode, self.dir_mode, &mut issues);
        use sinks_contract::idempotency::KeySource;
        if !matches!(self.key_strategy, KeySource::IdempotencyKey | KeySource::OriginSequence) {
            issues.push(
                "sink.key_strategy",
                "a package is named by `idempotency_key` (the reference's) or `origin_sequence`",
            );
        }
        issues.finish()
    }
}

fn validate_directory(directory: &Path, issues: &mut Issues) {
    let text = directory.as_os_str().to_string_lossy();
    if text.trim().is_empty() {
        issues.push("sink.directory", "must not be empty");
    } else if text.contains('\0') {
        issues.push("sink.directory", "must not contain NUL characters");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(json: &str) -> SinkSection {
        serde_json::from_str(json).expect("section json")
    }

    fn issue_paths(json: &str) -> Vec<String> {
        match ReviewPackageSinkConfig::from_section(&section(json)) {
            Ok(c) => panic!("expected an error, got {c:?}"),
            Err(e) => e.issues.into_iter().map(|i| i.path).collect(),
        }
    }

    #[test]
    fn the_references_section_loads_unchanged() {
        let c = ReviewPackageSinkConfig::from_section(&section(
            r#"{"type":"review_package","enabled":true,"directory":"/var/lib/review","duplicate_policy":"fail",
                "create_directory":false,"fsync":false,"include_payload":false,"max_payload_bytes":1024,"pretty":false}"#,
        ))
        .expect("reference section");
        assert_eq!(c.directory, PathBuf::from("/var/lib/review"));
        assert_eq!(c.duplicate_policy, DuplicatePolicy::Fail);
        assert!(c.enabled && !c.create_directory && !c.fsync && !c.include_payload && !c.pretty);
        assert_eq!(c.max_payload_bytes, 1024);
    }

    #[test]
    fn defaults_are_the_references() {
        let c = ReviewPackageSinkConfig::from_section(&section(r#"{"enabled":true,"directory":"out"}"#)).unwrap();
        assert_eq!(c, ReviewPackageSinkConfig::new("out"));
        assert!(c.create_directory && c.fsync && c.include_payload && c.pretty);
        assert_eq!(c.duplicate_policy, DuplicatePolicy::SkipExisting);
        assert_eq!(c.max_payload_bytes, 16 * 1024 * 1024);
        let value = serde_json::to_value(&c).unwrap();
        assert_eq!(value["duplicate_policy"], "skip_existing");
        assert_eq!(value["file_mode"], "0600");
    }

    #[test]
    fn problems_name_their_field() {
        assert_eq!(issue_paths(r#"{"directory":"out"}"#), ["sink.enabled"], "off unless enabled");
        assert_eq!(issue_paths(r#"{"enabled":false,"directory":"out"}"#), ["sink.enabled"]);
        assert_eq!(issue_paths(r#"{"enabled":true}"#), ["sink.directory"]);
        let by_id = r#"{"enabled":true,"directory":"out","key_strategy":"message_id"}"#;
        assert_eq!(issue_paths(by_id), ["sink.key_strategy"]);
        assert_eq!(issue_paths(r#"{"enabled":true,"directory":" "}"#), ["sink.directory"]);
        assert_eq!(
            issue_paths(r#"{"enabled":true,"directory":"o","duplicate_policy":"overwrite"}"#),
            ["sink.duplicate_policy"]
        );
        assert_eq!(
            issue_paths(r#"{"enabled":true,"directory":"o","max_payload_bytes":536870913}"#),
            ["sink.max_payload_bytes"]
        );
        assert_eq!(
            issue_paths(r#"{"enabled":true,"directory":"o","max_payload_bytes":-1}"#),
            ["sink.max_payload_bytes"]
        );
        assert_eq!(issue_paths(r#"{"enabled":true,"directory":"o","bogus":1}"#), ["sink.bogus"]);
        assert_eq!(issue_paths(r#"{"enabled":true,"directory":"o","file_mode":"0400"}"#), ["sink.file_mode"]);
        let edge = ReviewPackageSinkConfig::from_section(&section(
            r#"{"enabled":true,"directory":"o","max_payload_bytes":536870912}"#,
        ));
        assert!(edge.is_ok(), "512 MiB is allowed");
    }
}
