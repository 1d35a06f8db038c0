//! [`S3SinkConfig`]: the `sink` section of a `type: s3` configuration.
//!
//! Field names, values, defaults and bounds are the reference's, so a reference S3 sink
//! section parses unchanged (`durability: "operator_confirmed"` included). The fields this
//! implementation adds (`max_concurrent_requests`, `content_check`, the multipart threshold
//! and part size) default to behaviour that is at least as safe as the reference's. Unknown
//! fields are rejected, and every validation problem names its field as `sink.<field>`.
//!
//! The destination is fixed by the operator: messages influence only object keys (through
//! the deterministic, collision-free key mapping of `object.rs`) and bodies, never the
//! bucket, endpoint, credentials or policies. Secrets reach the client only through
//! environment variables named by `*_env` fields (or the SDK-style default chain and
//! profiles); an endpoint with credentials, a path, a query or a fragment, and plain
//! `http://` outside loopback testing are refused.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use sinks_contract::ConfigError;
use sinks_contract::PayloadMode;
use sinks_contract::config::{Issues, SinkSection, check_uppercase_env_name};
use sinks_contract::existing::{ExistingKeyPolicy, SkipReplaceFailExisting};
use sinks_toolkit::batch::BatchConfig;
use sinks_toolkit::checks::{check_seconds, check_text, check_token};
use sinks_toolkit::metadata::MetadataScope;
use sinks_toolkit::retry::settings::{
    default_backoff_mode, default_backoff_ms, default_backoff_multiplier, default_jitter, default_max_backoff_ms,
    default_max_retries,
};
use sinks_toolkit::retry::{BackoffMode, InPlace, Jitter, RetrySettings};

/// How messages are laid out: `one_file_per_message` (the default, the reference's) or
/// `batch` (many messages per object, NDJSON or Parquet; see `sinks_toolkit::batch`).
pub use sinks_toolkit::batch::WriteMode;

const MIB: u64 = 1024 * 1024;
/// Smallest part S3 accepts in a multipart upload (all parts but the last).
pub(crate) const MIN_PART_BYTES: u64 = 5 * MIB;
const MAX_METADATA_ITEMS: usize = 32;
/// Metadata names that would carry credentials.
const SECRET_METADATA_NAMES: [&str; 5] =
    ["authorization", "cookie", "x-api-key", "x-auth-token", "proxy-authorization"];

/// Where the S3 credentials come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialMode {
    /// The standard AWS chain: `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` /
    /// `AWS_SESSION_TOKEN`, web identity, ECS task role, EC2 instance metadata (default).
    #[default]
    DefaultChain,
    /// Static keys read from the environment variables named by `aws_access_key_id_env`,
    /// `aws_secret_access_key_env` and (optionally) `aws_session_token_env`.
    Environment,
    /// Static keys of `profile_name` in the shared credentials file
    /// (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`).
    Profile,
}

/// Which identity an object key is built from: `idempotency_key` (default:
/// `idempotency-key/<key>`), `stream_sequence` (`stream-sequence/<stream>/<seq>`),
/// `message_id` (`message-id/<id>`) or `payload_sha256` (`payload-sha256/<subject>/<hex>`).
pub use sinks_contract::idempotency::KeySource as KeyStrategy;

/// What a write does when its object key already exists: `skip_existing` (conditional
/// create, `If-None-Match: *`; an existing object is kept and the message reported a
/// duplicate, or, with `content_check`, a conflict when its payload differs), `replace`
/// (unconditional put: the newest delivery replaces the object) or `fail_existing`
/// (conditional create; an existing object fails the message permanently, except, with
/// `content_check`, when it holds the same payload). The contract's one policy type, in this
/// sink's words; what each answer means is `sinks_contract::existing`.
pub type DuplicatePolicy = ExistingKeyPolicy<SkipReplaceFailExisting>;

/// What the primary object holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectFormat {
    /// The `nats_sinks.s3.object.v1` document: identity, metadata and payload (default).
    #[default]
    Envelope,
    /// The normalized payload alone.
    Payload,
}

/// Where message metadata goes besides the object body.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetadataMode {
    /// No user metadata on the object (only the content fingerprint when `content_check`).
    None,
    /// Low-sensitivity object metadata: schema, key strategy, the static `object_metadata`
    /// and the SHA-256 of the message id (default).
    #[default]
    ObjectMetadata,
    /// A second, deterministic `<key><sidecar_suffix>` object with the metadata document,
    /// written after the primary one (and again when the primary already existed).
    Sidecar,
}

