//! The file sink's batch mode against real directories: object names from the sequences
//! they hold, redeliveries found however they are grouped, a crash between the manifest and
//! the object rolled forward, two writers on one directory, poison alone, closing by age and
//! size, reconcile, and Parquet objects read back.
#![allow(clippy::unwrap_used)]

use sinks_contract::testing::SinkExt as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sink_file::certify::{batch_objects, read_batch_records};
use sink_file::{FileSink, FileSinkConfig};
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, FlushScope, MessageOutcome, OutcomeClass, Presence, Settled, Sink};
use sinks_toolkit::batch::manifest::Manifest;
use sinks_toolkit::batch::naming;

fn sink(root: &Path, batch: serde_json::Value) -> FileSink {
    sink_with(root, batch, serde_json::json!({}))
}

fn sink_with(root: &Path, batch: serde_json::Value, extra: serde_json::Value) -> FileSink {
    let mut section = serde_json::json!({"directory": root, "mode": "batch", "batch": batch});
    for (k, v) in extra.as_object().unwrap() {
        section[k] = v.clone();
    }
    FileSink::new(serde_json::from_value::<FileSinkConfig>(section).unwrap()).unwrap()
}

fn msg(seq: u64) -> Envelope {
    envelope("ORDERS", seq, &format!("orders.k{}", seq % 2), format!(r#"{{"seq":{seq}}}"#))
}

/// Stream sequence → how many rows hold it, over every object below `root`.
fn counts(root: &Path) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for (key, _) in read_batch_records(root).unwrap() {
        *out.entry(key.rsplit(':').next().unwrap().parse::<u64>().unwrap()).or_default() += 1;
    }
    out
}

fn manifests(root: &Path) -> Vec<Manifest> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "manifest") {
                out.push(Manifest::from_bytes(&std::fs::read(&path).unwrap()).unwrap());
            }
        }
    }
    out.sort_by_key(|m| (m.partition.clone(), m.slot));
    out
}

fn temp_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if entry.file_name().to_string_lossy().ends_with(".tmp") {
                out.push(path);
            }
        }
    }
    out
}

/// The final outcome of every message: written, then flushed with `All`.
async fn write_all(sink: &FileSink, batch: &[Envelope]) -> BTreeMap<u64, MessageOutcome> {
    let outcomes = sink.write(batch, sinks_contract::DEFAULT_BUDGET).await.unwrap();
    let mut out = BTreeMap::new();
    for (e, o) in batch.iter().zip(outcomes) {
        if !matches!(o, MessageOutcome::Pending) {
            out.insert(e.jetstream().stream_sequence, o);
        }
    }
    for Settled { sequence, outcome, .. } in sink.flush_held(FlushScope::All).await {
        out.insert(sequence, outcome);
    }
    out
}

/// Every message exactly once, no two manifests of a partition sharing a sequence, every
/// manifest's object there and holding exactly its sequences, no temporary file left.
fn assert_exactly_once(root: &Path, want: impl IntoIterator<Item = u64>) {
    let want: Vec<u64> = want.into_iter().collect();
    let got = counts(root);
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), want, "every message is stored");
    assert!(got.values().all(|n| *n == 1), "no message is stored twice: {got:?}");
    let mut seen: BTreeMap<(String, u64), u64> = BTreeMap::new();
    for m in manifests(root) {
        for seq in m.sequence_set().unwrap().iter() {
            if let Some(other) = seen.insert((m.partition.clone(), seq), m.slot) {
                panic!("sequence {seq} in slots {other} and {} of one partition", m.slot);
            }
        }
        let object = root.join(&m.object);
        assert!(object.is_file(), "{} is committed", m.object);
        let (_, first, last) = naming::parse_object_name(object.file_name().unwrap().to_str().unwrap()).unwrap();
        assert_eq!((first, last), (m.first, m.last), "the name carries the first and last sequence");
    }
    assert!(temp_files(root).is_empty(), "no temporary file is left: {:?}", temp_files(root));
}

