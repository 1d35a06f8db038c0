//! Crash certification (clauses K1 and K2 of docs/sink-contract.md) with the real
//! `nats-sink` binary and a private JetStream server, run by each sink crate's
//! `tests/certify.rs` ([`crash_tests!`](crate::crash_tests)) and, through cargo, by
//! `cargo xtask certify`. The soak and the NoSQL sink's store-kill clauses start and kill the
//! binary with the same parts ([`Launch`], [`Running`]).
//!
//! K1: publish N messages, run `nats-sink`, SIGKILL it at random points of progress and
//! restart it after each kill until everything is acknowledged; the destination, read back
//! without the sink, must hold every message exactly once with its payload.
//! K2: publish more, stop `nats-sink` with SIGTERM mid-run (exit 0 expected), restart until
//! everything is acknowledged; JetStream must show zero redeliveries for that phase.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{NatsServer, js_publish_all, stream_with_subjects};
use anyhow::{Context, Result, anyhow, bail};
use async_nats::HeaderMap;
use async_nats::jetstream::Context as Js;
use bytes::Bytes;
use rand::Rng;
use serde_json::json;
use sinks_certify::crash::{mixed_payload, verify};
use sinks_certify::{self as certify, CaseResult, CrashTarget, Harness, Outcome};

pub use crate::sizes::{GRACEFUL_MESSAGES_ENV, KILLS_ENV, MESSAGES_ENV, Plan};

/// The test body of [`crash_tests!`](crate::crash_tests): K1 and K2 for `harness` with the
/// `nats-sink` binary this workspace's build made ([`crate::debug_nats_sink`]) and the plan
/// from the environment; each result is recorded ([`sinks_certify::record_case`]) and
/// asserted like a contract clause ([`sinks_certify::assert_case`]).
pub async fn crash_clauses(harness: &dyn Harness) {
    let plan = Plan::from_env().unwrap_or_else(|e| panic!("{e}"));
    let bin = crate::debug_nats_sink();
    let (cases, counts) = if bin.is_file() || harness.crash_unavailable().is_some() {
        certify(harness, &bin, plan).await
    } else {
        let fail = Outcome::Fail(format!(
            "cannot run: no nats-sink binary at {} (build it: cargo build -p sinks-bin)",
            bin.display()
        ));
        (vec![CaseResult::new("K1", K1, fail.clone()), CaseResult::new("K2", K2, fail)], json!(null))
    };
    eprintln!("crash certification counts: {counts}");
    for case in &cases {
        certify::record_case(harness.name(), case, Some(&counts));
    }
    for case in &cases {
        certify::assert_case(harness.name(), case);
    }
}

/// Generates the crash certification test (`k1_k2_crash_certification`) for `$harness` (an
/// expression evaluated in the test): `sinks_testkit::crash_tests!(FileHarness);`.
#[macro_export]
macro_rules! crash_tests {
    ($harness:expr) => {
        /// K1 and K2 (docs/sink-contract.md): the real `nats-sink` killed and stopped mid-run.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn k1_k2_crash_certification() {
            let harness = $harness;
            $crate::crash::crash_clauses(&harness).await;
        }
    };
}

/// The title of K1.
pub const K1: &str = "kill -9 at random moments loses and duplicates nothing";
/// The title of K2.
pub const K2: &str = "graceful stop causes zero redeliveries";

/// The stream every crash run consumes (on its own private server).
pub const STREAM: &str = "CRASHCERT";
const CONSUMER: &str = "crash-certification";

/// How to start `nats-sink` for one certification (or soak) run.
#[derive(Debug)]
pub struct Launch<'a> {
    /// The `nats-sink` binary.
    pub bin: &'a Path,
    /// Its config file.
    pub config: PathBuf,
    /// Extra environment (the sink's secrets, e.g. S3 keys named by `*_env` fields).
    pub env: &'a [(String, String)],
}

/// A running `nats-sink`, its stderr in `log`; killed when dropped.
#[derive(Debug)]
pub struct Running {
    /// The process.
    pub child: Child,
    log: PathBuf,
}

