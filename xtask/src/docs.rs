//! `cargo xtask docs`: the documentation checks CI runs.
//!
//! 1. `docs/config-reference.md` is what the config types generate (`sinks-bench
//!    config-reference`, bench/src/config_ref.rs; `--bless` rewrites it).
//! 2. Every page in `docs/` is listed in `docs/SUMMARY.md`, and every relative link in
//!    `docs/` points to a file that exists (and, for `page.md#anchor` or `#anchor`, to a
//!    heading of that page): mdBook itself does not check links.
//! 3. The mdBook site builds into `target/book` with no warning (`book.toml` at the root,
//!    pages from `docs/`; mdBook pinned by `cargo xtask setup`).
//! 4. `cargo doc --workspace --no-deps` builds with `RUSTDOCFLAGS=-D warnings` (`cargo xtask
//!    test` builds it beside the tests, in `target/rustdoc`, and runs the rest here).
//! 5. `docs/getting-started.md` runs as written ([`crate::doc_run`]; `--no-getting-started`
//!    skips it).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Options of `cargo xtask docs`.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct Args {
    /// Rewrite docs/config-reference.md from the config types instead of checking it.
    #[arg(long)]
    pub(crate) bless: bool,
    /// Skip `cargo doc` (the slowest step).
    #[arg(long)]
    pub(crate) no_rustdoc: bool,
    /// Skip running the pages that run as printed (docs/getting-started.md, docs/topology.md).
    #[arg(long)]
    pub(crate) no_getting_started: bool,
}

/// Runs `cargo xtask docs`.
pub(crate) fn run(args: &Args) -> Result<()> {
    let root = sinks_testkit::workspace_root();
    let started = std::time::Instant::now();

    // The config types are the product's: `sinks-bench` links them and checks the page.
    let reference = if args.bless { &["config-reference", "--bless"][..] } else { &["config-reference"][..] };
    crate::sinks_bench(reference, &[])?;

    let problems = check_links(&root.join("docs"))?;
    if !problems.is_empty() {
        bail!("{} broken link(s) in docs/: {}", problems.len(), problems.join("; "));
    }
    eprintln!("docs: every page is in SUMMARY.md and every relative link resolves");
    if !args.no_getting_started {
        crate::setup::ensure(&[crate::setup::Need::Nats])?;
        crate::doc_run::run()?;
    }

    let mdbook = crate::setup::mdbook()?;
    let out = Command::new(&mdbook)
        .args(["build", "--dest-dir"])
        .arg(root.join("target/book"))
        .arg(&root)
        .output()
        .context("running mdbook")?;
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let complaints: Vec<&str> = log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).collect();
    if !out.status.success() || !complaints.is_empty() {
        let shown = if complaints.is_empty() { log.trim().to_owned() } else { complaints.join(" / ") };
        bail!("mdbook build failed or warned ({}): {shown}", out.status);
    }
    eprintln!("docs: the book is in target/book (open target/book/index.html)");

    if !args.no_rustdoc {
        rustdoc(None, false)?;
    }
    eprintln!("docs: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `cargo doc --workspace --no-deps` with `RUSTDOCFLAGS=-D warnings`, into `target_dir` when
/// given (a build beside others takes its own, so that neither waits for the other's lock),
/// at idle priority when `idle` (`cargo xtask test` runs it beside the tests).
pub(crate) fn rustdoc(target_dir: Option<&Path>, idle: bool) -> Result<()> {
    let mut cmd = crate::ops::cargo_command(idle);
    cmd.args(["doc", "--workspace", "--no-deps", "--locked", "--quiet"])
        .env("RUSTDOCFLAGS", "-D warnings")
        .current_dir(sinks_testkit::workspace_root());
    if let Some(dir) = target_dir {
        cmd.arg("--target-dir").arg(dir);
    }
    let status = cmd.status().context("running cargo doc")?;
    if !status.success() {
        bail!("cargo doc --workspace --no-deps failed with -D warnings ({status})");
    }
    Ok(())
}

/// Problems with the pages of `docs` and their links, one line each.
fn check_links(docs: &Path) -> Result<Vec<String>> {
    let mut pages: Vec<String> = std::fs::read_dir(docs)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    pages.sort();
    let mut problems = Vec::new();
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).context("reading docs/SUMMARY.md")?;
    let listed: BTreeSet<String> = links(&summary).into_iter().map(|(_, target)| target).collect();
    for page in pages.iter().filter(|p| *p != "SUMMARY.md") {
        if !listed.contains(page) {
            problems.push(format!("docs/{page} is not listed in docs/SUMMARY.md"));
        }
    }
    for page in &pages {
        let text = std::fs::read_to_string(docs.join(page))?;
        for (line, target) in links(&text) {
            if let Some(problem) = check_link(docs, page, &text, &target) {
                problems.push(format!("docs/{page}:{line}: `{target}` {problem}"));
            }
        }
    }
    Ok(problems)
}

