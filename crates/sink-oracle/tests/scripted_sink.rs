//! The Oracle sink's modes, policies and failure handling against the scripted driver seam:
//! per-row outcomes in every mode (a rejected row fails alone, never the reference's "ORA-00001
//! means the whole batch succeeded", W2), conflict policies, routes in one transaction, the
//! staging path and its fallback, the ORA-code classes at start-up and at run time, and the
//! real driver's DPI-1047 (no Instant Client on this machine).
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use sinks_contract::testing::SinkExt as _;
use std::sync::Arc;

use serde_json::json;
use sink_oracle::certify::{ScriptedHarness, unique_table};
use sink_oracle::driver::scripted::{Fault, FaultPoint, RowRule, ScriptedDriver};
use sink_oracle::driver::{DbError, DriverError, Value};
use sink_oracle::{OracleSink, OracleSinkConfig};
use sinks_contract::testing::{classes, envelope_with, error_of};
use sinks_contract::{
    ConflictResolution, DestinationRef, Envelope, ErrorClass, Headers, MessageOutcome, OutcomeClass, Presence, Sink,
};

fn env(seq: u64, subject: &str, payload: &str) -> Envelope {
    envelope_with("IT", seq, subject, payload.to_owned(), Headers::new().with("Nats-Msg-Id", format!("id-{seq}")), 1)
}

fn redelivered(e: &Envelope) -> Envelope {
    let js = e.jetstream();
    envelope_with(&js.stream, js.stream_sequence, e.subject(), e.payload().clone(), e.headers().clone(), 2)
}

async fn write(s: &OracleSink, batch: &[Envelope]) -> Vec<MessageOutcome> {
    s.write(batch, sinks_contract::DEFAULT_BUDGET).await.unwrap()
}

fn payloads(d: &ScriptedDriver, table: &str) -> Vec<(u64, String)> {
    let mut rows: Vec<(u64, String)> = d
        .committed(table)
        .into_iter()
        .map(|r| {
            let seq = r["STREAM_SEQUENCE"].clone().unwrap().parse().unwrap();
            (seq, r["PAYLOAD_JSON"].clone().unwrap())
        })
        .collect();
    rows.sort();
    rows
}

fn ora(code: i32, message: &str) -> DriverError {
    DriverError::Db(DbError::new(code, 0, message))
}

