//! The event document of the sinks that store one JSON document per message under a key (an
//! S3 object in the `envelope` format, a Coherence entry, an Oracle NoSQL row's value): the
//! payload, where it came from, its application fields and the standard metadata document.
//! One type for all three, so their documents cannot drift apart; each sink names its own
//! `schema` and adds what only it stores (the exact payload text, the idempotency key).

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use sinks_contract::envelope::{Envelope, Headers};
use sinks_contract::payload::NormalizedPayload;

use super::MetadataDoc;

/// The stored event document. Fields are declared in alphabetical order, which is the order
/// serde writes them in: the output has sorted keys like the reference's. The optional
/// members a sink does not store are left out, never written as `null`.
#[derive(Debug, Serialize)]
pub struct EventDoc<'a> {
    /// `app.classification`.
    pub classification: Option<&'a str>,
    /// This delivery's consumer: only under `metadata_scope: delivery`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer: Option<&'a str>,
    /// Its sequence on that consumer: only under `metadata_scope: delivery`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_sequence: Option<u64>,
    /// The custody object the policy step attached (`null` when none, or when the sink does
    /// not store the policy documents at the top level).
    pub custody: Option<&'a Value>,
    /// The message's headers.
    pub headers: &'a Headers,
    /// The idempotency key (`null` when there is none), only for a sink that stores it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<Option<String>>,
    /// The JetStream timestamp, nanoseconds since the epoch.
    pub jetstream_timestamp_epoch_ns: Option<i64>,
    /// The labels joined with commas.
    pub labels: Option<String>,
    /// The labels.
    pub labels_list: &'a [String],
    /// When the publisher created the message, nanoseconds since the epoch.
    pub message_created_at_epoch_ns: Option<i64>,
    /// The `Nats-Msg-Id`.
    pub message_id: Option<&'a str>,
    /// The standard metadata document.
    pub metadata: &'a MetadataDoc<'a>,
    /// The mission metadata the policy step attached (see `custody`).
    pub mission_metadata: Option<&'a Value>,
    /// The payload: its JSON text, or an envelope.
    pub payload: &'a RawValue,
    /// The payload's exact text (Coherence: when not wrapped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_exact: Option<&'a str>,
    /// What the payload was, its size and its SHA-256.
    pub payload_info: Value,
    /// The payload's exact text (Oracle NoSQL: when not wrapped and asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_text: Option<&'a str>,
    /// `app.priority`.
    pub priority: Option<&'a str>,
    /// When this delivery was received: only under `metadata_scope: delivery`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_at_epoch_ns: Option<i64>,
    /// The sink's document schema.
    pub schema: &'static str,
    /// Its version.
    pub schema_version: u32,
    /// The security labels the policy step attached (see `custody`).
    pub security_labels: Option<&'a Value>,
    /// When this delivery was stored: only under `metadata_scope: delivery`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_at_epoch_ns: Option<i64>,
    /// The stream.
    pub stream: &'a str,
    /// Only in a later epoch of the stream (`Envelope::stream_epoch`): the document of a
    /// stream that never changed is the reference's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_epoch: Option<&'a str>,
    /// The stream sequence.
    pub stream_sequence: u64,
    /// The subject.
    pub subject: &'a str,
}

