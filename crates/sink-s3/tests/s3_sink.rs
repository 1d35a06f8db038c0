//! The S3 sink against a real S3-compatible server (SeaweedFS), one fresh bucket per test:
//! keys the reference would merge (W3), the 16-way race on one key, duplicate policies and
//! the content check, sidecars, gzip and payload-only objects, multipart uploads, metadata,
//! and start-up and health checks.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use std::sync::Arc;

use bytes::Bytes;
use sink_s3::certify::{BucketReadBack, S3Harness, decode_object};
use sink_s3::{Compression, DuplicatePolicy, KeyStrategy, MetadataMode, ObjectFormat, S3Sink, S3SinkConfig};
use sinks_certify::Records;
use sinks_contract::testing::{classes, envelope, envelope_with, error_of, opened, write};
use sinks_contract::{ConflictResolution, ErrorClass, Headers, MessageOutcome, OutcomeClass, Sink};

async fn harness() -> S3Harness {
    let server = sinks_testkit::shared_s3().await.unwrap_or_else(|e| panic!("no S3 server: {e}"));
    S3Harness::new(server.endpoint, server.filer, sinks_testkit::S3_ACCESS_KEY_ID, sinks_testkit::S3_SECRET_ACCESS_KEY)
}

/// An opened sink on a fresh bucket configured by `adjust`, and a reader of that bucket.
async fn fixture(adjust: impl FnOnce(&mut S3SinkConfig)) -> (S3Sink, BucketReadBack, S3Harness) {
    let h = harness().await;
    let bucket = h.bucket().await.unwrap();
    let mut config = h.config(&bucket);
    adjust(&mut config);
    let sink = opened(h.sink(config.clone()).unwrap()).await;
    let read_back = h.read_back(&config, bucket).unwrap();
    (sink, read_back, h)
}

/// True for the refusal of a different event under a stream-sequence key.
fn reused(o: &MessageOutcome) -> bool {
    matches!(o, MessageOutcome::Failed(e) if e.is_permanent() && e.reason() == Some(sinks_contract::existing::SEQUENCE_REUSED))
}

fn with_id(seq: u64, id: &str, payload: &'static str) -> sinks_contract::Envelope {
    envelope_with(
        "S3T",
        seq,
        "s3t.x",
        Bytes::from_static(payload.as_bytes()),
        Headers::new().with("Nats-Msg-Id", id),
        1,
    )
}

#[tokio::test]
async fn ids_the_reference_merges_get_objects_of_their_own() {
    let (sink, rb, _h) = fixture(|c| c.key_strategy = KeyStrategy::MessageId).await;
    let ids = ["a/b", "a_b", "a b", "a:b", "a_b~", "ünï/cöde", "..", "plain-id.1"];
    let batch: Vec<_> = ids.iter().enumerate().map(|(i, id)| with_id(i as u64 + 1, id, "{}")).collect();
    let outcomes = write(&sink, &batch).await;
    assert!(classes(&outcomes).iter().all(|c| *c == OutcomeClass::Committed), "{outcomes:?}");
    let keys = rb.object_keys().await.unwrap();
    assert_eq!(keys.len(), ids.len(), "{keys:?}");
    assert!(keys.contains(&"message-id/plain-id.1.json".to_owned()), "plain ids keep the reference's key: {keys:?}");
    // A redelivery of each maps to its own object again.
    let again: Vec<_> = ids.iter().enumerate().map(|(i, id)| with_id(i as u64 + 1, id, "{}")).collect();
    assert!(classes(&write(&sink, &again).await).iter().all(|c| *c == OutcomeClass::Duplicate));
}

