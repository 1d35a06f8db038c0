//! The operator commands of the library as a program prints them, for a sink kind the test
//! registers itself (`store`, `support/mod.rs`): exit codes, errors naming the field,
//! redaction, what `test-sink` says it would create, the kinds `sinks` lists, the offline
//! stream plan, completions, and printing into a closed pipe. The test binary is the program
//! too (`harness = false`: started with its marker variable it runs `sinks_cli::main`).
#![allow(clippy::unwrap_used)]

mod support;

use std::process::{Command, ExitCode, Stdio};

use serde_json::{Value, json};
use support::{KIND, KNOWN_KIND, PROGRAM_NAME, VERSION, config, program, text, write};

fn main() -> ExitCode {
    support::main(&[
        ("validate_accepts_a_good_config", validate_accepts_a_good_config),
        ("bad_configs_exit_2_naming_the_field", bad_configs_exit_2_naming_the_field),
        ("show_effective_config_fills_defaults_and_redacts", show_effective_config_fills_defaults_and_redacts),
        ("the_program_has_the_registrys_name_and_version", the_program_has_the_registrys_name_and_version),
        (
            "test_sink_says_what_run_would_create_and_creates_it_on_request",
            test_sink_says_what_run_would_create_and_creates_it_on_request,
        ),
        ("sinks_lists_the_registered_and_the_known_kinds", sinks_lists_the_registered_and_the_known_kinds),
        ("stream_plan_and_completions_work_offline", stream_plan_and_completions_work_offline),
        ("printing_commands_end_quietly_on_a_closed_pipe", printing_commands_end_quietly_on_a_closed_pipe),
    ])
}

fn validate_accepts_a_good_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "ok.json", &config(dir.path(), "", ""));
    let out = program(&["validate", path.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("configuration is valid: sink=store stream=ORDERS"), "{stdout}");
    // What the kind's factory says about the sink is part of the report.
    assert!(stdout.contains(&format!("a message of ORDERS is stored below {}", dir.path().join("store").display())));
}

