//! `cargo xtask quickstart`: the main job on a machine with nothing running.
//!
//! Installs nats-server if needed (PyPI, pinned), builds `nats-sink`, starts a private
//! JetStream server (data under `.local/quickstart/`, a free port), runs
//! `nats-sink run examples/quickstart.toml` against it (the URL comes from
//! `NATS_SINKS__NATS__URL`, as it would for any other server), publishes demo orders, waits
//! until JetStream shows every one acknowledged, shows the files written under
//! `quickstart-out/`, then stops the sink with SIGTERM (it must exit 0) and the server.
//! Ctrl-C or SIGTERM at any point stops both children the same way; they run in their own
//! process groups, so nothing outlives this command.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use async_nats::HeaderMap;
use tokio::signal::unix::{SignalKind, signal};

use crate::setup::{self, Need};

/// The quick start's config (stream `DEMO`, subject `demo.>`, file sink).
const CONFIG: &str = "examples/quickstart.toml";
/// The stream and durable consumer that config names.
const STREAM: &str = "DEMO";
const CONSUMER: &str = "quickstart-file-sink";
/// The config's output directory, relative to the workspace root.
const OUT: &str = "quickstart-out";

/// Options of `cargo xtask quickstart`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Demo messages to publish.
    #[arg(long, default_value_t = 5)]
    pub(crate) count: usize,
    /// Run the `nats-sink` a build already left in target/debug instead of building it
    /// (`cargo xtask test`: the test build made it, with the default features).
    #[arg(skip)]
    pub(crate) prebuilt: bool,
}

impl Default for Args {
    fn default() -> Self {
        Self { count: 5, prebuilt: false }
    }
}

