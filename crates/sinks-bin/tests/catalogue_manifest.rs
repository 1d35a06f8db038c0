//! `nats-sink export-catalogue-manifest` against the Python reference's own command (PyPI
//! `nats-sinks==0.4.3`, installed by `cargo xtask setup`; the comparisons fail without it):
//! on every example config of the reference (`tests/fixtures/reference/`) this build accepts,
//! the two print the same bytes (the reference's manifest has no creation time, so nothing is
//! left out); the examples this build refuses are refused here too, as `validate` refuses
//! them. Then `--dataset-name`, `--output` and `--overwrite`, and a TOML config giving the
//! manifest of its JSON twin.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference")
}

/// The examples this build refuses (`tests/reference_examples.rs` says why), by the field
/// named.
const REFUSED: [(&str, &str); 2] = [("foundry-basic.json", "sink.type"), ("gotham-basic.json", "sink.type")];

/// `program args…` with a clean environment (no `NATS_SINKS_*` override may reach either).
fn run(program: &Path, args: &[&str], cwd: &Path) -> Output {
    let mut command = Command::new(program);
    command.args(args).current_dir(cwd).env_clear();
    for keep in ["PATH", "HOME", "LANG"] {
        if let Some(value) = std::env::var_os(keep) {
            command.env(keep, value);
        }
    }
    command.output().unwrap()
}

fn ours(args: &[&str], cwd: &Path) -> Output {
    run(Path::new(env!("CARGO_BIN_EXE_nats-sink")), args, cwd)
}

fn reference(test: &str) -> PathBuf {
    let python = sinks_testkit::reference_python().unwrap_or_else(|reason| sinks_testkit::cannot_run(test, reason));
    python.with_file_name("nats-sink")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_accepted_reference_example_gives_the_references_manifest() {
    let theirs = reference("every_accepted_reference_example_gives_the_references_manifest");
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    let mut compared = 0;
    for file in &files {
        let path = fixtures().join(file);
        let path = path.to_str().unwrap();
        let mine = ours(&["export-catalogue-manifest", path], dir.path());
        if let Some((_, field)) = REFUSED.iter().find(|(f, _)| f == file) {
            let stderr = String::from_utf8_lossy(&mine.stderr);
            assert_eq!(mine.status.code(), Some(2), "{file}: {stderr}");
            assert!(stderr.contains(&format!("`{field}`")), "{file}: {stderr}");
            continue;
        }
        let reference = run(&theirs, &["export-catalogue-manifest", path], dir.path());
        assert!(reference.status.success(), "{file}: {}", String::from_utf8_lossy(&reference.stderr));
        assert!(mine.status.success(), "{file}: {}", String::from_utf8_lossy(&mine.stderr));
        assert_eq!(stdout(&mine), stdout(&reference), "{file}: the manifests differ");
        compared += 1;
    }
    assert_eq!(compared, files.len() - REFUSED.len());
    assert!(compared >= 16, "{compared} examples compared");
}

#[test]
fn dataset_name_output_and_overwrite_behave_as_the_references() {
    let theirs = reference("dataset_name_output_and_overwrite_behave_as_the_references");
    let dir = tempfile::tempdir().unwrap();
    let config = fixtures().join("routing-match-policy.json");
    let config = config.to_str().unwrap();
    let named = ["export-catalogue-manifest", config, "--dataset-name", "mission-product"];
    let (mine, reference) = (ours(&named, dir.path()), run(&theirs, &named, dir.path()));
    assert_eq!(stdout(&mine), stdout(&reference));
    assert!(stdout(&mine).contains("\"name\": \"mission-product\""), "{}", stdout(&mine));
    let plain = stdout(&run(&theirs, &["export-catalogue-manifest", config], dir.path()));
    assert_ne!(stdout(&mine), plain, "the comparison sees a changed field");

    for (who, program) in [("ours", PathBuf::from(env!("CARGO_BIN_EXE_nats-sink"))), ("theirs", theirs.clone())] {
        let output = dir.path().join(who).join("catalogue/manifest.json");
        let output_arg = output.to_str().unwrap();
        let first = run(&program, &["export-catalogue-manifest", config, "--output", output_arg], dir.path());
        assert!(first.status.success(), "{who}: {}", String::from_utf8_lossy(&first.stderr));
        assert_eq!(stdout(&first), format!("Wrote catalogue manifest: {output_arg}\n"), "{who}");
        let again =
            run(&program, &named.iter().copied().chain(["--output", output_arg]).collect::<Vec<_>>(), dir.path());
        assert_eq!(again.status.code(), Some(2), "{who}: an existing file is kept");
        assert!(!std::fs::read_to_string(&output).unwrap().contains("mission-product"), "{who}");
        let replaced = run(
            &program,
            &named.iter().copied().chain(["--output", output_arg, "--overwrite"]).collect::<Vec<_>>(),
            dir.path(),
        );
        assert!(replaced.status.success(), "{who}");
        assert_eq!(std::fs::read_to_string(&output).unwrap(), stdout(&mine), "{who}: the file is the printed manifest");
    }
}

#[test]
fn a_toml_config_gives_the_manifest_of_its_json_twin() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("config.json");
    std::fs::write(
        &json_path,
        r#"{"nats": {"stream": "ORDERS", "consumer": "c", "subject": "orders.>", "user": "app", "password_env": "NATS_PASS"},
            "delivery": {"retry_backoff_multiplier": 3},
            "message_metadata": {"labels": {"default": "audit; ops"}},
            "sink": {"type": "review_package", "enabled": true, "directory": "packages"}}"#,
    )
    .unwrap();
    let toml_path = dir.path().join("config.toml");
    std::fs::write(
        &toml_path,
        "[nats]\nstream = \"ORDERS\"\nconsumer = \"c\"\nsubject = \"orders.>\"\nuser = \"app\"\npassword_env = \"NATS_PASS\"\n\n\
         [delivery]\nretry_backoff_multiplier = 3\n\n[message_metadata.labels]\ndefault = \"audit; ops\"\n\n\
         [sink]\ntype = \"review_package\"\nenabled = true\ndirectory = \"packages\"\n",
    )
    .unwrap();
    let from_json = ours(&["export-catalogue-manifest", json_path.to_str().unwrap()], dir.path());
    let from_toml = ours(&["export-catalogue-manifest", toml_path.to_str().unwrap()], dir.path());
    assert!(from_json.status.success() && from_toml.status.success(), "{}", String::from_utf8_lossy(&from_toml.stderr));
    assert_eq!(stdout(&from_json), stdout(&from_toml));
    let manifest: serde_json::Value = serde_json::from_slice(&from_json.stdout).unwrap();
    assert_eq!(manifest["redacted_config"]["nats"]["password_env"], "********", "secrets are redacted");
    assert_eq!(manifest["redacted_config"]["delivery"]["retry_backoff_multiplier"], 3.0);
    assert_eq!(manifest["metadata"]["labels_default"], serde_json::json!(["audit", "ops"]));
    assert_eq!(manifest["sinks"]["active"], "review_package");
}
