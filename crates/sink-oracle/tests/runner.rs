//! The Oracle sink under the real runner, end to end against a private JetStream server
//! (sinks-testkit), with the scripted driver seam standing in for the database (no Oracle
//! server can be had here; see docs/oracle-sink.md for what has run live):
//! - messages flow from the stream into the table, each committed before its ack;
//! - a row the database rejects (ORA-02290, at its batch-error offset) is dead-lettered
//!   alone while its batch-mates commit;
//! - a second consumer replaying the stream into the same table gets every row reported as
//!   a duplicate (and the rejected row dead-lettered again), nothing written twice;
//! - a database connection lost at commit (ORA-03113) is a temporary failure: the batch is
//!   NAKed and redelivered, and every message ends up committed once;
//! - the runner aborted mid-stream (its task dropped at an await point, which is not a
//!   `kill -9`: the scripted database lives in this process) and restarted loses nothing.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use sink_oracle::OracleSink;
use sink_oracle::certify::{ScriptedHarness, unique_table};
use sink_oracle::driver::scripted::{Fault, FaultPoint, RowRule, ScriptedDriver};
use sink_oracle::driver::{DbError, DriverError};
use sinks_contract::Sink;
use sinks_runtime::{Config, RunError, RunStats};
use sinks_testkit::{NatsServer, js_publish_all, read_stream, stream_with_subjects, unique, wait_until};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

struct Setup {
    server: NatsServer,
    stream: String,
    subject: String,
    table: String,
}

async fn setup() -> Setup {
    let server = NatsServer::start();
    let stream = unique("ORA");
    let subject = format!("{}.>", stream.to_lowercase());
    stream_with_subjects(&server.js().await, &stream, &[&subject]).await;
    Setup { server, stream, subject, table: unique_table("run") }
}

impl Setup {
    fn config(&self, consumer: &str, extra: serde_json::Value) -> Config {
        let sink = ScriptedHarness::config(&self.table, json!({})).unwrap();
        let mut sink = serde_json::to_value(sink).unwrap();
        sink["type"] = "oracle".into();
        let mut value = json!({
            "nats": {"url": self.server.url(), "stream": self.stream, "consumer": consumer, "subject": self.subject},
            "delivery": {"batch_size": 50, "batch_timeout_ms": 200, "retry_backoff_ms": 50, "retry_backoff_max_ms": 200,
                         "max_in_flight_batches": 2},
            "sink": sink,
        });
        if let (Some(base), serde_json::Value::Object(e)) = (value.as_object_mut(), extra) {
            base.extend(e);
        }
        Config::from_value(value).unwrap()
    }

    async fn publish(&self, n: usize, payload: impl Fn(usize) -> String) {
        let subject = |i: usize| format!("{}.k{}", self.stream.to_lowercase(), i % 5);
        let msgs = (0..n).map(|i| (subject(i), Default::default(), Bytes::from(payload(i)))).collect();
        js_publish_all(&self.server.js().await, msgs).await;
    }

    async fn settled(&self, consumer: &str) -> bool {
        let stream = self.server.js().await.get_stream(&self.stream).await.unwrap();
        match stream.consumer_info(consumer).await {
            Ok(info) => sinks_testkit::consumer_settled(&info),
            Err(_) => false,
        }
    }

    /// `(stream sequence, payload)` of the committed rows, by sequence.
    fn rows(&self, d: &ScriptedDriver) -> Vec<(u64, String)> {
        let mut rows: Vec<(u64, String)> = d
            .committed(&self.table)
            .into_iter()
            .map(|r| (r["STREAM_SEQUENCE"].clone().unwrap().parse().unwrap(), r["PAYLOAD_JSON"].clone().unwrap()))
            .collect();
        rows.sort();
        rows
    }
}

fn payload(i: usize) -> String {
    if i == 57 { r#"{"n":57,"poison":true}"#.to_owned() } else { format!(r#"{{"n":{i}}}"#) }
}

struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<Arc<RunStats>, RunError>>,
}

fn start(config: Config, sink: Arc<dyn Sink>) -> Running {
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(sinks_runtime::run(config, sink, async move {
        let _ = rx.await;
    }));
    Running { stop, task }
}

impl Running {
    async fn stop(self) -> Arc<RunStats> {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(30), self.task).await.unwrap().unwrap().unwrap()
    }
}

/// A sink over `driver` (the same scripted database across runs).
fn sink_over(s: &Setup, driver: &ScriptedDriver) -> Arc<dyn Sink> {
    let config = ScriptedHarness::config(&s.table, json!({})).unwrap();
    Arc::new(OracleSink::with_driver(config, Arc::new(driver.clone())).unwrap())
}

