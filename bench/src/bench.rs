//! `cargo xtask bench`: throughput of the delivery core and the sinks, as ratios measured in
//! one run on one machine.
//!
//! A private nats-server gets a fresh stream with N messages (256-byte JSON, `Nats-Msg-Id`).
//! Each contender then consumes all N through its own durable consumer (deleted between runs,
//! so every run starts from the first message): the raw async-nats pull + ack loop (the
//! ceiling), `nats-sink` with the blackhole sink (five runs, the median counts; then metrics off and
//! on side by side: both processes started together on two durable consumers of the same
//! stream, sharing the machine at every moment, ten times; the medians of the ten rate ratios
//! and of the ten ratios of the sink's CPU per message count), with the file sink (fsync off and on), the
//! review package sink (fsync off and on), and,
//! with `--reference`, the Python reference (`nats-sinks==0.4.3` in a venv under
//! `target/bench/`) on the identical JSON config file. For each: wall time from spawn until
//! JetStream shows every message acknowledged, msgs/s, peak RSS (VmHWM), CPU time per message,
//! and the time from spawn to the first ack (seen on the ack subject). Writes
//! `target/bench/report.md`. The `oracle` suite has no database to measure (none can be run
//! here): `oracle_scripted` measures, in one process, the CPU per row of the Oracle sink over
//! the scripted driver seam above the backend's own time. The `scale` suite (not run by default) measures 1, 2 and 4
//! workers on one consumer and a single node against a three-node R3 cluster (`bench/scale.rs`, docs/scaling.md); what
//! each optional feature costs off and on (policies, ledger, encryption, OpenTelemetry) is in `bench/features.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use async_nats::HeaderMap;
use async_nats::jetstream::Context as Js;
use bytes::Bytes;
use futures::StreamExt;
use oracle::{OraclePhase, render_oracle};
pub(crate) use proc::proc_stats;
use proc::{on_cpu, render_member_load};
use serde_json::json;
use sink_mysql::certify::TestServer;
use sinks_testkit::{NatsServer, js_publish_all, stream_with_subjects};

mod ceiling;
mod coherence;
pub(crate) mod compare;
mod core_suite;
mod features;
mod grid;
mod http;
mod lake;
mod nosql;
mod oracle;
mod otel;
mod proc;
mod profile;
mod scale;
mod table;

/// Options of `cargo xtask bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Messages in the stream of the core and MySQL suites.
    #[arg(long, default_value_t = 100_000)]
    messages: usize,
    /// Messages in the stream of the raw consume + ack ceiling and the blackhole sink (core suite).
    #[arg(long, default_value_t = 500_000)]
    blackhole_messages: usize,
    /// Messages in the stream of the scale suite (each worker count consumes all of them).
    #[arg(long, default_value_t = 20_000)]
    scale_messages: usize,
    /// Messages in the stream of the HTTP suite.
    #[arg(long, default_value_t = 20_000)]
    http_messages: usize,
    /// Messages in the stream of the S3 suite (and of its batch-mode contenders).
    #[arg(long, default_value_t = 20_000)]
    s3_messages: usize,
    /// Messages of 1 KB of the `lake-memory` suite.
    #[arg(long, default_value_t = 1_000_000)]
    lake_memory_messages: usize,
    /// Messages in the stream of the `table` suite (each plain and table run consumes all).
    #[arg(long, default_value_t = 200_000)]
    table_messages: usize,
    /// Alternating rounds of plain and table runs per destination in the `table` suite.
    #[arg(long, default_value_t = 3)]
    table_rounds: usize,
    /// Messages of the `table` suite's long run, whose files are counted (0: none).
    #[arg(long, default_value_t = 1_000_000)]
    table_long_messages: usize,
    /// Messages in the stream of the Coherence suite.
    #[arg(long, default_value_t = 20_000)]
    coherence_messages: usize,
    /// Messages in the stream of the NoSQL suite.
    #[arg(long, default_value_t = 20_000)]
    nosql_messages: usize,
    /// Messages of the Oracle suite (kept in memory by the scripted database).
    #[arg(long, default_value_t = 50_000)]
    oracle_messages: usize,
    /// Messages of the policies suite (each step alone, in one process).
    #[arg(long, default_value_t = 100_000)]
    policy_messages: usize,
    /// `delivery.batch_size`.
    #[arg(long, default_value_t = 500)]
    batch: usize,
    /// `delivery.max_in_flight_batches` (the reference validates and ignores it).
    #[arg(long, default_value_t = 4)]
    in_flight: usize,
    /// Suites to run, comma-separated: `core` (raw ceiling, blackhole, file), `mysql`, `http`,
    /// `s3`, `coherence`, `nosql`, `oracle` (the Oracle sink's CPU per row over the scripted
    /// driver seam), `policies` (each message policy step alone, in one process); and, only when named, `scale` (1, 2, 4 workers; single node
    /// against a three-node R3 cluster), `lake-memory` (peak RSS of batch mode, 1,000,000
    /// messages of 1 KB into one partition) `grid` (blackhole and file sink by batch size
    /// and batches in flight, and on a four times longer backlog) and `table` (batch mode's
    /// Delta table commits against plain Parquet objects, file and S3, and a long run's files).
    #[arg(long, default_value = "core,mysql,http,s3,coherence,nosql,oracle,policies")]
    suite: String,
    /// Also measure the Python reference (pip-installs nats-sinks[mysql,s3,coherence,oracle-nosql]==0.4.3);
    /// in the `policies` suite, its own pipeline functions per step
    /// (`crates/sinks-policy/tests/reference/time_policy_steps.py`).
    #[arg(long)]
    reference: bool,
    /// Measure only the nats-sink variants whose id contains this (`blackhole`, `features`
    /// (the blackhole's feature costs off and on; `features-policies` only the policy rows), `file-nofsync`, `file-fsync`, `file-encrypted`, `file-fanout`, `review-package-nofsync`,
    /// `review-package-fsync`, `mysql`, `http`, `s3`,
    /// `coherence`, `nosql`, `oracle`); the ceilings always run.
    #[arg(long)]
    only: Option<String>,
    /// Record every measured process with `perf` and put its top frames in the report
    /// (`target/bench/<contender>.profile.txt` holds the whole listing).
    #[arg(long)]
    profile: bool,
    /// Only the contenders that have a raw ceiling, and their ceilings: no side-by-side pairs
    /// (metrics, feature costs), fan-out, encryption or batch-mode rows.
    #[arg(long)]
    ceilings: bool,
}

