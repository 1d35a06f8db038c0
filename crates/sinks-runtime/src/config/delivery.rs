//! `delivery` and `logging` sections: batching, pipelining, retry, heartbeats, ack mode.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Issues;
use sinks_toolkit::retry::{Backoff, BackoffMode, Jitter};

/// What to do with a temporary failure that is still within `max_retries`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemporaryAction {
    /// NAK with the backoff delay (default).
    #[default]
    Nak,
    /// Send nothing; JetStream redelivers after AckWait.
    LeaveUnacked,
}

/// `delivery` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeliveryConfig {
    /// Most messages per batch (1–10,000).
    pub batch_size: usize,
    /// How long a fetch waits for the first message, milliseconds (≥ 1).
    pub batch_timeout_ms: u64,
    /// Batches fetched, written and settled concurrently (1–64). Messages sharing an
    /// ordering key are never written concurrently or out of order.
    pub max_in_flight_batches: usize,
    /// Only `after_sink_commit`.
    pub ack_policy: AckPolicyName,
    /// Highest delivery count that is NAKed with backoff after a temporary failure; later
    /// deliveries are left for AckWait (0–1,000,000).
    pub max_retries: u64,
    /// Base of the redelivery backoff, milliseconds (0–3,600,000).
    pub retry_backoff_ms: u64,
    /// Cap of the redelivery backoff, milliseconds (≥ `retry_backoff_ms`).
    pub retry_backoff_max_ms: u64,
    /// `fixed`, `linear` or `exponential`.
    pub retry_backoff_mode: BackoffMode,
    /// Growth factor of exponential backoff (1.0–10.0).
    pub retry_backoff_multiplier: f64,
    /// `none`, `full` or `equal`.
    pub retry_jitter: Jitter,
    /// `nak` (default) or `leave_unacked` for temporary failures.
    pub temporary_failure_action: TemporaryAction,
    /// Informational, kept for compatibility: redelivery is always preferred over loss.
    pub prefer_safe_duplication: bool,
    /// What keeps messages in order across concurrent batches.
    pub ordering_key: OrderingKey,
    /// Dotted payload path used when `ordering_key` is `payload_field`.
    pub ordering_payload_field: Option<String>,
    /// Weighted priority-lane order within each fetched batch.
    pub priority_lanes: sinks_policy::lanes::PriorityLanesConfig,
    /// In-progress heartbeats during long writes.
    pub in_progress: InProgressConfig,
    /// Server-confirmed acknowledgements.
    pub ack_confirmation: AckConfirmationConfig,
    /// How long messages are held through a destination outage, seconds (0–86,400; default
    /// 300; 0 turns holding off). When a whole batch fails temporarily the runner stops
    /// fetching, keeps the batch unacknowledged with in-progress heartbeats (no delivery of
    /// `max_deliver` is used) and probes the destination, writing the batch again as soon as
    /// it answers; after this long the held messages are released (NAKed with backoff) to
    /// take their normal course. Extension.
    pub outage_hold_seconds: u64,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        Self {
            batch_size: 100,
            batch_timeout_ms: 1000,
            max_in_flight_batches: 1,
            ack_policy: AckPolicyName::AfterSinkCommit,
            max_retries: 5,
            retry_backoff_ms: 1000,
            retry_backoff_max_ms: 60_000,
            retry_backoff_mode: BackoffMode::Exponential,
            retry_backoff_multiplier: 2.0,
            retry_jitter: Jitter::Full,
            temporary_failure_action: TemporaryAction::Nak,
            prefer_safe_duplication: true,
            ordering_key: OrderingKey::Subject,
            ordering_payload_field: None,
            priority_lanes: sinks_policy::lanes::PriorityLanesConfig::default(),
            in_progress: InProgressConfig::default(),
            ack_confirmation: AckConfirmationConfig::default(),
            outage_hold_seconds: 300,
        }
    }
}

/// The only supported ack policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AckPolicyName {
    /// Acknowledge only after the sink committed.
    #[default]
    AfterSinkCommit,
}

/// What orders messages across concurrent batches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderingKey {
    /// No ordering: any two messages may be written concurrently.
    None,
    /// Messages of one subject are written in stream order, one batch at a time (default).
    #[default]
    Subject,
    /// Messages with the same value at `ordering_payload_field` are written in order.
    PayloadField,
}

/// `delivery.in_progress`: `+WPI` heartbeats while a batch is being written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InProgressConfig {
    /// Send heartbeats.
    pub enabled: bool,
    /// Interval, milliseconds; must be below 80 % of the consumer's AckWait.
    pub interval_ms: u64,
    /// Heartbeats per batch before giving up (1–1000).
    pub max_heartbeats: u32,
    /// Longest wait for the heartbeat task to stop before settling, milliseconds (0–60,000).
    pub shutdown_timeout_ms: u64,
}

