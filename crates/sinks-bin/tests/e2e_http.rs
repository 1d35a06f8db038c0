//! `nats-sink run` with the HTTP sink against a real HTTP endpoint (the certification
//! `HttpTestServer`, in this process) under transient faults: every 10th key answered 503 on
//! its first request, on one subject, with two kill -9 during the run. Each faulty run is
//! measured beside a fault-free twin started at the same moment on the same machine (same
//! load), and must drain within 3× its time, with every key delivered and each key
//! committed exactly once at the endpoint.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use sinks_testkit::HttpTestServer;
use sinks_testkit::{read_stream, stream_with_subjects, unique, wait_until};
use support::{Env, Sink, drain_with_two_kills, env, publish_one_subject};

const MESSAGES: usize = 5000;

/// A run of `MESSAGES` on one subject through a fresh endpoint; `fault` prepares it.
struct Scenario {
    e: Env,
    endpoint: HttpTestServer,
    config: PathBuf,
}

async fn scenario(delivery: serde_json::Value, fault: impl FnOnce(&HttpTestServer)) -> Scenario {
    let e = env().await;
    publish_one_subject(&e, MESSAGES).await;
    let endpoint = HttpTestServer::start().await.unwrap();
    endpoint.set_request_log(false);
    endpoint.set_keep_bodies(false);
    fault(&endpoint);
    // The reference's HTTP section with its defaults: only the URL and local http.
    let sink = json!({"type": "http", "url": endpoint.url(), "allow_http_for_local_testing": true});
    // AckWait 2 s, so what a killed process had in flight comes back soon.
    let mut extra = json!({"consumer_management": {"ack_wait_seconds": 2}, "logging": {"level": "INFO"}});
    extra["delivery"] = delivery;
    let config = e.write_config_json(sink, extra);
    Scenario { e, endpoint, config }
}

impl Scenario {
    async fn run(&self) -> (Duration, String) {
        drain_with_two_kills(&self.e, &self.config, MESSAGES, &[]).await
    }

    /// Every key reached the endpoint and was committed there exactly once.
    fn assert_exactly_once(&self, what: &str) {
        let successes = self.endpoint.successes();
        assert_eq!(successes.len(), MESSAGES, "{what}: every key delivered");
        let repeated: Vec<_> = successes.iter().filter(|(_, n)| **n != 1).collect();
        assert!(repeated.is_empty(), "{what}: keys committed more than once: {repeated:?}");
    }
}

/// The default delivery settings of a reference config, with a short batch wait.
fn defaults() -> serde_json::Value {
    json!({"batch_timeout_ms": 200})
}

#[tokio::test]
async fn one_subject_with_every_tenth_key_failing_once_drains_in_seconds() {
    let (clean, faulty) = tokio::join!(
        scenario(defaults(), |_| {}),
        scenario(defaults(), |endpoint| endpoint.set_flaky_every(Some(10), None)),
    );
    let ((clean_took, _), (faulty_took, logs)) = tokio::join!(clean.run(), faulty.run());
    eprintln!("fault-free {clean_took:?}, every 10th key 503 once {faulty_took:?} (two kill -9 each)");
    clean.assert_exactly_once("fault-free");
    faulty.assert_exactly_once("faulty");
    assert!(!logs.contains("not sent"), "no message is reported failed for a neighbour's failure");
    assert!(
        faulty_took <= clean_took * 3,
        "faulty drain {faulty_took:?} is more than 3× the fault-free drain {clean_took:?}"
    );
}

#[tokio::test]
async fn retry_after_on_the_failures_is_honoured_without_stalling_others() {
    // A server-mandated pause of a key is a pause of everything ordered behind it; with
    // `ordering_key: none` nothing is, and only the paused messages wait.
    let unordered = json!({"batch_timeout_ms": 200, "ordering_key": "none"});
    let (clean, faulty) = tokio::join!(
        scenario(unordered.clone(), |_| {}),
        scenario(unordered.clone(), |endpoint| endpoint.set_flaky_every(Some(10), Some("1"))),
    );
    let ((clean_took, _), (faulty_took, _)) = tokio::join!(clean.run(), faulty.run());
    eprintln!("ordering none: fault-free {clean_took:?}, every 10th key 503 + Retry-After: 1 once {faulty_took:?}");
    clean.assert_exactly_once("fault-free");
    faulty.assert_exactly_once("faulty");
    assert!(
        faulty_took <= clean_took * 3,
        "faulty drain {faulty_took:?} is more than 3× the fault-free drain {clean_took:?}"
    );
}

#[tokio::test]
async fn messages_held_back_behind_failures_never_reach_the_dlq() {
    let e = env().await;
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    publish_one_subject(&e, 1000).await;
    let endpoint = HttpTestServer::start().await.unwrap();
    endpoint.set_flaky_every(Some(10), None);
    // No retries in place (the reference's setting), three deliveries allowed: every failure
    // goes back to the runner, and everything behind it on the subject is held back.
    let sink = json!({"type": "http", "url": endpoint.url(), "allow_http_for_local_testing": true,
                      "retry": {"max_retries": 0}});
    let extra = json!({
        "consumer_management": {"ack_wait_seconds": 5, "max_deliver": 3},
        "dead_letter": {"enabled": true, "subject": dlq_subject},
        "delivery": {"retry_backoff_ms": 50, "retry_backoff_max_ms": 200},
    });
    let config = e.write_config_json(sink, extra);
    let run = Sink::start(&config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(120), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let dlq = read_stream(&e.js, &dlq_stream).await;
    let first = dlq.first().map(|(_, _, _, body)| String::from_utf8_lossy(body).into_owned());
    assert!(dlq.is_empty(), "no DLQ record: only first attempts failed; {} records, the first: {first:?}", dlq.len());
    let successes = endpoint.successes();
    assert_eq!(successes.len(), 1000);
    assert!(successes.values().all(|n| *n == 1));
    // In stream order: each key committed after every earlier one.
    let order: Vec<u64> = endpoint
        .writes()
        .iter()
        .filter(|w| w.status == Some(201))
        .map(|w| w.key().unwrap().rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "one subject is committed in stream order");
}
