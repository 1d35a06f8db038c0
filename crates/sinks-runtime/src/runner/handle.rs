//! What a message is settled through ([`Handle`]): the ack handle of a fetched message,
//! for a message the rescue read back from its stream the `MAX_DELIVERIES` advisory that
//! named it, or, for a message `nats-sink redrive` brings back from its dead letter, the
//! [`RedriveTicket`] that marks that dead-letter record done. Either way the message takes the one forward path (policy steps, write, planner
//! and ACK gate, settlement); only the last step differs, and it differs here:
//!
//! - a rescued message's write counts as its last chance ([`last_chance`]): anything but a
//!   durable outcome becomes the exhaustion (`max_deliver_exhausted`, its delivery count and
//!   this attempt's error), which the gate dead-letters when a DLQ is configured;
//! - its settlement goes to the advisory ([`Handle::send`]): an ack or a term (the message
//!   is durable, or its dead letter is stored) acks the advisory, a NAK (no DLQ, or the
//!   dead-letter publish failed) brings the advisory back after [`RETRY_AFTER`], and a
//!   heartbeat keeps the advisory from being redelivered meanwhile. The message itself is
//!   never settled: the server is done with it.
//!
//! - a redriven message's settlement goes to its ticket: the [`RedriveMarker`] is told how
//!   the redrive ended ([`RedriveEnd`]) only once that end is durable (the write committed,
//!   the object flushed, or the new dead letter stored, and the receipt published); a
//!   heartbeat does nothing (no server holds the message for an AckWait).
//!
//! A leaf of the runner: it knows the ack handle and the dead-letter errors, nothing else.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::AckKind;
use sinks_contract::sink::MessageOutcome;

use crate::metrics::{CounterId, Metrics, RunStats};
use crate::source::AckHandle;

/// How long a NAKed advisory waits before the rescue tries again.
pub(super) const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The right to settle one message the runner holds.
#[derive(Debug, Clone)]
pub(super) enum Handle {
    /// A fetched message: its own ack handle.
    Delivery(AckHandle),
    /// A message the server stopped redelivering, read back by the rescue: the ack handle of
    /// the advisory that named it.
    Rescue(AckHandle),
    /// A dead-lettered message brought back by `nats-sink redrive`: the ticket of its record.
    Redrive(Arc<RedriveTicket>),
}

/// How the redrive of one dead-lettered message ended, as its [`RedriveMarker`] is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedriveEnd {
    /// Written and committed.
    Redriven,
    /// Found already stored under its idempotency key (or a conflict resolved by keeping or
    /// replacing a version).
    Duplicate,
    /// Failed again and dead-lettered again: the new record (with the redrive count) is
    /// stored, and it replaces this one.
    DeadLetteredAgain,
    /// Neither durable nor dead-lettered again (a temporary failure, a dead-letter publish
    /// that failed, an object not committed): the record stays as it is, for another run.
    NotDone(String),
}

impl RedriveEnd {
    /// True when the record is done with (the marker records it durably).
    pub fn is_done(&self) -> bool {
        !matches!(self, Self::NotDone(_))
    }
}

/// Marks dead-letter records done once their redrive ended durably (`nats-sink redrive`
/// implements it: a marker in a key-value bucket).
#[async_trait::async_trait]
pub trait RedriveMarker: Send + Sync + std::fmt::Debug {
    /// The redrive of the record named by `ticket` ended as `end`. Called once per message,
    /// after the write committed (and the receipt was published) or the new dead letter was
    /// stored. An error means the mark is not durable: the record comes back next run, and
    /// its write is then a duplicate.
    async fn end(&self, ticket: u64, end: RedriveEnd) -> Result<(), String>;
}

/// What settles a redriven message: its record's ticket, how often the message was redriven
/// before, the fan-out target its record names, and the marker.
#[derive(Debug)]
pub(super) struct RedriveTicket {
    /// The caller's number for the record (its DLQ stream sequence).
    pub(super) ticket: u64,
    /// Redrives before this one (the record's redrive count).
    pub(super) redrives: u32,
    /// The fan-out target the record names, kept on a new dead letter.
    pub(super) target: Option<String>,
    /// Told how the redrive ended.
    pub(super) marker: Arc<dyn RedriveMarker>,
}

