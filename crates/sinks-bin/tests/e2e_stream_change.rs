//! A stream deleted and created again under `nats-sink run`, through the binary, for the
//! file, MySQL and S3 sinks, one record per message and batch mode: the old events stay
//! stored, and every new event ends stored under its epoch's key or dead-lettered as
//! `sequence_reused`; none is acknowledged and missing. With the sink stopped during the
//! re-creation (it pauses; the operator decides with `nats-sink stream-identity`) and running
//! (`stream_guard.on_change = "new_epoch"`), with the guard off and a DLQ (the destination
//! refuses the reused sequences), and with neither (nothing is acknowledged).
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use sinks_certify::{CrashTarget, Harness};
use sinks_testkit::{read_stream, stream_with_subjects, unique, wait_until};
use support::{Env, Sink, env};

/// The destinations: one record per message and batch mode, of the file, MySQL and S3 sinks.
async fn target(kind: &str) -> CrashTarget {
    let made = match kind {
        "file" => sink_file::certify::FileHarness.crash_target().await,
        "file-batch" => sink_file::certify::FileBatchHarness.crash_target().await,
        "mysql" => {
            let server = sinks_testkit::shared_mysql()
                .unwrap_or_else(|e| sinks_testkit::cannot_run("e2e_stream_change mysql", e));
            sink_mysql::certify::MySqlHarness::new(sink_mysql::certify::TestServer::new(server.host, server.port))
                .crash_target()
                .await
        }
        "s3" | "s3-batch" => {
            let weed = sinks_testkit::shared_s3()
                .await
                .unwrap_or_else(|e| sinks_testkit::cannot_run("e2e_stream_change s3", e));
            let harness = sink_s3::certify::S3Harness::new(
                weed.endpoint,
                weed.filer,
                sinks_testkit::S3_ACCESS_KEY_ID,
                sinks_testkit::S3_SECRET_ACCESS_KEY,
            );
            if kind == "s3" {
                harness.crash_target().await
            } else {
                sink_s3::certify::S3BatchHarness(harness).crash_target().await
            }
        }
        other => panic!("no destination {other}"),
    };
    made.unwrap_or_else(|e| panic!("{kind}: {e}"))
}

