//! Riding out a destination outage (`delivery.outage_hold_seconds`): back-pressure instead of
//! burning deliveries.
//!
//! A batch in which every message failed temporarily (or was held back behind such a
//! failure) means the destination is down, not that its messages are bad. Settling them as
//! usual would NAK them, and every redelivery during the outage would use one of their
//! `max_deliver` deliveries until they are dead-lettered for nothing. Instead [`ride_out`]:
//! - keeps the messages unacknowledged with in-progress heartbeats (`+WPI`: AckWait starts
//!   again, no delivery is used);
//! - stops the fetch loop from fetching anything new (`outage::Holds::paused`), so what is
//!   still in the stream is not delivered (and spends nothing) either; with a fan-out the other
//!   targets go on, and only the messages that need the target that is down are held (their failures
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
//! `outage::OUTAGE_LOG_INTERVAL` while it lasts, one when the last held batch ends; the gauges
//! `destination_outage` and `outage_held_messages`, the counter
//! `destination_outage_paused_seconds`, and `/readyz` not ready meanwhile. Those lines and
//! gauges, and the pause, belong to the holds' state (`outage::Holds`), which the run's
//! context keeps; this module is the task that holds a batch.
//!
//! [`SinkError::is_outage`]: sinks_contract::SinkError::is_outage

use std::time::{Duration, Instant};

use sinks_contract::envelope::Envelope;
use sinks_contract::sink::MessageOutcome;

use super::context::Ctx;
use super::handle::Handle;
use super::heartbeat::{hold_while, keep_alive};
use super::outage::Ended;

/// First delay between probes; it doubles up to [`PROBE_MAX`].
const PROBE_BASE: Duration = Duration::from_millis(250);
/// Longest delay between probes.
const PROBE_MAX: Duration = Duration::from_secs(5);
/// Writes that fail again although the destination answered its health check before each,
/// after which the held messages are taken to fail on their own (no outage).
const HEALTHY_FAILURES: u32 = 3;

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
    handles: &[Handle],
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
    let acks: Vec<Handle> = held.iter().map(|&i| handles[i].clone()).collect();
    let pause = !fanout;
    ctx.holds.enter(&batch, pause, &reason);
    let started = Instant::now();
    let mut latest: Option<Vec<MessageOutcome>> = None;
    let mut attempt = 0u32;
    let mut healthy_failures = 0u32;
    let ended = loop {
        attempt += 1;
        let left = limit.saturating_sub(started.elapsed());
        let delay = probe_delay(attempt, rand::random::<f64>()).min(left);
        let mut stop = ctx.stop.clone();
        let stopped = hold_while(ctx, &[&acks], async {
            tokio::select! {
                () = tokio::time::sleep(delay) => false,
                _ = stop.wait_for(|s| *s) => true,
            }
        })
        .await;
        ctx.holds.tick(&reason);
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
    ctx.holds.leave(batch.len(), pause, ended);
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
