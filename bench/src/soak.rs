//! `cargo xtask soak [--minutes M] [--seed S] [--sinks file,http,mysql,s3]`: the chaos soak.
//!
//! For each sink, half the time against a single nats-server and half against a node of a
//! three-node cluster (R3 streams), the real `nats-sink` binary consumes a steady publisher
//! while a scheduler seeded by `--seed` injects faults at random moments: `kill -9` of the
//! sink and SIGTERM (each followed by a restart), the nats-server (or one cluster node)
//! killed and restarted, and the sink's destination failing (HTTP 503 bursts and stalled
//! answers, MariaDB killed and restarted, SeaweedFS stopped and started, the file sink's disk
//! full). Once per phase the nats-server is killed while the sink is idle (it must consume
//! again when traffic resumes), and once the source stream is deleted and created again
//! under the running sink, after which the operator's decision (a new epoch) is applied. The
//! consumer has `max_deliver: 3`, so exhaustion really happens, and the DLQ is on.
//! When the time is up the faults stop, everything heals, the publisher stops and the sink
//! drains. The checker then compares the stream with the destination (read back without the
//! sink) and the DLQ: every message in the destination exactly once or dead-lettered with a
//! reason, none in neither, none stored twice; and `nats-sink reconcile` must agree. A
//! message both stored once and dead-lettered is a violation when its dead letter gives a
//! permanent reason (it could never be written, yet it was); when the reason is that its
//! deliveries ran out on temporary failures it is an ambiguous commit (a write committed, its
//! answer lost, the later deliveries failed while the destination was down), counted in its
//! own column: nothing lost, nothing doubled, and replaying the dead letter is a duplicate.
//! The table (faults by kind, messages, duplicates absorbed, rescued, dead-lettered,
//! dead-lettered though stored, longest outage, drain time) is printed and written to
//! `target/soak/report.md`; any violation fails the command. `cargo xtask test` runs a short
//! seeded soak of the file and HTTP sinks.

mod check;
pub(crate) mod faults;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use async_nats::HeaderMap;
use async_nats::jetstream::Context as Js;
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use faults::{Destination, Fault, Nats};
use sinks_testkit::crash::{Launch, Running};

/// Options of `cargo xtask soak`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// Minutes in all (shared by the sinks; each sink's time is split between a single server
    /// and a cluster).
    #[arg(long, default_value_t = 10.0)]
    pub(crate) minutes: f64,
    /// Seed of the fault scheduler (the same seed gives the same fault plan).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Sinks to soak, comma-separated: `file`, `http`, `mysql`, `s3`.
    #[arg(long, default_value = "file,http,mysql,s3")]
    pub(crate) sinks: String,
    /// Messages published per second.
    #[arg(long, default_value_t = 200)]
    pub(crate) rate: u64,
    /// The `nats-sink` binary to soak, already built (the soak test of `cargo xtask test`
    /// passes the test build's); without it, `cargo build -p sinks-bin` makes one.
    #[arg(long, value_name = "PATH")]
    pub(crate) bin: Option<std::path::PathBuf>,
}

const STREAM: &str = "SOAK";
const CONSUMER: &str = "soak";
const SUBJECTS: u64 = 4;
/// The consumer's `max_deliver`: small, so that exhaustion really happens.
const MAX_DELIVER: u64 = 3;

/// One phase: a sink on a topology for a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topology {
    /// One nats-server.
    Single,
    /// A three-node cluster, R3 streams.
    Cluster,
}

impl Topology {
    fn as_str(self) -> &'static str {
        match self {
            Self::Single => "single server",
            Self::Cluster => "3-node cluster",
        }
    }
}

