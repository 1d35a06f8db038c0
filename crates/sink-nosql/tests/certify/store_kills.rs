//! The NoSQL sink's destination-crash clauses of its certification (after K1 and K2,
//! which kill the sink; run by `tests/certify.rs` and so by `cargo xtask certify`): the real
//! `nats-sink` binary and a private JetStream server, against
//! a private KVLite store and HTTP proxy (`sinks_testkit::KvLite`, the proxy on its default
//! durability, `COMMIT_NO_SYNC`) that the clauses kill with SIGKILL.
//!
//! - D1: KVLite and the proxy killed together mid-run, started again, then KVLite alone
//!   killed and started again: every message in the table exactly once with its payload, the
//!   sink never exits on its own, and exit 0 after SIGTERM.
//! - D2: a burst of messages, every one acknowledged in JetStream, then KVLite killed within
//!   milliseconds of the last acknowledgement and started again: every acknowledged message
//!   is in the table. With `durability: operator_confirmed` (the proxy's default then
//!   applies) D2 failed twice when it was written, 40 and 125 of 2,000 acknowledged rows
//!   missing; with the default `commit_sync` it passes (docs/nosql-sink.md).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::json;
use sink_nosql::certify::{NoSqlHarness, TableReadBack, unique_table};
use sinks_certify::crash::verify;
use sinks_certify::{CaseResult, Outcome, Records};
use sinks_testkit::crash::{self, Launch, Running};
use sinks_testkit::{KvLite, NatsServer, stream_with_subjects};

/// Messages of D1.
const D1_MESSAGES: usize = 5_000;
/// Messages of D2's burst.
const D2_MESSAGES: usize = 2_000;

/// The clauses' titles.
const D1: &str = "kill -9 of the store and the proxy mid-run loses and duplicates nothing";
const D2: &str = "kill -9 of the store right after a burst of acknowledgements loses none";

/// Runs D1 and D2 against a private store; returns their results and counts.
pub(crate) async fn certify(bin: &Path) -> (Vec<CaseResult>, serde_json::Value) {
    let mut kv = match KvLite::start().await {
        Ok(kv) => kv,
        Err(e) => {
            let fail = Outcome::Fail(format!("cannot run: no KVLite: {e}"));
            return (vec![CaseResult::new("D1", D1, fail.clone()), CaseResult::new("D2", D2, fail)], json!(null));
        }
    };
    let mut counts = json!({});
    let d1 = match d1(&mut kv, bin, &mut counts).await {
        Ok(outcome) => outcome,
        Err(e) => Outcome::Fail(format!("{e:#}\n{}", kv.log_tail())),
    };
    if kv.store_pid().is_none() || kv.proxy_pid().is_none() {
        // D1 failed half-way: D2 needs both running.
        let _ = kv.restart().await;
    }
    let d2 = match d2(&mut kv, bin, &mut counts).await {
        Ok(outcome) => outcome,
        Err(e) => Outcome::Fail(format!("{e:#}\n{}", kv.log_tail())),
    };
    (vec![CaseResult::new("D1", D1, d1), CaseResult::new("D2", D2, d2)], counts)
}

/// A fresh table on `kv` for one clause: the `sink` section (the sink's defaults, creating
/// its table) and its reader.
fn target(kv: &KvLite, prefix: &str) -> Result<(serde_json::Value, TableReadBack)> {
    let harness = NoSqlHarness::live(kv.endpoint());
    let config = harness.config(&unique_table(prefix));
    let mut section = serde_json::to_value(&config)?;
    section["type"] = "oracle_nosql".into();
    Ok((section, harness.read_back(&config)))
}

/// A private JetStream server with the certification stream, `count` messages published, and
/// the config `nats-sink` runs with.
async fn stream(
    work: &Path,
    section: &serde_json::Value,
    count: usize,
) -> Result<(NatsServer, async_nats::jetstream::Context, std::path::PathBuf, BTreeMap<String, bytes::Bytes>)> {
    let server = NatsServer::start();
    let js = server.js().await;
    stream_with_subjects(&js, crash::STREAM, &["crash.>"]).await;
    let mut expected = BTreeMap::new();
    crash::publish(&js, 0, count, &mut expected).await;
    let config = crash::write_config(work, &server.url(), section)?;
    Ok((server, js, config, expected))
}

