//! Riding out a destination outage or its throttling (`delivery.outage_hold_seconds`):
//! back-pressure instead of burning deliveries.
//!
//! A batch in which every message failed temporarily (or was held back behind such a
//! failure) means the destination is down, not that its messages are bad; a message the
//! destination throttled (HTTP 429, S3 `SlowDown`, too many connections) met the
//! destination's limit, whatever happened to its batch-mates. Settling them as usual would NAK
//! them, and every redelivery would use one of their `max_deliver` deliveries until they are
//! dead-lettered for nothing. Instead [`ride_out`]:
//! - keeps the messages unacknowledged with in-progress heartbeats (`+WPI`: AckWait starts
//!   again, no delivery is used);
//! - stops the fetch loop from fetching anything new (`outage::Holds::paused`) when the
//!   destination throttles or fails messages on their first delivery, except a canary message
//!   now and then (`fetch`), so what is still in the stream spends nothing either; a hold of
//!   messages delivered before (a restart's redeliveries, a poison message back alone) lets
//!   fetching go on, and the others' writes show whether the destination is up; with a
//!   fan-out the other targets go on, and only the messages that need the target that is down
//!   or throttling are held; the consumer's `max_ack_pending` bounds how many; a held batch
//!   gives its in-flight slot back;
//! - waits with backoff and jitter (at least the `Retry-After` the destination asked for), then
//!   writes again: everything held when the destination answers its health check, when a
//!   write elsewhere stored something since the hold began, or when only throttled messages
//!   are held; otherwise one message of the batch (the first of its ordering key, a
//!   different one each time), so a destination whose health check cannot say (`OPTIONS`
//!   answered 501, a health URL that lies) is still noticed the moment it takes writes;
//! - lets a message go as soon as a write makes it durable or fails it for another reason;
//!   a temporary failure while the destination demonstrably stores other writes (a probe of
//!   the same batch, another batch, a canary) is the message's own: it leaves too and is
//!   remembered (`evidence`), so its next delivery is not held again. When nothing else can
//!   be written (every canary waits behind a held message of its ordering key) and the
//!   destination answers its health check, three failed writes over [`HEALTH_VERDICT_AFTER`]
//!   end the hold the same way (not remembered: a health URL may lie), unless a canary failed
//!   as the held messages do meanwhile (then it is an outage);
//! - after `delivery.outage_hold_seconds` releases what is still held to its normal course
//!   (the gate NAKs it with backoff; each later hold costs one delivery), and on a stop
//!   request settles it at once, as a stop always did.
//!
//! One log line when the first batch starts holding (what is held, fetching paused), one per
//! `outage::OUTAGE_LOG_INTERVAL` while it lasts with the latest failure, one when the last
//! held batch ends; the gauges `destination_outage` and `outage_held_messages`, the counters
//! `destination_outage_paused_seconds`, `destination_held_seconds` and
//! `destination_throttled_seconds`, and `/readyz` not ready meanwhile. Those lines and gauges,
//! and the pause, belong to the holds' state (`outage::Holds`), which the run's context keeps;
//! this module is the task that holds a batch.

use std::time::{Duration, Instant};

use sinks_contract::envelope::Envelope;
use sinks_contract::sink::MessageOutcome;

use super::context::Ctx;
use super::handle::Handle;
use super::heartbeat::{hold_while, keep_alive};
use super::outage::{Ended, HoldKind};

/// First delay between probes; it doubles up to [`PROBE_MAX`].
const PROBE_BASE: Duration = Duration::from_millis(250);
/// Longest delay between probes: the end of an outage is noticed within it.
pub(super) const PROBE_MAX: Duration = Duration::from_secs(5);
/// Writes that fail again although the destination answered its health check before each,
/// after which (with [`HEALTH_VERDICT_AFTER`] gone and no canary failing meanwhile) the held
/// messages are taken to fail on their own.
const HEALTHY_FAILURES: u32 = 3;
/// How long the health check's word alone takes to outweigh failing writes.
const HEALTH_VERDICT_AFTER: Duration = Duration::from_secs(10);

