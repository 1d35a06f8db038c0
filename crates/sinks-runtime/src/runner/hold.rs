//! Riding out a destination outage (`delivery.outage_hold_seconds`): back-pressure instead of
//! burning deliveries.
//!
//! A batch in which every message failed temporarily (or was held back behind such a
//! failure) means the destination is down, not that its messages are bad. Settling them as
//! usual would NAK them, and every redelivery during the outage would use one of their
//! `max_deliver` deliveries until they are dead-lettered for nothing. Instead [`ride_out`]:
//! - keeps the messages unacknowledged with in-progress heartbeats (`+WPI`: AckWait starts
//!   again, no delivery is used);
//! - stops the fetch loop from fetching anything new ([`Holds::paused`]), so what is still in
//!   the stream is not delivered (and spends nothing) either; with a fan-out the other targets
//!   go on, and only the messages that need the target that is down are held (their failures
//!   carry [`SinkError::is_outage`]); the consumer's `max_ack_pending` bounds how many;
//! - probes the destination with backoff and jitter (its health check), and writes the held
//!   messages again once it answers;
//! - resumes as soon as a write makes them durable or fails them for another reason (a
//!   partial failure is no outage: it settles as it always did), and gives up holding when
//!   the destination answers its health check yet the write fails again three times (the
//!   messages fail on their own: a single message's batch looks like an outage at first);
//! - after `delivery.outage_hold_seconds` releases them to their normal course (the gate
//!   NAKs them with backoff; each later hold costs one delivery), and on a stop request
//!   settles them at once, as a stop always did.
//!
//! One log line when the first batch starts holding (what is held, fetching paused), one per
//! [`OUTAGE_LOG_INTERVAL`] while it lasts, one when the last held batch ends; the gauges
//! `destination_outage` and `outage_held_messages`, the counter
//! `destination_outage_paused_seconds`, and `/readyz` not ready meanwhile.
//!
//! [`SinkError::is_outage`]: sinks_contract::SinkError::is_outage

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sinks_contract::envelope::Envelope;
use sinks_contract::sink::MessageOutcome;
use tokio::sync::watch;

use super::context::Ctx;
use super::heartbeat::{hold_while, keep_alive};
use super::outage::OUTAGE_LOG_INTERVAL;
use crate::metrics::{CounterId, GaugeId};
use crate::source::AckHandle;

/// First delay between probes; it doubles up to [`PROBE_MAX`].
const PROBE_BASE: Duration = Duration::from_millis(250);
/// Longest delay between probes.
const PROBE_MAX: Duration = Duration::from_secs(5);
/// Writes that fail again although the destination answered its health check before each,
/// after which the held messages are taken to fail on their own (no outage).
const HEALTHY_FAILURES: u32 = 3;

/// The holds of a run: how many batches and messages hold now, since when, and the pause the
/// fetch loop waits on.
#[derive(Debug)]
pub(super) struct Holds {
    state: Mutex<State>,
    pause: watch::Sender<bool>,
}

#[derive(Debug, Default)]
struct State {
    batches: usize,
    pausing: usize,
    messages: usize,
    since: Option<Instant>,
    logged: Option<Instant>,
    /// When the paused time was last added to its counter.
    counted: Option<Instant>,
    released: u64,
}

/// How a batch's hold ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    /// A write made the held messages durable (or failed them for another reason).
    Recovered,
    /// `delivery.outage_hold_seconds` passed.
    Released,
    /// The destination answered its health check, yet the held messages kept failing: they
    /// fail on their own, not for an outage.
    NotAnOutage,
    /// A stop was requested.
    Stopped,
}

impl Default for Holds {
    fn default() -> Self {
        Self { state: Mutex::default(), pause: watch::channel(false).0 }
    }
}

impl Holds {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// True while a held batch pauses fetching.
    pub(super) fn paused(&self) -> bool {
        *self.pause.borrow()
    }

