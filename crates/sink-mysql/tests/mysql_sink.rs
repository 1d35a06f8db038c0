//! The MySQL sink's modes and policies on a live server (the run's private MariaDB): duplicates
//! in every keyed mode, `append`, conflict policies, table routes in one transaction,
//! payload-field keys, and a rejected row that fails alone without hiding duplicates
//! (reference W2). Each test uses its own tables, and fails when MariaDB is unreachable.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use mysql_async::prelude::Queryable;
use serde_json::json;
use sink_mysql::certify::{TestServer, unique_table};
use sink_mysql::{MySqlSink, MySqlSinkConfig, quoted_table};
use sinks_contract::config::SinkSection;
use sinks_contract::testing::{classes, envelope_with, error_of, write};
use sinks_contract::{ConflictResolution, Envelope, Headers, MessageOutcome, OutcomeClass, Sink};

/// A table name and an admin connection; fails `test` when there is no MariaDB.
async fn setup(test: &str) -> (mysql_async::Conn, String) {
    let admin = async { server()?.admin().await };
    match admin.await {
        Ok(c) => (c, unique_table("it")),
        Err(reason) => sinks_testkit::cannot_run(test, reason),
    }
}

/// The test server (the run's shared MariaDB, or one started for this process).
fn server() -> Result<TestServer, String> {
    sinks_testkit::shared_mysql().map(|a| TestServer::new(a.host, a.port))
}

async fn sink(table: &str, extra: serde_json::Value) -> MySqlSink {
    let server = server().unwrap();
    let mut v = json!({"type": "mysql", "host": server.host, "port": server.port, "database": "test", "user": "root",
                       "table": table, "auto_create": true});
    if let (Some(base), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
        base.extend(e);
    }
    let serde_json::Value::Object(m) = v else { unreachable!() };
    let sink = MySqlSink::new(MySqlSinkConfig::from_section(&SinkSection(m)).unwrap()).unwrap();
    sink.open().await.unwrap();
    sink
}

fn env(seq: u64, subject: &str, payload: &str) -> Envelope {
    envelope_with("IT", seq, subject, payload.to_owned(), Headers::new().with("Nats-Msg-Id", format!("id-{seq}")), 1)
}

fn redelivered(e: &Envelope) -> Envelope {
    let js = e.jetstream();
    envelope_with(&js.stream, js.stream_sequence, e.subject(), e.payload().clone(), e.headers().clone(), 2)
}

async fn payloads(c: &mut mysql_async::Conn, table: &str) -> Vec<(u64, String)> {
    c.query(format!("SELECT STREAM_SEQUENCE, PAYLOAD_JSON FROM {} ORDER BY STREAM_SEQUENCE", quoted_table(table)))
        .await
        .unwrap()
}

async fn drop(c: &mut mysql_async::Conn, tables: &[&str]) {
    for t in tables {
        c.query_drop(format!("DROP TABLE IF EXISTS {}", quoted_table(t))).await.unwrap();
    }
}

