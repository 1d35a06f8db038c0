//! The operator commands of issue 22 through the real binary: `inspect-ordered` against a
//! private JetStream server (never acks, never creates a durable consumer, redacts secrets),
//! `stream-plan` offline, and the completion script.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::{Command, Output};

use async_nats::HeaderMap;
use bytes::Bytes;
use serde_json::{Value, json};
use sinks_testkit::js_publish_all;

fn nats_sink(args: &[&str], cwd: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nats-sink")).args(args).current_dir(cwd).output().unwrap()
}

#[tokio::test]
async fn inspect_ordered_reads_without_acking_and_redacts_what_is_secret() {
    let e = support::env().await;
    let mut msgs = Vec::new();
    for i in 0..5 {
        let mut h = HeaderMap::new();
        h.insert("Nats-Msg-Id", format!("msg-{i}").as_str());
        h.insert("Authorization", "Bearer very-secret-token");
        h.insert("X-Trace", format!("trace-{i}").as_str());
        msgs.push((format!("{}.orders.k{i}", e.subject_root), h, Bytes::from(format!("{{\"n\":{i}}}"))));
    }
    js_publish_all(&e.js, msgs).await;
    let config = e.write_config_json(json!({"type": "file", "directory": e.out()}), json!({}));
    let config = config.to_str().unwrap();

    let out = nats_sink(&["inspect-ordered", config, "--format", "jsonl", "--max-messages", "3"], e.dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 3, "{text}");
    assert_eq!(records.iter().map(|r| r["stream_sequence"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(records[0]["headers"]["Authorization"][0], "<redacted>");
    assert_eq!(records[0]["headers"]["X-Trace"][0], "trace-0");
    assert!(records[0].get("payload_text").is_none(), "payloads are hidden by default");
    assert_eq!(records[0]["payload_size"], 7);
    assert!(!text.contains("very-secret-token"));

    let out = nats_sink(&["inspect-ordered", config, "--format", "jsonl", "--include-payload"], e.dir.path());
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 5, "every message, then the idle timeout ends it");
    assert!(text.contains(r#""payload_text":"{\"n\":4}""#), "{text}");

    // Nothing was acknowledged and no durable consumer exists: the production consumer is
    // untouched (it was never created) and the stream still holds every message.
    let mut stream = e.js.get_stream(&e.stream).await.unwrap();
    assert!(stream.consumer_info(&e.consumer).await.is_err(), "inspect-ordered created the durable consumer");
    assert_eq!(stream.info().await.unwrap().state.messages, 5);

    let out = nats_sink(&["inspect-ordered", config, "--output", "../escape.jsonl"], e.dir.path());
    assert_eq!(out.status.code(), Some(2), "an output path outside --output-root is refused");
}

#[test]
fn stream_plan_and_completions_work_offline() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.json");
    std::fs::write(
        &config,
        json!({"nats": {"url": "nats://127.0.0.1:1", "stream": "ORDERS", "consumer": "orders-sink", "subject": "orders.>"},
               "dead_letter": {"enabled": true, "subject": "dlq.orders"},
               "sink": {"type": "file", "directory": dir.path().join("out")}})
        .to_string(),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let out = nats_sink(&["stream-plan", config, "--format", "json", "--replicas", "3"], dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["recommended_stream_settings"]["replicas"], 3);
    let publish: Vec<&str> =
        plan["runtime_publish_permissions"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(publish.contains(&"dlq.orders") && publish.contains(&"$JS.ACK.ORDERS.orders-sink.>"), "{publish:?}");

    let out = nats_sink(&["stream-plan", config, "--replicas", "9"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--replicas"));

    let out = nats_sink(&["completions", "bash"], dir.path());
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(script.contains("stream-plan") && script.contains("inspect-ordered"), "{script}");
}
