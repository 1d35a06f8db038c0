//! `nats-sink replay` into sinks in batch mode (many messages per object): the replay's
//! range bound forwards the sink's holding capability, so the runner flushes the open
//! objects and the replay finishes with every replayed message stored exactly once. (When
//! the bound forwarded only the write, a replay of 300 messages into a batch-mode file sink
//! wrote no file in 90 s and ended `replay INCOMPLETE … settled 0 messages`.) Against a
//! private JetStream server, a local directory and SeaweedFS.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::json;
use sink_s3::certify::S3Harness;
use sinks_testkit::{S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, cannot_run};
use sinks_toolkit::batch::{BatchCompression, Format, encode};
use support::{env, json, text};

/// Messages published; the replay covers the first [`RANGE`] of them.
const PUBLISHED: usize = 400;
/// The replayed range: `--from-seq 1 --to-seq 300`.
const RANGE: u64 = 300;
/// The longest a replay may take before the test calls it stuck.
const REPLAY_LIMIT: Duration = Duration::from_secs(120);
const KEY_ENV: &str = "E2E_REPLAY_BATCH_S3_ACCESS_KEY_ID";
const SECRET_ENV: &str = "E2E_REPLAY_BATCH_S3_SECRET_ACCESS_KEY";

/// NDJSON objects of at most 100 messages, one partition per subject; an object also
/// closes after 2 s of waiting, so the last, partial one commits too.
fn batch() -> serde_json::Value {
    json!({"format": "ndjson", "compression": "none", "max_messages": 100, "max_age_ms": 2000,
           "partition_template": "{stream}/{subject_token[2]}"})
}

/// `nats-sink replay CONFIG --from-seq 1 --to-seq 300`, killed and failed after
/// [`REPLAY_LIMIT`].
async fn replay(config: &Path, cwd: &Path, envs: &[(&str, String)]) -> Output {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_nats-sink"))
        .args(["replay", config.to_str().unwrap(), "--from-seq", "1", "--to-seq", &RANGE.to_string()])
        .current_dir(cwd)
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    match tokio::time::timeout(REPLAY_LIMIT, child.wait_with_output()).await {
        Ok(out) => out.unwrap(),
        Err(_) => panic!("the replay did not finish within {REPLAY_LIMIT:?}"),
    }
}

/// How often each stream sequence occurs across `rows` (sequences read from the objects).
fn counts(rows: impl IntoIterator<Item = u64>) -> BTreeMap<u64, usize> {
    let mut counts = BTreeMap::new();
    for seq in rows {
        *counts.entry(seq).or_insert(0) += 1;
    }
    counts
}

/// Every sequence of the range exactly once, and none beyond it.
fn assert_range_exactly_once(counts: &BTreeMap<u64, usize>, out: &Output) {
    let twice: Vec<(&u64, &usize)> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "stored more than once: {twice:?}\n{}", text(out));
    let beyond: Vec<&u64> = counts.keys().filter(|s| **s > RANGE).collect();
    assert!(beyond.is_empty(), "written beyond --to-seq: {beyond:?}\n{}", text(out));
    let want: Vec<u64> = (1..=RANGE).collect();
    assert_eq!(counts.keys().copied().collect::<Vec<_>>(), want, "every replayed message stored\n{}", text(out));
}

#[tokio::test]
async fn replay_into_a_batch_mode_file_sink_finishes_and_writes_every_message_once() {
    let e = env().await;
    e.publish(PUBLISHED, json).await;
    let sink = json!({"type": "file", "directory": e.out(), "mode": "batch", "batch": batch()});
    let config = e.write_config_json(sink, json!({"delivery": {"batch_size": 50}}));
    let out = replay(&config, e.dir.path(), &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("replay complete: settled 300 messages: committed=300"), "{}", text(&out));
    let mut rows = Vec::new();
    for (path, format, compression) in sink_file::certify::batch_objects(&e.out()).unwrap() {
        let file = std::fs::File::open(&path).unwrap();
        encode::read_rows(file, format, compression, false, |r| rows.push(r.stream_sequence)).unwrap();
    }
    assert!(rows.len() >= RANGE as usize, "{} rows\n{}", rows.len(), text(&out));
    assert_range_exactly_once(&counts(rows), &out);
}

#[tokio::test]
async fn replay_into_a_batch_mode_s3_sink_finishes_and_writes_every_message_once() {
    let server = sinks_testkit::shared_s3().await.unwrap_or_else(|e| cannot_run("replay into s3 batch", e));
    let h = S3Harness::new(server.endpoint, server.filer, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY);
    let bucket = h.bucket().await.unwrap();
    let e = env().await;
    e.publish(PUBLISHED, json).await;
    let sink = json!({"type": "s3", "bucket": bucket.name(), "prefix": "replayed", "endpoint_url": h.endpoint(),
                      "allow_http_for_local_testing": true, "region_name": "us-east-1",
                      "credential_mode": "environment", "aws_access_key_id_env": KEY_ENV,
                      "aws_secret_access_key_env": SECRET_ENV, "mode": "batch", "batch": batch()});
    let mut section = sink.clone();
    section.as_object_mut().unwrap().remove("type");
    let mut s3_config: sink_s3::S3SinkConfig = serde_json::from_value(section).unwrap();
    s3_config.credential_mode = sink_s3::CredentialMode::DefaultChain;
    let read_back = h.read_back(&s3_config, bucket).unwrap();
    let config = e.write_config_json(sink, json!({"delivery": {"batch_size": 50}}));
    let creds = [(KEY_ENV, S3_ACCESS_KEY_ID.to_owned()), (SECRET_ENV, S3_SECRET_ACCESS_KEY.to_owned())];
    let out = replay(&config, e.dir.path(), &creds).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("replay complete: settled 300 messages: committed=300"), "{}", text(&out));
    let mut rows = Vec::new();
    for key in read_back.batch_object_keys().await.unwrap() {
        assert!(key.ends_with(".ndjson"), "{key}");
        let file = read_back.download(&key).await.unwrap();
        encode::read_rows(file, Format::Ndjson, BatchCompression::None, false, |r| rows.push(r.stream_sequence))
            .unwrap();
    }
    assert!(rows.len() >= RANGE as usize, "{} rows\n{}", rows.len(), text(&out));
    assert_range_exactly_once(&counts(rows), &out);
}
