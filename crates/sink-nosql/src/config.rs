//! [`NoSqlSinkConfig`]: the `sink` section of a `type: oracle_nosql` configuration.
//!
//! Field names, values, defaults and bounds are the reference's (`docs/oracle-nosql-sink.md`
//! of nats-sinks 0.4), so a reference NoSQL sink section parses unchanged. The fields this
//! implementation adds (`max_concurrent_requests`, `store_payload_text` and the in-write
//! retry schedule) default to behaviour at least as safe as the reference's. Unknown fields
//! are rejected, and every validation problem names its field as `sink.<field>`.
//!
//! The destination is fixed by the operator: messages influence only row keys and values,
//! never the endpoint, table, namespace, compartment or credentials. Credentials come from
//! the OCI config file or the instance's identity (cloud), never from this section; what the
//! SDK cannot honour (an encrypted OCI key, another cloudsim tenant) is refused here instead
//! of being silently ignored.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use sinks_contract::ConfigError;
use sinks_contract::PayloadMode;
use sinks_contract::config::{EnvName, Issues, SinkSection, check_uppercase_env_name, is_env_name};
use sinks_contract::existing::{ExistingKeyPolicy, SkipReplaceFailExisting};
use sinks_toolkit::checks::{check_seconds, check_text, check_token};
use sinks_toolkit::metadata::MetadataScope;
use sinks_toolkit::retry::settings::{
    default_backoff_mode, default_backoff_ms, default_backoff_multiplier, default_jitter, default_max_backoff_ms,
    default_max_retries,
};
use sinks_toolkit::retry::{BackoffMode, InPlace, Jitter, RetrySettings};

const MIB: u64 = 1024 * 1024;

/// Which kind of Oracle NoSQL service the endpoint is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentMode {
    /// An on-premises store (KVLite or a cluster) behind the HTTP proxy (default).
    #[default]
    Kvstore,
    /// The Oracle NoSQL cloud simulator.
    Cloudsim,
    /// The Oracle NoSQL Database Cloud Service.
    Cloud,
}

impl DeploymentMode {
    /// The value as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kvstore => "kvstore",
            Self::Cloudsim => "cloudsim",
            Self::Cloud => "cloud",
        }
    }
}

/// How the sink authenticates; each deployment mode accepts only its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// A non-secure on-premises store: no credentials (`kvstore`).
    StoreAccessToken,
    /// The cloud simulator's bearer token (`cloudsim`).
    Cloudsim,
    /// User principal from an OCI config file (`cloud`).
    OciConfigFile,
    /// The OCI instance principal of the machine the sink runs on (`cloud`).
    InstancePrincipal,
}

impl AuthMode {
    /// The value as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StoreAccessToken => "store_access_token",
            Self::Cloudsim => "cloudsim",
            Self::OciConfigFile => "oci_config_file",
            Self::InstancePrincipal => "instance_principal",
        }
    }

    /// The default of `mode` (the reference's).
    pub fn default_for(mode: DeploymentMode) -> Self {
        match mode {
            DeploymentMode::Kvstore => Self::StoreAccessToken,
            DeploymentMode::Cloudsim => Self::Cloudsim,
            DeploymentMode::Cloud => Self::OciConfigFile,
        }
    }

    fn allowed_in(self, mode: DeploymentMode) -> bool {
        matches!(
            (mode, self),
            (DeploymentMode::Kvstore, Self::StoreAccessToken)
                | (DeploymentMode::Cloudsim, Self::Cloudsim)
                | (DeploymentMode::Cloud, Self::OciConfigFile | Self::InstancePrincipal)
        )
    }
}

/// Which identity a row key is built from: `idempotency_key` (default: the envelope's key,
/// `stream-sequence:S:N`, else `message-id:ID`, else `payload-sha256:SUBJECT:HEX`),
/// `stream_sequence`, `origin_sequence` (the stream the event was first stored in, through a
/// mirror or a source), `message_id` or `payload_sha256`. The raw key string is the row key.
pub use sinks_contract::idempotency::KeySource as KeyStrategy;