impl<'a> EventDoc<'a> {
    /// The document of `envelope` with its `normalized` payload and metadata `doc`, under
    /// `schema` (version 1), with the policy documents the envelope carries and none of the
    /// members only some sinks store.
    pub fn new(
        envelope: &'a Envelope,
        normalized: &'a NormalizedPayload,
        doc: &'a MetadataDoc<'a>,
        schema: &'static str,
    ) -> Self {
        let js = envelope.jetstream();
        let app = envelope.app();
        let delivery = doc.delivery_fields();
        Self {
            classification: app.classification.as_deref(),
            consumer: delivery.consumer,
            consumer_sequence: delivery.consumer_sequence,
            custody: envelope.custody(),
            headers: envelope.headers(),
            idempotency_key: None,
            jetstream_timestamp_epoch_ns: doc.jetstream_timestamp_epoch_ns(),
            labels: app.labels_string(),
            labels_list: &app.labels,
            message_created_at_epoch_ns: doc.created_at_epoch_ns(),
            message_id: envelope.message_id(),
            metadata: doc,
            mission_metadata: envelope.mission_metadata(),
            payload: &normalized.value,
            payload_exact: None,
            payload_info: normalized.info_json(),
            payload_text: None,
            priority: app.priority.as_deref(),
            received_at_epoch_ns: delivery.received_at_epoch_ns,
            schema,
            schema_version: 1,
            security_labels: envelope.security_labels(),
            stored_at_epoch_ns: delivery.stored_at_epoch_ns,
            stream: &js.stream,
            stream_epoch: envelope.stream_epoch(),
            stream_sequence: js.stream_sequence,
            subject: envelope.subject(),
        }
    }

    /// The document with `custody`, `mission_metadata` and `security_labels` written as
    /// `null` (the Coherence and NoSQL documents: the policy documents are in `metadata`).
    pub fn without_policy_documents(self) -> Self {
        Self { custody: None, mission_metadata: None, security_labels: None, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::MetadataScope;
    use sinks_contract::PayloadMode;
    use sinks_contract::testing::envelope_with;
    use time::OffsetDateTime;

    fn envelope() -> Envelope {
        let mut headers = Headers::new();
        headers.append("Nats-Msg-Id", "m-7");
        envelope_with("S", 7, "orders.x", "{\"b\": 1.50, \"a\": [1, 2]}", headers, 1)
    }

    fn json(doc: &EventDoc<'_>) -> serde_json::Map<String, Value> {
        let text = serde_json::to_string(doc).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        value.as_object().unwrap().clone()
    }

    #[test]
    fn members_come_sorted_and_the_optional_ones_only_when_given() {
        let e = envelope();
        let normalized = sinks_contract::payload::normalize(e.payload(), PayloadMode::JsonOrEnvelope).unwrap();
        let meta = MetadataDoc::scoped(&e, OffsetDateTime::UNIX_EPOCH, MetadataScope::Message);
        let doc = EventDoc::new(&e, &normalized, &meta, "test.v1");
        let m = json(&doc);
        let keys: Vec<&String> = m.keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "sorted keys");
        for absent in
            ["consumer", "idempotency_key", "payload_exact", "payload_text", "stream_epoch", "stored_at_epoch_ns"]
        {
            assert!(!m.contains_key(absent), "{absent} is left out");
        }
        assert_eq!((m["schema"].as_str(), m["schema_version"].as_u64()), (Some("test.v1"), Some(1)));
        assert_eq!((m["stream"].as_str(), m["stream_sequence"].as_u64()), (Some("S"), Some(7)));
        assert_eq!(m["message_id"], "m-7");
        // Parsed from text like the payload, so that 1.50 reads the same with and without
        // serde_json's arbitrary_precision (a workspace build turns it on).
        let payload: Value = serde_json::from_str(r#"{"a": [1, 2], "b": 1.50}"#).unwrap();
        assert_eq!(m["payload"], payload);
        assert_eq!(m["payload_info"]["sha256"], normalized.sha256);

        let doc = EventDoc {
            idempotency_key: Some(None),
            payload_exact: Some("x"),
            payload_text: Some("y"),
            ..EventDoc::new(&e, &normalized, &meta, "test.v1").without_policy_documents()
        };
        let m = json(&doc);
        assert_eq!(
            (&m["idempotency_key"], &m["payload_exact"], &m["payload_text"]),
            (&Value::Null, &"x".into(), &"y".into())
        );
        assert_eq!(
            (&m["custody"], &m["mission_metadata"], &m["security_labels"]),
            (&Value::Null, &Value::Null, &Value::Null)
        );
        let keys: Vec<&String> = m.keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "sorted keys with every optional member");
    }
}
