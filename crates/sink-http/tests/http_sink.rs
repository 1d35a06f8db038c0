//! The HTTP sink against a real HTTP server (axum, in-process on 127.0.0.1): requests and
//! bodies, concurrency and order by ordering key, retries in place and hand-backs, timeouts
//! and the inquiry, throttling,
//! refusals, duplicates and conflicts, dropped connections, redirects, batch mode, TLS and
//! mutual TLS, health checks, and the reference configuration.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

use std::time::{Duration, Instant};

use reqwest::Version;
use sink_http::{BatchMode, HttpSink, HttpSinkConfig, HttpVersion, KeyStrategy};
use sinks_contract::testing::{self, classes, envelope, envelope_with, error_of};
use sinks_contract::{
    Capabilities, ConflictResolution, Envelope, ErrorClass, Headers, MessageOutcome, OutcomeClass, Sink,
};
use sinks_testkit::{HttpFault, HttpServerTls, HttpTestServer};

/// What an HTTP sink without `inquiry_url` says about its read-back.
const NO_INQUIRY: &str = "it reads its endpoint back only through sink.inquiry_url, with idempotency keys";

async fn server() -> HttpTestServer {
    HttpTestServer::start().await.expect("test server")
}

fn config(server: &HttpTestServer) -> HttpSinkConfig {
    HttpSinkConfig::local(server.url())
}

/// The reference's `retry.max_retries: 0`: every temporary failure goes straight back to
/// the runner (for tests of a single attempt's outcome).
fn single_attempt(server: &HttpTestServer) -> HttpSinkConfig {
    let mut c = config(server);
    c.retry.max_retries = 0;
    c
}

async fn opened(config: HttpSinkConfig) -> HttpSink {
    testing::opened(HttpSink::new(config).expect("valid config")).await
}

async fn write(sink: &HttpSink, batch: &[Envelope]) -> Vec<MessageOutcome> {
    testing::write(sink, batch).await
}

fn json(seq: u64) -> String {
    format!("{{\"seq\":{seq}}}")
}

/// Envelopes `first..=last` of stream `S`, each on its own subject.
fn distinct(first: u64, last: u64) -> Vec<Envelope> {
    (first..=last).map(|s| envelope("S", s, &format!("subject.{s}"), json(s))).collect()
}

/// An always-present environment variable usable as a header value (the tests cannot set
/// one: that is `unsafe` in edition 2024).
fn present_variable() -> (&'static str, String) {
    ["PATH", "HOME", "USER"]
        .into_iter()
        .find_map(|name| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty() && v == v.trim() && v.bytes().all(|b| (0x21..0x7f).contains(&b)))
                .map(|v| (name, v))
        })
        .expect("PATH, HOME or USER is set")
}

#[tokio::test]
async fn every_message_is_one_keyed_request_and_one_record() {
    let srv = server().await;
    let mut c = config(&srv);
    c.headers.insert("X-Tenant".into(), "blue".into());
    let sink = opened(c).await;
    assert_eq!(sink.name(), "http");
    assert_eq!(
        sink.capabilities(),
        Capabilities::new()
            .atomic_batch(false)
            .reports_duplicates(true)
            .detects_conflicts(false)
            .read_back_note(NO_INQUIRY)
    );
    let batch = distinct(1, 10);
    assert_eq!(classes(&write(&sink, &batch).await), vec![OutcomeClass::Committed; 10]);

    let writes = srv.writes();
    assert_eq!(writes.len(), 10);
    for w in &writes {
        assert_eq!(w.method, "POST");
        assert_eq!(w.path, "/ingest");
        assert_eq!(w.headers["content-type"], "application/json");
        assert_eq!(w.headers["accept"], "application/json");
        assert_eq!(w.headers["user-agent"], "nats-sinks-http/0.4");
        assert_eq!(w.headers["x-tenant"], "blue");
        let body: serde_json::Value = serde_json::from_slice(&w.body).unwrap();
        assert_eq!(body["schema"], "nats_sinks.http.message.v1");
        assert_eq!(w.key().unwrap(), body["idempotency_key"].as_str().unwrap(), "header and body carry one key");
        assert_eq!(body["payload"], serde_json::json!({"seq": body["stream_sequence"]}));
    }
    let records = srv.read_records().unwrap();
    assert_eq!(records.len(), 10);
    for (key, payload) in records {
        let seq: u64 = key.strip_prefix("stream-sequence:S:").unwrap().parse().unwrap();
        assert_eq!(payload, json(seq));
    }
}

#[tokio::test]
async fn keep_alive_reuses_one_connection() {
    let srv = server().await;
    let sink = opened(config(&srv)).await;
    for s in 1..=20 {
        write(&sink, &[envelope("S", s, "one", json(s))]).await;
    }
    assert_eq!(srv.writes().len(), 20);
    assert_eq!(srv.connections(), 1, "sequential writes share a pooled connection");
}

#[tokio::test]
async fn distinct_subjects_are_sent_concurrently_up_to_the_limit() {
    let srv = server().await;
    srv.set_delay(Duration::from_millis(200));
    let mut c = config(&srv);
    c.max_concurrent_requests = 4;
    let sink = opened(c).await;
    let started = Instant::now();
    let outcomes = write(&sink, &distinct(1, 12)).await;
    let elapsed = started.elapsed();
    assert_eq!(classes(&outcomes), vec![OutcomeClass::Committed; 12]);
    assert_eq!(srv.max_in_flight(), 4, "requests overlap, bounded by max_concurrent_requests");
    assert!(elapsed < Duration::from_millis(1500), "12 × 200 ms in 3 waves, took {elapsed:?}");
}

