//! What the destination has shown of itself, for the outage hold's judgement (`hold`): when it
//! last made something durable, which messages failed on their own (temporarily, in a write
//! that stored others), when a canary (a fresh message fetched while a hold pauses fetching)
//! last failed as the held ones do, and the canaries in flight. A leaf of the runner: every
//! write reports here (`forward::write`, the hold's probes), the hold and the fetch loop read
//! it.
//!
//! Why: a batch whose every message failed temporarily looks like an outage, but so does a
//! message the destination refuses for ever (a poison message answered 503) redelivered alone.
//! Only writes tell the two apart: a destination that stores other messages meanwhile is up,
//! and what still fails there fails on its own. Health checks only hint (some endpoints
//! answer `OPTIONS` with 501, some health URLs lie either way).

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sinks_contract::envelope::Envelope;
use sinks_contract::sink::MessageOutcome;

/// How many messages that failed alone are remembered (the oldest are forgotten first).
const ALONE_REMEMBERED: usize = 4096;
/// Canaries unsettled at once: one may wait behind a held batch of its ordering key, the next
/// may have another key.
const CANARIES: usize = 5;

/// The evidence of one run.
#[derive(Debug, Default)]
pub(super) struct Evidence {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// When a write last made something durable.
    last_commit: Option<Instant>,
    /// Stream sequences of messages that failed temporarily in a write that stored others,
    /// oldest first, and the same as a set.
    alone: VecDeque<u64>,
    alone_set: HashSet<u64>,
    /// When the last canary whose write failed entirely (temporarily) was written.
    canary_down: Option<Instant>,
    /// Canaries fetched and not settled yet (writing, held, or waiting for their key).
    canaries: usize,
    /// When the last canary was fetched.
    canary_at: Option<Instant>,
}

impl Evidence {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes in one write's outcomes at `now`: a durable outcome dates the last commit and
    /// clears its message; when the write stored anything, its temporary failures (throttled
    /// ones aside) failed alone and are remembered.
    pub(super) fn observe(&self, envelopes: &[Envelope], outcomes: &[MessageOutcome], now: Instant) {
        if !outcomes.iter().any(MessageOutcome::is_durable) {
            return;
        }
        let mut s = self.lock();
        s.last_commit = Some(now);
        for (envelope, outcome) in envelopes.iter().zip(outcomes) {
            let seq = envelope.jetstream().stream_sequence;
            if outcome.is_durable() {
                if s.alone_set.remove(&seq) {
                    s.alone.retain(|x| *x != seq);
                }
            } else if outcome.failed_temporarily() && !outcome.throttled() {
                s.remember(seq);
            }
        }
    }

    /// Remembers the messages `seqs` as failing on their own (a hold ended on that verdict).
    pub(super) fn remember_alone(&self, seqs: impl IntoIterator<Item = u64>) {
        let mut s = self.lock();
        for seq in seqs {
            s.remember(seq);
        }
    }

    /// True when message `seq` failed on its own before.
    pub(super) fn failed_alone(&self, seq: u64) -> bool {
        self.lock().alone_set.contains(&seq)
    }

    /// True when a write made something durable after `t`.
    pub(super) fn committed_since(&self, t: Instant) -> bool {
        self.lock().last_commit.is_some_and(|at| at > t)
    }

    /// Takes in a canary's write, begun at `began`: when nothing of it was stored and it
    /// failed temporarily, the destination fails fresh messages too (an outage).
    pub(super) fn canary_written(&self, outcomes: &[MessageOutcome], began: Instant) {
        if outcomes.iter().any(MessageOutcome::failed_temporarily) && !outcomes.iter().any(MessageOutcome::is_durable) {
            self.lock().canary_down = Some(began);
        }
    }

    /// True when a canary written after `t` failed as the held messages do.
    pub(super) fn canary_down_since(&self, t: Instant) -> bool {
        self.lock().canary_down.is_some_and(|at| at > t)
    }

    /// True (and a canary taken) when a canary may be fetched at `now`: fewer than five are
    /// unsettled and none was fetched in the last `every`.
    pub(super) fn take_canary(&self, now: Instant, every: Duration) -> bool {
        let mut s = self.lock();
        if s.canaries >= CANARIES || s.canary_at.is_some_and(|at| now.duration_since(at) < every) {
            return false;
        }
        s.canaries += 1;
        s.canary_at = Some(now);
        true
    }

