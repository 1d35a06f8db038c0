//! [`CoherenceSinkConfig`]: the `sink` section of a `type: coherence` configuration.
//!
//! Field names, values, defaults and bounds are the reference's, so a reference Coherence
//! sink section parses unchanged (`serializer: "json"` and `durability:
//! "operator_confirmed"` included). The fields this implementation adds (TLS, the protocol
//! choice, concurrency and in-write retries) default to behaviour at least as safe as the
//! reference's. Unknown fields are rejected, and every validation problem names its field
//! as `sink.<field>`.
//!
//! The destination is fixed by the operator: messages influence only entry keys (through
//! the key strategy) and values, never the address, scope or cache. TLS material is read
//! from files; nothing secret is configured inline.

use serde::{Deserialize, Serialize};
use sinks_contract::config::{Issues, SinkSection};
use sinks_contract::existing::{ExistingKeyPolicy, SkipReplaceFailExisting};
use sinks_contract::{ConfigError, PayloadMode};
use sinks_toolkit::checks::{check_seconds, check_text, check_token};
use sinks_toolkit::metadata::MetadataScope;
use sinks_toolkit::retry::settings::{
    default_backoff_mode, default_backoff_multiplier, default_jitter, default_max_retries,
};
use sinks_toolkit::retry::{BackoffMode, InPlace, Jitter, RetrySettings};

const MIB: u64 = 1024 * 1024;

/// Which identity an entry key is built from: `idempotency_key` (default: the envelope's
/// key, `stream-sequence:S:N`, else `message-id:ID`, else `payload-sha256:SUBJ:HEX`),
/// `stream_sequence`, `origin_sequence` (the stream the event was first stored in, through a
/// mirror or a source), `message_id` or `payload_sha256`.
pub use sinks_contract::idempotency::KeySource as KeyStrategy;

/// Whether entries go to a Coherence cache or map.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Storage {
    /// A `NamedCache` (default; entries may expire with `ttl_seconds`).
    #[default]
    Cache,
    /// A `NamedMap` (no expiry).
    Map,
}

/// The serializer of keys and values on the wire: only `json`, as in the reference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Serializer {
    /// Coherence's JSON format: the byte `0x15` followed by UTF-8 JSON.
    #[default]
    Json,
}

/// What a write does when its key already holds an entry: `skip_existing` (`putIfAbsent`: an
/// existing entry is kept; same payload → duplicate, different payload → conflict, kept and
/// logged; the default), `replace` (`put`: the newest delivery replaces the entry) or
/// `fail_existing` (`putIfAbsent`: same payload → duplicate; a different payload fails the
/// message permanently, dead-letter). The contract's one policy type, in this sink's words;
/// what each answer means is `sinks_contract::existing`.
pub type DuplicatePolicy = ExistingKeyPolicy<SkipReplaceFailExisting>;

/// The only durability statement the reference knows: the operator confirms the cluster's
/// durability (backup count, persistence) out of band.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// The default and only value.
    #[default]
    OperatorConfirmed,
}

/// Which gRPC protocol of the Coherence proxy to speak.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// Try v1 (`ProxyService.subChannel`) and fall back to the legacy `NamedCacheService`
    /// when the proxy does not offer it (default).
    #[default]
    Auto,
    /// v1 only.
    V1,
    /// The legacy unary `NamedCacheService` only.
    Legacy,
}

impl Protocol {
    /// The value as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::V1 => "v1",
            Self::Legacy => "legacy",
        }
    }
}

