//! The ACK gate: the one place that decides how a message is settled.
//!
//! [`settle`] is a pure function from a message's outcome, its JetStream delivery count and
//! the policy to a [`Settlement`]. The runner applies the settlement; nothing else acks,
//! naks or terminates a message.
//!
//! | outcome | settlement |
//! |---|---|
//! | committed, duplicate, conflict kept/overwritten | `Ack` |
//! | permanent failure, conflict rejected | `DeadLetter` (then ack or term) when a DLQ is configured, else `Nak(max backoff)` (never dropped) |
//! | temporary failure on the consumer's last allowed delivery (`max_deliver`) | `DeadLetter` when a DLQ is configured (the server would drop it), else `Nak` |
//! | temporary failure, `delivered > max_retries` | `LeaveUnacked` (AckWait redelivers) |
//! | temporary failure otherwise | `Nak(backoff(delivered))`, at least the sink's `retry_after`; or `LeaveUnacked` when so configured |
//! | held back (not attempted, behind a temporary failure of its ordering key) | kept by the runner until the failed message comes back; when released instead (nothing to wait for, shutdown), `Nak(after)` whatever `max_retries` and `temporary_failure_action` say ([`settle_held_back`]) |
//! | held back on the consumer's last allowed delivery | `DeadLetter` when a DLQ is configured (the reason says it was held back), else `Nak` |
//!
//! With fan-out, [`fanout_outcome`] first turns the outcomes of a message's targets into the
//! one outcome [`settle`] reads (the per-target rule):
//!
//! | targets (in order) | message outcome |
//! |---|---|
//! | a required target failed permanently (or rejected a conflict) | that permanent failure, naming the target: dead-lettered |
//! | otherwise a required target failed temporarily (or with a config error) | that temporary failure, naming the target: redelivered; targets that hold it see a duplicate |
//! | otherwise a required target held it back | held back |
//! | otherwise (every required target holds it, or there is none) | committed (duplicate when every required target said duplicate; a kept or overwritten conflict is reported as such) |
//! | optional targets: any result, a timeout or a dropped copy | never change the outcome (counted) |
//!
//! A dead-letter settlement acks (or terms) the original only after the DLQ stream has
//! acknowledged the record: `after_dead_letter` turns the publish's result into the ack
//! kind that settles the original, which is a `Nak` whenever the record was not stored.
#![deny(missing_docs)]

use std::time::Duration;

use async_nats::jetstream::AckKind;
use sinks_contract::error::SinkError;
use sinks_contract::sink::{ConflictResolution, MessageOutcome};
use sinks_toolkit::retry::Backoff;

pub use crate::config::TemporaryAction;

/// What one fan-out target did with a message.
#[derive(Debug)]
pub enum TargetResult {
    /// The target's own outcome.
    Outcome(MessageOutcome),
    /// An optional target was still writing when its wait ended (the write goes on).
    TimedOut,
    /// An optional target's queue was full: this copy was not written.
    Dropped,
}

/// One target's part in a message's fan-out.
#[derive(Debug)]
pub struct TargetOutcome {
    /// Named sink.
    pub target: String,
    /// The acknowledgement waits for this target.
    pub required: bool,
    /// What it did.
    pub result: TargetResult,
}

