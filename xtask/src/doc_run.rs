//! Runs `docs/getting-started.md` and `docs/topology.md` ([`PAGES`]) as a newcomer with a
//! release binary would (`cargo xtask docs` runs them; CI too): each in a fresh directory beside the workspace, every `toml` block is
//! written under the name in its first line (`# orders.toml`), then the `sh` blocks are run
//! in page order in one `bash -e` session (as typed into one terminal: an `export` carries
//! over), with a slim `nats-sink` (the file, HTTP, S3 and spool sinks, as a release binary of
//! the kinds a newcomer picked) and the official NATS CLI (natscli) first on `PATH`, and no
//! Rust toolchain (the page must not need one: a `cargo` command in a run block fails the
//! check). A block that fails fails the check, with the block and the session's output. The
//! page is run, not copied: a command edited there is the command that runs here.
//!
//! Then getting-started's claims its blocks cannot show by running (`check_claims`): `validate` reports
//! every problem at once (the page's `orders.toml` with four mistakes gets four errors in one
//! run), `validate --connect` names the consumer it will create (in the session's output), and
//! the page's running check (`grep -q 'consuming'`) is not fooled by a pause: the page's
//! server started again on its data, the stream deleted and created again, a start of the sink
//! waits for a decision and logs no "consuming".

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The getting-started page, whose claims are checked too.
pub(crate) const PAGE: &str = "docs/getting-started.md";

/// The topology page: a hub, an edge server over a leaf link, a mirror and sources.
pub(crate) const TOPOLOGY: &str = "docs/topology.md";

/// Every page that is run, in order.
pub(crate) const PAGES: [&str; 2] = [PAGE, TOPOLOGY];

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

/// The features of the slim binary the page runs with (`cargo xtask test` builds the same
/// binary last in its slim phase, under the same lint environment, so the build here finds it
/// done).
pub(crate) const FEATURES: &str = "file,http,s3,spool";

/// The session's script: every block after a marker naming it on standard error, so that a
/// failure names its block.
fn session(blocks: &[&Block]) -> String {
    let mut script = String::new();
    for (i, block) in blocks.iter().enumerate() {
        script.push_str(&format!("echo '{MARKER}{i}' >&2\n{}\n", block.text));
    }
    script
}

/// What marks the start of a block in the session's standard error.
const MARKER: &str = "### page block ";

/// A page's session that ran: its directory (removed on drop), the `PATH` it ran with and its
/// standard output.
struct Ran {
    scratch: tempfile::TempDir,
    path: String,
    stdout: String,
}

/// Runs every page (see the module documentation), and getting-started's claims.
pub(crate) fn run() -> Result<()> {
    for page in PAGES {
        let ran = run_page(page)?;
        if page == PAGE {
            let claims = check_claims(ran.scratch.path(), &ran.path, &ran.stdout);
            stop_servers(ran.scratch.path());
            claims?;
            eprintln!(
                "docs: {PAGE}'s claims hold: every problem at once, the consumer named, no \"consuming\" while paused"
            );
        } else {
            stop_servers(ran.scratch.path());
        }
    }
    Ok(())
}

