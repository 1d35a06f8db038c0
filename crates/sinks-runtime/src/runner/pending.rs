//! Pending messages: what a holding sink (batch mode of the file and S3 sinks) took into
//! objects that are not committed yet. The runner keeps each one unacknowledged, with
//! in-progress heartbeats, until the sink reports its final outcome from a flush; only
//! then is it settled, through the ACK gate like any written message. A sink never sees an
//! ack handle: it names a message by stream and sequence ([`Settled`]).
//!
//! - [`hold`] (after a write): takes the `Pending` messages out of the batch and keeps
//!   them (the envelope without its payload and without the headers settlement does not
//!   read, unless it is on its last allowed delivery or rescued and may need a dead-letter
//!   record, or the ledger's receipts take their correlation id from a payload field; an open object
//!   with a million messages does not keep a million payloads here); an outcome that came
//!   first is settled at once. A kept-slim message whose object fails for good comes back
//!   (NAK) rather than being dead-lettered without its payload;
//! - [`flusher`] (a task): flushes the sink every `Holding::tick` and right after a write
//!   held something, with [`FlushScope::All`] when the runner holds three quarters of what
//!   the consumer lets it have unacknowledged (`max_ack_pending`: the server would stop
//!   delivering, and no object could fill), else [`FlushScope::Due`]; settles what it
//!   reports;
//! - [`heartbeat`] (a task): in-progress heartbeats for every pending message, every third
//!   of AckWait;
//! - [`finish`] (shutdown, after the last batch settled and before the acks are flushed and
//!   the connection drained): flushes everything within `nats.drain_timeout_seconds` and
//!   settles it, then releases (NAKs) what is still pending.
//!
//! A rescued message is kept like any other, its advisory heartbeated meanwhile, and
//! settled from its final outcome through the same path (its advisory acked, or the
//! exhaustion dead-lettered).

use std::time::Duration;

use bytes::Bytes;
use sinks_contract::envelope::Envelope;
use sinks_contract::sink::{FlushScope, HoldingSettings, MessageOutcome, Settled, Sink};
use sinks_toolkit::holding::{Hold, key_of};
use tokio::sync::watch;

use super::batch::Batch;
use super::context::{Ctx, Holder};
use super::handle::Handle;
use super::heartbeat::{hold_while, progress};
use super::settle;
use super::written::plan_written;
use crate::config::{Config, ConfigError};
use crate::metrics::GaugeId;

/// Refuses a configuration under which messages cannot wait for their objects: heartbeats
/// every third of AckWait must keep them alive, and with `delivery.in_progress` the
/// configured heartbeats (`interval_ms × max_heartbeats`, the longest the runner keeps a
/// message alive) must cover `max_age_ms`. Warns when the consumer's `max_ack_pending`
/// keeps objects from filling up.
pub(super) fn check(
    config: &Config,
    holding: HoldingSettings,
    ack_wait: Duration,
    max_ack_pending: Option<usize>,
) -> Result<(), ConfigError> {
    let field = "sink.batch.max_age_ms";
    let every = (ack_wait / 3).max(Duration::from_millis(200));
    if every * 2 > ack_wait {
        return Err(ConfigError::single(
            field,
            format!(
                "messages waiting for their object cannot be kept alive: the consumer's AckWait ({} ms) is too short for in-progress heartbeats (at least 400 ms)",
                ack_wait.as_millis()
            ),
        ));
    }
    let ip = &config.delivery.in_progress;
    let covered = Duration::from_millis(ip.interval_ms).saturating_mul(ip.max_heartbeats);
    if ip.enabled && covered < holding.max_wait {
        return Err(ConfigError::single(
            field,
            format!(
                "({} ms) must be covered by delivery.in_progress: interval_ms × max_heartbeats is {} ms, the longest the runner keeps a message alive",
                holding.max_wait.as_millis(),
                covered.as_millis()
            ),
        ));
    }
    if let Some(limit) = max_ack_pending {
        tracing::info!(
            max_ack_pending = limit,
            flush_at = pressure_at(limit),
            "batch objects close when they are full, old, or when the runner holds this many pending messages"
        );
    }
    Ok(())
}

/// How many pending messages make the flusher close everything (three quarters of
/// `max_ack_pending`, at least one).
pub(super) fn pressure_at(max_ack_pending: usize) -> usize {
    (max_ack_pending.saturating_mul(3) / 4).max(1)
}

