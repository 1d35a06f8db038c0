//! The S3 sink against the sink contract (docs/sink-contract.md), one test per clause, each
//! against a fresh bucket on a real SeaweedFS server (the run's shared server, or a private
//! one started for this test process), in both modes: one object per message, and batch
//! mode (NDJSON objects behind `Durable`); then the crash clauses K1 and K2 with the real
//! `nats-sink` (`sinks_testkit::crash`). Table mode (Parquet objects in a Delta table at a
//! prefix, read back through the table's log in the bucket) gets every clause and K1/K2 too,
//! and its read-back is shown failing on a table whose log has a gap or adds an object twice.

use sink_s3::certify::{S3BatchHarness, S3Harness, S3TableHarness};
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

mod table {
    use super::{S3TableHarness, harness};

    sinks_certify::certify_tests!(S3TableHarness(harness().await));
    sinks_testkit::crash_tests!(S3TableHarness(harness().await));
}

#[tokio::test]
async fn table_crash_target_is_a_valid_sink_section_that_reads_back() {
    let h = harness().await;
    check_crash_target(&S3TableHarness(h.clone()), h.credentials()).await;
}

/// The table read-back catches a broken table: with an entry that adds an already-added
/// object again (a slot committed twice) and with a log entry deleted (a commit lost: a gap in
/// the versions), reading fails; the intact table reads every event.
#[tokio::test]
async fn table_read_back_fails_on_an_object_added_twice_and_on_a_gap_in_the_log() {
    use object_store::{ObjectStoreExt, path::Path};
    use sinks_certify::Records;
    use sinks_contract::testing::SinkExt;
    let h = harness().await;
    let bucket = h.bucket().await.expect("bucket");
    let mut config = h.config(&bucket);
    S3TableHarness::table_mode(&mut config);
    let sink = h.sink(config.clone()).expect("sink");
    sinks_contract::Sink::open(&sink).await.expect("open");
    for seq in 1..=3u64 {
        let msg =
            sinks_contract::testing::envelope(certify::CERT_STREAM, seq, "cert.table", format!("{{\"n\":{seq}}}"));
        let outcomes = sink.write_chunked(&[msg], 1).await;
        assert!(matches!(outcomes[&seq], sinks_contract::MessageOutcome::Committed), "{outcomes:?}");
    }
    let read_back = h.read_back(&config, bucket).expect("read back");
    assert_eq!(read_back.read_all().await.expect("an intact table reads").len(), 3);
    let entries: Vec<String> =
        read_back.keys().await.expect("keys").into_iter().filter(|k| k.contains("/_delta_log/0")).collect();
    let commits: Vec<&String> = entries.iter().filter(|k| k.ends_with(".json")).collect();
    assert!(commits.len() >= 3, "a commit per object: {entries:?}");
    let last = commits.last().expect("a commit");
    let mut with_add = None;
    for key in &commits {
        let body = read_back.raw(key).await.expect("entry");
        if String::from_utf8_lossy(&body).contains("\"add\"") {
            with_add = Some(body);
        }
    }
    let again = Path::from(format!("lake/table/_delta_log/{:020}.json", commits.len()));
    assert!(last.as_str() < again.as_ref(), "{again} is the next version");
    read_back.store().put(&again, with_add.expect("a commit adds an object").into()).await.expect("put");
    let err = read_back.read_all().await.expect_err("an object added twice is caught");
    assert!(err.contains("added to the table twice"), "{err}");
    read_back.store().delete(&again).await.expect("delete");
    assert_eq!(read_back.read_all().await.expect("intact again").len(), 3);
    read_back.delete(commits[1]).await.expect("delete");
    let err = read_back.read_all().await.expect_err("a gap is caught");
    assert!(err.contains("no entry 1"), "{err}");
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
