//! `nats-sink stream-plan` against a real server, as an administrator would use it: every
//! `nats` command it prints is run with the official NATS CLI (natscli) on a fresh server (the
//! durable consumer with `--max-deliver 5` added, as an administrator may create it while the
//! config sets no max_deliver: the rescue's capture stream, marked as needed only then, is in
//! the plan, and `stream-plan --connect` reads the consumer and says it is needed), then the
//! sink runs as a user with exactly the permissions the plan prints, with
//! `consumer_management.mode: bind_only` and no `stream_management` (it creates nothing),
//! validates against the server, and drains 3,000 messages into the file sink exactly once,
//! with its dead-letter stream, ledger, rescue and stream guard all in place, and no
//! permissions violation in the server's log or its own.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use sinks_testkit::{NatsServer, unique, wait_until};
use support::Sink;

/// The worker's password, from the environment as a deployment gives it.
const WORKER_PASSWORD: (&str, &str) = ("PLANNED_WORKER_PASSWORD", "worker-secret");

/// A server with two users: `admin` may do anything, `worker` exactly what `publish` and
/// `subscribe` allow.
fn server_with_worker(publish: &[String], subscribe: &[String]) -> NatsServer {
    let list = |subjects: &[String]| serde_json::to_string(subjects).unwrap();
    NatsServer::start_with_config(&format!(
        "authorization {{\n  users = [\n    {{user: admin, password: admin}}\n    {{user: worker, password: {}, \
         permissions: {{publish: {{allow: {}}}, subscribe: {{allow: {}}}}}}}\n  ]\n}}\n",
        WORKER_PASSWORD.1,
        list(publish),
        list(subscribe)
    ))
}