/// Body compression: `none` or deterministic `gzip` (`Content-Encoding: gzip`).
pub use sinks_toolkit::compression::Compression;

/// Server-side encryption requested on every put.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerSideEncryption {
    /// Whatever the bucket's default is (default).
    #[default]
    #[serde(rename = "none")]
    None,
    /// SSE-S3 (`x-amz-server-side-encryption: AES256`).
    #[serde(rename = "AES256")]
    Aes256,
}

/// The only durability statement the reference knows: the operator confirms the bucket's
/// durability (replication, versioning, retention) out of band.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// The default and only value.
    #[default]
    OperatorConfirmed,
}

/// Settings of the S3-compatible object sink (`sink.type = "s3"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3SinkConfig {
    /// Destination bucket: 3–63 lowercase DNS characters (letters, digits, `.`, `-`), not
    /// shaped like an IP address.
    pub bucket: String,
    /// Optional key prefix: `/`-separated segments of `[A-Za-z0-9_.=-]` starting with a
    /// letter or digit; no leading, trailing or doubled `/`, no `.` or `..`.
    #[serde(default)]
    pub prefix: Option<String>,
    /// S3-compatible endpoint (`https://host[:port]`, no path, query, fragment or
    /// credentials). Default: AWS for `region_name`. Path-style requests are used with a
    /// custom endpoint.
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// Accept an `http://` endpoint on a loopback host (local testing only; default false).
    #[serde(default)]
    pub allow_http_for_local_testing: bool,
    /// Region used for signing (default: `AWS_REGION`/`AWS_DEFAULT_REGION` in the default
    /// chain, else `us-east-1`).
    #[serde(default)]
    pub region_name: Option<String>,
    /// `default_chain` (default), `environment` or `profile`.
    #[serde(default)]
    pub credential_mode: CredentialMode,
    /// Profile of the shared credentials file (only with `credential_mode = "profile"`).
    #[serde(default)]
    pub profile_name: Option<String>,
    /// Name of the environment variable holding the access key id (`environment` mode).
    #[serde(default)]
    pub aws_access_key_id_env: Option<String>,
    /// Name of the environment variable holding the secret access key (`environment` mode).
    #[serde(default)]
    pub aws_secret_access_key_env: Option<String>,
    /// Name of the environment variable holding a session token (optional).
    #[serde(default)]
    pub aws_session_token_env: Option<String>,
    /// `idempotency_key` (default), `stream_sequence`, `origin_sequence` (the stream the event
    /// was first stored in, through a mirror or a source; not in batch mode), `message_id` or
    /// `payload_sha256`.
    #[serde(default)]
    pub key_strategy: KeyStrategy,
    /// Optional namespace written as `<key_prefix>:` in front of the key (same character
    /// rules as a prefix segment, at most 128 characters).
    #[serde(default)]
    pub key_prefix: Option<String>,
    /// Suffix of primary object keys (default `.json`; `.json.gz` or similar with gzip).
    #[serde(default = "default_object_suffix")]
    pub object_suffix: String,
    /// `skip_existing` (default), `replace` or `fail_existing`.
    #[serde(default)]
    pub duplicate_policy: DuplicatePolicy,
    /// `envelope` (default) or `payload`.
    #[serde(default)]
    pub object_format: ObjectFormat,
    /// `none`, `object_metadata` (default) or `sidecar`.
    #[serde(default)]
    pub metadata_mode: MetadataMode,
    /// What the stored document holds of each delivery: `message` (default: only the event's
    /// facts, so every delivery of one event writes the same bytes) or `delivery` (the
    /// reference's document: also `consumer`, `consumer_sequence`, `received_at_epoch_ns`,
    /// `stored_at_epoch_ns`, the metadata's receive and store times and freshness, different
    /// on every delivery).
    #[serde(default)]
    pub metadata_scope: MetadataScope,
    /// Suffix of sidecar keys (default `.metadata.json`), different from `object_suffix`.
    #[serde(default = "default_sidecar_suffix")]
    pub sidecar_suffix: String,
    /// How payloads are stored: `json_or_envelope` (default), `json_only`, `text_envelope`,
    /// `bytes_envelope`.
    #[serde(default)]
    pub payload_mode: PayloadMode,
    /// `none` (default) or `gzip`.
    #[serde(default)]
    pub compression: Compression,
    /// Content type of primary objects; only `application/json`.
    #[serde(default = "default_content_type")]
    pub content_type: String,
    /// Static, low-sensitivity user metadata added to every object (at most 32 pairs,
    /// names `[A-Za-z0-9_.-]`, values at most 256 characters, no credential names).
    #[serde(default)]
    pub object_metadata: BTreeMap<String, String>,
    /// `none` (default) or `AES256`.
    #[serde(default)]
    pub server_side_encryption: ServerSideEncryption,
    /// Largest object key in UTF-8 bytes, 64–1024 (default 1024). A longer key fails its
    /// message permanently.
    #[serde(default = "default_max_key_bytes")]
    pub max_key_bytes: u64,
    /// Largest object body after compression, 1–1,073,741,824 (default 16 MiB). A larger
    /// body fails its message permanently.
    #[serde(default = "default_max_object_bytes")]
    pub max_object_bytes: u64,
    /// Largest total of user metadata names and values, 128–65,536 (default 4096).
    #[serde(default = "default_max_metadata_bytes")]
    pub max_metadata_bytes: u64,
    /// Timeout of each request (connect included), seconds, > 0 and ≤ 300 (default 10).
    #[serde(default = "default_request_timeout")]
    pub request_timeout_seconds: f64,
    /// Extra attempts after a temporary failure within one write, 0–10 (default 3; 0 leaves
    /// every retry to the JetStream redelivery). A retry puts the same object under the same
    /// conditions, so it is exactly as safe as a redelivery.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Delay before the first in-write retry, milliseconds, 0–60,000 (default 10).
    #[serde(default = "default_backoff_ms")]
    pub retry_backoff_ms: u64,
    /// Longest wait in place, milliseconds, 0–300,000, ≥ `retry_backoff_ms` (default 250).
    /// A longer wait (backoff or `Retry-After`), or a retry that would not finish within the
    /// write's budget, hands the message back for a redelivery after that wait instead.
    #[serde(default = "default_max_backoff_ms")]
    pub retry_max_backoff_ms: u64,
    /// `fixed`, `linear` or `exponential` (default).
    #[serde(default = "default_backoff_mode")]
    pub retry_backoff_mode: BackoffMode,
    /// Growth factor of exponential backoff, 1.0–10.0 (default 2.0).
    #[serde(default = "default_backoff_multiplier")]
    pub retry_backoff_multiplier: f64,
    /// `none`, `full` (default) or `equal`.
    #[serde(default = "default_jitter")]
    pub retry_jitter: Jitter,
    /// `operator_confirmed` (the only value, as in the reference).
    #[serde(default)]
    pub durability: Durability,
    /// Most object puts in flight per write, 1–256 (default 64: object stores answer each put
    /// in milliseconds to tens of milliseconds, so throughput comes from concurrency).
    /// Messages that map to the same object key are written one after another, in order.
    #[serde(default = "default_max_concurrent_requests")]
    pub max_concurrent_requests: usize,
    /// On "already exists", compare the stored object's payload fingerprint with the
    /// message's: same → duplicate, different → conflict (default true). Objects carry the
    /// fingerprint as `nats-sinks-payload-sha256` metadata; for objects without it the body
    /// is read.
    #[serde(default = "default_true")]
    pub content_check: bool,
    /// Bodies of at least this many bytes are sent as a multipart upload, 5 MiB–5 GiB
    /// (default 8 MiB).
    #[serde(default = "default_multipart_threshold")]
    pub multipart_threshold_bytes: u64,
    /// Part size of multipart uploads, 5 MiB–512 MiB (default 8 MiB). In batch mode every
    /// object is uploaded in parts of this size (one at a time): what an upload holds in
    /// memory.
    #[serde(default = "default_multipart_part")]
    pub multipart_part_bytes: u64,
    /// Layout: `one_file_per_message` (default: one object per message) or `batch` (many
    /// messages per object, see `batch`).
    #[serde(default)]
    pub mode: WriteMode,
    /// Batch mode (`mode: batch`): format, compression, when an object is closed, the
    /// partition template. Objects go to `[prefix/]<partition>/<stream>-<first>-<last>.<ext>`;
    /// `key_strategy`, `key_prefix`, `object_suffix`, `object_format`, `metadata_mode`,
    /// `sidecar_suffix`, `compression` and `multipart_threshold_bytes` do not apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchConfig>,
    /// Batch mode: where objects are built before they are uploaded, as unnamed temporary
    /// files that vanish with the process (default: the system's temporary directory). Each
    /// open object takes up to `batch.max_bytes` (compressed) of disk there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_directory: Option<std::path::PathBuf>,
}

