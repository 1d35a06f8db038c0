//! Config loading: reference JSON files load unchanged, TOML and YAML mean the same thing,
//! environment overrides apply, and every rejection names the field.
//!
//! Every test runs inside `figment::Jail`, which serializes tests that read the process
//! environment (the override test sets variables that would leak into the others).
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::result_large_err)]

use std::path::{Path, PathBuf};

use sinks_runtime::config::{Config, ConsumerMode};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const REFERENCE_FILE_CONFIG: &str = r#"{
  "nats": {"url": "nats://localhost:4222", "stream": "ORDERS", "consumer": "file-orders-sink",
           "subject": "orders.*", "durable": true},
  "delivery": {"batch_size": 64, "batch_timeout_ms": 1000, "ack_policy": "after_sink_commit",
               "temporary_failure_action": "nak"},
  "dead_letter": {"enabled": true, "subject": "orders.file.dlq", "include_payload": true,
                  "include_headers": true, "include_error": true},
  "logging": {"level": "INFO", "payload_logging": false},
  "message_metadata": {
    "priority": {"header": "Nats-Sinks-Priority", "default": "routine"},
    "classification": {"header": "Nats-Sinks-Classification", "default": "NATO UNCLASSIFIED"},
    "labels": {"header": "Nats-Sinks-Labels", "default": []},
    "rules": [{"subject": "orders.urgent", "priority": "immediate", "classification": "NATO SECRET",
               "labels": "mission-report;coalition;watch-floor"}]
  },
  "metrics": {"enabled": false, "namespace": "nats_sinks"},
  "sink": {"type": "file", "directory": ".local/file-sink/events", "fsync": true}
}"#;

fn issues_of(dir: &Path, name: &str, text: &str) -> Vec<String> {
    let path = write(dir, name, text);
    match Config::load(&path) {
        Ok(_) => Vec::new(),
        Err(e) => e.issues.iter().map(|i| i.path.clone()).collect(),
    }
}

#[test]
fn reference_json_loads_unchanged() {
    figment::Jail::expect_with(|_| {
        let dir = tempfile::tempdir().unwrap();
        let c = Config::load(&write(dir.path(), "c.json", REFERENCE_FILE_CONFIG)).unwrap();
        assert_eq!(c.nats.stream, "ORDERS");
        assert_eq!(c.delivery.batch_size, 64);
        assert_eq!(c.dead_letter.subject.as_deref(), Some("orders.file.dlq"));
        assert_eq!(c.consumer_management.mode, ConsumerMode::CreateIfMissing);
        assert_eq!(c.sink.kind(), Some("file"));
        let app = c.message_metadata.resolve("orders.urgent", &sinks_contract::Headers::new());
        assert_eq!(app.priority.as_deref(), Some("immediate"));
        assert_eq!(app.labels, ["mission-report", "coalition", "watch-floor"]);
        Ok(())
    });
}

#[test]
fn toml_and_yaml_mean_the_same() {
    figment::Jail::expect_with(|_| {
        let dir = tempfile::tempdir().unwrap();
        let json = Config::load(&write(dir.path(), "c.json", REFERENCE_FILE_CONFIG)).unwrap();
        let value: serde_json::Value = serde_json::from_str(REFERENCE_FILE_CONFIG).unwrap();
        let yaml = serde_json::to_string(&value).unwrap(); // JSON is valid YAML
        let from_yaml = Config::load(&write(dir.path(), "c.yaml", &yaml)).unwrap();
        assert_eq!(json, from_yaml);
        let toml = r#"
        [nats]
        url = "nats://localhost:4222"
        stream = "ORDERS"
        consumer = "file-orders-sink"
        subject = "orders.*"
        durable = true
        [delivery]
        batch_size = 64
        batch_timeout_ms = 1000
        ack_policy = "after_sink_commit"
        temporary_failure_action = "nak"
        [dead_letter]
        enabled = true
        subject = "orders.file.dlq"
        include_payload = true
        include_headers = true
        include_error = true
        [logging]
        level = "INFO"
        payload_logging = false
        [message_metadata.priority]
        header = "Nats-Sinks-Priority"
        default = "routine"
        [message_metadata.classification]
        header = "Nats-Sinks-Classification"
        default = "NATO UNCLASSIFIED"
        [message_metadata.labels]
        header = "Nats-Sinks-Labels"
        default = []
        [[message_metadata.rules]]
        subject = "orders.urgent"
        priority = "immediate"
        classification = "NATO SECRET"
        labels = "mission-report;coalition;watch-floor"
        [metrics]
        enabled = false
        namespace = "nats_sinks"
        [sink]
        type = "file"
        directory = ".local/file-sink/events"
        fsync = true
    "#;
        assert_eq!(json, Config::load(&write(dir.path(), "c.toml", toml)).unwrap());
        Ok(())
    });
}

