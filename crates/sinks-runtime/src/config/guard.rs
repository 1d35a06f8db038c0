//! `stream_guard` section: what the sink watches about the stream under it.
//!
//! Operators delete and re-create streams, restore them from backups, and JetStream itself can
//! lose the tail of a stream after a crash. Each of these hands out stream sequences that
//! were used before, and every key made of the stream sequence would then name an earlier
//! event's record. The runner pins the stream's identity (its creation time, and the highest
//! sequences this consumer has seen and settled) in a key-value bucket that outlives the
//! stream, checks it at start and on every lag poll, and when it changed stops fetching until
//! the operator decides (`on_change`, or `nats-sink stream-identity`). It also warns when
//! unsettled messages come close to being removed by the stream's limits. Nats-sinks
//! extension.

use serde::{Deserialize, Serialize};

use super::Issues;

/// What the runner does when the stream's identity changed under the consumer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnStreamChange {
    /// Stop fetching, report the change (one error line, the `stream_identity_paused`
    /// gauge, `/readyz` not ready) and wait for the operator's decision
    /// (`nats-sink stream-identity CONFIG --accept new-epoch|replay`). The default: nothing
    /// is written or acknowledged that could not be proven new.
    #[default]
    Pause,
    /// Start a new epoch at once: the new stream's messages get keys and names of their own
    /// (`{stream}.{epoch}`), which cannot collide with the earlier stream's records.
    NewEpoch,
}

impl OnStreamChange {
    /// The value as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pause => "pause",
            Self::NewEpoch => "new_epoch",
        }
    }
}

/// `stream_guard` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StreamGuardConfig {
    /// Pin the stream's identity and check it at start, on every lag poll and whenever the
    /// consumer had to be set up again (default true). Needs a durable consumer; false is the
    /// explicit opt-out (a re-created stream is then caught only at the destination, as
    /// `sequence_reused`).
    pub identity: bool,
    /// Key-value bucket holding one identity record per stream and consumer (default
    /// `nats_sinks_stream_guard`; created with the stream's replicas in the
    /// `create_if_missing` and `reconcile` consumer modes, required in `bind_only`:
    /// `nats-sink stream-plan` prints the command).
    pub bucket: String,
    /// What to do when the stream changed: `pause` (default) or `new_epoch`.
    pub on_change: OnStreamChange,
    /// Seconds between checks of the record while paused, so an operator's decision is taken
    /// up without a restart (default 5, 1..=3600).
    pub recheck_seconds: u64,
    /// Seconds a stream that looks moved back (a last sequence below the highest one
    /// recorded) must keep looking so before it is judged a change (default 15, at most
    /// 600; 0 judges at once). A leader that has not yet applied every entry, or an old
    /// leader cut off from the others that has not yet stepped down, answers with a last
    /// sequence behind the stream's for a moment; a stream restored from a backup or one
    /// that lost its tail stays behind. Fetching is paused meanwhile; a re-created stream
    /// (another creation time) is judged at once.
    pub rewind_confirm_seconds: u64,
    /// Warn (and set the `stream_retention_*_used_ratio` gauges past it) when unsettled
    /// messages have used this share of a stream limit that removes them (`max_age`,
    /// `max_msgs`, `max_bytes` with discard old; default 0.8, above 0 and at most 1).
    pub retention_warning_ratio: f64,
}

/// The default bucket name.
pub const DEFAULT_BUCKET: &str = "nats_sinks_stream_guard";

impl Default for StreamGuardConfig {
    fn default() -> Self {
        Self {
            identity: true,
            bucket: DEFAULT_BUCKET.to_owned(),
            on_change: OnStreamChange::Pause,
            recheck_seconds: 5,
            rewind_confirm_seconds: 15,
            retention_warning_ratio: 0.8,
        }
    }
}

/// The characters a key-value bucket name may hold.
fn valid_bucket(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl StreamGuardConfig {
    /// Records an issue for every bad field, under `at`.
    pub fn validate_at(&self, at: &str, issues: &mut Issues) {
        if !valid_bucket(&self.bucket) {
            issues
                .push(&format!("{at}.bucket"), "must be 1 to 64 letters, digits, `_` or `-` (a key-value bucket name)");
        }
        if !(1..=3600).contains(&self.recheck_seconds) {
            issues.push(&format!("{at}.recheck_seconds"), "must be between 1 and 3600");
        }
        if self.rewind_confirm_seconds > 600 {
            issues.push(&format!("{at}.rewind_confirm_seconds"), "must be at most 600");
        }
        if !(self.retention_warning_ratio > 0.0 && self.retention_warning_ratio <= 1.0) {
            issues.push(&format!("{at}.retention_warning_ratio"), "must be above 0 and at most 1");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_field_is_named() {
        let bad = StreamGuardConfig {
            bucket: "a.b".into(),
            recheck_seconds: 0,
            rewind_confirm_seconds: 601,
            retention_warning_ratio: 1.5,
            ..Default::default()
        };
        let mut issues = Issues::default();
        bad.validate_at("stream_guard", &mut issues);
        let paths: Vec<String> = issues.finish().unwrap_err().issues.into_iter().map(|i| i.path).collect();
        assert_eq!(
            paths,
            [
                "stream_guard.bucket",
                "stream_guard.recheck_seconds",
                "stream_guard.rewind_confirm_seconds",
                "stream_guard.retention_warning_ratio"
            ]
        );
        let mut fine = Issues::default();
        StreamGuardConfig::default().validate_at("stream_guard", &mut fine);
        assert!(fine.finish().is_ok());
        let parsed: StreamGuardConfig = serde_json::from_value(serde_json::json!({"on_change": "new_epoch"})).unwrap();
        assert_eq!(parsed.on_change, OnStreamChange::NewEpoch);
        assert!(parsed.identity && parsed.bucket == DEFAULT_BUCKET);
    }
}
