//! `cargo xtask bench`: throughput of the delivery core and the sinks, as ratios measured in
//! one run on one machine.
//!
//! A private nats-server gets a fresh stream with N messages (256-byte JSON, `Nats-Msg-Id`).
//! Each contender then consumes all N through its own durable consumer (deleted between runs,
//! so every run starts from the first message): the raw async-nats pull + ack loop (the
//! ceiling), `nats-sink` with the blackhole sink, with the file sink (fsync off and on), and,
//! with `--reference`, the Python reference (`nats-sinks==0.4.3` in a venv under
//! `target/bench/`) on the identical JSON config file. For each: wall time from spawn until
//! JetStream shows every message acknowledged, msgs/s, peak RSS (VmHWM), CPU time per message,
//! and the time from spawn to the first ack (seen on the ack subject). Writes
//! `target/bench/report.md`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use async_nats::HeaderMap;
use async_nats::jetstream::Context as Js;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;
use sinks_testkit::{NatsServer, js_publish_all, stream_with_subjects};

/// Options of `cargo xtask bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Messages in the stream.
    #[arg(long, default_value_t = 100_000)]
    messages: usize,
    /// `delivery.batch_size`.
    #[arg(long, default_value_t = 500)]
    batch: usize,
    /// `delivery.max_in_flight_batches` (the reference validates and ignores it).
    #[arg(long, default_value_t = 4)]
    in_flight: usize,
    /// Also measure the Python reference (pip-installs nats-sinks==0.4.3).
    #[arg(long)]
    reference: bool,
    /// Measure only the nats-sink variants whose id contains this (`blackhole`,
    /// `file-nofsync`, `file-fsync`); the raw ceiling always runs.
    #[arg(long)]
    only: Option<String>,
}

const STREAM: &str = "BENCH";
const CONSUMER: &str = "bench";

/// What one contender achieved.
#[derive(Debug, Clone)]
struct Measurement {
    name: String,
    wall: Duration,
    first_ack: Duration,
    peak_rss_kib: u64,
    cpu: Duration,
    messages: usize,
}

impl Measurement {
    fn rate(&self) -> f64 {
        self.messages as f64 / self.wall.as_secs_f64()
    }
}

/// A 256-byte JSON order with a stable shape.
fn payload(i: usize) -> Bytes {
    let head = format!(
        r#"{{"order_id":{i},"customer":"c-{:06}","amount":{}.{:02},"currency":"EUR","note":""#,
        i % 997,
        i % 5000,
        i % 100
    );
    let tail = r#""}"#;
    let pad = 256usize.saturating_sub(head.len() + tail.len());
    Bytes::from(format!("{head}{}{tail}", "x".repeat(pad)))
}

fn proc_stats(pid: u32) -> (u64, Duration) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name: utime and stime are the 12th and 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let hz = clock_ticks();
    (hwm, Duration::from_secs_f64(ticks as f64 / hz as f64))
}

fn clock_ticks() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

