//! The file sink against real temp directories: files and their content, redelivery,
//! conflicts, duplicate policies, per-message failures, symlink refusal, gzip and health.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

use sinks_contract::testing::SinkExt as _;
use std::io::Read;
use std::path::{Path, PathBuf};

use sink_file::{Compression, DuplicatePolicy, FileSink, FileSinkConfig, FilenameStrategy};
use sinks_contract::testing::{self, classes, envelope, envelope_with, error_of};
use sinks_contract::{
    ConflictResolution, Envelope, ErrorClass, Headers, MessageOutcome, OutcomeClass, PayloadMode, Sink,
};

fn config(root: &Path) -> FileSinkConfig {
    FileSinkConfig::new(root)
}

async fn opened(config: FileSinkConfig) -> FileSink {
    testing::opened(FileSink::new(config).expect("valid config")).await
}

async fn write(sink: &FileSink, batch: &[Envelope]) -> Vec<MessageOutcome> {
    testing::write(sink, batch).await
}

fn seq_file(root: &Path, subject: &str, stream: &str, seq: u64, ext: &str) -> PathBuf {
    root.join(subject).join(format!("{stream}-{seq:020}{ext}"))
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("file exists")).expect("file is JSON")
}

/// Every entry below `dir`, recursively, as paths relative to it (sorted).
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("readable dir") {
            let path = entry.expect("entry").path();
            out.push(path.strip_prefix(base).expect("below base").display().to_string());
            if path.is_dir() && !path.is_symlink() {
                walk(base, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[tokio::test]
async fn n_envelopes_become_n_files_with_their_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = opened(config(dir.path())).await;
    assert_eq!(sink.name(), "file");
    assert_eq!(
        sink.capabilities(),
        sinks_contract::Capabilities::new().reports_duplicates(true).detects_conflicts(true)
    );
    let batch: Vec<Envelope> =
        (1..=20).map(|seq| envelope("ORDERS", seq, "orders.created", format!("{{\"n\":{seq}}}"))).collect();
    let outcomes = write(&sink, &batch).await;
    assert!(outcomes.iter().all(|o| matches!(o, MessageOutcome::Committed)), "{outcomes:?}");

    let root = sink.root().expect("resolved root").to_path_buf();
    let mut expected: Vec<String> = vec!["orders.created".into()];
    expected.extend((1..=20).map(|seq| format!("orders.created/ORDERS-{seq:020}.json")));
    expected.sort();
    assert_eq!(tree(&root), expected, "exactly one file per message, no temp files left");

    for seq in 1..=20 {
        let path = seq_file(&root, "orders.created", "ORDERS", seq, ".json");
        let bytes = std::fs::read(&path).expect("file");
        assert_eq!(bytes.last(), Some(&b'\n'));
        let value = read_json(&path);
        assert_eq!(value["schema"], "nats_sinks.file.message.v1");
        assert_eq!(value["schema_version"], 1);
        assert_eq!(value["payload"], serde_json::json!({ "n": seq }));
        assert_eq!(value["stream_sequence"], seq);
        assert_eq!(value["subject"], "orders.created");
        assert_eq!(value["payload_info"]["original_format"], "json");
        assert_eq!(value["metadata"]["jetstream"]["stream_sequence"], seq);
    }
}

#[tokio::test]
async fn outcomes_follow_input_order_across_parallel_tasks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.filename_strategy = FilenameStrategy::MessageId;
    let sink = opened(c).await;
    // Every third message lacks a message id and must fail, wherever its chunk runs.
    let batch: Vec<Envelope> = (1..=50)
        .map(|i| {
            let headers =
                if i % 3 == 0 { Headers::new() } else { Headers::new().with("Nats-Msg-Id", format!("id-{i}")) };
            envelope_with("ORDERS", i, &format!("orders.s{}", i % 7), "{}", headers, 1)
        })
        .collect();
    let outcomes = write(&sink, &batch).await;
    for (i, outcome) in (1..=50).zip(&outcomes) {
        let expected = if i % 3 == 0 { OutcomeClass::FailedPermanent } else { OutcomeClass::Committed };
        assert_eq!(outcome.class(), expected, "message {i}");
    }
}

#[tokio::test]
async fn redelivery_is_a_duplicate_and_leaves_the_file_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = opened(config(dir.path())).await;
    let first = envelope("ORDERS", 7, "orders.created", "{\"a\":1}");
    assert_eq!(classes(&write(&sink, &[first]).await), [OutcomeClass::Committed]);
    let path = seq_file(sink.root().expect("root"), "orders.created", "ORDERS", 7, ".json");
    let before = std::fs::read(&path).expect("file");

    let again = envelope_with("ORDERS", 7, "orders.created", "{\"a\":1}", Headers::new(), 2);
    let outcomes = write(&sink, &[again]).await;
    assert!(matches!(outcomes[0], MessageOutcome::Duplicate), "{outcomes:?}");
    assert_eq!(std::fs::read(&path).expect("file"), before, "the stored file is not rewritten");
}

