//! The S3 sink's batch mode against a real S3-compatible server (SeaweedFS), one fresh
//! bucket per test: objects named by their sequences with their manifests, two writers on
//! one bucket storing every message once, a manifest whose multipart upload was never
//! completed rolled forward by the next writer, and objects larger than a part streamed in
//! parts.
#![allow(clippy::unwrap_used)]

use sinks_contract::testing::SinkExt as _;
use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::multipart::MultipartStore;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use sink_s3::certify::{BucketReadBack, S3Harness};
use sink_s3::{S3Sink, S3SinkConfig, WriteMode};
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, FlushScope, MessageOutcome, OutcomeClass, PayloadMode, Sink};
use sinks_toolkit::batch::manifest::{MANIFEST_SCHEMA, Manifest};
use sinks_toolkit::batch::row::Row;
use sinks_toolkit::batch::{BatchCompression, BatchConfig, Format, naming};

async fn harness() -> S3Harness {
    let server = sinks_testkit::shared_s3().await.unwrap_or_else(|e| panic!("no S3 server: {e}"));
    S3Harness::new(server.endpoint, server.filer, sinks_testkit::S3_ACCESS_KEY_ID, sinks_testkit::S3_SECRET_ACCESS_KEY)
}

/// A batch-mode config on a fresh bucket, a second sink on it with `other`, and a reader.
async fn two_sinks(batch: BatchConfig, other: BatchConfig) -> (S3Sink, S3Sink, BucketReadBack) {
    let h = harness().await;
    let bucket = h.bucket().await.unwrap();
    let mut config = h.config(&bucket);
    config.mode = WriteMode::Batch;
    config.prefix = Some("lake".into());
    config.batch = Some(batch);
    let mut second: S3SinkConfig = config.clone();
    second.batch = Some(other);
    let a = h.sink(config.clone()).unwrap();
    let b = h.sink(second).unwrap();
    a.open().await.unwrap();
    b.open().await.unwrap();
    (a, b, h.read_back(&config, bucket).unwrap())
}

fn batch(max_messages: u64) -> BatchConfig {
    BatchConfig { max_messages, partition_template: "{stream}".into(), ..BatchConfig::default() }
}

