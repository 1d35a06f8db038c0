//! `consumer_management` and `stream_management` sections.
//!
//! Consumers are explicit-ack pull consumers. Streams are never created or changed unless
//! `stream_management.create_if_missing` is set (handy for a quick start), and even then an
//! existing stream is left exactly as it is.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Issues;
use sinks_toolkit::subject;

/// How the runner gets its durable consumer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsumerMode {
    /// Bind to an existing consumer; a missing consumer or any drift fails start-up.
    BindOnly,
    /// Create the consumer when missing; fail start-up on drift of an existing one.
    #[default]
    CreateIfMissing,
    /// Create when missing; update the fields JetStream allows to change; fail on the rest.
    Reconcile,
}

/// Where a new consumer starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliverPolicy {
    /// From the first message in the stream.
    #[default]
    All,
    /// From the last message.
    Last,
    /// Only messages published after creation.
    New,
    /// The last message of every subject.
    LastPerSubject,
}

/// Replay speed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayPolicy {
    /// As fast as possible.
    #[default]
    Instant,
    /// At the original publish rate.
    Original,
}

/// `consumer_management` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsumerManagementConfig {
    /// `bind_only`, `create_if_missing` (default) or `reconcile`.
    pub mode: ConsumerMode,
    /// Filter subjects (each inside `nats.subject`); empty means `[nats.subject]`.
    pub filter_subjects: Vec<String>,
    /// Where a new consumer starts.
    pub deliver_policy: DeliverPolicy,
    /// Replay speed.
    pub replay_policy: ReplayPolicy,
    /// AckWait in seconds (0 < x ≤ 86400); exclusive with `backoff_seconds`.
    pub ack_wait_seconds: Option<f64>,
    /// Maximum deliveries before the server gives up (1–1,000,000).
    pub max_deliver: Option<i64>,
    /// Server-side redelivery backoff, seconds per attempt; needs `max_deliver`.
    pub backoff_seconds: Option<Vec<f64>>,
    /// Maximum unacknowledged messages (1–1,000,000).
    pub max_ack_pending: Option<i64>,
    /// Maximum waiting pull requests (1–1,000,000).
    pub max_waiting: Option<i64>,
    /// Deliver headers only (body size in `Nats-Msg-Size`).
    pub headers_only: Option<bool>,
    /// Consumer replicas (0–5; 0 = as the stream).
    pub num_replicas: Option<usize>,
    /// Keep consumer state in memory.
    pub memory_storage: Option<bool>,
    /// Consumer metadata (≤ 32 entries).
    pub metadata: BTreeMap<String, String>,
}

impl Default for ConsumerManagementConfig {
    fn default() -> Self {
        Self {
            mode: ConsumerMode::CreateIfMissing,
            filter_subjects: Vec::new(),
            deliver_policy: DeliverPolicy::All,
            replay_policy: ReplayPolicy::Instant,
            ack_wait_seconds: None,
            max_deliver: None,
            backoff_seconds: None,
            max_ack_pending: None,
            max_waiting: None,
            headers_only: None,
            num_replicas: None,
            memory_storage: None,
            metadata: BTreeMap::new(),
        }
    }
}

impl ConsumerManagementConfig {
    /// The effective filter subjects.
    pub fn effective_filters(&self, nats_subject: &str) -> Vec<String> {
        if self.filter_subjects.is_empty() { vec![nats_subject.to_owned()] } else { self.filter_subjects.clone() }
    }