/// What is wrong with the link `target` of `page` (whose text is `text`), if anything.
fn check_link(docs: &Path, page: &str, text: &str, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((file, anchor)) => (file, Some(anchor)),
        None => (target, None),
    };
    let linked = if file.is_empty() {
        text.to_owned()
    } else {
        let path = docs.join(file);
        if !path.exists() {
            return Some("points to a file that does not exist".into());
        }
        if anchor.is_none() || !file.ends_with(".md") {
            return None;
        }
        std::fs::read_to_string(&path).unwrap_or_default()
    };
    let anchor = anchor?;
    if anchors(&linked).contains(anchor) {
        None
    } else {
        let target_page = if file.is_empty() { page } else { file };
        Some(format!("names no heading of {target_page}"))
    }
}

/// The inline links `[text](target)` of a Markdown text outside code, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = rest[..end].split_whitespace().next().unwrap_or_default();
            if !target.is_empty() {
                out.push((n + 1, target.to_owned()));
            }
            rest = &rest[end..];
        }
    }
    out
}

/// `line` with its `code spans` removed.
fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect()
}

/// The heading ids mdBook gives the headings of a page (`## Sink contract` → `sink-contract`;
/// repeated headings get `-1`, `-2`, …).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(heading) = line.strip_prefix('#') else { continue };
        if fenced {
            continue;
        }
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let id = heading_id(heading.trim());
        let mut unique = id.clone();
        let mut n = 1;
        while ids.contains(&unique) {
            unique = format!("{id}-{n}");
            n += 1;
        }
        ids.insert(unique);
    }
    ids
}

/// mdBook's id of a heading: its text (links reduced to their text, no code marks),
/// lowercased, whitespace as `-`, only alphanumerics, `-` and `_` kept (mdbook-html's
/// `id_from_content`).
fn heading_id(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match (after.find("]("), after.find(')')) {
            (Some(close), Some(end)) if close < end => {
                text.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heading_ids_follow_mdbook() {
        assert_eq!(heading_id("What committed means"), "what-committed-means");
        assert_eq!(heading_id("`nats-sink` and [the docs](x.md)"), "nats-sink-and-the-docs");
        assert_eq!(heading_id("Pipelining and ordering"), "pipelining-and-ordering");
        let ids = anchors("# A\n\n## A\n```\n# not a heading\n```\n## B.c\n");
        assert_eq!(ids.into_iter().collect::<Vec<_>>(), ["a", "a-1", "bc"]);
    }

    #[test]
    fn links_skip_code() {
        let found = links("see [a](a.md) and `[b](b.md)`\n```\n[c](c.md)\n```\n[d](d.md#x \"title\")");
        assert_eq!(found, [(1, "a.md".to_owned()), (5, "d.md#x".to_owned())]);
    }

    #[test]
    fn the_docs_pages_link_to_what_exists() {
        let problems = check_links(&sinks_testkit::workspace_root().join("docs")).unwrap_or_else(|e| panic!("{e:#}"));
        assert!(problems.is_empty(), "broken links in docs/:\n{}", problems.join("\n"));
    }
}
