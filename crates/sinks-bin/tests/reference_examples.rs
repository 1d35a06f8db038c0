//! Every example config of the Python reference (`tests/fixtures/reference/`), unchanged,
//! through `nats-sink validate`: each is either accepted, or refused with exit 2 naming the
//! field that turns on something this build does not implement (or a defect of the example).
//! The table pins the answer for every file, so a feature that lands, or one that silently
//! stops being refused, shows up here. And every one this build can run passes `validate
//! --no-environment` with no variable set, as in a CI pipeline without the production secrets:
//! each unset variable a note, exit 0.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

/// `None`: accepted. `Some((field, words))`: exit 2 with a message naming `field` and
/// containing `words`.
type Expected = Option<(&'static str, &'static str)>;

const NOT_YET: &str = "not supported by this build yet";

#[rustfmt::skip]
const EXPECTED: &[(&str, Expected)] = &[
    ("docker-local.json", None),
    ("fanout.json", None),
    ("file-basic.json", None),
    ("foundry-basic.json", Some(("sink.type", NOT_YET))),
    ("gotham-basic.json", Some(("sink.type", NOT_YET))),
    ("multi-sink-routing-e2e.json", None),
    ("named-multi-sink.json", None),
    ("oracle-adb-config-mtls-wallet.json", None),
    ("oracle-adb-config-walletless-tls.json", None),
    ("oracle-basic.json", None),
    ("oracle-coherence-basic.json", None),
    // The example's DLQ subject is inside its own consumer's subject: fine while a stream of
    // its own captures it (a warning offline; `validate --connect` and `run` refuse it when the
    // consumed stream does).
    ("oracle-jetstream-config-routed.json", None),
    ("oracle-jetstream.json", None),
    ("oracle-mysql-basic.json", None),
    ("oracle-nosql-basic.json", None),
    ("payload-encryption-file-config.json", None),
    // `encryption.enabled` is false, but a rule turns encryption on for `secure.>`.
    ("payload-encryption-file-subject-rules-config.json", None),
    // Routing is checked, but the active sink is `file`: accepted with a warning that the
    // routes are not applied.
    ("routing-match-policy.json", None),
    ("s3-basic.json", None),
    ("spool-basic.json", None),
    ("tests-file-valid.json", None),
    ("tests-oracle-valid.json", None),
];

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference")
}

/// Every variable a `*_env` field of `value` names, with a plausible value for it.
fn env_names(value: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                let names: Vec<&str> = match (key.ends_with("_env"), v) {
                    (true, serde_json::Value::String(s)) => vec![s.as_str()],
                    (true, serde_json::Value::Object(m)) => m.values().filter_map(|x| x.as_str()).collect(),
                    _ => {
                        env_names(v, out);
                        Vec::new()
                    }
                };
                let value = if key.contains("key_b64") {
                    "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI="
                } else {
                    "dummy-value"
                };
                out.extend(names.into_iter().map(|n| (n.to_owned(), value.to_owned())));
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| env_names(i, out)),
        _ => {}
    }
}

#[test]
fn every_reference_example_is_accepted_or_refused_by_name() {
    let mut files: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    let listed: Vec<&str> = EXPECTED.iter().map(|(f, _)| *f).collect();
    assert_eq!(files, listed, "every fixture has an expected result and every expected result a fixture");
    for (file, expected) in EXPECTED {
        // `validate` checks that the variables a config names are set, as a deployment would
        // set them: every `*_env` of the example gets a value (a key a valid 32-byte key).
        let text = std::fs::read_to_string(fixtures().join(file)).unwrap();
        let mut vars = Vec::new();
        env_names(&serde_json::from_str(&text).unwrap(), &mut vars);
        let out = Command::new(env!("CARGO_BIN_EXE_nats-sink"))
            .arg("validate")
            .arg(fixtures().join(file))
            .env_remove("NATS_SINKS_NATS_URL")
            .envs(vars.iter().map(|(name, value)| (name.as_str(), value.as_str())))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        match expected {
            None => assert!(out.status.success(), "{file}: expected acceptance, got {stderr}"),
            Some((field, words)) => {
                assert_eq!(out.status.code(), Some(2), "{file}: expected exit 2, got {:?}: {stderr}", out.status);
                let line = stderr.lines().find(|l| l.contains(&format!("`{field}`")));
                assert!(line.is_some_and(|l| l.contains(words)), "{file}: expected `{field}` … {words}, got {stderr}");
            }
        }
    }
}

#[test]
fn every_reference_example_passes_validate_no_environment_with_nothing_set() {
    let mut checked = 0;
    for (file, expected) in EXPECTED {
        if expected.is_some() {
            continue;
        }
        let text = std::fs::read_to_string(fixtures().join(file)).unwrap();
        let mut vars = Vec::new();
        env_names(&serde_json::from_str(&text).unwrap(), &mut vars);
        let out = Command::new(env!("CARGO_BIN_EXE_nats-sink"))
            .args(["validate", "--no-environment"])
            .arg(fixtures().join(file))
            .env_clear()
            .output()
            .unwrap();
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{file}: {all}");
        for (name, _) in &vars {
            assert!(
                all.lines().any(|l| l.starts_with("note: ") && l.contains(&format!("`{name}`"))),
                "{file}: the unset `{name}` is a note: {all}"
            );
        }
        checked += 1;
    }
    // Without --no-environment, an unset variable the run needs stays an error (the
    // operator's check on the production host).
    let plain = Command::new(env!("CARGO_BIN_EXE_nats-sink"))
        .arg("validate")
        .arg(fixtures().join("oracle-basic.json"))
        .env_clear()
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&plain.stderr);
    assert_eq!(plain.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`sink.password_env`") && stderr.contains("not set"), "{stderr}");
    assert_eq!(
        checked, 20,
        "the reference's 18 configs of examples/**/config*.json and tests/fixtures, and its 2 others"
    );
}
