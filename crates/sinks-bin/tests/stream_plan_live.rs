//! `nats-sink stream-plan` against a real server, as an administrator would use it: every
//! `nats` command it prints is run with the official NATS CLI (natscli) on a fresh server,
//! then the sink runs with `consumer_management.mode: bind_only` and no `stream_management`
//! (it creates nothing), validates against the server, and drains 3,000 messages into the
//! file sink exactly once, with its dead-letter stream, ledger, rescue and stream guard all in
//! place.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use sinks_testkit::{NatsServer, unique, wait_until};
use support::Sink;

#[tokio::test]
async fn every_printed_nats_command_runs_and_a_bind_only_sink_drains_exactly_once() {
    let server = NatsServer::start();
    let js = server.js().await;
    let dir = tempfile::tempdir().unwrap();
    let stream = unique("PLANNED");
    let root = stream.to_lowercase();
    let out = dir.path().join("out");
    let config = json!({
        "nats": {"url": server.url(), "stream": stream, "consumer": "planned-sink", "subject": format!("{root}.>")},
        "consumer_management": {"mode": "bind_only", "max_deliver": 5, "ack_wait_seconds": 10},
        "dead_letter": {"enabled": true, "subject": format!("{root}dlq.records")},
        "ledger": {"enabled": true, "subject": format!("{root}ledger.receipts")},
        "delivery": {"batch_size": 200, "batch_timeout_ms": 200},
        "sink": {"type": "file", "directory": out},
    });
    let path = dir.path().join("config.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let nats_sink = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_nats-sink")).args(args).current_dir(dir.path()).output().unwrap();
        (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    };

    // Before the plan is applied, validate --connect refuses (bind_only creates nothing).
    let (code, text) = nats_sink(&["validate", "--connect", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{text}");

    let (code, text) = nats_sink(&["stream-plan", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, Some(0), "{text}");
    let plan: serde_json::Value = serde_json::from_str(&text).unwrap();
    let commands: Vec<String> =
        plan["create"].as_array().unwrap().iter().map(|r| r["nats"].as_str().unwrap().to_owned()).collect();
    assert_eq!(commands.len(), 7, "source, DLQ, ledger, capture streams, two consumers, the bucket: {commands:#?}");
    let natscli = sinks_testkit::find_natscli();
    let bin_dir = natscli.parent().unwrap().to_path_buf();
    for command in &commands {
        assert!(command.starts_with("nats "), "{command}");
        let ran = Command::new("sh")
            .arg("-c")
            .arg(command)
            .env("PATH", format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default()))
            .env("NATS_URL", server.url())
            .output()
            .unwrap();
        assert!(
            ran.status.success(),
            "`{command}` failed: {}{}",
            String::from_utf8_lossy(&ran.stdout),
            String::from_utf8_lossy(&ran.stderr)
        );
    }
    // The text form prints the same commands.
    let (_, text_plan) = nats_sink(&["stream-plan", path.to_str().unwrap()]);
    for command in &commands {
        assert!(text_plan.contains(command.as_str()), "{command} is printed as text too");
    }

    let (code, text) = nats_sink(&["validate", "--connect", path.to_str().unwrap()]);
    assert_eq!(code, Some(0), "the planned server satisfies a bind_only sink: {text}");

    let subject = format!("{root}.orders");
    let msgs = (0..3000)
        .map(|i| {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("planned-{i}").as_str());
            (subject.clone(), h, bytes::Bytes::from(format!(r#"{{"n":{i}}}"#)))
        })
        .collect();
    sinks_testkit::js_publish_all(&js, msgs).await;
    let run = Sink::start(&path, dir.path(), &[]);
    let settled = || async { sinks_testkit::consumer_settled_on(&js, &stream, "planned-sink").await };
    let done =
        wait_until(Duration::from_secs(120), || async { support::records(&out).len() == 3000 && settled().await })
            .await;
    assert!(done, "{} files; log:\n{}", support::records(&out).len(), run.logs());
    assert_eq!(run.terminate(), Some(0));
    let records = support::records(&out);
    let mut sequences: Vec<u64> =
        records.iter().map(|r| r["metadata"]["jetstream"]["stream_sequence"].as_u64().unwrap()).collect();
    sequences.sort_unstable();
    sequences.dedup();
    assert_eq!(sequences.len(), 3000, "each message exactly once");
    let ledger = sinks_testkit::read_stream(&js, &format!("{stream}_LEDGER")).await;
    assert_eq!(ledger.len(), 3000, "a receipt per message in the planned ledger stream");
}