const CONSUMER: &str = "bench";
/// The Python reference, with the extras of every suite.
const REFERENCE_PACKAGE: &str = "nats-sinks[mysql,s3,coherence,oracle-nosql]==0.4.3";
/// Variables holding the S3 suite's credentials (the config names them).
const S3_KEY_ENV: &str = "BENCH_S3_ACCESS_KEY_ID";
const S3_SECRET_ENV: &str = "BENCH_S3_SECRET_ACCESS_KEY";
/// Variable holding the payload encryption key of the encryption benchmark, and the key
/// (a fixed, non-secret benchmark key: base64 of 32 bytes of 0x42).
const BENCH_KEY_ENV: &str = "BENCH_PAYLOAD_KEY_B64";
const BENCH_KEY_B64: &str = "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI=";

/// A stream of benchmark messages.
#[derive(Debug, Clone, Copy)]
struct Stream {
    name: &'static str,
    subject_root: &'static str,
    total: usize,
    /// Distinct subjects the messages are spread over (`<root>.orders.k<i % subjects>`).
    subjects: usize,
}

/// What one contender achieved.
#[derive(Debug, Clone)]
struct Measurement {
    name: String,
    wall: Duration,
    first_ack: Duration,
    peak_rss_kib: u64,
    cpu: Duration,
    messages: usize,
    /// Its top frames by self time (`--profile`).
    profile: Option<String>,
}

impl Measurement {
    /// A measurement of 1,000 messages named `name` that took `wall_ms` and `cpu_ms` (the
    /// reports' tests).
    #[cfg(test)]
    fn of_1000(name: impl Into<String>, wall_ms: u64, cpu_ms: u64) -> Self {
        Self {
            name: name.into(),
            wall: Duration::from_millis(wall_ms),
            first_ack: Duration::ZERO,
            peak_rss_kib: 0,
            cpu: Duration::from_millis(cpu_ms),
            messages: 1000,
            profile: None,
        }
    }

    fn rate(&self) -> f64 {
        self.messages as f64 / self.wall.as_secs_f64()
    }

    fn peak_rss_mib(&self) -> f64 {
        self.peak_rss_kib as f64 / 1024.0
    }

    fn cpu_us_per_msg(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.messages as f64
    }
}

/// The benchmark's 256-byte JSON order `i` (`bin/support/order.rs`, through the policy
/// messages that include it).
pub(crate) fn payload(i: usize) -> Bytes {
    Bytes::from(features::policed::payload(i))
}

/// How a destination is emptied between contenders.
enum Reset<'a> {
    /// Nothing to empty.
    None,
    /// Move the output directory aside (deleting 100,000 files makes this machine's disk busy
    /// with discards while the next contender runs).
    Dir(&'a Path),
    /// Drop the table.
    Table(&'a TestServer, &'a str),
}

