//! `nats-sink run` with the S3 sink against a private JetStream server and a real
//! S3-compatible server (SeaweedFS): one object per message with the reference's config,
//! start-up configuration errors, the S3 server killed mid-run and restarted, losing and
//! duplicating nothing, and every 10th object's first put answered 503 by a fault-injecting
//! proxy on one subject with two kill -9, drained within 3× a fault-free twin run.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use sink_s3::certify::{BucketReadBack, S3Harness};
use sinks_certify::Records;
use sinks_testkit::{FaultProxy, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, SeaweedFs, wait_until};
use support::{Sink, drain_with_two_kills, env, json, publish_one_subject};

const KEY_ENV: &str = "E2E_S3_ACCESS_KEY_ID";
const SECRET_ENV: &str = "E2E_S3_SECRET_ACCESS_KEY";

fn harness(endpoint: sinks_testkit::S3Endpoint) -> S3Harness {
    S3Harness::new(endpoint.endpoint, endpoint.filer, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY)
}

fn creds() -> Vec<(&'static str, String)> {
    vec![(KEY_ENV, S3_ACCESS_KEY_ID.to_owned()), (SECRET_ENV, S3_SECRET_ACCESS_KEY.to_owned())]
}

/// The reference's S3 section shape, pointed at `endpoint` and `bucket`.
fn section(endpoint: &str, bucket: &str) -> serde_json::Value {
    json!({
        "type": "s3",
        "bucket": bucket,
        "prefix": "mission/events",
        "endpoint_url": endpoint,
        "allow_http_for_local_testing": true,
        "region_name": "us-east-1",
        "credential_mode": "environment",
        "aws_access_key_id_env": KEY_ENV,
        "aws_secret_access_key_env": SECRET_ENV,
        "key_strategy": "stream_sequence",
        "duplicate_policy": "skip_existing",
        "object_format": "envelope",
        "metadata_mode": "object_metadata",
        "payload_mode": "json_or_envelope",
        "request_timeout_seconds": 5,
        "max_retries": 2,
        "retry_backoff_ms": 100,
        "retry_max_backoff_ms": 500
    })
}

/// Stream sequence → number of objects holding it.
async fn sequences(read_back: &BucketReadBack) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for (key, _) in read_back.read_all().await.unwrap() {
        let seq: u64 = key.rsplit(':').next().unwrap().parse().unwrap();
        *out.entry(seq).or_default() += 1;
    }
    out
}

