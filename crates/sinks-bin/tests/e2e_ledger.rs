//! The delivery ledger, `nats-sink reconcile` and `nats-sink replay` end to end, with the
//! file sink against a private JetStream server: receipts survive three kill -9s (one per
//! message and outcome, none missing); files deleted and altered behind the sink's back are
//! reported with their sequences, replay repairs them and reconcile comes back clean; messages
//! retention dropped before delivery are reported as gone.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use async_nats::jetstream::stream;
use sinks_testkit::{read_stream, stream_with_subjects, unique, wait_until};
use support::{Env, Sink, acked, env, findings, json, nats_sink, records, text};

/// A ledger stream for `e`; returns `(stream, subject)`.
async fn ledger_stream(e: &Env) -> (String, String) {
    let name = unique("LEDGER");
    let subject = format!("{}.receipts", name.to_lowercase());
    stream_with_subjects(&e.js, &name, &[&subject]).await;
    (name, subject)
}

/// The file-sink record path of stream sequence `seq` (partitioned by subject k{(seq-1)%3}).
fn record_path(e: &Env, seq: u64) -> std::path::PathBuf {
    let subject = format!("{}.orders.k{}", e.subject_root, (seq - 1) % 3);
    e.out().join(&subject).join(format!("{}-{seq:020}.json", e.stream))
}

#[tokio::test]
async fn receipts_survive_three_kill_9s_one_per_message_and_outcome() {
    let e = env().await;
    let (ledger, ledger_subject) = ledger_stream(&e).await;
    let total = 3000;
    e.publish(total, json).await;
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out(), "fsync": true}),
        serde_json::json!({
            "delivery": {"batch_size": 100, "max_in_flight_batches": 2},
            "ledger": {"enabled": true, "subject": ledger_subject, "correlation_header": "Nats-Msg-Id"},
        }),
    );
    let mut run = Sink::start(&config, e.dir.path(), &[]);
    for quarter in 1..=3 {
        let reached =
            wait_until(Duration::from_secs(120), || async { acked(&e, total).await >= total * quarter / 4 }).await;
        assert!(reached, "no progress to {quarter}/4; log:\n{}", run.logs());
        run.kill9();
        run = Sink::start(&config, e.dir.path(), &[]);
    }
    let done = wait_until(Duration::from_secs(300), || e.settled()).await;
    assert!(done, "not drained; log:\n{}", run.logs());
    let (code, logs) = run.stop();
    assert_eq!(code, Some(0));
    assert!(logs.contains("delivery ledger"), "{logs}");

    let receipts = read_stream(&e.js, &ledger).await;
    let mut per: BTreeMap<(u64, String), usize> = BTreeMap::new();
    for (_, subject, _, body) in &receipts {
        assert_eq!(subject, &ledger_subject);
        let r: serde_json::Value = serde_json::from_slice(body).unwrap();
        assert_eq!(r["schema"], "nats_sinks.ledger.receipt.v1");
        let seq = r["stream_sequence"].as_u64().unwrap();
        let outcome = r["outcome"].as_str().unwrap().to_owned();
        assert!(outcome == "committed" || outcome == "duplicate", "{r}");
        assert_eq!(r["correlation_id"], format!("msg-{}", seq - 1));
        assert_eq!(r["idempotency_key"], format!("stream-sequence:{}:{seq}", e.stream));
        assert_eq!(r["sink"], "file");
        let path = r["destination"]["path"].as_str().unwrap();
        assert_eq!(r["destination"]["kind"], "file");
        assert!(Path::new(path).is_file(), "receipt names a file that exists: {path}");
        *per.entry((seq, outcome)).or_insert(0) += 1;
    }
    let doubled: Vec<_> = per.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "one receipt per message and outcome; doubled: {doubled:?}");
    let seqs: std::collections::BTreeSet<u64> = per.keys().map(|(s, _)| *s).collect();
    let missing: Vec<u64> = (1..=total as u64).filter(|s| !seqs.contains(s)).collect();
    assert!(missing.is_empty(), "every message has a receipt; missing: {missing:?}");
    assert_eq!(records(&e.out()).len(), total);
    eprintln!(
        "ledger after 3 kill -9s: {} receipts for {total} messages ({} duplicates)",
        receipts.len(),
        per.keys().filter(|(_, o)| o == "duplicate").count()
    );
}

