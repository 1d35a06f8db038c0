//! The operator commands of issue 22 through the real binary: `inspect-ordered` against a
//! private JetStream server (never acks, never creates a durable consumer, redacts secrets),
//! and `validate --connect` against `run` on every example config (`stream-plan` offline,
//! the completion script and printing into a closed pipe are the library's:
//! `crates/sinks-cli/tests/commands.rs`).
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

/// `validate --connect` and `run` agree on every example config (the quick start, the
/// getting-started page's, the deployment overlays', the reference's own): against a fresh
/// server, a config `validate --connect` accepts starts (it keeps running, consuming or
/// waiting for its destination), and one it refuses makes `run` exit 2 too.
#[tokio::test]
async fn validate_connect_and_run_agree_on_every_example_config() {
    let server = sinks_testkit::NatsServer::start();
    let root = sinks_testkit::workspace_root();
    let mut configs: Vec<std::path::PathBuf> = vec![root.join("examples/quickstart.toml")];
    let mut dirs = vec![root.join("crates/sinks-bin/tests/fixtures/reference")];
    dirs.extend(std::fs::read_dir(root.join("deploy/kubernetes/overlays")).unwrap().flatten().map(|e| e.path()));
    for dir in dirs {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|x| x == "json") {
                configs.push(path);
            }
        }
    }
    assert!(configs.len() > 20, "{configs:?}");
    let work = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for config in &configs {
        // Every variable a config names, set to a placeholder (a deployment sets them from its
        // secret store); the server is this test's.
        let text = std::fs::read_to_string(config).unwrap();
        let mut vars: Vec<String> = Vec::new();
        for (i, _) in text.match_indices("_env\"") {
            let rest = &text[i..];
            if let Some(value) = rest.split('"').nth(2) {
                vars.push(value.to_owned());
            }
        }
        let command = |verb: &[&str]| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_nats-sink"));
            c.args(verb)
                .arg(config)
                .current_dir(work.path())
                .env("NATS_SINKS__NATS__URL", server.url())
                .env_remove("NATS_SINKS__NATS__URLS");
            for var in &vars {
                c.env(var, "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI=");
            }
            c
        };
        let validated = command(&["validate", "--connect"]).output().unwrap();
        let verdict = validated.status.code();
        if verdict == Some(2) && String::from_utf8_lossy(&validated.stderr).contains("nats.urls") {
            continue;
        }
        let mut run =
            command(&["run"]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
        let ran = loop {
            if let Some(status) = run.try_wait().unwrap() {
                break status.code();
            }
            if std::time::Instant::now() > deadline {
                let _ = run.kill();
                let _ = run.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let refused = |code: Option<i32>| code == Some(2);
        assert_eq!(
            refused(verdict),
            refused(ran),
            "{}: validate --connect exited {verdict:?}, run {ran:?} (still running: None)\n--- validate:\n{}{}",
            config.display(),
            String::from_utf8_lossy(&validated.stdout),
            String::from_utf8_lossy(&validated.stderr)
        );
        checked += 1;
    }
    assert!(checked > 20, "{checked} configs compared");
}
