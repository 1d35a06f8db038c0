//! Whether a redelivered message is what its object stores: the outcome of a message found
//! in a committed object (a duplicate, or compared first by its payload fingerprint when
//! `content_check` is on, under the sink's existing-record policy), and the fingerprints of
//! an object's rows, read back once and cached; and reconcile's read-back of one message.

use std::collections::HashMap;
use std::sync::Arc;

use super::encode::read_rows;
use super::engine::Inner;
use super::groups::lock;
use super::index::{Committed, PartKey};
use super::object_log::ObjectLog;
use crate::existing::{self, Stored};
use sinks_contract::envelope::Envelope;
use sinks_contract::error::SinkError;
use sinks_contract::payload::PayloadMode;
use sinks_contract::sink::{MessageOutcome, Presence};

/// The payload fingerprint a row of `envelope` records (the normalized payload's SHA-256).
fn fingerprint(envelope: &Envelope) -> String {
    sinks_contract::payload::normalize(envelope.payload(), PayloadMode::BytesEnvelope)
        .map(|n| n.sha256)
        .unwrap_or_default()
}

impl<L: ObjectLog> Inner<L> {
    /// Whether `envelope`, of the manifest log `key`, is stored (and its row's payload
    /// fingerprint equal to the message's), stored with another payload, or missing.
    pub(super) async fn presence(&self, key: &PartKey, envelope: &Envelope) -> Result<Presence, SinkError> {
        self.ensure_loaded(key).await?;
        let found = {
            let mut state = lock(&self.state);
            state.index.get_mut(key).and_then(|p| p.lookup(envelope.jetstream().stream_sequence).cloned())
        };
        let Some(committed) = found else {
            return Ok(Presence::Missing);
        };
        let prints = self.fingerprints(&committed).await?;
        Ok(match prints.get(&envelope.jetstream().stream_sequence) {
            Some(stored) if *stored == fingerprint(envelope) => Presence::Equal,
            Some(_) => Presence::Different,
            None => Presence::Missing,
        })
    }

    /// The outcome of a redelivery of a message stored in `committed`.
    pub(super) async fn existing(&self, envelope: &Envelope, committed: &Arc<Committed>) -> MessageOutcome {
        let s = &self.settings;
        let record = s.record;
        let stored = if !s.content_check {
            Stored::Unchecked
        } else if existing::conditional(s.policy, existing::KeyBasis::StreamSequence) {
            match self.fingerprints(committed).await {
                Ok(prints) => {
                    let ours = fingerprint(envelope);
                    existing::compare(prints.get(&envelope.jetstream().stream_sequence).map(String::as_str), &ours)
                }
                Err(e) if !e.is_permanent() => return MessageOutcome::Failed(e),
                Err(_) => Stored::Uncomparable,
            }
        } else {
            Stored::Unchecked
        };
        existing::resolve(envelope, s.policy, existing::KeyBasis::StreamSequence, stored, record)
    }

    /// The payload fingerprints of `committed`'s rows (read back once, then cached).
    async fn fingerprints(&self, committed: &Committed) -> Result<Arc<HashMap<u64, String>>, SinkError> {
        if let Some(p) = lock(&self.prints).get(&committed.object) {
            return Ok(p);
        }
        let Some(file) = self.log.fetch(&committed.object).await? else {
            return Err(SinkError::temporary("a committed batch object is not there (deleted behind the sink?)"));
        };
        let (format, compression) = (committed.format, committed.compression);
        let prints = crate::blocking::blocking(move || {
            let mut map = HashMap::new();
            read_rows(file, format, compression, false, |r| {
                map.insert(r.stream_sequence, r.payload_sha256);
            })
            .map_err(|e| SinkError::permanent(format!("cannot read a batch object back: {e}")))?;
            Ok(map)
        })
        .await?;
        let prints = Arc::new(prints);
        lock(&self.prints).put(committed.object.clone(), Arc::clone(&prints));
        Ok(prints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::testing::envelope;

    #[test]
    fn a_rows_fingerprint_is_its_normalized_payloads() {
        let a = envelope("ORDERS", 1, "o", r#"{"n": 1}"#);
        let same = envelope("ORDERS", 2, "other", r#"{"n": 1}"#);
        let other = envelope("ORDERS", 1, "o", r#"{"n": 2}"#);
        assert_eq!(fingerprint(&a), fingerprint(&same), "the payload alone decides");
        assert_ne!(fingerprint(&a), fingerprint(&other));
        assert_eq!(fingerprint(&a).len(), 64, "hex SHA-256");
        let expected = sinks_contract::payload::normalize(a.payload(), PayloadMode::BytesEnvelope).unwrap().sha256;
        assert_eq!(fingerprint(&a), expected);
    }
}
