//! The out-of-tree sink example (`examples/out-of-tree-sink`) in `cargo xtask test`: a crate
//! in a Cargo workspace of its own, built on this repository's crates by path, checked the
//! way the root workspace is (rustfmt, clippy `-D warnings`, its tests: the certification
//! clauses and its binary against a private nats-server). Its build shares the root
//! `target/`, so the dependencies it has in common with the workspace are compiled once
//! where cargo can reuse them (same versions, features and profile).

use anyhow::Result;

/// The example's manifest, relative to the workspace root.
pub(crate) const MANIFEST: &str = "examples/out-of-tree-sink/Cargo.toml";

/// Formats, lints and tests the example with `env` (the run's `NATS_SERVER_BIN`, …).
/// `--locked`: its committed Cargo.lock must be up to date.
pub(crate) fn run(env: &[(&str, String)]) -> Result<()> {
    let target = crate::target_dir().display().to_string();
    crate::cargo(&["fmt", "--manifest-path", MANIFEST, "--check"], &[])?;
    let lint = ["clippy", "--manifest-path", MANIFEST, "--locked", "--target-dir", &target, "--all-targets"];
    crate::cargo(&[&lint[..], &["--", "-D", "warnings"]].concat(), &[])?;
    crate::cargo(&["test", "--manifest-path", MANIFEST, "--locked", "--target-dir", &target], env)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("target") {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The tidy rules of the workspace (`tidy.rs`) that apply to a crate outside it: every
    /// file opens with `//!`, no test is ignored or inverted, and its own workspace keeps
    /// the example out of the root one.
    #[test]
    fn the_example_keeps_the_tidy_rules() {
        let root = sinks_testkit::workspace_root().join("examples/out-of-tree-sink");
        let mut files = Vec::new();
        rust_files(&root, &mut files);
        assert!(files.len() >= 8, "found too few Rust files under {}", root.display());
        let hidden = [["#[", "ignore]"].concat(), ["#[", "should_panic"].concat()];
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            assert!(text.starts_with("//!"), "{} has no leading `//!` doc", file.display());
            assert!(!hidden.iter().any(|h| text.contains(h.as_str())), "{} hides or inverts a test", file.display());
        }
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
        assert!(manifest.lines().any(|l| l.trim() == "[workspace]"), "the example must be a workspace of its own");
        assert!(root.join("Cargo.lock").is_file(), "the example's Cargo.lock is committed");
    }
}
