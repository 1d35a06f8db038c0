//! [`HttpSinkConfig`]: the `sink` section of a `type: http` configuration.
//!
//! Field names, values and defaults are the reference's, so a reference JSON HTTP-sink
//! section parses unchanged; the fields this implementation adds (concurrency, batch mode,
//! inquiry, TLS, pool, duplicate and conflict statuses) all default to the reference's
//! behaviour minus its limits. Unknown fields are rejected, and every validation problem
//! names its field as `sink.<field>`.
//!
//! The endpoint is fixed by the operator: messages influence only the request body and the
//! idempotency key, never the URL, method, headers or retry policy. Secrets reach the
//! request only through `headers_env` (names of environment variables, read at every
//! request); a sensitive header name in `headers`, a URL with credentials, a query string or
//! a fragment, and plain `http://` outside loopback testing are all refused.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use reqwest::Url;
use serde::{Deserialize, Serialize};
use sinks_contract::ConfigError;
use sinks_contract::PayloadMode;
use sinks_contract::config::{EnvName, Issues, SinkSection, is_env_name};
use sinks_toolkit::metadata::MetadataScope;
use sinks_toolkit::retry::{BackoffMode, Jitter};

/// Hosts that `allow_http_for_local_testing` accepts for `http://` URLs.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
/// Header names the sink sets itself; they may not be configured.
pub(crate) const FRAMEWORK_HEADERS: [&str; 10] = [
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "user-agent",
];
/// Header names that carry credentials: only `headers_env` may set them.
pub(crate) const SENSITIVE_HEADERS: [&str; 5] =
    ["authorization", "cookie", "proxy-authorization", "x-api-key", "x-auth-token"];
/// Placeholder replaced by the URL-encoded idempotency key in `inquiry_url`.
pub(crate) const KEY_PLACEHOLDER: &str = "{key}";

const MAX_HEADERS: usize = 32;
const MAX_HEADER_VALUE_LEN: usize = 2048;
const MAX_URL_PATH_LEN: usize = 2048;
const MAX_STATUS_CODES: usize = 64;

/// HTTP method of every write request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum HttpMethod {
    /// `POST` (default).
    #[default]
    Post,
    /// `PUT`.
    Put,
    /// `PATCH`.
    Patch,
}

impl HttpMethod {
    /// The method name as sent.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
        }
    }
}

impl TryFrom<String> for HttpMethod {
    type Error = String;

    /// Case-insensitive and trimmed, as the reference normalizes it.
    fn try_from(value: String) -> Result<Self, Self::Error> {
        match value.trim().to_ascii_uppercase().as_str() {
            "POST" => Ok(Self::Post),
            "PUT" => Ok(Self::Put),
            "PATCH" => Ok(Self::Patch),
            _ => Err("must be POST, PUT or PATCH".to_owned()),
        }
    }
}

impl From<HttpMethod> for String {
    fn from(method: HttpMethod) -> Self {
        method.as_str().to_owned()
    }
}

/// What the request body holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BodyFormat {
    /// The `nats_sinks.http.message.v1` envelope: identity, metadata and the payload.
    #[default]
    Envelope,
    /// The normalized payload only (published JSON, or the payload wrapper).
    Payload,
}

/// How the `Idempotency-Key` of a message is derived (always from the event identity).
pub use sinks_contract::idempotency::KeySource as KeyStrategy;

/// Several envelopes per request, for endpoints that accept batches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchMode {
    /// One request per message (default, the reference's behaviour).
    #[default]
    Off,
    /// A JSON array of envelopes (`Content-Type: application/json`).
    JsonArray,
    /// One envelope per line (`Content-Type: application/x-ndjson`).
    Ndjson,
}

/// Which HTTP versions the client speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HttpVersion {
    /// HTTP/2 when TLS negotiates it (ALPN), else HTTP/1.1.
    #[default]
    Auto,
    /// HTTP/1.1 only.
    Http1Only,
    /// HTTP/2 without negotiation (also over plain `http://`, "h2c").
    Http2PriorKnowledge,
}

/// `idempotency` block: how the key is derived and sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IdempotencyConfig {
    /// Send an idempotency key header with every request (default true).
    pub enabled: bool,
    /// A message without a key fails permanently instead of being sent without one
    /// (default true; needs `enabled`).
    pub required: bool,
    /// Header that carries the key (default `Idempotency-Key`).
    pub header: String,
    /// `idempotency_key` (default), `stream_sequence`, `origin_sequence` (the stream the event was
    /// first stored in, through a mirror or a source), `message_id` or `payload_sha256`.
    pub strategy: KeyStrategy,
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        Self { enabled: true, required: true, header: "Idempotency-Key".to_owned(), strategy: KeyStrategy::default() }
    }
}