impl Running {
    /// Starts `nats-sink run` as `launch` says, its stderr into `log`.
    pub fn start(launch: &Launch<'_>, log: PathBuf) -> Result<Self> {
        let (bin, config) = (launch.bin, &launch.config);
        let child = Command::new(bin)
            .args(["run", config.to_str().unwrap_or_default()])
            .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        Ok(Self { child, log })
    }

    fn signal(&self, sig: &str) -> Result<()> {
        let ok = Command::new("kill").args([sig, &self.child.id().to_string()]).status()?;
        if !ok.success() {
            bail!("kill {sig} failed");
        }
        Ok(())
    }

    /// Waits until the log has the start-up line (`consuming`, the consumer bound), or fails
    /// after `timeout` or when the process has exited.
    pub async fn wait_consuming(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if std::fs::read_to_string(&self.log).is_ok_and(|log| log.contains("consuming")) {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("nats-sink exited ({status}) before it was consuming; log {}", self.log.display());
            }
            if Instant::now() > deadline {
                bail!("nats-sink not consuming after {timeout:?}; log {}", self.log.display());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL, and waits for the exit.
    pub fn kill9(mut self) -> Result<()> {
        self.signal("-KILL")?;
        self.child.wait()?;
        Ok(())
    }

    /// SIGTERM, then the exit code (or an error after 120 s).
    pub fn terminate(mut self) -> Result<Option<i32>> {
        self.signal("-TERM")?;
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status.code());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        bail!("nats-sink did not exit within 120 s of SIGTERM; log {}", self.log.display())
    }

    /// The last 15 lines of the log.
    pub fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the consumer reports about progress.
#[derive(Debug, Clone, Copy)]
pub struct State {
    /// Highest stream sequence below which everything is acked.
    pub ack_floor: u64,
    /// Highest stream sequence handed out so far.
    pub delivered_stream: u64,
    /// Deliveries so far, redeliveries included.
    pub deliveries: u64,
    /// Messages not yet delivered.
    pub pending: u64,
    /// Messages delivered and not yet acked.
    pub ack_pending: usize,
}

impl State {
    /// True when all of `total` messages are acknowledged and none is pending.
    pub fn settled(&self, total: u64) -> bool {
        self.ack_floor >= total && self.pending == 0 && self.ack_pending == 0
    }
}

/// The crash consumer's progress, `None` while the stream or consumer is missing.
pub async fn consumer_state(js: &Js) -> Option<State> {
    let stream = js.get_stream(STREAM).await.ok()?;
    let info = stream.consumer_info(CONSUMER).await.ok()?;
    Some(State {
        ack_floor: info.ack_floor.stream_sequence,
        delivered_stream: info.delivered.stream_sequence,
        deliveries: info.delivered.consumer_sequence,
        pending: info.num_pending,
        ack_pending: info.num_ack_pending,
    })
}

/// Polls the consumer until `cond` holds; fails when `nats-sink` exits first or `timeout`
/// passes (with the log's last lines).
pub async fn wait_for(
    js: &Js,
    what: &str,
    timeout: Duration,
    run: &mut Running,
    cond: impl Fn(State) -> bool,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(state) = consumer_state(js).await
            && cond(state)
        {
            return Ok(());
        }
        if let Some(status) = run.child.try_wait()? {
            bail!("nats-sink exited ({status}) while waiting for {what}; last log lines:\n{}", run.tail());
        }
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}; last log lines:\n{}", run.tail());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `nats-sink` until every one of `total` messages is acknowledged, then stops it with
/// SIGTERM; returns its exit code.
pub async fn run_to_completion(js: &Js, launch: &Launch<'_>, log: PathBuf, total: u64) -> Result<Option<i32>> {
    let mut run = Running::start(launch, log)?;
    wait_for(js, "every message acknowledged", Duration::from_secs(600), &mut run, |s| s.settled(total)).await?;
    // Everything may have been acknowledged before this run started (the run before drained
    // the stream before its SIGTERM): a SIGTERM before the start-up line could arrive before
    // the signal handlers are installed and kill the process by the default action.
    run.wait_consuming(Duration::from_secs(60)).await?;
    run.terminate()
}

/// Publishes messages `from..from + count` of the mixed payloads, recording each expected
/// record (by its stream sequence) in `expected`.
pub async fn publish(js: &Js, from: usize, count: usize, expected: &mut BTreeMap<String, Bytes>) {
    let msgs: Vec<(String, HeaderMap, Bytes)> = (from..from + count)
        .map(|i| {
            let mut h = HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("crash-{i}").as_str());
            let payload = mixed_payload(i);
            // A fresh stream with in-order publishes: message i gets sequence i + 1.
            expected.insert(format!("stream-sequence:{STREAM}:{}", i + 1), payload.clone());
            (format!("crash.k{}", i % 16), h, payload)
        })
        .collect();
    js_publish_all(js, msgs).await;
}

/// Writes the `nats-sink` config of a crash run into `dir` (the crash stream and consumer,
/// small batches, a 5 s AckWait) with `sink` as its sink section; returns its path.
pub fn write_config(dir: &Path, url: &str, sink: &serde_json::Value) -> Result<PathBuf> {
    let config = json!({
        "nats": {"url": url, "stream": STREAM, "consumer": CONSUMER, "subject": "crash.>"},
        "delivery": {"batch_size": 200, "batch_timeout_ms": 200, "max_in_flight_batches": 2,
                     "retry_backoff_ms": 50, "retry_backoff_max_ms": 500},
        // Messages in flight at a kill come back after AckWait; keep the run short.
        "consumer_management": {"ack_wait_seconds": 5},
        "logging": {"level": "INFO", "format": "json"},
        "sink": sink,
    });
    let path = dir.join("crash-config.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
    Ok(path)
}

/// Runs K1 and K2 for one sink. Returns the two clause results and the counts.
pub async fn certify(harness: &dyn Harness, bin: &Path, plan: Plan) -> (Vec<CaseResult>, serde_json::Value) {
    let not_run = |outcome: Outcome| {
        (vec![CaseResult::new("K1", K1, outcome.clone()), CaseResult::new("K2", K2, outcome)], json!(null))
    };
    if let Some(missing) = harness.crash_unavailable() {
        return not_run(certify::skipped(&missing));
    }
    let target = match harness.crash_target().await {
        Ok(t) => t,
        Err(reason) => return not_run(Outcome::Fail(format!("cannot run: no crash target: {reason}"))),
    };
    let mut counts = json!({});
    let (o1, o2) = match run(&target, bin, plan, &mut counts).await {
        Ok(outcomes) => outcomes,
        Err(e) => (Outcome::Fail(format!("{e:#}")), Outcome::Fail("not reached: K1 did not complete".into())),
    };
    (vec![CaseResult::new("K1", K1, o1), CaseResult::new("K2", K2, o2)], counts)
}

async fn run(
    target: &CrashTarget,
    bin: &Path,
    plan: Plan,
    counts: &mut serde_json::Value,
) -> Result<(Outcome, Outcome)> {
    let started = Instant::now();
    let work = tempfile::tempdir()?;
    let server = NatsServer::start();
    let js = server.js().await;
    stream_with_subjects(&js, STREAM, &["crash.>"]).await;
    let config = write_config(work.path(), &server.url(), &target.sink_section)?;
    let launch = Launch { bin, config, env: &target.env };
    let mut expected = BTreeMap::new();
    publish(&js, 0, plan.messages, &mut expected).await;

    // K1: kill -9 at random points of progress, restart after each.
    // One random kill point in each of `kills` equal slices of 5 %..90 % of the messages, so
    // every run makes progress before it is killed.
    let mut rng = rand::rng();
    let (low, high) = (plan.messages as u64 / 20, plan.messages as u64 * 9 / 10);
    let slice = (high - low) / plan.kills.max(1) as u64;
    let thresholds: Vec<u64> =
        (0..plan.kills as u64).map(|k| low + k * slice + rng.random_range(0..slice.max(1))).collect();
    let mut kill_points = Vec::new();
    for (i, threshold) in thresholds.iter().enumerate() {
        let log = work.path().join(format!("k1-run-{i}.log"));
        let mut run = Running::start(&launch, log)?;
        let t = *threshold;
        wait_for(&js, "progress before a kill", Duration::from_secs(300), &mut run, |s| s.delivered_stream >= t)
            .await?;
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..40))).await;
        let at = consumer_state(&js).await.map_or(0, |s| s.delivered_stream);
        run.kill9()?;
        kill_points.push(at);
    }
    let total = plan.messages as u64;
    let exit = run_to_completion(&js, &launch, work.path().join("k1-final.log"), total).await?;
    let k1_delivered = consumer_state(&js).await.map_or(0, |s| s.deliveries);
    let records = target.records.read_all().await.map_err(|e| anyhow!("read-back failed: {e}"))?;
    let verdict = verify(&expected, &records);
    counts["k1"] = json!({
        "published": plan.messages,
        "kills": plan.kills,
        "restarts": plan.kills,
        "delivered_seq_at_each_kill": kill_points,
        "deliveries": k1_delivered,
        "redeliveries": k1_delivered.saturating_sub(total),
        "read_back": verdict.read_back,
        "missing": verdict.missing.len(),
        "duplicated": verdict.duplicated.len(),
        "extra": verdict.extra.len(),
        "mismatched": verdict.mismatched.len(),
        "final_exit_code": exit,
    });
    let k1 = if !verdict.exactly_once() {
        Outcome::Fail(verdict.summary())
    } else if exit != Some(0) {
        Outcome::Fail(format!("the final run exited with {exit:?} after SIGTERM"))
    } else {
        Outcome::Pass
    };

    // K2: SIGTERM mid-run, restart, and count redeliveries.
    let before = consumer_state(&js).await.ok_or_else(|| anyhow!("consumer vanished"))?;
    publish(&js, plan.messages, plan.graceful_messages, &mut expected).await;
    let all = (plan.messages + plan.graceful_messages) as u64;
    let mut run = Running::start(&launch, work.path().join("k2-first.log"))?;
    let mid = total + plan.graceful_messages as u64 / 3;
    wait_for(&js, "progress before SIGTERM", Duration::from_secs(300), &mut run, |s| s.ack_floor >= mid).await?;
    let first_exit = run.terminate()?;
    let after_stop = consumer_state(&js).await.ok_or_else(|| anyhow!("consumer vanished"))?;
    let second_exit = run_to_completion(&js, &launch, work.path().join("k2-second.log"), all).await?;
    let after = consumer_state(&js).await.ok_or_else(|| anyhow!("consumer vanished"))?;
    let deliveries = after.deliveries - before.deliveries;
    let redeliveries = deliveries.saturating_sub(plan.graceful_messages as u64);
    let records = target.records.read_all().await.map_err(|e| anyhow!("read-back failed: {e}"))?;
    let verdict2 = verify(&expected, &records);
    counts["k2"] = json!({
        "published": plan.graceful_messages,
        "ack_floor_at_sigterm": after_stop.ack_floor,
        "unacked_after_sigterm": after_stop.ack_pending,
        "deliveries": deliveries,
        "redeliveries": redeliveries,
        "exit_codes": [first_exit, second_exit],
        "read_back": verdict2.read_back,
        "exactly_once": verdict2.exactly_once(),
    });
    counts["seconds"] = json!(started.elapsed().as_secs_f64().round());
    let k2 = if first_exit != Some(0) || second_exit != Some(0) {
        Outcome::Fail(format!("exit codes after SIGTERM: {first_exit:?}, {second_exit:?}"))
    } else if redeliveries != 0 || after_stop.ack_pending != 0 {
        Outcome::Fail(format!(
            "{redeliveries} redeliveries; {} messages left unacked at SIGTERM",
            after_stop.ack_pending
        ))
    } else if !verdict2.exactly_once() {
        Outcome::Fail(verdict2.summary())
    } else {
        Outcome::Pass
    };
    drop(server);
    Ok((k1, k2))
}
