//! Destinations as the NitroNet discipline describes them, through the binary against a
//! private JetStream server and an HTTP endpoint as strict as the standards allow
//! (`sinks_testkit::Strict`): the same event sends the same request, a recovered endpoint is
//! noticed by writing to it, a poison message is not an outage, and a destination's limits
//! are respected instead of burning deliveries.
//!
//! - An endpoint that fingerprints each key's first body (a repeat with another body is 422,
//!   with the same body the first answer again) and loses every 10th key's first answer after
//!   storing it, with the sink killed -9 twice, then a replay of the whole range: every event
//!   stored once, no 422, nothing dead-lettered. The reference's body (`metadata_scope:
//!   delivery`) fails the same replay, which is what the test would catch.
//! - A 12 s outage at an endpoint whose `OPTIONS` answers 501 (or 405, or whose health URL
//!   lies either way): delivery resumes within one probe interval, nothing dead-lettered.
//! - Poison, not outage: every 20th key answered 503 on every attempt, `OPTIONS` 501,
//!   `max_deliver: 3`, killed -9 twice: the consumer drains within a minute, exactly those
//!   keys dead-lettered, every other message stored once.
//! - 429 with `Retry-After: 1` to 30 % and to 100 % of requests for 20 s: nothing
//!   dead-lettered; with `sink.rate_limit` under the endpoint's limit, no 429 at all.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sinks_testkit::{HealthAnswer, HttpTestServer, Strict, Throttle, wait_until};
use support::{Env, Sink, dead_lettered, dlq_stream, drain_with_two_kills, env, nats_sink, text};

/// The stream sequences the endpoint stored, with how often each was stored.
fn stored(endpoint: &HttpTestServer) -> BTreeMap<u64, usize> {
    endpoint.successes().into_iter().map(|(key, n)| (key.rsplit(':').next().unwrap().parse().unwrap(), n)).collect()
}

/// Every sequence `1..=n` but `except` stored exactly once, and nothing else.
fn assert_stored_once(endpoint: &HttpTestServer, n: u64, except: &BTreeSet<u64>, what: &str) {
    let stored = stored(endpoint);
    let twice: Vec<(&u64, &usize)> = stored.iter().filter(|(_, c)| **c != 1).collect();
    assert!(twice.is_empty(), "{what}: stored more than once: {twice:?}");
    let missing: Vec<u64> = (1..=n).filter(|s| !except.contains(s) && !stored.contains_key(s)).collect();
    assert!(missing.is_empty(), "{what}: never stored: {missing:?}");
    let unexpected: Vec<&u64> = stored.keys().filter(|s| except.contains(s)).collect();
    assert!(unexpected.is_empty(), "{what}: stored although refused every time: {unexpected:?}");
}

/// An HTTP sink config into `endpoint` with the DLQ on and `max_deliver: 3`; `sink` and
/// `extra` are merged over the defaults.
fn http_config(e: &Env, endpoint: &HttpTestServer, dlq_subject: &str, sink: Value, extra: Value) -> PathBuf {
    let mut section = json!({"type": "http", "url": endpoint.url(), "allow_http_for_local_testing": true,
                             "request_timeout_seconds": 2});
    section.as_object_mut().unwrap().extend(sink.as_object().cloned().unwrap_or_default());
    let mut top = json!({"consumer_management": {"max_deliver": 3, "ack_wait_seconds": 4},
                         "dead_letter": {"enabled": true, "subject": dlq_subject},
                         "delivery": {"batch_size": 100}, "logging": {"level": "INFO"}});
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        match (top.get_mut(&k), v) {
            (Some(Value::Object(base)), Value::Object(more)) => base.extend(more),
            (_, v) => {
                top[&k] = v;
            }
        }
    }
    e.write_config_json(section, top)
}

/// `nats-sink ARGS` off the test's runtime (which serves the endpoint meanwhile).
async fn nats_sink_blocking(e: &Env, args: &[&str]) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let cwd = e.dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        nats_sink(&args, &cwd)
    })
    .await
    .unwrap()
}

/// Replays sequences `1..=n` of the stream through a temporary consumer (`nats-sink replay`).
async fn replay(e: &Env, config: &Path, n: u64) -> std::process::Output {
    let to = n.to_string();
    nats_sink_blocking(e, &["replay", config.to_str().unwrap(), "--from-seq", "1", "--to-seq", &to]).await
}

