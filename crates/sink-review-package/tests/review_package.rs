//! The review package sink on real directories: what the certification does not reach.
//! Redeliveries and reused sequences against the stored manifest, a crash's temporary
//! directory cleaned and rewritten, `verify` catching every kind of damage (and reconcile
//! seeing it), packages without their payload, the `fail` policy, the payload limit, file
//! modes, sealed payloads, compact files and a symlink at a package's name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use sink_review_package::package::{self, package_id};
use sink_review_package::verify::{self, PackageState};
use sink_review_package::{DuplicatePolicy, ReviewPackageSink, ReviewPackageSinkConfig};
use sinks_contract::testing::{classes, envelope, envelope_with, write};
use sinks_contract::{Envelope, Headers, MessageOutcome, OutcomeClass, Presence, Sink};

/// An opened sink on `dir/out` with `config` changed by `edit`.
async fn sink(dir: &Path, edit: impl FnOnce(&mut ReviewPackageSinkConfig)) -> ReviewPackageSink {
    let mut config = ReviewPackageSinkConfig::new(dir.join("out"));
    edit(&mut config);
    let sink = ReviewPackageSink::new(config).unwrap();
    sink.open().await.unwrap();
    sink
}

fn root(sink: &ReviewPackageSink) -> PathBuf {
    sink.root().unwrap().to_path_buf()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

fn redelivery(e: &Envelope) -> Envelope {
    let js = e.jetstream();
    envelope_with(&js.stream, js.stream_sequence, e.subject(), e.payload().clone(), Headers::new(), 2)
}

fn reason(outcome: &MessageOutcome) -> Option<&str> {
    match outcome {
        MessageOutcome::Failed(e) => e.reason(),
        _ => None,
    }
}

async fn presence(sink: &ReviewPackageSink, batch: &[Envelope]) -> Vec<Presence> {
    let reader = sink.read_back().expect("read-back is supported");
    reader.read(batch).await.unwrap()
}

#[tokio::test]
async fn a_redelivery_is_a_duplicate_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), |_| {}).await;
    let e = envelope("ORDERS", 1, "orders.created", r#"{"id":1}"#);
    assert_eq!(classes(&write(&sink, std::slice::from_ref(&e)).await), [OutcomeClass::Committed]);
    let id = package_id(&e).unwrap();
    let manifest = fs::read(root(&sink).join(&id).join("manifest.json")).unwrap();
    // A first delivery whose package exists (found by placing) and a redelivery (looked up
    // before writing) are both duplicates.
    let outcomes = write(&sink, &[e.clone(), redelivery(&e)]).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Duplicate, OutcomeClass::Duplicate]);
    assert_eq!(fs::read(root(&sink).join(&id).join("manifest.json")).unwrap(), manifest, "untouched");
    assert_eq!(entries(&root(&sink)), [id]);
    assert_eq!(presence(&sink, &[e]).await, [Presence::Equal]);
}

#[tokio::test]
async fn another_event_under_a_stored_sequence_is_refused_and_the_package_kept() {
    let dir = tempfile::tempdir().unwrap();
    for policy in [DuplicatePolicy::SkipExisting, DuplicatePolicy::Fail] {
        let sink = sink(&dir.path().join(policy.as_str()), |c| c.duplicate_policy = policy).await;
        let first = envelope("ORDERS", 5, "orders.created", "first event");
        assert_eq!(classes(&write(&sink, std::slice::from_ref(&first)).await), [OutcomeClass::Committed]);
        let other = envelope("ORDERS", 5, "orders.created", "another event");
        for e in [other.clone(), redelivery(&other)] {
            let outcome = write(&sink, &[e]).await.remove(0);
            assert_eq!(reason(&outcome), Some("sequence_reused"), "{policy:?}: {outcome:?}");
            assert_eq!(outcome.class(), OutcomeClass::FailedPermanent);
        }
        let payload = fs::read(root(&sink).join(package_id(&first).unwrap()).join("payload.bin")).unwrap();
        assert_eq!(payload, b"first event", "the stored package is kept");
        assert_eq!(presence(&sink, &[first, other]).await, [Presence::Equal, Presence::Different]);
    }
}

#[tokio::test]
async fn a_temporary_directory_left_by_a_crash_is_never_a_package_and_is_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), |_| {}).await;
    let root = root(&sink);
    let e = envelope("ORDERS", 9, "orders.created", "payload");
    let id = package_id(&e).unwrap();
    // What a crash between the first file and the rename leaves.
    let temp = root.join(format!(".{id}.tmp"));
    fs::create_dir(&temp).unwrap();
    fs::write(temp.join("metadata.json"), b"{\"trunc").unwrap();
    let report = verify::verify_root(&root).unwrap();
    assert_eq!(report.counts(), (0, 1, 0), "{report:?}");
    assert_eq!(presence(&sink, std::slice::from_ref(&e)).await, [Presence::Missing], "not taken for a package");
    // The message was not acknowledged: its redelivery cleans and writes the package.
    assert_eq!(classes(&write(&sink, &[redelivery(&e)]).await), [OutcomeClass::Committed]);
    assert_eq!(entries(&root), std::slice::from_ref(&id), "the temporary directory is gone");
    let report = verify::verify_root(&root).unwrap();
    assert_eq!(report.counts(), (1, 0, 0), "{report:?}");
    assert_eq!(fs::read(root.join(&id).join("payload.bin")).unwrap(), b"payload");
}

