//! The S3 sink against the sink contract (docs/sink-contract.md), one test per clause, each
//! against a fresh bucket on a real SeaweedFS server (the run's shared server, or a private
//! one started for this test process), in both modes: one object per message, and batch
//! mode (NDJSON objects behind `Durable`); then the crash clauses K1 and K2 with the real
//! `nats-sink` (`sinks_testkit::crash`).

use sink_s3::certify::{S3BatchHarness, S3Harness};
use sinks_certify as certify;

async fn harness() -> S3Harness {
    let server = sinks_testkit::shared_s3().await.unwrap_or_else(|e| panic!("no S3 server: {e}"));
    S3Harness::new(server.endpoint, server.filer, sinks_testkit::S3_ACCESS_KEY_ID, sinks_testkit::S3_SECRET_ACCESS_KEY)
}

sinks_certify::certify_tests!(harness().await);
sinks_testkit::crash_tests!(harness().await);

mod batch {
    use super::{S3BatchHarness, harness};

    sinks_certify::certify_tests!(S3BatchHarness(harness().await));
}

#[tokio::test]
async fn crash_target_is_a_valid_sink_section_that_reads_back() {
    let h = harness().await;
    check_crash_target(&h, h.credentials()).await;
}

#[tokio::test]
async fn batch_crash_target_is_a_valid_sink_section_that_reads_back() {
    let h = harness().await;
    check_crash_target(&S3BatchHarness(h.clone()), h.credentials()).await;
}

async fn check_crash_target(harness: &dyn sinks_certify::Harness, credentials: sink_s3::S3Credentials) {
    use sinks_contract::Sink;
    let target = harness.crash_target().await.expect("crash target");
    assert_eq!(target.sink_section["type"], "s3");
    assert_eq!(target.sink_section["credential_mode"], "environment");
    let secret = sinks_testkit::S3_SECRET_ACCESS_KEY;
    assert!(!target.sink_section.to_string().contains(secret), "the section holds no secret");
    assert!(target.env.iter().any(|(_, v)| v == secret), "the secret travels in the environment");
    let section: sinks_contract::config::SinkSection =
        serde_json::from_value(target.sink_section.clone()).expect("section");
    let config = sink_s3::S3SinkConfig::from_section(&section).expect("valid section");
    let sink = sink_s3::S3Sink::with_credentials(config, credentials).expect("sink");
    sink.open().await.expect("open");
    certify::check_crash_target(&target, &sink).await.expect("the crash target reads back");
}