/// What an outcome is, in one word a table can hold.
fn shape(outcome: &MessageOutcome) -> String {
    match outcome {
        MessageOutcome::Failed(e) if e.reason() == Some(sinks_contract::existing::SEQUENCE_REUSED) => {
            assert!(e.is_permanent(), "a reused sequence is refused for good: {e:?}");
            "sequence_reused".into()
        }
        MessageOutcome::Failed(e) if e.is_permanent() => format!("permanent: {}", e.message()),
        MessageOutcome::Conflict(ConflictResolution::KeptExisting) => "kept".into(),
        other => format!("{:?}", other.class()),
    }
}

/// A second event under the name of a stored one, for every policy and name strategy, as a
/// first delivery and as a redelivery (which is settled before staging): under stream
/// sequence names a different payload is a reused sequence whatever the policy, and the
/// stored file is never replaced; under message id names the policy decides.
#[tokio::test]
async fn a_different_payload_under_an_existing_name_by_policy_and_strategy() {
    use DuplicatePolicy as P;
    use FilenameStrategy::{MessageId, StreamSequence};
    let exists = "permanent: file already exists";
    // (names, policy, a different event, the file's event after it, that event again)
    let rows = [
        (StreamSequence, P::SkipExisting, "sequence_reused", 1, "Duplicate"),
        (StreamSequence, P::Overwrite, "sequence_reused", 1, "Duplicate"),
        (StreamSequence, P::Fail, exists, 1, exists),
        (MessageId, P::SkipExisting, "kept", 1, "Duplicate"),
        (MessageId, P::Overwrite, "Committed", 2, "Committed"),
        (MessageId, P::Fail, exists, 1, exists),
    ];
    for (strategy, policy, want, stored_v, again) in rows {
        for delivered in [1, 2] {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut c = config(dir.path());
            c.filename_strategy = strategy;
            c.duplicate_policy = policy;
            let sink = opened(c).await;
            let event = |v: u32, delivered: u64| {
                let headers = Headers::new().with("Nats-Msg-Id", "order-7");
                envelope_with("ORDERS", 7, "orders.created", format!("{{\"v\":{v}}}"), headers, delivered)
            };
            assert_eq!(classes(&write(&sink, &[event(1, 1)]).await), [OutcomeClass::Committed]);
            let what = format!("{strategy:?} {policy:?} delivered {delivered}");
            let outcomes = write(&sink, &[event(2, delivered)]).await;
            assert_eq!(shape(&outcomes[0]), want, "{what}");
            let root = sink.root().expect("root");
            let files: Vec<String> = tree(root).into_iter().filter(|f| f.ends_with(".json")).collect();
            assert_eq!(files.len(), 1, "{what}: one record, no temp file: {files:?}");
            assert_eq!(read_json(&root.join(&files[0]))["payload"]["v"], stored_v, "{what}");
            // The stored event again: `overwrite` rewrites it only under message id names.
            let same = write(&sink, &[event(stored_v, 2)]).await;
            assert_eq!(shape(&same[0]), again, "{what}: a redelivery of the stored event");
        }
    }
}

/// A sealed (encrypted) payload differs on every delivery: it cannot be compared, so a
/// redelivery under a stream-sequence name is a duplicate, never a reused sequence.
#[tokio::test]
async fn a_sealed_payload_is_not_taken_for_a_reused_sequence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = opened(config(dir.path())).await;
    let sealed = |body: &'static str| {
        envelope("ORDERS", 3, "orders.created", "{}").with_sealed_payload(bytes::Bytes::from_static(body.as_bytes()))
    };
    assert_eq!(classes(&write(&sink, &[sealed("{\"ciphertext\":\"a\"}")]).await), [OutcomeClass::Committed]);
    let again = write(&sink, &[sealed("{\"ciphertext\":\"b\"}")]).await;
    assert_eq!(shape(&again[0]), "Duplicate");
}