#[tokio::test]
async fn same_subject_requests_stay_ordered_and_never_overlap() {
    let srv = server().await;
    srv.set_delay(Duration::from_millis(50));
    let sink = opened(config(&srv)).await;
    // Two subjects interleaved: each subject in order, the two subjects side by side.
    let batch: Vec<Envelope> =
        (1..=10).map(|s| envelope("S", s, if s % 2 == 0 { "even" } else { "odd" }, json(s))).collect();
    assert_eq!(classes(&write(&sink, &batch).await), vec![OutcomeClass::Committed; 10]);
    assert_eq!(srv.max_in_flight(), 2, "one request per subject at a time");
    for subject in ["even", "odd"] {
        let mut seen: Vec<_> = srv
            .writes()
            .into_iter()
            .map(|w| (serde_json::from_slice::<serde_json::Value>(&w.body).unwrap(), w))
            .filter(|(b, _)| b["subject"] == subject)
            .collect();
        let seqs: Vec<u64> = seen.iter().map(|(b, _)| b["stream_sequence"].as_u64().unwrap()).collect();
        let mut sorted = seqs.clone();
        sorted.sort_unstable();
        assert_eq!(seqs, sorted, "{subject} arrived in input order");
        for pair in seen.windows(2) {
            assert!(pair[1].1.started >= pair[0].1.finished.unwrap(), "{subject} requests do not overlap");
        }
        seen.clear();
    }
}

#[tokio::test]
async fn a_temporary_failure_holds_back_later_messages_of_its_ordering_key() {
    let srv = server().await;
    srv.push(HttpFault::Status(503));
    let mut c = single_attempt(&srv);
    c.max_concurrent_requests = 1;
    let sink = opened(c).await;
    let batch = vec![
        envelope("S", 1, "a", json(1)),
        envelope("S", 2, "a", json(2)),
        envelope("S", 3, "b", json(3)),
        envelope("S", 4, "a", json(4)),
    ];
    let outcomes = write(&sink, &batch).await;
    use OutcomeClass::*;
    assert_eq!(classes(&outcomes), [FailedTemporary, HeldBack, Committed, HeldBack]);
    assert_eq!(srv.writes().len(), 2, "the held-back messages were never sent");
    assert_eq!(srv.read_records().unwrap().len(), 1);
}

#[tokio::test]
async fn without_ordering_keys_one_subject_goes_concurrently_and_nothing_is_held_back() {
    let srv = server().await;
    srv.set_delay(Duration::from_millis(100));
    srv.push(HttpFault::Status(503));
    let mut c = single_attempt(&srv);
    c.max_concurrent_requests = 8;
    let sink = opened(c).await;
    // `delivery.ordering_key: none`: the runner gives the envelopes no key.
    let batch: Vec<Envelope> = (1..=8).map(|s| envelope("S", s, "one", json(s)).with_order_key(None)).collect();
    let outcomes = write(&sink, &batch).await;
    let failed = classes(&outcomes).iter().filter(|c| **c == OutcomeClass::FailedTemporary).count();
    let committed = classes(&outcomes).iter().filter(|c| **c == OutcomeClass::Committed).count();
    assert_eq!((failed, committed), (1, 7), "one failure, nothing held back: {outcomes:?}");
    assert_eq!(srv.max_in_flight(), 8, "one subject, eight requests at once");
}

