//! `ledger` section: opt-in delivery receipts, where they are published and when. A
//! configuration type, kept with the others below the publisher that reads it
//! (`crate::ledger`, which re-exports it under its earlier path).

use serde::{Deserialize, Serialize};
use sinks_contract::config::Issues;
use sinks_toolkit::subject;

/// When receipts are published relative to the ack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerMode {
    /// Awaited (within `budget_ms`) before the message is acked (default).
    #[default]
    BeforeAck,
    /// Published after the ack, best effort; failures are only counted.
    AfterAck,
}

/// `ledger` section: opt-in delivery receipts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LedgerConfig {
    /// Publish one receipt per settled message.
    pub enabled: bool,
    /// Literal subject receipts are published to; a JetStream stream must capture it (with a
    /// duplicate window, which drops a redelivery's identical receipt). Required when enabled.
    pub subject: Option<String>,
    /// `before_ack` (default) or `after_ack`.
    pub mode: LedgerMode,
    /// Longest a message waits for its receipt to be stored, in milliseconds (1–600000);
    /// a receipt not stored in time is counted as unrecorded and the message is settled.
    pub budget_ms: u64,
    /// Header holding the correlation id (first value); checked before `correlation_field`.
    pub correlation_header: Option<String>,
    /// Dotted path of a JSON payload field holding the correlation id.
    pub correlation_field: Option<String>,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            subject: None,
            mode: LedgerMode::BeforeAck,
            budget_ms: 2000,
            correlation_header: None,
            correlation_field: None,
        }
    }
}

impl LedgerConfig {
    /// Records every problem of this section (`nats_subject` is the consumed subject, which
    /// must not capture the receipts).
    pub fn validate_at(&self, path: &str, nats_subject: &str, dead_letter_subject: Option<&str>, issues: &mut Issues) {
        if !self.enabled {
            return;
        }
        match self.subject.as_deref() {
            None => issues.push(&format!("{path}.subject"), "required when ledger.enabled is true"),
            Some(s) => {
                if let Err(e) = subject::validate_literal(s) {
                    issues.push(&format!("{path}.subject"), e.to_string());
                } else if subject::matches(nats_subject, s) {
                    issues.push(
                        &format!("{path}.subject"),
                        "must not be matched by nats.subject (receipts would be consumed again)",
                    );
                } else if dead_letter_subject == Some(s) {
                    issues.push(&format!("{path}.subject"), "must differ from dead_letter.subject");
                }
            }
        }
        issues.range(&format!("{path}.budget_ms"), self.budget_ms, 1, 600_000);
        if self.correlation_header.as_deref().is_some_and(|h| h.trim().is_empty()) {
            issues.push(&format!("{path}.correlation_header"), "must not be empty");
        }
        if self.correlation_field.as_deref().is_some_and(|f| f.trim().is_empty()) {
            issues.push(&format!("{path}.correlation_field"), "must not be empty");
        }
    }
}
