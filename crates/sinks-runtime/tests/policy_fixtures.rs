//! The reference's documented policy examples (`crates/sinks-policy/tests/fixtures/policies/`) load unchanged:
//! every section they turn on is accepted and active, with the values the example gives.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use sinks_runtime::Config;

fn fixtures() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sinks-policy/tests/fixtures/policies");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_documented_policy_example_loads_and_is_active() {
    let files = fixtures();
    assert!(files.len() >= 12, "fixtures missing: {files:?}");
    for file in files {
        let raw: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let config = Config::load(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let on = |section: &str| raw.pointer(&format!("/{section}/enabled")).and_then(serde_json::Value::as_bool);
        let pairs = [
            ("message_authenticity", config.message_authenticity.enabled),
            ("custody", config.custody.enabled),
            ("size_policy", config.size_policy.enabled),
            ("pre_sink_policy", config.pre_sink_policy.enabled),
            ("mission_metadata", config.mission_metadata.enabled),
            ("security_labels", config.security_labels.enabled),
            ("delivery/priority_lanes", config.delivery.priority_lanes.enabled),
        ];
        for (section, enabled) in pairs {
            assert_eq!(enabled, on(section).unwrap_or(false), "{}: {section}", file.display());
        }
        // Values survive as given (spot checks on the richest examples).
        if let Some(rules) = raw.pointer("/message_authenticity/rules").and_then(serde_json::Value::as_array) {
            assert_eq!(config.message_authenticity.rules.len(), rules.len(), "{}", file.display());
        }
        if let Some(max) = raw.pointer("/size_policy/max_payload_bytes").and_then(serde_json::Value::as_u64) {
            assert_eq!(config.size_policy.max_payload_bytes, max, "{}", file.display());
        }
        if let Some(lanes) = raw.pointer("/delivery/priority_lanes/lanes").and_then(serde_json::Value::as_array) {
            assert_eq!(config.delivery.priority_lanes.lanes.len(), lanes.len(), "{}", file.display());
        }
    }
}
