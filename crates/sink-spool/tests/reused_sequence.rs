//! A stream sequence used again by a different event (the stream was re-created) is refused
//! by the spool as `sequence_reused`, whatever its duplicate policy, under stream-sequence
//! keys (the spool's key when the message has a stream sequence); under message id keys (a
//! message without one) the policy keeps its meaning. A later epoch of the stream
//! spools records of its own, and replay hands them on with their epoch.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use sink_spool::certify::{config, key_b64};
use sink_spool::{DuplicatePolicy, ReplayOptions, SpoolSink, replay};
use sinks_certify::MemorySink;
use sinks_contract::testing::{envelope, envelope_with};
use sinks_contract::{ConflictResolution, Envelope, Headers, MessageOutcome, Sink};
use sinks_toolkit::encryption::Key;

fn spool(dir: &Path, policy: DuplicatePolicy) -> SpoolSink {
    let mut c = config(dir.to_path_buf());
    c.duplicate_policy = policy;
    SpoolSink::new(c).unwrap().with_key(Key::from_b64(&key_b64()).unwrap())
}

/// What an outcome is, in one word a table can hold.
fn shape(o: &MessageOutcome) -> String {
    match o {
        MessageOutcome::Failed(e) if e.reason() == Some(sinks_contract::existing::SEQUENCE_REUSED) => {
            assert!(e.is_permanent(), "{e:?}");
            "sequence_reused".into()
        }
        MessageOutcome::Failed(e) if e.is_permanent() => "permanent".into(),
        MessageOutcome::Conflict(ConflictResolution::KeptExisting) => "kept".into(),
        other => format!("{:?}", other.class()),
    }
}

/// Version `version` of an event with message id `order-1`: with stream sequence 1 when
/// `sequenced`, else without a stream (keyed by its message id).
fn event(sequenced: bool, version: u32) -> Envelope {
    let (stream, seq) = if sequenced { ("SP", 1) } else { ("", 0) };
    let headers = Headers::new().with("Nats-Msg-Id", "order-1");
    envelope_with(stream, seq, "sp.x", format!(r#"{{"order":1,"v":{version}}}"#), headers, 1)
}

#[tokio::test]
async fn a_different_payload_under_an_existing_key_by_policy_and_key() {
    let rows = [
        (DuplicatePolicy::SkipExisting, true, "sequence_reused"),
        (DuplicatePolicy::Fail, true, "permanent"),
        (DuplicatePolicy::SkipExisting, false, "kept"),
        (DuplicatePolicy::Fail, false, "permanent"),
    ];
    for (policy, sequenced, want) in rows {
        let dir = tempfile::tempdir().unwrap();
        let s = spool(dir.path(), policy);
        s.open().await.unwrap();
        assert_eq!(
            shape(&s.write(&[event(sequenced, 1)], sinks_contract::DEFAULT_BUDGET).await.unwrap()[0]),
            "Committed"
        );
        let outcomes = s.write(&[event(sequenced, 2)], sinks_contract::DEFAULT_BUDGET).await.unwrap();
        assert_eq!(shape(&outcomes[0]), want, "{policy:?} sequenced {sequenced}");
        assert_eq!(s.usage().records, 1, "{policy:?} sequenced {sequenced}: the stored record is kept alone");
        if policy == DuplicatePolicy::SkipExisting {
            let again = s.write(&[event(sequenced, 1)], sinks_contract::DEFAULT_BUDGET).await.unwrap();
            assert_eq!(shape(&again[0]), "Duplicate", "the stored event again");
        }
    }
}

#[tokio::test]
async fn a_later_epoch_spools_its_own_records_and_replays_them_with_their_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let s = spool(dir.path(), DuplicatePolicy::SkipExisting);
    s.open().await.unwrap();
    let old: Vec<Envelope> = (1..=3).map(|seq| envelope("SP", seq, "sp.x", format!(r#"{{"v":{seq}}}"#))).collect();
    let reused: Vec<Envelope> =
        (1..=3).map(|seq| envelope("SP", seq, "sp.x", format!(r#"{{"v":{seq},"new":1}}"#))).collect();
    assert!(s.write(&old, sinks_contract::DEFAULT_BUDGET).await.unwrap().iter().all(|o| shape(o) == "Committed"));
    assert!(
        s.write(&reused, sinks_contract::DEFAULT_BUDGET).await.unwrap().iter().all(|o| shape(o) == "sequence_reused")
    );
    let later: Vec<Envelope> = reused.iter().map(|e| e.clone().with_stream_epoch(Some("e2".into()))).collect();
    assert!(s.write(&later, sinks_contract::DEFAULT_BUDGET).await.unwrap().iter().all(|o| shape(o) == "Committed"));
    assert!(s.write(&later, sinks_contract::DEFAULT_BUDGET).await.unwrap().iter().all(|o| shape(o) == "Duplicate"));
    assert_eq!(s.usage().records, 6);

    let target = MemorySink::new();
    let report = replay(&s, &target, &ReplayOptions::default(), |_| {}).await.unwrap();
    assert_eq!((report.committed, report.failed_permanent), (6, 0), "{report:?}");
    let mut keys: Vec<String> = target.records().into_iter().map(|(k, _)| k).collect();
    keys.sort();
    let mut want: Vec<String> =
        (1..=3).flat_map(|q| [format!("stream-sequence:SP:{q}"), format!("stream-sequence:SP.e2:{q}")]).collect();
    want.sort();
    assert_eq!(keys, want, "each epoch's events under their own keys at the target");
    assert_eq!(target.get("stream-sequence:SP.e2:1").as_deref(), Some(&br#"{"v":1,"new":1}"#[..]));
}