async fn reset(js: &Js, stream: Stream, destination: &Reset<'_>) -> Result<()> {
    let s = js.get_stream(stream.name).await?;
    let _ = s.delete_consumer(CONSUMER).await;
    match destination {
        Reset::None => {}
        Reset::Dir(out) if out.exists() => {
            static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let aside = out.with_file_name(format!("done-{}", RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
            std::fs::rename(out, aside)?;
        }
        Reset::Dir(_) => {}
        Reset::Table(server, table) => {
            let mut c = server.admin().await.map_err(anyhow::Error::msg)?;
            mysql_async::prelude::Queryable::query_drop(&mut c, format!("DROP TABLE IF EXISTS `{table}`")).await?;
            c.disconnect().await?;
        }
    }
    // Start every contender with no dirty pages left over from the previous one.
    Command::new("sync").status()?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(())
}

async fn settled(js: &Js, stream: Stream) -> bool {
    settled_on(js, stream, CONSUMER).await
}

/// True once `consumer` has every message of `stream` acknowledged.
async fn settled_on(js: &Js, stream: Stream, consumer: &str) -> bool {
    let Ok(s) = js.get_stream(stream.name).await else { return false };
    match s.consumer_info(consumer).await {
        Ok(i) => i.ack_floor.stream_sequence >= stream.total as u64 && i.num_pending == 0 && i.num_ack_pending == 0,
        Err(_) => false,
    }
}

fn report_line(m: &Measurement) {
    eprintln!(
        "{}: {:.0} msgs/s, wall {:.2} s, first ack {} ms, peak RSS {:.1} MiB, CPU {:.1} µs/msg",
        m.name,
        m.rate(),
        m.wall.as_secs_f64(),
        m.first_ack.as_millis(),
        m.peak_rss_mib(),
        m.cpu_us_per_msg()
    );
}

/// Spawns `command`, measures until every message of `stream` is acked, then stops it.
async fn measure(
    name: &str,
    mut command: Command,
    js: &Js,
    stream: Stream,
    destination: &Reset<'_>,
    log: &Path,
) -> Result<Measurement> {
    reset(js, stream, destination).await?;
    let mut acks = js.client().subscribe(format!("$JS.ACK.{}.{CONSUMER}.>", stream.name)).await?;
    js.client().flush().await?;
    let start = Instant::now();
    let mut child = command
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let pid = child.id();
    let recording = profile::attach(pid, log)?;
    let first = tokio::time::timeout(Duration::from_secs(120), acks.next()).await;
    let first_ack = start.elapsed();
    drop(acks);
    if first.is_err() {
        let _ = child.kill();
        bail!("{name}: no ack within 120 s; log {}", log.display());
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    while !settled(js, stream).await {
        if let Some(status) = child.try_wait()? {
            if !settled(js, stream).await {
                bail!("{name} exited early ({status}); log {}", log.display());
            }
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("{name}: not done within 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let wall = start.elapsed();
    let (peak_rss_kib, cpu) = proc_stats(pid);
    let profile = recording.map(profile::Recording::finish).transpose()?;
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let _ = child.wait();
    let m = Measurement { name: name.to_owned(), wall, first_ack, peak_rss_kib, cpu, messages: stream.total, profile };
    report_line(&m);
    Ok(m)
}

/// Runs of the blackhole sink alone (the median counts).
const BLACKHOLE_ROUNDS: usize = 5;
/// Rounds of the file sink with fsync on against its ceiling (each row the median round).
/// Five, not three: the virtual disk's fsync latency can halve or double between rounds a
/// minute apart (run 9's ceiling: 5,133 and 13,828 msgs/s), and with three rounds one such
/// round moved the median.
const FSYNC_ROUNDS: usize = 5;
/// Side-by-side runs of the blackhole sink with metrics off and on.
const METRICS_PAIRS: usize = 10;
/// Side-by-side runs of the blackhole sink plain and with payload encryption (the control).
const CONTROL_PAIRS: usize = 2;

/// Durable consumers of the side-by-side runs (the baseline and the variant).
const SIDE_BASE: &str = "bench_side_base";
const SIDE_VARIANT: &str = "bench_side_variant";

/// The name of a side-by-side measurement: `label`'s process in round `round` (from 0).
/// Readers of the results (`features::render`) find a pair's two sides by it.
fn side_name(label: &str, round: usize) -> String {
    format!("nats-sink, blackhole sink, side by side, {label} (round {})", round + 1)
}

/// Runs `nats-sink` on a baseline and a variant config (`sides`: label and path; their
/// consumers are [`SIDE_BASE`] and [`SIDE_VARIANT`]) at the same time, each until its own
/// consumer has every message acknowledged; odd rounds start the variant first.
async fn side_by_side(
    program: &Path,
    sides: [(&str, &Path); 2],
    js: &Js,
    stream: Stream,
    round: usize,
    work: &Path,
) -> Result<(Measurement, Measurement)> {
    let s = js.get_stream(stream.name).await?;
    for consumer in [SIDE_BASE, SIDE_VARIANT] {
        let _ = s.delete_consumer(consumer).await;
    }
    Command::new("sync").status()?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sides = [(SIDE_BASE, sides[0].0, sides[0].1), (SIDE_VARIANT, sides[1].0, sides[1].1)];
    let order: [usize; 2] = if round.is_multiple_of(2) { [0, 1] } else { [1, 0] };
    let mut running = Vec::new();
    for i in order {
        let (consumer, label, path) = sides[i];
        let log = work.join(format!("blackhole-side-{consumer}.log"));
        let child = Command::new(program)
            .arg("run")
            .arg(path)
            .env(BENCH_KEY_ENV, BENCH_KEY_B64)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting nats-sink ({label})"))?;
        running.push((i, consumer, label, child, Instant::now(), None::<Measurement>));
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    while running.iter().any(|r| r.5.is_none()) {
        for (_, consumer, label, child, start, done) in running.iter_mut().filter(|r| r.5.is_none()) {
            if settled_on(js, stream, consumer).await {
                let wall = start.elapsed();
                let (peak_rss_kib, ticks) = proc_stats(child.id());
                let cpu = on_cpu(child.id()).unwrap_or(ticks);
                let m = Measurement {
                    name: side_name(label, round),
                    wall,
                    first_ack: Duration::ZERO,
                    peak_rss_kib,
                    cpu,
                    messages: stream.total,
                    profile: None,
                };
                report_line(&m);
                *done = Some(m);
            } else if let Some(status) = child.try_wait()? {
                bail!("nats-sink ({label}) exited early ({status})");
            }
        }
        if Instant::now() > deadline {
            bail!("side-by-side run not done within 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut measured = [None, None];
    for (i, _, _, mut child, _, done) in running {
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let _ = child.wait();
        measured[i] = done;
    }
    match measured {
        [Some(off), Some(on)] => Ok((off, on)),
        _ => bail!("side-by-side run incomplete"),
    }
}

/// Ratios of the metrics on / off pairs run side by side.
#[derive(Debug, Default)]
struct Pairs {
    /// Rate with metrics on over rate with metrics off, per pair.
    rate: Vec<f64>,
    /// The sink's CPU per message with metrics off over with metrics on, per pair: the
    /// throughput ratio that the extra CPU alone would cause if the sink's CPU were the
    /// whole of each message's cost (nats-server's share only makes the true ratio closer to 1).
    cpu: Vec<f64>,
}

/// The `q` quantile (0–1, nearest rank) of `values`; `None` when there are none.
fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let last = sorted.len().checked_sub(1)?;
    sorted.get(((last as f64) * q).round() as usize).copied()
}

/// Runs `nats-sink` on the config at `path` [`BLACKHOLE_ROUNDS`] times (with the benchmark's
/// encryption key in its environment) and returns the median run, named `name`.
async fn median_run(
    name: &str,
    program: &Path,
    path: &Path,
    js: &Js,
    stream: Stream,
    log: &Path,
) -> Result<Measurement> {
    let mut runs = Vec::new();
    for round in 0..BLACKHOLE_ROUNDS {
        let mut cmd = Command::new(program);
        cmd.arg("run").arg(path).env(BENCH_KEY_ENV, BENCH_KEY_B64);
        runs.push(measure(&format!("{name} (run {})", round + 1), cmd, js, stream, &Reset::None, log).await?);
    }
    Ok(median(runs, name))
}

/// The run with the median rate, renamed `name`.
fn median(mut runs: Vec<Measurement>, name: &str) -> Measurement {
    let count = runs.len();
    runs.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    let mut m = runs.swap_remove(count / 2);
    m.name = format!("{name} (median of {count})");
    m
}

fn config(url: &str, stream: Stream, args: &Args, sink: serde_json::Value) -> serde_json::Value {
    // Only fields the Python reference also accepts: the same file runs under both.
    json!({
        "nats": {"url": url, "stream": stream.name, "consumer": CONSUMER, "subject": format!("{}.>", stream.subject_root)},
        "delivery": {"batch_size": args.batch, "batch_timeout_ms": 100, "max_in_flight_batches": args.in_flight},
        "logging": {"level": "WARNING"},
        "sink": sink,
    })
}

fn write(path: &Path, value: &serde_json::Value) -> Result<PathBuf> {
    std::fs::write(path, serde_json::to_vec_pretty(value)?)?;
    Ok(path.to_path_buf())
}

pub(crate) fn reference_venv(root: &Path) -> Result<PathBuf> {
    let venv = root.join("target/bench/venv");
    let bin = venv.join("bin/nats-sink");
    let stamp = venv.join(".installed-mysql-s3-coherence-nosql");
    if !bin.exists() || !stamp.exists() {
        eprintln!("installing the Python reference ({REFERENCE_PACKAGE}) into {}", venv.display());
        let ok = (venv.join("bin/python").exists()
            || Command::new("python3").args(["-m", "venv"]).arg(&venv).status()?.success())
            && Command::new(venv.join("bin/python"))
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", REFERENCE_PACKAGE])
                .status()?
                .success();
        if !ok {
            bail!("installing {REFERENCE_PACKAGE} failed");
        }
        std::fs::write(stamp, "")?;
    }
    Ok(bin)
}

pub(crate) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned()))
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().map(|l| l.split_whitespace().nth(1).unwrap_or("0").parse::<u64>().unwrap_or(0)))
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cores} cores ({cpu}), {:.0} GiB RAM, Linux {}", mem as f64 / 1024.0 / 1024.0, kernel.trim())
}

async fn publish_stream(js: &Js, stream: Stream) {
    stream_with_subjects(js, stream.name, &[&format!("{}.>", stream.subject_root)]).await;
    let msgs = (0..stream.total)
        .map(|i| {
            let mut h = HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("bench-{i}").as_str());
            (format!("{}.orders.k{}", stream.subject_root, i % stream.subjects), h, payload(i))
        })
        .collect();
    js_publish_all(js, msgs).await;
}

/// Paths of the programs a run needs.
struct Programs {
    nats_sink: PathBuf,
    /// The file-only build (`--no-default-features --features file`).
    nats_sink_file: PathBuf,
    /// The MySQL-only build.
    nats_sink_mysql: PathBuf,
    /// The S3-only build with Parquet (`--no-default-features --features s3,parquet`).
    nats_sink_s3: PathBuf,
    raw_consume: PathBuf,
    raw_mysql: PathBuf,
    raw_lake: PathBuf,
    oracle_scripted: PathBuf,
    policy_steps: PathBuf,
    raw_ceiling: PathBuf,
    raw_nosql: PathBuf,
    reference: Option<PathBuf>,
}

pub(crate) const MYSQL_BENCH_USER: &str = "nats_sinks_bench";
pub(crate) const MYSQL_PASSWORD_ENV: &str = "NATS_SINKS_BENCH_MYSQL_PASSWORD";
const MYSQL_TABLE: &str = "NATS_SINKS_BENCH";

pub(crate) async fn mysql_bench_user(server: &TestServer, password: &str) -> Result<()> {
    let mut c = server.admin().await.map_err(anyhow::Error::msg)?;
    for sql in [
        format!("CREATE USER IF NOT EXISTS '{MYSQL_BENCH_USER}'@'%' IDENTIFIED BY '{password}'"),
        format!("ALTER USER '{MYSQL_BENCH_USER}'@'%' IDENTIFIED BY '{password}'"),
        format!("GRANT ALL ON `test`.* TO '{MYSQL_BENCH_USER}'@'%'"),
    ] {
        mysql_async::prelude::Queryable::query_drop(&mut c, sql).await?;
    }
    c.disconnect().await?;
    Ok(())
}

pub(crate) fn run(args: Args) -> Result<()> {
    let root = sinks_testkit::workspace_root();
    let suites: Vec<&str> = args.suite.split(',').map(str::trim).collect();
    if args.profile {
        profile::enable()?;
    }
    let programs = build(&args, &suites, &root)?;
    let work = root.join("target/bench");
    std::fs::create_dir_all(&work)?;
    let rt = tokio::runtime::Runtime::new()?;
    let collected = rt.block_on(measure_suites(&args, &suites, &programs, &root, &work))?;
    let report = report(&args, &collected);
    std::fs::write(work.join("report.md"), &report)?;
    println!("{report}");
    println!("report: {}", work.join("report.md").display());
    Ok(())
}

/// Builds what the chosen suites run (release builds of the binary, its slim builds and the
/// raw loops; the reference's venv with `--reference`) and names each program.
fn build(args: &Args, suites: &[&str], root: &Path) -> Result<Programs> {
    if suites.iter().all(|s| *s == "scale") {
        // The scale suite runs only nats-sink with the file, MySQL and blackhole sinks.
        crate::cargo(
            &["build", "--release", "--quiet", "-p", "sinks-bin", "--no-default-features", "--features", "file,mysql"],
            &[],
        )?;
    }
    // The release build goes where cargo puts it (CARGO_TARGET_DIR, else target/).
    let release = sinks_testkit::target_dir().join("release");
    if suites.iter().any(|s| *s != "scale") {
        // The file rows also run the slim file-only binary an operator deploys for a file
        // sink, built as it is shipped (the `dist` profile: fat LTO, stripped): its peak RSS
        // is the one that deployment sees (the full binary maps the code of every sink, and
        // the `release` profile's code is half again as large).
        let dist = sinks_testkit::target_dir().join("dist");
        for (suite, feature, name) in
            [("core", "file", "file"), ("mysql", "mysql", "mysql"), ("lake-memory", "s3,parquet", "s3")]
        {
            if suites.contains(&suite) {
                let slim = [
                    "build",
                    "--profile",
                    "dist",
                    "--quiet",
                    "-p",
                    "sinks-bin",
                    "--no-default-features",
                    "--features",
                    feature,
                ];
                crate::cargo(&slim, &[])?;
                // On a fresh clone the release directory does not exist yet.
                std::fs::create_dir_all(&release)?;
                let copied = release.join(format!("nats-sink-{name}"));
                std::fs::copy(dist.join("nats-sink"), &copied)
                    .with_context(|| format!("copy the slim {name} build to {}", copied.display()))?;
            }
        }
        crate::cargo(&["build", "--release", "--quiet", "-p", "sinks-bin"], &[])?;
        crate::cargo(&["build", "--release", "--quiet", "-p", "sinks-bench", "--bins"], &[])?;
    }
    let programs = Programs {
        nats_sink: release.join("nats-sink"),
        nats_sink_file: release.join("nats-sink-file"),
        nats_sink_mysql: release.join("nats-sink-mysql"),
        nats_sink_s3: release.join("nats-sink-s3"),
        raw_consume: release.join("raw_consume"),
        raw_mysql: release.join("raw_mysql"),
        raw_lake: release.join("raw_lake"),
        oracle_scripted: release.join("oracle_scripted"),
        policy_steps: release.join("policy_steps"),
        raw_ceiling: release.join("raw_ceiling"),
        raw_nosql: release.join("raw_nosql"),
        reference: if args.reference { Some(reference_venv(root)?) } else { None },
    };
    Ok(programs)
}

/// What one run's suites share: the options, the programs, the private nats-server and the
/// work directory (configs and logs).
struct Bench<'a> {
    args: &'a Args,
    programs: &'a Programs,
    js: &'a Js,
    url: &'a str,
    work: &'a Path,
}

impl Bench<'_> {
    /// Whether `--only` leaves the contender or suite `id` in.
    fn wanted(&self, id: &str) -> bool {
        self.args.only.as_deref().is_none_or(|o| id.contains(o))
    }

    /// The log file of the run `name`.
    fn log(&self, name: &str) -> PathBuf {
        self.work.join(format!("{name}.log"))
    }

    /// Runs nats-sink, then (with `--reference`) the Python reference, on one config file
    /// `{id}.json` with `sink`, under the environment `envs`; the measurements go to
    /// `results`.
    async fn pair(
        &self,
        (id, name): (&str, &str),
        stream: Stream,
        sink: serde_json::Value,
        reset: &Reset<'_>,
        envs: &[(&str, &str)],
        results: &mut Vec<Measurement>,
    ) -> Result<()> {
        let path = write(&self.work.join(format!("{id}.json")), &config(self.url, stream, self.args, sink))?;
        let mut cmd = Command::new(&self.programs.nats_sink);
        cmd.arg("run").arg(&path).envs(envs.iter().copied());
        results.push(measure(name, cmd, self.js, stream, reset, &self.log(id)).await?);
        if let Some(py) = &self.programs.reference {
            let mut cmd = Command::new(py);
            cmd.arg("run").arg(&path).envs(envs.iter().copied());
            let name = name.replace("nats-sink", "Python reference 0.4.3");
            results.push(measure(&name, cmd, self.js, stream, reset, &self.log(&format!("reference-{id}"))).await?);
        }
        Ok(())
    }
}

/// Everything the suites measured, for the report.
#[derive(Default)]
struct Collected {
    results: Vec<Measurement>,
    scale_rows: Vec<scale::ScaleRow>,
    oracle: Vec<OraclePhase>,
    steps: Vec<features::StepCost>,
    /// Metrics on / off side by side: rate ratios and CPU ratios.
    pairs: Pairs,
    /// The encryption control, side by side: rate ratios.
    control: Vec<f64>,
    member_load: Vec<proc::MemberLoad>,
    lake: lake::Lake,
    grid: Vec<grid::Row>,
    /// The file sink's rounds with fsync on, the ceiling's runs first.
    rounds: Vec<Vec<Measurement>>,
    nosql_store: Option<nosql::StoreMemory>,
    accuracy: String,
    table: table::Table,
}

/// Runs every chosen suite against one private nats-server.
async fn measure_suites(
    args: &Args,
    suites: &[&str],
    programs: &Programs,
    root: &Path,
    work: &Path,
) -> Result<Collected> {
    let server = NatsServer::start();
    let js = server.js().await;
    let url = server.url();
    let b = Bench { args, programs, js: &js, url: &url, work };
    let mut c = Collected::default();
    if suites.contains(&"core") || suites.contains(&"mysql") {
        let stream = Stream { name: "BENCH", subject_root: "bench", total: args.messages, subjects: 8 };
        publish_stream(&js, stream).await;
        if suites.contains(&"core") {
            core_suite::overhead(&b, &mut c).await?;
            core_suite::files(&b, stream, &mut c).await?;
        }
        if suites.contains(&"mysql") && b.wanted("mysql") {
            mysql(&b, stream, &mut c.results).await?;
        }
    }
    if suites.contains(&"http") && b.wanted("http") {
        http::run(args, programs, &js, &url, work, &mut c.results).await?;
    }
    if suites.contains(&"s3") && b.wanted("s3") {
        let stream = Stream { name: "BENCHS3", subject_root: "benchs3", total: args.s3_messages, subjects: 8 };
        publish_stream(&js, stream).await;
        c.results.extend(lake::per_message(args, programs, &js, &url, stream, work, &mut c.lake).await?);
    }
    if suites.contains(&"lake-memory") {
        c.lake.memory = lake::memory_suite(args, programs, &js, &url, work).await?;
    }
    if suites.contains(&"coherence") && b.wanted("coherence") {
        coherence::run(&b, &mut c).await?;
    }
    if suites.contains(&"nosql") && b.wanted("nosql") {
        c.nosql_store = Some(nosql::run(args, programs, &js, &url, work, &mut c.results).await?);
    }
    if suites.contains(&"policies") && b.wanted("policies") {
        policies(&b, root, &mut c.steps)?;
    }
    if suites.contains(&"oracle") && b.wanted("oracle") {
        oracle_scripted(&b, &mut c.oracle).await?;
    }
    if suites.contains(&"grid") {
        c.grid = grid::run(args, programs, &js, &url, work).await?;
    }
    if suites.contains(&"table") {
        c.table = table::run(&b).await?;
    }
    if suites.contains(&"scale") {
        let pids: Vec<u32> = server.pid().into_iter().collect();
        c.scale_rows = scale::run(args, programs, &js, &url, &pids, work).await?;
    }
    drop(server);
    Ok(c)
}

/// The MySQL suite on `stream`: the raw multi-row upsert loop, nats-sink (and the reference)
/// and the mysql-only build, against the run's private MariaDB.
async fn mysql(b: &Bench<'_>, stream: Stream, results: &mut Vec<Measurement>) -> Result<()> {
    let (args, programs, js, url, work) = (b.args, b.programs, b.js, b.url, b.work);
    let log = |name: &str| b.log(name);
    let password = format!("bench-{:016x}", rand::random::<u64>());
    // The run's private MariaDB (started for this process unless one is named).
    let addr = sinks_testkit::shared_mysql().map_err(anyhow::Error::msg)?;
    let server = TestServer::new(addr.host.clone(), addr.port);
    mysql_bench_user(&server, &password).await?;
    let (host, port) = (addr.host, addr.port);
    let mut raw = Command::new(&programs.raw_mysql);
    raw.args([url, stream.name, CONSUMER, &stream.total.to_string(), &args.batch.to_string()]).args([
        &port.to_string(),
        MYSQL_BENCH_USER,
        &password,
        MYSQL_TABLE,
    ]);
    let name = format!("{} (no framework)", ceiling::RAW_MYSQL);
    let name = name.as_str();
    results.push(measure(name, raw, js, stream, &Reset::Table(&server, MYSQL_TABLE), &log("raw-mysql")).await?);
    let sink = json!({"type": "mysql", "host": host, "port": port, "database": "test", "user": MYSQL_BENCH_USER,
                      "password_env": MYSQL_PASSWORD_ENV, "table": MYSQL_TABLE, "mode": "upsert", "auto_create": true});
    let envs = [(MYSQL_PASSWORD_ENV, password.as_str())];
    let reset = Reset::Table(&server, MYSQL_TABLE);
    b.pair(("mysql", "nats-sink, mysql sink, upsert"), stream, sink, &reset, &envs, results).await?;
    let mut slim = Command::new(&programs.nats_sink_mysql);
    slim.arg("run").arg(work.join("mysql.json")).envs(envs);
    let name = "nats-sink (mysql-only build), mysql sink, upsert";
    results.push(measure(name, slim, js, stream, &Reset::Table(&server, MYSQL_TABLE), &log("mysql-slim")).await?);
    Ok(())
}

/// The policies suite: each message policy step alone, in one process (no NATS, no sink),
/// and with `--reference` the reference's own pipeline functions.
fn policies(b: &Bench<'_>, root: &Path, steps: &mut Vec<features::StepCost>) -> Result<()> {
    let (args, programs) = (b.args, b.programs);
    let log = |name: &str| b.log(name);
    let out = Command::new(&programs.policy_steps)
        .arg(args.policy_messages.to_string())
        .env(BENCH_KEY_ENV, BENCH_KEY_B64)
        .stderr(std::fs::File::create(log("policy-steps"))?)
        .output()?;
    if !out.status.success() {
        bail!("policy_steps failed ({}); log {}", out.status, log("policy-steps").display());
    }
    for step in String::from_utf8_lossy(&out.stdout).lines().filter_map(features::StepCost::parse) {
        eprintln!("policy step {}: CPU {:.2} µs/msg", step.step, step.cpu_us);
        steps.push(step);
    }
    if let Some(cli) = &programs.reference {
        // The reference's own pipeline functions on the same messages and sections, in
        // its own process (a fifth of the messages: it is two orders slower).
        let script = root.join("crates/sinks-policy/tests/reference/time_policy_steps.py");
        let count = (args.policy_messages / 5).max(1_000);
        let out = Command::new(cli.with_file_name("python"))
            .arg(&script)
            .arg(count.to_string())
            .env(BENCH_KEY_ENV, BENCH_KEY_B64)
            .stderr(std::fs::File::create(log("policy-steps-reference"))?)
            .output()?;
        if !out.status.success() {
            bail!("{} failed ({}); log {}", script.display(), out.status, log("policy-steps-reference").display());
        }
        for mut step in String::from_utf8_lossy(&out.stdout).lines().filter_map(features::StepCost::parse) {
            eprintln!("reference policy step {}: CPU {:.2} µs/msg", step.step, step.cpu_us);
            step.step = format!("{}{}", features::REFERENCE_STEP, step.step);
            steps.push(step);
        }
    }
    Ok(())
}

/// The Oracle suite, in one process: the Oracle sink's write path on prepared envelopes,
/// then the runner into the blackhole sink and into the Oracle sink over the scripted
/// database (no Oracle database can be had here).
async fn oracle_scripted(b: &Bench<'_>, oracle: &mut Vec<OraclePhase>) -> Result<()> {
    let (args, programs, js, url) = (b.args, b.programs, b.js, b.url);
    let log = |name: &str| b.log(name);
    // In one process: the Oracle sink's write path on prepared envelopes, then the
    // runner into the blackhole sink and into the Oracle sink over the scripted
    // database (no Oracle database can be had here).
    let stream = Stream { name: "BENCHORA", subject_root: "benchora", total: args.oracle_messages, subjects: 8 };
    publish_stream(js, stream).await;
    let out = Command::new(&programs.oracle_scripted)
        .arg(url)
        .arg(stream.name)
        .arg(format!("{}.>", stream.subject_root))
        .args([stream.total.to_string(), args.batch.to_string(), args.in_flight.to_string()])
        .stderr(std::fs::File::create(log("oracle-scripted"))?)
        .output()?;
    if !out.status.success() {
        bail!("oracle_scripted failed ({}); log {}", out.status, log("oracle-scripted").display());
    }
    for phase in String::from_utf8_lossy(&out.stdout).lines().filter_map(OraclePhase::parse) {
        eprintln!(
            "oracle {}: CPU {:.2} µs/row, backend {:.2} µs/row, wall {:.2} s",
            phase.phase, phase.cpu_us, phase.backend_us, phase.wall_s
        );
        oracle.push(phase);
    }
    Ok(())
}

/// The report of everything `c` holds, in Markdown.
fn report(args: &Args, c: &Collected) -> String {
    let Collected {
        results,
        scale_rows,
        oracle,
        steps,
        pairs,
        control,
        member_load,
        lake,
        grid,
        rounds,
        nosql_store,
        accuracy,
        table,
    } = c;
    let mut report = if results.is_empty() {
        format!("# Benchmark\n\nMachine: {}, release build, private nats-server 2.15.1 on loopback.\n", machine())
    } else {
        render(args, results, pairs, control) + &features::render(results)
    };
    if !scale_rows.is_empty() {
        report.push_str(&scale::render(args, scale_rows));
    }
    report.push_str(&lake::render(lake, results.iter().find(|m| m.name == "nats-sink, s3 sink")));
    report.push_str(&ceiling::render(results));
    report.push_str(&ceiling::render_rounds(rounds));
    report.push_str(&grid::render(grid));
    report.push_str(&table::render(table));
    report.push_str(&profile::render(results));
    report.push_str(&render_member_load(member_load));
    report.push_str(&nosql::render(nosql_store.as_ref()));
    report.push_str(&render_oracle(oracle));
    report.push_str(&features::render_steps(steps));
    report.push_str(accuracy);
    report
}

fn render(args: &Args, results: &[Measurement], pairs: &Pairs, control: &[f64]) -> String {
    let find = |prefix: &str| results.iter().find(|m| m.name.starts_with(prefix));
    let mut md = format!(
        "# Benchmark\n\nMachine: {}. 256-byte JSON messages with `Nats-Msg-Id` ({} for core and MySQL, {} for HTTP, {} for S3, {} for Coherence, {} for NoSQL), batch {}, {} batches in flight, private nats-server 2.15.1 on loopback, MariaDB 10.11, SeaweedFS 4.48, a one-member Coherence CE 25.03.2 cluster (active persistence) and a KVLite 25.3.21 store with its HTTP proxy on loopback, release build.\n\n",
        machine(),
        args.messages,
        args.http_messages,
        args.s3_messages,
        args.coherence_messages,
        args.nosql_messages,
        args.batch,
        args.in_flight
    );
    md.push_str(
        "| contender | msgs/s | wall s | first ack ms | peak RSS MiB | CPU µs/msg |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for m in results {
        md.push_str(&format!(
            "| {} | {:.0} | {:.2} | {} | {:.1} | {:.1} |\n",
            m.name,
            m.rate(),
            m.wall.as_secs_f64(),
            m.first_ack.as_millis(),
            m.peak_rss_mib(),
            m.cpu_us_per_msg()
        ));
    }
    md.push_str("\n| ratio | measured | target |\n|---|---:|---:|\n");
    let ratio = |a: &str, b: &str| find(a).zip(find(b)).map(|(a, b)| a.rate() / b.rate());
    let reference = "Python reference 0.4.3";
    // A side-by-side ratio shows only part of a cost (one nats-server paces both processes);
    // the encryption control, measured both ways, says how much: the metrics ratio is scaled
    // by the same exponent, ln(alone) / ln(side by side).
    let control_side = quantile(control, 0.5);
    let control_alone = ratio("nats-sink, blackhole sink, encrypted", "nats-sink, blackhole sink (median");
    let metrics_scaled = match (quantile(&pairs.rate, 0.5), control_side, control_alone) {
        (Some(m), Some(side), Some(alone)) if side < 1.0 && alone < 1.0 => Some(m.powf(alone.ln() / side.ln())),
        _ => None,
    };
    let rows = [
        ("blackhole, metrics on / off (side by side, median of the pairs)", quantile(&pairs.rate, 0.5), ""),
        ("control: blackhole, encrypted / plain (side by side, median)", control_side, ""),
        ("control: blackhole, encrypted / plain (alone, median runs)", control_alone, ""),
        ("blackhole, metrics on / off (side by side, scaled by the control)", metrics_scaled, "≥ 0.97"),
        (
            "blackhole, metrics on / off, bound from the sink's CPU per message (off / on, median of the pairs)",
            quantile(&pairs.cpu, 0.5),
            "≥ 0.97",
        ),
        (
            "file fsync off / reference",
            ratio("nats-sink, file sink, fsync off", &format!("{reference}, file sink, fsync off")),
            "≥ 3",
        ),
        (
            "file fsync on / reference",
            ratio("nats-sink, file sink, fsync on", &format!("{reference}, file sink, fsync on")),
            "≥ 6",
        ),
        (
            "review package fsync off / reference",
            ratio("nats-sink, review package sink, fsync off", &format!("{reference}, review package sink, fsync off")),
            "",
        ),
        (
            "review package fsync on / reference",
            ratio("nats-sink, review package sink, fsync on", &format!("{reference}, review package sink, fsync on")),
            "",
        ),
        (
            "file fsync off, encrypted / plain",
            ratio("nats-sink, file sink, fsync off, encrypted", "nats-sink, file sink, fsync off"),
            "≥ 0.85",
        ),
        (
            "one file sink / fan-out to two (time ratio), fsync off",
            ratio("nats-sink, file sink, fsync off", "nats-sink, fan-out to two file sinks"),
            "≤ 1.6",
        ),
        ("mysql / reference", ratio("nats-sink, mysql", &format!("{reference}, mysql")), "≥ 5"),
        (
            "http, 8 subjects / reference",
            ratio("nats-sink, http sink, 8 subjects", &format!("{reference}, http sink, 8 subjects")),
            "≥ 5",
        ),
        (
            "http, 8 subjects, ordering none / reference",
            ratio("nats-sink, http sink, 8 subjects, ordering none", &format!("{reference}, http sink, 8 subjects")),
            "≥ 10",
        ),
        (
            "http, 1 subject / reference",
            ratio("nats-sink, http sink, 1 subject", &format!("{reference}, http sink, 1 subject")),
            "≥ 4",
        ),
        (
            "http, 1 subject, ordering none / reference",
            ratio("nats-sink, http sink, 1 subject, ordering none", &format!("{reference}, http sink, 1 subject")),
            "≥ 10",
        ),
        ("s3 / reference", ratio("nats-sink, s3", &format!("{reference}, s3")), "≥ 5"),
        ("coherence / reference", ratio("nats-sink, coherence sink", &format!("{reference}, coherence")), "≥ 5"),
        (
            "coherence, ordering none / reference",
            ratio("nats-sink, coherence sink, ordering none", &format!("{reference}, coherence")),
            "≥ 5",
        ),
        (
            "coherence, legacy protocol / reference",
            ratio("nats-sink, coherence sink, legacy protocol", &format!("{reference}, coherence")),
            "",
        ),
        ("nosql / reference", ratio("nats-sink, nosql sink", &format!("{reference}, nosql")), "≥ 5"),
    ];
    for (name, value, target) in rows {
        let shown = value.map_or("not measured".to_owned(), |v| format!("{v:.2}×"));
        md.push_str(&format!("| {name} | {shown} | {target} |\n"));
    }
    for (what, values) in [("rate on / off", &pairs.rate), ("sink CPU per message off / on", &pairs.cpu)] {
        if let (Some(mid), Some(q1), Some(q3), Some(lo), Some(hi)) = (
            quantile(values, 0.5),
            quantile(values, 0.25),
            quantile(values, 0.75),
            quantile(values, 0.0),
            quantile(values, 1.0),
        ) {
            md.push_str(&format!(
                "\nMetrics {what} over {} side-by-side pairs: median {mid:.3}, quartiles {q1:.3}–{q3:.3}, range {lo:.3}–{hi:.3}.\n",
                values.len(),
            ));
        }
    }
    if let Some(m) = find("nats-sink, coherence sink") {
        md.push_str(&format!("\nCoherence sink peak RSS: {:.1} MiB (target ≤ 40 MiB).\n", m.peak_rss_mib()));
    }
    if let Some(m) = find("nats-sink, mysql") {
        md.push_str(&format!("\nMySQL sink absolute rate: {:.0} msgs/s (target ≥ 15,000).\n", m.rate()));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_pick_the_nearest_rank() {
        let values = [1.04, 0.91, 0.99, 1.10, 0.95];
        assert_eq!(quantile(&values, 0.5), Some(0.99));
        assert_eq!(quantile(&values, 0.0), Some(0.91));
        assert_eq!(quantile(&values, 1.0), Some(1.10));
        assert_eq!(quantile(&values, 0.25), Some(0.95));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
