//! `nats-sink export-catalogue-manifest CONFIG [--output F] [--dataset-name N] [--overwrite]`:
//! the reference's redacted data-product manifest of a deployment (schema
//! `nats_sinks.catalog_manifest.v1`), for a data catalogue: the dataset (stream, consumer,
//! subject patterns), the active and named sinks, routing, the metadata and governance
//! posture, and the whole configuration as the reference reads it, redacted
//! ([`view`]). It reads the config only: no sink is opened, no server contacted.
//!
//! The document is the reference's field for field, written as the reference writes it
//! (`json.dumps(indent=2, sort_keys=True)`: ASCII only, floats as Python's `repr`), so the
//! same config file gives the same manifest from both (the reference's manifest has no
//! creation time to differ). A config this build refuses is refused here too (exit 2). With
//! `--output` the file is written whole or not at all (a temporary file renamed into place),
//! and an existing one is kept unless `--overwrite`.

mod schema;
mod view;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};
use sinks_runtime::config::KindDefaults;

use crate::{Registry, exit};

/// `schema` of the manifest.
pub(crate) const SCHEMA: &str = "nats_sinks.catalog_manifest.v1";

/// The reference's first-party mission metadata profiles, sorted.
const FIRST_PARTY_PROFILES: [&str; 4] = [
    "nats-sinks.artifact-reference.v1",
    "nats-sinks.data-quality.v1",
    "nats-sinks.geo-temporal-track-fix.v1",
    "nats-sinks.object-relationship.v1",
];

/// The fields `query-lineage` looks rows up by (the Oracle sink's mission metadata fields,
/// message id and subject), sorted: the reference's lineage field specs, which
/// `crates/sinks-bin/tests/catalogue_manifest.rs` holds to the reference's manifests.
const LINEAGE_FIELDS: [&str; 27] = [
    "artifact_id",
    "artifact_sha256",
    "causation_id",
    "collection_id",
    "correlation_id",
    "event_id",
    "event_time",
    "friendly_track_id",
    "message_id",
    "mission_id",
    "object_id",
    "object_type",
    "object_version",
    "payload_sha256",
    "presentation_timestamp",
    "receive_time",
    "relationship_id",
    "schema_profile",
    "schema_version",
    "segment_id",
    "sensor_id",
    "source_gateway",
    "source_system",
    "subject",
    "tasking_id",
    "track_id",
    "unit_reference",
];

/// What was asked.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) config: PathBuf,
    pub(crate) output: Option<PathBuf>,
    pub(crate) dataset_name: Option<String>,
    pub(crate) overwrite: bool,
}

/// Runs the command; returns the exit code.
#[allow(clippy::print_stdout)]
pub(crate) fn run(registry: &Registry, request: &Request) -> ExitCode {
    if let Err(e) = registry.load(&request.config) {
        return exit::config_failure(&e);
    }
    let raw = match sinks_runtime::config::raw_tree(&request.config) {
        Ok(raw) => raw,
        Err(e) => return exit::config_failure(&e),
    };
    let rendered = render(&manifest(&raw, request.dataset_name.as_deref(), &registry.kind_defaults()));
    let Some(output) = &request.output else {
        return crate::output::emit(&format!("{rendered}\n"));
    };
    match write_output(output, &format!("{rendered}\n"), request.overwrite) {
        Ok(()) => {
            println!("Wrote catalogue manifest: {}", output.display());
            ExitCode::SUCCESS
        }
        Err(Failure::Exists) => {
            exit::report(&format!("output file already exists: {} (use --overwrite to replace it)", output.display()));
            ExitCode::from(exit::CONFIG_ERROR)
        }
        Err(Failure::Io(e)) => {
            exit::report(&format!("cannot write {}: {e}", output.display()));
            ExitCode::from(exit::RUNTIME_ERROR)
        }
    }
}