/// Takes the `Pending` messages of a written batch into the pending set; returns the rest
/// (with those whose final outcome had already come) to be planned and settled now.
pub(super) fn hold(
    ctx: &Ctx,
    batch: Batch<Handle>,
    outcomes: Vec<MessageOutcome>,
) -> (Batch<Handle>, Vec<MessageOutcome>) {
    if !outcomes.iter().any(|o| matches!(o, MessageOutcome::Pending)) {
        return (batch, outcomes);
    }
    let mut now = Batch::with_capacity(batch.len());
    let mut now_outcomes = Vec::with_capacity(outcomes.len());
    let mut held = Vec::new();
    // A receipt whose correlation id is a payload field reads the payload at settlement.
    let keep_payloads = ctx.ledger.as_ref().is_some_and(crate::ledger::LedgerPublisher::reads_payload);
    {
        let mut pending = ctx.lock_pending();
        for ((envelope, handle), outcome) in batch.into_iter().zip(outcomes) {
            if !matches!(outcome, MessageOutcome::Pending) {
                now.push(envelope, handle);
                now_outcomes.push(outcome);
                continue;
            }
            held.push(envelope.jetstream().stream_sequence);
            let key = key_of(&envelope);
            // A rescued message's exhaustion is dead-lettered whatever its delivery count, and so
            // is a redriven message that fails again.
            let whole = keep_payloads || handle.out_of_band() || ctx.is_last_delivery(&envelope);
            let envelope = if whole { envelope } else { slim(ctx, envelope) };
            let holder = Holder { envelope: Box::new(envelope), handle, slim: !whole };
            match pending.hold(key, holder) {
                Hold::Settled(Holder { envelope, handle, slim }, outcome) => {
                    now.push(*envelope, handle);
                    now_outcomes.push(fit(slim, outcome));
                }
                // A redelivery of a message still pending replaces the older delivery.
                Hold::Kept(_) => {}
            }
        }
        ctx.metrics.set(GaugeId::PendingMessages, pending.len() as f64);
    }
    // Written, as far as ordering goes: a draining lot's next chunk need not wait for the
    // object; and the parking no longer heartbeats them (the pending heartbeat does).
    {
        let mut parking = ctx.lock_parking();
        for seq in held {
            parking.settling(seq);
        }
        ctx.note_parking(&parking);
    }
    ctx.flush_wake.notify_one();
    (now, now_outcomes)
}

/// What a pending message's envelope keeps when it is not on its last allowed delivery:
/// no payload (an open object with a million messages does not keep a million payloads
/// here), and only the headers settlement reads (`Nats-Time-Stamp` for freshness, the
/// ledger's correlation header).
fn slim(ctx: &Ctx, envelope: Envelope) -> Envelope {
    let freshness = ctx.freshness.enabled();
    let correlation = ctx.ledger.as_ref().and_then(crate::ledger::LedgerPublisher::reads_header);
    envelope.with_payload(Bytes::new()).retaining_headers(|name| {
        (freshness && name.eq_ignore_ascii_case(sinks_contract::envelope::CREATED_AT_HEADER))
            || correlation.is_some_and(|h| name.eq_ignore_ascii_case(h))
    })
}

/// A slim envelope's final outcome as settlement may apply it: a permanent failure cannot
/// be dead-lettered without the payload, so the message comes back (NAK) and its
/// redelivery, which carries the payload, is written or dead-lettered whole (on its last
/// allowed delivery the envelope is kept whole).
fn fit(slim: bool, outcome: MessageOutcome) -> MessageOutcome {
    match outcome {
        MessageOutcome::Failed(e) if slim && e.is_permanent() => MessageOutcome::Failed(
            sinks_contract::SinkError::temporary(format!(
                "the message's object failed for good ({}); it comes back with its payload",
                e.display_chain()
            ))
            .with_error_type(e.error_type()),
        ),
        other => other,
    }
}

/// The final outcomes a flush of `sink`'s held records `scope` names decides (none when the
/// sink does not hold messages).
async fn flush(sink: &dyn Sink, scope: FlushScope) -> Vec<Settled> {
    match sink.holding() {
        Some(holding) => holding.flush(scope).await,
        None => Vec::new(),
    }
}

/// Settles the pending messages `settled` names (the final outcomes a flush reported).
async fn deliver(ctx: &Ctx, settled: Vec<Settled>) {
    if settled.is_empty() {
        return;
    }
    let mut batch = Batch::with_capacity(settled.len());
    let mut outcomes = Vec::with_capacity(settled.len());
    {
        let mut pending = ctx.lock_pending();
        for s in settled {
            if let Some((Holder { envelope, handle, slim }, outcome)) = pending.settle(s) {
                batch.push(*envelope, handle);
                outcomes.push(fit(slim, outcome));
            }
        }
        ctx.metrics.set(GaugeId::PendingMessages, pending.len() as f64);
    }
    settle_written(ctx, batch, outcomes).await;
}

