//! `nats-sink reconcile` and `nats-sink replay` with the Coherence sink against a private
//! JetStream server and a real Coherence CE member: 1,000 entries written, 2 removed and 1
//! edited behind the sink's back; reconcile (parallel gets) reports exactly those 3 with their
//! sequences and cache keys, replay brings the removed ones back, and once the edited entry is
//! restored reconcile is clean.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

mod support;

use std::time::Duration;

use serde_json::json;
use sink_coherence::certify::CoherenceHarness;
use sinks_testkit::wait_until;
use support::{Sink, env, findings, json, nats_sink, text};

#[tokio::test]
async fn reconcile_reports_removed_and_edited_entries_and_replay_repairs_them() {
    let address = sinks_testkit::shared_coherence().await.unwrap();
    let h = CoherenceHarness::new(address.clone());
    let mut cache_config = h.config();
    let cache = cache_config.cache_name.clone();
    cache_config.request_timeout_seconds = 10.0;
    let entries = h.read_back(&cache_config).unwrap();
    let e = env().await;
    let total = 1_000u64;
    e.publish(usize::try_from(total).unwrap(), json).await;
    let section = json!({"type": "coherence", "address": address, "cache_name": cache, "ready_timeout_seconds": 30});
    let config = e.write_config_json(section, json!({"delivery": {"batch_size": 200}}));
    let run = Sink::start(&config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(120), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let cfg = config.to_str().unwrap();

    let clean = nats_sink(&["reconcile", cfg], e.dir.path());
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean));
    assert!(text(&clean).contains("present_equal=1000 missing=0 conflict=0"), "{}", text(&clean));
    assert!(text(&clean).contains("get of each entry key"), "{}", text(&clean));

    let key = |seq: u64| format!("stream-sequence:{}:{seq}", e.stream);
    for seq in [17, 999] {
        assert!(entries.remove(&key(seq)).await.unwrap());
    }
    let original = entries.document(&key(500)).await.unwrap().unwrap();
    let mut edited = original.clone();
    edited["payload"]["order"] = (-1).into();
    edited["payload_exact"] = r#"{"order":-1,"note":"ünïcode"}"#.into();
    entries.overwrite(&key(500), serde_json::to_string(&edited).unwrap().as_bytes()).await.unwrap();

    let out = nats_sink(&["reconcile", cfg, "--format", "json", "--repair"], e.dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = findings(&out);
    let want: Vec<(u64, String)> =
        [(17, "missing"), (500, "conflict"), (999, "missing")].map(|(s, c)| (s, c.to_owned())).into();
    assert_eq!(findings, want, "exactly the three, with their sequences");
    assert_eq!(doc["findings"][0]["destination"], json!({"kind": "cache", "cache": cache, "key": key(17)}));

    for seq in ["17", "999"] {
        let out = nats_sink(&["replay", cfg, "--from-seq", seq, "--to-seq", seq], e.dir.path());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(text(&out).contains("committed=1"), "{}", text(&out));
    }
    // The edited entry stays a conflict (skip_existing keeps it) until it is restored.
    let out = nats_sink(&["reconcile", cfg], e.dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("present_equal=999 missing=0 conflict=1"), "{}", text(&out));
    entries.overwrite(&key(500), serde_json::to_string(&original).unwrap().as_bytes()).await.unwrap();
    let out = nats_sink(&["reconcile", cfg], e.dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("present_equal=1000 missing=0 conflict=0"), "{}", text(&out));
}
