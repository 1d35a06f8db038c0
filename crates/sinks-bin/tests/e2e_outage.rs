//! A destination down for ten seconds, through the binary, with `max_deliver: 3` (or 1) and
//! the dead-letter stream on: nothing is dead-lettered and every message is stored exactly
//! once. Under steady traffic into an HTTP endpoint with two workers on one consumer and the
//! default ordering by subject (each subject's writes stay in stream order); into S3 in
//! batch mode (objects of many messages) through an endpoint that answers 503; and for
//! messages the server stopped redelivering (a worker killed on their last delivery, the
//! rescue giving them their last chance while the endpoint is still down).
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use serde_json::json;
use sink_s3::certify::S3Harness;
use sinks_testkit::{FaultProxy, HttpTestServer, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, cannot_run, wait_until};
use sinks_toolkit::batch::{BatchCompression, Format, encode};
use support::{Env, Sink, dead_lettered, dlq_stream, env};

/// How long the destination is down.
const OUTAGE: Duration = Duration::from_secs(10);
const KEY_ENV: &str = "E2E_OUTAGE_S3_ACCESS_KEY_ID";
const SECRET_ENV: &str = "E2E_OUTAGE_S3_SECRET_ACCESS_KEY";

/// Publishes `n` messages on 4 subjects, one every `every`, as steady traffic (the subject
/// of message `i` is `<root>.orders.k{i % 4}`; no message ids: keys are stream sequences).
async fn steady(e: &Env, n: u64, every: Duration) {
    let mut tick = tokio::time::interval(every);
    for i in 1..=n {
        tick.tick().await;
        let subject = format!("{}.orders.k{}", e.subject_root, i % 4);
        e.js.publish_with_headers(subject, HeaderMap::new(), Bytes::from(format!("{{\"n\":{i}}}")))
            .await
            .unwrap()
            .await
            .unwrap();
    }
}

/// Takes `down` down after `after`, for [`OUTAGE`].
fn outage(after: Duration, down: impl Fn(bool) + Send + 'static) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        down(true);
        tokio::time::sleep(OUTAGE).await;
        down(false);
    })
}

/// The stream sequences an HTTP endpoint stored, with how often each was answered as new.
fn stored(endpoint: &HttpTestServer) -> BTreeMap<u64, usize> {
    endpoint.successes().into_iter().map(|(key, n)| (key.rsplit(':').next().unwrap().parse().unwrap(), n)).collect()
}

/// Every sequence `1..=n` stored exactly once.
fn assert_exactly_once(stored: &BTreeMap<u64, usize>, n: u64, what: &str) {
    let twice: Vec<(&u64, &usize)> = stored.iter().filter(|(_, c)| **c != 1).collect();
    assert!(twice.is_empty(), "{what}: stored more than once: {twice:?}");
    let missing: Vec<u64> = (1..=n).filter(|s| !stored.contains_key(s)).collect();
    assert!(missing.is_empty(), "{what}: never stored: {missing:?}");
    assert_eq!(stored.len() as u64, n, "{what}: nothing else stored");
}

/// The config of an HTTP sink into `endpoint` with `consumer_management` and the DLQ.
fn http_config(
    e: &Env,
    endpoint: &HttpTestServer,
    dlq_subject: &str,
    consumer: serde_json::Value,
) -> std::path::PathBuf {
    let sink = json!({"type": "http", "url": endpoint.url(), "allow_http_for_local_testing": true,
                      "health_url": endpoint.health_url(), "request_timeout_seconds": 2});
    e.write_config_json(
        sink,
        json!({"consumer_management": consumer, "dead_letter": {"enabled": true, "subject": dlq_subject},
               "delivery": {"batch_size": 50}, "logging": {"level": "INFO"}}),
    )
}

