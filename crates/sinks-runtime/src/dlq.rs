//! Dead-letter records: the diagnostic JSON published for a message that cannot be written,
//! and the publisher that stores it in a JetStream stream.
//!
//! The record has the reference's shape (compact, sorted keys): subject, stream, consumer,
//! sequences, message id, application metadata, redelivery facts, idempotency key (or why
//! there is none), payload presence, and optionally the error, timestamp, headers and
//! base64 payload. We add `delivered` and `sink`. The publish carries a `Nats-Msg-Id`
//! derived from the idempotency key, so a redelivered poison message does not store a second
//! record within the DLQ stream's duplicate window.
//!
//! What a record says about why the message is there (the error it carries and its reason
//! label) is decided in one place below it, `crate::reasons`, which the gate and the ledger
//! read too.

use async_nats::HeaderMap;
use async_nats::jetstream::{self, message::PublishMessage};
use base64::Engine as _;
use serde_json::{Value, json};

use sinks_contract::IdempotencyKey;
use sinks_contract::envelope::{Envelope, Origin};
use sinks_contract::error::SinkError;
use sinks_toolkit::metadata::{payload_presence_json, rfc3339};

pub use crate::config::dead_letter::{DeadLetterConfig, EncryptedPayload};
pub use crate::reasons::EXHAUSTED_REASON;

/// Header naming the error type of a DLQ record.
pub const ERROR_TYPE_HEADER: &str = "Nats-Sinks-Error-Type";
/// Header carrying the original subject of a DLQ record.
pub const ORIGINAL_SUBJECT_HEADER: &str = "Nats-Sinks-Original-Subject";
/// Header of a DLQ record made when a redriven message failed again: how many times the
/// message was redriven (`nats-sink redrive`). Absent on a first dead letter. The record
/// says it too (`redrive_count`).
pub const REDRIVE_COUNT_HEADER: &str = "Nats-Sinks-Redrive-Count";

/// Builds the DLQ record for `envelope` failing with `error` in sink `sink`.
pub fn record(envelope: &Envelope, error: &SinkError, sink: &str, config: &DeadLetterConfig) -> Value {
    let js = envelope.jetstream();
    let (key, key_missing) = match envelope.idempotency_key() {
        Ok(k) => (Some(k.to_string()), None),
        Err(e) => (None, Some(e.reason_code())),
    };
    let app = envelope.app();
    let mut body = json!({
        "subject": envelope.subject(),
        "stream": js.stream,
        "consumer": js.consumer,
        "stream_sequence": js.stream_sequence,
        "consumer_sequence": js.consumer_sequence,
        "message_id": envelope.message_id(),
        "priority": app.priority,
        "classification": app.classification,
        "labels": app.labels,
        "redelivered": envelope.redelivered(),
        "delivered": js.delivered,
        "pending": js.pending,
        "idempotency_key": key,
        "idempotency_key_unavailable_reason": key_missing,
        "payload": payload_presence_json(envelope),
        "sink": sink,
    });
    let Value::Object(map) = &mut body else { unreachable!("json! object") };
    if config.include_error {
        map.insert("error_type".into(), error.error_type().into());
        map.insert("error".into(), error.display_chain().into());
    }
    if let Some(reason) = error.reason() {
        map.insert("reason".into(), reason.into());
    }
    if let Some(target) = error.target() {
        map.insert("target".into(), target.into());
    }
    // Only in a later epoch of the stream, so that records of a stream that never changed
    // are as before.
    if let Some(epoch) = envelope.stream_epoch() {
        map.insert("stream_epoch".into(), epoch.into());
    }
    // Only for a message that came through a mirror or a source (or in a JetStream domain):
    // where the event was first stored, the key `origin_sequence` gives it.
    if let Some(Origin::Stored { stream, sequence, .. }) = envelope.origin() {
        let origin = json!({"stream": &**stream, "sequence": sequence, "subject": envelope.origin_subject()});
        map.insert("origin".into(), origin);
    }
    if let Some(ts) = js.timestamp {
        map.insert("timestamp".into(), rfc3339(ts).into());
    }
    if config.include_headers {
        map.insert("headers".into(), envelope.headers().to_json());
    }
    if config.include_payload {
        if envelope.presence().omitted {
            map.insert("payload_unavailable_reason".into(), "headers_only".into());
        } else if config.encrypted_payload == EncryptedPayload::Omit
            && sinks_toolkit::encryption::is_encrypted(envelope.payload())
        {
            map.insert("payload_unavailable_reason".into(), "encrypted_payload_omitted".into());
        } else {
            let b64 = base64::engine::general_purpose::STANDARD.encode(envelope.payload());
            map.insert("payload_base64".into(), b64.into());
        }
    }
    body
}