/// A strict endpoint: whole-body fingerprints, the first answer replayed for the same body,
/// every `lose`-th key's first answer lost after the store.
async fn fingerprinting(lose: Option<u64>) -> Arc<HttpTestServer> {
    let endpoint = Arc::new(HttpTestServer::start().await.unwrap());
    endpoint.set_request_log(false);
    endpoint.set_strict(Strict {
        fingerprint_bodies: true,
        replay_first_answer: true,
        lose_answer_every: lose,
        ..Strict::default()
    });
    endpoint
}

#[tokio::test]
async fn a_fingerprinting_endpoint_sees_one_body_per_key_through_lost_answers_kills_and_a_replay() {
    const TOTAL: usize = 3_000;
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let endpoint = fingerprinting(Some(10)).await;
    e.publish(TOTAL, support::json).await;
    let config = http_config(&e, &endpoint, &dlq_subject, json!({}), json!({}));
    let (took, _) = drain_with_two_kills(&e, &config, TOTAL, &[]).await;
    let answers = endpoint.answers();
    eprintln!("drained in {took:?} through two kills; answers by status: {answers:?}");
    assert!(answers.get(&0).copied().unwrap_or(0) >= TOTAL / 10 - 5, "answers were lost: {answers:?}");
    assert_eq!(answers.get(&422), None, "never a second body for one key: {answers:?}");
    assert_eq!(dead_lettered(&e, &dlq).await, Vec::<u64>::new(), "nothing dead-lettered");
    assert_stored_once(&endpoint, TOTAL as u64, &BTreeSet::new(), "after two kills");
    // A replay delivers everything again through another consumer: the same bodies again.
    let out = replay(&e, &config, TOTAL as u64).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let answers = endpoint.answers();
    assert_eq!(answers.get(&422), None, "the replay sent the same bodies: {answers:?}");
    assert_eq!(dead_lettered(&e, &dlq).await, Vec::<u64>::new(), "nothing dead-lettered by the replay");
    assert_stored_once(&endpoint, TOTAL as u64, &BTreeSet::new(), "after the replay");
}

