//! The NoSQL sink under faults a real store cannot be made to produce on demand, against the
//! testkit's fault-injection server (`sinks_testkit::NoSqlTestServer`, which speaks the
//! proxy's protocol; `sinks-testkit/tests/nosql_server.rs` checks it against KVLite in every
//! run): throttling and other error codes retried in place or handed back with their wait,
//! messages held back behind a failure of their key, a refused row failing alone, throttled
//! reads of reconcile, a reply lost after the put committed, and the durability each put asks
//! for on the wire.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use sink_nosql::certify::{NoSqlHarness, TableReadBack, unique_table};
use sink_nosql::{Durability, NoSqlSink, NoSqlSinkConfig};
use sinks_certify::Records;
use sinks_contract::testing::SinkExt as _;
use sinks_contract::testing::{classes, envelope, error_of, opened, write};
use sinks_contract::{ErrorClass, OutcomeClass, Presence};
use sinks_testkit::NoSqlTestServer;

fn at(seq: u64, payload: &'static str) -> sinks_contract::Envelope {
    envelope("NQ", seq, "nq.x", payload)
}

/// A private fault-injection server (so injected faults hit only this test), an opened sink on it and a
/// reader of its table.
async fn private(adjust: impl FnOnce(&mut NoSqlSinkConfig)) -> (NoSqlTestServer, NoSqlSink, TableReadBack) {
    let server = NoSqlTestServer::start().unwrap();
    let h = NoSqlHarness::test_server(server.endpoint());
    let mut config = h.config(&unique_table("t"));
    adjust(&mut config);
    let read_back = h.read_back(&config);
    (server, opened(h.sink(config).unwrap()).await, read_back)
}

#[tokio::test]
async fn throttling_is_retried_in_place() {
    let (server, sink, rb) = private(|_| {}).await;
    let before = server.requests();
    server.fail_next(51, 2); // WRITE_LIMIT_EXCEEDED twice
    assert_eq!(classes(&write(&sink, &[at(1, "{}")]).await), [OutcomeClass::Committed]);
    assert_eq!(server.requests() - before, 3, "two throttled puts, then the one that committed");
    assert_eq!(rb.read_all().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_failure_past_the_retries_is_handed_back_with_its_wait() {
    let (server, sink, _rb) = private(|c| c.max_retries = 1).await;
    server.fail_next(51, 5);
    let outcomes = write(&sink, &[at(1, "{}")]).await;
    let err = error_of(&outcomes[0]);
    assert_eq!(err.class(), ErrorClass::Temporary);
    assert_eq!(err.error_type(), "throttled");
    assert!(err.retry_after() >= Some(Duration::from_millis(100)), "{:?}", err.retry_after());
    // Server errors and timeouts are temporary as well.
    for code in [100, 101, 102] {
        let (server, sink, _rb) = private(|c| c.max_retries = 0).await;
        server.fail_next(code, 1);
        let outcomes = write(&sink, &[at(1, "{}")]).await;
        assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Temporary, "code {code}");
    }
}

#[tokio::test]
async fn later_messages_of_a_failed_key_are_held_back() {
    let (server, sink, rb) = private(|c| c.max_retries = 0).await;
    server.fail_next(102, 1); // SERVICE_UNAVAILABLE for the first put
    let batch: Vec<_> = (1..=3).map(|s| envelope("NQ", s, "nq.same", format!("{{\"s\":{s}}}"))).collect();
    let outcomes = write(&sink, &batch).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::FailedTemporary, OutcomeClass::HeldBack, OutcomeClass::HeldBack]);
    assert!(rb.read_all().await.unwrap().is_empty(), "nothing overtook the failed message");
    assert!(classes(&write(&sink, &batch).await).iter().all(|c| *c == OutcomeClass::Committed));
}

