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
//! What a record says about why the message is there is decided here too, in one place: the
//! error it carries (`record_error`: the sink's own failure, or the error made for a
//! rejected conflict or a message held back on its last delivery) and its reason label
//! (`reason`).

use async_nats::HeaderMap;
use async_nats::jetstream::{self, message::PublishMessage};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use sinks_contract::IdempotencyKey;
use sinks_contract::envelope::{Envelope, Origin};
use sinks_contract::error::SinkError;
use sinks_contract::sink::{ConflictResolution, MessageOutcome};
use sinks_toolkit::metadata::{payload_presence_json, rfc3339};

/// `dead_letter` config section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeadLetterConfig {
    /// Publish permanently failing messages to `subject` (which a stream must capture).
    pub enabled: bool,
    /// Subject the records are published on; required when enabled.
    pub subject: Option<String>,
    /// Include the original payload as `payload_base64`.
    pub include_payload: bool,
    /// Include the original headers.
    pub include_headers: bool,
    /// Include `error_type` and `error`.
    pub include_error: bool,
    /// Terminate (`+TERM`) the original after the record is stored, instead of acking it.
    pub ack_term_after_publish: bool,
    /// What a record carries for a payload that payload encryption covers: `ciphertext`
    /// (default: the encryption envelope, never the plaintext) or `omit` (no payload at all;
    /// `payload_unavailable_reason: "encrypted_payload_omitted"`). nats-sinks extension.
    pub encrypted_payload: EncryptedPayload,
}

/// What a DLQ record carries for an encrypted payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EncryptedPayload {
    /// The encryption envelope (ciphertext), as the sink received it.
    #[default]
    Ciphertext,
    /// Nothing.
    Omit,
}

impl Default for DeadLetterConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            subject: None,
            include_payload: true,
            include_headers: true,
            include_error: true,
            ack_term_after_publish: false,
            encrypted_payload: EncryptedPayload::Ciphertext,
        }
    }
}

/// Header naming the error type of a DLQ record.
pub const ERROR_TYPE_HEADER: &str = "Nats-Sinks-Error-Type";
/// Header carrying the original subject of a DLQ record.
pub const ORIGINAL_SUBJECT_HEADER: &str = "Nats-Sinks-Original-Subject";
/// Header of a DLQ record made when a redriven message failed again: how many times the
/// message was redriven (`nats-sink redrive`). Absent on a first dead letter. The record
/// says it too (`redrive_count`).
pub const REDRIVE_COUNT_HEADER: &str = "Nats-Sinks-Redrive-Count";

/// What a conflicting redelivery the sink rejected is: the error of its DLQ record, and of a
/// fan-out target's rejected conflict.
const CONFLICT: &str = "conflicting redelivery: same key, different content";

/// Why a held-back message is dead-lettered on its last allowed delivery.
const HELD_BACK: &str = "held back on its last allowed delivery: an earlier message with the same ordering key \
                         failed temporarily, and a redelivery would exceed the consumer's max_deliver";

/// The permanent error of a conflicting redelivery (same key, different content).
pub(crate) fn conflict_error() -> SinkError {
    SinkError::permanent(CONFLICT).with_error_type("ConflictError")
}

/// The error of a message held back on its last allowed delivery.
fn held_back_error() -> SinkError {
    SinkError::temporary(HELD_BACK).with_error_type("HeldBackError")
}

/// The reason label and record reason of a message rescued after the server stopped
/// redelivering it, whose last chance did not make it durable.
pub const EXHAUSTED_REASON: &str = "max_deliver_exhausted";

/// The permanent error of a rescued message whose last chance failed: how many deliveries
/// the server made, and the error of the rescue's own attempt (`last`, which names its target
/// when a fan-out target failed). `last` is `None` when the write made it durable but
/// something else kept it from being settled.
pub(crate) fn exhausted_error(deliveries: u64, last: &SinkError) -> SinkError {
    let error = SinkError::permanent(format!(
        "max_deliver exhausted: the server stopped redelivering after {deliveries} deliveries; last error: {}",
        last.display_chain()
    ))
    .with_error_type("MaxDeliverExhaustedError")
    .with_reason(EXHAUSTED_REASON);
    match last.target() {
        Some(target) => error.with_target(target),
        None => error,
    }
}

/// The error a DLQ record carries: the one the sink (or a policy) reported, or one made for
/// an outcome that has none.
#[derive(Debug)]
pub(crate) enum RecordError<'a> {
    /// The outcome's own failure.
    Reported(&'a SinkError),
    /// Made for a rejected conflict or a held-back message.
    Made(SinkError),
}

