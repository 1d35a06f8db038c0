//! Trace spans of a run: one per message delivery, one per batch write.
//!
//! A message's span starts when its batch's task takes it up (before the policy steps) and
//! ends once its settlement was sent: it covers the policies, the write (an event `written`
//! with the sink's outcome), the dead letter when there is one, and the ack, NAK or term.
//! Its parent is the producer's span when the message carries a valid `traceparent`
//! (sampled as the producer decided); otherwise it starts a trace of its own, sampled by
//! `opentelemetry.traces.sample_ratio`. The batch write is a span of its own, linked to the
//! spans of the messages it wrote.
//!
//! Attributes are the stream, consumer, stream sequence, subject, delivery count, sink name
//! and, at the end, the outcome and the settlement; never a payload, a header value or a
//! secret. Open message spans wait in a map keyed by stream sequence between the batch task
//! that opened them and the settlement that ends them (a message parked behind its key keeps
//! its span until it is settled). None of this exists with traces off.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use opentelemetry::trace::Span as _;
use opentelemetry::trace::{Link, SpanContext, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SdkTracer, Span};
use sinks_contract::envelope::Envelope;
use sinks_contract::sink::MessageOutcome;

use super::{Fate, Ids, traceparent};
use crate::metrics::class_label;

/// The ids of `context`.
fn ids_of(context: &SpanContext) -> Ids {
    Ids {
        trace_id: u128::from_be_bytes(context.trace_id().to_bytes()),
        span_id: u64::from_be_bytes(context.span_id().to_bytes()),
        sampled: context.is_sampled(),
    }
}

/// One message's open span.
#[derive(Debug)]
pub(crate) struct MessageSpan {
    span: Span,
    ids: Ids,
}

impl MessageSpan {
    /// Its ids.
    pub(crate) fn ids(&self) -> Ids {
        self.ids
    }
}

/// The batch write's span.
#[derive(Debug)]
pub(crate) struct WriteSpan {
    span: Span,
    ids: Ids,
}

impl WriteSpan {
    /// Its ids.
    pub(crate) fn ids(&self) -> Ids {
        self.ids
    }

    /// Ends it.
    pub(crate) fn end(mut self, messages: usize) {
        self.span.set_attribute(KeyValue::new("messaging.batch.message_count", messages as i64));
        self.span.end();
    }
}

/// The spans of one run (traces on).
#[derive(Debug)]
pub struct Traces {
    tracer: SdkTracer,
    sink: StringValue,
    stream: StringValue,
    consumer: StringValue,
    open: Mutex<HashMap<u64, MessageSpan>>,
}

fn shared(s: &str) -> StringValue {
    StringValue::from(std::sync::Arc::<str>::from(s))
}

/// The parent context of a message: its producer's span, or none.
fn parent_of(envelope: &Envelope) -> Context {
    let headers = envelope.headers();
    match headers
        .get(traceparent::TRACEPARENT)
        .and_then(|tp| traceparent::parse(tp, headers.get(traceparent::TRACESTATE)))
    {
        Some(parent) => Context::new().with_remote_span_context(parent),
        None => Context::new(),
    }
}