#[tokio::test]
async fn retries_in_place_keep_a_key_moving_by_default() {
    let srv = server().await;
    // Every other key fails its first request: the defaults retry each in place, in order.
    srv.set_flaky_every(Some(2), None);
    let sink = opened(config(&srv)).await;
    let batch: Vec<Envelope> = (1..=6).map(|s| envelope("S", s, "one", json(s))).collect();
    let outcomes = write(&sink, &batch).await;
    assert_eq!(classes(&outcomes), vec![OutcomeClass::Committed; 6]);
    let order: Vec<u64> = srv
        .writes()
        .iter()
        .filter(|w| w.status == Some(201))
        .map(|w| serde_json::from_slice::<serde_json::Value>(&w.body).unwrap()["stream_sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(order, [1, 2, 3, 4, 5, 6], "committed in order");
    assert_eq!(srv.writes().len(), 9, "three keys needed a second request");
    assert!(srv.successes().values().all(|n| *n == 1));
}

#[tokio::test]
async fn failing_n_times_is_temporary_until_it_succeeds() {
    let srv = server().await;
    srv.push_n(2, HttpFault::Status(503));
    let sink = opened(single_attempt(&srv)).await;
    let e = envelope("S", 1, "s", json(1));
    for _ in 0..2 {
        let outcomes = write(&sink, std::slice::from_ref(&e)).await;
        assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Temporary);
        assert!(error_of(&outcomes[0]).message().contains("503"));
    }
    assert!(matches!(write(&sink, &[e]).await[0], MessageOutcome::Committed));
    assert_eq!(srv.writes().len(), 3);
}

#[tokio::test]
async fn in_call_retries_absorb_failures_with_the_same_key() {
    let srv = server().await;
    srv.push(HttpFault::Status(500));
    srv.push(HttpFault::Drop);
    let mut c = config(&srv);
    c.retry.max_retries = 2;
    c.retry.backoff_ms = 10;
    c.retry.max_backoff_ms = 50;
    let sink = opened(c).await;
    assert!(matches!(write(&sink, &[envelope("S", 1, "s", json(1))]).await[0], MessageOutcome::Committed));
    let writes = srv.writes();
    assert_eq!(writes.len(), 3);
    let keys: Vec<_> = writes.iter().map(|w| w.key().unwrap()).collect();
    assert!(keys.iter().all(|k| k == "stream-sequence:S:1"), "every attempt carries the event's key: {keys:?}");
    assert!(writes.windows(2).all(|w| w[0].body == w[1].body), "every attempt sends the same body");

    // A Retry-After beyond max_backoff_ms ends the in-call retries at once.
    srv.push(HttpFault::StatusRetryAfter(429, "30".into()));
    let outcomes = write(&sink, &[envelope("S", 2, "s", json(2))]).await;
    assert_eq!(error_of(&outcomes[0]).retry_after(), Some(Duration::from_secs(30)));
    assert_eq!(srv.writes().len(), 4, "no retry inside the call");
}

#[tokio::test]
async fn retries_stop_in_time_for_the_write_budget() {
    let srv = server().await;
    srv.push_n(10, HttpFault::Stall(Duration::from_secs(3)));
    let mut c = config(&srv);
    c.request_timeout_seconds = 0.3;
    let sink = opened(c).await;
    // A budget of 0.5 s leaves room for one request of 0.3 s, not for a retry.
    let outcomes = sink.write(&[envelope("S", 1, "s", json(1))], Duration::from_millis(500)).await.unwrap();
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Temporary);
    assert_eq!(srv.writes().len(), 1, "no retry that would overrun the budget");
}

#[tokio::test]
async fn retry_after_becomes_the_redelivery_delay() {
    let srv = server().await;
    srv.push(HttpFault::StatusRetryAfter(429, "7".into()));
    srv.push(HttpFault::StatusRetryAfter(
        503,
        httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(120)),
    ));
    srv.push(HttpFault::Status(503));
    let mut c = single_attempt(&srv);
    c.max_concurrent_requests = 1;
    let sink = opened(c).await;
    let outcomes = write(&sink, &distinct(1, 3)).await;
    let e0 = error_of(&outcomes[0]);
    assert_eq!((e0.class(), e0.retry_after()), (ErrorClass::Temporary, Some(Duration::from_secs(7))));
    let from_date = error_of(&outcomes[1]).retry_after().unwrap();
    assert!(from_date > Duration::from_secs(100) && from_date <= Duration::from_secs(120), "{from_date:?}");
    assert_eq!(error_of(&outcomes[2]).class(), ErrorClass::Temporary, "503 without Retry-After");
    assert_eq!(error_of(&outcomes[2]).retry_after(), None);
    assert!(srv.records().is_empty());
}

#[tokio::test]
async fn a_refused_message_fails_alone_while_its_batch_mates_commit() {
    let srv = server().await;
    srv.set_reject_marker(Some(b"REFUSE-ME"));
    let sink = opened(config(&srv)).await;
    let mut batch = distinct(1, 5);
    batch[2] = envelope("S", 3, "subject.3", "text with REFUSE-ME inside");
    let outcomes = write(&sink, &batch).await;
    use OutcomeClass::*;
    assert_eq!(classes(&outcomes), [Committed, Committed, FailedPermanent, Committed, Committed]);
    let e = error_of(&outcomes[2]);
    assert!(e.message().contains("400"), "{}", e.message());
    assert!(!e.display_chain().contains("REFUSE-ME"), "no payload in errors");
    assert_eq!(srv.read_records().unwrap().len(), 4);
}

/// True for the refusal of a different event under a stream-sequence key.
fn reused(o: &MessageOutcome) -> bool {
    matches!(o, MessageOutcome::Failed(e) if e.is_permanent() && e.reason() == Some(sinks_contract::existing::SEQUENCE_REUSED))
}