/// Settings of the Oracle Coherence CE sink (`sink.type = "coherence"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoherenceSinkConfig {
    /// The gRPC proxy, `host:port` without scheme or userinfo (default `127.0.0.1:1408`).
    #[serde(default = "default_address")]
    pub address: String,
    /// The Coherence scope (session) name; empty for the default (default `""`).
    #[serde(default)]
    pub scope: String,
    /// Cache or map name: `[A-Za-z0-9._-]`, starting with a letter or digit, at most 128
    /// characters (default `nats_sinks_events`).
    #[serde(default = "default_cache_name")]
    pub cache_name: String,
    /// `cache` (default) or `map`.
    #[serde(default)]
    pub storage: Storage,
    /// `json`, the only value.
    #[serde(default)]
    pub serializer: Serializer,
    /// `idempotency_key` (default), `stream_sequence`, `origin_sequence` (the stream the event was
    /// first stored in, through a mirror or a source), `message_id` or `payload_sha256`.
    #[serde(default)]
    pub key_strategy: KeyStrategy,
    /// Optional namespace written as `<key_prefix>:` in front of every key
    /// (`[A-Za-z0-9_.:-]`, starting with a letter or digit, at most 128 characters).
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
    /// Expiry of each entry, seconds, 1–31,536,000 (default none: entries never expire).
    /// Only with `storage = "cache"`.
    #[serde(default)]
    pub ttl_seconds: Option<u64>,
    /// Largest key in UTF-8 bytes, 64–4096 (default 512). A longer key fails its message
    /// permanently.
    #[serde(default = "default_max_key_bytes")]
    pub max_key_bytes: u64,
    /// Largest value (the JSON document) in bytes, 1–16 MiB (default 1 MiB). A larger value
    /// fails its message permanently. Values over 4 MiB also need the proxy's gRPC inbound
    /// message limit raised.
    #[serde(default = "default_max_value_bytes")]
    pub max_value_bytes: u64,
    /// Timeout of each request, seconds, > 0 and ≤ 300 (default 10).
    #[serde(default = "default_request_timeout")]
    pub request_timeout_seconds: f64,
    /// How long start-up waits for the proxy to answer, seconds, 0–300 (default 30; 0 = one
    /// attempt).
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout_seconds: f64,
    /// Accepted for compatibility with the reference, 0–300 (default 30). This sink does not
    /// hold a session open across an outage: every request reconnects as needed, and a
    /// request that cannot be sent fails temporarily.
    #[serde(default = "default_session_disconnect")]
    pub session_disconnect_seconds: f64,
    /// `operator_confirmed` (the only value, as in the reference).
    #[serde(default)]
    pub durability: Durability,
    /// `auto` (default: v1, else legacy), `v1` or `legacy`.
    #[serde(default)]
    pub protocol: Protocol,
    /// Connect to the proxy with TLS (default false). With TLS, `tls_ca_file` names the CA
    /// (default: the system roots).
    #[serde(default)]
    pub tls_enabled: bool,
    /// PEM file of the CA that signed the proxy's certificate (TLS only).
    #[serde(default)]
    pub tls_ca_file: Option<String>,
    /// PEM file of the client certificate for mutual TLS (with `tls_key_file`).
    #[serde(default)]
    pub tls_cert_file: Option<String>,
    /// PEM file of the client certificate's private key (with `tls_cert_file`).
    #[serde(default)]
    pub tls_key_file: Option<String>,
    /// Server name the proxy's certificate must carry (default: the host of `address`).
    #[serde(default)]
    pub tls_server_name: Option<String>,
    /// Most requests in flight per write, 1–1024 (default 128). Requests share one gRPC
    /// stream; messages of one ordering key or one entry key go one after another, in
    /// order.
    #[serde(default = "default_max_concurrent_requests")]
    pub max_concurrent_requests: usize,
    /// Extra attempts after a temporary failure within one write, 0–10 (default 3; 0 leaves
    /// every retry to the JetStream redelivery). A retry is the same `putIfAbsent` / `put`,
    /// so it is exactly as safe as a redelivery.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Delay before the first in-write retry, milliseconds, 0–60,000 (default 50).
    #[serde(default = "default_retry_backoff_ms")]
    pub retry_backoff_ms: u64,
    /// Longest wait in place, milliseconds, 0–300,000, ≥ `retry_backoff_ms` (default 1000).
    /// A longer wait, or a retry that would not finish within the write's budget, hands the
    /// message back for a redelivery after that wait instead.
    #[serde(default = "default_retry_max_backoff_ms")]
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
}

