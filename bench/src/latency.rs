//! `cargo xtask bench --latency` (`sinks-bench latency`): latency under sustained load, as an
//! operator sizes a deployment (docs/performance.md, "Latency under sustained load").
//!
//! For each sink (the file sink with `fsync: true`, the MySQL sink in upsert mode against the
//! run's private MariaDB), each worker count (processes on one durable consumer) and each
//! contender (`nats-sink`; with `--raw` the raw ordered file loop, `raw_ceiling run`, the
//! ceiling of the file sink's latency; with `--reference` the Python reference on the
//! identical config):
//!
//! 1. **Maximum rate, closed loop**: a backlog of `--max-messages` messages, consumed from
//!    spawn until JetStream shows every one acknowledged.
//! 2. **Open loop at each load** (`--loads`, percent of that maximum): a fresh stream; the
//!    workers start and create their consumer; then a publisher sends at the fixed rate on an
//!    absolute schedule (`latency/probe.rs`) for `--warmup` + `--duration` seconds, while a
//!    plain core-NATS subscriber on `$JS.ACK.<stream>.>` stamps each message's first positive
//!    ack. A sink acknowledges a message only after its batch is committed (the file fsynced,
//!    the transaction committed), so publish → acked bounds publish → stored from above, and
//!    it is measured the same way for the reference, without touching either sink.
//!    Latencies count from each message's *intended* send instant, so a publisher that falls
//!    behind, or a sink that holds the publisher back, is charged to the latency
//!    (coordinated omission avoided); the warm-up's messages are left out.
//! 3. With `--reference`, `nats-sink` also runs at the reference's own rates, so the two are
//!    compared at equal rates.
//!
//! The table (with the load average at the start of each run) goes to
//! `target/bench/latency.md`. Not part of CI: a bench command; the arithmetic is unit-tested
//! (`latency/stats.rs`, `latency/probe.rs`).

mod probe;
mod stats;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use async_nats::HeaderMap;
use async_nats::jetstream::Context as Js;
use serde_json::json;
use sink_mysql::certify::TestServer;
use sinks_testkit::{NatsServer, js_publish_all, stream_with_subjects};

use probe::Sent;
use stats::{Summary, intended, ms};

/// Options of `sinks-bench latency`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Sinks to measure, comma-separated: `file` (fsync on), `mysql` (upsert).
    #[arg(long, default_value = "file,mysql")]
    sinks: String,
    /// Worker counts (processes on one durable consumer), comma-separated.
    #[arg(long, default_value = "1,2")]
    workers: String,
    /// Loads, in percent of each contender's measured maximum rate, comma-separated.
    #[arg(long, default_value = "25,50,90")]
    loads: String,
    /// Rates in messages per second at which every contender also runs, comma-separated, the
    /// contenders taking turns at each rate: two builds compared at equal rates on a machine
    /// whose maxima drift between their closed-loop runs (`--loads ''` leaves out the rest).
    #[arg(long, default_value = "")]
    rates: String,
    /// Seconds measured at each rate, after the warm-up.
    #[arg(long, default_value_t = 20)]
    duration: u64,
    /// Seconds of warm-up at each rate (published and acknowledged, not counted).
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    /// Messages of the closed-loop run that measures a contender's maximum rate.
    #[arg(long, default_value_t = 50_000)]
    max_messages: usize,
    /// `delivery.batch_size`.
    #[arg(long, default_value_t = 500)]
    batch: usize,
    /// `delivery.max_in_flight_batches`.
    #[arg(long, default_value_t = 4)]
    in_flight: usize,
    /// `delivery.batch_timeout_ms` (the longest a fetch waits for a first message).
    #[arg(long, default_value_t = 100)]
    batch_timeout_ms: u64,
    /// Also measure the raw ordered file loop (`raw_ceiling run`, file sink only): the same
    /// files, fsyncs and acks with no framework, one batch at a time, as the sink's default
    /// ordering writes batches that each hold every subject.
    #[arg(long)]
    raw: bool,
    /// Also measure the Python reference (nats-sinks 0.4.3 in a venv under `target/bench/`).
    #[arg(long)]
    reference: bool,
    /// A `nats-sink` to measure instead of building the release one with the file and MySQL
    /// sinks; given more than once, each is a contender (named by its file name).
    #[arg(long)]
    nats_sink: Vec<PathBuf>,
    /// JSON merged into every contender's config file, object by object (an experiment:
    /// `'{"delivery":{"ordering_key":"none"}}'`, or a metrics snapshot file to read batch sizes
    /// and write times from; the reference refuses fields it does not know).
    #[arg(long)]
    config_patch: Option<String>,
    /// Only the closed-loop maximum of each contender, with its peak RSS (no open-loop runs):
    /// `--sinks mysql --workers 1 --max-only --max-messages 100000` is the MySQL memory check.
    #[arg(long)]
    max_only: bool,
}

