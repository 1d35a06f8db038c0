//! The review package sink through the `nats-sink` binary against a private JetStream
//! server, next to the Python reference (PyPI `nats-sinks[crypto]==0.4.3`, installed by
//! `cargo xtask setup`; these tests fail without it): the reference's `nats-sink run` and
//! this one consume the same stream of mixed payloads (JSON, text, binary, empty) with
//! mission metadata carrying the data-quality and artifact-reference profiles, security
//! labels and custody on, one after the other under the same consumer name, and their
//! packages are compared file by file. What may differ is listed in [`PER_WRITE`] and
//! docs/review-package-sink.md; everything else must be byte for byte the same. Then
//! `nats-sink verify-packages` on both directories, and on damaged packages.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use serde_json::{Value, json};
use sinks_testkit::{js_publish_all, reference_python, wait_until};
use support::{Env, Sink, env};

/// Files whose bytes differ between two writes of the same message by nature, and why.
const PER_WRITE: &[(&str, &str)] = &[
    ("metadata.json", "receive and store times, the delivery's counters, and the metadata document's conventions"),
    ("custody.json", "its metadata hash covers the receive time in the reference"),
    ("manifest.json", "created_at, and the two hashes above"),
    ("hashes.json", "the hashes above"),
];

/// Members of `metadata.json` that differ between two deliveries (or two implementations)
/// of one message, by path; see docs/review-package-sink.md.
const METADATA_PER_WRITE: &[&str] = &[
    "/timestamps/received_at",
    "/timestamps/received_at_epoch_ns",
    "/timestamps/stored_at",
    "/timestamps/stored_at_epoch_ns",
    "/freshness/event_age_at_receive_seconds",
    "/freshness/event_age_at_store_seconds",
    "/freshness/source_clock_skew_seconds",
    "/jetstream/consumer_sequence",
    "/jetstream/pending",
    "/jetstream/redelivered",
    // The reference's spellings of one instant: `isoformat()` (+00:00, microseconds) and
    // epoch nanoseconds at microsecond precision; this project's RFC 3339 and nanoseconds
    // (compared as instants below).
    "/jetstream/timestamp",
    "/jetstream/timestamp_epoch_ns",
    "/timestamps/jetstream_timestamp_epoch_ns",
    "/timestamps/message_created_at_epoch_ns",
    // The reference stores the JetStream reply (ack) subject of the delivery; this project
    // never hands the ack subject to a sink (null).
    "/reply",
    // This project's addition to the metadata document: the delivery count.
    "/jetstream/delivered",
];

/// The mixed stream: `(subject suffix, payload, mission metadata, security labels)`.
fn messages() -> Vec<(String, Bytes, Option<Value>, Option<Value>)> {
    let quality = json!({"profile": "nats-sinks.data-quality.v1", "accuracy": 0.93, "completeness": 1.0,
                         "timeliness": 0.000015, "quality_source": "sensor-7", "assessed_at": "2026-12-01T10:00:00Z"});
    let artifact = json!({"profile": "nats-sinks.artifact-reference.v1", "artifact_id": "a-1",
                          "uri": "s3://evidence/clip-1.mp4", "media_type": "video/mp4", "sha256": "ab".repeat(32),
                          "size_bytes": 2048, "labels": ["clip", "ünïcode"]});
    let embedded = json!({"mission_id": "m-7", "phase": "assess", "speed": 12.5,
                          "data_quality": {"confidence": 0.75, "validity": 1e-7},
                          "artifact_references": [{"uri": "oci://registry/model:1", "sha256": "cd".repeat(32)}]});
    let labels = json!({"classification": "NATO SECRET", "releasability": ["NATO", "FVEY"],
                        "handling_caveats": "caveat-a;caveat-b", "owner": "ops"});
    let payloads: [Bytes; 4] = [
        Bytes::from_static(r#"{"order":1,"note":"ünïcode","price":12.50,"big":12345678901234567890}"#.as_bytes()),
        Bytes::from_static("plain text ✓".as_bytes()),
        Bytes::from_static(&[0, 159, 146, 150, 255, b'\n']),
        Bytes::new(),
    ];
    let metadata = [Some(quality), Some(artifact), Some(embedded), None];
    let mut out = Vec::new();
    for (i, payload) in payloads.iter().enumerate() {
        for (j, mission) in metadata.iter().enumerate() {
            let labels = (j % 2 == 0).then(|| labels.clone());
            out.push((format!("evidence.k{i}{j}"), payload.clone(), mission.clone(), labels));
        }
    }
    out
}

async fn publish(e: &Env) {
    let msgs = messages()
        .into_iter()
        .enumerate()
        .map(|(i, (suffix, payload, mission, labels))| {
            let mut h = HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("evidence-{i}").as_str());
            if let Some(mission) = mission {
                h.insert("Nats-Sinks-Mission-Metadata", mission.to_string().as_str());
            }
            if let Some(labels) = labels {
                h.insert("Nats-Sinks-Security-Labels", labels.to_string().as_str());
            }
            (format!("{}.{suffix}", e.subject_root), h, payload)
        })
        .collect();
    js_publish_all(&e.js, msgs).await;
}

