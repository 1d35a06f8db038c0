//! The rescue of messages the server stops redelivering, against a private JetStream server:
//! a run is killed (its runtime dropped, nothing flushed: as a kill -9 looks to the server)
//! while a message is on its last allowed delivery, a new run starts, and the message is
//! rescued (written), or, with a destination that keeps refusing it, dead-lettered with reason
//! `max_deliver_exhausted`. Twenty times in a row, nothing lost.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use serde_json::json;
use sinks_certify::MemorySink;
use sinks_contract::{BatchResult, Envelope, MessageOutcome, Sink, SinkError};
use sinks_runtime::Config;
use sinks_testkit::{NatsServer, js_publish_all, read_stream, stream_with_subjects, unique, wait_until};

const MESSAGES: u64 = 40;
const TARGET: u64 = 17;
const MAX_DELIVER: u64 = 3;

/// What the sink does with the target message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Fails it temporarily until its last allowed delivery, then blocks for ever on it.
    BlockOnLast,
    /// Fails it temporarily, every time.
    Refuse,
    /// Writes it.
    Write,
}

#[derive(Debug)]
struct LastChance {
    inner: Arc<MemorySink>,
    target: Target,
    /// The target's last allowed delivery reached the sink.
    reached: AtomicBool,
}

#[async_trait::async_trait]
impl Sink for LastChance {
    fn name(&self) -> &str {
        "last-chance"
    }
    async fn write(&self, batch: &[Envelope], _budget: std::time::Duration) -> BatchResult {
        let mut outcomes = Vec::with_capacity(batch.len());
        for e in batch {
            let js = e.jetstream();
            if js.stream_sequence != TARGET || self.target == Target::Write {
                outcomes.extend(self.inner.write(std::slice::from_ref(e), sinks_contract::DEFAULT_BUDGET).await?);
                continue;
            }
            if self.target == Target::BlockOnLast && js.delivered >= MAX_DELIVER {
                self.reached.store(true, Ordering::SeqCst);
                std::future::pending::<()>().await;
            }
            outcomes.push(MessageOutcome::Failed(SinkError::temporary("the destination refuses this one")));
        }
        Ok(outcomes)
    }
    async fn health_check(&self) -> Result<(), SinkError> {
        Ok(())
    }
}

struct Case {
    stream: String,
    consumer: String,
    subject: String,
    dlq_stream: String,
    dlq_subject: String,
}

impl Case {
    async fn new(js: &async_nats::jetstream::Context) -> Self {
        Self::with_payloads(js, |i| Bytes::from(format!("{{\"n\":{i}}}"))).await
    }

    /// A case whose message `i` has the payload `payload(i)`.
    async fn with_payloads(js: &async_nats::jetstream::Context, payload: fn(u64) -> Bytes) -> Self {
        let stream = unique("RESCUE");
        let subject = format!("{}.>", stream.to_lowercase());
        stream_with_subjects(js, &stream, &[&subject]).await;
        let dlq_stream = unique("DLQ");
        let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
        stream_with_subjects(js, &dlq_stream, &[&dlq_subject]).await;
        let msgs = (1..=MESSAGES)
            .map(|i| (format!("{}.k{}", stream.to_lowercase(), i % 4), HeaderMap::new(), payload(i)))
            .collect();
        js_publish_all(js, msgs).await;
        Self { stream, consumer: unique("sink"), subject, dlq_stream, dlq_subject }
    }

    fn config(&self, url: &str) -> Config {
        Config::from_value(json!({
            "nats": {"url": url, "stream": self.stream, "consumer": self.consumer, "subject": self.subject},
            "consumer_management": {"max_deliver": MAX_DELIVER, "ack_wait_seconds": 1},
            "delivery": {"batch_size": 10, "batch_timeout_ms": 100, "retry_backoff_ms": 20, "retry_backoff_max_ms": 50, "ordering_key": "none"},
            "dead_letter": {"enabled": true, "subject": self.dlq_subject},
            "sink": {"type": "last-chance"},
        }))
        .unwrap()
    }

    async fn settled(&self, js: &async_nats::jetstream::Context) -> bool {
        sinks_testkit::consumer_settled_on(js, &self.stream, &self.consumer).await
    }
}