#[tokio::test]
async fn a_repeated_key_is_a_duplicate_and_other_content_a_conflict() {
    let srv = server().await;
    let mut c = config(&srv);
    c.conflict_statuses = vec![422];
    let sink = opened(c).await;
    assert!(sink.capabilities().detects_conflicts);
    let first = envelope("S", 1, "s", "{\"v\":1}");
    write(&sink, std::slice::from_ref(&first)).await;
    let again = envelope_with("S", 1, "s", "{\"v\":1}", Headers::new(), 2);
    assert!(matches!(write(&sink, &[again]).await[0], MessageOutcome::Duplicate));
    // Under the default stream-sequence keys other content is a reused sequence: refused.
    let changed = envelope("S", 1, "s", "{\"v\":2}");
    let outcomes = write(&sink, &[changed]).await;
    assert!(reused(&outcomes[0]), "{outcomes:?}");
    assert_eq!(srv.read_records().unwrap(), [("stream-sequence:S:1".to_owned(), bytes::Bytes::from("{\"v\":1}"))]);
    // Under message id keys the endpoint's record is kept and the conflict acknowledged.
    let mut by_id = config(&srv);
    by_id.conflict_statuses = vec![422];
    by_id.idempotency.strategy = KeyStrategy::MessageId;
    let by_id = opened(by_id).await;
    let with_id = |seq: u64, v: u32| {
        envelope_with("S", seq, "s", format!("{{\"v\":{v}}}"), Headers::new().with("Nats-Msg-Id", "m-9"), 1)
    };
    assert_eq!(classes(&write(&by_id, &[with_id(5, 1)]).await), [OutcomeClass::Committed]);
    let outcomes = write(&by_id, &[with_id(6, 2)]).await;
    assert!(matches!(outcomes[0], MessageOutcome::Conflict(ConflictResolution::KeptExisting)), "{outcomes:?}");
    // A later epoch of the stream keys the same sequence apart: stored next to the old one.
    let later = envelope("S", 1, "s", "{\"v\":2}").with_stream_epoch(Some("e2".into()));
    assert_eq!(classes(&write(&sink, std::slice::from_ref(&later)).await), [OutcomeClass::Committed]);
    let sent: serde_json::Value = serde_json::from_slice(&srv.writes().last().unwrap().body).unwrap();
    assert_eq!((&sent["stream"], &sent["stream_epoch"]), (&serde_json::json!("S"), &serde_json::json!("e2")));
    assert_eq!(sent["idempotency_key"], "stream-sequence:S.e2:1");
    assert_eq!(classes(&write(&sink, &[later]).await), [OutcomeClass::Duplicate]);

    // 412 is a duplicate status too; without conflict statuses a 422 is a refusal.
    srv.set_duplicate_status(412);
    let plain = opened(config(&srv)).await;
    assert!(matches!(write(&plain, std::slice::from_ref(&first)).await[0], MessageOutcome::Duplicate));
    let outcomes = write(&plain, &[envelope("S", 1, "s", "{\"v\":3}")]).await;
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Permanent);
}

#[tokio::test]
async fn duplicate_statuses_need_a_key_on_the_request() {
    let srv = server().await;
    let mut c = config(&srv);
    c.idempotency.enabled = false;
    c.idempotency.required = false;
    let sink = opened(c).await;
    assert!(!sink.capabilities().reports_duplicates);
    srv.push(HttpFault::Status(409));
    let outcomes = write(&sink, &[envelope("S", 1, "s", json(1))]).await;
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Permanent, "409 without a key proves nothing");
    assert!(srv.writes()[0].key().is_none(), "no key header when keys are disabled");
}

#[tokio::test]
async fn a_dropped_connection_is_temporary() {
    let srv = server().await;
    srv.push(HttpFault::Drop);
    let sink = opened(single_attempt(&srv)).await;
    let e = envelope("S", 1, "s", json(1));
    let outcomes = write(&sink, std::slice::from_ref(&e)).await;
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Temporary, "{:?}", outcomes[0]);
    assert!(srv.records().is_empty());
    assert!(matches!(write(&sink, &[e]).await[0], MessageOutcome::Committed), "the next delivery goes through");
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let srv = server().await;
    let other = server().await;
    srv.push(HttpFault::Redirect(307, other.url()));
    srv.push(HttpFault::Redirect(301, "/elsewhere".into()));
    let mut c = config(&srv);
    c.max_concurrent_requests = 1;
    let sink = opened(c).await;
    let outcomes = write(&sink, &distinct(1, 2)).await;
    for o in &outcomes {
        let e = error_of(o);
        assert_eq!(e.class(), ErrorClass::Permanent);
        assert!(e.message().contains("redirects are not followed"), "{}", e.message());
    }
    assert_eq!(srv.writes().len(), 2);
    assert!(other.requests().is_empty(), "nothing reached the redirect target");
}

#[tokio::test]
async fn a_slow_answer_beyond_the_timeout_is_temporary() {
    let srv = server().await;
    srv.push(HttpFault::Stall(Duration::from_secs(3)));
    let mut c = single_attempt(&srv);
    c.request_timeout_seconds = 0.3;
    let sink = opened(c).await;
    let started = Instant::now();
    let outcomes = write(&sink, &[envelope("S", 1, "s", json(1))]).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    let e = error_of(&outcomes[0]);
    assert_eq!(e.class(), ErrorClass::Temporary);
    assert!(e.message().contains("timed out"), "{}", e.message());
}

#[tokio::test]
async fn after_a_timeout_the_inquiry_finds_the_committed_key() {
    let srv = server().await;
    srv.push(HttpFault::CommitThenStall(Duration::from_secs(3)));
    let mut c = config(&srv);
    c.request_timeout_seconds = 0.3;
    c.inquiry_url = Some(srv.inquiry_url());
    let sink = opened(c).await;
    let outcomes = write(&sink, &[envelope("S", 1, "s", json(1))]).await;
    assert!(matches!(outcomes[0], MessageOutcome::Duplicate), "{:?}", outcomes[0]);
    let requests = srv.requests();
    assert_eq!(requests.len(), 2, "one write, one inquiry");
    assert_eq!(requests[1].method, "GET");
    assert_eq!(requests[1].path, "/records/stream%2Dsequence%3AS%3A1");
}

