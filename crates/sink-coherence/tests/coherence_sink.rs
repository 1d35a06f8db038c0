//! The Coherence sink against a real Coherence member (the run's shared member, or a
//! private one for this test process): the v1 protocol chosen by default, every duplicate
//! policy, TTL (of one entry and of a batch), per-message outcomes of a batch mixing new,
//! duplicate and conflicting keys (v1 and legacy), an entry the proxy refuses failing alone,
//! one entry key written in order within a batch, what the proxy does to JSON,
//! and interoperability with the official Python client (PyPI `coherence-client`, installed
//! by `cargo xtask setup`): it reads every field the sink wrote, and an entry it wrote in the
//! same format is a duplicate to the sink.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use sinks_contract::testing::SinkExt as _;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use sink_coherence::certify::{CacheReadBack, CoherenceHarness};
use sink_coherence::{CoherenceSink, CoherenceSinkConfig, DuplicatePolicy, KeyStrategy};
use sinks_contract::testing::{classes, envelope, envelope_with, opened, write};
use sinks_contract::{ConflictResolution, Headers, MessageOutcome, OutcomeClass, Presence, Sink};

async fn harness() -> CoherenceHarness {
    let address = sinks_testkit::shared_coherence().await.unwrap_or_else(|e| panic!("no Coherence member: {e}"));
    CoherenceHarness::new(address)
}

async fn fixture(adjust: impl FnOnce(&mut CoherenceSinkConfig)) -> (CoherenceSink, CacheReadBack, CoherenceSinkConfig) {
    let h = harness().await;
    let mut config = h.config();
    adjust(&mut config);
    let sink = opened(h.sink(config.clone()).unwrap()).await;
    let read_back = h.read_back(&config).unwrap();
    (sink, read_back, config)
}

fn key(stream: &str, seq: u64) -> String {
    format!("stream-sequence:{stream}:{seq}")
}

/// True for the refusal of a different event under a stream-sequence key.
fn reused(o: &MessageOutcome) -> bool {
    matches!(o, MessageOutcome::Failed(e) if e.is_permanent() && e.reason() == Some(sinks_contract::existing::SEQUENCE_REUSED))
}

/// Version `v` of the event with message id `id`, at stream sequence `seq`.
fn by_id(stream: &str, seq: u64, id: &str, v: u32) -> sinks_contract::Envelope {
    envelope_with(stream, seq, "s", format!("{{\"v\":{v}}}"), Headers::new().with("Nats-Msg-Id", id), 1)
}

