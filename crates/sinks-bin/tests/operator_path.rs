//! The operator's path, third round (issue 61), through the binary: `validate` reports every
//! problem at once and `validate --connect` names the consumer it will create; every
//! command's `--help` lists the config formats and every exit code it can return; a binary
//! built on `sinks-cli` under another name names itself in every command it prints; `/readyz`
//! is not ready while the stream is gone, the log says so once (no fetch failure per retry),
//! and a re-created stream is bound again within `metrics.lag_poll_interval_seconds`; a start
//! that finds the stream changed does not log "consuming" while fetching is paused; a wrong
//! `--accept replay` has a way back (`redrive --new-epoch`), and `redrive` exits 5 while dead
//! letters remain.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;
use sinks_testkit::{free_port, read_stream, stream_with_subjects, wait_until};
use support::{Env, Sink, dlq_stream, env, nats_sink, records, text};

/// The status of `GET http://127.0.0.1:{port}{path}`, `None` while nothing answers.
async fn status(port: u16, path: &str) -> Option<u16> {
    let url = format!("http://127.0.0.1:{port}{path}");
    let answer = reqwest::Client::new().get(url).timeout(Duration::from_secs(2)).send().await.ok()?;
    Some(answer.status().as_u16())
}

fn file_sink(e: &Env) -> serde_json::Value {
    json!({"type": "file", "directory": e.out()})
}

