//! The operator's first hour, through the binary: every mistake a newcomer makes (a subject
//! the stream does not capture, a directory under a regular file, a missing directory with
//! `create_directory = false`, a DLQ subject no stream captures, an unset secret variable, a
//! misspelled field in the file or in an environment override, a wrong type, a consumer that
//! exists with another filter, `replay` without a start) ends in a clear error: exit 2 (or
//! the retry lines of what can heal by itself), a message naming the field and what to do,
//! printed once, and for the permanent ones within 10 s. Plus the start-up line's fields,
//! the dead-letter warning and `--help`.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{Env, Sink, env, nats_sink, nats_sink_with_env, text};

/// A config for `e` with `sink` and `extra` merged over the test defaults.
fn config(e: &Env, sink: serde_json::Value, extra: serde_json::Value) -> std::path::PathBuf {
    e.write_config_json(sink, extra)
}

fn file_sink(e: &Env) -> serde_json::Value {
    json!({"type": "file", "directory": e.out()})
}

/// `nats-sink run CONFIG`, which must exit `code` within 10 s; returns its output.
fn run_exits(e: &Env, config: &std::path::Path, code: i32) -> String {
    let started = Instant::now();
    let out = nats_sink(&["run", config.to_str().unwrap()], e.dir.path());
    let all = text(&out);
    assert_eq!(out.status.code(), Some(code), "{all}");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}: {all}", started.elapsed());
    all
}

#[tokio::test]
async fn permanent_mistakes_exit_2_at_once_naming_the_field() {
    let e = env().await;
    // A subject the stream does not capture.
    let c = config(&e, file_sink(&e), json!({"nats": {"subject": "payments.>"}}));
    let out = run_exits(&e, &c, 2);
    assert!(out.contains("`nats.subject`") && out.contains("overlaps `payments.>`"), "{out}");
    assert!(out.contains(&format!("`{}.>`", e.subject_root)), "names the stream's subjects: {out}");
    assert_eq!(out.matches("overlaps `payments.>`").count(), 1, "printed once: {out}");
    // validate --connect says the same without consuming.
    let v = nats_sink(&["validate", "--connect", c.to_str().unwrap()], e.dir.path());
    assert_eq!(v.status.code(), Some(2), "{}", text(&v));
    assert!(text(&v).contains("overlaps `payments.>`"), "{}", text(&v));

    // A directory below a regular file.
    let afile = e.dir.path().join("afile");
    std::fs::write(&afile, "x").unwrap();
    let c = config(&e, json!({"type": "file", "directory": afile.join("out")}), json!({}));
    let out = run_exits(&e, &c, 2);
    assert!(out.contains("`sink.directory`") && out.contains(&afile.join("out").display().to_string()), "{out}");

    // A missing directory with create_directory = false.
    let missing = e.dir.path().join("nowhere");
    let c = config(&e, json!({"type": "file", "directory": missing, "create_directory": false}), json!({}));
    let out = run_exits(&e, &c, 2);
    assert!(out.contains("`sink.directory`") && out.contains("create_directory is false"), "{out}");
    assert!(out.contains(&missing.display().to_string()), "{out}");

    // The DLQ on, and no stream captures its subject.
    let c = config(&e, file_sink(&e), json!({"dead_letter": {"enabled": true, "subject": "dlq.nobody"}}));
    let out = run_exits(&e, &c, 2);
    assert!(out.contains("`dead_letter.subject`") && out.contains("no stream captures `dlq.nobody`"), "{out}");
    let plan = nats_sink(&["stream-plan", c.to_str().unwrap()], e.dir.path());
    assert!(text(&plan).contains("dlq.nobody"), "stream-plan names the DLQ subject: {}", text(&plan));
}

#[tokio::test]
async fn a_consumer_that_exists_with_another_filter_names_it_and_the_fix() {
    let e = env().await;
    let first = config(&e, file_sink(&e), json!({"nats": {"subject": format!("{}.a.>", e.subject_root)}}));
    let mut sink = Sink::start(&first, e.dir.path(), &[]);
    assert!(
        sinks_testkit::wait_until(Duration::from_secs(10), || async { e.consumer_state().await.is_some() }).await,
        "{}",
        sink.logs()
    );
    sink.signal("-TERM");
    let _ = sink.child.wait();
    let second = config(&e, file_sink(&e), json!({"nats": {"subject": format!("{}.b.>", e.subject_root)}}));
    let out = run_exits(&e, &second, 2);
    assert!(out.contains("`nats.subject`") && out.contains(&format!("existing consumer `{}`", e.consumer)), "{out}");
    assert!(out.contains("consumer_management.mode = \"reconcile\"") && out.contains("new nats.consumer"), "{out}");
}