#[tokio::test]
async fn v1_is_chosen_and_an_entry_has_the_reference_document() {
    let (sink, read_back, _) = fixture(|_| {}).await;
    assert_eq!(sink.protocol(), Some("v1"));
    let headers = Headers::new().with("Nats-Msg-Id", "m-1").with("x-trace", "t");
    let e = envelope_with("ORD", 1, "orders.created", r#"{"order":1,"amount":2.50}"#, headers, 1);
    assert_eq!(classes(&write(&sink, &[e]).await), [OutcomeClass::Committed]);
    let doc = read_back.document(&key("ORD", 1)).await.unwrap().unwrap();
    assert_eq!(doc["schema"], "nats_sinks.coherence.event.v1");
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["subject"], "orders.created");
    assert_eq!(doc["message_id"], "m-1");
    assert_eq!(doc["headers"]["x-trace"], "t");
    assert_eq!(doc["payload"]["order"], 1);
    // The proxy re-encodes the JSON it stores: the exact copy keeps the published bytes.
    assert_eq!(doc["payload"]["amount"], 2.5);
    assert_eq!(doc["payload_exact"], r#"{"order":1,"amount":2.50}"#);
    assert_eq!(doc["payload_info"]["wrapped"], false);
    assert_eq!(read_back.size().await.unwrap(), 1);
}

#[tokio::test]
async fn the_legacy_protocol_writes_the_same_entries() {
    let (sink, read_back, _) = fixture(|c| c.protocol = sink_coherence::Protocol::Legacy).await;
    assert_eq!(sink.protocol(), Some("legacy"));
    let batch: Vec<_> = (1..=20).map(|s| envelope("LEG", s, "leg.x", format!("{{\"s\":{s}}}"))).collect();
    assert!(classes(&write(&sink, &batch).await).iter().all(|c| *c == OutcomeClass::Committed));
    assert_eq!(classes(&write(&sink, &batch[..1]).await), [OutcomeClass::Duplicate]);
    let doc = read_back.document(&key("LEG", 7)).await.unwrap().unwrap();
    assert_eq!(doc["payload"]["s"], 7);
    assert_eq!(read_back.size().await.unwrap(), 20);
}

/// Under stream-sequence keys (the default) a different payload is a reused sequence,
/// refused whatever the policy, and the first version stays; a redelivery is a duplicate.
#[tokio::test]
async fn a_different_payload_under_a_stream_sequence_key_is_refused_whatever_the_policy() {
    for policy in [DuplicatePolicy::SkipExisting, DuplicatePolicy::FailExisting, DuplicatePolicy::Replace] {
        let (sink, read_back, _) = fixture(|c| c.duplicate_policy = policy).await;
        assert!(sink.capabilities().detects_conflicts, "{policy:?}");
        assert_eq!(classes(&write(&sink, &[envelope("SK", 1, "s", r#"{"v":1}"#)]).await), [OutcomeClass::Committed]);
        assert_eq!(classes(&write(&sink, &[envelope("SK", 1, "s", r#"{"v":1}"#)]).await), [OutcomeClass::Duplicate]);
        let outcomes = write(&sink, &[envelope("SK", 1, "s", r#"{"v":2}"#)]).await;
        assert!(reused(&outcomes[0]), "{policy:?}: {outcomes:?}");
        assert_eq!(read_back.document(&key("SK", 1)).await.unwrap().unwrap()["payload"]["v"], 1, "{policy:?}");
        // In a later epoch the same sequence is an entry of its own.
        let later = envelope("SK", 1, "s", r#"{"v":2}"#).with_stream_epoch(Some("e2".into()));
        assert_eq!(classes(&write(&sink, std::slice::from_ref(&later)).await), [OutcomeClass::Committed]);
        assert_eq!(classes(&write(&sink, &[later]).await), [OutcomeClass::Duplicate]);
        let doc = read_back.document("stream-sequence:SK.e2:1").await.unwrap().unwrap();
        assert_eq!((doc["payload"]["v"].as_u64(), doc["stream_epoch"].as_str()), (Some(2), Some("e2")), "{policy:?}");
    }
}

/// Under message id keys the policies keep their meaning: the first version kept, or the
/// message rejected.
#[tokio::test]
async fn under_message_id_keys_skip_keeps_and_fail_existing_rejects() {
    for (policy, kept) in [(DuplicatePolicy::SkipExisting, true), (DuplicatePolicy::FailExisting, false)] {
        let (sink, read_back, _) = fixture(|c| {
            c.duplicate_policy = policy;
            c.key_strategy = KeyStrategy::MessageId;
        })
        .await;
        assert_eq!(classes(&write(&sink, &[by_id("FE", 1, "fe-1", 1)]).await), [OutcomeClass::Committed]);
        assert_eq!(classes(&write(&sink, &[by_id("FE", 2, "fe-1", 1)]).await), [OutcomeClass::Duplicate]);
        let outcomes = write(&sink, &[by_id("FE", 3, "fe-1", 2)]).await;
        let want = if kept { ConflictResolution::KeptExisting } else { ConflictResolution::Rejected };
        assert!(matches!(&outcomes[0], MessageOutcome::Conflict(r) if *r == want), "{policy:?}: {outcomes:?}");
        assert_eq!(read_back.document("message-id:fe-1").await.unwrap().unwrap()["payload"]["v"], 1);
    }
}

#[tokio::test]
async fn replace_overwrites_and_one_key_is_written_in_input_order() {
    let (sink, read_back, _) = fixture(|c| {
        c.duplicate_policy = DuplicatePolicy::Replace;
        c.key_strategy = KeyStrategy::MessageId;
    })
    .await;
    // Twenty messages, one message id: the same entry key, so they go one after another in
    // input order even though the batch is otherwise written concurrently.
    let batch: Vec<_> = (1..=20)
        .map(|s| envelope_with("RP", s, "s", format!("{{\"v\":{s}}}"), Headers::new().with("Nats-Msg-Id", "same"), 1))
        .collect();
    let outcomes = write(&sink, &batch).await;
    assert!(matches!(outcomes[0], MessageOutcome::Committed), "{outcomes:?}");
    assert!(
        outcomes[1..].iter().all(|o| matches!(o, MessageOutcome::Conflict(ConflictResolution::Overwritten))),
        "{outcomes:?}"
    );
    let doc = read_back.document("message-id:same").await.unwrap().unwrap();
    assert_eq!(doc["payload"]["v"], 20, "the last message of the key wins");
    assert_eq!(read_back.size().await.unwrap(), 1);
}

#[tokio::test]
async fn entries_expire_after_ttl_seconds() {
    // 3 s of life: time enough to read the entry back on a loaded machine (with 1 s, a batch's
    // entries expired between the write and the read-back in a busy run).
    let (sink, read_back, _) = fixture(|c| c.ttl_seconds = Some(3)).await;
    assert_eq!(classes(&write(&sink, &[envelope("TTL", 1, "s", "{}")]).await), [OutcomeClass::Committed]);
    assert!(read_back.get(&key("TTL", 1)).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(4500)).await;
    assert!(read_back.get(&key("TTL", 1)).await.unwrap().is_none(), "expired after 3 s");
}

#[tokio::test]
async fn unreachable_start_up_waits_for_ready_timeout_then_fails_temporarily() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut config = CoherenceSinkConfig::new(format!("127.0.0.1:{closed}"), "c");
    config.ready_timeout_seconds = 1.5;
    config.request_timeout_seconds = 1.0;
    let sink = CoherenceSink::new(config).unwrap();
    let started = std::time::Instant::now();
    let err = sink.open().await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_secs(1), "retried until ready_timeout_seconds");
    assert_eq!(err.class(), sinks_contract::ErrorClass::Temporary, "{err}");
}

/// The tools venv's Python with `coherence-client`, or why there is none.
fn python() -> Result<PathBuf, String> {
    let python = sinks_testkit::tools_dir().join("venv/bin/python");
    let ok =
        std::process::Command::new(&python).args(["-c", "import coherence"]).output().is_ok_and(|o| o.status.success());
    if ok { Ok(python) } else { Err(format!("{} cannot import coherence: run `cargo xtask setup`", python.display())) }
}

/// Runs `script` with the official client; `sys.argv[1]` is the proxy, `[2]` the cache.
fn run_python(python: &PathBuf, script: &str, address: &str, cache: &str, args: &[&str]) -> String {
    let prelude = "import asyncio, json, sys\nfrom coherence import Options, Session\n";
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(format!("{prelude}{script}"))
        .arg(address)
        .arg(cache)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

const PY_READ: &str = r#"
async def main():
    session = await Session.create(Options(address=sys.argv[1], ser_format="json", request_timeout_seconds=20.0))
    cache = await session.get_cache(sys.argv[2])
    out = {}
    for key in sys.argv[3:]:
        out[key] = await cache.get(key)
    out["__size"] = await cache.size()
    await session.close()
    print(json.dumps(out))
asyncio.run(main())
"#;

const PY_WRITE: &str = r#"
import hashlib
async def main():
    session = await Session.create(Options(address=sys.argv[1], ser_format="json", request_timeout_seconds=20.0))
    cache = await session.get_cache(sys.argv[2])
    payload = sys.argv[4]
    value = {
        "schema": "nats_sinks.coherence.event.v1", "schema_version": 1, "subject": "py.subject",
        "stream": "PY", "stream_sequence": 1, "payload": json.loads(payload),
        "payload_info": {"original_format": "json", "wrapped": False,
                         "sha256": hashlib.sha256(payload.encode()).hexdigest(), "size_bytes": len(payload)},
    }
    await cache.put(sys.argv[3], value)
    await session.close()
asyncio.run(main())
"#;

/// True when two JSON values are equal, numbers compared as f64 (the proxy re-encodes).
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => x.as_f64() == y.as_f64(),
        (V::Array(x), V::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (V::Object(x), V::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[tokio::test]
async fn the_python_client_reads_every_field_the_sink_wrote() {
    let python = python().unwrap_or_else(|reason| {
        sinks_testkit::cannot_run("the_python_client_reads_every_field_the_sink_wrote", reason)
    });
    let (sink, read_back, config) = fixture(|_| {}).await;
    let headers = Headers::new().with("Nats-Msg-Id", "py-1").with("Nats-Time-Stamp", "2026-01-02T03:04:05Z");
    let batch = vec![
        envelope_with(
            "INT",
            1,
            "orders.ünï",
            r#"{"order":1,"amount":1.50,"tags":["a","b"],"nested":{"x":null}}"#,
            headers,
            1,
        ),
        envelope("INT", 2, "orders.text", "plain text, not JSON"),
        envelope("INT", 3, "orders.bytes", Bytes::from_static(&[0xff, 0x00, 0x7f])),
        envelope("INT", 4, "orders.empty", Bytes::new()),
    ];
    assert!(classes(&write(&sink, &batch).await).iter().all(|c| *c == OutcomeClass::Committed));
    let keys: Vec<String> = (1..=4).map(|s| key("INT", s)).collect();
    let key_args: Vec<&str> = keys.iter().map(String::as_str).collect();
    let read = run_python(&python, PY_READ, &config.address, &config.cache_name, &key_args);
    let read: serde_json::Value = serde_json::from_str(&read).unwrap();
    assert_eq!(read["__size"], 4);
    for (i, k) in keys.iter().enumerate() {
        let ours = read_back.document(k).await.unwrap().unwrap();
        let theirs = &read[k];
        assert!(theirs.is_object(), "python read {k}: {theirs}");
        assert!(same(&ours, theirs), "{k}: the python client reads\n{theirs}\nthe sink stored\n{ours}");
        // Every field the reference writes is there, with the published content.
        assert_eq!(theirs["schema"], "nats_sinks.coherence.event.v1");
        assert_eq!(theirs["stream"], "INT");
        assert_eq!(theirs["stream_sequence"], i + 1);
        let published = batch[i].payload();
        let info = &theirs["payload_info"];
        assert_eq!(info["sha256"], sinks_contract::payload::normalize(published, Default::default()).unwrap().sha256);
        assert_eq!(info["size_bytes"], published.len());
    }
    let first = &read[&keys[0]];
    assert_eq!(first["subject"], "orders.ünï");
    assert_eq!(first["message_id"], "py-1");
    assert_eq!(first["payload"]["tags"][1], "b");
    assert_eq!(first["payload_exact"], r#"{"order":1,"amount":1.50,"tags":["a","b"],"nested":{"x":null}}"#);
    assert_eq!(first["metadata"]["timestamps"]["message_created_at_source"], "nats_time_stamp");
    assert_eq!(read[&keys[1]]["payload"]["payload"], "plain text, not JSON");
    assert_eq!(read[&keys[2]]["payload"]["_nats_sinks"]["payload_encoding"], "base64");
    assert_eq!(read[&keys[3]]["payload_info"]["size_bytes"], 0);
}

#[tokio::test]
async fn an_entry_the_python_client_wrote_in_the_same_format_is_a_duplicate() {
    let python = python().unwrap_or_else(|reason| {
        sinks_testkit::cannot_run("an_entry_the_python_client_wrote_in_the_same_format_is_a_duplicate", reason)
    });
    let (sink, read_back, config) = fixture(|_| {}).await;
    let payload = r#"{"order":7}"#;
    run_python(&python, PY_WRITE, &config.address, &config.cache_name, &[&key("PY", 1), payload]);
    assert_eq!(read_back.document(&key("PY", 1)).await.unwrap().unwrap()["subject"], "py.subject");
    let outcomes = write(&sink, &[envelope("PY", 1, "py.subject", payload)]).await;
    assert!(matches!(outcomes[0], MessageOutcome::Duplicate), "{outcomes:?}");
    let outcomes = write(&sink, &[envelope("PY", 1, "py.subject", r#"{"order":8}"#)]).await;
    assert!(reused(&outcomes[0]), "another event under the stored stream sequence: {outcomes:?}");
    assert_eq!(read_back.document(&key("PY", 1)).await.unwrap().unwrap()["subject"], "py.subject", "kept");
}

/// Reconcile on `protocol`: 200 entries written (JSON and binary payloads), 2 removed and 1
/// altered behind the sink's back; the read-back reports exactly those 3 and writes nothing.
async fn reconcile_reports_removed_and_altered_entries(protocol: sink_coherence::Protocol) {
    let (sink, read_back, _) = fixture(|c| c.protocol = protocol).await;
    let stream = "RC";
    let batch: Vec<_> = (1..=200u64)
        .map(|s| {
            if s % 10 == 0 {
                envelope(stream, s, "rc.bin", vec![0xff, 0x00, u8::try_from(s % 256).unwrap()])
            } else {
                envelope(stream, s, "rc.json", format!(r#"{{"order":{s},"amount":2.50}}"#))
            }
        })
        .collect();
    assert!(classes(&write(&sink, &batch).await).iter().all(|c| *c == OutcomeClass::Committed));
    assert!(sink.read_back().is_some());
    let clean = sink.read_back_batch(&batch).await.unwrap();
    assert!(clean.iter().all(|p| *p == Presence::Equal), "{clean:?}");

    assert!(read_back.remove(&key(stream, 17)).await.unwrap());
    assert!(read_back.remove(&key(stream, 120)).await.unwrap());
    // An edit of the payload that keeps the rest of the document (and its fingerprint).
    let mut doc = read_back.document(&key(stream, 151)).await.unwrap().unwrap();
    doc["payload"]["amount"] = 3.into();
    doc["payload_exact"] = r#"{"order":151,"amount":3}"#.into();
    read_back.overwrite(&key(stream, 151), serde_json::to_string(&doc).unwrap().as_bytes()).await.unwrap();

    let found = sink.read_back_batch(&batch).await.unwrap();
    assert_eq!(found.len(), batch.len());
    let reported: Vec<(u64, Presence)> = batch
        .iter()
        .zip(&found)
        .filter(|(_, p)| **p != Presence::Equal)
        .map(|(e, p)| (e.jetstream().stream_sequence, *p))
        .collect();
    assert_eq!(reported, [(17, Presence::Missing), (120, Presence::Missing), (151, Presence::Different)]);
    assert_eq!(read_back.size().await.unwrap(), 198, "reconcile wrote nothing");
    // Where the report says to look.
    let destination = sink.destination_of(&batch[16], &MessageOutcome::Committed).unwrap();
    assert_eq!(
        destination,
        sinks_contract::DestinationRef::Cache { cache: sink.config().cache_name.clone(), key: key(stream, 17) }
    );
}

#[tokio::test]
async fn reconcile_reports_exactly_the_removed_and_altered_entries_over_v1() {
    reconcile_reports_removed_and_altered_entries(sink_coherence::Protocol::Auto).await;
}

#[tokio::test]
async fn reconcile_reports_exactly_the_removed_and_altered_entries_over_legacy() {
    reconcile_reports_removed_and_altered_entries(sink_coherence::Protocol::Legacy).await;
}

/// A batch over several subjects: every message gets its own outcome: new keys are
/// committed, a key already holding the same payload is a duplicate, a different payload
/// (under these stream-sequence keys) a reused sequence, refused alone, and a message
/// repeated inside the batch a duplicate of its first copy.
async fn a_batch_keeps_per_message_outcomes(protocol: sink_coherence::Protocol) {
    let (sink, read_back, _) = fixture(|c| c.protocol = protocol).await;
    let payload = |s: u64| format!("{{\"s\":{s}}}");
    let msg = |s: u64| envelope("RND", s, &format!("rnd.k{}", s % 4), payload(s));
    // Written before: 3 with the same payload, 5 with a different one.
    let before = [msg(3), envelope("RND", 5, "rnd.k1", r#"{"s":"other"}"#)];
    assert_eq!(classes(&write(&sink, &before).await), [OutcomeClass::Committed, OutcomeClass::Committed]);
    let mut batch: Vec<_> = (1..=40).map(msg).collect();
    batch.push(msg(7));
    let outcomes = write(&sink, &batch).await;
    for (i, o) in outcomes.iter().enumerate() {
        let expected = match i + 1 {
            3 | 41 => OutcomeClass::Duplicate,
            5 => OutcomeClass::FailedPermanent,
            _ => OutcomeClass::Committed,
        };
        assert_eq!(o.class(), expected, "message {} of the batch: {o:?}", i + 1);
    }
    assert!(reused(&outcomes[4]), "{outcomes:?}");
    assert_eq!(read_back.size().await.unwrap(), 40);
    for s in (1..=40).filter(|s| *s != 5) {
        let doc = read_back.document(&key("RND", s)).await.unwrap().unwrap();
        assert_eq!(doc["payload"]["s"], s);
        assert_eq!(doc["subject"], format!("rnd.k{}", s % 4));
    }
    assert_eq!(read_back.document(&key("RND", 5)).await.unwrap().unwrap()["payload"]["s"], "other");
    // The whole batch again: all duplicates except the refused one.
    let again = classes(&write(&sink, &batch).await);
    assert_eq!(again.iter().filter(|c| **c == OutcomeClass::Duplicate).count(), 40, "{again:?}");
}

#[tokio::test]
async fn a_batch_keeps_per_message_outcomes_over_v1() {
    a_batch_keeps_per_message_outcomes(sink_coherence::Protocol::V1).await;
}

#[tokio::test]
async fn a_batch_keeps_per_message_outcomes_over_legacy() {
    a_batch_keeps_per_message_outcomes(sink_coherence::Protocol::Legacy).await;
}

/// A payload whose JSON names a type the member does not know is refused by the proxy
/// (it cannot deserialize the entry): that message fails permanently, alone, and every
/// other message of the batch, of its subject too, commits.
#[tokio::test]
async fn an_entry_the_proxy_refuses_fails_alone_and_its_batch_mates_commit() {
    let (sink, read_back, _) = fixture(|_| {}).await;
    let poison = r#"{"@class":"com.example.NoSuchType","x":1}"#;
    let batch: Vec<_> = (1..=12)
        .map(|s| {
            let payload = if s == 5 { poison.to_owned() } else { format!("{{\"s\":{s}}}") };
            envelope("PSN", s, &format!("psn.k{}", s % 3), payload)
        })
        .collect();
    let outcomes = write(&sink, &batch).await;
    for (i, o) in outcomes.iter().enumerate() {
        if i == 4 {
            assert!(matches!(o, MessageOutcome::Failed(e) if e.is_permanent()), "the poison: {o:?}");
        } else {
            assert_eq!(o.class(), OutcomeClass::Committed, "message {}: {o:?}", i + 1);
        }
    }
    assert_eq!(read_back.size().await.unwrap(), 11);
    assert!(read_back.get(&key("PSN", 5)).await.unwrap().is_none());
    assert_eq!(read_back.document(&key("PSN", 8)).await.unwrap().unwrap()["payload"]["s"], 8);
}

#[tokio::test]
async fn entries_of_a_batch_expire_after_ttl_seconds() {
    let (sink, read_back, _) = fixture(|c| c.ttl_seconds = Some(3)).await;
    let batch: Vec<_> = (1..=6).map(|s| envelope("TTLB", s, &format!("t.k{}", s % 2), "{}")).collect();
    assert!(classes(&write(&sink, &batch).await).iter().all(|c| *c == OutcomeClass::Committed));
    for s in 1..=6 {
        assert!(read_back.get(&key("TTLB", s)).await.unwrap().is_some(), "entry {s} is there at first");
    }
    tokio::time::sleep(Duration::from_millis(4500)).await;
    for s in 1..=6 {
        assert!(read_back.get(&key("TTLB", s)).await.unwrap().is_none(), "entry {s} expired after 3 s");
    }
}