fn event(generation: &str, i: usize) -> Bytes {
    Bytes::from(format!(r#"{{"generation":"{generation}","n":{i}}}"#))
}

/// The file sink's records of `generation`, with their stream epoch (`None`: the first).
fn stored(e: &Env, generation: &str) -> Vec<Option<String>> {
    let mark = format!(r#""generation":"{generation}""#);
    records(&e.out())
        .iter()
        .filter(|r| serde_json::to_string(r).unwrap().contains(&mark))
        .map(|r| r.get("stream_epoch").and_then(|v| v.as_str()).map(str::to_owned))
        .collect()
}

/// Lines of the JSON log `logs` whose message is `message`.
fn messages(logs: &str, message: &str) -> usize {
    logs.lines().filter(|l| l.contains(&format!("\"message\":\"{message}"))).count()
}

#[test]
fn every_command_lists_its_config_formats_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let help = text(&nats_sink(&["--help"], dir.path()));
    assert!(help.contains("Config files: JSON"), "{help}");
    for code in ["0  success", "1  runtime error", "2  configuration", "3  reconcile", "4  reconcile", "5  redrive"] {
        assert!(help.contains(&format!("\n  {code}")), "`{code}` in --help:\n{help}");
    }
    let reads_config = [
        "run",
        "validate",
        "show-effective-config",
        "test-sink",
        "ddl",
        "decrypt",
        "stream-plan",
        "inspect-ordered",
        "reconcile",
        "stream-identity",
        "replay",
        "redrive",
        // The binary's own commands too.
        "replay-spool",
        "query-lineage",
    ];
    for command in reads_config.iter().chain(&["sinks", "completions"]) {
        let help = text(&nats_sink(&[command, "--help"], dir.path()));
        assert!(help.contains("Exit codes:") && help.contains("\n  2  configuration"), "{command}:\n{help}");
        assert_eq!(help.contains("Config files: JSON"), reads_config.contains(command), "{command}:\n{help}");
        assert_eq!(help.contains("\n  3  reconcile"), *command == "reconcile", "{command}:\n{help}");
        assert_eq!(help.contains("\n  5  redrive"), *command == "redrive", "{command}:\n{help}");
    }
}

#[tokio::test]
async fn validate_reports_every_problem_at_once_and_names_the_consumer_it_will_create() {
    let e = env().await;
    // The four mistakes of a first config: a value of no kind, a range, a field the DLQ
    // needs, the sink's own required field.
    let broken = e.dir.path().join("broken.toml");
    std::fs::write(
        &broken,
        format!(
            "[nats]\nurl = \"{}\"\nstream = \"NEW_ORDERS\"\nconsumer = \"new-orders\"\nsubject = \"neworders.>\"\n\
             [delivery]\nack_policy = \"after_commit\"\nbatch_size = 0\n[dead_letter]\nenabled = true\n\
             [sink]\ntype = \"file\"\n",
            e.server.url()
        ),
    )
    .unwrap();
    let out = nats_sink(&["validate", broken.to_str().unwrap()], e.dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for field in ["delivery.ack_policy", "delivery.batch_size", "dead_letter.subject", "sink.directory"] {
        assert!(stderr.contains(&format!("`{field}`")), "`{field}` in the one run:\n{stderr}");
    }
    assert!(stderr.contains("must be in 1..=10000 (got 0)"), "{stderr}");
    // Fixed, against a server without the stream: run would create the stream, the DLQ's and
    // the consumer, and validate --connect says each, the consumer by name.
    let fixed = e.dir.path().join("fixed.toml");
    std::fs::write(
        &fixed,
        format!(
            "[nats]\nurl = \"{}\"\nstream = \"NEW_ORDERS\"\nconsumer = \"new-orders\"\nsubject = \"neworders.>\"\n\
             [stream_management]\ncreate_if_missing = true\ndead_letter_stream = \"NEW_ORDERS_DLQ\"\n\
             [dead_letter]\nenabled = true\nsubject = \"dlq.neworders\"\n[sink]\ntype = \"file\"\ndirectory = \"./out\"\n",
            e.server.url()
        ),
    )
    .unwrap();
    let out = nats_sink(&["validate", "--connect", fixed.to_str().unwrap()], e.dir.path());
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("consumer `new-orders` does not exist yet: run creates it"), "{said}");
    assert!(said.contains("stream `NEW_ORDERS_DLQ` does not exist yet"), "{said}");
}

#[tokio::test]
async fn a_binary_built_on_sinks_cli_names_itself_in_every_command_it_prints() {
    let e = env().await;
    let mine = e.dir.path().join("my-sink");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_nats-sink"), &mine).unwrap();
    let my_sink =
        |args: &[&str]| -> Output { Command::new(&mine).args(args).current_dir(e.dir.path()).output().unwrap() };
    let config = e.write_config_json(file_sink(&e), json!({}));
    let config = config.to_str().unwrap();

    let help = text(&my_sink(&["--help"]));
    assert!(help.contains("Usage: my-sink"), "{help}");
    let tested = text(&my_sink(&["test-sink", config]));
    assert!(tested.contains("`my-sink test-sink --create`") && !tested.contains("nats-sink"), "{tested}");
    // Three messages the destination lacks: reconcile's repair commands are this program's.
    e.publish(3, support::json).await;
    let out = my_sink(&["reconcile", config, "--repair"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "missing messages: {said}");
    assert!(said.contains("my-sink replay ") && !said.contains("nats-sink replay"), "{said}");
    // What the runtime tells the operator names it too.
    let bind = e.write_config_json_as(
        "bind.json",
        file_sink(&e),
        json!({"consumer_management": {"mode": "bind_only"}, "stream_guard": {"bucket": "missing_bucket"}}),
    );
    let out = my_sink(&["validate", "--connect", bind.to_str().unwrap()]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("`my-sink stream-plan`") && !said.contains("nats-sink"), "{said}");
}

#[tokio::test]
async fn readiness_follows_the_stream_and_its_loss_is_said_once_and_noticed_within_the_poll_interval() {
    let e = env().await;
    let port = free_port();
    let config = e.write_config_json(
        file_sink(&e),
        json!({
            "metrics": {"listen": format!("127.0.0.1:{port}"), "lag_poll_interval_seconds": 2},
            "stream_guard": {"on_change": "new_epoch", "recheck_seconds": 1},
            "logging": {"format": "json", "level": "INFO"},
        }),
    );
    let run = Sink::start(&config, e.dir.path(), &[]);
    let ready = wait_until(Duration::from_secs(20), || async { status(port, "/readyz").await == Some(200) }).await;
    assert!(ready, "{}", run.logs());

    e.js.delete_stream(&e.stream).await.unwrap();
    let deleted = Instant::now();
    let unready = wait_until(Duration::from_secs(5), || async { status(port, "/readyz").await == Some(503) }).await;
    assert!(unready, "/readyz is ready while the stream is gone: {}", run.logs());
    let noticed = deleted.elapsed();
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(status(port, "/readyz").await, Some(503), "still gone");
    let logs = run.logs();
    assert!(messages(&logs, "fetch failed; retrying") <= 1, "one warning for the failed fetches: {logs}");
    assert_eq!(messages(&logs, "the stream cannot be read"), 1, "said once: {logs}");

    stream_with_subjects(&e.js, &e.stream, &[&format!("{}.>", e.subject_root)]).await;
    let created = Instant::now();
    let bound =
        wait_until(Duration::from_secs(10), || async { messages(&run.logs(), "consumer bound again") == 1 }).await;
    let rebound = created.elapsed();
    assert!(bound, "{}", run.logs());
    assert!(rebound < Duration::from_secs(5), "bound again {rebound:?} after the stream came back (poll: 2 s)");
    let ready = wait_until(Duration::from_secs(10), || async { status(port, "/readyz").await == Some(200) }).await;
    assert!(ready, "{}", run.logs());
    e.publish(1, |i| event("after", i)).await;
    assert!(wait_until(Duration::from_secs(15), || async { stored(&e, "after").len() == 1 }).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    eprintln!("not ready {noticed:?} after the stream was deleted; bound again {rebound:?} after it came back");
}

/// `nats-sink ARGS` with `config` last; its exit code and output.
fn command(e: &Env, args: &[&str], config: &Path) -> (Option<i32>, String) {
    let mut all: Vec<&str> = args.to_vec();
    all.push(config.to_str().unwrap());
    let out = nats_sink(&all, e.dir.path());
    (out.status.code(), text(&out))
}

#[tokio::test]
async fn a_wrong_replay_decision_has_a_way_back_and_redrive_exits_5_while_dead_letters_remain() {
    let e = env().await;
    let (dlq, subject) = dlq_stream(&e).await;
    let config = e.write_config_json(
        file_sink(&e),
        json!({
            "dead_letter": {"enabled": true, "subject": subject},
            "stream_guard": {"recheck_seconds": 1},
            "metrics": {"lag_poll_interval_seconds": 1},
            "logging": {"format": "json", "level": "INFO"},
        }),
    );
    e.publish(10, |i| event("old", i)).await;
    let run = Sink::start(&config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(30), || async { stored(&e, "old").len() == 10 && e.settled().await }).await);
    assert_eq!(run.terminate(), Some(0));

    // Deleted and re-created with other events: the sink starts paused, and says so instead
    // of "consuming" (getting-started's running check greps for it).
    e.js.delete_stream(&e.stream).await.unwrap();
    stream_with_subjects(&e.js, &e.stream, &[&format!("{}.>", e.subject_root)]).await;
    e.publish(10, |i| event("new", i)).await;
    let run = Sink::start(&config, e.dir.path(), &[]);
    let paused = wait_until(Duration::from_secs(30), || async {
        run.logs().contains("bound, not fetching: paused until the stream's identity is decided")
    })
    .await;
    assert!(paused, "{}", run.logs());
    assert_eq!(messages(&run.logs(), "consuming"), 0, "not consuming while paused: {}", run.logs());

    // The wrong decision: a replay. The new events' sequences name old records: each is
    // refused as sequence_reused and dead-lettered, none overwrites an old one.
    let (code, said) = command(&e, &["stream-identity", "--accept", "replay"], &config);
    assert_eq!(code, Some(0), "{said}");
    let refused = wait_until(Duration::from_secs(30), || async {
        read_stream(&e.js, &dlq).await.len() == 10 && e.settled().await
    })
    .await;
    assert!(refused, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    assert!(stored(&e, "new").is_empty());

    // No decision left to change; the way back is named.
    let (code, said) = command(&e, &["stream-identity", "--accept", "new-epoch"], &config);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("nothing to decide") && said.contains("redrive CONFIG --new-epoch"), "{said}");
    // A plain redrive fails again: exit 5, dead letters remain (a cron job can tell).
    let (code, said) = command(&e, &["redrive"], &config);
    assert_eq!(code, Some(5), "{said}");
    assert!(said.contains("failed again"), "{said}");
    // The way back: each new event under a key of the stream's own epoch.
    let (code, said) = command(&e, &["redrive", "--new-epoch"], &config);
    assert_eq!(code, Some(0), "{said}");
    let new = stored(&e, "new");
    assert_eq!(new.len(), 10, "{said}");
    let epoch = new[0].clone().unwrap_or_default();
    assert!(epoch.starts_with('e') && new.iter().all(|x| x.as_deref() == Some(epoch.as_str())), "{new:?}");
    assert_eq!(stored(&e, "old"), vec![None; 10], "the old records are untouched");
    // Everything is done: the dry run says so, without empty headings.
    let (code, said) = command(&e, &["redrive", "--dry-run"], &config);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("nothing to redrive: every selected record is done"), "{said}");
    assert!(!said.contains("by error type:"), "{said}");
}