fn check_violated() -> RowRule {
    RowRule {
        table: None,
        column: "PAYLOAD_JSON".into(),
        longer_than: None,
        contains: Some("\"poison\"".into()),
        code: 2290,
        message: "ORA-02290: check constraint (APP.NO_POISON) violated".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_flow_a_rejected_row_is_dead_lettered_alone_and_a_replay_is_all_duplicates() {
    let s = setup().await;
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&s.server.js().await, &dlq_stream, &[&dlq_subject]).await;
    s.publish(200, payload).await;
    let driver = ScriptedDriver::new();
    driver.reject_rows(check_violated());
    let dlq = json!({"dead_letter": {"enabled": true, "subject": dlq_subject}});

    let first = start(s.config("first", dlq.clone()), sink_over(&s, &driver));
    assert!(wait_until(Duration::from_secs(60), || async { s.settled("first").await }).await);
    let stats = first.stop().await;
    let rows = s.rows(&driver);
    assert_eq!(rows.len(), 199, "every row but the rejected one is committed");
    let expected: Vec<(u64, String)> = (0..200).filter(|i| *i != 57).map(|i| (i as u64 + 1, payload(i))).collect();
    assert_eq!(rows, expected);
    assert_eq!(stats.acked.load(Ordering::Relaxed), 200);
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 1);
    assert_eq!(stats.duplicates.load(Ordering::Relaxed), 0);
    let records = read_stream(&s.server.js().await, &dlq_stream).await;
    assert_eq!(records.len(), 1, "only the rejected message is dead-lettered");
    let record: serde_json::Value = serde_json::from_slice(&records[0].3).unwrap();
    assert_eq!(record["stream_sequence"], 58);
    assert_eq!(record["error_type"], "DataError");
    assert!(record["error"].as_str().unwrap_or_default().contains("ORA-02290"), "{record}");
    // Each batch was one array statement and one commit (no per-row round trips).
    let arrays = driver.recorded().iter().filter(|r| r.call == "array").count();
    let commits = driver.recorded().iter().filter(|r| r.call == "commit").count();
    assert!(arrays >= 4 && arrays <= commits + 1, "arrays {arrays}, commits {commits}");

    // A second consumer replays the whole stream into the same table.
    let replay = start(s.config("replay", dlq), sink_over(&s, &driver));
    assert!(wait_until(Duration::from_secs(60), || async { s.settled("replay").await }).await);
    let stats = replay.stop().await;
    assert_eq!(stats.duplicates.load(Ordering::Relaxed), 199, "every stored row is reported as a duplicate");
    assert_eq!(stats.conflicts.load(Ordering::Relaxed), 0);
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 1);
    assert_eq!(s.rows(&driver), expected, "nothing is written twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_at_commit_is_retried_and_nothing_is_lost() {
    let s = setup().await;
    s.publish(150, |i| format!(r#"{{"n":{i}}}"#)).await;
    let driver = ScriptedDriver::new();
    let lost = DriverError::Db(DbError::new(3113, 0, "ORA-03113: end-of-file on communication channel"));
    driver.fail(Fault { point: FaultPoint::Commit, error: lost, times: 2 });
    // The NAK path: without the outage hold (delivery.outage_hold_seconds, which would keep a
    // batch whose every message failed and write it again without a NAK).
    let mut config = s.config("c", json!({}));
    config.delivery.outage_hold_seconds = 0;
    let run = start(config, sink_over(&s, &driver));
    assert!(wait_until(Duration::from_secs(60), || async { s.settled("c").await }).await);
    let stats = run.stop().await;
    let expected: Vec<(u64, String)> = (0..150).map(|i| (i as u64 + 1, format!(r#"{{"n":{i}}}"#))).collect();
    assert_eq!(s.rows(&driver), expected);
    assert!(stats.nacked.load(Ordering::Relaxed) >= 1, "the failed batches were NAKed");
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 0);
    let commits = driver.recorded().iter().filter(|r| r.call == "commit").count();
    assert!(commits >= 3, "two failed commits and at least one good one ({commits})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_runner_restarted_over_the_same_database_loses_nothing() {
    let s = setup().await;
    let n = 600;
    s.publish(n, |i| format!(r#"{{"n":{i}}}"#)).await;
    let driver = ScriptedDriver::new();
    driver.set_recording(false);
    // A short AckWait: what the aborted runner fetched but never settled comes back soon.
    let config = s.config(
        "c",
        json!({"delivery": {"batch_size": 20, "max_in_flight_batches": 4}, "consumer_management": {"ack_wait_seconds": 3.0}}),
    );
    let first = start(config.clone(), sink_over(&s, &driver));
    let some = wait_until(Duration::from_secs(60), || async {
        let stored = driver.committed(&s.table).len();
        stored >= 60
    })
    .await;
    assert!(some, "the first runner stored some rows");
    first.task.abort();
    let _ = first.task.await;
    let after_abort = driver.committed(&s.table).len();
    assert!(after_abort < n, "the abort came before the end ({after_abort} of {n})");

    let second = start(config, sink_over(&s, &driver));
    assert!(wait_until(Duration::from_secs(90), || async { s.settled("c").await }).await);
    let stats = second.stop().await;
    let expected: Vec<(u64, String)> = (0..n).map(|i| (i as u64 + 1, format!(r#"{{"n":{i}}}"#))).collect();
    assert_eq!(s.rows(&driver), expected, "every message is stored exactly once");
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 0);
    eprintln!(
        "aborted after {after_abort} rows; the restart reported {} duplicates",
        stats.duplicates.load(Ordering::Relaxed)
    );
}
