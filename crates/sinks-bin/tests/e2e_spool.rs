//! Payload encryption and the encrypted edge spool through the `nats-sink` binary, against a
//! private JetStream server: the disconnected-edge scenario (1,001 direct, 1,001 spooled
//! while the destination is away, replay, 1,001 direct: every message exactly once), a
//! replay killed half way, encrypted payloads in records and in dead-letter records,
//! `nats-sink decrypt`, tampering, and cross-implementation runs with the Python reference
//! (PyPI `nats-sinks[crypto]==0.4.3`, installed by `cargo xtask setup`; those tests fail
//! without it).
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::json;
use sinks_testkit::HttpTestServer;
use sinks_testkit::{read_stream, reference_python, stream_with_subjects, unique, wait_until};
use support::{Env, Sink, env, json, records, sequences};

const SPOOL_KEY_ENV: &str = "E2E_SPOOL_KEY_B64";
const PAYLOAD_KEY_ENV: &str = "E2E_PAYLOAD_KEY_B64";

fn spool_key() -> String {
    B64.encode([0x11u8; 32])
}

fn payload_key() -> String {
    B64.encode([0x22u8; 32])
}

fn keys() -> Vec<(&'static str, String)> {
    vec![(SPOOL_KEY_ENV, spool_key()), (PAYLOAD_KEY_ENV, payload_key())]
}

fn nats_sink(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nats-sink")).args(args).envs(keys()).output().unwrap()
}

fn spool_section(dir: &Path) -> serde_json::Value {
    json!({"type": "spool", "directory": dir, "encryption": {"enabled": true, "key_id": "edge", "key_b64_env": SPOOL_KEY_ENV}})
}

fn spool_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".spool.json")).count())
        .unwrap_or(0)
}