/// What one phase did and found.
#[derive(Debug, Default)]
pub(crate) struct PhaseReport {
    pub(crate) sink: String,
    pub(crate) topology: &'static str,
    pub(crate) faults: BTreeMap<&'static str, u32>,
    pub(crate) messages: u64,
    pub(crate) delivered: u64,
    pub(crate) redeliveries: u64,
    pub(crate) rescued: u64,
    pub(crate) rescue_dead_lettered: u64,
    pub(crate) dead_lettered: u64,
    /// Stored once and dead-lettered after its deliveries ran out on temporary failures (an
    /// ambiguous commit): not a violation.
    pub(crate) stored_though_dead_lettered: u64,
    pub(crate) longest_outage: Duration,
    pub(crate) drain: Duration,
    pub(crate) violations: Vec<String>,
    /// Dead-lettered after temporary failures (their deliveries ran out while the
    /// destination was down), stored or not: what riding out outages is to keep near zero.
    pub(crate) dead_lettered_temporary: u64,
    /// Dead-lettered for a permanent reason.
    pub(crate) dead_lettered_permanent: u64,
    /// Epochs of the source stream (1 + times it was re-created).
    pub(crate) epochs: usize,
    /// Findings that are not violations (the dead letters of ambiguous commits), listed under
    /// the table.
    pub(crate) notes: Vec<String>,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let sinks: Vec<String> = args.sinks.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
    for s in &sinks {
        if !faults::SINKS.contains(&s.as_str()) {
            bail!("unknown sink {s:?} for the soak; known: {}", faults::SINKS.join(", "));
        }
    }
    if sinks.is_empty() || args.minutes <= 0.0 {
        bail!("nothing to soak: give --sinks and a positive --minutes");
    }
    let bin = match &args.bin {
        Some(bin) if bin.is_file() => bin.clone(),
        Some(bin) => bail!("no nats-sink binary at {}", bin.display()),
        None => {
            crate::cargo(&["build", "--quiet", "-p", "sinks-bin"], &[])?;
            sinks_testkit::debug_nats_sink()
        }
    };
    let phase = Duration::from_secs_f64(args.minutes * 60.0 / (sinks.len() * 2) as f64);
    let rt = tokio::runtime::Runtime::new()?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut reports = Vec::new();
    for sink in &sinks {
        for topology in [Topology::Single, Topology::Cluster] {
            eprintln!("soak: {sink} on a {} for {:.0} s (seed {})", topology.as_str(), phase.as_secs_f64(), args.seed);
            let seed = rng.random::<u64>();
            let report = rt.block_on(soak(&bin, sink, topology, phase, seed, args.rate))?;
            eprintln!("soak: {sink} on a {}: {}", topology.as_str(), verdict(&report));
            reports.push(report);
        }
    }
    let table = render(&args, &reports);
    println!("{table}");
    let dir = sinks_testkit::workspace_root().join("target/soak");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("report.md"), &table)?;
    let failed: Vec<String> = reports
        .iter()
        .flat_map(|r| r.violations.iter().map(move |v| format!("{} ({}): {v}", r.sink, r.topology)))
        .collect();
    if !failed.is_empty() {
        bail!("the soak found {} violation(s): {}", failed.len(), failed.join("; "));
    }
    Ok(())
}

fn verdict(r: &PhaseReport) -> String {
    if r.violations.is_empty() {
        format!(
            "{} messages in {} epoch(s): {} delivered, {} dead-lettered ({} after temporary failures; {} rescued), {} dead-lettered though stored (ambiguous commit), {} faults, drained in {:.1} s",
            r.messages,
            r.epochs,
            r.delivered,
            r.dead_lettered,
            r.dead_lettered_temporary,
            r.rescued,
            r.stored_though_dead_lettered,
            r.faults.values().sum::<u32>(),
            r.drain.as_secs_f64()
        )
    } else {
        format!("{} violation(s): {}", r.violations.len(), r.violations.join("; "))
    }
}

