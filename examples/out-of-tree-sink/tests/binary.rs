//! The `sqlite-sink` binary end to end, against a private JetStream server (`support`):
//! `validate` accepts the example config; `run` stores every published message exactly
//! once and acknowledges it; `reconcile` finds rows that went missing, prints the
//! `sqlite-sink replay` commands that bring them back, `replay` does, and `reconcile` then
//! finds nothing missing. `test-sink` creates nothing and says what `run` would create, as
//! `sqlite-sink`: every command the binary prints names it.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use bytes::Bytes;
use support::{NatsServer, stream_with_subjects, unique, wait_until};

const MESSAGES: u64 = 40;

fn sqlite_sink(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sqlite-sink")).args(args).output().expect("sqlite-sink runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `(stream_sequence, payload)` of every row, in sequence order.
fn rows(db: &Path) -> Vec<(u64, Vec<u8>)> {
    let Ok(conn) = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY) else {
        return Vec::new();
    };
    let Ok(mut select) = conn.prepare("SELECT stream_sequence, payload FROM messages ORDER BY stream_sequence") else {
        return Vec::new();
    };
    select
        .query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))
        .and_then(|rows| rows.collect())
        .unwrap_or_default()
}

fn payload(seq: u64) -> Vec<u8> {
    format!(r#"{{"order":{seq},"note":"ünïcode"}}"#).into_bytes()
}

/// Every message exactly once, with its payload.
fn assert_exactly_once(db: &Path) {
    let expected: Vec<(u64, Vec<u8>)> = (1..=MESSAGES).map(|s| (s, payload(s))).collect();
    assert_eq!(rows(db), expected);
}

#[test]
fn validate_accepts_the_example_config() {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("sqlite-sink.toml");
    let out = sqlite_sink(&["validate", config.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("sink=sqlite"), "{}", text(&out));
}

#[test]
fn test_sink_creates_nothing_and_names_this_binary() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = dir.path().join("orders.db");
    let config = serde_json::json!({
        "nats": {"url": "nats://127.0.0.1:4222", "stream": "ORDERS", "consumer": "c", "subject": "orders.>"},
        "sink": {"type": "sqlite", "path": db},
    });
    let path = dir.path().join("config.json");
    std::fs::write(&path, serde_json::to_vec(&config).expect("json")).expect("write config");
    let out = sqlite_sink(&["test-sink", path.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!db.exists(), "test-sink changes nothing without --create");
    assert!(text(&out).contains("`sqlite-sink test-sink --create`"), "{}", text(&out));
    assert!(!text(&out).contains("nats-sink"), "{}", text(&out));
    let out = sqlite_sink(&["test-sink", "--create", path.to_str().expect("utf-8 path")]);
    assert!(out.status.success() && db.exists(), "{}", text(&out));
    // There now, nothing would be created: nothing is said of creating it.
    let out = sqlite_sink(&["test-sink", path.to_str().expect("utf-8 path")]);
    assert!(text(&out).contains("is reachable and healthy") && !text(&out).contains("would create"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn run_stores_each_message_once_and_reconcile_and_replay_repair_a_loss() {
    let server = NatsServer::start();
    let js = server.js().await;
    let stream = unique("SQLITE");
    let root = stream.to_lowercase();
    stream_with_subjects(&js, &stream, &[&format!("{root}.>")]).await;
    for seq in 1..=MESSAGES {
        let ack = js.publish(format!("{root}.orders.k{}", seq % 3), Bytes::from(payload(seq))).await.expect("publish");
        ack.await.expect("stored");
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = dir.path().join("orders.db");
    let consumer = unique("sqlite_sink");
    let config = serde_json::json!({
        "nats": {"url": server.url(), "stream": stream, "consumer": consumer, "subject": format!("{root}.>")},
        "delivery": {"batch_size": 16, "batch_timeout_ms": 100},
        "sink": {"type": "sqlite", "path": db},
    });
    let config_path: PathBuf = dir.path().join("config.json");
    std::fs::write(&config_path, serde_json::to_vec_pretty(&config).expect("json")).expect("write config");
    let config_arg = config_path.to_str().expect("utf-8 path");

    let log = dir.path().join("run.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sqlite-sink"))
        .args(["run", config_arg])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("sqlite-sink run starts");
    // Settled: every message stored and acknowledged (nothing pending for the consumer).
    let settled = wait_until(Duration::from_secs(60), || async {
        let Ok(s) = js.get_stream(&stream).await else { return false };
        let Ok(info) = s.consumer_info(&consumer).await else { return false };
        info.num_pending == 0 && info.num_ack_pending == 0 && info.delivered.stream_sequence == MESSAGES
    })
    .await;
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let status = child.wait().expect("sqlite-sink stops");
    let logs = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(settled, "the consumer did not settle:\n{logs}");
    assert_eq!(status.code(), Some(0), "{logs}");
    assert_exactly_once(&db);

    // Three rows go missing: reconcile says so, replay brings them back, exactly once.
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.execute("DELETE FROM messages WHERE stream_sequence IN (5, 17, 33)", []).expect("delete");
    drop(conn);
    let range = ["--from-seq", "1", "--to-seq", "40"];
    let found = sqlite_sink(&[&["reconcile", config_arg, "--repair"][..], &range[..]].concat());
    assert_eq!(found.status.code(), Some(1), "three rows are missing: {}", text(&found));
    assert!(text(&found).contains("missing=3"), "{}", text(&found));
    assert!(text(&found).contains("sqlite-sink replay ") && !text(&found).contains("nats-sink"), "{}", text(&found));
    let replayed = sqlite_sink(&[&["replay", config_arg][..], &range[..]].concat());
    assert!(replayed.status.success(), "{}", text(&replayed));
    assert_exactly_once(&db);
    let clean = sqlite_sink(&[&["reconcile", config_arg][..], &range[..]].concat());
    assert!(clean.status.success(), "{}", text(&clean));
    assert!(text(&clean).contains("present_equal=40 missing=0"), "{}", text(&clean));
}
