//! `cargo xtask bench --suite scale`: the numbers to size a deployment.
//!
//! One stream, one durable consumer, and 1, 2 and 4 `nats-sink` processes on it (identical
//! configs, started together), with the file sink (`fsync: true`) and the MySQL sink (upsert);
//! then one worker against a single node (R1) and against a private three-node cluster (R3),
//! with the blackhole sink (the cost of replication alone) and the file sink. For each run:
//! msgs/s from the first spawn until JetStream shows every message acknowledged, the CPU the
//! workers used per message (summed over the workers) and the CPU the NATS server(s) used per
//! message, so an operator can extrapolate from this machine to theirs.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use async_nats::jetstream::Context as Js;
use futures::StreamExt;
use serde_json::json;
use sink_mysql::certify::TestServer;
use sinks_testkit::NatsCluster;

use super::{
    Args, CONSUMER, MYSQL_BENCH_USER, MYSQL_PASSWORD_ENV, MYSQL_TABLE, Measurement, Programs, Reset, Stream, config,
    mysql_bench_user, proc_stats, publish_stream, reset, settled, write,
};

/// One run of the scale suite.
#[derive(Debug, Clone)]
pub(super) struct ScaleRow {
    /// What ran (sink, topology).
    group: String,
    /// Worker processes.
    workers: usize,
    /// The workers' combined measurement (CPU summed, peak RSS the largest).
    measured: Measurement,
    /// CPU the NATS server process(es) used during the run.
    server_cpu: Duration,
}

impl ScaleRow {
    fn server_cpu_us_per_msg(&self) -> f64 {
        self.server_cpu.as_secs_f64() * 1e6 / self.measured.messages as f64
    }
}

/// Total CPU time of `pids` so far.
fn cpu_of(pids: &[u32]) -> Duration {
    pids.iter().map(|p| proc_stats(*p).1).sum()
}

