//! The delivery ledger: one receipt per message, published by the core after the message's
//! settlement is decided and its durable effects are committed.
//!
//! A receipt says where a message went and how it came out: idempotency key, stream and
//! sequence, message id, correlation id, delivery attempt, outcome (committed, duplicate,
//! conflict kept, overwritten, dead-lettered with the reason), the destination reference the
//! sink reported ([`sinks_contract::Destinations::destination`]), the sink and target names and timestamps.
//! Sinks never publish receipts; only [`LedgerPublisher`], called by the runner, does.
//!
//! Receipts carry `Nats-Msg-Id` = `nats-sinks-ledger:{key}:{outcome}`, so a redelivery that
//! comes out the same way is dropped by the ledger stream's duplicate window, while a
//! redelivery that comes out differently (committed, then duplicate after a crash) leaves one
//! receipt per outcome. In `before_ack` mode (the default) the receipts of a batch are in
//! flight together and each is awaited before its message's ack; in `after_ack` mode they
//! follow the ack, best effort. Either way a receipt never holds a message longer than
//! `budget_ms`: what could not be recorded in time is counted and logged, not retried.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, message::PublishMessage};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::ack::{AfterDeadLetter, Settlement};
pub use crate::config::ledger::{LedgerConfig, LedgerMode};
use sinks_contract::envelope::Envelope;
use sinks_contract::sink::{ConflictResolution, DestinationRef, MessageOutcome, Sink};

/// Header of a receipt naming the source stream.
pub const STREAM_HEADER: &str = "Nats-Sinks-Ledger-Stream";
/// Header of a receipt carrying the source stream sequence.
pub const SEQUENCE_HEADER: &str = "Nats-Sinks-Ledger-Sequence";
/// Header of a receipt naming the stream's epoch, only in a later epoch (see
/// `Envelope::keyed_stream`): reconcile reads the receipts of the epoch it checks.
pub const EPOCH_HEADER: &str = "Nats-Sinks-Ledger-Stream-Epoch";
/// Header of a receipt carrying the outcome.
pub const OUTCOME_HEADER: &str = "Nats-Sinks-Ledger-Outcome";
/// `schema` value of every receipt.
pub const RECEIPT_SCHEMA: &str = "nats_sinks.ledger.receipt.v1";

/// How a message came out, as a receipt records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptOutcome {
    /// Committed by this delivery.
    Committed,
    /// Already committed by an earlier delivery.
    Duplicate,
    /// Same key, different content; the stored version was kept.
    ConflictKept,
    /// Same key, different content; the new version replaced the old one.
    Overwritten,
    /// Stored in the dead-letter stream (the receipt gives the reason).
    DeadLettered,
}

impl ReceiptOutcome {
    /// The snake-case name (used in `Nats-Msg-Id` and headers).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Committed => "committed",
            Self::Duplicate => "duplicate",
            Self::ConflictKept => "conflict_kept",
            Self::Overwritten => "overwritten",
            Self::DeadLettered => "dead_lettered",
        }
    }
}

/// One delivery receipt (the JSON body of a ledger message).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// Always [`RECEIPT_SCHEMA`].
    pub schema: String,
    /// Idempotency key (`stream-sequence:{stream}:{seq}`, …), when one can be derived.
    pub idempotency_key: Option<String>,
    /// Source stream.
    pub stream: String,
    /// Source stream sequence.
    pub stream_sequence: u64,
    /// The stream's epoch, only in a later epoch (a stream deleted and created again, or
    /// moved back, whose keys carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_epoch: Option<String>,
    /// Where the event was first stored (`stream-sequence:{origin}:{seq}`), for a message that
    /// came through a mirror or a source (or in a JetStream domain): the `origin_sequence` key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_key: Option<String>,
    /// Consumer that delivered the message.
    pub consumer: String,
    /// Subject the message was published on.
    pub subject: String,
    /// Publisher message id, when present.
    pub message_id: Option<String>,
    /// Correlation id from the configured header or payload field, when present.
    pub correlation_id: Option<String>,
    /// JetStream delivery attempt (1 for the first delivery).
    pub delivery_attempt: u64,
    /// How the message came out.
    pub outcome: ReceiptOutcome,
    /// Error type of a dead-lettered message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// Why a message was dead-lettered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where the sink stored it, when the sink reports it.
    pub destination: Option<DestinationRef>,
    /// Sink kind (`file`, `mysql`, `fanout`, …).
    pub sink: String,
    /// The fan-out target a dead-lettering failure names, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// When the message was stored in the source stream (RFC 3339).
    pub published_at: Option<String>,
    /// When the core received it (RFC 3339).
    pub received_at: String,
    /// When the receipt was built, after the outcome was committed (RFC 3339).
    pub recorded_at: String,
    /// The message's trace id (32 hex digits), when traces are on and its trace is exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