#[tokio::test]
async fn insert_ignore_reports_duplicates_and_a_rejected_row_alone() {
    let (mut c, table) = setup("insert_ignore_reports_duplicates_and_a_rejected_row_alone").await;
    let s = sink(&table, json!({"mode": "insert_ignore"})).await;
    c.query_drop(format!("ALTER TABLE {} MODIFY `SUBJECT` varchar(12) NOT NULL", quoted_table(&table))).await.unwrap();
    let first = env(1, "it.a", r#"{"v":1}"#);
    assert_eq!(classes(&write(&s, std::slice::from_ref(&first)).await), [OutcomeClass::Committed]);
    let batch = [env(2, "it.a", r#"{"v":2}"#), redelivered(&first), env(3, "it.subject.far.too.long", r#"{"v":3}"#)];
    let outcomes = write(&s, &batch).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed, OutcomeClass::Duplicate, OutcomeClass::FailedPermanent]);
    assert!(error_of(&outcomes[2]).message().contains("1406"), "{}", error_of(&outcomes[2]).message());
    assert_eq!(payloads(&mut c, &table).await, [(1, r#"{"v":1}"#.to_owned()), (2, r#"{"v":2}"#.to_owned())]);
    drop(&mut c, &[&table]).await;
}

#[tokio::test]
async fn insert_mode_treats_a_redelivery_as_a_duplicate_and_append_keeps_every_delivery() {
    let (mut c, table) = setup("insert_mode_and_append").await;
    let insert = sink(&table, json!({"mode": "insert"})).await;
    let e = env(1, "it.a", r#"{"v":1}"#);
    write(&insert, std::slice::from_ref(&e)).await;
    assert_eq!(classes(&write(&insert, &[redelivered(&e)]).await), [OutcomeClass::Duplicate]);
    let log = format!("{table}_log");
    let append = sink(&log, json!({"mode": "append"})).await;
    assert!(!append.capabilities().reports_duplicates);
    for _ in 0..2 {
        assert_eq!(classes(&write(&append, std::slice::from_ref(&e)).await), [OutcomeClass::Committed]);
    }
    assert_eq!(payloads(&mut c, &log).await.len(), 2, "append writes every delivery");
    drop(&mut c, &[&table, &log]).await;
}

/// True for the refusal of a different event under a stream-sequence key.
fn reused(o: &MessageOutcome) -> bool {
    matches!(o, MessageOutcome::Failed(e) if e.is_permanent() && e.reason() == Some(sinks_contract::existing::SEQUENCE_REUSED))
}

/// Under message id keys the conflict policies decide what a different payload does.
#[tokio::test]
async fn conflict_policies_keep_overwrite_or_reject() {
    let (mut c, base) = setup("conflict_policies_keep_overwrite_or_reject").await;
    for (policy, expected, stored) in [
        ("keep_first", ConflictResolution::KeptExisting, r#"{"v":"first"}"#),
        ("overwrite", ConflictResolution::Overwritten, r#"{"v":"second"}"#),
        ("dead_letter", ConflictResolution::Rejected, r#"{"v":"first"}"#),
    ] {
        let table = format!("{base}_{policy}");
        let s = sink(&table, json!({"conflict_policy": policy, "idempotency": {"strategy": "message_id"}})).await;
        write(&s, &[env(1, "it.a", r#"{"v":"first"}"#)]).await;
        let same = write(&s, &[redelivered(&env(1, "it.a", r#"{"v":"first"}"#))]).await;
        assert_eq!(classes(&same), [OutcomeClass::Duplicate], "{policy}: same content is a duplicate");
        let changed = write(&s, &[redelivered(&env(1, "it.a", r#"{"v":"second"}"#))]).await;
        assert!(matches!(changed[0], MessageOutcome::Conflict(r) if r == expected), "{policy}: {:?}", changed[0]);
        assert_eq!(payloads(&mut c, &table).await, [(1, stored.to_owned())], "{policy}");
        drop(&mut c, &[&table]).await;
    }
}

/// Under the default stream-sequence keys a different payload is a reused sequence: refused
/// and never written over, whatever the conflict policy and mode; a later epoch of the
/// stream keys its rows apart (`IT.e2` in the stream column).
#[tokio::test]
async fn a_reused_stream_sequence_is_refused_whatever_the_policy() {
    let (mut c, base) = setup("a_reused_stream_sequence_is_refused_whatever_the_policy").await;
    for (i, extra) in [
        json!({"conflict_policy": "keep_first"}),
        json!({"conflict_policy": "overwrite"}),
        json!({"conflict_policy": "dead_letter", "mode": "insert"}),
    ]
    .into_iter()
    .enumerate()
    {
        let table = format!("{base}_{i}");
        let s = sink(&table, extra.clone()).await;
        assert!(s.capabilities().detects_conflicts);
        write(&s, &[env(1, "it.a", r#"{"v":"first"}"#)]).await;
        let same = write(&s, &[redelivered(&env(1, "it.a", r#"{"v":"first"}"#))]).await;
        assert_eq!(classes(&same), [OutcomeClass::Duplicate], "{extra}");
        // First delivery (fast path) and redelivery (slow path) of another event.
        for other in [env(1, "it.a", r#"{"v":"second"}"#), redelivered(&env(1, "it.a", r#"{"v":"second"}"#))] {
            let outcomes = write(&s, &[other, env(2, "it.a", r#"{"v":2}"#)]).await;
            assert!(reused(&outcomes[0]), "{extra}: {outcomes:?}");
        }
        assert_eq!(payloads(&mut c, &table).await, [(1, r#"{"v":"first"}"#.to_owned()), (2, r#"{"v":2}"#.to_owned())]);
        let later = env(1, "it.a", r#"{"v":"second"}"#).with_stream_epoch(Some("e2".into()));
        assert_eq!(classes(&write(&s, std::slice::from_ref(&later)).await), [OutcomeClass::Committed], "{extra}");
        assert_eq!(
            classes(&write(&s, &[redelivered(&later).with_stream_epoch(Some("e2".into()))]).await),
            [OutcomeClass::Duplicate]
        );
        let streams: Vec<(String, u64)> = c
            .query(format!(
                "SELECT STREAM_NAME, STREAM_SEQUENCE FROM {} ORDER BY STREAM_NAME, STREAM_SEQUENCE",
                quoted_table(&table)
            ))
            .await
            .unwrap();
        assert_eq!(streams, [("IT".to_owned(), 1), ("IT".to_owned(), 2), ("IT.e2".to_owned(), 1)], "{extra}");
        drop(&mut c, &[&table]).await;
    }
}

/// Without a conflict policy, a table that has the fingerprint column gets it written and
/// compared under stream-sequence keys: a reused sequence is refused and the upsert does not
/// update the row; a redelivery of the stored event is a duplicate. Without the column the
/// row cannot tell (the next test).
#[tokio::test]
async fn a_fingerprint_column_detects_a_reused_sequence_without_a_conflict_policy() {
    let (mut c, table) = setup("a_fingerprint_column_detects_a_reused_sequence_without_a_conflict_policy").await;
    let plain = sink(&table, json!({})).await;
    assert!(!plain.capabilities().detects_conflicts, "no fingerprint column yet");
    c.query_drop(format!("ALTER TABLE {} ADD COLUMN `PAYLOAD_SHA256` char(64)", quoted_table(&table))).await.unwrap();
    let s = sink(&table, json!({})).await;
    assert!(s.capabilities().detects_conflicts, "the column was found at open");
    assert_eq!(classes(&write(&s, &[env(1, "it.a", r#"{"v":1}"#)]).await), [OutcomeClass::Committed]);
    let fp: Vec<Option<String>> =
        c.query(format!("SELECT PAYLOAD_SHA256 FROM {}", quoted_table(&table))).await.unwrap();
    assert!(matches!(&fp[..], [Some(f)] if f.len() == 64), "the fingerprint is written: {fp:?}");
    assert_eq!(classes(&write(&s, &[redelivered(&env(1, "it.a", r#"{"v":1}"#))]).await), [OutcomeClass::Duplicate]);
    let outcomes = write(&s, &[redelivered(&env(1, "it.a", r#"{"v":2}"#))]).await;
    assert!(reused(&outcomes[0]), "{outcomes:?}");
    assert_eq!(payloads(&mut c, &table).await, [(1, r#"{"v":1}"#.to_owned())], "never updated");
    drop(&mut c, &[&table]).await;
}

#[tokio::test]
async fn routed_tables_are_written_in_one_transaction() {
    let (mut c, table) = setup("routed_tables_are_written_in_one_transaction").await;
    let other = format!("{table}_r");
    let s = sink(&table, json!({"table_routes": [{"subject": "it.special.*", "table": other}]})).await;
    c.query_drop(format!("ALTER TABLE {} MODIFY `SUBJECT` varchar(16) NOT NULL", quoted_table(&other))).await.unwrap();
    // A batch spanning both tables commits in both.
    let outcomes = write(&s, &[env(1, "it.a", "{}"), env(2, "it.special.x", "{}"), env(3, "it.b", "{}")]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed; 3]);
    assert_eq!(payloads(&mut c, &table).await.len(), 2);
    assert_eq!(payloads(&mut c, &other).await.len(), 1);
    // A row one table rejects fails alone; the rows for the other table still commit.
    let outcomes = write(&s, &[env(4, "it.a", "{}"), env(5, "it.special.much-too-long", "{}")]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed, OutcomeClass::FailedPermanent]);
    assert_eq!(payloads(&mut c, &table).await.len(), 3);
    drop(&mut c, &[&table, &other]).await;
}

#[tokio::test]
async fn payload_field_keys_identify_business_events() {
    let (mut c, table) = setup("payload_field_keys_identify_business_events").await;
    let s = sink(&table, json!({"idempotency": {"strategy": "payload_field", "payload_field": "order.id"}, "conflict_policy": "keep_first"}))
        .await;
    // The same order published twice (different stream sequences) is one row.
    let outcomes =
        write(&s, &[env(1, "it.a", r#"{"order":{"id":"A-1"}}"#), env(2, "it.a", r#"{"order":{"id":"A-1"}}"#)]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed, OutcomeClass::Duplicate]);
    let missing = write(&s, &[env(3, "it.a", r#"{"order":{}}"#)]).await;
    assert_eq!(classes(&missing), [OutcomeClass::FailedPermanent]);
    let ids: Vec<String> = c.query(format!("SELECT MESSAGE_ID FROM {}", quoted_table(&table))).await.unwrap();
    assert_eq!(ids, ["A-1"]);
    drop(&mut c, &[&table]).await;
}

/// Without a fingerprint column the row cannot tell a redelivery from a reused sequence:
/// the upsert applies its update columns, as the reference does (the stream guard is the
/// protection, docs/mysql-sink.md).
#[tokio::test]
async fn upsert_without_a_fingerprint_applies_its_update_columns() {
    let (mut c, table) = setup("upsert_without_a_fingerprint_applies_its_update_columns").await;
    let s = sink(&table, json!({"upsert_update_columns": ["PAYLOAD_JSON"]})).await;
    write(&s, &[env(1, "it.a", r#"{"v":1}"#)]).await;
    let outcomes = write(&s, &[redelivered(&env(1, "it.a", r#"{"v":2}"#))]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Duplicate]);
    assert_eq!(payloads(&mut c, &table).await, [(1, r#"{"v":2}"#.to_owned())], "the reference's upsert semantics");
    drop(&mut c, &[&table]).await;
}