fn bad_configs_exit_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let store = |extra: &str| {
        format!(
            r#"{{"nats": {{"stream": "ORDERS", "consumer": "c", "subject": "orders.*"}}, "sink": {{"type": "store", "directory": "/x"{extra}}}}}"#
        )
    };
    let cases = [
        ("unknown field", config(dir.path(), r#", "colour": "blue""#, ""), "`nats.colour`".to_owned()),
        (
            "missing stream",
            r#"{"nats": {"consumer": "c", "subject": "orders.*"}, "sink": {"type": "store", "directory": "/x"}}"#.to_owned(),
            "`nats.stream`".to_owned(),
        ),
        (
            "invalid subject",
            r#"{"nats": {"stream": "S", "consumer": "c", "subject": "orders..x"}, "sink": {"type": "store", "directory": "/x"}}"#
                .to_owned(),
            "`nats.subject`".to_owned(),
        ),
        (
            "inline secret",
            config(dir.path(), r#", "user": "app", "password": "hunter2""#, ""),
            "`nats.password`".to_owned(),
        ),
        ("unknown sink field", store(r#", "colour": 1"#), "`sink.colour`".to_owned()),
        ("a value the kind refuses", store(r#", "capacity": 0"#), "`sink.capacity`".to_owned()),
        (
            "unknown sink type",
            r#"{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"}, "sink": {"type": "warp"}}"#.to_owned(),
            "`sink.type`".to_owned(),
        ),
        (
            "a kind this build lacks",
            format!(r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "s.>"}}, "sink": {{"type": "{}"}}}}"#, KNOWN_KIND.0),
            KNOWN_KIND.1.to_owned(),
        ),
    ];
    for (name, body, field) in cases {
        let path = write(dir.path(), "bad.json", &body);
        let out = program(&["validate", path.to_str().unwrap()]);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(&field), "{name}: expected {field} in {stderr}");
        assert!(!stderr.contains("hunter2"), "{name}: a secret leaked into the error output");
    }
}

fn show_effective_config_fills_defaults_and_redacts() {
    let dir = tempfile::tempdir().unwrap();
    let body = config(dir.path(), r#", "user": "app", "password_env": "MY_NATS_PASSWORD""#, "")
        .replace(r#""type": "store","#, r#""type": "store", "token_env": "MY_STORE_TOKEN","#);
    let path = write(dir.path(), "c.json", &body);
    let out = program(&["show-effective-config", path.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stdout.contains("MY_NATS_PASSWORD") && !stdout.contains("MY_STORE_TOKEN"), "variable names are redacted");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["nats"]["password_env"], "REDACTED", "a valid variable name stands in for it");
    assert_eq!(v["nats"]["user"], "app");
    assert_eq!(v["delivery"]["batch_size"], 100);
    assert_eq!(v["consumer_management"]["mode"], "create_if_missing");
    // The sink section is what the kind's factory made of it: its type, its defaults.
    assert_eq!(v["sink"]["type"], KIND);
    assert_eq!(v["sink"]["capacity"], 1_000);
    assert_eq!(v["sink"]["create_directory"], true);
    assert_eq!(v["sink"]["token_env"], "REDACTED");
    for format in ["toml", "yaml"] {
        let out = program(&["show-effective-config", path.to_str().unwrap(), "--format", format]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{format}: {stderr}");
        assert!(stdout.contains("capacity") && !stdout.contains("MY_STORE_TOKEN"), "{format}: {stdout}");
    }
}

fn the_program_has_the_registrys_name_and_version() {
    let out = program(&["--version"]);
    assert!(out.status.success());
    assert_eq!(text(&out).0.trim(), format!("{PROGRAM_NAME} {VERSION}"));
    // A config that cannot be read is a configuration error; the help lists the commands
    // and ends with the exit codes.
    let out = program(&["validate", "/nonexistent/config.json"]);
    assert_eq!(out.status.code(), Some(2));
    let out = program(&["--help"]);
    let (stdout, _) = text(&out);
    assert!(out.status.success());
    assert!(stdout.contains("stream-plan") && stdout.contains("test-sink"), "{stdout}");
    assert!(stdout.contains("Exit codes:") && stdout.contains("2  configuration or usage error"), "{stdout}");
}

fn test_sink_says_what_run_would_create_and_creates_it_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let path = write(dir.path(), "c.json", &config(dir.path(), "", ""));
    let path = path.to_str().unwrap();
    // Without --create, nothing is created: what run would create is named.
    let out = program(&["test-sink", path]);
    let (said, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let expected = format!("`run` would create the directory {}", store.display());
    assert!(said.contains(&expected) && said.contains(&format!("{PROGRAM_NAME} test-sink --create")), "{said}");
    assert!(said.contains("(sink.create_directory is on)"), "{said}");
    assert!(!store.exists(), "test-sink changed nothing");
    let out = program(&["test-sink", "--create", path]);
    assert!(out.status.success(), "{}", text(&out).1);
    assert!(text(&out).0.contains("sink `store` is reachable and healthy"), "{}", text(&out).0);
    assert!(store.is_dir(), "--create made the directory");
    // Once it is there, nothing would be created: test-sink says nothing of creating it.
    let out = program(&["test-sink", path]);
    assert!(out.status.success(), "{}", text(&out).1);
    assert!(text(&out).0.contains("is reachable and healthy") && !text(&out).0.contains("would create"));

    // With creation off in the config, a missing store is the config's error.
    let off =
        config(dir.path(), "", "").replace(r#""type": "store","#, r#""type": "store", "create_directory": false,"#);
    let off = off.replace(&store.display().to_string(), &dir.path().join("absent").display().to_string());
    let path = write(dir.path(), "missing.json", &off);
    let out = program(&["test-sink", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out).1);
    assert!(text(&out).1.contains("does not exist"), "{}", text(&out).1);
}

fn sinks_lists_the_registered_and_the_known_kinds() {
    let out = program(&["sinks"]);
    let (listed, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(listed.contains("store: built in") && listed.contains("blackhole: built in"), "{listed}");
    assert!(
        listed.contains(&format!("{}: not in this build (cargo feature `{}`", KNOWN_KIND.0, KNOWN_KIND.1)),
        "{listed}"
    );
    let out = program(&["sinks", "--names"]);
    let names: Vec<String> = text(&out).0.lines().map(str::to_owned).collect();
    assert!(names.contains(&"store".to_owned()) && !names.iter().any(|n| n == KNOWN_KIND.0), "{names:?}");
}

fn stream_plan_and_completions_work_offline() {
    let dir = tempfile::tempdir().unwrap();
    let body = json!({"nats": {"url": "nats://127.0.0.1:1", "stream": "ORDERS", "consumer": "orders-sink", "subject": "orders.>"},
                      "dead_letter": {"enabled": true, "subject": "dlq.orders"},
                      "sink": {"type": "store", "directory": dir.path().join("store")}});
    let path = write(dir.path(), "c.json", &body.to_string());
    let path = path.to_str().unwrap();
    let out = program(&["stream-plan", path, "--format", "json", "--replicas", "3"]);
    assert!(out.status.success(), "{}", text(&out).1);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["recommended_stream_settings"]["replicas"], 3);
    let publish: Vec<&str> =
        plan["runtime_publish_permissions"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(publish.contains(&"dlq.orders") && publish.contains(&"$JS.ACK.ORDERS.orders-sink.>"), "{publish:?}");

    let out = program(&["stream-plan", path, "--replicas", "9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("--replicas"));

    let out = program(&["completions", "bash"]);
    if cfg!(feature = "completions") {
        assert!(out.status.success());
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains("stream-plan") && script.contains("inspect-ordered"), "{script}");
    } else {
        assert_ne!(out.status.code(), Some(0), "a build without the feature says which feature brings it");
        assert!(text(&out).1.contains("completions"), "{}", text(&out).1);
    }
}

/// The printing commands end quietly when their reader goes away (`| head -1`): the read end
/// of the pipe is closed before they write, and they must exit 0, never panic.
fn printing_commands_end_quietly_on_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.json",
        r#"{"nats": {"url": "nats://127.0.0.1:4222", "stream": "S", "consumer": "c", "subject": "s.>"},
            "sink": {"type": "blackhole"}}"#,
    );
    let path = path.to_str().unwrap();
    let mut commands = vec![
        vec!["show-effective-config", path],
        vec!["stream-plan", path],
        vec!["stream-plan", path, "--format", "json"],
        vec!["sinks"],
    ];
    if cfg!(feature = "completions") {
        commands.extend([vec!["completions", "bash"], vec!["man"]]);
    }
    for args in commands {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(&args)
            .env("SINKS_CLI_TEST_AS_PROGRAM", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the command writes.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
}