/// The sections both implementations run with (the reference's fields only).
fn policies() -> Value {
    json!({
        "mission_metadata": {"enabled": true},
        "security_labels": {"enabled": true},
        "custody": {"enabled": true},
        "message_metadata": {"classification": {"default": "NATO UNCLASSIFIED"}},
    })
}

fn section(out: &Path) -> Value {
    json!({"type": "review_package", "enabled": true, "directory": out})
}

/// Every file of every package below `root`: `package id → file name → bytes`.
fn packages(root: &Path) -> BTreeMap<String, BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(root).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(name.starts_with("pkg-"), "{} holds {name}", root.display());
        let files = std::fs::read_dir(entry.path())
            .unwrap()
            .flatten()
            .map(|f| (f.file_name().to_string_lossy().into_owned(), std::fs::read(f.path()).unwrap()))
            .collect();
        out.insert(name, files);
    }
    out
}

/// Runs the reference's `nats-sink run` on `config` until the consumer is settled.
async fn run_reference(e: &Env, python: &Path, config: &Path) {
    let log = e.dir.path().join("reference.log");
    let mut child = Command::new(python.with_file_name("nats-sink"))
        .args(["run", config.to_str().unwrap()])
        .current_dir(e.dir.path())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let settled = wait_until(Duration::from_secs(120), || e.settled()).await;
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    for _ in 0..300 {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(settled, "the reference did not drain; its log:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
}

async fn run_ours(e: &Env, config: &Path) {
    let run = Sink::start(config, e.dir.path(), &[]);
    assert!(wait_until(Duration::from_secs(120), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

/// `value` without the members at `paths` (JSON pointers).
fn without(mut value: Value, paths: &[&str]) -> Value {
    for path in paths {
        let (parent, last) = path.rsplit_once('/').unwrap();
        if let Some(Value::Object(map)) = value.pointer_mut(parent) {
            map.remove(last);
        }
    }
    value
}

/// An RFC 3339 / ISO 8601 time as epoch microseconds.
fn micros(text: &str) -> i128 {
    let at = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .or_else(|_| {
            time::OffsetDateTime::parse(&text.replace("+00:00", "Z"), &time::format_description::well_known::Rfc3339)
        })
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    at.unix_timestamp_nanos() / 1000
}

#[tokio::test]
async fn packages_agree_with_the_references_file_for_file() {
    let python = reference_python()
        .unwrap_or_else(|reason| sinks_testkit::cannot_run("packages_agree_with_the_references_file_for_file", reason));
    let e = env().await;
    publish(&e).await;
    let theirs = e.dir.path().join("reference-packages");
    let ours = e.dir.path().join("our-packages");
    let config = e.write_config_json_as("reference.json", section(&theirs), policies());
    run_reference(&e, &python, &config).await;
    // The same consumer name again, from the start of the stream.
    e.js.get_stream(&e.stream).await.unwrap().delete_consumer(&e.consumer).await.unwrap();
    let config = e.write_config_json_as("ours.json", section(&ours), policies());
    run_ours(&e, &config).await;

    let (theirs, ours) = (packages(&theirs), packages(&ours));
    assert_eq!(theirs.len(), messages().len(), "the reference wrote a package per message");
    assert_eq!(theirs.keys().collect::<Vec<_>>(), ours.keys().collect::<Vec<_>>(), "the same package ids");
    let mut seen_files = std::collections::BTreeSet::new();
    for (id, their_files) in &theirs {
        let our_files = &ours[id];
        assert_eq!(their_files.keys().collect::<Vec<_>>(), our_files.keys().collect::<Vec<_>>(), "{id}: file sets");
        for (name, bytes) in their_files {
            seen_files.insert(name.clone());
            if PER_WRITE.iter().all(|(f, _)| f != name) {
                assert!(
                    bytes == &our_files[name],
                    "{id}/{name} differs:\n{}\n{}",
                    String::from_utf8_lossy(bytes),
                    String::from_utf8_lossy(&our_files[name])
                );
            }
        }
        // The manifest: every field but created_at, and every file's hash and size but the
        // per-write files'.
        let per_write_files: Vec<String> = PER_WRITE.iter().map(|(f, _)| format!("/files/{f}")).collect();
        let per_write_files: Vec<&str> = per_write_files.iter().map(String::as_str).collect();
        let strip = |v: Value| without(without(v, &["/created_at"]), &per_write_files);
        let (their_manifest, our_manifest) = (parse(&their_files["manifest.json"]), parse(&our_files["manifest.json"]));
        assert_eq!(strip(their_manifest.clone()), strip(our_manifest.clone()), "{id}: manifest");
        assert!(
            micros(their_manifest["created_at"].as_str().unwrap()) > 0
                && our_manifest["created_at"].as_str().unwrap().ends_with('Z')
        );
        assert_eq!(
            strip(parse(&their_files["hashes.json"])),
            strip(parse(&our_files["hashes.json"])),
            "{id}: hashes.json"
        );
        // metadata.json: everything but what differs per write, and the same instants.
        let (their_meta, our_meta) = (parse(&their_files["metadata.json"]), parse(&our_files["metadata.json"]));
        assert_eq!(
            without(their_meta.clone(), METADATA_PER_WRITE),
            without(our_meta.clone(), METADATA_PER_WRITE),
            "{id}: metadata.json"
        );
        // The reference keeps a Python datetime: the nanoseconds rounded to a microsecond.
        let close = |a: i128, b: i128| (a - b).abs() <= 1;
        let instant = |m: &Value| micros(m["jetstream"]["timestamp"].as_str().unwrap());
        assert!(close(instant(&their_meta), instant(&our_meta)), "{id}: the same JetStream timestamp");
        let ns = |m: &Value, p: &str| i128::from(m.pointer(p).and_then(Value::as_i64).unwrap()) / 1000;
        for p in [
            "/jetstream/timestamp_epoch_ns",
            "/timestamps/jetstream_timestamp_epoch_ns",
            "/timestamps/message_created_at_epoch_ns",
        ] {
            assert!(close(ns(&their_meta, p), ns(&our_meta, p)), "{id}: {p} to the microsecond");
        }
        assert!(their_meta["reply"].as_str().is_some_and(|r| r.starts_with("$JS.ACK.")) && our_meta["reply"].is_null());
        // custody.json: the payload hash and the object's facts agree; the metadata hash
        // covers per-delivery fields in the reference and the message's own here.
        let strip_custody = |v: Value| without(v, &["/metadata_hash", "/record_hash", "/metadata_hash_scope"]);
        assert_eq!(
            strip_custody(parse(&their_files["custody.json"])),
            strip_custody(parse(&our_files["custody.json"])),
            "{id}: custody"
        );
    }
    let expected: std::collections::BTreeSet<String> = [
        "artifact_references.json",
        "custody.json",
        "data_quality.json",
        "hashes.json",
        "manifest.json",
        "metadata.json",
        "mission_metadata.json",
        "payload.bin",
        "security_labels.json",
    ]
    .map(String::from)
    .into();
    assert_eq!(seen_files, expected, "the stream exercised every kind of package file");

    // This build's verifier finds both implementations' packages intact.
    for dir in [e.dir.path().join("reference-packages"), e.dir.path().join("our-packages")] {
        let config = e.write_config_json_as("verify.json", section(&dir), json!({}));
        let out = support::nats_sink(&["verify-packages", config.to_str().unwrap()], e.dir.path());
        assert!(out.status.success(), "{}{}", support::text(&out), String::from_utf8_lossy(&out.stderr));
        assert!(
            support::text(&out).contains(&format!(
                "{n} packages in {}: {n} intact, 0 incomplete, 0 tampered",
                dir.display(),
                n = messages().len()
            )),
            "{}",
            support::text(&out)
        );
    }
}

#[tokio::test]
async fn verify_packages_reports_damage_and_exits_1() {
    let e = env().await;
    publish(&e).await;
    let out_dir = e.dir.path().join("packages");
    let config = e.write_config_json_as("config.json", section(&out_dir), policies());
    run_ours(&e, &config).await;
    let ids: Vec<PathBuf> = {
        let mut ids: Vec<PathBuf> = std::fs::read_dir(&out_dir).unwrap().flatten().map(|d| d.path()).collect();
        ids.sort();
        ids
    };
    std::fs::write(ids[0].join("payload.bin"), b"edited").unwrap();
    std::fs::remove_file(ids[1].join("metadata.json")).unwrap();
    let stale = out_dir.join(format!(".{}.tmp", ids[2].file_name().unwrap().to_string_lossy()));
    std::fs::create_dir(&stale).unwrap();
    let out = support::nats_sink(&["verify-packages", config.to_str().unwrap()], e.dir.path());
    let text = support::text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "tampered {}\n  payload.bin: SHA-256 or size differs",
            ids[0].file_name().unwrap().to_string_lossy()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "incomplete {}\n  metadata.json is missing",
            ids[1].file_name().unwrap().to_string_lossy()
        )),
        "{text}"
    );
    assert!(text.contains("a temporary package directory left by an interrupted write"), "{text}");
    let total = messages().len();
    assert!(
        text.contains(&format!(
            "{} packages in {}: {} intact, 2 incomplete, 1 tampered",
            total + 1,
            out_dir.display(),
            total - 2
        )),
        "{text}"
    );
    let json_out = support::nats_sink(&["verify-packages", config.to_str().unwrap(), "--format", "json"], e.dir.path());
    let report: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(report["packages"].as_array().unwrap().len(), total + 1);
    // Reconcile reads the packages back through the sink: the two damaged ones are
    // conflicts, every other message is there.
    let out = support::nats_sink(&["reconcile", config.to_str().unwrap(), "--format", "json"], e.dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut conflicts: Vec<u64> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["class"] == "conflict")
        .map(|f| f["sequence"].as_u64().unwrap())
        .collect();
    conflicts.sort_unstable();
    let mut damaged: Vec<u64> = ids[..2]
        .iter()
        .map(|p| parse(&std::fs::read(p.join("manifest.json")).unwrap())["stream_sequence"].as_u64().unwrap())
        .collect();
    damaged.sort_unstable();
    assert_eq!(conflicts, damaged, "{doc}");
}

#[tokio::test]
async fn an_encrypted_subject_stays_sealed_in_payload_bin_and_decrypts() {
    const KEY_ENV: &str = "E2E_REVIEW_PACKAGE_KEY_B64";
    let key = "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI=";
    let e = env().await;
    publish(&e).await;
    let out_dir = e.dir.path().join("packages");
    let extra = json!({"encryption": {"enabled": true, "key_id": "review", "key_b64_env": KEY_ENV}});
    let config = e.write_config_json_as("config.json", section(&out_dir), extra);
    let run = Sink::start(&config, e.dir.path(), &[(KEY_ENV, key.to_owned())]);
    assert!(wait_until(Duration::from_secs(120), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let messages = messages();
    for (id, files) in packages(&out_dir) {
        let manifest = parse(&files["manifest.json"]);
        let seq = manifest["stream_sequence"].as_u64().unwrap();
        let plaintext = &messages[seq as usize - 1].1;
        let sealed = &files["payload.bin"];
        assert!(parse(sealed).get("_nats_sinks_encryption").is_some(), "{id}: payload.bin is the encryption envelope");
        assert!(
            plaintext.len() < 4 || !sealed.windows(plaintext.len()).any(|w| w == plaintext.as_ref()),
            "{id}: no plaintext"
        );
        let path = out_dir.join(&id).join("payload.bin");
        let out = Command::new(env!("CARGO_BIN_EXE_nats-sink"))
            .args(["decrypt", config.to_str().unwrap(), path.to_str().unwrap()])
            .args([
                "--subject",
                manifest["subject"].as_str().unwrap(),
                "--stream",
                &e.stream,
                "--sequence",
                &seq.to_string(),
            ])
            .env(KEY_ENV, key)
            .output()
            .unwrap();
        assert!(out.status.success(), "{id}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, plaintext.as_ref(), "{id}: decrypts to the published bytes");
    }
}
