//! The file sink's table mode (`sink.batch.table: {format: delta}`) against real
//! directories, read back by the Python `deltalake` package (delta-rs) and by DuckDB: two
//! writers on one table and redeliveries store every event once, objects committed before
//! the table was (a crash between the two) join it when their messages come back, the schema
//! evolves by an added column and refuses an incompatible change, an `OPTIMIZE` by delta-rs
//! leaves the next commit working, a later epoch of the stream commits next to the earlier
//! one, checkpoints (the sink's every `checkpoint_interval` commits, and delta-rs's after
//! its log cleanup) let readers and a restarted sink start there once the log before them is
//! gone, with every application's `txn` kept and no slot added twice, and configs table mode
//! cannot serve are refused.
#![allow(clippy::unwrap_used)]

use sinks_contract::testing::SinkExt as _;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use sink_file::{FileSink, FileSinkConfig};
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, MessageOutcome, OutcomeClass, Sink};
use sinks_testkit::{DeltaRead, read_delta};

const TEMPLATE: &str = "kind={subject_token[1]}";

fn config(root: &Path, batch: serde_json::Value) -> FileSinkConfig {
    serde_json::from_value(serde_json::json!({"directory": root, "mode": "batch", "batch": batch})).unwrap()
}

fn table_batch(max_messages: u64, columns: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"format": "parquet", "max_messages": max_messages, "partition_template": TEMPLATE,
                       "columns": columns, "table": {"format": "delta"}})
}

fn checkpointed_batch(max_messages: u64, checkpoint_interval: u64) -> serde_json::Value {
    let mut batch = table_batch(max_messages, serde_json::json!([]));
    batch["table"]["checkpoint_interval"] = checkpoint_interval.into();
    batch
}

async fn open(root: &Path, batch: serde_json::Value) -> FileSink {
    let sink = FileSink::new(config(root, batch)).unwrap();
    sink.open().await.unwrap();
    sink
}