#[tokio::test]
async fn after_a_timeout_an_unknown_key_is_sent_again_once() {
    let srv = server().await;
    srv.push(HttpFault::Stall(Duration::from_secs(3)));
    let mut c = single_attempt(&srv);
    c.request_timeout_seconds = 0.3;
    c.inquiry_url = Some(srv.inquiry_url());
    let sink = opened(c).await;
    let outcomes = write(&sink, &[envelope("S", 1, "s", json(1))]).await;
    assert!(matches!(outcomes[0], MessageOutcome::Committed), "{:?}", outcomes[0]);
    let methods: Vec<String> = srv.requests().iter().map(|r| r.method.to_string()).collect();
    assert_eq!(methods, ["POST", "GET", "POST"]);

    // A second timeout after the resend is not inquired again: temporary.
    srv.push_n(2, HttpFault::Stall(Duration::from_secs(3)));
    let outcomes = write(&sink, &[envelope("S", 2, "s", json(2))]).await;
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Temporary);
    let methods: Vec<String> = srv.requests().iter().skip(3).map(|r| r.method.to_string()).collect();
    assert_eq!(methods, ["POST", "GET", "POST"]);
}

#[tokio::test]
async fn an_inquiry_that_cannot_tell_leaves_the_message_temporary() {
    let srv = server().await;
    srv.push(HttpFault::Stall(Duration::from_secs(3)));
    let mut c = config(&srv);
    c.request_timeout_seconds = 0.3;
    c.retry.max_retries = 0;
    // The inquiry endpoint answers 405 for POST-only paths: neither found nor not found.
    c.inquiry_url = Some(format!("{}/lookup?key={{key}}", srv.base_url()));
    let sink = opened(c).await;
    let outcomes = write(&sink, &[envelope("S", 1, "s", json(1))]).await;
    let e = error_of(&outcomes[0]);
    assert_eq!(e.class(), ErrorClass::Temporary);
    assert!(e.message().contains("inquiry"), "{}", e.message());
}

#[tokio::test]
async fn batch_mode_json_array_sends_chunks_all_or_nothing() {
    let srv = server().await;
    let mut c = config(&srv);
    c.batch_mode = BatchMode::JsonArray;
    c.max_batch_items = 4;
    let sink = opened(c).await;
    assert_eq!(
        sink.capabilities(),
        Capabilities::new()
            .atomic_batch(true)
            .reports_duplicates(false)
            .detects_conflicts(false)
            .read_back_note(NO_INQUIRY)
    );
    let batch = distinct(1, 10);
    assert_eq!(classes(&write(&sink, &batch).await), vec![OutcomeClass::Committed; 10]);
    let writes = srv.writes();
    assert_eq!(writes.len(), 3, "4 + 4 + 2");
    for w in &writes {
        assert_eq!(w.headers["content-type"], "application/json");
        assert!(w.key().unwrap().starts_with("batch-sha256:"));
        let items: Vec<serde_json::Value> = serde_json::from_slice(&w.body).unwrap();
        assert!(items.len() <= 4);
    }
    assert_eq!(srv.read_records().unwrap().len(), 10);
    // The same batch again: every request is a duplicate of a committed one.
    assert_eq!(classes(&write(&sink, &batch).await), vec![OutcomeClass::Duplicate; 10]);

    // A retry status is retried in place; beyond the retries it fails every envelope of the
    // request temporarily.
    srv.push(HttpFault::Status(503));
    assert_eq!(classes(&write(&sink, &distinct(11, 12)).await), vec![OutcomeClass::Committed; 2]);
    srv.push_n(4, HttpFault::Status(503));
    let outcomes = write(&sink, &distinct(13, 14)).await;
    assert_eq!(classes(&outcomes), vec![OutcomeClass::FailedTemporary; 2]);
}

/// A conflict status on a batch request: each envelope is judged by its own key, so under
/// stream-sequence keys none is acknowledged, and under message id keys all are conflicts.
#[tokio::test]
async fn a_conflict_answer_to_a_batch_request_is_judged_per_envelope() {
    let srv = server().await;
    for (strategy, want_reused) in [(KeyStrategy::StreamSequence, true), (KeyStrategy::MessageId, false)] {
        let mut c = config(&srv);
        c.batch_mode = BatchMode::JsonArray;
        c.conflict_statuses = vec![422];
        c.idempotency.strategy = strategy;
        let sink = opened(c).await;
        let batch: Vec<Envelope> = (1..=3)
            .map(|seq| {
                let headers = Headers::new().with("Nats-Msg-Id", format!("{strategy:?}-{seq}"));
                envelope_with("B", seq, "b", json(seq), headers, 1)
            })
            .collect();
        srv.push(HttpFault::Status(422));
        let outcomes = write(&sink, &batch).await;
        for o in &outcomes {
            if want_reused {
                assert!(reused(o), "{strategy:?}: {o:?}");
            } else {
                assert!(matches!(o, MessageOutcome::Conflict(ConflictResolution::KeptExisting)), "{strategy:?}: {o:?}");
            }
        }
    }
}

#[tokio::test]
async fn batch_mode_refusal_is_a_batch_error_that_bisects_to_the_culprit() {
    let srv = server().await;
    srv.set_reject_marker(Some(b"REFUSE-ME"));
    let mut c = config(&srv);
    c.batch_mode = BatchMode::Ndjson;
    let sink = opened(c).await;
    let mut batch = distinct(1, 4);
    batch[1] = envelope("S", 2, "subject.2", "REFUSE-ME");
    let err =
        sink.write(&batch, sinks_contract::DEFAULT_BUDGET).await.expect_err("a refused batch request fails the write");
    assert!(err.is_permanent());
    assert!(srv.records().is_empty(), "all or nothing");
    // What the runner does next: split until the refused envelope stands alone.
    let halves = [&batch[..2], &batch[2..]];
    assert!(sink.write(halves[0], sinks_contract::DEFAULT_BUDGET).await.is_err());
    assert_eq!(classes(&write(&sink, halves[1]).await), vec![OutcomeClass::Committed; 2]);
    assert_eq!(classes(&write(&sink, &batch[..1]).await), [OutcomeClass::Committed]);
    assert_eq!(classes(&write(&sink, &batch[1..2]).await), [OutcomeClass::FailedPermanent]);
    assert_eq!(srv.read_records().unwrap().len(), 3);
}