#[tokio::test]
async fn sixteen_concurrent_creates_of_one_key_leave_exactly_one_object() {
    let (sink, rb, h) = fixture(|_| {}).await;
    let config = sink.config().clone();
    // The bucket's first write allocates its storage; race on a warm bucket.
    write(&sink, &[envelope("WARM", 1, "warm.x", "{}")]).await;
    for round in 1..=5_u64 {
        // 16 independent sinks (own clients and connections), one message each, same key,
        // different payloads.
        let mut sinks = Vec::new();
        for _ in 0..16 {
            sinks.push(Arc::new(opened(h.sink(config.clone()).unwrap()).await));
        }
        let tasks: Vec<_> = sinks
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                tokio::spawn(async move {
                    let e = envelope("RACE", round, "race.x", format!("{{\"writer\":{i}}}"));
                    // SeaweedFS queues contending conditional puts on one key (about a second
                    // each), so a loser may time out: temporary, and redelivered, as here.
                    for _ in 0..5 {
                        let outcome =
                            s.write(std::slice::from_ref(&e), sinks_contract::DEFAULT_BUDGET).await.unwrap().remove(0);
                        if outcome.class() != OutcomeClass::FailedTemporary {
                            return (i, outcome);
                        }
                    }
                    panic!("writer {i} never got an answer");
                })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tasks {
            let (i, outcome) = t.await.unwrap();
            // The losers hold other events under the winner's stream sequence: refused.
            match outcome {
                MessageOutcome::Committed => winners.push(i),
                o if reused(&o) => {}
                other => panic!("round {round} writer {i}: {other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let records = rb.read_all().await.unwrap();
        let mine: Vec<_> = records.iter().filter(|(k, _)| k == &format!("stream-sequence:RACE:{round}")).collect();
        assert_eq!(mine.len(), 1, "round {round}: one object");
        assert_eq!(mine[0].1, format!("{{\"writer\":{}}}", winners[0]), "the winner's payload is stored");
    }
    assert_eq!(rb.object_keys().await.unwrap().len(), 6);
}

#[tokio::test]
async fn replace_overwrites_with_the_newest_delivery_under_message_id_keys() {
    let (sink, rb, _h) = fixture(|c| {
        c.duplicate_policy = DuplicatePolicy::Replace;
        c.key_strategy = KeyStrategy::MessageId;
    })
    .await;
    assert!(!sink.capabilities().reports_duplicates);
    let first = write(&sink, &[with_id(1, "r-1", r#"{"v":1}"#)]).await;
    let second = write(&sink, &[with_id(2, "r-1", r#"{"v":2}"#)]).await;
    assert_eq!(classes(&first), [OutcomeClass::Committed]);
    assert_eq!(classes(&second), [OutcomeClass::Committed]);
    let records = rb.read_all().await.unwrap();
    assert_eq!(records, vec![("stream-sequence:S3T:2".to_owned(), Bytes::from_static(br#"{"v":2}"#))]);
    let meta = rb.metadata(&rb.object_keys().await.unwrap()[0]).await.unwrap();
    assert!(!meta.iter().any(|(k, _)| k == "nats-sinks-payload-sha256"), "no fingerprint without a check: {meta:?}");
}

/// Under stream-sequence keys (`idempotency_key` for a JetStream message, and
/// `stream_sequence`) `replace` creates conditionally and compares: a different event under
/// a stored sequence is refused and the stored object kept; a redelivery is a duplicate.
#[tokio::test]
async fn replace_never_overwrites_an_earlier_event_under_stream_sequence_keys() {
    for strategy in [KeyStrategy::IdempotencyKey, KeyStrategy::StreamSequence] {
        let (sink, rb, _h) = fixture(|c| {
            c.duplicate_policy = DuplicatePolicy::Replace;
            c.key_strategy = strategy;
        })
        .await;
        assert!(sink.capabilities().reports_duplicates && sink.capabilities().detects_conflicts, "{strategy:?}");
        assert_eq!(classes(&write(&sink, &[envelope("R", 1, "r.x", r#"{"v":1}"#)]).await), [OutcomeClass::Committed]);
        let second = write(&sink, &[envelope("R", 1, "r.x", r#"{"v":2}"#)]).await;
        assert!(reused(&second[0]), "{strategy:?}: {second:?}");
        let again = write(&sink, &[envelope("R", 1, "r.x", r#"{"v":1}"#)]).await;
        assert_eq!(classes(&again), [OutcomeClass::Duplicate], "{strategy:?}");
        let records = rb.read_all().await.unwrap();
        assert_eq!(records, vec![("stream-sequence:R:1".to_owned(), Bytes::from_static(br#"{"v":1}"#))]);
        let meta = rb.metadata(&rb.object_keys().await.unwrap()[0]).await.unwrap();
        assert!(meta.iter().any(|(k, _)| k == "nats-sinks-payload-sha256"), "{strategy:?}: compared: {meta:?}");
    }
}

#[tokio::test]
async fn fail_existing_dead_letters_conflicts_and_accepts_true_redeliveries() {
    let (sink, rb, _h) = fixture(|c| c.duplicate_policy = DuplicatePolicy::FailExisting).await;
    write(&sink, &[envelope("F", 1, "f.x", r#"{"v":1}"#)]).await;
    let same = write(&sink, &[envelope("F", 1, "f.x", r#"{"v":1}"#)]).await;
    assert_eq!(classes(&same), [OutcomeClass::Duplicate], "a crash-after-put redelivery is harmless");
    let changed = write(&sink, &[envelope("F", 1, "f.x", r#"{"v":2}"#)]).await;
    assert!(reused(&changed[0]), "under a stream-sequence key: a reused sequence, {changed:?}");
    assert_eq!(rb.read_all().await.unwrap()[0].1, Bytes::from_static(br#"{"v":1}"#));

    // Under message id keys the policy decides: rejected.
    let (sink, rb, _h) = fixture(|c| {
        c.duplicate_policy = DuplicatePolicy::FailExisting;
        c.key_strategy = KeyStrategy::MessageId;
    })
    .await;
    write(&sink, &[with_id(1, "f-1", r#"{"v":1}"#)]).await;
    assert_eq!(classes(&write(&sink, &[with_id(1, "f-1", r#"{"v":1}"#)]).await), [OutcomeClass::Duplicate]);
    let changed = write(&sink, &[with_id(2, "f-1", r#"{"v":2}"#)]).await;
    assert!(matches!(changed[0], MessageOutcome::Conflict(ConflictResolution::Rejected)), "{changed:?}");
    assert_eq!(rb.read_all().await.unwrap()[0].1, Bytes::from_static(br#"{"v":1}"#));

    // Without the content check, the reference's rule: any existing object fails permanently.
    let (sink, _rb, _h) = fixture(|c| {
        c.duplicate_policy = DuplicatePolicy::FailExisting;
        c.content_check = false;
    })
    .await;
    write(&sink, &[envelope("F", 1, "f.x", r#"{"v":1}"#)]).await;
    let again = write(&sink, &[envelope("F", 1, "f.x", r#"{"v":1}"#)]).await;
    assert_eq!(error_of(&again[0]).class(), ErrorClass::Permanent);
}

#[tokio::test]
async fn content_check_reads_bodies_of_objects_written_without_a_fingerprint() {
    let h = harness().await;
    let bucket = h.bucket().await.unwrap();
    let mut plain = h.config(&bucket);
    plain.content_check = false;
    plain.metadata_mode = MetadataMode::None;
    let writer = opened(h.sink(plain.clone()).unwrap()).await;
    write(&writer, &[envelope("C", 1, "c.x", r#"{"v":1}"#), envelope("C", 2, "c.x", "text")]).await;
    let rb = h.read_back(&plain, bucket).unwrap();
    for key in rb.object_keys().await.unwrap() {
        assert!(rb.metadata(&key).await.unwrap().is_empty(), "written without metadata");
    }
    let mut checked = plain.clone();
    checked.content_check = true;
    let checker = opened(h.sink(checked).unwrap()).await;
    let outcomes = write(
        &checker,
        &[envelope("C", 1, "c.x", r#"{"v":1}"#), envelope("C", 2, "c.x", "other text"), envelope("C", 3, "c.x", "{}")],
    )
    .await;
    assert!(matches!(outcomes[0], MessageOutcome::Duplicate), "{outcomes:?}");
    assert!(reused(&outcomes[1]), "other text under a stored stream sequence: {outcomes:?}");
    assert!(matches!(outcomes[2], MessageOutcome::Committed), "{outcomes:?}");
}

#[tokio::test]
async fn same_key_twice_in_one_batch_is_written_once_in_order() {
    let (sink, rb, _h) = fixture(|_| {}).await;
    let batch =
        [envelope("B", 1, "b.x", r#"{"v":1}"#), envelope("B", 1, "b.x", r#"{"v":1}"#), envelope("B", 2, "b.x", "{}")];
    let outcomes = write(&sink, &batch).await;
    assert_eq!(classes(&outcomes), [OutcomeClass::Committed, OutcomeClass::Duplicate, OutcomeClass::Committed]);
    assert_eq!(rb.object_keys().await.unwrap().len(), 2);
}

#[tokio::test]
async fn sidecars_follow_their_object_and_are_rewritten_on_redelivery() {
    let (sink, rb, _h) = fixture(|c| {
        c.metadata_mode = MetadataMode::Sidecar;
        c.key_strategy = KeyStrategy::StreamSequence;
    })
    .await;
    write(&sink, &[envelope("SC", 1, "sc.x", "{}"), envelope("SC", 2, "sc.x", "{}")]).await;
    let keys = rb.keys().await.unwrap();
    assert_eq!(
        keys,
        [
            "stream-sequence/SC/1.json",
            "stream-sequence/SC/1.metadata.json",
            "stream-sequence/SC/2.json",
            "stream-sequence/SC/2.metadata.json"
        ]
    );
    let sidecar: serde_json::Value =
        serde_json::from_slice(&rb.body("stream-sequence/SC/1.metadata.json").await.unwrap()).unwrap();
    assert_eq!(sidecar["schema"], "nats_sinks.s3.sidecar.v1");
    assert_eq!(sidecar["object_key"], "stream-sequence/SC/1.json");
    // A crash between the two puts: the object exists, its sidecar does not.
    rb.delete("stream-sequence/SC/2.metadata.json").await.unwrap();
    let redelivered = write(&sink, &[envelope("SC", 2, "sc.x", "{}")]).await;
    assert_eq!(classes(&redelivered), [OutcomeClass::Duplicate]);
    assert!(rb.keys().await.unwrap().contains(&"stream-sequence/SC/2.metadata.json".to_owned()), "sidecar restored");
}

#[tokio::test]
async fn gzip_payload_objects_and_metadata() {
    let (sink, rb, _h) = fixture(|c| {
        c.object_format = ObjectFormat::Payload;
        c.compression = Compression::Gzip;
        c.object_suffix = ".json.gz".into();
        c.object_metadata.insert("purpose".into(), "archive".into());
    })
    .await;
    let with_id = envelope_with(
        "G",
        1,
        "g.x",
        Bytes::from_static(br#"{"a": [1, 2]}"#),
        Headers::new().with("Nats-Msg-Id", "m-1"),
        1,
    );
    write(&sink, &[with_id, envelope("G", 2, "g.x", Bytes::from_static(&[0, 159, 255]))]).await;
    let keys = rb.object_keys().await.unwrap();
    assert_eq!(keys.len(), 2);
    assert!(keys.iter().all(|k| k.ends_with(".json.gz")));
    let mut bodies = Vec::new();
    for k in &keys {
        bodies.push(rb.body(k).await.unwrap());
    }
    assert!(bodies.contains(&br#"{"a": [1, 2]}"#.to_vec()), "published JSON kept byte for byte");
    let meta = rb.metadata(&keys[0]).await.unwrap();
    let names: Vec<&str> = meta.iter().map(|(k, _)| k.as_str()).collect();
    assert!(names.contains(&"purpose") && names.contains(&"nats-sinks-schema"), "{meta:?}");
    assert!(names.contains(&"nats-sinks-payload-sha256"), "{meta:?}");
    // A redelivery is recognized through the compressed, payload-only object.
    let again = write(&sink, &[envelope("G", 2, "g.x", Bytes::from_static(&[0, 159, 255]))]).await;
    assert_eq!(classes(&again), [OutcomeClass::Duplicate]);
}

fn big_payload(fill: char) -> String {
    format!("{{\"blob\":\"{}\"}}", fill.to_string().repeat(6 * 1024 * 1024))
}

#[tokio::test]
async fn bodies_over_the_threshold_go_multipart_and_stay_exactly_once() {
    // Replace under payload-hash keys would name the changed payload's object apart; under
    // message id keys it replaces. Skip under stream-sequence keys refuses a changed payload.
    for policy in [DuplicatePolicy::SkipExisting, DuplicatePolicy::Replace] {
        let (sink, rb, _h) = fixture(|c| {
            c.duplicate_policy = policy;
            c.multipart_threshold_bytes = 5 * 1024 * 1024;
            c.multipart_part_bytes = 5 * 1024 * 1024;
            if policy == DuplicatePolicy::Replace {
                c.key_strategy = KeyStrategy::MessageId;
            }
        })
        .await;
        let event = |seq: u64, payload: String| {
            envelope_with("M", seq, "m.x", payload, Headers::new().with("Nats-Msg-Id", format!("m-{seq}")), 1)
        };
        let big = event(1, big_payload('a'));
        let outcomes = write(&sink, &[big.clone(), event(2, "{}".into())]).await;
        assert_eq!(classes(&outcomes), [OutcomeClass::Committed, OutcomeClass::Committed], "{policy:?}");
        let keys = rb.keys().await.unwrap();
        assert_eq!(keys.len(), 2, "{policy:?}: no staging object left behind: {keys:?}");
        let mut records = rb.read_all().await.unwrap();
        records.sort();
        assert_eq!(records[0].1, Bytes::from(big_payload('a')), "{policy:?}");
        let changed = write(&sink, &[event(1, big_payload('b'))]).await;
        match policy {
            DuplicatePolicy::Replace => assert_eq!(classes(&changed), [OutcomeClass::Committed]),
            _ => assert!(reused(&changed[0]), "{changed:?}"),
        }
        let again = write(&sink, &[big]).await;
        let expected =
            if policy == DuplicatePolicy::Replace { OutcomeClass::Committed } else { OutcomeClass::Duplicate };
        assert_eq!(classes(&again), [expected]);
        assert_eq!(rb.keys().await.unwrap().len(), 2, "{policy:?}");
    }
}

#[tokio::test]
async fn poison_fails_alone_and_the_rest_commits() {
    let (sink, rb, _h) = fixture(|c| {
        c.key_strategy = KeyStrategy::MessageId;
        c.max_object_bytes = 4096;
    })
    .await;
    let batch = [
        with_id(1, "ok-1", "{}"),
        envelope("P", 2, "p.x", "{}"), // no message id
        envelope_with("P", 3, "p.x", Bytes::from(big_payload('x')), Headers::new().with("Nats-Msg-Id", "big"), 1),
        with_id(4, "ok-4", "{}"),
    ];
    let outcomes = write(&sink, &batch).await;
    assert_eq!(
        classes(&outcomes),
        [
            OutcomeClass::Committed,
            OutcomeClass::FailedPermanent,
            OutcomeClass::FailedPermanent,
            OutcomeClass::Committed
        ]
    );
    assert!(error_of(&outcomes[2]).message().contains("sink.max_object_bytes"));
    assert_eq!(rb.object_keys().await.unwrap().len(), 2);
}

#[tokio::test]
async fn start_up_and_health_checks_tell_configuration_from_outage() {
    let h = harness().await;
    let bucket = h.bucket().await.unwrap();
    let mut missing = h.config(&bucket);
    missing.bucket = "no-such-bucket-here".into();
    let err = h.sink(missing).unwrap().open().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Config, "{}", err.message());
    let wrong = S3Sink::with_credentials(
        h.config(&bucket),
        sink_s3::S3Credentials {
            access_key_id: "nobody".into(),
            secret_access_key: "wrong".into(),
            session_token: None,
        },
    )
    .unwrap();
    assert_eq!(wrong.open().await.unwrap_err().class(), ErrorClass::Config);
    // At run time the same refusal is temporary: a configuration problem never dead-letters.
    let outcomes = write(&wrong, &[envelope("H", 1, "h.x", "{}")]).await;
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Temporary);
    let good = opened(h.sink(h.config(&bucket)).unwrap()).await;
    good.health_check().await.unwrap();
    let rb = h.read_back(&h.config(&bucket), bucket).unwrap();
    assert!(rb.keys().await.unwrap().is_empty(), "checks write nothing");
}

#[tokio::test]
async fn envelope_objects_carry_the_reference_document() {
    let (sink, rb, _h) = fixture(|c| c.prefix = Some("mission/events".into())).await;
    let e = envelope_with(
        "DOC",
        7,
        "doc.created",
        Bytes::from_static(br#"{"n": 1.50}"#),
        Headers::new().with("x-trace", "t-1"),
        1,
    );
    write(&sink, &[e]).await;
    let keys = rb.object_keys().await.unwrap();
    assert_eq!(keys.len(), 1);
    assert!(keys[0].starts_with("mission/events/idempotency-key/stream-sequence_DOC_7~"), "{keys:?}");
    let body = rb.body(&keys[0]).await.unwrap();
    assert_eq!(
        decode_object(&body).unwrap(),
        ("stream-sequence:DOC:7".to_owned(), Bytes::from_static(br#"{"n": 1.50}"#))
    );
    let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["schema"], "nats_sinks.s3.object.v1");
    assert_eq!(doc["headers"]["x-trace"], "t-1");
    assert_eq!(doc["metadata"]["jetstream"]["stream_sequence"], 7);
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_temporary_transport_failure_without_open() {
    use sinks_certify::Harness;
    // The certification's unreachable sink is never opened: its writes must still reach the
    // (closed) endpoint and fail there, not short-cut on a missing client.
    let sink = harness().await.unreachable().await.unwrap();
    let outcomes = write(sink.as_ref(), &[envelope("U", 1, "u.x", "{}")]).await;
    let error = error_of(&outcomes[0]);
    assert_eq!(error.class(), ErrorClass::Temporary);
    assert_eq!(error.error_type(), "transport", "{}", error.message());
    assert_eq!(sink.health_check().await.unwrap_err().error_type(), "transport");
}