/// The `Nats-Msg-Id` of the DLQ record of `envelope` failing with `error`: stable across
/// redeliveries. A reused stream sequence (`sequence_reused`) also names its payload: the
/// key is the earlier event's too, and that event's own dead letter (or an earlier reuse)
/// must not swallow this one's in the stream's duplicate window.
pub fn record_msg_id(envelope: &Envelope, error: &SinkError) -> String {
    counted_msg_id(envelope, error, 0)
}

/// [`record_msg_id`] of a dead letter made on the `redrives`-th redrive of the message: a
/// record of its own (the first record's id would be deduplicated by the stream), and the
/// same one when a crashed redrive publishes it again.
fn counted_msg_id(envelope: &Envelope, error: &SinkError, redrives: u32) -> String {
    let id = uncounted_msg_id(envelope, error);
    if redrives == 0 { id } else { format!("{id}:redrive:{redrives}") }
}

fn uncounted_msg_id(envelope: &Envelope, error: &SinkError) -> String {
    // One record per event whichever mirror or source it was dead-lettered from.
    let key = match envelope.origin() {
        Some(Origin::Stored { .. }) => IdempotencyKey::origin_sequence(envelope),
        _ => envelope.idempotency_key(),
    };
    match key {
        Ok(key) if error.reason() == Some(sinks_contract::existing::SEQUENCE_REUSED) => {
            let print = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(envelope.payload()));
            format!("nats-sinks-dlq:{key}:reused:{}", &print[..32])
        }
        Ok(key) => format!("nats-sinks-dlq:{key}"),
        Err(_) => {
            let js = envelope.jetstream();
            format!("nats-sinks-dlq:{}:{}:{}", js.stream, js.consumer, js.stream_sequence)
        }
    }
}

/// Why a DLQ record could not be stored.
#[derive(Debug, thiserror::Error)]
#[error("dead-letter publish failed: {0}")]
pub struct DeadLetterError(String);

/// Publishes DLQ records and waits for the stream's acknowledgement.
#[derive(Debug, Clone)]
pub struct DeadLetterPublisher {
    context: jetstream::Context,
    subject: String,
    config: DeadLetterConfig,
}

impl DeadLetterPublisher {
    /// A publisher for `config` (which must be enabled and have a subject).
    pub(crate) fn new(context: jetstream::Context, config: DeadLetterConfig) -> Option<Self> {
        let subject = config.subject.clone().filter(|_| config.enabled)?;
        Some(Self { context, subject, config })
    }

    /// Stores the record of `envelope`. Returns only once a stream has acknowledged it;
    /// any error (no stream captures the subject, timeout, disconnect) is returned so the
    /// caller NAKs the original instead of acking it.
    pub async fn publish(&self, envelope: &Envelope, error: &SinkError, sink: &str) -> Result<(), DeadLetterError> {
        self.publish_counted(envelope, error, sink, 0).await
    }

