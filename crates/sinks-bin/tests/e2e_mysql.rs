//! `nats-sink run` with the MySQL sink against a private JetStream server and MariaDB: rows
//! for every message, a rejected row dead-lettered alone, the reference's config running
//! unchanged on the reference's table shape, start-up configuration errors, `ddl`, and a
//! 30-second database outage that loses and duplicates nothing. Every test uses a private
//! MariaDB (the run's shared one, or one of its own) and fails when none can be started.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::time::Duration;

use bytes::Bytes;
use mysql_async::prelude::Queryable;
use serde_json::json;
use sink_mysql::certify::{TestServer, unique_table};
use sinks_testkit::{MariaDb, read_stream, stream_with_subjects, unique, wait_until};
use support::{Sink, env, json};

/// The test server (the run's shared MariaDB, or one started for this process).
fn server() -> Result<TestServer, String> {
    sinks_testkit::shared_mysql().map(|a| TestServer::new(a.host, a.port))
}

/// A `sink` section for the test server with `fields` added.
fn mysql_sink(fields: serde_json::Value) -> serde_json::Value {
    let server = server().unwrap();
    let mut sink = json!({"type": "mysql", "host": server.host, "port": server.port});
    if let (Some(base), serde_json::Value::Object(extra)) = (sink.as_object_mut(), fields) {
        base.extend(extra);
    }
    sink
}

/// The admin connection; fails `test` when there is no MariaDB.
async fn mysql_or_fail(test: &str) -> mysql_async::Conn {
    let admin = async { server()?.admin().await };
    admin.await.unwrap_or_else(|reason| sinks_testkit::cannot_run(test, reason))
}

async fn count(table: &str) -> usize {
    match server() {
        Ok(s) => s.read_table(table).await.map(|r| r.len()).unwrap_or(0),
        Err(_) => 0,
    }
}

async fn drop_table(conn: &mut mysql_async::Conn, table: &str) {
    let _ = conn.query_drop(format!("DROP TABLE IF EXISTS `{table}`")).await;
}