fn default_address() -> String {
    "127.0.0.1:1408".into()
}
fn default_cache_name() -> String {
    "nats_sinks_events".into()
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
fn default_ready_timeout() -> f64 {
    30.0
}
fn default_session_disconnect() -> f64 {
    30.0
}
fn default_max_concurrent_requests() -> usize {
    128
}
/// This sink's first retry delay (50 ms; the other sinks' default is 10 ms).
fn default_retry_backoff_ms() -> u64 {
    50
}
/// This sink's longest wait in place (1000 ms; the other sinks' default is 250 ms).
fn default_retry_max_backoff_ms() -> u64 {
    1000
}

impl Default for CoherenceSinkConfig {
    fn default() -> Self {
        serde_json::from_value(serde_json::json!({})).unwrap_or_else(|_| unreachable!())
    }
}

impl CoherenceSinkConfig {
    /// A config with every default for the proxy at `address` and the cache `cache_name`.
    pub fn new(address: impl Into<String>, cache_name: impl Into<String>) -> Self {
        Self { address: address.into(), cache_name: cache_name.into(), ..Self::default() }
    }

    /// Parses and validates a `sink` section.
    pub fn from_section(section: &SinkSection) -> Result<Self, ConfigError> {
        let config: Self = section.parse()?;
        config.validate()?;
        Ok(config)
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

    /// The host part of `address`.
    pub(crate) fn host(&self) -> &str {
        self.address.rsplit_once(':').map_or(self.address.as_str(), |(host, _)| host)
    }

    /// Checks every field; each problem is reported as `sink.<field>`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Issues::default();
        if let Err(m) = check_address(&self.address) {
            issues.push("sink.address", m);
        }
        if !self.scope.is_empty()
            && let Err(m) = check_text(&self.scope, 128)
        {
            issues.push("sink.scope", m);
        }
        if let Err(m) = check_token(&self.cache_name, 128, |c| c.is_ascii_alphanumeric() || "_.-".contains(c)) {
            issues.push(
                "sink.cache_name",
                format!("{m} (letters, digits, `.`, `_`, `-`, starting with a letter or digit)"),
            );
        }
        if let Some(prefix) = &self.key_prefix
            && let Err(m) = check_token(prefix, 128, |c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
        {
            issues.push(
                "sink.key_prefix",
                format!("{m} (letters, digits, `.`, `_`, `:`, `-`, starting with a letter or digit)"),
            );
        }
        if let Some(ttl) = self.ttl_seconds {
            issues.range("sink.ttl_seconds", ttl, 1, 31_536_000);
            if self.storage == Storage::Map {
                issues.push("sink.ttl_seconds", "is only supported when sink.storage is `cache`");
            }
        }
        issues.range("sink.max_key_bytes", self.max_key_bytes, 64, 4096);
        issues.range("sink.max_value_bytes", self.max_value_bytes, 1, 16 * MIB);
        let seconds = [
            ("sink.request_timeout_seconds", self.request_timeout_seconds, false),
            ("sink.ready_timeout_seconds", self.ready_timeout_seconds, true),
            ("sink.session_disconnect_seconds", self.session_disconnect_seconds, true),
        ];
        for (field, value, zero_ok) in seconds {
            if let Err(m) = check_seconds(value, zero_ok, 300.0) {
                issues.push(field, m);
            }
        }
        self.validate_tls(&mut issues);
        issues.range("sink.max_concurrent_requests", self.max_concurrent_requests as u64, 1, 1024);
        self.retry().validate(&mut issues);
        issues.finish()
    }

    fn validate_tls(&self, issues: &mut Issues) {
        let files = [
            ("sink.tls_ca_file", &self.tls_ca_file),
            ("sink.tls_cert_file", &self.tls_cert_file),
            ("sink.tls_key_file", &self.tls_key_file),
        ];
        for (field, value) in files {
            if let Some(path) = value {
                if let Err(m) = check_text(path, 4096) {
                    issues.push(field, m);
                } else if !self.tls_enabled {
                    issues.push(field, "requires sink.tls_enabled = true");
                }
            }
        }
        if let Some(name) = &self.tls_server_name {
            if let Err(m) = check_token(name, 253, |c| c.is_ascii_alphanumeric() || ".-".contains(c)) {
                issues.push("sink.tls_server_name", m);
            } else if !self.tls_enabled {
                issues.push("sink.tls_server_name", "requires sink.tls_enabled = true");
            }
        }
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(_), None) => issues.push("sink.tls_key_file", "is required with sink.tls_cert_file"),
            (None, Some(_)) => issues.push("sink.tls_cert_file", "is required with sink.tls_key_file"),
            _ => {}
        }
    }
}

