//! The Oracle sink's own CPU cost per row, measured over the scripted driver seam (no Oracle
//! database can be had here, so database throughput is not measured).
//!
//! `oracle_scripted URL STREAM SUBJECT COUNT BATCH IN_FLIGHT` runs, in this process and in
//! order:
//! 1. `direct`: the sink's `write` called in a loop on COUNT prepared envelopes
//!    (batches of BATCH, one at a time): row mapping, statement binds, the hop to the sink's
//!    blocking pool, the per-row outcome logic, and the scripted database.
//! 2. `runner-blackhole`: the real runner consuming STREAM (COUNT messages) into the
//!    blackhole sink: the framework's cost without a sink.
//! 3. `runner-oracle`: the same runner and stream into the Oracle sink over the scripted
//!    database (`merge` mode, the reference's default table).
//!
//! For each it prints one JSON line: process CPU time (user + system, from
//! `/proc/self/stat`), the time spent inside the scripted driver's calls (wall time under
//! its lock: an upper bound of the backend's CPU), and wall time. The scripted database
//! keeps every row in memory; statement recording is off.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use serde_json::json;
use sink_oracle::OracleSink;
use sink_oracle::certify::ScriptedHarness;
use sink_oracle::driver::scripted::ScriptedDriver;
use sinks_contract::testing::envelope_with;
use sinks_contract::{Headers, Sink};
use sinks_runtime::Config;
use sinks_runtime::blackhole::{BlackholeConfig, BlackholeSink};

/// Process CPU time so far (user + system).
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64)
}

fn clock_ticks() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

#[path = "support/order.rs"]
mod order;

/// The 256-byte JSON order of the other suites (`support/order.rs`).
fn payload(i: usize) -> Bytes {
    Bytes::from(order::payload(i))
}

/// A fresh scripted database and an Oracle sink over it, opened.
async fn oracle_sink(table: &str) -> Result<(OracleSink, ScriptedDriver)> {
    let (sink, driver) =
        ScriptedHarness::sink(table, json!({"conflict_policy": null})).await.map_err(anyhow::Error::msg)?;
    driver.set_recording(false);
    Ok((sink, driver))
}

fn report(phase: &str, rows: usize, cpu: Duration, backend: Duration, wall: Duration) {
    let per = |d: Duration| d.as_secs_f64() * 1e6 / rows as f64;
    println!(
        "{}",
        json!({
            "phase": phase, "rows": rows,
            "cpu_us_per_row": per(cpu), "backend_us_per_row": per(backend), "wall_s": wall.as_secs_f64(),
        })
    );
}

async fn direct(count: usize, batch: usize) -> Result<()> {
    let (sink, driver) = oracle_sink("BENCH_DIRECT").await?;
    let envelopes: Vec<_> = (0..count)
        .map(|i| {
            let headers = Headers::new().with("Nats-Msg-Id", format!("bench-{i}"));
            envelope_with("BENCH", i as u64 + 1, &format!("bench.orders.k{}", i % 8), payload(i), headers, 1)
        })
        .collect();
    let (cpu0, backend0, start) = (cpu(), driver.backend_time(), Instant::now());
    for chunk in envelopes.chunks(batch) {
        let outcomes =
            sink.write(chunk, sinks_contract::DEFAULT_BUDGET).await.map_err(|e| anyhow::anyhow!(e.display_chain()))?;
        if outcomes.iter().any(|o| !matches!(o, sinks_contract::MessageOutcome::Committed)) {
            bail!(
                "a row was not committed: {:?}",
                outcomes.iter().find(|o| !matches!(o, sinks_contract::MessageOutcome::Committed))
            );
        }
    }
    report("direct", count, cpu() - cpu0, driver.backend_time() - backend0, start.elapsed());
    if driver.committed("BENCH_DIRECT").len() != count {
        bail!("direct: not every row was stored");
    }
    Ok(())
}

async fn settled(js: &async_nats::jetstream::Context, stream: &str, consumer: &str, count: usize) -> bool {
    let Ok(s) = js.get_stream(stream).await else { return false };
    match s.consumer_info(consumer).await {
        Ok(i) => i.ack_floor.stream_sequence >= count as u64 && i.num_pending == 0 && i.num_ack_pending == 0,
        Err(_) => false,
    }
}

#[allow(clippy::too_many_arguments)]
async fn through_runner(
    phase: &str,
    js: &async_nats::jetstream::Context,
    url: &str,
    stream: &str,
    subject: &str,
    count: usize,
    batch: usize,
    in_flight: usize,
    sink: Arc<dyn Sink>,
    driver: Option<&ScriptedDriver>,
) -> Result<()> {
    let consumer = format!("bench-{phase}");
    let config = Config::from_value(json!({
        "nats": {"url": url, "stream": stream, "consumer": consumer, "subject": subject},
        "delivery": {"batch_size": batch, "batch_timeout_ms": 100, "max_in_flight_batches": in_flight},
        "logging": {"level": "WARNING"},
        "sink": {"type": sink.name()},
    }))
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let backend = || driver.map(ScriptedDriver::backend_time).unwrap_or_default();
    let (cpu0, backend0, start) = (cpu(), backend(), Instant::now());
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(sinks_runtime::run(config, sink, async move {
        let _ = rx.await;
    }));
    let deadline = Instant::now() + Duration::from_secs(1200);
    while !settled(js, stream, &consumer, count).await {
        if task.is_finished() || Instant::now() > deadline {
            bail!("{phase}: the runner stopped or took too long");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (cpu1, backend1, wall) = (cpu(), backend(), start.elapsed());
    let _ = stop.send(());
    task.await.context("runner task")?.map_err(|e| anyhow::anyhow!("{e}"))?;
    report(phase, count, cpu1 - cpu0, backend1 - backend0, wall);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, stream, subject, count, batch, in_flight] = args.as_slice() else {
        eprintln!("usage: oracle_scripted URL STREAM SUBJECT COUNT BATCH IN_FLIGHT");
        std::process::exit(2);
    };
    let (count, batch, in_flight): (usize, usize, usize) = (count.parse()?, batch.parse()?, in_flight.parse()?);
    direct(count, batch).await?;
    let js = async_nats::jetstream::new(async_nats::connect(url.as_str()).await?);
    let blackhole: Arc<dyn Sink> = Arc::new(BlackholeSink::new(BlackholeConfig::default()));
    through_runner("runner-blackhole", &js, url, stream, subject, count, batch, in_flight, blackhole, None).await?;
    let (sink, driver) = oracle_sink("BENCH_RUNNER").await?;
    through_runner("runner-oracle", &js, url, stream, subject, count, batch, in_flight, Arc::new(sink), Some(&driver))
        .await?;
    if driver.committed("BENCH_RUNNER").len() != count {
        bail!("runner-oracle: not every row was stored");
    }
    Ok(())
}
