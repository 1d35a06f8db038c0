//! JetStream advisories (the reference's §1.11): the server's own events under
//! `$JS.EVENT.ADVISORY.>` (a message reached max_deliver, a NAK, an AckTerm, quorum lost, a
//! stream or consumer created, API audit…), observed on a plain core-NATS subscription.
//!
//! Observation only: an advisory is classified, counted and, with `log_events`, logged by
//! kind; it never acks, NAKs, dead-letters or retries anything, and its content (stream and
//! consumer names, sequences) is neither logged nor used as a label.

use futures::StreamExt;
use futures::stream::select_all;
use tokio::sync::watch;

use crate::config::AdvisoriesConfig;
use crate::metrics::{CounterId, Metrics};

/// What an advisory is about (the reference's kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// JetStream API audit.
    ApiAudit,
    /// A consumer was created, deleted or modified.
    ConsumerAction,
    /// A consumer elected a leader.
    ConsumerLeaderElected,
    /// A consumer lost quorum.
    ConsumerQuorumLost,
    /// A message reached the consumer's max_deliver.
    MaxDeliver,
    /// A message was NAKed.
    Nak,
    /// A stream was created, deleted or modified.
    StreamAction,
    /// A stream elected a leader.
    StreamLeaderElected,
    /// A stream lost quorum.
    StreamQuorumLost,
    /// A message was terminated (AckTerm).
    Terminated,
    /// Anything else.
    Unsupported,
}

const TYPE_PREFIX: &str = "io.nats.jetstream.advisory.v1.";

/// Subject prefixes and the kind they mean (a prefix ending in `.` matches anything under
/// it; one without matches itself or its sub-subjects).
const BY_SUBJECT: [(&str, Kind); 14] = [
    ("$JS.EVENT.ADVISORY.API", Kind::ApiAudit),
    ("$JS.EVENT.ADVISORY.STREAM.CREATED.", Kind::StreamAction),
    ("$JS.EVENT.ADVISORY.STREAM.DELETED.", Kind::StreamAction),
    ("$JS.EVENT.ADVISORY.STREAM.MODIFIED.", Kind::StreamAction),
    ("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.", Kind::StreamLeaderElected),
    ("$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.", Kind::StreamQuorumLost),
    ("$JS.EVENT.ADVISORY.CONSUMER.CREATED.", Kind::ConsumerAction),
    ("$JS.EVENT.ADVISORY.CONSUMER.DELETED.", Kind::ConsumerAction),
    ("$JS.EVENT.ADVISORY.CONSUMER.MODIFIED.", Kind::ConsumerAction),
    ("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.", Kind::MaxDeliver),
    ("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.", Kind::Nak),
    ("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.", Kind::Terminated),
    ("$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.", Kind::ConsumerLeaderElected),
    ("$JS.EVENT.ADVISORY.CONSUMER.QUORUM_LOST.", Kind::ConsumerQuorumLost),
];

impl Kind {
    /// The kind named by an advisory's JSON `type`.
    fn from_type(t: &str) -> Self {
        match t.strip_prefix(TYPE_PREFIX) {
            Some("api_audit") => Self::ApiAudit,
            Some("consumer_action") => Self::ConsumerAction,
            Some("consumer_leader_elected") => Self::ConsumerLeaderElected,
            Some("consumer_quorum_lost") => Self::ConsumerQuorumLost,
            Some("max_deliver") => Self::MaxDeliver,
            Some("nak") => Self::Nak,
            Some("stream_action") => Self::StreamAction,
            Some("stream_leader_elected") => Self::StreamLeaderElected,
            Some("stream_quorum_lost") => Self::StreamQuorumLost,
            Some("terminated") => Self::Terminated,
            _ => Self::Unsupported,
        }
    }