/// What a write does when its row key already exists: `skip_existing` (put if absent, with
/// the existing row returned: the same payload is a duplicate, a different one a conflict
/// whose stored row is kept, acknowledged and logged), `replace` (plain put: the newest
/// delivery replaces the row) or `fail_existing` (put if absent: the same payload is a
/// duplicate, a different one is rejected, dead-lettered). The contract's one policy type,
/// in this sink's words; what each answer means is `sinks_contract::existing`.
pub type DuplicatePolicy = ExistingKeyPolicy<SkipReplaceFailExisting>;

/// What each put asks of an on-premises store before it counts as committed.
/// `commit_sync` (default): every put carries the durability COMMIT_SYNC (the store's
/// master flushes its log to disk before it answers), so an acknowledged row survives a
/// kill -9 of the store whatever the proxy's `-kvDurability` is. `operator_confirmed` (the
/// reference's only value): the sink asks for nothing and the store's default applies (the
/// proxy's `-kvDurability`, `COMMIT_NO_SYNC` unless set), which the operator confirms out of
/// band. The cloud service ignores a request's durability. See `docs/nosql-sink.md`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Every put asks for COMMIT_SYNC (default).
    #[default]
    CommitSync,
    /// Nothing is asked; the store's own default applies.
    OperatorConfirmed,
}

impl Durability {
    /// The value as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CommitSync => "commit_sync",
            Self::OperatorConfirmed => "operator_confirmed",
        }
    }
}

