//! `cargo xtask jepsen [--seed N] [--minutes M] [--sinks file,mysql,s3]`: the fault harness of
//! docs/reliability.md.
//!
//! For each sink in turn: a three-node nats-server cluster, each node in a network namespace
//! of its own behind a router namespace (`sinks_testkit::NetCluster`), with an R3 stream;
//! three producers (one through each node) publishing unique events (`Nats-Msg-Id` = the
//! event's id, which its payload carries too) and logging whether JetStream acknowledged each
//! one and under which fault; and the real `nats-sink` binary as two workers on one durable
//! consumer, the first connected to n0, the second to n1 (they run in the test's own
//! namespace, which reaches the nodes' addresses through its link to the router; so do the
//! producers and the destination's servers, on loopback). A plan seeded by `--seed`
//! ([`faults::Plan`]) injects the faults of [`faults::Fault`] one after another, each held,
//! healed, and followed by a wait until the sink has settled everything the stream held at
//! the heal (the time to recover). The first pass covers every kind; more follow at random
//! until `--minutes` are over.
//!
//! Then the producers stop, everything is healed (cuts removed, nodes and workers resumed),
//! and the sink gets a grace period to drain. The history is read back without the sink
//! ([`read`]): each node's copy of the stream through a client connected to that node alone,
//! the dead-letter stream, the ledger's receipts, the consumer's ack floor and the
//! destination. [`check`] sorts every event into NATS's losses and the sink's violations, a
//! row per fault kind; the stream guard's detections (a rewound or re-created stream) are
//! counted from the workers' logs. The table is printed and written to
//! `target/jepsen/report.md`; any sink violation fails the command.
//!
//! `--break-ack-before-write N` runs the workers with the deliberate break of
//! `sinks_runtime::runner::break_ack` (acknowledge before the write, one message in `N` never
//! written): the run then passes only when the checker catches it (acked-unstored above 0).

mod check;
mod faults;
mod read;
mod store;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use async_nats::HeaderMap;
use async_nats::jetstream::{self, Context as Js, stream};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use rustix::process::Signal;
use serde_json::json;
use sinks_testkit::crash::{Launch, Running};
use sinks_testkit::{CLUSTER_NODES, NetCluster};

use check::{FaultStats, Published};
use faults::{ACK_WAIT, Fault, STREAM, Target};

/// Options of `cargo xtask jepsen`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// Minutes of faults per sink (the first pass over every fault kind always completes,
    /// however short this is).
    #[arg(long, default_value_t = 2.0)]
    pub(crate) minutes: f64,
    /// Seed of the fault plan (the same seed gives the same faults in the same order).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Sinks to run, one after another, comma-separated: `file`, `mysql`, `s3`.
    #[arg(long, default_value = "file")]
    pub(crate) sinks: String,
    /// Events published per second (by three producers, one through each node).
    #[arg(long, default_value_t = 150)]
    pub(crate) rate: u64,
    /// The fault kinds to inject, comma-separated (`all`, or any of `partition`,
    /// `leader-isolated`, `sink-server-cut`, `one-way`, `bridge`, `node-pause`, `sink-pause`,
    /// `node-kill`, `all-kill-sync-always`, `all-kill-sync-default`, `step-down`).
    #[arg(long, default_value = "all")]
    pub(crate) faults: String,
    /// Longest wait, after the heal, for the sink to drain, in seconds.
    #[arg(long, default_value_t = 120)]
    pub(crate) grace_seconds: u64,
    /// The `nats-sink` binary to run, already built (the test of `cargo xtask test` passes
    /// the test build's); without it, `cargo build -p sinks-bin -p sinks-bench` makes one
    /// (with the deliberate break built in, see `--break-ack-before-write`).
    #[arg(long, value_name = "PATH")]
    pub(crate) bin: Option<PathBuf>,
    /// Run the workers deliberately broken: acknowledge before writing, and never write one
    /// message in N. The run passes only when the checker catches it (acked-unstored > 0).
    #[arg(long, value_name = "N")]
    pub(crate) break_ack_before_write: Option<u64>,
}

