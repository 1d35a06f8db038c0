//! Why a message is dead-lettered, in one place: the error a DLQ record carries
//! ([`record_error`]: the sink's own failure, or the error made for a rejected conflict or a
//! message held back on its last delivery), its reason label ([`reason`]) and the error of a
//! rescued message whose last chance failed ([`exhausted_error`]). Pure texts and errors,
//! below everything that reports them: the gate (`ack.rs`), the DLQ publisher (`dlq.rs`),
//! the ledger's receipts and the runner.

use sinks_contract::error::SinkError;
use sinks_contract::sink::{ConflictResolution, MessageOutcome};

/// What a conflicting redelivery the sink rejected is: the error of its DLQ record, and of a
/// fan-out target's rejected conflict.
const CONFLICT: &str = "conflicting redelivery: same key, different content";

/// Why a held-back message is dead-lettered on its last allowed delivery.
const HELD_BACK: &str = "held back on its last allowed delivery: an earlier message with the same ordering key \
                         failed temporarily, and a redelivery would exceed the consumer's max_deliver";

/// The permanent error of a conflicting redelivery (same key, different content).
pub(crate) fn conflict_error() -> SinkError {
    SinkError::permanent(CONFLICT).with_error_type("ConflictError")
}

/// The error of a message held back on its last allowed delivery.
fn held_back_error() -> SinkError {
    SinkError::temporary(HELD_BACK).with_error_type("HeldBackError")
}

/// The reason label and record reason of a message rescued after the server stopped
/// redelivering it, whose last chance did not make it durable.
pub const EXHAUSTED_REASON: &str = "max_deliver_exhausted";

/// The permanent error of a rescued message whose last chance failed: how many deliveries
/// the server made, and the error of the rescue's own attempt (`last`, which names its target
/// when a fan-out target failed). `last` is `None` when the write made it durable but
/// something else kept it from being settled.
pub(crate) fn exhausted_error(deliveries: u64, last: &SinkError) -> SinkError {
    let error = SinkError::permanent(format!(
        "max_deliver exhausted: the server stopped redelivering after {deliveries} deliveries; last error: {}",
        last.display_chain()
    ))
    .with_error_type("MaxDeliverExhaustedError")
    .with_reason(EXHAUSTED_REASON);
    match last.target() {
        Some(target) => error.with_target(target),
        None => error,
    }
}

/// The error a DLQ record carries: the one the sink (or a policy) reported, or one made for
/// an outcome that has none.
#[derive(Debug)]
pub(crate) enum RecordError<'a> {
    /// The outcome's own failure.
    Reported(&'a SinkError),
    /// Made for a rejected conflict or a held-back message.
    Made(SinkError),
}

impl std::ops::Deref for RecordError<'_> {
    type Target = SinkError;

    fn deref(&self) -> &SinkError {
        match self {
            Self::Reported(e) => e,
            Self::Made(e) => e,
        }
    }
}

/// The error the DLQ record of a dead-lettered `outcome` carries; `None` for an outcome that
/// is never dead-lettered (committed, duplicate, a kept or overwritten conflict).
pub(crate) fn record_error(outcome: &MessageOutcome) -> Option<RecordError<'_>> {
    match outcome {
        MessageOutcome::Failed(e) => Some(RecordError::Reported(e)),
        MessageOutcome::Conflict(ConflictResolution::Rejected) => Some(RecordError::Made(conflict_error())),
        MessageOutcome::HeldBack => Some(RecordError::Made(held_back_error())),
        // Committed, duplicate, a kept or overwritten conflict, pending, and any outcome
        // this runtime does not know: none of them is dead-lettered.
        _ => None,
    }
}

/// The reason label (metrics `reason`) of a dead-lettered `outcome`: the policy reason code
/// when there is one, else what kind of failure it was.
pub(crate) fn reason(outcome: &MessageOutcome) -> &str {
    match outcome {
        MessageOutcome::Failed(e) => {
            e.reason().unwrap_or(if e.is_permanent() { "sink_permanent" } else { "retries_exhausted" })
        }
        MessageOutcome::Conflict(_) => "conflict_rejected",
        MessageOutcome::HeldBack => "held_back_last_delivery",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_dead_letter_says_about_its_outcome() {
        use sinks_contract::error::ErrorClass;
        let policy = MessageOutcome::Failed(SinkError::permanent("too big").with_reason("size_exceeded"));
        // (outcome, error type, class, error, reason label)
        let table = [
            (
                MessageOutcome::permanent("p"),
                Some(("PermanentSinkError", ErrorClass::Permanent, "p")),
                "sink_permanent",
            ),
            (
                MessageOutcome::temporary("t"),
                Some(("TemporarySinkError", ErrorClass::Temporary, "t")),
                "retries_exhausted",
            ),
            (policy, Some(("PermanentSinkError", ErrorClass::Permanent, "too big")), "size_exceeded"),
            (
                MessageOutcome::Conflict(ConflictResolution::Rejected),
                Some(("ConflictError", ErrorClass::Permanent, "conflicting redelivery: same key, different content")),
                "conflict_rejected",
            ),
            (
                MessageOutcome::HeldBack,
                Some((
                    "HeldBackError",
                    ErrorClass::Temporary,
                    "held back on its last allowed delivery: an earlier message with the same ordering key failed \
                     temporarily, and a redelivery would exceed the consumer's max_deliver",
                )),
                "held_back_last_delivery",
            ),
            (
                sinks_contract::existing::sequence_reused("file"),
                Some((
                    "SequenceReusedError",
                    ErrorClass::Permanent,
                    "file already holds a different payload under this stream sequence: the sequence was used again \
                     (the stream was deleted and re-created, restored or rewound); the stored record is kept",
                )),
                "sequence_reused",
            ),
            (MessageOutcome::Committed, None, "other"),
            (MessageOutcome::Duplicate, None, "other"),
            (MessageOutcome::Conflict(ConflictResolution::KeptExisting), None, "conflict_rejected"),
        ];
        for (outcome, error, label) in table {
            let got = record_error(&outcome).map(|e| (e.error_type(), e.class(), e.message().to_owned()));
            assert_eq!(got, error.map(|(t, c, m)| (t, c, m.to_owned())), "{outcome:?}");
            assert_eq!(reason(&outcome), label, "{outcome:?}");
        }
    }
}