impl Receipt {
    /// The `Nats-Msg-Id` of this receipt: identical for a redelivery with the same outcome.
    pub fn msg_id(&self) -> String {
        let key = self
            .idempotency_key
            .clone()
            .unwrap_or_else(|| format!("stream-sequence:{}:{}", self.stream, self.stream_sequence));
        format!("nats-sinks-ledger:{key}:{}", self.outcome.as_str())
    }
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

/// The receipt outcome of a message settled as `settlement` after `outcome`, or `None`
/// when the settlement is not final (NAK, left for AckWait): nothing is recorded then.
pub fn receipt_outcome(outcome: &MessageOutcome, settlement: &Settlement) -> Option<ReceiptOutcome> {
    match settlement {
        Settlement::DeadLetter(AfterDeadLetter::Ack | AfterDeadLetter::Term) => Some(ReceiptOutcome::DeadLettered),
        Settlement::Ack => match outcome {
            MessageOutcome::Committed => Some(ReceiptOutcome::Committed),
            MessageOutcome::Duplicate => Some(ReceiptOutcome::Duplicate),
            MessageOutcome::Conflict(ConflictResolution::KeptExisting) => Some(ReceiptOutcome::ConflictKept),
            MessageOutcome::Conflict(ConflictResolution::Overwritten) => Some(ReceiptOutcome::Overwritten),
            _ => None,
        },
        Settlement::Nak(_) | Settlement::LeaveUnacked => None,
    }
}

/// Counters of the ledger publisher.
#[derive(Debug, Default)]
pub struct LedgerStats {
    /// Receipts stored (acknowledged by their stream).
    pub recorded: AtomicU64,
    /// Receipts that could not be stored within the budget (not retried).
    pub unrecorded: AtomicU64,
}

/// Publishes receipts and waits for their stream's acknowledgement within the budget.
#[derive(Debug)]
pub struct LedgerPublisher {
    context: jetstream::Context,
    subject: String,
    config: LedgerConfig,
    /// What was and was not recorded.
    pub stats: LedgerStats,
}

impl LedgerPublisher {
    /// True when a receipt reads the message's payload (its correlation id comes from a
    /// payload field), so a message that waits for its settlement keeps its payload.
    pub fn reads_payload(&self) -> bool {
        self.config.correlation_field.is_some()
    }

    /// The header a receipt takes its correlation id from, if any (a message that waits for
    /// its settlement keeps that header).
    pub fn reads_header(&self) -> Option<&str> {
        self.config.correlation_header.as_deref()
    }

    /// A publisher for `config`; `None` when the ledger is disabled.
    pub(crate) fn new(context: jetstream::Context, config: LedgerConfig) -> Option<Self> {
        let subject = config.subject.clone().filter(|_| config.enabled)?;
        Some(Self { context, subject, config, stats: LedgerStats::default() })
    }

    /// The configured mode.
    pub fn mode(&self) -> LedgerMode {
        self.config.mode
    }

    /// The correlation id of `envelope`: the configured header, else the payload field.
    pub fn correlation_id(&self, envelope: &Envelope) -> Option<String> {
        correlation_id(&self.config, envelope)
    }

    /// Builds the receipt of a message whose settlement is final, or `None` when there is
    /// nothing to record.
    pub fn receipt(
        &self,
        envelope: &Envelope,
        outcome: &MessageOutcome,
        settlement: &Settlement,
        sink: &dyn Sink,
    ) -> Option<Receipt> {
        receipt_with(&self.config, envelope, outcome, settlement, sink)
    }

