//! Pure: what an endpoint's answer means for the messages of its request. The status class
//! (`request::classify_status`) becomes an outcome for one message (committed, duplicate,
//! conflict judged by the key's basis, or the failure `error.rs` names), one verdict for all
//! the envelopes of a batch request, or whether a health check passed.

use sinks_contract::existing::{self, KeyBasis, OnExisting, Stored};
use sinks_contract::{Envelope, IdempotencyKey, MessageOutcome, SinkError};

use crate::endpoint::Answer;
use crate::error::status_error;
use crate::request::{self, StatusClass, StatusSets};

/// What one request did to its messages.
#[derive(Debug)]
pub(crate) enum UnitResult {
    /// One outcome per message of the request: `(input index, outcome)`.
    PerItem(Vec<(usize, MessageOutcome)>),
    /// A batch request (several envelopes) refused permanently: nothing says which
    /// envelope was bad, so the whole write fails and the runner bisects.
    BatchRejected(SinkError),
}

impl UnitResult {
    /// True when a later request sharing an ordering key must not overtake this one.
    pub(crate) fn failed_temporarily(&self) -> bool {
        match self {
            Self::PerItem(items) => {
                items.iter().any(|(_, o)| matches!(o, MessageOutcome::Failed(e) if !e.is_permanent()))
            }
            Self::BatchRejected(_) => false,
        }
    }
}

/// What a message's idempotency key is made of (no key: the publisher's, as nothing is
/// compared without one).
pub(crate) fn basis_of(key: Option<&IdempotencyKey>) -> KeyBasis {
    key.map_or(KeyBasis::Publisher, KeyBasis::of_key)
}

/// The outcome of a conflict status (the endpoint holds other content under the message's
/// key) for `envelope`, whose key is made of `basis` (`sinks_contract::existing`, logged):
/// under stream-sequence keys the sequence was used again by another event, which is
/// refused (`sequence_reused`, never acknowledged); under message id or payload keys the
/// endpoint's record is kept and the message acknowledged as a conflict.
pub(crate) fn conflict(envelope: &Envelope, basis: KeyBasis, status: u16) -> MessageOutcome {
    tracing::debug!(subject = envelope.subject(), status, "the endpoint answered a conflict status");
    existing::decide(OnExisting::Keep, envelope, basis, Stored::Different, "http endpoint key")
}

/// What `answer` to the request of `envelope` alone means: its outcome, or the failure for
/// the retry loop to judge. `keyed`: the request carried a key, made of `basis`.
pub(crate) fn of_message(
    envelope: &Envelope,
    (keyed, basis): (bool, KeyBasis),
    answer: &Answer,
    statuses: &StatusSets,
) -> Result<MessageOutcome, SinkError> {
    Ok(match request::classify_status(answer.status, statuses, keyed) {
        StatusClass::Success => MessageOutcome::Committed,
        StatusClass::Duplicate => MessageOutcome::Duplicate,
        StatusClass::Conflict => conflict(envelope, basis, answer.status),
        class => match status_error(class, answer.status, answer.retry_after) {
            // A refusal is logged with the failure it becomes (`InPlace::write`).
            Some(e) => return Err(e),
            None => MessageOutcome::Committed,
        },
    })
}

/// What an answer to a batch request (several envelopes, or one in batch mode) decides.
#[derive(Debug)]
pub(crate) enum BatchVerdict {
    /// Every envelope committed.
    Committed,
    /// Every envelope committed earlier.
    Duplicate,
    /// The batch key holds other content: each envelope is judged by its own key (under
    /// stream-sequence keys, a reused sequence is never acknowledged).
    EachByKey,
    /// Refused permanently and nothing says which envelope was bad: the whole write fails and
    /// the runner bisects.
    Rejected(SinkError),
}

/// What `answer` to a batch request of `items` envelopes means, or the failure of all of
/// them for the retry loop to judge (one envelope alone is that envelope's failure).
pub(crate) fn of_batch(
    answer: &Answer,
    statuses: &StatusSets,
    keyed: bool,
    items: usize,
) -> Result<BatchVerdict, SinkError> {
    Ok(match request::classify_status(answer.status, statuses, keyed) {
        StatusClass::Success => BatchVerdict::Committed,
        StatusClass::Duplicate => BatchVerdict::Duplicate,
        StatusClass::Conflict => BatchVerdict::EachByKey,
        class => match status_error(class, answer.status, answer.retry_after) {
            Some(e) if e.is_permanent() && items > 1 => BatchVerdict::Rejected(e),
            Some(e) => return Err(e),
            None => BatchVerdict::Committed,
        },
    })
}

