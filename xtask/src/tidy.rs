//! Tidy rules, enforced as a test so `cargo nextest run` checks them: every Rust file opens
//! with a `//!` doc line, no test is ignored or marked should-panic, every crate
//! uses the workspace lints, every sink crate has the same file roles (including its
//! certification harness and `tests/certify.rs`), and every publishable crate has complete
//! crates.io metadata.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("target") {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    fn files() -> Vec<PathBuf> {
        let root = sinks_testkit::workspace_root();
        let mut out = Vec::new();
        rust_files(&root.join("crates"), &mut out);
        rust_files(&root.join("xtask"), &mut out);
        rust_files(&root.join("fuzz"), &mut out);
        assert!(out.len() > 10, "found too few Rust files under {}", root.display());
        out
    }

    #[test]
    fn every_file_starts_with_a_module_doc() {
        let bad: Vec<_> = files()
            .into_iter()
            .filter(|p| !std::fs::read_to_string(p).unwrap_or_default().starts_with("//!"))
            .collect();
        assert!(bad.is_empty(), "files without a leading `//!` doc: {bad:?}");
    }

    #[test]
    fn no_test_is_hidden_or_inverted() {
        let ignore = ["#[", "ignore]"].concat();
        let should_panic = ["#[", "should_panic"].concat();
        let bad: Vec<_> = files()
            .into_iter()
            .filter(|p| {
                let text = std::fs::read_to_string(p).unwrap_or_default();
                text.contains(&ignore) || text.contains(&should_panic)
            })
            .collect();
        assert!(bad.is_empty(), "files with ignored or should_panic tests: {bad:?}");
    }

    #[test]
    fn every_crate_uses_workspace_lints() {
        let root = sinks_testkit::workspace_root();
        let mut manifests: Vec<PathBuf> =
            std::fs::read_dir(root.join("crates")).unwrap().flatten().map(|e| e.path().join("Cargo.toml")).collect();
        manifests.push(root.join("xtask/Cargo.toml"));
        for m in manifests {
            let text = std::fs::read_to_string(&m).unwrap();
            assert!(text.contains("[lints]\nworkspace = true"), "{} lacks `[lints] workspace = true`", m.display());
        }
    }

    #[test]
    fn sink_crates_share_file_roles() {
        let root = sinks_testkit::workspace_root();
        let sinks: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("sink-")))
            .collect();
        assert!(!sinks.is_empty());
        for sink in sinks {
            for role in
                ["src/lib.rs", "src/config.rs", "src/sink.rs", "src/error.rs", "src/certify.rs", "tests/certify.rs"]
            {
                assert!(sink.join(role).is_file(), "{} lacks {role}", sink.display());
            }
        }
    }

    #[test]
    fn publishable_crates_have_complete_metadata() {
        let root = sinks_testkit::workspace_root();
        for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
            let manifest = entry.path().join("Cargo.toml");
            let text = std::fs::read_to_string(&manifest).unwrap();
            if text.contains("\npublish = false") {
                continue;
            }
            for key in [
                "\ndescription = ",
                "\nlicense.workspace = true",
                "\nrepository.workspace = true",
                "\nreadme.workspace = true",
                "\nkeywords = ",
                "\ncategories = ",
                "\n[package.metadata.docs.rs]",
            ] {
                assert!(text.contains(key), "{} lacks `{}` (crates.io metadata)", manifest.display(), key.trim());
            }
        }
    }
}