fn msg(seq: u64) -> Envelope {
    envelope("ORDERS", seq, &format!("orders.k{}", seq % 2), format!(r#"{{"qty":{seq},"who":"w{seq}"}}"#))
}

/// Writes `seqs` in chunks of `chunk`, flushing what is due after each and everything at
/// the end; the final outcome of every message.
async fn write(sink: &FileSink, seqs: impl IntoIterator<Item = u64>, chunk: usize) -> BTreeMap<u64, MessageOutcome> {
    sink.write_chunked(&seqs.into_iter().map(msg).collect::<Vec<_>>(), chunk).await
}

fn apps() -> Vec<String> {
    ["k0", "k1"].iter().map(|k| format!("nats-sinks/ORDERS/kind={k}")).collect()
}

fn read(root: &Path) -> DeltaRead {
    read_delta(root.to_str().unwrap(), &serde_json::json!({}), &apps()).unwrap_or_else(|e| panic!("{e}"))
}

/// Both readers see exactly `want`, each once.
fn assert_table_holds(read: &DeltaRead, want: impl IntoIterator<Item = u64>) {
    let want: BTreeMap<(String, u64), usize> = want.into_iter().map(|s| (("ORDERS".to_owned(), s), 1)).collect();
    for reader in ["deltalake", "duckdb"] {
        let got = read.rows(reader);
        let twice: Vec<_> = got.iter().filter(|(_, n)| **n > 1).map(|(k, _)| k).take(5).collect();
        assert!(twice.is_empty(), "{reader} sees rows twice: {twice:?}");
        assert_eq!(got, want, "{reader} sees exactly the events stored");
    }
}

/// The manifests of `kind`'s log: how many slots it has.
fn slots(root: &Path, kind: &str) -> u64 {
    std::fs::read_dir(root.join(format!("kind={kind}/_nats-sinks/ORDERS"))).map_or(0, |d| d.count() as u64)
}

/// Every `add` path of the log, each once, and every Parquet object below `root` added.
fn assert_each_object_added_once(root: &Path) {
    let mut added = Vec::new();
    let entries = std::fs::read_dir(root.join("_delta_log")).unwrap().flatten();
    for entry in entries.filter(|e| e.file_name().to_string_lossy().ends_with(".json")) {
        for line in std::fs::read_to_string(entry.path()).unwrap().lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(path) = action["add"]["path"].as_str() {
                added.push(path.to_owned());
            }
        }
    }
    let distinct: BTreeSet<&String> = added.iter().collect();
    assert_eq!(distinct.len(), added.len(), "an object added twice: {added:?}");
    let mut objects = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() && entry.file_name() != "_delta_log" {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                objects.insert(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    assert_eq!(objects, distinct.into_iter().cloned().collect(), "every object is in the table");
}

#[tokio::test]
async fn two_writers_and_redeliveries_store_every_event_once_in_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let columns = serde_json::json!([{"name": "qty", "path": "qty", "type": "int64"}]);
    let a = open(root, table_batch(10, columns.clone())).await;
    let b = open(root, table_batch(7, columns)).await;
    let (first, second) = tokio::join!(write(&a, 1..=70, 9), write(&b, 40..=120, 11));
    assert!(first.values().chain(second.values()).all(|o| o.class() != OutcomeClass::FailedPermanent));
    // Everything delivered again: what one writer's abandoned object sent back is written
    // now, the rest is found stored.
    // (An index read before the other writer committed finds the overlap at its claim: the
    // overlapping messages are duplicates, the rest come back once more.)
    let mut left: Vec<u64> = (1..=120).collect();
    for _ in 0..5 {
        let again = write(&a, left.clone(), 40).await;
        left = again.iter().filter(|(_, o)| o.failed_temporarily()).map(|(s, _)| *s).collect();
    }
    assert!(left.is_empty(), "still failing: {left:?}");
    let redelivered = write(&b, [3, 50, 100], 3).await;
    assert!(redelivered.values().all(|o| o.class() == OutcomeClass::Duplicate), "{redelivered:?}");

    let read = read(root);
    assert_table_holds(&read, 1..=120);
    assert_each_object_added_once(root);
    for kind in ["k0", "k1"] {
        let last = slots(root, kind) - 1;
        assert_eq!(read.txn(&format!("nats-sinks/ORDERS/kind={kind}")), Some(last), "the txn reached the last slot");
    }
    assert_eq!(read.report["deltalake"]["partition_columns"], serde_json::json!(["kind"]));
    let whole = &read.report["deltalake"]["read_columns"];
    for column in ["timestamp", "headers", "payload", "qty", "kind"] {
        assert!(whole.as_array().unwrap().contains(&serde_json::json!(column)), "delta-rs reads {column}: {whole}");
    }
    let timestamp = read.report["deltalake"]["timestamp_type"].as_str().unwrap();
    assert!(timestamp.starts_with("timestamp[") && timestamp.contains("UTC"), "{timestamp}");
    let columns = read.report["deltalake"]["columns"].as_array().unwrap();
    assert!(columns.contains(&serde_json::json!("qty")) && columns.contains(&serde_json::json!("stream_sequence")));
}

#[tokio::test]
async fn objects_committed_before_their_table_commit_join_it_when_their_messages_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // The state a crash between an object's manifest and its table commit leaves: objects
    // and manifests, no table entry. Made here by removing the entries after the table's
    // creation (version 0).
    let before = open(root, table_batch(10, serde_json::json!([]))).await;
    write(&before, 1..=40, 40).await;
    drop(before);
    for entry in std::fs::read_dir(root.join("_delta_log")).unwrap().flatten() {
        if !entry.file_name().to_string_lossy().starts_with("00000000000000000000.") {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    let table = open(root, table_batch(10, serde_json::json!([]))).await;
    let empty = read(root);
    assert_table_holds(&empty, []);
    // A redelivery of a stored message finds its log behind the table: the objects join
    // first, then the message is reported a duplicate (and acknowledged).
    let redelivered = write(&table, [4, 5], 2).await;
    assert!(redelivered.values().all(|o| o.class() == OutcomeClass::Duplicate), "{redelivered:?}");
    // Both partitions' logs joined: the write touched kind=k0 and kind=k1.
    assert_table_holds(&read(root), 1..=40);
    write(&table, 41..=60, 20).await;
    assert_table_holds(&read(root), 1..=60);
    assert_each_object_added_once(root);
}

#[tokio::test]
async fn adding_a_column_evolves_the_table_and_an_incompatible_change_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let qty = serde_json::json!({"name": "qty", "path": "qty", "type": "int64"});
    let who = serde_json::json!({"name": "who", "path": "who", "type": "string"});
    write(&open(root, table_batch(5, serde_json::json!([qty]))).await, 1..=10, 10).await;
    write(&open(root, table_batch(5, serde_json::json!([qty, who]))).await, 11..=20, 10).await;
    let read = read(root);
    assert_table_holds(&read, 1..=20);
    let columns = read.report["deltalake"]["columns"].as_array().unwrap();
    assert!(columns.contains(&serde_json::json!("who")), "{columns:?}");
    let refused = |columns: serde_json::Value| {
        let root = root.to_path_buf();
        async move {
            let sink = FileSink::new(config(&root, table_batch(5, columns))).unwrap();
            sink.open().await.unwrap_err().to_string()
        }
    };
    let retyped = serde_json::json!([{"name": "qty", "path": "qty", "type": "string"}, who]);
    let e = refused(retyped).await;
    assert!(e.contains("sink.batch.columns") && e.contains("column `qty` is long"), "{e}");
    let e = refused(serde_json::json!([qty])).await;
    assert!(e.contains("sink.batch.columns") && e.contains("`who`"), "{e}");
}

#[tokio::test]
async fn an_optimize_by_delta_rs_leaves_the_next_commits_working() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&open(root, table_batch(5, serde_json::json!([]))).await, 1..=30, 30).await;
    sinks_testkit::optimize_delta(root.to_str().unwrap(), &serde_json::json!({})).unwrap();
    assert_table_holds(&read(root), 1..=30);
    let next = open(root, table_batch(5, serde_json::json!([]))).await;
    let redelivered = write(&next, [2, 29], 2).await;
    assert!(redelivered.values().all(|o| o.class() == OutcomeClass::Duplicate), "{redelivered:?}");
    write(&next, 31..=45, 15).await;
    let read = read(root);
    assert_table_holds(&read, 1..=45);
    assert!(read.report["deltalake"]["version"].as_u64().unwrap() >= 2);
}

