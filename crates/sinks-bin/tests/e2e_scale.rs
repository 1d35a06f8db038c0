//! Scale-out, end to end with the `nats-sink` binary and the file sink: several workers on one
//! durable consumer (one killed with SIGKILL, one stopped with SIGTERM, one started late), and
//! one worker against a private three-node JetStream cluster with an R3 stream and an R3
//! consumer that loses its stream leader, the node the worker is connected to, or all three
//! nodes at once. Every time, every message ends up at the destination exactly once (one file
//! per stream sequence), the workers never exit on their own, and the logs show the outage
//! and the recovery.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::Context;
use sinks_testkit::{NatsCluster, unique, wait_until};
use support::{Sink, acked, env, json, records, sequences};

/// Messages of the multi-worker test.
const WORKER_MESSAGES: usize = 3000;
/// Messages of each cluster test.
const CLUSTER_MESSAGES: usize = 1500;

/// True when the log says setup ended with `action` (`created`, `bound`, …).
fn setup_action(log: &str, action: &str) -> bool {
    log.lines().any(|l| {
        l.contains("consuming servers=")
            && (l.contains(&format!("action=\"{action}\"")) || l.contains(&format!("action={action}")))
    })
}

/// Waits until `sink`'s log shows the consumer is ready; returns the log.
async fn ready(sink: &Sink) -> String {
    let ok = wait_until(Duration::from_secs(60), || async { sink.logs().contains("consuming servers=") }).await;
    assert!(ok, "the worker never got its consumer; log:\n{}", sink.logs());
    sink.logs()
}

/// Asserts every stream sequence `1..=total` has exactly one record under `out`.
fn exactly_once(out: &Path, total: usize) {
    let seqs = sequences(out);
    let missing: Vec<u64> = (1..=total as u64).filter(|s| !seqs.contains_key(s)).collect();
    assert!(
        missing.is_empty(),
        "{} messages missing at the destination, first {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert_eq!(seqs.len(), total, "records for sequences that were never published");
    assert!(seqs.values().all(|n| *n == 1), "exactly one record per message");
}

/// Asserts `lines` appear in `log` in this order.
fn in_order(log: &str, lines: &[&str]) {
    let mut from = 0;
    for line in lines {
        match log[from..].find(line) {
            Some(at) => from += at + line.len(),
            None => panic!("the log does not show `{line}` after the previous expected line:\n{log}"),
        }
    }
}

#[tokio::test]
async fn three_workers_share_one_consumer_through_kill_and_sigterm() {
    let e = env().await;
    e.publish(WORKER_MESSAGES, json).await;
    // Small batches and a short AckWait: the work is spread over many pull requests, and what
    // the killed worker held comes back quickly.
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out()}),
        serde_json::json!({
            "delivery": {"batch_size": 20, "max_in_flight_batches": 2},
            "consumer_management": {"ack_wait_seconds": 3},
        }),
    );
    let first = Sink::start(&config, e.dir.path(), &[]);
    let log = ready(&first).await;
    assert!(setup_action(&log, "created"), "the first worker creates the consumer; log:\n{log}");
    let stream = e.js.get_stream(&e.stream).await.unwrap();
    let before = stream.consumer_info(&e.consumer).await.unwrap();

    let killed = Sink::start(&config, e.dir.path(), &[]);
    let stopped = Sink::start(&config, e.dir.path(), &[]);
    for worker in [&killed, &stopped] {
        let log = ready(worker).await;
        assert!(setup_action(&log, "bound"), "a later worker binds the existing consumer; log:\n{log}");
    }
    // Every worker takes part before any of them goes away.
    for (name, worker) in [("first", &first), ("killed", &killed), ("stopped", &stopped)] {
        let wrote = wait_until(Duration::from_secs(60), || async { worker.logs().contains("batch written") }).await;
        assert!(wrote, "the {name} worker never wrote a batch; log:\n{}", worker.logs());
    }
    let third =
        wait_until(Duration::from_secs(60), || async { acked(&e, WORKER_MESSAGES).await >= WORKER_MESSAGES / 3 }).await;
    assert!(third, "no progress to a third; log:\n{}", first.logs());
    killed.kill9();
    let (code, log) = stopped.stop();
    assert_eq!(code, Some(0), "a SIGTERM drain is a clean stop; log:\n{log}");
    assert!(log.contains("stopped"), "the drained worker logs its summary; log:\n{log}");

    // A worker started now binds the same consumer and shares what is left.
    let late = Sink::start(&config, e.dir.path(), &[]);
    let log = ready(&late).await;
    assert!(setup_action(&log, "bound"), "a late worker binds the existing consumer; log:\n{log}");
    let done = wait_until(Duration::from_secs(90), || async {
        records(&e.out()).len() >= WORKER_MESSAGES && e.settled().await
    })
    .await;
    assert!(done, "not everything was delivered; first worker log:\n{}", first.logs());
    for (name, worker) in [("first", first), ("late", late)] {
        let (code, log) = worker.stop();
        assert_eq!(code, Some(0), "the {name} worker stops cleanly; log:\n{log}");
    }
    exactly_once(&e.out(), WORKER_MESSAGES);
    // Bound, never recreated: the consumer is the one the first worker created, with the
    // same configuration.
    let after = stream.consumer_info(&e.consumer).await.unwrap();
    assert_eq!(after.created, before.created, "the consumer was recreated");
    assert_eq!(after.config, before.config, "the consumer's configuration changed");
}