#[tokio::test]
async fn reconcile_reports_deleted_and_altered_files_and_replay_repairs_them() {
    let e = env().await;
    let (_, ledger_subject) = ledger_stream(&e).await;
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    let total = 10_000;
    e.publish(total, json).await;
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out()}),
        serde_json::json!({
            "delivery": {"batch_size": 500, "max_in_flight_batches": 2},
            "ledger": {"enabled": true, "subject": ledger_subject, "mode": "after_ack"},
            "dead_letter": {"enabled": true, "subject": dlq_subject},
        }),
    );
    let run = Sink::start(&config, e.dir.path(), &[]);
    let done = wait_until(Duration::from_secs(300), || e.settled()).await;
    assert!(done, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let cfg = config.to_str().unwrap();

    // Clean first.
    let clean = nats_sink(&["reconcile", cfg], e.dir.path());
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean));
    assert!(text(&clean).contains("present_equal=10000 missing=0 conflict=0"), "{}", text(&clean));

    // Behind the sink's back: three files deleted, one payload altered.
    for seq in [17, 4000, 9999] {
        std::fs::remove_file(record_path(&e, seq)).unwrap();
    }
    let altered = record_path(&e, 5000);
    let original = std::fs::read_to_string(&altered).unwrap();
    let changed = original.replace(r#""order":4999"#, r#""order":5999"#);
    assert_ne!(original, changed);
    std::fs::write(&altered, changed).unwrap();

    let out = nats_sink(&["reconcile", cfg, "--format", "json", "--repair"], e.dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = findings(&out);
    assert_eq!(
        findings,
        vec![
            (17, "missing".to_owned()),
            (4000, "missing".to_owned()),
            (5000, "conflict".to_owned()),
            (9999, "missing".to_owned())
        ],
        "exactly the four, with their sequences"
    );
    assert_eq!(doc["summary"]["counts"]["present_equal"], 9996);
    let repair: Vec<String> =
        doc["repair"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()).collect();
    assert_eq!(repair.len(), 3, "{repair:?}");
    assert!(repair[0].ends_with("--from-seq 17 --to-seq 17"), "{repair:?}");

    // Text form and a repair file.
    let script = e.dir.path().join("repair.sh");
    let out = nats_sink(&["reconcile", cfg, "--repair", script.to_str().unwrap()], e.dir.path());
    assert_eq!(out.status.code(), Some(1));
    let report = text(&out);
    assert!(report.contains("17\tmissing\t"), "{report}");
    assert!(report.contains("5000\tconflict\t"), "{report}");
    let script_text = std::fs::read_to_string(&script).unwrap();
    assert!(script_text.contains("--from-seq 9999 --to-seq 9999"), "{script_text}");

    // Replay what the repair names: the missing files come back, the rest are duplicates.
    for seq in [17u64, 4000, 9999] {
        let out =
            nats_sink(&["replay", cfg, "--from-seq", &seq.to_string(), "--to-seq", &seq.to_string()], e.dir.path());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(text(&out).contains("committed=1 duplicate=0"), "{}", text(&out));
    }
    // A replayed range that is already there is harmless: nothing is committed again (the
    // altered file's recorded fingerprint still matches, so the sink sees a duplicate).
    let out = nats_sink(&["replay", cfg, "--from-seq", "4990", "--to-seq", "5010"], e.dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("settled 21 messages: committed=0 duplicate=21"), "{}", text(&out));
    // The altered file is repaired by hand (the sink keeps the first version); then clean.
    std::fs::write(&altered, original).unwrap();
    let out = nats_sink(&["reconcile", cfg, "--from-seq", "1", "--to-seq", "10000"], e.dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // The production consumer was never touched by replay.
    assert!(e.settled().await);
}

#[tokio::test]
async fn retention_that_dropped_undelivered_messages_is_reported_as_gone() {
    let e = env().await;
    // A stream keeping only the last 50 messages: 80 published before any sink ran.
    let limited = unique("LIMITED");
    let root = limited.to_lowercase();
    e.js.create_stream(stream::Config {
        name: limited.clone(),
        subjects: vec![format!("{root}.>")],
        max_messages: 50,
        ..Default::default()
    })
    .await
    .unwrap();
    let msgs = (0..80).map(|i| (format!("{root}.orders.k{}", i % 3), async_nats::HeaderMap::new(), json(i))).collect();
    sinks_testkit::js_publish_all(&e.js, msgs).await;
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out()}),
        serde_json::json!({"nats": {"stream": limited, "subject": format!("{root}.>")}}),
    );
    let run = Sink::start(&config, e.dir.path(), &[]);
    let done = wait_until(Duration::from_secs(60), || async { records(&e.out()).len() == 50 }).await;
    assert!(done, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let cfg = config.to_str().unwrap();
    let out = nats_sink(&["reconcile", cfg, "--from-seq", "1", "--to-seq", "80", "--format", "json"], e.dir.path());
    assert_eq!(out.status.code(), Some(3), "only gone sequences: exit 3; {}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["summary"]["counts"]["gone"], 30);
    assert_eq!(doc["summary"]["counts"]["present_equal"], 50);
    let gone: Vec<u64> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["class"] == "gone")
        .map(|f| f["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(gone, (1..=30).collect::<Vec<_>>());
}

#[tokio::test]
async fn batch_mode_receipts_carry_the_payload_fields_correlation_id() {
    // Messages wait in an open object (the runner keeps them without their payloads) until
    // the object is old enough to commit; their receipts still read the payload field.
    let e = env().await;
    let (ledger, ledger_subject) = ledger_stream(&e).await;
    let total = 300;
    e.publish(total, json).await;
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out(), "mode": "batch",
                           "batch": {"max_messages": 10_000, "max_age_ms": 1500, "partition_template": "{stream}"}}),
        serde_json::json!({
            "delivery": {"batch_size": 50},
            "ledger": {"enabled": true, "subject": ledger_subject, "correlation_field": "order"},
        }),
    );
    let run = Sink::start(&config, e.dir.path(), &[]);
    let done = wait_until(Duration::from_secs(120), || e.settled()).await;
    assert!(done, "not drained; log:\n{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let receipts = read_stream(&e.js, &ledger).await;
    let mut seen = std::collections::BTreeSet::new();
    for (_, _, _, body) in &receipts {
        let r: serde_json::Value = serde_json::from_slice(body).unwrap();
        let seq = r["stream_sequence"].as_u64().unwrap();
        assert_eq!(r["outcome"], "committed", "{r}");
        assert_eq!(r["correlation_id"], (seq - 1).to_string(), "the payload's `order` field: {r}");
        seen.insert(seq);
    }
    assert_eq!(seen.len(), total, "one receipt per message");
}
