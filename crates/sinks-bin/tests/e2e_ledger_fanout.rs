//! `nats-sink reconcile` of a fan-out through the binary, with two required file targets and
//! an optional one against a private JetStream server: every message goes to `all`, those on
//! `orders.k0` also to `k0`, those on `orders.k1` get an optional copy in `opt`. Files deleted
//! or altered behind the sink's back in either required target are reported with their
//! sequences; a copy missing from the optional target is not; replay repairs the missing ones.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use sinks_testkit::wait_until;
use support::{Env, Sink, env, findings, json, nats_sink, text};

/// The record of stream sequence `seq` in the file target writing `dir` (messages are
/// published on `orders.k{(seq-1)%3}`, partitioned by subject).
fn record_path(e: &Env, dir: &Path, seq: u64) -> PathBuf {
    let subject = format!("{}.orders.k{}", e.subject_root, (seq - 1) % 3);
    dir.join(&subject).join(format!("{}-{seq:020}.json", e.stream))
}

#[tokio::test]
async fn reconcile_reads_back_every_required_file_target_of_a_fanout() {
    let e = env().await;
    let total = 600;
    e.publish(total, json).await;
    let (all, k0, opt) = (e.dir.path().join("all"), e.dir.path().join("k0"), e.dir.path().join("opt"));
    let root = &e.subject_root;
    let config = e.write_config_json(
        json!({"type": "fanout"}),
        json!({
            "delivery": {"batch_size": 100},
            "sinks": {
                "all": {"type": "file", "directory": all},
                "k0": {"type": "file", "directory": k0},
                "opt": {"type": "file", "directory": opt},
            },
            "routing": {"enabled": true, "mode": "all", "no_match": "reject", "routes": [
                {"name": "all", "match": {"subject": format!("{root}.>")}, "targets": ["all"]},
                {"name": "k0", "match": {"subject": format!("{root}.orders.k0")}, "targets": ["k0"]},
                {"name": "k1", "match": {"subject": format!("{root}.orders.k1")},
                 "targets": [{"sink": "opt", "required": false, "minimum_wait_ms": 1000, "timeout_ms": 5000}]},
            ]},
        }),
    );
    let run = Sink::start(&config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(120), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let cfg = config.to_str().unwrap();

    let clean = nats_sink(&["reconcile", cfg], e.dir.path());
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean));
    assert!(text(&clean).contains("present_equal=600 missing=0 conflict=0"), "{}", text(&clean));
    assert!(text(&clean).contains("`all` (file exists"), "{}", text(&clean));
    assert!(!text(&clean).contains("`opt`"), "optional targets are not read back: {}", text(&clean));

    // Behind the sink's back. 17 (k1): gone from `all`, its only required target. 31 (k0):
    // gone from `k0`, still in `all`. 100 (k0): altered in `k0`. 2 (k1): its optional copy
    // gone, which no one is owed.
    std::fs::remove_file(record_path(&e, &all, 17)).unwrap();
    std::fs::remove_file(record_path(&e, &k0, 31)).unwrap();
    let altered = record_path(&e, &k0, 100);
    let original = std::fs::read_to_string(&altered).unwrap();
    let changed = original.replace(r#""order":99"#, r#""order":-99"#);
    assert_ne!(original, changed);
    std::fs::write(&altered, changed).unwrap();
    std::fs::remove_file(record_path(&e, &opt, 2)).unwrap();

    let out = nats_sink(&["reconcile", cfg, "--format", "json", "--repair"], e.dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let want: Vec<(u64, String)> =
        [(17, "missing"), (31, "missing"), (100, "conflict")].map(|(s, c)| (s, c.to_owned())).into();
    assert_eq!(findings(&out), want, "exactly the three, with their sequences");

    for seq in ["17", "31"] {
        let out = nats_sink(&["replay", cfg, "--from-seq", seq, "--to-seq", seq], e.dir.path());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    assert!(record_path(&e, &all, 17).is_file() && record_path(&e, &k0, 31).is_file());
    std::fs::write(&altered, original).unwrap();
    let out = nats_sink(&["reconcile", cfg], e.dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("present_equal=600 missing=0 conflict=0"), "{}", text(&out));
}
