//! The contract's existing-key decision (`sinks_contract::existing`) under the names the
//! batch engine calls it by; private to the toolkit. A sink calls
//! `sinks_contract::existing::decide` itself.

use sinks_contract::envelope::Envelope;
use sinks_contract::existing::decide;
pub(crate) use sinks_contract::existing::{KeyBasis, OnExisting, Stored, conditional};
use sinks_contract::sink::MessageOutcome;

/// [`Stored::compare`].
pub(crate) fn compare(stored: Option<&str>, ours: &str) -> Stored {
    Stored::compare(stored, ours)
}

/// [`decide`], with the envelope first.
pub(crate) fn resolve(
    envelope: &Envelope,
    policy: OnExisting,
    basis: KeyBasis,
    stored: Stored,
    record: &str,
) -> MessageOutcome {
    decide(policy, envelope, basis, stored, record)
}