/// A three-node cluster with an R3 stream, and a worker config seeded with every node.
struct ClusterEnv {
    cluster: NatsCluster,
    js: Context,
    dir: tempfile::TempDir,
    stream: String,
    consumer: String,
    subject_root: String,
    /// `nats.name` of the worker (finds the node it is connected to).
    client_name: String,
}

impl ClusterEnv {
    async fn start() -> Self {
        let cluster = NatsCluster::start().await;
        let js = cluster.js().await;
        let stream = unique("SCALE");
        let subject_root = stream.to_lowercase();
        cluster.create_stream(&js, &stream, &[&format!("{subject_root}.>")], 3).await;
        Self {
            cluster,
            js,
            dir: tempfile::tempdir().unwrap(),
            stream,
            consumer: unique("scale"),
            subject_root,
            client_name: unique("worker"),
        }
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    fn write_config(&self, delivery: serde_json::Value) -> PathBuf {
        let mut delivery_section = serde_json::json!({
            "batch_size": 20, "max_in_flight_batches": 2, "batch_timeout_ms": 200,
            "retry_backoff_ms": 100, "retry_backoff_max_ms": 500,
        });
        if let (Some(base), serde_json::Value::Object(extra)) = (delivery_section.as_object_mut(), delivery) {
            base.extend(extra);
        }
        let config = serde_json::json!({
            "nats": {"urls": self.cluster.urls(), "name": self.client_name, "stream": self.stream,
                     "consumer": self.consumer, "subject": format!("{}.>", self.subject_root),
                     "reconnect_time_wait_seconds": 1, "connect_timeout_seconds": 2},
            "delivery": delivery_section,
            "consumer_management": {"ack_wait_seconds": 3, "num_replicas": 3},
            "logging": {"level": "DEBUG"},
            "sink": {"type": "file", "directory": self.out()},
        });
        let path = self.dir.path().join("config.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
        path
    }

    /// Publishes messages `from..to`, retrying the whole range until the cluster stored all
    /// of them (during an election a publish can fail; the message ids make a retry harmless).
    async fn publish(&self, from: usize, to: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut stored = true;
            let mut acks = Vec::with_capacity(to - from);
            for i in from..to {
                let mut h = HeaderMap::new();
                h.insert("Nats-Msg-Id", format!("msg-{i}").as_str());
                let subject = format!("{}.orders.k{}", self.subject_root, i % 3);
                match self.js.publish_with_headers(subject, h, json(i)).await {
                    Ok(ack) => acks.push(ack),
                    Err(_) => {
                        stored = false;
                        break;
                    }
                }
            }
            for ack in acks {
                stored &= ack.await.is_ok();
            }
            if stored {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster did not take messages {from}..{to}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn settled(&self) -> bool {
        sinks_testkit::consumer_settled_on(&self.js, &self.stream, &self.consumer).await
    }

    /// Waits until at least `n` more records than now are at the destination.
    async fn progress(&self, n: usize, sink: &Sink, what: &str) {
        let target = records(&self.out()).len() + n;
        let ok = wait_until(Duration::from_secs(60), || async { records(&self.out()).len() >= target }).await;
        assert!(ok, "no progress {what}; log:\n{}", sink.logs());
    }
}

/// Publishes half the messages, starts one worker, runs `outage` once it made progress,
/// publishes the other half (retrying until the cluster takes them: their message ids make a
/// retry harmless), waits for progress after the outage, restarts the node `outage` returned
/// (if any), then checks that every message arrives exactly once, the worker never exited,
/// and the log shows `expected_logs` in order. Returns the worker's log.
async fn survives_cluster(
    delivery: serde_json::Value,
    outage: impl AsyncFnOnce(&mut ClusterEnv, &Sink) -> Option<usize>,
    expected_logs: &[&str],
) -> String {
    let started = Instant::now();
    let mut e = ClusterEnv::start().await;
    let half = CLUSTER_MESSAGES / 2;
    e.publish(0, half).await;
    let config = e.write_config(delivery);
    let sink = Sink::start(&config, e.dir.path(), &[]);
    e.progress(200, &sink, "before the outage").await;
    let down = outage(&mut e, &sink).await;
    e.publish(half, CLUSTER_MESSAGES).await;
    e.progress(200, &sink, "after the outage").await;
    if let Some(i) = down {
        e.cluster.restart(i);
    }
    let done = wait_until(Duration::from_secs(120), || async {
        records(&e.out()).len() >= CLUSTER_MESSAGES && e.settled().await
    })
    .await;
    assert!(done, "not everything arrived after the outage; log:\n{}", sink.logs());
    let mut sink = sink;
    assert!(sink.child.try_wait().unwrap().is_none(), "the worker exited; log:\n{}", sink.logs());
    let log = sink.logs();
    in_order(&log, expected_logs);
    let (code, log) = sink.stop();
    assert_eq!(code, Some(0), "log:\n{log}");
    exactly_once(&e.out(), CLUSTER_MESSAGES);
    eprintln!("cluster test took {:.1} s", started.elapsed().as_secs_f64());
    log
}

/// The node the worker is connected to (from the nodes' `/connz`).
async fn worker_node(e: &ClusterEnv) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(i) = e.cluster.node_of_client(&e.client_name).await {
            return i;
        }
        assert!(Instant::now() < deadline, "the worker's connection is on no node");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn cluster_stream_leader_killed_with_ack_confirmation() {
    let log = survives_cluster(
        serde_json::json!({"ack_confirmation": {"enabled": true, "timeout_ms": 2000}}),
        async |e, _sink| {
            // Arrange for the stream and the consumer to be led by a node the worker is not
            // connected to, so what the worker sees is a leader change and not a disconnect.
            let connected = worker_node(e).await;
            let mut leader = None;
            for _ in 0..20 {
                let stream = e.cluster.stream_leader(&e.js, &e.stream).await;
                let consumer = e.cluster.consumer_leader(&e.js, &e.stream, &e.consumer).await;
                match (stream, consumer) {
                    (Some(s), Some(_)) if e.cluster.index_of(&s) == Some(connected) => {
                        e.cluster.step_down_stream(&e.js, &e.stream).await;
                    }
                    (Some(s), Some(c)) if s != c => {
                        e.cluster.step_down_consumer(&e.js, &e.stream, &e.consumer).await;
                    }
                    (Some(s), Some(_)) => {
                        leader = Some(s);
                        break;
                    }
                    _ => {}
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let leader = leader.expect("could not place the stream and consumer leaders away from the worker");
            let i = e.cluster.index_of(&leader).unwrap();
            e.cluster.kill(i);
            // Two of three nodes keep a quorum: a new leader is elected and the work goes on.
            let new_leader = e.cluster.wait_stream_leader(&e.js, &e.stream, Duration::from_secs(30)).await;
            assert!(new_leader.is_some_and(|l| l != leader), "no new stream leader after killing {leader}");
            Some(i)
        },
        // Checked below: which request meets the leaderless moment depends on timing.
        &[],
    )
    .await;
    // While the consumer has no leader, a fetch fails (503, no responders) and recovers, or a
    // confirmed ack finds no responder (the message comes back and is absorbed), or both.
    let fetch_failed = log.find("fetch failed; retrying").is_some_and(|at| log[at..].contains("fetching recovered"));
    assert!(
        fetch_failed || log.contains("settlements not delivered; these messages will be redelivered"),
        "the worker never saw the leader change; log:\n{log}"
    );
    assert!(!log.contains("nats connection lost"), "the worker's own node stayed up; log:\n{log}");
}

#[tokio::test]
async fn cluster_node_the_worker_is_connected_to_killed() {
    survives_cluster(
        serde_json::json!({}),
        async |e, sink| {
            let i = worker_node(e).await;
            e.cluster.kill(i);
            // The client fails over to another seed of `nats.urls`.
            let moved = wait_until(Duration::from_secs(30), || async {
                e.cluster.node_of_client(&e.client_name).await.is_some_and(|n| n != i)
            })
            .await;
            assert!(moved, "the worker did not fail over to another node; log:\n{}", sink.logs());
            Some(i)
        },
        &["nats connection lost", "nats connection established"],
    )
    .await;
}

#[tokio::test]
async fn cluster_restarted_as_a_whole() {
    survives_cluster(
        serde_json::json!({}),
        async |e, _sink| {
            e.cluster.kill_all();
            tokio::time::sleep(Duration::from_secs(1)).await;
            e.cluster.restart_all().await;
            None
        },
        &["nats connection lost", "nats connection established"],
    )
    .await;
}
