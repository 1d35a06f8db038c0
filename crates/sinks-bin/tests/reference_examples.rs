//! Every example config of the Python reference (`tests/fixtures/reference/`), unchanged,
//! through `nats-sink validate`: each is either accepted, or refused with exit 2 naming the
//! field that turns on something this build does not implement (or a defect of the example).
//! The table pins the answer for every file, so a feature that lands, or one that silently
//! stops being refused, shows up here.
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
    // The example's DLQ subject is inside its own consumer's subject: its dead letters would
    // be consumed and written again (a defect of the example, refused by name).
    ("oracle-jetstream-config-routed.json", Some(("dead_letter.subject", "must not be matched by nats.subject"))),
    ("oracle-jetstream.json", Some(("dead_letter.subject", "must not be matched by nats.subject"))),
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