#[test]
fn every_rejection_names_its_field() {
    figment::Jail::expect_with(|_| {
        let dir = tempfile::tempdir().unwrap();
        let base = r#""sink": {"type": "file", "directory": "/tmp/x"}"#;
        let cases: &[(&str, String, &str)] = &[
            (
                "unknown field",
                format!(r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "a.b", "bogus": 1}}, {base}}}"#),
                "nats.bogus",
            ),
            ("missing stream", format!(r#"{{"nats": {{"consumer": "c", "subject": "a.b"}}, {base}}}"#), "nats.stream"),
            (
                "invalid subject",
                format!(r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "a..b"}}, {base}}}"#),
                "nats.subject",
            ),
            (
                "inline secret",
                format!(
                    r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "a.b", "user": "u", "password": "hunter2"}}, {base}}}"#
                ),
                "nats.password",
            ),
            (
                "unknown section",
                format!(r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "a.b"}}, "nope": {{}}, {base}}}"#),
                "nope",
            ),
            (
                "unsupported feature",
                format!(
                    r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "a.b"}}, "push_consumer": {{"enabled": true}}, {base}}}"#
                ),
                "push_consumer.enabled",
            ),
            (
                "policy rule without a check",
                format!(
                    r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "a.b"}}, "pre_sink_policy": {{"enabled": true, "rules": [{{"subject": "a.>"}}]}}, {base}}}"#
                ),
                "pre_sink_policy.rules[0]",
            ),
            (
                "size policy below the batch size",
                format!(
                    r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "a.b"}}, "delivery": {{"batch_size": 500}}, "size_policy": {{"enabled": true, "max_batch_messages": 100}}, {base}}}"#
                ),
                "size_policy.max_batch_messages",
            ),
            (
                "dlq without subject",
                format!(
                    r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "a.b"}}, "dead_letter": {{"enabled": true}}, {base}}}"#
                ),
                "dead_letter.subject",
            ),
            (
                "bad enum",
                format!(
                    r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "a.b"}}, "delivery": {{"retry_jitter": "sometimes"}}, {base}}}"#
                ),
                "delivery.retry_jitter",
            ),
            (
                "out of range",
                format!(
                    r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "a.b"}}, "delivery": {{"batch_size": 0}}, {base}}}"#
                ),
                "delivery.batch_size",
            ),
            (
                "filter outside subject",
                format!(
                    r#"{{"nats": {{"stream": "S", "consumer": "c", "subject": "a.*"}}, "consumer_management": {{"filter_subjects": ["b.x"]}}, {base}}}"#
                ),
                "consumer_management.filter_subjects[0]",
            ),
            (
                "duplicate key",
                format!(r#"{{"nats": {{"stream": "S", "stream": "T", "consumer": "c", "subject": "a.b"}}, {base}}}"#),
                "config",
            ),
            (
                "missing sink type",
                r#"{"nats": {"stream": "S", "consumer": "c", "subject": "a.b"}, "sink": {"directory": "/x"}}"#
                    .to_owned(),
                "sink.type",
            ),
        ];
        for (name, text, field) in cases {
            let issues = issues_of(dir.path(), "c.json", text);
            assert!(issues.iter().any(|p| p == field), "{name}: expected an issue at `{field}`, got {issues:?}");
        }
        Ok(())
    });
}

#[test]
fn environment_overrides_apply() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.json", REFERENCE_FILE_CONFIG);
    figment::Jail::expect_with(|jail| {
        jail.set_env("NATS_SINKS_NATS_STREAM", "OTHER");
        jail.set_env("NATS_SINKS__DELIVERY__BATCH_SIZE", "7");
        jail.set_env("NATS_SINKS__SINK__DIRECTORY", "/srv/out");
        // The reference's fixed names for the policy sections.
        jail.set_env("NATS_SINKS_CUSTODY_ENABLED", "true");
        jail.set_env("NATS_SINKS_CUSTODY_ALGORITHM", "sha512");
        jail.set_env("NATS_SINKS_CUSTODY_KEY_ID", "custody-v9");
        jail.set_env("NATS_SINKS_MESSAGE_AUTHENTICITY_SIGNATURE_HEADER", "X-Sig");
        jail.set_env("NATS_SINKS_ENCRYPTION_KEY_ID", "rotated");
        let c = Config::load(&path).map_err(|e| e.to_string())?;
        assert!(c.custody.enabled);
        assert_eq!(c.custody.algorithm, sinks_policy::custody::HashAlgorithm::Sha512);
        assert_eq!(c.custody.key_id.as_deref(), Some("custody-v9"));
        assert_eq!(c.message_authenticity.signature_header, "X-Sig");
        assert_eq!(c.encryption.key_id, "rotated");
        assert_eq!(c.nats.stream, "OTHER");
        assert_eq!(c.delivery.batch_size, 7);
        assert_eq!(c.sink.0["directory"], "/srv/out");
        Ok(())
    });
}