/// Spawns `workers` copies of `command()`, measures until every message of `stream` is
/// acknowledged, then stops them all with SIGTERM.
#[allow(clippy::too_many_arguments)]
async fn measure_workers(
    group: &str,
    workers: usize,
    command: impl Fn() -> Command,
    js: &Js,
    stream: Stream,
    destination: &Reset<'_>,
    server_pids: &[u32],
    log_dir: &Path,
) -> Result<ScaleRow> {
    let name = format!("{group}, {workers} worker{}", if workers == 1 { "" } else { "s" });
    reset(js, stream, destination).await?;
    let mut acks = js.client().subscribe(format!("$JS.ACK.{}.{CONSUMER}.>", stream.name)).await?;
    js.client().flush().await?;
    let server_before = cpu_of(server_pids);
    let start = Instant::now();
    let mut children: Vec<Child> = Vec::with_capacity(workers);
    for w in 0..workers {
        let log = log_dir.join(format!("scale-{}-{w}.log", group.replace([' ', ','], "_")));
        let child = command()
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        children.push(child);
    }
    let stop_all = |children: &mut Vec<Child>| {
        for c in children.iter() {
            let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
        }
        for c in children.iter_mut() {
            let _ = c.wait();
        }
    };
    let first = tokio::time::timeout(Duration::from_secs(120), acks.next()).await;
    let first_ack = start.elapsed();
    drop(acks);
    if first.is_err() {
        stop_all(&mut children);
        bail!("{name}: no ack within 120 s; logs in {}", log_dir.display());
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    while !settled(js, stream).await {
        for c in &mut children {
            if let Some(status) = c.try_wait()? {
                stop_all(&mut children);
                bail!("{name}: a worker exited early ({status}); logs in {}", log_dir.display());
            }
        }
        if Instant::now() > deadline {
            stop_all(&mut children);
            bail!("{name}: not done within 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let wall = start.elapsed();
    let server_cpu = cpu_of(server_pids).saturating_sub(server_before);
    let mut cpu = Duration::ZERO;
    let mut peak_rss_kib = 0;
    for c in &children {
        let (rss, used) = proc_stats(c.id());
        cpu += used;
        peak_rss_kib = peak_rss_kib.max(rss);
    }
    stop_all(&mut children);
    let measured = Measurement { name, wall, first_ack, peak_rss_kib, cpu, messages: stream.total, profile: None };
    let row = ScaleRow { group: group.to_owned(), workers, measured, server_cpu };
    eprintln!(
        "{}: {:.0} msgs/s, wall {:.2} s, workers' CPU {:.1} µs/msg, server CPU {:.1} µs/msg",
        row.measured.name,
        row.measured.rate(),
        row.measured.wall.as_secs_f64(),
        row.measured.cpu_us_per_msg(),
        row.server_cpu_us_per_msg()
    );
    Ok(row)
}

/// Runs the scale suite against `server` (single node, already holding nothing of ours) and
/// a three-node cluster it starts itself.
pub(super) async fn run(
    args: &Args,
    programs: &Programs,
    js: &Js,
    url: &str,
    server_pids: &[u32],
    work: &Path,
) -> Result<Vec<ScaleRow>> {
    let mut rows = Vec::new();
    let stream = Stream { name: "BENCHSCALE", subject_root: "benchscale", total: args.scale_messages, subjects: 8 };
    publish_stream(js, stream).await;
    let scratch = tempfile::tempdir()?;
    let out = scratch.path().join("out");
    let worker = |path: &Path, envs: Vec<(&'static str, String)>| {
        let program = programs.nats_sink.clone();
        let path = path.to_path_buf();
        move || {
            let mut cmd = Command::new(&program);
            cmd.arg("run").arg(&path).envs(envs.clone());
            cmd
        }
    };

    // 1, 2, 4 workers, file sink with fsync.
    let file_sink = json!({"type": "file", "directory": out, "fsync": true});
    let path = write(&work.join("scale-file.json"), &config(url, stream, args, file_sink.clone()))?;
    for workers in [1, 2, 4] {
        rows.push(
            measure_workers(
                "file sink, fsync on",
                workers,
                worker(&path, Vec::new()),
                js,
                stream,
                &Reset::Dir(&out),
                server_pids,
                work,
            )
            .await?,
        );
    }

    // 1, 2, 4 workers, MySQL upsert into one table.
    let password = format!("bench-{:016x}", rand::random::<u64>());
    let addr = sinks_testkit::shared_mysql().map_err(anyhow::Error::msg)?;
    let server = TestServer::new(addr.host.clone(), addr.port);
    mysql_bench_user(&server, &password).await?;
    let sink = json!({"type": "mysql", "host": addr.host, "port": addr.port, "database": "test", "user": MYSQL_BENCH_USER,
                      "password_env": MYSQL_PASSWORD_ENV, "table": MYSQL_TABLE, "mode": "upsert", "auto_create": true});
    let path = write(&work.join("scale-mysql.json"), &config(url, stream, args, sink))?;
    for workers in [1, 2, 4] {
        let envs = vec![(MYSQL_PASSWORD_ENV, password.clone())];
        rows.push(
            measure_workers(
                "mysql sink, upsert",
                workers,
                worker(&path, envs),
                js,
                stream,
                &Reset::Table(&server, MYSQL_TABLE),
                server_pids,
                work,
            )
            .await?,
        );
    }

    // Single node R1 against a three-node cluster R3: one worker, blackhole and file sink (the
    // single-node file run is the 1-worker run above).
    let blackhole = json!({"type": "blackhole"});
    let single_blackhole = write(&work.join("scale-blackhole.json"), &config(url, stream, args, blackhole.clone()))?;
    rows.push(
        measure_workers(
            "blackhole sink, single node R1",
            1,
            worker(&single_blackhole, Vec::new()),
            js,
            stream,
            &Reset::None,
            server_pids,
            work,
        )
        .await?,
    );
    let cluster = NatsCluster::start().await;
    let cjs = cluster.js().await;
    let cluster_stream =
        Stream { name: "BENCHSCALER3", subject_root: "benchscaler3", total: args.scale_messages, subjects: 8 };
    cluster.create_stream(&cjs, cluster_stream.name, &[&format!("{}.>", cluster_stream.subject_root)], 3).await;
    publish_stream_existing(&cjs, cluster_stream).await;
    let cluster_pids = cluster.pids();
    let with_urls = |sink: serde_json::Value| {
        let mut c = config(&cluster.url(0), cluster_stream, args, sink);
        c["nats"]["urls"] = json!(cluster.urls());
        c
    };
    let r3_blackhole = write(&work.join("scale-r3-blackhole.json"), &with_urls(blackhole))?;
    rows.push(
        measure_workers(
            "blackhole sink, 3-node cluster R3",
            1,
            worker(&r3_blackhole, Vec::new()),
            &cjs,
            cluster_stream,
            &Reset::None,
            &cluster_pids,
            work,
        )
        .await?,
    );
    let r3_file = write(&work.join("scale-r3-file.json"), &with_urls(file_sink))?;
    rows.push(
        measure_workers(
            "file sink, fsync on, 3-node cluster R3",
            1,
            worker(&r3_file, Vec::new()),
            &cjs,
            cluster_stream,
            &Reset::Dir(&out),
            &cluster_pids,
            work,
        )
        .await?,
    );
    drop(cluster);
    Ok(rows)
}

/// Publishes the benchmark messages into a stream that already exists (the cluster's R3 one).
async fn publish_stream_existing(js: &Js, stream: Stream) {
    let msgs = (0..stream.total)
        .map(|i| {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("bench-{i}").as_str());
            (format!("{}.orders.k{}", stream.subject_root, i % stream.subjects), h, super::payload(i))
        })
        .collect();
    sinks_testkit::js_publish_all(js, msgs).await;
}

/// The scale section of the report.
pub(super) fn render(args: &Args, rows: &[ScaleRow]) -> String {
    let mut md = format!(
        "\n## Scale\n\n{} messages on 8 subjects in one stream, one durable consumer, batch {}, {} batches in flight per worker. \
         Workers' CPU is summed over the worker processes; server CPU is the nats-server process(es).\n\n",
        args.scale_messages, args.batch, args.in_flight
    );
    md.push_str("| run | workers | msgs/s | × 1 worker | wall s | workers' CPU µs/msg | server CPU µs/msg | peak RSS MiB (one worker) |\n");
    md.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for row in rows {
        let base = rows.iter().find(|r| r.group == row.group && r.workers == 1).map(|r| r.measured.rate());
        let speedup = base.map_or("–".to_owned(), |b| format!("{:.2}", row.measured.rate() / b));
        md.push_str(&format!(
            "| {} | {} | {:.0} | {} | {:.2} | {:.1} | {:.1} | {:.1} |\n",
            row.group,
            row.workers,
            row.measured.rate(),
            speedup,
            row.measured.wall.as_secs_f64(),
            row.measured.cpu_us_per_msg(),
            row.server_cpu_us_per_msg(),
            row.measured.peak_rss_mib()
        ));
    }
    md
}