/// The manifest of the config tree `raw` (the file merged with the environment, as loaded),
/// with the optional fan-out target waits of `kinds`.
pub(crate) fn manifest(raw: &Value, dataset_name: Option<&str>, kinds: &KindDefaults) -> Value {
    let config = view::normalized(raw, kinds);
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let stream = &config["nats"]["stream"];
    let mut subject_patterns = vec![config["nats"]["subject"].clone()];
    if let Some(filters) = config["consumer_management"]["filter_subjects"].as_array() {
        subject_patterns.extend(filters.iter().cloned());
    }
    let named: serde_json::Map<String, Value> = config["sinks"]
        .as_object()
        .map(|sinks| sinks.iter().map(|(name, sink)| (name.clone(), sink["type"].clone())).collect())
        .unwrap_or_default();
    let target_names = |targets: &Value| -> Vec<Value> {
        targets.as_array().map(|t| t.iter().map(|target| target["sink"].clone()).collect()).unwrap_or_default()
    };
    let routing = &config["routing"];
    let routes: Vec<Value> = routing["routes"]
        .as_array()
        .map(|routes| {
            routes.iter().map(|r| json!({"name": r["name"], "targets": target_names(&r["targets"])})).collect()
        })
        .unwrap_or_default();
    let default_metadata = &config["mission_metadata"]["default"];
    let governance_value = |key: &str| match default_metadata.get(key) {
        Some(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => v.clone(),
        _ => Value::Null,
    };
    let metadata = &config["message_metadata"];
    json!({
        "schema": SCHEMA,
        "dataset": {
            "name": dataset_name.map(str::to_owned).filter(|n| !n.is_empty()).or_else(|| text(stream)),
            "stream": stream,
            "consumer": config["nats"]["consumer"],
            "subject_patterns": subject_patterns,
        },
        "sinks": {"active": config["sink"]["type"], "named": named},
        "routing": {
            "enabled": routing["enabled"],
            "mode": routing["mode"],
            "default_targets": target_names(&routing["default_targets"]),
            "routes": routes,
        },
        "metadata": {
            "priority_default": metadata["priority"]["default"],
            "classification_default": metadata["classification"]["default"],
            "labels_default": metadata["labels"]["default"],
            "mission_metadata_enabled": config["mission_metadata"]["enabled"],
            "mission_metadata_allowed_profiles": config["mission_metadata"]["allowed_profiles"],
            "first_party_metadata_profiles": FIRST_PARTY_PROFILES,
            "security_labels_enabled": config["security_labels"]["enabled"],
            "custody_enabled": config["custody"]["enabled"],
            "lineage_fields": LINEAGE_FIELDS,
        },
        "governance": {
            "retention_category": governance_value("retention_category"),
            "schema_profile": governance_value("schema_profile"),
            "schema_version": governance_value("schema_version"),
            "artifact_reference_profile": "nats-sinks.artifact-reference.v1",
            "data_quality_profile": "nats-sinks.data-quality.v1",
        },
        "redacted_config": view::redacted(&config),
    })
}

/// `value` as Python's `json.dumps(value, indent=2, sort_keys=True)` writes it: keys sorted,
/// two spaces per level, `": "` after a key, non-ASCII characters as `\uXXXX` (surrogate
/// pairs beyond the BMP), floats as `repr`. No trailing newline.
pub(crate) fn render(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out
}

fn write_value(out: &mut String, value: &Value, depth: usize) {
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', depth * 2));
    };
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => {
                let _ = write!(out, "{i}");
            }
            (None, Some(u)) => {
                let _ = write!(out, "{u}");
            }
            (None, None) => {
                let float = n.as_f64().and_then(|x| sinks_policy::canonical::python_float(x).ok());
                out.push_str(float.as_deref().unwrap_or("NaN"));
            }
        },
        Value::String(s) => write_ascii_string(out, s),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_value(out, item, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_ascii_string(out, key);
                out.push_str(": ");
                write_value(out, item, depth + 1);
            }
            newline(out, depth);
            out.push('}');
        }
    }
}

