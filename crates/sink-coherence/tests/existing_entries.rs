//! What the Coherence sink reports for a key that already holds an entry, through the
//! contract's one existing-key decision (`sinks_contract::existing`), against a real
//! Coherence member: an entry it cannot compare (not a document of this sink) is a duplicate
//! under `skip_existing` and `replace`, as the S3 and NoSQL sinks report it (it was a
//! conflict here), and a permanent failure under `fail_existing`; under `replace`, a
//! redelivery of the same payload is a duplicate (it was reported committed). `replace`
//! writes over an entry only under message id keys: under stream-sequence keys it never
//! overwrites an entry it did not compare.
#![allow(clippy::unwrap_used)]

use sink_coherence::certify::{CacheReadBack, CoherenceHarness};
use sink_coherence::{CoherenceSink, DuplicatePolicy, KeyStrategy};
use sinks_contract::testing::{classes, envelope_with, opened, write};
use sinks_contract::{Headers, MessageOutcome, OutcomeClass};

async fn fixture(policy: DuplicatePolicy, key_strategy: KeyStrategy) -> (CoherenceSink, CacheReadBack) {
    let address = sinks_testkit::shared_coherence().await.unwrap_or_else(|e| panic!("no Coherence member: {e}"));
    let h = CoherenceHarness::new(address);
    let mut config = h.config();
    config.duplicate_policy = policy;
    config.key_strategy = key_strategy;
    let read_back = h.read_back(&config).unwrap();
    (opened(h.sink(config).unwrap()).await, read_back)
}

const FOREIGN: &[u8] = br#"{"written_by":"someone else"}"#;

/// Version `v` of event `ex-1` at stream sequence `seq` of stream `stream`.
fn event(stream: &str, seq: u64, v: u32) -> sinks_contract::Envelope {
    envelope_with(stream, seq, "ex.x", format!("{{\"v\":{v}}}"), Headers::new().with("Nats-Msg-Id", "ex-1"), 1)
}

#[tokio::test]
async fn an_entry_that_cannot_be_compared_is_a_duplicate_unless_the_policy_refuses_it() {
    use KeyStrategy::{MessageId, StreamSequence};
    for (policy, strategy, key, expected) in [
        (DuplicatePolicy::SkipExisting, StreamSequence, "stream-sequence:EX:1", OutcomeClass::Duplicate),
        (DuplicatePolicy::Replace, StreamSequence, "stream-sequence:EX:1", OutcomeClass::Duplicate),
        (DuplicatePolicy::Replace, MessageId, "message-id:ex-1", OutcomeClass::Duplicate),
        (DuplicatePolicy::FailExisting, StreamSequence, "stream-sequence:EX:1", OutcomeClass::FailedPermanent),
    ] {
        let (sink, read_back) = fixture(policy, strategy).await;
        read_back.overwrite(key, FOREIGN).await.unwrap();
        let outcomes = write(&sink, &[event("EX", 1, 1)]).await;
        assert_eq!(classes(&outcomes), [expected], "{policy:?} {strategy:?}: {outcomes:?}");
        let stored = read_back.document(key).await.unwrap().unwrap();
        if policy == DuplicatePolicy::Replace && strategy == MessageId {
            assert_eq!(stored["payload"]["v"], 1, "replace wrote the message");
        } else {
            assert_eq!(stored["written_by"], "someone else", "{policy:?} {strategy:?} kept the entry");
        }
    }
}

#[tokio::test]
async fn replace_reports_a_redelivery_of_the_same_payload_as_a_duplicate() {
    for strategy in [KeyStrategy::MessageId, KeyStrategy::StreamSequence] {
        let (sink, _read_back) = fixture(DuplicatePolicy::Replace, strategy).await;
        assert_eq!(classes(&write(&sink, &[event("RD", 1, 1)]).await), [OutcomeClass::Committed]);
        assert_eq!(classes(&write(&sink, &[event("RD", 1, 1)]).await), [OutcomeClass::Duplicate]);
        let changed = write(&sink, &[event("RD", 1, 2)]).await;
        match strategy {
            KeyStrategy::MessageId => assert!(
                matches!(changed[0], MessageOutcome::Conflict(sinks_contract::ConflictResolution::Overwritten)),
                "{changed:?}"
            ),
            _ => assert!(
                matches!(&changed[0], MessageOutcome::Failed(e) if e.reason() == Some(sinks_contract::existing::SEQUENCE_REUSED)),
                "never overwritten under a stream-sequence key: {changed:?}"
            ),
        }
    }
}
