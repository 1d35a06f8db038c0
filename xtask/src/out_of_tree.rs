//! The out-of-tree sink example (`examples/out-of-tree-sink`) in `cargo xtask test`, built the
//! way docs/writing-a-sink.md tells an outside team to: the example is copied out of this
//! repository (a directory of its own under the system's temporary directory, where no
//! `.cargo/config.toml` or workspace of this repository is found), the kit of crates it needs
//! is made beside it (`cargo xtask sink-kit`, [`crate::kit`]), and it is formatted, then linted
//! (clippy `-D warnings`, while its tests build) and tested there (its certification clauses
//! and its binary against a private nats-server). Nothing it builds comes from a path into the repository: every
//! package cargo resolves is the copy itself or a registry's (checked). Its build shares the
//! root `target/`, so third-party dependencies it has in common with the workspace are
//! compiled once where cargo can reuse them.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The example, relative to the workspace root.
pub(crate) const EXAMPLE: &str = "examples/out-of-tree-sink";

/// What a copy of the example leaves out: build output, a kit, databases.
fn skipped(name: &str) -> bool {
    matches!(name, "target" | "nats-sinks-kit") || name.ends_with(".db") || name.contains(".db-")
}

/// Copies the directory `from` into `to` (created), leaving out [`skipped`] entries.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if skipped(&name) {
            continue;
        }
        let (source, target) = (entry.path(), to.join(&name));
        if entry.file_type()?.is_dir() {
            copy_tree(&source, &target)?;
        } else {
            std::fs::copy(&source, &target).with_context(|| format!("copying {}", source.display()))?;
        }
    }
    Ok(())
}

/// Runs `cargo ARGS` in `dir` with `env`, failing on a non-zero exit.
fn cargo_in(dir: &Path, args: &[&str], env: &[(&str, String)]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("$ (in {}) cargo {}", dir.display(), args.join(" "));
    let status = Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("`cargo {}` in the copy of the example failed with {status}", args.join(" "));
    }
    Ok(())
}

/// The packages cargo resolves for the copy at `dir` that come from a path into `repo`.
fn paths_into(dir: &Path, repo: &Path) -> Result<Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(dir)
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!("cargo metadata in the copy failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    Ok(metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["manifest_path"].as_str().is_some_and(|m| Path::new(m).starts_with(repo)))
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect())
}

/// Copies the example out of the tree, makes its kit and checks it there with `env` (the run's
/// `NATS_SERVER_BIN`, …).
pub(crate) fn run(env: &[(&str, String)]) -> Result<()> {
    let root = sinks_testkit::workspace_root();
    let scratch = tempfile::Builder::new().prefix("out-of-tree-sink-").tempdir_in(std::env::temp_dir())?;
    let copy: PathBuf = scratch.path().join("sqlite-sink");
    copy_tree(&root.join(EXAMPLE), &copy)?;
    // The guide's recipe: the kit beside the sink, named by its .cargo/config.toml; a lock
    // that pins everything but the kit's crates (a kit of this commit holds other files).
    crate::kit::make(&copy.join("nats-sinks-kit"))?;
    let lock = copy.join("Cargo.lock");
    let pinned = std::fs::read_to_string(&lock).context("the example's Cargo.lock")?;
    std::fs::write(&lock, crate::kit::without_kit_entries(&pinned))?;
    let target = crate::target_dir().display().to_string();
    cargo_in(&copy, &["fmt", "--check"], &[])?;
    let into = paths_into(&copy, &root)?;
    if !into.is_empty() {
        bail!("the copied example builds {} from paths into the repository", into.join(", "));
    }
    // Linted while its tests build, in one build: clippy-driver compiles the example's own
    // targets (what `cargo clippy --all-targets -- -D warnings` lints; RUSTC_WORKSPACE_WRAPPER
    // and CLIPPY_ARGS are how cargo-clippy hands it over), plain rustc every dependency. A
    // `cargo clippy` of its own would check the kit's crates a second time, for nothing.
    cargo_in(&copy, &["test", "--target-dir", &target], &[&crate::lint_env()[..], env].concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && !skipped(&entry.file_name().to_string_lossy()) {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The tidy rules of the workspace (`tidy.rs`) that apply to a crate outside it: every
    /// file opens with `//!`, no test is ignored or inverted, and its own workspace keeps
    /// the example out of the root one. And the guide's recipe: no path dependency, the
    /// kit's crates from the `nats-sinks` registry its `.cargo/config.toml` names, no
    /// `sinks-testkit`, no `sinks-toolkit` (a sink needs the contract and what it opts into),
    /// and a lock that pins no kit crate (whose checksums change with every commit).
    #[test]
    fn the_example_keeps_the_tidy_rules_and_the_guide_s_recipe() {
        let root = sinks_testkit::workspace_root().join(EXAMPLE);
        let mut files = Vec::new();
        rust_files(&root, &mut files);
        assert!(files.len() >= 8, "found too few Rust files under {}", root.display());
        let hidden = [["#[", "ignore]"].concat(), ["#[", "should_panic"].concat()];
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            assert!(text.starts_with("//!"), "{} has no leading `//!` doc", file.display());
            assert!(!hidden.iter().any(|h| text.contains(h.as_str())), "{} hides or inverts a test", file.display());
            assert!(!text.contains("sinks_testkit"), "{} uses sinks-testkit, which is not published", file.display());
        }
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
        assert!(manifest.lines().any(|l| l.trim() == "[workspace]"), "the example must be a workspace of its own");
        assert!(!manifest.contains("path = \"../"), "no path dependency into the repository:\n{manifest}");
        // An out-of-tree sink needs the contract and what it opts into: the example opts into
        // none of the toolkit's mechanics.
        assert!(!manifest.contains("\nsinks-toolkit ="), "the example depends on sinks-toolkit:\n{manifest}");
        for name in crate::kit::KIT.iter().filter(|n| manifest.contains(&format!("\n{n} ="))) {
            let line = manifest.lines().find(|l| l.starts_with(&format!("{name} ="))).unwrap_or_default();
            let registry = format!("registry = \"{}\"", crate::kit::REGISTRY);
            assert!(line.contains(&registry), "{name} from the kit's registry: {line}");
        }
        let config = std::fs::read_to_string(root.join(".cargo/config.toml")).unwrap_or_default();
        assert_eq!(config, crate::kit::CONFIG, "the example's .cargo/config.toml is the one the kit prints");
        let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap_or_default();
        assert!(!lock.is_empty(), "the example's Cargo.lock is committed");
        assert_eq!(crate::kit::without_kit_entries(&lock), lock, "the committed lock pins no kit crate");
    }
}
