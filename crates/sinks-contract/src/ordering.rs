//! The one ordering rule: messages that share an [`OrderKey`] are written one after another
//! in stream order; messages with different keys (or none) may be written concurrently.
//!
//! The key comes from `delivery.ordering_key` (the subject by default, a payload field, or
//! none) and travels on each [`crate::Envelope`] ([`crate::Envelope::order_key`]); the runner
//! applies it across batches, and a sink applies it inside its write (`sinks_toolkit::in_order`
//! does that once for every sink), so no sink invents an order of its own. A sink may add keys
//! only for what its destination requires (the S3 sink serializes writes of one object key),
//! never for order.
//!
//! When a write fails temporarily, the later writes that share one of its keys are not
//! attempted: they are *held back* ([`crate::MessageOutcome::HeldBack`]), which is not a
//! failure of theirs. The runner releases them for redelivery together with the message
//! they wait for.

use std::hash::Hasher;

/// What orders a message's write (a hash; a collision only adds a needless wait).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OrderKey(u64);

impl OrderKey {
    /// The key of messages ordered by subject.
    pub fn subject(subject: &str) -> Self {
        Self::of(&[b"subject", subject.as_bytes()])
    }

    /// The key of messages ordered by the value of a payload field.
    pub fn field(value: &str) -> Self {
        Self::of(&[b"field", value.as_bytes()])
    }

    /// A key from arbitrary parts (for a destination's own serialization, such as one
    /// object key); the parts are length-delimited, so `["ab", "c"]` ≠ `["a", "bc"]`.
    pub fn of(parts: &[&[u8]]) -> Self {
        // SipHash with fixed keys: the same key in every process and run.
        let mut h = std::hash::DefaultHasher::new();
        for part in parts {
            h.write_usize(part.len());
            h.write(part);
        }
        Self(h.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_delimited() {
        assert_eq!(OrderKey::subject("a.b"), OrderKey::subject("a.b"));
        assert_ne!(OrderKey::subject("a"), OrderKey::field("a"));
        assert_ne!(OrderKey::of(&[b"ab", b"c"]), OrderKey::of(&[b"a", b"bc"]));
    }
}