impl Default for InProgressConfig {
    fn default() -> Self {
        Self { enabled: false, interval_ms: 5000, max_heartbeats: 12, shutdown_timeout_ms: 5000 }
    }
}

/// `delivery.ack_confirmation`: wait for the server to confirm each ack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AckConfirmationConfig {
    /// Confirm acks (pipelined per batch).
    pub enabled: bool,
    /// How long to wait for a confirmation, milliseconds (1–60,000).
    pub timeout_ms: u64,
    /// Kept for compatibility: the client always supports confirmed acks.
    pub unsupported_action: String,
}

impl Default for AckConfirmationConfig {
    fn default() -> Self {
        Self { enabled: false, timeout_ms: 1000, unsupported_action: "fail".into() }
    }
}

impl DeliveryConfig {
    /// The redelivery backoff schedule.
    pub fn backoff(&self) -> Backoff {
        Backoff {
            base: Duration::from_millis(self.retry_backoff_ms),
            max: Duration::from_millis(self.retry_backoff_max_ms),
            mode: self.retry_backoff_mode,
            multiplier: self.retry_backoff_multiplier,
            jitter: self.retry_jitter,
        }
    }

    pub(super) fn validate(&self, issues: &mut Issues) {
        issues.range("delivery.batch_size", self.batch_size as u64, 1, 10_000);
        issues.range("delivery.batch_timeout_ms", self.batch_timeout_ms, 1, u64::MAX);
        issues.range("delivery.max_in_flight_batches", self.max_in_flight_batches as u64, 1, 64);
        issues.range("delivery.max_retries", self.max_retries, 0, 1_000_000);
        issues.range("delivery.retry_backoff_ms", self.retry_backoff_ms, 0, 3_600_000);
        issues.range("delivery.retry_backoff_max_ms", self.retry_backoff_max_ms, 0, 3_600_000);
        if self.retry_backoff_max_ms < self.retry_backoff_ms {
            issues.push("delivery.retry_backoff_max_ms", "must be at least retry_backoff_ms");
        }
        if !(1.0..=10.0).contains(&self.retry_backoff_multiplier) {
            issues.push("delivery.retry_backoff_multiplier", "must be in 1.0..=10.0");
        }
        if self.ordering_key == OrderingKey::PayloadField && self.ordering_payload_field.is_none() {
            issues.push("delivery.ordering_payload_field", "required when ordering_key is payload_field");
        }
        self.priority_lanes.validate_at("delivery.priority_lanes", issues);
        let ip = &self.in_progress;
        issues.range("delivery.in_progress.interval_ms", ip.interval_ms, 1, 3_600_000);
        issues.range("delivery.in_progress.max_heartbeats", u64::from(ip.max_heartbeats), 1, 1000);
        issues.range("delivery.in_progress.shutdown_timeout_ms", ip.shutdown_timeout_ms, 0, 60_000);
        issues.range("delivery.ack_confirmation.timeout_ms", self.ack_confirmation.timeout_ms, 1, 60_000);
        issues.range("delivery.outage_hold_seconds", self.outage_hold_seconds, 0, 86_400);
        if !matches!(self.ack_confirmation.unsupported_action.as_str(), "fail" | "standard_ack") {
            issues.push("delivery.ack_confirmation.unsupported_action", "must be `fail` or `standard_ack`");
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `logging` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoggingConfig {
    /// `TRACE`, `DEBUG`, `INFO`, `WARNING`/`WARN`, `ERROR` (case-insensitive).
    pub level: String,
    /// Must stay false: payloads are never logged.
    pub payload_logging: bool,
    /// `text` or `json`.
    pub format: LogFormat,
    /// Seconds between the info-level summary lines of `nats-sink run` (messages per second,
    /// consumer lag, DLQ count); 0 turns them off (default 60; extension).
    pub summary_interval_seconds: u64,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        Self { level: "INFO".into(), payload_logging: false, format: LogFormat::Text, summary_interval_seconds: 60 }
    }
}

impl LoggingConfig {
    /// The level as a `tracing` filter directive.
    pub fn filter_directive(&self) -> Option<&'static str> {
        match self.level.to_ascii_uppercase().as_str() {
            "TRACE" => Some("trace"),
            "DEBUG" => Some("debug"),
            "INFO" => Some("info"),
            "WARN" | "WARNING" => Some("warn"),
            "ERROR" | "CRITICAL" => Some("error"),
            _ => None,
        }
    }

    pub(super) fn validate(&self, issues: &mut Issues) {
        if self.filter_directive().is_none() {
            issues.push("logging.level", "must be one of TRACE, DEBUG, INFO, WARNING, ERROR");
        }
        if self.payload_logging {
            issues.push("logging.payload_logging", "payload logging is not supported: payloads are never logged");
        }
        issues.range("logging.summary_interval_seconds", self.summary_interval_seconds, 0, 86_400);
    }
}