#[tokio::test]
async fn insert_ignore_reports_duplicates_and_a_rejected_row_alone() {
    let table = unique_table("it");
    let (s, d) =
        ScriptedHarness::sink(&table, json!({"mode": "insert_ignore", "conflict_policy": null})).await.unwrap();
    d.reject_rows(RowRule::too_large(Some(&table), "SUBJECT", 12));
    let first = env(1, "it.a", r#"{"v":1}"#);
    assert_eq!(classes(&write(&s, std::slice::from_ref(&first)).await), [OutcomeClass::Committed]);
    let batch = [env(2, "it.a", r#"{"v":2}"#), redelivered(&first), env(3, "it.subject.far.too.long", r#"{"v":3}"#)];
    let outcomes = write(&s, &batch).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed, OutcomeClass::Duplicate, OutcomeClass::FailedPermanent]);
    assert!(error_of(&outcomes[2]).message().contains("ORA-12899"), "{}", error_of(&outcomes[2]).message());
    assert_eq!(payloads(&d, &table), [(1, r#"{"v":1}"#.to_owned()), (2, r#"{"v":2}"#.to_owned())]);
    // One array MERGE for the batch (batch errors and row counts), then one commit.
    let calls: Vec<&str> = d.recorded().iter().rev().take(2).map(|r| r.call).collect();
    assert_eq!(calls, ["commit", "array"]);
}

#[tokio::test]
async fn insert_mode_reports_a_redelivery_as_a_duplicate_and_another_unique_key_as_data() {
    let table = unique_table("it");
    let (s, d) = ScriptedHarness::sink(&table, json!({"mode": "insert", "conflict_policy": null})).await.unwrap();
    let e = env(1, "it.a", r#"{"v":1}"#);
    write(&s, std::slice::from_ref(&e)).await;
    assert_eq!(classes(&write(&s, &[redelivered(&e)]).await), [OutcomeClass::Duplicate]);
    assert!(d.recorded().iter().any(|r| r.sql.starts_with("INSERT INTO")), "insert mode sends the plain INSERT");
    // ORA-00001 naming a constraint that is not the key: that row's data, permanently.
    d.reject_rows(RowRule {
        table: Some(table.clone()),
        column: "MESSAGE_ID".into(),
        longer_than: None,
        contains: Some("dup-order".into()),
        code: 1,
        message: "ORA-00001: unique constraint (APP.ORDERS_UK) violated".into(),
    });
    let other = envelope_with("IT", 2, "it.a", "{}", Headers::new().with("Nats-Msg-Id", "dup-order"), 1);
    let outcomes = write(&s, &[other, env(3, "it.a", "{}")]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::FailedPermanent, OutcomeClass::Committed]);
    assert!(error_of(&outcomes[0]).message().contains("APP.ORDERS_UK"));
}

#[tokio::test]
async fn append_keeps_every_delivery_and_reports_no_duplicates() {
    let table = unique_table("it");
    let (s, d) = ScriptedHarness::sink(&table, json!({"mode": "append", "conflict_policy": null})).await.unwrap();
    assert!(!s.capabilities().reports_duplicates);
    let e = env(1, "it.a", "{}");
    for _ in 0..2 {
        assert_eq!(classes(&write(&s, std::slice::from_ref(&e)).await), [OutcomeClass::Committed]);
    }
    assert_eq!(d.committed(&table).len(), 2);
    assert!(d.recorded().iter().any(|r| r.sql.starts_with("INSERT /*+ append */ INTO")));
}

/// True for the refusal of a different event under a stream-sequence key.
fn reused(o: &MessageOutcome) -> bool {
    matches!(o, MessageOutcome::Failed(e) if e.is_permanent() && e.reason() == Some(sinks_contract::existing::SEQUENCE_REUSED))
}

/// Under message id keys the conflict policies decide what a different payload does.
#[tokio::test]
async fn conflict_policies_keep_overwrite_or_reject() {
    for (policy, expected, stored) in [
        ("keep_first", ConflictResolution::KeptExisting, r#"{"v":"first"}"#),
        ("overwrite", ConflictResolution::Overwritten, r#"{"v":"second"}"#),
        ("dead_letter", ConflictResolution::Rejected, r#"{"v":"first"}"#),
    ] {
        let table = unique_table("it");
        let by_id =
            json!({"conflict_policy": policy, "idempotency": {"strategy": "message_id", "columns": ["MESSAGE_ID"]}});
        let (s, d) = ScriptedHarness::sink(&table, by_id).await.unwrap();
        write(&s, &[env(1, "it.a", r#"{"v":"first"}"#)]).await;
        let same = write(&s, &[redelivered(&env(1, "it.a", r#"{"v":"first"}"#))]).await;
        assert_eq!(classes(&same), [OutcomeClass::Duplicate], "{policy}: same content is a duplicate");
        let changed = write(&s, &[redelivered(&env(1, "it.a", r#"{"v":"second"}"#))]).await;
        assert!(matches!(changed[0], MessageOutcome::Conflict(r) if r == expected), "{policy}: {:?}", changed[0]);
        assert_eq!(payloads(&d, &table), [(1, stored.to_owned())], "{policy}");
    }
}

/// Under the default stream-sequence keys a different payload is a reused sequence: refused
/// and never written over, whatever the policy; a row whose fingerprint is null cannot be
/// compared and is a duplicate (not a reused sequence); a later epoch keys its rows apart.
#[tokio::test]
async fn a_reused_stream_sequence_is_refused_whatever_the_policy() {
    for policy in ["keep_first", "overwrite", "dead_letter"] {
        let table = unique_table("it");
        let (s, d) = ScriptedHarness::sink(&table, json!({"conflict_policy": policy})).await.unwrap();
        write(&s, &[env(1, "it.a", r#"{"v":"first"}"#), env(2, "it.a", r#"{"v":2}"#)]).await;
        for other in [env(1, "it.a", r#"{"v":"second"}"#), redelivered(&env(1, "it.a", r#"{"v":"second"}"#))] {
            let outcomes = write(&s, &[other]).await;
            assert!(reused(&outcomes[0]), "{policy}: {outcomes:?}");
        }
        assert_eq!(payloads(&d, &table), [(1, r#"{"v":"first"}"#.to_owned()), (2, r#"{"v":2}"#.to_owned())]);
        // A row written without a fingerprint (null) cannot be compared.
        assert_eq!(d.update_committed(&table, "STREAM_SEQUENCE", "2", "PAYLOAD_SHA256", Value::Text(None)), 1);
        let outcomes = write(&s, &[redelivered(&env(2, "it.a", r#"{"v":"other"}"#))]).await;
        let want = if policy == "dead_letter" { OutcomeClass::FailedPermanent } else { OutcomeClass::Duplicate };
        assert_eq!(classes(&outcomes), [want], "{policy}: {outcomes:?}");
        assert!(!reused(&outcomes[0]), "{policy}: a null fingerprint is not a reused sequence");
        let later = env(1, "it.a", r#"{"v":"second"}"#).with_stream_epoch(Some("e2".into()));
        assert_eq!(classes(&write(&s, std::slice::from_ref(&later)).await), [OutcomeClass::Committed], "{policy}");
        let streams: Vec<Option<String>> = d.committed(&table).into_iter().map(|r| r["STREAM_NAME"].clone()).collect();
        assert!(streams.contains(&Some("IT.e2".to_owned())), "{policy}: {streams:?}");
    }
}

/// Without a conflict policy, a table that has the fingerprint column (here made by a sink
/// with one) gets it written and compared under stream-sequence keys: a reused sequence is
/// refused and the merge does not update the row. A table without it cannot tell.
#[tokio::test]
async fn a_fingerprint_column_detects_a_reused_sequence_without_a_conflict_policy() {
    let table = unique_table("it");
    let (with_policy, d) = ScriptedHarness::sink(&table, json!({})).await.unwrap();
    drop(with_policy);
    let config = ScriptedHarness::config(&table, json!({"conflict_policy": null, "auto_create": false})).unwrap();
    let s = OracleSink::with_driver(config, Arc::new(d.clone())).unwrap();
    assert!(!s.capabilities().detects_conflicts, "not known before open");
    s.open().await.unwrap();
    assert!(s.capabilities().detects_conflicts, "the column was found at open");
    assert_eq!(classes(&write(&s, &[env(1, "it.a", r#"{"v":1}"#)]).await), [OutcomeClass::Committed]);
    assert!(d.committed(&table)[0]["PAYLOAD_SHA256"].as_ref().is_some_and(|f| f.len() == 64), "written");
    assert_eq!(classes(&write(&s, &[redelivered(&env(1, "it.a", r#"{"v":1}"#))]).await), [OutcomeClass::Duplicate]);
    let outcomes = write(&s, &[redelivered(&env(1, "it.a", r#"{"v":2}"#))]).await;
    assert!(reused(&outcomes[0]), "{outcomes:?}");
    assert_eq!(payloads(&d, &table), [(1, r#"{"v":1}"#.to_owned())], "never updated");

    let plain = unique_table("it");
    let (s, d) = ScriptedHarness::sink(&plain, json!({"conflict_policy": null})).await.unwrap();
    assert!(!s.capabilities().detects_conflicts);
    write(&s, &[env(1, "it.a", r#"{"v":1}"#)]).await;
    let outcomes = write(&s, &[redelivered(&env(1, "it.a", r#"{"v":2}"#))]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Duplicate], "no fingerprint: the row cannot tell");
    assert_eq!(payloads(&d, &plain), [(1, r#"{"v":2}"#.to_owned())], "the merge applies its update columns");
}

#[tokio::test]
async fn merge_updates_an_existing_key_with_its_update_columns() {
    let table = unique_table("it");
    let (s, d) =
        ScriptedHarness::sink(&table, json!({"conflict_policy": null, "merge_update_columns": ["PAYLOAD_JSON"]}))
            .await
            .unwrap();
    write(&s, &[env(1, "it.a", r#"{"v":1}"#)]).await;
    assert_eq!(classes(&write(&s, &[redelivered(&env(1, "it.a", r#"{"v":2}"#))]).await), [OutcomeClass::Duplicate]);
    assert_eq!(payloads(&d, &table), [(1, r#"{"v":2}"#.to_owned())], "the reference's merge semantics");
    let update = d.recorded().into_iter().find(|r| r.sql.starts_with("UPDATE")).unwrap();
    assert_eq!(
        update.sql,
        format!("UPDATE \"{table}\" SET \"PAYLOAD_JSON\" = :1 WHERE \"STREAM_NAME\" = :2 AND \"STREAM_SEQUENCE\" = :3")
    );
    // `[]`: an existing key is left as it is.
    let keep = unique_table("it");
    let (s, d) =
        ScriptedHarness::sink(&keep, json!({"conflict_policy": null, "merge_update_columns": []})).await.unwrap();
    write(&s, &[env(1, "it.a", r#"{"v":1}"#)]).await;
    assert_eq!(classes(&write(&s, &[redelivered(&env(1, "it.a", r#"{"v":2}"#))]).await), [OutcomeClass::Duplicate]);
    assert_eq!(payloads(&d, &keep), [(1, r#"{"v":1}"#.to_owned())]);
}

#[tokio::test]
async fn routed_tables_are_written_in_one_transaction() {
    let table = unique_table("it");
    let other = format!("{table}_R");
    let (s, d) = ScriptedHarness::sink(&table, json!({"table_routes": [{"subject": "it.special.*", "table": other}]}))
        .await
        .unwrap();
    d.reject_rows(RowRule::too_large(Some(&other), "SUBJECT", 16));
    let outcomes = write(&s, &[env(1, "it.a", "{}"), env(2, "it.special.x", "{}"), env(3, "it.b", "{}")]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed; 3]);
    assert_eq!((d.committed(&table).len(), d.committed(&other).len()), (2, 1));
    assert_eq!(d.recorded().iter().filter(|r| r.call == "commit").count(), 1, "one commit for both tables");
    // A row one table rejects fails alone; the other table's row commits in the same transaction.
    let outcomes = write(&s, &[env(4, "it.a", "{}"), env(5, "it.special.much-too-long", "{}")]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed, OutcomeClass::FailedPermanent]);
    // A connection lost while writing the second table: nothing of the batch is committed.
    d.fail(Fault {
        point: FaultPoint::Statement(format!("\"{other}\"")),
        error: ora(3113, "ORA-03113: end-of-file on communication channel"),
        times: 1,
    });
    let err = s
        .write(&[env(6, "it.a", "{}"), env(7, "it.special.y", "{}")], sinks_contract::DEFAULT_BUDGET)
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Temporary);
    assert!(!payloads(&d, &table).iter().any(|(seq, _)| *seq == 6), "rolled back with its batch");
}

#[tokio::test]
async fn payload_field_keys_identify_business_events_within_one_batch() {
    let table = unique_table("it");
    let idem = json!({"idempotency": {"strategy": "payload_field", "payload_field": "order.id"}});
    let (s, d) = ScriptedHarness::sink(&table, idem).await.unwrap();
    let outcomes = write(
        &s,
        &[
            env(1, "it.a", r#"{"order":{"id":"A-1"}}"#),
            env(2, "it.a", r#"{"order":{"id":"A-1"}}"#),
            env(3, "it.a", r#"{"order":{"id":"A-1"},"x":1}"#),
            env(4, "it.a", r#"{"order":{}}"#),
        ],
    )
    .await;
    assert_eq!(
        classes(&outcomes),
        [OutcomeClass::Committed, OutcomeClass::Duplicate, OutcomeClass::Conflict, OutcomeClass::FailedPermanent]
    );
    assert_eq!(d.committed(&table).len(), 1);
}

#[tokio::test]
async fn deadlocks_are_retried_in_place_and_commit_failures_are_temporary() {
    let table = unique_table("it");
    let (s, d) = ScriptedHarness::sink(&table, json!({})).await.unwrap();
    d.fail(Fault {
        point: FaultPoint::Statement("MERGE".into()),
        error: ora(60, "ORA-00060: deadlock detected"),
        times: 2,
    });
    assert_eq!(classes(&write(&s, &[env(1, "it.a", "{}")]).await), [OutcomeClass::Committed]);
    assert_eq!(
        d.recorded().iter().filter(|r| r.call == "rollback").count(),
        2,
        "two attempts rolled back, the third committed"
    );
    d.fail(Fault {
        point: FaultPoint::Commit,
        error: ora(3113, "ORA-03113: end-of-file on communication channel"),
        times: 1,
    });
    let err = s.write(&[env(2, "it.a", "{}")], sinks_contract::DEFAULT_BUDGET).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Temporary);
    assert_eq!(payloads(&d, &table).len(), 1);
    // At run time a configuration error (the table was dropped) is never permanent.
    d.fail(Fault {
        point: FaultPoint::Statement("MERGE".into()),
        error: ora(942, "ORA-00942: table or view does not exist"),
        times: 1,
    });
    let err = s.write(&[env(3, "it.a", "{}")], sinks_contract::DEFAULT_BUDGET).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Config);
    assert!(err.message().contains("ORA-00942"));
}

#[tokio::test]
async fn staging_moves_a_batch_with_one_merge_and_falls_back_on_data_errors() {
    let table = unique_table("it");
    let stage = format!("{table}_STAGE");
    let staging = json!({"conflict_policy": null, "staging": {"enabled": true, "table": stage}});
    let (s, d) = ScriptedHarness::sink(&table, staging).await.unwrap();
    let first = env(1, "it.a", r#"{"v":1}"#);
    write(&s, std::slice::from_ref(&first)).await;
    d.clear_recorded();
    let outcomes = write(&s, &[env(2, "it.a", "{}"), redelivered(&first), env(3, "it.a", "{}")]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed, OutcomeClass::Duplicate, OutcomeClass::Committed]);
    let sql: Vec<String> =
        d.recorded().iter().map(|r| r.sql.split(' ').take(3).collect::<Vec<_>>().join(" ")).collect();
    assert_eq!(
        sql,
        [
            format!("INSERT INTO \"{stage}\""),
            "SELECT source.\"STREAM_NAME\", source.\"STREAM_SEQUENCE\"".into(),
            format!("MERGE INTO \"{table}\""),
            format!("DELETE FROM \"{stage}\""),
            String::new()
        ]
    );
    assert!(d.committed(&stage).is_empty(), "staged rows deleted before the commit");
    assert_eq!(payloads(&d, &table).len(), 3);
    // The merge fails on data (a narrower target column): the batch is written directly and
    // only the bad row fails.
    d.fail(Fault {
        point: FaultPoint::Statement(format!("MERGE INTO \"{table}\" target USING (SELECT \"STREAM_NAME\"")),
        error: ora(12899, "ORA-12899: value too large for column \"APP\".\"T\".\"SUBJECT\" (actual: 30, maximum: 20)"),
        times: 1,
    });
    d.reject_rows(RowRule::too_large(Some(&table), "SUBJECT", 20));
    let outcomes = write(&s, &[env(4, "it.a", "{}"), env(5, "it.subject.longer.than.twenty", "{}")]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed, OutcomeClass::FailedPermanent]);
}

#[tokio::test]
async fn start_up_errors_are_configuration_errors() {
    // A missing table without auto_create.
    let config = ScriptedHarness::config("NO_SUCH_TABLE", json!({"auto_create": false})).unwrap();
    let s = OracleSink::with_driver(config, Arc::new(ScriptedDriver::new())).unwrap();
    let err = s.open().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Config);
    assert!(err.message().contains("ORA-00942") && err.message().contains("nats-sink ddl"), "{}", err.message());
    // Wrong credentials.
    let d = ScriptedDriver::new();
    d.fail(Fault {
        point: FaultPoint::Connect,
        error: ora(1017, "ORA-01017: invalid username/password; logon denied"),
        times: 1,
    });
    let s = OracleSink::with_driver(ScriptedHarness::config("T", json!({})).unwrap(), Arc::new(d)).unwrap();
    assert_eq!(s.open().await.unwrap_err().class(), ErrorClass::Config);
    // A table whose key columns carry no unique constraint.
    let d = ScriptedDriver::new();
    let cfg = ScriptedHarness::config("NO_KEY", json!({"auto_create": false, "conflict_policy": null})).unwrap();
    let plan_columns = [
        "STREAM_NAME",
        "STREAM_SEQUENCE",
        "SUBJECT",
        "MESSAGE_ID",
        "PRIORITY",
        "CLASSIFICATION",
        "LABELS",
        "MESSAGE_CREATED_AT_EPOCH_NS",
        "JETSTREAM_TIMESTAMP_EPOCH_NS",
        "RECEIVED_AT_EPOCH_NS",
        "STORED_AT_EPOCH_NS",
        "PAYLOAD_JSON",
        "HEADERS_JSON",
        "METADATA_JSON",
        "MISSION_METADATA_JSON",
        "SECURITY_LABELS_JSON",
    ];
    d.create_table("NO_KEY", &plan_columns.map(str::to_owned), &[]);
    let s = OracleSink::with_driver(cfg, Arc::new(d)).unwrap();
    let err = s.open().await.unwrap_err();
    assert!(err.message().contains("no PRIMARY KEY or UNIQUE constraint"), "{}", err.message());
}

#[tokio::test]
async fn auto_create_follows_the_mapping_and_sessions_disable_parallel_dml() {
    let table = unique_table("it");
    let extra =
        json!({"columns": {"payload": "BODY"}, "idempotency": {"strategy": "message_id"}, "conflict_policy": null});
    let (s, d) = ScriptedHarness::sink(&table, extra).await.unwrap();
    let ddl = s.ddl().remove(0);
    assert!(
        ddl.contains("\"BODY\" JSON")
            && ddl.contains(&format!("CONSTRAINT \"{table}_PK\" PRIMARY KEY (\"MESSAGE_ID\")")),
        "{ddl}"
    );
    assert!(d.recorded().iter().any(|r| r.sql == "ALTER SESSION DISABLE PARALLEL DML"));
    let e = envelope_with("IT", 1, "it.a", "{}", Headers::new().with("Nats-Msg-Id", "order-1"), 1);
    let again = envelope_with("IT", 2, "it.a", "{}", Headers::new().with("Nats-Msg-Id", "order-1"), 1);
    assert_eq!(classes(&write(&s, &[e, again]).await), [OutcomeClass::Committed, OutcomeClass::Duplicate]);
}

#[tokio::test]
async fn without_instant_client_open_is_a_configuration_error_that_says_what_to_install() {
    let v =
        json!({"type": "oracle", "dsn": "127.0.0.1:1/NOPE", "user": "u", "password_env": "NATS_SINKS_IT_ORACLE_PW"});
    let serde_json::Value::Object(m) = v else { unreachable!() };
    let config = OracleSinkConfig::from_section(&sinks_contract::config::SinkSection(m)).unwrap();
    let sink = OracleSink::new(config).unwrap().with_password("not-a-real-password");
    let err = sink.open().await.unwrap_err();
    assert!(!err.display_chain().contains("not-a-real-password"));
    if !err.message().contains("DPI-1047") {
        // Instant Client is installed (never on this project's machines): the same open then
        // meets a closed port, which can heal by itself.
        assert_eq!(err.class(), ErrorClass::Temporary, "with Instant Client: {}", err.message());
        return;
    }
    assert_eq!(err.class(), ErrorClass::Config);
    assert!(err.message().contains("Instant Client") && err.message().contains("LD_LIBRARY_PATH"), "{}", err.message());
    assert!(!err.display_chain().contains("not-a-real-password"));
}

// --- reconcile ----------------------------------------------------------------------------

/// `(sequence, presence)` of every envelope reconcile did not find equal.
fn not_equal(batch: &[Envelope], found: &[Presence]) -> Vec<(u64, Presence)> {
    assert_eq!(found.len(), batch.len());
    batch
        .iter()
        .zip(found)
        .filter(|(_, p)| **p != Presence::Equal)
        .map(|(e, p)| (e.jetstream().stream_sequence, *p))
        .collect()
}

#[tokio::test]
async fn reconcile_reports_exactly_the_deleted_and_altered_rows_by_bulk_key_lookup() {
    // The harness's table: merge, keep_first (a PAYLOAD_SHA256 column), native JSON column.
    let table = unique_table("it");
    let (s, d) = ScriptedHarness::sink(&table, json!({})).await.unwrap();
    let batch: Vec<Envelope> =
        (1..=1200u64).map(|q| env(q, "it.a", &format!(r#"{{"order":{q},"amount":2.50}}"#))).collect();
    for chunk in batch.chunks(300) {
        assert!(classes(&write(&s, chunk).await).iter().all(|c| *c == OutcomeClass::Committed));
    }
    assert!(s.read_back().is_some_and(|reads| reads.checks().contains("payload_sha256")));
    assert!(s.read_back_batch(&batch).await.unwrap().iter().all(|p| *p == Presence::Equal));

    assert_eq!(d.delete_committed(&table, "STREAM_SEQUENCE", "17"), 1);
    assert_eq!(d.delete_committed(&table, "STREAM_SEQUENCE", "1100"), 1);
    // Edited behind the sink's back: the payload changes, its fingerprint column does not.
    let edited = Value::Clob(Some(r#"{"order":651,"amount":3}"#.into()));
    assert_eq!(d.update_committed(&table, "STREAM_SEQUENCE", "651", "PAYLOAD_JSON", edited), 1);
    d.clear_recorded();
    let found = s.read_back_batch(&batch).await.unwrap();
    assert_eq!(
        not_equal(&batch, &found),
        [(17, Presence::Missing), (651, Presence::Different), (1100, Presence::Missing)]
    );
    // Three lookups of at most 500 keys (two key columns each) on one connection, nothing else:
    // no DML, no commit, no locks.
    let calls = d.recorded();
    assert!(calls.iter().all(|c| c.call == "query"), "{calls:?}");
    assert_eq!(calls.iter().map(|c| c.binds[0].len()).collect::<Vec<_>>(), [1000, 1000, 400]);
    assert!(calls[0].sql.starts_with(&format!(
        "SELECT \"STREAM_NAME\", \"STREAM_SEQUENCE\", JSON_SERIALIZE(\"PAYLOAD_JSON\" RETURNING CLOB), \"PAYLOAD_SHA256\" FROM \"{table}\" WHERE (\"STREAM_NAME\", \"STREAM_SEQUENCE\") IN ((:1, :2), (:3, :4), "
    )));
    let destination = s.destination_of(&batch[16], &MessageOutcome::Committed).unwrap();
    assert_eq!(destination, DestinationRef::Row { table: table.clone(), key: "IT/17".into() });
}

#[tokio::test]
async fn reconcile_without_a_fingerprint_column_hashes_the_clob_and_follows_routes() {
    let table = unique_table("it");
    let other = format!("{table}_R");
    let config = json!({
        "json_column_type": "clob", "conflict_policy": null,
        "table_routes": [{"subject": "it.by-id", "table": other,
                          "idempotency": {"strategy": "message_id", "columns": ["MESSAGE_ID"]}}]
    });
    let (s, d) = ScriptedHarness::sink(&table, config).await.unwrap();
    let batch: Vec<Envelope> = (1..=40u64)
        .map(|q| env(q, if q % 2 == 0 { "it.by-id" } else { "it.a" }, &format!(r#"{{"order":{q}}}"#)))
        .collect();
    assert!(classes(&write(&s, &batch).await).iter().all(|c| *c == OutcomeClass::Committed));
    assert!(s.read_back().is_some_and(|reads| reads.checks().contains("SHA-256 of its payload CLOB")));
    assert_eq!(d.delete_committed(&other, "MESSAGE_ID", "id-8"), 1);
    // The same JSON value, other text: a CLOB keeps text, so this is an edit.
    let respelled = Value::Clob(Some(r#"{ "order": 9 }"#.into()));
    assert_eq!(d.update_committed(&table, "STREAM_SEQUENCE", "9", "PAYLOAD_JSON", respelled), 1);
    let edited = Value::Clob(Some(r#"{"order":-20}"#.into()));
    assert_eq!(d.update_committed(&other, "MESSAGE_ID", "id-20", "PAYLOAD_JSON", edited), 1);
    d.clear_recorded();
    let found = s.read_back_batch(&batch).await.unwrap();
    assert_eq!(
        not_equal(&batch, &found),
        [(8, Presence::Missing), (9, Presence::Different), (20, Presence::Different)]
    );
    let sql: Vec<String> = d.recorded().into_iter().map(|c| c.sql).collect();
    assert_eq!(sql.len(), 2, "one lookup per table: {sql:?}");
    assert!(sql.iter().any(|q| q.starts_with(&format!(
        "SELECT \"MESSAGE_ID\", \"PAYLOAD_JSON\" FROM \"{other}\" WHERE \"MESSAGE_ID\" IN (:1, :2, "
    ))));
}

#[tokio::test]
async fn reconcile_in_append_mode_is_unsupported_and_a_failed_lookup_is_an_error() {
    let table = unique_table("it");
    let (s, _) = ScriptedHarness::sink(&table, json!({"mode": "append", "conflict_policy": null})).await.unwrap();
    assert!(s.read_back().is_none(), "mode append has no key to read rows back by");
    assert_eq!(
        s.read_back_text(),
        "the `oracle` sink cannot read its destination back: mode `append` has no key to look rows up by"
    );

    let table = unique_table("it");
    let (s, d) = ScriptedHarness::sink(&table, json!({})).await.unwrap();
    let batch = [env(1, "it.a", "{}")];
    write(&s, &batch).await;
    d.fail(Fault {
        point: FaultPoint::Statement("SELECT \"STREAM_NAME\"".into()),
        error: ora(3113, "ORA-03113: end-of-file on communication channel"),
        times: 1,
    });
    let err = s.read_back_batch(&batch).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Temporary, "{err}");
    assert_eq!(s.read_back_batch(&batch).await.unwrap(), [Presence::Equal]);
    // A message the sink cannot map (its payload the mode refuses) was never written.
    let (s, _) = ScriptedHarness::sink(&unique_table("it"), json!({"payload_mode": "json_only"})).await.unwrap();
    assert_eq!(s.read_back_batch(&[env(2, "it.a", "not json")]).await.unwrap(), [Presence::Missing]);
}
