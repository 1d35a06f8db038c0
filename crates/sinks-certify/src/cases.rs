//! One case per clause of `docs/sink-contract.md`. Each returns [`Outcome`]; none panics on
//! a broken clause (panics are still caught by `run_case`).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::crash::verify;
use super::{Fixture, Harness, Outcome, logs};
use sinks_contract::envelope::{Envelope, Headers};
use sinks_contract::error::ErrorClass;
use sinks_contract::sink::{ConflictResolution, MessageOutcome, Sink};

/// Stream name used in certification envelopes.
pub const CERT_STREAM: &str = "CERT";

fn env(seq: u64, payload: impl Into<Bytes>) -> Envelope {
    envelope_with(CERT_STREAM, seq, &format!("cert.k{}", seq % 5), payload, Headers::new(), 1)
}

/// A first delivery of message `seq` of the certification stream, with the JetStream facts a
/// real message has: the same stored time whenever it is built (a message built twice is the
/// same event, as a redelivery is).
fn envelope_with(
    stream: &str,
    seq: u64,
    subject: &str,
    payload: impl Into<Bytes>,
    headers: Headers,
    delivered: u64,
) -> Envelope {
    let stored = time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_780_000_000 + seq as i64);
    let js = sinks_contract::envelope::JetStreamInfo {
        stream: stream.to_owned(),
        consumer: "certification".to_owned(),
        stream_sequence: seq,
        consumer_sequence: seq,
        delivered,
        pending: 0,
        timestamp: Some(stored),
        domain: None,
    };
    Envelope::new(subject, payload, headers, js)
}

fn json(seq: u64) -> Bytes {
    Bytes::from(format!(r#"{{"seq":{seq},"kind":"certification"}}"#))
}

macro_rules! fail {
    ($($arg:tt)*) => { return Outcome::Fail(format!($($arg)*)) };
}

macro_rules! check {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(reason) => return Outcome::Fail(reason),
        }
    };
}

async fn fresh(h: &dyn Harness) -> Result<Fixture, Outcome> {
    h.fresh().await.map_err(|reason| Outcome::Fail(format!("cannot run: no destination: {reason}")))
}

fn label(o: &MessageOutcome) -> String {
    match o {
        MessageOutcome::Failed(e) => format!("Failed({:?}: {})", e.class(), e.display_chain()),
        other => format!("{other:?}"),
    }
}

async fn write(sink: &dyn Sink, batch: &[Envelope]) -> Result<Vec<MessageOutcome>, String> {
    match sink.write(batch, sinks_contract::DEFAULT_BUDGET).await {
        Ok(outcomes) if outcomes.len() == batch.len() => Ok(outcomes),
        Ok(outcomes) => Err(format!("{} outcomes for {} envelopes", outcomes.len(), batch.len())),
        Err(e) => Err(format!("batch failed: {:?}: {}", e.class(), e.display_chain())),
    }
}

fn all_committed(outcomes: &[MessageOutcome]) -> Result<(), String> {
    match outcomes.iter().position(|o| !matches!(o, MessageOutcome::Committed)) {
        None => Ok(()),
        Some(i) => Err(format!("envelope {i} was not committed: {}", label(&outcomes[i]))),
    }
}

/// Reads the destination and checks it holds exactly `expected` (key → published payload).
async fn holds_exactly(fixture: &Fixture, expected: &[(String, Bytes)]) -> Result<(), String> {
    let records = fixture.records.read_all().await.map_err(|e| format!("read-back failed: {e}"))?;
    let expected: BTreeMap<String, Bytes> = expected.iter().cloned().collect();
    let verdict = verify(&expected, &records);
    if verdict.exactly_once() { Ok(()) } else { Err(verdict.summary()) }
}

fn published(batch: &[Envelope]) -> Vec<(String, Bytes)> {
    batch
        .iter()
        .map(|e| (e.idempotency_key().map(|k| k.to_string()).unwrap_or_default(), e.payload().clone()))
        .collect()
}

/// C1: committed means durable and readable, by key, byte-equal.
pub async fn c1_durable_before_success(h: &dyn Harness) -> Outcome {
    let fx = match fresh(h).await {
        Ok(fx) => fx,
        Err(o) => return o,
    };
    let batch: Vec<Envelope> =
        (1..=20).map(|s| env(s, if s % 4 == 0 { Bytes::from(format!("text {s}")) } else { json(s) })).collect();
    let outcomes = check!(write(fx.sink.as_ref(), &batch).await);
    check!(all_committed(&outcomes));
    check!(holds_exactly(&fx, &published(&batch)).await);
    Outcome::Pass
}

