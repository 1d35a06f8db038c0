//! The `metrics` and `advisories` sections: the reference's fields (namespace, snapshot
//! file, event freshness; advisory subjects and limits) plus this build's extensions (the
//! in-process `/metrics`, `/healthz` and `/readyz` listener, the snapshot interval, the
//! consumer-lag poll interval).
//!
//! Everything here only observes: no field changes what is written, acked or dead-lettered.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::Issues;
use sinks_toolkit::subject;

/// Default metric name prefix (the reference's).
pub const DEFAULT_NAMESPACE: &str = "nats_sinks";

/// `metrics` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Record metrics (default false). Required by `listen`; without it `snapshot_file` is
    /// not written (as in the reference).
    pub enabled: bool,
    /// Prefix of every metric name (default `nats_sinks`): letters, digits, `_` and `:`, not
    /// starting with a digit.
    pub namespace: String,
    /// Write the reference's JSON snapshot (`nats_sinks.metrics.snapshot.v1`) to this file,
    /// every `snapshot_interval_seconds` and on stop, atomically, mode 0600 (default none).
    pub snapshot_file: Option<String>,
    /// Seconds between snapshot writes (default 10, 1..=3600; extension).
    pub snapshot_interval_seconds: u64,
    /// Address of the HTTP listener serving `/metrics`, `/healthz` and `/readyz`, e.g.
    /// `127.0.0.1:9108` (default none: no listener; extension).
    pub listen: Option<String>,
    /// Seconds between polls of the consumer's `num_pending` and `num_ack_pending`
    /// (default 10, 1..=3600; extension).
    pub lag_poll_interval_seconds: u64,
    /// Seconds between probes of the destination with the sink's health check, for
    /// `/readyz` (default 30, 1..=3600; extension).
    pub health_check_interval_seconds: u64,
    /// Record event freshness (age at receive and at store, clock skew; default true).
    pub event_freshness_enabled: bool,
    /// Count an event as stale from this age in seconds (default 300; `null` disables;
    /// 0..=31,536,000).
    pub event_stale_after_seconds: Option<f64>,
    /// Count a creation timestamp as future-dated beyond this many seconds ahead of the
    /// receive time (default 5; 0..=86,400).
    pub event_future_skew_tolerance_seconds: f64,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            namespace: DEFAULT_NAMESPACE.to_owned(),
            snapshot_file: None,
            snapshot_interval_seconds: 10,
            listen: None,
            lag_poll_interval_seconds: 10,
            health_check_interval_seconds: 30,
            event_freshness_enabled: true,
            event_stale_after_seconds: Some(300.0),
            event_future_skew_tolerance_seconds: 5.0,
        }
    }
}

