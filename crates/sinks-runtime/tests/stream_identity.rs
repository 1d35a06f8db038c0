//! The stream changing under the runner, against a private JetStream server with the in-memory
//! sink: a stream deleted and re-created (with the runner stopped, and while it runs), a
//! stream rewound from a copy of its files, two workers on one consumer, and the guard turned
//! off (the destination's `sequence_reused` refusal then holds). In every case each new
//! event ends stored under a key of its own or dead-lettered, and none is acknowledged
//! without being stored.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::Context;
use bytes::Bytes;
use serde_json::json;
use sinks_certify::MemorySink;
use sinks_contract::Sink;
use sinks_runtime::identity::Decision;
use sinks_runtime::metrics::{GaugeId, Metrics};
use sinks_runtime::{Config, RunError, RunOptions, RunStats};
use sinks_testkit::{NatsServer, js_publish_all, read_stream, stream_with_subjects, unique, wait_until};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

struct Setup {
    server: NatsServer,
    js: Context,
    stream: String,
    consumer: String,
    subject: String,
    bucket: String,
}

async fn setup() -> Setup {
    let server = NatsServer::start();
    let js = server.js().await;
    let stream = unique("IDS");
    let subject = format!("{}.>", stream.to_lowercase());
    stream_with_subjects(&js, &stream, &[&subject]).await;
    Setup { server, js, consumer: unique("sink"), stream, subject, bucket: unique("guard") }
}

impl Setup {
    fn config(&self, extra: serde_json::Value) -> Config {
        let mut value = json!({
            "nats": {"url": self.server.url(), "stream": self.stream, "consumer": self.consumer, "subject": self.subject},
            "delivery": {"batch_size": 20, "batch_timeout_ms": 200, "retry_backoff_ms": 50, "retry_backoff_max_ms": 200},
            "metrics": {"enabled": true, "lag_poll_interval_seconds": 1},
            "stream_guard": {"bucket": self.bucket, "recheck_seconds": 1},
            "sink": {"type": "memory"},
        });
        sinks_testkit::merge_json(&mut value, extra);
        Config::from_value(value).unwrap()
    }

    /// Publishes `n` events of generation `generation` (the payload names both).
    async fn publish(&self, generation: &str, n: usize) {
        let subject = format!("{}.orders", self.stream.to_lowercase());
        let msgs = (1..=n).map(|i| (subject.clone(), HeaderMap::new(), event(generation, i))).collect();
        js_publish_all(&self.js, msgs).await;
    }

    /// Deletes the stream (and with it the consumer) and creates it again, empty.
    async fn recreate(&self) {
        self.js.delete_stream(&self.stream).await.unwrap();
        stream_with_subjects(&self.js, &self.stream, &[&self.subject]).await;
    }

    async fn dlq_stream(&self) -> (String, String) {
        let stream = unique("DLQ");
        let subject = format!("{}.dead", stream.to_lowercase());
        stream_with_subjects(&self.js, &stream, &[&subject]).await;
        (stream, subject)
    }

    /// `(num_pending, num_ack_pending)`; maximal while the consumer does not exist.
    async fn consumer_state(&self) -> (u64, usize) {
        let stream = self.js.get_stream(&self.stream).await.unwrap();
        match stream.consumer_info(&self.consumer).await {
            Ok(info) => (info.num_pending, info.num_ack_pending),
            Err(_) => (u64::MAX, usize::MAX),
        }
    }

    async fn decide(&self, config: &Config, decision: Decision) -> Vec<String> {
        sinks_runtime::runner::stream_identity(config, Some(decision)).await.unwrap()
    }
}

fn event(generation: &str, i: usize) -> Bytes {
    Bytes::from(format!(r#"{{"generation":"{generation}","n":{i}}}"#))
}

struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<Arc<RunStats>, RunError>>,
    metrics: Metrics,
}

fn start(config: Config, sink: Arc<dyn Sink>) -> Running {
    let (stop, rx) = oneshot::channel::<()>();
    let metrics = Metrics::new(&config.metrics);
    let task =
        tokio::spawn(sinks_runtime::run_observed(config, sink, metrics.clone(), RunOptions::default(), async move {
            let _ = rx.await;
        }));
    Running { stop, task, metrics }
}

impl Running {
    async fn stop(self) -> Arc<RunStats> {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(30), self.task).await.unwrap().unwrap().unwrap()
    }

    fn paused(&self) -> bool {
        self.metrics.gauge(GaugeId::StreamIdentityPaused) == 1.0
    }
}