/// The control: the reference's body holds the delivery (consumer, receive and store times),
/// so the same endpoint refuses every replayed event with 422 and the refusals are
/// dead-lettered. What the test above would catch.
#[tokio::test]
async fn the_reference_body_is_refused_by_a_fingerprinting_endpoint_on_a_replay() {
    const TOTAL: usize = 200;
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let endpoint = fingerprinting(None).await;
    e.publish(TOTAL, support::json).await;
    let config = http_config(&e, &endpoint, &dlq_subject, json!({"metadata_scope": "delivery"}), json!({}));
    let run = Sink::start(&config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(60), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let _ = replay(&e, &config, TOTAL as u64).await;
    assert_eq!(endpoint.answers().get(&422).copied(), Some(TOTAL), "every replayed body differed");
    assert_eq!(dead_lettered(&e, &dlq).await.len(), TOTAL, "and was dead-lettered although stored");
}

/// How an outage looks from the sink.
#[derive(Debug, Clone, Copy)]
enum Outage {
    /// Nothing listens (connections refused), `OPTIONS` answered `options`, no health URL.
    Refused { options: u16 },
    /// Writes answered 503 while the health URL says 200.
    HealthyLie,
    /// Nothing listens, and the health URL fails even when writes work again.
    FailingHealth,
}

/// Steady traffic of 800 messages (50/s) into an endpoint that is down for 12 s from 3 s on,
/// as `outage` says; `max_deliver: 3`. Nothing dead-lettered, every message stored once, and
/// the first message stored after the outage within one probe interval (5 s) and a little.
async fn through_an_outage(outage: Outage) {
    const TOTAL: u64 = 800;
    const DOWN: Duration = Duration::from_secs(12);
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let endpoint = Arc::new(HttpTestServer::start().await.unwrap());
    endpoint.set_request_log(false);
    let (options, health) = match outage {
        Outage::Refused { options } => (Some(options), HealthAnswer::Truthful),
        Outage::HealthyLie => (None, HealthAnswer::AlwaysHealthy),
        Outage::FailingHealth => (None, HealthAnswer::AlwaysFailing),
    };
    endpoint.set_strict(Strict { options_status: options, health, ..Strict::default() });
    let sink = match outage {
        Outage::Refused { .. } => json!({}),
        Outage::HealthyLie | Outage::FailingHealth => json!({"health_url": endpoint.health_url()}),
    };
    let config = http_config(&e, &endpoint, &dlq_subject, sink, json!({"delivery": {"batch_size": 20}}));
    let run = Sink::start(&config, e.dir.path(), &[]);
    let traffic = {
        let js = e.js.clone();
        let root = e.subject_root.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            for i in 1..=TOTAL {
                tick.tick().await;
                let subject = format!("{root}.orders.k{}", i % 4);
                js.publish(subject, bytes::Bytes::from(format!("{{\"n\":{i}}}"))).await.unwrap().await.unwrap();
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    let set_down = |down: bool| match outage {
        Outage::Refused { .. } | Outage::FailingHealth => endpoint.set_refusing(down),
        Outage::HealthyLie => endpoint.set_down(down),
    };
    set_down(true);
    tokio::time::sleep(DOWN).await;
    let before = endpoint.successes().len();
    set_down(false);
    let back = Instant::now();
    let noticed = wait_until(Duration::from_secs(60), || async { endpoint.successes().len() > before }).await;
    let after = back.elapsed();
    traffic.await.unwrap();
    let done = wait_until(Duration::from_secs(90), || async {
        endpoint.successes().len() as u64 >= TOTAL && e.settled().await
    })
    .await;
    let (_, logs) = run.stop();
    assert!(noticed && done, "{outage:?}: noticed {noticed}, drained {done}; log:\n{logs}");
    eprintln!("{outage:?}: the first write after the outage was stored {after:?} after the endpoint came back");
    assert!(after <= Duration::from_secs(7), "{outage:?}: noticed only after {after:?}; log:\n{logs}");
    assert!(logs.contains("destination unavailable: holding the batch"), "{outage:?}: it held:\n{logs}");
    assert!(logs.contains("destination recovered"), "{outage:?}: and said when it ended:\n{logs}");
    assert_eq!(dead_lettered(&e, &dlq).await, Vec::<u64>::new(), "{outage:?}: nothing dead-lettered");
    assert_stored_once(&endpoint, TOTAL, &BTreeSet::new(), &format!("{outage:?}"));
}

#[tokio::test]
async fn an_endpoint_back_from_an_outage_is_noticed_though_it_answers_options_501() {
    through_an_outage(Outage::Refused { options: 501 }).await;
}

#[tokio::test]
async fn an_endpoint_back_from_an_outage_is_noticed_though_it_answers_options_405() {
    through_an_outage(Outage::Refused { options: 405 }).await;
}

#[tokio::test]
async fn an_outage_behind_a_health_url_that_says_healthy_is_still_held() {
    through_an_outage(Outage::HealthyLie).await;
}

#[tokio::test]
async fn an_endpoint_back_from_an_outage_is_noticed_though_its_health_url_keeps_failing() {
    through_an_outage(Outage::FailingHealth).await;
}

#[tokio::test]
async fn a_poison_message_is_no_outage_the_consumer_drains_within_a_minute() {
    const TOTAL: usize = 2_000;
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let endpoint = Arc::new(HttpTestServer::start().await.unwrap());
    endpoint.set_request_log(false);
    endpoint.set_strict(Strict { options_status: Some(501), ..Strict::default() });
    // Every 20th key (its stream sequence) is answered 503 on every attempt, for ever.
    endpoint.set_refuse_every(Some(20));
    e.publish(TOTAL, support::json).await;
    let poison: BTreeSet<u64> = (1..=TOTAL as u64).filter(|s| s % 20 == 0).collect();
    let config = http_config(&e, &endpoint, &dlq_subject, json!({}), json!({}));
    let (took, logs) = drain_with_two_kills(&e, &config, TOTAL, &[]).await;
    eprintln!("drained in {took:?}");
    assert!(took <= Duration::from_secs(60), "drained only after {took:?}; log:\n{logs}");
    let dead: BTreeSet<u64> = dead_lettered(&e, &dlq).await.into_iter().collect();
    assert_eq!(dead, poison, "exactly the keys the endpoint never takes are dead-lettered");
    assert_stored_once(&endpoint, TOTAL as u64, &poison, "poison");
}

/// `TOTAL` messages into an endpoint that answers 429 (`Retry-After: 1`) to `percent` % of
/// requests for the first 20 s; `max_deliver: 3`. Nothing dead-lettered, everything stored.
async fn through_throttling(percent: u32) {
    const TOTAL: usize = 1_500;
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let endpoint = Arc::new(HttpTestServer::start().await.unwrap());
    endpoint.set_request_log(false);
    let until = Instant::now() + Duration::from_secs(20);
    endpoint.set_strict(Strict {
        throttle: Some(Throttle { percent, until: Some(until), retry_after: "1".into() }),
        ..Strict::default()
    });
    e.publish(TOTAL, support::json).await;
    let config = http_config(&e, &endpoint, &dlq_subject, json!({}), json!({}));
    let run = Sink::start(&config, e.dir.path(), &[]);
    let done =
        wait_until(Duration::from_secs(120), || async { endpoint.successes().len() >= TOTAL && e.settled().await })
            .await;
    let (_, logs) = run.stop();
    let answers = endpoint.answers();
    eprintln!("{percent} % throttled for 20 s: answers {answers:?}");
    assert!(done, "{percent} %: not drained; log:\n{logs}");
    // Held and paced by Retry-After, the sink sends few requests into a throttling endpoint.
    assert!(answers.get(&429).copied().unwrap_or(0) >= 10, "{percent} %: it did throttle: {answers:?}");
    assert_eq!(answers.get(&409), None, "{percent} %: nothing stored was sent again: {answers:?}");
    assert!(logs.contains("destination throttling"), "{percent} %: said so:\n{logs}");
    assert_eq!(dead_lettered(&e, &dlq).await, Vec::<u64>::new(), "{percent} %: nothing dead-lettered");
    assert_stored_once(&endpoint, TOTAL as u64, &BTreeSet::new(), &format!("{percent} % throttled"));
}

#[tokio::test]
async fn thirty_percent_throttled_for_20_s_costs_no_delivery() {
    through_throttling(30).await;
}

#[tokio::test]
async fn everything_throttled_for_20_s_costs_no_delivery() {
    through_throttling(100).await;
}

#[tokio::test]
async fn a_rate_limit_under_the_endpoint_s_limit_is_never_throttled() {
    const TOTAL: usize = 1_500;
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let endpoint = Arc::new(HttpTestServer::start().await.unwrap());
    endpoint.set_request_log(false);
    // The endpoint takes at most 200 requests in any second; the sink sends 150 a second.
    endpoint.set_strict(Strict { max_per_second: Some(200), ..Strict::default() });
    e.publish(TOTAL, support::json).await;
    let config =
        http_config(&e, &endpoint, &dlq_subject, json!({"rate_limit": {"messages_per_second": 150}}), json!({}));
    let run = Sink::start(&config, e.dir.path(), &[]);
    let started = Instant::now();
    let done =
        wait_until(Duration::from_secs(60), || async { endpoint.successes().len() >= TOTAL && e.settled().await })
            .await;
    let took = started.elapsed();
    let (_, logs) = run.stop();
    assert!(done, "not drained; log:\n{logs}");
    let answers = endpoint.answers();
    eprintln!("{TOTAL} messages at 150/s took {took:?}; answers {answers:?}");
    assert_eq!(answers.get(&429), None, "paced under the limit, never throttled: {answers:?}");
    assert_eq!(dead_lettered(&e, &dlq).await, Vec::<u64>::new());
    assert_stored_once(&endpoint, TOTAL as u64, &BTreeSet::new(), "rate limited");
    // The same load without the limit is throttled: the endpoint's limit is real.
    let unpaced = env().await;
    let (_, unpaced_dlq) = dlq_stream(&unpaced).await;
    let fast = Arc::new(HttpTestServer::start().await.unwrap());
    fast.set_request_log(false);
    fast.set_strict(Strict { max_per_second: Some(200), ..Strict::default() });
    unpaced.publish(TOTAL, support::json).await;
    let unpaced_config = http_config(&unpaced, &fast, &unpaced_dlq, json!({}), json!({}));
    let run = Sink::start(&unpaced_config, unpaced.dir.path(), &[]);
    let done =
        wait_until(Duration::from_secs(60), || async { fast.successes().len() >= TOTAL && unpaced.settled().await })
            .await;
    let (_, logs) = run.stop();
    assert!(done, "unpaced: not drained; log:\n{logs}");
    assert!(fast.answers().get(&429).copied().unwrap_or(0) > 0, "unpaced: throttled: {:?}", fast.answers());
}