/// Plans and applies the settlement of pending messages with their final outcomes, as for
/// a written batch.
async fn settle_written(ctx: &Ctx, batch: Batch<Handle>, outcomes: Vec<MessageOutcome>) {
    if batch.is_empty() {
        return;
    }
    let planned = plan_written(ctx, batch, outcomes);
    settle::apply(ctx, planned).await;
}

/// Flushes the sink whenever a write held something, every `tick`, and with everything
/// when the pending messages reach `pressure`, until a stop is requested.
pub(super) async fn flusher(
    ctx: std::sync::Arc<Ctx>,
    holding: HoldingSettings,
    pressure: Option<usize>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(holding.tick) => {}
            () = ctx.flush_wake.notified() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let held = ctx.lock_pending().len();
        let scope = if pressure.is_some_and(|p| held >= p) { FlushScope::All } else { FlushScope::Due };
        let settled = flush(ctx.sink.as_ref(), scope).await;
        deliver(&ctx, settled).await;
    }
}

/// In-progress heartbeats for every pending message, every third of AckWait, until a stop
/// is requested.
pub(super) async fn heartbeat(ctx: std::sync::Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    let every = ctx.heartbeat_every();
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let handles = handles(&ctx);
        if !handles.is_empty() {
            tracing::trace!(messages = handles.len(), "heartbeat for pending messages");
            progress(&handles).await;
        }
    }
}

fn handles(ctx: &Ctx) -> Vec<Handle> {
    ctx.lock_pending().holders().map(|h| h.handle.clone()).collect()
}

/// Shutdown: commits every open object within `nats.drain_timeout_seconds` (heartbeating
/// its messages meanwhile) and settles them; what is still pending afterwards is released
/// to come back.
pub(super) async fn finish(ctx: &Ctx) {
    if ctx.sink.holding().is_none() {
        return;
    }
    let held = handles(ctx);
    let drain = Duration::from_secs(ctx.config.nats.drain_timeout_seconds).max(Duration::from_secs(1));
    if !held.is_empty() {
        tracing::info!(messages = held.len(), "committing the open objects before stopping");
    }
    match hold_while(ctx, &[&held], tokio::time::timeout(drain, flush(ctx.sink.as_ref(), FlushScope::All))).await {
        Ok(settled) => deliver(ctx, settled).await,
        Err(_) => tracing::warn!(
            timeout_s = drain.as_secs(),
            "the open objects were not committed within nats.drain_timeout_seconds; their messages come back"
        ),
    }
    let left: Vec<(Envelope, Handle)> =
        ctx.lock_pending().drain().into_iter().map(|(_, h)| (*h.envelope, h.handle)).collect();
    ctx.metrics.set(GaugeId::PendingMessages, 0.0);
    if left.is_empty() {
        return;
    }
    tracing::info!(messages = left.len(), "releasing messages whose object was not committed");
    let outcomes =
        left.iter().map(|_| MessageOutcome::temporary("stopped before the message's object was committed")).collect();
    let batch: Batch<Handle> = left.into_iter().collect();
    settle_written(ctx, batch, outcomes).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(in_progress: serde_json::Value) -> Config {
        Config::from_value(serde_json::json!({
            "nats": {"url": "nats://127.0.0.1:4222", "stream": "S", "consumer": "c", "subject": "s.>"},
            "sink": {"type": "memory"},
            "delivery": {"in_progress": in_progress},
            "consumer_management": {"ack_wait_seconds": 30},
        }))
        .unwrap()
    }

    #[test]
    fn start_up_refuses_a_max_age_the_heartbeats_cannot_cover() {
        let holding = HoldingSettings::new(Duration::from_secs(60), Duration::from_secs(1));
        let s = Duration::from_secs;
        let off = config(serde_json::json!({"enabled": false}));
        assert!(
            check(&off, holding, s(30), Some(1000)).is_ok(),
            "heartbeats every 10 s keep it alive as long as needed"
        );
        assert!(check(&off, holding, Duration::from_millis(1), None).is_err(), "AckWait too short to heartbeat");
        let short = config(serde_json::json!({"enabled": true, "interval_ms": 1000, "max_heartbeats": 10}));
        let err = check(&short, holding, s(30), None).unwrap_err();
        assert_eq!(err.issues[0].path, "sink.batch.max_age_ms");
        assert!(err.issues[0].message.contains("10000 ms"), "{err}");
        let long = config(serde_json::json!({"enabled": true, "interval_ms": 1000, "max_heartbeats": 60}));
        assert!(check(&long, holding, s(30), None).is_ok());
        assert_eq!(pressure_at(1000), 750);
        assert_eq!(pressure_at(1), 1);
    }
}
