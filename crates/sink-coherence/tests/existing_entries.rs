//! What the Coherence sink reports for a key that already holds an entry, through the
//! contract's one existing-key decision (`sinks_contract::existing`), against a real
//! Coherence member: an entry it cannot compare (not a document of this sink) is a duplicate
//! under `skip_existing` and `replace`, as the S3 and NoSQL sinks report it (it was a
//! conflict here), and a permanent failure under `fail_existing`; under `replace`, a
//! redelivery of the same payload is a duplicate (it was reported committed).
#![allow(clippy::unwrap_used)]

use sink_coherence::certify::{CacheReadBack, CoherenceHarness};
use sink_coherence::{CoherenceSink, DuplicatePolicy};
use sinks_contract::testing::{classes, envelope, opened, write};
use sinks_contract::{MessageOutcome, OutcomeClass};

async fn fixture(policy: DuplicatePolicy) -> (CoherenceSink, CacheReadBack) {
    let address = sinks_testkit::shared_coherence().await.unwrap_or_else(|e| panic!("no Coherence member: {e}"));
    let h = CoherenceHarness::new(address);
    let mut config = h.config();
    config.duplicate_policy = policy;
    let read_back = h.read_back(&config).unwrap();
    (opened(h.sink(config).unwrap()).await, read_back)
}

const KEY: &str = "stream-sequence:EX:1";
const FOREIGN: &[u8] = br#"{"written_by":"someone else"}"#;

#[tokio::test]
async fn an_entry_that_cannot_be_compared_is_a_duplicate_unless_the_policy_refuses_it() {
    for (policy, expected) in [
        (DuplicatePolicy::SkipExisting, OutcomeClass::Duplicate),
        (DuplicatePolicy::Replace, OutcomeClass::Duplicate),
        (DuplicatePolicy::FailExisting, OutcomeClass::FailedPermanent),
    ] {
        let (sink, read_back) = fixture(policy).await;
        read_back.overwrite(KEY, FOREIGN).await.unwrap();
        let outcomes = write(&sink, &[envelope("EX", 1, "ex.x", r#"{"v":1}"#)]).await;
        assert_eq!(classes(&outcomes), [expected], "{policy:?}: {outcomes:?}");
        let stored = read_back.document(KEY).await.unwrap().unwrap();
        if policy == DuplicatePolicy::Replace {
            assert_eq!(stored["payload"]["v"], 1, "replace wrote the message");
        } else {
            assert_eq!(stored["written_by"], "someone else", "{policy:?} kept the entry");
        }
    }
}

#[tokio::test]
async fn replace_reports_a_redelivery_of_the_same_payload_as_a_duplicate() {
    let (sink, _read_back) = fixture(DuplicatePolicy::Replace).await;
    let message = || envelope("RD", 1, "rd.x", r#"{"v":1}"#);
    assert_eq!(classes(&write(&sink, &[message()]).await), [OutcomeClass::Committed]);
    assert_eq!(classes(&write(&sink, &[message()]).await), [OutcomeClass::Duplicate]);
    let changed = write(&sink, &[envelope("RD", 1, "rd.x", r#"{"v":2}"#)]).await;
    assert!(matches!(changed[0], MessageOutcome::Conflict(sinks_contract::ConflictResolution::Overwritten)));
}
