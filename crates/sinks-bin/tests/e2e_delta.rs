//! `nats-sink run` with the file and S3 sinks in table mode (`sink.batch.table: {format:
//! delta}`): two workers on one consumer, kill -9 of one or the other while messages are in
//! flight, then the Delta table read by the Python `deltalake` package (delta-rs) and by
//! DuckDB: every event exactly once, the table's stream sequences equal to the stream's.
//! S3 twice: on SeaweedFS and on moto's server (a second implementation). CI runs 3,000
//! events and two kills per destination; `cargo xtask test --full` 20,000
//! events and five kills. A crash at each step of a table commit (staged, claimed, table
//! committed, before the ack; `sinks_toolkit::batch::crash_point`), restarted after each. And
//! a stream re-created under a running sink (the guard's `on_change: new_epoch`): the old
//! epoch's rows stay, the new epoch's arrive once.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use sink_s3::certify::S3Harness;
use sinks_testkit::{S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, cannot_run, rounds, stream_with_subjects, wait_until};
use support::{Env, Sink, acked, env};

const KEY_ENV: &str = "E2E_DELTA_S3_ACCESS_KEY_ID";
const SECRET_ENV: &str = "E2E_DELTA_S3_SECRET_ACCESS_KEY";

/// The batch section: Parquet, Hive-style partitions by subject, the table.
fn batch() -> serde_json::Value {
    json!({"format": "parquet", "max_messages": 400, "max_age_ms": 1000,
           "partition_template": "kind={subject_token[2]}",
           "columns": [{"name": "order", "path": "order", "type": "int64"}],
           "table": {"format": "delta"}})
}

fn extra() -> serde_json::Value {
    json!({
        "delivery": {"batch_size": 500, "max_in_flight_batches": 4},
        "consumer_management": {"ack_wait_seconds": 5, "max_ack_pending": 20000},
        "logging": {"level": "INFO"},
    })
}

/// Two workers on `config`; `kills` times, as the acknowledgements pass the next fraction
/// of `total`, one of them (in turn) is killed with SIGKILL and restarted. Then drained and
/// both stopped. Returns the messages delivered and unacknowledged at the kills.
async fn two_workers_with_kills(e: &Env, config: &Path, total: usize, kills: usize, envs: &[(&str, String)]) -> usize {
    let mut workers = [Sink::start(config, e.dir.path(), envs), Sink::start(config, e.dir.path(), envs)];
    let mut in_flight = 0;
    for kill in 1..=kills {
        let target = total * kill / (kills + 1);
        let reached = wait_until(Duration::from_secs(120), || async { acked(e, total).await >= target }).await;
        assert!(reached, "no progress to {target}; logs:\n{}\n{}", workers[0].logs(), workers[1].logs());
        in_flight += e.consumer_state().await.map_or(0, |(_, ack_pending)| ack_pending);
        let victim = kill % 2;
        let fresh = Sink::start(config, e.dir.path(), envs);
        std::mem::replace(&mut workers[victim], fresh).kill9();
    }
    let done = wait_until(Duration::from_secs(180), || e.settled()).await;
    assert!(done, "not drained; logs:\n{}\n{}", workers[0].logs(), workers[1].logs());
    for worker in workers {
        let ready =
            wait_until(Duration::from_secs(60), || async { worker.logs().contains("consuming servers=") }).await;
        assert!(ready, "{}", worker.logs());
        let (code, log) = worker.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    in_flight
}

/// Both readers see every sequence of the stream, `1..=total`, exactly once.
fn assert_exactly_once(read: &sinks_testkit::DeltaRead, stream: &str, total: usize) {
    let want: BTreeMap<(String, u64), usize> = (1..=total as u64).map(|s| ((stream.to_owned(), s), 1)).collect();
    for reader in ["deltalake", "duckdb"] {
        let got = read.rows(reader);
        let twice: Vec<_> = got.iter().filter(|(_, n)| **n > 1).map(|(k, _)| k).take(5).collect();
        let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).take(5).collect();
        assert!(twice.is_empty() && missing.is_empty(), "{reader}: twice {twice:?}, missing {missing:?}");
        assert_eq!(got, want, "{reader} sees exactly the stream's events");
    }
    eprintln!("table version {}, {} files", read.report["deltalake"]["version"], read.report["duckdb"]["files"]);
}

fn sizes() -> (usize, usize) {
    (rounds(3_000, 20_000), rounds(2, 5))
}

