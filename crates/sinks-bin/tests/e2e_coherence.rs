//! `nats-sink run` with the Coherence sink against a private JetStream server and real
//! Coherence CE members: one entry per message with the reference's config, start-up
//! configuration errors, the only member killed mid-run (SIGKILL) and restarted from its
//! active persistence, and one of two members killed mid-run (its partitions restored from
//! the other's backups); nothing lost or duplicated.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use sink_coherence::certify::{CacheReadBack, CoherenceHarness};
use sinks_certify::Records;
use sinks_testkit::{CoherenceMember, wait_until};
use support::{Sink, env, json};

/// The reference's Coherence example section (tests/fixtures/reference/
/// oracle-coherence-basic.json), pointed at `address` and `cache`.
fn section(address: &str, cache: &str) -> serde_json::Value {
    json!({
        "type": "coherence",
        "address": address,
        "cache_name": cache,
        "storage": "cache",
        "serializer": "json",
        "key_strategy": "idempotency_key",
        "duplicate_policy": "skip_existing",
        "payload_mode": "json_or_envelope",
        "max_value_bytes": 1048576,
        "request_timeout_seconds": 10,
        "ready_timeout_seconds": 30,
        "session_disconnect_seconds": 30,
        "durability": "operator_confirmed"
    })
}

fn read_back(address: &str, cache: &str) -> CacheReadBack {
    let h = CoherenceHarness::new(address);
    let mut config = h.config();
    config.cache_name = cache.to_owned();
    h.read_back(&config).unwrap()
}

/// Stream sequence → number of entries holding it, checking each payload.
async fn sequences(read_back: &CacheReadBack) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for (key, payload) in read_back.read_all().await.unwrap() {
        let seq: u64 = key.rsplit(':').next().unwrap().parse().unwrap();
        assert_eq!(payload, json(usize::try_from(seq - 1).unwrap()), "payload of {key}");
        *out.entry(seq).or_default() += 1;
    }
    out
}

#[tokio::test]
async fn the_reference_coherence_config_writes_one_entry_per_message() {
    let address = sinks_testkit::shared_coherence().await.unwrap();
    let cache = CoherenceHarness::cache_name();
    let read_back = read_back(&address, &cache);
    let e = env().await;
    e.publish(500, json).await;
    let run = Sink::start(
        &e.write_config_json(section(&address, &cache), json!({"delivery": {"batch_size": 100}})),
        e.dir.path(),
        &[],
    );
    assert!(wait_until(Duration::from_secs(60), || e.settled()).await, "{}", run.logs());
    let logs = run.logs();
    assert_eq!(run.terminate(), Some(0));
    assert!(logs.contains("coherence grpc protocol selected") && logs.contains("protocol=\"v1\""), "{logs}");
    assert!(logs.contains("coherence sink ready"), "{logs}");
    let seqs = sequences(&read_back).await;
    assert_eq!(seqs.len(), 500);
    assert!(seqs.values().all(|n| *n == 1));
    let doc = read_back.document(&format!("stream-sequence:{}:1", e.stream)).await.unwrap().unwrap();
    assert_eq!(doc["schema"], "nats_sinks.coherence.event.v1");
    assert_eq!(doc["payload"]["note"], "ünïcode");
    assert_eq!(doc["message_id"], "msg-0");
    assert_eq!(doc["stream_sequence"], 1);
}

#[tokio::test]
async fn startup_configuration_errors_exit_2_naming_the_problem() {
    let address = sinks_testkit::shared_coherence().await.unwrap();
    let e = env().await;
    let mut unknown_scope = section(&address, "x");
    unknown_scope["scope"] = "no-such-scope".into();
    unknown_scope["ready_timeout_seconds"] = 2.into();
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (unknown_scope, "coherence start-up check failed"),
        (json!({"type": "coherence", "address": "http://127.0.0.1:1408"}), "sink.address"),
        (json!({"type": "coherence", "storage": "map", "ttl_seconds": 60}), "sink.ttl_seconds"),
        (json!({"type": "coherence", "tls_ca_file": "/ca.pem"}), "sink.tls_ca_file"),
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
async fn the_only_member_killed_mid_run_and_restarted_from_persistence_loses_nothing() {
    let mut member = CoherenceMember::start().await.unwrap();
    let address = member.address();
    let cache = CoherenceHarness::cache_name();
    let e = env().await;
    e.publish(3000, json).await;
    let run = Sink::start(
        &e.write_config_json(section(&address, &cache), json!({"delivery": {"batch_size": 50}})),
        e.dir.path(),
        &[],
    );
    let progressed =
        wait_until(Duration::from_secs(60), || async { e.consumer_state().await.is_some_and(|(p, _)| p <= 2500) })
            .await;
    assert!(progressed, "{}", run.logs());
    member.kill();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let during = e.consumer_state().await;
    member.restart().await.unwrap();
    let done = wait_until(Duration::from_secs(180), || e.settled()).await;
    assert!(done, "{}", run.logs());
    let logs = run.logs();
    assert!(logs.contains("destination unavailable") && logs.contains("destination recovered"), "{logs}");
    assert_eq!(run.terminate(), Some(0));
    let seqs = sequences(&read_back(&address, &cache)).await;
    eprintln!("consumer during the outage: {during:?}; entries after: {}", seqs.len());
    assert_eq!(seqs.len(), 3000, "every message stored");
    assert_eq!(seqs.keys().next(), Some(&1));
    assert_eq!(seqs.keys().last(), Some(&3000));
    assert!(seqs.values().all(|n| *n == 1), "one entry per message");
}

#[tokio::test]
async fn one_of_two_members_killed_mid_run_loses_nothing() {
    let first = CoherenceMember::start().await.unwrap();
    let mut second = first.join().await.unwrap();
    // The sink talks to the first member's proxy; the second one holds primaries and
    // backups of half the partitions and is killed under load.
    let address = first.address();
    let cache = CoherenceHarness::cache_name();
    let e = env().await;
    e.publish(3000, json).await;
    let run = Sink::start(
        &e.write_config_json(section(&address, &cache), json!({"delivery": {"batch_size": 50}})),
        e.dir.path(),
        &[],
    );
    let progressed =
        wait_until(Duration::from_secs(60), || async { e.consumer_state().await.is_some_and(|(p, _)| p <= 2000) })
            .await;
    assert!(progressed, "{}", run.logs());
    second.kill();
    let done = wait_until(Duration::from_secs(180), || e.settled()).await;
    assert!(done, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let seqs = sequences(&read_back(&address, &cache)).await;
    assert_eq!(seqs.len(), 3000, "every message stored (backups restored the killed member's partitions)");
    assert!(seqs.values().all(|n| *n == 1), "one entry per message");
}
