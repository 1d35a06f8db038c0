//! `cargo xtask deny`: the supply-chain check. cargo-deny (pinned, from `cargo xtask setup`)
//! checks the workspace's dependency graph against `deny.toml`: RustSec advisories, licences,
//! sources (crates.io only) and bans (duplicate versions, banned crates). It builds nothing and
//! takes seconds, so `cargo xtask test` runs it first. docs/testing.md ("Supply chain") says
//! what each check holds and what to do when one fails.
//!
//! The RustSec database cannot be fetched from the machines CI runs on. A snapshot lies beside
//! the workspace, in `../shared/advisory-db` (or wherever `NATS_SINKS_ADVISORY_DB` points); its
//! `prepare.sh` makes the git checkout cargo-deny reads under `target/advisory-dbs` (deny.toml's
//! `db-path`, relative to the workspace root), and cargo-deny runs `--offline` on a `cargo
//! metadata` made beforehand (that step may download the crates of other platforms). Without
//! the snapshot the check fails: the advisories are never skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// Points at the advisory database snapshot (the directory holding `prepare.sh` and `db/`)
/// when it is not `../shared/advisory-db` of the workspace root.
pub(crate) const ADVISORY_DB_ENV: &str = "NATS_SINKS_ADVISORY_DB";
/// Where cargo-deny looks for the database: deny.toml's `db-path`, relative to the workspace
/// root (cargo-deny resolves it against its working directory).
const DB_PATH: &str = "target/advisory-dbs";
/// The checks of a full `cargo deny check`, in the order of its report.
const CHECKS: [&str; 4] = ["advisories", "bans", "licenses", "sources"];
/// Warnings of cargo-deny that fail the check too: a `skip` of `[bans]` that no longer matches
/// a duplicate (the list stays what the graph needs, like the licence list).
const DENIED_LINTS: [&str; 2] = ["unmatched-skip", "unnecessary-skip"];

/// One line of cargo-deny's report (`--show-stats`): a check and its counts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CheckStats {
    check: String,
    passed: bool,
    errors: u32,
    warnings: u32,
    notes: u32,
}

impl std::fmt::Display for CheckStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = if self.passed { "ok" } else { "FAILED" };
        write!(f, "{} {verdict} ({} errors, {} warnings, {} notes)", self.check, self.errors, self.warnings, self.notes)
    }
}