/// Every kind of damage is caught by `verify` (and seen by reconcile): the checker fails
/// when a package is broken, which is what makes its pass worth something.
#[tokio::test]
async fn verify_catches_tampered_and_incomplete_packages() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), |_| {}).await;
    let root = root(&sink);
    let batch: Vec<Envelope> =
        (1..=7).map(|seq| envelope("ORDERS", seq, "orders.created", format!("{{\"seq\":{seq}}}"))).collect();
    assert!(write(&sink, &batch).await.iter().all(|o| o.class() == OutcomeClass::Committed));
    assert!(sink.verify().await.unwrap().all_intact());
    let pkg = |i: usize| root.join(package_id(&batch[i]).unwrap());
    // 0: intact. 1: payload edited. 2: a file removed. 3: a file added. 4: manifest edited
    // (its hash in hashes.json no longer matches). 5: hashes.json removed. 6: a package
    // moved under another id.
    fs::write(pkg(1).join("payload.bin"), b"{\"seq\":999}").unwrap();
    fs::remove_file(pkg(2).join("metadata.json")).unwrap();
    fs::write(pkg(3).join("note.txt"), b"added").unwrap();
    let manifest = fs::read_to_string(pkg(4).join("manifest.json")).unwrap();
    fs::write(pkg(4).join("manifest.json"), manifest.replace("orders.created", "orders.changed")).unwrap();
    fs::remove_file(pkg(5).join("hashes.json")).unwrap();
    let moved = root.join(format!("pkg-{}", "0".repeat(32)));
    fs::rename(pkg(6), &moved).unwrap();
    let report = sink.verify().await.unwrap();
    let state = |i: usize| {
        let name = if i == 6 {
            moved.file_name().unwrap().to_string_lossy().into_owned()
        } else {
            package_id(&batch[i]).unwrap()
        };
        report.packages.iter().find(|p| p.name == name).unwrap().state.clone()
    };
    assert_eq!(state(0), PackageState::Intact);
    let problems = |s: PackageState| match s {
        PackageState::Tampered { problems } => ("tampered", problems),
        PackageState::Incomplete { problems } => ("incomplete", problems),
        PackageState::Intact => ("intact", Vec::new()),
    };
    let (word, p) = problems(state(1));
    assert!(word == "tampered" && p[0].starts_with("payload.bin: SHA-256"), "{p:?}");
    let (word, p) = problems(state(2));
    assert!(word == "incomplete" && p == ["metadata.json is missing"], "{p:?}");
    let (word, p) = problems(state(3));
    assert!(word == "tampered" && p == ["note.txt: a file no list names"], "{p:?}");
    let (word, p) = problems(state(4));
    assert!(word == "tampered" && p.iter().any(|l| l.starts_with("manifest.json: SHA-256")), "{p:?}");
    let (word, p) = problems(state(5));
    assert!(word == "incomplete" && p == ["hashes.json is missing"], "{p:?}");
    let (word, p) = problems(state(6));
    assert!(word == "tampered" && p.iter().any(|l| l.contains("names package")), "{p:?}");
    assert_eq!(report.counts(), (1, 2, 4));
    let seen = presence(&sink, &batch).await;
    assert_eq!(seen[0], Presence::Equal);
    assert_eq!(&seen[1..6], [Presence::Different; 5], "a damaged package is not this message's");
    assert_eq!(seen[6], Presence::Missing, "moved away");
}

#[tokio::test]
async fn without_the_payload_the_manifest_keeps_its_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), |c| c.include_payload = false).await;
    let e = envelope("ORDERS", 3, "orders.created", "secret payload");
    assert_eq!(classes(&write(&sink, std::slice::from_ref(&e)).await), [OutcomeClass::Committed]);
    let dir = root(&sink).join(package_id(&e).unwrap());
    assert_eq!(entries(&dir), ["hashes.json", "manifest.json", "metadata.json"]);
    let manifest: serde_json::Value = serde_json::from_slice(&fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["payload_sha256"], package::sha256_hex(b"secret payload"));
    assert_eq!(classes(&write(&sink, &[redelivery(&e)]).await), [OutcomeClass::Duplicate]);
    let other = write(&sink, &[envelope("ORDERS", 3, "orders.created", "another")]).await.remove(0);
    assert_eq!(reason(&other), Some("sequence_reused"));
    assert!(sink.verify().await.unwrap().all_intact());
}

