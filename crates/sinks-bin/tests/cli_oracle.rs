//! The Oracle sink through the `nats-sink` command line, without a database: `ddl` derived
//! from the configured mapping, `query-lineage --dry-run` (allow-listed field, bound value,
//! bounded limit, payload only on request), and start-up without Oracle Instant Client
//! (exit 2 naming what to install and LD_LIBRARY_PATH).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nats_sink(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nats-sink"));
    command.args(args).env_remove("NATS_SINKS_NATS_URL");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A config with an Oracle sink section extended by `sink_extra` (JSON members).
fn oracle_config(dir: &Path, sink_extra: &str) -> PathBuf {
    let body = format!(
        r#"{{"nats": {{"url": "nats://127.0.0.1:1", "stream": "ORDERS", "consumer": "c", "subject": "orders.*"}},
            "sink": {{"type": "oracle", "dsn": "127.0.0.1:1/NOPE", "user": "app", "password_env": "NATS_SINKS_CLI_ORACLE_PW",
                      "table": "events" {sink_extra}}}}}"#
    );
    let path = dir.join("oracle.json");
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn ddl_follows_the_configured_mapping_routes_and_json_type() {
    let dir = tempfile::tempdir().unwrap();
    let extra = r#", "json_column_type": "clob",
        "columns": {"payload": "BODY", "subject": "SUBJ"},
        "idempotency": {"strategy": "message_id"},
        "table_routes": [{"subject": "orders.eu", "table": "EU_EVENTS"}]"#;
    let path = oracle_config(dir.path(), extra);
    let out = nats_sink(&["ddl", path.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ddl = text(&out.stdout);
    assert!(ddl.contains(r#"CREATE TABLE "EVENTS" ("#), "{ddl}");
    assert!(ddl.contains(r#"CREATE TABLE "EU_EVENTS" ("#), "{ddl}");
    assert!(ddl.contains(r#""BODY" CLOB CHECK ("BODY" IS JSON)"#), "{ddl}");
    assert!(ddl.contains(r#""SUBJ" "#), "{ddl}");
    assert!(!ddl.contains(r#""PAYLOAD_JSON""#), "the renamed column replaces the default: {ddl}");
    assert!(ddl.contains(r#"PRIMARY KEY ("MESSAGE_ID")"#), "the key follows the idempotency strategy: {ddl}");
    assert!(!ddl.contains(" JSON,"), "no native JSON columns with json_column_type clob: {ddl}");
}

#[test]
fn query_lineage_dry_run_binds_the_value_and_omits_the_payload() {
    let dir = tempfile::tempdir().unwrap();
    let path = oracle_config(dir.path(), "");
    let value = "M-7' OR '1'='1";
    let out = nats_sink(
        &[
            "query-lineage",
            path.to_str().unwrap(),
            "--field",
            "mission_id",
            "--value",
            value,
            "--dry-run",
            "--limit",
            "5",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan = text(&out.stdout);
    assert!(plan.contains("JSON_VALUE(\"MISSION_METADATA_JSON\", '$.mission_id') = :1"), "{plan}");
    assert!(plan.contains("FETCH FIRST 5 ROWS ONLY"), "{plan}");
    assert!(!plan.contains("M-7"), "the value is a bind, never in the text: {plan}");
    assert!(!plan.contains("PAYLOAD_JSON"), "payload excluded by default: {plan}");

    let out = nats_sink(
        &[
            "query-lineage",
            path.to_str().unwrap(),
            "--field",
            "message_id",
            "--value",
            "id-1",
            "--dry-run",
            "--include-payload",
            "--format",
            "json",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["payload_included"], true);
    assert_eq!(plan["table"], "EVENTS");
    assert!(plan["sql"].as_str().unwrap().contains("\"MESSAGE_ID\" LIKE :1 ESCAPE"), "{plan}");
    assert!(plan["sql"].as_str().unwrap().contains("PAYLOAD_JSON"), "{plan}");
}

#[test]
fn query_lineage_refuses_what_is_not_allowed_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = oracle_config(dir.path(), "");
    let p = path.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--field", "PAYLOAD_JSON", "--value", "x"], "--field must be one of"),
        (&["--field", "mission_id", "--value", "x", "--limit", "0"], "--limit must be between 1 and"),
        (&["--field", "mission_id", "--value", "x", "--table", "OTHER"], "--table must be the configured sink.table"),
        (&["--field", "mission_id", "--value", "x", "--format", "xml"], "must be `text` or `json`"),
    ];
    for (args, words) in cases {
        let mut all = vec!["query-lineage", p, "--dry-run"];
        all.extend_from_slice(args);
        let out = nats_sink(&all, &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(words), "{args:?}: expected {words}, got {stderr}");
    }
    let file = dir.path().join("file.json");
    std::fs::write(
        &file,
        r#"{"nats": {"stream": "S", "consumer": "c", "subject": "s.*"}, "sink": {"type": "file", "directory": "/tmp/x"}}"#,
    )
    .unwrap();
    let out = nats_sink(&["query-lineage", file.to_str().unwrap(), "--field", "subject", "--value", "s.a"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("needs an `oracle` sink"), "{}", text(&out.stderr));
}

/// Without Oracle Instant Client, opening the sink is a configuration error (exit 2) that
/// says what to install and which variable points to it. Where Instant Client is installed,
/// the same start-up reaches the network and fails differently; the test then checks that
/// instead.
#[test]
fn a_missing_instant_client_is_exit_2_with_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let path = oracle_config(dir.path(), "");
    let empty = tempfile::tempdir().unwrap();
    let env = [("NATS_SINKS_CLI_ORACLE_PW", "not-a-secret"), ("LD_LIBRARY_PATH", empty.path().to_str().unwrap())];
    for command in ["test-sink", "run"] {
        let out = nats_sink(&[command, path.to_str().unwrap()], &env);
        let stderr = text(&out.stderr);
        if !stderr.contains("DPI-1047") {
            // Instant Client is installed: test-sink reaches the network and fails there
            // (`run` would retry an unreachable database, so it is not started).
            eprintln!("NOTE: Oracle Instant Client is installed here; checked the unreachable database instead");
            assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
            assert!(stderr.contains("ORA-") || stderr.contains("DPI-"), "{command}: {stderr}");
            break;
        }
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(stderr.contains("install Oracle Instant Client"), "{command}: {stderr}");
        assert!(stderr.contains("LD_LIBRARY_PATH"), "{command}: {stderr}");
        assert!(!stderr.contains("not-a-secret"), "{command}: the password is never printed");
    }
}

#[test]
fn the_password_variable_must_be_set_for_test_sink() {
    let dir = tempfile::tempdir().unwrap();
    let path = oracle_config(dir.path(), "");
    let out = nats_sink(&["test-sink", path.to_str().unwrap()], &[]);
    let stderr = text(&out.stderr);
    // The variable is checked before the client library is loaded.
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("NATS_SINKS_CLI_ORACLE_PW (sink.password_env) is not set"), "{stderr}");
}

/// The two reference Oracle examples refused for their DLQ subject (see
/// reference_examples.rs) have sink sections this build accepts unchanged: with only
/// `dead_letter.subject` moved out of the consumed subjects, they validate.
#[test]
fn the_refused_reference_oracle_examples_have_valid_sink_sections() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference");
    for name in ["oracle-jetstream.json", "oracle-jetstream-config-routed.json"] {
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fixtures.join(name)).unwrap()).unwrap();
        assert_eq!(config["sink"]["type"], "oracle", "{name}");
        config["dead_letter"]["subject"] = "dead.letters".into();
        let path = dir.path().join(name);
        std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
        // `validate` checks that the variables a config names are set.
        let out = nats_sink(&["validate", path.to_str().unwrap()], &[("ORACLE_PASSWORD", "not-a-real-password")]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("sink=oracle"), "{name}");
    }
}
