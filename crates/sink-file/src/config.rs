//! [`FileSinkConfig`]: the `sink` section of a `type: file` configuration.
//!
//! Field names, values and defaults are the reference's, so a reference JSON file-sink
//! section parses unchanged. Unknown fields are rejected, and every validation problem names
//! its field as `sink.<field>`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sinks_contract::ConfigError;
use sinks_contract::PayloadMode;
use sinks_contract::config::{Issues, SinkSection};
use sinks_contract::existing::{ExistingKeyPolicy, KeyBasis, SkipOverwriteFail};
use sinks_toolkit::batch::BatchConfig;
use sinks_toolkit::files::FileMode;
use sinks_toolkit::metadata::MetadataScope;

/// Extension used when none is configured and compression is off.
pub(crate) const DEFAULT_EXTENSION: &str = ".json";
/// Extension used when none is configured and compression is `gzip`.
pub(crate) const DEFAULT_GZIP_EXTENSION: &str = ".json.gz";
/// Longest accepted extension, in bytes (keeps file and temp file names under 255 bytes).
pub(crate) const MAX_EXTENSION_LEN: usize = 64;

/// How messages are laid out on disk: `one_file_per_message` (the default, the
/// reference's) or `batch` (many messages per file, NDJSON or Parquet; see
/// `sinks_toolkit::batch`).
pub use sinks_toolkit::batch::WriteMode;

/// What the file name of a message is derived from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilenameStrategy {
    /// `{stream}-{stream_sequence:020}`: stable across redeliveries of one stream
    /// (`{stream}.{epoch}-…` in a later epoch of it, `Envelope::keyed_stream`).
    #[default]
    StreamSequence,
    /// `{origin}-{sequence:020}` of the stream the event was first stored in (through a
    /// mirror or a source), in the directory of the subject it was stored under there: one
    /// file per event whatever the path. For a plain stream exactly `stream_sequence`'s.
    OriginSequence,
    /// `{message_id}-{sha256(message_id)[:16]}`: the publisher's `Nats-Msg-Id`.
    MessageId,
    /// `{subject}-{sha256(payload)}`: content addressed; refused for headers-only messages.
    PayloadSha256,
}

impl FilenameStrategy {
    /// What the names are made of, for the existing-key decision: the stream sequence
    /// (a different payload under such a name is a reused sequence, refused whatever the
    /// `duplicate_policy`), or the publisher's identity (the policy decides).
    pub fn key_basis(self) -> KeyBasis {
        match self {
            Self::StreamSequence | Self::OriginSequence => KeyBasis::StreamSequence,
            Self::MessageId | Self::PayloadSha256 => KeyBasis::Publisher,
        }
    }
}

/// What happens when the target file already exists: `skip_existing` (keep the existing
/// file; the message is a duplicate, or a conflict when its payload differs from the stored
/// one), `overwrite` (atomically replace it) or `fail` (refuse the message as a permanent
/// failure). The contract's one policy type, in this sink's words; what each answer means is
/// `sinks_contract::existing`. Under `filename_strategy: stream_sequence` a different
/// payload is a reused stream sequence, refused (`sequence_reused`) whatever the policy, and
/// `overwrite` never replaces a file (it creates conditionally, like `skip_existing`).
pub type DuplicatePolicy = ExistingKeyPolicy<SkipOverwriteFail>;

/// Compression applied to each file: `none` or deterministic `gzip`.
pub use sinks_toolkit::compression::Compression;