/// Steady traffic of `n` messages into an HTTP endpoint that is down for [`OUTAGE`] from
/// 4 s on, through `workers` workers on one consumer with `max_deliver: 3`: nothing
/// dead-lettered, every message stored exactly once. The endpoint, for more checks.
async fn through_an_http_outage(n: u64, workers: usize) -> Arc<HttpTestServer> {
    let e = env().await;
    let (dlq_stream, dlq_subject) = dlq_stream(&e).await;
    let endpoint = Arc::new(HttpTestServer::start().await.unwrap());
    endpoint.set_keep_bodies(false);
    let config = http_config(&e, &endpoint, &dlq_subject, json!({"max_deliver": 3, "ack_wait_seconds": 4}));
    let running: Vec<Sink> = (0..workers).map(|_| Sink::start(&config, e.dir.path(), &[])).collect();
    let down = {
        let endpoint = Arc::clone(&endpoint);
        outage(Duration::from_secs(4), move |d| endpoint.set_down(d))
    };
    steady(&e, n, Duration::from_millis(10)).await;
    down.await.unwrap();
    let done =
        wait_until(Duration::from_secs(120), || async { stored(&endpoint).len() as u64 >= n && e.settled().await })
            .await;
    let logs: Vec<String> = running.into_iter().map(|w| w.stop().1).collect();
    assert!(
        done,
        "stored {} of {n}; consumer {:?}; log:\n{}",
        stored(&endpoint).len(),
        e.consumer_state().await,
        logs[0]
    );
    assert!(
        logs.iter().any(|l| l.contains("destination unavailable: holding the batch")),
        "a worker held through the outage:\n{}",
        logs[0]
    );
    assert_eq!(dead_lettered(&e, &dlq_stream).await, Vec::<u64>::new(), "nothing dead-lettered");
    assert_exactly_once(&stored(&endpoint), n, &format!("{workers} workers"));
    endpoint
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_down_for_ten_seconds_under_steady_traffic_keeps_each_subject_in_order() {
    let endpoint = through_an_http_outage(1500, 1).await;
    // Each subject's messages were written in stream order (answered as new in that order;
    // message `n` is stream sequence `n`, on subject `k{n % 4}`). Order is per worker
    // (docs/scaling.md), so this is the one-worker run.
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    for w in endpoint.writes().iter().filter(|w| w.status == Some(201)) {
        let seq: u64 = w.key().unwrap().rsplit(':').next().unwrap().parse().unwrap();
        let before = last.insert(seq % 4, seq).unwrap_or(0);
        assert!(seq > before, "subject k{}: {seq} written after {before}", seq % 4);
    }
    assert_eq!(last.len(), 4, "the request log names the keys of every subject");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_down_for_ten_seconds_with_two_workers_on_one_consumer_dead_letters_nothing() {
    through_an_http_outage(1500, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_in_batch_mode_waits_out_ten_seconds_of_503_with_nothing_dead_lettered() {
    const N: u64 = 1200;
    let server = sinks_testkit::shared_s3().await.unwrap_or_else(|e| cannot_run("s3 batch outage", e));
    let h = S3Harness::new(server.endpoint, server.filer, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY);
    let bucket = h.bucket().await.unwrap();
    let proxy = Arc::new(FaultProxy::start(h.endpoint(), 0, None).await.unwrap());
    let e = env().await;
    let (dlq_stream, dlq_subject) = dlq_stream(&e).await;
    let sink = json!({"type": "s3", "bucket": bucket.name(), "prefix": "lake", "endpoint_url": proxy.url(),
                      "allow_http_for_local_testing": true, "region_name": "us-east-1",
                      "credential_mode": "environment", "aws_access_key_id_env": KEY_ENV,
                      "aws_secret_access_key_env": SECRET_ENV, "mode": "batch",
                      "batch": {"max_messages": 200, "max_age_ms": 1000, "partition_template": "{subject_token[2]}"}});
    let mut section = sink.clone();
    section.as_object_mut().unwrap().remove("type");
    let mut direct: sink_s3::S3SinkConfig = serde_json::from_value(section).unwrap();
    direct.endpoint_url = Some(h.endpoint().to_owned());
    direct.credential_mode = sink_s3::CredentialMode::DefaultChain;
    let read_back = h.read_back(&direct, bucket).unwrap();
    let config = e.write_config_json(
        sink,
        json!({"consumer_management": {"max_deliver": 3, "ack_wait_seconds": 4, "max_ack_pending": 5000},
               "dead_letter": {"enabled": true, "subject": dlq_subject}, "logging": {"level": "INFO"}}),
    );
    let creds = [(KEY_ENV, S3_ACCESS_KEY_ID.to_owned()), (SECRET_ENV, S3_SECRET_ACCESS_KEY.to_owned())];
    let run = Sink::start(&config, e.dir.path(), &creds);
    let down = {
        let proxy = Arc::clone(&proxy);
        outage(Duration::from_secs(3), move |d| proxy.set_down(d))
    };
    steady(&e, N, Duration::from_millis(10)).await;
    down.await.unwrap();
    let done = wait_until(Duration::from_secs(120), || e.settled()).await;
    let (code, log) = run.stop();
    assert!(done, "consumer {:?}; log:\n{log}", e.consumer_state().await);
    assert_eq!(code, Some(0), "{log}");
    assert!(proxy.injected() > 0, "the outage refused requests");
    assert!(log.contains("the commit is retried"), "an object's commit waited for the endpoint:\n{log}");
    assert_eq!(dead_lettered(&e, &dlq_stream).await, Vec::<u64>::new(), "nothing dead-lettered");
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for key in read_back.batch_object_keys().await.unwrap() {
        let file = read_back.download(&key).await.unwrap();
        encode::read_rows(file, Format::Ndjson, BatchCompression::None, false, |r| {
            *counts.entry(r.stream_sequence).or_insert(0) += 1;
        })
        .unwrap();
    }
    assert_exactly_once(&counts, N, "s3 batch mode");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rescue_waits_for_an_endpoint_that_is_down_instead_of_dead_lettering() {
    const N: u64 = 300;
    let e = env().await;
    let (dlq_stream, dlq_subject) = dlq_stream(&e).await;
    let endpoint = HttpTestServer::start().await.unwrap();
    endpoint.set_keep_bodies(false);
    // Every delivery is the last: a worker killed while it holds messages leaves them to
    // the rescue (the server does not redeliver them).
    let config = http_config(&e, &endpoint, &dlq_subject, json!({"max_deliver": 1, "ack_wait_seconds": 3}));
    endpoint.set_down(true);
    let started = tokio::time::Instant::now();
    steady(&e, N, Duration::from_millis(1)).await;
    let first = Sink::start(&config, e.dir.path(), &[]);
    let holding = wait_until(Duration::from_secs(30), || async {
        e.consumer_state().await.is_some_and(|(_, ack_pending)| ack_pending > 0)
    })
    .await;
    assert!(holding, "the worker took messages: {:?}", e.consumer_state().await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    first.kill9();
    // The server gives up on the held messages after AckWait (their only delivery).
    let given_up = wait_until(Duration::from_secs(30), || async {
        e.consumer_state().await.is_some_and(|(_, ack_pending)| ack_pending == 0)
    })
    .await;
    assert!(given_up, "the killed worker's messages expired: {:?}", e.consumer_state().await);
    let second = Sink::start(&config, e.dir.path(), &[]);
    let elapsed = started.elapsed();
    if elapsed < OUTAGE {
        tokio::time::sleep(OUTAGE - elapsed).await;
    }
    // Still down for a while after the restart: the rescue must wait, not dead-letter.
    tokio::time::sleep(Duration::from_secs(3)).await;
    endpoint.set_down(false);
    let done =
        wait_until(Duration::from_secs(120), || async { stored(&endpoint).len() as u64 >= N && e.settled().await })
            .await;
    let (_, log) = second.stop();
    assert!(done, "stored {} of {N}; consumer {:?}; log:\n{log}", stored(&endpoint).len(), e.consumer_state().await);
    assert!(log.contains("rescue"), "the rescue ran:\n{log}");
    assert_eq!(dead_lettered(&e, &dlq_stream).await, Vec::<u64>::new(), "nothing dead-lettered");
    assert_exactly_once(&stored(&endpoint), N, "rescued");
}
