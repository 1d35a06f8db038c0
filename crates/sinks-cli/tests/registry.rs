//! The registry of the library in process, for a sink kind the test registers itself
//! (`store`, `support/mod.rs`): a section built by its kind's factory (a bad field named), the
//! kinds always there (the runtime's `blackhole`, the `fanout` of named sinks), a kind only
//! known (named with its feature), an unknown one, the per-kind facts config loading needs,
//! and loading a config file.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::json;
use sinks_cli::Registry;
use support::{KIND, KNOWN_KIND, registry, section};

/// The error building `value` (a `sink` section) gives, as text; `None` when it builds.
fn build_error(registry: &Registry, value: serde_json::Value) -> Option<String> {
    registry.build(&section(value)).err().map(|e| e.to_string())
}

#[test]
fn a_registered_kind_is_built_by_its_factory_with_its_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let built = registry().build(&section(json!({"type": KIND, "directory": dir.path()}))).unwrap();
    assert_eq!(built.sink.name(), KIND);
    assert_eq!(built.effective["capacity"], 1_000, "the effective config has the kind's defaults");
    assert_eq!(built.effective["create_directory"], true);
    assert!(built.ddl.is_none());
}

#[test]
fn a_bad_field_of_a_kinds_section_is_named() {
    let unknown = build_error(&registry(), json!({"type": KIND, "directory": "/x", "colour": 1})).unwrap();
    assert!(unknown.contains("sink.colour"), "{unknown}");
    let refused = build_error(&registry(), json!({"type": KIND, "directory": "/x", "capacity": 0})).unwrap();
    assert!(refused.contains("sink.capacity") && refused.contains("at least 1"), "{refused}");
    let missing = build_error(&registry(), json!({"type": KIND})).unwrap();
    assert!(missing.contains("directory"), "{missing}");
}

#[test]
fn the_runtimes_kinds_are_there_without_registration() {
    let bare = Registry::new();
    assert!(build_error(&bare, json!({"type": "blackhole"})).is_none(), "the blackhole is always there");
    let without = build_error(&bare, json!({"type": KIND, "directory": "/x"})).unwrap();
    assert!(without.contains("sink.type"), "a kind not registered is unknown: {without}");
}

#[test]
fn an_unknown_kind_names_the_type_and_a_known_one_its_feature() {
    let unknown = build_error(&registry(), json!({"type": "warp"})).unwrap();
    assert!(unknown.contains("sink.type") && unknown.contains("warp"), "{unknown}");
    let known = build_error(&registry(), json!({"type": KNOWN_KIND.0})).unwrap();
    assert!(known.contains("sink.type") && known.contains(KNOWN_KIND.1), "{known}");
}

#[test]
fn config_loading_learns_each_kinds_waits_from_its_factory() {
    let defaults = registry().kind_defaults();
    let kinds: Vec<&str> = defaults.kinds().collect();
    assert_eq!(kinds, [KIND, KNOWN_KIND.0], "a known kind's waits are known too");
    let local = defaults.optional_wait(KIND).unwrap();
    let remote = defaults.optional_wait(KNOWN_KIND.0).unwrap();
    assert_ne!(local, remote, "a local destination waits differently from a remote one");
    assert!(defaults.optional_wait("warp").is_none());
}

#[test]
fn a_config_file_is_loaded_with_the_field_named_when_bad() {
    let dir = tempfile::tempdir().unwrap();
    let good = support::write(dir.path(), "c.json", &support::config(dir.path(), "", ""));
    let config = registry().load_config(&good).unwrap();
    assert_eq!(config.sink.kind(), Some(KIND));
    let built = registry().build_active(&config).unwrap();
    assert_eq!(built.sink.name(), KIND);

    let bad = support::write(dir.path(), "bad.json", &support::config(dir.path(), r#", "colour": "blue""#, ""));
    let e = registry().load_config(&bad).unwrap_err().to_string();
    assert!(e.contains("nats.colour"), "{e}");
    let named =
        support::config(dir.path(), "", r#""sinks": {"a": {"type": "store", "directory": "/x", "capacity": 0}},"#);
    let named = support::write(dir.path(), "named.json", &named);
    let config = registry().load_config(&named).unwrap();
    let e = registry().build_active(&config).unwrap_err().to_string();
    assert!(e.contains("sinks.a.capacity"), "a named sink's field is named under sinks.<name>: {e}");
}