/// The paths of the issues `config` has (empty when it is accepted).
fn issues_in(config: serde_json::Value) -> Vec<(String, String)> {
    match Config::from_value(config) {
        Ok(_) => Vec::new(),
        Err(e) => e.issues.into_iter().map(|i| (i.path, i.message)).collect(),
    }
}

/// A minimal valid config with `section` set to `value` (a dotted path one level deep).
fn with_section(path: &str, value: serde_json::Value) -> serde_json::Value {
    let mut config = serde_json::json!({
        "nats": {"stream": "S", "consumer": "c", "subject": "a.>"},
        "sink": {"type": "file", "directory": "/tmp/x"},
    });
    match path.split_once('.') {
        Some((outer, inner)) => {
            config[outer] = serde_json::json!({ inner: value });
        }
        None => config[path] = value,
    }
    config
}

#[test]
fn every_unimplemented_section_fails_closed() {
    use sinks_runtime::config::NOT_YET_SUPPORTED;
    for section in NOT_YET_SUPPORTED {
        // Off (absent flag, false, null): accepted, it does nothing.
        for off in [serde_json::json!({}), serde_json::json!({"enabled": false}), serde_json::json!({"enabled": null})]
        {
            let issues = issues_in(with_section(section, off.clone()));
            assert!(issues.is_empty(), "{section} = {off}: {issues:?}");
        }
        // On, or anything that is not plainly off: refused, naming the flag.
        for on in [serde_json::json!({"enabled": true}), serde_json::json!({"enabled": "yes"})] {
            let issues = issues_in(with_section(section, on.clone()));
            let field = format!("{section}.enabled");
            assert!(
                issues.iter().any(|(p, m)| *p == field && m.contains("not supported by this build yet")),
                "{section} = {on}: expected a refusal at {field}, got {issues:?}"
            );
        }
    }
}

#[test]
fn the_reference_subject_rules_example_loads_with_its_rule_active() {
    // `encryption.enabled` is false, but the rule encrypts `secure.>`: the section is active
    // and the rule must have a key; `public.>` passes through.
    let rules = serde_json::json!([
        {"subject": "secure.>", "enabled": true, "algorithm": "aes-256-gcm", "key_id": "secure-local-test-key",
         "key_b64_env": "NATS_SINKS_SECURE_PAYLOAD_KEY_B64"},
        {"subject": "public.>", "enabled": false}
    ]);
    let config =
        Config::from_value(with_section("encryption", serde_json::json!({"enabled": false, "rules": rules}))).unwrap();
    assert!(config.encryption.is_active());
    let policy = config.encryption.rule_policy(&config.encryption.rules[0]).unwrap();
    assert_eq!(policy.key_id, "secure-local-test-key");
    // The same rule without a key anywhere is refused, naming it.
    let keyless = serde_json::json!([{"subject": "secure.>"}]);
    let issues = issues_in(with_section("encryption", serde_json::json!({"rules": keyless})));
    assert!(issues.iter().any(|(p, _)| p == "encryption.rules[0].key_b64_env"), "{issues:?}");
    // Inline key material is refused.
    let inline = serde_json::json!({"enabled": true, "key_b64": "c2VjcmV0", "key_b64_env": "K"});
    let issues = issues_in(with_section("encryption", inline));
    assert!(issues.iter().any(|(p, _)| p == "encryption.key_b64"), "{issues:?}");
}

#[test]
fn named_sinks_are_checked_by_name_and_type() {
    // Accepted beside a non-fanout active sink (validate and test-sink use them).
    let mut config = with_section("sinks", serde_json::json!({"audit": {"type": "file", "directory": "/tmp/a"}}));
    config["sink"] = serde_json::json!({"type": "file", "directory": "/tmp/x"});
    assert!(issues_in(config).is_empty());
    // A bad name, a missing type and a nested fan-out are refused naming the sink.
    let mut config = with_section(
        "sinks",
        serde_json::json!({"9audit": {"type": "file"}, "untyped": {"directory": "/tmp/u"}, "inner": {"type": "fanout"}}),
    );
    config["sink"] = serde_json::json!({"type": "file", "directory": "/tmp/x"});
    let issues = issues_in(config);
    for path in ["sinks.9audit", "sinks.untyped.type", "sinks.inner.type"] {
        assert!(issues.iter().any(|(p, _)| p == path), "{path} not named in {issues:?}");
    }
}
