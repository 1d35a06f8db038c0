//! What a message is settled through ([`Handle`]): the ack handle of a fetched message, or,
//! for a message the rescue read back from its stream, the `MAX_DELIVERIES` advisory that
//! named it. Either way the message takes the one forward path (policy steps, write, planner
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
//! A leaf of the runner: it knows the ack handle and the dead-letter errors, nothing else.

use std::time::Duration;

use async_nats::jetstream::AckKind;
use sinks_contract::sink::MessageOutcome;

use super::stats::RunStats;
use crate::metrics::{CounterId, Metrics};
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
}

impl Handle {
    /// True for a rescued message (settled through its advisory).
    pub(super) fn rescued(&self) -> bool {
        matches!(self, Self::Rescue(_))
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
        }
    }

    fn ack_handle(&self) -> &AckHandle {
        match self {
            Self::Delivery(handle) | Self::Rescue(handle) => handle,
        }
    }

    /// Sends `kind` (see [`Handle::kind_for`]) without waiting for the server.
    pub(super) async fn send(&self, kind: AckKind) -> Result<(), async_nats::Error> {
        self.ack_handle().send(self.kind_for(kind)).await
    }

    /// Sends `kind` and waits for the server's confirmation (at most `timeout`).
    pub(super) async fn send_confirmed(&self, kind: AckKind, timeout: Duration) -> Result<(), async_nats::Error> {
        self.ack_handle().send_confirmed(self.kind_for(kind), timeout).await
    }
}

/// The outcome of a rescued message's write as settlement reads it: durable (or pending, or
/// not known) as it is; anything else is the exhaustion of a message whose deliveries ran
/// out after `delivered` deliveries, with this attempt's error (a permanent failure with
/// reason `max_deliver_exhausted`, dead-lettered when a DLQ is configured). A policy's
/// refusal is not a write and keeps its own reason (it never comes here). Pure.
pub(super) fn last_chance(outcome: MessageOutcome, delivered: u64) -> MessageOutcome {
    match crate::dlq::record_error(&outcome) {
        Some(error) => MessageOutcome::Failed(crate::dlq::exhausted_error(delivered, &error)),
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
    use sinks_contract::sink::ConflictResolution;

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
            assert_eq!(e.reason(), Some(crate::dlq::EXHAUSTED_REASON));
            assert!(e.display_chain().contains("after 3 deliveries"), "{}", e.display_chain());
        }
        let MessageOutcome::Failed(e) = last_chance(MessageOutcome::temporary("the destination refuses this"), 5)
        else {
            panic!("a failure")
        };
        assert!(e.display_chain().contains("the destination refuses this"), "this attempt's error is kept");
    }
}