    /// The kind a subject implies.
    fn from_subject(subject: &str) -> Self {
        BY_SUBJECT
            .iter()
            .find(|(prefix, _)| {
                subject == *prefix
                    || if prefix.ends_with('.') {
                        subject.starts_with(prefix)
                    } else {
                        subject.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('.'))
                    }
            })
            .map_or(Self::Unsupported, |(_, k)| *k)
    }

    /// The snake-case name used in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApiAudit => "api_audit",
            Self::ConsumerAction => "consumer_action",
            Self::ConsumerLeaderElected => "consumer_leader_elected",
            Self::ConsumerQuorumLost => "consumer_quorum_lost",
            Self::MaxDeliver => "max_deliver",
            Self::Nak => "nak",
            Self::StreamAction => "stream_action",
            Self::StreamLeaderElected => "stream_leader_elected",
            Self::StreamQuorumLost => "stream_quorum_lost",
            Self::Terminated => "terminated",
            Self::Unsupported => "unsupported",
        }
    }

    fn counter(self) -> CounterId {
        match self {
            Self::ApiAudit => CounterId::JetstreamAdvisoryApiAudit,
            Self::ConsumerAction => CounterId::JetstreamAdvisoryConsumerAction,
            Self::ConsumerLeaderElected => CounterId::JetstreamAdvisoryConsumerLeaderElected,
            Self::ConsumerQuorumLost => CounterId::JetstreamAdvisoryConsumerQuorumLost,
            Self::MaxDeliver => CounterId::JetstreamAdvisoryMaxDeliver,
            Self::Nak => CounterId::JetstreamAdvisoryNak,
            Self::StreamAction => CounterId::JetstreamAdvisoryStreamAction,
            Self::StreamLeaderElected => CounterId::JetstreamAdvisoryStreamLeaderElected,
            Self::StreamQuorumLost => CounterId::JetstreamAdvisoryStreamQuorumLost,
            Self::Terminated => CounterId::JetstreamAdvisoryTerminated,
            Self::Unsupported => CounterId::JetstreamAdvisoryUnsupported,
        }
    }
}

/// Why an advisory could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Larger than `max_payload_bytes`.
    #[error("advisory larger than {0} bytes")]
    TooLarge(u64),
    /// Not strict UTF-8 JSON with an object at the root.
    #[error("advisory is not a strict JSON object: {0}")]
    NotJson(String),
}

/// Classifies an advisory by its JSON `type`, else by its subject.
pub fn classify(subject: &str, payload: &[u8], max_payload_bytes: u64) -> Result<Kind, ParseError> {
    if payload.len() as u64 > max_payload_bytes {
        return Err(ParseError::TooLarge(max_payload_bytes));
    }
    let text = std::str::from_utf8(payload).map_err(|_| ParseError::NotJson("not UTF-8".into()))?;
    let value = sinks_contract::json::parse_strict(text).map_err(|e| ParseError::NotJson(e.to_string()))?;
    let object = value.as_object().ok_or_else(|| ParseError::NotJson("the root is not an object".into()))?;
    let by_type = object.get("type").and_then(serde_json::Value::as_str).map_or(Kind::Unsupported, Kind::from_type);
    Ok(if by_type == Kind::Unsupported { Kind::from_subject(subject) } else { by_type })
}

/// Counts (and, with `log_events`, logs) one advisory received on `subject`.
pub fn observe(config: &AdvisoriesConfig, metrics: &Metrics, subject: &str, payload: &[u8]) -> Option<Kind> {
    if !config.subjects.iter().any(|p| sinks_toolkit::subject::matches(p, subject)) {
        metrics.inc(CounterId::JetstreamAdvisoriesFiltered, 1);
        return None;
    }
    metrics.inc(CounterId::JetstreamAdvisoriesReceived, 1);
    match classify(subject, payload, config.max_payload_bytes) {
        Ok(kind) => {
            metrics.inc(kind.counter(), 1);
            if config.log_events {
                tracing::info!(kind = kind.as_str(), "jetstream advisory observed");
            }
            Some(kind)
        }
        Err(e) => {
            metrics.inc(CounterId::JetstreamAdvisoryParseErrors, 1);
            tracing::warn!(error = %e, "jetstream advisory could not be read");
            None
        }
    }
}

