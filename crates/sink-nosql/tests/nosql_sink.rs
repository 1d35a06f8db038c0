//! The NoSQL sink against the testkit's NoSQL test server (fresh table per test): duplicate
//! policies and conflicts, the event document, keys, namespaces, start-up checks, throttling
//! and other temporary failures retried in place or handed back, held-back messages behind a
//! failure of their ordering key, a refused row failing alone, the service stopped and
//! restarted. The tests that need no fault injection also run against a real proxy when
//! `NATS_SINKS_TEST_NOSQL_ENDPOINT` names one (an allow-listed skip otherwise).
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use sinks_contract::testing::SinkExt as _;
use std::time::Duration;

use bytes::Bytes;
use sink_nosql::certify::{NoSqlHarness, TableReadBack, unique_table};
use sink_nosql::{DuplicatePolicy, KeyStrategy, NoSqlSink, NoSqlSinkConfig};
use sinks_certify::ReadBack;
use sinks_contract::testing::{classes, envelope, envelope_with, error_of, opened, write};
use sinks_contract::{ConflictResolution, ErrorClass, Headers, MessageOutcome, OutcomeClass, Presence, Sink};
use sinks_testkit::NoSqlTestServer;

/// The test server's harness, and the live proxy's when one is named.
fn harnesses() -> Vec<NoSqlHarness> {
    let mut out = vec![NoSqlHarness::test_server(sinks_testkit::shared_nosql().endpoint())];
    if let Some(endpoint) = sinks_testkit::env_or_allowed_skip(
        sinks_testkit::NOSQL_LIVE_ENV,
        sinks_testkit::ORACLE_NOSQL_PROXY,
        "the live-proxy half of the sink-nosql tests",
    ) {
        out.push(NoSqlHarness::live(endpoint));
    }
    out
}

/// An opened sink on a fresh table configured by `adjust`, and a reader of that table.
async fn fixture(h: &NoSqlHarness, adjust: impl FnOnce(&mut NoSqlSinkConfig)) -> (NoSqlSink, TableReadBack) {
    let mut config = h.config(&unique_table("t"));
    adjust(&mut config);
    let read_back = h.read_back(&config);
    (opened(h.sink(config).unwrap()).await, read_back)
}

fn at(seq: u64, payload: &'static str) -> sinks_contract::Envelope {
    envelope("NQ", seq, "nq.x", payload)
}

/// Event `id` (its message id) published at stream sequence `seq` with `payload`.
fn by_id(seq: u64, id: &str, payload: &'static str) -> sinks_contract::Envelope {
    envelope_with("NQ", seq, "nq.x", payload, Headers::new().with("Nats-Msg-Id", id), 1)
}

/// What an outcome is, in one word a table can hold.
fn shape(o: &MessageOutcome) -> &'static str {
    match o {
        MessageOutcome::Failed(e)
            if e.is_permanent() && e.reason() == Some(sinks_toolkit::existing::SEQUENCE_REUSED) =>
        {
            "sequence_reused"
        }
        MessageOutcome::Conflict(ConflictResolution::KeptExisting) => "kept",
        MessageOutcome::Conflict(ConflictResolution::Rejected) => "rejected",
        MessageOutcome::Conflict(ConflictResolution::Overwritten) => "overwritten",
        MessageOutcome::Duplicate => "duplicate",
        MessageOutcome::Committed => "committed",
        _ => "other",
    }
}