/// Settings of the Oracle NoSQL sink (`sink.type = "oracle_nosql"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoSqlSinkConfig {
    /// The proxy, cloudsim or cloud endpoint: `host:port` or an `http(s)://host[:port]` URL
    /// without credentials, path, query or fragment (default `127.0.0.1:8080`). Without a
    /// scheme, port 443 means https and any other port http (as the reference's SDK does).
    /// `cloud` needs https.
    #[serde(default = "default_endpoint")]
    pub endpoint: String,
    /// `kvstore` (default), `cloudsim` or `cloud`.
    #[serde(default)]
    pub deployment_mode: DeploymentMode,
    /// `store_access_token` (kvstore), `cloudsim` (cloudsim), `oci_config_file` or
    /// `instance_principal` (cloud); default: the first one of the mode. Any other
    /// combination is refused.
    #[serde(default)]
    pub auth_mode: Option<AuthMode>,
    /// Table of the rows: one or two dot-separated identifiers (a child table), letters,
    /// digits and `_`, starting with a letter (default `nats_sinks_events`).
    #[serde(default = "default_table_name")]
    pub table_name: String,
    /// Primary-key column (STRING) holding the row key (default `sink_key`).
    #[serde(default = "default_key_field")]
    pub key_field: String,
    /// JSON column holding the event document (default `event_json`).
    #[serde(default = "default_value_field")]
    pub value_field: String,
    /// LONG column holding the time the row was written, ns since the epoch (default
    /// `stored_at_epoch_ns`).
    #[serde(default = "default_stored_at_field")]
    pub stored_at_field: String,
    /// On-premises namespace of the table (`namespace:table`); kvstore only.
    #[serde(default)]
    pub namespace: Option<String>,
    /// OCI compartment (OCID or name) of the table; cloud and cloudsim only.
    #[serde(default)]
    pub compartment_id: Option<String>,
    /// Tenant of the cloud simulator. The Rust SDK authenticates to cloudsim with its own
    /// fixed token, so only the reference's default `cloudsim` is accepted.
    #[serde(default = "default_cloudsim_tenant")]
    pub cloudsim_tenant_id: String,
    /// OCI config file for `auth_mode = "oci_config_file"` (default `~/.oci/config`).
    #[serde(default)]
    pub oci_config_file: Option<String>,
    /// Profile of the OCI config file (default `DEFAULT`).
    #[serde(default = "default_oci_profile")]
    pub oci_profile: String,
    /// Name of the environment variable holding the passphrase of an encrypted OCI key.
    /// oracle-nosql-rust-sdk 0.1.5 cannot read encrypted keys, so setting it is refused
    /// (use an unencrypted key file readable only by the sink, or the instance principal).
    #[serde(default)]
    pub oci_private_key_passphrase_env: Option<String>,
    /// `idempotency_key` (default), `stream_sequence`, `origin_sequence` (the stream the event was
    /// first stored in, through a mirror or a source), `message_id` or `payload_sha256`.
    #[serde(default)]
    pub key_strategy: KeyStrategy,
    /// Optional namespace written as `<key_prefix>:` in front of every row key (letters,
    /// digits, `_`, `.`, `-`, at most 128 characters, starting with a letter or digit).
    #[serde(default)]
    pub key_prefix: Option<String>,
    /// `skip_existing` (default), `replace` or `fail_existing`.
    #[serde(default)]
    pub duplicate_policy: DuplicatePolicy,
    /// How payloads are stored: `json_or_envelope` (default), `json_only`, `text_envelope`,
    /// `bytes_envelope`.
    #[serde(default)]
    pub payload_mode: PayloadMode,
    /// What the stored document holds of each delivery: `message` (default: only the event's
    /// facts, so every delivery of one event writes the same bytes) or `delivery` (the
    /// reference's document: also `consumer`, `consumer_sequence`, `received_at_epoch_ns`,
    /// `stored_at_epoch_ns`, the metadata's receive and store times and freshness, different
    /// on every delivery).
    #[serde(default)]
    pub metadata_scope: MetadataScope,
    /// Create the table at start-up when it is missing (default false), with
    /// `CREATE TABLE IF NOT EXISTS <table> (<key_field> STRING, <value_field> JSON,
    /// <stored_at_field> LONG, PRIMARY KEY(<key_field>))`.
    #[serde(default)]
    pub auto_create: bool,
    /// Provisioned read units of an auto-created table (cloud and cloudsim; default 10).
    #[serde(default = "default_units")]
    pub read_units: u32,
    /// Provisioned write units of an auto-created table (cloud and cloudsim; default 10).
    #[serde(default = "default_units")]
    pub write_units: u32,
    /// Storage of an auto-created table in GB (cloud and cloudsim; default 1).
    #[serde(default = "default_storage_gb")]
    pub storage_gb: u32,
    /// How long start-up waits for table DDL to complete, ms (default 50,000).
    #[serde(default = "default_table_timeout_ms")]
    pub table_timeout_ms: u64,
    /// How often start-up polls the table state while DDL runs, ms (default 3,000).
    #[serde(default = "default_table_poll_interval_ms")]
    pub table_poll_interval_ms: u64,
    /// Largest row key in UTF-8 bytes, 1–65,536 (default 512). A longer key fails its
    /// message permanently.
    #[serde(default = "default_max_key_bytes")]
    pub max_key_bytes: u64,
    /// Largest event document (compact JSON bytes), 1–67,108,864 (default 1 MiB). A larger
    /// one fails its message permanently.
    #[serde(default = "default_max_value_bytes")]
    pub max_value_bytes: u64,
    /// Timeout of each request, seconds, > 0 and ≤ 300 (default 10).
    #[serde(default = "default_request_timeout")]
    pub request_timeout_seconds: f64,
    /// Keep the published JSON text byte for byte next to the parsed payload in the event
    /// document (`payload_text`; default true). The NoSQL JSON type keeps values, not text
    /// (key order, number spelling and whitespace change), so without it a JSON payload
    /// reads back equal in value only. It doubles what a JSON payload counts against
    /// `max_value_bytes`.
    #[serde(default = "default_true")]
    pub store_payload_text: bool,
    /// Puts of a batch in flight at once, 1–256 (default 16); one ordering key's messages
    /// and one row key's writes go one after another.
    #[serde(default = "default_max_concurrent_requests")]
    pub max_concurrent_requests: usize,
    /// Extra attempts after a temporary failure within one write, 0–10 (default 3; 0 leaves
    /// every retry to the redelivery). The SDK does not retry throttling itself.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// First retry delay, ms, 0–60,000 (default 10).
    #[serde(default = "default_backoff_ms")]
    pub retry_backoff_ms: u64,
    /// Longest wait spent in place, ms, 0–300,000 (default 250); a longer one hands the
    /// message back with that delay instead.
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
    /// `commit_sync` (default: every put asks the store to flush its log before it answers)
    /// or `operator_confirmed` (the reference's value: the store's own default applies).
    #[serde(default)]
    pub durability: Durability,
}