/// C2: one outcome per envelope, in input order.
pub async fn c2_outcomes_aligned(h: &dyn Harness) -> Outcome {
    let fx = match fresh(h).await {
        Ok(fx) => fx,
        Err(o) => return o,
    };
    let first: Vec<Envelope> = (1..=3).map(|s| env(s, json(s))).collect();
    check!(all_committed(&check!(write(fx.sink.as_ref(), &first).await)));
    // New, redelivered, new, redelivered: the outcomes must line up with the positions.
    let mixed = vec![env(4, json(4)), first[0].clone(), env(5, json(5)), first[1].clone()];
    let outcomes = check!(write(fx.sink.as_ref(), &mixed).await);
    let dup_ok = |o: &MessageOutcome| {
        matches!(o, MessageOutcome::Duplicate)
            || (!fx.sink.capabilities().reports_duplicates && matches!(o, MessageOutcome::Committed))
    };
    let aligned = matches!(outcomes[0], MessageOutcome::Committed)
        && dup_ok(&outcomes[1])
        && matches!(outcomes[2], MessageOutcome::Committed)
        && dup_ok(&outcomes[3]);
    if !aligned {
        fail!("outcomes out of line: {:?}", outcomes.iter().map(label).collect::<Vec<_>>());
    }
    let mut all = first;
    all.extend([mixed[0].clone(), mixed[2].clone()]);
    check!(holds_exactly(&fx, &published(&all)).await);
    Outcome::Pass
}

/// C3: an empty batch succeeds with no outcomes and writes nothing.
pub async fn c3_empty_batch(h: &dyn Harness) -> Outcome {
    let fx = match fresh(h).await {
        Ok(fx) => fx,
        Err(o) => return o,
    };
    match fx.sink.write(&[], sinks_contract::DEFAULT_BUDGET).await {
        Ok(o) if o.is_empty() => {}
        Ok(o) => fail!("{} outcomes for an empty batch", o.len()),
        Err(e) => fail!("empty batch failed: {}", e.display_chain()),
    }
    check!(holds_exactly(&fx, &[]).await);
    Outcome::Pass
}

/// C4: a redelivery of committed envelopes changes nothing and reports duplicates.
pub async fn c4_duplicate_is_harmless(h: &dyn Harness) -> Outcome {
    let fx = match fresh(h).await {
        Ok(fx) => fx,
        Err(o) => return o,
    };
    let batch: Vec<Envelope> = (1..=10).map(|s| env(s, json(s))).collect();
    check!(all_committed(&check!(write(fx.sink.as_ref(), &batch).await)));
    // The same messages delivered again (the same JetStream facts, the next delivery count).
    let redelivered: Vec<Envelope> =
        batch.iter().map(|e| sinks_contract::testing::redelivery(e, time::Duration::seconds(5))).collect();
    let outcomes = check!(write(fx.sink.as_ref(), &redelivered).await);
    let reports = fx.sink.capabilities().reports_duplicates;
    for (i, o) in outcomes.iter().enumerate() {
        let ok = matches!(o, MessageOutcome::Duplicate) || (!reports && matches!(o, MessageOutcome::Committed));
        if !ok {
            fail!("redelivered envelope {i}: expected Duplicate, got {}", label(o));
        }
    }
    check!(holds_exactly(&fx, &published(&batch)).await);
    if reports {
        Outcome::Pass
    } else {
        Outcome::Fail("the redelivery was harmless, but the destination does not report duplicates".into())
    }
}