/// In a later epoch of the stream the same sequence names a file of its own, next to the
/// earlier event's; its redelivery is a duplicate.
#[tokio::test]
async fn a_later_epoch_writes_its_own_file_next_to_the_old_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = opened(config(dir.path())).await;
    let old = envelope("ORDERS", 7, "orders.created", "{\"v\":1}");
    assert_eq!(classes(&write(&sink, &[old]).await), [OutcomeClass::Committed]);
    let reused = envelope("ORDERS", 7, "orders.created", "{\"v\":2}");
    assert_eq!(shape(&write(&sink, std::slice::from_ref(&reused)).await[0]), "sequence_reused");
    let later = reused.with_stream_epoch(Some("e17".into()));
    assert_eq!(classes(&write(&sink, std::slice::from_ref(&later)).await), [OutcomeClass::Committed]);
    assert_eq!(classes(&write(&sink, &[later]).await), [OutcomeClass::Duplicate]);
    let root = sink.root().expect("root");
    assert_eq!(read_json(&seq_file(root, "orders.created", "ORDERS", 7, ".json"))["payload"]["v"], 1);
    let new = read_json(&seq_file(root, "orders.created", "ORDERS.e17", 7, ".json"));
    assert_eq!(
        (new["payload"]["v"].as_u64(), new["stream"].as_str(), new["stream_epoch"].as_str()),
        (Some(2), Some("ORDERS"), Some("e17"))
    );
    assert_eq!(tree(root).len(), 3, "the partition and two records");
}

#[tokio::test]
async fn duplicate_keys_inside_one_batch_are_committed_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = opened(config(dir.path())).await;
    let e = envelope("ORDERS", 9, "orders.created", "{}");
    let mut got = classes(&write(&sink, &[e.clone(), e]).await);
    got.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(got, [OutcomeClass::Committed, OutcomeClass::Duplicate]);
}

#[tokio::test]
async fn overwrite_replaces_the_file_under_message_id_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.duplicate_policy = DuplicatePolicy::Overwrite;
    c.filename_strategy = FilenameStrategy::MessageId;
    let sink = opened(c).await;
    let event = |v: u32| {
        envelope_with(
            "ORDERS",
            u64::from(v),
            "orders.created",
            format!("{{\"v\":{v}}}"),
            Headers::new().with("Nats-Msg-Id", "m-1"),
            1,
        )
    };
    write(&sink, &[event(1)]).await;
    let outcomes = write(&sink, &[event(2)]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed]);
    let root = sink.root().expect("root");
    let files = tree(root);
    assert_eq!(files.len(), 2, "the partition and one record, no temp file left behind: {files:?}");
    assert_eq!(read_json(&root.join(&files[1]))["payload"]["v"], 2);
}

#[tokio::test]
async fn fail_policy_refuses_an_existing_file_permanently() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.duplicate_policy = DuplicatePolicy::Fail;
    let sink = opened(c).await;
    let e = envelope("ORDERS", 1, "orders.created", "{\"v\":1}");
    assert_eq!(classes(&write(&sink, std::slice::from_ref(&e)).await), [OutcomeClass::Committed]);
    let outcomes = write(&sink, &[e]).await;
    let err = error_of(&outcomes[0]);
    assert!(err.is_permanent());
    assert_eq!(err.message(), "file already exists");
    assert_eq!(tree(sink.root().expect("root")).len(), 2, "no temp file left behind");
}

#[tokio::test]
async fn missing_message_id_fails_only_that_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.filename_strategy = FilenameStrategy::MessageId;
    c.partition_by_subject = false;
    let sink = opened(c).await;
    let batch = [
        envelope_with("ORDERS", 1, "orders.created", "{}", Headers::new().with("Nats-Msg-Id", "a/1"), 1),
        envelope("ORDERS", 2, "orders.created", "{}"),
        envelope_with("ORDERS", 3, "orders.created", "{}", Headers::new().with("Nats-Msg-Id", "a:1"), 1),
    ];
    let outcomes = write(&sink, &batch).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed, OutcomeClass::FailedPermanent, OutcomeClass::Committed]);
    let files = tree(sink.root().expect("root"));
    assert_eq!(files.len(), 2, "ids differing only in a sanitized character get distinct files: {files:?}");
    assert!(files.iter().all(|f| f.starts_with("a_1-") && f.ends_with(".json")), "{files:?}");
}

#[tokio::test]
async fn headers_only_message_cannot_use_the_payload_hash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.filename_strategy = FilenameStrategy::PayloadSha256;
    let sink = opened(c).await;
    let batch = [
        envelope_with("ORDERS", 1, "orders.created", "", Headers::new().with("Nats-Msg-Size", "42"), 1),
        envelope("ORDERS", 2, "orders.created", "{}"),
    ];
    assert_eq!(classes(&write(&sink, &batch).await), [OutcomeClass::FailedPermanent, OutcomeClass::Committed]);
}