/// A string as `json.dumps` with `ensure_ascii=True` writes it.
fn write_ascii_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// Why the output file was not written.
enum Failure {
    /// It exists and `--overwrite` was not given.
    Exists,
    /// Creating the directory or writing failed.
    Io(std::io::Error),
}

/// Writes `text` to `path` whole: into a temporary file next to it, then renamed over it
/// (`overwrite`) or linked to its name only if that name is free.
fn write_output(path: &Path, text: &str, overwrite: bool) -> Result<(), Failure> {
    if !overwrite && std::fs::symlink_metadata(path).is_ok() {
        return Err(Failure::Exists);
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(Failure::Io)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&temp, text).map_err(Failure::Io)?;
    let placed = if overwrite {
        std::fs::rename(&temp, path)
    } else {
        let linked = std::fs::hard_link(&temp, path);
        let _ = std::fs::remove_file(&temp);
        linked
    };
    match placed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Failure::Exists),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(Failure::Io(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `json.dumps(value, indent=2, sort_keys=True)` prints (checked with Python 3.11).
    #[test]
    fn rendering_is_pythons() {
        let value = json!({"b": [1, 2.5, 1e-7, {}], "a": "é😀\u{7f}\"\n", "c": {"z": null, "y": []}, "d": 5.0});
        let want = "{\n  \"a\": \"\\u00e9\\ud83d\\ude00\\u007f\\\"\\n\",\n  \"b\": [\n    1,\n    2.5,\n    1e-07,\n    {}\n  ],\n  \"c\": {\n    \"y\": [],\n    \"z\": null\n  },\n  \"d\": 5.0\n}";
        assert_eq!(render(&value), want);
    }

    #[test]
    fn the_manifest_summarizes_the_config() {
        let raw = json!({
            "nats": {"stream": "ORDERS", "consumer": "c", "subject": "orders.>", "password_env": "P"},
            "consumer_management": {"filter_subjects": ["orders.a", "orders.b"]},
            "mission_metadata": {"enabled": true, "default": {"retention_category": "short", "schema_version": 2, "x": [1]}},
            "sink": {"type": "fanout", "sinks": {"f": {"type": "disk", "directory": "o"}},
                     "routes": [{"name": "r", "match": {"subject": ">"}, "targets": ["f"]}]}
        });
        let kinds = KindDefaults::default();
        let m = manifest(&raw, None, &kinds);
        assert_eq!(m["schema"], SCHEMA);
        assert_eq!(
            m["dataset"],
            json!({"name": "ORDERS", "stream": "ORDERS", "consumer": "c",
                                         "subject_patterns": ["orders.>", "orders.a", "orders.b"]})
        );
        assert_eq!(m["sinks"], json!({"active": "fanout", "named": {"f": "disk"}}));
        assert_eq!(
            m["routing"],
            json!({"enabled": true, "mode": "first", "default_targets": [],
                                         "routes": [{"name": "r", "targets": ["f"]}]})
        );
        assert_eq!(m["governance"]["retention_category"], "short");
        assert_eq!(m["governance"]["schema_version"], 2);
        assert_eq!(m["governance"]["schema_profile"], Value::Null);
        assert_eq!(m["metadata"]["mission_metadata_enabled"], true);
        assert_eq!(m["redacted_config"]["nats"]["password_env"], view::REDACTED);
        assert_eq!(manifest(&raw, Some("orders-product"), &kinds)["dataset"]["name"], "orders-product");
    }

    #[test]
    fn an_existing_output_is_kept_unless_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/manifest.json");
        assert!(write_output(&path, "one\n", false).is_ok());
        assert!(matches!(write_output(&path, "two\n", false), Err(Failure::Exists)));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\n");
        assert!(write_output(&path, "three\n", true).is_ok());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1, "no temporary file is left");
    }
}
