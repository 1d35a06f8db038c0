//! The NoSQL sink against the real Oracle NoSQL Database (KVLite + the HTTP proxy: the
//! run's shared store, or one started for this test process), a fresh table per test:
//! duplicate policies and conflicts, the event document, keys, namespaces, start-up checks,
//! concurrent writes, the default payload limit, reconcile. Fault injection (throttling,
//! errors, lost replies) is in `faults.rs`, against the testkit's fault-injection server;
//! the store and proxy killed under the sink in `store_killed.rs`.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use sinks_contract::testing::SinkExt as _;

use bytes::Bytes;
use sink_nosql::certify::{NoSqlHarness, TableReadBack, unique_table};
use sink_nosql::{DuplicatePolicy, KeyStrategy, NoSqlSink, NoSqlSinkConfig};
use sinks_certify::Records;
use sinks_contract::testing::{classes, envelope, envelope_with, error_of, opened, write};
use sinks_contract::{ConflictResolution, ErrorClass, Headers, MessageOutcome, OutcomeClass, Presence, Sink};

/// The harness over the run's (or this process's) KVLite + proxy.
async fn live() -> NoSqlHarness {
    let endpoint = sinks_testkit::shared_kvlite()
        .await
        .unwrap_or_else(|reason| sinks_testkit::cannot_run("the sink-nosql tests", reason));
    NoSqlHarness::live(endpoint)
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
            if e.is_permanent() && e.reason() == Some(sinks_contract::existing::SEQUENCE_REUSED) =>
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
    let h = live().await;
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

#[tokio::test]
async fn a_later_epoch_stores_its_own_row_next_to_the_old_one() {
    let h = live().await;
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

#[tokio::test]
async fn the_event_document_is_the_references_with_the_exact_text() {
    let h = live().await;
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

#[tokio::test]
async fn key_strategies_and_prefix_make_the_references_keys() {
    let h = live().await;
    let (sink, rb) = fixture(&h, |c| {
        c.key_strategy = KeyStrategy::MessageId;
        c.key_prefix = Some("prod".into());
    })
    .await;
    let e = envelope_with("NQ", 1, "a.b", Bytes::from_static(b"{}"), Headers::new().with("Nats-Msg-Id", "m/1 x"), 1);
    let missing = at(2, "{}");
    let outcomes = write(&sink, &[e, missing]).await;
    assert_eq!(outcomes[0].class(), OutcomeClass::Committed);
    assert_eq!(error_of(&outcomes[1]).class(), ErrorClass::Permanent, "no message id: permanent");
    let keys: Vec<String> = rb.read_all().await.unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["prod:message-id:m/1 x"]);
}

#[tokio::test]
async fn start_up_checks_the_table() {
    let h = live().await;
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

#[tokio::test]
async fn namespaces_qualify_the_table() {
    // The sink does not create namespaces: the operator does (`CREATE NAMESPACE`, an
    // administrative statement).
    let h = live().await;
    let namespace = unique_table("ns");
    sinks_testkit::nosql_admin(h.endpoint(), &format!("CREATE NAMESPACE IF NOT EXISTS {namespace}")).await.unwrap();
    {
        let (sink, rb) = fixture(&h, |c| c.namespace = Some(namespace.clone())).await;
        assert_eq!(sink.config().qualified_table(), format!("{namespace}:{}", rb.table()));
        assert_eq!(classes(&write(&sink, &[at(1, "{}")]).await), [OutcomeClass::Committed]);
        assert_eq!(rb.read_all().await.unwrap().len(), 1);
        // The table lives in the namespace, not in the default one.
        assert!(h.rows(rb.table()).await.is_err(), "a table of that name outside the namespace");
    }
    sinks_testkit::nosql_admin(h.endpoint(), &format!("DROP NAMESPACE IF EXISTS {namespace} CASCADE")).await.unwrap();
}

#[tokio::test]
async fn the_default_payload_limit_is_the_references() {
    let h = live().await;
    let (sink, rb) = fixture(&h, |c| c.max_value_bytes = NoSqlSinkConfig::default().max_value_bytes).await;
    let big = Bytes::from(vec![0xffu8; 1024 * 1024]);
    let outcomes = write(&sink, &[envelope("NQ", 1, "nq.big", big), at(2, "{}")]).await;
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Permanent);
    assert!(error_of(&outcomes[0]).message().contains("sink.max_value_bytes"));
    assert_eq!(outcomes[1].class(), OutcomeClass::Committed);
    assert_eq!(rb.read_all().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_batch_writes_concurrently_and_exactly_once() {
    let h = live().await;
    let (sink, rb) = fixture(&h, |_| {}).await;
    let batch: Vec<_> =
        (1..=200).map(|s| envelope("NQ", s, &format!("nq.k{}", s % 7), format!("{{\"s\":{s}}}"))).collect();
    assert!(classes(&write(&sink, &batch).await).iter().all(|c| *c == OutcomeClass::Committed));
    let records = rb.read_all().await.unwrap();
    assert_eq!(records.len(), 200);
}

// --- reconcile --------------------------------------------------------------------------------

#[tokio::test]
async fn reconcile_reports_exactly_the_deleted_and_altered_rows() {
    let h = live().await;
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
    assert!(sink.read_back().is_some());
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