/// The sink's config for this phase.
fn write_config(dir: &Path, urls: &[String], sink: &serde_json::Value) -> Result<PathBuf> {
    let config = json!({
        "nats": {"urls": urls, "stream": STREAM, "consumer": CONSUMER, "subject": "soak.>"},
        "consumer_management": {"max_deliver": MAX_DELIVER, "ack_wait_seconds": 4},
        "delivery": {"batch_size": 100, "batch_timeout_ms": 200, "max_in_flight_batches": 2,
                     "retry_backoff_ms": 100, "retry_backoff_max_ms": 1000},
        "dead_letter": {"enabled": true, "subject": "soakdlq.records"},
        "logging": {"level": "INFO", "format": "json"},
        "sink": sink,
    });
    let path = dir.join("soak-config.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
    Ok(path)
}

/// Publishes `rate` messages per second until `stop`, each with a unique `Nats-Msg-Id`;
/// retries a publish until the stream has it (through outages: the duplicate window makes a
/// retried publish one message). Returns how many distinct messages it published. While
/// `held` is set it publishes nothing (a fault that needs a quiet stream).
async fn publisher(js: Js, rate: u64, stop: Arc<AtomicBool>, held: Arc<AtomicBool>, published: Arc<AtomicU64>) {
    let every = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let mut next = Instant::now();
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) {
        if held.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            next = Instant::now();
            continue;
        }
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("soak-{i}").as_str());
        let payload = Bytes::from(format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat((i % 64) as usize)));
        let subject = format!("soak.k{}", i % SUBJECTS);
        loop {
            let sent = async {
                js.publish_with_headers(subject.clone(), headers.clone(), payload.clone()).await?.await?;
                Ok::<(), async_nats::Error>(())
            };
            match tokio::time::timeout(Duration::from_secs(3), sent).await {
                Ok(Ok(())) => break,
                _ if stop.load(Ordering::SeqCst) && i == 0 => return,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        i += 1;
        published.store(i, Ordering::SeqCst);
        next += every;
        let now = Instant::now();
        if next > now {
            tokio::time::sleep(next - now).await;
        } else {
            next = now;
        }
    }
}