/// The per-target ACK rule: one message outcome from the outcomes of its targets (see the
/// table above). Pure; the target order decides which failure is reported first.
pub fn fanout_outcome(targets: Vec<TargetOutcome>) -> MessageOutcome {
    let named = |target: &str, e: &SinkError| {
        e.rephrased(format!("target `{target}`: {}", e.display_chain())).with_target(target)
    };
    let required: Vec<&TargetOutcome> = targets.iter().filter(|t| t.required).collect();
    for t in &required {
        match &t.result {
            TargetResult::Outcome(MessageOutcome::Failed(e)) if e.is_permanent() => {
                return MessageOutcome::Failed(named(&t.target, e));
            }
            TargetResult::Outcome(MessageOutcome::Conflict(ConflictResolution::Rejected)) => {
                return MessageOutcome::Failed(named(&t.target, &crate::reasons::conflict_error()));
            }
            _ => {}
        }
    }
    for t in &required {
        let temporary = match &t.result {
            TargetResult::Outcome(MessageOutcome::Failed(e)) => Some(named(&t.target, e)),
            TargetResult::TimedOut | TargetResult::Dropped => {
                Some(SinkError::temporary(format!("target `{}`: not written in time", t.target)).with_target(&t.target))
            }
            _ => None,
        };
        if let Some(e) = temporary {
            return MessageOutcome::Failed(e);
        }
    }
    if required.iter().any(|t| matches!(t.result, TargetResult::Outcome(MessageOutcome::HeldBack))) {
        return MessageOutcome::HeldBack;
    }
    let conflict = required.iter().find_map(|t| match t.result {
        TargetResult::Outcome(MessageOutcome::Conflict(r)) => Some(r),
        _ => None,
    });
    if let Some(resolution) = conflict {
        return MessageOutcome::Conflict(resolution);
    }
    if !required.is_empty()
        && required.iter().all(|t| matches!(t.result, TargetResult::Outcome(MessageOutcome::Duplicate)))
    {
        return MessageOutcome::Duplicate;
    }
    MessageOutcome::Committed
}

/// How the original is settled once its DLQ record is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterDeadLetter {
    /// Acknowledge (default).
    Ack,
    /// Terminate (`+TERM`): JetStream records the message as given up on.
    Term,
}

/// Everything the gate needs to know besides the outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct GatePolicy {
    /// Redelivery backoff.
    pub backoff: Backoff,
    /// Highest delivery count that is still NAKed for a temporary failure.
    pub max_retries: u64,
    /// What to do with a temporary failure within `max_retries`.
    pub temporary_action: TemporaryAction,
    /// `Some` when a DLQ is configured.
    pub dead_letter: Option<AfterDeadLetter>,
    /// The consumer's `max_deliver`, when it has one.
    pub max_deliver: Option<u64>,
}

/// How one message is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Acknowledge: the message is done.
    Ack,
    /// Negative-acknowledge: redeliver after the delay.
    Nak(Duration),
    /// Send nothing; AckWait will redeliver.
    LeaveUnacked,
    /// Publish a DLQ record, await its stream acknowledgement, then settle as given.
    DeadLetter(AfterDeadLetter),
}

/// Decides the settlement of one message. `sample` is a uniform random number in `[0, 1)`
/// used for jitter (pass a fixed value in tests).
pub fn settle(outcome: &MessageOutcome, delivered: u64, policy: &GatePolicy, sample: f64) -> Settlement {
    match outcome {
        MessageOutcome::Committed
        | MessageOutcome::Duplicate
        | MessageOutcome::Conflict(ConflictResolution::KeptExisting | ConflictResolution::Overwritten) => {
            Settlement::Ack
        }
        MessageOutcome::Conflict(ConflictResolution::Rejected) => permanent(policy),
        MessageOutcome::Failed(e) if e.is_permanent() => permanent(policy),
        MessageOutcome::HeldBack => settle_held_back(delivered, policy, policy.backoff.base),
        // A holding sink's message waiting for its object: the runner keeps it and settles it
        // from its final outcome, so it never comes here. Were it to, it is neither durable
        // nor failed: nothing is sent, and AckWait brings it back (never acked, never
        // dead-lettered while its object may still commit).
        MessageOutcome::Pending => Settlement::LeaveUnacked,
        MessageOutcome::Failed(e) => {
            let delay = policy.backoff.delay(delivered, sample).max(e.retry_after().unwrap_or_default());
            match (is_last(delivered, policy), policy.dead_letter) {
                (true, Some(then)) => Settlement::DeadLetter(then),
                (true, None) => Settlement::Nak(delay),
                (false, _) if delivered > policy.max_retries => Settlement::LeaveUnacked,
                (false, _) => match policy.temporary_action {
                    TemporaryAction::Nak => Settlement::Nak(delay),
                    TemporaryAction::LeaveUnacked => Settlement::LeaveUnacked,
                },
            }
        }
        // An outcome added to the contract after this runtime was written: neither known
        // durable nor known failed, so nothing is sent and AckWait brings it back.
        _ => Settlement::LeaveUnacked,
    }
}

