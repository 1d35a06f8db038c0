//! The `opentelemetry` section: OTLP export of the metric catalogue and of one trace span per
//! message (nats-sinks extension; the reference exports only its snapshot, from another
//! process).
//!
//! Off unless `metrics.enabled` or `traces.enabled` is set here: then nothing is exported
//! and nothing is started. Everything here only observes: no field changes what is written,
//! acked or dead-lettered, and no settlement waits on an exporter.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Issues, check_env_name};

/// The OTLP transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OtlpProtocol {
    /// OTLP/HTTP with protobuf bodies (`POST {endpoint}/v1/metrics`, `/v1/traces`).
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// OTLP/gRPC.
    #[serde(rename = "grpc")]
    Grpc,
}

impl OtlpProtocol {
    /// The endpoint used when none is configured (the OTLP defaults).
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Self::HttpProtobuf => "http://localhost:4318",
            Self::Grpc => "http://localhost:4317",
        }
    }
}

/// `opentelemetry` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenTelemetryConfig {
    /// Base URL of the OTLP receiver, e.g. `http://127.0.0.1:4318` (HTTP) or
    /// `http://127.0.0.1:4317` (gRPC); `https://` for TLS. HTTP appends `/v1/metrics` and
    /// `/v1/traces` when the URL has no path. Default: the protocol's localhost port.
    pub endpoint: Option<String>,
    /// `http/protobuf` (default) or `grpc`.
    pub protocol: OtlpProtocol,
    /// Request headers (gRPC metadata) whose values come from environment variables: header
    /// name → variable name. Read at start-up, never logged or shown.
    pub headers_env: BTreeMap<String, String>,
    /// Resource attributes added to `service.name = nats-sink` and `service.version` (a
    /// `service.name` here replaces the default).
    pub resource_attributes: BTreeMap<String, String>,
    /// CA bundle (PEM) that verifies an `https://` receiver (a private CA); default: the
    /// system's roots.
    pub tls_ca_file: Option<String>,
    /// Timeout of one export request, milliseconds (default 10,000; 100..=120,000).
    pub timeout_ms: u64,
    /// Export of the metric catalogue.
    pub metrics: OtlpMetricsConfig,
    /// One span per message, continuing the producer's W3C trace context.
    pub traces: OtlpTracesConfig,
}

impl Default for OpenTelemetryConfig {
    fn default() -> Self {
        Self {
            endpoint: None,
            protocol: OtlpProtocol::default(),
            headers_env: BTreeMap::new(),
            resource_attributes: BTreeMap::new(),
            tls_ca_file: None,
            timeout_ms: 10_000,
            metrics: OtlpMetricsConfig::default(),
            traces: OtlpTracesConfig::default(),
        }
    }
}

/// `opentelemetry.metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OtlpMetricsConfig {
    /// Export the metric catalogue over OTLP (default false; needs `metrics.enabled`).
    pub enabled: bool,
    /// Milliseconds between exports (default 10,000; 200..=3,600,000).
    pub interval_ms: u64,
    /// Export only these metrics (empty: all). Names as the reference writes them, without
    /// the namespace: `messages_acked_total`, `sink_batch_write_seconds`; a trailing `*`
    /// matches a prefix (`jetstream_advisory_*`).
    pub allowed_metrics: Vec<String>,
    /// Never export these metrics (same forms as `allowed_metrics`; applied after it).
    pub denied_metrics: Vec<String>,
}

impl Default for OtlpMetricsConfig {
    fn default() -> Self {
        Self { enabled: false, interval_ms: 10_000, allowed_metrics: Vec::new(), denied_metrics: Vec::new() }
    }
}

/// `opentelemetry.traces`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OtlpTracesConfig {
    /// Export one span per message and one per batch write (default false).
    pub enabled: bool,
    /// Share of messages *without* a `traceparent` header that start a trace of their own,
    /// 0.0..=1.0 (default 1.0). A message with one follows its producer's sampling decision.
    pub sample_ratio: f64,
}

impl Default for OtlpTracesConfig {
    fn default() -> Self {
        Self { enabled: false, sample_ratio: 1.0 }
    }
}

impl OpenTelemetryConfig {
    /// True when anything is exported (and so anything started).
    pub fn active(&self) -> bool {
        self.metrics.enabled || self.traces.enabled
    }

