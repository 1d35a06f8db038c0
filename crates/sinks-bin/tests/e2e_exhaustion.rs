//! Nothing lost at the last delivery, through the binary: a consumer with `max_deliver: 3`
//! and `ack_wait_seconds: 5` (the sink creates it), 2,000 messages on 4 subjects, the DLQ on,
//! an HTTP endpoint that refuses every 50th key with 503 on every attempt, and `kill -9` of
//! a sink two seconds into the run, then a restart. Every message ends delivered (1,960)
//! or dead-lettered (40), none in both, none in neither, and `nats-sink reconcile` finds
//! nothing missing: also when the kill lands on a refused message's last delivery, which
//! the server then stops redelivering (the rescue picks it up from the captured
//! `MAX_DELIVERIES` advisory). Ten runs in a row; and three workers on one consumer, one
//! killed.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use serde_json::json;
use sinks_testkit::{HttpTestServer, js_publish_all, read_stream, stream_with_subjects, unique, wait_until};
use support::{Env, Sink, env, nats_sink, text};

const MESSAGES: u64 = 2000;
const REFUSE_EVERY: u64 = 50;

struct Run {
    e: Env,
    endpoint: HttpTestServer,
    dlq_stream: String,
    config: std::path::PathBuf,
}

async fn prepare() -> Run {
    let e = env().await;
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    let endpoint = HttpTestServer::start().await.unwrap();
    endpoint.set_request_log(false);
    endpoint.set_keep_bodies(false);
    endpoint.set_refuse_every(Some(REFUSE_EVERY));
    // Keys are stream sequences (no message ids): sequences 50, 100, …, 2000 are refused.
    let msgs = (1..=MESSAGES)
        .map(|i| {
            (format!("{}.orders.k{}", e.subject_root, i % 4), HeaderMap::new(), Bytes::from(format!("{{\"n\":{i}}}")))
        })
        .collect();
    js_publish_all(&e.js, msgs).await;
    let sink = json!({
        "type": "http", "url": endpoint.url(), "allow_http_for_local_testing": true,
        "inquiry_url": endpoint.inquiry_url(), "inquiry_fingerprint_header": sinks_testkit::FINGERPRINT_HEADER,
    });
    let extra = json!({
        "consumer_management": {"max_deliver": 3, "ack_wait_seconds": 5},
        "dead_letter": {"enabled": true, "subject": dlq_subject},
        "logging": {"level": "INFO"},
    });
    let config = e.write_config_json(sink, extra);
    Run { e, endpoint, dlq_stream, config }
}

impl Run {
    /// Stream sequences in the DLQ stream.
    async fn dead_lettered(&self) -> Vec<u64> {
        read_stream(&self.e.js, &self.dlq_stream)
            .await
            .iter()
            .map(|(_, _, _, body)| {
                serde_json::from_slice::<serde_json::Value>(body).unwrap()["stream_sequence"].as_u64().unwrap()
            })
            .collect()
    }

    /// Stream sequences the endpoint stored, with how often each was answered as new.
    fn delivered(&self) -> Vec<(u64, usize)> {
        self.endpoint
            .successes()
            .into_iter()
            .map(|(key, n)| (key.rsplit(':').next().unwrap().parse::<u64>().unwrap(), n))
            .collect()
    }

    async fn done(&self) -> bool {
        self.delivered().len() as u64 + self.dead_lettered().await.len() as u64 >= MESSAGES && self.e.settled().await
    }

    /// Runs `workers` sinks, kills the first one with SIGKILL after `kill_after` and starts
    /// it again, waits until everything is settled, stops them, and checks the outcome.
    async fn check(&self, workers: usize, kill_after: Duration, what: &str) {
        let cwd = self.e.dir.path();
        let mut sinks: Vec<Sink> = (0..workers).map(|_| Sink::start(&self.config, cwd, &[])).collect();
        tokio::time::sleep(kill_after).await;
        sinks.remove(0).kill9();
        sinks.push(Sink::start(&self.config, cwd, &[]));
        let done = wait_until(Duration::from_secs(120), || self.done()).await;
        let logs: Vec<String> = sinks.into_iter().map(|s| s.stop().1).collect();
        let dead = self.dead_lettered().await;
        let delivered = self.delivered();
        assert!(
            done,
            "{what}: delivered {} and dead-lettered {} of {MESSAGES}; consumer {:?}; last log:\n{}",
            delivered.len(),
            dead.len(),
            self.e.consumer_state().await,
            logs.last().map(|l| l.lines().rev().take(30).collect::<Vec<_>>().join("\n")).unwrap_or_default()
        );
        let refused: BTreeSet<u64> = (1..=MESSAGES).filter(|s| s % REFUSE_EVERY == 0).collect();
        let stored: BTreeSet<u64> = delivered.iter().map(|(s, _)| *s).collect();
        let twice: Vec<&(u64, usize)> = delivered.iter().filter(|(_, n)| *n != 1).collect();
        assert!(twice.is_empty(), "{what}: stored more than once: {twice:?}");
        let dead_set: BTreeSet<u64> = dead.iter().copied().collect();
        assert_eq!(dead.len(), dead_set.len(), "{what}: one dead letter per message: {dead:?}");
        assert_eq!(dead_set, refused, "{what}: exactly the refused messages are dead-lettered");
        let all: BTreeSet<u64> = stored.union(&dead_set).copied().collect();
        assert_eq!(all.len() as u64, MESSAGES, "{what}: none in neither");
        assert!(stored.is_disjoint(&dead_set), "{what}: none in both");
        // Reconcile agrees: nothing missing or conflicting.
        // (Off the test's runtime: the endpoint answering the inquiries runs on it.)
        let (config, dir) = (self.config.clone(), cwd.to_path_buf());
        let out = tokio::task::spawn_blocking(move || nats_sink(&["reconcile", config.to_str().unwrap()], &dir))
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{what}: reconcile exited {:?}: {}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            text(&out)
        );
    }
}

#[tokio::test]
async fn a_kill_during_last_deliveries_loses_nothing_run_after_run() {
    // Ten runs with `cargo xtask test --full`, four in CI (each about 24 s).
    let runs = sinks_testkit::rounds(4, 10) as u64;
    for run in 0..runs {
        let r = prepare().await;
        // A different moment in each run, spread from 1.5 to 2.4 s in.
        let kill_after = Duration::from_millis(1500 + 900 * run / (runs - 1));
        r.check(1, kill_after, &format!("run {run}")).await;
    }
}

#[tokio::test]
async fn three_workers_one_killed_during_final_deliveries_lose_nothing() {
    let r = prepare().await;
    r.check(3, Duration::from_secs(2), "three workers").await;
}