/// The stream of the closed-loop runs (each run reads it through a consumer of its own), and
/// the prefix of the open-loop runs' streams (a fresh stream each: a stream deleted and made
/// again under the same name is a changed stream to the sink's stream guard, which pauses).
const MAX_STREAM: &str = "LATMAX";
const STREAM: &str = "LAT";
const CONSUMER: &str = "lat";

/// The number of the next run (its stream or consumer name).
fn next_run() -> usize {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
const TABLE: &str = "NATS_SINKS_LATENCY";
/// Subjects the messages are spread over.
const SUBJECTS: u64 = 8;

/// One contender: a program that takes `run <config>`.
struct Contender {
    label: String,
    program: PathBuf,
}

/// One sink under test: its `sink` section and how its destination is emptied.
struct SinkUnderTest {
    id: &'static str,
    label: &'static str,
    section: serde_json::Value,
    table: Option<TestServer>,
    directory: Option<PathBuf>,
    /// The workers' environment (the MySQL password).
    envs: Vec<(&'static str, String)>,
}

/// One row of the report.
#[derive(Debug, Clone)]
struct Row {
    sink: &'static str,
    workers: usize,
    contender: String,
    /// The contender's closed-loop maximum, msgs/s.
    max: f64,
    /// What the rate is: `25 %` of the contender's own maximum, or a rate of another's.
    load: String,
    rate: f64,
    summary: Option<Summary>,
    /// The 99th percentile of how late the publisher sent (actual − intended).
    late_p99: Duration,
    /// Messages never acknowledged within 30 s after the last send.
    unacked: usize,
    /// `/proc/loadavg`'s one-minute figure at the start of the run.
    load_average: String,
    /// The largest worker's peak RSS.
    peak_rss_kib: Option<u64>,
}

impl Row {
    /// The row of a closed-loop run alone (`--max-only`).
    fn max_only(run: &Run<'_>, c: &Contender, max: &Max) -> Self {
        Self {
            sink: run.sink.label,
            workers: run.workers,
            contender: c.label.clone(),
            max: max.rate,
            load: "closed loop".into(),
            rate: max.rate,
            summary: None,
            late_p99: Duration::ZERO,
            unacked: 0,
            load_average: max.load_average.clone(),
            peak_rss_kib: Some(max.rss_kib),
        }
    }
}

/// A closed-loop run: the contender's maximum rate, msgs/s, its largest worker's peak RSS and
/// the load average at its start.
struct Max {
    rate: f64,
    rss_kib: u64,
    load_average: String,
}

/// The comma-separated numbers of `s` (none when it is empty).
fn list<T: std::str::FromStr>(s: &str, what: &str) -> Result<Vec<T>> {
    if s.trim().is_empty() {
        return Ok(Vec::new());
    }
    s.split(',').map(|v| v.trim().parse::<T>().map_err(|_| anyhow::anyhow!("{what}: {v:?} is not a number"))).collect()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

pub(crate) fn run(args: Args) -> Result<()> {
    let root = sinks_testkit::workspace_root();
    let workers: Vec<usize> = list(&args.workers, "--workers")?;
    let loads: Vec<f64> = list(&args.loads, "--loads")?;
    let rates: Vec<f64> = list(&args.rates, "--rates")?;
    let sinks: Vec<&str> = args.sinks.split(',').map(str::trim).collect();
    if let Some(bad) = sinks.iter().find(|s| !matches!(**s, "file" | "mysql")) {
        bail!("--sinks: unknown sink {bad:?} (file, mysql)");
    }
    let mut contenders = Vec::new();
    if args.nats_sink.is_empty() {
        crate::cargo(
            &["build", "--release", "--quiet", "-p", "sinks-bin", "--no-default-features", "--features", "file,mysql"],
            &[],
        )?;
        let program = sinks_testkit::target_dir().join("release/nats-sink");
        contenders.push(Contender { label: "nats-sink".into(), program });
    }
    for program in &args.nats_sink {
        let name = program.file_name().map_or_else(|| program.display().to_string(), |n| n.to_string_lossy().into());
        contenders.push(Contender { label: name, program: program.clone() });
    }
    if args.raw {
        if sinks != ["file"] {
            bail!("--raw: the raw ordered loop writes files only (--sinks file)");
        }
        crate::cargo(&["build", "--release", "--quiet", "-p", "sinks-bench", "--bin", "raw_ceiling"], &[])?;
        let program = sinks_testkit::target_dir().join("release/raw_ceiling");
        contenders.push(Contender { label: "raw ordered file loop".into(), program });
    }
    if args.reference {
        let program = crate::bench::reference_venv(&root)?;
        contenders.push(Contender { label: "Python reference 0.4.3".into(), program });
    }
    let work = root.join("target/bench/latency");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let rt = tokio::runtime::Runtime::new()?;
    let rows = rt.block_on(measure_all(&args, &sinks, &workers, (&loads, &rates), &contenders, &work))?;
    let report = render(&args, &rows);
    let out = root.join("target/bench/latency.md");
    std::fs::write(&out, &report)?;
    println!("{report}");
    println!("report: {}", out.display());
    Ok(())
}

async fn measure_all(
    args: &Args,
    sinks: &[&str],
    workers: &[usize],
    (loads, rates): (&[f64], &[f64]),
    contenders: &[Contender],
    work: &Path,
) -> Result<Vec<Row>> {
    let server = NatsServer::start();
    let js = server.js().await;
    let url = server.url();
    let addr = url.trim_start_matches("nats://").to_owned();
    let max_stream = publish_backlog(&js, args.max_messages).await;
    let mut rows = Vec::new();
    for sink in sinks {
        let under_test = sink_under_test(sink, work).await?;
        for &n in workers {
            let run = Run { args, js: &js, url: &url, addr: &addr, work, sink: &under_test, workers: n, max_stream };
            let mut maxima = Vec::new();
            for c in contenders {
                let closed = run.max_rate(c).await?;
                let max = closed.rate;
                maxima.push((c.label.as_str(), max));
                if args.max_only {
                    rows.push(Row::max_only(&run, c, &closed));
                    continue;
                }
                for load in loads {
                    let rate = max * load / 100.0;
                    rows.push(run.open_loop(c, max, format!("{load:.0} % of its max"), rate).await?);
                }
            }
            // Every contender at each given rate, in turns.
            for &rate in rates.iter().filter(|_| !args.max_only) {
                for (c, (_, own)) in contenders.iter().zip(&maxima) {
                    rows.push(run.open_loop(c, *own, format!("{rate:.0} msgs/s (--rates)"), rate).await?);
                }
            }
            // The first contender at the reference's rates (the last contender), to compare
            // at equal rates.
            if let (true, false, [(_, own), .., (label, max)]) = (args.reference, args.max_only, &maxima[..]) {
                for load in loads {
                    let rate = max * load / 100.0;
                    let what = format!("{load:.0} % of the reference's max ({label})");
                    rows.push(run.open_loop(&contenders[0], *own, what, rate).await?);
                }
            }
        }
    }
    drop(server);
    Ok(rows)
}

/// The sink `id` (`file` or `mysql`) with its destination.
async fn sink_under_test(id: &str, work: &Path) -> Result<SinkUnderTest> {
    if id == "file" {
        let dir = work.join("out");
        return Ok(SinkUnderTest {
            id: "file",
            label: "file, fsync on",
            section: json!({"type": "file", "directory": dir, "fsync": true}),
            table: None,
            directory: Some(dir),
            envs: Vec::new(),
        });
    }
    let password = format!("bench-{:016x}", rand::random::<u64>());
    let addr = sinks_testkit::shared_mysql().map_err(anyhow::Error::msg)?;
    let server = TestServer::new(addr.host.clone(), addr.port);
    crate::bench::mysql_bench_user(&server, &password).await?;
    let section = json!({"type": "mysql", "host": addr.host, "port": addr.port, "database": "test",
        "user": crate::bench::MYSQL_BENCH_USER, "password_env": crate::bench::MYSQL_PASSWORD_ENV, "table": TABLE,
        "mode": "upsert", "auto_create": true});
    let envs = vec![(crate::bench::MYSQL_PASSWORD_ENV, password)];
    Ok(SinkUnderTest { id: "mysql", label: "mysql, upsert", section, table: Some(server), directory: None, envs })
}

/// A stream of `total` benchmark messages for the closed-loop runs.
async fn publish_backlog(js: &Js, total: usize) -> usize {
    stream_with_subjects(js, MAX_STREAM, &["latmax.>"]).await;
    let msgs = (0..total)
        .map(|i| (format!("latmax.orders.k{}", i as u64 % SUBJECTS), HeaderMap::new(), crate::bench::payload(i)))
        .collect();
    js_publish_all(js, msgs).await;
    total
}

/// What the runs of one sink and worker count share.
struct Run<'a> {
    args: &'a Args,
    js: &'a Js,
    url: &'a str,
    addr: &'a str,
    work: &'a Path,
    sink: &'a SinkUnderTest,
    workers: usize,
    max_stream: usize,
}

impl Run<'_> {
    /// The config file of a run on `stream` through `consumer` (only fields the reference also
    /// accepts).
    fn config(&self, stream: &str, consumer: &str, subject: &str) -> Result<PathBuf> {
        let mut value = json!({
            "nats": {"url": self.url, "stream": stream, "consumer": consumer, "subject": subject},
            "delivery": {"batch_size": self.args.batch, "batch_timeout_ms": self.args.batch_timeout_ms,
                         "max_in_flight_batches": self.args.in_flight},
            "logging": {"level": "WARNING"},
            "sink": self.sink.section,
        });
        if let Some(patch) = &self.args.config_patch {
            let patch: serde_json::Value = serde_json::from_str(patch).context("--config-patch is no JSON")?;
            sinks_testkit::merge_json(&mut value, patch);
        }
        let path = self.work.join(format!("{}-{stream}-{consumer}.json", self.sink.id));
        std::fs::write(&path, serde_json::to_vec_pretty(&value)?)?;
        Ok(path)
    }

    /// Empties the destination (the directory moved aside, the table dropped).
    async fn reset_destination(&self) -> Result<()> {
        if let Some(dir) = &self.sink.directory
            && dir.exists()
        {
            std::fs::rename(dir, dir.with_file_name(format!("done-{}", next_run())))?;
        }
        if let Some(server) = &self.sink.table {
            let mut c = server.admin().await.map_err(anyhow::Error::msg)?;
            mysql_async::prelude::Queryable::query_drop(&mut c, format!("DROP TABLE IF EXISTS `{TABLE}`")).await?;
            c.disconnect().await?;
        }
        Command::new("sync").status()?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok(())
    }

    fn spawn(&self, c: &Contender, config: &Path, tag: &str) -> Result<Vec<Child>> {
        (0..self.workers)
            .map(|w| {
                let log = self.work.join(format!("{}-{tag}-{w}.log", self.sink.id));
                Command::new(&c.program)
                    .arg("run")
                    .arg(config)
                    .envs(self.sink.envs.iter().map(|(k, v)| (*k, v.as_str())))
                    .stdout(Stdio::null())
                    .stderr(std::fs::File::create(&log)?)
                    .spawn()
                    .with_context(|| format!("starting {}", c.label))
            })
            .collect()
    }

    /// The closed-loop maximum of `c`, msgs/s: the backlog from spawn until all acknowledged.
    async fn max_rate(&self, c: &Contender) -> Result<Max> {
        let s = self.js.get_stream(MAX_STREAM).await?;
        let consumer = format!("{CONSUMER}{}", next_run());
        self.reset_destination().await?;
        let config = self.config(MAX_STREAM, &consumer, "latmax.>")?;
        let load_average = load_average();
        let start = Instant::now();
        let mut children = self.spawn(c, &config, &format!("max-{}", slug(&c.label)))?;
        let deadline = start + Duration::from_secs(1800);
        loop {
            let info = s.consumer_info(&consumer).await.ok();
            if info.is_some_and(|i| i.ack_floor.stream_sequence >= self.max_stream as u64 && i.num_ack_pending == 0) {
                break;
            }
            if let Some(status) = children.iter_mut().find_map(|c| c.try_wait().ok().flatten()) {
                stop(&mut children);
                bail!("{} exited early ({status}) in the closed-loop run", c.label);
            }
            if Instant::now() > deadline {
                stop(&mut children);
                bail!("{}: the closed-loop run took over 30 minutes", c.label);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let wall = start.elapsed();
        let rss = children.iter().map(|c| crate::bench::proc_stats(c.id()).0).max().unwrap_or(0);
        stop(&mut children);
        let rate = self.max_stream as f64 / wall.as_secs_f64();
        eprintln!(
            "latency: {} ({}, {} worker(s)): maximum {rate:.0} msgs/s closed loop ({} messages in {:.2} s, peak RSS {:.1} MiB, load average {load_average})",
            c.label,
            self.sink.label,
            self.workers,
            self.max_stream,
            wall.as_secs_f64(),
            rss as f64 / 1024.0
        );
        Ok(Max { rate, rss_kib: rss, load_average })
    }

    /// One open-loop run of `c` at `rate` msgs/s (see the module docs).
    async fn open_loop(&self, c: &Contender, max: f64, load: String, rate: f64) -> Result<Row> {
        let n = next_run();
        let (stream, root) = (format!("{STREAM}{n}"), format!("lat{n}"));
        stream_with_subjects(self.js, &stream, &[&format!("{root}.>")]).await;
        self.reset_destination().await?;
        let config = self.config(&stream, CONSUMER, &format!("{root}.>"))?;
        let total = (rate * (self.args.warmup + self.args.duration) as f64).round().max(1.0) as u64;
        let warm = (rate * self.args.warmup as f64).round() as u64;
        let listener = probe::Listener::start(self.addr, &format!("$JS.ACK.{stream}.>"), total)?;
        let mut children = self.spawn(c, &config, &format!("{}-{rate:.0}", slug(&c.label)))?;
        // The workers create the consumer; the clock starts once they have.
        let s = self.js.get_stream(&stream).await?;
        let ready_by = Instant::now() + Duration::from_secs(60);
        while s.consumer_info(CONSUMER).await.is_err() {
            if Instant::now() > ready_by {
                stop(&mut children);
                bail!("{}: no consumer {CONSUMER} within 60 s", c.label);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let load_average = load_average();
        let start = Instant::now();
        let addr = self.addr.to_owned();
        let sent = tokio::task::spawn_blocking(move || {
            probe::publish(
                &addr,
                rate,
                total,
                start,
                move |i| format!("{root}.orders.k{}", i % SUBJECTS),
                |i| crate::bench::payload(i as usize),
            )
        })
        .await??;
        let Sent { actual, open } = sent;
        let acked =
            tokio::task::spawn_blocking(move || listener.finish(Instant::now() + Duration::from_secs(30))).await??;
        open.close()?;
        let state = self.js.get_stream(&stream).await?.cached_info().state.clone();
        let rss = children.iter().map(|c| crate::bench::proc_stats(c.id()).0).max().unwrap_or(0);
        stop(&mut children);
        let _ = self.js.delete_stream(&stream).await;
        if state.messages != total || state.last_sequence != total {
            bail!(
                "the stream holds {} messages up to sequence {}, not the {total} published: the run cannot map acks to sends",
                state.messages,
                state.last_sequence
            );
        }
        let samples = self.work.join(format!("{}-{}-{rate:.0}-w{}.csv", self.sink.id, slug(&c.label), self.workers));
        write_samples(&samples, rate, &actual, &acked, start)?;
        let mut latencies = Vec::with_capacity(acked.len());
        let mut unacked = 0;
        for (i, at) in acked.iter().enumerate().skip(usize::try_from(warm)?) {
            match at {
                Some(at) => latencies.push(at.saturating_duration_since(start + intended(i as u64, rate))),
                None => unacked += 1,
            }
        }
        let mut late: Vec<Duration> =
            actual.iter().enumerate().map(|(i, actual)| actual.saturating_sub(intended(i as u64, rate))).collect();
        late.sort_unstable();
        let row = Row {
            sink: self.sink.label,
            workers: self.workers,
            contender: c.label.clone(),
            max,
            load,
            rate,
            summary: Summary::of(latencies),
            late_p99: stats::percentile(&late, 0.99).unwrap_or_default(),
            unacked,
            load_average,
            peak_rss_kib: Some(rss),
        };
        eprintln!("latency: {}", render_row(&row));
        Ok(row)
    }
}

/// Every message of an open-loop run, one line each (`i,intended_us,sent_us,acked_us`, offsets
/// from the run's start; `acked_us` empty when never acknowledged): what a stall or a queue
/// looks like over time, which the percentiles do not show.
fn write_samples(path: &Path, rate: f64, sent: &[Duration], acked: &[Option<Instant>], start: Instant) -> Result<()> {
    use std::fmt::Write as _;
    let mut out = String::from("i,intended_us,sent_us,acked_us\n");
    for (i, at) in acked.iter().enumerate() {
        let sent = sent.get(i).map_or(String::new(), |d| d.as_micros().to_string());
        let acked = at.map_or(String::new(), |at| at.saturating_duration_since(start).as_micros().to_string());
        let _ = writeln!(out, "{i},{},{sent},{acked}", intended(i as u64, rate).as_micros());
    }
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}

/// `label` as a file name part.
fn slug(label: &str) -> String {
    label.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect()
}

/// Stops every worker (SIGTERM) and waits for it.
fn stop(children: &mut Vec<Child>) {
    for child in children.iter() {
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    }
    for mut child in children.drain(..) {
        let _ = child.wait();
    }
}

fn render_row(r: &Row) -> String {
    let (p50, p99, p999, max) = r.summary.map_or_else(
        || ("–".to_owned(), "–".to_owned(), "–".to_owned(), "–".to_owned()),
        |s| (ms(s.p50), ms(s.p99), ms(s.p999), ms(s.max)),
    );
    format!(
        "| {} | {} | {} | {:.0} | {} | {:.0} | {p50} | {p99} | {p999} | {max} | {} | {} | {} | {} | {} |",
        r.sink,
        r.workers,
        r.contender,
        r.max,
        r.load,
        r.rate,
        r.summary.map_or(0, |s| s.count),
        r.unacked,
        ms(r.late_p99),
        r.peak_rss_kib.map_or_else(|| "–".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0)),
        r.load_average
    )
}

fn render(args: &Args, rows: &[Row]) -> String {
    let mut md = format!(
        "# Latency under sustained load\n\nMachine: {}. 256-byte JSON messages over {SUBJECTS} subjects, batch {}, {} batches in flight, `batch_timeout_ms` {}, private nats-server on loopback, MariaDB 10.11. Each rate: {} s of warm-up, then {} s measured; latency from each message's intended send instant to its first ack seen on `$JS.ACK.<stream>.>`, in ms.\n\n",
        crate::bench::machine(),
        args.batch,
        args.in_flight,
        args.batch_timeout_ms,
        args.warmup,
        args.duration
    );
    if let Some(patch) = &args.config_patch {
        // The sink column names the suite's sink as it is before the patch.
        md.push_str(&format!("Every contender's config had `{patch}` merged into it (`--config-patch`).\n\n"));
    }
    md.push_str("| sink | workers | contender | its max msgs/s | load | rate msgs/s | p50 | p99 | p99.9 | max | measured | unacked | publisher late p99 | peak RSS MiB | load average |\n");
    md.push_str("|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        md.push_str(&render_row(r));
        md.push('\n');
    }
    md
}