fn event(generation: &str, i: usize) -> Bytes {
    Bytes::from(format!(r#"{{"generation":"{generation}","n":{i}}}"#))
}

/// The destination's records, by key (none while the destination has no table or bucket yet).
async fn stored(target: &CrashTarget) -> BTreeMap<String, Bytes> {
    target.records.read_all().await.unwrap_or_default().into_iter().collect()
}

/// Keys of the records of `generation`.
fn keys_of(records: &BTreeMap<String, Bytes>, generation: &str) -> Vec<String> {
    let mark = format!(r#""generation":"{generation}""#);
    records.iter().filter(|(_, p)| String::from_utf8_lossy(p).contains(&mark)).map(|(k, _)| k.clone()).collect()
}

fn config(e: &Env, target: &CrashTarget, extra: serde_json::Value) -> std::path::PathBuf {
    let mut extra = extra;
    if let Some(map) = extra.as_object_mut() {
        map.entry("stream_guard").or_insert_with(|| json!({"recheck_seconds": 1}));
        map.entry("metrics").or_insert_with(|| json!({"lag_poll_interval_seconds": 1}));
    }
    e.write_config_json(target.sink_section.clone(), extra)
}

fn envs(target: &CrashTarget) -> Vec<(&str, String)> {
    target.env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect()
}

/// Stores 10 old events and stops the sink.
async fn old_events(e: &Env, target: &CrashTarget, config: &std::path::Path) {
    e.publish_range(0, 10, |i| event("old", i)).await;
    let run = Sink::start(config, e.dir.path(), &envs(target));
    let done = wait_until(Duration::from_secs(60), || async {
        keys_of(&stored(target).await, "old").len() == 10 && e.settled().await
    })
    .await;
    assert!(done, "the old events: {}", run.logs());
    assert_eq!(run.terminate(), Some(0));
}

async fn recreate(e: &Env) {
    e.js.delete_stream(&e.stream).await.unwrap();
    stream_with_subjects(&e.js, &e.stream, &[&format!("{}.>", e.subject_root)]).await;
}

fn stream_identity(e: &Env, target: &CrashTarget, config: &std::path::Path, accept: Option<&str>) -> String {
    let mut args = vec!["stream-identity", config.to_str().unwrap()];
    if let Some(a) = accept {
        args.extend(["--accept", a]);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_nats-sink"))
        .args(&args)
        .current_dir(e.dir.path())
        .envs(target.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "stream-identity {accept:?}: {text}");
    text
}

/// The new events are stored, each once, under keys of the new epoch; the old ones unchanged.
async fn both_generations(e: &Env, target: &CrashTarget) {
    let records = stored(target).await;
    let old = keys_of(&records, "old");
    let new = keys_of(&records, "new");
    assert_eq!(old.len(), 10, "{old:?}");
    assert_eq!(new.len(), 10, "{new:?}");
    let first = format!("stream-sequence:{}:", e.stream);
    let epoch = format!("stream-sequence:{}.e", e.stream);
    assert!(old.iter().all(|k| k.starts_with(&first)), "{old:?}");
    assert!(new.iter().all(|k| k.starts_with(&epoch)), "{new:?}");
}

/// Stopped during the re-creation: the sink pauses, stores nothing of the new stream and
/// acknowledges nothing, until the operator decides a new epoch.
async fn stopped_then_decided(kind: &str) {
    let e = env().await;
    let target = target(kind).await;
    let config = config(&e, &target, json!({}));
    old_events(&e, &target, &config).await;
    recreate(&e).await;
    e.publish_range(0, 10, |i| event("new", i)).await;
    let run = Sink::start(&config, e.dir.path(), &envs(&target));
    assert!(
        wait_until(Duration::from_secs(30), || async { run.logs().contains("the stream changed under the consumer") })
            .await,
        "{kind}: the change is reported: {}",
        run.logs()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(keys_of(&stored(&target).await, "new").is_empty(), "{kind}: nothing written while undecided");
    assert_eq!(e.consumer_state().await.map(|(_, a)| a), Some(0), "{kind}: nothing delivered while paused");
    assert!(stream_identity(&e, &target, &config, None).contains("undecided"));
    assert!(stream_identity(&e, &target, &config, Some("new-epoch")).contains("decided new-epoch"));
    let done = wait_until(Duration::from_secs(60), || async {
        keys_of(&stored(&target).await, "new").len() == 10 && e.settled().await
    })
    .await;
    assert!(done, "{kind}: after the decision: {}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    both_generations(&e, &target).await;
}

/// Running during the re-creation, with `on_change = "new_epoch"`: the sink binds its
/// consumer again and goes on in the new epoch.
async fn running_new_epoch(kind: &str) {
    let e = env().await;
    let target = target(kind).await;
    let config = config(&e, &target, json!({"stream_guard": {"on_change": "new_epoch", "recheck_seconds": 1}}));
    old_events(&e, &target, &config).await;
    let run = Sink::start(&config, e.dir.path(), &envs(&target));
    assert!(wait_until(Duration::from_secs(30), || async { e.consumer_state().await.is_some() }).await);
    recreate(&e).await;
    e.publish_range(0, 10, |i| event("new", i)).await;
    let done = wait_until(Duration::from_secs(90), || async {
        keys_of(&stored(&target).await, "new").len() == 10 && e.settled().await
    })
    .await;
    assert!(done, "{kind}: the running sink goes on in the new epoch: {}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    both_generations(&e, &target).await;
}

/// The guard off, a DLQ on: the destination refuses each new event as `sequence_reused`, and
/// each is dead-lettered with its payload; none is acknowledged without a record.
async fn guard_off_dead_letters(kind: &str) {
    let e = env().await;
    let target = target(kind).await;
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    let config = config(
        &e,
        &target,
        json!({"stream_guard": {"identity": false}, "dead_letter": {"enabled": true, "subject": dlq_subject}}),
    );
    old_events(&e, &target, &config).await;
    recreate(&e).await;
    e.publish_range(0, 10, |i| event("new", i)).await;
    let run = Sink::start(&config, e.dir.path(), &envs(&target));
    let done = wait_until(Duration::from_secs(60), || async {
        read_stream(&e.js, &dlq_stream).await.len() == 10 && e.settled().await
    })
    .await;
    assert!(done, "{kind}: {}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    for (_, _, _, body) in read_stream(&e.js, &dlq_stream).await {
        let record: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(record["reason"], "sequence_reused", "{kind}: {record}");
    }
    let records = stored(&target).await;
    assert!(keys_of(&records, "new").is_empty(), "{kind}: the old records are kept");
    assert_eq!(keys_of(&records, "old").len(), 10);
}

#[tokio::test]
async fn file_sink_stopped_during_the_re_creation_pauses_until_a_new_epoch_is_decided() {
    stopped_then_decided("file").await;
}

#[tokio::test]
async fn file_sink_running_during_the_re_creation_goes_on_in_a_new_epoch() {
    running_new_epoch("file").await;
}

#[tokio::test]
async fn file_sink_without_the_guard_dead_letters_each_reused_sequence() {
    guard_off_dead_letters("file").await;
}

#[tokio::test]
async fn file_sink_without_the_guard_or_a_dlq_acknowledges_nothing_of_the_new_stream() {
    let e = env().await;
    let target = target("file").await;
    let config = config(&e, &target, json!({"stream_guard": {"identity": false}}));
    old_events(&e, &target, &config).await;
    recreate(&e).await;
    e.publish_range(0, 10, |i| event("new", i)).await;
    let run = Sink::start(&config, e.dir.path(), &envs(&target));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (code, log) = run.stop();
    assert_eq!(code, Some(0));
    assert!(log.contains("sequence_reused") || log.contains("used again"), "{log}");
    let stream = e.js.get_stream(&e.stream).await.unwrap();
    let info = stream.consumer_info(&e.consumer).await.unwrap();
    assert_eq!(info.ack_floor.stream_sequence, 0, "nothing of the new stream was acknowledged");
    assert!(keys_of(&stored(&target).await, "new").is_empty());
}

#[tokio::test]
async fn file_batch_mode_stopped_during_the_re_creation_pauses_until_a_new_epoch_is_decided() {
    stopped_then_decided("file-batch").await;
}

#[tokio::test]
async fn mysql_sink_stopped_during_the_re_creation_pauses_until_a_new_epoch_is_decided() {
    stopped_then_decided("mysql").await;
}

#[tokio::test]
async fn mysql_sink_running_during_the_re_creation_goes_on_in_a_new_epoch() {
    running_new_epoch("mysql").await;
}

#[tokio::test]
async fn s3_sink_stopped_during_the_re_creation_pauses_until_a_new_epoch_is_decided() {
    stopped_then_decided("s3").await;
}

#[tokio::test]
async fn s3_sink_without_the_guard_dead_letters_each_reused_sequence() {
    guard_off_dead_letters("s3").await;
}

#[tokio::test]
async fn s3_batch_mode_running_during_the_re_creation_goes_on_in_a_new_epoch() {
    running_new_epoch("s3-batch").await;
}