/// A second event under a stored row's key, by policy and key strategy: under
/// stream-sequence keys (the default `idempotency_key` for a JetStream message, and
/// `stream_sequence`) it is a reused sequence whatever the policy, and the row is kept;
/// under message id keys the policy decides. A redelivery of the stored event is a
/// duplicate either way.
#[tokio::test]
async fn a_different_payload_under_a_stored_key_by_policy_and_strategy() {
    use DuplicatePolicy as P;
    use KeyStrategy::{IdempotencyKey, MessageId, StreamSequence};
    let rows = [
        (IdempotencyKey, P::SkipExisting, "sequence_reused", r#"{"v":1}"#),
        (StreamSequence, P::Replace, "sequence_reused", r#"{"v":1}"#),
        (IdempotencyKey, P::Replace, "sequence_reused", r#"{"v":1}"#),
        (IdempotencyKey, P::FailExisting, "sequence_reused", r#"{"v":1}"#),
        (MessageId, P::SkipExisting, "kept", r#"{"v":1}"#),
        (MessageId, P::FailExisting, "rejected", r#"{"v":1}"#),
        (MessageId, P::Replace, "overwritten", r#"{"v":2}"#),
    ];
    for h in harnesses() {
        for (strategy, policy, want, stored) in rows {
            let (sink, rb) = fixture(&h, |c| {
                c.duplicate_policy = policy;
                c.key_strategy = strategy;
            })
            .await;
            let what = format!("{strategy:?} {policy:?}");
            assert!(sink.capabilities().detects_conflicts || policy == P::Replace, "{what}");
            assert_eq!(shape(&write(&sink, &[by_id(1, "n-1", r#"{"v":1}"#)]).await[0]), "committed", "{what}");
            assert_eq!(shape(&write(&sink, &[by_id(1, "n-1", r#"{"v":1}"#)]).await[0]), "duplicate", "{what}");
            // Stream sequence 2 with message id n-1, or sequence 1 again: the same key.
            let seq = if strategy == MessageId { 2 } else { 1 };
            assert_eq!(shape(&write(&sink, &[by_id(seq, "n-1", r#"{"v":2}"#)]).await[0]), want, "{what}");
            let records = rb.read_all().await.unwrap();
            assert_eq!(records.len(), 1, "{what}");
            assert_eq!(records[0].1, Bytes::from_static(stored.as_bytes()), "{what}");
        }
    }
}

#[tokio::test]
async fn a_later_epoch_stores_its_own_row_next_to_the_old_one() {
    for h in harnesses() {
        let (sink, rb) = fixture(&h, |_| {}).await;
        assert_eq!(classes(&write(&sink, &[at(1, r#"{"v":1}"#)]).await), [OutcomeClass::Committed]);
        let later = at(1, r#"{"v":2}"#).with_stream_epoch(Some("e2".into()));
        assert_eq!(classes(&write(&sink, std::slice::from_ref(&later)).await), [OutcomeClass::Committed]);
        assert_eq!(classes(&write(&sink, &[later]).await), [OutcomeClass::Duplicate]);
        let mut records = rb.read_all().await.unwrap();
        records.sort();
        assert_eq!(
            records,
            vec![
                ("stream-sequence:NQ.e2:1".to_owned(), Bytes::from_static(br#"{"v":2}"#)),
                ("stream-sequence:NQ:1".to_owned(), Bytes::from_static(br#"{"v":1}"#)),
            ]
        );
        let doc = rb.document("stream-sequence:NQ.e2:1").await.unwrap().expect("row");
        assert_eq!((doc["stream"].as_str(), doc["stream_epoch"].as_str()), (Some("NQ"), Some("e2")));
    }
}

#[tokio::test]
async fn the_event_document_is_the_references_with_the_exact_text() {
    for h in harnesses() {
        let (sink, rb) = fixture(&h, |_| {}).await;
        let e = envelope_with(
            "NQ",
            7,
            "orders.created",
            Bytes::from_static(b" {\"order\": 7, \"amount\": 12.50, \"note\": \"\xc3\xbcn\xc3\xaf\"}\n"),
            Headers::new().with("Nats-Msg-Id", "order-7").with("X-Trace", "t1"),
            1,
        );
        assert_eq!(classes(&write(&sink, &[e]).await), [OutcomeClass::Committed]);
        let doc = rb.document("stream-sequence:NQ:7").await.unwrap().expect("row");
        assert_eq!(doc["schema"], "nats_sinks.oracle_nosql.event.v1");
        assert_eq!(doc["schema_version"], 1);
        assert_eq!(doc["subject"], "orders.created");
        assert_eq!(doc["message_id"], "order-7");
        assert_eq!(doc["headers"]["X-Trace"], "t1");
        assert_eq!(doc["payload"]["order"], 7);
        assert_eq!(doc["payload"]["note"], "ünï");
        assert_eq!(doc["payload_text"], "{\"order\": 7, \"amount\": 12.50, \"note\": \"ünï\"}");
        assert_eq!(doc["payload_info"]["wrapped"], false);
        assert!(doc["metadata"]["jetstream"]["stream_sequence"] == 7);
        let rows = rb.rows().await.unwrap();
        assert!(rows[0]["stored_at_epoch_ns"].as_i64().unwrap() > 1_700_000_000_000_000_000);
    }
}

#[tokio::test]
async fn key_strategies_and_prefix_make_the_references_keys() {
    for h in harnesses() {
        let (sink, rb) = fixture(&h, |c| {
            c.key_strategy = KeyStrategy::MessageId;
            c.key_prefix = Some("prod".into());
        })
        .await;
        let e =
            envelope_with("NQ", 1, "a.b", Bytes::from_static(b"{}"), Headers::new().with("Nats-Msg-Id", "m/1 x"), 1);
        let missing = at(2, "{}");
        let outcomes = write(&sink, &[e, missing]).await;
        assert_eq!(outcomes[0].class(), OutcomeClass::Committed);
        assert_eq!(error_of(&outcomes[1]).class(), ErrorClass::Permanent, "no message id: permanent");
        let keys: Vec<String> = rb.read_all().await.unwrap().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["prod:message-id:m/1 x"]);
    }
}

#[tokio::test]
async fn start_up_checks_the_table() {
    for h in harnesses() {
        // Missing table without auto_create: a configuration error.
        let missing = NoSqlSinkConfig::new(h.endpoint(), unique_table("missing"));
        let err = h.sink(missing).unwrap().open().await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Config, "{}", err.display_chain());
        // A table whose columns differ.
        let table = unique_table("other");
        let other = NoSqlSinkConfig { value_field: "doc".into(), ..h.config(&table) };
        let _drop = h.read_back(&other);
        opened(h.sink(other).unwrap()).await;
        let err = h.sink(NoSqlSinkConfig::new(h.endpoint(), &table)).unwrap().open().await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Config);
        assert!(err.message().contains("`event_json` (sink.value_field) is missing"), "{}", err.message());
        // An unreachable service is an outage, not a configuration error.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut gone = NoSqlSinkConfig::new(format!("http://127.0.0.1:{closed}"), "t");
        gone.request_timeout_seconds = 2.0;
        let err = h.sink(gone).unwrap().open().await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Temporary, "{}", err.display_chain());
    }
}

#[tokio::test]
async fn namespaces_qualify_the_table() {
    // The test server takes `ns:table` as the name; a real store needs the namespace created
    // first (`CREATE NAMESPACE`), which the sink does not do.
    let h = NoSqlHarness::test_server(sinks_testkit::shared_nosql().endpoint());
    let (sink, rb) = fixture(&h, |c| c.namespace = Some("ops".into())).await;
    assert_eq!(classes(&write(&sink, &[at(1, "{}")]).await), [OutcomeClass::Committed]);
    assert_eq!(rb.read_all().await.unwrap().len(), 1);
    assert!(sinks_testkit::shared_nosql().rows(&format!("ops:{}", rb.table())).is_some());
}

#[tokio::test]
async fn a_batch_writes_concurrently_and_exactly_once() {
    for h in harnesses() {
        let (sink, rb) = fixture(&h, |_| {}).await;
        let batch: Vec<_> =
            (1..=200).map(|s| envelope("NQ", s, &format!("nq.k{}", s % 7), format!("{{\"s\":{s}}}"))).collect();
        assert!(classes(&write(&sink, &batch).await).iter().all(|c| *c == OutcomeClass::Committed));
        let records = rb.read_all().await.unwrap();
        assert_eq!(records.len(), 200);
    }
}

// --- fault injection: the test server only -------------------------------------------------

/// A private test server (so injected faults hit only this test), an opened sink on it and a
/// reader of its table.
async fn private(adjust: impl FnOnce(&mut NoSqlSinkConfig)) -> (NoSqlTestServer, NoSqlSink, TableReadBack) {
    let server = NoSqlTestServer::start().unwrap();
    let h = NoSqlHarness::test_server(server.endpoint());
    let (sink, rb) = fixture(&h, adjust).await;
    (server, sink, rb)
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
async fn the_service_stopped_and_restarted_loses_nothing() {
    let (server, sink, rb) = private(|c| {
        c.request_timeout_seconds = 2.0;
        c.max_retries = 0;
    })
    .await;
    assert_eq!(classes(&write(&sink, &[at(1, "{}")]).await), [OutcomeClass::Committed]);
    server.stop();
    let during = write(&sink, &[at(2, "{}"), at(3, "{}")]).await;
    assert!(during.iter().all(|o| o.class() != OutcomeClass::FailedPermanent), "{during:?}");
    assert!(during.iter().any(|o| o.failed_temporarily()), "{during:?}");
    assert!(sink.health_check().await.is_err());
    server.restart().unwrap();
    assert!(sink.health_check().await.is_ok());
    let after = write(&sink, &[at(1, "{}"), at(2, "{}"), at(3, "{}")]).await;
    assert_eq!(classes(&after), [OutcomeClass::Duplicate, OutcomeClass::Committed, OutcomeClass::Committed]);
    assert_eq!(rb.read_all().await.unwrap().len(), 3);
}

#[tokio::test]
async fn the_default_payload_limit_is_the_references() {
    let h = NoSqlHarness::test_server(sinks_testkit::shared_nosql().endpoint());
    let (sink, rb) = fixture(&h, |c| c.max_value_bytes = NoSqlSinkConfig::default().max_value_bytes).await;
    let big = Bytes::from(vec![0xffu8; 1024 * 1024]);
    let outcomes = write(&sink, &[envelope("NQ", 1, "nq.big", big), at(2, "{}")]).await;
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Permanent);
    assert!(error_of(&outcomes[0]).message().contains("sink.max_value_bytes"));
    assert_eq!(outcomes[1].class(), OutcomeClass::Committed);
    assert_eq!(rb.read_all().await.unwrap().len(), 1);
}

// --- reconcile --------------------------------------------------------------------------------

#[tokio::test]
async fn reconcile_reports_exactly_the_deleted_and_altered_rows() {
    for h in harnesses() {
        let (sink, rb) = fixture(&h, |_| {}).await;
        let batch: Vec<_> = (1..=200u64)
            .map(|s| {
                if s % 10 == 0 {
                    envelope("RC", s, "rc.bin", vec![0xff, 0x00, u8::try_from(s % 256).unwrap()])
                } else {
                    envelope("RC", s, "rc.json", format!(r#"{{"order":{s},"amount":2.50}}"#))
                }
            })
            .collect();
        assert!(classes(&write(&sink, &batch).await).iter().all(|c| *c == OutcomeClass::Committed));
        assert!(matches!(sink.read_back(), sinks_contract::ReadBack::Supported(_)));
        let clean = sink.read_back_batch(&batch).await.unwrap();
        assert!(clean.iter().all(|p| *p == Presence::Equal), "{clean:?}");

        let key = |s: u64| format!("stream-sequence:RC:{s}");
        assert!(rb.delete(&key(17)).await.unwrap());
        assert!(rb.delete(&key(120)).await.unwrap());
        assert!(!rb.delete(&key(120)).await.unwrap(), "already gone");
        // An edit of the payload that keeps the rest of the document (and its fingerprint).
        let mut document = rb.document(&key(151)).await.unwrap().unwrap();
        document["payload"]["amount"] = 3.into();
        document["payload_text"] = r#"{"order":151,"amount":3}"#.into();
        rb.overwrite(&key(151), &document).await.unwrap();

        let found = sink.read_back_batch(&batch).await.unwrap();
        assert_eq!(found.len(), batch.len());
        let reported: Vec<(u64, Presence)> = batch
            .iter()
            .zip(&found)
            .filter(|(_, p)| **p != Presence::Equal)
            .map(|(e, p)| (e.jetstream().stream_sequence, *p))
            .collect();
        assert_eq!(reported, [(17, Presence::Missing), (120, Presence::Missing), (151, Presence::Different)]);
        assert_eq!(rb.rows().await.unwrap().len(), 198, "reconcile wrote nothing");
        let destination = sink.destination_of(&batch[16], &MessageOutcome::Committed).unwrap();
        assert_eq!(
            destination,
            sinks_contract::DestinationRef::Row { table: sink.config().qualified_table(), key: key(17) }
        );
    }
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