/// Kills a run on the target's last delivery, then runs again with `second`; returns the two
/// sinks' records, the DLQ records and the second run's counters.
async fn kill_on_the_last_delivery(
    server: &NatsServer,
    second: Target,
) -> (Arc<MemorySink>, Arc<MemorySink>, Vec<serde_json::Value>, Arc<sinks_runtime::RunStats>) {
    let js = server.js().await;
    let case = Case::new(&js).await;
    // The first run lives in a runtime of its own, dropped at the kill: its tasks, the blocked
    // write and its connection end without a flush, an ack or a drain.
    let first = Arc::new(LastChance {
        inner: Arc::new(MemorySink::new()),
        target: Target::BlockOnLast,
        reached: AtomicBool::new(false),
    });
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    rt.spawn(sinks_runtime::run(case.config(&server.url()), first.clone(), std::future::pending::<()>()));
    assert!(
        wait_until(Duration::from_secs(30), || async { first.reached.load(Ordering::SeqCst) }).await,
        "the target reached its last allowed delivery"
    );
    rt.shutdown_background();
    let sink =
        Arc::new(LastChance { inner: Arc::new(MemorySink::new()), target: second, reached: AtomicBool::new(false) });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(sinks_runtime::run(case.config(&server.url()), sink.clone(), async move {
        let _ = stopped.await;
    }));
    let key = format!("stream-sequence:{}:{TARGET}", case.stream);
    let done = wait_until(Duration::from_secs(30), || async {
        let handled = match second {
            Target::Write => sink.inner.get(&key).is_some(),
            _ => !read_stream(&js, &case.dlq_stream).await.is_empty(),
        };
        handled && first.inner.len() + sink.inner.len() >= (MESSAGES - 1) as usize && case.settled(&js).await
    })
    .await;
    let _ = stop.send(());
    let stats = tokio::time::timeout(Duration::from_secs(30), run).await.unwrap().unwrap().unwrap();
    assert!(done, "{second:?}: not handled in time; {:?}", stats.snapshot());
    let dead: Vec<serde_json::Value> = read_stream(&js, &case.dlq_stream)
        .await
        .iter()
        .map(|(_, _, _, payload)| serde_json::from_slice(payload).unwrap())
        .collect();
    (first.inner.clone(), sink.inner.clone(), dead, stats)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_whose_last_delivery_dies_with_the_sink_is_rescued_or_dead_lettered_round_after_round() {
    let server = NatsServer::start();
    // Twenty rounds with `cargo xtask test --full`, eight in CI (each about 8 s), both targets
    // in turn.
    for round in 0..sinks_testkit::rounds(8, 20) {
        let second = if round % 2 == 0 { Target::Write } else { Target::Refuse };
        let (first, next, dead, stats) = kill_on_the_last_delivery(&server, second).await;
        // Every other message is in one of the two destinations.
        let mut seqs: Vec<u64> = first.commits().into_iter().chain(next.commits()).map(|(s, _)| s).collect();
        seqs.sort_unstable();
        seqs.dedup();
        match second {
            Target::Write => {
                assert_eq!(seqs, (1..=MESSAGES).collect::<Vec<u64>>(), "round {round}: every message written");
                assert!(dead.is_empty(), "round {round}: nothing dead-lettered: {dead:?}");
                assert_eq!(stats.rescued.load(Ordering::Relaxed), 1, "round {round}: {:?}", stats.snapshot());
            }
            _ => {
                let others: Vec<u64> = (1..=MESSAGES).filter(|s| *s != TARGET).collect();
                assert_eq!(seqs, others, "round {round}: every other message written");
                assert_eq!(dead.len(), 1, "round {round}: one dead letter: {dead:?}");
                assert_eq!(dead[0]["stream_sequence"], TARGET);
                assert_eq!(dead[0]["reason"], "max_deliver_exhausted", "{}", dead[0]);
                assert_eq!(dead[0]["delivered"], MAX_DELIVER);
                assert!(dead[0]["error"].as_str().unwrap().contains("the destination refuses this one"), "{}", dead[0]);
                assert_eq!(
                    stats.rescue_dead_lettered.load(Ordering::Relaxed),
                    1,
                    "round {round}: {:?}",
                    stats.snapshot()
                );
            }
        }
    }
}

#[tokio::test]
async fn bind_only_without_the_capture_stream_is_refused_unless_rescue_is_turned_off() {
    let server = NatsServer::start();
    let js = server.js().await;
    let case = Case::new(&js).await;
    // An operator-made consumer with a max_deliver, and no capture stream.
    let stream = js.get_stream(&case.stream).await.unwrap();
    let plan = serde_json::to_value(sinks_runtime::setup::consumer_plan(&case.config(&server.url()))).unwrap();
    let desired: async_nats::jetstream::consumer::pull::Config = serde_json::from_value(plan).unwrap();
    stream.create_consumer(desired).await.unwrap();
    let with = |extra: serde_json::Value| {
        let mut config = case.config(&server.url());
        config.consumer_management.mode = sinks_runtime::config::ConsumerMode::BindOnly;
        if extra["rescue_off"] == true {
            config.rescue.enabled = false;
            // bind_only needs the stream guard's bucket too (or its explicit opt-out).
            config.stream_guard.identity = false;
        }
        config
    };
    let sink = Arc::new(MemorySink::new());
    let refused = tokio::time::timeout(
        Duration::from_secs(20),
        sinks_runtime::run(with(json!({})), sink.clone(), std::future::pending::<()>()),
    )
    .await
    .expect("refused at once, not retried");
    let Err(sinks_runtime::RunError::Config(e)) = refused else { panic!("a configuration error: {refused:?}") };
    assert_eq!(e.issues[0].path, "rescue.stream", "{e}");
    assert!(e.issues[0].message.contains("stream-plan"), "{e}");
    // The explicit opt-out starts (and consumes).
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(sinks_runtime::run(with(json!({"rescue_off": true})), sink.clone(), async move {
        let _ = stopped.await;
    }));
    assert!(wait_until(Duration::from_secs(30), || async { sink.len() == MESSAGES as usize }).await);
    let _ = stop.send(());
    run.await.unwrap().unwrap();
}

/// A rescued message takes the policy steps of a fetched one and is counted like one. The
/// first run (no policy) is killed on the target's last delivery; the second has a size
/// policy the target's payload is too large for, so the rescue's last chance ends in the
/// policy's refusal: dead-lettered with the policy's reason (not the exhaustion), and counted
/// in `rejected_by_policy` and the size policy's rejected messages and batches, as a fetched
/// message's refusal is. (Before the rescue took the forward path, it skipped both counts.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescued_message_a_policy_refuses_is_counted_like_a_fetched_one() {
    use sinks_runtime::metrics::{CounterId, Metrics};
    let server = NatsServer::start();
    let js = server.js().await;
    let case = Case::with_payloads(&js, |i| match i {
        TARGET => Bytes::from(format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(200))),
        _ => Bytes::from(format!("{{\"n\":{i}}}")),
    })
    .await;
    let first = Arc::new(LastChance {
        inner: Arc::new(MemorySink::new()),
        target: Target::BlockOnLast,
        reached: AtomicBool::new(false),
    });
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    rt.spawn(sinks_runtime::run(case.config(&server.url()), first.clone(), std::future::pending::<()>()));
    assert!(
        wait_until(Duration::from_secs(30), || async { first.reached.load(Ordering::SeqCst) }).await,
        "the target reached its last allowed delivery"
    );
    rt.shutdown_background();

    let mut config = case.config(&server.url());
    config.size_policy.enabled = true;
    config.size_policy.max_payload_bytes = 100;
    config.metrics.enabled = true;
    let metrics = Metrics::new(&config.metrics);
    let sink = Arc::new(LastChance {
        inner: Arc::new(MemorySink::new()),
        target: Target::Write,
        reached: AtomicBool::new(false),
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(sinks_runtime::run_observed(
        config,
        sink.clone(),
        metrics.clone(),
        sinks_runtime::RunOptions::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    let done = wait_until(Duration::from_secs(30), || async {
        !read_stream(&js, &case.dlq_stream).await.is_empty()
            && first.inner.len() + sink.inner.len() >= (MESSAGES - 1) as usize
            && case.settled(&js).await
    })
    .await;
    let _ = stop.send(());
    let stats = tokio::time::timeout(Duration::from_secs(30), run).await.unwrap().unwrap().unwrap();
    assert!(done, "not handled in time; {:?}", stats.snapshot());
    let dead: Vec<serde_json::Value> = read_stream(&js, &case.dlq_stream)
        .await
        .iter()
        .map(|(_, _, _, payload)| serde_json::from_slice(payload).unwrap())
        .collect();
    assert_eq!(dead.len(), 1, "one dead letter: {dead:?}");
    assert_eq!(dead[0]["stream_sequence"], TARGET);
    assert_eq!(dead[0]["reason"], "payload_too_large", "the policy's reason is kept: {}", dead[0]);
    let key = format!("stream-sequence:{}:{TARGET}", case.stream);
    assert!(sink.inner.get(&key).is_none() && first.inner.get(&key).is_none(), "the refused message is not written");
    assert_eq!(stats.rescue_dead_lettered.load(Ordering::Relaxed), 1, "{:?}", stats.snapshot());
    assert_eq!(stats.rejected_by_policy.load(Ordering::Relaxed), 1, "{:?}", stats.snapshot());
    assert_eq!(metrics.counter(CounterId::SizePolicyMessagesRejected), 1, "the size policy's tally");
    assert_eq!(metrics.counter(CounterId::SizePolicyBatchesRejected), 1, "the size policy's tally");
    assert_eq!(metrics.counter(CounterId::MessagesRescuedDeadLettered), 1);
}
