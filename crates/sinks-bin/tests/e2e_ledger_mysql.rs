//! `nats-sink reconcile` and `nats-sink replay` with the MySQL sink against a private
//! JetStream server and MariaDB: rows deleted and altered behind the sink's back are reported
//! with their sequences (bulk key lookup), replay brings the missing rows back, and reconcile
//! comes back clean. Fails when no MariaDB can be started.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::json;
use sink_mysql::certify::{TestServer, unique_table};
use sinks_testkit::{stream_with_subjects, unique, wait_until};
use support::{Sink, env, findings, json, nats_sink, text};

#[tokio::test]
async fn reconcile_reports_deleted_and_altered_rows_and_replay_repairs_them() {
    const TEST: &str = "reconcile_reports_deleted_and_altered_rows_and_replay_repairs_them";
    let server = sinks_testkit::shared_mysql()
        .map(|a| TestServer::new(a.host, a.port))
        .unwrap_or_else(|reason| sinks_testkit::cannot_run(TEST, reason));
    let mut db = server.admin().await.unwrap_or_else(|reason| sinks_testkit::cannot_run(TEST, reason));
    let e = env().await;
    let ledger = unique("LEDGER");
    let ledger_subject = format!("{}.receipts", ledger.to_lowercase());
    stream_with_subjects(&e.js, &ledger, &[&ledger_subject]).await;
    let table = unique_table("ledger");
    let total = 10_000u64;
    e.publish(total as usize, json).await;
    let sink = json!({"type": "mysql", "host": server.host, "port": server.port, "database": "test", "user": "root",
                      "table": table, "auto_create": true});
    let config = e.write_config_json(
        sink,
        json!({"delivery": {"batch_size": 500}, "ledger": {"enabled": true, "subject": ledger_subject}}),
    );
    let run = Sink::start(&config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(300), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let cfg = config.to_str().unwrap();

    let clean = nats_sink(&["reconcile", cfg], e.dir.path());
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean));
    assert!(text(&clean).contains("present_equal=10000 missing=0 conflict=0"), "{}", text(&clean));

    db.query_drop(format!("DELETE FROM `{table}` WHERE STREAM_SEQUENCE IN (17, 4000, 9999)")).await.unwrap();
    let original: String = db
        .query_first(format!("SELECT PAYLOAD_JSON FROM `{table}` WHERE STREAM_SEQUENCE = 5000"))
        .await
        .unwrap()
        .unwrap();
    db.query_drop(format!(r#"UPDATE `{table}` SET PAYLOAD_JSON = '{{"order":-1}}' WHERE STREAM_SEQUENCE = 5000"#))
        .await
        .unwrap();

    let out = nats_sink(&["reconcile", cfg, "--format", "json", "--repair"], e.dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = findings(&out);
    let want: Vec<(u64, String)> = [(17, "missing"), (4000, "missing"), (5000, "conflict"), (9999, "missing")]
        .map(|(s, c)| (s, c.to_owned()))
        .into();
    assert_eq!(findings, want, "exactly the four, with their sequences");
    assert_eq!(doc["findings"][0]["destination"]["table"], table.as_str());
    let repair: Vec<&str> = doc["repair"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(repair.len(), 3, "{repair:?}");

    for seq in ["17", "4000", "9999"] {
        let out = nats_sink(&["replay", cfg, "--from-seq", seq, "--to-seq", seq], e.dir.path());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(text(&out).contains("committed=1"), "{}", text(&out));
    }
    db.exec_drop(format!("UPDATE `{table}` SET PAYLOAD_JSON = ? WHERE STREAM_SEQUENCE = 5000"), (original,))
        .await
        .unwrap();
    let out = nats_sink(&["reconcile", cfg], e.dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let _ = db.query_drop(format!("DROP TABLE IF EXISTS `{table}`")).await;
}