/// True when `namespace` is a usable metric prefix (`[A-Za-z_:][A-Za-z0-9_:]*`).
pub fn valid_namespace(namespace: &str) -> bool {
    let mut chars = namespace.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

impl MetricsConfig {
    /// The listen address, when one is configured and valid.
    pub fn listen_addr(&self) -> Option<SocketAddr> {
        self.listen.as_deref().and_then(|a| a.parse().ok())
    }

    /// Checks the section (`path` is `metrics`).
    pub fn validate_at(&self, path: &str, issues: &mut Issues) {
        if !valid_namespace(&self.namespace) {
            issues.push(
                &format!("{path}.namespace"),
                "may contain only letters, digits, underscores and colons, and must not start with a digit",
            );
        }
        if let Some(file) = &self.snapshot_file {
            if file.trim().is_empty() {
                issues.push(&format!("{path}.snapshot_file"), "must not be empty");
            } else if file.chars().any(char::is_control) {
                issues.push(&format!("{path}.snapshot_file"), "must not contain control characters");
            } else if file.ends_with('/')
                || file.ends_with("/.")
                || file.ends_with("/..")
                || file == "."
                || file == ".."
            {
                issues.push(&format!("{path}.snapshot_file"), "must name a file");
            }
        }
        if let Some(listen) = &self.listen {
            if listen.parse::<SocketAddr>().is_err() {
                issues.push(&format!("{path}.listen"), "must be an address and port, e.g. 127.0.0.1:9108");
            }
            if !self.enabled {
                issues.push(&format!("{path}.listen"), "contradicts metrics.enabled = false (the listener serves the recorded metrics; drop metrics.enabled, or set it true)");
            }
        }
        issues.range(&format!("{path}.snapshot_interval_seconds"), self.snapshot_interval_seconds, 1, 3600);
        issues.range(&format!("{path}.lag_poll_interval_seconds"), self.lag_poll_interval_seconds, 1, 3600);
        issues.range(&format!("{path}.health_check_interval_seconds"), self.health_check_interval_seconds, 1, 3600);
        if let Some(stale) = self.event_stale_after_seconds
            && !(stale.is_finite() && (0.0..=31_536_000.0).contains(&stale))
        {
            issues.push(&format!("{path}.event_stale_after_seconds"), "must be in 0..=31536000 or null");
        }
        let skew = self.event_future_skew_tolerance_seconds;
        if !(skew.is_finite() && (0.0..=86_400.0).contains(&skew)) {
            issues.push(&format!("{path}.event_future_skew_tolerance_seconds"), "must be in 0..=86400");
        }
    }
}

/// The prefix every advisory subject must start with.
pub const ADVISORY_SUBJECT_PREFIX: &str = "$JS.EVENT.ADVISORY.";
/// Most advisory subjects (the reference's limit).
pub const MAX_ADVISORY_SUBJECTS: usize = 32;
/// Longest advisory subject (the reference's limit).
pub const MAX_ADVISORY_SUBJECT_LEN: usize = 512;
/// Largest `max_payload_bytes` (1 MiB).
pub const MAX_ADVISORY_PAYLOAD_BYTES: u64 = 1_048_576;

/// The reference's default advisory subjects.
pub const DEFAULT_ADVISORY_SUBJECTS: [&str; 15] = [
    "$JS.EVENT.ADVISORY.API",
    "$JS.EVENT.ADVISORY.API.>",
    "$JS.EVENT.ADVISORY.STREAM.CREATED.*",
    "$JS.EVENT.ADVISORY.STREAM.DELETED.*",
    "$JS.EVENT.ADVISORY.STREAM.MODIFIED.*",
    "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.*",
    "$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.*",
    "$JS.EVENT.ADVISORY.CONSUMER.CREATED.*.*",
    "$JS.EVENT.ADVISORY.CONSUMER.DELETED.*.*",
    "$JS.EVENT.ADVISORY.CONSUMER.MODIFIED.*.*",
    "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.*.*",
    "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.*.*",
    "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.*.*",
    "$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.*.*",
    "$JS.EVENT.ADVISORY.CONSUMER.QUORUM_LOST.*.*",
];

/// `advisories` section: observe JetStream advisories (counted and optionally logged; never
/// acted on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdvisoriesConfig {
    /// Subscribe to the advisory subjects (default false).
    pub enabled: bool,
    /// Subject patterns to subscribe to, each starting with `$JS.EVENT.ADVISORY.` (at most
    /// 32; default: the reference's 15 patterns for API, stream and consumer advisories).
    pub subjects: Vec<String>,
    /// Advisories larger than this are counted as parse errors, unread (default 65,536;
    /// 0..=1,048,576).
    pub max_payload_bytes: u64,
    /// Log each advisory's kind at info level (default false; never its content).
    pub log_events: bool,
}

impl Default for AdvisoriesConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            subjects: DEFAULT_ADVISORY_SUBJECTS.iter().map(|s| (*s).to_owned()).collect(),
            max_payload_bytes: 65_536,
            log_events: false,
        }
    }
}