/// `retry` block: bounded retries inside one write, before a failure is handed back to the
/// runner (which redelivers it with backoff). A retry sends the same idempotency key, so it
/// is exactly as safe as a redelivery. Waits longer than `max_backoff_ms` (including a
/// longer `Retry-After`) and retries that would not finish within the write's budget (from
/// the consumer's AckWait) are left to a delayed redelivery instead, so one slow message
/// never holds up its batch for long.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Extra attempts after a temporary failure, 0–10 (default 3; the reference's 0 turns
    /// retries in place off).
    pub max_retries: u32,
    /// Delay before the first retry, milliseconds, 0–60,000 (default 10).
    pub backoff_ms: u64,
    /// Longest wait in place, milliseconds, 0–300,000 and ≥ `backoff_ms` (default 250). A
    /// longer wait (a backoff or a `Retry-After`) ends the in-place retries: the message is
    /// handed back and redelivered after that wait.
    pub max_backoff_ms: u64,
    /// `fixed`, `linear` or `exponential` (default).
    pub backoff_mode: BackoffMode,
    /// Growth factor of exponential backoff, 1.0–10.0 (default 2.0).
    pub backoff_multiplier: f64,
    /// `none`, `full` (default) or `equal`.
    pub jitter: Jitter,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_retries: 3,
            backoff_ms: 10,
            max_backoff_ms: 250,
            backoff_mode: BackoffMode::Exponential,
            backoff_multiplier: 2.0,
            jitter: Jitter::Full,
        }
    }
}

/// Settings of the HTTP sink (`sink.type = "http"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSinkConfig {
    /// Endpoint URL: `https://`, or `http://` to a loopback host with
    /// `allow_http_for_local_testing`. No userinfo, query string or fragment.
    pub url: String,
    /// `POST` (default), `PUT` or `PATCH` (case-insensitive).
    #[serde(default)]
    pub method: HttpMethod,
    /// `envelope` (default) or `payload` (the normalized payload only).
    #[serde(default)]
    pub body_format: BodyFormat,
    /// When not empty, the URL's host (and the inquiry and health URLs' hosts) must be one
    /// of these (case-insensitive host names or IP addresses).
    #[serde(default)]
    pub endpoint_allowed_hosts: Vec<String>,
    /// Accept `http://` URLs to `localhost`, `127.0.0.1` or `::1` (default false).
    #[serde(default)]
    pub allow_http_for_local_testing: bool,
    /// Static, non-secret request headers (at most 32). Framework headers (`Host`,
    /// `Content-Type`, `User-Agent`, …) and credential headers (`Authorization`, `Cookie`,
    /// `X-Api-Key`, …) are refused: secrets go in `headers_env`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Header name → name of the environment variable holding its value, read at every
    /// request (at most 32). A missing variable is a configuration error (fatal at start-up,
    /// retried at run time); values are never logged.
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
    /// `User-Agent` header (default `nats-sinks-http/0.4`).
    #[serde(default = "default_user_agent")]
    pub user_agent: String,
    /// Timeout of one request, connection included, seconds, in (0, 120] (default 10).
    /// A timeout is ambiguous: the endpoint may have committed (see `inquiry_url`).
    #[serde(default = "default_request_timeout")]
    pub request_timeout_seconds: f64,
    /// Largest request body, bytes, 128–52,428,800 (default 1 MiB). A bigger message fails
    /// permanently, alone.
    #[serde(default = "default_max_request_bytes")]
    pub max_request_bytes: u64,
    /// Most response-body bytes read, 0–1,048,576 (default 64 KiB); the rest is discarded
    /// (the connection is then not reused). Bodies are never logged.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: u64,
    /// Statuses meaning committed (default 200, 201, 202, 204).
    #[serde(default = "default_success_statuses")]
    pub success_statuses: Vec<u16>,
    /// Statuses meaning "try again later": temporary, with `Retry-After` honoured as the
    /// redelivery delay (default 408, 425, 429, 500, 502, 503, 504).
    #[serde(default = "default_retry_statuses")]
    pub retry_statuses: Vec<u16>,
    /// Statuses meaning "already committed" when the request carried an idempotency key:
    /// reported as duplicates (default 409, 412; may be empty).
    #[serde(default = "default_duplicate_statuses")]
    pub duplicate_statuses: Vec<u16>,
    /// Statuses meaning "this key exists with different content" when the request carried an
    /// idempotency key: reported as a conflict that kept the stored version, acknowledged
    /// (default empty).
    #[serde(default)]
    pub conflict_statuses: Vec<u16>,
    /// How message bytes become the `payload` value (default `json_or_envelope`).
    #[serde(default)]
    pub payload_mode: PayloadMode,
    /// Add the standard metadata document under `metadata` (default true).
    #[serde(default = "default_true")]
    pub include_metadata: bool,
    /// What the body holds of each delivery: `message` (default: only the event's facts, so
    /// every attempt and every delivery of one event sends the same bytes under its key, and
    /// this delivery's facts travel in `Nats-Sinks-Attempt-*` headers) or `delivery` (the
    /// reference's body: also `consumer`, `consumer_sequence`, the receive and store times
    /// and freshness, different on every delivery, which an endpoint that fingerprints each
    /// key's body refuses on a redelivery). docs/http-sink.md.
    #[serde(default)]
    pub metadata_scope: MetadataScope,
    /// Add `mission_metadata` (always null in this build; default true).
    #[serde(default = "default_true")]
    pub include_mission_metadata: bool,
    /// Add `security_labels` (always null in this build; default true).
    #[serde(default = "default_true")]
    pub include_security_labels: bool,
    /// Add `custody` (always null in this build; default true).
    #[serde(default = "default_true")]
    pub include_custody: bool,
    /// How the idempotency key is derived and sent.
    #[serde(default)]
    pub idempotency: IdempotencyConfig,
    /// Bounded in-call retries.
    #[serde(default)]
    pub retry: RetryConfig,
    /// Most requests of one write in flight at once, 1–1,024 (default 16). Messages sharing
    /// an ordering key (the subject) are always sent one after another, in order.
    #[serde(default = "default_max_concurrent_requests")]
    pub max_concurrent_requests: usize,
    /// `off` (default: one request per message), `json_array` or `ndjson` (several envelopes
    /// per request, all-or-nothing; needs `body_format = "envelope"`).
    #[serde(default)]
    pub batch_mode: BatchMode,
    /// Most envelopes per request in batch mode, 1–10,000 (default 100).
    #[serde(default = "default_max_batch_items")]
    pub max_batch_items: usize,
    /// URL template with `{key}` (replaced by the URL-encoded idempotency key) that answers
    /// whether a key was committed: asked after a timeout. 2xx → duplicate, 404 → the
    /// message is sent again once, anything else → temporary. A query string is allowed
    /// here. Needs `batch_mode = "off"` and idempotency enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inquiry_url: Option<String>,
    /// Header of an `inquiry_url` answer that holds the stored payload's SHA-256 (lowercase
    /// hex), compared by `nats-sink reconcile`. Without it (or when an answer lacks it),
    /// reconcile hashes the payload of the body the inquiry returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inquiry_fingerprint_header: Option<String>,
    /// Response header whose value (e.g. the endpoint's record or request id) is reported,
    /// with the status, as the destination reference of the delivery ledger's receipts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id_header: Option<String>,
    /// URL probed by the health check with `GET` (must answer a success status). Without
    /// it, the health check sends `OPTIONS` to `url` and accepts any status below 500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_url: Option<String>,
    /// `auto` (default), `http1_only` or `http2_prior_knowledge`.
    #[serde(default)]
    pub http_version: HttpVersion,
    /// Most idle keep-alive connections kept per host, 0–1,024 (default 32).
    #[serde(default = "default_pool_max_idle")]
    pub pool_max_idle_per_host: usize,
    /// How long an idle keep-alive connection is kept, seconds, 1–3,600 (default 90).
    #[serde(default = "default_pool_idle_timeout")]
    pub pool_idle_timeout_seconds: u64,
    /// PEM bundle of CA certificates trusted in addition to the system roots (or instead
    /// of them with `tls_ca_only`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca_file: Option<PathBuf>,
    /// Trust only `tls_ca_file`, not the system roots (default false).
    #[serde(default)]
    pub tls_ca_only: bool,
    /// PEM client certificate chain for mutual TLS (needs `tls_key_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of `tls_cert_file` (PKCS#8, PKCS#1 or SEC1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_key_file: Option<PathBuf>,
}