    /// Waits until fetching is not paused; false when a stop came first.
    pub(super) async fn wait_open(&self, stop: &watch::Receiver<bool>) -> bool {
        let mut state = self.pause.subscribe();
        let mut stop = stop.clone();
        tokio::select! {
            result = state.wait_for(|p| !*p) => result.is_ok(),
            _ = stop.wait_for(|s| *s) => false,
        }
    }

    fn enter(&self, ctx: &Ctx, batch: &[Envelope], pause: bool, reason: &str) {
        let messages = batch.len();
        let now = Instant::now();
        let mut s = self.lock();
        s.batches += 1;
        s.messages += messages;
        s.pausing += usize::from(pause);
        if s.since.is_none() {
            s.since = Some(now);
            s.logged = Some(now);
            s.counted = Some(now);
            tracing::warn!(
                sink = ctx.sink.name(),
                messages,
                first_sequence = batch.first().map_or(0, |e| e.jetstream().stream_sequence),
                last_sequence = batch.last().map_or(0, |e| e.jetstream().stream_sequence),
                class = "temporary",
                fetching = if pause { "paused" } else { "goes on for the other targets" },
                hold_limit_s = ctx.config.delivery.outage_hold_seconds,
                reason,
                "destination unavailable: holding the batch unacknowledged (in-progress heartbeats, no delivery \
                 used) and probing the destination"
            );
        }
        ctx.metrics.set(GaugeId::DestinationOutage, 1.0);
        ctx.metrics.set(GaugeId::OutageHeldMessages, s.messages as f64);
        ctx.metrics.status().set_outage_paused(true);
        if pause {
            self.pause.send_if_modified(|p| !std::mem::replace(p, true));
        }
    }

    /// The line per interval, and the paused seconds.
    fn tick(&self, ctx: &Ctx, reason: &str) {
        let now = Instant::now();
        let mut s = self.lock();
        if let Some(counted) = s.counted {
            let whole = now.duration_since(counted).as_secs();
            if whole > 0 && s.pausing > 0 {
                ctx.metrics.inc(CounterId::DestinationOutagePausedSeconds, whole);
                s.counted = Some(counted + Duration::from_secs(whole));
            }
        }
        if s.logged.is_some_and(|at| now.duration_since(at) >= OUTAGE_LOG_INTERVAL) {
            s.logged = Some(now);
            tracing::warn!(
                sink = ctx.sink.name(),
                outage_seconds = s.since.map_or(0, |t| now.duration_since(t).as_secs()),
                batches = s.batches,
                messages = s.messages,
                reason,
                "destination still unavailable: messages held, fetching paused"
            );
        }
    }

    fn leave(&self, ctx: &Ctx, messages: usize, pause: bool, ended: Ended) {
        let now = Instant::now();
        let mut s = self.lock();
        s.batches -= 1;
        s.messages -= messages;
        s.pausing -= usize::from(pause);
        if ended == Ended::Released {
            s.released += messages as u64;
            ctx.metrics.inc(CounterId::MessagesReleasedAfterOutageHold, messages as u64);
        }
        ctx.metrics.set(GaugeId::OutageHeldMessages, s.messages as f64);
        if s.pausing == 0 {
            if let Some(counted) = s.counted {
                ctx.metrics.inc(CounterId::DestinationOutagePausedSeconds, now.duration_since(counted).as_secs());
            }
            self.pause.send_if_modified(|p| std::mem::replace(p, false));
        }
        if s.batches > 0 {
            return;
        }
        let outage_seconds = s.since.map_or(0, |t| now.duration_since(t).as_secs());
        match ended {
            Ended::Recovered => tracing::info!(
                sink = ctx.sink.name(),
                outage_seconds,
                released = s.released,
                "destination recovered: the held messages were written; fetching resumes"
            ),
            Ended::Released => tracing::warn!(
                sink = ctx.sink.name(),
                outage_seconds,
                released = s.released,
                "destination outage outlasted delivery.outage_hold_seconds: held messages released for redelivery \
                 (NAKed with backoff); fetching resumes"
            ),
            Ended::Stopped => tracing::info!(
                sink = ctx.sink.name(),
                outage_seconds,
                "stopping during a destination outage: held messages settled as usual (they come back)"
            ),
            Ended::NotAnOutage => tracing::warn!(
                sink = ctx.sink.name(),
                outage_seconds,
                "the destination answers its health check but the held messages keep failing: they are settled as \
                 usual (NAKed with backoff); fetching resumes"
            ),
        }
        *s = State::default();
        ctx.metrics.set(GaugeId::DestinationOutage, 0.0);
        ctx.metrics.status().set_outage_paused(false);
    }
}

