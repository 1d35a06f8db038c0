//! Runs `docs/getting-started.md` as a newcomer would (`cargo xtask docs` runs it; CI too):
//! in a fresh directory beside the workspace, every `toml` block is written under the name in
//! its first line (`# orders.toml`), then every `sh` block is run in page order with
//! `bash -e`, with the installed `nats-sink` first on `PATH`. A block that fails fails the
//! check, with the block and its output. The page is run, not copied: a command edited there
//! is the command that runs here.
//!
//! Two adaptations, both to reuse what CI has already built rather than change what runs:
//! `cargo install` gets `--debug` (the workspace's debug build, not a second release build of
//! every dependency) and installs under the scratch directory (`CARGO_INSTALL_ROOT`); and the
//! directory links the workspace's `Cargo.toml`, `Cargo.lock`, `.cargo`, `crates` and `xtask`,
//! so that commands written for the repository's root work there.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The page that is run.
pub(crate) const PAGE: &str = "docs/getting-started.md";

/// A fenced block of the page: its language and text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) lang: String,
    pub(crate) text: String,
}

/// The fenced blocks of `markdown`, in order.
pub(crate) fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in markdown.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(lang)) => open = Some((lang.trim().to_owned(), Vec::new())),
            (Some(_), Some(_)) => {
                if let Some((lang, lines)) = open.take() {
                    out.push(Block { lang, text: lines.join("\n") + "\n" });
                }
            }
            (Some((_, lines)), None) => lines.push(line),
            (None, None) => {}
        }
    }
    out
}

/// The file name a `toml` block names in its first line (`# name.toml`).
fn file_name(block: &Block) -> Option<&str> {
    let first = block.text.lines().next()?.trim().strip_prefix('#')?.trim();
    (first.ends_with(".toml") && !first.contains('/')).then_some(first)
}

/// `block`'s commands with `cargo install` made to reuse the debug build.
fn adapted(block: &Block) -> String {
    block
        .text
        .lines()
        .map(|line| match line.trim_start().strip_prefix("cargo install ") {
            Some(rest) => format!("cargo install --debug {rest}"),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs the page (see the module documentation).
pub(crate) fn run() -> Result<()> {
    let root = sinks_testkit::workspace_root();
    let page = std::fs::read_to_string(root.join(PAGE)).with_context(|| format!("reading {PAGE}"))?;
    let blocks = blocks(&page);
    let scratch = tempfile::Builder::new().prefix("getting-started-").tempdir_in(crate::target_dir())?;
    let dir = scratch.path();
    for name in ["Cargo.toml", "Cargo.lock", ".cargo", "crates", "xtask"] {
        std::os::unix::fs::symlink(root.join(name), dir.join(name)).with_context(|| format!("linking {name}"))?;
    }
    let mut files = 0;
    for block in blocks.iter().filter(|b| b.lang == "toml") {
        let name = file_name(block).with_context(|| {
            format!("a toml block of {PAGE} does not name its file in its first line (`# name.toml`):\n{}", block.text)
        })?;
        std::fs::write(dir.join(name), &block.text)?;
        files += 1;
    }
    let install = dir.join("install");
    let path = format!("{}:{}", install.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let mut ran = 0;
    for block in blocks.iter().filter(|b| b.lang == "sh") {
        let script = adapted(block);
        let out = Command::new("bash")
            .args(["-e", "-c", &script])
            .current_dir(dir)
            .env("PATH", &path)
            .env("CARGO_INSTALL_ROOT", &install)
            .env("CARGO_TARGET_DIR", crate::target_dir())
            .env_remove("NATS_SINKS_NATS_URL")
            .output()
            .context("running bash")?;
        if !out.status.success() {
            stop_servers(dir);
            bail!(
                "a block of {PAGE} failed ({}):\n{script}\n--- stdout:\n{}\n--- stderr:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        ran += 1;
    }
    stop_servers(dir);
    if files == 0 || ran == 0 {
        bail!("{PAGE} has {files} config files and {ran} command blocks: nothing was checked");
    }
    eprintln!("docs: {PAGE} ran as written: {files} config files, {ran} command blocks");
    Ok(())
}

/// Kills a nats-server the page left running (its pid file), so that a failing block leaves
/// nothing behind.
fn stop_servers(dir: &Path) {
    let pid: PathBuf = dir.join("nats-server.pid");
    if let Ok(pid) = std::fs::read_to_string(pid) {
        let _ = Command::new("kill").arg(pid.trim()).status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_their_files() {
        let md = "text\n```sh\necho a\ncargo install --path x\n```\nmore\n```toml\n# a.toml\n[x]\n```\n```text\nnot run\n```\n";
        let b = blocks(md);
        assert_eq!(b.len(), 3);
        assert_eq!(b[0], Block { lang: "sh".into(), text: "echo a\ncargo install --path x\n".into() });
        assert_eq!(adapted(&b[0]), "echo a\ncargo install --debug --path x");
        assert_eq!(file_name(&b[1]), Some("a.toml"));
        assert_eq!(file_name(&Block { lang: "toml".into(), text: "[x]\n".into() }), None);
    }

    #[test]
    fn the_page_has_configs_and_commands() {
        let page = std::fs::read_to_string(sinks_testkit::workspace_root().join(PAGE)).unwrap();
        let b = blocks(&page);
        assert!(b.iter().filter(|b| b.lang == "toml").all(|b| file_name(b).is_some()), "every config names its file");
        assert!(b.iter().any(|b| b.lang == "sh" && b.text.contains("nats-sink run")), "the page runs the sink");
    }
}