fn default_true() -> bool {
    true
}
fn default_user_agent() -> String {
    "nats-sinks-http/0.4".to_owned()
}
fn default_request_timeout() -> f64 {
    10.0
}
fn default_max_request_bytes() -> u64 {
    1_048_576
}
fn default_max_response_bytes() -> u64 {
    65_536
}
fn default_success_statuses() -> Vec<u16> {
    vec![200, 201, 202, 204]
}
fn default_retry_statuses() -> Vec<u16> {
    vec![408, 425, 429, 500, 502, 503, 504]
}
fn default_duplicate_statuses() -> Vec<u16> {
    vec![409, 412]
}
fn default_max_concurrent_requests() -> usize {
    16
}
fn default_max_batch_items() -> usize {
    100
}
fn default_pool_max_idle() -> usize {
    32
}
fn default_pool_idle_timeout() -> u64 {
    90
}

impl HttpSinkConfig {
    /// A configuration sending to `url` with every other field at its default.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            method: HttpMethod::default(),
            body_format: BodyFormat::default(),
            endpoint_allowed_hosts: Vec::new(),
            allow_http_for_local_testing: false,
            headers: BTreeMap::new(),
            headers_env: BTreeMap::new(),
            user_agent: default_user_agent(),
            request_timeout_seconds: default_request_timeout(),
            max_request_bytes: default_max_request_bytes(),
            max_response_bytes: default_max_response_bytes(),
            success_statuses: default_success_statuses(),
            retry_statuses: default_retry_statuses(),
            duplicate_statuses: default_duplicate_statuses(),
            conflict_statuses: Vec::new(),
            payload_mode: PayloadMode::default(),
            include_metadata: true,
            metadata_scope: MetadataScope::default(),
            include_mission_metadata: true,
            include_security_labels: true,
            include_custody: true,
            idempotency: IdempotencyConfig::default(),
            retry: RetryConfig::default(),
            max_concurrent_requests: default_max_concurrent_requests(),
            batch_mode: BatchMode::default(),
            max_batch_items: default_max_batch_items(),
            inquiry_url: None,
            inquiry_fingerprint_header: None,
            response_id_header: None,
            health_url: None,
            http_version: HttpVersion::default(),
            pool_max_idle_per_host: default_pool_max_idle(),
            pool_idle_timeout_seconds: default_pool_idle_timeout(),
            tls_ca_file: None,
            tls_ca_only: false,
            tls_cert_file: None,
            tls_key_file: None,
        }
    }

    /// A configuration for a local `http://` test endpoint (sets
    /// `allow_http_for_local_testing`).
    pub fn local(url: impl Into<String>) -> Self {
        Self { allow_http_for_local_testing: true, ..Self::new(url) }
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
        let hosts = self.validate_allowed_hosts(&mut issues);
        if let Err(message) = check_url(&self.url, self.allow_http_for_local_testing, &hosts, false) {
            issues.push("sink.url", message);
        }
        if let Some(template) = &self.inquiry_url {
            if !template.contains(KEY_PLACEHOLDER) {
                issues.push("sink.inquiry_url", "must contain the `{key}` placeholder");
            } else if let Err(message) =
                check_url(&template.replace(KEY_PLACEHOLDER, "k"), self.allow_http_for_local_testing, &hosts, true)
            {
                issues.push("sink.inquiry_url", message);
            }
            if self.batch_mode != BatchMode::Off {
                issues.push("sink.inquiry_url", "cannot be combined with sink.batch_mode");
            }
            if !self.idempotency.enabled {
                issues.push("sink.inquiry_url", "requires sink.idempotency.enabled");
            }
        }
        if self.inquiry_fingerprint_header.is_some() && self.inquiry_url.is_none() {
            issues.push("sink.inquiry_fingerprint_header", "requires sink.inquiry_url");
        }
        for (field, name) in [
            ("sink.inquiry_fingerprint_header", &self.inquiry_fingerprint_header),
            ("sink.response_id_header", &self.response_id_header),
        ] {
            if let Some(Err(message)) = name.as_deref().map(check_header_name) {
                issues.push(field, message);
            }
        }
        if let Some(url) = &self.health_url
            && let Err(message) = check_url(url, self.allow_http_for_local_testing, &hosts, false)
        {
            issues.push("sink.health_url", message);
        }
        let mut seen = BTreeSet::new();
        validate_headers(&self.headers, "sink.headers", false, &mut seen, &mut issues);
        validate_headers(&self.headers_env, "sink.headers_env", true, &mut seen, &mut issues);
        self.validate_idempotency(&seen, &mut issues);
        if let Err(message) = check_header_value(&self.user_agent) {
            issues.push("sink.user_agent", message);
        }
        let timeout = self.request_timeout_seconds;
        if !timeout.is_finite() || timeout <= 0.0 || timeout > 120.0 {
            issues.push("sink.request_timeout_seconds", format!("must be in (0, 120] (got {timeout})"));
        }
        issues.range("sink.max_request_bytes", self.max_request_bytes, 128, 52_428_800);
        issues.range("sink.max_response_bytes", self.max_response_bytes, 0, 1_048_576);
        self.validate_statuses(&mut issues);
        self.validate_retry(&mut issues);
        issues.range("sink.max_concurrent_requests", self.max_concurrent_requests as u64, 1, 1024);
        issues.range("sink.max_batch_items", self.max_batch_items as u64, 1, 10_000);
        if self.batch_mode != BatchMode::Off && self.body_format != BodyFormat::Envelope {
            issues.push("sink.batch_mode", "requires sink.body_format = \"envelope\" (items carry their own keys)");
        }
        issues.range("sink.pool_max_idle_per_host", self.pool_max_idle_per_host as u64, 0, 1024);
        issues.range("sink.pool_idle_timeout_seconds", self.pool_idle_timeout_seconds, 1, 3600);
        self.validate_tls(&mut issues);
        issues.finish()
    }

    /// Validates `endpoint_allowed_hosts` and returns the normalized (lowercase) hosts.
    fn validate_allowed_hosts(&self, issues: &mut Issues) -> Vec<String> {
        let mut hosts = Vec::new();
        for host in &self.endpoint_allowed_hosts {
            let normalized = host.trim().to_ascii_lowercase();
            let problem = if normalized.is_empty() {
                Some("entries must not be empty")
            } else if normalized.len() != host.len() || host.chars().any(char::is_control) {
                Some("entries must not contain padding or control characters")
            } else if normalized.contains(['/', '@', '?', '#']) {
                Some("entries must be host names only")
            } else if hosts.contains(&normalized) {
                Some("entries must not repeat")
            } else {
                None
            };
            match problem {
                Some(message) => issues.push("sink.endpoint_allowed_hosts", message),
                None => hosts.push(normalized.trim_start_matches('[').trim_end_matches(']').to_owned()),
            }
        }
        hosts
    }

    fn validate_idempotency(&self, configured: &BTreeSet<String>, issues: &mut Issues) {
        let idem = &self.idempotency;
        if !idem.enabled && idem.required {
            issues.push("sink.idempotency.required", "requires sink.idempotency.enabled = true");
        }
        match check_header_name(&idem.header) {
            Err(message) => issues.push("sink.idempotency.header", message),
            Ok(lower) if configured.contains(&lower) => {
                issues.push("sink.idempotency.header", "is also set in sink.headers or sink.headers_env");
            }
            Ok(_) => {}
        }
    }

    fn validate_statuses(&self, issues: &mut Issues) {
        let lists: [(&str, &[u16], bool); 4] = [
            ("sink.success_statuses", &self.success_statuses, true),
            ("sink.retry_statuses", &self.retry_statuses, true),
            ("sink.duplicate_statuses", &self.duplicate_statuses, false),
            ("sink.conflict_statuses", &self.conflict_statuses, false),
        ];
        let mut owner: BTreeMap<u16, &str> = BTreeMap::new();
        for (path, list, required) in lists {
            if required && list.is_empty() {
                issues.push(path, "must not be empty");
            }
            if list.len() > MAX_STATUS_CODES {
                issues.push(path, format!("must have at most {MAX_STATUS_CODES} entries"));
            }
            let mut seen = BTreeSet::new();
            for &status in list {
                if !(100..=599).contains(&status) {
                    issues.push(path, format!("{status} is not an HTTP status code"));
                } else if !seen.insert(status) {
                    issues.push(path, format!("repeats {status}"));
                } else if let Some(other) = owner.insert(status, path) {
                    issues.push(path, format!("{status} is also in {other}"));
                }
            }
        }
    }

    fn validate_retry(&self, issues: &mut Issues) {
        let r = &self.retry;
        issues.range("sink.retry.max_retries", u64::from(r.max_retries), 0, 10);
        issues.range("sink.retry.backoff_ms", r.backoff_ms, 0, 60_000);
        issues.range("sink.retry.max_backoff_ms", r.max_backoff_ms, 0, 300_000);
        if r.max_backoff_ms < r.backoff_ms {
            issues.push("sink.retry.max_backoff_ms", "must be at least sink.retry.backoff_ms");
        }
        if !(1.0..=10.0).contains(&r.backoff_multiplier) {
            issues
                .push("sink.retry.backoff_multiplier", format!("must be in 1.0..=10.0 (got {})", r.backoff_multiplier));
        }
    }

    fn validate_tls(&self, issues: &mut Issues) {
        for (path, file) in [
            ("sink.tls_ca_file", &self.tls_ca_file),
            ("sink.tls_cert_file", &self.tls_cert_file),
            ("sink.tls_key_file", &self.tls_key_file),
        ] {
            if let Some(file) = file
                && file.as_os_str().to_string_lossy().trim().is_empty()
            {
                issues.push(path, "must not be empty");
            }
        }
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(_), None) => issues.push("sink.tls_key_file", "required with sink.tls_cert_file"),
            (None, Some(_)) => issues.push("sink.tls_cert_file", "required with sink.tls_key_file"),
            _ => {}
        }
        if self.tls_ca_only && self.tls_ca_file.is_none() {
            issues.push("sink.tls_ca_only", "requires sink.tls_ca_file");
        }
    }
}

