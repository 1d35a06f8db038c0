//! What the NoSQL sink reports for a row key that already holds a row it cannot compare (no
//! `payload_info`: written by another writer), per `duplicate_policy`, through the contract's
//! one existing-key decision (`sinks_contract::existing`): a duplicate under `skip_existing`
//! and `replace` (the key is derived from the message's identity, so the row is most likely
//! an earlier delivery), a permanent failure under `fail_existing`. Against the real store
//! (KVLite + proxy: the run's, or one started for this test process).
#![allow(clippy::unwrap_used)]

use sink_nosql::certify::{NoSqlHarness, TableReadBack, unique_table};
use sink_nosql::{DuplicatePolicy, NoSqlSink, NoSqlSinkConfig};
use sinks_contract::testing::{classes, envelope, error_of, opened, write};
use sinks_contract::{ErrorClass, OutcomeClass};

async fn fixture(policy: DuplicatePolicy) -> (NoSqlSink, TableReadBack) {
    let endpoint = sinks_testkit::shared_kvlite()
        .await
        .unwrap_or_else(|reason| sinks_testkit::cannot_run("existing_rows", reason));
    let h = NoSqlHarness::live(endpoint);
    let config = NoSqlSinkConfig { duplicate_policy: policy, ..h.config(&unique_table("ex")) };
    let read_back = h.read_back(&config);
    (opened(h.sink(config).unwrap()).await, read_back)
}

const FOREIGN: &str = r#"{"written_by": "someone else"}"#;

#[tokio::test]
async fn a_row_that_cannot_be_compared_is_a_duplicate_unless_the_policy_refuses_it() {
    for (policy, expected) in [
        (DuplicatePolicy::SkipExisting, OutcomeClass::Duplicate),
        (DuplicatePolicy::Replace, OutcomeClass::Duplicate),
        (DuplicatePolicy::FailExisting, OutcomeClass::FailedPermanent),
    ] {
        let (sink, rb) = fixture(policy).await;
        rb.overwrite("stream-sequence:EX:1", &serde_json::from_str(FOREIGN).unwrap()).await.unwrap();
        let outcomes = write(&sink, &[envelope("EX", 1, "ex.x", r#"{"v":1}"#)]).await;
        assert_eq!(classes(&outcomes), [expected], "{policy:?}");
        let stored = rb.document("stream-sequence:EX:1").await.unwrap().unwrap();
        if policy == DuplicatePolicy::Replace {
            assert_eq!(stored["payload"]["v"], 1, "replace wrote the message");
        } else {
            assert_eq!(stored, serde_json::from_str::<serde_json::Value>(FOREIGN).unwrap(), "{policy:?} kept the row");
        }
        if expected == OutcomeClass::FailedPermanent {
            assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Permanent);
        }
    }
}