/// `host:port`: no scheme or userinfo, a host of `[A-Za-z0-9_.-]` (at most 254 characters,
/// starting with a letter or digit), a port 1–65535.
fn check_address(address: &str) -> Result<(), String> {
    check_text(address, 260)?;
    let shape = "must be a host:port value without scheme or userinfo";
    if address.contains("://") || address.contains('@') {
        return Err(shape.into());
    }
    let (host, port) = address.rsplit_once(':').ok_or(shape)?;
    check_token(host, 254, |c| c.is_ascii_alphanumeric() || "_.-".contains(c)).map_err(|_| shape.to_owned())?;
    if port.is_empty() || port.len() > 5 || !port.chars().all(|c| c.is_ascii_digit()) {
        return Err(shape.into());
    }
    match port.parse::<u32>() {
        Ok(p) if (1..=65_535).contains(&p) => Ok(()),
        _ => Err("port must be between 1 and 65535".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: serde_json::Value) -> Result<CoherenceSinkConfig, ConfigError> {
        let section: SinkSection = serde_json::from_value(value).unwrap();
        CoherenceSinkConfig::from_section(&section)
    }

    fn paths(err: &ConfigError) -> Vec<&str> {
        err.issues.iter().map(|i| i.path.as_str()).collect()
    }

    #[test]
    fn reference_example_parses_unchanged() {
        let config = parse(serde_json::json!({
            "type": "coherence",
            "address": "127.0.0.1:1408",
            "scope": "",
            "cache_name": "nats_sinks_events",
            "storage": "cache",
            "serializer": "json",
            "key_strategy": "idempotency_key",
            "key_prefix": "orders",
            "duplicate_policy": "skip_existing",
            "payload_mode": "json_or_envelope",
            "ttl_seconds": 86400,
            "max_key_bytes": 512,
            "max_value_bytes": 1048576,
            "request_timeout_seconds": 10,
            "ready_timeout_seconds": 30,
            "session_disconnect_seconds": 30,
            "durability": "operator_confirmed"
        }))
        .unwrap();
        assert_eq!(config.ttl_seconds, Some(86_400));
        assert_eq!(config.key_prefix.as_deref(), Some("orders"));
        assert_eq!(config.host(), "127.0.0.1");
    }

    #[test]
    fn minimal_section_gets_the_reference_defaults() {
        let config = parse(serde_json::json!({"type": "coherence"})).unwrap();
        assert_eq!(config, CoherenceSinkConfig::default());
        assert_eq!(config.address, "127.0.0.1:1408");
        assert_eq!(config.cache_name, "nats_sinks_events");
        assert_eq!(config.storage, Storage::Cache);
        assert_eq!(config.duplicate_policy, DuplicatePolicy::SkipExisting);
        assert_eq!(config.max_key_bytes, 512);
        assert_eq!(config.max_value_bytes, MIB);
        assert_eq!(config.protocol, Protocol::Auto);
        assert!(!config.tls_enabled);
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases: &[(serde_json::Value, &str)] = &[
            (serde_json::json!({"address": "http://h:1408"}), "sink.address"),
            (serde_json::json!({"address": "u@h:1408"}), "sink.address"),
            (serde_json::json!({"address": "h"}), "sink.address"),
            (serde_json::json!({"address": "h:0"}), "sink.address"),
            (serde_json::json!({"address": "h:70000"}), "sink.address"),
            (serde_json::json!({"scope": " s"}), "sink.scope"),
            (serde_json::json!({"cache_name": "a/b"}), "sink.cache_name"),
            (serde_json::json!({"cache_name": "_a"}), "sink.cache_name"),
            (serde_json::json!({"key_prefix": "a b"}), "sink.key_prefix"),
            (serde_json::json!({"storage": "map", "ttl_seconds": 5}), "sink.ttl_seconds"),
            (serde_json::json!({"ttl_seconds": 0}), "sink.ttl_seconds"),
            (serde_json::json!({"serializer": "pof"}), "sink.serializer"),
            (serde_json::json!({"durability": "fsync"}), "sink.durability"),
            (serde_json::json!({"duplicate_policy": "merge"}), "sink.duplicate_policy"),
            (serde_json::json!({"max_key_bytes": 8}), "sink.max_key_bytes"),
            (serde_json::json!({"max_value_bytes": 0}), "sink.max_value_bytes"),
            (serde_json::json!({"request_timeout_seconds": 0}), "sink.request_timeout_seconds"),
            (serde_json::json!({"ready_timeout_seconds": 301}), "sink.ready_timeout_seconds"),
            (serde_json::json!({"session_disconnect_seconds": -1}), "sink.session_disconnect_seconds"),
            (serde_json::json!({"tls_ca_file": "/ca.pem"}), "sink.tls_ca_file"),
            (serde_json::json!({"tls_enabled": true, "tls_cert_file": "/c.pem"}), "sink.tls_key_file"),
            (serde_json::json!({"tls_enabled": true, "tls_server_name": "a b"}), "sink.tls_server_name"),
            (serde_json::json!({"max_concurrent_requests": 0}), "sink.max_concurrent_requests"),
            (serde_json::json!({"retry_backoff_ms": 900, "retry_max_backoff_ms": 100}), "sink.retry_max_backoff_ms"),
            (serde_json::json!({"protocol": "v2"}), "sink.protocol"),
            (serde_json::json!({"password": "x"}), "sink"),
        ];
        for (section, field) in cases {
            let mut section = section.clone();
            section["type"] = "coherence".into();
            let err = parse(section.clone()).expect_err(&section.to_string());
            assert!(
                paths(&err).iter().any(|p| p == field || p.starts_with(&format!("{field}."))),
                "{section}: expected {field}, got {err}"
            );
        }
    }

    #[test]
    fn tls_with_mutual_authentication_is_valid() {
        let config = parse(serde_json::json!({"type": "coherence", "address": "coherence.example:1408",
            "tls_enabled": true, "tls_ca_file": "/etc/ca.pem", "tls_cert_file": "/etc/c.pem",
            "tls_key_file": "/etc/k.pem", "tls_server_name": "coherence.example"}))
        .unwrap();
        assert!(config.tls_enabled);
        assert_eq!(config.host(), "coherence.example");
    }
}