/// Checks a URL against the endpoint rules; `allow_query` only for the inquiry template.
pub(crate) fn check_url(
    text: &str,
    allow_http: bool,
    allowed_hosts: &[String],
    allow_query: bool,
) -> Result<Url, String> {
    if text.trim().is_empty() {
        return Err("must not be empty".into());
    }
    if text != text.trim() || text.chars().any(char::is_control) {
        return Err("must not contain padding or control characters".into());
    }
    let url = Url::parse(text).map_err(|e| format!("is not a valid URL ({e})"))?;
    let host = match url.host_str() {
        Some(h) if !h.is_empty() => h.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase(),
        _ => return Err("must include a host".into()),
    };
    match url.scheme() {
        "https" => {}
        "http" if allow_http && LOOPBACK_HOSTS.contains(&host.as_str()) => {}
        "http" => return Err("must use https (http only to a loopback host with allow_http_for_local_testing)".into()),
        _ => return Err("must use https".into()),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not include userinfo (put credentials in headers_env)".into());
    }
    if url.port() == Some(0) {
        return Err("port must be between 1 and 65535".into());
    }
    if url.fragment().is_some() {
        return Err("must not include a fragment".into());
    }
    if url.query().is_some() && !allow_query {
        return Err("must not include a query string".into());
    }
    if url.path().len() > MAX_URL_PATH_LEN {
        return Err("path is too long".into());
    }
    if !allowed_hosts.is_empty() && !allowed_hosts.contains(&host) {
        return Err("host is not in sink.endpoint_allowed_hosts".into());
    }
    Ok(url)
}

