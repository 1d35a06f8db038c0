//! The S3 sink's table mode (`sink.batch.table: {format: delta}`) against a real
//! S3-compatible server (SeaweedFS): two writers on one bucket prefix and redeliveries
//! store every event once in the Delta table, which the Python `deltalake` package (reading
//! the bucket) and DuckDB (reading the files the log names) both see; the writers'
//! checkpoints (every 4 commits) are where DuckDB's replay and a third writer start.
#![allow(clippy::unwrap_used)]

use sinks_contract::testing::SinkExt as _;
use std::collections::BTreeMap;

use sink_s3::certify::S3Harness;
use sink_s3::{S3Sink, WriteMode};
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, MessageOutcome, OutcomeClass, Sink};
use sinks_toolkit::batch::{BatchConfig, Format, TableConfig};

fn msg(seq: u64) -> Envelope {
    envelope("ORDERS", seq, &format!("orders.k{}", seq % 3), format!(r#"{{"seq":{seq}}}"#))
}

async fn write(sink: &S3Sink, seqs: impl IntoIterator<Item = u64>, chunk: usize) -> BTreeMap<u64, MessageOutcome> {
    sink.write_chunked(&seqs.into_iter().map(msg).collect::<Vec<_>>(), chunk).await
}

#[tokio::test]
async fn two_writers_on_one_prefix_store_every_event_once_in_the_delta_table() {
    let server = sinks_testkit::shared_s3().await.unwrap_or_else(|e| panic!("no S3 server: {e}"));
    let h = S3Harness::new(
        server.endpoint.clone(),
        server.filer,
        sinks_testkit::S3_ACCESS_KEY_ID,
        sinks_testkit::S3_SECRET_ACCESS_KEY,
    );
    let bucket = h.bucket().await.unwrap();
    let mut config = h.config(&bucket);
    config.mode = WriteMode::Batch;
    config.prefix = Some("lake/orders".into());
    let batch = |max_messages| BatchConfig {
        format: Format::Parquet,
        max_messages,
        partition_template: "kind={subject_token[1]}".into(),
        table: Some(TableConfig { checkpoint_interval: 4, ..TableConfig::default() }),
        ..BatchConfig::default()
    };
    config.batch = Some(batch(10));
    let a = h.sink(config.clone()).unwrap();
    config.batch = Some(batch(17));
    let b = h.sink(config.clone()).unwrap();
    a.open().await.unwrap();
    b.open().await.unwrap();
    let (first, second) = tokio::join!(write(&a, 1..=150, 13), write(&b, 100..=240, 19));
    assert!(first.values().chain(second.values()).all(|o| o.class() != OutcomeClass::FailedPermanent));
    // Everything delivered again: what an abandoned object sent back is written now (an
    // index read before the other writer's commit finds it at the claim: once more).
    let mut left: Vec<u64> = (1..=240).collect();
    for _ in 0..5 {
        let again = write(&b, left.clone(), 60).await;
        left = again.iter().filter(|(_, o)| o.failed_temporarily()).map(|(s, _)| *s).collect();
    }
    assert!(left.is_empty(), "still failing: {left:?}");
    let redelivered = write(&a, [5, 120, 240], 3).await;
    assert!(redelivered.values().all(|o| o.class() == OutcomeClass::Duplicate), "{redelivered:?}");
    // A third writer starts from the latest checkpoint (and the commits after it).
    let c = h.sink(config).unwrap();
    c.open().await.unwrap();
    let redelivered = write(&c, (1..=240).step_by(7), 40).await;
    assert!(redelivered.values().all(|o| o.class() == OutcomeClass::Duplicate), "{redelivered:?}");

    let storage = serde_json::json!({
        "endpoint_url": server.endpoint,
        "aws_access_key_id": sinks_testkit::S3_ACCESS_KEY_ID,
        "aws_secret_access_key": sinks_testkit::S3_SECRET_ACCESS_KEY,
        "aws_region": "us-east-1",
        "allow_http": "true",
    });
    let apps: Vec<String> = (0..3).map(|k| format!("nats-sinks/ORDERS/kind=k{k}")).collect();
    let uri = format!("s3://{}/lake/orders", bucket.name());
    let read = sinks_testkit::read_delta(&uri, &storage, &apps).unwrap_or_else(|e| panic!("{e}"));
    let want: BTreeMap<(String, u64), usize> = (1..=240).map(|s| (("ORDERS".to_owned(), s), 1)).collect();
    for reader in ["deltalake", "duckdb"] {
        assert_eq!(read.rows(reader), want, "{reader} sees every event exactly once");
    }
    for app in &apps {
        assert!(read.txn(app).is_some(), "{app} has a txn in the table: {}", read.report["deltalake"]["txn"]);
    }
    let started = &read.report["duckdb"]["checkpoint"];
    assert!(started.as_u64().is_some_and(|v| v >= 4), "DuckDB's replay started at a checkpoint: {started}");
}