/// Whether a health check's answer `status` shows a live endpoint: a 2xx or a success
/// status from `health_url` (`checked_health_url`), else what an `OPTIONS` to the endpoint
/// may answer when live.
pub(crate) fn healthy(status: u16, checked_health_url: bool, statuses: &StatusSets) -> bool {
    if checked_health_url {
        (200..300).contains(&status) || statuses.success.contains(&status)
    } else {
        request::options_answer_is_live(status)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::HttpSinkConfig;
    use sinks_contract::ErrorClass;
    use sinks_contract::testing::envelope;

    fn statuses() -> StatusSets {
        let mut c = HttpSinkConfig::new("https://h.example/x");
        c.conflict_statuses = vec![422];
        StatusSets::of(&c)
    }

    fn answer(status: u16) -> Answer {
        Answer { status, retry_after: None, response_id: None }
    }

    fn message(status: u16, keyed: bool) -> Result<MessageOutcome, SinkError> {
        let e = envelope("ORDERS", 3, "orders.created", "{}");
        of_message(&e, (keyed, KeyBasis::Publisher), &answer(status), &statuses())
    }

    #[test]
    fn a_message_status_becomes_its_outcome() {
        assert!(matches!(message(200, true), Ok(MessageOutcome::Committed)));
        assert!(matches!(message(409, true), Ok(MessageOutcome::Duplicate)));
        assert!(matches!(message(422, true), Ok(MessageOutcome::Conflict(_))), "{:?}", message(422, true));
        // Without a key, a duplicate or conflict status says nothing: the endpoint refused it.
        assert_eq!(message(409, false).unwrap_err().class(), ErrorClass::Permanent);
        assert_eq!(message(422, false).unwrap_err().class(), ErrorClass::Permanent);
        assert_eq!(message(503, true).unwrap_err().class(), ErrorClass::Temporary);
        assert_eq!(message(429, true).unwrap_err().class(), ErrorClass::Temporary);
        let redirect = message(302, true).unwrap_err();
        assert!(redirect.is_permanent() && redirect.to_string().contains("redirects are not followed"), "{redirect}");
        assert!(message(400, true).unwrap_err().is_permanent());
    }

    #[test]
    fn a_conflict_under_sequence_keys_is_never_acknowledged() {
        let e = envelope("ORDERS", 3, "orders.created", "{}");
        let key = IdempotencyKey::stream_sequence("ORDERS", 3);
        let outcome = of_message(&e, (true, basis_of(Some(&key))), &answer(422), &statuses()).unwrap();
        assert!(matches!(&outcome, MessageOutcome::Failed(e) if e.is_permanent()), "{outcome:?}");
        assert!(matches!(basis_of(None), KeyBasis::Publisher));
    }

    #[test]
    fn a_retry_status_carries_the_delay_retry_after_asked_for() {
        let e = envelope("ORDERS", 3, "orders.created", "{}");
        let slow = Answer { status: 503, retry_after: Some(Duration::from_secs(9)), response_id: None };
        let failure = of_message(&e, (true, KeyBasis::Publisher), &slow, &statuses()).unwrap_err();
        assert_eq!(failure.retry_after(), Some(Duration::from_secs(9)));
    }

    #[test]
    fn a_batch_answer_is_one_verdict_for_all_its_envelopes() {
        let s = statuses();
        assert!(matches!(of_batch(&answer(200), &s, true, 3), Ok(BatchVerdict::Committed)));
        assert!(matches!(of_batch(&answer(409), &s, true, 3), Ok(BatchVerdict::Duplicate)));
        assert!(matches!(of_batch(&answer(422), &s, true, 3), Ok(BatchVerdict::EachByKey)));
        assert!(matches!(of_batch(&answer(400), &s, true, 3), Ok(BatchVerdict::Rejected(e)) if e.is_permanent()));
        // One envelope alone: the refusal is that envelope's failure, not the write's.
        assert!(of_batch(&answer(400), &s, true, 1).is_err_and(|e| e.is_permanent()));
        assert!(of_batch(&answer(500), &s, true, 3).is_err_and(|e| !e.is_permanent()));
        assert!(of_batch(&answer(409), &s, false, 3).is_ok_and(|v| matches!(v, BatchVerdict::Rejected(_))));
    }

    #[test]
    fn a_held_back_neighbour_waits_only_behind_a_temporary_failure() {
        let temporary = UnitResult::PerItem(vec![(0, MessageOutcome::Committed), (1, MessageOutcome::temporary("x"))]);
        assert!(temporary.failed_temporarily());
        let permanent = UnitResult::PerItem(vec![(0, MessageOutcome::permanent("x"))]);
        assert!(!permanent.failed_temporarily());
        assert!(!UnitResult::BatchRejected(SinkError::permanent("x")).failed_temporarily());
        assert!(!UnitResult::PerItem(Vec::new()).failed_temporarily());
    }

    #[test]
    fn a_health_answer_is_judged_by_what_was_asked() {
        let mut c = HttpSinkConfig::new("https://h.example/x");
        c.success_statuses = vec![200, 304];
        let s = StatusSets::of(&c);
        assert!(healthy(204, true, &s));
        assert!(healthy(304, true, &s));
        assert!(!healthy(404, true, &s));
        assert!(!healthy(503, true, &s));
        assert!(healthy(404, false, &s));
        assert!(healthy(501, false, &s));
        assert!(!healthy(503, false, &s));
    }
}