#[tokio::test]
async fn file_delta_table_holds_every_event_once_through_kill_9_of_two_workers() {
    let (total, kills) = sizes();
    let started = Instant::now();
    let e = env().await;
    e.publish(total, support::json).await;
    let sink = json!({"type": "file", "directory": e.out(), "mode": "batch", "batch": batch()});
    let config = e.write_config_json(sink, extra());
    let in_flight = two_workers_with_kills(&e, &config, total, kills, &[]).await;
    eprintln!("delivered and unacknowledged at the kills: {in_flight}");
    assert!(in_flight > 0, "the kills hit messages in flight");
    let read = sinks_testkit::read_delta(e.out().to_str().unwrap(), &json!({}), &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_exactly_once(&read, &e.stream, total);
    eprintln!("{total} events, {kills} kills, {:?}", started.elapsed());
}

#[tokio::test]
async fn s3_delta_table_holds_every_event_once_through_kill_9_of_two_workers() {
    let (total, kills) = sizes();
    let started = Instant::now();
    let server = sinks_testkit::shared_s3().await.unwrap_or_else(|e| cannot_run("s3 delta", e));
    let h = S3Harness::new(server.endpoint.clone(), server.filer, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY);
    let bucket = h.bucket().await.unwrap();
    s3_table_through_kills(h.endpoint(), bucket.name(), total, kills).await;
    eprintln!("seaweedfs: {total} events, {kills} kills, {:?}", started.elapsed());
}

/// The same on moto's S3 server (a second implementation, private to this test), at the same
/// size (fewer events leave nothing in flight at the kills).
#[tokio::test]
async fn moto_s3_delta_table_holds_every_event_once_through_kill_9_of_two_workers() {
    let (total, kills) = sizes();
    let started = Instant::now();
    let moto = sinks_testkit::Moto::start().await.unwrap_or_else(|e| cannot_run("moto delta", e));
    let bucket = moto.bucket().await.unwrap();
    s3_table_through_kills(&moto.endpoint(), &bucket, total, kills).await;
    eprintln!("moto: {total} events, {kills} kills, {:?}", started.elapsed());
}

/// `total` events into a table at `lake/orders` in `bucket` of the S3 server at `endpoint`
/// (signed with the test identity), through two workers of which `kills` are killed with
/// SIGKILL; then delta-rs and DuckDB read each event once from the table.
async fn s3_table_through_kills(endpoint: &str, bucket: &str, total: usize, kills: usize) {
    let e = env().await;
    e.publish(total, support::json).await;
    let sink = json!({"type": "s3", "bucket": bucket, "prefix": "lake/orders", "endpoint_url": endpoint,
                      "allow_http_for_local_testing": true, "region_name": "us-east-1",
                      "credential_mode": "environment", "aws_access_key_id_env": KEY_ENV,
                      "aws_secret_access_key_env": SECRET_ENV, "mode": "batch", "batch": batch()});
    let config = e.write_config_json(sink, extra());
    let creds = [(KEY_ENV, S3_ACCESS_KEY_ID.to_owned()), (SECRET_ENV, S3_SECRET_ACCESS_KEY.to_owned())];
    let in_flight = two_workers_with_kills(&e, &config, total, kills, &creds).await;
    eprintln!("delivered and unacknowledged at the kills: {in_flight}");
    assert!(in_flight > 0, "the kills hit messages in flight");
    let storage = json!({"endpoint_url": endpoint, "aws_access_key_id": S3_ACCESS_KEY_ID,
                         "aws_secret_access_key": S3_SECRET_ACCESS_KEY, "aws_region": "us-east-1",
                         "allow_http": "true"});
    let uri = format!("s3://{bucket}/lake/orders");
    let read = sinks_testkit::read_delta(&uri, &storage, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_exactly_once(&read, &e.stream, total);
}

/// The stream deleted and created again while the sink runs with `stream_guard.on_change:
/// new_epoch`: the table keeps the old epoch's rows (sequences `1..=300` under the stream's
/// name) and gets the new epoch's once (`1..=200` under `<stream>.<epoch>`), each epoch under
/// application ids of its own.
#[tokio::test]
async fn file_delta_table_keeps_the_old_epoch_and_gets_the_new_one_once_after_a_re_creation() {
    let started = Instant::now();
    let e = env().await;
    e.publish(300, support::json).await;
    let sink = json!({"type": "file", "directory": e.out(), "mode": "batch", "batch": batch()});
    let guard = json!({"stream_guard": {"on_change": "new_epoch", "recheck_seconds": 1},
                       "metrics": {"lag_poll_interval_seconds": 1}});
    let mut settings = extra();
    settings.as_object_mut().unwrap().extend(guard.as_object().unwrap().clone());
    let config = e.write_config_json(sink, settings);
    let run = Sink::start(&config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(60), || e.settled()).await, "the old epoch: {}", run.logs());
    e.js.delete_stream(&e.stream).await.unwrap();
    stream_with_subjects(&e.js, &e.stream, &[&format!("{}.>", e.subject_root)]).await;
    e.publish(200, support::json).await;
    let read = || sinks_testkit::read_delta(e.out().to_str().unwrap(), &json!({}), &[]);
    let both = wait_until(Duration::from_secs(90), || async {
        e.settled().await && read().is_ok_and(|r| r.rows("deltalake").len() == 500)
    })
    .await;
    assert!(both, "the new epoch's rows: {}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let read = read().unwrap_or_else(|e| panic!("{e}"));
    for reader in ["deltalake", "duckdb"] {
        let rows = read.rows(reader);
        let old: Vec<u64> = rows.keys().filter(|(s, _)| *s == e.stream).map(|(_, q)| *q).collect();
        let epochs: BTreeMap<&String, usize> =
            rows.keys().filter(|(s, _)| *s != e.stream).fold(BTreeMap::new(), |mut m, (s, _)| {
                *m.entry(s).or_default() += 1;
                m
            });
        assert!(rows.values().all(|n| *n == 1), "{reader}: a row twice");
        assert_eq!(old, (1..=300).collect::<Vec<_>>(), "{reader}: the old epoch's rows stay");
        assert_eq!(epochs.len(), 1, "{reader}: one new epoch: {epochs:?}");
        let (name, count) = epochs.into_iter().next().unwrap();
        assert!(name.starts_with(&format!("{}.", e.stream)) && count == 200, "{reader}: {name} {count}");
    }
    eprintln!("re-created stream: {:?}", started.elapsed());
}

/// A crash at each step of a table commit: the binary (a test build, with the `crash-points`
/// feature) aborts the second time it reaches the point `NATS_SINKS_CRASH_AT` names (after
/// an object is staged, after its slot is claimed, after its table commit, before its
/// messages are acknowledged) and is started again, once per point; then run to the end.
/// The table, read through its log's live files without the sink's own reader, holds each
/// event once, no object is added twice, and delta-rs and DuckDB agree.
#[tokio::test]
async fn file_delta_table_holds_every_event_once_through_a_crash_at_each_commit_step() {
    use sinks_toolkit::batch::crash_point::{CRASH_AT_ENV, POINTS};
    let started = Instant::now();
    let total = 2_000;
    let e = env().await;
    e.publish(total, support::json).await;
    let mut batch = batch();
    batch["max_messages"] = 100.into();
    batch["table"]["checkpoint_interval"] = 3.into();
    let sink = json!({"type": "file", "directory": e.out(), "mode": "batch", "batch": batch});
    let config = e.write_config_json(sink, extra());
    for point in POINTS {
        let mut run = Sink::start(&config, e.dir.path(), &[(CRASH_AT_ENV, format!("{point}:2"))]);
        let exited = wait_until(Duration::from_secs(60), || {
            let gone = run.child.try_wait().unwrap().is_some();
            async move { gone }
        })
        .await;
        let log = run.logs();
        assert!(
            exited && log.contains(&format!("crash point {point} reached")),
            "{point}: the sink aborts at the crash point (a nats-sink built without the crash-points \
             feature never does); log:\n{log}"
        );
    }
    let run = Sink::start(&config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(120), || e.settled()).await, "not drained: {}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let records = sink_file::certify::read_table_records(&e.out()).unwrap_or_else(|e| panic!("{e}"));
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (key, _) in &records {
        *seen.entry(key.clone()).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = (1..=total).map(|s| (format!("stream-sequence:{}:{s}", e.stream), 1)).collect();
    assert_eq!(seen, want, "the table's live files hold each event once");
    let read = sinks_testkit::read_delta(e.out().to_str().unwrap(), &json!({}), &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_exactly_once(&read, &e.stream, total);
    eprintln!("a crash at each of {POINTS:?}: {:?}", started.elapsed());
}