impl RedriveTicket {
    /// A ticket.
    pub(super) fn new(ticket: u64, redrives: u32, target: Option<String>, marker: Arc<dyn RedriveMarker>) -> Self {
        Self { ticket, redrives, target, marker }
    }

    /// The redrive count a new dead letter of this message carries.
    pub(super) fn next_count(&self) -> u32 {
        self.redrives.saturating_add(1)
    }

    /// The fan-out target of the record.
    pub(super) fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// Tells the marker how the redrive ended.
    pub(super) async fn end(&self, end: RedriveEnd) -> Result<(), async_nats::Error> {
        self.marker.end(self.ticket, end).await.map_err(Into::into)
    }
}

/// How a redrive ended, from what settlement sent (`kind`, `None`: left unacknowledged) for
/// a message planned as `settlement` with `outcome`. Pure.
pub(super) fn redrive_end(
    kind: Option<&AckKind>,
    settlement: crate::ack::Settlement,
    outcome: &MessageOutcome,
) -> RedriveEnd {
    use crate::ack::Settlement;
    let why = || match outcome {
        MessageOutcome::Failed(e) => e.display_chain(),
        other => format!("{:?}", other.class()),
    };
    match (kind, settlement) {
        (None | Some(AckKind::Nak(_)), Settlement::DeadLetter(_)) => {
            RedriveEnd::NotDone(format!("failed again and its dead letter could not be stored: {}", why()))
        }
        (None | Some(AckKind::Nak(_)), _) => RedriveEnd::NotDone(why()),
        (Some(_), Settlement::DeadLetter(_)) => RedriveEnd::DeadLetteredAgain,
        (Some(_), _) if matches!(outcome, MessageOutcome::Committed) => RedriveEnd::Redriven,
        (Some(_), _) => RedriveEnd::Duplicate,
    }
}

impl Handle {
    /// True for a rescued message (settled through its advisory).
    pub(super) fn rescued(&self) -> bool {
        matches!(self, Self::Rescue(_))
    }

    /// The ticket of a redriven message.
    pub(super) fn redrive(&self) -> Option<&RedriveTicket> {
        match self {
            Self::Redrive(ticket) => Some(ticket),
            _ => None,
        }
    }

    /// True when the message is not one the source delivered (rescued or redriven): it keeps
    /// its payload while pending and its settlement is counted apart.
    pub(super) fn out_of_band(&self) -> bool {
        !matches!(self, Self::Delivery(_))
    }

    /// What is sent through the handle for `kind`: itself for a fetched message; for a
    /// rescued message's advisory an ack for an ack or a term (the message is done), a NAK
    /// after [`RETRY_AFTER`] for any NAK (the rescue tries again), a heartbeat as it is.
    fn kind_for(&self, kind: AckKind) -> AckKind {
        match (self, kind) {
            (Self::Delivery(_), kind) => kind,
            (Self::Rescue(_), AckKind::Ack | AckKind::Term) => AckKind::Ack,
            (Self::Rescue(_), AckKind::Nak(_)) => AckKind::Nak(Some(RETRY_AFTER)),
            (Self::Rescue(_), kind) => kind,
            (Self::Redrive(_), kind) => kind,
        }
    }

    fn ack_handle(&self) -> Option<&AckHandle> {
        match self {
            Self::Delivery(handle) | Self::Rescue(handle) => Some(handle),
            Self::Redrive(_) => None,
        }
    }

    /// Sends `kind` (see [`Handle::kind_for`]) without waiting for the server. A redriven
    /// message has nothing to send to (its end goes to its ticket, see `settle`).
    pub(super) async fn send(&self, kind: AckKind) -> Result<(), async_nats::Error> {
        match self.ack_handle() {
            Some(handle) => handle.send(self.kind_for(kind)).await,
            None => Ok(()),
        }
    }

    /// Sends `kind` and waits for the server's confirmation (at most `timeout`).
    pub(super) async fn send_confirmed(&self, kind: AckKind, timeout: Duration) -> Result<(), async_nats::Error> {
        match self.ack_handle() {
            Some(handle) => handle.send_confirmed(self.kind_for(kind), timeout).await,
            None => Ok(()),
        }
    }
}