fn default_endpoint() -> String {
    "127.0.0.1:8080".into()
}
fn default_table_name() -> String {
    "nats_sinks_events".into()
}
fn default_key_field() -> String {
    "sink_key".into()
}
fn default_value_field() -> String {
    "event_json".into()
}
fn default_stored_at_field() -> String {
    "stored_at_epoch_ns".into()
}
fn default_cloudsim_tenant() -> String {
    "cloudsim".into()
}
fn default_oci_profile() -> String {
    "DEFAULT".into()
}
fn default_units() -> u32 {
    10
}
fn default_storage_gb() -> u32 {
    1
}
fn default_table_timeout_ms() -> u64 {
    50_000
}
fn default_table_poll_interval_ms() -> u64 {
    3_000
}
fn default_max_key_bytes() -> u64 {
    512
}
fn default_max_value_bytes() -> u64 {
    MIB
}
fn default_request_timeout() -> f64 {
    10.0
}
fn default_true() -> bool {
    true
}
fn default_max_concurrent_requests() -> usize {
    16
}

impl Default for NoSqlSinkConfig {
    fn default() -> Self {
        Self {
            endpoint: default_endpoint(),
            deployment_mode: DeploymentMode::default(),
            auth_mode: None,
            table_name: default_table_name(),
            key_field: default_key_field(),
            value_field: default_value_field(),
            stored_at_field: default_stored_at_field(),
            namespace: None,
            compartment_id: None,
            cloudsim_tenant_id: default_cloudsim_tenant(),
            oci_config_file: None,
            oci_profile: default_oci_profile(),
            oci_private_key_passphrase_env: None,
            key_strategy: KeyStrategy::default(),
            key_prefix: None,
            duplicate_policy: DuplicatePolicy::default(),
            payload_mode: PayloadMode::default(),
            metadata_scope: MetadataScope::default(),
            auto_create: false,
            read_units: default_units(),
            write_units: default_units(),
            storage_gb: default_storage_gb(),
            table_timeout_ms: default_table_timeout_ms(),
            table_poll_interval_ms: default_table_poll_interval_ms(),
            max_key_bytes: default_max_key_bytes(),
            max_value_bytes: default_max_value_bytes(),
            request_timeout_seconds: default_request_timeout(),
            store_payload_text: true,
            max_concurrent_requests: default_max_concurrent_requests(),
            max_retries: default_max_retries(),
            retry_backoff_ms: default_backoff_ms(),
            retry_max_backoff_ms: default_max_backoff_ms(),
            retry_backoff_mode: default_backoff_mode(),
            retry_backoff_multiplier: default_backoff_multiplier(),
            retry_jitter: default_jitter(),
            durability: Durability::default(),
        }
    }
}

impl NoSqlSinkConfig {
    /// The reference's defaults with `endpoint` and `table_name` set.
    pub fn new(endpoint: impl Into<String>, table_name: impl Into<String>) -> Self {
        Self { endpoint: endpoint.into(), table_name: table_name.into(), ..Self::default() }
    }

    /// Parses and validates a `sink` section.
    pub fn from_section(section: &SinkSection) -> Result<Self, ConfigError> {
        let config: Self = section.parse()?;
        config.validate()?;
        Ok(config)
    }

    /// The effective authentication mode (the mode's default when not set).
    pub fn effective_auth_mode(&self) -> AuthMode {
        self.auth_mode.unwrap_or_else(|| AuthMode::default_for(self.deployment_mode))
    }

    /// The endpoint as a URL with its scheme (`http://` unless https is asked for or
    /// implied by port 443 or the cloud).
    pub fn endpoint_url(&self) -> String {
        let text = self.endpoint.trim_end_matches('/');
        if text.starts_with("http://") || text.starts_with("https://") {
            return text.to_owned();
        }
        let https = self.deployment_mode == DeploymentMode::Cloud || text.ends_with(":443") || !text.contains(':');
        format!("{}://{text}", if https { "https" } else { "http" })
    }

