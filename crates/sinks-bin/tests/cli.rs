//! The `nats-sink` command line without NATS: exit codes, field-naming errors, redaction.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nats_sink(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nats-sink")).args(args).output().unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn config(dir: &Path, nats: &str, extra: &str) -> String {
    format!(
        r#"{{"nats": {{{nats}}}, {extra} "sink": {{"type": "file", "directory": "{}"}}}}"#,
        dir.join("out").display()
    )
}

const NATS_OK: &str = r#""stream": "ORDERS", "consumer": "c", "subject": "orders.*""#;

#[test]
fn validate_accepts_a_good_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "ok.json", &config(dir.path(), NATS_OK, ""));
    let out = nats_sink(&["validate", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("configuration is valid: sink=file stream=ORDERS"));
}

#[test]
fn bad_configs_exit_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("unknown field", config(dir.path(), &format!("{NATS_OK}, \"colour\": \"blue\""), ""), "`nats.colour`"),
        ("missing stream", config(dir.path(), r#""consumer": "c", "subject": "orders.*""#, ""), "`nats.stream`"),
        (
            "invalid subject",
            config(dir.path(), r#""stream": "S", "consumer": "c", "subject": "orders..x""#, ""),
            "`nats.subject`",
        ),
        (
            "inline secret",
            config(dir.path(), &format!("{NATS_OK}, \"user\": \"app\", \"password\": \"hunter2\""), ""),
            "`nats.password`",
        ),
        (
            "unknown sink field",
            format!(r#"{{"nats": {{{NATS_OK}}}, "sink": {{"type": "file", "directory": "/x", "colour": 1}}}}"#),
            "`sink.colour`",
        ),
        ("unknown sink type", format!(r#"{{"nats": {{{NATS_OK}}}, "sink": {{"type": "teleport"}}}}"#), "`sink.type`"),
    ];
    for (name, body, field) in cases {
        let path = write(dir.path(), "bad.json", &body);
        let out = nats_sink(&["validate", path.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(field), "{name}: expected {field} in {stderr}");
        assert!(!stderr.contains("hunter2"), "{name}: a secret leaked into the error output");
    }
}

#[test]
fn show_effective_config_fills_defaults_and_redacts() {
    let dir = tempfile::tempdir().unwrap();
    let nats = format!("{NATS_OK}, \"user\": \"app\", \"password_env\": \"MY_NATS_PASSWORD\"");
    let path = write(dir.path(), "c.json", &config(dir.path(), &nats, ""));
    let out = nats_sink(&["show-effective-config", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("MY_NATS_PASSWORD"), "env var names of secrets are redacted");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["nats"]["password_env"], "REDACTED", "a valid variable name stands in for it");
    assert_eq!(v["nats"]["user"], "app");
    assert_eq!(v["delivery"]["batch_size"], 100);
    assert_eq!(v["consumer_management"]["mode"], "create_if_missing");
    assert_eq!(v["sink"]["type"], "file");
    assert_eq!(v["sink"]["fsync"], true);
    assert_eq!(v["sink"]["filename_strategy"], "stream_sequence");
}

#[test]
fn version_is_printed() {
    let out = nats_sink(&["--version"]);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout).trim(), format!("nats-sink {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn test_sink_opens_and_checks_the_destination() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.json", &config(dir.path(), NATS_OK, ""));
    // Without --create, nothing is created: what run would create is named.
    let out = nats_sink(&["test-sink", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("`run` would create the directory") && said.contains("nats-sink test-sink --create"),
        "{said}"
    );
    assert!(!said.contains("is false"), "the switch is on in the config: {said}");
    assert!(!dir.path().join("out").exists(), "test-sink changed nothing");
    let out = nats_sink(&["test-sink", "--create", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("is reachable and healthy"), "{}", text(&out.stdout));
    // Once it is there, nothing would be created: test-sink says nothing of creating it.
    let out = nats_sink(&["test-sink", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("would create"), "{}", text(&out.stdout));
    assert!(dir.path().join("out").is_dir(), "--create made the directory");
    // Once it exists, test-sink opens it and checks its health, still creating nothing new.
    let out = nats_sink(&["test-sink", path.to_str().unwrap()]);
    assert!(text(&out.stdout).contains("is reachable and healthy"), "{}", text(&out.stdout));
    // Once it is there, nothing would be created: test-sink says nothing of creating it.
    let out = nats_sink(&["test-sink", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("would create"), "{}", text(&out.stdout));

    let missing = format!(
        r#"{{"nats": {{{NATS_OK}}}, "sink": {{"type": "file", "directory": "{}", "create_directory": false}}}}"#,
        dir.path().join("absent").display()
    );
    let path = write(dir.path(), "missing.json", &missing);
    let out = nats_sink(&["test-sink", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("directory"));
}

#[test]
fn the_reference_s3_example_validates_offline_and_its_secret_names_are_masked() {
    let dir = tempfile::tempdir().unwrap();
    // The reference's complete S3 example section, endpoint unreachable on purpose: validate
    // and show-effective-config must not connect.
    let body = format!(
        r#"{{"nats": {{{NATS_OK}}}, "sink": {{"type": "s3", "bucket": "nats-sinks-events", "prefix": "mission/events",
            "endpoint_url": "https://object-store.example.invalid", "region_name": "eu-amsterdam-1",
            "credential_mode": "environment", "aws_access_key_id_env": "NATS_SINKS_S3_ACCESS_KEY_ID",
            "aws_secret_access_key_env": "NATS_SINKS_S3_SECRET_ACCESS_KEY", "aws_session_token_env": "NATS_SINKS_S3_SESSION_TOKEN",
            "key_strategy": "stream_sequence", "key_prefix": "archive", "object_suffix": ".json",
            "duplicate_policy": "skip_existing", "object_format": "envelope", "metadata_mode": "sidecar",
            "sidecar_suffix": ".metadata.json", "payload_mode": "json_or_envelope", "compression": "none",
            "content_type": "application/json", "object_metadata": {{"purpose": "archive"}},
            "server_side_encryption": "AES256", "max_key_bytes": 1024, "max_object_bytes": 16777216,
            "max_metadata_bytes": 4096, "request_timeout_seconds": 10, "max_retries": 2, "retry_backoff_ms": 250,
            "retry_max_backoff_ms": 5000, "retry_backoff_mode": "exponential", "retry_backoff_multiplier": 2.0,
            "retry_jitter": "full"}}}}"#
    );
    let path = write(dir.path(), "s3.json", &body);
    // validate refuses the variables unset (run would fail on them) ...
    let out = nats_sink(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("`NATS_SINKS_S3_SESSION_TOKEN`, which is not set"), "{}", text(&out.stderr));
    // ... and accepts them set.
    let vars = ["NATS_SINKS_S3_ACCESS_KEY_ID", "NATS_SINKS_S3_SECRET_ACCESS_KEY", "NATS_SINKS_S3_SESSION_TOKEN"];
    let out = Command::new(env!("CARGO_BIN_EXE_nats-sink"))
        .args(["validate", path.to_str().unwrap()])
        .envs(vars.iter().map(|v| (*v, "dummy")))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("sink=s3"));
    let out = nats_sink(&["show-effective-config", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("NATS_SINKS_S3_SECRET_ACCESS_KEY") && !stdout.contains("NATS_SINKS_S3_ACCESS_KEY_ID"));
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["sink"]["aws_secret_access_key_env"], "REDACTED");
    assert_eq!(v["sink"]["max_concurrent_requests"], 64, "defaults filled in");
    assert_eq!(v["sink"]["content_check"], true);
    let bad = body.replace("\"duplicate_policy\": \"skip_existing\"", "\"duplicate_policy\": \"fail_existing\"");
    let path = write(dir.path(), "bad.json", &bad);
    let out = nats_sink(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("`sink.metadata_mode`"), "{}", text(&out.stderr));
}