/// The outcome of a rescued message's write as settlement reads it: durable (or pending, or
/// not known) as it is; anything else is the exhaustion of a message whose deliveries ran
/// out after `delivered` deliveries, with this attempt's error (a permanent failure with
/// reason `max_deliver_exhausted`, dead-lettered when a DLQ is configured). A policy's
/// refusal is not a write and keeps its own reason (it never comes here). Pure.
pub(super) fn last_chance(outcome: MessageOutcome, delivered: u64) -> MessageOutcome {
    match crate::reasons::record_error(&outcome) {
        Some(error) => MessageOutcome::Failed(crate::reasons::exhausted_error(delivered, &error)),
        None => outcome,
    }
}

/// Counts a rescue that could neither make its message durable nor dead-letter it: its
/// advisory is NAKed and the rescue tries again after [`RETRY_AFTER`].
pub(super) fn count_rescue_failure(stats: &RunStats, metrics: &Metrics) {
    RunStats::add(&stats.rescue_failures, 1);
    metrics.inc(CounterId::RescueFailures, 1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ack::{AfterDeadLetter, Settlement};
    use sinks_contract::sink::ConflictResolution;

    #[test]
    fn how_a_redrive_ends() {
        let dead = Settlement::DeadLetter(AfterDeadLetter::Ack);
        let nak = AckKind::Nak(None);
        let table = [
            (Some(AckKind::Ack), Settlement::Ack, MessageOutcome::Committed, RedriveEnd::Redriven),
            (Some(AckKind::Ack), Settlement::Ack, MessageOutcome::Duplicate, RedriveEnd::Duplicate),
            (
                Some(AckKind::Ack),
                Settlement::Ack,
                MessageOutcome::Conflict(ConflictResolution::KeptExisting),
                RedriveEnd::Duplicate,
            ),
            (Some(AckKind::Ack), dead, MessageOutcome::permanent("p"), RedriveEnd::DeadLetteredAgain),
            (Some(AckKind::Term), dead, MessageOutcome::permanent("p"), RedriveEnd::DeadLetteredAgain),
        ];
        for (kind, settlement, outcome, want) in table {
            assert_eq!(redrive_end(kind.as_ref(), settlement, &outcome), want, "{outcome:?}");
            assert!(want.is_done());
        }
        let not_done = [
            (Some(nak), dead, MessageOutcome::permanent("refused")),
            (Some(nak), Settlement::Nak(Duration::ZERO), MessageOutcome::temporary("down")),
            (None, Settlement::LeaveUnacked, MessageOutcome::temporary("down")),
        ];
        for (kind, settlement, outcome) in not_done {
            let end = redrive_end(kind.as_ref(), settlement, &outcome);
            assert!(!end.is_done(), "{end:?}");
        }
        assert_eq!(
            redrive_end(Some(&nak), dead, &MessageOutcome::permanent("refused")),
            RedriveEnd::NotDone("failed again and its dead letter could not be stored: refused".into())
        );
    }

    #[test]
    fn a_rescued_write_that_is_not_durable_is_the_exhaustion() {
        for durable in [MessageOutcome::Committed, MessageOutcome::Duplicate, MessageOutcome::Pending] {
            let want = format!("{durable:?}");
            assert_eq!(format!("{:?}", last_chance(durable, 3)), want, "kept as it is");
        }
        for failed in [
            MessageOutcome::temporary("destination down"),
            MessageOutcome::permanent("destination down"),
            MessageOutcome::Conflict(ConflictResolution::Rejected),
            MessageOutcome::HeldBack,
        ] {
            let MessageOutcome::Failed(e) = last_chance(failed, 3) else { panic!("a failure") };
            assert!(e.is_permanent(), "dead-lettered, not retried: {e:?}");
            assert_eq!(e.reason(), Some(crate::reasons::EXHAUSTED_REASON));
            assert!(e.display_chain().contains("after 3 deliveries"), "{}", e.display_chain());
        }
        let MessageOutcome::Failed(e) = last_chance(MessageOutcome::temporary("the destination refuses this"), 5)
        else {
            panic!("a failure")
        };
        assert!(e.display_chain().contains("the destination refuses this"), "this attempt's error is kept");
    }
}
