//! `nats-sink run` with the Oracle NoSQL sink against a private JetStream server and the
//! testkit's NoSQL test server (the proxy's protocol; see docs/nosql-sink.md): the
//! reference's example config run unchanged (only environment overrides point it at the
//! servers), start-up configuration errors, and the NoSQL service stopped mid-run and
//! restarted, losing and duplicating nothing.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use sink_nosql::certify::{NoSqlHarness, TableReadBack, unique_table};
use sink_nosql::{NoSqlSink, NoSqlSinkConfig};
use sinks_certify::ReadBack;
use sinks_contract::Sink as _;
use sinks_testkit::{NoSqlTestServer, wait_until};
use support::{Sink, env, json};

/// Stream sequence → rows holding it (from `stream-sequence:S:N` row keys).
async fn sequences(read_back: &TableReadBack) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for (key, _) in read_back.read_all().await.unwrap() {
        let seq: u64 = key.rsplit(':').next().unwrap().parse().unwrap();
        *out.entry(seq).or_default() += 1;
    }
    out
}

/// Creates `table` with the reference's DDL on the service at `endpoint`.
async fn create_table(endpoint: &str, table: &str) {
    let config =
        NoSqlSinkConfig { auto_create: true, table_poll_interval_ms: 50, ..NoSqlSinkConfig::new(endpoint, table) };
    NoSqlSink::new(config).unwrap().open().await.unwrap();
}

#[tokio::test]
async fn the_reference_nosql_example_runs_unchanged() {
    let server = NoSqlTestServer::start().unwrap();
    // The example names table `nats_sinks_events` and `auto_create: false`: the operator
    // made the table beforehand.
    create_table(&server.endpoint(), "nats_sinks_events").await;
    let e = env().await;
    // The example consumes stream EVENTS on `events.>`.
    sinks_testkit::stream_with_subjects(&e.js, "EVENTS", &["events.>"]).await;
    let msgs = (0..300)
        .map(|i| {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("ref-{i}").as_str());
            (format!("events.orders.k{}", i % 3), h, json(i))
        })
        .collect();
    sinks_testkit::js_publish_all(&e.js, msgs).await;
    let example =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference/oracle-nosql-basic.json");
    let overrides = vec![
        ("NATS_SINKS_NATS_URL", e.server.url()),
        ("NATS_SINKS__SINK__ENDPOINT", server.endpoint().trim_start_matches("http://").to_owned()),
    ];
    let run = Sink::start(&example, e.dir.path(), &overrides);
    let settled = wait_until(Duration::from_secs(60), || async {
        let stream = e.js.get_stream("EVENTS").await.ok();
        match stream {
            Some(s) => s
                .consumer_info("oracle-nosql-sink")
                .await
                .is_ok_and(|c| c.num_pending == 0 && c.num_ack_pending == 0 && c.delivered.stream_sequence == 300),
            None => false,
        }
    })
    .await;
    assert!(settled, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let rows = server.rows("nats_sinks_events").unwrap();
    assert_eq!(rows.len(), 300);
    let first = rows.iter().find(|r| r["sink_key"] == "stream-sequence:EVENTS:1").expect("row of sequence 1");
    assert_eq!(first["event_json"]["schema"], "nats_sinks.oracle_nosql.event.v1");
    assert_eq!(first["event_json"]["payload"]["note"], "ünïcode");
    assert_eq!(first["event_json"]["message_id"], "ref-0");
    assert!(first["stored_at_epoch_ns"].as_i64().unwrap() > 1_700_000_000_000_000_000);
}

#[tokio::test]
async fn startup_configuration_errors_exit_2_naming_the_problem() {
    let server = NoSqlTestServer::start().unwrap();
    let wrong = unique_table("wrong");
    // A table whose value column is not JSON.
    {
        let endpoint = server.endpoint();
        let client = NoSqlHarness::test_server(&endpoint);
        let config = NoSqlSinkConfig { auto_create: true, value_field: "payload".into(), ..client.config(&wrong) };
        NoSqlSink::new(config).unwrap().open().await.unwrap();
    }
    let e = env().await;
    let base = json!({"type": "oracle_nosql", "endpoint": server.endpoint(), "request_timeout_seconds": 2});
    let with = |extra: serde_json::Value| {
        let mut s = base.clone();
        s.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        s
    };
    let cases = [
        (with(json!({"table_name": "no_such_table"})), "the table does not exist"),
        (with(json!({"table_name": wrong})), "`event_json` (sink.value_field) is missing"),
        (with(json!({"deployment_mode": "kvstore", "auth_mode": "cloudsim"})), "sink.auth_mode"),
        (with(json!({"oci_private_key_passphrase_env": "OCI_KEY_PASS"})), "sink.oci_private_key_passphrase_env"),
    ];
    for (sink, expected) in cases {
        let config = e.write_config_json(sink, json!({}));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_nats-sink")).arg("run").arg(&config).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{expected}: {stderr}");
        assert!(stderr.contains(expected), "expected `{expected}` in {stderr}");
    }
}

