//! The intake step, before every other: a message as it arrived (its subject, payload,
//! headers, JetStream facts and the stream's epoch) becomes an [`Envelope`] with its
//! application metadata (priority, classification, labels) resolved by the `message_metadata`
//! section. Every path that takes a message out of JetStream into the forward path builds its
//! envelope here: the fetch, the rescue of an exhausted message and the redrive of a dead
//! letter, so the three cannot resolve a message differently.
//!
//! Pure like the other steps: the runtime reads the message (and turns its headers into
//! [`Headers`]); this step only assembles and resolves.

use std::sync::Arc;

use bytes::Bytes;
use sinks_contract::envelope::{Envelope, Headers, JetStreamInfo};
use sinks_toolkit::metadata::MessageMetadataConfig;

/// A message as it arrived, before it is an envelope.
#[derive(Debug, Clone)]
pub struct Arrival<'a> {
    /// The subject it was published on.
    pub subject: &'a str,
    /// Its payload.
    pub payload: Bytes,
    /// Its headers.
    pub headers: Headers,
    /// Where JetStream stored and delivered it.
    pub jetstream: JetStreamInfo,
    /// The stream's epoch, in a later epoch of the stream (none for a stream that never
    /// changed).
    pub epoch: Option<Arc<str>>,
}

/// The intake step of a `message_metadata` section.
#[derive(Debug, Clone, Default)]
pub struct Intake {
    metadata: MessageMetadataConfig,
}

impl Intake {
    /// The step resolving application metadata by `metadata`.
    pub fn new(metadata: &MessageMetadataConfig) -> Self {
        Self { metadata: metadata.clone() }
    }

    /// The envelope of `arrival`, its application metadata resolved and its epoch stamped.
    pub fn envelope(&self, arrival: Arrival<'_>) -> Envelope {
        let Arrival { subject, payload, headers, jetstream, epoch } = arrival;
        let app = self.metadata.resolve(subject, &headers);
        Envelope::new(subject, payload, headers, jetstream).with_app_metadata(app).with_stream_epoch(epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jetstream(seq: u64) -> JetStreamInfo {
        JetStreamInfo {
            stream: "S".into(),
            consumer: "C".into(),
            stream_sequence: seq,
            consumer_sequence: seq,
            delivered: 1,
            pending: 0,
            timestamp: None,
            domain: None,
        }
    }

    fn metadata(json: serde_json::Value) -> MessageMetadataConfig {
        let mut config: MessageMetadataConfig = serde_json::from_value(json).unwrap();
        config.fill_default_headers();
        config
    }

    #[test]
    fn the_envelope_carries_everything_that_arrived_and_its_resolved_metadata() {
        let intake = Intake::new(&metadata(serde_json::json!({
            "priority": {"default": "routine"},
            "rules": [{"subject": "orders.>", "priority": "urgent", "labels": ["finance"]}]
        })));
        let headers = Headers::new().with("Nats-Msg-Id", "m-1");
        let e = intake.envelope(Arrival {
            subject: "orders.new",
            payload: Bytes::from_static(b"{}"),
            headers,
            jetstream: jetstream(4),
            epoch: Some(Arc::from("e2")),
        });
        assert_eq!((e.subject(), &e.payload()[..], e.message_id()), ("orders.new", &b"{}"[..], Some("m-1")));
        assert_eq!((e.jetstream().stream_sequence, e.stream_epoch()), (4, Some("e2")));
        assert_eq!(e.app().priority.as_deref(), Some("urgent"));
        assert_eq!(e.app().labels, vec!["finance".to_owned()]);

        // Another subject falls through to the default; a header wins over every rule.
        let e = intake.envelope(Arrival {
            subject: "other",
            payload: Bytes::new(),
            headers: Headers::new(),
            jetstream: jetstream(5),
            epoch: None,
        });
        assert_eq!((e.app().priority.as_deref(), e.stream_epoch()), (Some("routine"), None));
        let e = intake.envelope(Arrival {
            subject: "orders.new",
            payload: Bytes::new(),
            headers: Headers::new().with(sinks_toolkit::metadata::DEFAULT_PRIORITY_HEADER, "flash"),
            jetstream: jetstream(6),
            epoch: None,
        });
        assert_eq!(e.app().priority.as_deref(), Some("flash"));
    }
}