/// Runs `config` until the consumer is settled, then stops it.
async fn drain(e: &Env, config: &Path) {
    let run = Sink::start(config, e.dir.path(), &keys());
    assert!(wait_until(Duration::from_secs(120), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
}

#[tokio::test]
async fn disconnected_edge_spools_then_replays_exactly_once() {
    let e = env().await;
    let spool = e.dir.path().join("spool");
    let direct = e.write_config_json_as("direct.json", json!({"type": "file", "directory": e.out()}), json!({}));
    let spooling = e.write_config_json_as("spool.json", spool_section(&spool), json!({}));

    e.publish_range(0, 1001, json).await;
    drain(&e, &direct).await;
    // The destination is away: the same consumer goes on into the local spool.
    e.publish_range(1001, 2002, json).await;
    drain(&e, &spooling).await;
    assert_eq!(spool_files(&spool), 1001, "every message of the outage is in custody");
    assert_eq!(records(&e.out()).len(), 1001);
    let text = std::fs::read_to_string(std::fs::read_dir(&spool).unwrap().flatten().next().unwrap().path()).unwrap();
    assert!(!text.contains("ünïcode") && !text.contains(&e.subject_root), "nothing of a message in clear on disk");

    let out = nats_sink(&["replay-spool", spooling.to_str().unwrap(), direct.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("1001 committed"), "{stdout}");
    assert_eq!(spool_files(&spool), 0, "replayed records are deleted");

    e.publish_range(2002, 3003, json).await;
    drain(&e, &direct).await;
    let seqs = sequences(&e.out());
    assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), (1..=3003).collect::<Vec<u64>>());
    assert!(seqs.values().all(|n| *n == 1), "every message exactly once in the destination");
}

#[tokio::test]
async fn a_replay_killed_half_way_loses_and_duplicates_nothing() {
    let e = env().await;
    let spool = e.dir.path().join("spool");
    let spooling = e.write_config_json_as("spool.json", spool_section(&spool), json!({}));
    e.publish_range(0, 1001, json).await;
    drain(&e, &spooling).await;
    let endpoint = HttpTestServer::start().await.unwrap();
    endpoint.set_delay(Duration::from_millis(3));
    let sink = json!({"type": "http", "url": endpoint.url(), "allow_http_for_local_testing": true});
    let target = e.write_config_json_as("target.json", sink, json!({"delivery": {"batch_size": 50}}));
    let mut replay = Command::new(env!("CARGO_BIN_EXE_nats-sink"))
        .args(["replay-spool", spooling.to_str().unwrap(), target.to_str().unwrap()])
        .envs(keys())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let midway = wait_until(Duration::from_secs(60), || async { spool_files(&spool) <= 600 }).await;
    let _ = replay.kill();
    let _ = replay.wait();
    assert!(midway, "the replay made progress");
    let left = spool_files(&spool);
    assert!(left > 0, "killed before the end ({left} records left)");
    // The endpoint runs in this test's runtime: wait for the second replay off it.
    let args = [spooling.to_str().unwrap().to_owned(), target.to_str().unwrap().to_owned()];
    let out = tokio::task::spawn_blocking(move || nats_sink(&["replay-spool", &args[0], &args[1]])).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(spool_files(&spool), 0);
    let successes = endpoint.successes();
    assert_eq!(successes.len(), 1001, "every message reached the target");
    assert!(successes.values().all(|n| *n == 1), "none was committed twice");
}

#[tokio::test]
async fn payloads_are_encrypted_before_any_sink_and_dead_letters_never_carry_plaintext() {
    for (version, dlq_payload) in [(1, "ciphertext"), (2, "omit")] {
        let e = env().await;
        let dlq_stream = unique("DLQ");
        let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
        stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
        e.publish_range(0, 20, json).await;
        // One message without a message id: the file sink keyed by message id refuses it.
        e.js.publish(format!("{}.orders.k0", e.subject_root), "{\"secret\":\"no id\"}".into())
            .await
            .unwrap()
            .await
            .unwrap();
        let sink = json!({"type": "file", "directory": e.out(), "filename_strategy": "message_id"});
        let extra = json!({
            "encryption": {"enabled": true, "key_id": "p1", "key_b64_env": PAYLOAD_KEY_ENV, "format_version": version},
            "dead_letter": {"enabled": true, "subject": dlq_subject, "encrypted_payload": dlq_payload},
        });
        let config = e.write_config_json(sink, extra);
        drain(&e, &config).await;
        let stored = records(&e.out());
        assert_eq!(stored.len(), 20);
        for r in &stored {
            assert!(r["payload"]["_nats_sinks_encryption"]["ciphertext"].is_string(), "{r}");
            assert!(!r.to_string().contains("ünïcode"), "no plaintext in the record");
        }
        // `nats-sink decrypt` gives the published payload back.
        let file = std::fs::read_dir(e.out()).unwrap().flatten().find(|d| d.path().is_dir()).unwrap().path();
        let one = std::fs::read_dir(&file).unwrap().flatten().next().unwrap().path();
        let out = nats_sink(&["decrypt", config.to_str().unwrap(), one.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&one).unwrap()).unwrap();
        let seq = record["stream_sequence"].as_u64().unwrap() as usize;
        assert_eq!(out.stdout, json(seq - 1).to_vec());
        // The dead letter: ciphertext, or nothing.
        let dlq = read_stream(&e.js, &dlq_stream).await;
        assert_eq!(dlq.len(), 1);
        let body = String::from_utf8_lossy(&dlq[0].3).into_owned();
        assert!(!body.contains("no id") && !body.contains("c2VjcmV0"), "no plaintext in the DLQ record: {body}");
        let dead: serde_json::Value = serde_json::from_str(&body).unwrap();
        match dlq_payload {
            "ciphertext" => {
                let payload = B64.decode(dead["payload_base64"].as_str().unwrap()).unwrap();
                assert!(sinks_toolkit::encryption::is_encrypted(&payload), "the DLQ carries the ciphertext envelope");
            }
            _ => {
                assert!(dead.get("payload_base64").is_none());
                assert_eq!(dead["payload_unavailable_reason"], "encrypted_payload_omitted");
            }
        }
    }
}

#[tokio::test]
async fn tampered_ciphertexts_fail_with_a_clear_error_and_write_nothing() {
    let e = env().await;
    let spool = e.dir.path().join("spool");
    let spooling = e.write_config_json_as("spool.json", spool_section(&spool), json!({}));
    e.publish_range(0, 3, json).await;
    drain(&e, &spooling).await;
    // Flip one character of one record's ciphertext.
    let victim = std::fs::read_dir(&spool).unwrap().flatten().next().unwrap().path();
    let mut wrapper: serde_json::Value = serde_json::from_slice(&std::fs::read(&victim).unwrap()).unwrap();
    let ct = wrapper["encrypted_record"]["_nats_sinks_encryption"]["ciphertext"].as_str().unwrap().to_owned();
    let mut raw = B64.decode(&ct).unwrap();
    raw[3] ^= 0x40;
    wrapper["encrypted_record"]["_nats_sinks_encryption"]["ciphertext"] = B64.encode(raw).into();
    std::fs::write(&victim, serde_json::to_vec(&wrapper).unwrap()).unwrap();
    let out = nats_sink(&["decrypt", spooling.to_str().unwrap(), victim.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing printed");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("decryption failed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A replay writes the two good records and keeps the tampered one.
    let direct = e.write_config_json_as("direct.json", json!({"type": "file", "directory": e.out()}), json!({}));
    let out = nats_sink(&["replay-spool", spooling.to_str().unwrap(), direct.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "an unreadable record makes the replay incomplete");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 unreadable"));
    assert_eq!(records(&e.out()).len(), 2);
    assert_eq!(spool_files(&spool), 1, "the tampered record is kept");
}

/// The reference's Python; fails `test` when it is not installed.
fn reference(test: &str) -> PathBuf {
    reference_python().unwrap_or_else(|reason| sinks_testkit::cannot_run(test, reason))
}

/// Runs `script` with the reference's Python; returns stdout.
fn python(py: &Path, script: &str, args: &[&str]) -> String {
    let out = Command::new(py).arg("-c").arg(script).args(args).output().unwrap();
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn the_reference_decrypts_what_nats_sink_encrypted() {
    let py = reference("the_reference_decrypts_what_nats_sink_encrypted");
    for (algorithm, nonce, tag) in [("aes-256-gcm", 12, 16), ("aes-256-ccm", 11, 8)] {
        let e = env().await;
        e.publish_range(0, 10, json).await;
        let extra = json!({"encryption": {"enabled": true, "algorithm": algorithm, "key_id": "shared",
                                          "key_b64_env": PAYLOAD_KEY_ENV, "nonce_size_bytes": nonce, "tag_length": tag}});
        let config = e.write_config_json(json!({"type": "file", "directory": e.out()}), extra);
        drain(&e, &config).await;
        let stored = records(&e.out());
        let envelopes: Vec<serde_json::Value> = stored.iter().map(|r| r["payload"].clone()).collect();
        let script = r#"
import base64, json, sys
from nats_sinks.core.config import EncryptionConfig
from nats_sinks.core.encryption import decrypt_payload
cfg = EncryptionConfig(enabled=True, algorithm=sys.argv[1], key_id="shared", key_b64=sys.argv[2],
                       nonce_size_bytes=int(sys.argv[3]), tag_length=int(sys.argv[4]))
for env in json.loads(sys.argv[5]):
    print(base64.b64encode(decrypt_payload(env, config=cfg)).decode())
"#;
        let input = serde_json::to_string(&envelopes).unwrap();
        let printed = python(&py, script, &[algorithm, &payload_key(), &nonce.to_string(), &tag.to_string(), &input]);
        let mut got: Vec<Vec<u8>> = printed.lines().map(|l| B64.decode(l).unwrap()).collect();
        let mut want: Vec<Vec<u8>> =
            stored.iter().map(|r| json(r["stream_sequence"].as_u64().unwrap() as usize - 1).to_vec()).collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{algorithm}: the reference decrypts every record");
    }
}

#[tokio::test]
async fn nats_sink_decrypts_what_the_reference_encrypted() {
    let py = reference("nats_sink_decrypts_what_the_reference_encrypted");
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
import sys
from nats_sinks.core.config import EncryptionConfig
from nats_sinks.core.encryption import PayloadEncryptor
for i, (alg, nonce, tag) in enumerate([("aes-256-gcm", 12, 16), ("aes-256-ccm", 13, 4), ("aes-256-gcm", 8, 16)]):
    cfg = EncryptionConfig(enabled=True, algorithm=alg, key_id="shared", key_b64=sys.argv[1], nonce_size_bytes=nonce, tag_length=tag)
    with open(f"{sys.argv[2]}/envelope-{i}.json", "wb") as f:
        f.write(PayloadEncryptor(cfg).encrypt_bytes(f"reference payload {i} \u00e9".encode()))
"#;
    python(&py, script, &[&payload_key(), dir.path().to_str().unwrap()]);
    let config = dir.path().join("config.json");
    let text = json!({"nats": {"stream": "S", "consumer": "c", "subject": "a.>"},
                      "encryption": {"key_id": "shared", "key_b64_env": PAYLOAD_KEY_ENV},
                      "sink": {"type": "file", "directory": dir.path().join("out")}});
    std::fs::write(&config, text.to_string()).unwrap();
    for i in 0..3 {
        let file = dir.path().join(format!("envelope-{i}.json"));
        let out = nats_sink(&["decrypt", config.to_str().unwrap(), file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("reference payload {i} é"));
    }
}

#[tokio::test]
async fn spools_move_between_implementations_in_both_directions() {
    let py = reference("spools_move_between_implementations_in_both_directions");
    let e = env().await;
    // The reference spools five messages; nats-sink replays them.
    let theirs = e.dir.path().join("their-spool");
    let script = r#"
import asyncio, sys
from datetime import datetime, UTC
from nats_sinks.core.envelope import NatsEnvelope
from nats_sinks.spool.sink import SpoolSink
sink = SpoolSink.from_mapping({"type": "spool", "directory": sys.argv[1],
    "encryption": {"enabled": True, "key_id": "edge", "key_b64": sys.argv[2]}})
async def main():
    await sink.start()
    await sink.write_batch([NatsEnvelope(subject=f"{sys.argv[3]}.orders.k0", data=f'{{"ref":{i}}}'.encode(),
        headers={"Nats-Msg-Id": f"ref-{i}"}, stream="REFSTREAM", consumer="c", stream_sequence=i + 1,
        consumer_sequence=i + 1, timestamp=datetime.now(UTC), message_id=f"ref-{i}", redelivered=False, pending=0,
        priority="flash" if i == 4 else "routine") for i in range(5)])
asyncio.run(main())
"#;
    python(&py, script, &[theirs.to_str().unwrap(), &spool_key(), &e.subject_root]);
    assert_eq!(spool_files(&theirs), 5);
    let their_config = e.write_config_json_as("theirs.json", spool_section(&theirs), json!({}));
    let direct = e.write_config_json_as("direct.json", json!({"type": "file", "directory": e.out()}), json!({}));
    let out = nats_sink(&["replay-spool", their_config.to_str().unwrap(), direct.to_str().unwrap()]);
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let mut replayed: Vec<(String, u64, String)> = records(&e.out())
        .iter()
        .map(|r| {
            (r["stream"].as_str().unwrap().to_owned(), r["stream_sequence"].as_u64().unwrap(), r["payload"].to_string())
        })
        .collect();
    replayed.sort();
    let want: Vec<(String, u64, String)> =
        (0..5).map(|i| ("REFSTREAM".to_owned(), i + 1, format!("{{\"ref\":{i}}}"))).collect();
    assert_eq!(replayed, want);

    // nats-sink spools five messages; the reference reads them back.
    let ours = e.dir.path().join("our-spool");
    let spooling = e.write_config_json_as("ours.json", spool_section(&ours), json!({}));
    e.publish_range(0, 5, json).await;
    drain(&e, &spooling).await;
    let script = r#"
import base64, json, pathlib, sys
from nats_sinks.core.config import EncryptionConfig
from nats_sinks.spool.record import unwrap_record, envelope_from_plain_record
cfg = EncryptionConfig(enabled=True, key_id="edge", key_b64=sys.argv[2])
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.spool.json")):
    env = envelope_from_plain_record(unwrap_record(json.loads(p.read_text()), encryption=cfg))
    print(env.stream_sequence, env.subject, base64.b64encode(env.data).decode(), env.message_id)
"#;
    let printed = python(&py, script, &[ours.to_str().unwrap(), &spool_key()]);
    let mut seen: Vec<u64> = Vec::new();
    for line in printed.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let seq: u64 = parts[0].parse().unwrap();
        assert_eq!(parts[1], format!("{}.orders.k{}", e.subject_root, (seq - 1) % 3));
        assert_eq!(B64.decode(parts[2]).unwrap(), json(seq as usize - 1).to_vec());
        assert_eq!(parts[3], format!("msg-{}", seq - 1));
        seen.push(seq);
    }
    seen.sort_unstable();
    assert_eq!(seen, [1, 2, 3, 4, 5], "the reference reads every record nats-sink spooled");
}