/// Settings of the file sink (`sink.type = "file"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSinkConfig {
    /// Root directory; every file is written below it. A leading `~/` means the home directory.
    pub directory: PathBuf,
    /// Layout: `one_file_per_message` (default: one JSON file per message) or `batch` (many
    /// messages per file, see `batch`).
    #[serde(default)]
    pub mode: WriteMode,
    /// Batch mode (`mode: batch`): format, compression, when a file is closed, the partition
    /// template. Files go to `<directory>/<partition>/<stream>-<first>-<last>.<ext>`; the
    /// record fields `filename_strategy`, `extension`, `compression`, `compression_level`,
    /// `include_metadata`, `partition_by_subject` and `pretty` do not apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchConfig>,
    /// How file names are derived: `stream_sequence` (default), `origin_sequence` (one file per
    /// event through a mirror or a source; not in batch mode), `message_id` or `payload_sha256`.
    /// In a later epoch of the stream a `stream_sequence` name is `{stream}.{epoch}-{seq}`.
    #[serde(default)]
    pub filename_strategy: FilenameStrategy,
    /// What to do when the file already exists: `skip_existing` (default), `overwrite` or `fail`.
    #[serde(default)]
    pub duplicate_policy: DuplicatePolicy,
    /// How message bytes become the stored `payload` value (default `json_or_envelope`).
    #[serde(default)]
    pub payload_mode: PayloadMode,
    /// File name suffix; starts with `.`, no path separators. Defaults to `.json`, or to
    /// `.json.gz` when `compression` is `gzip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<String>,
    /// `none` (default) or `gzip`.
    #[serde(default)]
    pub compression: Compression,
    /// Gzip level, 1 (fastest) to 9 (smallest); default 6.
    #[serde(default = "default_compression_level")]
    pub compression_level: u32,
    /// Store the standard metadata document under `metadata` (default true).
    #[serde(default = "default_true")]
    pub include_metadata: bool,
    /// What the record holds of each delivery: `message` (default: only the event's facts, so
    /// every delivery of one event writes the same bytes) or `delivery` (the reference's
    /// record: also the consumer, its sequence, the receive and store times and freshness,
    /// different on every delivery). docs/file-sink.md.
    #[serde(default)]
    pub metadata_scope: MetadataScope,
    /// Write each file into a subdirectory named after the (sanitized) subject (default true).
    #[serde(default = "default_true")]
    pub partition_by_subject: bool,
    /// Create `directory` at start-up when it does not exist (default true).
    #[serde(default = "default_true")]
    pub create_directory: bool,
    /// Fsync each file and its directory before reporting it committed (default true).
    #[serde(default = "default_true")]
    pub fsync: bool,
    /// Indent the JSON (the published payload itself is kept as published; default false).
    #[serde(default)]
    pub pretty: bool,
    /// Mode of every file the sink writes, as an octal string (default `"0600"`: only the
    /// sink's user can read them; `"0640"` lets its group read them too). Applied exactly,
    /// whatever the umask; the owner keeps read and write.
    #[serde(default = "default_file_mode")]
    pub file_mode: FileMode,
    /// Mode of every directory the sink creates, as an octal string (default `"0700"`;
    /// `"0750"` lets its group in). Existing directories keep theirs; the owner keeps `rwx`.
    #[serde(default = "default_dir_mode")]
    pub dir_mode: FileMode,
}

fn default_file_mode() -> FileMode {
    FileMode::PRIVATE_FILE
}

fn default_dir_mode() -> FileMode {
    FileMode::PRIVATE_DIR
}

fn default_compression_level() -> u32 {
    6
}

fn default_true() -> bool {
    true
}

impl FileSinkConfig {
    /// A configuration writing below `directory` with every other field at its default.
    pub fn new(directory: impl Into<PathBuf>) -> Self {
        Self {
            directory: directory.into(),
            mode: WriteMode::default(),
            batch: None,
            filename_strategy: FilenameStrategy::default(),
            duplicate_policy: DuplicatePolicy::default(),
            payload_mode: PayloadMode::default(),
            extension: None,
            compression: Compression::default(),
            compression_level: default_compression_level(),
            include_metadata: true,
            metadata_scope: MetadataScope::default(),
            partition_by_subject: true,
            create_directory: true,
            fsync: true,
            pretty: false,
            file_mode: FileMode::PRIVATE_FILE,
            dir_mode: FileMode::PRIVATE_DIR,
        }
    }

    /// Parses and validates the `sink` section, then fills in the default extension
    /// ([`FileSinkConfig::complete`]).
    pub fn from_section(section: &SinkSection) -> Result<Self, ConfigError> {
        let mut config: Self = section.parse()?;
        config.validate()?;
        config.complete();
        Ok(config)
    }

    /// Fills in the default extension (`.json.gz` for gzip when no extension was given,
    /// else `.json`): the effective config shows the one in use.
    pub fn complete(&mut self) {
        self.extension = Some(self.effective_extension().to_owned());
    }

