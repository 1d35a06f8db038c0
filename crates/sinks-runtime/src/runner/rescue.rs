//! The rescue: the last chance of a message the server stopped redelivering.
//!
//! JetStream gives up on a message after its consumer's `max_deliver` deliveries and says so
//! only in a `MAX_DELIVERIES` advisory. A run that is alive during that last delivery
//! dead-letters a message it cannot write; one that was killed then would lose it. The
//! capture stream (`crate::setup::ensure_capture`) keeps those advisories, and this task
//! reads them through the rescue consumer (shared by every worker of the consumer, so one
//! advisory goes to one worker), reads each message back from its stream by sequence, and
//! gives it the same policy steps and write as a fetched message, without an ordering key (it
//! must not wait behind anything). Durable (committed, or found already stored): done. Not:
//! dead-lettered with reason `max_deliver_exhausted`, its delivery count and the error of this
//! attempt. Without a dead-letter stream, or when the dead-letter publish fails, the
//! advisory is NAKed and the rescue tried again later: the message stays in its stream, so it
//! is never dropped by the sink. A message the stream no longer holds is counted and logged
//! once (`nats-sink reconcile` shows it as `gone`).
//!
//! The advisory is acknowledged only after the message's outcome is durable (its record, or
//! its dead letter, and its ledger receipt); a rescue repeated after a crash finds the record
//! (a duplicate) or stores the same dead letter (deduplicated by `Nats-Msg-Id`).
//!
//! This module is the rescue's intake only: it reads the advisories, drops those of older
//! streams, counts the messages that are gone, and reads the others back. From there a
//! rescued message takes the one forward path of every message (`forward::process` with
//! [`Origin::Rescued`]): the policy steps and their counts, the write, the outage hold, a
//! holding sink's objects, the planner and the ACK gate, and the settlement with its dead
//! letter, receipt and counters, with its advisory as its handle (`handle::Handle::Rescue`,
//! which also holds the last-chance rule).

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::AckKind;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use futures::StreamExt;
use serde::Deserialize;
use sinks_contract::envelope::JetStreamInfo;
use sinks_policy::intake::Arrival;
use time::OffsetDateTime;
use tokio::sync::watch;

use super::batch::Batch;
use super::context::Ctx;
use super::forward::{self, Origin, Turn};
use super::handle::{Handle, count_rescue_failure};
use crate::metrics::{CounterId, RunStats};
use crate::setup::Capture;
use crate::source::{AckHandle, handle_of, headers_of};

/// The fields of a `io.nats.jetstream.advisory.v1.max_deliver` advisory the rescue reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(super) struct Exhausted {
    /// Source stream.
    pub(super) stream: String,
    /// Consumer whose deliveries ran out.
    pub(super) consumer: String,
    /// The message's stream sequence.
    pub(super) stream_seq: u64,
    /// Deliveries the server made.
    pub(super) deliveries: u64,
    /// When the server gave up (RFC 3339), when the advisory says.
    #[serde(default)]
    pub(super) timestamp: Option<String>,
}

impl Exhausted {
    /// True when the server gave up before `created`: the advisory names a message of an
    /// earlier stream of the same name (deleted and created again since), not this one's.
    pub(super) fn predates(&self, created: Option<OffsetDateTime>) -> bool {
        let at = self
            .timestamp
            .as_deref()
            .and_then(|t| OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok());
        matches!((at, created), (Some(at), Some(created)) if at < created)
    }
}

impl Exhausted {
    /// The advisory in `payload`, if it is one.
    pub(super) fn parse(payload: &[u8]) -> Option<Self> {
        serde_json::from_slice(payload).ok().filter(|a: &Self| a.stream_seq > 0)
    }
}

/// One advisory being handled: its ack handle and the message it names.
struct Case {
    advisory: AckHandle,
    exhausted: Exhausted,
}

