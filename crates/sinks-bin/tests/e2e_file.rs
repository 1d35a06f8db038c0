//! `nats-sink run` with the file sink against a private JetStream server: files appear for
//! every message and only then are messages acked; kill -9 loses nothing; SIGTERM drains;
//! poison goes to the DLQ alone; a DLQ that cannot store a record never lets the original
//! be acked; the reference's file-sink JSON config runs unchanged.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

mod support;

use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use sinks_testkit::{js_publish_all, read_stream, stream_with_subjects, unique, wait_until};
use support::{Sink, env, json, records, sequences};

#[tokio::test]
async fn every_message_becomes_one_file_and_is_acked() {
    let e = env().await;
    e.publish(300, json).await;
    let sink = Sink::start(&e.write_config(r#", "batch_size": 64"#, "", ""), e.dir.path(), &[]);
    let done =
        wait_until(Duration::from_secs(60), || async { records(&e.out()).len() == 300 && e.settled().await }).await;
    assert!(done, "not all messages were written and acked; log:\n{}", sink.logs());
    assert_eq!(sink.terminate(), Some(0));
    let seqs = sequences(&e.out());
    assert_eq!(seqs.len(), 300);
    assert!(seqs.values().all(|n| *n == 1));
    let mut all = records(&e.out());
    all.sort_by_key(|r| r["stream_sequence"].as_u64());
    let r = &all[41];
    assert_eq!(r["schema"], "nats_sinks.file.message.v1");
    assert_eq!(r["stream"], e.stream.as_str());
    assert_eq!(r["stream_sequence"], 42);
    assert_eq!(r["subject"], format!("{}.orders.k2", e.subject_root));
    assert_eq!(r["message_id"], "msg-41");
    assert_eq!(r["payload"], serde_json::json!({"order": 41, "note": "ünïcode"}));
    assert_eq!(r["payload_info"]["original_format"], "json");
    assert_eq!(r["metadata"]["jetstream"]["stream_sequence"], 42);
    assert_eq!(r["metadata"]["nats"]["reserved_headers"]["Nats-Msg-Id"], "msg-41");
    assert!(e.out().join(format!("{}.orders.k2", e.subject_root)).is_dir(), "partitioned by subject");
}

#[tokio::test]
async fn kill_9_mid_run_loses_nothing_and_duplicates_nothing() {
    let e = env().await;
    e.publish(3000, json).await;
    let config = e.write_config(r#", "batch_size": 100, "max_in_flight_batches": 2"#, "", r#", "fsync": true"#);
    let first = Sink::start(&config, e.dir.path(), &[]);
    let started = wait_until(Duration::from_secs(60), || async { records(&e.out()).len() >= 300 }).await;
    assert!(started, "the sink made no progress; log:\n{}", first.logs());
    first.kill9();
    let at_kill = records(&e.out()).len();
    assert!(at_kill < 3000, "kill happened too late to mean anything ({at_kill} files)");
    let second = Sink::start(&config, e.dir.path(), &[]);
    let done =
        wait_until(Duration::from_secs(90), || async { records(&e.out()).len() >= 3000 && e.settled().await }).await;
    assert!(done, "not everything arrived after the restart; log:\n{}", second.logs());
    assert_eq!(second.terminate(), Some(0));
    let seqs = sequences(&e.out());
    assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), (1..=3000).collect::<Vec<_>>(), "every message present");
    assert!(seqs.values().all(|n| *n == 1), "exactly one file per message");
}

#[tokio::test]
async fn sigterm_finishes_in_flight_work_and_exits_0() {
    let e = env().await;
    e.publish(2000, json).await;
    let sink =
        Sink::start(&e.write_config(r#", "batch_size": 50, "max_in_flight_batches": 3"#, "", ""), e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(60), || async { records(&e.out()).len() >= 200 }).await, "{}", sink.logs());
    let logs_path = sink.log.clone();
    assert_eq!(sink.terminate(), Some(0));
    let (_, ack_pending) = e.consumer_state().await.unwrap();
    let logs = std::fs::read_to_string(logs_path).unwrap();
    assert_eq!(ack_pending, 0, "a graceful stop leaves nothing fetched and unacked; log:\n{logs}");
    assert!(logs.contains("received SIGTERM"), "{logs}");
}

#[tokio::test]
async fn a_poison_message_goes_to_the_dlq_alone() {
    let e = env().await;
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    e.publish(50, |i| if i == 17 { Bytes::from_static(b"this is not json") } else { json(i) }).await;
    let config = e.write_config(
        r#", "batch_size": 50"#,
        &format!(r#""enabled": true, "subject": "{dlq_subject}""#),
        r#", "payload_mode": "json_only""#,
    );
    let sink = Sink::start(&config, e.dir.path(), &[]);
    let done =
        wait_until(Duration::from_secs(60), || async { records(&e.out()).len() == 49 && e.settled().await }).await;
    assert!(done, "{}", sink.logs());
    assert_eq!(sink.terminate(), Some(0));
    assert!(!sequences(&e.out()).contains_key(&18), "the poison message has no file");
    let dlq = read_stream(&e.js, &dlq_stream).await;
    assert_eq!(dlq.len(), 1, "exactly one DLQ record");
    let record: serde_json::Value = serde_json::from_slice(&dlq[0].3).unwrap();
    assert_eq!(record["stream_sequence"], 18);
    assert_eq!(record["message_id"], "msg-17");
    assert_eq!(record["error_type"], "SerializationError");
    assert!(record["error"].as_str().unwrap().contains("not valid JSON"), "{record}");
    assert_eq!(record["payload_base64"], "dGhpcyBpcyBub3QganNvbg==");
    assert_eq!(record["headers"]["Nats-Msg-Id"], "msg-17");
    assert_eq!(record["sink"], "file");
}

#[tokio::test]
async fn an_unstorable_dlq_record_keeps_the_poison_message_unacked() {
    let e = env().await;
    // A DLQ stream at start-up (without one, start-up refuses the config), deleted once the
    // sink consumes: every dead letter then fails.
    let dlq_stream = format!("{}_GONE", e.stream);
    stream_with_subjects(&e.js, &dlq_stream, &["dlq.goes.away"]).await;
    let config =
        e.write_config("", r#""enabled": true, "subject": "dlq.goes.away""#, r#", "payload_mode": "json_only""#);
    let sink = Sink::start(&config, e.dir.path(), &[]);
    assert!(
        wait_until(Duration::from_secs(30), || async { sink.logs().contains("consuming servers=") }).await,
        "{}",
        sink.logs()
    );
    e.js.delete_stream(&dlq_stream).await.unwrap();
    e.publish(10, |i| if i == 3 { Bytes::from_static(b"not json") } else { json(i) }).await;
    let redelivered = wait_until(Duration::from_secs(30), || async {
        let stream = e.js.get_stream(&e.stream).await.unwrap();
        match stream.consumer_info(&e.consumer).await {
            Ok(info) => records(&e.out()).len() == 9 && info.num_redelivered >= 1,
            Err(_) => false,
        }
    })
    .await;
    assert!(redelivered, "{}", sink.logs());
    assert!(!e.settled().await, "the poison message is never acked while its DLQ record cannot be stored");
    assert_eq!(sink.terminate(), Some(0));
    // Nothing lost: the message is still in the stream and still owed to the consumer.
    let stream = e.js.get_stream(&e.stream).await.unwrap();
    let info = stream.consumer_info(&e.consumer).await.unwrap();
    assert_eq!(info.num_pending + info.num_ack_pending as u64, 1);
    assert_eq!(info.ack_floor.stream_sequence, 3, "acks stop just before the poison message");
}

#[tokio::test]
async fn the_reference_file_sink_config_runs_unchanged() {
    let e = env().await;
    // The reference's examples/file-basic/config.json, byte for byte except nothing: only the
    // server URL comes from the reference's own override variable.
    let reference = r#"{
  "nats": {"url": "nats://localhost:4222", "stream": "ORDERS", "consumer": "file-orders-sink", "subject": "orders.*", "durable": true},
  "delivery": {"batch_size": 64, "batch_timeout_ms": 1000, "ack_policy": "after_sink_commit", "temporary_failure_action": "nak"},
  "dead_letter": {"enabled": true, "subject": "orders.file.dlq", "include_payload": true, "include_headers": true, "include_error": true},
  "logging": {"level": "INFO", "payload_logging": false},
  "message_metadata": {
    "priority": {"header": "Nats-Sinks-Priority", "default": "routine"},
    "classification": {"header": "Nats-Sinks-Classification", "default": "NATO UNCLASSIFIED"},
    "labels": {"header": "Nats-Sinks-Labels", "default": []},
    "rules": [{"subject": "orders.urgent", "priority": "immediate", "classification": "NATO SECRET", "labels": "mission-report;coalition;watch-floor"}]
  },
  "sink": {"type": "file", "directory": ".local/file-sink/events", "mode": "one_file_per_message", "filename_strategy": "stream_sequence",
           "duplicate_policy": "skip_existing", "payload_mode": "json_or_envelope", "extension": ".json", "compression": "none",
           "compression_level": 6, "include_metadata": true, "partition_by_subject": true, "create_directory": true, "fsync": true}
}"#;
    let path = e.dir.path().join("config.json");
    std::fs::write(&path, reference).unwrap();
    stream_with_subjects(&e.js, "ORDERS", &["orders.*"]).await;
    // The reference's README has its users create the dead-letter stream; start-up refuses a
    // DLQ subject no stream captures.
    stream_with_subjects(&e.js, "ORDERS_DLQ", &["orders.file.dlq"]).await;
    js_publish_all(
        &e.js,
        vec![
            ("orders.created".into(), HeaderMap::new(), Bytes::from_static(br#"{"id":1}"#)),
            ("orders.urgent".into(), HeaderMap::new(), Bytes::from_static(b"plain text")),
        ],
    )
    .await;
    let sink = Sink::start(&path, e.dir.path(), &[("NATS_SINKS_NATS_URL", e.server.url())]);
    let out = e.dir.path().join(".local/file-sink/events");
    assert!(wait_until(Duration::from_secs(30), || async { records(&out).len() == 2 }).await, "{}", sink.logs());
    assert_eq!(sink.terminate(), Some(0));
    let mut all = records(&out);
    all.sort_by_key(|r| r["stream_sequence"].as_u64());
    assert_eq!(all[0]["priority"], "routine");
    assert_eq!(all[0]["classification"], "NATO UNCLASSIFIED");
    assert_eq!(all[0]["labels"], serde_json::Value::Null);
    assert_eq!(all[1]["priority"], "immediate");
    assert_eq!(all[1]["labels"], "mission-report;coalition;watch-floor");
    assert_eq!(all[1]["payload"]["payload"], "plain text");
    assert_eq!(all[1]["payload_info"]["wrapped"], true);
    assert!(out.join("orders.urgent/ORDERS-00000000000000000002.json").is_file());
}

/// `completions` and `man` work in a build with the `completions` feature (the default); a
/// slim build (`--no-default-features --features file`, CI's slim phase) says which feature
/// brings them, exit 2, instead of an unknown-command error.
#[test]
fn completions_and_man_work_or_name_their_feature() {
    let bin = env!("CARGO_BIN_EXE_nats-sink");
    for args in [&["completions", "bash"][..], &["man"][..]] {
        let out = std::process::Command::new(bin).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if cfg!(feature = "completions") {
            assert!(out.status.success(), "{args:?}: {stderr}");
            assert!(!out.stdout.is_empty(), "{args:?} printed nothing");
        } else {
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains("needs the `completions` cargo feature"), "{args:?}: {stderr}");
            assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
        }
    }
}