#[tokio::test]
async fn objects_are_named_by_their_sequences_and_hold_each_message_once() {
    let dir = tempfile::tempdir().unwrap();
    let s =
        sink(dir.path(), serde_json::json!({"max_messages": 10, "partition_template": "{stream}/{subject_token[1]}"}));
    s.open().await.unwrap();
    assert!(s.holding().is_some());
    let msgs: Vec<Envelope> = (1..=50).map(msg).collect();
    let mut committed = 0;
    for chunk in msgs.chunks(7) {
        let outcomes = s.write(chunk, sinks_contract::DEFAULT_BUDGET).await.unwrap();
        assert!(outcomes.iter().all(|o| matches!(o, MessageOutcome::Pending)), "{outcomes:?}");
    }
    // Five objects of ten per subject are full; the due flush commits exactly those.
    for settled in s.flush_held(FlushScope::Due).await {
        assert!(matches!(settled.outcome, MessageOutcome::Committed));
        committed += 1;
    }
    assert_eq!(committed, 40, "four full objects of ten");
    let rest = s.flush_held(FlushScope::All).await;
    assert_eq!(rest.len(), 10);
    assert!(s.flush_held(FlushScope::All).await.is_empty(), "each outcome is reported once");
    assert_exactly_once(dir.path(), 1..=50);
    let names: Vec<String> = batch_objects(dir.path())
        .unwrap()
        .iter()
        .map(|(p, _, _)| p.strip_prefix(dir.path()).unwrap().display().to_string())
        .collect();
    assert!(
        names.contains(&"ORDERS/k1/ORDERS-00000000000000000001-00000000000000000019.ndjson".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"ORDERS/k0/ORDERS-00000000000000000002-00000000000000000020.ndjson".to_owned()),
        "{names:?}"
    );
    let slots: Vec<(String, u64)> = manifests(dir.path()).into_iter().map(|m| (m.partition, m.slot)).collect();
    assert_eq!(slots.iter().filter(|(p, _)| p == "ORDERS/k0").map(|(_, s)| *s).collect::<Vec<_>>(), [0, 1, 2]);
    let e = msg(3);
    let Some(sinks_contract::DestinationRef::File { path }) = s.destination_of(&e, &MessageOutcome::Committed) else {
        panic!("a destination")
    };
    assert!(path.ends_with("ORDERS/k1/ORDERS-00000000000000000001-00000000000000000019.ndjson"), "{path}");
}

#[tokio::test]
async fn a_redelivery_is_a_duplicate_however_it_is_grouped() {
    let dir = tempfile::tempdir().unwrap();
    let first = sink(dir.path(), serde_json::json!({"max_messages": 7}));
    first.open().await.unwrap();
    let msgs: Vec<Envelope> = (1..=40).map(msg).collect();
    for chunk in msgs.chunks(9) {
        first.write(chunk, sinks_contract::DEFAULT_BUDGET).await.unwrap();
    }
    let settled = first.flush_held(FlushScope::All).await;
    assert_eq!(settled.len(), 40);
    // A restart with another object size: the redeliveries come mixed with new messages.
    drop(first);
    let second = sink(dir.path(), serde_json::json!({"max_messages": 13}));
    second.open().await.unwrap();
    let again: Vec<Envelope> =
        [3u64, 60, 17, 41, 35, 36, 59].into_iter().chain(42..=58).chain(37..=40).map(msg).collect();
    let outcomes = write_all(&second, &again).await;
    for (seq, outcome) in &outcomes {
        let want = if *seq <= 40 { OutcomeClass::Duplicate } else { OutcomeClass::Committed };
        assert_eq!(outcome.class(), want, "sequence {seq}");
    }
    assert_exactly_once(dir.path(), 1..=60);
}