async fn d1(kv: &mut KvLite, bin: &Path, counts: &mut serde_json::Value) -> Result<Outcome> {
    let started = Instant::now();
    let work = tempfile::tempdir()?;
    let (section, read_back) = target(kv, "d1")?;
    let (server, js, config, expected) = stream(work.path(), &section, D1_MESSAGES).await?;
    let launch = Launch { bin, config, env: &[] };
    let mut run = Running::start(&launch, work.path().join("d1.log"))?;
    let total = D1_MESSAGES as u64;
    let mut kills = Vec::new();
    for (third, what) in [(1, "store and proxy"), (2, "store")] {
        let at = total * third / 3;
        crash::wait_for(&js, "progress before a kill", Duration::from_secs(300), &mut run, |s| s.ack_floor >= at)
            .await?;
        let state = crash::consumer_state(&js).await.ok_or_else(|| anyhow!("consumer vanished"))?;
        if what == "store" {
            kv.kill_store();
        } else {
            kv.kill();
        }
        // The sink keeps running while its destination is gone.
        tokio::time::sleep(Duration::from_secs(3)).await;
        if let Some(status) = run.child.try_wait()? {
            bail!("nats-sink exited ({status}) while the {what} was down; last log lines:\n{}", run.tail());
        }
        let down = Instant::now();
        if what == "store" {
            kv.start_store().await.map_err(anyhow::Error::msg)?;
        } else {
            kv.restart().await.map_err(anyhow::Error::msg)?;
        }
        kills
            .push(json!({"killed": what, "ack_floor_at_kill": state.ack_floor, "in_flight_at_kill": state.ack_pending,
                          "restart_seconds": (down.elapsed().as_secs_f64() * 10.0).round() / 10.0}));
    }
    crash::wait_for(&js, "every message acknowledged", Duration::from_secs(600), &mut run, |s| s.settled(total))
        .await?;
    let exit = run.terminate()?;
    let deliveries = crash::consumer_state(&js).await.map_or(0, |s| s.deliveries);
    let records = read_back.read_all().await.map_err(|e| anyhow!("read-back failed: {e}"))?;
    let verdict = verify(&expected, &records);
    counts["d1"] = json!({
        "published": D1_MESSAGES,
        "kills": kills,
        "deliveries": deliveries,
        "redeliveries": deliveries.saturating_sub(total),
        "read_back": verdict.read_back,
        "missing": verdict.missing.len(),
        "duplicated": verdict.duplicated.len(),
        "extra": verdict.extra.len(),
        "mismatched": verdict.mismatched.len(),
        "exit_code": exit,
        "seconds": started.elapsed().as_secs_f64().round(),
    });
    drop(server);
    Ok(if !verdict.exactly_once() {
        Outcome::Fail(verdict.summary())
    } else if exit != Some(0) {
        Outcome::Fail(format!("nats-sink exited with {exit:?} after SIGTERM"))
    } else {
        Outcome::Pass
    })
}

async fn d2(kv: &mut KvLite, bin: &Path, counts: &mut serde_json::Value) -> Result<Outcome> {
    let started = Instant::now();
    let work = tempfile::tempdir()?;
    let (section, read_back) = target(kv, "d2")?;
    let (server, js, config, expected) = stream(work.path(), &section, D2_MESSAGES).await?;
    let launch = Launch { bin, config, env: &[] };
    let mut run = Running::start(&launch, work.path().join("d2.log"))?;
    let total = D2_MESSAGES as u64;
    // Polled every few milliseconds: the store dies as soon as the last acknowledgement shows.
    let deadline = Instant::now() + Duration::from_secs(300);
    let burst = Instant::now();
    loop {
        if crash::consumer_state(&js).await.is_some_and(|s| s.settled(total)) {
            break;
        }
        if let Some(status) = run.child.try_wait()? {
            bail!("nats-sink exited ({status}) during the burst; last log lines:\n{}", run.tail());
        }
        if Instant::now() > deadline {
            bail!("the burst was not acknowledged within 300 s; last log lines:\n{}", run.tail());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let acknowledged = burst.elapsed();
    let seen = Instant::now();
    kv.kill_store();
    let kill_ms = seen.elapsed().as_millis();
    kv.start_store().await.map_err(anyhow::Error::msg)?;
    let records = read_back.read_all().await.map_err(|e| anyhow!("read-back failed: {e}"))?;
    let verdict = verify(&expected, &records);
    let exit = run.terminate().context("stopping nats-sink")?;
    counts["d2"] = json!({
        "published": D2_MESSAGES,
        "acknowledged_seconds": (acknowledged.as_secs_f64() * 10.0).round() / 10.0,
        "store_killed_ms_after_the_last_ack_was_seen": kill_ms,
        "read_back": verdict.read_back,
        "missing": verdict.missing.len(),
        "duplicated": verdict.duplicated.len(),
        "exit_code": exit,
        "durability": section["durability"].clone(),
        "seconds": started.elapsed().as_secs_f64().round(),
    });
    drop(server);
    Ok(if !verdict.exactly_once() {
        Outcome::Fail(format!("acknowledged rows lost or changed with the store: {}", verdict.summary()))
    } else if exit != Some(0) {
        Outcome::Fail(format!("nats-sink exited with {exit:?} after SIGTERM"))
    } else {
        Outcome::Pass
    })
}