    /// The table as requests name it: `namespace:table` when a namespace is set.
    pub fn qualified_table(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}:{}", self.table_name),
            None => self.table_name.clone(),
        }
    }

    /// The `CREATE TABLE` statement of `auto_create` (the reference's DDL).
    pub fn create_table_ddl(&self) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {} ({} STRING, {} JSON, {} LONG, PRIMARY KEY({}))",
            self.qualified_table(),
            self.key_field,
            self.value_field,
            self.stored_at_field,
            self.key_field
        )
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

    /// The in-place retries of a write (and of a read-back): the `retry_*` backoff,
    /// `max_retries`, and the request timeout.
    pub(crate) fn in_place(&self) -> InPlace {
        self.retry().in_place(std::time::Duration::from_secs_f64(self.request_timeout_seconds))
    }

    /// Checks every field; each problem is reported as `sink.<field>`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Issues::default();
        if let Err(m) = check_endpoint(&self.endpoint) {
            issues.push("sink.endpoint", m);
        } else if self.deployment_mode == DeploymentMode::Cloud && !self.endpoint_url().starts_with("https://") {
            issues.push("sink.endpoint", "must use https with deployment_mode `cloud`");
        }
        let auth = self.effective_auth_mode();
        if !auth.allowed_in(self.deployment_mode) {
            issues.push(
                "sink.auth_mode",
                format!("`{}` cannot be used with deployment_mode `{}`", auth.as_str(), self.deployment_mode.as_str()),
            );
        }
        self.validate_names(&mut issues);
        self.validate_credentials(auth, &mut issues);
        if let Some(key_prefix) = &self.key_prefix
            && let Err(m) = check_token(key_prefix, 128, |c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        {
            issues.push("sink.key_prefix", m);
        }
        issues.range("sink.read_units", u64::from(self.read_units), 1, 1_000_000);
        issues.range("sink.write_units", u64::from(self.write_units), 1, 1_000_000);
        issues.range("sink.storage_gb", u64::from(self.storage_gb), 1, 1_000_000);
        issues.range("sink.table_timeout_ms", self.table_timeout_ms, 1, 3_600_000);
        issues.range("sink.table_poll_interval_ms", self.table_poll_interval_ms, 1, 600_000);
        issues.range("sink.max_key_bytes", self.max_key_bytes, 1, 65_536);
        issues.range("sink.max_value_bytes", self.max_value_bytes, 1, 64 * MIB);
        if let Err(m) = check_seconds(self.request_timeout_seconds, false, 300.0) {
            issues.push("sink.request_timeout_seconds", m);
        }
        issues.range("sink.max_concurrent_requests", self.max_concurrent_requests as u64, 1, 256);
        self.retry().validate(&mut issues);
        issues.finish()
    }

    fn validate_names(&self, issues: &mut Issues) {
        if let Err(m) = check_table_name(&self.table_name) {
            issues.push("sink.table_name", m);
        }
        let columns = [
            ("sink.key_field", &self.key_field),
            ("sink.value_field", &self.value_field),
            ("sink.stored_at_field", &self.stored_at_field),
        ];
        for (field, value) in columns {
            if let Err(m) = check_identifier(value) {
                issues.push(field, m);
            }
        }
        let lower: Vec<String> = columns.iter().map(|(_, v)| v.to_ascii_lowercase()).collect();
        if lower[0] == lower[1] || lower[0] == lower[2] {
            issues.push("sink.key_field", "must differ from sink.value_field and sink.stored_at_field");
        }
        if lower[1] == lower[2] {
            issues.push("sink.value_field", "must differ from sink.stored_at_field");
        }
        if let Some(ns) = &self.namespace {
            if let Err(m) = check_identifier(ns) {
                issues.push("sink.namespace", m);
            } else if self.deployment_mode != DeploymentMode::Kvstore {
                issues.push("sink.namespace", "is only used with deployment_mode `kvstore` (use compartment_id)");
            }
        }
        if let Some(compartment) = &self.compartment_id {
            let ok = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
            if let Err(m) = check_token(compartment, 255, ok) {
                issues.push("sink.compartment_id", m);
            } else if self.deployment_mode == DeploymentMode::Kvstore {
                issues.push("sink.compartment_id", "is only used with deployment_mode `cloud` or `cloudsim`");
            }
        }
    }

    fn validate_credentials(&self, auth: AuthMode, issues: &mut Issues) {
        if self.cloudsim_tenant_id != default_cloudsim_tenant() {
            issues.push(
                "sink.cloudsim_tenant_id",
                "only `cloudsim` is supported: oracle-nosql-rust-sdk 0.1.5 authenticates to cloudsim with its own \
                 fixed tenant",
            );
        }
        if let Some(file) = &self.oci_config_file {
            if let Err(m) = check_text(file, 4096) {
                issues.push("sink.oci_config_file", m);
            } else if auth != AuthMode::OciConfigFile {
                issues.push("sink.oci_config_file", "requires auth_mode `oci_config_file`");
            }
        }
        if let Err(m) = check_token(&self.oci_profile, 128, |c| c.is_ascii_alphanumeric() || "_.:-".contains(c)) {
            issues.push("sink.oci_profile", m);
        }
        if let Some(name) = &self.oci_private_key_passphrase_env {
            let field = "sink.oci_private_key_passphrase_env";
            if is_env_name(name, EnvName::Uppercase) {
                issues.push(
                    field,
                    "encrypted OCI keys are not supported by oracle-nosql-rust-sdk 0.1.5 (use an unencrypted key \
                     file readable only by the sink, or auth_mode `instance_principal`)",
                );
            } else {
                check_uppercase_env_name(name, field, issues);
            }
        }
    }
}