/// What one message's outcome means for its hold.
fn down(o: &MessageOutcome) -> bool {
    o.failed_temporarily()
}

/// Which messages of a write are held: every message the destination throttled, with the
/// messages held back behind it (its ordering key); and, when every message failed
/// temporarily or was held back (the destination is down), every one, unless each of the
/// failures failed on its own before (`alone`) while no other batch holds (`holding`): a
/// poison message redelivered alone is no outage. With a fan-out (`fanout`), the temporary
/// failures marked as their target's outage instead, with what is held back behind them.
/// Empty otherwise: a partial failure is no outage. Pure.
pub(super) fn held_positions(
    fanout: bool,
    envelopes: &[Envelope],
    outcomes: &[MessageOutcome],
    alone: &dyn Fn(u64) -> bool,
    holding: bool,
) -> Vec<usize> {
    let all_down =
        outcomes.iter().any(down) && outcomes.iter().all(|o| down(o) || matches!(o, MessageOutcome::HeldBack));
    let poison_alone = || {
        envelopes
            .iter()
            .zip(outcomes)
            .filter(|(_, o)| down(o) && !o.throttled())
            .all(|(e, _)| alone(e.jetstream().stream_sequence))
    };
    if !fanout && all_down && (holding || !poison_alone()) {
        return (0..outcomes.len()).collect();
    }
    let heads = |o: &MessageOutcome| {
        o.throttled() || (fanout && matches!(o, MessageOutcome::Failed(e) if !e.is_permanent() && e.is_outage()))
    };
    behind(envelopes, outcomes, heads)
}

