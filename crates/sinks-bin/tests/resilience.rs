//! Outages: the NATS server killed and restarted, NATS unreachable for 10 s, the destination
//! gone for 30 s. Each time `nats-sink` stays up, logs the outage and the recovery, and in the
//! end every message is in the destination exactly once.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

mod support;

use std::time::Duration;

use sinks_testkit::wait_until;
use support::{Sink, env, json, records, sequences};

const MESSAGES: usize = 3000;

/// Publishes, starts the sink, waits for some progress, runs `outage`, then checks that
/// everything arrives exactly once while the process never exits and the logs show the
/// outage and the recovery, in that order.
async fn survives(outage: impl AsyncFnOnce(&mut support::Env), expected_logs: &[&str]) {
    let mut e = env().await;
    e.publish(MESSAGES, json).await;
    let config = e.write_config(r#", "batch_size": 50, "max_in_flight_batches": 2"#, "", "");
    let mut sink = Sink::start(&config, e.dir.path(), &[]);
    assert!(
        wait_until(Duration::from_secs(60), || async { records(&e.out()).len() >= 300 }).await,
        "no progress before the outage; log:\n{}",
        sink.logs()
    );
    outage(&mut e).await;
    assert!(sink.child.try_wait().unwrap().is_none(), "nats-sink exited during the outage; log:\n{}", sink.logs());
    let done =
        wait_until(Duration::from_secs(120), || async { records(&e.out()).len() >= MESSAGES && e.settled().await })
            .await;
    assert!(done, "not everything arrived after the outage; log:\n{}", sink.logs());
    // The expected lines must appear in this order: the outage, then the recovery.
    let logs = sink.logs();
    let mut from = 0;
    for line in expected_logs {
        match logs[from..].find(line) {
            Some(at) => from += at + line.len(),
            None => panic!("the logs do not show `{line}` after the previous expected line:\n{logs}"),
        }
    }
    assert_eq!(sink.terminate(), Some(0));
    let seqs = sequences(&e.out());
    assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), (1..=MESSAGES as u64).collect::<Vec<_>>());
    assert!(seqs.values().all(|n| *n == 1), "exactly one file per message");
}

#[tokio::test]
async fn nats_server_killed_and_restarted() {
    survives(
        async |e| {
            e.server.kill();
            tokio::time::sleep(Duration::from_millis(500)).await;
            e.server.restart();
        },
        &["nats connection lost", "nats connection established"],
    )
    .await;
}

#[tokio::test]
async fn nats_unreachable_for_10_seconds() {
    survives(
        async |e| {
            e.server.kill();
            tokio::time::sleep(Duration::from_secs(10)).await;
            e.server.restart();
        },
        &["nats connection lost", "nats client error", "nats connection established"],
    )
    .await;
}

#[tokio::test]
async fn destination_down_for_30_seconds() {
    survives(
        async |e| {
            // The output volume goes away (unmounted, say) and comes back 30 s later.
            let away = e.dir.path().join("out-away");
            std::fs::rename(e.out(), &away).unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
            std::fs::rename(&away, e.out()).unwrap();
        },
        &["destination unavailable", "destination recovered"],
    )
    .await;
}

#[tokio::test]
async fn sigterm_while_nats_is_down_exits_promptly() {
    let mut e = env().await;
    e.publish(200, json).await;
    let config = e.write_config("", "", "");
    let sink = Sink::start(&config, e.dir.path(), &[]);
    assert!(
        wait_until(Duration::from_secs(60), || async { records(&e.out()).len() >= 200 }).await,
        "no progress; log:\n{}",
        sink.logs()
    );
    e.server.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // `terminate` fails when the process has not exited 30 s after SIGTERM (it used to wait
    // for a flush to a server that was gone, forever).
    assert_eq!(sink.terminate(), Some(0), "a stop with NATS down is still a clean stop");
}
