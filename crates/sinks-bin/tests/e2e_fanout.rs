//! Fan-out end to end through the binary: one consumer, a MySQL target, a file target and
//! an HTTP target. Routing by subject and by classification; a required target refusing one
//! message dead-letters only that message, naming the target; an optional target that is
//! down for the whole run costs no more than its window; kill -9 during fan-out keeps every
//! required target exact; the reference's fan-out shape (compact form) runs unchanged.
//! Every test needs the run's MariaDB and fails when none can be started.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use bytes::Bytes;
use serde_json::{Value, json};
use sink_mysql::certify::{TestServer as MySqlServer, unique_table};
use sinks_testkit::HttpTestServer as HttpServer;
use sinks_testkit::{js_publish_all, read_stream, stream_with_subjects, unique, wait_until};
use support::{Env, Sink, acked, env, records};

fn mysql() -> Result<MySqlServer, String> {
    sinks_testkit::shared_mysql().map(|a| MySqlServer::new(a.host, a.port))
}

/// The run's MariaDB; fails `test` when there is none.
async fn mysql_or_fail(test: &str) -> MySqlServer {
    let ready = async {
        let server = mysql()?;
        server.admin().await?;
        Ok::<_, String>(server)
    };
    ready.await.unwrap_or_else(|reason| sinks_testkit::cannot_run(test, reason))
}

fn mysql_target(server: &MySqlServer, table: &str) -> Value {
    json!({"type": "mysql", "host": server.host, "port": server.port, "database": "test", "user": "root",
           "table": table, "auto_create": true})
}

/// Sequences stored in a MySQL table, with how often each occurs.
async fn table_sequences(server: &MySqlServer, table: &str) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for (key, _) in server.read_table(table).await.unwrap_or_default() {
        let seq: u64 = key.rsplit(':').next().unwrap().parse().unwrap();
        *out.entry(seq).or_insert(0) += 1;
    }
    out
}

/// Sequences of the file records under `dir`, with how often each occurs.
fn file_sequences(dir: &std::path::Path) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for r in records(dir) {
        *out.entry(r["stream_sequence"].as_u64().unwrap()).or_insert(0) += 1;
    }
    out
}

/// Publishes `n` messages: `i % 3 == 0` on `<root>.orders.*`, the rest on `<root>.misc.*`;
/// every fourth classified `SECRET`; message `poison` (if any) carries the HTTP reject
/// marker.
async fn publish(e: &Env, n: usize, poison: Option<usize>) {
    let msgs = (0..n)
        .map(|i| {
            let mut h = HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("msg-{i}").as_str());
            if i % 4 == 0 {
                h.insert("Nats-Sinks-Classification", "SECRET");
            }
            let family = if i % 3 == 0 { "orders" } else { "misc" };
            let body =
                if Some(i) == poison { format!(r#"{{"n":{i},"x":"REJECT"}}"#) } else { format!(r#"{{"n":{i}}}"#) };
            (format!("{}.{family}.k{}", e.subject_root, i % 5), h, Bytes::from(body))
        })
        .collect();
    js_publish_all(&e.js, msgs).await;
}

fn is_order(i: usize) -> bool {
    i.is_multiple_of(3)
}

fn is_secret(i: usize) -> bool {
    i.is_multiple_of(4)
}

#[tokio::test]
async fn routes_by_subject_and_classification_and_dead_letters_only_the_refused_copy() {
    let test = "routes_by_subject_and_classification_and_dead_letters_only_the_refused_copy";
    let db = mysql_or_fail(test).await;
    let e = env().await;
    let hook = HttpServer::start().await.unwrap();
    hook.set_reject_marker(Some(b"REJECT"));
    let table = unique_table("fanout");
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    let total = 120;
    let poison = 33; // an order, not secret
    publish(&e, total, Some(poison)).await;
    let audit_dir = e.dir.path().join("audit");
    let extra = json!({
        "sinks": {
            "db": mysql_target(&db, &table),
            "audit": {"type": "file", "directory": audit_dir},
            "hook": {"type": "http", "url": hook.url(), "allow_http_for_local_testing": true},
        },
        "routing": {"enabled": true, "mode": "all", "no_match": "ignore", "routes": [
            {"name": "secret", "match": {"classification": ["SECRET"]}, "targets": ["db", "audit"]},
            {"name": "orders", "match": {"subject": format!("{}.orders.>", e.subject_root)}, "targets": ["db", "hook"]},
        ]},
        "dead_letter": {"enabled": true, "subject": dlq_subject},
    });
    let config = e.write_config_json(json!({"type": "fanout"}), extra);
    let run = Sink::start(&config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(90), || e.settled()).await, "{}", run.logs());
    let (code, logs) = run.stop();
    assert_eq!(code, Some(0), "{logs}");

    let want_db: Vec<u64> = (0..total).filter(|i| is_order(*i) || is_secret(*i)).map(|i| i as u64 + 1).collect();
    let want_audit: Vec<u64> = (0..total).filter(|i| is_secret(*i)).map(|i| i as u64 + 1).collect();
    let in_db = table_sequences(&db, &table).await;
    assert_eq!(in_db.keys().copied().collect::<Vec<_>>(), want_db, "database rows");
    assert!(in_db.values().all(|n| *n == 1));
    let in_audit = file_sequences(&audit_dir);
    assert_eq!(in_audit.keys().copied().collect::<Vec<_>>(), want_audit, "audit files");
    let orders_ok = (0..total).filter(|i| is_order(*i) && *i != poison).count();
    let hook_ok = hook.successes();
    assert_eq!(hook_ok.len(), orders_ok, "one webhook copy per order but the refused one");
    assert!(hook_ok.values().all(|n| *n == 1));
    // Exactly one dead letter: the refused copy, naming its target.
    let dlq = read_stream(&e.js, &dlq_stream).await;
    assert_eq!(dlq.len(), 1, "{logs}");
    let record: Value = serde_json::from_slice(&dlq[0].3).unwrap();
    assert_eq!(record["message_id"], format!("msg-{poison}"));
    assert_eq!(record["target"], "hook");
    assert_eq!(record["sink"], "fanout");
    assert!(record["error"].as_str().unwrap().starts_with("target `hook`: "), "{record}");
    // Messages no route matched were acknowledged without being written anywhere.
    let ignored = (0..total).filter(|i| !is_order(*i) && !is_secret(*i)).count();
    assert!(ignored > 0);
    assert!(logs.contains(&format!("ignored={ignored}")), "the fan-out counts what it ignored:\n{logs}");
}