/// One soak phase.
async fn soak(bin: &Path, sink: &str, topology: Topology, time: Duration, seed: u64, rate: u64) -> Result<PhaseReport> {
    let mut rng = StdRng::seed_from_u64(seed);
    let work = tempfile::tempdir()?;
    let mut nats = Nats::start(topology).await;
    let js = nats.js().await;
    nats.create_stream(&js, STREAM, "soak.>").await;
    nats.create_stream(&js, "SOAKDLQ", "soakdlq.records").await;
    let mut destination = Destination::start(sink, work.path()).await?;
    let config = write_config(work.path(), &nats.urls(), &destination.target.sink_section)?;
    let env = destination.target.env.clone();
    let launch = Launch { bin, config: config.clone(), env: &env };
    let logs = work.path().join("logs");
    std::fs::create_dir_all(&logs)?;
    let mut run_no = 0usize;
    let mut next_log = || {
        run_no += 1;
        logs.join(format!("run-{run_no}.log"))
    };
    let mut running = Some(Running::start(&launch, next_log())?);
    let stop = Arc::new(AtomicBool::new(false));
    let held = Arc::new(AtomicBool::new(false));
    let published = Arc::new(AtomicU64::new(0));
    let publishing =
        tokio::spawn(publisher(js.clone(), rate, Arc::clone(&stop), Arc::clone(&held), Arc::clone(&published)));
    let mut report = PhaseReport { sink: sink.to_owned(), topology: topology.as_str(), ..Default::default() };
    // The earlier epochs of the stream (each one's messages, read before it was deleted),
    // and how many messages were published before the current one.
    let mut epochs: Vec<Vec<(u64, Bytes)>> = Vec::new();
    let mut published_before = 0u64;
    let started = Instant::now();
    let mut last_fault = Instant::now();
    // The two faults that need a quiet stream come once each, at fixed points of the phase.
    let mut scheduled = vec![(time.mul_f64(0.5), Fault::StreamRecreate), (time.mul_f64(0.25), Fault::NatsIdleKill)];
    while started.elapsed() < time {
        tokio::time::sleep(Duration::from_millis(rng.random_range(2000..6000))).await;
        if started.elapsed() >= time {
            break;
        }
        let due = scheduled.iter().position(|(at, _)| started.elapsed() >= *at);
        let fault = match due {
            Some(i) => scheduled.remove(i).1,
            None => Fault::pick(&mut rng, sink),
        };
        let outage = Duration::from_millis(rng.random_range(300..6000));
        *report.faults.entry(fault.name()).or_default() += 1;
        if !matches!(fault, Fault::StreamRecreate) {
            report.longest_outage = report.longest_outage.max(outage);
        }
        match fault {
            Fault::SinkKill => {
                if let Some(r) = running.take() {
                    r.kill9()?;
                }
                tokio::time::sleep(outage.min(Duration::from_secs(2))).await;
                running = Some(Running::start(&launch, next_log())?);
            }
            Fault::SinkTerm => {
                if let Some(r) = running.take() {
                    let code = r.terminate()?;
                    if code != Some(0) {
                        report.violations.push(format!("SIGTERM: nats-sink exited with {code:?}"));
                    }
                }
                running = Some(Running::start(&launch, next_log())?);
            }
            Fault::NatsKill => nats.outage(&mut rng, outage).await,
            Fault::NatsIdleKill => {
                held.store(true, Ordering::SeqCst);
                let quiet = published.load(Ordering::SeqCst) - published_before;
                if !check::drained(&js, quiet, Duration::from_secs(60)).await {
                    report.notes.push("nats kill while idle: the sink did not drain within 60 s first".into());
                }
                nats.outage(&mut rng, outage).await;
                let before = check::consumer_state(&js).await.0.map_or(0, |(_, _, d)| d);
                held.store(false, Ordering::SeqCst);
                // Traffic resumes: the sink must take it (a consumer that never resumes after an
                // idle server restart is a known failure of other NATS consumers).
                let resumed = sinks_testkit::wait_until(Duration::from_secs(60), || async {
                    check::consumer_state(&js).await.0.is_some_and(|(_, _, d)| d > before)
                })
                .await;
                if !resumed {
                    report.violations.push(format!(
                        "after the nats-server was killed while idle, the sink consumed nothing for 60 s (consumer {:?})",
                        check::consumer_state(&js).await
                    ));
                }
            }
            Fault::StreamRecreate => {
                held.store(true, Ordering::SeqCst);
                let quiet = published.load(Ordering::SeqCst) - published_before;
                if check::drained(&js, quiet, Duration::from_secs(120)).await {
                    // The operator drained the sink, deletes the stream and creates it again.
                    let old: Vec<(u64, Bytes)> = sinks_testkit::read_stream(&js, STREAM)
                        .await
                        .into_iter()
                        .map(|(seq, _, _, payload)| (seq, payload))
                        .collect();
                    js.delete_stream(STREAM).await.context("deleting the source stream")?;
                    nats.create_stream(&js, STREAM, "soak.>").await;
                    epochs.push(old);
                    published_before = published.load(Ordering::SeqCst);
                    held.store(false, Ordering::SeqCst);
                    decide_new_epoch(bin, &config, &env, &mut report).await;
                } else {
                    held.store(false, Ordering::SeqCst);
                    report.notes.push("stream re-created: skipped, the sink did not drain within 120 s first".into());
                }
            }
            other => destination.outage(other, outage).await?,
        }
        last_fault = Instant::now();
        // A sink that died on its own is a finding (and is restarted to go on).
        if let Some(r) = running.as_mut()
            && let Some(status) = r.child.try_wait()?
        {
            report.violations.push(format!("nats-sink exited by itself ({status}):\n{}", r.tail()));
            running = Some(Running::start(&launch, next_log())?);
        }
    }
    // Everything heals; the publisher stops; the sink drains.
    stop.store(true, Ordering::SeqCst);
    let _ = publishing.await;
    report.messages = published.load(Ordering::SeqCst);
    let drained = check::drained(&js, report.messages - published_before, Duration::from_secs(300)).await;
    report.drain = last_fault.elapsed();
    if !drained {
        report.violations.push(format!(
            "not drained within 300 s of the last fault; consumer {:?}",
            check::consumer_state(&js).await
        ));
    }
    if let Some(r) = running.take() {
        let code = r.terminate()?;
        if code != Some(0) {
            report.violations.push(format!("the final SIGTERM: exit {code:?}"));
        }
    }
    report.epochs = epochs.len() + 1;
    check::verify(&js, &destination, &config, &logs, &epochs, &mut report).await.context("checking the soak")?;
    if !report.violations.is_empty() || report.stored_though_dead_lettered > 0 {
        keep_logs(&logs, sink, topology);
    }
    drop(destination);
    drop(nats);
    Ok(report)
}

