//! Riding out a destination outage, against a private JetStream server with the in-memory
//! sink: a destination down for seconds under steady traffic with `max_deliver: 3` gives no
//! dead letter and every message exactly once; a partial failure is no outage; an outage
//! longer than `delivery.outage_hold_seconds` releases the held messages to their normal
//! course; a stop during an outage ends at once and loses nothing.
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
use sinks_runtime::metrics::{CounterId, GaugeId, Metrics};
use sinks_runtime::{Config, RunError, RunOptions, RunStats};
use sinks_testkit::{NatsServer, js_publish_all, read_stream, stream_with_subjects, unique, wait_until};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

struct Setup {
    _server: NatsServer,
    url: String,
    js: Context,
    stream: String,
    consumer: String,
    dlq_stream: String,
    dlq_subject: String,
}

async fn setup() -> Setup {
    let server = NatsServer::start();
    let js = server.js().await;
    let stream = unique("OUT");
    stream_with_subjects(&js, &stream, &[&format!("{}.>", stream.to_lowercase())]).await;
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&js, &dlq_stream, &[&dlq_subject]).await;
    Setup { url: server.url(), _server: server, js, consumer: unique("sink"), stream, dlq_stream, dlq_subject }
}

impl Setup {
    /// `max_deliver: 3`, AckWait 2 s, fast retries, a DLQ: what used to dead-letter a
    /// destination outage of a few seconds.
    fn config(&self, extra: serde_json::Value) -> Config {
        let mut value = json!({
            "nats": {"url": self.url, "stream": self.stream, "consumer": self.consumer,
                     "subject": format!("{}.>", self.stream.to_lowercase())},
            "consumer_management": {"max_deliver": 3, "ack_wait_seconds": 2},
            "delivery": {"batch_size": 20, "batch_timeout_ms": 200, "max_in_flight_batches": 2,
                         "retry_backoff_ms": 50, "retry_backoff_max_ms": 200},
            "dead_letter": {"enabled": true, "subject": self.dlq_subject},
            "metrics": {"enabled": true, "lag_poll_interval_seconds": 1},
            "stream_guard": {"identity": false},
            "sink": {"type": "memory"},
        });
        sinks_testkit::merge_json(&mut value, extra);
        Config::from_value(value).unwrap()
    }

    async fn publish(&self, from: usize, n: usize) {
        let msgs = (from..from + n)
            .map(|i| (format!("{}.k{}", self.stream.to_lowercase(), i % 3), HeaderMap::new(), payload(i)))
            .collect();
        js_publish_all(&self.js, msgs).await;
    }

    async fn settled(&self) -> bool {
        sinks_testkit::consumer_settled_on(&self.js, &self.stream, &self.consumer).await
    }

    async fn dead_letters(&self) -> usize {
        read_stream(&self.js, &self.dlq_stream).await.len()
    }
}

fn payload(i: usize) -> Bytes {
    Bytes::from(format!(r#"{{"n":{i}}}"#))
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
}

/// Publishes 20 messages every 200 ms until `n` are out.
async fn steady(s: &Setup, n: usize) {
    let mut i = 0;
    while i < n {
        s.publish(i, 20).await;
        i += 20;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_destination_down_for_ten_seconds_under_steady_traffic_dead_letters_nothing() {
    let s = setup().await;
    let sink = Arc::new(MemorySink::new());
    let run = start(s.config(json!({})), sink.clone());
    let traffic = async {
        steady(&s, 1000).await;
    };
    let outage = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        sink.faults.unreachable.store(true, Ordering::Relaxed);
        assert!(
            wait_until(Duration::from_secs(5), || async { run.metrics.gauge(GaugeId::DestinationOutage) == 1.0 }).await,
            "the outage is held"
        );
        assert!(!run.metrics.status().readiness().ready, "not ready while paused");
        tokio::time::sleep(Duration::from_secs(10)).await;
        sink.faults.unreachable.store(false, Ordering::Relaxed);
    };
    tokio::join!(traffic, outage);
    assert!(
        wait_until(Duration::from_secs(60), || async { sink.len() == 1000 && s.settled().await }).await,
        "every message stored: {} of 1000",
        sink.len()
    );
    assert_eq!(run.metrics.gauge(GaugeId::DestinationOutage), 0.0);
    let paused = run.metrics.counter(CounterId::DestinationOutagePausedSeconds);
    let stats = run.stop().await;
    assert_eq!(s.dead_letters().await, 0, "a destination outage dead-letters nothing");
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 0);
    assert_eq!(stats.acked.load(Ordering::Relaxed), 1000, "each message acknowledged once");
    assert!((8..=14).contains(&paused), "fetching was paused about 10 s: {paused}");
    for i in 0..1000 {
        let key = format!("stream-sequence:{}:{}", s.stream, i + 1);
        assert_eq!(sink.get(&key), Some(payload(i)), "{key}");
    }
}

#[tokio::test]
async fn a_partial_failure_is_no_outage() {
    let s = setup().await;
    let sink = Arc::new(MemorySink::new());
    // One message of the first batch fails temporarily each time; its batch-mates commit.
    sink.faults.fail_once.lock().unwrap().extend([3u64]);
    let run = start(s.config(json!({"delivery": {"ordering_key": "none"}})), sink.clone());
    s.publish(0, 20).await;
    assert!(wait_until(Duration::from_secs(20), || async { sink.len() == 20 && s.settled().await }).await);
    assert_eq!(run.metrics.counter(CounterId::DestinationOutagePausedSeconds), 0);
    let stats = run.stop().await;
    assert!(stats.nacked.load(Ordering::Relaxed) >= 1, "the failed message was NAKed as always");
}

#[tokio::test]
async fn an_outage_longer_than_the_hold_releases_the_messages_to_their_normal_course() {
    let s = setup().await;
    let sink = Arc::new(MemorySink::new());
    sink.faults.unreachable.store(true, Ordering::Relaxed);
    let run = start(s.config(json!({"delivery": {"outage_hold_seconds": 1}})), sink.clone());
    s.publish(0, 10).await;
    // Held 1 s at a time, released, redelivered: after three deliveries they are dead-lettered,
    // never lost.
    assert!(
        wait_until(Duration::from_secs(60), || async { s.dead_letters().await == 10 && s.settled().await }).await,
        "{} dead letters",
        s.dead_letters().await
    );
    assert!(run.metrics.counter(CounterId::MessagesReleasedAfterOutageHold) >= 10);
    run.stop().await;
    assert!(sink.is_empty());
}

#[tokio::test]
async fn a_stop_during_an_outage_ends_promptly_and_acknowledges_nothing() {
    let s = setup().await;
    let sink = Arc::new(MemorySink::new());
    sink.faults.unreachable.store(true, Ordering::Relaxed);
    let run = start(s.config(json!({})), sink.clone());
    s.publish(0, 30).await;
    assert!(
        wait_until(Duration::from_secs(10), || async { run.metrics.gauge(GaugeId::DestinationOutage) == 1.0 }).await
    );
    let asked = std::time::Instant::now();
    let stats = run.stop().await;
    assert!(asked.elapsed() < Duration::from_secs(10), "a stop ends the hold at once: {:?}", asked.elapsed());
    assert_eq!(stats.acked.load(Ordering::Relaxed), 0);
    assert_eq!(s.dead_letters().await, 0);
    // Everything is still there for the next run.
    sink.faults.unreachable.store(false, Ordering::Relaxed);
    let again = start(s.config(json!({})), sink.clone());
    assert!(wait_until(Duration::from_secs(30), || async { sink.len() == 30 && s.settled().await }).await);
    again.stop().await;
}