    /// The batch settings in effect (`mode: batch`): the configured section, else its
    /// defaults.
    pub fn batch_config(&self) -> Option<BatchConfig> {
        (self.mode == WriteMode::Batch).then(|| self.batch.clone().unwrap_or_default())
    }

    /// The extension in effect: the configured one, else the default for the compression.
    pub fn effective_extension(&self) -> &str {
        match (&self.extension, self.compression) {
            (Some(ext), _) => ext,
            (None, Compression::None) => DEFAULT_EXTENSION,
            (None, Compression::Gzip) => DEFAULT_GZIP_EXTENSION,
        }
    }

    /// Checks every field; each problem is reported as `sink.<field>`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Issues::default();
        validate_directory(&self.directory, &mut issues);
        if let Some(ext) = &self.extension
            && let Err(message) = check_extension(ext)
        {
            issues.push("sink.extension", message);
        }
        issues.range("sink.compression_level", u64::from(self.compression_level), 1, 9);
        sinks_toolkit::files::check_modes(self.file_mode, self.dir_mode, &mut issues);
        sinks_toolkit::batch::config::validate_mode(self.mode, self.batch.as_ref(), &mut issues);
        let origin = self.filename_strategy == FilenameStrategy::OriginSequence;
        sinks_toolkit::batch::config::refuse_origin_keys(self.mode, "sink.filename_strategy", origin, &mut issues);
        if self.mode == WriteMode::Batch && self.duplicate_policy == DuplicatePolicy::Overwrite {
            issues.push(
                "sink.duplicate_policy",
                "`overwrite` cannot replace a row inside a batch file: use skip_existing or fail with sink.mode: batch",
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

/// Why `ext` is not a usable extension, if it is not.
fn check_extension(ext: &str) -> Result<(), &'static str> {
    if ext.is_empty() {
        return Err("must not be empty");
    }
    if ext != ext.trim() || ext.chars().any(char::is_control) {
        return Err("must not contain padding or control characters");
    }
    if !ext.starts_with('.') {
        return Err("must start with '.'");
    }
    if ext.contains(['/', '\\']) {
        return Err("must not contain path separators");
    }
    if ext == "." || ext == ".." {
        return Err("must include a suffix after '.'");
    }
    if ext.len() > MAX_EXTENSION_LEN {
        return Err("must be at most 64 bytes long");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(json: &str) -> SinkSection {
        serde_json::from_str(json).expect("section json")
    }

    fn issue_paths(json: &str) -> Vec<String> {
        match FileSinkConfig::from_section(&section(json)) {
            Ok(c) => panic!("expected an error, got {c:?}"),
            Err(e) => e.issues.into_iter().map(|i| i.path).collect(),
        }
    }

    #[test]
    fn reference_section_parses_unchanged() {
        let c = FileSinkConfig::from_section(&section(
            r#"{"type":"file","directory":"/var/lib/nats-sinks/orders","mode":"one_file_per_message",
                "filename_strategy":"message_id","duplicate_policy":"overwrite","payload_mode":"json_only",
                "extension":".ndjson","compression":"gzip","compression_level":9,"include_metadata":false,
                "partition_by_subject":false,"create_directory":false,"fsync":false,"pretty":true}"#,
        ))
        .expect("reference section");
        assert_eq!(c.directory, PathBuf::from("/var/lib/nats-sinks/orders"));
        assert_eq!(c.filename_strategy, FilenameStrategy::MessageId);
        assert_eq!(c.duplicate_policy, DuplicatePolicy::Overwrite);
        assert_eq!(c.payload_mode, PayloadMode::JsonOnly);
        assert_eq!(c.extension.as_deref(), Some(".ndjson"), "an explicit extension wins over the gzip default");
        assert_eq!(c.compression, Compression::Gzip);
        assert_eq!(c.compression_level, 9);
        assert!(!c.include_metadata && !c.partition_by_subject && !c.create_directory && !c.fsync && c.pretty);
    }

    #[test]
    fn defaults_match_the_reference() {
        let c = FileSinkConfig::from_section(&section(r#"{"type":"file","directory":"out"}"#)).expect("minimal");
        let mut expected = FileSinkConfig::new("out");
        expected.extension = Some(".json".into());
        assert_eq!(c, expected);
        assert!(c.include_metadata && c.partition_by_subject && c.create_directory && c.fsync && !c.pretty);
        assert_eq!(c.compression_level, 6);
        assert_eq!(c.mode, WriteMode::OneFilePerMessage);
    }

    #[test]
    fn batch_mode_takes_its_section_and_refuses_what_cannot_apply() {
        let c = FileSinkConfig::from_section(&section(
            r#"{"directory":"out","mode":"batch","batch":{"format":"ndjson","compression":"zstd","max_messages":500}}"#,
        ))
        .expect("batch section");
        let batch = c.batch_config().expect("batch mode");
        assert_eq!((batch.max_messages, batch.extension()), (500, "ndjson.zst"));
        let defaults = FileSinkConfig::from_section(&section(r#"{"directory":"out","mode":"batch"}"#)).unwrap();
        assert_eq!(defaults.batch_config(), Some(BatchConfig::default()));
        assert_eq!(FileSinkConfig::new("x").batch_config(), None);
        assert_eq!(issue_paths(r#"{"directory":"out","batch":{}}"#), ["sink.batch"]);
        assert_eq!(
            issue_paths(r#"{"directory":"out","mode":"batch","duplicate_policy":"overwrite"}"#),
            ["sink.duplicate_policy"]
        );
        assert_eq!(
            issue_paths(r#"{"directory":"out","mode":"batch","batch":{"max_age_ms":1}}"#),
            ["sink.batch.max_age_ms"]
        );
        assert_eq!(issue_paths(r#"{"directory":"out","mode":"batch","batch":{"nope":1}}"#), ["sink.batch.nope"]);
    }

    #[test]
    fn gzip_without_extension_defaults_to_json_gz() {
        let c = FileSinkConfig::from_section(&section(r#"{"directory":"out","compression":"gzip"}"#)).expect("gzip");
        assert_eq!(c.extension.as_deref(), Some(".json.gz"));
        assert_eq!(
            FileSinkConfig { compression: Compression::Gzip, ..FileSinkConfig::new("x") }.effective_extension(),
            ".json.gz"
        );
    }

    #[test]
    fn problems_name_their_field() {
        assert_eq!(issue_paths(r#"{"directory":"out","bogus":1}"#), ["sink.bogus"]);
        assert_eq!(issue_paths(r#"{"type":"file"}"#), ["sink.directory"]);
        assert_eq!(issue_paths(r#"{"directory":"  "}"#), ["sink.directory"]);
        assert_eq!(issue_paths(r#"{"directory":"out","mode":"append"}"#), ["sink.mode"]);
        assert_eq!(issue_paths(r#"{"directory":"out","filename_strategy":"uuid"}"#), ["sink.filename_strategy"]);
        let batch_by_origin = r#"{"directory":"out","mode":"batch","filename_strategy":"origin_sequence"}"#;
        assert_eq!(issue_paths(batch_by_origin), ["sink.filename_strategy"]);
        assert_eq!(issue_paths(r#"{"directory":"out","compression_level":0}"#), ["sink.compression_level"]);
        assert_eq!(issue_paths(r#"{"directory":"out","compression_level":10}"#), ["sink.compression_level"]);
    }

    #[test]
    fn extension_rules() {
        for (ext, ok) in [
            (".json", true),
            (".json.gz", true),
            (".ndjson", true),
            ("", false),
            ("json", false),
            (" .json", false),
            (".json ", false),
            (".js\non", false),
            (".a/b", false),
            (".a\\b", false),
            (".", false),
            ("..", false),
        ] {
            assert_eq!(check_extension(ext).is_ok(), ok, "{ext:?}");
        }
        assert!(check_extension(&format!(".{}", "x".repeat(64))).is_err());
        let json = r#"{"directory":"out","extension":"json"}"#;
        assert_eq!(issue_paths(json), ["sink.extension"]);
    }

    #[test]
    fn serializes_back_to_the_same_section() {
        let c = FileSinkConfig::from_section(&section(r#"{"directory":"out","compression":"gzip"}"#)).expect("gzip");
        let value = serde_json::to_value(&c).expect("serialize");
        assert_eq!(value["compression"], "gzip");
        assert_eq!(value["payload_mode"], "json_or_envelope");
        let back = FileSinkConfig::from_section(&SinkSection(value.as_object().cloned().unwrap_or_default()))
            .expect("round trip");
        assert_eq!(back, c);
    }
}