#[tokio::test]
async fn every_message_becomes_one_row_and_is_acked() {
    let mut db = mysql_or_fail("every_message_becomes_one_row_and_is_acked").await;
    let e = env().await;
    let table = unique_table("e2e");
    e.publish(1000, json).await;
    let sink = mysql_sink(json!({"database": "test", "user": "root", "table": table, "auto_create": true}));
    let run = Sink::start(&e.write_config_json(sink, json!({"delivery": {"batch_size": 200}})), e.dir.path(), &[]);
    let done = wait_until(Duration::from_secs(60), || async { count(&table).await == 1000 && e.settled().await }).await;
    assert!(done, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let row: (String, u64, String, Option<String>, String, String) = db
        .query_first(format!(
            "SELECT STREAM_NAME, STREAM_SEQUENCE, SUBJECT, MESSAGE_ID, PAYLOAD_JSON, METADATA_JSON FROM `{table}` WHERE STREAM_SEQUENCE = 42"
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.0, e.stream);
    assert_eq!(row.2, format!("{}.orders.k2", e.subject_root));
    assert_eq!(row.3.as_deref(), Some("msg-41"));
    assert_eq!(row.4, r#"{"order":41,"note":"ünïcode"}"#);
    let metadata: serde_json::Value = serde_json::from_str(&row.5).unwrap();
    assert_eq!(metadata["jetstream"]["stream_sequence"], 42);
    drop_table(&mut db, &table).await;
}

#[tokio::test]
async fn a_rejected_row_goes_to_the_dlq_alone() {
    let mut db = mysql_or_fail("a_rejected_row_goes_to_the_dlq_alone").await;
    let e = env().await;
    let table = unique_table("reject");
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    // The table exists with a narrow PRIORITY column: one message carries a priority that
    // does not fit, so the server rejects that row (1406) and only that row.
    let sink = mysql_sink(json!({"database": "test", "user": "root", "table": table, "auto_create": true}));
    let config = e.write_config_json(sink.clone(), json!({"dead_letter": {"enabled": true, "subject": dlq_subject}}));
    let ddl = sink_mysql::MySqlSink::new(
        sink_mysql::MySqlSinkConfig::from_section(&sinks_runtime::config::SinkSection(
            sink.as_object().unwrap().clone(),
        ))
        .unwrap(),
    )
    .unwrap()
    .ddl();
    db.query_drop(&ddl[0]).await.unwrap();
    db.query_drop(format!("ALTER TABLE `{table}` MODIFY `PRIORITY` varchar(8)")).await.unwrap();
    let msgs = (0..50)
        .map(|i| {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("msg-{i}").as_str());
            h.insert("Nats-Sinks-Priority", if i == 17 { "much-too-long-for-the-column" } else { "high" });
            (format!("{}.orders", e.subject_root), h, json(i))
        })
        .collect();
    sinks_testkit::js_publish_all(&e.js, msgs).await;
    let run = Sink::start(&config, e.dir.path(), &[]);
    let done = wait_until(Duration::from_secs(60), || async { count(&table).await == 49 && e.settled().await }).await;
    assert!(done, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let dlq = read_stream(&e.js, &dlq_stream).await;
    assert_eq!(dlq.len(), 1, "exactly one DLQ record");
    let record: serde_json::Value = serde_json::from_slice(&dlq[0].3).unwrap();
    assert_eq!(record["stream_sequence"], 18);
    assert_eq!(record["error_type"], "DataError");
    assert!(record["error"].as_str().unwrap().contains("mysql error 1406"), "{record}");
    assert!(!record["error"].as_str().unwrap().contains("much-too-long"), "server-quoted values stay out of errors");
    drop_table(&mut db, &table).await;
}

#[tokio::test]
async fn the_reference_mysql_config_runs_unchanged_on_the_reference_table() {
    let mut db = mysql_or_fail("the_reference_mysql_config_runs_unchanged_on_the_reference_table").await;
    let e = env().await;
    // A database and user of its own, holding the reference's default table shape.
    let database = unique("refdb").to_lowercase();
    let user = unique("app").to_lowercase();
    let password = format!("pw-{}", rand_suffix());
    for sql in [
        format!("CREATE DATABASE `{database}`"),
        format!("CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'"),
        format!("GRANT ALL ON `{database}`.* TO '{user}'@'%'"),
        format!(
            "CREATE TABLE `{database}`.`NATS_SINK_EVENTS` (`STREAM_NAME` varchar(255) NOT NULL, `STREAM_SEQUENCE` bigint NOT NULL, \
             `SUBJECT` text NOT NULL, `MESSAGE_ID` varchar(512), `PRIORITY` text, `CLASSIFICATION` text, `LABELS` text, \
             `RECEIVED_AT` timestamp(6) NOT NULL DEFAULT current_timestamp(6), `MESSAGE_CREATED_AT_EPOCH_NS` bigint, \
             `JETSTREAM_TIMESTAMP_EPOCH_NS` bigint, `RECEIVED_AT_EPOCH_NS` bigint NOT NULL, `STORED_AT_EPOCH_NS` bigint NOT NULL, \
             `PAYLOAD_JSON` json, `HEADERS_JSON` json, `METADATA_JSON` json, `MISSION_METADATA_JSON` json, \
             `SECURITY_LABELS_JSON` json, CONSTRAINT `NATS_SINK_EVENTS_pk` PRIMARY KEY (`STREAM_NAME`, `STREAM_SEQUENCE`))"
        ),
    ] {
        db.query_drop(sql).await.unwrap();
    }
    // The reference's own file, byte for byte; the environment points it at the test servers.
    let reference = r#"{
  "nats": {"url": "nats://localhost:4222", "stream": "ORDERS", "consumer": "oracle-mysql-orders-sink", "subject": "orders.*"},
  "sink": {"type": "mysql", "host": "127.0.0.1", "port": 3306, "database": "nats_sinks", "user": "app_user",
           "password_env": "ORACLE_MYSQL_PASSWORD", "table": "NATS_SINK_EVENTS", "mode": "upsert", "upsert_update_columns": [],
           "auto_create": true, "payload_mode": "json_or_envelope",
           "table_routes": [{"subject": "orders.priority.*", "table": "NATS_SINK_PRIORITY_EVENTS"}]}
}"#;
    let path = e.dir.path().join("reference.json");
    std::fs::write(&path, reference).unwrap();
    stream_with_subjects(&e.js, "ORDERS", &["orders.>"]).await;
    let msgs = vec![
        ("orders.created".to_owned(), async_nats::HeaderMap::new(), Bytes::from_static(br#"{"id":1}"#)),
        ("orders.created".to_owned(), async_nats::HeaderMap::new(), Bytes::from_static(b"plain text")),
    ];
    sinks_testkit::js_publish_all(&e.js, msgs).await;
    let overrides = [
        ("NATS_SINKS_NATS_URL", e.server.url()),
        ("NATS_SINKS__SINK__DATABASE", database.clone()),
        ("NATS_SINKS__SINK__USER", user.clone()),
        ("NATS_SINKS__SINK__HOST", server().unwrap().host),
        ("NATS_SINKS__SINK__PORT", server().unwrap().port.to_string()),
        ("ORACLE_MYSQL_PASSWORD", password.clone()),
    ];
    let run = Sink::start(&path, e.dir.path(), &overrides);
    let table = format!("{database}.NATS_SINK_EVENTS");
    assert!(wait_until(Duration::from_secs(30), || async { count(&table).await == 2 }).await, "{}", run.logs());
    assert!(!run.logs().contains(&password), "the password never appears in the logs");
    assert_eq!(run.terminate(), Some(0));
    let payloads: Vec<String> = db
        .query(format!("SELECT PAYLOAD_JSON FROM {} ORDER BY STREAM_SEQUENCE", sink_mysql::quoted_table(&table)))
        .await
        .unwrap();
    assert_eq!(payloads[0], r#"{"id":1}"#);
    assert!(payloads[1].contains(r#""payload":"plain text""#));
    let routed: Vec<String> = db.query(format!("SHOW TABLES FROM `{database}`")).await.unwrap();
    assert!(routed.iter().any(|t| t == "NATS_SINK_PRIORITY_EVENTS"), "auto_create made the route table: {routed:?}");
    db.query_drop(format!("DROP DATABASE `{database}`")).await.unwrap();
    db.query_drop(format!("DROP USER '{user}'@'%'")).await.unwrap();
}

fn rand_suffix() -> String {
    unique("x")
}

#[tokio::test]
async fn startup_configuration_errors_exit_2_naming_the_problem() {
    let _db = mysql_or_fail("startup_configuration_errors_exit_2_naming_the_problem").await;
    let e = env().await;
    let cases = [
        (mysql_sink(json!({"database": "test", "user": "nobody_at_all"})), "access denied"),
        (mysql_sink(json!({"database": "no_such_db_xyz", "user": "root"})), "mysql error 1049"),
        (mysql_sink(json!({"database": "test", "user": "root", "table": "no_such_table_xyz"})), "does not exist"),
    ];
    for (sink, expected) in cases {
        let config = e.write_config_json(sink, json!({}));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_nats-sink")).arg("run").arg(&config).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{expected}: {stderr}");
        assert!(stderr.contains(expected), "expected `{expected}` in {stderr}");
    }
}

#[tokio::test]
async fn ddl_prints_every_table() {
    let e = env().await;
    let sink = json!({"type": "mysql", "database": "d", "user": "u", "table": "EVENTS", "conflict_policy": "keep_first",
                      "table_routes": [{"subject": "a.*", "table": "OTHER", "idempotency": {"strategy": "message_id"}}]});
    let config = e.write_config_json(sink, json!({}));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nats-sink")).arg("ddl").arg(&config).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        stdout.contains("CREATE TABLE IF NOT EXISTS `EVENTS`")
            && stdout.contains("PRIMARY KEY (`STREAM_NAME`, `STREAM_SEQUENCE`)")
    );
    assert!(stdout.contains("CREATE TABLE IF NOT EXISTS `OTHER`") && stdout.contains("PRIMARY KEY (`MESSAGE_ID`)"));
    assert!(stdout.contains("`PAYLOAD_SHA256` char(64)"), "{stdout}");
}

#[tokio::test]
async fn mariadb_down_for_30_seconds_loses_nothing() {
    let mut db = MariaDb::start();
    let e = env().await;
    e.publish(3000, json).await;
    let sink = json!({"type": "mysql", "port": db.port(), "database": "test", "user": "root", "table": "OUTAGE", "auto_create": true});
    let run = Sink::start(&e.write_config_json(sink, json!({"delivery": {"batch_size": 50}})), e.dir.path(), &[]);
    let port = db.port();
    let rows = || async move {
        let opts = mysql_async::OptsBuilder::default().tcp_port(port).user(Some("root")).db_name(Some("test"));
        match mysql_async::Conn::new(opts).await {
            Ok(mut c) => c.query_first::<u64, _>("SELECT COUNT(*) FROM OUTAGE").await.ok().flatten().unwrap_or(0),
            Err(_) => 0,
        }
    };
    assert!(wait_until(Duration::from_secs(60), || async { rows().await >= 300 }).await, "{}", run.logs());
    db.kill();
    tokio::time::sleep(Duration::from_secs(30)).await;
    db.restart();
    let done = wait_until(Duration::from_secs(120), || async { rows().await >= 3000 && e.settled().await }).await;
    assert!(done, "{}", run.logs());
    let logs = run.logs();
    assert!(logs.contains("destination unavailable") && logs.contains("destination recovered"), "{logs}");
    assert_eq!(run.terminate(), Some(0));
    let opts = mysql_async::OptsBuilder::default().tcp_port(db.port()).user(Some("root")).db_name(Some("test"));
    let mut c = mysql_async::Conn::new(opts).await.unwrap();
    let (n, distinct, min, max): (u64, u64, u64, u64) = c
        .query_first(
            "SELECT COUNT(*), COUNT(DISTINCT STREAM_SEQUENCE), MIN(STREAM_SEQUENCE), MAX(STREAM_SEQUENCE) FROM OUTAGE",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!((n, distinct, min, max), (3000, 3000, 1, 3000), "every message exactly once");
}