/// A different event under a committed sequence (the stream was re-created) is refused as
/// `sequence_reused`, by the writer that committed it and by a restarted one; in a later
/// epoch the same sequences go into objects and a manifest log of their own, their
/// outcomes name the stream as the runner does, and their redeliveries are duplicates.
#[tokio::test]
async fn a_reused_sequence_is_refused_and_a_later_epoch_has_objects_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let old: Vec<Envelope> = (1..=10).map(msg).collect();
    let reused: Vec<Envelope> = (1..=10)
        .map(|seq| envelope("ORDERS", seq, &format!("orders.k{}", seq % 2), format!(r#"{{"seq":{seq},"new":true}}"#)))
        .collect();
    let first = sink(dir.path(), serde_json::json!({"max_messages": 4}));
    first.open().await.unwrap();
    assert!(write_all(&first, &old).await.values().all(|o| o.class() == OutcomeClass::Committed));
    let refused = |outcomes: &BTreeMap<u64, MessageOutcome>| {
        assert_eq!(outcomes.len(), 10);
        for (seq, o) in outcomes {
            let MessageOutcome::Failed(e) = o else { panic!("sequence {seq}: {o:?}") };
            assert!(e.is_permanent() && e.reason() == Some("sequence_reused"), "sequence {seq}: {e:?}");
        }
    };
    refused(&write_all(&first, &reused).await);
    let restarted = sink(dir.path(), serde_json::json!({"max_messages": 3}));
    restarted.open().await.unwrap();
    refused(&write_all(&restarted, &reused).await);
    assert_exactly_once(dir.path(), 1..=10);

    let epoch: Vec<Envelope> = reused.iter().map(|e| e.clone().with_stream_epoch(Some("e2".into()))).collect();
    let written = restarted.write(&epoch, sinks_contract::DEFAULT_BUDGET).await.unwrap();
    assert!(written.iter().all(|o| matches!(o, MessageOutcome::Pending)), "{written:?}");
    let settled = restarted.flush_held(FlushScope::All).await;
    assert_eq!(settled.len(), 10);
    for s in &settled {
        assert_eq!((s.stream.as_str(), s.outcome.class()), ("ORDERS", OutcomeClass::Committed), "{s:?}");
    }
    assert!(write_all(&restarted, &epoch).await.values().all(|o| o.class() == OutcomeClass::Duplicate));
    let mut keys: Vec<String> = read_batch_records(dir.path()).unwrap().into_iter().map(|(k, _)| k).collect();
    keys.sort();
    let mut want: Vec<String> = (1..=10)
        .flat_map(|seq| [format!("stream-sequence:ORDERS:{seq}"), format!("stream-sequence:ORDERS.e2:{seq}")])
        .collect();
    want.sort();
    assert_eq!(keys, want, "both epochs' events, each once");
    let later: Vec<Manifest> = manifests(dir.path()).into_iter().filter(|m| m.stream == "ORDERS.e2").collect();
    assert!(!later.is_empty(), "the later epoch has a manifest log of its own");
    for m in later {
        let name = m.object.rsplit('/').next().unwrap();
        assert!(name.starts_with("ORDERS.e2-") && m.partition.starts_with("ORDERS.e2"), "{m:?}");
    }
    let fresh = sink(dir.path(), serde_json::json!({}));
    assert_eq!(
        fresh.read_back_batch(&[old[0].clone(), epoch[0].clone()]).await.unwrap(),
        [Presence::Equal, Presence::Equal]
    );
}

/// The object of slot 0 in `root`, moved back to the temporary name its manifest names: the
/// state a writer killed after creating the manifest and before completing leaves.
fn uncomplete(root: &Path) -> Manifest {
    let m = manifests(root).into_iter().find(|m| m.slot == 0).unwrap();
    let object = root.join(&m.object);
    let temp = object.parent().unwrap().join(m.staging["temp"].as_str().unwrap());
    std::fs::rename(&object, &temp).unwrap();
    m
}

#[tokio::test]
async fn a_crash_between_manifest_and_object_is_rolled_forward() {
    let dir = tempfile::tempdir().unwrap();
    let first = sink(dir.path(), serde_json::json!({}));
    first.open().await.unwrap();
    write_all(&first, &(1..=10).map(msg).collect::<Vec<_>>()).await;
    let m = uncomplete(dir.path());
    assert!(counts(dir.path()).is_empty(), "nothing visible: the object was never completed");
    drop(first);
    // The restarted writer gets the unacknowledged messages again.
    let second = sink(dir.path(), serde_json::json!({}));
    second.open().await.unwrap();
    let outcomes = write_all(&second, &(1..=12).map(msg).collect::<Vec<_>>()).await;
    for (seq, outcome) in outcomes {
        let want = if seq <= 10 { OutcomeClass::Duplicate } else { OutcomeClass::Committed };
        assert_eq!(outcome.class(), want, "sequence {seq}");
    }
    assert!(dir.path().join(&m.object).is_file(), "the object was completed from its staging");
    assert_exactly_once(dir.path(), 1..=12);
}

#[tokio::test]
async fn a_manifest_without_object_or_staging_is_void() {
    let dir = tempfile::tempdir().unwrap();
    let first = sink(dir.path(), serde_json::json!({}));
    first.open().await.unwrap();
    write_all(&first, &(1..=5).map(msg).collect::<Vec<_>>()).await;
    let m = uncomplete(dir.path());
    let temp = dir.path().join(&m.object).parent().unwrap().join(m.staging["temp"].as_str().unwrap());
    std::fs::remove_file(temp).unwrap();
    drop(first);
    let second = sink(dir.path(), serde_json::json!({}));
    second.open().await.unwrap();
    let outcomes = write_all(&second, &(1..=5).map(msg).collect::<Vec<_>>()).await;
    assert!(outcomes.values().all(|o| matches!(o, MessageOutcome::Committed)), "written again: {outcomes:?}");
    assert_eq!(counts(dir.path()).into_iter().collect::<Vec<_>>(), (1..=5).map(|s| (s, 1)).collect::<Vec<_>>());
    assert_eq!(manifests(dir.path()).iter().map(|m| m.slot).collect::<Vec<_>>(), [0, 1], "slot 0 stays, void");
}

/// Two writers on one directory (two workers on one consumer, one of them slow past
/// AckWait): overlapping messages, grouped differently, written and flushed concurrently.
/// Whatever fails temporarily is redelivered (to either writer) until everything is
/// durable; every message is then stored exactly once and no manifests overlap.
#[tokio::test]
async fn two_writers_on_one_directory_store_every_message_once() {
    for round in 0..5u64 {
        let dir = tempfile::tempdir().unwrap();
        let a = Arc::new(sink(dir.path(), serde_json::json!({"max_messages": 11 + round})));
        let b = Arc::new(sink(dir.path(), serde_json::json!({"max_messages": 17})));
        a.open().await.unwrap();
        b.open().await.unwrap();
        let mut left: Vec<u64> = (1..=200).collect();
        let mut attempt = 0;
        while !left.is_empty() {
            attempt += 1;
            assert!(attempt < 20, "round {round}: not durable after 20 redeliveries: {left:?}");
            let (for_a, for_b): (Vec<u64>, Vec<u64>) = if attempt == 1 {
                ((1..=150).collect(), (50..=200).rev().collect())
            } else {
                (left.clone(), left.iter().rev().copied().collect())
            };
            let (for_a, for_b): (Vec<Envelope>, Vec<Envelope>) =
                (for_a.into_iter().map(msg).collect(), for_b.into_iter().map(msg).collect());
            let (ra, rb) = tokio::join!(a.write_chunked(&for_a, 16), b.write_chunked(&for_b, 23));
            left.retain(|seq| {
                let durable = [&ra, &rb].iter().any(|r| r.get(seq).is_some_and(MessageOutcome::is_durable));
                !durable
            });
        }
        assert_exactly_once(dir.path(), 1..=200);
    }
}

#[tokio::test]
async fn a_poison_message_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let s =
        sink_with(dir.path(), serde_json::json!({"max_bytes": 1024}), serde_json::json!({"payload_mode": "json_only"}));
    s.open().await.unwrap();
    let mut batch: Vec<Envelope> = (1..=6).map(msg).collect();
    batch[1] = envelope("ORDERS", 2, "orders.k0", "not json");
    batch[3] = envelope("ORDERS", 4, "orders.k0", format!(r#"{{"big":"{}"}}"#, "x".repeat(2000)));
    let outcomes = write_all(&s, &batch).await;
    let classes: Vec<OutcomeClass> = outcomes.values().map(MessageOutcome::class).collect();
    use OutcomeClass::{Committed, FailedPermanent};
    assert_eq!(classes, [Committed, FailedPermanent, Committed, FailedPermanent, Committed, Committed]);
    let MessageOutcome::Failed(e) = &outcomes[&2] else { panic!() };
    assert_eq!(e.error_type(), "SerializationError");
    assert_exactly_once(dir.path(), [1, 3, 5, 6]);
}

#[tokio::test]
async fn objects_close_by_age_and_never_grow_past_max_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = sink(dir.path(), serde_json::json!({"max_age_ms": 300, "max_bytes": 2048}));
    s.open().await.unwrap();
    let out = s.write(&(1..=3).map(msg).collect::<Vec<_>>(), sinks_contract::DEFAULT_BUDGET).await.unwrap();
    assert!(out.iter().all(|o| matches!(o, MessageOutcome::Pending)));
    assert!(s.flush_held(FlushScope::Due).await.is_empty(), "younger than max_age_ms");
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(s.flush_held(FlushScope::Due).await.len(), 3, "old enough");
    // Rows of about 300 bytes: a 2 KiB object holds six of them, never seven.
    let big =
        |seq: u64| envelope("ORDERS", seq, "orders.k0", format!(r#"{{"seq":{seq},"pad":"{}"}}"#, "y".repeat(150)));
    write_all(&s, &(10..=40).map(big).collect::<Vec<_>>()).await;
    for m in manifests(dir.path()) {
        let size = std::fs::metadata(dir.path().join(&m.object)).unwrap().len();
        assert!(size <= 2048, "{} is {size} bytes", m.object);
    }
    assert_exactly_once(dir.path(), [1, 2, 3].into_iter().chain(10..=40));
}

#[tokio::test]
async fn reconcile_finds_each_message_in_its_object() {
    let dir = tempfile::tempdir().unwrap();
    let s = sink(dir.path(), serde_json::json!({"format": "ndjson", "compression": "gzip"}));
    s.open().await.unwrap();
    write_all(&s, &(1..=8).map(msg).collect::<Vec<_>>()).await;
    let fresh = sink(dir.path(), serde_json::json!({"compression": "gzip"}));
    let changed = envelope("ORDERS", 2, "orders.k0", r#"{"seq":"changed"}"#);
    let found = fresh.read_back_batch(&[msg(1), changed, msg(9)]).await.unwrap();
    assert_eq!(found, [Presence::Equal, Presence::Different, Presence::Missing]);
    let gone = sink(&dir.path().join("nowhere"), serde_json::json!({}));
    assert_eq!(gone.read_back_batch(&[msg(1)]).await.unwrap(), [Presence::Missing], "a missing root holds nothing");
}

#[tokio::test]
async fn a_vanished_root_fails_temporarily_and_is_not_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("out");
    let s = sink(&root, serde_json::json!({}));
    s.open().await.unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    let outcomes = s.write(&(1..=3).map(msg).collect::<Vec<_>>(), sinks_contract::DEFAULT_BUDGET).await.unwrap();
    let classes: Vec<OutcomeClass> = outcomes.iter().map(MessageOutcome::class).collect();
    // The first fails; the others of its subject are held back behind it (ordering).
    use OutcomeClass::{FailedTemporary, HeldBack};
    assert_eq!(classes, [FailedTemporary, FailedTemporary, HeldBack]);
    assert!(!root.exists(), "the root is never recreated during writes");
}

#[cfg(feature = "parquet")]
#[tokio::test]
async fn parquet_objects_hold_the_standard_and_typed_columns() {
    let dir = tempfile::tempdir().unwrap();
    let columns = serde_json::json!([{"name": "n", "path": "seq", "type": "int64", "nullable": false}]);
    let s = sink(dir.path(), serde_json::json!({"format": "parquet", "compression": "zstd", "columns": columns}));
    s.open().await.unwrap();
    let mut batch: Vec<Envelope> = (1..=20).map(msg).collect();
    batch[4] = envelope("ORDERS", 5, "orders.k1", r#"{"seq":"five"}"#);
    let outcomes = write_all(&s, &batch).await;
    assert_eq!(outcomes[&5].class(), OutcomeClass::FailedPermanent, "a row that does not fit fails alone");
    assert!(outcomes.iter().filter(|(s, _)| **s != 5).all(|(_, o)| matches!(o, MessageOutcome::Committed)));
    let objects = batch_objects(dir.path()).unwrap();
    assert!(
        objects
            .iter()
            .all(|(p, f, _)| p.extension().is_some_and(|e| e == "parquet")
                && *f == sinks_toolkit::batch::Format::Parquet)
    );
    assert_exactly_once(dir.path(), (1..=20).filter(|s| *s != 5));
}

/// The exactly-once checker above fails when a message is stored twice (a copy of an
/// object under another name), so a passing test means something.
#[tokio::test]
async fn the_checker_catches_a_message_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let s = sink(dir.path(), serde_json::json!({}));
    s.open().await.unwrap();
    write_all(&s, &(1..=5).map(msg).collect::<Vec<_>>()).await;
    assert_exactly_once(dir.path(), 1..=5);
    let m = &manifests(dir.path())[0];
    let object = dir.path().join(&m.object);
    let copy = object.parent().unwrap().join(naming::object_name("ORDERS", 2, 3, "ndjson"));
    std::fs::copy(&object, copy).unwrap();
    let caught = std::panic::catch_unwind(|| assert_exactly_once(dir.path(), 1..=5));
    assert!(caught.is_err(), "a message stored twice is caught");
}