impl AdvisoriesConfig {
    /// Checks the section (`path` is `advisories`).
    pub fn validate_at(&self, path: &str, issues: &mut Issues) {
        if self.subjects.is_empty() {
            issues.push(&format!("{path}.subjects"), "must contain at least one subject");
        }
        if self.subjects.len() > MAX_ADVISORY_SUBJECTS {
            issues.push(&format!("{path}.subjects"), format!("must not contain more than {MAX_ADVISORY_SUBJECTS}"));
        }
        for (i, s) in self.subjects.iter().enumerate() {
            let at = format!("{path}.subjects[{i}]");
            if let Err(message) = check_advisory_subject(s) {
                issues.push(&at, message);
            }
        }
        issues.range(&format!("{path}.max_payload_bytes"), self.max_payload_bytes, 0, MAX_ADVISORY_PAYLOAD_BYTES);
    }
}

fn check_advisory_subject(s: &str) -> Result<(), String> {
    if s.is_empty() || s.trim() != s {
        return Err("must not be empty or padded".into());
    }
    if s.len() > MAX_ADVISORY_SUBJECT_LEN {
        return Err(format!("must not be longer than {MAX_ADVISORY_SUBJECT_LEN} characters"));
    }
    if s.chars().any(char::is_control) {
        return Err("must not contain control characters".into());
    }
    if !s.starts_with(ADVISORY_SUBJECT_PREFIX) {
        return Err(format!("must start with `{ADVISORY_SUBJECT_PREFIX}`"));
    }
    subject::validate_pattern(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(m: &MetricsConfig) -> Vec<String> {
        let mut issues = Issues::default();
        m.validate_at("metrics", &mut issues);
        issues.finish().err().map(|e| e.issues.into_iter().map(|i| i.path).collect()).unwrap_or_default()
    }

    #[test]
    fn defaults_are_the_reference_s_and_valid() {
        let m = MetricsConfig::default();
        assert!(!m.enabled);
        assert_eq!(m.namespace, "nats_sinks");
        assert_eq!(m.event_stale_after_seconds, Some(300.0));
        assert_eq!(m.snapshot_interval_seconds, 10);
        assert!(issues(&m).is_empty());
        let mut a = Issues::default();
        AdvisoriesConfig::default().validate_at("advisories", &mut a);
        assert!(a.finish().is_ok());
    }

    #[test]
    fn bad_values_name_their_field() {
        let m = MetricsConfig {
            namespace: "9bad".into(),
            snapshot_file: Some("a\nb".into()),
            listen: Some("localhost".into()),
            snapshot_interval_seconds: 0,
            event_stale_after_seconds: Some(-1.0),
            event_future_skew_tolerance_seconds: f64::NAN,
            ..MetricsConfig::default()
        };
        let got = issues(&m);
        for field in [
            "metrics.namespace",
            "metrics.snapshot_file",
            "metrics.listen",
            "metrics.snapshot_interval_seconds",
            "metrics.event_stale_after_seconds",
            "metrics.event_future_skew_tolerance_seconds",
        ] {
            assert!(got.iter().any(|p| p == field), "{field} in {got:?}");
        }
        let enabled =
            MetricsConfig { enabled: true, listen: Some("127.0.0.1:9108".into()), ..MetricsConfig::default() };
        assert!(issues(&enabled).is_empty());
        assert!(enabled.listen_addr().is_some());
        assert!(valid_namespace("a:b_c9") && !valid_namespace("") && !valid_namespace("a-b"));
    }

    #[test]
    fn advisory_subjects_are_checked() {
        let a = AdvisoriesConfig {
            subjects: vec!["orders.>".into(), " $JS.EVENT.ADVISORY.API".into(), "$JS.EVENT.ADVISORY.>".into()],
            max_payload_bytes: 2 << 20,
            ..AdvisoriesConfig::default()
        };
        let mut issues = Issues::default();
        a.validate_at("advisories", &mut issues);
        let got: Vec<String> = issues.finish().unwrap_err().issues.into_iter().map(|i| i.path).collect();
        assert_eq!(got, ["advisories.subjects[0]", "advisories.subjects[1]", "advisories.max_payload_bytes"]);
    }
}
