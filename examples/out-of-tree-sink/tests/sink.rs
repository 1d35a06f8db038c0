//! What the certification does not reach: conflicts under publisher keys and each
//! `conflict_policy`, held-back messages behind a spent budget, read-back for `reconcile`,
//! the columns of a row, and a missing table at start-up.

use std::time::Duration;

use bytes::Bytes;
use sinks_contract::envelope::Headers;
use sinks_contract::idempotency::KeySource;
use sinks_contract::testing::{envelope, envelope_with};
use sinks_contract::{ConflictResolution, DEFAULT_BUDGET, ErrorClass, MessageOutcome, Presence, Sink};
use sqlite_sink::{ConflictPolicy, SqliteSink, SqliteSinkConfig};

/// An opened sink on a fresh database; the directory lives as long as the returned guard.
async fn sink(configure: impl FnOnce(&mut SqliteSinkConfig)) -> (SqliteSink, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut config = SqliteSinkConfig::new(dir.path().join("sink.db"));
    configure(&mut config);
    let sink = SqliteSink::new(config);
    sink.open().await.expect("open");
    (sink, dir)
}

/// A message with publisher id `id` and `payload`, at stream sequence `seq`.
fn with_id(seq: u64, id: &str, payload: &'static str) -> sinks_contract::Envelope {
    envelope_with(
        "ORDERS",
        seq,
        "orders.eu",
        Bytes::from_static(payload.as_bytes()),
        Headers::new().with("Nats-Msg-Id", id),
        1,
    )
}

fn payload_of(dir: &tempfile::TempDir, key: &str) -> Vec<u8> {
    let conn = rusqlite::Connection::open(dir.path().join("sink.db")).expect("open");
    conn.query_row("SELECT payload FROM messages WHERE idempotency_key = ?1", [key], |r| r.get(0)).expect("row")
}

#[tokio::test]
async fn a_different_payload_under_a_message_id_follows_the_conflict_policy() {
    let cases = [
        (ConflictPolicy::KeepFirst, ConflictResolution::KeptExisting, r#"{"v":1}"#),
        (ConflictPolicy::Overwrite, ConflictResolution::Overwritten, r#"{"v":2}"#),
        (ConflictPolicy::DeadLetter, ConflictResolution::Rejected, r#"{"v":1}"#),
    ];
    for (policy, resolution, kept) in cases {
        let (sink, dir) = sink(|c| {
            c.key = KeySource::MessageId;
            c.conflict_policy = policy;
        })
        .await;
        let first = sink.write(&[with_id(1, "order-7", r#"{"v":1}"#)], DEFAULT_BUDGET).await.expect("write");
        assert!(matches!(first[..], [MessageOutcome::Committed]), "{first:?}");
        // Republished with the same id: the same payload is a duplicate, another is a conflict.
        let again = sink
            .write(&[with_id(2, "order-7", r#"{"v":1}"#), with_id(3, "order-7", r#"{"v":2}"#)], DEFAULT_BUDGET)
            .await
            .expect("write");
        assert!(matches!(again[0], MessageOutcome::Duplicate), "{again:?}");
        assert!(matches!(again[1], MessageOutcome::Conflict(r) if r == resolution), "{policy:?}: {again:?}");
        assert_eq!(payload_of(&dir, "message-id:order-7"), kept.as_bytes(), "{policy:?}");
    }
}

#[tokio::test]
async fn a_spent_budget_fails_each_message_temporarily_and_holds_back_its_followers() {
    let (sink, dir) = sink(|_| {}).await;
    let batch = [
        envelope("S", 1, "orders.a", r#"{"n":1}"#),
        envelope("S", 2, "orders.b", r#"{"n":2}"#),
        envelope("S", 3, "orders.a", r#"{"n":3}"#),
    ];
    let outcomes = sink.write(&batch, Duration::ZERO).await.expect("write");
    assert!(outcomes[0].failed_temporarily() && outcomes[1].failed_temporarily(), "{outcomes:?}");
    assert!(matches!(outcomes[2], MessageOutcome::HeldBack), "same subject as a failed one: {outcomes:?}");
    let conn = rusqlite::Connection::open(dir.path().join("sink.db")).expect("open");
    let rows: i64 = conn.query_row("SELECT COUNT(*) FROM messages", [], |r| r.get(0)).expect("count");
    assert_eq!(rows, 0, "nothing was written");
    // With a budget, the same batch commits.
    let outcomes = sink.write(&batch, DEFAULT_BUDGET).await.expect("write");
    assert!(outcomes.iter().all(|o| matches!(o, MessageOutcome::Committed)), "{outcomes:?}");
}

#[tokio::test]
async fn read_back_tells_equal_different_and_missing() {
    let (sink, _dir) = sink(|_| {}).await;
    sink.write(&[envelope("S", 1, "a", "one"), envelope("S", 2, "a", "two")], DEFAULT_BUDGET).await.expect("write");
    let reader = sink.read_back().expect("the sink reads back");
    let found = reader
        .read(&[envelope("S", 1, "a", "one"), envelope("S", 2, "a", "changed"), envelope("S", 3, "a", "three")])
        .await
        .expect("reconcile");
    assert_eq!(found, [Presence::Equal, Presence::Different, Presence::Missing]);
}

#[tokio::test]
async fn a_row_keeps_where_the_message_came_from() {
    let (sink, dir) = sink(|_| {}).await;
    let message = envelope_with(
        "ORDERS",
        42,
        "orders.eu",
        Bytes::from_static(b"{}"),
        Headers::new().with("Nats-Msg-Id", "m-1"),
        1,
    );
    sink.write(&[message], DEFAULT_BUDGET).await.expect("write");
    let conn = rusqlite::Connection::open(dir.path().join("sink.db")).expect("open");
    let row: (String, i64, String, Option<String>, String) = conn
        .query_row("SELECT stream, stream_sequence, subject, message_id, headers FROM messages", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .expect("row");
    assert_eq!(row, ("ORDERS".into(), 42, "orders.eu".into(), Some("m-1".into()), r#"{"Nats-Msg-Id":"m-1"}"#.into()));
}

#[tokio::test]
async fn a_missing_table_without_create_table_stops_start_up_naming_the_field() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut config = SqliteSinkConfig::new(dir.path().join("sink.db"));
    config.create_table = false;
    // Without create_table nothing is created: not the file, and not the table.
    let error = SqliteSink::new(config.clone()).open().await.expect_err("no database");
    assert_eq!((error.class(), error.field()), (ErrorClass::Config, Some("sink.path")));
    assert!(!dir.path().join("sink.db").exists(), "the file was not created");
    drop(rusqlite::Connection::open(dir.path().join("sink.db")).expect("an empty database"));
    let error = SqliteSink::new(config).open().await.expect_err("no table");
    assert_eq!((error.class(), error.field()), (ErrorClass::Config, Some("sink.table")));
    let missing_dir = SqliteSink::new(SqliteSinkConfig::new(dir.path().join("nowhere/sink.db")));
    let error = missing_dir.open().await.expect_err("no directory");
    assert_eq!((error.class(), error.field()), (ErrorClass::Config, Some("sink.path")));
}