/// Subscribes to the configured advisory subjects on `client` (before the consumer is set
/// up, so its own creation is seen). Subscription failures are logged; they never stop the
/// run.
pub async fn subscribe(client: &async_nats::Client, config: &AdvisoriesConfig) -> Vec<async_nats::Subscriber> {
    let mut subscriptions = Vec::new();
    for subject in &config.subjects {
        match client.subscribe(subject.clone()).await {
            Ok(s) => subscriptions.push(s),
            Err(e) => tracing::warn!(subject = %subject, error = %e, "cannot subscribe to jetstream advisories"),
        }
    }
    if !subscriptions.is_empty() {
        tracing::info!(subjects = subscriptions.len(), "observing jetstream advisories");
    }
    subscriptions
}

/// Observes every advisory arriving on `subscriptions` until `stop` turns true.
pub async fn monitor(
    subscriptions: Vec<async_nats::Subscriber>,
    config: AdvisoriesConfig,
    metrics: Metrics,
    mut stop: watch::Receiver<bool>,
) {
    if subscriptions.is_empty() {
        return;
    }
    let mut all = select_all(subscriptions);
    loop {
        tokio::select! {
            message = all.next() => match message {
                Some(m) => {
                    let _ = observe(&config, &metrics, m.subject.as_str(), &m.payload);
                }
                None => return,
            },
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MetricsConfig;

    #[test]
    fn type_wins_then_subject() {
        let t = |ty: &str| format!(r#"{{"type":"io.nats.jetstream.advisory.v1.{ty}","stream":"S"}}"#);
        let subject = "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.C";
        assert_eq!(classify(subject, t("max_deliver").as_bytes(), 1000), Ok(Kind::MaxDeliver));
        assert_eq!(classify(subject, t("something_new").as_bytes(), 1000), Ok(Kind::Nak));
        assert_eq!(classify(subject, b"{}", 1000), Ok(Kind::Nak));
        assert_eq!(classify("$JS.EVENT.ADVISORY.API", b"{}", 1000), Ok(Kind::ApiAudit));
        assert_eq!(classify("$JS.EVENT.ADVISORY.API.X", b"{}", 1000), Ok(Kind::ApiAudit));
        assert_eq!(classify("$JS.EVENT.ADVISORY.APIX", b"{}", 1000), Ok(Kind::Unsupported));
        assert_eq!(classify("$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.S", b"{}", 1000), Ok(Kind::StreamQuorumLost));
        assert_eq!(classify("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.C", b"{}", 1000), Ok(Kind::Terminated));
    }

    #[test]
    fn unreadable_advisories_are_parse_errors() {
        let subject = "$JS.EVENT.ADVISORY.API";
        assert_eq!(classify(subject, &[b' '; 11], 10), Err(ParseError::TooLarge(10)));
        assert!(matches!(classify(subject, b"[1]", 100), Err(ParseError::NotJson(_))));
        assert!(matches!(classify(subject, br#"{"a":1,"a":2}"#, 100), Err(ParseError::NotJson(_))));
        assert!(matches!(classify(subject, b"\xff", 100), Err(ParseError::NotJson(_))));
    }

    #[test]
    fn observe_counts_received_filtered_kinds_and_errors() {
        let metrics = Metrics::new(&MetricsConfig { enabled: true, ..MetricsConfig::default() });
        let config = AdvisoriesConfig { enabled: true, ..AdvisoriesConfig::default() };
        let term = br#"{"type":"io.nats.jetstream.advisory.v1.terminated"}"#;
        assert_eq!(
            observe(&config, &metrics, "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.C", term),
            Some(Kind::Terminated)
        );
        assert_eq!(observe(&config, &metrics, "$JS.EVENT.ADVISORY.API", b"nope"), None);
        assert_eq!(observe(&config, &metrics, "$JS.EVENT.OTHER", b"{}"), None);
        assert_eq!(metrics.counter(CounterId::JetstreamAdvisoriesReceived), 2);
        assert_eq!(metrics.counter(CounterId::JetstreamAdvisoryTerminated), 1);
        assert_eq!(metrics.counter(CounterId::JetstreamAdvisoryParseErrors), 1);
        assert_eq!(metrics.counter(CounterId::JetstreamAdvisoriesFiltered), 1);
    }
}