/// The positions whose outcome `head` picks, with the messages held back behind them (the
/// same ordering key).
fn behind(envelopes: &[Envelope], outcomes: &[MessageOutcome], head: impl Fn(&MessageOutcome) -> bool) -> Vec<usize> {
    let keys: Vec<_> =
        envelopes.iter().zip(outcomes).filter(|(_, o)| head(o)).filter_map(|(e, _)| e.order_key()).collect();
    outcomes
        .iter()
        .enumerate()
        .filter(|(i, o)| {
            head(o)
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

/// The messages a one-message probe may write: each held position that is the first held
/// message of its ordering key (or has none), so a probe never overtakes its key.
fn probe_heads(held: &[usize], envelopes: &[Envelope]) -> Vec<usize> {
    let mut seen = Vec::new();
    let mut heads = Vec::new();
    for &i in held {
        match envelopes[i].order_key() {
            Some(key) if seen.contains(&key) => {}
            Some(key) => {
                seen.push(key);
                heads.push(i);
            }
            None => heads.push(i),
        }
    }
    heads
}

/// Which held messages stay held after a write: a throttled one does; a temporary failure
/// does unless the destination is shown to store writes (`up`: then it failed on its own and
/// goes, listed in the second vector); a message held back stays while an earlier message of
/// its key stays; anything else (durable, permanent, pending) goes. Pure.
pub(super) fn still_held(
    held: &[usize],
    envelopes: &[Envelope],
    outcomes: &[MessageOutcome],
    up: bool,
) -> (Vec<usize>, Vec<usize>) {
    let mut stay: Vec<usize> = Vec::new();
    let mut alone = Vec::new();
    for &i in held {
        let o = &outcomes[i];
        let keep = if o.throttled() {
            true
        } else if down(o) {
            if up {
                alone.push(i);
            }
            !up
        } else if matches!(o, MessageOutcome::HeldBack) {
            let key = envelopes[i].order_key();
            key.is_some() && stay.iter().any(|&j| envelopes[j].order_key() == key)
        } else {
            false
        };
        if keep {
            stay.push(i);
        }
    }
    (stay, alone)
}

/// The latest failure among `positions`, for the log.
fn reason_of(outcomes: &[MessageOutcome], positions: &[usize]) -> Option<String> {
    positions.iter().find_map(|&i| match &outcomes[i] {
        MessageOutcome::Failed(e) => Some(e.display_chain()),
        _ => None,
    })
}

/// Holds the messages of `envelopes` (with `handles`) whose `outcomes` show an outage or
/// throttling until they can be written, `delivery.outage_hold_seconds` passes or a stop is
/// requested (see the module documentation); returns the outcomes to settle, those of the
/// last write for the held messages.
pub(super) async fn ride_out(
    ctx: &Ctx,
    envelopes: &[Envelope],
    handles: &[Handle],
    mut outcomes: Vec<MessageOutcome>,
    slot: &mut Option<tokio::sync::OwnedSemaphorePermit>,
) -> Vec<MessageOutcome> {
    let limit = Duration::from_secs(ctx.config.delivery.outage_hold_seconds);
    if limit.is_zero() || *ctx.stop.borrow() || outcomes.len() != envelopes.len() {
        return outcomes;
    }
    let fanout = ctx.sink.name() == "fanout";
    let alone = |seq| ctx.evidence.failed_alone(seq);
    let mut held = held_positions(fanout, envelopes, &outcomes, &alone, ctx.holds.active());
    if held.is_empty() {
        return outcomes;
    }
    let kind = if held.iter().all(|&i| !down(&outcomes[i]) || outcomes[i].throttled()) {
        HoldKind::Throttled
    } else {
        HoldKind::Outage
    };
    let mut reason = reason_of(&outcomes, &held).unwrap_or_default();
    let count = held.len();
    let pause = enter_hold(ctx, fanout, envelopes, &held, &reason, kind);
    // Every message of the batch is heartbeated, not only the held ones: the others wait
    // for their settlement with the batch until the hold ends.
    let acks: Vec<Handle> = handles.to_vec();
    // A held batch writes nothing until its probes: its in-flight slot goes to the next one.
    drop(slot.take());
    let started = Instant::now();
    let (mut attempt, mut healthy_failures, mut turn) = (0u32, 0u32, 0usize);
    let mut left_alone = false;
    let ended = loop {
        attempt += 1;
        let stopped =
            wait_to_probe(ctx, &acks, &held, &outcomes, attempt, limit.saturating_sub(started.elapsed())).await;
        ctx.holds.tick(&reason);
        if stopped {
            break Ended::Stopped;
        }
        if started.elapsed() >= limit {
            break Ended::Released;
        }
        let (stored, healthy) = probe(ctx, &acks, envelopes, &held, &mut outcomes, &mut turn, started).await;
        if let Some(latest) = reason_of(&outcomes, &held) {
            reason = latest;
        }
        let up = stored || ctx.evidence.committed_since(started);
        let (stay, alone) = still_held(&held, envelopes, &outcomes, up);
        if !alone.is_empty() {
            left_alone = true;
            ctx.evidence.remember_alone(alone.iter().map(|&i| envelopes[i].jetstream().stream_sequence));
        }
        held = stay;
        if held.is_empty() {
            break if left_alone { Ended::NotAnOutage } else { Ended::Recovered };
        }
        if healthy && !stored {
            healthy_failures += 1;
            if healthy_failures >= HEALTHY_FAILURES
                && started.elapsed() >= HEALTH_VERDICT_AFTER
                && !ctx.evidence.canary_down_since(started)
                && !held.iter().any(|&i| outcomes[i].throttled())
            {
                break Ended::NotAnOutage;
            }
        }
    };
    ctx.holds.leave(count, pause, ended, kind);
    outcomes
}

/// Enters the hold of the messages at `held`; returns whether it pauses fetching. Fetching
/// pauses for throttling, and for an outage that fresh messages meet (a message on its first
/// delivery is held): then what is still in the stream would only fail too. A hold of
/// messages delivered before (a restart's redeliveries, a poison message coming back alone)
/// lets fetching go on, so the writes of the others show whether the destination is up.
fn enter_hold(ctx: &Ctx, fanout: bool, envelopes: &[Envelope], held: &[usize], reason: &str, kind: HoldKind) -> bool {
    let batch: Vec<Envelope> = held.iter().map(|&i| envelopes[i].clone()).collect();
    let pause = !fanout && (kind == HoldKind::Throttled || batch.iter().any(|e| e.jetstream().delivered <= 1));
    let fetching =
        if fanout { "goes on for the other targets" } else { "goes on (the held messages were delivered before)" };
    ctx.holds.enter(&batch, (pause, fetching), reason, kind);
    pause
}

/// Waits before probe `attempt` (heartbeating `acks`): the probe schedule, at least what
/// a held message's failure asked for (`Retry-After`), at most `left` of the hold. True when
/// a stop came first.
async fn wait_to_probe(
    ctx: &Ctx,
    acks: &[Handle],
    held: &[usize],
    outcomes: &[MessageOutcome],
    attempt: u32,
    left: Duration,
) -> bool {
    let asked = held
        .iter()
        .filter_map(|&i| match &outcomes[i] {
            MessageOutcome::Failed(e) => e.retry_after(),
            _ => None,
        })
        .max()
        .unwrap_or_default();
    let delay = probe_delay(attempt, rand::random::<f64>()).max(asked).min(left);
    let mut stop = ctx.stop.clone();
    hold_while(ctx, &[acks], async {
        tokio::select! {
            () = tokio::time::sleep(delay) => false,
            _ = stop.wait_for(|s| *s) => true,
        }
    })
    .await
}

/// One probe of a hold: every held message is written again when the destination showed it
/// is up (a commit elsewhere since the hold `started`, a health check that passes) or only
/// throttling holds them; else one ordering key's head (the next `turn`), and the rest once
/// it went through. Returns whether anything was stored and whether the health check passed.
async fn probe(
    ctx: &Ctx,
    acks: &[Handle],
    envelopes: &[Envelope],
    held: &[usize],
    outcomes: &mut [MessageOutcome],
    turn: &mut usize,
    started: Instant,
) -> (bool, bool) {
    let throttled_only = held.iter().all(|&i| !down(&outcomes[i]) || outcomes[i].throttled());
    let elsewhere = ctx.evidence.committed_since(started);
    let healthy = !(elsewhere || throttled_only) && keep_alive(ctx, acks, ctx.sink.health_check()).await.is_ok();
    let everything = elsewhere || throttled_only || healthy;
    let first: Vec<usize> = if everything {
        held.to_vec()
    } else {
        let heads = probe_heads(held, envelopes);
        *turn += 1;
        vec![heads[*turn % heads.len().max(1)]]
    };
    let mut stored = write_again(ctx, acks, envelopes, &first, outcomes).await;
    if stored && !everything {
        // The probe went through: the destination is back; the rest goes now.
        let rest: Vec<usize> = held.iter().copied().filter(|i| !first.contains(i)).collect();
        stored |= write_again(ctx, acks, envelopes, &rest, outcomes).await;
    }
    (stored, healthy)
}

/// Writes the messages at `positions` again (heartbeating `acks`), records the outcomes into
/// `outcomes` and reports them as evidence; true when anything was stored.
async fn write_again(
    ctx: &Ctx,
    acks: &[Handle],
    envelopes: &[Envelope],
    positions: &[usize],
    outcomes: &mut [MessageOutcome],
) -> bool {
    if positions.is_empty() {
        return false;
    }
    let batch: Vec<Envelope> = positions.iter().map(|&i| envelopes[i].clone()).collect();
    let began = Instant::now();
    let again =
        keep_alive(ctx, acks, sinks_contract::sink::write_isolating(ctx.sink.as_ref(), &batch, ctx.write_budget)).await;
    ctx.evidence.observe(&batch, &again, began);
    ctx.holds.note_throttled(again.iter().filter(|o| o.throttled()).count());
    let stored = again.iter().any(MessageOutcome::is_durable);
    for (&i, outcome) in positions.iter().zip(again) {
        outcomes[i] = outcome;
    }
    stored
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
                    'r' => MessageOutcome::Failed(SinkError::throttled("429")),
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
    fn what_is_held() {
        let never = |_: u64| false;
        // (fan-out?, outcomes, held positions)
        let rows: [(bool, &str, &[usize]); 16] = [
            (false, "tttt", &[0, 1, 2, 3]),
            (false, "thth", &[0, 1, 2, 3]),
            (false, "tctt", &[]),
            (false, "tptt", &[]),
            (false, "hhhh", &[]),
            (false, "twtt", &[]),
            (false, "", &[]),
            // Throttled messages are held whatever their batch-mates did, with what is held
            // back behind them (s.k0: positions 0, 2, 4; s.k1: 1, 3, 5).
            (false, "rccc", &[0]),
            (false, "rchc", &[0, 2]),
            (false, "crch", &[1, 3]),
            (false, "rrrr", &[0, 1, 2, 3]),
            (false, "rtrt", &[0, 1, 2, 3]),
            (true, "tttt", &[]),
            (true, "ocot", &[0, 2]),
            // A message held back behind an outage failure of its key (s.k0) is held with it.
            (true, "ochh", &[0, 2]),
            (true, "crcc", &[1]),
        ];
        for (fanout, outcomes, want) in rows {
            let (envelopes, outcomes) = batch(outcomes);
            assert_eq!(held_positions(fanout, &envelopes, &outcomes, &never, false), want, "{fanout} {outcomes:?}");
        }
    }

    #[test]
    fn a_batch_of_messages_that_failed_alone_before_is_no_outage_unless_one_is_held() {
        let alone = |seq: u64| seq == 1 || seq == 2;
        let (envelopes, outcomes) = batch("tt");
        assert_eq!(held_positions(false, &envelopes, &outcomes, &alone, false), Vec::<usize>::new());
        assert_eq!(held_positions(false, &envelopes, &outcomes, &alone, true), vec![0, 1], "an outage is on");
        let (envelopes, outcomes) = batch("ttt");
        assert_eq!(held_positions(false, &envelopes, &outcomes, &alone, false), vec![0, 1, 2], "3 is new");
        let (envelopes, outcomes) = batch("tr");
        assert_eq!(held_positions(false, &envelopes, &outcomes, &alone, false), vec![1], "throttled is held");
    }

    #[test]
    fn after_a_write_what_stays_held() {
        // (outcomes after the write, destination shown up?, stays, left alone)
        let rows: [(&str, bool, &[usize], &[usize]); 6] = [
            ("tttt", false, &[0, 1, 2, 3], &[]),
            ("tttt", true, &[], &[0, 1, 2, 3]),
            ("ctct", true, &[], &[1, 3]),
            // A throttled message keeps what is held back behind it (s.k0: 0 and 2).
            ("rchc", true, &[0, 2], &[]),
            // s.k0 (0, 2) still failing keeps its held-back message; s.k1's blocker is stored.
            ("tchh", false, &[0, 2], &[]),
            ("pcwh", false, &[], &[]),
        ];
        for (outcomes, up, stay, alone) in rows {
            let (envelopes, outcomes) = batch(outcomes);
            let held: Vec<usize> = (0..outcomes.len()).collect();
            let (s, a) = still_held(&held, &envelopes, &outcomes, up);
            assert_eq!((s.as_slice(), a.as_slice()), (stay, alone), "{outcomes:?} up={up}");
        }
    }

    #[test]
    fn a_probe_writes_only_the_first_message_of_a_key() {
        let (envelopes, _) = batch("tttt");
        assert_eq!(probe_heads(&[0, 1, 2, 3], &envelopes), vec![0, 1]);
        assert_eq!(probe_heads(&[2, 3], &envelopes), vec![2, 3]);
        let unkeyed: Vec<Envelope> = envelopes.iter().cloned().map(|e| e.with_order_key(None)).collect();
        assert_eq!(probe_heads(&[0, 1, 2, 3], &unkeyed), vec![0, 1, 2, 3]);
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