/// The operator's decision after the stream was created again: `nats-sink stream-identity
/// CONFIG --accept new-epoch`, tried until the change is decided (the sink may not have
/// bound the new stream yet; the command finds the change itself).
async fn decide_new_epoch(bin: &Path, config: &Path, env: &[(String, String)], report: &mut PhaseReport) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < deadline {
        let out = std::process::Command::new(bin)
            .args(["stream-identity", config.to_str().unwrap_or_default(), "--accept", "new-epoch"])
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output();
        if let Ok(out) = out {
            last = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            if out.status.success() && last.contains("decided new-epoch") {
                return;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    report.violations.push(format!("the new epoch could not be decided within 60 s: {}", last.trim()));
}

/// Copies the sink's logs of a phase that found a violation or an ambiguous commit to `target/soak/logs/<sink>-<topology>/`
/// (the phase's own directory is temporary), and says where.
fn keep_logs(logs: &Path, sink: &str, topology: Topology) {
    let kind = match topology {
        Topology::Single => "single",
        Topology::Cluster => "cluster",
    };
    let dir = sinks_testkit::workspace_root().join(format!("target/soak/logs/{sink}-{kind}"));
    let _ = std::fs::remove_dir_all(&dir);
    let copied = std::fs::create_dir_all(&dir).is_ok()
        && std::fs::read_dir(logs)
            .into_iter()
            .flatten()
            .flatten()
            .all(|e| std::fs::copy(e.path(), dir.join(e.file_name())).is_ok());
    if copied {
        eprintln!("soak: the sink's logs of this phase are in {}", dir.display());
    }
}

/// The report as a markdown table.
fn render(args: &Args, reports: &[PhaseReport]) -> String {
    let mut out = format!(
        "# Chaos soak\n\n{} minutes, seed {}, {} messages/s, sinks {}; `max_deliver: 3`, AckWait 4 s, DLQ on.\n\n",
        args.minutes, args.seed, args.rate, args.sinks
    );
    out.push_str("| sink | NATS | faults by kind | messages | epochs | delivered | duplicates absorbed | rescued | dead-lettered (by rescue) | dead-lettered after temporary failures (share) | dead-lettered permanently | dead-lettered though stored (ambiguous commit) | longest outage s | drain s | verdict |\n");
    out.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for r in reports {
        let faults: Vec<String> = r.faults.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let share = if r.messages == 0 { 0.0 } else { r.dead_lettered_temporary as f64 * 100.0 / r.messages as f64 };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} ({share:.2} %) | {} | {} | {:.1} | {:.1} | {} |\n",
            r.sink,
            r.topology,
            faults.join(", "),
            r.messages,
            r.epochs,
            r.delivered,
            r.redeliveries,
            r.rescued,
            r.dead_lettered,
            r.rescue_dead_lettered,
            r.dead_lettered_temporary,
            r.dead_lettered_permanent,
            r.stored_though_dead_lettered,
            r.longest_outage.as_secs_f64(),
            r.drain.as_secs_f64(),
            if r.violations.is_empty() { "exactly once or dead-lettered; reconcile agrees" } else { "VIOLATED" }
        ));
    }
    for r in reports {
        for v in r.violations.iter().chain(&r.notes) {
            out.push_str(&format!("\n- {} ({}): {v}", r.sink, r.topology));
        }
    }
    out.push('\n');
    out
}