fn default_object_suffix() -> String {
    ".json".into()
}
fn default_sidecar_suffix() -> String {
    ".metadata.json".into()
}
fn default_content_type() -> String {
    "application/json".into()
}
fn default_max_key_bytes() -> u64 {
    1024
}
fn default_max_object_bytes() -> u64 {
    16 * MIB
}
fn default_max_metadata_bytes() -> u64 {
    4096
}
fn default_request_timeout() -> f64 {
    10.0
}
fn default_max_concurrent_requests() -> usize {
    64
}
fn default_true() -> bool {
    true
}
fn default_multipart_threshold() -> u64 {
    8 * MIB
}
fn default_multipart_part() -> u64 {
    8 * MIB
}

impl S3SinkConfig {
    /// A config with every default for `bucket`.
    pub fn new(bucket: impl Into<String>) -> Self {
        let mut section = serde_json::Map::new();
        section.insert("bucket".into(), serde_json::Value::String(bucket.into()));
        serde_json::from_value(serde_json::Value::Object(section)).unwrap_or_else(|_| unreachable!())
    }

    /// Parses and validates a `sink` section.
    pub fn from_section(section: &SinkSection) -> Result<Self, ConfigError> {
        let config: Self = section.parse()?;
        config.validate()?;
        Ok(config)
    }