    /// Stores `receipt`, waiting at most `budget_ms` for the stream's acknowledgement.
    /// Returns whether it was stored; a failure is counted and logged, never retried.
    pub async fn record(&self, receipt: &Receipt) -> bool {
        let budget = Duration::from_millis(self.config.budget_ms);
        let body = sinks_contract::json::to_canonical_vec(&serde_json::to_value(receipt).unwrap_or_default());
        let mut headers = HeaderMap::new();
        headers.insert(STREAM_HEADER, receipt.stream.as_str());
        headers.insert(SEQUENCE_HEADER, receipt.stream_sequence.to_string().as_str());
        if let Some(epoch) = &receipt.stream_epoch {
            headers.insert(EPOCH_HEADER, epoch.as_str());
        }
        headers.insert(OUTCOME_HEADER, receipt.outcome.as_str());
        let publish = PublishMessage::build().payload(body.into()).headers(headers).message_id(receipt.msg_id());
        let attempt = async {
            let ack = self.context.send_publish(self.subject.clone(), publish).await.map_err(|e| e.to_string())?;
            ack.await.map(|_| ()).map_err(|e| e.to_string())
        };
        let result = match tokio::time::timeout(budget, attempt).await {
            Ok(r) => r,
            Err(_) => Err(format!("not stored within ledger.budget_ms ({} ms)", budget.as_millis())),
        };
        match result {
            Ok(()) => {
                self.stats.recorded.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(e) => {
                let total = self.stats.unrecorded.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!(
                    stream_sequence = receipt.stream_sequence,
                    outcome = receipt.outcome.as_str(),
                    error = %e,
                    unrecorded_total = total,
                    "delivery receipt not recorded; the message is settled anyway"
                );
                false
            }
        }
    }

    /// `(recorded, unrecorded)` so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.stats.recorded.load(Ordering::Relaxed), self.stats.unrecorded.load(Ordering::Relaxed))
    }
}

/// The receipt of a message settled as `settlement` after `outcome` under `config`, or
/// `None` when the settlement is not final.
pub fn receipt_with(
    config: &LedgerConfig,
    envelope: &Envelope,
    outcome: &MessageOutcome,
    settlement: &Settlement,
    sink: &dyn Sink,
) -> Option<Receipt> {
    let class = receipt_outcome(outcome, settlement)?;
    let js = envelope.jetstream();
    // The same error the DLQ record carries (`reasons::record_error`: one place for those texts);
    // a failure that was not dead-lettered (NAKed, left) names no error here.
    let error = match outcome {
        MessageOutcome::Failed(_) if class != ReceiptOutcome::DeadLettered => None,
        other => crate::reasons::record_error(other),
    };
    let (error_type, reason, target) = match error.as_deref() {
        Some(e) => (
            Some(e.error_type().to_owned()),
            Some(e.reason().map_or_else(|| e.message().to_owned(), str::to_owned)),
            e.target().map(str::to_owned),
        ),
        None => (None, None, None),
    };
    let destination = match class {
        ReceiptOutcome::DeadLettered => None,
        _ => sink.destinations().and_then(|d| d.destination(envelope, outcome)),
    };
    Some(Receipt {
        schema: RECEIPT_SCHEMA.to_owned(),
        idempotency_key: envelope.idempotency_key().ok().map(|k| k.to_string()),
        stream: js.stream.clone(),
        stream_sequence: js.stream_sequence,
        stream_epoch: envelope.stream_epoch().map(str::to_owned),
        origin_key: envelope
            .origin()
            .and_then(|_| sinks_contract::IdempotencyKey::origin_sequence(envelope).ok())
            .map(|k| k.to_string()),
        consumer: js.consumer.clone(),
        subject: envelope.subject().to_owned(),
        message_id: envelope.message_id().map(str::to_owned),
        correlation_id: correlation_id(config, envelope),
        delivery_attempt: js.delivered,
        outcome: class,
        error_type,
        reason,
        destination,
        sink: sink.name().to_owned(),
        target,
        published_at: js.timestamp.map(rfc3339),
        received_at: rfc3339(envelope.received_at()),
        recorded_at: rfc3339(OffsetDateTime::now_utc()),
        trace_id: crate::otel::current_trace_id(),
    })
}

/// The correlation id of `envelope` under `config`: the header's first value, else the
/// scalar at the payload field (JSON payloads only).
pub fn correlation_id(config: &LedgerConfig, envelope: &Envelope) -> Option<String> {
    if let Some(value) = config.correlation_header.as_deref().and_then(|h| envelope.headers().get(h)) {
        let value = value.trim();
        if !value.is_empty() {
            return Some(value.to_owned());
        }
    }
    let path = config.correlation_field.as_deref()?;
    let text = std::str::from_utf8(envelope.payload()).ok()?;
    let value = sinks_contract::json::parse_strict(text).ok()?;
    sinks_contract::idempotency::payload_field(&value, path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::Headers;
    use sinks_contract::envelope::JetStreamInfo;
    use sinks_contract::error::SinkError;

    fn envelope(headers: Headers, payload: &'static [u8]) -> Envelope {
        let js = JetStreamInfo {
            stream: "ORDERS".into(),
            consumer: "c".into(),
            stream_sequence: 12,
            consumer_sequence: 3,
            delivered: 2,
            pending: 0,
            timestamp: None,
            domain: None,
        };
        Envelope::new("orders.x", payload, headers, js)
    }

    #[test]
    fn only_final_settlements_are_recorded() {
        use ReceiptOutcome::*;
        let nak = Settlement::Nak(Duration::from_secs(1));
        let dl = Settlement::DeadLetter(AfterDeadLetter::Ack);
        let table: Vec<(MessageOutcome, Settlement, Option<ReceiptOutcome>)> = vec![
            (MessageOutcome::Committed, Settlement::Ack, Some(Committed)),
            (MessageOutcome::Duplicate, Settlement::Ack, Some(Duplicate)),
            (MessageOutcome::Conflict(ConflictResolution::KeptExisting), Settlement::Ack, Some(ConflictKept)),
            (MessageOutcome::Conflict(ConflictResolution::Overwritten), Settlement::Ack, Some(Overwritten)),
            (MessageOutcome::permanent("p"), dl, Some(DeadLettered)),
            (MessageOutcome::permanent("p"), nak, None),
            (MessageOutcome::temporary("t"), nak, None),
            (MessageOutcome::temporary("t"), Settlement::LeaveUnacked, None),
            (MessageOutcome::HeldBack, Settlement::DeadLetter(AfterDeadLetter::Term), Some(DeadLettered)),
        ];
        for (outcome, settlement, want) in table {
            assert_eq!(receipt_outcome(&outcome, &settlement), want, "{outcome:?} {settlement:?}");
        }
    }

    #[test]
    fn correlation_from_header_then_payload_field() {
        let config = LedgerConfig {
            correlation_header: Some("X-Correlation-Id".into()),
            correlation_field: Some("meta.cid".into()),
            ..Default::default()
        };
        let e = envelope(Headers::new().with("x-correlation-id", " abc "), br#"{"meta":{"cid":"zzz"}}"#);
        assert_eq!(correlation_id(&config, &e).as_deref(), Some("abc"));
        let e = envelope(Headers::new(), br#"{"meta":{"cid":42}}"#);
        assert_eq!(correlation_id(&config, &e).as_deref(), Some("42"));
        let e = envelope(Headers::new(), b"not json");
        assert_eq!(correlation_id(&config, &e), None);
    }

    #[test]
    fn msg_id_is_key_plus_outcome() {
        let e = envelope(Headers::new().with("Nats-Msg-Id", "m-1"), b"{}");
        let sink = crate::blackhole::BlackholeSink::new(Default::default());
        let receipt = |outcome: &MessageOutcome, s: Settlement| build_for_test(&e, outcome, &s, &sink);
        let committed = receipt(&MessageOutcome::Committed, Settlement::Ack).unwrap();
        assert_eq!(committed.msg_id(), "nats-sinks-ledger:stream-sequence:ORDERS:12:committed");
        assert_eq!(committed.delivery_attempt, 2);
        assert_eq!(committed.message_id.as_deref(), Some("m-1"));
        let dead = receipt(
            &MessageOutcome::Failed(SinkError::permanent("bad row")),
            Settlement::DeadLetter(AfterDeadLetter::Ack),
        )
        .unwrap();
        assert_eq!(dead.msg_id(), "nats-sinks-ledger:stream-sequence:ORDERS:12:dead_lettered");
        assert_eq!(dead.reason.as_deref(), Some("bad row"));
        let json = serde_json::to_value(&dead).unwrap();
        assert_eq!(json["outcome"], "dead_lettered");
        assert_eq!(json["schema"], RECEIPT_SCHEMA);
    }

    #[test]
    fn a_receipt_names_the_exported_trace_of_the_message_being_settled() {
        let e = envelope(Headers::new(), b"{}");
        let sink = crate::blackhole::BlackholeSink::new(Default::default());
        let build = || build_for_test(&e, &MessageOutcome::Committed, &Settlement::Ack, &sink).unwrap();
        assert_eq!(build().trace_id, None, "outside a traced settlement");
        let ids =
            |sampled| crate::otel::Ids { trace_id: 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736, span_id: 7, sampled };
        let traced = crate::otel::sync_scope(Some(ids(true)), build);
        assert_eq!(traced.trace_id.as_deref(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(
            crate::otel::sync_scope(Some(ids(false)), build).trace_id,
            None,
            "an unexported trace names nothing"
        );
        assert!(serde_json::to_value(build()).unwrap().get("trace_id").is_none(), "absent, not null");
    }

    /// [`LedgerPublisher::receipt`] without a NATS context.
    fn build_for_test(
        envelope: &Envelope,
        outcome: &MessageOutcome,
        settlement: &Settlement,
        sink: &dyn Sink,
    ) -> Option<Receipt> {
        let config = LedgerConfig { enabled: true, subject: Some("ledger".into()), ..Default::default() };
        receipt_with(&config, envelope, outcome, settlement, sink)
    }
}