/// The records of `sink` whose payload is of `generation`, by key.
fn of_generation(sink: &MemorySink, generation: &str) -> Vec<String> {
    let mark = format!(r#""generation":"{generation}""#);
    let mut keys: Vec<String> = sink
        .records()
        .into_iter()
        .filter(|(_, p)| String::from_utf8_lossy(p).contains(&mark))
        .map(|(k, _)| k)
        .collect();
    keys.sort();
    keys
}

/// Runs until `n` messages are acked, then stops.
async fn consume(s: &Setup, config: Config, sink: &Arc<MemorySink>, n: usize) -> Arc<RunStats> {
    let run = start(config, sink.clone());
    assert!(
        wait_until(Duration::from_secs(30), || async { s.consumer_state().await == (0, 0) && sink.len() >= n }).await,
        "the first {n} events were not stored and settled"
    );
    run.stop().await
}

#[tokio::test]
async fn a_stream_recreated_while_stopped_pauses_the_runner_until_a_new_epoch_is_decided() {
    let s = setup().await;
    let sink = Arc::new(MemorySink::new());
    s.publish("old", 40).await;
    consume(&s, s.config(json!({})), &sink, 40).await;
    s.recreate().await;
    s.publish("new", 40).await;

    let config = s.config(json!({}));
    let run = start(config.clone(), sink.clone());
    assert!(wait_until(Duration::from_secs(20), || async { run.paused() }).await, "the change must pause the runner");
    // Paused: nothing of the new stream is written or acknowledged.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(of_generation(&sink, "new").is_empty(), "nothing is written while undecided");
    assert_eq!(s.consumer_state().await.1, 0, "nothing delivered, nothing left acked or unacked");
    assert!(!run.metrics.status().readiness().ready, "not ready while paused");
    let shown = sinks_runtime::runner::stream_identity(&config, None).await.unwrap();
    assert!(shown.iter().any(|l| l.contains("undecided")), "{shown:?}");

    let decided = s.decide(&config, Decision::NewEpoch).await;
    assert!(decided.iter().any(|l| l.starts_with("decided new-epoch")), "{decided:?}");
    assert!(
        wait_until(Duration::from_secs(30), || async {
            of_generation(&sink, "new").len() == 40 && s.consumer_state().await == (0, 0)
        })
        .await,
        "after the decision every new event is stored"
    );
    let stats = run.stop().await;
    assert_eq!(stats.acked.load(Ordering::Relaxed), 40);
    assert_eq!(stats.conflicts.load(Ordering::Relaxed), 0);
    // Both generations are there, each under keys of its own.
    let old = of_generation(&sink, "old");
    let new = of_generation(&sink, "new");
    assert_eq!(old.len(), 40);
    assert!(old.iter().all(|k| k.starts_with(&format!("stream-sequence:{}:", s.stream))), "{old:?}");
    assert!(new.iter().all(|k| k.starts_with(&format!("stream-sequence:{}.e", s.stream))), "{new:?}");
    assert_eq!(sink.get(&format!("stream-sequence:{}:7", s.stream)), Some(event("old", 7)));
}

#[tokio::test]
async fn with_new_epoch_configured_a_running_sink_binds_again_and_keeps_both_generations() {
    let s = setup().await;
    let sink = Arc::new(MemorySink::new());
    let (dlq_stream, dlq_subject) = s.dlq_stream().await;
    let config = s.config(json!({
        "stream_guard": {"on_change": "new_epoch"},
        "dead_letter": {"enabled": true, "subject": dlq_subject},
    }));
    let run = start(config, sink.clone());
    s.publish("old", 30).await;
    assert!(wait_until(Duration::from_secs(30), || async { of_generation(&sink, "old").len() == 30 }).await);
    assert!(wait_until(Duration::from_secs(10), || async { s.consumer_state().await == (0, 0) }).await);
    // The stream goes away and comes back under the running sink.
    s.recreate().await;
    s.publish("new", 30).await;
    assert!(
        wait_until(Duration::from_secs(60), || async { of_generation(&sink, "new").len() == 30 }).await,
        "the runner binds the consumer again and stores the new stream's events: {} of 30",
        of_generation(&sink, "new").len()
    );
    assert!(wait_until(Duration::from_secs(10), || async { s.consumer_state().await == (0, 0) }).await);
    let stats = run.stop().await;
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 0);
    assert!(read_stream(&s.js, &dlq_stream).await.is_empty());
    assert_eq!(of_generation(&sink, "old").len(), 30, "the old events are untouched");
}