fn msg(seq: u64) -> Envelope {
    envelope("ORDERS", seq, "orders.x", format!(r#"{{"seq":{seq}}}"#))
}

/// The final outcome of each of `seqs`, written in writes of `chunk` (see
/// `SinkExt::write_chunked`).
async fn write_chunked(sink: &S3Sink, seqs: &[u64], chunk: usize) -> BTreeMap<u64, MessageOutcome> {
    sink.write_chunked(&seqs.iter().copied().map(msg).collect::<Vec<_>>(), chunk).await
}

/// Every message exactly once over every object, and manifests never sharing a sequence.
async fn assert_exactly_once(rb: &BucketReadBack, want: impl IntoIterator<Item = u64>) {
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for (key, _) in rb.batch_records().await.unwrap() {
        *counts.entry(key.rsplit(':').next().unwrap().parse().unwrap()).or_default() += 1;
    }
    assert_eq!(counts.keys().copied().collect::<Vec<_>>(), want.into_iter().collect::<Vec<_>>());
    assert!(counts.values().all(|n| *n == 1), "no message twice: {counts:?}");
    let mut seen = BTreeMap::new();
    for key in rb.manifest_keys().await.unwrap() {
        let m = Manifest::from_bytes(&rb.body(&key).await.unwrap()).unwrap();
        for seq in m.sequence_set().unwrap().iter() {
            assert!(seen.insert(seq, m.slot).is_none(), "sequence {seq} in two manifests");
        }
    }
}

#[tokio::test]
async fn objects_are_named_by_their_sequences_next_to_their_manifests() {
    let (a, _b, rb) = two_sinks(batch(10), batch(10)).await;
    let seqs: Vec<u64> = (1..=25).collect();
    let outcomes = write_chunked(&a, &seqs, 7).await;
    assert!(outcomes.values().all(|o| matches!(o, MessageOutcome::Committed)), "{outcomes:?}");
    let objects = rb.batch_object_keys().await.unwrap();
    assert_eq!(
        objects,
        [
            "lake/ORDERS/ORDERS-00000000000000000001-00000000000000000010.ndjson",
            "lake/ORDERS/ORDERS-00000000000000000011-00000000000000000020.ndjson",
            "lake/ORDERS/ORDERS-00000000000000000021-00000000000000000025.ndjson",
        ]
    );
    let manifests = rb.manifest_keys().await.unwrap();
    assert_eq!(manifests.len(), 3);
    assert!(manifests[0].ends_with("lake/ORDERS/_nats-sinks/ORDERS/0000000000.manifest"), "{manifests:?}");
    let meta = rb.metadata(&objects[0]).await.unwrap();
    assert!(meta.contains(&("nats-sinks-schema".into(), sinks_toolkit::batch::row::ROW_SCHEMA.into())), "{meta:?}");
    assert_exactly_once(&rb, 1..=25).await;
    let again = write_chunked(&a, &[3, 12, 26], 3).await;
    let classes: Vec<OutcomeClass> = again.values().map(MessageOutcome::class).collect();
    assert_eq!(classes, [OutcomeClass::Duplicate, OutcomeClass::Duplicate, OutcomeClass::Committed]);
}

#[tokio::test]
async fn two_writers_on_one_bucket_store_every_message_once() {
    let (a, b, rb) = two_sinks(batch(13), batch(29)).await;
    let (a, b) = (Arc::new(a), Arc::new(b));
    let mut left: Vec<u64> = (1..=300).collect();
    let mut attempt = 0;
    while !left.is_empty() {
        attempt += 1;
        assert!(attempt < 20, "not durable after 20 redeliveries: {left:?}");
        let (for_a, for_b): (Vec<u64>, Vec<u64>) = if attempt == 1 {
            ((1..=200).collect(), (100..=300).rev().collect())
        } else {
            (left.clone(), left.iter().rev().copied().collect())
        };
        let (ra, rb_) = tokio::join!(write_chunked(&a, &for_a, 40), write_chunked(&b, &for_b, 50));
        left.retain(|seq| ![&ra, &rb_].iter().any(|r| r.get(seq).is_some_and(MessageOutcome::is_durable)));
    }
    assert_exactly_once(&rb, 1..=300).await;
}

/// A writer killed after creating its manifest and before completing its multipart upload:
/// the next writer completes the upload from what the manifest records, and reports the
/// messages as duplicates.
#[tokio::test]
async fn a_manifest_whose_upload_was_never_completed_is_rolled_forward() {
    let (sink, _b, rb) = two_sinks(batch(100), batch(100)).await;
    let store = rb.store();
    let object = naming::join("ORDERS", &naming::object_name("ORDERS", 1, 10, "ndjson"));
    let path = Path::parse(format!("lake/{object}")).unwrap();
    let body: Vec<u8> =
        (1..=10).flat_map(|s| Row::of(&msg(s), PayloadMode::JsonOrEnvelope, &[]).unwrap().ndjson_line()).collect();
    let id = store.create_multipart(&path).await.unwrap();
    let part = store.put_part(&path, &id, 0, PutPayload::from(body.clone())).await.unwrap();
    let manifest = Manifest {
        schema: MANIFEST_SCHEMA.into(),
        stream: "ORDERS".into(),
        partition: "ORDERS".into(),
        slot: 0,
        object: object.clone(),
        format: Format::Ndjson,
        compression: BatchCompression::None,
        first: 1,
        last: 10,
        rows: 10,
        bytes: body.len() as u64,
        sequences: "1-10".into(),
        staging: serde_json::json!({"upload_id": id, "parts": [part.content_id]}),
    };
    let name =
        Path::parse(format!("lake/{}/{}", naming::manifest_dir("ORDERS", "ORDERS"), naming::manifest_name(0))).unwrap();
    store.put(&name, PutPayload::from(manifest.to_bytes())).await.unwrap();
    assert!(rb.batch_object_keys().await.unwrap().is_empty(), "nothing visible yet");
    let outcomes = write_chunked(&sink, &(1..=12).collect::<Vec<_>>(), 12).await;
    for (seq, outcome) in outcomes {
        let want = if seq <= 10 { OutcomeClass::Duplicate } else { OutcomeClass::Committed };
        assert_eq!(outcome.class(), want, "sequence {seq}");
    }
    assert!(rb.batch_object_keys().await.unwrap().contains(&format!("lake/{object}")), "completed by the next writer");
    assert_exactly_once(&rb, 1..=12).await;
}

/// An object larger than one part goes up part by part (the encoder streams into a spill
/// file, never holding the object in memory); its manifest records every part.
#[tokio::test]
async fn an_object_larger_than_a_part_is_uploaded_in_parts() {
    let config = BatchConfig { max_bytes: 64 << 20, ..batch(100_000) };
    let (sink, _b, rb) = two_sinks(config.clone(), config).await;
    let pad = "z".repeat(6000);
    let msgs: Vec<Envelope> =
        (1..=2500).map(|s| envelope("ORDERS", s, "orders.x", format!(r#"{{"seq":{s},"pad":"{pad}"}}"#))).collect();
    for chunk in msgs.chunks(500) {
        assert!(
            sink.write(chunk, sinks_contract::DEFAULT_BUDGET)
                .await
                .unwrap()
                .iter()
                .all(|o| matches!(o, MessageOutcome::Pending))
        );
    }
    let settled = sink.flush_held(FlushScope::All).await;
    assert_eq!(settled.len(), 2500);
    assert!(settled.iter().all(|s| matches!(s.outcome, MessageOutcome::Committed)), "{:?}", settled.first());
    let manifest = Manifest::from_bytes(&rb.body(&rb.manifest_keys().await.unwrap()[0]).await.unwrap()).unwrap();
    let parts = manifest.staging["parts"].as_array().unwrap().len();
    assert!(manifest.bytes > 15 << 20, "about 15 MB of rows: {}", manifest.bytes);
    assert_eq!(parts as u64, manifest.bytes.div_ceil(8 << 20), "8 MiB parts");
    assert_exactly_once(&rb, 1..=2500).await;
}

/// Writes 20 messages into one open object of a sink that reaches the bucket through a
/// proxy, takes the endpoint down, and flushes everything while it is down for 4 s (longer
/// than the in-place retries of one request last); the outcomes the flush reports.
async fn flush_through_an_outage(commit_retry_seconds: u64) -> (Vec<MessageOutcome>, usize, BucketReadBack) {
    let h = harness().await;
    let bucket = h.bucket().await.unwrap();
    let proxy = Arc::new(sinks_testkit::FaultProxy::start(h.endpoint(), 0, None).await.unwrap());
    let mut config = h.config(&bucket);
    config.endpoint_url = Some(proxy.url());
    config.mode = WriteMode::Batch;
    config.prefix = Some("lake".into());
    config.batch = Some(BatchConfig { commit_retry_seconds, ..batch(1000) });
    let sink = h.sink(config.clone()).unwrap();
    sink.open().await.unwrap();
    let batch: Vec<Envelope> = (1..=20).map(msg).collect();
    let written = sink.write(&batch, sinks_contract::DEFAULT_BUDGET).await.unwrap();
    assert!(written.iter().all(|o| matches!(o, MessageOutcome::Pending)), "{written:?}");
    proxy.set_down(true);
    let up = {
        let proxy = Arc::clone(&proxy);
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(4)).await;
            proxy.set_down(false);
        })
    };
    let settled = sink.flush_held(FlushScope::All).await;
    up.await.unwrap();
    let mut direct = h.config(&bucket);
    direct.prefix = Some("lake".into());
    (settled.into_iter().map(|s| s.outcome).collect(), proxy.injected(), h.read_back(&direct, bucket).unwrap())
}

#[tokio::test]
async fn an_outage_of_seconds_is_waited_out_with_the_messages_pending() {
    let (outcomes, refused, rb) = flush_through_an_outage(60).await;
    assert!(refused > 0, "the outage refused requests");
    assert_eq!(outcomes.len(), 20);
    assert!(outcomes.iter().all(|o| matches!(o, MessageOutcome::Committed)), "{outcomes:?}");
    assert_exactly_once(&rb, 1..=20).await;
}

#[tokio::test]
async fn without_commit_retries_the_same_outage_sends_the_messages_back() {
    let (outcomes, refused, _) = flush_through_an_outage(0).await;
    assert!(refused > 0, "the outage refused requests");
    assert_eq!(outcomes.len(), 20);
    assert!(outcomes.iter().all(MessageOutcome::failed_temporarily), "{outcomes:?}");
}