#[tokio::test]
async fn every_printed_nats_command_runs_and_a_bind_only_sink_with_the_printed_permissions_drains_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let stream = unique("PLANNED");
    let root = stream.to_lowercase();
    let out = dir.path().join("out");
    let config_at = |url: &str| {
        json!({
            "nats": {"url": url, "stream": stream, "consumer": "planned-sink", "subject": format!("{root}.>"),
                     "user": "worker", "password_env": WORKER_PASSWORD.0},
            "consumer_management": {"mode": "bind_only", "ack_wait_seconds": 10},
            "dead_letter": {"enabled": true, "subject": format!("{root}dlq.records")},
            "ledger": {"enabled": true, "subject": format!("{root}ledger.receipts")},
            "delivery": {"batch_size": 200, "batch_timeout_ms": 200},
            "sink": {"type": "file", "directory": out},
        })
    };
    let path = dir.path().join("config.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&config_at("nats://127.0.0.1:4222")).unwrap()).unwrap();
    let nats_sink = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_nats-sink"))
            .args(args)
            .current_dir(dir.path())
            .env(WORKER_PASSWORD.0, WORKER_PASSWORD.1)
            .output()
            .unwrap();
        (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    };

    // The plan is made offline, before there is a server: its permissions make the worker.
    let (code, text) = nats_sink(&["stream-plan", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, Some(0), "{text}");
    let plan: serde_json::Value = serde_json::from_str(&text).unwrap();
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect()
    };
    let publish = strings(&plan["runtime_publish_permissions"]);
    let subscribe = strings(&plan["runtime_subscribe_permissions"]);
    assert!(publish.contains(&"$JS.API.STREAM.NAMES".to_owned()), "{publish:?}");
    assert!(
        plan["rescue"]["only_if"].as_str().is_some_and(|w| w.contains("max_deliver")),
        "no max_deliver in the config: the capture is planned, as needed only if the consumer has one: {}",
        plan["rescue"]
    );
    let server = server_with_worker(&publish, &subscribe);
    let admin_url = format!("nats://admin:admin@127.0.0.1:{}", server.port());
    let client = async_nats::ConnectOptions::with_user_and_password("admin".into(), "admin".into())
        .connect(server.url())
        .await
        .unwrap();
    let js = async_nats::jetstream::new(client);
    std::fs::write(&path, serde_json::to_vec_pretty(&config_at(&server.url())).unwrap()).unwrap();

    // Before the plan is applied, validate --connect refuses (bind_only creates nothing).
    let (code, text) = nats_sink(&["validate", "--connect", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{text}");

    let (code, text) = nats_sink(&["stream-plan", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, Some(0), "{text}");
    let plan: serde_json::Value = serde_json::from_str(&text).unwrap();
    let commands: Vec<String> =
        plan["create"].as_array().unwrap().iter().map(|r| r["nats"].as_str().unwrap().to_owned()).collect();
    assert_eq!(commands.len(), 7, "source, DLQ, ledger, capture streams, two consumers, the bucket: {commands:#?}");
    // The administrator creates the durable consumer with a max_deliver of their own.
    let commands: Vec<String> = commands
        .into_iter()
        .map(|c| {
            if c.starts_with("nats consumer add PLANNED") {
                c.replace(" --defaults", " --max-deliver 5 --defaults")
            } else {
                c
            }
        })
        .collect();
    let natscli = sinks_testkit::find_natscli();
    let bin_dir = natscli.parent().unwrap().to_path_buf();
    for command in &commands {
        assert!(command.starts_with("nats "), "{command}");
        let ran = Command::new("sh")
            .arg("-c")
            .arg(command)
            .env("PATH", format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default()))
            .env("NATS_URL", &admin_url)
            .output()
            .unwrap();
        assert!(
            ran.status.success(),
            "`{command}` failed: {}{}",
            String::from_utf8_lossy(&ran.stdout),
            String::from_utf8_lossy(&ran.stderr)
        );
    }
    // The text form prints the same commands (but the administrator's own max_deliver).
    let (_, text_plan) = nats_sink(&["stream-plan", path.to_str().unwrap()]);
    for command in commands.iter().filter(|c| !c.contains("--max-deliver 5")) {
        assert!(text_plan.contains(command.as_str()), "{command} is printed as text too");
    }
    // With --connect (as the worker), the plan reads the consumer: the capture is needed.
    let (code, connected) = nats_sink(&["stream-plan", "--connect", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, Some(0), "{connected}");
    let connected: serde_json::Value = serde_json::from_str(&connected).unwrap();
    assert_eq!(connected["rescue"]["max_deliver"], 5, "{}", connected["rescue"]);
    assert!(connected["rescue"].get("only_if").is_none(), "{}", connected["rescue"]);

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
    let run = Sink::start(&path, dir.path(), &[(WORKER_PASSWORD.0, WORKER_PASSWORD.1.to_owned())]);
    let settled = || async { sinks_testkit::consumer_settled_on(&js, &stream, "planned-sink").await };
    let done =
        wait_until(Duration::from_secs(120), || async { support::records(&out).len() == 3000 && settled().await })
            .await;
    assert!(done, "{} files; log:\n{}", support::records(&out).len(), run.logs());
    let (code, logs) = run.stop();
    assert_eq!(code, Some(0), "{logs}");
    assert!(logs.contains("rescue=true"), "the exhaustions of the consumer's max_deliver are captured: {logs}");
    for unwanted in ["Permissions Violation", "cannot tell whether"] {
        assert!(!logs.contains(unwanted), "`{unwanted}` in the worker's log:\n{logs}");
    }
    let server_log = std::fs::read_to_string(server.store_dir().join("server.log")).unwrap_or_default();
    assert!(!server_log.contains("Violation"), "the worker needed more than the plan printed:\n{server_log}");
    let records = support::records(&out);
    let mut sequences: Vec<u64> =
        records.iter().map(|r| r["metadata"]["jetstream"]["stream_sequence"].as_u64().unwrap()).collect();
    sequences.sort_unstable();
    sequences.dedup();
    assert_eq!(sequences.len(), 3000, "each message exactly once");
    let ledger = sinks_testkit::read_stream(&js, &format!("{stream}_LEDGER")).await;
    assert_eq!(ledger.len(), 3000, "a receipt per message in the planned ledger stream");
}