#[tokio::test]
async fn an_optional_target_down_for_the_whole_run_costs_only_its_window() {
    let e = env().await;
    let hanging = HttpServer::start().await.unwrap();
    hanging.set_delay(Duration::from_secs(60));
    let total = 400;
    publish(&e, total, None).await;
    let files = e.dir.path().join("files");
    let extra = json!({
        "delivery": {"batch_size": 100},
        "sinks": {
            "files": {"type": "file", "directory": files, "fsync": false},
            "hook": {"type": "http", "url": hanging.url(), "allow_http_for_local_testing": true},
        },
        "routing": {"enabled": true, "routes": [{"name": "everything", "match": {"subject": ">"}, "targets": [
            "files", {"sink": "hook", "required": false, "minimum_wait_ms": 200, "timeout_ms": 300}]}]},
    });
    let config = e.write_config_json(json!({"type": "fanout"}), extra);
    let started = Instant::now();
    let run = Sink::start(&config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(60), || e.settled()).await, "{}", run.logs());
    let took = started.elapsed();
    let (code, logs) = run.stop();
    assert_eq!(code, Some(0), "{logs}");
    let stored = file_sequences(&files);
    assert_eq!(stored.len(), total, "every required copy");
    assert!(stored.values().all(|n| *n == 1));
    // 400 messages in batches of at most 100 (slow start: 13, 25, 50, 100, …): about eight
    // batches, each waiting at most the 200 ms window for the hanging target.
    eprintln!("drained 400 messages with an optional target hanging in {took:?}");
    assert!(took < Duration::from_secs(12), "the hanging optional target stalled the pipeline: {took:?}\n{logs}");
    assert!(logs.contains("optional_timed_out="), "{logs}");
}

#[tokio::test]
async fn kill_9_during_fanout_three_times_keeps_every_required_target_exact() {
    let test = "kill_9_during_fanout_three_times_keeps_every_required_target_exact";
    let db = mysql_or_fail(test).await;
    let e = env().await;
    let table = unique_table("fanout_kill");
    let total = 3000;
    publish(&e, total, None).await;
    let files = e.dir.path().join("files");
    // The reference's compact fan-out form.
    let sink = json!({"type": "fanout", "route_match_mode": "all",
        "sinks": {"db": mysql_target(&db, &table), "files": {"type": "file", "directory": files}},
        "routes": [{"name": "everything", "match": {"subject": ">"}, "targets": ["db", "files"]}]});
    let config = e.write_config_json(sink, json!({"delivery": {"batch_size": 100, "max_in_flight_batches": 2}}));
    for quarter in 1..=3 {
        let run = Sink::start(&config, e.dir.path(), &[]);
        let reached =
            wait_until(Duration::from_secs(120), || async { acked(&e, total).await >= total * quarter / 4 }).await;
        assert!(reached, "no progress to {quarter}/4:\n{}", run.logs());
        run.kill9();
    }
    let run = Sink::start(&config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(120), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let in_db = table_sequences(&db, &table).await;
    let in_files = file_sequences(&files);
    let all: Vec<u64> = (1..=total as u64).collect();
    assert_eq!(in_db.keys().copied().collect::<Vec<_>>(), all, "every message in the database");
    assert!(in_db.values().all(|n| *n == 1), "no row twice");
    assert_eq!(in_files.keys().copied().collect::<Vec<_>>(), all, "every message in the files");
    assert!(in_files.values().all(|n| *n == 1), "no file twice");
}
