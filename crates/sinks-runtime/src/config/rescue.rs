//! `rescue` section: what happens to a message the server stops redelivering.
//!
//! When the consumer has a `max_deliver`, JetStream gives up on a message after its last
//! allowed delivery and says so only in a `MAX_DELIVERIES` advisory. A sink that is alive at
//! that moment dead-letters the message itself; one that was killed, OOM-killed, rebooted or
//! cut off for longer than AckWait during that delivery would lose it. So the sink keeps a
//! stream that captures its consumer's exhaustion advisories (created in the
//! `create_if_missing` and `reconcile` consumer modes, required in `bind_only`), and a task
//! of the runner gives every captured message its last chance: the same policies and write,
//! and when that does not make it durable, a dead letter with reason `max_deliver_exhausted`.
//! Nats-sinks extension; on by default, and it acts only when the consumer has a
//! `max_deliver`.

use serde::{Deserialize, Serialize};

use super::Issues;

/// `rescue` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RescueConfig {
    /// Capture and rescue the messages the server stops redelivering (default true; acts
    /// only when the consumer has a `max_deliver`). Setting it false is the explicit opt-out
    /// that `bind_only` needs when the capture stream does not exist: then a message whose
    /// last delivery is lost to a crash is dropped by the server, as in the reference.
    pub enabled: bool,
    /// The stream capturing the consumer's `MAX_DELIVERIES` advisories; default
    /// `NATS_SINKS_RESCUE_<stream>_<consumer>`.
    pub stream: Option<String>,
    /// The durable consumer of that stream the rescue task reads; default
    /// `<consumer>_rescue`. Every worker of one consumer shares it, so one advisory is
    /// rescued by one worker.
    pub consumer: Option<String>,
    /// How long the capture stream keeps an advisory nobody rescued (default 7 days): a
    /// sink down for longer loses the record of an exhaustion (never the message, which
    /// stays in its stream as long as the stream keeps it).
    pub max_age_seconds: u64,
    /// Advisories taken per rescue round (default 100).
    pub batch_size: usize,
}

impl Default for RescueConfig {
    fn default() -> Self {
        Self { enabled: true, stream: None, consumer: None, max_age_seconds: 7 * 24 * 3600, batch_size: 100 }
    }
}

/// JetStream's rules for stream and consumer names: no whitespace, `.`, `*`, `>`, path
/// separators or control characters.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.chars().any(|c| c.is_whitespace() || c.is_control() || ".*>/\\".contains(c))
}

/// `name` with every character a JetStream name cannot hold replaced by `_`.
fn sanitized(name: &str) -> String {
    name.chars().map(|c| if c.is_whitespace() || c.is_control() || ".*>/\\".contains(c) { '_' } else { c }).collect()
}

impl RescueConfig {
    /// The capture stream's name for `stream` and `consumer`.
    pub fn stream_name(&self, stream: &str, consumer: &str) -> String {
        self.stream.clone().unwrap_or_else(|| sanitized(&format!("NATS_SINKS_RESCUE_{stream}_{consumer}")))
    }

    /// The rescue consumer's name for `consumer`.
    pub fn consumer_name(&self, consumer: &str) -> String {
        self.consumer.clone().unwrap_or_else(|| sanitized(&format!("{consumer}_rescue")))
    }

    /// The subject the server publishes `consumer`'s exhaustion advisories on.
    pub fn advisory_subject(stream: &str, consumer: &str) -> String {
        format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{consumer}")
    }

    /// Records an issue for every bad field, under `at`.
    pub fn validate_at(&self, at: &str, issues: &mut Issues) {
        for (field, value) in [("stream", &self.stream), ("consumer", &self.consumer)] {
            if let Some(name) = value
                && !valid_name(name)
            {
                issues.push(
                    &format!("{at}.{field}"),
                    "must be a JetStream name: no whitespace, `.`, `*`, `>` or path separators",
                );
            }
        }
        issues.range(&format!("{at}.max_age_seconds"), self.max_age_seconds, 60, u64::MAX);
        issues.range(&format!("{at}.batch_size"), self.batch_size as u64, 1, 1000);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_default_from_the_stream_and_consumer_and_stay_valid() {
        let c = RescueConfig::default();
        assert_eq!(c.stream_name("ORDERS", "sink-1"), "NATS_SINKS_RESCUE_ORDERS_sink-1");
        assert_eq!(c.consumer_name("sink-1"), "sink-1_rescue");
        assert!(valid_name(&c.stream_name("A", "b c")), "a space in a name is replaced");
        assert_eq!(
            RescueConfig::advisory_subject("ORDERS", "sink-1"),
            "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.sink-1"
        );
        let named = RescueConfig { stream: Some("CAPTURE".into()), consumer: Some("r".into()), ..c };
        assert_eq!((named.stream_name("X", "y"), named.consumer_name("y")), ("CAPTURE".into(), "r".into()));
    }

    #[test]
    fn bad_fields_are_named() {
        let c = RescueConfig {
            stream: Some("a.b".into()),
            consumer: Some("x y".into()),
            batch_size: 0,
            max_age_seconds: 1,
            ..Default::default()
        };
        let mut issues = Issues::default();
        c.validate_at("rescue", &mut issues);
        let err = issues.finish().unwrap_err();
        let paths: Vec<&str> = err.issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, ["rescue.stream", "rescue.consumer", "rescue.max_age_seconds", "rescue.batch_size"]);
    }
}