/// Runs the supply-chain check; fails when cargo-deny finds a problem, or cannot run.
pub(crate) fn run() -> Result<()> {
    let started = Instant::now();
    let root = sinks_testkit::workspace_root();
    let cargo_deny = crate::setup::cargo_deny()?;
    let snapshot = snapshot_dir(&root, std::env::var_os(ADVISORY_DB_ENV).map(PathBuf::from))?;
    let checkout = prepare(&snapshot, &root.join(DB_PATH))?;
    let snapshot_date = git_head_date(&checkout);
    let metadata = metadata(&root)?;
    let mut deny = Command::new(&cargo_deny);
    deny.arg("--offline").arg("--metadata-path").arg(&metadata).args(["check", "--show-stats"]);
    for lint in DENIED_LINTS {
        deny.args(["--deny", lint]);
    }
    eprintln!("$ cargo deny --offline --metadata-path {} check --show-stats", metadata.display());
    let out = deny.current_dir(&root).output().with_context(|| format!("running {}", cargo_deny.display()))?;
    // Its diagnostics (on stderr, with the crates that bring each one in), then its report (on
    // stdout), as they came.
    let report = String::from_utf8_lossy(&out.stdout);
    eprint!("{}{report}", String::from_utf8_lossy(&out.stderr));
    let stats = parse_stats(&report);
    let summary = stats.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    if !out.status.success() {
        bail!("cargo deny: {summary} ({}); see its diagnostics above and docs/testing.md", out.status);
    }
    let missing: Vec<&str> = CHECKS.iter().copied().filter(|c| !stats.iter().any(|s| s.check == *c)).collect();
    if !missing.is_empty() {
        bail!("cargo deny passed but its report has no line for {}: was every check run?", missing.join(", "));
    }
    eprintln!(
        "supply chain (cargo-deny, RustSec snapshot of {snapshot_date}): {summary} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The advisory database snapshot: `over` (from [`ADVISORY_DB_ENV`]) or `../shared/advisory-db`
/// of the workspace root; it must hold `prepare.sh` and `db/`.
fn snapshot_dir(root: &Path, over: Option<PathBuf>) -> Result<PathBuf> {
    let from_env = over.is_some();
    let dir = over.unwrap_or_else(|| root.join("../shared/advisory-db"));
    if !dir.join("prepare.sh").is_file() || !dir.join("db").is_dir() {
        let how = if from_env {
            format!("{ADVISORY_DB_ENV} points there")
        } else {
            format!("set {ADVISORY_DB_ENV} to the snapshot's directory")
        };
        bail!(
            "the RustSec advisory database snapshot is missing: {} has no prepare.sh and db/ ({how}); \
             the supply-chain check does not run without it",
            dir.display()
        );
    }
    Ok(dir)
}

/// Makes the git checkout of the snapshot under `db_path` (the snapshot's `prepare.sh`, which
/// replaces an older one) and returns it.
fn prepare(snapshot: &Path, db_path: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(db_path).with_context(|| format!("creating {}", db_path.display()))?;
    // The snapshot may be laid out read-only (as CI's copy is) and its copy with it: make the
    // last checkout removable for a user who is not root.
    let _ = Command::new("chmod").arg("-R").arg("u+w").arg(db_path).status();
    let out = Command::new("bash")
        .arg(snapshot.join("prepare.sh"))
        .arg(db_path)
        .output()
        .context("running the advisory database's prepare.sh")?;
    if !out.status.success() {
        bail!(
            "{} {} failed ({}): {}",
            snapshot.join("prepare.sh").display(),
            db_path.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let checkout = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !checkout.join(".git").is_dir() {
        bail!("prepare.sh did not make a git checkout (it printed `{}`)", checkout.display());
    }
    Ok(checkout)
}

/// The date of the checkout's commit (the snapshot's), or `unknown`.
fn git_head_date(checkout: &Path) -> String {
    Command::new("git")
        .arg("-C")
        .arg(checkout)
        .args(["log", "-1", "--format=%cs"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// `cargo metadata --all-features --locked` of the workspace, written to
/// `<target>/deny/metadata.json` (cargo-deny's `--offline` keeps it from making its own, which
/// would need the crates of every platform).
fn metadata(root: &Path) -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--all-features", "--locked"])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!("cargo metadata --locked failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    let dir = crate::target_dir().join("deny");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("metadata.json");
    std::fs::write(&path, &out.stdout).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The report lines of `cargo deny check --show-stats` (its stdout), e.g.
/// `   bans FAILED: 1 errors, 0 warnings, 35 notes`.
fn parse_stats(report: &str) -> Vec<CheckStats> {
    report
        .lines()
        .filter_map(|line| {
            let (head, counts) = line.trim().split_once(": ")?;
            let (check, verdict) = head.split_once(' ')?;
            if !CHECKS.contains(&check) || !matches!(verdict, "ok" | "FAILED") {
                return None;
            }
            let mut numbers = counts.split(", ").map(|part| {
                let (n, what) = part.split_once(' ')?;
                Some((n.parse::<u32>().ok()?, what))
            });
            let (errors, "errors") = numbers.next()?? else { return None };
            let (warnings, "warnings") = numbers.next()?? else { return None };
            let (notes, "notes") = numbers.next()?? else { return None };
            Some(CheckStats { check: check.to_owned(), passed: verdict == "ok", errors, warnings, notes })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_lines_of_every_check_are_read_with_their_counts() {
        let report = "error[duplicate]: found 2 duplicate entries for crate 'num-bigint'\n\
                      advisories ok: 0 errors, 0 warnings, 2 notes\n   bans FAILED: 1 errors, 0 warnings, 34 notes\n\
                      \x20  licenses ok: 0 errors, 0 warnings, 426 notes\n    sources ok: 0 errors, 3 warnings, 0 notes\n\
                      \x20  total ok: 9 errors, 0 warnings, 0 notes\n  bans ok: many errors\n";
        let stats = parse_stats(report);
        let line = |check: &str, passed, errors, warnings, notes| CheckStats {
            check: check.into(),
            passed,
            errors,
            warnings,
            notes,
        };
        assert_eq!(
            stats,
            vec![
                line("advisories", true, 0, 0, 2),
                line("bans", false, 1, 0, 34),
                line("licenses", true, 0, 0, 426),
                line("sources", true, 0, 3, 0),
            ]
        );
        assert_eq!(stats[1].to_string(), "bans FAILED (1 errors, 0 warnings, 34 notes)");
    }

    #[test]
    fn a_missing_snapshot_fails_and_names_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let err = snapshot_dir(dir.path(), Some(dir.path().join("nowhere"))).unwrap_err().to_string();
        assert!(err.contains("snapshot is missing") && err.contains(ADVISORY_DB_ENV), "{err}");
        // the default place, beside the workspace root
        let root = dir.path().join("checkout");
        std::fs::create_dir_all(&root).unwrap();
        let err = snapshot_dir(&root, None).unwrap_err().to_string();
        assert!(err.contains("shared/advisory-db") && err.contains(ADVISORY_DB_ENV), "{err}");
        let snapshot = dir.path().join("shared/advisory-db");
        std::fs::create_dir_all(snapshot.join("db")).unwrap();
        assert!(snapshot_dir(&root, None).is_err(), "a snapshot without prepare.sh is not usable");
        std::fs::write(snapshot.join("prepare.sh"), "").unwrap();
        assert_eq!(snapshot_dir(&root, None).unwrap(), root.join("../shared/advisory-db"));
    }

    #[test]
    fn deny_toml_reads_the_database_where_the_check_prepares_it() {
        let config = std::fs::read_to_string(sinks_testkit::workspace_root().join("deny.toml")).unwrap();
        assert!(config.lines().any(|l| l.trim() == format!("db-path = \"{DB_PATH}\"")), "deny.toml's db-path");
        // prepare.sh names the checkout after this URL
        assert!(config.lines().any(|l| l.trim() == r#"db-urls = ["https://github.com/rustsec/advisory-db"]"#));
    }
}