impl Traces {
    /// Spans from `tracer`, naming sink `sink`, of the messages of `stream` read by
    /// `consumer`.
    pub(crate) fn new(tracer: SdkTracer, sink: &str, stream: &str, consumer: &str) -> Self {
        let open = Mutex::new(HashMap::new());
        Self { tracer, sink: shared(sink), stream: shared(stream), consumer: shared(consumer), open }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, MessageSpan>> {
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens a span for each of `envelopes` that has none open yet (one that was parked keeps
    /// the span it had).
    pub(crate) fn begin(&self, envelopes: &[Envelope]) {
        let now = SystemTime::now();
        let mut open = self.lock();
        for envelope in envelopes {
            let seq = envelope.jetstream().stream_sequence;
            open.entry(seq).or_insert_with(|| self.message_span(envelope, now));
        }
    }

    fn message_span(&self, envelope: &Envelope, start: SystemTime) -> MessageSpan {
        let js = envelope.jetstream();
        let attributes = vec![
            KeyValue::new("messaging.system", "nats"),
            KeyValue::new("messaging.operation.type", "process"),
            KeyValue::new("messaging.destination.name", envelope.subject().to_owned()),
            KeyValue::new("messaging.consumer.group.name", Value::String(self.consumer.clone())),
            KeyValue::new("nats.stream", Value::String(self.stream.clone())),
            KeyValue::new("nats.stream_sequence", js.stream_sequence as i64),
            KeyValue::new("nats.delivery_count", js.delivered as i64),
            KeyValue::new("nats_sinks.sink", Value::String(self.sink.clone())),
        ];
        let span = self
            .tracer
            .span_builder("nats-sink process")
            .with_kind(SpanKind::Consumer)
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent_of(envelope));
        let ids = ids_of(span.span_context());
        MessageSpan { span, ids }
    }

    /// The ids of the open span of stream sequence `seq`.
    pub(crate) fn ids(&self, seq: u64) -> Option<Ids> {
        self.lock().get(&seq).map(MessageSpan::ids)
    }

    /// Notes on the open span of `seq` that a policy step refused the message.
    pub(crate) fn refused(&self, seq: u64, step: &'static str, reason: &str) {
        if let Some(m) = self.lock().get_mut(&seq) {
            let attributes =
                vec![KeyValue::new("nats_sinks.policy", step), KeyValue::new("nats_sinks.reason", reason.to_owned())];
            m.span.add_event("refused by policy", attributes);
        }
    }

    /// Starts the span of a batch write, linked to the open spans of `envelopes`.
    pub(crate) fn write_span(&self, envelopes: &[Envelope]) -> WriteSpan {
        let links: Vec<Link> = {
            let open = self.lock();
            envelopes
                .iter()
                .filter_map(|e| open.get(&e.jetstream().stream_sequence))
                .map(|m| Link::with_context(m.span.span_context().clone()))
                .collect()
        };
        let span = self
            .tracer
            .span_builder("nats-sink write")
            .with_kind(SpanKind::Client)
            .with_attributes(vec![KeyValue::new("nats_sinks.sink", Value::String(self.sink.clone()))])
            .with_links(links)
            .start_with_context(&self.tracer, &Context::new());
        let ids = ids_of(span.span_context());
        WriteSpan { span, ids }
    }

    /// Notes the sink's outcome on the open span of each written message.
    pub(crate) fn written(&self, envelopes: &[Envelope], outcomes: &[MessageOutcome]) {
        let mut open = self.lock();
        for (envelope, outcome) in envelopes.iter().zip(outcomes) {
            if let Some(m) = open.get_mut(&envelope.jetstream().stream_sequence) {
                m.span.add_event("written", vec![KeyValue::new("nats_sinks.outcome", class_label(outcome.class()))]);
            }
        }
    }

    /// Takes the open span of `seq` out of the map, to be ended by its settlement.
    pub(crate) fn take(&self, seq: u64) -> Option<MessageSpan> {
        self.lock().remove(&seq)
    }
}

/// Ends a message's span with its fate (`reason`: the dead-letter reason code).
pub(crate) fn finish(mut message: MessageSpan, fate: Fate, reason: Option<&str>) {
    let span = &mut message.span;
    span.set_attribute(KeyValue::new(
        "nats_sinks.outcome",
        if fate.dead_lettered { "dead_lettered" } else { fate.outcome },
    ));
    span.set_attribute(KeyValue::new("nats_sinks.sink_outcome", fate.outcome));
    span.set_attribute(KeyValue::new("nats_sinks.settlement", fate.settlement));
    if fate.dead_lettered {
        let attributes = reason.map(|r| vec![KeyValue::new("nats_sinks.reason", r.to_owned())]).unwrap_or_default();
        span.add_event("dead-lettered", attributes);
    }
    match (fate.dead_lettered, fate.settlement) {
        (true, _) => span.set_status(Status::error(reason.unwrap_or("dead_lettered").to_owned())),
        (false, "nak" | "not_sent" | "left_unacked") => span.set_status(Status::error(fate.settlement)),
        _ => span.set_status(Status::Ok),
    }
    span.end();
}