#[tokio::test]
async fn a_row_the_service_refuses_fails_alone_and_permanently() {
    let (server, sink, rb) = private(|c| c.max_concurrent_requests = 1).await;
    server.fail_next(4, 1); // ILLEGAL_ARGUMENT for the first put
    let batch: Vec<_> = (1..=4).map(|s| envelope("NQ", s, &format!("nq.k{s}"), format!("{{\"s\":{s}}}"))).collect();
    let outcomes = write(&sink, &batch).await;
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Permanent);
    assert_eq!(&classes(&outcomes)[1..], [OutcomeClass::Committed; 3]);
    assert_eq!(rb.read_all().await.unwrap().len(), 3);
}

#[tokio::test]
async fn reconcile_retries_throttled_reads() {
    let (server, sink, _rb) = private(|_| {}).await;
    let batch = [at(1, r#"{"v":1}"#)];
    assert_eq!(classes(&write(&sink, &batch).await), [OutcomeClass::Committed]);
    let before = server.requests();
    server.fail_next(50, 2); // READ_LIMIT_EXCEEDED twice
    assert_eq!(sink.read_back_batch(&batch).await.unwrap(), [Presence::Equal]);
    assert_eq!(server.requests() - before, 3, "two throttled gets, then the one that answered");
    // Past max_retries the read-back fails (reconcile then stops with exit 1), never guesses.
    server.fail_next(50, 10);
    let err = sink.read_back_batch(&batch).await.unwrap_err();
    assert!(!err.is_permanent(), "{err}");
}

#[tokio::test]
async fn a_reply_lost_after_the_commit_becomes_a_duplicate_never_a_second_row() {
    // Retried in place: the second put if absent finds the row the first one committed.
    let (server, sink, rb) = private(|_| {}).await;
    server.drop_replies_after_commit(1);
    let outcomes = write(&sink, &[at(1, r#"{"v":1}"#)]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Duplicate], "{outcomes:?}");
    assert_eq!(server.put_durabilities().len(), 2, "the put whose reply was lost, then its retry");
    assert_eq!(rb.read_all().await.unwrap(), vec![("stream-sequence:NQ:1".to_owned(), r#"{"v":1}"#.into())]);
    // Without retries in place the message goes back (temporary) and its redelivery is the
    // duplicate.
    let (server, sink, rb) = private(|c| c.max_retries = 0).await;
    server.drop_replies_after_commit(1);
    let first = write(&sink, &[at(1, r#"{"v":1}"#)]).await;
    assert_eq!(error_of(&first[0]).class(), ErrorClass::Temporary, "{first:?}");
    assert_eq!(rb.read_all().await.unwrap().len(), 1, "the put committed although its reply was lost");
    assert_eq!(classes(&write(&sink, &[at(1, r#"{"v":1}"#)]).await), [OutcomeClass::Duplicate]);
    assert_eq!(rb.read_all().await.unwrap().len(), 1);
}

#[tokio::test]
async fn every_put_asks_for_commit_sync_unless_the_operator_confirmed_the_store() {
    // COMMIT_SYNC as the proxy decodes it: master SYNC (1), replicas NO_SYNC (2 << 2),
    // acknowledged by a simple majority (3 << 4).
    const COMMIT_SYNC: i64 = 1 | (2 << 2) | (3 << 4);
    let (server, sink, _rb) = private(|_| {}).await;
    let batch: Vec<_> = (1..=20).map(|s| envelope("NQ", s, &format!("nq.k{s}"), "{}")).collect();
    assert!(classes(&write(&sink, &batch).await).iter().all(|c| *c == OutcomeClass::Committed));
    let asked = server.put_durabilities();
    assert_eq!(asked.len(), 20);
    assert!(asked.iter().all(|d| *d == Some(COMMIT_SYNC)), "{asked:?}");
    let (server, sink, _rb) = private(|c| c.durability = Durability::OperatorConfirmed).await;
    assert_eq!(classes(&write(&sink, &[at(1, "{}")]).await), [OutcomeClass::Committed]);
    assert_eq!(server.put_durabilities(), [None], "operator_confirmed asks for nothing");
}
