//! The `nats-sink` binary's command line without NATS, for what the binary and its sink
//! kinds add: its version, the file kind's defaults and directory, the reference's S3 example
//! (the library's own commands, errors and redaction are tested in `crates/sinks-cli/tests`).
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

/// The file kind's section as the binary prints it (the library's own redaction and
/// defaults are `crates/sinks-cli/tests/commands.rs`'s).
#[test]
fn show_effective_config_fills_the_file_sinks_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.json", &config(dir.path(), NATS_OK, ""));
    let out = nats_sink(&["show-effective-config", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
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

/// The file kind's directory is what `test-sink` would create (what the library says of a
/// kind's creation is `crates/sinks-cli/tests/commands.rs`'s).
#[test]
fn test_sink_names_and_creates_the_file_sinks_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.json", &config(dir.path(), NATS_OK, ""));
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
    assert!(dir.path().join("out").is_dir(), "--create made the directory");

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
