//! `nats-sink redrive` end to end, through the binary against a private JetStream server:
//! messages a destination refused are dead-lettered by `run`; the destination is fixed; the
//! redrive brings back exactly those messages, each stored once, every record marked done in
//! the redrive bucket, receipts written and `reconcile` clean afterwards. Also: a dry run
//! writes and marks nothing; three kill -9 during a redrive and the same command again store
//! each message once and leave nothing behind, at an endpoint that fingerprints each key's
//! body and loses every tenth key's first answer (no second body for any key); a message that keeps failing is dead-lettered
//! again with its redrive count until `--max-redrives`, then left for a person; a fan-out's
//! failed target is redriven alone.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use futures::StreamExt;
use sinks_testkit::{HttpTestServer, read_stream, stream_with_subjects, unique, wait_until};
use support::{Env, Sink, dlq_stream, env, json, nats_sink, records, sequences, text};

/// The file-sink record path of stream sequence `seq` (subjects `k{(seq-1)%3}`).
fn record_path(e: &Env, seq: u64) -> PathBuf {
    let subject = format!("{}.orders.k{}", e.subject_root, (seq - 1) % 3);
    e.out().join(&subject).join(format!("{}-{seq:020}.json", e.stream))
}

/// Puts a directory where the file of `seq` goes: the file sink refuses that message for
/// good (the "broken destination").
fn block(e: &Env, seq: u64) {
    std::fs::create_dir_all(record_path(e, seq)).unwrap();
}

/// Removes the directory again (the "fix").
fn unblock(e: &Env, seq: u64) {
    std::fs::remove_dir_all(record_path(e, seq)).unwrap();
}

/// `nats-sink redrive CONFIG ARGS…` to completion (off the test's runtime, which serves the
/// HTTP endpoints meanwhile).
async fn redrive(e: &Env, config: &Path, bucket: &str, args: &[&str]) -> Output {
    let mut all: Vec<String> =
        vec!["redrive".into(), config.to_str().unwrap().into(), "--bucket".into(), bucket.into()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let cwd = e.dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = all.iter().map(String::as_str).collect();
        nats_sink(&args, &cwd)
    })
    .await
    .unwrap()
}

/// The DLQ records of the stream, parsed, with their redrive-count header.
async fn dead_letters(e: &Env, dlq: &str) -> Vec<(serde_json::Value, Option<String>)> {
    read_stream(&e.js, dlq)
        .await
        .into_iter()
        .map(|(_, _, headers, body)| {
            let count = headers.get("Nats-Sinks-Redrive-Count").map(|v| v.as_str().to_owned());
            (serde_json::from_slice(&body).unwrap(), count)
        })
        .collect()
}

/// The done markers of `bucket`: DLQ sequence → how it ended (empty when no bucket).
async fn marks(e: &Env, bucket: &str) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    let Ok(kv) = e.js.get_key_value(bucket).await else { return out };
    let Ok(mut keys) = kv.keys().await else { return out };
    while let Some(Ok(key)) = keys.next().await {
        let seq: u64 = key.rsplit('.').next().unwrap().parse().unwrap();
        let value = kv.get(&key).await.unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&value).unwrap();
        out.insert(seq, v["end"].as_str().unwrap().to_owned());
    }
    out
}

/// Runs the sink until `stored` files exist and the consumer settled everything, then stops.
async fn run_until(e: &Env, config: &Path, stored: usize) {
    let sink = Sink::start(config, e.dir.path(), &[]);
    let done =
        wait_until(Duration::from_secs(60), || async { records(&e.out()).len() == stored && e.settled().await }).await;
    assert!(done, "{}", sink.logs());
    assert_eq!(sink.terminate(), Some(0));
}

/// A file-sink config with a DLQ (and a ledger when `ledger` names its subject).
fn file_config(e: &Env, dlq_subject: &str, ledger: Option<&str>, batch_size: usize) -> PathBuf {
    let mut extra = serde_json::json!({
        "dead_letter": {"enabled": true, "subject": dlq_subject},
        "delivery": {"batch_size": batch_size},
    });
    if let Some(subject) = ledger {
        extra["ledger"] = serde_json::json!({"enabled": true, "subject": subject});
    }
    e.write_config_json(serde_json::json!({"type": "file", "directory": e.out()}), extra)
}