#[tokio::test]
async fn without_the_guard_a_reused_sequence_is_dead_lettered_never_acknowledged_as_stored() {
    let s = setup().await;
    let sink = Arc::new(MemorySink::new());
    let (dlq_stream, dlq_subject) = s.dlq_stream().await;
    let config = s.config(json!({
        "stream_guard": {"identity": false},
        "dead_letter": {"enabled": true, "subject": dlq_subject},
    }));
    s.publish("old", 10).await;
    consume(&s, config.clone(), &sink, 10).await;
    s.recreate().await;
    s.publish("new", 10).await;
    let run = start(config, sink.clone());
    assert!(wait_until(Duration::from_secs(30), || async { read_stream(&s.js, &dlq_stream).await.len() == 10 }).await);
    assert!(wait_until(Duration::from_secs(10), || async { s.consumer_state().await == (0, 0) }).await);
    let stats = run.stop().await;
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 10);
    assert!(of_generation(&sink, "new").is_empty());
    for (_, _, _, payload) in read_stream(&s.js, &dlq_stream).await {
        let record: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(record["reason"], "sequence_reused", "{record}");
        assert_eq!(record["error_type"], "SequenceReusedError");
        let stored = base64_decode(record["payload_base64"].as_str().unwrap());
        assert!(String::from_utf8_lossy(&stored).contains(r#""generation":"new""#), "the new event is in its record");
    }
}

#[tokio::test]
async fn without_a_dead_letter_stream_a_reused_sequence_is_never_acknowledged() {
    let s = setup().await;
    let sink = Arc::new(MemorySink::new());
    let config = s.config(json!({"stream_guard": {"identity": false}}));
    s.publish("old", 5).await;
    consume(&s, config.clone(), &sink, 5).await;
    s.recreate().await;
    s.publish("new", 5).await;
    let run = start(config, sink.clone());
    tokio::time::sleep(Duration::from_secs(4)).await;
    let stats = run.stop().await;
    assert_eq!(stats.acked.load(Ordering::Relaxed), 0, "nothing of the new stream is acknowledged");
    assert!(stats.nacked.load(Ordering::Relaxed) >= 5, "each one is NAKed (and reported)");
    assert!(of_generation(&sink, "new").is_empty());
    assert_eq!(s.consumer_state().await.0 + s.consumer_state().await.1 as u64, 5, "all five are still to do");
}

#[tokio::test]
async fn a_stream_rewound_from_a_copy_of_its_files_is_detected() {
    let mut s = setup().await;
    let sink = Arc::new(MemorySink::new());
    s.publish("kept", 10).await;
    // A copy of the stream's files with 10 messages (the server stopped for a consistent copy).
    s.server.kill();
    let backup = tempfile::tempdir().unwrap();
    copy_dir(&s.server.stream_dir(&s.stream), backup.path());
    s.server.restart();
    let js = s.server.js().await;
    s.js = js;
    s.publish("later", 10).await;
    consume(&s, s.config(json!({})), &sink, 20).await;
    // The stream goes back to the copy: sequences 11.. will be handed out again.
    s.server.kill();
    let dir = s.server.stream_dir(&s.stream);
    std::fs::remove_dir_all(&dir).unwrap();
    copy_dir(backup.path(), &dir);
    s.server.restart();
    s.js = s.server.js().await;
    s.publish("reused", 5).await;
    let run = start(s.config(json!({})), sink.clone());
    // Paused at once; judged a change after `rewind_confirm_seconds` (15 by default).
    assert!(wait_until(Duration::from_secs(45), || async { run.paused() }).await, "a rewind must pause the runner");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(of_generation(&sink, "reused").is_empty());
    let shown = sinks_runtime::runner::stream_identity(&s.config(json!({})), None).await.unwrap();
    assert!(shown.iter().any(|l| l.contains("moved back")), "{shown:?}");
    s.decide(&s.config(json!({})), Decision::NewEpoch).await;
    assert!(wait_until(Duration::from_secs(30), || async { of_generation(&sink, "reused").len() == 5 }).await);
    run.stop().await;
    assert_eq!(of_generation(&sink, "later").len(), 10, "the events the rewind reused keep their records");
}

#[tokio::test]
async fn two_workers_on_one_consumer_both_pause_and_neither_acknowledges_a_reused_sequence() {
    let s = setup().await;
    let sink = Arc::new(MemorySink::new());
    s.publish("old", 20).await;
    consume(&s, s.config(json!({})), &sink, 20).await;
    s.recreate().await;
    s.publish("new", 20).await;
    let config = s.config(json!({}));
    let a = start(config.clone(), sink.clone());
    let b = start(config.clone(), sink.clone());
    assert!(wait_until(Duration::from_secs(20), || async { a.paused() && b.paused() }).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(of_generation(&sink, "new").is_empty());
    s.decide(&config, Decision::NewEpoch).await;
    assert!(
        wait_until(Duration::from_secs(30), || async {
            of_generation(&sink, "new").len() == 20 && s.consumer_state().await == (0, 0)
        })
        .await
    );
    let (a, b) = (a.stop().await, b.stop().await);
    let acked = a.acked.load(Ordering::Relaxed) + b.acked.load(Ordering::Relaxed);
    assert_eq!(acked, 20, "each new event acknowledged once, after its record");
    assert_eq!(a.dead_lettered.load(Ordering::Relaxed) + b.dead_lettered.load(Ordering::Relaxed), 0);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).unwrap()
}

/// The broker durability lint against real servers: a single-replica stream on a server with
/// the default `sync_interval` is warned about (the setting read from `/varz`), on a server that
/// syncs every write it is not, and without a monitoring URL the setting is said to be unknown.
#[tokio::test]
async fn validate_connect_reads_the_servers_sync_setting_and_warns_about_a_single_unsynced_replica() {
    for (server_config, warned) in
        [("jetstream {}", Some("every 120 s")), ("jetstream { sync_interval: always }", None)]
    {
        let server = NatsServer::start_with_config(server_config);
        let js = server.js().await;
        let stream = unique("LINT");
        stream_with_subjects(&js, &stream, &[&format!("{}.>", stream.to_lowercase())]).await;
        let config = |monitoring: Option<String>| {
            Config::from_value(json!({
                "nats": {"url": server.url(), "stream": stream, "consumer": "c", "subject": format!("{}.>", stream.to_lowercase()),
                         "monitoring_url": monitoring},
                "sink": {"type": "memory"},
            }))
            .unwrap()
        };
        let notes = sinks_runtime::runner::check_against_server(&config(server.monitoring_url())).await.unwrap();
        let warning = notes.iter().find(|n| n.starts_with("warning:") && n.contains("one replica"));
        match (warned, cfg!(feature = "monitoring")) {
            (Some(words), true) => {
                assert!(warning.is_some_and(|w| w.contains(words) && w.contains("sync_interval: always")), "{notes:?}");
            }
            (None, true) => {
                assert!(warning.is_none() && notes.iter().any(|n| n.contains("syncs every write")), "{notes:?}");
            }
            // A build without the `monitoring` feature cannot read /varz, and says so.
            (_, false) => assert!(warning.is_some_and(|w| w.contains("without the `monitoring` feature")), "{notes:?}"),
        }
        let blind = sinks_runtime::runner::check_against_server(&config(None)).await.unwrap();
        assert!(
            blind.iter().any(|n| n.contains("sync setting is unknown (nats.monitoring_url is not set)")),
            "{blind:?}"
        );
    }
}

/// Retention headroom against a real stream: a backlog the sink cannot settle (its destination
/// down) fills a stream limited to 100 messages; the gauge follows it, and when the stream
/// removes unsettled messages they are counted.
#[tokio::test]
async fn the_retention_headroom_is_measured_and_messages_removed_unsettled_are_counted() {
    let s = setup().await;
    let limited = unique("LIM");
    let subject = format!("{}.>", limited.to_lowercase());
    s.js.create_stream(async_nats::jetstream::stream::Config {
        name: limited.clone(),
        subjects: vec![subject.clone()],
        max_messages: 100,
        ..Default::default()
    })
    .await
    .unwrap();
    let sink = Arc::new(MemorySink::new());
    sink.faults.unreachable.store(true, Ordering::Relaxed);
    let config = s.config(json!({
        "nats": {"stream": limited, "subject": subject},
        "consumer_management": {"ack_wait_seconds": 2},
        // Not held through the outage: the backlog stays in the stream for its limits to act on.
        "delivery": {"outage_hold_seconds": 0},
    }));
    let run = start(config, sink.clone());
    let publish = |from: usize, n: usize| {
        let subject = format!("{}.x", limited.to_lowercase());
        let msgs = (from..from + n).map(|i| (subject.clone(), HeaderMap::new(), event("held", i))).collect();
        js_publish_all(&s.js, msgs)
    };
    publish(1, 90).await;
    assert!(
        wait_until(Duration::from_secs(20), || async {
            (run.metrics.gauge(GaugeId::StreamRetentionMsgsUsedRatio) - 0.9).abs() < 0.011
        })
        .await,
        "90 unsettled of max_msgs 100: {}",
        run.metrics.gauge(GaugeId::StreamRetentionMsgsUsedRatio)
    );
    publish(91, 30).await;
    assert!(
        wait_until(Duration::from_secs(20), || async {
            run.metrics.counter(sinks_runtime::metrics::CounterId::StreamMessagesRemovedUnsettled) >= 20
        })
        .await,
        "the stream removed 20 unsettled messages: counted {}",
        run.metrics.counter(sinks_runtime::metrics::CounterId::StreamMessagesRemovedUnsettled)
    );
    sink.faults.unreachable.store(false, Ordering::Relaxed);
    assert!(wait_until(Duration::from_secs(60), || async { sink.len() == 100 }).await, "{}", sink.len());
    run.stop().await;
}