    /// The configured endpoint, else the protocol's default.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_deref().unwrap_or(self.protocol.default_endpoint())
    }

    /// Checks the section; `metrics_enabled` is `metrics.enabled`, `known` tells whether a
    /// metric name (the reference's form) is in the catalogue.
    pub fn validate_at(&self, path: &str, metrics_enabled: bool, known: &dyn Fn(&str) -> bool, issues: &mut Issues) {
        if let Some(endpoint) = &self.endpoint {
            match endpoint.strip_prefix("http://").or_else(|| endpoint.strip_prefix("https://")) {
                Some(rest) if !rest.is_empty() && !rest.starts_with('/') => {}
                _ => issues.push(&format!("{path}.endpoint"), "must be an http:// or https:// URL naming a host"),
            }
            if endpoint.contains('@') || endpoint.chars().any(|c| c.is_whitespace() || c.is_control()) {
                issues.push(&format!("{path}.endpoint"), "credentials, spaces and control characters are not accepted");
            }
        }
        if self.tls_ca_file.is_some() && !self.endpoint().starts_with("https://") {
            issues.push(&format!("{path}.tls_ca_file"), "needs an https:// endpoint");
        }
        if let Some(f) = &self.tls_ca_file
            && (f.trim() != f || f.is_empty() || f.chars().any(char::is_control))
        {
            issues.push(
                &format!("{path}.tls_ca_file"),
                "must be a plain file path without padding or control characters",
            );
        }
        for (name, var) in &self.headers_env {
            let field = format!("{path}.headers_env.{name}");
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                issues.push(&field, "header names are letters, digits, `-` and `_`");
            }
            check_env_name(var, &field, issues);
        }
        for (key, value) in &self.resource_attributes {
            if key.is_empty() || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
                issues.push(&format!("{path}.resource_attributes"), format!("`{key}` is not an attribute name"));
            }
            if value.chars().any(char::is_control) {
                issues.push(&format!("{path}.resource_attributes.{key}"), "must not contain control characters");
            }
        }
        issues.range(&format!("{path}.timeout_ms"), self.timeout_ms, 100, 120_000);
        let m = &self.metrics;
        issues.range(&format!("{path}.metrics.interval_ms"), m.interval_ms, 200, 3_600_000);
        if m.enabled && !metrics_enabled {
            issues
                .push(&format!("{path}.metrics.enabled"), "contradicts metrics.enabled = false (OTLP metrics are the recorded metrics; drop metrics.enabled, or set it true)");
        }
        for (list, names) in [("allowed_metrics", &m.allowed_metrics), ("denied_metrics", &m.denied_metrics)] {
            for (i, name) in names.iter().enumerate() {
                if !known(name) {
                    issues.push(
                        &format!("{path}.metrics.{list}[{i}]"),
                        format!("`{name}` names no metric of the catalogue (docs/observability.md)"),
                    );
                }
            }
        }
        let r = self.traces.sample_ratio;
        if !(0.0..=1.0).contains(&r) || r.is_nan() {
            issues.push(&format!("{path}.traces.sample_ratio"), "must be between 0.0 and 1.0");
        }
    }
}

/// True when `pattern` (an exact name, or a prefix ending in `*`) matches `name`.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(config: &OpenTelemetryConfig, metrics_enabled: bool) -> Vec<String> {
        let mut issues = Issues::default();
        config.validate_at("opentelemetry", metrics_enabled, &|n| n == "messages_acked_total", &mut issues);
        match issues.finish() {
            Ok(()) => Vec::new(),
            Err(e) => e.issues.into_iter().map(|i| format!("{}: {}", i.path, i.message)).collect(),
        }
    }

    #[test]
    fn absent_section_is_off_and_valid() {
        let c: OpenTelemetryConfig = serde_json::from_str("{}").unwrap();
        assert!(!c.active());
        assert_eq!(c.endpoint(), "http://localhost:4318");
        assert!(issues(&c, false).is_empty(), "{:?}", issues(&c, false));
    }

    #[test]
    fn each_mistake_names_its_field() {
        let c: OpenTelemetryConfig = serde_json::from_value(serde_json::json!({
            "endpoint": "ftp://x",
            "protocol": "grpc",
            "tls_ca_file": "/ca.pem",
            "headers_env": {"bad header": "lower-case"},
            "metrics": {"enabled": true, "interval_ms": 5, "allowed_metrics": ["messages_acked_total", "nope"]},
            "traces": {"enabled": true, "sample_ratio": 1.5},
        }))
        .unwrap();
        let got = issues(&c, false);
        for want in [
            "opentelemetry.endpoint: must be an http",
            "opentelemetry.tls_ca_file: needs an https",
            "opentelemetry.headers_env.bad header: header names",
            "opentelemetry.metrics.interval_ms",
            "opentelemetry.metrics.enabled: contradicts metrics.enabled = false",
            "opentelemetry.metrics.allowed_metrics[1]: `nope`",
            "opentelemetry.traces.sample_ratio",
        ] {
            assert!(got.iter().any(|g| g.starts_with(want)), "missing `{want}` in {got:#?}");
        }
        assert!(!got.iter().any(|g| g.contains("allowed_metrics[0]")), "{got:#?}");
    }

    #[test]
    fn patterns_match_exact_names_or_prefixes() {
        assert!(name_matches("messages_acked_total", "messages_acked_total"));
        assert!(!name_matches("messages_acked", "messages_acked_total"));
        assert!(name_matches("jetstream_advisory_*", "jetstream_advisory_nak_total"));
        assert!(!name_matches("jetstream_advisory_*", "messages_acked_total"));
    }
}