/// Which messages of a write are held through an outage: every one, when each failed
/// temporarily or was held back behind such a failure (the destination is down); with a
/// fan-out, the temporary failures marked as their target's outage and the messages held
/// back behind them. Empty otherwise: a partial failure is no outage. Pure.
pub(super) fn held_positions(fanout: bool, envelopes: &[Envelope], outcomes: &[MessageOutcome]) -> Vec<usize> {
    let all_down = outcomes.iter().any(MessageOutcome::failed_temporarily)
        && outcomes.iter().all(|o| o.failed_temporarily() || matches!(o, MessageOutcome::HeldBack));
    if !fanout {
        return if all_down { (0..outcomes.len()).collect() } else { Vec::new() };
    }
    let down = |o: &MessageOutcome| matches!(o, MessageOutcome::Failed(e) if !e.is_permanent() && e.is_outage());
    let keys: Vec<_> =
        envelopes.iter().zip(outcomes).filter(|(_, o)| down(o)).filter_map(|(e, _)| e.order_key()).collect();
    outcomes
        .iter()
        .enumerate()
        .filter(|(i, o)| {
            down(o)
                || (matches!(o, MessageOutcome::HeldBack)
                    && envelopes[*i].order_key().is_some_and(|k| keys.contains(&k)))
        })
        .map(|(i, _)| i)
        .collect()
}

/// The delay before probe `attempt` (1-based): 250 ms doubling up to 5 s, with jitter in
/// its upper half.
fn probe_delay(attempt: u32, sample: f64) -> Duration {
    let full = PROBE_BASE.saturating_mul(1u32 << attempt.saturating_sub(1).min(16)).min(PROBE_MAX);
    full.mul_f64(0.5 + sample.clamp(0.0, 1.0) / 2.0)
}