/// Reads the capture stream until a stop is requested, rescuing what it names.
pub(super) async fn rescue_loop(ctx: Arc<Ctx>, capture: Capture, mut stop: watch::Receiver<bool>) {
    let batch = ctx.config.rescue.batch_size;
    tracing::info!(stream = %capture.stream, "rescue of exhausted messages on");
    loop {
        if *stop.borrow() {
            return;
        }
        // While the stream's identity is undecided nothing is written, rescued or not.
        if ctx.guard.paused() && !ctx.guard.wait_open(&stop).await {
            return;
        }
        let fetched = tokio::select! {
            fetched = capture.consumer.fetch().max_messages(batch).expires(Duration::from_secs(1)).messages() => fetched,
            _ = stop.wait_for(|s| *s) => return,
        };
        let mut messages = match fetched {
            Ok(messages) => messages,
            Err(e) => {
                tracing::debug!(error = %e, "reading the exhaustion capture stream failed; retrying");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        };
        let mut cases = Vec::new();
        while let Some(Ok(message)) = messages.next().await {
            let Some(advisory) = handle_of(&message) else { continue };
            match Exhausted::parse(&message.payload) {
                Some(exhausted)
                    if exhausted.stream == ctx.config.nats.stream && exhausted.consumer == ctx.config.nats.consumer =>
                {
                    cases.push(Case { advisory, exhausted });
                }
                _ => {
                    tracing::warn!(subject = %message.subject, "not an exhaustion advisory of this consumer; dropped");
                    let _ = advisory.send(AckKind::Ack).await;
                }
            }
        }
        if !cases.is_empty() {
            rescue(&ctx, &capture, cases).await;
        }
    }
}

/// Rescues the messages `cases` name (see the module documentation): reads each back from
/// its stream and sends those it found down the forward path together.
async fn rescue(ctx: &Ctx, capture: &Capture, cases: Vec<Case>) {
    let mut batch: Batch<Handle> = Batch::with_capacity(cases.len());
    let (epoch, created) = {
        let state = ctx.guard.watch();
        let state = state.borrow();
        (state.epoch.clone(), state.created)
    };
    for case in cases {
        let seq = case.exhausted.stream_seq;
        let advisory = Handle::Rescue(case.advisory);
        if case.exhausted.predates(created) {
            gone(ctx);
            tracing::warn!(
                stream_sequence = seq,
                "an exhaustion advisory names a message of the stream before it was created again; that message is gone"
            );
            let _ = advisory.send(AckKind::Ack).await;
            continue;
        }
        match capture.source.get_raw_message(seq).await {
            Ok(raw) => {
                let headers = headers_of(&raw.headers);
                let jetstream = JetStreamInfo {
                    stream: ctx.config.nats.stream.clone(),
                    consumer: ctx.config.nats.consumer.clone(),
                    stream_sequence: seq,
                    consumer_sequence: 0,
                    delivered: case.exhausted.deliveries.max(1),
                    pending: 0,
                    timestamp: Some(raw.time).filter(|t| *t != OffsetDateTime::UNIX_EPOCH),
                    domain: None,
                };
                let subject = raw.subject.as_str();
                let arrival = Arrival { subject, payload: raw.payload, headers, jetstream, epoch: epoch.clone() };
                let envelope = ctx.pipeline.intake().envelope(arrival);
                let envelope = match &ctx.origins {
                    Some(origins) => origins.resolve(envelope).await,
                    None => envelope,
                };
                batch.push(envelope, advisory);
            }
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
                gone(ctx);
                tracing::warn!(
                    stream_sequence = seq,
                    deliveries = case.exhausted.deliveries,
                    "an exhausted message is no longer in its stream (retention or deletion); reconcile shows it as gone"
                );
                let _ = advisory.send(AckKind::Ack).await;
            }
            Err(e) => {
                tracing::debug!(stream_sequence = seq, error = %e, "cannot read an exhausted message back yet; retrying");
                count_rescue_failure(&ctx.stats, &ctx.metrics);
                let _ = advisory.send(AckKind::Nak(None)).await;
            }
        }
    }
    if batch.is_empty() {
        return;
    }
    // Nothing waits for it and it waits for nothing: no ordering key, no gate.
    let (done, _) = watch::channel(false);
    forward::process(ctx, batch, Origin::Rescued, Turn::alone(done), None).await;
}

/// Counts an exhausted message its stream no longer holds.
fn gone(ctx: &Ctx) {
    RunStats::add(&ctx.stats.rescue_gone, 1);
    ctx.metrics.inc(CounterId::MessagesRescueGone, 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advisories_are_read_and_anything_else_is_not() {
        let advisory = br#"{"type":"io.nats.jetstream.advisory.v1.max_deliver","id":"x","timestamp":"2026-12-01T00:00:00Z","stream":"S","consumer":"C","stream_seq":42,"deliveries":3}"#;
        assert_eq!(
            Exhausted::parse(advisory),
            Some(Exhausted {
                stream: "S".into(),
                consumer: "C".into(),
                stream_seq: 42,
                deliveries: 3,
                timestamp: Some("2026-12-01T00:00:00Z".into())
            })
        );
        let parsed = Exhausted::parse(advisory).unwrap();
        let at = |t: &str| Some(OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).unwrap());
        assert!(parsed.predates(at("2026-12-02T00:00:00Z")), "the stream was created again after it");
        assert!(!parsed.predates(at("2026-11-30T00:00:00Z")));
        assert!(!parsed.predates(None), "an unknown creation time drops nothing");
        assert_eq!(Exhausted::parse(b"not json"), None);
        assert_eq!(Exhausted::parse(br#"{"stream":"S","consumer":"C"}"#), None, "no sequence");
        assert_eq!(Exhausted::parse(br#"{"stream":"S","consumer":"C","stream_seq":0,"deliveries":1}"#), None);
    }
}