#[tokio::test]
async fn the_reference_s3_config_writes_one_object_per_message() {
    let h = harness(sinks_testkit::shared_s3().await.unwrap());
    let bucket = h.bucket().await.unwrap();
    let e = env().await;
    e.publish(500, json).await;
    let sink = section(h.endpoint(), bucket.name());
    let config: sink_s3::S3SinkConfig = serde_json::from_value({
        let mut s = sink.clone();
        s.as_object_mut().unwrap().remove("type");
        s
    })
    .unwrap();
    let read_back = h.read_back(&config, bucket).unwrap();
    let run = Sink::start(&e.write_config_json(sink, json!({"delivery": {"batch_size": 100}})), e.dir.path(), &creds());
    assert!(wait_until(Duration::from_secs(60), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let seqs = sequences(&read_back).await;
    assert_eq!(seqs.len(), 500);
    assert!(seqs.values().all(|n| *n == 1));
    let keys = read_back.object_keys().await.unwrap();
    assert!(keys.contains(&format!("mission/events/stream-sequence/{}/1.json", e.stream)), "{:?}", &keys[..3]);
    let body: serde_json::Value = serde_json::from_slice(&read_back.body(&keys[0]).await.unwrap()).unwrap();
    assert_eq!(body["schema"], "nats_sinks.s3.object.v1");
    assert_eq!(body["payload"]["note"], "ünïcode");
}

#[tokio::test]
async fn startup_configuration_errors_exit_2_naming_the_problem() {
    let h = harness(sinks_testkit::shared_s3().await.unwrap());
    let bucket = h.bucket().await.unwrap();
    let e = env().await;
    let mut missing_bucket = section(h.endpoint(), "no-such-bucket-anywhere");
    missing_bucket["credential_mode"] = "environment".into();
    let mut wrong_secret = section(h.endpoint(), bucket.name());
    wrong_secret["aws_secret_access_key_env"] = "E2E_S3_WRONG_SECRET".into();
    // (sink section, environment, expected text)
    type Case = (serde_json::Value, Vec<(&'static str, String)>, &'static str);
    let cases: Vec<Case> = vec![
        (section(h.endpoint(), bucket.name()), vec![], "sink.aws_access_key_id_env"),
        (missing_bucket, creds(), "the bucket does not exist"),
        (
            wrong_secret,
            vec![(KEY_ENV, S3_ACCESS_KEY_ID.to_owned()), ("E2E_S3_WRONG_SECRET", "not-the-secret".to_owned())],
            "credentials or bucket policy refused access",
        ),
        (json!({"type": "s3", "bucket": "Bad_Bucket"}), vec![], "sink.bucket"),
    ];
    for (sink, envs, expected) in cases {
        let config = e.write_config_json(sink, json!({}));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_nats-sink"))
            .arg("run")
            .arg(&config)
            .env_remove(KEY_ENV)
            .env_remove(SECRET_ENV)
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{expected}: {stderr}");
        assert!(stderr.contains(expected), "expected `{expected}` in {stderr}");
        assert!(!stderr.contains(S3_SECRET_ACCESS_KEY) && !stderr.contains("not-the-secret"), "{stderr}");
    }
}

#[tokio::test]
async fn s3_server_killed_mid_run_and_restarted_loses_nothing() {
    let mut server = SeaweedFs::start().await.unwrap();
    let h = harness(server.endpoint());
    let bucket = h.bucket().await.unwrap();
    let e = env().await;
    e.publish(3000, json).await;
    let sink = section(h.endpoint(), bucket.name());
    let mut config = sink_s3::S3SinkConfig::new(bucket.name());
    config.prefix = Some("mission/events".into());
    config.endpoint_url = Some(h.endpoint().to_owned());
    config.allow_http_for_local_testing = true;
    let read_back = h.read_back(&config, bucket).unwrap();
    let run = Sink::start(&e.write_config_json(sink, json!({"delivery": {"batch_size": 50}})), e.dir.path(), &creds());
    let progressed =
        wait_until(Duration::from_secs(60), || async { e.consumer_state().await.is_some_and(|(p, _)| p <= 2500) })
            .await;
    assert!(progressed, "{}", run.logs());
    server.kill();
    tokio::time::sleep(Duration::from_secs(15)).await;
    let during = e.consumer_state().await;
    server.restart().await.unwrap();
    let done = wait_until(Duration::from_secs(120), || e.settled()).await;
    assert!(done, "{}", run.logs());
    let logs = run.logs();
    assert!(logs.contains("destination unavailable") && logs.contains("destination recovered"), "{logs}");
    assert_eq!(run.terminate(), Some(0));
    let seqs = sequences(&read_back).await;
    eprintln!("consumer during the outage: {during:?}; objects after: {}", seqs.len());
    assert_eq!(seqs.len(), 3000, "every message stored");
    assert_eq!(seqs.keys().next(), Some(&1));
    assert_eq!(seqs.keys().last(), Some(&3000));
    assert!(seqs.values().all(|n| *n == 1), "one object per message");
}

/// One run of `n` messages on one subject through a fault proxy (`every`-th object's first
/// put answered 503; 0 for none) to a fresh bucket, with the reference's defaults.
async fn through_proxy(n: usize, every: u64) -> (std::time::Duration, BTreeMap<u64, usize>, usize) {
    let h = harness(sinks_testkit::shared_s3().await.unwrap());
    let bucket = h.bucket().await.unwrap();
    let proxy = FaultProxy::start(h.endpoint(), every, None).await.unwrap();
    let e = env().await;
    publish_one_subject(&e, n).await;
    let sink = json!({
        "type": "s3", "bucket": bucket.name(), "endpoint_url": proxy.url(), "allow_http_for_local_testing": true,
        "region_name": "us-east-1", "credential_mode": "environment",
        "aws_access_key_id_env": KEY_ENV, "aws_secret_access_key_env": SECRET_ENV,
    });
    let mut config = sink_s3::S3SinkConfig::new(bucket.name());
    config.endpoint_url = Some(h.endpoint().to_owned());
    config.allow_http_for_local_testing = true;
    let read_back = h.read_back(&config, bucket).unwrap();
    let extra = json!({"consumer_management": {"ack_wait_seconds": 2}, "logging": {"level": "INFO"},
                       "delivery": {"batch_timeout_ms": 200}});
    let path = e.write_config_json(sink, extra);
    let (took, _) = drain_with_two_kills(&e, &path, n, &creds()).await;
    (took, sequences(&read_back).await, proxy.injected())
}

#[tokio::test]
async fn one_subject_with_every_tenth_object_failing_once_drains_in_seconds() {
    const N: usize = 5000;
    let ((clean_took, clean, _), (faulty_took, faulty, injected)) =
        tokio::join!(through_proxy(N, 0), through_proxy(N, 10));
    eprintln!("fault-free {clean_took:?}, every 10th object 503 once {faulty_took:?} ({injected} injected)");
    assert!(injected >= N / 10, "the proxy failed every 10th object's first put ({injected})");
    for (what, seqs) in [("fault-free", &clean), ("faulty", &faulty)] {
        assert_eq!(seqs.len(), N, "{what}: every message stored");
        assert!(seqs.values().all(|n| *n == 1), "{what}: one object per message");
    }
    assert!(
        faulty_took <= clean_took * 3,
        "faulty drain {faulty_took:?} is more than 3× the fault-free drain {clean_took:?}"
    );
}