#[tokio::test]
async fn batch_mode_ndjson_sends_one_envelope_per_line() {
    let srv = server().await;
    let mut c = config(&srv);
    c.batch_mode = BatchMode::Ndjson;
    let sink = opened(c).await;
    let mut batch = distinct(1, 3);
    batch.push(envelope("S", 4, "subject.4", "{\n  \"pretty\": true\n}"));
    assert_eq!(classes(&write(&sink, &batch).await), vec![OutcomeClass::Committed; 4]);
    let writes = srv.writes();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].headers["content-type"], "application/x-ndjson");
    let lines: Vec<&[u8]> = writes[0].body.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 4);
    for line in lines {
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        assert_eq!(v["schema"], "nats_sinks.http.message.v1");
    }
    let record = srv.record("stream-sequence:S:4").unwrap();
    let v: serde_json::Value = serde_json::from_slice(&record.body).unwrap();
    assert_eq!(v["payload"], serde_json::json!({"pretty": true}));
}

#[tokio::test]
async fn messages_that_can_never_be_sent_fail_alone() {
    let srv = server().await;
    let mut c = config(&srv);
    c.idempotency.strategy = KeyStrategy::MessageId;
    c.max_request_bytes = 4096;
    let sink = opened(c).await;
    let with_id = |seq: u64, body: String| {
        envelope_with("S", seq, "s", body, Headers::new().with("Nats-Msg-Id", format!("id-{seq}")), 1)
    };
    let batch = vec![
        with_id(1, json(1)),
        envelope("S", 2, "s", json(2)), // no message id: no key
        with_id(3, "x".repeat(8000)),   // too large
        with_id(4, json(4)),
    ];
    let outcomes = write(&sink, &batch).await;
    use OutcomeClass::*;
    assert_eq!(classes(&outcomes), [Committed, FailedPermanent, FailedPermanent, Committed]);
    assert!(error_of(&outcomes[1]).message().contains("idempotency key"));
    assert!(error_of(&outcomes[2]).message().contains("max_request_bytes"));
    assert_eq!(srv.writes().len(), 2);
    assert!(srv.record("message-id:id-4").is_some());
}

#[tokio::test]
async fn unicode_message_ids_travel_percent_encoded_in_the_header() {
    let srv = server().await;
    let mut c = config(&srv);
    c.idempotency.strategy = KeyStrategy::MessageId;
    let sink = opened(c).await;
    let e = envelope_with("S", 1, "s", "{}", Headers::new().with("Nats-Msg-Id", "ид 50%"), 1);
    assert!(matches!(write(&sink, &[e]).await[0], MessageOutcome::Committed));
    let w = &srv.writes()[0];
    assert_eq!(w.headers["idempotency-key"], "message-id:%D0%B8%D0%B4%2050%25");
    assert!(srv.record("message-id:ид 50%").is_some(), "decoded, the header is the key");
}

#[tokio::test]
async fn payload_body_format_and_methods() {
    let srv = server().await;
    let mut c = config(&srv);
    c.body_format = sink_http::BodyFormat::Payload;
    c.method = sink_http::HttpMethod::Put;
    let sink = opened(c).await;
    write(&sink, &[envelope("S", 1, "s", " {\"a\": 1} ")]).await;
    let w = &srv.writes()[0];
    assert_eq!(w.method, "PUT");
    assert_eq!(w.body, "{\"a\": 1}");
    assert_eq!(srv.read_records().unwrap()[0].1, "{\"a\": 1}");
}

#[tokio::test]
async fn headers_env_is_read_at_every_request_and_a_missing_variable_is_a_config_error() {
    let srv = server().await;
    let (variable, value) = present_variable();
    srv.set_required_header("X-Token", &value);
    let mut c = config(&srv);
    c.headers_env.insert("X-Token".into(), variable.into());
    let sink = opened(c).await;
    assert!(matches!(write(&sink, &[envelope("S", 1, "s", json(1))]).await[0], MessageOutcome::Committed));

    let missing = format!("NATS_SINKS_TEST_UNSET_{}", std::process::id());
    let mut c = config(&srv);
    c.headers_env.insert("Authorization".into(), missing);
    let sink = HttpSink::new(c).expect("valid config");
    let err = sink.open().await.expect_err("a missing variable stops start-up");
    assert_eq!(err.class(), ErrorClass::Config);
    assert!(err.message().contains("sink.headers_env.authorization"), "{}", err.message());
    let outcomes = write(&sink, &[envelope("S", 2, "s", json(2))]).await;
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Config, "retried, never dead-lettered");
    assert_eq!(srv.writes().len(), 1, "nothing was sent without the secret");
}