    /// A canary has settled (or none came).
    pub(super) fn canary_done(&self) {
        let mut s = self.lock();
        s.canaries = s.canaries.saturating_sub(1);
    }
}

impl State {
    fn remember(&mut self, seq: u64) {
        if !self.alone_set.insert(seq) {
            return;
        }
        self.alone.push_back(seq);
        if self.alone.len() > ALONE_REMEMBERED
            && let Some(oldest) = self.alone.pop_front()
        {
            self.alone_set.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::error::SinkError;
    use sinks_contract::testing::envelope;

    fn write(first: u64, outcomes: &str) -> (Vec<Envelope>, Vec<MessageOutcome>) {
        outcomes
            .chars()
            .zip(first..)
            .map(|(c, seq)| {
                let o = match c {
                    'c' => MessageOutcome::Committed,
                    'd' => MessageOutcome::Duplicate,
                    't' => MessageOutcome::temporary("503"),
                    'r' => MessageOutcome::Failed(SinkError::throttled("429")),
                    'p' => MessageOutcome::permanent("400"),
                    other => panic!("{other}"),
                };
                (envelope("S", seq, "s.a", "{}"), o)
            })
            .unzip()
    }

    #[test]
    fn a_write_that_stored_others_marks_its_temporary_failures_as_failing_alone() {
        let e = Evidence::default();
        let t0 = Instant::now();
        let (envelopes, outcomes) = write(1, "tttt");
        e.observe(&envelopes, &outcomes, t0);
        assert!(!e.committed_since(t0 - Duration::from_secs(1)), "nothing stored: no evidence");
        assert!(!e.failed_alone(1), "everything failed: that may be an outage");
        let (envelopes, outcomes) = write(10, "ctrpd");
        let t1 = t0 + Duration::from_secs(2);
        e.observe(&envelopes, &outcomes, t1);
        assert!(e.committed_since(t0) && !e.committed_since(t1));
        assert!(e.failed_alone(11), "failed while the destination stored 10 and 14");
        assert!(!e.failed_alone(12), "throttled is the destination's limit, not the message's");
        assert!(!e.failed_alone(13), "permanent failures are settled anyway");
        let (envelopes, outcomes) = write(11, "c");
        e.observe(&envelopes, &outcomes, t1);
        assert!(!e.failed_alone(11), "stored later: forgotten");
    }

    #[test]
    fn a_canary_that_fails_entirely_is_evidence_of_an_outage() {
        let e = Evidence::default();
        let t0 = Instant::now();
        let (_, stored) = write(1, "c");
        e.canary_written(&stored, t0 + Duration::from_secs(1));
        assert!(!e.canary_down_since(t0), "stored: no outage");
        let (_, failed) = write(2, "t");
        e.canary_written(&failed, t0 + Duration::from_secs(2));
        assert!(e.canary_down_since(t0) && !e.canary_down_since(t0 + Duration::from_secs(2)));
    }

    #[test]
    fn the_memory_is_bounded_and_forgets_the_oldest() {
        let e = Evidence::default();
        e.remember_alone(0..(ALONE_REMEMBERED as u64 + 10));
        assert!(!e.failed_alone(0) && !e.failed_alone(9));
        assert!(e.failed_alone(10) && e.failed_alone(ALONE_REMEMBERED as u64 + 9));
    }

    #[test]
    fn five_canaries_at_most_and_not_more_often_than_asked() {
        let e = Evidence::default();
        let t0 = Instant::now();
        let every = Duration::from_secs(2);
        assert!(e.take_canary(t0, every));
        assert!(!e.take_canary(t0 + Duration::from_secs(1), every), "too soon");
        assert!(e.take_canary(t0 + Duration::from_secs(2), every));
        assert!(e.take_canary(t0 + Duration::from_secs(4), every));
        assert!(e.take_canary(t0 + Duration::from_secs(6), every));
        assert!(e.take_canary(t0 + Duration::from_secs(8), every));
        assert!(!e.take_canary(t0 + Duration::from_secs(10), every), "five unsettled");
        e.canary_done();
        assert!(e.take_canary(t0 + Duration::from_secs(10), every));
    }
}