/// The sinks the harness knows.
const SINKS: [&str; 3] = ["file", "mysql", "s3"];
/// The sink's durable consumer.
pub(crate) const CONSUMER: &str = "jepsen";
/// The dead-letter stream and subject.
const DLQ: (&str, &str) = ("JEPSENDLQ", "jepsendlq.records");
/// The ledger stream and subject.
const LEDGER: (&str, &str) = ("JEPSENLEDGER", "jepsenledger.receipts");
/// The row of events published while no fault was in force.
const STEADY: &str = "(no fault)";
/// The log line of the stream guard's detection.
const DETECTED: &str = "the stream changed under the consumer";
/// How long the wait for recovery after a heal may take before the next fault comes anyway.
const RECOVERY_LIMIT: Duration = Duration::from_secs(60);

pub(crate) fn run(args: Args) -> Result<()> {
    let sinks: Vec<String> = args.sinks.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
    for s in &sinks {
        if !SINKS.contains(&s.as_str()) {
            bail!("unknown sink {s:?} for the fault harness; known: {}", SINKS.join(", "));
        }
    }
    if sinks.is_empty() || args.minutes <= 0.0 || args.break_ack_before_write == Some(0) {
        bail!("nothing to run: give --sinks, a positive --minutes (and a --break-ack-before-write above 0)");
    }
    let kinds = Fault::parse_list(&args.faults)?;
    let bin = match &args.bin {
        Some(bin) if bin.is_file() => bin.clone(),
        Some(bin) => bail!("no nats-sink binary at {}", bin.display()),
        None => {
            crate::cargo(&["build", "--quiet", "-p", "sinks-bin", "-p", "sinks-bench"], &[])?;
            sinks_testkit::debug_nats_sink()
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build()?;
    let mut out = format!(
        "# Fault harness\n\nseed {}, {} minutes of faults per sink, {} events/s, AckWait {} s, two workers{}\n",
        args.seed,
        args.minutes,
        args.rate,
        ACK_WAIT.as_secs(),
        args.break_ack_before_write
            .map_or(String::new(), |n| format!(", DELIBERATELY BROKEN: ack before write, one in {n} never written"))
    );
    println!("{out}");
    let mut failures = Vec::new();
    for sink in &sinks {
        eprintln!("jepsen: {sink}: seed {}, {} minutes", args.seed, args.minutes);
        let started = Instant::now();
        let report = rt.block_on(run_sink(&bin, sink, &args, &kinds))?;
        let verdict = &report.verdict;
        let caught = verdict.rows.values().map(|r| r.acked_unstored.len()).sum::<usize>();
        let failed = match args.break_ack_before_write {
            None if verdict.sink_violations() > 0 => {
                Some(format!("{sink}: {} sink violation(s)", verdict.sink_violations()))
            }
            None => None,
            Some(_) if caught == 0 => Some(format!("{sink}: the deliberate break was not caught (acked-unstored 0)")),
            Some(_) => None,
        };
        let section = format!(
            "\n## {sink} ({:.0} s in all)\n\n{}\n{}\nverdict: {}\n",
            started.elapsed().as_secs_f64(),
            verdict.table(&report.stats),
            report.details(),
            match (&failed, args.break_ack_before_write) {
                (Some(f), _) => format!("FAILED: {f}"),
                (None, Some(_)) => format!("the deliberate break was caught: acked-unstored {caught}"),
                (None, None) => format!("no sink violation (NATS lost {})", verdict.nats_lost()),
            }
        );
        // Each sink's section as soon as it is done (a later sink's failure keeps it).
        println!("{section}");
        out.push_str(&section);
        failures.extend(failed);
    }
    let dir = sinks_testkit::workspace_root().join("target/jepsen");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("report.md"), &out)?;
    if !failures.is_empty() {
        bail!("the fault harness failed: {}", failures.join("; "));
    }
    Ok(())
}

/// What one sink's run found.
struct SinkReport {
    verdict: check::Verdict,
    stats: BTreeMap<String, FaultStats>,
    /// Each node's copy's size ([`read::copy_size`]).
    copies: BTreeMap<String, String>,
    /// One line per injected fault.
    log: Vec<String>,
    /// Findings beside the checker's (a worker that exited, a drain that did not finish).
    notes: Vec<String>,
}

impl SinkReport {
    fn details(&self) -> String {
        let copies: Vec<String> = self.copies.iter().map(|(n, c)| format!("{n} {c}")).collect();
        let mut out =
            format!("Each node's copy of the stream after the heal: {}.\n\nFaults in order:\n", copies.join("; "));
        for line in self.log.iter().chain(&self.notes) {
            out.push_str(&format!("- {line}\n"));
        }
        out
    }
}

/// One `nats-sink` worker.
struct Worker {
    config: PathBuf,
    logs: PathBuf,
    starts: usize,
    running: Option<Running>,
}

impl Worker {
    fn start(&mut self, launch: &Launch<'_>) -> Result<()> {
        self.starts += 1;
        let log =
            self.logs.join(format!("{}-{}.log", self.config.file_stem().unwrap_or_default().display(), self.starts));
        let running = Running::start(&Launch { config: self.config.clone(), ..*launch }, log)?;
        // Killed when the harness ends, however it ends (an interrupt included).
        sinks_testkit::watch(&running.child);
        self.running = Some(running);
        Ok(())
    }

    fn pid(&self) -> u32 {
        self.running.as_ref().map_or(0, |r| r.child.id())
    }
}

/// The stream guard's detections in every log under `dir`.
fn detections(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default().matches(DETECTED).count() as u64)
        .sum()
}