#[tokio::test]
async fn symlinked_partition_pointing_outside_the_root_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("outside");
    let sink = opened(config(dir.path())).await;
    let root = sink.root().expect("root").to_path_buf();
    std::os::unix::fs::symlink(outside.path(), root.join("orders.created")).expect("symlink");

    let batch = [envelope("ORDERS", 1, "orders.created", "{}"), envelope("ORDERS", 2, "orders.other", "{}")];
    let outcomes = write(&sink, &batch).await;
    let err = error_of(&outcomes[0]);
    assert!(err.is_permanent());
    assert_eq!(err.message(), "refusing symlinked path");
    assert!(matches!(outcomes[1], MessageOutcome::Committed));
    assert!(tree(outside.path()).is_empty(), "nothing was written through the link");
}

#[tokio::test]
async fn symlink_at_the_final_name_is_never_followed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("outside");
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "secret").expect("secret");
    let sink = opened(config(dir.path())).await;
    let root = sink.root().expect("root").to_path_buf();
    std::fs::create_dir(root.join("orders.created")).expect("partition");
    std::os::unix::fs::symlink(&secret, seq_file(&root, "orders.created", "ORDERS", 1, ".json")).expect("symlink");

    let outcomes = write(&sink, &[envelope("ORDERS", 1, "orders.created", "{}")]).await;
    assert_eq!(error_of(&outcomes[0]).message(), "refusing symlinked path");
    assert_eq!(std::fs::read_to_string(&secret).expect("secret"), "secret");
}

#[tokio::test]
async fn gzip_round_trip_and_redelivery() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = FileSinkConfig::from_section(&sinks_contract::config::SinkSection(
        serde_json::json!({"type": "file", "directory": dir.path(), "compression": "gzip", "compression_level": 9})
            .as_object()
            .cloned()
            .expect("object"),
    ))
    .expect("gzip config");
    assert_eq!(c.compression, Compression::Gzip);
    assert_eq!(c.extension.as_deref(), Some(".json.gz"));
    c.partition_by_subject = false;
    let sink = opened(c).await;
    let e = envelope("ORDERS", 5, "orders.created", "{\"big\":123456789012345678901234567890}");
    assert_eq!(classes(&write(&sink, std::slice::from_ref(&e)).await), [OutcomeClass::Committed]);

    let path = sink.root().expect("root").join(format!("ORDERS-{:020}.json.gz", 5));
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("gz file")).read_to_string(&mut text).expect("gzip");
    assert!(text.contains("\"payload\":{\"big\":123456789012345678901234567890}"), "payload kept verbatim");
    assert!(text.ends_with("}\n"));

    let outcomes = write(&sink, &[e]).await;
    assert!(matches!(outcomes[0], MessageOutcome::Duplicate), "{outcomes:?}");
    let outcomes = write(&sink, &[envelope("ORDERS", 5, "orders.created", "{}")]).await;
    assert_eq!(shape(&outcomes[0]), "sequence_reused", "a different event under the stored file's sequence");
}

#[tokio::test]
async fn non_json_under_json_only_is_a_serialization_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.payload_mode = PayloadMode::JsonOnly;
    let sink = opened(c).await;
    let batch = [envelope("ORDERS", 1, "orders.created", "not json"), envelope("ORDERS", 2, "orders.created", "[1]")];
    let outcomes = write(&sink, &batch).await;
    let err = error_of(&outcomes[0]);
    assert!(err.is_permanent());
    assert_eq!(err.error_type(), "SerializationError");
    assert!(!err.display_chain().contains("not json"), "payload bytes never reach the error");
    assert!(matches!(outcomes[1], MessageOutcome::Committed));
}

#[tokio::test]
async fn wrapped_payloads_and_unfsynced_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.fsync = false;
    c.pretty = true;
    c.include_metadata = false;
    let sink = opened(c).await;
    let outcomes = write(&sink, &[envelope("ORDERS", 1, "orders.created", vec![0xff, 0x00])]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed]);
    let value = read_json(&seq_file(sink.root().expect("root"), "orders.created", "ORDERS", 1, ".json"));
    assert_eq!(value["payload"]["payload"], "/wA=");
    assert_eq!(value["payload_info"]["original_format"], "bytes");
    assert!(value.get("metadata").is_none());
}