    /// [`DeadLetterPublisher::publish`] for a message that failed again on its `redrives`-th
    /// redrive (`0`: a first dead letter, exactly as `publish`): the record says
    /// `redrive_count`, carries the [`REDRIVE_COUNT_HEADER`] and a message id of its own.
    pub async fn publish_counted(
        &self,
        envelope: &Envelope,
        error: &SinkError,
        sink: &str,
        redrives: u32,
    ) -> Result<(), DeadLetterError> {
        let mut record = record(envelope, error, sink, &self.config);
        if let (true, Value::Object(map)) = (redrives > 0, &mut record) {
            map.insert("redrive_count".into(), redrives.into());
        }
        // The message's trace, when it is exported (traces on): `reconcile` can name it.
        if let (Some(trace_id), Value::Object(map)) = (crate::otel::current_trace_id(), &mut record) {
            map.insert("trace_id".into(), trace_id.into());
        }
        let body = sinks_contract::json::to_canonical_vec(&record);
        let mut headers = HeaderMap::new();
        headers.insert(ERROR_TYPE_HEADER, error.error_type());
        headers.insert(ORIGINAL_SUBJECT_HEADER, envelope.subject());
        if redrives > 0 {
            headers.insert(REDRIVE_COUNT_HEADER, redrives.to_string().as_str());
        }
        let publish = PublishMessage::build()
            .payload(body.into())
            .headers(headers)
            .message_id(counted_msg_id(envelope, error, redrives));
        let ack = self
            .context
            .send_publish(self.subject.clone(), publish)
            .await
            .map_err(|e| DeadLetterError(e.to_string()))?;
        ack.await.map_err(|e| DeadLetterError(e.to_string()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::envelope::{Headers, JetStreamInfo};
    use sinks_contract::sink::MessageOutcome;

    fn envelope(headers: Headers, body: &'static [u8]) -> Envelope {
        Envelope::new(
            "orders.bad",
            body,
            headers,
            JetStreamInfo {
                stream: "ORDERS".into(),
                consumer: "sink".into(),
                stream_sequence: 12,
                consumer_sequence: 3,
                delivered: 2,
                pending: 5,
                timestamp: Some(time::macros::datetime!(2026-01-02 03:04:05 UTC)),
                domain: None,
            },
        )
    }

    #[test]
    fn record_shape() {
        let e = envelope(Headers::new().with("Nats-Msg-Id", "m-1"), b"not json");
        let err = SinkError::permanent("payload is not valid JSON").with_error_type("SerializationError");
        let r = record(&e, &err, "file", &DeadLetterConfig::default());
        let text = String::from_utf8(sinks_contract::json::to_canonical_vec(&r)).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"classification":null,"consumer":"sink","consumer_sequence":3,"delivered":2,"#,
                r#""error":"payload is not valid JSON","error_type":"SerializationError","#,
                r#""headers":{"Nats-Msg-Id":"m-1"},"idempotency_key":"stream-sequence:ORDERS:12","#,
                r#""idempotency_key_unavailable_reason":null,"labels":[],"message_id":"m-1","#,
                r#""payload":{"delivered_size_bytes":8,"nats_msg_size_header":null,"nats_msg_size_header_malformed":false,"#,
                r#""omitted":false,"omitted_reason":null,"original_size_bytes":8,"present":true},"#,
                r#""payload_base64":"bm90IGpzb24=","pending":5,"priority":null,"redelivered":true,"sink":"file","#,
                r#""stream":"ORDERS","stream_sequence":12,"subject":"orders.bad","timestamp":"2026-01-02T03:04:05Z"}"#
            )
        );
        assert_eq!(record_msg_id(&e, &err), "nats-sinks-dlq:stream-sequence:ORDERS:12");
        assert_eq!(counted_msg_id(&e, &err, 2), "nats-sinks-dlq:stream-sequence:ORDERS:12:redrive:2");
        let reused = sinks_contract::existing::sequence_reused("file");
        let MessageOutcome::Failed(reused) = reused else { panic!("a failure") };
        let id = record_msg_id(&e, &reused);
        assert!(id.starts_with("nats-sinks-dlq:stream-sequence:ORDERS:12:reused:") && id.len() > 60, "{id}");
        let other = envelope(Headers::new().with("Nats-Msg-Id", "m-1"), b"another event");
        assert_ne!(record_msg_id(&other, &reused), id, "two events under one reused sequence keep two records");
    }

    #[test]
    fn headers_only_record_has_no_payload() {
        let e = envelope(Headers::new().with("Nats-Msg-Size", "99"), b"");
        let config = DeadLetterConfig { include_error: false, include_headers: false, ..Default::default() };
        let r = record(&e, &SinkError::permanent("x"), "file", &config);
        assert_eq!(r["payload_unavailable_reason"], "headers_only");
        assert!(r.get("payload_base64").is_none());
        assert!(r.get("error").is_none());
        assert!(r.get("headers").is_none());
        assert_eq!(r["payload"]["original_size_bytes"], 99);
    }
}