#[test]
fn validate_names_unset_secrets_typos_wrong_types_and_override_variables() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let base = r#"[nats]
url = "nats://127.0.0.1:4222"
stream = "ORDERS"
consumer = "orders-sink"
subject = "orders.>"
"#;
    /// (what, config text, environment, fragments the output must hold)
    type Case<'a> = (&'a str, String, &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (
            "unset secret",
            format!(
                "{base}user = \"app\"\npassword_env = \"NATS_SINKS_FIRST_HOUR_UNSET\"\n[sink]\ntype = \"file\"\ndirectory = \"/tmp/x\"\n"
            ),
            &[],
            &["`nats.password_env`", "NATS_SINKS_FIRST_HOUR_UNSET", "not set"],
        ),
        (
            "typo in the file",
            format!("{base}[sink]\ntype = \"file\"\ndirectry = \"/tmp/x\"\n"),
            &[],
            &["`sink.directry`", "did you mean `directory`?"],
        ),
        (
            "wrong type",
            format!("{base}[delivery]\nbatch_size = \"many\"\n[sink]\ntype = \"file\"\ndirectory = \"/tmp/x\"\n"),
            &[],
            &["`delivery.batch_size`", "expected a whole number in 1..=10000, got the string \"many\""],
        ),
        (
            "typo in an override",
            format!("{base}[sink]\ntype = \"file\"\ndirectory = \"/tmp/x\"\n"),
            &[("NATS_SINKS__DELIVERY__BATCH_SIZ", "5")],
            &[
                "`delivery.batch_siz`",
                "did you mean `batch_size`?",
                "set by the environment variable NATS_SINKS__DELIVERY__BATCH_SIZ",
            ],
        ),
    ];
    for (what, config, envs, fragments) in cases {
        let path = write(&format!("{}.toml", what.replace(' ', "-")), config);
        let out = nats_sink_with_env(&["validate", path.to_str().unwrap()], dir.path(), envs);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(2), "{what}: {all}");
        for fragment in *fragments {
            assert!(all.contains(fragment), "{what}: `{fragment}` missing from:\n{all}");
        }
        assert!(!all.contains("expected one of"), "{what}: no field list: {all}");
        assert!(!all.contains("usize"), "{what}: no Rust type names: {all}");
    }
    // A valid config: the dead-letter warning.
    let ok = write("ok.toml", &format!("{base}[sink]\ntype = \"file\"\ndirectory = \"/tmp/x\"\n"));
    let out = nats_sink(&["validate", ok.to_str().unwrap()], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("warning: dead_letter.enabled is false"), "{}", text(&out));
    // --help: the sinks of this binary and the override convention.
    let help = text(&nats_sink(&["--help"], dir.path()));
    assert!(help.contains("Sinks built into this binary: blackhole, file"), "{help}");
    assert!(help.contains("NATS_SINKS__<SECTION>__<FIELD>"), "{help}");
    // replay names both ways to say where to start.
    let out = nats_sink(&["replay", ok.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--from-seq N or --since"), "{}", text(&out));
}

#[tokio::test]
async fn an_unreachable_server_is_retried_naming_it_and_the_start_up_line_says_what_runs() {
    let e = env().await;
    // Nothing listens there: retried (it can heal), each line names the server.
    let port = sinks_testkit::free_port();
    let c = config(
        &e,
        file_sink(&e),
        json!({"nats": {"url": format!("nats://127.0.0.1:{port}")}, "logging": {"format": "json"}}),
    );
    let sink = Sink::start(&c, e.dir.path(), &[]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let logs = sink.logs();
    let (code, _) = sink.stop();
    assert_eq!(code, Some(0), "{logs}");
    let retries: Vec<&str> = logs.lines().filter(|l| l.contains("not ready; retrying")).collect();
    assert!(!retries.is_empty(), "{logs}");
    assert!(retries.iter().all(|l| l.contains(&format!("\"target\":\"127.0.0.1:{port}\""))), "{logs}");

    // A valid run: one line says the server, stream, consumer, filter, ack policy, batch size,
    // batches in flight, the DLQ state and the destination.
    let c = config(&e, file_sink(&e), json!({"logging": {"format": "json"}}));
    let sink = Sink::start(&c, e.dir.path(), &[]);
    let ready =
        sinks_testkit::wait_until(Duration::from_secs(10), || async { sink.logs().contains("\"consuming\"") }).await;
    let logs = sink.logs();
    let _ = sink.stop();
    assert!(ready, "{logs}");
    let line: serde_json::Value =
        serde_json::from_str(logs.lines().find(|l| l.contains("\"message\":\"consuming\"")).unwrap()).unwrap();
    let expect = [
        ("servers", json!(format!("127.0.0.1:{}", e.server.port()))),
        ("stream", json!(e.stream)),
        ("consumer", json!(e.consumer)),
        ("filter", json!(format!("{}.>", e.subject_root))),
        ("ack_policy", json!("explicit")),
        ("batch_size", json!(100)),
        ("max_in_flight_batches", json!(1)),
        ("dead_letter", json!("off")),
        ("destination", json!(format!("file directory={}", e.out().display()))),
    ];
    for (field, value) in expect {
        assert_eq!(line[field], value, "`{field}` of {line}");
    }
    assert!(logs.contains("dead_letter.enabled is false"), "the DLQ warning at start-up: {logs}");
}
