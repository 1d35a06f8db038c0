//! The runner end to end against a private JetStream server, with the in-memory sink:
//! commit-then-ack, poison isolation, DLQ failure handling, retries, drift checks and
//! graceful stop. Every test uses its own server, stream and consumer.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::Context;
use async_nats::jetstream::consumer::PullConsumer;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;
use sinks_certify::MemorySink;
use sinks_contract::Sink;
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
}

async fn setup() -> Setup {
    let server = NatsServer::start();
    let js = server.js().await;
    let stream = unique("RUN");
    let subject = format!("{}.>", stream.to_lowercase());
    stream_with_subjects(&js, &stream, &[&subject]).await;
    Setup { server, js, consumer: unique("sink"), stream, subject }
}

impl Setup {
    fn config(&self, extra: serde_json::Value) -> Config {
        let mut value = json!({
            "nats": {"url": self.server.url(), "stream": self.stream, "consumer": self.consumer, "subject": self.subject},
            "delivery": {"batch_size": 50, "batch_timeout_ms": 200, "retry_backoff_ms": 50, "retry_backoff_max_ms": 200},
            "sink": {"type": "memory"},
        });
        sinks_testkit::merge_json(&mut value, extra);
        Config::from_value(value).unwrap()
    }

    fn msg_subject(&self, i: usize) -> String {
        format!("{}.k{}", self.stream.to_lowercase(), i % 7)
    }

    async fn publish(&self, n: usize, payload: impl Fn(usize) -> Bytes) {
        let msgs = (0..n).map(|i| (self.msg_subject(i), HeaderMap::new(), payload(i))).collect();
        js_publish_all(&self.js, msgs).await;
    }

    /// `(num_pending, num_ack_pending, num_redelivered)`; all maximal while the consumer
    /// does not exist yet.
    async fn consumer_state(&self) -> (u64, usize, usize) {
        let stream = self.js.get_stream(&self.stream).await.unwrap();
        match stream.consumer_info(&self.consumer).await {
            Ok(info) => (info.num_pending, info.num_ack_pending, info.num_redelivered),
            Err(_) => (u64::MAX, usize::MAX, 0),
        }
    }

    /// Creates a DLQ stream of its own; returns its name and subject.
    async fn dlq_stream(&self) -> (String, String) {
        let stream = unique("DLQ");
        let subject = format!("{}.dead", stream.to_lowercase());
        stream_with_subjects(&self.js, &stream, &[&subject]).await;
        (stream, subject)
    }

    /// A consumer that allows three deliveries, each AckWait `ack_wait_seconds`, with dead
    /// letters to `dlq_subject` and fast retries.
    /// The outage hold is off: these tests are about what the gate does with deliveries that
    /// run out (tests/outage_hold.rs covers holding through an outage).
    fn three_deliveries_then_dlq(&self, dlq_subject: &str, ack_wait_seconds: u64) -> Config {
        self.config(json!({
            "consumer_management": {"max_deliver": 3, "ack_wait_seconds": ack_wait_seconds},
            "dead_letter": {"enabled": true, "subject": dlq_subject},
            "delivery": {"retry_backoff_ms": 10, "retry_backoff_max_ms": 50, "retry_jitter": "none", "outage_hold_seconds": 0},
        }))
    }

    async fn settled(&self) -> bool {
        sinks_testkit::consumer_settled_on(&self.js, &self.stream, &self.consumer).await
    }
}

struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<Arc<RunStats>, RunError>>,
}

fn start(config: Config, sink: Arc<dyn Sink>) -> Running {
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(sinks_runtime::run(config, sink, async move {
        let _ = rx.await;
    }));
    Running { stop, task }
}

impl Running {
    async fn stop(self) -> Arc<RunStats> {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(30), self.task).await.unwrap().unwrap().unwrap()
    }
}