    /// The batch settings in effect (`mode: batch`): the configured section, else its
    /// defaults.
    pub fn batch_config(&self) -> Option<BatchConfig> {
        (self.mode == WriteMode::Batch).then(|| self.batch.clone().unwrap_or_default())
    }

    /// The values of the `retry_*` fields and `max_retries`.
    pub(crate) fn retry(&self) -> RetrySettings {
        RetrySettings {
            max_retries: self.max_retries,
            backoff_ms: self.retry_backoff_ms,
            max_backoff_ms: self.retry_max_backoff_ms,
            mode: self.retry_backoff_mode,
            multiplier: self.retry_backoff_multiplier,
            jitter: self.retry_jitter,
        }
    }

    /// The in-place retries of a write: the `retry_*` backoff, `max_retries`, and the
    /// request timeout.
    pub(crate) fn in_place(&self) -> InPlace {
        self.retry().in_place(std::time::Duration::from_secs_f64(self.request_timeout_seconds))
    }

    /// Checks every field; each problem is reported as `sink.<field>`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Issues::default();
        if let Err(m) = check_bucket(&self.bucket) {
            issues.push("sink.bucket", m);
        }
        if let Some(prefix) = &self.prefix
            && let Err(m) = check_prefix(prefix)
        {
            issues.push("sink.prefix", m);
        }
        if let Some(url) = &self.endpoint_url
            && let Err(m) = check_endpoint(url, self.allow_http_for_local_testing)
        {
            issues.push("sink.endpoint_url", m);
        }
        if let Some(region) = &self.region_name
            && let Err(m) = check_token(region, 64, |c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        {
            issues.push("sink.region_name", m);
        }
        if let Some(profile) = &self.profile_name
            && let Err(m) = check_token(profile, 128, |c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
        {
            issues.push("sink.profile_name", m);
        }
        self.validate_credentials(&mut issues);
        if let Some(key_prefix) = &self.key_prefix
            && let Err(m) = check_segment(key_prefix)
        {
            issues.push("sink.key_prefix", m);
        }
        for (field, value) in
            [("sink.object_suffix", &self.object_suffix), ("sink.sidecar_suffix", &self.sidecar_suffix)]
        {
            if let Err(m) = check_suffix(value) {
                issues.push(field, m);
            }
        }
        if self.content_type != "application/json" {
            issues.push("sink.content_type", "only `application/json` is supported");
        }
        self.validate_object_metadata(&mut issues);
        issues.range("sink.max_key_bytes", self.max_key_bytes, 64, 1024);
        issues.range("sink.max_object_bytes", self.max_object_bytes, 1, 1024 * MIB);
        issues.range("sink.max_metadata_bytes", self.max_metadata_bytes, 128, 65_536);
        if let Err(m) = check_seconds(self.request_timeout_seconds, false, 300.0) {
            issues.push("sink.request_timeout_seconds", m);
        }
        self.retry().validate(&mut issues);
        issues.range("sink.max_concurrent_requests", self.max_concurrent_requests as u64, 1, 256);
        issues.range("sink.multipart_threshold_bytes", self.multipart_threshold_bytes, MIN_PART_BYTES, 5 * 1024 * MIB);
        issues.range("sink.multipart_part_bytes", self.multipart_part_bytes, MIN_PART_BYTES, 512 * MIB);
        if self.metadata_mode == MetadataMode::Sidecar {
            if self.sidecar_suffix == self.object_suffix {
                issues.push("sink.sidecar_suffix", "must differ from sink.object_suffix");
            }
            if self.duplicate_policy == DuplicatePolicy::FailExisting {
                issues.push(
                    "sink.metadata_mode",
                    "`sidecar` cannot be combined with duplicate_policy `fail_existing` (a redelivery after a \
                     crash between the two puts could never complete)",
                );
            }
        }
        sinks_toolkit::batch::config::validate_mode(self.mode, self.batch.as_ref(), &mut issues);
        let origin = self.key_strategy == KeyStrategy::OriginSequence;
        sinks_toolkit::batch::config::refuse_origin_keys(self.mode, "sink.key_strategy", origin, &mut issues);
        if self.mode == WriteMode::Batch && self.duplicate_policy == DuplicatePolicy::Replace {
            issues.push(
                "sink.duplicate_policy",
                "`replace` cannot replace a row inside a batch object: use skip_existing or fail_existing with sink.mode: batch",
            );
        }
        if let Some(dir) = &self.spill_directory
            && (self.mode != WriteMode::Batch || dir.as_os_str().is_empty())
        {
            issues.push("sink.spill_directory", "is a non-empty directory, used only with sink.mode: batch");
        }
        if self.compression == Compression::Gzip && self.object_suffix == ".json" {
            issues.push("sink.object_suffix", "compression `gzip` needs a compressed suffix such as `.json.gz`");
        }
        issues.finish()
    }

    fn validate_credentials(&self, issues: &mut Issues) {
        let env_fields = [
            ("sink.aws_access_key_id_env", &self.aws_access_key_id_env),
            ("sink.aws_secret_access_key_env", &self.aws_secret_access_key_env),
            ("sink.aws_session_token_env", &self.aws_session_token_env),
        ];
        for (field, value) in env_fields {
            if let Some(name) = value {
                check_uppercase_env_name(name, field, issues);
            }
        }
        let any_env = env_fields.iter().any(|(_, v)| v.is_some());
        match self.credential_mode {
            CredentialMode::Environment => {
                for (field, value) in &env_fields[..2] {
                    if value.is_none() {
                        issues.push(field, "is required with credential_mode `environment`");
                    }
                }
            }
            _ if any_env => {
                issues.push("sink.credential_mode", "must be `environment` when aws_*_env fields are set");
            }
            _ => {}
        }
        match (self.credential_mode, &self.profile_name) {
            (CredentialMode::Profile, None) => {
                issues.push("sink.profile_name", "is required with credential_mode `profile`")
            }
            (CredentialMode::Profile, Some(_)) | (_, None) => {}
            (_, Some(_)) => issues.push("sink.profile_name", "requires credential_mode `profile`"),
        }
    }

    fn validate_object_metadata(&self, issues: &mut Issues) {
        if self.object_metadata.len() > MAX_METADATA_ITEMS {
            issues.push("sink.object_metadata", format!("supports at most {MAX_METADATA_ITEMS} items"));
        }
        let mut seen = BTreeSet::new();
        for (name, value) in &self.object_metadata {
            let field = format!("sink.object_metadata.{name}");
            if let Err(m) = check_token(name, 64, |c| c.is_ascii_alphanumeric() || "_.-".contains(c)) {
                issues.push(&field, format!("name {m}"));
                continue;
            }
            let lower = name.to_ascii_lowercase();
            if SECRET_METADATA_NAMES.contains(&lower.as_str()) {
                issues.push(&field, "must not carry credentials");
            }
            if lower.starts_with("nats-sinks-") {
                issues.push(&field, "names starting with `nats-sinks-` are reserved for the sink");
            }
            if !seen.insert(lower) {
                issues.push(&field, "is a duplicate (names are case-insensitive)");
            }
            if let Err(m) = check_text(value, 256) {
                issues.push(&field, m);
            } else if !value.is_ascii() {
                issues.push(&field, "must be ASCII (S3 metadata travels in HTTP headers)");
            }
        }
    }
}

fn check_bucket(bucket: &str) -> Result<(), String> {
    check_text(bucket, 63)?;
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let chars_ok = bucket.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    if bucket.len() < 3 || !chars_ok || !edge_ok(bucket.chars().next()) || !edge_ok(bucket.chars().last()) {
        return Err("must be 3-63 lowercase DNS characters (letters, digits, `.`, `-`)".into());
    }
    if bucket.contains("..") || bucket.contains(".-") || bucket.contains("-.") {
        return Err("must not contain adjacent `.`/`-` separators".into());
    }
    if bucket.parse::<IpAddr>().is_ok() {
        return Err("must not be formatted as an IP address".into());
    }
    Ok(())
}

fn check_segment(segment: &str) -> Result<(), String> {
    check_token(segment, 128, |c| c.is_ascii_alphanumeric() || "_.=-".contains(c))
        .map_err(|_| "must start with a letter or digit and contain only letters, digits, `_`, `.`, `=`, `-`".into())
}

fn check_prefix(prefix: &str) -> Result<(), String> {
    check_text(prefix, 1024)?;
    if prefix.starts_with('/') || prefix.ends_with('/') {
        return Err("must not start or end with `/`".into());
    }
    if prefix.contains("//") {
        return Err("must not contain empty segments".into());
    }
    for segment in prefix.split('/') {
        if segment == "." || segment == ".." {
            return Err("must not contain `.` or `..` segments".into());
        }
        check_segment(segment).map_err(|m| format!("segment `{segment}` {m}"))?;
    }
    Ok(())
}

fn check_suffix(suffix: &str) -> Result<(), String> {
    check_text(suffix, 32)?;
    let mut chars = suffix.chars();
    let shape_ok = chars.next() == Some('.')
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && suffix.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if !shape_ok {
        return Err("must be a simple extension such as `.json`".into());
    }
    Ok(())
}

/// True for `localhost` and loopback IP addresses.
pub(crate) fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn check_endpoint(text: &str, allow_http: bool) -> Result<(), String> {
    check_text(text, 512)?;
    let url = url::Url::parse(text).map_err(|e| format!("is not a valid URL ({e})"))?;
    let host = match url.host_str() {
        Some(h) if !h.is_empty() => h.to_owned(),
        _ => return Err("must include a host".into()),
    };
    match url.scheme() {
        "https" => {}
        "http" if allow_http && is_loopback(&host) => {}
        "http" => {
            return Err("must use https (http only to a loopback host with allow_http_for_local_testing)".into());
        }
        _ => return Err("scheme must be https or http".into()),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not include credentials".into());
    }
    if url.port() == Some(0) {
        return Err("port must be between 1 and 65535".into());
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err("must not include a path, query or fragment".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: serde_json::Value) -> Result<S3SinkConfig, ConfigError> {
        let section: SinkSection = serde_json::from_value(value).unwrap();
        S3SinkConfig::from_section(&section)
    }

    fn paths(err: &ConfigError) -> Vec<&str> {
        err.issues.iter().map(|i| i.path.as_str()).collect()
    }

    #[test]
    fn batch_mode_takes_its_section_and_refuses_what_cannot_apply() {
        let c = parse(serde_json::json!({"bucket": "b-1", "mode": "batch", "spill_directory": "/var/tmp",
            "batch": {"compression": "gzip", "max_messages": 100}}))
        .unwrap();
        assert_eq!(c.batch_config().map(|b| (b.max_messages, b.extension())), Some((100, "ndjson.gz")));
        assert_eq!(parse(serde_json::json!({"bucket": "b-1"})).unwrap().batch_config(), None);
        let rows: [(serde_json::Value, &[&str]); 5] = [
            (serde_json::json!({"bucket": "b-1", "batch": {}}), &["sink.batch"]),
            (
                serde_json::json!({"bucket": "b-1", "mode": "batch", "key_strategy": "origin_sequence"}),
                &["sink.key_strategy"],
            ),
            (
                serde_json::json!({"bucket": "b-1", "mode": "batch", "duplicate_policy": "replace"}),
                &["sink.duplicate_policy"],
            ),
            (serde_json::json!({"bucket": "b-1", "spill_directory": "/tmp"}), &["sink.spill_directory"]),
            (
                serde_json::json!({"bucket": "b-1", "mode": "batch", "batch": {"max_bytes": 0}}),
                &["sink.batch.max_bytes"],
            ),
        ];
        for (value, want) in rows {
            let err = parse(value.clone()).unwrap_err();
            assert_eq!(paths(&err), want, "{value}");
        }
    }

    #[test]
    fn reference_complete_example_parses_unchanged() {
        let config = parse(serde_json::json!({
            "type": "s3",
            "bucket": "nats-sinks-events",
            "prefix": "mission/events",
            "endpoint_url": "https://object-store.example.invalid",
            "region_name": "eu-amsterdam-1",
            "credential_mode": "environment",
            "aws_access_key_id_env": "NATS_SINKS_S3_ACCESS_KEY_ID",
            "aws_secret_access_key_env": "NATS_SINKS_S3_SECRET_ACCESS_KEY",
            "aws_session_token_env": "NATS_SINKS_S3_SESSION_TOKEN",
            "key_strategy": "stream_sequence",
            "key_prefix": "archive",
            "object_suffix": ".json",
            "duplicate_policy": "skip_existing",
            "object_format": "envelope",
            "metadata_mode": "sidecar",
            "sidecar_suffix": ".metadata.json",
            "payload_mode": "json_or_envelope",
            "compression": "none",
            "content_type": "application/json",
            "object_metadata": {"purpose": "archive"},
            "server_side_encryption": "AES256",
            "max_key_bytes": 1024,
            "max_object_bytes": 16777216,
            "max_metadata_bytes": 4096,
            "request_timeout_seconds": 10,
            "max_retries": 2,
            "retry_backoff_ms": 250,
            "retry_max_backoff_ms": 5000,
            "retry_backoff_mode": "exponential",
            "retry_backoff_multiplier": 2.0,
            "retry_jitter": "full",
            "durability": "operator_confirmed"
        }))
        .unwrap();
        assert_eq!(config.key_strategy, KeyStrategy::StreamSequence);
        assert_eq!(config.metadata_mode, MetadataMode::Sidecar);
        assert_eq!(config.server_side_encryption, ServerSideEncryption::Aes256);
        assert_eq!(config.max_retries, 2);
    }

    #[test]
    fn minimal_section_gets_the_reference_defaults() {
        let config = parse(serde_json::json!({"type": "s3", "bucket": "nats-sinks-events"})).unwrap();
        assert_eq!(config, S3SinkConfig::new("nats-sinks-events"));
        assert_eq!(config.credential_mode, CredentialMode::DefaultChain);
        assert_eq!(config.key_strategy, KeyStrategy::IdempotencyKey);
        assert_eq!(config.duplicate_policy, DuplicatePolicy::SkipExisting);
        assert_eq!(config.metadata_mode, MetadataMode::ObjectMetadata);
        assert_eq!(config.object_suffix, ".json");
        assert_eq!(config.max_object_bytes, 16 * MIB);
        assert!((config.request_timeout_seconds - 10.0).abs() < f64::EPSILON);
        assert!(config.content_check);
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases: &[(serde_json::Value, &str)] = &[
            (serde_json::json!({"bucket": "AB"}), "sink.bucket"),
            (serde_json::json!({"bucket": "192.168.1.1"}), "sink.bucket"),
            (serde_json::json!({"bucket": "a..b"}), "sink.bucket"),
            (serde_json::json!({"bucket": "ok-b", "prefix": "/a"}), "sink.prefix"),
            (serde_json::json!({"bucket": "ok-b", "prefix": "a/../b"}), "sink.prefix"),
            (serde_json::json!({"bucket": "ok-b", "prefix": "a//b"}), "sink.prefix"),
            (serde_json::json!({"bucket": "ok-b", "endpoint_url": "http://s3.example.com"}), "sink.endpoint_url"),
            (
                serde_json::json!({"bucket": "ok-b", "endpoint_url": "http://example.com", "allow_http_for_local_testing": true}),
                "sink.endpoint_url",
            ),
            (serde_json::json!({"bucket": "ok-b", "endpoint_url": "https://u:p@h.example"}), "sink.endpoint_url"),
            (serde_json::json!({"bucket": "ok-b", "endpoint_url": "https://h.example/path"}), "sink.endpoint_url"),
            (serde_json::json!({"bucket": "ok-b", "credential_mode": "environment"}), "sink.aws_access_key_id_env"),
            (
                serde_json::json!({"bucket": "ok-b", "aws_access_key_id_env": "K", "aws_secret_access_key_env": "S"}),
                "sink.credential_mode",
            ),
            (serde_json::json!({"bucket": "ok-b", "credential_mode": "profile"}), "sink.profile_name"),
            (serde_json::json!({"bucket": "ok-b", "profile_name": "dev"}), "sink.profile_name"),
            (
                serde_json::json!({"bucket": "ok-b", "credential_mode": "environment",
                    "aws_access_key_id_env": "lower", "aws_secret_access_key_env": "S"}),
                "sink.aws_access_key_id_env",
            ),
            (serde_json::json!({"bucket": "ok-b", "key_prefix": "a:b"}), "sink.key_prefix"),
            (serde_json::json!({"bucket": "ok-b", "object_suffix": "json"}), "sink.object_suffix"),
            (serde_json::json!({"bucket": "ok-b", "content_type": "text/plain"}), "sink.content_type"),
            (
                serde_json::json!({"bucket": "ok-b", "object_metadata": {"Authorization": "x"}}),
                "sink.object_metadata.Authorization",
            ),
            (
                serde_json::json!({"bucket": "ok-b", "object_metadata": {"nats-sinks-schema": "x"}}),
                "sink.object_metadata.nats-sinks-schema",
            ),
            (serde_json::json!({"bucket": "ok-b", "max_key_bytes": 2048}), "sink.max_key_bytes"),
            (serde_json::json!({"bucket": "ok-b", "request_timeout_seconds": 0}), "sink.request_timeout_seconds"),
            (
                serde_json::json!({"bucket": "ok-b", "retry_backoff_ms": 900, "retry_max_backoff_ms": 100}),
                "sink.retry_max_backoff_ms",
            ),
            (
                serde_json::json!({"bucket": "ok-b", "metadata_mode": "sidecar", "sidecar_suffix": ".json"}),
                "sink.sidecar_suffix",
            ),
            (
                serde_json::json!({"bucket": "ok-b", "metadata_mode": "sidecar", "duplicate_policy": "fail_existing"}),
                "sink.metadata_mode",
            ),
            (serde_json::json!({"bucket": "ok-b", "compression": "gzip"}), "sink.object_suffix"),
            (serde_json::json!({"bucket": "ok-b", "multipart_part_bytes": 1024}), "sink.multipart_part_bytes"),
            (serde_json::json!({"bucket": "ok-b", "max_concurrent_requests": 0}), "sink.max_concurrent_requests"),
            (serde_json::json!({"bucket": "ok-b", "duplicate_policy": "merge"}), "sink.duplicate_policy"),
            (serde_json::json!({"bucket": "ok-b", "secret_access_key": "x"}), "sink"),
        ];
        for (section, field) in cases {
            let err = parse(section.clone()).expect_err(&section.to_string());
            assert!(
                paths(&err).iter().any(|p| p == field || p.starts_with(&format!("{field}."))),
                "{section}: expected {field}, got {err}"
            );
        }
    }

    #[test]
    fn loopback_http_is_accepted_only_with_the_flag() {
        let ok = serde_json::json!({"bucket": "ok-b", "endpoint_url": "http://127.0.0.1:8333", "allow_http_for_local_testing": true});
        assert!(parse(ok).is_ok());
        let v6 = serde_json::json!({"bucket": "ok-b", "endpoint_url": "http://[::1]:8333", "allow_http_for_local_testing": true});
        assert!(parse(v6).is_ok());
        let no_flag = serde_json::json!({"bucket": "ok-b", "endpoint_url": "http://127.0.0.1:8333"});
        assert!(parse(no_flag).is_err());
    }

    #[test]
    fn gzip_with_a_compressed_suffix_is_valid() {
        let ok = serde_json::json!({"bucket": "ok-b", "compression": "gzip", "object_suffix": ".json.gz"});
        assert_eq!(parse(ok).unwrap().compression, Compression::Gzip);
    }
}