#[tokio::test]
async fn health_check_needs_a_reachable_endpoint() {
    let srv = server().await;
    let sink = opened(config(&srv)).await;
    sink.health_check().await.expect("OPTIONS answered");
    assert_eq!(srv.requests().last().unwrap().method, "OPTIONS");

    let mut c = config(&srv);
    c.health_url = Some(srv.health_url());
    opened(c).await.health_check().await.expect("GET /health answered 200");

    let mut c = config(&srv);
    c.health_url = Some(format!("{}/no-such-page", srv.base_url()));
    assert!(opened(c).await.health_check().await.is_err(), "a health URL must answer success");

    let addr = srv.addr();
    drop(srv);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let gone = opened(HttpSinkConfig::local(format!("http://{addr}/ingest"))).await;
    let err = gone.health_check().await.expect_err("nothing listens");
    assert_eq!(err.class(), ErrorClass::Temporary);
    let outcomes = write(&gone, &distinct(1, 2)).await;
    assert!(outcomes.iter().all(|o| o.class() == OutcomeClass::FailedTemporary), "{outcomes:?}");
}

#[tokio::test]
async fn h2c_prior_knowledge_and_http1_only() {
    let srv = server().await;
    let mut c = config(&srv);
    c.http_version = HttpVersion::Http2PriorKnowledge;
    write(&opened(c).await, &distinct(1, 3)).await;
    assert!(srv.writes().iter().all(|w| w.version == Version::HTTP_2));
    assert_eq!(srv.connections(), 1, "HTTP/2 multiplexes one connection");
    let mut c = config(&srv);
    c.http_version = HttpVersion::Http1Only;
    write(&opened(c).await, &distinct(4, 4)).await;
    assert_eq!(srv.writes().last().unwrap().version, Version::HTTP_11);
}

#[tokio::test]
async fn reference_config_runs_unchanged() {
    let srv = server().await;
    let text = format!(
        r#"{{"nats": {{"url": "nats://127.0.0.1:4222", "stream": "ORDERS", "consumer": "orders-http",
                     "subject": "orders.>"}},
            "delivery": {{"batch_size": 50}},
            "sink": {{"type": "http", "url": "{}", "method": "POST", "body_format": "envelope",
                      "endpoint_allowed_hosts": ["127.0.0.1"], "allow_http_for_local_testing": true,
                      "headers": {{"X-Source": "nats-sinks"}}, "headers_env": {{}},
                      "user_agent": "nats-sinks-http/0.4", "request_timeout_seconds": 10.0,
                      "max_request_bytes": 1048576, "max_response_bytes": 65536,
                      "success_statuses": [200, 201, 202, 204],
                      "retry_statuses": [408, 425, 429, 500, 502, 503, 504],
                      "payload_mode": "json_or_envelope", "include_metadata": true,
                      "include_mission_metadata": true, "include_security_labels": true,
                      "include_custody": true,
                      "idempotency": {{"enabled": true, "required": true, "header": "Idempotency-Key",
                                       "strategy": "idempotency_key"}},
                      "retry": {{"max_retries": 0, "backoff_ms": 250, "max_backoff_ms": 5000,
                                 "backoff_mode": "exponential", "backoff_multiplier": 2.0, "jitter": "full"}}}}}}"#,
        srv.url()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nats-sinks.json");
    std::fs::write(&path, text).unwrap();
    let config = sinks_runtime::Config::load(&path).expect("reference config loads");
    assert_eq!(config.sink.kind(), Some("http"));
    let sink_config = HttpSinkConfig::from_section(&config.sink).expect("reference sink section");
    assert_eq!(sink_config.duplicate_statuses, [409, 412], "additions keep their defaults");
    let sink = opened(sink_config).await;
    assert_eq!(classes(&write(&sink, &distinct(1, 2)).await), vec![OutcomeClass::Committed; 2]);
    assert_eq!(srv.writes()[0].headers["x-source"], "nats-sinks");
}

/// A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate, as PEM.
struct Pki {
    ca_pem: String,
    server_cert_pem: String,
    server_key_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

fn pki() -> Pki {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "nats-sinks test ca");
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, "nats-sinks test");
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        (params.signed_by(&key, &issuer).unwrap().pem(), key.serialize_pem())
    };
    let (server_cert_pem, server_key_pem) =
        leaf(vec!["127.0.0.1".into(), "localhost".into()], ExtendedKeyUsagePurpose::ServerAuth);
    let (client_cert_pem, client_key_pem) = leaf(vec!["client.test".into()], ExtendedKeyUsagePurpose::ClientAuth);
    Pki { ca_pem: ca_cert.pem(), server_cert_pem, server_key_pem, client_cert_pem, client_key_pem }
}

fn write_file(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn tls_with_a_private_ca_negotiates_http2() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let srv = HttpTestServer::start_tls(HttpServerTls {
        cert_chain_pem: pki.server_cert_pem.clone(),
        key_pem: pki.server_key_pem.clone(),
        client_ca_pem: None,
    })
    .await
    .unwrap();
    assert!(srv.url().starts_with("https://127.0.0.1:"));
    let mut c = HttpSinkConfig::new(srv.url());
    c.tls_ca_file = Some(write_file(&dir, "ca.pem", &pki.ca_pem));
    c.tls_ca_only = true;
    let sink = opened(c).await;
    assert_eq!(classes(&write(&sink, &distinct(1, 3)).await), vec![OutcomeClass::Committed; 3]);
    assert!(srv.writes().iter().all(|w| w.version == Version::HTTP_2), "ALPN picked HTTP/2");
    sink.health_check().await.expect("healthy over TLS");

    // The CA added to the system roots works too.
    let mut merged = HttpSinkConfig::new(srv.url());
    merged.tls_ca_file = Some(write_file(&dir, "ca2.pem", &pki.ca_pem));
    assert!(matches!(write(&opened(merged).await, &distinct(4, 4)).await[0], MessageOutcome::Committed));

    // Without the CA the server is not trusted: temporary, nothing sent.
    let untrusted = opened(HttpSinkConfig::new(srv.url())).await;
    let outcomes = write(&untrusted, &distinct(5, 5)).await;
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Temporary);
    assert_eq!(srv.writes().len(), 4);
}