/// A child process in its own process group, stopped (SIGTERM, then SIGKILL) when dropped.
struct Managed {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Managed {
    fn spawn(name: &'static str, command: &mut Command, log: PathBuf) -> Result<Self> {
        let file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        // Even if this process is killed outright, the child does not outlive it.
        sinks_testkit::watch(&child);
        Ok(Self { name, child, log })
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, then up to `grace` for it to exit (SIGKILL after that); the exit status.
    fn stop(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        if let Some(status) = self.exited() {
            return Some(status);
        }
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        note(&format!("{} did not stop within {} s; killing it", self.name, grace.as_secs()));
        let _ = self.child.kill();
        self.child.wait().ok()
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

pub(crate) fn run(args: Args) -> Result<()> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        // Installed before anything starts: from here on Ctrl-C and SIGTERM stop the
        // children in order instead of killing this process.
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut demo = Demo::default();
        let outcome = tokio::select! {
            r = demo.run(&args) => r,
            _ = int.recv() => Err(anyhow::anyhow!("interrupted")),
            _ = term.recv() => Err(anyhow::anyhow!("terminated")),
        };
        let stopped = demo.stop();
        outcome.and(stopped)
    })
}

/// The two processes of the demo. Fields drop in order: the sink stops before the server.
#[derive(Default)]
struct Demo {
    sink: Option<Managed>,
    server: Option<Managed>,
}

impl Demo {
    async fn run(&mut self, args: &Args) -> Result<()> {
        let root = sinks_testkit::workspace_root();
        let tools = setup::ensure(&[Need::Nats])?;
        let nats_server = tools.nats_server.context("nats-server was not installed")?;
        if !args.prebuilt {
            crate::cargo(&["build", "--quiet", "-p", "sinks-bin"], &[])?;
        }
        let nats_sink = crate::debug_nats_sink();
        let state = root.join(".local/quickstart");
        std::fs::create_dir_all(state.join("nats"))?;

        let port = sinks_testkit::free_port();
        let url = format!("nats://127.0.0.1:{port}");
        note(&format!(
            "quickstart: starting nats-server (JetStream) at {url}, data in {}",
            state.join("nats").display()
        ));
        let mut command = Command::new(&nats_server);
        command.args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"]).arg(state.join("nats"));
        self.server = Some(Managed::spawn("nats-server", &mut command, state.join("nats-server.log"))?);
        let client = connect(&url, self.server.as_mut()).await?;
        let js = async_nats::jetstream::new(client);

        note(&format!("quickstart: NATS_SINKS__NATS__URL={url} nats-sink run {CONFIG}"));
        let mut command = Command::new(&nats_sink);
        command.args(["run", CONFIG]).env("NATS_SINKS__NATS__URL", &url).current_dir(&root);
        let sink = self.sink.insert(Managed::spawn("nats-sink", &mut command, state.join("nats-sink.log"))?);
        wait_for(Duration::from_secs(30), "the sink to bind its consumer", sink, || async {
            match js.get_stream(STREAM).await {
                Ok(s) => s.consumer_info(CONSUMER).await.is_ok(),
                Err(_) => false,
            }
        })
        .await?;

        let run_id = format!("{:08x}", rand::random::<u32>());
        let mut sequences = BTreeSet::new();
        for i in 0..args.count {
            let body = format!(r#"{{"order_id":{i},"item":"widget","quantity":{},"run":"{run_id}"}}"#, i % 5 + 1);
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", format!("quickstart-{run_id}-{i}").as_str());
            let ack = js
                .publish_with_headers("demo.orders.created", headers, body.into())
                .await
                .context("publishing a demo message")?
                .await
                .context("waiting for the stream to store a demo message")?;
            sequences.insert(ack.sequence);
        }
        note(&format!("quickstart: published {} demo messages on demo.orders.created", args.count));
        wait_for(Duration::from_secs(30), "every message to be written and acknowledged", sink, || async {
            sinks_testkit::consumer_settled_on(&js, STREAM, CONSUMER).await
        })
        .await?;
        show(&root.join(OUT), &sequences)?;
        next_steps(&state);

        let status = self.sink.take().and_then(|mut s| s.stop(Duration::from_secs(30)));
        match status.and_then(|s| s.code()) {
            Some(0) => note("quickstart: nats-sink stopped on SIGTERM and exited 0"),
            other => {
                bail!("nats-sink exited with {other:?} after SIGTERM; log {}", state.join("nats-sink.log").display())
            }
        }
        Ok(())
    }

    /// Stops the sink first (it drains and acks), then the server.
    fn stop(&mut self) -> Result<()> {
        let sink = self.sink.take().and_then(|mut s| s.stop(Duration::from_secs(30)));
        let server = self.server.take().and_then(|mut s| s.stop(Duration::from_secs(10)));
        if server.is_some() {
            note("quickstart: nats-server stopped; nothing is left running");
        }
        match sink.map(|s| s.code()) {
            None | Some(Some(0)) => Ok(()),
            Some(code) => bail!("nats-sink exited with {code:?} while stopping"),
        }
    }
}

/// Connects once JetStream answers, failing early if the server exits.
async fn connect(url: &str, server: Option<&mut Managed>) -> Result<async_nats::Client> {
    let server = server.context("no server")?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(client) = async_nats::connect(url).await
            && async_nats::jetstream::new(client.clone()).query_account().await.is_ok()
        {
            return Ok(client);
        }
        if let Some(status) = server.exited() {
            bail!("nats-server exited ({status}): {}", server.log_tail());
        }
        if Instant::now() > deadline {
            bail!("nats-server at {url} was not ready within 20 s; log {}", server.log.display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `check` until it holds, failing if `process` exits or `timeout` passes.
async fn wait_for<F, Fut>(timeout: Duration, what: &str, process: &mut Managed, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await {
            return Ok(());
        }
        if let Some(status) = process.exited() {
            bail!("{} exited ({status}) while waiting for {what}:\n{}", process.name, process.log_tail());
        }
        if Instant::now() > deadline {
            bail!("timed out after {} s waiting for {what}; log {}", timeout.as_secs(), process.log.display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A progress line on stderr; a closed stderr (`| head`) is not an error worth dying for.
fn note(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Prints the files holding `sequences` and the first record.
fn show(out: &Path, sequences: &BTreeSet<u64>) -> Result<()> {
    let mut files = Vec::new();
    let mut stack = vec![out.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
                if record["stream_sequence"].as_u64().is_some_and(|s| sequences.contains(&s)) {
                    files.push((record["stream_sequence"].as_u64().unwrap_or(0), path, record));
                }
            }
        }
    }
    files.sort_by_key(|(seq, _, _)| *seq);
    if files.len() != sequences.len() {
        bail!("expected {} files for this run under {}, found {}", sequences.len(), out.display(), files.len());
    }
    let root = sinks_testkit::workspace_root();
    println!("\n{} files written, one per message:", files.len());
    for (_, path, _) in &files {
        println!("  {}", path.strip_prefix(&root).unwrap_or(path).display());
    }
    if let Some((_, path, record)) = files.first() {
        // The fields that say what arrived; the file holds the whole metadata document.
        let brief: serde_json::Map<String, serde_json::Value> =
            ["subject", "stream", "stream_sequence", "message_id", "payload"]
                .into_iter()
                .filter_map(|k| record.get(k).filter(|v| !v.is_null()).map(|v| (k.to_owned(), v.clone())))
                .collect();
        println!(
            "\nthe first record, in brief (the whole document is in {}):\n  {}\n",
            path.strip_prefix(&root).unwrap_or(path).display(),
            serde_json::Value::Object(brief)
        );
    }
    Ok(())
}

/// Where to look, and what to do next.
fn next_steps(state: &Path) {
    let root = sinks_testkit::workspace_root();
    let log = state.join("nats-sink.log");
    println!("the sink's log: {}", log.strip_prefix(&root).unwrap_or(&log).display());
    println!("its output:     {OUT}/");
    println!("next:");
    println!("  1. edit {CONFIG} (the stream, the subject, the sink) and run `cargo xtask quickstart` again;");
    println!(
        "  2. read docs/getting-started.md: installing nats-sink, a minimal config for every sink, running it for real."
    );
}