/// One sink's run (see the module documentation).
async fn run_sink(bin: &Path, sink: &str, args: &Args, kinds: &[Fault]) -> Result<SinkReport> {
    let mut rng = StdRng::seed_from_u64(args.seed);
    let work = tempfile::tempdir()?;
    let mut nc = NetCluster::start(&[], "").await.map_err(anyhow::Error::msg)?;
    let js = nc.cluster().js().await;
    for (name, subject) in [(STREAM, "jepsen.>"), DLQ, LEDGER] {
        create_stream(&js, name, subject).await?;
    }
    let destination = crate::soak::faults::Destination::start(sink, work.path()).await?;
    let logs = work.path().join("logs");
    std::fs::create_dir_all(&logs)?;
    let mut env = destination.target.env.clone();
    if let Some(n) = args.break_ack_before_write {
        env.push((sinks_runtime::runner::break_ack::ACK_BEFORE_WRITE_ENV.to_owned(), n.to_string()));
    }
    let launch = Launch { bin, config: PathBuf::new(), env: &env };
    let mut workers = Vec::new();
    for w in 0..2 {
        let config = write_config(work.path(), w, &nc.cluster().url(w), &destination.target.sink_section)?;
        let mut worker = Worker { config, logs: logs.clone(), starts: 0, running: None };
        worker.start(&launch)?;
        workers.push(worker);
    }
    let label = Arc::new(Mutex::new(STEADY.to_owned()));
    let log = Arc::new(Mutex::new(Vec::<Published>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut producers = Vec::new();
    for i in 0..CLUSTER_NODES {
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            .max_reconnects(None)
            .connect(nc.cluster().url(i))
            .await?;
        let js = jetstream::ContextBuilder::new().timeout(Duration::from_secs(5)).build(client);
        let every = Duration::from_secs_f64(CLUSTER_NODES as f64 / args.rate.max(1) as f64);
        let prefix = format!("e{}-{sink}-p{i}", args.seed);
        producers.push(tokio::spawn(producer(
            js,
            prefix,
            every,
            Arc::clone(&stop),
            Arc::clone(&label),
            Arc::clone(&log),
        )));
    }
    let mut report = SinkReport {
        verdict: check::Verdict::default(),
        stats: BTreeMap::new(),
        copies: BTreeMap::new(),
        log: Vec::new(),
        notes: Vec::new(),
    };
    let natscli = sinks_testkit::find_natscli();
    let mut plan = faults::Plan::new(&mut rng, kinds);
    let time = Duration::from_secs_f64(args.minutes * 60.0);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    while let Some(fault) = plan.next(&mut rng, started.elapsed() < time) {
        let at = started.elapsed();
        *label.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = fault.name().to_owned();
        let before = detections(&logs);
        let mut target = Target {
            nc: &mut nc,
            js: &js,
            workers: workers.iter().enumerate().map(|(w, worker)| (worker.pid(), w)).collect(),
            natscli: &natscli,
        };
        let injected = target.inject(fault, &mut rng).await.with_context(|| format!("injecting {}", fault.name()))?;
        if matches!(fault, Fault::LeaderIsolated | Fault::StepDown) && injected.moved_to.is_none() {
            report.notes.push(format!("{}: the cluster named no other leader while it held", fault.name()));
        }
        if matches!(fault, Fault::StoreTruncated | Fault::StoreBitFlip) && injected.damaged.is_empty() {
            report.notes.push(format!("{}: no block of the stream was found to damage", fault.name()));
        }
        let recovered = recover(&js, RECOVERY_LIMIT).await;
        let detected = detections(&logs) - before;
        if detected > 0 {
            decide_new_epoch(bin, &workers[0].config, &env, &mut report.notes).await;
        }
        *label.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = STEADY.to_owned();
        let stats = report.stats.entry(fault.name().to_owned()).or_default();
        stats.injected += 1;
        stats.detections += detected;
        match recovered {
            Some(d) => stats.recovery = Some(stats.recovery.map_or(d.as_secs_f64(), |r| r.max(d.as_secs_f64()))),
            None => stats.unrecovered += 1,
        }
        let line = format!(
            "{:>5.1} s {}: {}; recovered {}",
            at.as_secs_f64(),
            fault.name(),
            injected.note,
            recovered.map_or_else(
                || format!("not within {} s", RECOVERY_LIMIT.as_secs()),
                |d| format!("in {:.1} s", d.as_secs_f64())
            )
        );
        eprintln!("jepsen: {line}");
        report.log.push(line);
        for (w, worker) in workers.iter_mut().enumerate() {
            if let Some(r) = worker.running.as_mut()
                && let Some(status) = r.child.try_wait()?
            {
                report.notes.push(format!("worker {w} exited by itself ({status}): {}", r.tail()));
                worker.start(&launch)?;
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(500..2000))).await;
    }
    stop.store(true, Ordering::SeqCst);
    for p in producers {
        let _ = p.await;
    }
    // Everything heals; the sink gets its grace period.
    nc.net().heal().map_err(anyhow::Error::msg)?;
    for i in 0..CLUSTER_NODES {
        nc.cluster().resume(i);
    }
    for worker in &workers {
        faults::signal(worker.pid(), Signal::CONT);
    }
    let grace = Instant::now();
    if !drained(&js, Duration::from_secs(args.grace_seconds)).await {
        report.notes.push(format!(
            "not drained within {} s of the heal (consumer {:?})",
            args.grace_seconds,
            faults::consumer_info(&js).await.map(|i| (i.num_pending, i.num_ack_pending, i.ack_floor.stream_sequence))
        ));
    }
    eprintln!("jepsen: {sink}: drained {:.1} s after the heal; reading back", grace.elapsed().as_secs_f64());
    let stored = destination.target.records.read_all().await.map_err(anyhow::Error::msg)?;
    let urls: Vec<String> = (0..CLUSTER_NODES).map(|i| nc.cluster().url(i)).collect();
    let (mut history, copies) = read::history(&js, &urls, DLQ.0, LEDGER.0, stored).await?;
    history.published = std::mem::take(&mut *log.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    for (w, worker) in workers.iter_mut().enumerate() {
        if let Some(r) = worker.running.take() {
            let code = r.terminate()?;
            if code != Some(0) {
                report.notes.push(format!("worker {w}: the final SIGTERM ended it with {code:?}"));
            }
        }
    }
    report.copies = copies;
    report.verdict = check::check(&history);
    if report.verdict.sink_violations() > 0 || !report.notes.is_empty() {
        keep_logs(&logs, sink);
    }
    Ok(report)
}

/// An R3 file stream with direct gets allowed (each node's copy is read through them),
/// retried while the cluster forms.
async fn create_stream(js: &Js, name: &str, subject: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let created = js
            .get_or_create_stream(stream::Config {
                name: name.to_owned(),
                subjects: vec![subject.to_owned()],
                num_replicas: CLUSTER_NODES,
                allow_direct: true,
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            })
            .await;
        match created {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => bail!("creating stream {name}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Worker `w`'s config: connected to node `w`'s URL, the DLQ and the ledger on.
fn write_config(dir: &Path, w: usize, url: &str, sink: &serde_json::Value) -> Result<PathBuf> {
    let config = json!({
        "nats": {"urls": [url], "stream": STREAM, "consumer": CONSUMER, "subject": "jepsen.>"},
        "consumer_management": {"ack_wait_seconds": ACK_WAIT.as_secs()},
        "delivery": {"batch_size": 100, "batch_timeout_ms": 200, "max_in_flight_batches": 2,
                     "retry_backoff_ms": 100, "retry_backoff_max_ms": 1000},
        "dead_letter": {"enabled": true, "subject": DLQ.1},
        "ledger": {"enabled": true, "subject": LEDGER.1},
        "logging": {"level": "INFO", "format": "json"},
        "sink": sink,
    });
    let path = dir.join(format!("worker{w}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
    Ok(path)
}

/// Publishes an event every `every` until `stop` (up to 64 unanswered at once), each logged
/// with whether JetStream acknowledged it and the fault in force when it was sent.
async fn producer(
    js: Js,
    prefix: String,
    every: Duration,
    stop: Arc<AtomicBool>,
    label: Arc<Mutex<String>>,
    log: Arc<Mutex<Vec<Published>>>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(64));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sent = tokio::task::JoinSet::new();
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        tick.tick().await;
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else { break };
        let id = format!("{prefix}-{n}");
        let fault = label.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let (js, log) = (js.clone(), Arc::clone(&log));
        sent.spawn(async move {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", id.as_str());
            let payload = json!({"id": id, "fault": fault, "n": n}).to_string();
            let publish = async {
                js.publish_with_headers(format!("jepsen.k{}", n % 8), headers, payload.into()).await?.await?;
                Ok::<(), async_nats::Error>(())
            };
            let acked = matches!(tokio::time::timeout(Duration::from_secs(6), publish).await, Ok(Ok(())));
            log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(Published { id, acked, fault });
            drop(slot);
        });
        n += 1;
    }
    while sent.join_next().await.is_some() {}
}

/// Waits until the sink has settled everything the stream held when it was called (the
/// consumer's ack floor reaches the stream's last sequence then); `None` after `limit`.
async fn recover(js: &Js, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < limit {
        if last.is_none() {
            last = match tokio::time::timeout(Duration::from_secs(2), js.get_stream(STREAM)).await {
                Ok(Ok(mut s)) => s.info().await.ok().map(|i| i.state.last_sequence),
                _ => None,
            };
        }
        if let Some(last) = last
            && faults::consumer_info(js).await.is_some_and(|i| i.ack_floor.stream_sequence >= last)
        {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// True once the consumer has nothing pending or unacknowledged, three times a second apart,
/// within `timeout`.
async fn drained(js: &Js, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut quiet = 0;
    while Instant::now() < deadline {
        let idle = faults::consumer_info(js).await.is_some_and(|i| i.num_pending == 0 && i.num_ack_pending == 0);
        quiet = if idle { quiet + 1 } else { 0 };
        if quiet >= 3 {
            return true;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    false
}

/// The operator's decision after the stream guard paused the sink: `nats-sink
/// stream-identity CONFIG --accept new-epoch` (new events get keys of their own), tried for
/// 60 s.
async fn decide_new_epoch(bin: &Path, config: &Path, env: &[(String, String)], notes: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < deadline {
        let out = tokio::process::Command::new(bin)
            .args(["stream-identity", config.to_str().unwrap_or_default(), "--accept", "new-epoch"])
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .await;
        if let Ok(out) = out {
            last = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            if out.status.success() {
                notes.push(format!("the stream guard paused the sink; decided a new epoch: {}", last.trim()));
                return;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    notes.push(format!("the stream guard paused the sink; no new epoch could be decided: {}", last.trim()));
}

/// Copies a failed run's worker logs to `target/jepsen/logs/<sink>/`.
fn keep_logs(logs: &Path, sink: &str) {
    let dir = sinks_testkit::workspace_root().join(format!("target/jepsen/logs/{sink}"));
    let _ = std::fs::remove_dir_all(&dir);
    let copied = std::fs::create_dir_all(&dir).is_ok()
        && std::fs::read_dir(logs)
            .into_iter()
            .flatten()
            .flatten()
            .all(|e| std::fs::copy(e.path(), dir.join(e.file_name())).is_ok());
    if copied {
        eprintln!("jepsen: the workers' logs are in {}", dir.display());
    }
}