#[tokio::test]
async fn open_creates_or_refuses_the_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nested = dir.path().join("a/b/c");
    let sink = opened(config(&nested)).await;
    assert!(nested.is_dir());
    assert_eq!(sink.root(), Some(nested.canonicalize().expect("canonical").as_path()));

    let mut c = config(&dir.path().join("missing"));
    c.create_directory = false;
    let err = FileSink::new(c).expect("valid").open().await.expect_err("missing root");
    assert_eq!(err.class(), ErrorClass::Config);
    assert_eq!(err.field(), Some("sink.directory"));
    assert!(err.message().contains("missing` does not exist"), "{}", err.message());

    let file = dir.path().join("plain-file");
    std::fs::write(&file, "x").expect("file");
    let err = FileSink::new(config(&file)).expect("valid").open().await.expect_err("not a directory");
    assert_eq!(err.class(), ErrorClass::Config);
    assert_eq!(err.field(), Some("sink.directory"));
    assert!(err.message().contains("plain-file` is not a directory"), "{}", err.message());

    let mut bad = config(dir.path());
    bad.compression_level = 0;
    let err = FileSink::new(bad).expect_err("invalid level");
    assert_eq!(err.issues[0].path, "sink.compression_level");
}

#[tokio::test]
async fn health_check_fails_after_the_root_is_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    let sink = opened(config(&root)).await;
    sink.health_check().await.expect("healthy");
    assert!(tree(&root).is_empty(), "the probe file is removed");

    std::fs::remove_dir_all(&root).expect("remove root");
    let err = sink.health_check().await.expect_err("root is gone");
    assert_eq!(err.class(), ErrorClass::Temporary);

    let outcomes = write(&sink, &[envelope("ORDERS", 1, "orders.created", "{}")]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::FailedTemporary], "a missing root is retried, not dead-lettered");
    assert!(!root.exists(), "the root is not silently recreated");
}

#[tokio::test]
async fn reconcile_finds_every_payload_kind_equal_and_an_edit_different() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = opened(config(dir.path())).await;
    // JSON with the whitespace a shell's `nats pub` leaves around it (stored trimmed), compact
    // JSON, text and bytes (stored in envelopes): each must read back as equal.
    let payloads: Vec<Vec<u8>> =
        vec![b" {\"n\": 1}\n".to_vec(), b"{\"n\":2}".to_vec(), b"plain text".to_vec(), vec![0xff, 0x00, 0x10]];
    let batch: Vec<Envelope> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| envelope("ORDERS", i as u64 + 1, "orders.created", p.clone()))
        .collect();
    assert_eq!(classes(&write(&sink, &batch).await), vec![OutcomeClass::Committed; 4]);
    assert_eq!(sink.read_back_batch(&batch).await.unwrap(), vec![sinks_contract::Presence::Equal; 4]);
    // An edit of the stored payload that keeps the recorded fingerprint is still found.
    let path = seq_file(dir.path(), "orders.created", "ORDERS", 1, ".json");
    let text = std::fs::read_to_string(&path).unwrap().replace("\"n\":1", "\"n\":9").replace("\"n\": 1", "\"n\": 9");
    std::fs::write(&path, text).unwrap();
    let found = sink.read_back_batch(&batch).await.unwrap();
    assert_eq!(found[0], sinks_contract::Presence::Different);
    assert_eq!(found[1..], [sinks_contract::Presence::Equal; 3]);
}

/// The health check writes a record's worth of bytes: on a full disk it fails (temporarily),
/// as the writes do, where an empty probe file would still be made (it needs an inode, no
/// block). On a real full filesystem: a private 1 MiB tmpfs (the tests run as root, as the
/// soak's disk-full fault does).
#[tokio::test]
async fn the_health_check_fails_on_a_full_disk_and_recovers_when_space_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("out");
    std::fs::create_dir_all(&mount).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs"])
        .arg(&mount)
        .status()
        .is_ok_and(|s| s.success());
    assert!(mounted, "mounting a tmpfs needs root (the tests and the soak run as root)");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mount.clone());
    let sink = opened(config(&mount)).await;
    sink.health_check().await.unwrap();
    let ballast = mount.join(".ballast");
    {
        use std::io::Write as _;
        let mut file = std::fs::File::create(&ballast).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
    }
    let failed = sink.health_check().await.unwrap_err();
    assert_eq!(failed.class(), ErrorClass::Temporary, "{}", failed.display_chain());
    assert!(failed.display_chain().contains("disk full"), "{}", failed.display_chain());
    std::fs::remove_file(&ballast).unwrap();
    sink.health_check().await.unwrap();
}
