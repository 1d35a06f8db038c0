//! `show-effective-config` reads back: for every example config of this repository
//! (`examples/`, each Kubernetes overlay's) and of the Python reference (the ones this build
//! runs), in each format (JSON, TOML, YAML), the printed config passes `validate
//! --no-environment` (its redacted variable names are valid names, unset) and printed again
//! is the same text. Every number is a number in each format (a build whose serde_json keeps
//! numbers' text, `arbitrary_precision`, once printed its private form in TOML and YAML).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every example config: the repository's and the reference's (those this build runs).
fn examples() -> Vec<PathBuf> {
    let mut out = vec![root().join("examples/quickstart.toml")];
    for dir in ["deploy/kubernetes/overlays", "crates/sinks-bin/tests/fixtures/reference"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| if p.is_dir() { p.join("config.json") } else { p })
            .filter(|p| p.extension().is_some_and(|e| e == "json") && p.is_file())
            .filter(|p| !p.to_string_lossy().contains("foundry") && !p.to_string_lossy().contains("gotham"))
            .collect();
        found.sort();
        out.extend(found);
    }
    out
}

fn nats_sink(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nats-sink"))
        .args(args)
        .env_remove("NATS_SINKS_NATS_URL")
        .env_remove("REDACTED")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The round trip of `config` in `format` through files under `dir`; the problem, if any.
fn round_trip(config: &Path, format: &str, dir: &Path) -> Result<(), String> {
    let name = config.strip_prefix(root()).unwrap_or(config).display().to_string().replace('/', "_");
    let shown = nats_sink(&["show-effective-config", config.to_str().unwrap(), "--format", format]);
    if !shown.status.success() {
        return Err(format!("{name} {format}: show-effective-config failed: {}", text(&shown)));
    }
    let printed = String::from_utf8(shown.stdout).unwrap();
    if printed.contains("serde_json") || printed.contains("$serde") {
        return Err(format!("{name} {format}: serde's private form of a number:\n{printed}"));
    }
    let file = dir.join(format!("{name}.{format}"));
    std::fs::write(&file, &printed).unwrap();
    let valid = nats_sink(&["validate", "--no-environment", file.to_str().unwrap()]);
    if !valid.status.success() {
        return Err(format!("{name} {format}: validate refuses the printed config: {}", text(&valid)));
    }
    let again = nats_sink(&["show-effective-config", file.to_str().unwrap()]);
    let again = String::from_utf8(again.stdout).unwrap();
    if again != printed {
        return Err(format!("{name} {format}: printed again it differs:\n--- first\n{printed}\n--- again\n{again}"));
    }
    Ok(())
}

#[test]
fn every_example_config_reads_back_the_same_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let configs = examples();
    assert!(configs.len() >= 28, "the quick start, 8 overlays and 20 reference configs: {configs:?}");
    let problems: Vec<String> = std::thread::scope(|scope| {
        let tasks: Vec<_> = configs
            .chunks(configs.len().div_ceil(4))
            .map(|chunk| {
                let dir = dir.path();
                scope.spawn(move || {
                    let mut problems = Vec::new();
                    for config in chunk {
                        for format in ["json", "toml", "yaml"] {
                            if let Err(problem) = round_trip(config, format, dir) {
                                problems.push(problem);
                            }
                        }
                    }
                    problems
                })
            })
            .collect();
        tasks.into_iter().flat_map(|t| t.join().unwrap()).collect()
    });
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn numbers_stay_numbers_and_a_map_of_variables_keeps_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        "[nats]\nstream = \"S\"\nconsumer = \"c\"\nsubject = \"s.>\"\n[consumer_management]\nack_wait_seconds = 12.5\n\
         [opentelemetry]\nheaders_env = { Authorization = \"OTEL_AUTH\" }\n[sink]\ntype = \"file\"\ndirectory = \"/tmp/x\"\n",
    )
    .unwrap();
    let toml_text = text(&nats_sink(&["show-effective-config", config.to_str().unwrap()]));
    assert!(toml_text.contains("connect_timeout_seconds = 2\n"), "{toml_text}");
    assert!(toml_text.contains("ack_wait_seconds = 12.5\n"), "{toml_text}");
    assert!(!toml_text.contains("OTEL_AUTH"), "variable names stay redacted: {toml_text}");
    let yaml = text(&nats_sink(&["show-effective-config", config.to_str().unwrap(), "--format", "yaml"]));
    assert!(yaml.contains("  connect_timeout_seconds: 2\n"), "{yaml}");
    let json: serde_json::Value = serde_json::from_str(&text(&nats_sink(&[
        "show-effective-config",
        config.to_str().unwrap(),
        "--format",
        "json",
    ])))
    .unwrap();
    assert_eq!(json["opentelemetry"]["headers_env"], serde_json::json!({"Authorization": "REDACTED"}));
}