fn json_payload(i: usize) -> Bytes {
    Bytes::from(format!(r#"{{"n":{i}}}"#))
}

#[tokio::test]
async fn every_message_is_committed_then_acked() {
    let s = setup().await;
    s.publish(500, json_payload).await;
    let sink = Arc::new(MemorySink::new());
    let run = start(s.config(json!({"delivery": {"max_in_flight_batches": 4}})), sink.clone());
    assert!(wait_until(Duration::from_secs(30), || async { sink.len() == 500 && s.settled().await }).await);
    let stats = run.stop().await;
    assert_eq!(stats.acked.load(Ordering::Relaxed), 500);
    assert_eq!(stats.fetched.load(Ordering::Relaxed), 500);
    for seq in 1..=500u64 {
        let key = format!("stream-sequence:{}:{seq}", s.stream);
        assert_eq!(sink.get(&key), Some(json_payload(seq as usize - 1)), "{key}");
    }
}

#[tokio::test]
async fn a_poison_message_is_isolated_and_dead_lettered_alone() {
    let s = setup().await;
    let (dlq_stream, dlq_subject) = s.dlq_stream().await;
    s.publish(500, |i| if i == 321 { Bytes::from_static(b"poison") } else { json_payload(i) }).await;
    let sink = Arc::new(MemorySink::new());
    *sink.faults.poison_payload.lock().unwrap() = Some(Bytes::from_static(b"poison"));
    let config = s.config(json!({
        "delivery": {"batch_size": 500},
        "dead_letter": {"enabled": true, "subject": dlq_subject},
    }));
    let run = start(config, sink.clone());
    assert!(wait_until(Duration::from_secs(30), || async { sink.len() == 499 && s.settled().await }).await);
    let stats = run.stop().await;
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 1);
    let records = read_stream(&s.js, &dlq_stream).await;
    assert_eq!(records.len(), 1, "only the poison message is dead-lettered");
    let record: serde_json::Value = serde_json::from_slice(&records[0].3).unwrap();
    assert_eq!(record["stream_sequence"], 322);
    assert_eq!(record["payload_base64"], "cG9pc29u");
    assert_eq!(record["error_type"], "PermanentSinkError");
    assert_eq!(record["idempotency_key"], format!("stream-sequence:{}:322", s.stream));
    let headers = &records[0].2;
    assert_eq!(headers.get("Nats-Sinks-Error-Type").map(|v| v.as_str()), Some("PermanentSinkError"));
    assert_eq!(
        headers.get("Nats-Msg-Id").map(|v| v.as_str()),
        Some(&*format!("nats-sinks-dlq:stream-sequence:{}:322", s.stream))
    );
    assert!(sink.get(&format!("stream-sequence:{}:322", s.stream)).is_none());
}

#[tokio::test]
async fn a_failed_dead_letter_publish_naks_and_nothing_is_lost() {
    let s = setup().await;
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    let sink = Arc::new(MemorySink::new());
    *sink.faults.poison_payload.lock().unwrap() = Some(Bytes::from_static(b"poison"));
    let config = s.config(json!({"dead_letter": {"enabled": true, "subject": dlq_subject}}));
    // Start-up refuses a DLQ subject no stream captures: the stream is there when the run
    // starts and deleted once it consumes.
    stream_with_subjects(&s.js, &dlq_stream, &[&dlq_subject]).await;
    let run = start(config, sink.clone());
    assert!(wait_until(Duration::from_secs(20), || async { s.consumer_state().await.1 != usize::MAX }).await);
    s.js.delete_stream(&dlq_stream).await.unwrap();
    s.publish(20, |i| if i == 5 { Bytes::from_static(b"poison") } else { json_payload(i) }).await;
    // No stream captures the DLQ subject: the poison message must come back, never be acked.
    assert!(
        wait_until(Duration::from_secs(20), || async {
            let (_, ack_pending, redelivered) = s.consumer_state().await;
            sink.len() == 19 && redelivered >= 1 && ack_pending <= 1
        })
        .await
    );
    assert!(!s.settled().await, "the poison message must not be acked while its DLQ record cannot be stored");
    // Once a stream captures the subject, the record is stored and the original settled.
    stream_with_subjects(&s.js, &dlq_stream, &[&dlq_subject]).await;
    assert!(wait_until(Duration::from_secs(20), || async { s.settled().await }).await);
    let stats = run.stop().await;
    assert!(stats.dead_letter_failures.load(Ordering::Relaxed) >= 1);
    assert_eq!(read_stream(&s.js, &dlq_stream).await.len(), 1);
    assert_eq!(sink.len(), 19);
}

#[tokio::test]
async fn temporary_failures_are_naked_and_retried_until_committed() {
    let s = setup().await;
    s.publish(100, json_payload).await;
    let sink = Arc::new(MemorySink::new());
    sink.faults.fail_batches.store(3, Ordering::Relaxed);
    // With the outage hold off (a failed batch is otherwise written again in place, see
    // tests/outage_hold.rs): the NAK path.
    let run = start(s.config(json!({"delivery": {"outage_hold_seconds": 0}})), sink.clone());
    assert!(wait_until(Duration::from_secs(30), || async { sink.len() == 100 && s.settled().await }).await);
    let stats = run.stop().await;
    assert!(stats.nacked.load(Ordering::Relaxed) >= 3, "failed batches were NAKed");
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn graceful_stop_settles_everything_it_fetched() {
    let s = setup().await;
    s.publish(2000, json_payload).await;
    let sink = Arc::new(MemorySink::new());
    let run = start(s.config(json!({"delivery": {"batch_size": 20, "max_in_flight_batches": 3}})), sink.clone());
    assert!(wait_until(Duration::from_secs(20), || async { sink.len() >= 100 }).await);
    let stats = run.stop().await;
    // The acks left with the drained connection; the server reads them on that connection
    // while this question comes on another one, so give it a moment to catch up.
    let acked = wait_until(Duration::from_secs(3), || async { s.consumer_state().await.1 == 0 }).await;
    let (_, ack_pending, _) = s.consumer_state().await;
    assert!(acked, "nothing fetched is left unacknowledged after a graceful stop: {ack_pending} ack-pending");
    assert_eq!(stats.acked.load(Ordering::Relaxed), stats.fetched.load(Ordering::Relaxed));
    assert_eq!(sink.len() as u64, stats.acked.load(Ordering::Relaxed));
}

#[tokio::test]
async fn consumer_drift_fails_before_the_first_fetch() {
    let s = setup().await;
    s.publish(5, json_payload).await;
    let stream = s.js.get_stream(&s.stream).await.unwrap();
    stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            durable_name: Some(s.consumer.clone()),
            ack_wait: Duration::from_secs(10),
            max_deliver: 3,
            filter_subject: s.subject.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    let sink = Arc::new(MemorySink::new());
    let config = s.config(json!({"consumer_management": {"ack_wait_seconds": 20, "max_deliver": 3}}));
    let result =
        tokio::time::timeout(Duration::from_secs(20), sinks_runtime::run(config, sink.clone(), std::future::pending()))
            .await
            .unwrap();
    match result {
        Err(RunError::Config(e)) => {
            let paths: Vec<&str> = e.issues.iter().map(|i| i.path.as_str()).collect();
            assert_eq!(paths, ["consumer_management.ack_wait_seconds"]);
        }
        other => panic!("expected a drift error, got {other:?}"),
    }
    assert_eq!(sink.write_calls(), 0, "nothing was fetched or written");
}

#[tokio::test]
async fn reconcile_updates_changeable_fields() {
    let s = setup().await;
    let stream = s.js.get_stream(&s.stream).await.unwrap();
    stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            durable_name: Some(s.consumer.clone()),
            ack_wait: Duration::from_secs(10),
            filter_subject: s.subject.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    s.publish(10, json_payload).await;
    let sink = Arc::new(MemorySink::new());
    let config = s.config(json!({"consumer_management": {"mode": "reconcile", "ack_wait_seconds": 20}}));
    let run = start(config, sink.clone());
    assert!(wait_until(Duration::from_secs(20), || async { sink.len() == 10 }).await);
    run.stop().await;
    let info = stream.consumer_info(&s.consumer).await.unwrap();
    assert_eq!(info.config.ack_wait, Duration::from_secs(20));
}

#[tokio::test]
async fn bind_only_without_a_consumer_is_a_config_error() {
    let s = setup().await;
    let sink = Arc::new(MemorySink::new());
    let config = s.config(json!({"consumer_management": {"mode": "bind_only"}}));
    let result = sinks_runtime::run(config, sink, std::future::pending()).await;
    match result {
        Err(RunError::Config(e)) => assert_eq!(e.issues[0].path, "nats.consumer"),
        other => panic!("expected a config error, got {other:?}"),
    }
}

/// Records the order and concurrency of writes; batches holding subject `*.slow` are slow.
#[derive(Debug, Default)]
struct OrderSink {
    written: std::sync::Mutex<Vec<(String, u64)>>,
    in_flight: std::sync::atomic::AtomicUsize,
    max_in_flight: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl Sink for OrderSink {
    fn name(&self) -> &str {
        "order"
    }
    async fn write(
        &self,
        batch: &[sinks_contract::Envelope],
        _budget: std::time::Duration,
    ) -> sinks_contract::BatchResult {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        // Earlier slow batches take longer than later ones: without ordering, a later batch of
        // the slow key would finish (and be recorded) first.
        let slow_first = batch.iter().find(|e| e.subject().ends_with(".slow")).map(|e| e.jetstream().stream_sequence);
        let delay = slow_first.map_or(20, |seq| 400u64.saturating_sub(seq).max(50));
        tokio::time::sleep(Duration::from_millis(delay)).await;
        self.written
            .lock()
            .unwrap()
            .extend(batch.iter().map(|e| (e.subject().to_owned(), e.jetstream().stream_sequence)));
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(batch.iter().map(|_| sinks_contract::MessageOutcome::Committed).collect())
    }
    async fn health_check(&self) -> Result<(), sinks_contract::SinkError> {
        Ok(())
    }
}

#[tokio::test]
async fn pipelined_batches_never_reorder_a_key() {
    let s = setup().await;
    let root = s.stream.to_lowercase();
    // 60 messages of a slow key, 240 messages each on its own subject, then 20 more of the
    // slow key. The unique-subject batches run beside the slow ones (nothing orders them),
    // while every slow batch, including the late ones, waits for the slow batch before it.
    let msgs = (0..320)
        .map(|i| {
            let key = if !(60..300).contains(&i) { "slow".to_owned() } else { format!("fast{i}") };
            (format!("{root}.{key}"), HeaderMap::new(), json_payload(i))
        })
        .collect();
    js_publish_all(&s.js, msgs).await;
    let sink = Arc::new(OrderSink::default());
    let config = s.config(json!({"delivery": {"batch_size": 10, "max_in_flight_batches": 4}}));
    let run = start(config, sink.clone());
    assert!(wait_until(Duration::from_secs(60), || async { s.settled().await }).await);
    run.stop().await;
    let written = sink.written.lock().unwrap().clone();
    assert_eq!(written.len(), 320, "every message written once (no redelivery happened)");
    let mut last: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for (subject, seq) in &written {
        let prev = last.insert(subject, *seq).unwrap_or(0);
        assert!(*seq > prev, "{subject}: sequence {seq} written after {prev}");
    }
    assert!(sink.max_in_flight.load(Ordering::SeqCst) >= 2, "batches were written concurrently");
}

#[tokio::test]
async fn heartbeats_keep_a_long_write_alive() {
    // ack_wait 1 s, writes take 3 s: without heartbeats JetStream would redeliver during the
    // write. With `delivery.in_progress` its heartbeats run; without, the runner's own (every
    // third of AckWait once a write has taken that long).
    for heartbeats in [true, false] {
        let s = setup().await;
        s.publish(5, json_payload).await;
        let sink = Arc::new(MemorySink::new());
        sink.faults.write_delay_ms.store(3000, Ordering::Relaxed);
        let config = s.config(json!({
            "consumer_management": {"ack_wait_seconds": 1},
            "delivery": {"in_progress": {"enabled": heartbeats, "interval_ms": 300}},
        }));
        let run = start(config, sink.clone());
        assert!(wait_until(Duration::from_secs(30), || async { sink.len() == 5 && s.settled().await }).await);
        let stats = run.stop().await;
        let stream = s.js.get_stream(&s.stream).await.unwrap();
        let deliveries = stream.consumer_info(&s.consumer).await.unwrap().delivered.consumer_sequence;
        assert_eq!(deliveries, 5, "in_progress {heartbeats}: no message was redelivered while being written");
        assert_eq!(stats.fetched.load(Ordering::Relaxed), 5);
    }
}

#[tokio::test]
async fn the_last_allowed_delivery_is_dead_lettered_not_dropped() {
    let s = setup().await;
    let (dlq_stream, dlq_subject) = s.dlq_stream().await;
    s.publish(5, json_payload).await;
    let sink = Arc::new(MemorySink::new());
    sink.faults.unreachable.store(true, Ordering::Relaxed);
    // The destination stays down; the consumer allows 3 deliveries. On the third, the server
    // would give up silently: the gate dead-letters instead.
    let config = s.three_deliveries_then_dlq(&dlq_subject, 2);
    let run = start(config, sink.clone());
    assert!(wait_until(Duration::from_secs(30), || async { s.settled().await }).await);
    let stats = run.stop().await;
    let records = read_stream(&s.js, &dlq_stream).await;
    assert_eq!(records.len(), 5, "every message reached the DLQ on its last delivery");
    for (_, _, _, body) in &records {
        let r: serde_json::Value = serde_json::from_slice(body).unwrap();
        assert_eq!(r["delivered"], 3);
        assert_eq!(r["error_type"], "TemporarySinkError");
    }
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 5);
    assert!(sink.is_empty());
}

#[tokio::test]
async fn confirmed_acks_are_awaited_per_batch() {
    let s = setup().await;
    s.publish(300, json_payload).await;
    let sink = Arc::new(MemorySink::new());
    let config = s.config(json!({"delivery": {"ack_confirmation": {"enabled": true, "timeout_ms": 5000}}}));
    let run = start(config, sink.clone());
    assert!(wait_until(Duration::from_secs(30), || async { sink.len() == 300 && s.settled().await }).await);
    let stats = run.stop().await;
    assert_eq!(stats.acked.load(Ordering::Relaxed), 300, "every ack was confirmed by the server");
    assert_eq!(stats.ack_failures.load(Ordering::Relaxed), 0);
}

/// Publishes `n` messages on one subject and fails the first attempt of every 10th.
async fn one_subject_with_failures(s: &Setup, n: usize) -> Arc<MemorySink> {
    let subject = format!("{}.only", s.stream.to_lowercase());
    let msgs = (0..n).map(|i| (subject.clone(), HeaderMap::new(), json_payload(i))).collect();
    js_publish_all(&s.js, msgs).await;
    let sink = Arc::new(MemorySink::new());
    sink.faults.fail_once.lock().unwrap().extend((10..=n as u64).step_by(10));
    sink
}

#[tokio::test]
async fn held_back_messages_come_back_after_their_blocker_in_order() {
    let s = setup().await;
    let sink = one_subject_with_failures(&s, 300).await;
    let config = s.config(json!({"delivery": {"max_in_flight_batches": 4}}));
    let run = start(config, sink.clone());
    assert!(wait_until(Duration::from_secs(60), || async { sink.len() == 300 && s.settled().await }).await);
    let stats = run.stop().await;
    assert!(stats.held_back.load(Ordering::Relaxed) > 0, "the failures held later messages back");
    let commits: Vec<u64> = sink.commits().into_iter().map(|(seq, _)| seq).collect();
    assert_eq!(commits, (1..=300).collect::<Vec<u64>>(), "one subject: committed in stream order, each once");
    assert_eq!(stats.left_unacked.load(Ordering::Relaxed), 0, "nothing was left for AckWait");
    // Only the 30 failed messages were delivered again: held-back ones waited in the runner.
    assert_eq!(stats.fetched.load(Ordering::Relaxed), 330, "{:?}", stats.snapshot());
}

#[tokio::test]
async fn held_back_messages_never_reach_the_dlq_for_a_neighbours_failure() {
    let s = setup().await;
    let (dlq_stream, dlq_subject) = s.dlq_stream().await;
    let sink = one_subject_with_failures(&s, 300).await;
    // Three deliveries allowed: a message held back twice is on its last delivery, and is
    // then written even out of order rather than dead-lettered.
    let config = s.config(json!({
        "consumer_management": {"max_deliver": 3, "ack_wait_seconds": 5},
        "dead_letter": {"enabled": true, "subject": dlq_subject},
        "delivery": {"max_in_flight_batches": 4},
    }));
    let run = start(config, sink.clone());
    assert!(wait_until(Duration::from_secs(60), || async { sink.len() == 300 && s.settled().await }).await);
    let stats = run.stop().await;
    assert!(stats.held_back.load(Ordering::Relaxed) > 0);
    assert!(read_stream(&s.js, &dlq_stream).await.is_empty(), "no DLQ record: only first attempts failed");
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 0);
    let mut seen: Vec<u64> = sink.commits().into_iter().map(|(seq, _)| seq).collect();
    seen.sort_unstable();
    assert_eq!(seen, (1..=300).collect::<Vec<u64>>(), "every message committed exactly once");
}

#[tokio::test]
async fn held_back_messages_are_released_on_stop_not_left_for_ack_wait() {
    let s = setup().await;
    let sink = Arc::new(MemorySink::new());
    let subject = format!("{}.only", s.stream.to_lowercase());
    let msgs = (0..100).map(|i| (subject.clone(), HeaderMap::new(), json_payload(i))).collect();
    js_publish_all(&s.js, msgs).await;
    sink.faults.fail_once.lock().unwrap().insert(10);
    // The failed message comes back after 5 s; the ones behind it wait in the runner.
    let delivery =
        json!({"delivery": {"retry_backoff_ms": 5000, "retry_backoff_max_ms": 5000, "retry_jitter": "none"}});
    let run = start(s.config(delivery.clone()), sink.clone());
    assert!(wait_until(Duration::from_secs(30), || async { sink.len() == 9 }).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stats = run.stop().await;
    assert!(stats.held_back.load(Ordering::Relaxed) > 0, "messages were parked when the stop came");
    assert_eq!(sink.len(), 9);
    // The next process gets the parked messages at once (AckWait is 30 s), then the failed
    // one when its backoff ends.
    let next = Arc::new(MemorySink::new());
    let run = start(s.config(delivery), next.clone());
    assert!(wait_until(Duration::from_secs(3), || async { next.len() >= 90 }).await, "parked messages came back");
    assert!(wait_until(Duration::from_secs(30), || async { next.len() == 91 && s.settled().await }).await);
    run.stop().await;
    let mut all: Vec<u64> = sink.commits().into_iter().chain(next.commits()).map(|(seq, _)| seq).collect();
    all.sort_unstable();
    assert_eq!(all, (1..=100).collect::<Vec<u64>>());
}

#[tokio::test]
async fn a_failed_message_back_on_its_last_delivery_still_brings_its_held_back_messages() {
    let s = setup().await;
    let (dlq_stream, dlq_subject) = s.dlq_stream().await;
    let sink = one_subject_with_failures(&s, 300).await;
    // Two deliveries allowed: each failed message comes back on its last one, when it is
    // written without waiting for anything (it carries no ordering key then). The messages
    // held back behind it must still follow it, not wait for it forever.
    let config = s.config(json!({
        "consumer_management": {"max_deliver": 2, "ack_wait_seconds": 5},
        "dead_letter": {"enabled": true, "subject": dlq_subject},
    }));
    let run = start(config, sink.clone());
    let done = wait_until(Duration::from_secs(60), || async { sink.len() == 300 && s.settled().await }).await;
    let stats = run.stop().await;
    assert!(done, "committed {} of 300; {:?}; consumer {:?}", sink.len(), stats.snapshot(), s.consumer_state().await);
    assert!(stats.held_back.load(Ordering::Relaxed) > 0);
    assert!(read_stream(&s.js, &dlq_stream).await.is_empty(), "no DLQ record: only first attempts failed");
    let commits: Vec<u64> = sink.commits().into_iter().map(|(seq, _)| seq).collect();
    assert_eq!(commits, (1..=300).collect::<Vec<u64>>(), "one subject: committed in stream order, each once");
}

#[tokio::test]
async fn held_back_messages_survive_a_peer_that_takes_messages_and_never_settles_them() {
    let s = setup().await;
    let sink = one_subject_with_failures(&s, 600).await;
    let config = s.config(json!({"consumer_management": {"ack_wait_seconds": 1}}));
    let run = start(config, sink.clone());
    // A second worker on the same durable takes eight messages and dies with them: what it
    // took (failed messages coming back among them) returns only after AckWait.
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let peer = {
        let js = s.js.clone();
        let (stream, consumer) = (s.stream.clone(), s.consumer.clone());
        let finished = finished.clone();
        tokio::spawn(async move {
            let stream = js.get_stream(&stream).await.unwrap();
            let consumer: PullConsumer = loop {
                match stream.get_consumer(&consumer).await {
                    Ok(c) => break c,
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            };
            let mut taken = 0;
            while taken < 8 && !finished.load(Ordering::Relaxed) {
                let pull = consumer.batch().max_messages(2).expires(Duration::from_millis(200));
                if let Ok(mut batch) = pull.messages().await {
                    while let Some(Ok(_)) = batch.next().await {
                        taken += 1;
                    }
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            taken
        })
    };
    let done = wait_until(Duration::from_secs(90), || async { sink.len() == 600 && s.settled().await }).await;
    finished.store(true, Ordering::Relaxed);
    let taken = peer.await.unwrap();
    let stats = run.stop().await;
    let consumer = s.consumer_state().await;
    assert!(
        done,
        "the peer took {taken}; committed {} of 600; {:?}; consumer {consumer:?}",
        sink.len(),
        stats.snapshot()
    );
    assert!(taken > 0, "the peer took messages");
    let mut seen: Vec<u64> = sink.commits().into_iter().map(|(seq, _)| seq).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, (1..=600).collect::<Vec<u64>>(), "every message committed");
}

#[tokio::test]
async fn a_refused_message_is_dead_lettered_alone_while_held_back_neighbours_wait_in_order() {
    let s = setup().await;
    let (dlq_stream, dlq_subject) = s.dlq_stream().await;
    // One subject: seq 10 fails once (the messages behind it are held back), seq 30 is too
    // large for the size policy (refused, never reaching the sink), the rest is ordinary.
    let subject = format!("{}.only", s.stream.to_lowercase());
    let msgs = (0..100)
        .map(|i| {
            let payload =
                if i == 29 { Bytes::from(format!(r#"{{"n":"{}"}}"#, "x".repeat(1000))) } else { json_payload(i) };
            (subject.clone(), HeaderMap::new(), payload)
        })
        .collect();
    js_publish_all(&s.js, msgs).await;
    let sink = Arc::new(MemorySink::new());
    sink.faults.fail_once.lock().unwrap().insert(10);
    // A batch that starts with the failing message fails entirely: riding it out as a
    // destination outage would write it again in place; this test is about the hold-back.
    let config = s.config(json!({
        "delivery": {"batch_size": 20, "outage_hold_seconds": 0},
        "size_policy": {"enabled": true, "max_payload_bytes": 512},
        "dead_letter": {"enabled": true, "subject": dlq_subject},
    }));
    let run = start(config, sink.clone());
    let done = wait_until(Duration::from_secs(30), || async { sink.len() == 99 && s.settled().await }).await;
    let stats = run.stop().await;
    assert!(done, "committed {} of 99; {:?}", sink.len(), stats.snapshot());
    assert_eq!(stats.rejected_by_policy.load(Ordering::Relaxed), 1);
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 1, "only the refused message is dead-lettered");
    assert!(stats.held_back.load(Ordering::Relaxed) > 0, "the failure held later messages back");
    let records = read_stream(&s.js, &dlq_stream).await;
    assert_eq!(records.len(), 1);
    let record: serde_json::Value = serde_json::from_slice(&records[0].3).unwrap();
    assert_eq!(record["stream_sequence"], 30);
    assert!(record["reason"].is_string(), "the record names the policy's reason: {record}");
    let commits: Vec<u64> = sink.commits().into_iter().map(|(seq, _)| seq).collect();
    let expected: Vec<u64> = (1..=100).filter(|seq| *seq != 30).collect();
    assert_eq!(commits, expected, "one subject: committed in stream order, each once, the refused one never");
}

/// The in-memory sink behind a slow destination: 5 ms per message of every write, and the
/// size of every write recorded.
#[derive(Debug)]
struct SlowSink {
    inner: Arc<MemorySink>,
    sizes: std::sync::Mutex<Vec<usize>>,
}

#[async_trait::async_trait]
impl Sink for SlowSink {
    fn name(&self) -> &str {
        "slow"
    }
    async fn write(
        &self,
        batch: &[sinks_contract::Envelope],
        _budget: std::time::Duration,
    ) -> sinks_contract::BatchResult {
        self.sizes.lock().unwrap().push(batch.len());
        tokio::time::sleep(Duration::from_millis(5) * batch.len() as u32).await;
        self.inner.write(batch, sinks_contract::DEFAULT_BUDGET).await
    }
    async fn health_check(&self) -> Result<(), sinks_contract::SinkError> {
        Ok(())
    }
}

/// The e2e_http stall, made deterministic: a lot held behind a failed message used to be
/// written in one piece with the batch that brought the failed message back (391 messages
/// against a `batch_size` of 20), a write longer than AckWait during which the server
/// redelivered the messages not heartbeated; delivery counts grew, and on a loaded machine a
/// lot then waited a whole AckWait with its acks pending. Now the lot leaves in chunks of
/// `batch_size`, each after the previous one settled, and a write that outlasts a third of
/// AckWait is heartbeated.
#[tokio::test]
async fn a_returning_lot_is_written_in_batch_sized_chunks_and_nothing_is_redelivered() {
    let s = setup().await;
    let subject = format!("{}.only", s.stream.to_lowercase());
    let msgs = (0..400).map(|i| (subject.clone(), HeaderMap::new(), json_payload(i))).collect();
    js_publish_all(&s.js, msgs).await;
    let inner = Arc::new(MemorySink::new());
    inner.faults.fail_once.lock().unwrap().insert(10);
    let sink = Arc::new(SlowSink { inner: inner.clone(), sizes: std::sync::Mutex::new(Vec::new()) });
    let config = s.config(json!({
        "consumer_management": {"ack_wait_seconds": 1},
        // The lots of a failed message are this test's subject, not a destination outage.
        "delivery": {"batch_size": 20, "max_in_flight_batches": 4, "outage_hold_seconds": 0},
    }));
    let run = start(config, sink.clone());
    let done = wait_until(Duration::from_secs(60), || async { inner.len() == 400 && s.settled().await }).await;
    let stats = run.stop().await;
    assert!(done, "committed {} of 400; {:?}", inner.len(), stats.snapshot());
    let sizes = sink.sizes.lock().unwrap().clone();
    assert!(sizes.iter().all(|n| *n <= 20), "every write at most batch_size: {sizes:?}");
    let commits: Vec<u64> = inner.commits().into_iter().map(|(seq, _)| seq).collect();
    assert_eq!(commits, (1..=400).collect::<Vec<u64>>(), "one subject: in stream order, each once");
    assert!(stats.held_back.load(Ordering::Relaxed) > 0, "messages behind 10 were held back");
    // Only the failed message was delivered again.
    assert_eq!(stats.fetched.load(Ordering::Relaxed), 401, "{:?}", stats.snapshot());
    assert_eq!(stats.left_unacked.load(Ordering::Relaxed), 0);
    let (_, _, redelivered) = s.consumer_state().await;
    assert!(redelivered <= 1, "redelivered {redelivered}");
}

/// A holding sink whose every object fails for good: each write holds its messages
/// (`Pending`), each flush reports a permanent failure for every message held.
#[derive(Debug, Default)]
struct DoomedHolder {
    held: std::sync::Mutex<Vec<(String, u64)>>,
    deliveries: std::sync::Mutex<Vec<(u64, u64, usize)>>,
}

#[async_trait::async_trait]
impl Sink for DoomedHolder {
    fn name(&self) -> &str {
        "doomed-holder"
    }
    fn holding(&self) -> Option<&dyn sinks_contract::Holding> {
        Some(self)
    }
    async fn write(
        &self,
        batch: &[sinks_contract::Envelope],
        _budget: std::time::Duration,
    ) -> sinks_contract::BatchResult {
        let mut held = self.held.lock().unwrap();
        let mut deliveries = self.deliveries.lock().unwrap();
        for e in batch {
            let js = e.jetstream();
            held.push((js.stream.clone(), js.stream_sequence));
            deliveries.push((js.stream_sequence, js.delivered, e.payload().len()));
        }
        Ok(batch.iter().map(|_| sinks_contract::MessageOutcome::Pending).collect())
    }
    async fn health_check(&self) -> Result<(), sinks_contract::SinkError> {
        Ok(())
    }
}

#[async_trait::async_trait]
impl sinks_contract::Holding for DoomedHolder {
    fn settings(&self) -> sinks_contract::HoldingSettings {
        sinks_contract::HoldingSettings::new(Duration::from_millis(100), Duration::from_millis(50))
    }
    async fn flush(&self, _scope: sinks_contract::sink::FlushScope) -> Vec<sinks_contract::sink::Settled> {
        std::mem::take(&mut *self.held.lock().unwrap())
            .into_iter()
            .map(|(stream, sequence)| {
                sinks_contract::sink::Settled::new(
                    stream,
                    sequence,
                    sinks_contract::MessageOutcome::Failed(sinks_contract::SinkError::permanent(
                        "the object was refused for good",
                    )),
                )
            })
            .collect()
    }
}

/// A pending message is kept without its payload until its last allowed delivery: when its
/// object fails for good before then, it must come back (its redelivery carries the
/// payload), never be dead-lettered without it. On its last delivery it is kept whole and
/// dead-lettered with its payload, once.
#[tokio::test]
async fn a_held_message_whose_object_fails_for_good_is_dead_lettered_with_its_payload() {
    let s = setup().await;
    let (dlq_stream, dlq_subject) = s.dlq_stream().await;
    s.publish(20, json_payload).await;
    let sink = Arc::new(DoomedHolder::default());
    let config = s.three_deliveries_then_dlq(&dlq_subject, 5);
    let run = start(config, sink.clone());
    assert!(wait_until(Duration::from_secs(30), || async { s.settled().await }).await);
    let stats = run.stop().await;
    let records = read_stream(&s.js, &dlq_stream).await;
    assert_eq!(records.len(), 20, "every message dead-lettered once");
    let mut seen = std::collections::BTreeSet::new();
    for (_, _, _, body) in &records {
        let r: serde_json::Value = serde_json::from_slice(body).unwrap();
        let seq = r["stream_sequence"].as_u64().unwrap();
        assert!(seen.insert(seq), "seq {seq} dead-lettered twice");
        assert_eq!(r["delivered"], 3, "dead-lettered on its last delivery: {r}");
        assert_eq!(r["error_type"], "PermanentSinkError");
        let payload = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            r["payload_base64"].as_str().unwrap_or_else(|| panic!("no payload in {r}")),
        )
        .unwrap();
        assert_eq!(Bytes::from(payload), json_payload(seq as usize - 1));
    }
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 20);
    // Every message was delivered three times, each time with its payload.
    let deliveries = sink.deliveries.lock().unwrap();
    assert_eq!(deliveries.len(), 60, "{deliveries:?}");
    assert!(deliveries.iter().all(|(_, _, len)| *len > 0));
}

/// The in-memory sink whose first write waits until the test lets it go (and says when it
/// began).
#[derive(Debug)]
struct GateSink {
    inner: Arc<MemorySink>,
    first_began: tokio::sync::Notify,
    release: tokio::sync::Notify,
    writes: std::sync::atomic::AtomicUsize,
    /// How many messages each write carried, in the order the writes began.
    sizes: std::sync::Mutex<Vec<usize>>,
}

impl GateSink {
    /// A memory sink whose first write waits for `release`.
    fn new() -> Self {
        Self {
            inner: Arc::new(MemorySink::new()),
            first_began: tokio::sync::Notify::new(),
            release: tokio::sync::Notify::new(),
            writes: std::sync::atomic::AtomicUsize::new(0),
            sizes: std::sync::Mutex::new(Vec::new()),
        }
    }
}

#[async_trait::async_trait]
impl Sink for GateSink {
    fn name(&self) -> &str {
        "gate"
    }
    async fn write(
        &self,
        batch: &[sinks_contract::Envelope],
        _budget: std::time::Duration,
    ) -> sinks_contract::BatchResult {
        self.sizes.lock().unwrap().push(batch.len());
        if self.writes.fetch_add(1, Ordering::SeqCst) == 0 {
            self.first_began.notify_one();
            self.release.notified().await;
        }
        self.inner.write(batch, sinks_contract::DEFAULT_BUDGET).await
    }
    async fn health_check(&self) -> Result<(), sinks_contract::SinkError> {
        Ok(())
    }
}

/// The policy steps are pure and per message: a batch runs them while an earlier batch of its
/// key is still being written (on another core, for a CPU-bound sink), not after it. Its
/// refused message waits with it for that write, heartbeated like the rest, so a wait of three
/// AckWaits redelivers nothing; afterwards it is dead-lettered and the others are written in
/// order.
#[tokio::test]
async fn a_batch_runs_its_policies_while_an_earlier_batch_of_its_key_writes() {
    let s = setup().await;
    let (dlq_stream, dlq_subject) = s.dlq_stream().await;
    // One subject (one ordering key), batches of up to ten, four in flight (every message is
    // fetched while the first write waits); seq 12, in a later batch, is too large for the size
    // policy.
    let subject = format!("{}.only", s.stream.to_lowercase());
    let msgs = (0..20)
        .map(|i| {
            let payload =
                if i == 11 { Bytes::from(format!(r#"{{"n":"{}"}}"#, "x".repeat(1000))) } else { json_payload(i) };
            (subject.clone(), HeaderMap::new(), payload)
        })
        .collect();
    js_publish_all(&s.js, msgs).await;
    let sink = Arc::new(GateSink::new());
    let config = s.config(json!({
        "consumer_management": {"ack_wait_seconds": 1},
        "delivery": {"batch_size": 10, "max_in_flight_batches": 4, "batch_timeout_ms": 50},
        "size_policy": {"enabled": true, "max_payload_bytes": 512},
        "dead_letter": {"enabled": true, "subject": dlq_subject},
    }));
    let metrics = sinks_runtime::metrics::Metrics::new(&config.metrics);
    let stats = Arc::clone(metrics.stats());
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(sinks_runtime::run_observed(config, sink.clone(), metrics, RunOptions::default(), async {
        let _ = stopped.await;
    }));
    tokio::time::timeout(Duration::from_secs(20), sink.first_began.notified()).await.unwrap();
    let refused_early =
        wait_until(Duration::from_secs(10), || async { stats.rejected_by_policy.load(Ordering::Relaxed) == 1 }).await;
    assert!(
        refused_early,
        "the second batch ran its policies while the first was being written: {:?}",
        stats.snapshot()
    );
    assert_eq!(sink.inner.len(), 0, "the first batch is still being written");
    // Three AckWaits of waiting for the first write.
    tokio::time::sleep(Duration::from_secs(3)).await;
    sink.release.notify_one();
    let done = wait_until(Duration::from_secs(30), || async { sink.inner.len() == 19 && s.settled().await }).await;
    let _ = stop.send(());
    let stats = tokio::time::timeout(Duration::from_secs(30), run).await.unwrap().unwrap().unwrap();
    assert!(done, "committed {} of 19; {:?}", sink.inner.len(), stats.snapshot());
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 1);
    let records = read_stream(&s.js, &dlq_stream).await;
    assert_eq!(records.len(), 1);
    let record: serde_json::Value = serde_json::from_slice(&records[0].3).unwrap();
    assert_eq!(record["stream_sequence"], 12);
    let commits: Vec<u64> = sink.inner.commits().into_iter().map(|(seq, _)| seq).collect();
    let expected: Vec<u64> = (1..=20).filter(|seq| *seq != 12).collect();
    assert_eq!(commits, expected, "one key: committed in stream order, each once");
    let stream = s.js.get_stream(&s.stream).await.unwrap();
    let deliveries = stream.consumer_info(&s.consumer).await.unwrap().delivered.consumer_sequence;
    assert_eq!(deliveries, 20, "nothing was redelivered while the second batch waited, its refused message included");
}

/// Batches fetched while the batch before them waits at the ordering gate join it: a flow of
/// small fetches (one message each here) is written in one write, not one write after another,
/// each waiting for the last. The joined messages wait heartbeated on the waiting batch's one
/// schedule (a wait of three AckWaits, messages joining through more than one of them, redelivers
/// nothing), and are written in stream order after it.
#[tokio::test]
async fn batches_fetched_while_one_waits_at_the_gate_join_it_and_are_written_in_one_write() {
    let s = setup().await;
    let subject = format!("{}.only", s.stream.to_lowercase());
    let sink = Arc::new(GateSink::new());
    let config = s.config(json!({
        "consumer_management": {"ack_wait_seconds": 1},
        "delivery": {"batch_size": 100, "max_in_flight_batches": 4, "batch_timeout_ms": 50},
    }));
    let run = start(config, sink.clone());
    let publish_one = |i: usize| {
        let js = s.js.clone();
        let subject = subject.clone();
        async move { js.publish(subject, json_payload(i)).await.unwrap().await.unwrap() }
    };
    publish_one(0).await;
    tokio::time::timeout(Duration::from_secs(20), sink.first_began.notified()).await.unwrap();
    // One message at a time, each fetched alone: the first waits at the gate for the blocked
    // write, the rest join it.
    for i in 1..=60 {
        publish_one(i).await;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let fetched = wait_until(Duration::from_secs(10), || async { s.consumer_state().await.1 == 61 }).await;
    assert!(fetched, "every message delivered while the first write is blocked");
    tokio::time::sleep(Duration::from_secs(3)).await;
    sink.release.notify_one();
    let done = wait_until(Duration::from_secs(30), || async { sink.inner.len() == 61 && s.settled().await }).await;
    let stats = run.stop().await;
    assert!(done, "committed {} of 61; {:?}", sink.inner.len(), stats.snapshot());
    let sizes = sink.sizes.lock().unwrap().clone();
    assert_eq!(sizes, vec![1, 60], "the blocked write, then one write of everything fetched meanwhile");
    let commits: Vec<u64> = sink.inner.commits().into_iter().map(|(seq, _)| seq).collect();
    assert_eq!(commits, (1..=61).collect::<Vec<u64>>(), "one key: committed in stream order, each once");
    let stream = s.js.get_stream(&s.stream).await.unwrap();
    let deliveries = stream.consumer_info(&s.consumer).await.unwrap().delivered.consumer_sequence;
    assert_eq!(deliveries, 61, "nothing was redelivered while the joined messages waited three AckWaits");
}
