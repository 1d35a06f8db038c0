//! `cargo xtask bench --compare REV`: builds the file-only release `nats-sink` of revision
//! `REV` (its tree exported with `git archive` under `target/compare/`, built there) and of
//! the work tree, and the raw consume + ack ceiling, then has `sinks-bench compare` run the
//! core contenders of both in alternating pairs in one run and print each ratio with its
//! spread (bench/src/bench/compare.rs). Any other option is passed on (`--pairs 7`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// Runs the comparison of the work tree against `rev`; `rest` goes to `sinks-bench compare`.
pub(crate) fn run(rev: &str, rest: &[String]) -> Result<()> {
    let root = sinks_testkit::workspace_root();
    let sha = git(&root, &["rev-parse", "--verify", &format!("{rev}^{{commit}}")])
        .with_context(|| format!("`{rev}` is not a revision of this repository"))?;
    let short = &sha[..12.min(sha.len())];
    let dir = root.join("target/compare");
    let source = dir.join(format!("src-{short}"));
    if !source.join("Cargo.toml").exists() {
        export(&root, &sha, &source)?;
    }
    // A target directory for each: cargo names a workspace's own crates by their path within
    // the workspace, so two checkouts of it in one target directory take each other's builds.
    let base = build_file_only(&source, &dir.join("target-base"), &dir.join(format!("nats-sink-{short}")))?;
    let work = build_file_only(&root, &dir.join("target-work"), &dir.join("nats-sink-work"))?;
    crate::cargo(&["build", "--release", "--locked", "--quiet", "-p", "sinks-bench", "--bin", "raw_consume"], &[])?;
    let raw = crate::target_dir().join("release/raw_consume");
    crate::setup::ensure(&[crate::setup::Need::Nats])?;
    let (base, work, raw) = (base.display().to_string(), work.display().to_string(), raw.display().to_string());
    let label = format!("{rev} ({short})");
    let mut args = vec!["compare", "--base", &base, "--work", &work, "--raw", &raw, "--base-label", &label];
    args.extend(rest.iter().map(String::as_str));
    crate::sinks_bench(&args, &[])
}

/// `args` without `--compare REV` (or `--compare=REV`), and `REV` when it was there.
pub(crate) fn split(args: &[String]) -> (Option<String>, Vec<String>) {
    let mut rev = None;
    let mut rest = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--compare" {
            rev = iter.next().cloned();
        } else if let Some(value) = arg.strip_prefix("--compare=") {
            rev = Some(value.to_owned());
        } else {
            rest.push(arg.clone());
        }
    }
    (rev, rest)
}

/// Writes the tree of commit `sha` into `into` (`git archive | tar -x`).
fn export(root: &Path, sha: &str, into: &Path) -> Result<()> {
    std::fs::create_dir_all(into)?;
    eprintln!("compare: exporting {sha} into {}", into.display());
    let mut archive = Command::new("git")
        .args(["archive", "--format=tar", sha])
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .context("running git archive")?;
    let stdout = archive.stdout.take().context("git archive has no output")?;
    let untar = Command::new("tar").arg("-x").arg("-C").arg(into).stdin(stdout).status().context("running tar")?;
    let archived = archive.wait()?;
    if !archived.success() || !untar.success() {
        let _ = std::fs::remove_dir_all(into);
        bail!("exporting {sha} failed (git archive {archived}, tar {untar})");
    }
    Ok(())
}

/// Builds the file-only release `nats-sink` of the workspace at `source` into `target` and
/// copies it to `to`.
fn build_file_only(source: &Path, target: &Path, to: &Path) -> Result<PathBuf> {
    eprintln!("compare: building the file-only release nats-sink of {}", source.display());
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "--locked", "--quiet", "-p", "sinks-bin", "--no-default-features"])
        .args(["--features", "file", "--target-dir"])
        .arg(target)
        .current_dir(source)
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("building nats-sink in {} failed ({status})", source.display());
    }
    std::fs::copy(target.join("release/nats-sink"), to).with_context(|| format!("copying to {}", to.display()))?;
    Ok(to.to_path_buf())
}

fn git(root: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git").args(args).current_dir(root).output().context("running git")?;
    if !out.status.success() {
        bail!("git {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_revision_is_taken_out_of_the_arguments() {
        let (rev, rest) = split(&strings(&["--pairs", "7", "--compare", "HEAD~2"]));
        assert_eq!((rev.as_deref(), rest), (Some("HEAD~2"), strings(&["--pairs", "7"])));
        let (rev, rest) = split(&strings(&["--compare=main", "--batch", "100"]));
        assert_eq!((rev.as_deref(), rest), (Some("main"), strings(&["--batch", "100"])));
        assert_eq!(split(&strings(&["--suite", "core"])), (None, strings(&["--suite", "core"])));
    }
}