/// A re-created stream (a later epoch, epoch-scoped keys): the old epoch's commits stay, the
/// new epoch's events (the same sequences) arrive once, under an application id of their own.
#[tokio::test]
async fn a_later_epoch_of_the_stream_commits_next_to_the_earlier_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sink = open(root, table_batch(6, serde_json::json!([]))).await;
    write(&sink, 1..=20, 20).await;
    let later = |s: u64| {
        envelope("ORDERS", s, &format!("orders.k{}", s % 2), format!(r#"{{"again":{s}}}"#))
            .with_stream_epoch(Some("e2".into()))
    };
    let written = sink.write_chunked(&(1..=15).map(later).collect::<Vec<_>>(), 15).await;
    assert!(written.values().all(|o| o.class() == OutcomeClass::Committed), "{written:?}");
    let again = open(root, table_batch(6, serde_json::json!([]))).await.write_chunked(&[later(3)], 1).await;
    assert!(again.values().all(|o| o.class() == OutcomeClass::Duplicate), "{again:?}");
    let apps: Vec<String> =
        ["ORDERS", "ORDERS.e2"].iter().flat_map(|s| ["k0", "k1"].map(|k| format!("nats-sinks/{s}/kind={k}"))).collect();
    let read = read_delta(root.to_str().unwrap(), &serde_json::json!({}), &apps).unwrap_or_else(|e| panic!("{e}"));
    let mut want: BTreeMap<(String, u64), usize> = (1..=20).map(|s| (("ORDERS".to_owned(), s), 1)).collect();
    want.extend((1..=15).map(|s| (("ORDERS.e2".to_owned(), s), 1)));
    for reader in ["deltalake", "duckdb"] {
        assert_eq!(read.rows(reader), want, "{reader}: both epochs, each event once");
    }
    for app in &apps {
        assert!(read.txn(app).is_some(), "{app}: {}", read.report["deltalake"]["txn"]);
    }
    assert_each_object_added_once(root);
}

/// The version `_delta_log/_last_checkpoint` names once it names `at_least` or later (a
/// checkpoint is written in a task of its own after the commit that made it due).
async fn checkpoint_at_least(root: &Path, at_least: u64) -> u64 {
    let pointer = root.join("_delta_log/_last_checkpoint");
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(&pointer) {
            let v = serde_json::from_str::<serde_json::Value>(&text).unwrap()["version"].as_u64().unwrap();
            if v >= at_least {
                return v;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("no checkpoint at or after version {at_least}");
}

/// The log entries' versions.
fn commits(root: &Path) -> Vec<u64> {
    let mut out: Vec<u64> = std::fs::read_dir(root.join("_delta_log"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().strip_suffix(".json").and_then(|v| v.parse().ok()))
        .collect();
    out.sort_unstable();
    out
}

/// Removes the log entries up to `version` (what a log cleanup does before a checkpoint).
fn remove_entries_through(root: &Path, version: u64) {
    for v in commits(root).into_iter().filter(|v| *v <= version) {
        std::fs::remove_file(root.join(format!("_delta_log/{v:020}.json"))).unwrap();
    }
}

/// The data-changing `add`s since checkpoint `at` (its live files, then every later entry's
/// `add` with `dataChange`): no path twice, so no slot was committed twice.
fn assert_no_object_added_twice_since(root: &Path, at: u64) {
    let bytes = std::fs::read(root.join(format!("_delta_log/{at:020}.checkpoint.parquet"))).unwrap();
    let snap = sinks_toolkit::batch::checkpoint::read(at, vec![bytes]).unwrap();
    let mut added: Vec<String> = snap.files.keys().cloned().collect();
    for v in commits(root).into_iter().filter(|v| *v > at) {
        for line in std::fs::read_to_string(root.join(format!("_delta_log/{v:020}.json"))).unwrap().lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            if action["add"]["dataChange"] == true {
                added.push(action["add"]["path"].as_str().unwrap().to_owned());
            }
        }
    }
    let distinct: BTreeSet<&String> = added.iter().collect();
    assert_eq!(distinct.len(), added.len(), "an object added twice since checkpoint {at}: {added:?}");
}

/// Checkpoints every 3 commits; the log before the latest removed: delta-rs and DuckDB read
/// the table from the checkpoint, and a restarted sink starts there too (no version 0), finds
/// redeliveries stored through the checkpoint's `txn`s and goes on with no slot added twice.
#[tokio::test]
async fn the_sinks_checkpoints_let_readers_and_a_restart_start_there_once_the_log_before_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sink = open(root, checkpointed_batch(4, 3)).await;
    write(&sink, 1..=60, 8).await;
    let last = *commits(root).last().unwrap();
    assert!(last >= 6, "enough commits for two checkpoints: {last}");
    // The newest commits may follow the latest checkpoint (one is due every 3 commits).
    let at = checkpoint_at_least(root, last - 2).await;
    let written = std::fs::read_dir(root.join("_delta_log"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".checkpoint.parquet"))
        .count();
    assert!(written >= 2, "a checkpoint every 3 commits: {written} for {last}");
    remove_entries_through(root, at);
    let from_checkpoint = read(root);
    assert_table_holds(&from_checkpoint, 1..=60);
    assert_eq!(from_checkpoint.report["duckdb"]["checkpoint"], at, "DuckDB's replay started at the checkpoint");
    for kind in ["k0", "k1"] {
        assert_eq!(from_checkpoint.txn(&format!("nats-sinks/ORDERS/kind={kind}")), Some(slots(root, kind) - 1));
    }
    drop(sink);

    let restarted = open(root, checkpointed_batch(4, 3)).await;
    let redelivered = write(&restarted, 1..=60, 20).await;
    assert!(redelivered.values().all(|o| o.class() == OutcomeClass::Duplicate), "{redelivered:?}");
    assert_eq!(commits(root).into_iter().max().unwrap_or(at), last, "redeliveries commit nothing");
    write(&restarted, 61..=90, 10).await;
    assert_table_holds(&read(root), 1..=90);
    assert_no_object_added_twice_since(root, at);
}

/// delta-rs's own maintenance: log retention set to zero, `OPTIMIZE`, a checkpoint and a log
/// cleanup (version 0 and every entry before the checkpoint gone). The sink starts from
/// delta-rs's checkpoint with every `txn` it recorded: the redeliveries are stored, nothing is
/// added twice, and its own commits and checkpoints go on.
#[tokio::test]
async fn a_restart_resumes_from_delta_rs_checkpoint_after_its_log_cleanup() {
    use sinks_testkit::Maintenance::{Checkpoint, Cleanup, NoLogRetention, Optimize};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let uri = root.to_str().unwrap();
    write(&open(root, checkpointed_batch(4, 0)).await, 1..=40, 8).await;
    assert!(!root.join("_delta_log/_last_checkpoint").exists(), "checkpoint_interval 0 writes none");
    sinks_testkit::maintain_delta(uri, &serde_json::json!({}), &[NoLogRetention, Optimize, Checkpoint, Cleanup])
        .unwrap();
    let at = checkpoint_at_least(root, 1).await;
    assert_eq!(commits(root), [at], "the cleanup left only the checkpoint's entry");
    assert_table_holds(&read(root), 1..=40);

    let restarted = open(root, checkpointed_batch(4, 2)).await;
    let redelivered = write(&restarted, 1..=40, 20).await;
    assert!(redelivered.values().all(|o| o.class() == OutcomeClass::Duplicate), "{redelivered:?}");
    assert_eq!(commits(root), [at], "redeliveries commit nothing");
    write(&restarted, 41..=80, 8).await;
    let read = read(root);
    assert_table_holds(&read, 1..=80);
    for kind in ["k0", "k1"] {
        assert_eq!(read.txn(&format!("nats-sinks/ORDERS/kind={kind}")), Some(slots(root, kind) - 1));
    }
    assert_no_object_added_twice_since(root, at);
    // The sink's own checkpoint after delta-rs's (every 2 commits from the one it read).
    assert!(checkpoint_at_least(root, at + 2).await > at);
}

#[test]
fn configs_table_mode_cannot_serve_are_refused_naming_the_field() {
    let refused = |batch: serde_json::Value| {
        let e = config(Path::new("/tmp"), batch).validate().unwrap_err();
        e.issues.into_iter().map(|i| i.path).collect::<Vec<_>>()
    };
    let ndjson = serde_json::json!({"partition_template": TEMPLATE, "table": {"format": "delta"}});
    assert_eq!(refused(ndjson), ["sink.batch.table.format"]);
    let plain = serde_json::json!({"format": "parquet", "partition_template": "{stream}/dt={yyyy}", "table": {}});
    assert_eq!(refused(plain), ["sink.batch.partition_template"]);
    let clash = serde_json::json!({"format": "parquet", "partition_template": "stream={stream}", "table": {}});
    assert_eq!(refused(clash), ["sink.batch.partition_template"]);
    let unknown = serde_json::json!({"directory": "/tmp", "mode": "batch",
                                     "batch": {"format": "parquet", "table": {"format": "iceberg"}}});
    assert!(serde_json::from_value::<FileSinkConfig>(unknown).is_err(), "only delta");
}