/// Settles a held-back message: it was not attempted because an earlier message with its
/// ordering key failed temporarily, so it is released (NAKed) to come back `after` — when
/// the message it waits for comes back — and is never left for AckWait or dead-lettered for
/// its neighbour's failure. Only on the consumer's last allowed delivery, where a NAK would
/// let the server drop it, it is dead-lettered (with the reason) when a DLQ is configured.
pub fn settle_held_back(delivered: u64, policy: &GatePolicy, after: Duration) -> Settlement {
    match (is_last(delivered, policy), policy.dead_letter) {
        (true, Some(then)) => Settlement::DeadLetter(then),
        _ => Settlement::Nak(after),
    }
}

/// True on the consumer's last allowed delivery.
fn is_last(delivered: u64, policy: &GatePolicy) -> bool {
    policy.max_deliver.is_some_and(|max| delivered >= max)
}

fn permanent(policy: &GatePolicy) -> Settlement {
    match policy.dead_letter {
        Some(then) => Settlement::DeadLetter(then),
        None => Settlement::Nak(policy.backoff.max),
    }
}

/// How the original of a dead-lettered message is settled once its DLQ publish has answered:
/// as `then` says when the stream `stored` the record, else a NAK with backoff, never an ack.
/// `sample` is the jitter sample of that backoff.
pub(crate) fn after_dead_letter(
    stored: bool,
    then: AfterDeadLetter,
    delivered: u64,
    policy: &GatePolicy,
    sample: f64,
) -> AckKind {
    match (stored, then) {
        (true, AfterDeadLetter::Ack) => AckKind::Ack,
        (true, AfterDeadLetter::Term) => AckKind::Term,
        (false, _) => AckKind::Nak(Some(policy.backoff.delay(delivered, sample))),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sinks_contract::error::SinkError;
    use sinks_toolkit::retry::{BackoffMode, Jitter};

    /// A gate policy for tests: 1 s exponential backoff (×2, no jitter) capped at 60 s, and
    /// `max_retries` 5.
    pub(crate) fn policy(
        dead_letter: Option<AfterDeadLetter>,
        max_deliver: Option<u64>,
        action: TemporaryAction,
    ) -> GatePolicy {
        GatePolicy {
            backoff: Backoff {
                base: Duration::from_secs(1),
                max: Duration::from_secs(60),
                mode: BackoffMode::Exponential,
                multiplier: 2.0,
                jitter: Jitter::None,
            },
            max_retries: 5,
            temporary_action: action,
            dead_letter,
            max_deliver,
        }
    }

    fn outcome(name: &str) -> MessageOutcome {
        match name {
            "committed" => MessageOutcome::Committed,
            "duplicate" => MessageOutcome::Duplicate,
            "kept" => MessageOutcome::Conflict(ConflictResolution::KeptExisting),
            "overwritten" => MessageOutcome::Conflict(ConflictResolution::Overwritten),
            "rejected" => MessageOutcome::Conflict(ConflictResolution::Rejected),
            "temporary" => MessageOutcome::temporary("t"),
            "config" => MessageOutcome::Failed(SinkError::config("c")),
            "retry_after" => {
                MessageOutcome::Failed(SinkError::temporary("t").with_retry_after(Duration::from_secs(30)))
            }
            "permanent" => MessageOutcome::permanent("p"),
            "held_back" => MessageOutcome::HeldBack,
            "pending" => MessageOutcome::Pending,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn settlement_table() {
        use AfterDeadLetter::{Ack as ThenAck, Term as ThenTerm};
        use Settlement::*;
        use TemporaryAction::{LeaveUnacked as Leave, Nak as NakAction};
        let s = Duration::from_secs;
        let dlq = Some(ThenAck);
        let term = Some(ThenTerm);
        type Row = (&'static str, u64, Option<AfterDeadLetter>, Option<u64>, TemporaryAction, Settlement);
        #[rustfmt::skip]
        let table: &[Row] = &[
            // outcome     delivered dlq   max_deliver action    settlement
            ("committed",   1, None, None,     NakAction, Ack),
            ("duplicate",   9, None, None,     NakAction, Ack),
            ("kept",        2, dlq,  None,     NakAction, Ack),
            ("overwritten", 2, dlq,  None,     NakAction, Ack),
            ("rejected",    1, dlq,  None,     NakAction, DeadLetter(ThenAck)),
            ("rejected",    1, None, None,     NakAction, Nak(s(60))),
            ("permanent",   1, dlq,  None,     NakAction, DeadLetter(ThenAck)),
            ("permanent",   1, term, None,     NakAction, DeadLetter(ThenTerm)),
            ("permanent",   3, None, None,     NakAction, Nak(s(60))),
            ("temporary",   1, dlq,  None,     NakAction, Nak(s(1))),
            ("temporary",   3, dlq,  None,     NakAction, Nak(s(4))),
            ("temporary",   5, dlq,  None,     NakAction, Nak(s(16))),
            ("temporary",   6, dlq,  None,     NakAction, LeaveUnacked),
            ("temporary",   2, dlq,  None,     Leave,     LeaveUnacked),
            ("temporary",   3, dlq,  Some(3),  NakAction, DeadLetter(ThenAck)),
            ("temporary",   3, term, Some(3),  NakAction, DeadLetter(ThenTerm)),
            ("temporary",   3, None, Some(3),  NakAction, Nak(s(4))),
            ("temporary",   2, dlq,  Some(3),  NakAction, Nak(s(2))),
            ("config",      1, dlq,  None,     NakAction, Nak(s(1))),
            ("retry_after", 1, dlq,  None,     NakAction, Nak(s(30))),
            ("held_back",   1, dlq,  None,     NakAction, Nak(s(1))),
            ("held_back",   9, dlq,  None,     NakAction, Nak(s(1))),
            ("held_back",   9, None, None,     Leave,     Nak(s(1))),
            ("held_back",   2, dlq,  Some(3),  NakAction, Nak(s(1))),
            ("held_back",   3, dlq,  Some(3),  NakAction, DeadLetter(ThenAck)),
            ("held_back",   3, None, Some(3),  NakAction, Nak(s(1))),
            ("pending",     1, dlq,  None,     NakAction, LeaveUnacked),
            ("pending",     3, dlq,  Some(3),  NakAction, LeaveUnacked),
        ];
        for (name, delivered, dead_letter, max_deliver, action, expected) in table {
            let got = settle(&outcome(name), *delivered, &policy(*dead_letter, *max_deliver, *action), 0.5);
            assert_eq!(got, *expected, "{name} delivered={delivered} dlq={dead_letter:?} max_deliver={max_deliver:?}");
        }
    }

    #[test]
    fn held_back_comes_back_with_its_blocker() {
        let p = policy(Some(AfterDeadLetter::Ack), Some(10), TemporaryAction::LeaveUnacked);
        let after = Duration::from_millis(1500);
        for delivered in [1, 5, 9] {
            assert_eq!(settle_held_back(delivered, &p, after), Settlement::Nak(after));
        }
        assert_eq!(settle_held_back(10, &p, after), Settlement::DeadLetter(AfterDeadLetter::Ack));
    }

    #[test]
    fn a_dead_letter_is_settled_as_planned_only_once_its_record_is_stored() {
        let p = policy(Some(AfterDeadLetter::Ack), None, TemporaryAction::Nak);
        let nak = |s: u64| AckKind::Nak(Some(Duration::from_secs(s)));
        let table = [
            (true, AfterDeadLetter::Ack, 2, AckKind::Ack),
            (true, AfterDeadLetter::Term, 2, AckKind::Term),
            (false, AfterDeadLetter::Ack, 2, nak(2)),
            (false, AfterDeadLetter::Term, 2, nak(2)),
            (false, AfterDeadLetter::Ack, 9, nak(60)),
        ];
        for (stored, then, delivered, want) in table {
            let got = after_dead_letter(stored, then, delivered, &p, 0.0);
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "stored={stored} then={then:?} delivered={delivered}");
        }
    }

    fn target(name: &str, required: bool, result: &str) -> TargetOutcome {
        let result = match result {
            "timed_out" => TargetResult::TimedOut,
            "dropped" => TargetResult::Dropped,
            other => TargetResult::Outcome(outcome(other)),
        };
        TargetOutcome { target: name.to_owned(), required, result }
    }

    fn class_name(o: &MessageOutcome) -> String {
        match o {
            MessageOutcome::Conflict(r) => format!("conflict:{r:?}"),
            other => format!("{:?}", other.class()),
        }
    }

    #[test]
    fn fanout_single_target_table() {
        // Every outcome class, as the only target, required and optional.
        let table = [
            ("committed", "Committed", "Committed"),
            ("duplicate", "Duplicate", "Committed"),
            ("kept", "conflict:KeptExisting", "Committed"),
            ("overwritten", "conflict:Overwritten", "Committed"),
            ("rejected", "FailedPermanent", "Committed"),
            ("temporary", "FailedTemporary", "Committed"),
            ("config", "FailedTemporary", "Committed"),
            ("retry_after", "FailedTemporary", "Committed"),
            ("permanent", "FailedPermanent", "Committed"),
            ("held_back", "HeldBack", "Committed"),
            ("timed_out", "FailedTemporary", "Committed"),
            ("dropped", "FailedTemporary", "Committed"),
        ];
        for (result, as_required, as_optional) in table {
            let got = fanout_outcome(vec![target("t", true, result)]);
            assert_eq!(class_name(&got), as_required, "required {result}");
            if let MessageOutcome::Failed(e) = &got {
                assert_eq!(e.target(), Some("t"), "the failure names its target");
                assert!(e.message().starts_with("target `t`: "), "{}", e.message());
            }
            // Next to a committed required target, an optional target never changes anything.
            let got = fanout_outcome(vec![target("r", true, "committed"), target("o", false, result)]);
            assert_eq!(class_name(&got), as_optional, "optional {result}");
        }
        // Only optional targets: acknowledged whatever they did.
        assert_eq!(class_name(&fanout_outcome(vec![target("o", false, "permanent")])), "Committed");
        assert_eq!(class_name(&fanout_outcome(vec![])), "Committed");
    }

    #[test]
    fn fanout_precedence_between_required_targets() {
        // (a, b) -> outcome, and which target the failure names.
        let table = [
            ("committed", "permanent", "FailedPermanent", Some("b")),
            ("temporary", "permanent", "FailedPermanent", Some("b")),
            ("permanent", "rejected", "FailedPermanent", Some("a")),
            ("held_back", "temporary", "FailedTemporary", Some("b")),
            ("temporary", "config", "FailedTemporary", Some("a")),
            ("held_back", "committed", "HeldBack", None),
            ("duplicate", "committed", "Committed", None),
            ("duplicate", "duplicate", "Duplicate", None),
            ("duplicate", "kept", "conflict:KeptExisting", None),
            ("overwritten", "committed", "conflict:Overwritten", None),
        ];
        for (a, b, want, named) in table {
            let got = fanout_outcome(vec![target("a", true, a), target("b", true, b)]);
            assert_eq!(class_name(&got), want, "{a} + {b}");
            let target = match &got {
                MessageOutcome::Failed(e) => e.target().map(str::to_owned),
                _ => None,
            };
            assert_eq!(target.as_deref(), named, "{a} + {b}");
        }
        // The delay a temporary failure asks for survives the naming.
        let got = fanout_outcome(vec![target("a", true, "retry_after")]);
        let MessageOutcome::Failed(e) = got else { panic!("failed") };
        assert_eq!(e.retry_after(), Some(Duration::from_secs(30)));
    }
}