async fn reset(js: &Js, out: &Path) -> Result<()> {
    let stream = js.get_stream(STREAM).await?;
    let _ = stream.delete_consumer(CONSUMER).await;
    if out.exists() {
        // Move the previous contender's files aside instead of deleting them: deleting 100,000
        // files makes this machine's disk busy (discards) while the next contender runs.
        static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let aside = out.with_file_name(format!("done-{}", RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        std::fs::rename(out, aside)?;
    }
    // Start every contender with no dirty pages left over from the previous one.
    Command::new("sync").status()?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(())
}

async fn settled(js: &Js, total: u64) -> bool {
    let Ok(stream) = js.get_stream(STREAM).await else { return false };
    match stream.consumer_info(CONSUMER).await {
        Ok(i) => i.ack_floor.stream_sequence >= total && i.num_pending == 0 && i.num_ack_pending == 0,
        Err(_) => false,
    }
}

/// Spawns `command`, measures until every message is acked, then stops it.
async fn measure(
    name: &str,
    mut command: Command,
    js: &Js,
    out: &Path,
    total: usize,
    log: &Path,
) -> Result<Measurement> {
    reset(js, out).await?;
    let mut acks = js.client().subscribe(format!("$JS.ACK.{STREAM}.{CONSUMER}.>")).await?;
    js.client().flush().await?;
    let start = Instant::now();
    let mut child = command
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let pid = child.id();
    let first = tokio::time::timeout(Duration::from_secs(120), acks.next()).await;
    let first_ack = start.elapsed();
    drop(acks);
    if first.is_err() {
        let _ = child.kill();
        bail!("{name}: no ack within 120 s; log {}", log.display());
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    while !settled(js, total as u64).await {
        if let Some(status) = child.try_wait()? {
            if !settled(js, total as u64).await {
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
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let _ = child.wait();
    let m = Measurement { name: name.to_owned(), wall, first_ack, peak_rss_kib, cpu, messages: total };
    eprintln!(
        "{name}: {:.0} msgs/s, wall {:.2} s, first ack {} ms, peak RSS {:.1} MiB, CPU {:.1} µs/msg",
        m.rate(),
        m.wall.as_secs_f64(),
        m.first_ack.as_millis(),
        m.peak_rss_kib as f64 / 1024.0,
        m.cpu.as_secs_f64() * 1e6 / total as f64
    );
    Ok(m)
}

fn config(url: &str, batch: usize, in_flight: usize, sink: serde_json::Value) -> serde_json::Value {
    // Only fields the Python reference also accepts: the same file runs under both.
    json!({
        "nats": {"url": url, "stream": STREAM, "consumer": CONSUMER, "subject": "bench.>"},
        "delivery": {"batch_size": batch, "batch_timeout_ms": 100, "max_in_flight_batches": in_flight},
        "logging": {"level": "WARNING"},
        "sink": sink,
    })
}

fn write(path: &Path, value: &serde_json::Value) -> Result<PathBuf> {
    std::fs::write(path, serde_json::to_vec_pretty(value)?)?;
    Ok(path.to_path_buf())
}

fn reference_venv(root: &Path) -> Result<PathBuf> {
    let venv = root.join("target/bench/venv");
    let bin = venv.join("bin/nats-sink");
    if !bin.exists() {
        eprintln!("installing the Python reference (nats-sinks==0.4.3) into {}", venv.display());
        let ok = Command::new("python3").args(["-m", "venv"]).arg(&venv).status()?.success()
            && Command::new(venv.join("bin/python"))
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "nats-sinks==0.4.3"])
                .status()?
                .success();
        if !ok {
            bail!("installing nats-sinks==0.4.3 failed");
        }
    }
    Ok(bin)
}

fn machine() -> String {
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

pub(crate) fn run(args: Args) -> Result<()> {
    let root = sinks_testkit::workspace_root();
    crate::cargo(&["build", "--release", "--quiet", "-p", "sinks-bin"], &[])?;
    crate::cargo(&["build", "--release", "--quiet", "-p", "xtask", "--bin", "raw_consume"], &[])?;
    let nats_sink = root.join("target/release/nats-sink");
    let raw = root.join("target/release/raw_consume");
    let reference = if args.reference { Some(reference_venv(&root)?) } else { None };
    let work = root.join("target/bench");
    std::fs::create_dir_all(&work)?;
    // File output goes to the system temp directory: on this machine kind, file creation in a
    // long-used build tree is measurably slower than in a fresh one, which is noise here.
    let scratch = tempfile::tempdir()?;
    let out = scratch.path().join("out");
    let rt = tokio::runtime::Runtime::new()?;
    let results = rt.block_on(async {
        let server = NatsServer::start();
        let js = server.js().await;
        stream_with_subjects(&js, STREAM, &["bench.>"]).await;
        let msgs = (0..args.messages)
            .map(|i| {
                let mut h = HeaderMap::new();
                h.insert("Nats-Msg-Id", format!("bench-{i}").as_str());
                (format!("bench.orders.k{}", i % 8), h, payload(i))
            })
            .collect();
        js_publish_all(&js, msgs).await;
        let url = server.url();
        let n = args.messages;
        let mut results = Vec::new();
        let log = |name: &str| work.join(format!("{name}.log"));

        let mut raw_cmd = Command::new(&raw);
        raw_cmd.args([&url, STREAM, CONSUMER, &n.to_string(), &args.batch.to_string()]);
        results.push(measure("raw async-nats consume + ack", raw_cmd, &js, &out, n, &log("raw")).await?);

        let variants: [(&str, &str, serde_json::Value); 3] = [
            ("blackhole", "nats-sink, blackhole sink", json!({"type": "blackhole"})),
            (
                "file-nofsync",
                "nats-sink, file sink, fsync off",
                json!({"type": "file", "directory": out, "fsync": false}),
            ),
            ("file-fsync", "nats-sink, file sink, fsync on", json!({"type": "file", "directory": out, "fsync": true})),
        ];
        for (id, name, sink) in &variants {
            if args.only.as_deref().is_some_and(|o| !id.contains(o)) {
                continue;
            }
            let path =
                write(&work.join(format!("{id}.json")), &config(&url, args.batch, args.in_flight, sink.clone()))?;
            let mut cmd = Command::new(&nats_sink);
            cmd.arg("run").arg(&path);
            results.push(measure(name, cmd, &js, &out, n, &log(id)).await?);
            if let (Some(py), true) = (&reference, id.starts_with("file")) {
                let mut cmd = Command::new(py);
                cmd.arg("run").arg(&path);
                let name = name.replace("nats-sink", "Python reference 0.4.3");
                results.push(measure(&name, cmd, &js, &out, n, &log(&format!("reference-{id}"))).await?);
            }
        }
        drop(server);
        anyhow::Ok(results)
    })?;
    let report = render(&args, &results);
    std::fs::write(work.join("report.md"), &report)?;
    println!("{report}");
    println!("report: {}", work.join("report.md").display());
    Ok(())
}

fn render(args: &Args, results: &[Measurement]) -> String {
    let find = |prefix: &str| results.iter().find(|m| m.name.starts_with(prefix));
    let mut md = format!(
        "# Benchmark\n\nMachine: {}. {} messages of 256-byte JSON with `Nats-Msg-Id`, batch {}, {} batches in flight, private nats-server 2.15.1 on loopback, release build.\n\n",
        machine(),
        args.messages,
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
            m.peak_rss_kib as f64 / 1024.0,
            m.cpu.as_secs_f64() * 1e6 / m.messages as f64
        ));
    }
    md.push_str("\n| ratio | measured | target |\n|---|---:|---:|\n");
    let ratio = |a: Option<&Measurement>, b: Option<&Measurement>| a.zip(b).map(|(a, b)| a.rate() / b.rate());
    let rows = [
        ("blackhole / raw ceiling", ratio(find("nats-sink, blackhole"), find("raw")), "≥ 0.7"),
        (
            "file fsync off / reference fsync off",
            ratio(find("nats-sink, file sink, fsync off"), find("Python reference 0.4.3, file sink, fsync off")),
            "≥ 3",
        ),
        (
            "file fsync on / reference fsync on",
            ratio(find("nats-sink, file sink, fsync on"), find("Python reference 0.4.3, file sink, fsync on")),
            "≥ 6",
        ),
    ];
    for (name, value, target) in rows {
        let shown = value.map_or("not measured (run with --reference)".to_owned(), |v| format!("{v:.2}×"));
        md.push_str(&format!("| {name} | {shown} | {target} |\n"));
    }
    md
}