/// Holds the messages of `envelopes` (with `handles`) whose `outcomes` show a destination
/// outage until the destination answers again, `delivery.outage_hold_seconds` passes or a
/// stop is requested (see the module documentation); returns the outcomes to settle, those
/// of the last write for the held messages.
pub(super) async fn ride_out(
    ctx: &Ctx,
    envelopes: &[Envelope],
    handles: &[AckHandle],
    mut outcomes: Vec<MessageOutcome>,
) -> Vec<MessageOutcome> {
    let limit = Duration::from_secs(ctx.config.delivery.outage_hold_seconds);
    if limit.is_zero() || *ctx.stop.borrow() || outcomes.len() != envelopes.len() {
        return outcomes;
    }
    let fanout = ctx.sink.name() == "fanout";
    let held = held_positions(fanout, envelopes, &outcomes);
    if held.is_empty() {
        return outcomes;
    }
    let reason = outcomes
        .iter()
        .find_map(|o| match o {
            MessageOutcome::Failed(e) => Some(e.display_chain()),
            _ => None,
        })
        .unwrap_or_default();
    let batch: Vec<Envelope> = held.iter().map(|&i| envelopes[i].clone()).collect();
    let acks: Vec<AckHandle> = held.iter().map(|&i| handles[i].clone()).collect();
    let pause = !fanout;
    ctx.holds.enter(ctx, &batch, pause, &reason);
    let started = Instant::now();
    let mut latest: Option<Vec<MessageOutcome>> = None;
    let mut attempt = 0u32;
    let mut healthy_failures = 0u32;
    let ended = loop {
        attempt += 1;
        let left = limit.saturating_sub(started.elapsed());
        let delay = probe_delay(attempt, rand::random::<f64>()).min(left);
        let mut stop = ctx.stop.clone();
        let stopped = hold_while(ctx, &acks, async {
            tokio::select! {
                () = tokio::time::sleep(delay) => false,
                _ = stop.wait_for(|s| *s) => true,
            }
        })
        .await;
        ctx.holds.tick(ctx, &reason);
        if stopped {
            break Ended::Stopped;
        }
        if started.elapsed() >= limit {
            break Ended::Released;
        }
        if keep_alive(ctx, &acks, ctx.sink.health_check()).await.is_err() {
            continue;
        }
        let again =
            keep_alive(ctx, &acks, sinks_contract::sink::write_isolating(ctx.sink.as_ref(), &batch, ctx.write_budget))
                .await;
        let still = held_positions(fanout, &batch, &again).len() == batch.len();
        latest = Some(again);
        if !still {
            break Ended::Recovered;
        }
        healthy_failures += 1;
        if healthy_failures >= HEALTHY_FAILURES {
            break Ended::NotAnOutage;
        }
    };
    ctx.holds.leave(ctx, batch.len(), pause, ended);
    if let Some(latest) = latest {
        for (i, outcome) in held.into_iter().zip(latest) {
            outcomes[i] = outcome;
        }
    }
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::error::SinkError;
    use sinks_contract::testing::envelope;

    fn batch(outcomes: &str) -> (Vec<Envelope>, Vec<MessageOutcome>) {
        outcomes
            .chars()
            .enumerate()
            .map(|(i, c)| {
                let e = envelope("S", i as u64 + 1, &format!("s.k{}", i % 2), "{}");
                let o = match c {
                    'c' => MessageOutcome::Committed,
                    't' => MessageOutcome::temporary("down"),
                    'o' => MessageOutcome::Failed(SinkError::temporary("target down").with_outage()),
                    'p' => MessageOutcome::permanent("bad"),
                    'h' => MessageOutcome::HeldBack,
                    'w' => MessageOutcome::Pending,
                    other => panic!("{other}"),
                };
                (e, o)
            })
            .unzip()
    }

    #[test]
    fn what_is_held_through_an_outage() {
        // (fan-out?, outcomes, held positions)
        let rows: [(bool, &str, &[usize]); 10] = [
            (false, "tttt", &[0, 1, 2, 3]),
            (false, "thth", &[0, 1, 2, 3]),
            (false, "tctt", &[]),
            (false, "tptt", &[]),
            (false, "hhhh", &[]),
            (false, "twtt", &[]),
            (false, "", &[]),
            (true, "tttt", &[]),
            (true, "ocot", &[0, 2]),
            // A message held back behind an outage failure of its key (s.k0) is held with it.
            (true, "ochh", &[0, 2]),
        ];
        for (fanout, outcomes, want) in rows {
            let (envelopes, outcomes) = batch(outcomes);
            assert_eq!(held_positions(fanout, &envelopes, &outcomes), want, "{fanout} {outcomes:?}");
        }
    }

    #[test]
    fn probes_back_off_with_jitter() {
        assert_eq!(probe_delay(1, 1.0), Duration::from_millis(250));
        assert_eq!(probe_delay(1, 0.0), Duration::from_millis(125));
        assert_eq!(probe_delay(3, 1.0), Duration::from_secs(1));
        assert_eq!(probe_delay(30, 1.0), PROBE_MAX);
        assert!(probe_delay(30, 0.0) >= PROBE_MAX / 2);
    }
}