impl std::ops::Deref for RecordError<'_> {
    type Target = SinkError;

    fn deref(&self) -> &SinkError {
        match self {
            Self::Reported(e) => e,
            Self::Made(e) => e,
        }
    }
}

/// The error the DLQ record of a dead-lettered `outcome` carries; `None` for an outcome that
/// is never dead-lettered (committed, duplicate, a kept or overwritten conflict).
pub(crate) fn record_error(outcome: &MessageOutcome) -> Option<RecordError<'_>> {
    match outcome {
        MessageOutcome::Failed(e) => Some(RecordError::Reported(e)),
        MessageOutcome::Conflict(ConflictResolution::Rejected) => Some(RecordError::Made(conflict_error())),
        MessageOutcome::HeldBack => Some(RecordError::Made(held_back_error())),
        // Committed, duplicate, a kept or overwritten conflict, pending, and any outcome
        // this runtime does not know: none of them is dead-lettered.
        _ => None,
    }
}

/// The reason label (metrics `reason`) of a dead-lettered `outcome`: the policy reason code
/// when there is one, else what kind of failure it was.
pub(crate) fn reason(outcome: &MessageOutcome) -> &str {
    match outcome {
        MessageOutcome::Failed(e) => {
            e.reason().unwrap_or(if e.is_permanent() { "sink_permanent" } else { "retries_exhausted" })
        }
        MessageOutcome::Conflict(_) => "conflict_rejected",
        MessageOutcome::HeldBack => "held_back_last_delivery",
        _ => "other",
    }
}

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
        Ok(key) if error.reason() == Some(sinks_toolkit::existing::SEQUENCE_REUSED) => {
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
        let reused = sinks_toolkit::existing::sequence_reused("file");
        let MessageOutcome::Failed(reused) = reused else { panic!("a failure") };
        let id = record_msg_id(&e, &reused);
        assert!(id.starts_with("nats-sinks-dlq:stream-sequence:ORDERS:12:reused:") && id.len() > 60, "{id}");
        let other = envelope(Headers::new().with("Nats-Msg-Id", "m-1"), b"another event");
        assert_ne!(record_msg_id(&other, &reused), id, "two events under one reused sequence keep two records");
    }

    #[test]
    fn what_a_dead_letter_says_about_its_outcome() {
        use sinks_contract::error::ErrorClass;
        let policy = MessageOutcome::Failed(SinkError::permanent("too big").with_reason("size_exceeded"));
        // (outcome, error type, class, error, reason label)
        let table = [
            (
                MessageOutcome::permanent("p"),
                Some(("PermanentSinkError", ErrorClass::Permanent, "p")),
                "sink_permanent",
            ),
            (
                MessageOutcome::temporary("t"),
                Some(("TemporarySinkError", ErrorClass::Temporary, "t")),
                "retries_exhausted",
            ),
            (policy, Some(("PermanentSinkError", ErrorClass::Permanent, "too big")), "size_exceeded"),
            (
                MessageOutcome::Conflict(ConflictResolution::Rejected),
                Some(("ConflictError", ErrorClass::Permanent, "conflicting redelivery: same key, different content")),
                "conflict_rejected",
            ),
            (
                MessageOutcome::HeldBack,
                Some((
                    "HeldBackError",
                    ErrorClass::Temporary,
                    "held back on its last allowed delivery: an earlier message with the same ordering key failed \
                     temporarily, and a redelivery would exceed the consumer's max_deliver",
                )),
                "held_back_last_delivery",
            ),
            (
                sinks_toolkit::existing::sequence_reused("file"),
                Some((
                    "SequenceReusedError",
                    ErrorClass::Permanent,
                    "file already holds a different payload under this stream sequence: the sequence was used again \
                     (the stream was deleted and re-created, restored or rewound); the stored record is kept",
                )),
                "sequence_reused",
            ),
            (MessageOutcome::Committed, None, "other"),
            (MessageOutcome::Duplicate, None, "other"),
            (MessageOutcome::Conflict(ConflictResolution::KeptExisting), None, "conflict_rejected"),
        ];
        for (outcome, error, label) in table {
            let got = record_error(&outcome).map(|e| (e.error_type(), e.class(), e.message().to_owned()));
            assert_eq!(got, error.map(|(t, c, m)| (t, c, m.to_owned())), "{outcome:?}");
            assert_eq!(reason(&outcome), label, "{outcome:?}");
        }
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