#[tokio::test]
async fn mutual_tls_sends_the_client_certificate() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let srv = HttpTestServer::start_tls(HttpServerTls {
        cert_chain_pem: pki.server_cert_pem.clone(),
        key_pem: pki.server_key_pem.clone(),
        client_ca_pem: Some(pki.ca_pem.clone()),
    })
    .await
    .unwrap();
    let ca = write_file(&dir, "ca.pem", &pki.ca_pem);
    let mut c = HttpSinkConfig::new(srv.url());
    c.tls_ca_file = Some(ca.clone());
    c.tls_ca_only = true;
    c.tls_cert_file = Some(write_file(&dir, "client.pem", &pki.client_cert_pem));
    c.tls_key_file = Some(write_file(&dir, "client.key", &pki.client_key_pem));
    let sink = opened(c).await;
    assert_eq!(classes(&write(&sink, &distinct(1, 2)).await), vec![OutcomeClass::Committed; 2]);

    let mut anonymous = HttpSinkConfig::new(srv.url());
    anonymous.tls_ca_file = Some(ca);
    anonymous.tls_ca_only = true;
    let outcomes = write(&opened(anonymous).await, &distinct(3, 3)).await;
    assert_eq!(error_of(&outcomes[0]).class(), ErrorClass::Temporary, "refused handshake is not the message's fault");
    assert_eq!(srv.writes().len(), 2);
}

#[tokio::test]
async fn unreadable_tls_files_are_config_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = HttpSinkConfig::new("https://127.0.0.1:1/x");
    c.tls_ca_file = Some(dir.path().join("missing.pem"));
    let err = HttpSink::new(c).expect_err("missing CA file");
    assert_eq!(err.issues[0].path, "sink.tls_ca_file");
    let mut c = HttpSinkConfig::new("https://127.0.0.1:1/x");
    c.tls_ca_file = Some(write_file(&dir, "empty.pem", "not a pem"));
    assert_eq!(HttpSink::new(c).expect_err("no certificate").issues[0].path, "sink.tls_ca_file");
    let mut c = HttpSinkConfig::new("https://127.0.0.1:1/x");
    c.tls_cert_file = Some(write_file(&dir, "c.pem", "junk"));
    c.tls_key_file = Some(write_file(&dir, "k.pem", "junk"));
    assert_eq!(HttpSink::new(c).expect_err("bad identity").issues[0].path, "sink.tls_cert_file");
}

#[tokio::test]
async fn benchmark_knobs_keep_memory_small_and_still_deduplicate() {
    let srv = server().await;
    srv.set_request_log(false);
    srv.set_keep_bodies(false);
    let sink = opened(config(&srv)).await;
    let batch = distinct(1, 5);
    assert_eq!(classes(&write(&sink, &batch).await), vec![OutcomeClass::Committed; 5]);
    assert_eq!(classes(&write(&sink, &batch).await), vec![OutcomeClass::Duplicate; 5]);
    assert!(srv.requests().is_empty(), "no request log");
    assert_eq!(srv.record_count(), 5);
    assert!(srv.records().iter().all(|r| r.body.is_empty()), "no stored bodies");
}

#[tokio::test]
async fn answers_are_kept_for_the_ledger_only_once_it_will_ask() {
    use sinks_contract::DestinationRef;
    let srv = server().await;
    let status_of = |sink: &HttpSink, e: &Envelope| match sink
        .destinations()
        .and_then(|d| d.destination(e, &MessageOutcome::Committed))
    {
        Some(DestinationRef::Http { url, status, .. }) => {
            assert_eq!(url, srv.url());
            status
        }
        other => panic!("not an HTTP destination: {other:?}"),
    };
    // Nobody asks (no ledger): the URL alone, and nothing remembered per message.
    let quiet = opened(config(&srv)).await;
    let first = distinct(1, 3);
    assert_eq!(classes(&write(&quiet, &first).await), vec![OutcomeClass::Committed; 3]);
    assert!(first.iter().all(|e| status_of(&quiet, e).is_none()));
    // Told before open, as the runner does with the ledger on: each answer's status.
    let told = HttpSink::new(config(&srv)).unwrap();
    told.destinations().expect("the http sink reports destinations").enable();
    let told = testing::opened(told).await;
    let second = distinct(4, 6);
    assert_eq!(classes(&write(&told, &second).await), vec![OutcomeClass::Committed; 3]);
    let success = srv.writes().last().and_then(|w| w.status).expect("the server answered the writes");
    assert!((200..300).contains(&success), "{success}");
    assert!(second.iter().all(|e| status_of(&told, e) == Some(success)), "{success}");
}