#[tokio::test]
async fn a_package_that_cannot_be_compared_is_a_duplicate_unless_the_policy_is_fail() {
    let dir = tempfile::tempdir().unwrap();
    for (policy, expected) in [
        (DuplicatePolicy::SkipExisting, OutcomeClass::Duplicate),
        (DuplicatePolicy::Fail, OutcomeClass::FailedPermanent),
    ] {
        let sink = sink(&dir.path().join(policy.as_str()), |c| c.duplicate_policy = policy).await;
        let e = envelope("ORDERS", 4, "orders.created", "x");
        write(&sink, std::slice::from_ref(&e)).await;
        fs::remove_file(root(&sink).join(package_id(&e).unwrap()).join("manifest.json")).unwrap();
        assert_eq!(classes(&write(&sink, &[redelivery(&e)]).await), [expected], "{policy:?}");
    }
}

#[tokio::test]
async fn a_payload_over_the_limit_fails_permanently_and_alone() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), |c| c.max_payload_bytes = 8).await;
    let batch = [
        envelope("ORDERS", 1, "a", vec![b'x'; 8]),
        envelope("ORDERS", 2, "a", vec![b'x'; 9]),
        envelope("ORDERS", 3, "a", Bytes::new()),
    ];
    let outcomes = write(&sink, &batch).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed, OutcomeClass::FailedPermanent, OutcomeClass::Committed]);
    let MessageOutcome::Failed(e) = &outcomes[1] else { unreachable!() };
    assert_eq!(e.message(), "review package payload exceeds max_payload_bytes");
    assert_eq!(entries(&root(&sink)).len(), 2, "nothing of the refused message is left");
}

#[tokio::test]
async fn files_and_directories_get_the_configured_modes() {
    let dir = tempfile::tempdir().unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let private = sink(&dir.path().join("private"), |_| {}).await;
    let e = envelope("ORDERS", 1, "a", "{}");
    write(&private, std::slice::from_ref(&e)).await;
    let pkg = root(&private).join(package_id(&e).unwrap());
    assert_eq!(mode(&pkg), 0o700);
    assert!(entries(&pkg).iter().all(|f| mode(&pkg.join(f)) == 0o600));
    let shared = sink(&dir.path().join("shared"), |c| {
        c.file_mode = serde_json::from_value(serde_json::json!("0640")).unwrap();
        c.dir_mode = serde_json::from_value(serde_json::json!("0750")).unwrap();
    })
    .await;
    write(&shared, std::slice::from_ref(&e)).await;
    let pkg = root(&shared).join(package_id(&e).unwrap());
    assert_eq!(mode(&pkg), 0o750);
    assert!(entries(&pkg).iter().all(|f| mode(&pkg.join(f)) == 0o640));
}

#[tokio::test]
async fn a_sealed_payload_stays_sealed_and_its_redelivery_is_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), |_| {}).await;
    let sealed = |nonce: &str| {
        envelope("SECURE", 1, "secure.a", "x")
            .with_sealed_payload(Bytes::from(format!("{{\"ciphertext\":\"{nonce}\"}}")))
    };
    assert_eq!(classes(&write(&sink, &[sealed("first")]).await), [OutcomeClass::Committed]);
    // Every delivery encrypts anew: a different ciphertext of the same message.
    assert_eq!(classes(&write(&sink, &[sealed("second")]).await), [OutcomeClass::Duplicate]);
    let payload = fs::read(root(&sink).join(package_id(&sealed("x")).unwrap()).join("payload.bin")).unwrap();
    assert_eq!(payload, b"{\"ciphertext\":\"first\"}", "the payload is stored as delivered: sealed");
}

#[tokio::test]
async fn compact_files_without_pretty() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), |c| c.pretty = false).await;
    let e = envelope("ORDERS", 1, "a", "{}");
    write(&sink, std::slice::from_ref(&e)).await;
    let manifest = fs::read_to_string(root(&sink).join(package_id(&e).unwrap()).join("manifest.json")).unwrap();
    assert!(manifest.starts_with("{\"created_at\":\"") && manifest.ends_with("}\n") && manifest.lines().count() == 1);
    assert!(sink.verify().await.unwrap().all_intact());
}

#[tokio::test]
async fn a_symlink_at_a_package_name_is_refused_and_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), |_| {}).await;
    let e = envelope("ORDERS", 1, "a", "{}");
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root(&sink).join(package_id(&e).unwrap())).unwrap();
    let outcome = write(&sink, &[e]).await.remove(0);
    assert_eq!(outcome.class(), OutcomeClass::FailedPermanent, "{outcome:?}");
    assert!(entries(&elsewhere).is_empty(), "nothing was written through the link");
}

#[tokio::test]
async fn a_root_that_disappears_fails_temporarily() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), |_| {}).await;
    fs::remove_dir_all(root(&sink)).unwrap();
    let outcome = write(&sink, &[envelope("ORDERS", 1, "a", "{}")]).await.remove(0);
    assert_eq!(outcome.class(), OutcomeClass::FailedTemporary);
    assert!(sink.health_check().await.is_err());
}