/// Runs `page`'s blocks in a fresh directory; the servers it started are still running.
fn run_page(page: &str) -> Result<Ran> {
    let root = sinks_testkit::workspace_root();
    let text = std::fs::read_to_string(root.join(page)).with_context(|| format!("reading {page}"))?;
    let blocks = blocks(&text);
    let stem = page.trim_start_matches("docs/").trim_end_matches(".md");
    let scratch = tempfile::Builder::new().prefix(&format!("{stem}-")).tempdir_in(crate::target_dir())?;
    let dir = scratch.path();
    let mut files = 0;
    for block in blocks.iter().filter(|b| b.lang == "toml") {
        let name = file_name(block).with_context(|| {
            format!("a toml block of {page} does not name its file in its first line (`# name.toml`):\n{}", block.text)
        })?;
        std::fs::write(dir.join(name), &block.text)?;
        files += 1;
    }
    let shell: Vec<&Block> = blocks.iter().filter(|b| b.lang == "sh").collect();
    if let Some(block) = shell.iter().find(|b| b.text.lines().any(|l| l.trim_start().starts_with("cargo "))) {
        bail!(
            "a run block of {page} needs a Rust toolchain (`cargo`); the page must work with a release binary:\n{}",
            block.text
        );
    }
    // The binaries a newcomer has: a slim nats-sink and natscli, in a directory of their own.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    crate::cargo(
        &["build", "--quiet", "-p", "sinks-bin", "--no-default-features", "--features", FEATURES],
        &crate::lint_env(),
    )?;
    std::fs::copy(crate::debug_nats_sink(), bin.join("nats-sink")).context("copying the slim nats-sink")?;
    std::os::unix::fs::symlink(crate::setup::natscli()?, bin.join("nats")).context("linking natscli")?;
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("bash")
        .args(["-e", "-c", &session(&shell)])
        .current_dir(dir)
        .env("PATH", &path)
        .env_remove("NATS_SINKS_NATS_URL")
        .env_remove("NATS_URL")
        .output()
        .context("running bash")?;
    let ran = shell.len();
    if !out.status.success() {
        stop_servers(dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let failed =
            stderr.rfind(MARKER).and_then(|at| stderr[at + MARKER.len()..].lines().next()?.parse::<usize>().ok());
        let block = failed.and_then(|i| shell.get(i)).map_or("?", |b| b.text.as_str());
        bail!(
            "a block of {page} failed ({}):\n{block}\n--- stdout:\n{}\n--- stderr:\n{stderr}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
    }
    if files == 0 || ran == 0 {
        stop_servers(dir);
        bail!("{page} has {files} config files and {ran} command blocks: nothing was checked");
    }
    eprintln!("docs: {page} ran as written: {files} config files, {ran} command blocks");
    Ok(Ran { path, stdout: String::from_utf8_lossy(&out.stdout).into_owned(), scratch })
}

/// What `validate --connect` says of the page's consumer on a fresh server.
const CONSUMER_NAMED: &str = "consumer `orders-to-files` does not exist yet: run creates it";

/// The four mistakes of a first config, each named by its field.
const MISTAKEN: [&str; 4] = ["delivery.ack_policy", "delivery.batch_size", "dead_letter.subject", "sink.directory"];

/// The edits of the page's `orders.toml` that make them: a line, and what replaces it.
const EDITS: [(&str, &str); 3] = [
    ("[sink]", "[delivery]\nack_policy = \"after_commit\"\nbatch_size = 0\n\n[sink]"),
    ("subject = \"dlq.orders\"", ""),
    ("directory = \"./out\"", ""),
];

/// The claims check ([`run`]'s module documentation): after the page, in its directory, with
/// its binaries on `path`; `said` is what the page's blocks printed.
fn check_claims(dir: &Path, path: &str, said: &str) -> Result<()> {
    if !said.contains(CONSUMER_NAMED) {
        bail!("{PAGE} says `validate --connect` names the consumer it will create; it printed:\n{said}");
    }
    let mut broken = std::fs::read_to_string(dir.join("orders.toml")).context("the page's orders.toml")?;
    for (line, instead) in EDITS {
        if !broken.contains(line) {
            bail!("{PAGE}'s orders.toml has no line `{line}` to make a mistake of");
        }
        broken = broken.replacen(line, instead, 1);
    }
    std::fs::write(dir.join("broken.toml"), &broken)?;
    let out = Command::new("nats-sink")
        .args(["validate", "broken.toml"])
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .context("running nats-sink validate")?;
    let errors = String::from_utf8_lossy(&out.stderr);
    let named = |field: &str| {
        errors.lines().any(|l| l.starts_with("error: configuration:") && l.contains(&format!("`{field}`")))
    };
    if out.status.code() != Some(2) || !MISTAKEN.iter().all(|field| named(field)) {
        bail!("{PAGE} says validate reports every problem at once; four mistakes in one run gave:\n{errors}");
    }
    let paused = Command::new("bash")
        .args(["-e", "-c", PAUSE])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("NATS_SINKS_NATS_URL")
        .output()
        .context("running bash")?;
    if !paused.status.success() {
        bail!(
            "{PAGE}'s running check (`grep -q 'consuming'`) must fail while the sink is paused:\n{}{}",
            String::from_utf8_lossy(&paused.stdout),
            String::from_utf8_lossy(&paused.stderr)
        );
    }
    Ok(())
}

/// The pause: the page's server again on its data, the stream deleted and created again, a
/// start of the sink that waits for a decision. It logs the change and never "consuming".
const PAUSE: &str = r#"
export NATS_URL=nats://127.0.0.1:14222
.gs-venv/bin/nats-server -js -a 127.0.0.1 -p 14222 -sd ./gs-nats-data > claims-server.log 2>&1 &
echo $! > nats-server.pid
for _ in $(seq 100); do nats account info > /dev/null 2>&1 && break; sleep 0.1; done
nats stream rm -f ORDERS
nats stream add ORDERS --subjects 'orders.>' --defaults > /dev/null
nats-sink run orders.toml > claims-sink.log 2>&1 &
SINK=$!
for _ in $(seq 150); do grep -q 'the stream changed under the consumer' claims-sink.log && break; sleep 0.1; done
sleep 1
kill -TERM $SINK
wait $SINK
cat claims-sink.log
grep -q 'the stream changed under the consumer' claims-sink.log
! grep -q 'consuming' claims-sink.log
"#;

/// Kills every server the page left running (each `*.pid` file it wrote), so that a failing
/// block leaves nothing behind.
fn stop_servers(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for path in entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "pid")) {
        if let Ok(pid) = std::fs::read_to_string(&path) {
            let _ = Command::new("kill").arg(pid.trim()).stderr(std::process::Stdio::null()).status();
        }
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
        let script = session(&[&b[0]]);
        assert!(script.starts_with(&format!("echo '{MARKER}0' >&2\necho a")), "{script}");
        assert_eq!(file_name(&b[1]), Some("a.toml"));
        assert_eq!(file_name(&Block { lang: "toml".into(), text: "[x]\n".into() }), None);
    }

    #[test]
    fn the_page_has_configs_and_commands() {
        let page = std::fs::read_to_string(sinks_testkit::workspace_root().join(PAGE)).unwrap();
        let b = blocks(&page);
        assert!(b.iter().filter(|b| b.lang == "toml").all(|b| file_name(b).is_some()), "every config names its file");
        assert!(b.iter().any(|b| b.lang == "sh" && b.text.contains("nats-sink run")), "the page runs the sink");
        assert!(
            b.iter().filter(|b| b.lang == "sh").all(|b| !b.text.lines().any(|l| l.trim_start().starts_with("cargo "))),
            "no run block needs a Rust toolchain"
        );
        assert!(b.iter().any(|b| b.lang == "sh" && b.text.contains("nats pub")), "events are published with natscli");
    }

    #[test]
    fn the_topology_page_sets_up_with_natscli_and_runs_the_sink() {
        let page = std::fs::read_to_string(sinks_testkit::workspace_root().join(TOPOLOGY)).unwrap();
        let b = blocks(&page);
        let configs: Vec<&Block> = b.iter().filter(|b| b.lang == "toml").collect();
        assert!(configs.len() >= 3 && configs.iter().all(|b| file_name(b).is_some()), "every config names its file");
        assert!(configs.iter().all(|b| b.text.contains("origin_sequence")), "every config keys by the origin");
        let shell: String = b.iter().filter(|b| b.lang == "sh").map(|b| b.text.as_str()).collect();
        for needed in ["nats stream add", "--mirror", "nats-sink run", "\"external\"", "test \""] {
            assert!(shell.contains(needed), "the page runs `{needed}`");
        }
    }
}