    pub(super) fn validate(&self, nats_subject: &str, issues: &mut Issues) {
        if self.filter_subjects.len() > 64 {
            issues.push("consumer_management.filter_subjects", "at most 64 entries");
        }
        for (i, f) in self.filter_subjects.iter().enumerate() {
            let path = format!("consumer_management.filter_subjects[{i}]");
            match subject::validate_pattern(f) {
                Err(e) => issues.push(&path, e.to_string()),
                Ok(()) if !subject::contains(nats_subject, f) => {
                    issues.push(&path, format!("must be inside nats.subject `{nats_subject}`"));
                }
                Ok(()) => {}
            }
        }
        if let Some(w) = self.ack_wait_seconds
            && !(w > 0.0 && w <= 86_400.0)
        {
            issues.push("consumer_management.ack_wait_seconds", "must be in (0, 86400]");
        }
        if let Some(backoff) = &self.backoff_seconds {
            if self.ack_wait_seconds.is_some() {
                issues.push("consumer_management.backoff_seconds", "cannot be combined with ack_wait_seconds");
            }
            match self.max_deliver {
                None => issues.push("consumer_management.backoff_seconds", "requires max_deliver"),
                Some(m) if (backoff.len() as i64) > m => {
                    issues.push("consumer_management.backoff_seconds", "has more entries than max_deliver");
                }
                Some(_) => {}
            }
            if backoff.is_empty() || backoff.len() > 128 || backoff.iter().any(|s| !(*s > 0.0 && *s <= 604_800.0)) {
                issues.push("consumer_management.backoff_seconds", "1–128 entries, each in (0, 604800]");
            }
        }
        for (path, value) in [
            ("consumer_management.max_deliver", self.max_deliver),
            ("consumer_management.max_ack_pending", self.max_ack_pending),
            ("consumer_management.max_waiting", self.max_waiting),
        ] {
            if let Some(v) = value
                && !(1..=1_000_000).contains(&v)
            {
                issues.push(path, "must be in 1..=1000000");
            }
        }
        if self.num_replicas.is_some_and(|n| n > 5) {
            issues.push("consumer_management.num_replicas", "must be in 0..=5");
        }
        if self.metadata.len() > 32 {
            issues.push("consumer_management.metadata", "at most 32 entries");
        }
        for (k, v) in &self.metadata {
            let key_ok = k.len() <= 128
                && k.starts_with(|c: char| c.is_ascii_alphabetic())
                && k.chars().all(|c| c.is_ascii_alphanumeric() || "_.:/-".contains(c));
            if !key_ok || super::redact::is_secret_key(k) {
                issues.push(&format!("consumer_management.metadata.{k}"), "invalid or secret-looking key");
            }
            if v.len() > 512 {
                issues.push(&format!("consumer_management.metadata.{k}"), "value longer than 512 characters");
            }
        }
    }
}

/// Storage of a stream created by `stream_management`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamStorage {
    /// On disk (default).
    #[default]
    File,
    /// In memory.
    Memory,
}

/// `stream_management` section (nats-sinks extension; opt-in).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StreamManagementConfig {
    /// Create `nats.stream` (and `dead_letter_stream`) when missing. Existing streams are
    /// never changed.
    pub create_if_missing: bool,
    /// Subjects of a created stream; empty means `[nats.subject]`.
    pub subjects: Vec<String>,
    /// Storage of created streams.
    pub storage: StreamStorage,
    /// Maximum message age of created streams, seconds (none = unlimited).
    pub max_age_seconds: Option<u64>,
    /// Duplicate window of created streams, seconds (none = server default, 2 minutes).
    pub duplicate_window_seconds: Option<u64>,
    /// Name of a stream to create for `dead_letter.subject` when missing.
    pub dead_letter_stream: Option<String>,
}

impl StreamManagementConfig {
    pub(super) fn validate(&self, issues: &mut Issues) {
        for (i, s) in self.subjects.iter().enumerate() {
            if let Err(e) = subject::validate_pattern(s) {
                issues.push(&format!("stream_management.subjects[{i}]"), e.to_string());
            }
        }
        if let Some(name) = &self.dead_letter_stream
            && (name.is_empty() || name.chars().any(|c| c.is_whitespace() || ".*>/\\".contains(c)))
        {
            issues.push("stream_management.dead_letter_stream", "must be a valid stream name");
        }
    }
}