/// Validates a header name: an RFC 9110 token, not a framework header. Returns it lowercased.
pub(crate) fn check_header_name(name: &str) -> Result<String, &'static str> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || name.len() > 128 || !name.chars().all(token) {
        return Err("header names must be RFC token strings of at most 128 characters");
    }
    let lower = name.to_ascii_lowercase();
    if FRAMEWORK_HEADERS.contains(&lower.as_str()) {
        return Err("must not configure a header the sink sets itself");
    }
    Ok(lower)
}

/// Validates a static header value: non-blank, unpadded, bounded, no control characters.
pub(crate) fn check_header_value(value: &str) -> Result<(), &'static str> {
    if value.is_empty() || value != value.trim() {
        return Err("values must not be blank or padded");
    }
    if value.len() > MAX_HEADER_VALUE_LEN {
        return Err("values must be at most 2048 characters");
    }
    if value.chars().any(char::is_control) {
        return Err("values must not contain control characters");
    }
    Ok(())
}

fn validate_headers(
    headers: &BTreeMap<String, String>,
    path: &str,
    from_env: bool,
    seen: &mut BTreeSet<String>,
    issues: &mut Issues,
) {
    if headers.len() > MAX_HEADERS {
        issues.push(path, format!("must have at most {MAX_HEADERS} entries"));
    }
    for (name, value) in headers {
        let lower = match check_header_name(name) {
            Ok(lower) => lower,
            Err(message) => {
                issues.push(path, format!("`{name}`: {message}"));
                continue;
            }
        };
        if !seen.insert(lower.clone()) {
            issues.push(path, format!("`{name}` is configured twice (names are case-insensitive)"));
        }
        if from_env {
            if !is_env_name(value, EnvName::Uppercase) {
                issues.push(path, format!("`{name}`: environment variable names use A-Z, 0-9 and _"));
            }
        } else if SENSITIVE_HEADERS.contains(&lower.as_str()) {
            issues.push(path, format!("`{name}` carries credentials: set it through sink.headers_env"));
        } else if let Err(message) = check_header_value(value) {
            issues.push(path, format!("`{name}`: {message}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(json: &str) -> SinkSection {
        serde_json::from_str(json).expect("section json")
    }

    fn issue_paths(json: &str) -> Vec<String> {
        match HttpSinkConfig::from_section(&section(json)) {
            Ok(c) => panic!("expected an error, got {c:?}"),
            Err(e) => e.issues.into_iter().map(|i| i.path).collect(),
        }
    }

    #[test]
    fn reference_section_parses_unchanged() {
        let c = HttpSinkConfig::from_section(&section(
            r#"{"type":"http","url":"https://events.example.com/ingest","method":"put","body_format":"payload",
                "endpoint_allowed_hosts":["events.example.com"],"allow_http_for_local_testing":false,
                "headers":{"X-Tenant":"blue"},"headers_env":{"Authorization":"EVENTS_TOKEN"},
                "user_agent":"ops/1","request_timeout_seconds":5.5,"max_request_bytes":2048,
                "max_response_bytes":0,"success_statuses":[200,201],"retry_statuses":[429,503],
                "payload_mode":"json_only","include_metadata":false,"include_mission_metadata":false,
                "include_security_labels":false,"include_custody":false,
                "idempotency":{"enabled":true,"required":false,"header":"X-Idem","strategy":"message_id"},
                "retry":{"max_retries":3,"backoff_ms":100,"max_backoff_ms":1000,"backoff_mode":"linear",
                         "backoff_multiplier":1.5,"jitter":"equal"}}"#,
        ))
        .expect("reference section");
        assert_eq!(c.method, HttpMethod::Put);
        assert_eq!(c.body_format, BodyFormat::Payload);
        assert_eq!(c.headers_env["Authorization"], "EVENTS_TOKEN");
        assert_eq!(c.request_timeout_seconds, 5.5);
        assert_eq!(c.success_statuses, [200, 201]);
        assert_eq!(c.payload_mode, PayloadMode::JsonOnly);
        assert_eq!(c.idempotency.strategy, KeyStrategy::MessageId);
        assert!(!c.idempotency.required);
        assert_eq!(c.retry.max_retries, 3);
        assert_eq!(c.retry.backoff_mode, BackoffMode::Linear);
        assert_eq!(c.retry.jitter, Jitter::Equal);
        assert!(!c.include_metadata && !c.include_custody);
    }

    #[test]
    fn defaults_match_the_reference() {
        let c =
            HttpSinkConfig::from_section(&section(r#"{"type":"http","url":"https://h.example/x"}"#)).expect("minimal");
        assert_eq!(c, HttpSinkConfig::new("https://h.example/x"));
        assert_eq!(c.method, HttpMethod::Post);
        assert_eq!(c.user_agent, "nats-sinks-http/0.4");
        assert_eq!(c.request_timeout_seconds, 10.0);
        assert_eq!((c.max_request_bytes, c.max_response_bytes), (1_048_576, 65_536));
        assert_eq!(c.success_statuses, [200, 201, 202, 204]);
        assert_eq!(c.retry_statuses, [408, 425, 429, 500, 502, 503, 504]);
        assert_eq!(c.duplicate_statuses, [409, 412]);
        assert!(c.conflict_statuses.is_empty());
        assert_eq!(c.idempotency, IdempotencyConfig::default());
        assert_eq!(c.idempotency.header, "Idempotency-Key");
        assert_eq!(c.retry, RetryConfig::default());
        assert_eq!((c.retry.max_retries, c.retry.backoff_ms, c.retry.max_backoff_ms), (3, 10, 250));
        assert_eq!(c.max_concurrent_requests, 16);
        assert_eq!(c.batch_mode, BatchMode::Off);
        assert!(c.include_metadata && c.include_mission_metadata && c.include_security_labels && c.include_custody);
    }

    #[test]
    fn problems_name_their_field() {
        let u = r#""url":"https://h.example/x""#;
        assert_eq!(issue_paths(&format!("{{{u},\"bogus\":1}}")), ["sink.bogus"]);
        assert_eq!(issue_paths(r#"{"type":"http"}"#), ["sink.url"]);
        assert_eq!(issue_paths(&format!("{{{u},\"method\":\"GET\"}}")), ["sink.method"]);
        assert_eq!(issue_paths(&format!("{{{u},\"request_timeout_seconds\":0}}")), ["sink.request_timeout_seconds"]);
        assert_eq!(issue_paths(&format!("{{{u},\"request_timeout_seconds\":121}}")), ["sink.request_timeout_seconds"]);
        assert_eq!(issue_paths(&format!("{{{u},\"max_request_bytes\":10}}")), ["sink.max_request_bytes"]);
        assert_eq!(issue_paths(&format!("{{{u},\"retry\":{{\"max_retries\":11}}}}")), ["sink.retry.max_retries"]);
        assert_eq!(
            issue_paths(&format!("{{{u},\"retry\":{{\"backoff_ms\":10,\"max_backoff_ms\":5}}}}")),
            ["sink.retry.max_backoff_ms"]
        );
        assert_eq!(issue_paths(&format!("{{{u},\"retry\":{{\"jitter\":\"some\"}}}}")), ["sink.retry.jitter"]);
        assert_eq!(
            issue_paths(&format!("{{{u},\"idempotency\":{{\"enabled\":false}}}}")),
            ["sink.idempotency.required"]
        );
        assert_eq!(
            issue_paths(&format!("{{{u},\"idempotency\":{{\"header\":\"Content-Type\"}}}}")),
            ["sink.idempotency.header"]
        );
        assert_eq!(issue_paths(&format!("{{{u},\"max_concurrent_requests\":0}}")), ["sink.max_concurrent_requests"]);
        assert_eq!(
            issue_paths(&format!("{{{u},\"batch_mode\":\"ndjson\",\"body_format\":\"payload\"}}")),
            ["sink.batch_mode"]
        );
        assert_eq!(issue_paths(&format!("{{{u},\"tls_cert_file\":\"c.pem\"}}")), ["sink.tls_key_file"]);
        assert_eq!(issue_paths(&format!("{{{u},\"tls_ca_only\":true}}")), ["sink.tls_ca_only"]);
    }

    #[test]
    fn url_rules() {
        let hosts = ["api.example.com".to_owned()];
        for (url, http_ok, ok) in [
            ("https://api.example.com/x", false, true),
            ("https://API.example.com:8443/x/y", false, true),
            ("http://api.example.com/x", true, false),
            ("http://127.0.0.1:8080/x", true, true),
            ("http://localhost/x", true, true),
            ("http://[::1]:9/x", true, true),
            ("http://127.0.0.1:8080/x", false, false),
            ("ftp://api.example.com/x", true, false),
            ("https://user:pw@api.example.com/x", false, false),
            ("https://api.example.com/x?token=1", false, false),
            ("https://api.example.com/x#frag", false, false),
            (" https://api.example.com/x", false, false),
            ("https://api.example.com:0/x", false, false),
            ("not a url", false, false),
        ] {
            assert_eq!(check_url(url, http_ok, &[], false).is_ok(), ok, "{url} (http allowed: {http_ok})");
        }
        assert!(check_url("https://api.example.com/x", false, &hosts, false).is_ok());
        assert!(check_url("https://other.example.com/x", false, &hosts, false).is_err());
        assert!(check_url("http://[::1]/x", true, &["::1".to_owned()], false).is_ok());
        assert!(check_url("https://api.example.com/x?key=1", false, &[], true).is_ok(), "inquiry may have a query");
        let long = format!("https://api.example.com/{}", "p".repeat(2100));
        assert!(check_url(&long, false, &[], false).is_err());
    }

    #[test]
    fn allowed_hosts_are_enforced_for_every_url() {
        let base = r#""url":"https://api.example.com/x","endpoint_allowed_hosts":["API.example.com"]"#;
        HttpSinkConfig::from_section(&section(&format!("{{{base}}}"))).expect("listed host, any case");
        assert_eq!(
            issue_paths(&format!("{{{base},\"health_url\":\"https://other.example.com/h\"}}")),
            ["sink.health_url"]
        );
        assert_eq!(
            issue_paths(&format!("{{{base},\"inquiry_url\":\"https://other.example.com/r/{{key}}\"}}")),
            ["sink.inquiry_url"]
        );
        assert_eq!(
            issue_paths(r#"{"url":"https://a.example/x","endpoint_allowed_hosts":["a.example/x"]}"#),
            ["sink.endpoint_allowed_hosts"]
        );
    }

    #[test]
    fn secrets_only_through_headers_env() {
        let u = r#""url":"https://h.example/x""#;
        for name in ["Authorization", "cookie", "Proxy-Authorization", "X-API-Key", "x-auth-token"] {
            assert_eq!(
                issue_paths(&format!("{{{u},\"headers\":{{\"{name}\":\"v\"}}}}")),
                ["sink.headers"],
                "{name} in headers"
            );
            let ok = format!("{{{u},\"headers_env\":{{\"{name}\":\"MY_TOKEN\"}}}}");
            HttpSinkConfig::from_section(&section(&ok)).expect("allowed through headers_env");
        }
        for name in ["Host", "content-type", "User-Agent", "Content-Length", "Transfer-Encoding"] {
            assert_eq!(issue_paths(&format!("{{{u},\"headers\":{{\"{name}\":\"v\"}}}}")), ["sink.headers"], "{name}");
        }
        assert_eq!(issue_paths(&format!("{{{u},\"headers\":{{\"Bad Name\":\"v\"}}}}")), ["sink.headers"]);
        assert_eq!(issue_paths(&format!("{{{u},\"headers\":{{\"X-A\":\" padded\"}}}}")), ["sink.headers"]);
        assert_eq!(issue_paths(&format!("{{{u},\"headers\":{{\"X-A\":\"a\\nb\"}}}}")), ["sink.headers"]);
        assert_eq!(issue_paths(&format!("{{{u},\"headers_env\":{{\"X-A\":\"lower_case\"}}}}")), ["sink.headers_env"]);
        assert_eq!(
            issue_paths(&format!("{{{u},\"headers\":{{\"X-A\":\"1\"}},\"headers_env\":{{\"x-a\":\"A\"}}}}")),
            ["sink.headers_env"]
        );
        assert_eq!(
            issue_paths(&format!("{{{u},\"headers\":{{\"Idempotency-Key\":\"1\"}}}}")),
            ["sink.idempotency.header"]
        );
    }

    #[test]
    fn status_lists_are_disjoint_codes() {
        let u = r#""url":"https://h.example/x""#;
        assert_eq!(issue_paths(&format!("{{{u},\"success_statuses\":[]}}")), ["sink.success_statuses"]);
        assert_eq!(issue_paths(&format!("{{{u},\"success_statuses\":[200,200]}}")), ["sink.success_statuses"]);
        assert_eq!(issue_paths(&format!("{{{u},\"retry_statuses\":[99]}}")), ["sink.retry_statuses"]);
        assert_eq!(issue_paths(&format!("{{{u},\"retry_statuses\":[200]}}")), ["sink.retry_statuses"]);
        assert_eq!(issue_paths(&format!("{{{u},\"conflict_statuses\":[409]}}")), ["sink.conflict_statuses"]);
        HttpSinkConfig::from_section(&section(&format!(
            "{{{u},\"duplicate_statuses\":[],\"conflict_statuses\":[409,422]}}"
        )))
        .expect("conflict statuses may take over 409");
    }

    #[test]
    fn inquiry_needs_a_placeholder_and_single_requests() {
        let u = r#""url":"https://h.example/x""#;
        HttpSinkConfig::from_section(&section(&format!(
            "{{{u},\"inquiry_url\":\"https://h.example/records?key={{key}}\"}}"
        )))
        .expect("template");
        assert_eq!(issue_paths(&format!("{{{u},\"inquiry_url\":\"https://h.example/r\"}}")), ["sink.inquiry_url"]);
        assert_eq!(
            issue_paths(&format!(
                "{{{u},\"inquiry_url\":\"https://h.example/r/{{key}}\",\"batch_mode\":\"json_array\"}}"
            )),
            ["sink.inquiry_url"]
        );
    }

    #[test]
    fn reconcile_and_ledger_headers_are_header_names() {
        let u = r#""url":"https://h.example/x","inquiry_url":"https://h.example/r/{key}""#;
        let ok = HttpSinkConfig::from_section(&section(&format!(
            "{{{u},\"inquiry_fingerprint_header\":\"X-Payload-Sha256\",\"response_id_header\":\"X-Record-Id\"}}"
        )))
        .expect("header names");
        assert_eq!(ok.response_id_header.as_deref(), Some("X-Record-Id"));
        assert_eq!(issue_paths(&format!("{{{u},\"response_id_header\":\"X Id\"}}")), ["sink.response_id_header"]);
        assert_eq!(
            issue_paths(r#"{"url":"https://h.example/x","inquiry_fingerprint_header":"X-Sha"}"#),
            ["sink.inquiry_fingerprint_header"],
            "needs an inquiry_url"
        );
    }

    #[test]
    fn serializes_back_to_the_same_section() {
        let mut c = HttpSinkConfig::local("http://127.0.0.1:9/x");
        c.method = HttpMethod::Patch;
        c.batch_mode = BatchMode::Ndjson;
        c.inquiry_url = None;
        c.headers_env.insert("Authorization".into(), "TOKEN".into());
        let value = serde_json::to_value(&c).expect("serialize");
        assert_eq!(value["method"], "PATCH");
        assert_eq!(value["batch_mode"], "ndjson");
        assert_eq!(value["retry"]["backoff_mode"], "exponential");
        let back = HttpSinkConfig::from_section(&SinkSection(value.as_object().cloned().unwrap_or_default()))
            .expect("round trip");
        assert_eq!(back, c);
    }
}