/// A NoSQL identifier: a letter, then letters, digits and `_`; at most 64 characters.
fn check_identifier(value: &str) -> Result<(), String> {
    check_text(value, 64)?;
    let first_ok = value.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if !first_ok || !value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err("must be an identifier (a letter, then letters, digits or `_`)".into());
    }
    Ok(())
}

fn check_table_name(value: &str) -> Result<(), String> {
    let parts: Vec<&str> = value.split('.').collect();
    if parts.len() > 2 {
        return Err("must be one or two dot-separated identifiers".into());
    }
    for part in parts {
        check_identifier(part).map_err(|m| format!("part `{part}` {m}"))?;
    }
    Ok(())
}

fn check_endpoint(text: &str) -> Result<(), String> {
    check_text(text, 512)?;
    let with_scheme = if text.contains("://") { text.to_owned() } else { format!("http://{text}") };
    let url = url::Url::parse(&with_scheme).map_err(|e| format!("is not a valid host:port or URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("scheme must be http or https".into());
    }
    match url.host_str() {
        Some(h) if !h.is_empty() => {
            let bare = h.trim_start_matches('[').trim_end_matches(']');
            if bare.contains(':') && bare.parse::<IpAddr>().is_err() {
                return Err("must include a valid host".into());
            }
        }
        _ => return Err("must include a host".into()),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not include credentials".into());
    }
    if url.port() == Some(0) {
        return Err("port must be between 1 and 65535".into());
    }
    if url.path() != "/"
        || url.query().is_some()
        || url.fragment().is_some()
        || text.trim_end_matches('/').contains("/?")
    {
        return Err("must not include a path, query or fragment".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: serde_json::Value) -> Result<NoSqlSinkConfig, ConfigError> {
        let section: SinkSection = serde_json::from_value(value).unwrap();
        NoSqlSinkConfig::from_section(&section)
    }

    fn paths(err: &ConfigError) -> Vec<&str> {
        err.issues.iter().map(|i| i.path.as_str()).collect()
    }

    #[test]
    fn reference_basic_example_parses_unchanged() {
        let config = parse(serde_json::json!({
            "type": "oracle_nosql",
            "endpoint": "127.0.0.1:8080",
            "deployment_mode": "kvstore",
            "table_name": "nats_sinks_events",
            "key_strategy": "stream_sequence",
            "duplicate_policy": "skip_existing",
            "auto_create": false
        }))
        .unwrap();
        assert_eq!(config.key_strategy, KeyStrategy::StreamSequence);
        assert_eq!(config.endpoint_url(), "http://127.0.0.1:8080");
        assert_eq!(config.effective_auth_mode(), AuthMode::StoreAccessToken);
    }

    #[test]
    fn every_reference_field_parses() {
        let config = parse(serde_json::json!({
            "type": "oracle_nosql",
            "endpoint": "https://nosql.us-ashburn-1.oci.oraclecloud.com",
            "deployment_mode": "cloud",
            "auth_mode": "oci_config_file",
            "table_name": "events",
            "key_field": "k",
            "value_field": "v",
            "stored_at_field": "t",
            "compartment_id": "ocid1.compartment.oc1..aaaa",
            "cloudsim_tenant_id": "cloudsim",
            "oci_config_file": "/etc/nats-sinks/oci.config",
            "oci_profile": "DEFAULT",
            "key_strategy": "idempotency_key",
            "key_prefix": "prod",
            "duplicate_policy": "fail_existing",
            "payload_mode": "json_or_envelope",
            "auto_create": true,
            "read_units": 10,
            "write_units": 10,
            "storage_gb": 1,
            "table_timeout_ms": 50000,
            "table_poll_interval_ms": 3000,
            "max_key_bytes": 512,
            "max_value_bytes": 1048576,
            "request_timeout_seconds": 10,
            "durability": "operator_confirmed"
        }))
        .unwrap();
        assert_eq!(config.deployment_mode, DeploymentMode::Cloud);
        assert_eq!(config.duplicate_policy, DuplicatePolicy::FailExisting);
        assert_eq!(config.durability, Durability::OperatorConfirmed);
        assert_eq!(
            config.create_table_ddl(),
            "CREATE TABLE IF NOT EXISTS events (k STRING, v JSON, t LONG, PRIMARY KEY(k))"
        );
    }

    #[test]
    fn minimal_section_gets_the_reference_defaults() {
        let config = parse(serde_json::json!({"type": "oracle_nosql"})).unwrap();
        assert_eq!(config, NoSqlSinkConfig::default());
        assert_eq!(config.endpoint, "127.0.0.1:8080");
        assert_eq!(config.table_name, "nats_sinks_events");
        assert_eq!(
            config.create_table_ddl(),
            "CREATE TABLE IF NOT EXISTS nats_sinks_events (sink_key STRING, event_json JSON, \
             stored_at_epoch_ns LONG, PRIMARY KEY(sink_key))"
        );
        assert_eq!(config.max_value_bytes, MIB);
        assert_eq!(config.max_key_bytes, 512);
        assert_eq!(config.durability, Durability::CommitSync, "acknowledged puts are flushed by default");
    }

    #[test]
    fn endpoints_get_their_scheme() {
        let at =
            |e: &str, mode: DeploymentMode| NoSqlSinkConfig { deployment_mode: mode, ..NoSqlSinkConfig::new(e, "t") };
        assert_eq!(at("localhost:8080", DeploymentMode::Kvstore).endpoint_url(), "http://localhost:8080");
        assert_eq!(at("proxy.example:443", DeploymentMode::Kvstore).endpoint_url(), "https://proxy.example:443");
        assert_eq!(at("https://p.example:8443/", DeploymentMode::Kvstore).endpoint_url(), "https://p.example:8443");
        assert_eq!(at("nosql.example", DeploymentMode::Cloud).endpoint_url(), "https://nosql.example");
    }

    #[test]
    fn namespace_qualifies_the_table() {
        let config = NoSqlSinkConfig { namespace: Some("ops".into()), ..NoSqlSinkConfig::new("h:1", "events") };
        assert_eq!(config.qualified_table(), "ops:events");
        assert!(config.create_table_ddl().starts_with("CREATE TABLE IF NOT EXISTS ops:events ("));
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases: &[(serde_json::Value, &str)] = &[
            (serde_json::json!({"endpoint": "http://u:p@h:8080"}), "sink.endpoint"),
            (serde_json::json!({"endpoint": "http://h:8080/path"}), "sink.endpoint"),
            (serde_json::json!({"endpoint": "ftp://h:8080"}), "sink.endpoint"),
            (serde_json::json!({"endpoint": "h:0"}), "sink.endpoint"),
            (serde_json::json!({"endpoint": "http://h:8080", "deployment_mode": "cloud"}), "sink.endpoint"),
            (serde_json::json!({"deployment_mode": "kvstore", "auth_mode": "cloudsim"}), "sink.auth_mode"),
            (serde_json::json!({"deployment_mode": "cloudsim", "auth_mode": "instance_principal"}), "sink.auth_mode"),
            (
                serde_json::json!({"endpoint": "https://h", "deployment_mode": "cloud", "auth_mode": "store_access_token"}),
                "sink.auth_mode",
            ),
            (serde_json::json!({"deployment_mode": "mongo"}), "sink.deployment_mode"),
            (serde_json::json!({"table_name": "a.b.c"}), "sink.table_name"),
            (serde_json::json!({"table_name": "1abc"}), "sink.table_name"),
            (serde_json::json!({"table_name": "a-b"}), "sink.table_name"),
            (serde_json::json!({"key_field": "a b"}), "sink.key_field"),
            (serde_json::json!({"value_field": "sink_key"}), "sink.key_field"),
            (serde_json::json!({"value_field": "x", "stored_at_field": "X"}), "sink.value_field"),
            (serde_json::json!({"namespace": "a:b"}), "sink.namespace"),
            (serde_json::json!({"deployment_mode": "cloudsim", "namespace": "ns"}), "sink.namespace"),
            (serde_json::json!({"compartment_id": "c1"}), "sink.compartment_id"),
            (
                serde_json::json!({"deployment_mode": "cloudsim", "cloudsim_tenant_id": "other"}),
                "sink.cloudsim_tenant_id",
            ),
            (serde_json::json!({"oci_config_file": "/x"}), "sink.oci_config_file"),
            (
                serde_json::json!({"endpoint": "https://h", "deployment_mode": "cloud", "oci_private_key_passphrase_env": "OCI_PASS"}),
                "sink.oci_private_key_passphrase_env",
            ),
            (serde_json::json!({"oci_private_key_passphrase_env": "lower"}), "sink.oci_private_key_passphrase_env"),
            (serde_json::json!({"key_prefix": "a:b"}), "sink.key_prefix"),
            (serde_json::json!({"key_strategy": "random"}), "sink.key_strategy"),
            (serde_json::json!({"duplicate_policy": "merge"}), "sink.duplicate_policy"),
            (serde_json::json!({"payload_mode": "xml"}), "sink.payload_mode"),
            (serde_json::json!({"read_units": 0}), "sink.read_units"),
            (serde_json::json!({"table_timeout_ms": 0}), "sink.table_timeout_ms"),
            (serde_json::json!({"max_key_bytes": 0}), "sink.max_key_bytes"),
            (serde_json::json!({"max_value_bytes": 0}), "sink.max_value_bytes"),
            (serde_json::json!({"request_timeout_seconds": 0}), "sink.request_timeout_seconds"),
            (serde_json::json!({"max_concurrent_requests": 0}), "sink.max_concurrent_requests"),
            (serde_json::json!({"max_retries": 11}), "sink.max_retries"),
            (serde_json::json!({"retry_backoff_ms": 900, "retry_max_backoff_ms": 100}), "sink.retry_max_backoff_ms"),
            (serde_json::json!({"durability": "sync"}), "sink.durability"),
            (serde_json::json!({"password": "x"}), "sink"),
        ];
        for (section, field) in cases {
            let mut section = section.clone();
            section["type"] = "oracle_nosql".into();
            let err = parse(section.clone()).expect_err(&section.to_string());
            assert!(
                paths(&err).iter().any(|p| p == field || p.starts_with(&format!("{field}."))),
                "{section}: expected {field}, got {err}"
            );
        }
    }

    #[test]
    fn each_mode_accepts_its_own_auth() {
        for (mode, auth, endpoint) in [
            ("kvstore", "store_access_token", "127.0.0.1:8080"),
            ("cloudsim", "cloudsim", "localhost:8080"),
            ("cloud", "oci_config_file", "https://nosql.example"),
            ("cloud", "instance_principal", "https://nosql.example"),
        ] {
            let section = serde_json::json!({"type": "oracle_nosql", "deployment_mode": mode, "auth_mode": auth, "endpoint": endpoint});
            assert!(parse(section.clone()).is_ok(), "{section}");
        }
    }
}
