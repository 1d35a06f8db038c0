//! Reconcile of the encrypted spool: records read back by name, decrypted and compared; a
//! record edited or swapped behind the sink's back is different; a message without a record
//! is unchecked while replay deletes what it delivered (replayed and lost cannot be told
//! apart from the spool), and missing when `delete_after_replay` is off.
#![allow(clippy::unwrap_used)]

use sinks_contract::testing::SinkExt as _;
use std::path::{Path, PathBuf};

use sink_spool::certify::{config, key_b64};
use sink_spool::{ReplayOptions, SpoolSink, record, replay};
use sinks_certify::MemorySink;
use sinks_contract::testing::{classes, envelope};
use sinks_contract::{Envelope, OutcomeClass, Presence, Sink};
use sinks_toolkit::encryption::Key;

fn spool(dir: &Path, delete_after_replay: bool) -> SpoolSink {
    let mut c = config(dir.to_path_buf());
    c.delete_after_replay = delete_after_replay;
    SpoolSink::new(c).unwrap().with_key(Key::from_b64(&key_b64()).unwrap())
}

fn batch() -> Vec<Envelope> {
    (1..=12u64).map(|s| envelope("SP", s, "sp.x", format!(r#"{{"order":{s}}}"#))).collect()
}

fn file_of(dir: &Path, e: &Envelope) -> PathBuf {
    dir.join(record::file_name(e).unwrap())
}

fn files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// Spools `batch` into `dir`, then replays `replayed` of them into a memory target; returns
/// the sequences replayed.
async fn spooled_and_partly_replayed(s: &SpoolSink, batch: &[Envelope], replayed: usize) -> Vec<u64> {
    s.open().await.unwrap();
    assert!(
        classes(&s.write(batch, sinks_contract::DEFAULT_BUDGET).await.unwrap())
            .iter()
            .all(|c| *c == OutcomeClass::Committed)
    );
    let target = MemorySink::new();
    let options = ReplayOptions { max_records: Some(replayed), ..ReplayOptions::default() };
    let report = replay(s, &target, &options, |_| {}).await.unwrap();
    assert_eq!(report.committed, replayed);
    let mut seqs: Vec<u64> =
        target.records().iter().map(|(k, _)| k.rsplit(':').next().unwrap().parse().unwrap()).collect();
    seqs.sort_unstable();
    seqs
}

#[tokio::test]
async fn records_are_compared_and_an_absent_one_is_unchecked_while_replay_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let s = spool(dir.path(), true);
    let batch = batch();
    let replayed = spooled_and_partly_replayed(&s, &batch, 3).await;
    let reads = s.read_back().expect("the spool reads back");
    let what = reads.checks();
    assert!(what.contains("unchecked") && what.contains("replay target"), "{what}");

    let others: Vec<&Envelope> = batch.iter().filter(|e| !replayed.contains(&e.jetstream().stream_sequence)).collect();
    let (lost, corrupted, swapped) = (others[0], others[1], others[2]);
    std::fs::remove_file(file_of(dir.path(), lost)).unwrap();
    // A flipped byte in the ciphertext: the record no longer decrypts (authenticated).
    let path = file_of(dir.path(), corrupted);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    std::fs::write(&path, bytes).unwrap();
    // A valid record of other content under this message's name.
    let other_dir = tempfile::tempdir().unwrap();
    let other = spool(other_dir.path(), true);
    other.open().await.unwrap();
    let js = swapped.jetstream();
    let impostor = envelope(&js.stream, js.stream_sequence, swapped.subject(), r#"{"order":-1}"#);
    other.write(std::slice::from_ref(&impostor), sinks_contract::DEFAULT_BUDGET).await.unwrap();
    std::fs::copy(file_of(other_dir.path(), &impostor), file_of(dir.path(), swapped)).unwrap();

    let before = files(dir.path());
    let found = s.read_back_batch(&batch).await.unwrap();
    assert_eq!(files(dir.path()), before, "reconcile writes nothing");
    for (e, presence) in batch.iter().zip(&found) {
        let seq = e.jetstream().stream_sequence;
        let want = if replayed.contains(&seq) || seq == lost.jetstream().stream_sequence {
            Presence::Unchecked
        } else if seq == corrupted.jetstream().stream_sequence || seq == swapped.jetstream().stream_sequence {
            Presence::Different
        } else {
            Presence::Equal
        };
        assert_eq!(*presence, want, "sequence {seq}");
    }
}

#[tokio::test]
async fn without_delete_after_replay_an_absent_record_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let s = spool(dir.path(), false);
    let batch = batch();
    let replayed = spooled_and_partly_replayed(&s, &batch, 4).await;
    assert!(s.read_back().is_some_and(|reads| reads.checks().contains("missing")));
    std::fs::remove_file(file_of(dir.path(), &batch[11])).unwrap();
    let found = s.read_back_batch(&batch).await.unwrap();
    let want: Vec<Presence> =
        (1..=12u64).map(|seq| if seq == 12 { Presence::Missing } else { Presence::Equal }).collect();
    assert_eq!(found, want, "replayed records are kept ({replayed:?}) and still equal");

    // A spool directory that does not exist holds nothing, and is not created.
    let gone = dir.path().join("never-created");
    let s = spool(&gone, false);
    assert_eq!(s.read_back_batch(&batch[..2]).await.unwrap(), [Presence::Missing; 2]);
    assert!(!gone.exists());
}