#[tokio::test]
async fn nosql_service_stopped_mid_run_and_restarted_loses_nothing() {
    let server = NoSqlTestServer::start().unwrap();
    let harness = NoSqlHarness::test_server(server.endpoint());
    let table = unique_table("outage");
    let config = harness.config(&table);
    let read_back = harness.read_back(&config);
    let e = env().await;
    e.publish(3000, json).await;
    let sink = json!({"type": "oracle_nosql", "endpoint": server.endpoint(), "table_name": table,
                      "auto_create": true, "table_poll_interval_ms": 100, "request_timeout_seconds": 2,
                      "key_strategy": "stream_sequence"});
    let run = Sink::start(&e.write_config_json(sink, json!({"delivery": {"batch_size": 50}})), e.dir.path(), &[]);
    let progressed =
        wait_until(Duration::from_secs(60), || async { e.consumer_state().await.is_some_and(|(p, _)| p <= 2500) })
            .await;
    assert!(progressed, "{}", run.logs());
    server.stop();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let during = e.consumer_state().await;
    let stored_during = server.rows(&table).map(|r| r.len());
    server.restart().unwrap();
    let done = wait_until(Duration::from_secs(120), || e.settled()).await;
    assert!(done, "{}", run.logs());
    let logs = run.logs();
    assert!(logs.contains("destination unavailable") && logs.contains("destination recovered"), "{logs}");
    assert_eq!(run.terminate(), Some(0));
    let seqs = sequences(&read_back).await;
    eprintln!("consumer during the outage: {during:?}, rows then {stored_during:?}; rows after: {}", seqs.len());
    assert!(stored_during.is_some_and(|n| n < 3000), "the outage began before the end");
    assert_eq!(seqs.len(), 3000, "every message stored");
    assert_eq!(seqs.keys().next(), Some(&1));
    assert_eq!(seqs.keys().last(), Some(&3000));
    assert!(seqs.values().all(|n| *n == 1), "one row per message");
}

/// Runs a shell command named by the environment variable `var`.
fn run_named(var: &str) {
    let command = std::env::var(var).unwrap();
    let status = std::process::Command::new("sh").args(["-c", &command]).status().unwrap();
    assert!(status.success(), "{var} failed: {command}");
}

/// The live path of the outage test: a real proxy (`NATS_SINKS_TEST_NOSQL_ENDPOINT`) that
/// `NATS_SINKS_TEST_NOSQL_KILL` kills (kill -9 of KVLite and the proxy) and
/// `NATS_SINKS_TEST_NOSQL_START` starts again on the same store and port. An allow-listed skip
/// (`oracle-nosql-proxy`) without a live proxy; with one, the other two must be set (a
/// development session with KVLite; see docs/nosql-sink.md).
#[tokio::test]
async fn live_proxy_killed_mid_run_and_restarted_loses_nothing() {
    const KILL: &str = "NATS_SINKS_TEST_NOSQL_KILL";
    const START: &str = "NATS_SINKS_TEST_NOSQL_START";
    const TEST: &str = "live_proxy_killed_mid_run_and_restarted_loses_nothing";
    let Some(endpoint) =
        sinks_testkit::env_or_allowed_skip(sinks_testkit::NOSQL_LIVE_ENV, sinks_testkit::ORACLE_NOSQL_PROXY, TEST)
    else {
        return;
    };
    if std::env::var(KILL).is_err() || std::env::var(START).is_err() {
        sinks_testkit::cannot_run(TEST, format!("a live proxy is named, but {KILL} and {START} are not set"));
    }
    let harness = NoSqlHarness::live(&endpoint);
    let table = unique_table("live_outage");
    let config = harness.config(&table);
    let read_back = harness.read_back(&config);
    let e = env().await;
    e.publish(3000, json).await;
    let sink = json!({"type": "oracle_nosql", "endpoint": endpoint, "table_name": table,
                      "auto_create": true, "table_poll_interval_ms": 200, "request_timeout_seconds": 3,
                      "key_strategy": "stream_sequence"});
    let run = Sink::start(&e.write_config_json(sink, json!({"delivery": {"batch_size": 50}})), e.dir.path(), &[]);
    let progressed =
        wait_until(Duration::from_secs(120), || async { e.consumer_state().await.is_some_and(|(p, _)| p <= 2000) })
            .await;
    assert!(progressed, "{}", run.logs());
    run_named(KILL);
    let during = e.consumer_state().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    run_named(START);
    let done = wait_until(Duration::from_secs(300), || e.settled()).await;
    assert!(done, "{}", run.logs());
    let logs = run.logs();
    assert!(logs.contains("destination unavailable") && logs.contains("destination recovered"), "{logs}");
    assert_eq!(run.terminate(), Some(0));
    let seqs = sequences(&read_back).await;
    eprintln!("live: consumer at the kill {during:?}; rows after: {}", seqs.len());
    assert_eq!(seqs.len(), 3000, "every message stored");
    assert!(seqs.values().all(|n| *n == 1), "one row per message");
}