/// The closing table's count for `row`.
fn row(out: &Output, row: &str) -> u64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.starts_with(row) && l[row.len()..].trim().parse::<u64>().is_ok());
    let line = line.unwrap_or_else(|| panic!("no `{row}` row:\n{}", text(out)));
    line[row.len()..].trim().parse().unwrap()
}

#[tokio::test]
async fn file_sink_dead_letters_come_back_exactly_once_after_a_dry_run_that_changes_nothing() {
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let ledger = unique("LEDGER");
    let ledger_subject = format!("{}.receipts", ledger.to_lowercase());
    stream_with_subjects(&e.js, &ledger, &[&ledger_subject]).await;
    let bad = [4u64, 9, 10, 23];
    for seq in bad {
        block(&e, seq);
    }
    e.publish(30, json).await;
    let config = file_config(&e, &dlq_subject, Some(&ledger_subject), 10);
    run_until(&e, &config, 30 - bad.len()).await;
    let letters = dead_letters(&e, &dlq).await;
    let dead: Vec<u64> = letters.iter().map(|(r, _)| r["stream_sequence"].as_u64().unwrap()).collect();
    assert_eq!(dead, bad, "the refused messages, and only they, are dead-lettered: {letters:?}");
    let bucket = unique("redrive");

    // The dry run, before the fix: it says what it would do, writes and marks nothing.
    let dry = redrive(&e, &config, &bucket, &["--dry-run"]).await;
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry));
    let said = String::from_utf8_lossy(&dry.stdout);
    assert!(said.contains("would redrive 4, left for a person 0"), "{said}");
    assert_eq!(said.matches("original in stream: would be redriven").count(), 4, "{said}");
    assert!(said.contains("by error type:") && said.contains("by subject:"), "{said}");
    assert!(said.contains(&format!("{}.orders.k0", e.subject_root)), "counts by subject: {said}");
    assert!(e.js.get_key_value(&bucket).await.is_err(), "the dry run made no bucket");
    for seq in bad {
        assert!(record_path(&e, seq).is_dir(), "the dry run wrote nothing");
    }
    assert_eq!(dead_letters(&e, &dlq).await.len(), 4, "and dead-lettered nothing");

    // The fix, then the redrive.
    for seq in bad {
        unblock(&e, seq);
    }
    let out = redrive(&e, &config, &bucket, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        (row(&out, "redriven"), row(&out, "duplicates"), row(&out, "failed again")),
        (4, 0, 0),
        "{}",
        text(&out)
    );
    assert_eq!((row(&out, "gone"), row(&out, "left for a person"), row(&out, "not done")), (0, 0, 0));
    let seen = sequences(&e.out());
    assert_eq!(seen.len(), 30, "every message is in the destination");
    assert!(seen.values().all(|n| *n == 1), "each exactly once: {seen:?}");
    let marked = marks(&e, &bucket).await;
    assert_eq!(marked.len(), 4, "every record is marked done: {marked:?}");
    assert!(marked.values().all(|end| end == "redriven"), "{marked:?}");
    assert_eq!(dead_letters(&e, &dlq).await.len(), 4, "the DLQ stream is left as it was");

    // Receipts for the redriven messages, and reconcile shows them stored.
    let receipts: Vec<serde_json::Value> =
        read_stream(&e.js, &ledger).await.iter().map(|(_, _, _, b)| serde_json::from_slice(b).unwrap()).collect();
    for seq in bad {
        assert!(
            receipts.iter().any(|r| r["stream_sequence"] == seq && r["outcome"] == "committed"),
            "a committed receipt for {seq}"
        );
    }
    let reconciled = nats_sink(&["reconcile", config.to_str().unwrap(), "--format", "json"], e.dir.path());
    let doc: serde_json::Value = serde_json::from_slice(&reconciled.stdout).unwrap();
    assert_eq!(doc["summary"]["counts"]["present_equal"], 30, "{doc}");

    // The same command again has nothing left to do.
    let again = redrive(&e, &config, &bucket, &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert_eq!(row(&again, "redriven") + row(&again, "duplicates"), 0, "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stdout).contains("4 selected, 4 of them done before"), "{}", text(&again));
    assert_eq!(sequences(&e.out()).values().sum::<usize>(), 30);
}

#[tokio::test]
async fn three_kill_9_during_a_redrive_then_the_same_command_store_each_message_once() {
    const TOTAL: usize = 400;
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let endpoint = HttpTestServer::start().await.unwrap();
    endpoint.set_request_log(false);
    endpoint.set_reject_marker(Some(b"refuse-me"));
    publish_marked(&e, TOTAL, |_| true).await;
    // One message per write, each answered after 5 ms: the redrive takes seconds, long
    // enough to be killed in the middle three times.
    let sink = serde_json::json!({"type": "http", "url": endpoint.url(), "allow_http_for_local_testing": true});
    let extra =
        serde_json::json!({"dead_letter": {"enabled": true, "subject": dlq_subject}, "delivery": {"batch_size": 1}});
    let config = e.write_config_json(sink, extra);
    let run = Sink::start(&config, e.dir.path(), &[]);
    let all_dead = wait_until(Duration::from_secs(120), || async {
        e.settled().await && e.js.get_stream(&dlq).await.unwrap().info().await.unwrap().state.messages == TOTAL as u64
    })
    .await;
    assert!(all_dead, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    endpoint.set_reject_marker(None);
    endpoint.set_delay(Duration::from_millis(5));
    // As strict as the standards allow from here on: each key's first body is its fingerprint
    // (another body for it would be 422), a repeat of it gets the first answer again, and
    // every 10th key's first answer is lost after the store.
    endpoint.set_strict(sinks_testkit::Strict {
        fingerprint_bodies: true,
        replay_first_answer: true,
        lose_answer_every: Some(10),
        ..sinks_testkit::Strict::default()
    });
    let bucket = unique("redrive");
    let mut killed_at = Vec::new();
    for quarter in 1..=3 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nats-sink"))
            .args(["redrive", config.to_str().unwrap(), "--bucket", &bucket])
            .current_dir(e.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let reached =
            wait_until(Duration::from_secs(120), || async { mark_count(&e, &bucket).await >= TOTAL * quarter / 4 })
                .await;
        assert!(reached, "no progress to {quarter}/4");
        assert!(child.try_wait().unwrap().is_none(), "the redrive was still running when killed");
        child.kill().unwrap();
        let _ = child.wait();
        killed_at.push((mark_count(&e, &bucket).await, endpoint.successes().len()));
    }
    assert!(killed_at.iter().all(|(m, _)| *m < TOTAL), "killed before the end each time: {killed_at:?}");
    let out = redrive(&e, &config, &bucket, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    eprintln!("killed at (marks, stored) {killed_at:?}; the last run:\n{}", String::from_utf8_lossy(&out.stdout));
    let successes = endpoint.successes();
    assert_eq!(successes.len(), TOTAL, "every message is in the destination");
    assert!(successes.values().all(|n| *n == 1), "each committed exactly once: {successes:?}");
    let answers = endpoint.answers();
    assert_eq!(answers.get(&422), None, "one body per key across the kills: {answers:?}");
    assert!(answers.get(&0).copied().unwrap_or(0) > 0, "answers were lost: {answers:?}");
    let marked = marks(&e, &bucket).await;
    assert_eq!(marked.len(), TOTAL, "every record is marked done");
    assert!(marked.values().all(|end| end == "redriven" || end == "duplicate"), "{marked:?}");
    assert_eq!(dead_letters(&e, &dlq).await.len(), TOTAL, "no new dead letter");
    let again = redrive(&e, &config, &bucket, &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert_eq!(row(&again, "redriven") + row(&again, "duplicates") + row(&again, "not done"), 0, "{}", text(&again));
}

/// How many records `bucket` marks done (keys only).
async fn mark_count(e: &Env, bucket: &str) -> usize {
    let Ok(kv) = e.js.get_key_value(bucket).await else { return 0 };
    let Ok(keys) = kv.keys().await else { return 0 };
    keys.filter(|k| std::future::ready(k.is_ok())).count().await
}

#[tokio::test]
async fn a_message_that_keeps_failing_is_dead_lettered_again_then_left_for_a_person() {
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    block(&e, 5);
    e.publish(8, json).await;
    let config = file_config(&e, &dlq_subject, None, 10);
    run_until(&e, &config, 7).await;
    let bucket = unique("redrive");
    // The destination stays broken for message 5.
    for (run, count) in [(1, "1"), (2, "2")] {
        let out = redrive(&e, &config, &bucket, &["--max-redrives", "2"]).await;
        assert_eq!(out.status.code(), Some(5), "run {run}: a dead letter remains: {}", text(&out));
        assert_eq!((row(&out, "failed again"), row(&out, "redriven")), (1, 0), "run {run}: {}", text(&out));
        let letters = dead_letters(&e, &dlq).await;
        assert_eq!(letters.len(), run + 1, "a new dead letter per failed redrive");
        let (last, header) = letters.last().unwrap();
        assert_eq!(last["stream_sequence"], 5);
        assert_eq!(last["redrive_count"], run, "{last}");
        assert_eq!(header.as_deref(), Some(count), "the redrive count header");
    }
    for _ in 0..2 {
        let out = redrive(&e, &config, &bucket, &["--max-redrives", "2"]).await;
        assert_eq!(out.status.code(), Some(5), "left for a person: {}", text(&out));
        assert_eq!((row(&out, "failed again"), row(&out, "left for a person")), (0, 1), "{}", text(&out));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("redriven 2 times already (--max-redrives 2)"), "with the reason: {said}");
        assert!(said.contains("stream sequence 5"), "{said}");
        assert_eq!(dead_letters(&e, &dlq).await.len(), 3, "no further dead letter");
    }
    assert_eq!(marks(&e, &bucket).await.values().filter(|e| *e == "dead_lettered_again").count(), 2);
    // Fixed at last: the one record left is redriven.
    unblock(&e, 5);
    let out = redrive(&e, &config, &bucket, &["--max-redrives", "3"]).await;
    assert_eq!(out.status.code(), Some(0), "nothing remains: {}", text(&out));
    assert_eq!(row(&out, "redriven"), 1, "{}", text(&out));
    assert_eq!(sequences(&e.out()).get(&5), Some(&1));
}

/// `n` messages (ids `msg-{i}`, subjects `k{i % 3}`); those `poison` picks carry the text
/// `"refuse-me"` that an endpoint refuses.
async fn publish_marked(e: &Env, n: usize, poison: impl Fn(usize) -> bool) {
    e.publish(n, |i| {
        let tag = if poison(i) { "refuse-me" } else { "fine" };
        bytes::Bytes::from(format!(r#"{{"order":{i},"tag":"{tag}"}}"#))
    })
    .await;
}

#[tokio::test]
async fn http_sink_dead_letters_come_back_exactly_once_when_the_endpoint_accepts_them_again() {
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let endpoint = HttpTestServer::start().await.unwrap();
    endpoint.set_reject_marker(Some(b"refuse-me"));
    let poison = |i: usize| i % 7 == 3;
    publish_marked(&e, 50, poison).await;
    let refused = (0..50).filter(|i| poison(*i)).count();
    let sink = serde_json::json!({"type": "http", "url": endpoint.url(), "allow_http_for_local_testing": true,
        "inquiry_url": endpoint.inquiry_url(), "inquiry_fingerprint_header": sinks_testkit::FINGERPRINT_HEADER});
    let config =
        e.write_config_json(sink, serde_json::json!({"dead_letter": {"enabled": true, "subject": dlq_subject}}));
    let run = Sink::start(&config, e.dir.path(), &[]);
    let settled = wait_until(Duration::from_secs(60), || async {
        e.settled().await && endpoint.successes().len() == 50 - refused
    })
    .await;
    assert!(settled, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    assert_eq!(dead_letters(&e, &dlq).await.len(), refused, "the refused messages are dead-lettered");
    // The endpoint accepts them now.
    endpoint.set_reject_marker(None);
    let bucket = unique("redrive");
    let out = redrive(&e, &config, &bucket, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(row(&out, "redriven"), refused as u64, "{}", text(&out));
    let successes = endpoint.successes();
    assert_eq!(successes.len(), 50, "every message reached the endpoint");
    assert!(successes.values().all(|n| *n == 1), "each committed exactly once: {successes:?}");
    assert_eq!(marks(&e, &bucket).await.len(), refused, "every record marked done");
    // Reconcile asks the endpoint (inquiry_url) and finds every message stored.
    let cwd = e.dir.path().to_path_buf();
    let path = config.to_str().unwrap().to_owned();
    let reconciled =
        tokio::task::spawn_blocking(move || nats_sink(&["reconcile", &path, "--format", "json"], &cwd)).await.unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&reconciled.stdout).unwrap();
    assert_eq!(doc["summary"]["counts"]["present_equal"], 50, "{doc}");
    // Marks removed by hand (a bucket lost, say): the same records again are duplicates.
    let other = unique("redrive");
    let out = redrive(&e, &config, &other, &[]).await;
    assert_eq!((row(&out, "duplicates"), row(&out, "redriven")), (refused as u64, 0), "{}", text(&out));
    assert!(endpoint.successes().values().all(|n| *n == 1), "still once each");
}

#[tokio::test]
async fn a_fanout_target_that_refused_is_redriven_alone() {
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let hook = HttpTestServer::start().await.unwrap();
    hook.set_reject_marker(Some(b"refuse-me"));
    let poison = |i: usize| i % 5 == 2;
    publish_marked(&e, 40, poison).await;
    let refused: Vec<u64> = (0..40).filter(|i| poison(*i)).map(|i| i as u64 + 1).collect();
    let files = e.dir.path().join("files");
    let extra = serde_json::json!({
        "dead_letter": {"enabled": true, "subject": dlq_subject},
        "sinks": {
            "files": {"type": "file", "directory": files},
            "hook": {"type": "http", "url": hook.url(), "allow_http_for_local_testing": true},
        },
        "routing": {"enabled": true, "routes": [{"name": "everything", "match": {"subject": ">"}, "targets": ["files", "hook"]}]},
    });
    let config = e.write_config_json(serde_json::json!({"type": "fanout"}), extra);
    let run = Sink::start(&config, e.dir.path(), &[]);
    let settled =
        wait_until(Duration::from_secs(60), || async { e.settled().await && records(&files).len() == 40 }).await;
    assert!(settled, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let letters = dead_letters(&e, &dlq).await;
    assert_eq!(letters.len(), refused.len(), "{letters:?}");
    assert!(
        letters.iter().all(|(r, _)| r["target"] == "hook"),
        "each record names the target that refused: {letters:?}"
    );
    // The file target stored every message. Remove one refused message's file: a redrive
    // that wrote to the file target too would put it back.
    let probe = refused[0];
    let probe_file =
        walk(&files).into_iter().find(|p| p.to_string_lossy().ends_with(&format!("{probe:020}.json"))).unwrap();
    std::fs::remove_file(&probe_file).unwrap();
    hook.set_reject_marker(None);
    let bucket = unique("redrive");
    let out = redrive(&e, &config, &bucket, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(row(&out, "redriven"), refused.len() as u64, "{}", text(&out));
    let successes = hook.successes();
    assert_eq!(successes.len(), 40, "the refusing target has every message now");
    assert!(successes.values().all(|n| *n == 1), "{successes:?}");
    assert!(!probe_file.exists(), "the target that had stored the messages was not written again");
    assert_eq!(records(&files).len(), 39);
    assert_eq!(marks(&e, &bucket).await.len(), refused.len());
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() { stack.push(p) } else { out.push(p) }
        }
    }
    out
}

#[tokio::test]
async fn mysql_sink_dead_letters_come_back_exactly_once_after_the_column_is_widened() {
    use mysql_async::prelude::Queryable;
    let test = "mysql_sink_dead_letters_come_back_exactly_once_after_the_column_is_widened";
    let server = sinks_testkit::shared_mysql()
        .map(|a| sink_mysql::certify::TestServer::new(a.host, a.port))
        .unwrap_or_else(|reason| sinks_testkit::cannot_run(test, reason));
    let mut db = server.admin().await.unwrap_or_else(|reason| sinks_testkit::cannot_run(test, reason));
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let table = sink_mysql::certify::unique_table("redrive");
    let sink = serde_json::json!({"type": "mysql", "host": server.host, "port": server.port, "database": "test",
        "user": "root", "table": table, "auto_create": true});
    let config = e
        .write_config_json(sink.clone(), serde_json::json!({"dead_letter": {"enabled": true, "subject": dlq_subject}}));
    // A PRIORITY column too narrow for some messages' priority: the server refuses those rows.
    let section = sinks_runtime::config::SinkSection(sink.as_object().unwrap().clone());
    let ddl = sink_mysql::MySqlSink::new(sink_mysql::MySqlSinkConfig::from_section(&section).unwrap()).unwrap().ddl();
    db.query_drop(&ddl[0]).await.unwrap();
    db.query_drop(format!("ALTER TABLE `{table}` MODIFY `PRIORITY` varchar(8)")).await.unwrap();
    let long = |i: usize| i % 6 == 1;
    let msgs = (0..60)
        .map(|i| {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("msg-{i}").as_str());
            h.insert("Nats-Sinks-Priority", if long(i) { "much-too-long-for-the-column" } else { "high" });
            (format!("{}.orders", e.subject_root), h, json(i))
        })
        .collect();
    sinks_testkit::js_publish_all(&e.js, msgs).await;
    let refused = (0..60).filter(|i| long(*i)).count();
    let rows = || async { server.read_table(&table).await.unwrap_or_default() };
    let run = Sink::start(&config, e.dir.path(), &[]);
    let done =
        wait_until(Duration::from_secs(60), || async { rows().await.len() == 60 - refused && e.settled().await }).await;
    assert!(done, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let letters = dead_letters(&e, &dlq).await;
    assert_eq!(letters.len(), refused);
    assert!(letters.iter().all(|(r, _)| r["error_type"] == "DataError"), "{letters:?}");
    // The fix: the column is widened.
    db.query_drop(format!("ALTER TABLE `{table}` MODIFY `PRIORITY` varchar(64)")).await.unwrap();
    let bucket = unique("redrive");
    let out = redrive(&e, &config, &bucket, &["--error-type", "DataError"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(row(&out, "redriven"), refused as u64, "{}", text(&out));
    let mut per: BTreeMap<String, usize> = BTreeMap::new();
    for (key, _) in rows().await {
        *per.entry(key).or_insert(0) += 1;
    }
    assert_eq!(per.len(), 60, "every message has its row");
    assert!(per.values().all(|n| *n == 1), "each exactly once: {per:?}");
    let long_rows: u64 = db
        .query_first(format!("SELECT COUNT(*) FROM `{table}` WHERE PRIORITY = 'much-too-long-for-the-column'"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(long_rows, refused as u64, "the redriven rows are the refused messages, as published");
    assert_eq!(marks(&e, &bucket).await.len(), refused, "every record marked done");
    let _ = db.query_drop(format!("DROP TABLE IF EXISTS `{table}`")).await;
}

#[tokio::test]
async fn a_batch_mode_sink_commits_its_objects_before_the_records_are_marked() {
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    let poison = |i: usize| i % 6 == 4;
    e.publish(36, |i| if poison(i) { bytes::Bytes::from(format!("plain text {i}")) } else { json(i) }).await;
    let refused = (0..36).filter(|i| poison(*i)).count();
    let batch = serde_json::json!({"format": "ndjson", "max_messages": 100, "max_age_ms": 300});
    let extra = serde_json::json!({"dead_letter": {"enabled": true, "subject": dlq_subject}});
    let strict = serde_json::json!({"type": "file", "directory": e.out(), "payload_mode": "json_only", "mode": "batch", "batch": batch});
    let config = e.write_config_json_as("strict.json", strict, extra.clone());
    let rows = || -> BTreeMap<u64, usize> {
        let mut per = BTreeMap::new();
        for (path, format, compression) in sink_file::certify::batch_objects(&e.out()).unwrap() {
            let file = std::fs::File::open(&path).unwrap();
            sinks_toolkit::batch::encode::read_rows(file, format, compression, false, |r| {
                *per.entry(r.stream_sequence).or_insert(0) += 1;
            })
            .unwrap();
        }
        per
    };
    let run = Sink::start(&config, e.dir.path(), &[]);
    let done =
        wait_until(Duration::from_secs(60), || async { e.settled().await && rows().len() == 36 - refused }).await;
    assert!(done, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    assert_eq!(dead_letters(&e, &dlq).await.len(), refused);
    // The fix is a schema change: text is stored wrapped from now on.
    let lenient = serde_json::json!({"type": "file", "directory": e.out(), "payload_mode": "json_or_envelope", "mode": "batch", "batch": batch});
    let fixed = e.write_config_json_as("lenient.json", lenient, extra);
    let bucket = unique("redrive");
    let out = redrive(&e, &fixed, &bucket, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(row(&out, "redriven"), refused as u64, "{}", text(&out));
    let per = rows();
    assert_eq!(per.len(), 36, "every message is in a committed object");
    assert!(per.values().all(|n| *n == 1), "each exactly once: {per:?}");
    assert_eq!(marks(&e, &bucket).await.len(), refused);
}

#[tokio::test]
async fn an_original_the_stream_lost_is_taken_from_its_record_or_reported_gone() {
    const KEY_ENV: &str = "E2E_REDRIVE_PAYLOAD_KEY";
    let key = ("E2E_REDRIVE_PAYLOAD_KEY", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=".to_owned());
    let e = env().await;
    let (dlq, dlq_subject) = dlq_stream(&e).await;
    for seq in [2, 5] {
        block(&e, seq);
    }
    e.publish(6, json).await;
    let mut extra = serde_json::json!({"dead_letter": {"enabled": true, "subject": dlq_subject}});
    extra["encryption"] = serde_json::json!({"enabled": true, "key_id": "k1", "key_b64_env": KEY_ENV});
    let config = e.write_config_json(serde_json::json!({"type": "file", "directory": e.out()}), extra);
    let run = Sink::start(&config, e.dir.path(), std::slice::from_ref(&key));
    assert!(wait_until(Duration::from_secs(60), || async { e.settled().await && records(&e.out()).len() == 4 }).await);
    assert_eq!(run.terminate(), Some(0));
    let letters = dead_letters(&e, &dlq).await;
    let sealed: BTreeMap<u64, serde_json::Value> = letters
        .iter()
        .map(|(r, _)| {
            let b64 = r["payload_base64"].as_str().unwrap();
            let body = base64_decode(b64);
            (r["stream_sequence"].as_u64().unwrap(), serde_json::from_slice(&body).unwrap())
        })
        .collect();
    assert!(sealed.values().all(|p| p.get("_nats_sinks_encryption").is_some()), "records hold ciphertext: {sealed:?}");
    // The stream is deleted and created again with other messages under the same sequences.
    e.js.delete_stream(&e.stream).await.unwrap();
    stream_with_subjects(&e.js, &e.stream, &[&format!("{}.>", e.subject_root)]).await;
    e.publish_range(100, 106, json).await;
    for seq in [2, 5] {
        unblock(&e, seq);
    }
    let envs = [(key.0, key.1.as_str())];
    let bucket = unique("redrive");
    let dry = redrive_with(&e, &config, &bucket, &["--dry-run"], &envs).await;
    let said = String::from_utf8_lossy(&dry.stdout);
    assert_eq!(
        said.matches("original from record: would be redriven").count(),
        2,
        "another message holds those sequences now: {said}"
    );
    let out = redrive_with(&e, &config, &bucket, &[], &envs).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(row(&out, "redriven"), 2, "{}", text(&out));
    for (seq, envelope) in &sealed {
        let stored: serde_json::Value = serde_json::from_slice(&std::fs::read(record_path(&e, *seq)).unwrap()).unwrap();
        assert_eq!(&stored["payload"], envelope, "the record's ciphertext is stored as it was, never decrypted");
    }
    let all = text(&out) + &text(&dry);
    for i in [1, 4] {
        assert!(!all.contains(&format!("\"order\":{i},")), "no plaintext in the redrive's output or logs");
    }
    assert!(!all.contains("ünïcode"), "no plaintext in the redrive's output or logs");

    // Without a payload in the record, an original the stream lost is gone.
    let g = env().await;
    let (_, g_dlq_subject) = dlq_stream(&g).await;
    for seq in [3, 6] {
        block(&g, seq);
    }
    g.publish(6, json).await;
    let extra =
        serde_json::json!({"dead_letter": {"enabled": true, "subject": g_dlq_subject, "include_payload": false}});
    let config = g.write_config_json(serde_json::json!({"type": "file", "directory": g.out()}), extra);
    run_until(&g, &config, 4).await;
    g.js.get_stream(&g.stream).await.unwrap().delete_message(3).await.unwrap();
    for seq in [3, 6] {
        unblock(&g, seq);
    }
    let bucket = unique("redrive");
    let out = redrive(&g, &config, &bucket, &[]).await;
    assert_eq!(out.status.code(), Some(5), "a gone original is a dead letter that remains: {}", text(&out));
    assert_eq!((row(&out, "redriven"), row(&out, "gone")), (1, 1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("gone: dead letter 1 (stream sequence 3"), "{}", text(&out));
    assert_eq!(sequences(&g.out()).len(), 5);
    assert_eq!(marks(&g, &bucket).await.len(), 1, "a gone record is not marked: it stays visible");
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).unwrap()
}

/// [`redrive`] with `envs` added to the environment.
async fn redrive_with(e: &Env, config: &Path, bucket: &str, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut all: Vec<String> =
        vec!["redrive".into(), config.to_str().unwrap().into(), "--bucket".into(), bucket.into()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let envs: Vec<(String, String)> = envs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let cwd = e.dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = all.iter().map(String::as_str).collect();
        let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        support::nats_sink_with_env(&args, &cwd, &envs)
    })
    .await
    .unwrap()
}