/// C5: same key, different content is reported as a conflict and does not silently win.
/// Under keys made of the stream sequence (every sink's default) a different payload can
/// only be a reused sequence: refused as such (C12), the stored record kept.
pub async fn c5_conflict_is_detected(h: &dyn Harness) -> Outcome {
    let fx = match fresh(h).await {
        Ok(fx) => fx,
        Err(o) => return o,
    };
    if !fx.sink.capabilities().detects_conflicts {
        return Outcome::Fail("the destination cannot tell a conflicting redelivery".into());
    }
    let original = env(1, Bytes::from_static(br#"{"version":1}"#));
    check!(all_committed(&check!(write(fx.sink.as_ref(), std::slice::from_ref(&original)).await)));
    let changed = env(1, Bytes::from_static(br#"{"version":2}"#));
    let outcomes = check!(write(fx.sink.as_ref(), std::slice::from_ref(&changed)).await);
    let stored = match &outcomes[0] {
        MessageOutcome::Conflict(ConflictResolution::Overwritten) => &changed,
        MessageOutcome::Conflict(_) => &original,
        o if is_sequence_reused(o) => &original,
        other => fail!("expected Conflict or a refused reused sequence, got {}", label(other)),
    };
    check!(holds_exactly(&fx, &published(std::slice::from_ref(stored))).await);
    Outcome::Pass
}

fn is_sequence_reused(o: &MessageOutcome) -> bool {
    matches!(o, MessageOutcome::Failed(e) if e.is_permanent() && e.reason() == Some(sinks_contract::existing::SEQUENCE_REUSED))
}

/// C12: a stream sequence used again by a different event (the stream was deleted and
/// re-created, or restored) is never acknowledged as stored: the sink refuses it with the
/// reason `sequence_reused` and keeps the earlier event's record. In a later epoch of the
/// stream ([`Envelope::with_stream_epoch`]) the same sequence names a record of its own: the
/// new event commits next to the old one, and its redelivery is a duplicate.
pub async fn c12_reused_sequence_is_refused(h: &dyn Harness) -> Outcome {
    let fx = match fresh(h).await {
        Ok(fx) => fx,
        Err(o) => return o,
    };
    let old: Vec<Envelope> = (1..=3).map(|s| env(s, json(s))).collect();
    check!(all_committed(&check!(write(fx.sink.as_ref(), &old).await)));
    // The re-created stream hands out the same sequences for other events.
    let new_event = |s: u64| Bytes::from(format!(r#"{{"seq":{s},"kind":"after re-creation"}}"#));
    let reused: Vec<Envelope> = (1..=3).map(|s| env(s, new_event(s))).collect();
    let outcomes = check!(write(fx.sink.as_ref(), &reused).await);
    for (i, o) in outcomes.iter().enumerate() {
        if !is_sequence_reused(o) {
            fail!(
                "a different event under stream sequence {}: expected the refusal sequence_reused, got {}",
                i + 1,
                label(o)
            );
        }
    }
    check!(holds_exactly(&fx, &published(&old)).await);
    let epoch: Vec<Envelope> = reused.iter().map(|e| e.clone().with_stream_epoch(Some("e2".into()))).collect();
    let outcomes = check!(write(fx.sink.as_ref(), &epoch).await);
    if let Err(e) = all_committed(&outcomes) {
        fail!("in a later epoch the same sequences must commit as new records: {e}");
    }
    let again = check!(write(fx.sink.as_ref(), &epoch).await);
    if let Some(o) = again.iter().find(|o| !matches!(o, MessageOutcome::Duplicate)) {
        fail!("a redelivery in the later epoch: expected Duplicate, got {}", label(o));
    }
    let mut both = published(&old);
    both.extend(published(&epoch));
    check!(holds_exactly(&fx, &both).await);
    Outcome::Pass
}

/// C6: a poison message fails permanently, alone; its batch-mates commit.
pub async fn c6_poison_is_isolated(h: &dyn Harness) -> Outcome {
    let Some((fx, poison)) = h.poison().await else {
        return Outcome::Fail("cannot run: the harness cannot make a message this destination rejects".into());
    };
    let base = poison.jetstream().stream_sequence + 1000;
    let good: Vec<Envelope> = (0..4).map(|i| env(base + i, json(base + i))).collect();
    let batch = vec![good[0].clone(), good[1].clone(), poison.clone(), good[2].clone(), good[3].clone()];
    let outcomes = match fx.sink.write(&batch, sinks_contract::DEFAULT_BUDGET).await {
        Ok(o) if o.len() == batch.len() => o,
        Ok(o) => fail!("{} outcomes for {} envelopes", o.len(), batch.len()),
        Err(e) if e.is_permanent() => {
            // A batch-level permanent error: split to single messages, as the runner does.
            let mut singles = Vec::new();
            for e in &batch {
                singles.push(match fx.sink.write(std::slice::from_ref(e), sinks_contract::DEFAULT_BUDGET).await {
                    Ok(mut o) if o.len() == 1 => o.remove(0),
                    Ok(o) => fail!("{} outcomes for 1 envelope", o.len()),
                    Err(err) => MessageOutcome::Failed(err),
                });
            }
            singles
        }
        Err(e) => fail!("poison made the batch fail temporarily: {}", e.display_chain()),
    };
    for (i, o) in outcomes.iter().enumerate() {
        let is_poison = i == 2;
        let ok = if is_poison {
            matches!(o, MessageOutcome::Failed(e) if e.is_permanent())
        } else {
            matches!(o, MessageOutcome::Committed)
        };
        if !ok {
            fail!("envelope {i} ({}): {}", if is_poison { "poison" } else { "good" }, label(o));
        }
    }
    check!(holds_exactly(&fx, &published(&good)).await);
    Outcome::Pass
}

/// C7: an unreachable destination yields temporary (or configuration) failures only.
pub async fn c7_unreachable_is_temporary(h: &dyn Harness) -> Outcome {
    let Some(sink) = h.unreachable().await else {
        return Outcome::Fail("cannot run: the harness cannot make an unreachable destination".into());
    };
    let batch: Vec<Envelope> = (1..=3).map(|s| env(s, json(s))).collect();
    match sink.write(&batch, sinks_contract::DEFAULT_BUDGET).await {
        Err(e) if e.is_permanent() => {
            fail!("unreachable destination reported a permanent batch error: {}", e.display_chain())
        }
        Err(_) => Outcome::Pass,
        Ok(outcomes) if outcomes.len() != batch.len() => {
            fail!("{} outcomes for {} envelopes", outcomes.len(), batch.len())
        }
        Ok(outcomes) => {
            for (i, o) in outcomes.iter().enumerate() {
                match o {
                    MessageOutcome::Failed(e) if e.class() != ErrorClass::Permanent => {}
                    other => fail!("envelope {i} against an unreachable destination: {}", label(other)),
                }
            }
            Outcome::Pass
        }
    }
}

/// Envelopes covering the payload edge cases of clause C8.
pub fn edge_case_envelopes() -> Vec<Envelope> {
    let nested = |depth: usize| format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    let big: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
    let cases: Vec<(&str, Bytes, Headers)> = vec![
        ("cert.empty", Bytes::new(), Headers::new()),
        ("cert.big", Bytes::from(big), Headers::new()),
        ("cert.invalid_utf8", Bytes::from_static(&[0xff, 0xfe, 0x00, 0x80]), Headers::new()),
        ("cert.text", Bytes::from_static(b"hello, not json"), Headers::new()),
        ("cert.nan", Bytes::from_static(br#"{"value": NaN}"#), Headers::new()),
        ("cert.duplicate_keys", Bytes::from_static(br#"{"a":1,"a":2}"#), Headers::new()),
        ("cert.nested_64", Bytes::from(nested(64)), Headers::new()),
        ("cert.nested_1000", Bytes::from(nested(1000)), Headers::new()),
        ("cert.padded_json", Bytes::from_static(b" \n{\"a\": [1, 2.50, 1e3]}\n"), Headers::new()),
        ("cert.big_number", Bytes::from_static(b"{\"n\":123456789012345678901234567890}"), Headers::new()),
        ("cert.ünïcødé.事件", Bytes::from_static("{\"text\":\"ünïcødé ✓\"}".as_bytes()), Headers::new()),
        (
            "cert.unicode_id",
            Bytes::from_static(b"{}"),
            Headers::new().with("Nats-Msg-Id", "ид-😀/../..\\x").with("X-Note", "ünï"),
        ),
    ];
    cases
        .into_iter()
        .enumerate()
        .map(|(i, (subject, payload, headers))| envelope_with(CERT_STREAM, i as u64 + 1, subject, payload, headers, 1))
        .collect()
}

/// C8: edge-case payloads commit and read back byte-equal.
pub async fn c8_payload_edge_cases(h: &dyn Harness) -> Outcome {
    let fx = match fresh(h).await {
        Ok(fx) => fx,
        Err(o) => return o,
    };
    let batch = edge_case_envelopes();
    let outcomes = check!(write(fx.sink.as_ref(), &batch).await);
    for (e, o) in batch.iter().zip(&outcomes) {
        if !matches!(o, MessageOutcome::Committed) {
            fail!("`{}` was not committed: {}", e.subject(), label(o));
        }
    }
    check!(holds_exactly(&fx, &published(&batch)).await);
    Outcome::Pass
}

/// C9: concurrent batches, overlapping on purpose, commit every envelope exactly once.
pub async fn c9_concurrent_batches(h: &dyn Harness) -> Outcome {
    let fx = match fresh(h).await {
        Ok(fx) => fx,
        Err(o) => return o,
    };
    // Eight batches of 50; each also carries the first 5 envelopes of the next batch.
    let batches: Vec<Vec<Envelope>> = (0..8u64)
        .map(|b| {
            let own = (b * 50 + 1)..=(b * 50 + 50);
            let next = ((b + 1) % 8 * 50 + 1)..=((b + 1) % 8 * 50 + 5);
            own.chain(next).map(|s| env(s, json(s))).collect()
        })
        .collect();
    let sink: Arc<dyn Sink> = Arc::clone(&fx.sink);
    let tasks: Vec<_> = batches
        .iter()
        .cloned()
        .map(|batch| {
            let sink = Arc::clone(&sink);
            tokio::spawn(async move { write(sink.as_ref(), &batch).await })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let outcomes = match t.await {
            Ok(r) => check!(r),
            Err(e) => fail!("batch task {i} panicked: {e}"),
        };
        if let Some(o) = outcomes.iter().find(|o| !o.is_durable()) {
            fail!("batch {i}: {}", label(o));
        }
    }
    let all: Vec<Envelope> = (1..=400).map(|s| env(s, json(s))).collect();
    check!(holds_exactly(&fx, &published(&all)).await);
    Outcome::Pass
}

/// C10: the health check passes when reachable and fails when not.
pub async fn c10_health_check(h: &dyn Harness) -> Outcome {
    let fx = match fresh(h).await {
        Ok(fx) => fx,
        Err(o) => return o,
    };
    if let Err(e) = fx.sink.health_check().await {
        fail!("health check failed against a reachable destination: {}", e.display_chain());
    }
    let Some(unreachable) = h.unreachable().await else {
        return Outcome::Fail(
            "cannot run: passes when reachable; no unreachable variant to check the other half".into(),
        );
    };
    match unreachable.health_check().await {
        Ok(()) => Outcome::Fail("health check passed against an unreachable destination".into()),
        Err(_) => Outcome::Pass,
    }
}

/// C11: nothing logged or reported while writing contains payload bytes or secrets.
pub async fn c11_no_secrets_or_payloads_in_logs(h: &dyn Harness) -> Outcome {
    if !logs::install() {
        return Outcome::Fail("cannot run: another tracing subscriber is installed; logs cannot be captured".into());
    }
    let marker = format!("PAYLOAD-MARKER-{:016x}", rand::random::<u64>());
    let fx = match fresh(h).await {
        Ok(fx) => fx,
        Err(o) => return o,
    };
    let mark = logs::mark();
    let mut reported = Vec::new();
    let marked: Vec<Envelope> = (1..=5)
        .map(|s| match s % 3 {
            0 => env(s, Bytes::from(format!(r#"{{"secret":"{marker}"}}"#))),
            1 => env(s, Bytes::from(format!("text {marker}"))),
            _ => env(s, Bytes::from(format!(r#"{{"secret":NaN, "m":"{marker}"}}"#))),
        })
        .collect();
    let mut collect = |result: Result<Vec<MessageOutcome>, sinks_contract::SinkError>| match result {
        Ok(outcomes) => reported.extend(outcomes.iter().map(label)),
        Err(e) => reported.push(e.display_chain()),
    };
    collect(fx.sink.write(&marked, sinks_contract::DEFAULT_BUDGET).await);
    collect(fx.sink.write(&marked, sinks_contract::DEFAULT_BUDGET).await);
    let mut needles = vec![marker.clone()];
    if let Some((pfx, poison)) = h.poison().await {
        let text = String::from_utf8_lossy(poison.payload()).into_owned();
        if text.len() >= 8 {
            needles.push(text);
        }
        collect(pfx.sink.write(std::slice::from_ref(&poison), sinks_contract::DEFAULT_BUDGET).await);
    }
    if let Some(unreachable) = h.unreachable().await {
        collect(unreachable.write(&marked, sinks_contract::DEFAULT_BUDGET).await);
    }
    needles.extend(h.secrets().into_iter().filter(|s| !s.is_empty()));
    let captured = String::from_utf8_lossy(&logs::since(mark)).into_owned();
    for needle in &needles {
        if captured.contains(needle.as_str()) {
            fail!("a payload or secret appeared in the logs");
        }
        if reported.iter().any(|r| r.contains(needle.as_str())) {
            fail!("a payload or secret appeared in a reported error");
        }
    }
    Outcome::Pass
}

/// The stored content of a destination, key by key: what [`super::Records::read_stored`]
/// shows when the harness offers it, else the stored payloads.
async fn stored_content(fixture: &Fixture) -> Result<BTreeMap<String, Vec<Bytes>>, String> {
    let records = match fixture.records.read_stored().await {
        Ok(Some(records)) => records,
        Ok(None) => fixture.records.read_all().await?,
        Err(e) => return Err(format!("reading the stored content failed: {e}")),
    };
    let mut by_key: BTreeMap<String, Vec<Bytes>> = BTreeMap::new();
    for (key, bytes) in records {
        by_key.entry(key).or_default().push(bytes);
    }
    Ok(by_key)
}

/// The first key whose stored content differs between `a` and `b`, described.
fn first_difference(a: &BTreeMap<String, Vec<Bytes>>, b: &BTreeMap<String, Vec<Bytes>>) -> Option<String> {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter().find_map(|key| match (a.get(key), b.get(key)) {
        (Some(x), Some(y)) if x == y => None,
        (Some(x), Some(y)) if x.len() != y.len() => Some(format!("`{key}`: {} records, then {}", x.len(), y.len())),
        (Some(x), Some(y)) => {
            let (x, y) = (String::from_utf8_lossy(&x[0]), String::from_utf8_lossy(&y[0]));
            let at = x.bytes().zip(y.bytes()).take_while(|(p, q)| p == q).count();
            let around = |s: &str| s.get(at.saturating_sub(40)..(at + 40).min(s.len())).unwrap_or_default().to_owned();
            Some(format!("`{key}` differs at byte {at}: …{}… against …{}…", around(&x), around(&y)))
        }
        (Some(_), None) => Some(format!("`{key}` is missing from the second")),
        (None, _) => Some(format!("`{key}` appears only in the second")),
    })
}

/// C13: one event, one content. A redelivery of stored messages (the next delivery count,
/// through another consumer at a later consumer sequence, 40 s later) is harmless and
/// changes nothing the destination holds; written into a fresh destination it stores
/// byte-for-byte what the first delivery stored, so a destination that fingerprints what one
/// key is sent (an `Idempotency-Key` endpoint, an overwrite) never sees a second content.
/// Compared is the whole stored record when the harness shows it
/// ([`super::Records::read_stored`]), else the stored payload.
pub async fn c13_one_event_one_content(h: &dyn Harness) -> Outcome {
    let (first, second) = match (fresh(h).await, fresh(h).await) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(o), _) | (_, Err(o)) => return o,
    };
    let headers = |s: u64| {
        Headers::new()
            .with("Nats-Msg-Id", format!("cert-{s}"))
            .with("X-Cert", "one event")
            .with("Nats-Time-Stamp", "2026-12-06T10:00:00Z")
    };
    let batch: Vec<Envelope> =
        [(1, json(1)), (2, Bytes::from_static(b"plain text")), (3, Bytes::from_static(&[0, 159, 255]))]
            .into_iter()
            .map(|(s, payload)| envelope_with(CERT_STREAM, s, &format!("cert.k{s}"), payload, headers(s), 1))
            .collect();
    check!(all_committed(&check!(write(first.sink.as_ref(), &batch).await)));
    let stored = check!(stored_content(&first).await);
    if stored.len() != batch.len() {
        fail!("{} keys stored for {} messages", stored.len(), batch.len());
    }
    let redelivered: Vec<Envelope> =
        batch.iter().map(|e| sinks_contract::testing::redelivery(e, time::Duration::seconds(40))).collect();
    let outcomes = check!(write(first.sink.as_ref(), &redelivered).await);
    if let Some((i, o)) =
        outcomes.iter().enumerate().find(|(_, o)| !matches!(o, MessageOutcome::Committed | MessageOutcome::Duplicate))
    {
        fail!("the redelivery of envelope {i} was refused: {}", label(o));
    }
    let after = check!(stored_content(&first).await);
    if let Some(difference) = first_difference(&stored, &after) {
        fail!("the redelivery changed what the destination holds: {difference}");
    }
    check!(all_committed(&check!(write(second.sink.as_ref(), &redelivered).await)));
    let again = check!(stored_content(&second).await);
    match first_difference(&stored, &again) {
        Some(difference) => {
            fail!("the redelivery, written alone, stores other content than the first delivery: {difference}")
        }
        None => Outcome::Pass,
    }
}

/// C14: one key and one content for an event whatever the path. Under `origin_sequence`
/// ([`super::Harness::origin_keyed`]) a sink keys an event by the stream it was first stored
/// in and its sequence there (`Envelope::origin`, set by the runtime), and stores the event as
/// its origin stored it, so the same event read from its origin, from a mirror after a
/// failover (the same sequence, another stream) and from a hub that sources it (another
/// sequence and subject, and the `Nats-Stream-Source` header) is one record, byte for byte
/// the same whichever path wrote it first; a message whose origin cannot be told is refused,
/// permanently, as `origin_unresolved`.
pub async fn c14_one_key_whatever_the_path(h: &dyn Harness) -> Outcome {
    use sinks_contract::envelope::{Origin, STREAM_SOURCE_HEADER};
    if let Some(reason) = h.no_key_per_event() {
        return Outcome::Skip { allowed: super::skips::NO_KEY_PER_EVENT.into(), reason: reason.into() };
    }
    let origin_keyed = || async {
        match h.origin_keyed().await {
            Some(fx) => fx.map_err(|e| format!("cannot run: no destination: {e}")),
            None => Err("cannot run: the harness offers no destination keyed by origin_sequence".into()),
        }
    };
    let (fx, hub_first) = (check!(origin_keyed().await), check!(origin_keyed().await));
    let payload = json(7);
    let published = Headers::new().with("Nats-Msg-Id", "c14-7");
    let origin = || Some(Origin::Stored { stream: CERT_STREAM.into(), sequence: 7, subject: Some("cert.k7".into()) });
    let first = envelope_with(CERT_STREAM, 7, "cert.k7", payload.clone(), published.clone(), 1);
    let mirrored = envelope_with("CERTDR", 7, "cert.k7", payload.clone(), published.clone(), 1).with_origin(origin());
    let hub_headers = published.with(STREAM_SOURCE_HEADER, format!("{CERT_STREAM} 7 > cert.> hub.cert.k7 abcdefgh"));
    let hub = envelope_with("CERTHUB", 3, "hub.cert.k7", payload.clone(), hub_headers, 2).with_origin(origin());
    check!(all_committed(&check!(write(fx.sink.as_ref(), std::slice::from_ref(&first)).await)));
    for (path, e) in [("a mirror", &mirrored), ("a hub", &hub)] {
        let outcomes = check!(write(fx.sink.as_ref(), std::slice::from_ref(e)).await);
        if !matches!(outcomes[0], MessageOutcome::Duplicate | MessageOutcome::Committed) {
            fail!("the event again through {path}: {}", label(&outcomes[0]));
        }
    }
    let want = vec![(format!("stream-sequence:{CERT_STREAM}:7"), payload)];
    check!(holds_exactly(&fx, &want).await);
    // The same event written first through the hub, to a destination of its own.
    check!(all_committed(&check!(write(hub_first.sink.as_ref(), std::slice::from_ref(&hub)).await)));
    check!(holds_exactly(&hub_first, &want).await);
    let (direct, hubbed) = (check!(stored_content(&fx).await), check!(stored_content(&hub_first).await));
    if let Some(difference) = first_difference(&direct, &hubbed) {
        fail!("the event stored from a hub differs from the event stored from its stream: {difference}");
    }
    let lost = Origin::Unresolved("the header names no known source".into());
    let unresolved = envelope_with("CERTHUB", 4, "cert.k8", json(8), Headers::new(), 1).with_origin(Some(lost));
    match &check!(write(fx.sink.as_ref(), std::slice::from_ref(&unresolved)).await)[0] {
        MessageOutcome::Failed(e) if e.is_permanent() => {}
        other => fail!("a message whose origin cannot be told: {}", label(other)),
    }
    check!(holds_exactly(&fx, &want).await);
    Outcome::Pass
}
