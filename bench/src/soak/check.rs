//! The soak's checker: the stream against the destination (read back without the sink) and
//! the DLQ, per stream sequence, and `nats-sink reconcile` against both.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use async_nats::jetstream::Context as Js;

use super::faults::Destination;
use super::{CONSUMER, MAX_DELIVER, PhaseReport, STREAM};

/// `(num_pending, num_ack_pending, deliveries)` of `consumer` on `stream`.
async fn state_of(js: &Js, stream: &str, consumer: &str) -> Option<(u64, usize, u64)> {
    let stream = js.get_stream(stream).await.ok()?;
    let info = stream.consumer_info(consumer).await.ok()?;
    Some((info.num_pending, info.num_ack_pending, info.delivered.consumer_sequence))
}

/// The sink's consumer and the rescue consumer, for the report.
pub(super) async fn consumer_state(js: &Js) -> (Option<(u64, usize, u64)>, Option<(u64, usize, u64)>) {
    (state_of(js, STREAM, CONSUMER).await, state_of(js, &rescue_stream(), &rescue_consumer()).await)
}

fn rescue_stream() -> String {
    format!("NATS_SINKS_RESCUE_{STREAM}_{CONSUMER}")
}

fn rescue_consumer() -> String {
    format!("{CONSUMER}_rescue")
}

/// Waits until the stream holds `messages`, the sink's consumer has nothing pending or
/// unacknowledged, and neither has the rescue consumer, twice in a row a second apart (an
/// exhaustion advisory appears only when a last delivery's AckWait ends).
pub(super) async fn drained(js: &Js, messages: u64, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut quiet = 0;
    while Instant::now() < deadline {
        let stored = match js.get_stream(STREAM).await {
            Ok(mut s) => s.info().await.map(|i| i.state.messages).unwrap_or(0),
            Err(_) => 0,
        };
        let idle = |s: Option<(u64, usize, u64)>| s.is_some_and(|(p, a, _)| p == 0 && a == 0);
        let (sink, rescue) = consumer_state(js).await;
        // No rescue consumer yet means no exhaustion was ever captured.
        let rescue_idle = rescue.is_none() || idle(rescue);
        if stored >= messages && idle(sink) && rescue_idle {
            quiet += 1;
            if quiet >= 3 {
                return true;
            }
        } else {
            quiet = 0;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    false
}

/// Counts `message` lines (the JSON log's `message` field) in every log of `dir`.
fn log_lines(dir: &Path, message: &str) -> u64 {
    let needle = format!("\"message\":\"{message}\"");
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .map(|text| text.lines().filter(|l| l.contains(&needle)).count() as u64)
        .sum()
}

/// Why a message was dead-lettered, as its DLQ record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DeadReason {
    /// Its deliveries ran out on temporary failures: the sink's last allowed delivery failed
    /// temporarily (or was held back behind a key that did), or the rescue's last chance
    /// failed after the server stopped redelivering (`max_deliver_exhausted`). An earlier
    /// delivery may have committed with its answer lost (the destination killed between its
    /// commit and its reply): the dead letter is then a safe over-approximation.
    Exhausted,
    /// A permanent failure (a value the destination refuses, a policy refusal, a rejected
    /// conflict, or an error type this checker does not know): the message can never be
    /// written, so it must not be in the destination.
    Permanent,
}

/// The error types of temporary failures, as the soaked sinks name them in a DLQ record:
/// the contract's default for a temporary error (file, HTTP, MySQL), the runtime's held-back
/// error, and the S3 sink's failure kinds that are always temporary (its `status` is
/// temporary only for a retryable status; see [`DeadReason::of`]).
const TEMPORARY_ERROR_TYPES: [&str; 6] =
    ["TemporarySinkError", "HeldBackError", "transport", "unknown", "denied", "not_found"];

impl DeadReason {
    /// The reason of one DLQ record. A temporary failure counts only on the last allowed
    /// delivery (the only one where the gate dead-letters it); the rescue's exhaustion comes
    /// after it by definition. Anything not recognisably temporary or exhausted is
    /// permanent: the checker errs towards a violation.
    pub(super) fn of(record: &serde_json::Value) -> Self {
        let error_type = record["error_type"].as_str().unwrap_or_default();
        let error = record["error"].as_str().unwrap_or_default();
        let exhausted =
            record["reason"].as_str() == Some("max_deliver_exhausted") || error_type == "MaxDeliverExhaustedError";
        // The S3 sink's `status` is temporary for 5xx, 408, 409, 425, 429 and unexpected
        // statuses, and permanent ("the endpoint refused the request") for any other 4xx.
        let s3_retryable_status = error_type == "status" && !error.contains("the endpoint refused the request");
        let temporary = s3_retryable_status || TEMPORARY_ERROR_TYPES.contains(&error_type);
        let last_delivery = record["delivered"].as_u64().is_some_and(|d| d >= MAX_DELIVER);
        if exhausted || (temporary && last_delivery) { Self::Exhausted } else { Self::Permanent }
    }

    /// The reason of a message's DLQ records: permanent if any of them is.
    pub(super) fn of_all(records: &[serde_json::Value]) -> Self {
        if records.iter().any(|r| Self::of(r) == Self::Permanent) { Self::Permanent } else { Self::Exhausted }
    }
}

/// What became of one message, from how often the destination holds it and its dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fate {
    /// Stored exactly once, not dead-lettered.
    Delivered,
    /// Dead-lettered, not stored.
    DeadLettered,
    /// Stored exactly once and dead-lettered after its deliveries ran out on temporary
    /// failures: an ambiguous commit (committed, the answer lost, the later deliveries failed
    /// while the destination was down). Not lost, not doubled; replaying the dead letter
    /// finds it a duplicate.
    StoredThoughDeadLettered,
    /// Neither stored nor dead-lettered: a violation.
    Lost,
    /// Stored and dead-lettered for a permanent reason: a violation.
    StoredAndRefused,
    /// Stored more than once (dead-lettered or not): a violation.
    StoredTwice,
}

impl Fate {
    /// True for the fates that break "exactly once or dead-lettered".
    #[cfg(test)]
    pub(super) fn is_violation(self) -> bool {
        matches!(self, Self::Lost | Self::StoredAndRefused | Self::StoredTwice)
    }
}

/// The fate of a message the destination holds `stored` times, dead-lettered for `dead`.
pub(super) fn fate(stored: usize, dead: Option<DeadReason>) -> Fate {
    match (stored, dead) {
        (0, None) => Fate::Lost,
        (0, Some(_)) => Fate::DeadLettered,
        (1, None) => Fate::Delivered,
        (1, Some(DeadReason::Exhausted)) => Fate::StoredThoughDeadLettered,
        (1, Some(DeadReason::Permanent)) => Fate::StoredAndRefused,
        (_, _) => Fate::StoredTwice,
    }
}

/// What the dead letters of `seqs` say: how many by error type and delivery count, and the
/// first few records' error, for a violation's text.
fn describe_dead_letters(seqs: &[u64], dead: &BTreeMap<u64, Vec<serde_json::Value>>) -> String {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut first = Vec::new();
    for seq in seqs {
        for record in dead.get(seq).into_iter().flatten() {
            let error_type = record["error_type"].as_str().unwrap_or("?");
            let reason = record["reason"].as_str().unwrap_or("-");
            let delivered = record["delivered"].as_u64().unwrap_or(0);
            *kinds.entry(format!("{error_type}/{reason} delivered {delivered}")).or_default() += 1;
            if first.len() < 3 {
                first.push(format!("{seq}: {}", record["error"].as_str().unwrap_or("?")));
            }
        }
    }
    let kinds: Vec<String> = kinds.into_iter().map(|(k, n)| format!("{n} x {k}")).collect();
    format!("{} (e.g. {})", kinds.join(", "), first.join(" | "))
}

/// An epoch's tag as keys carry it (`None`: the stream's first identity) and a sequence.
type At = (Option<String>, u64);

/// The epoch tags of the stream's identities, oldest first (the last is the current one),
/// from the stream guard's record of the soak's consumer; `[None]` when there is no record.
async fn epoch_tags(js: &Js) -> Vec<Option<String>> {
    let key = sinks_runtime::identity::record_key(STREAM, CONSUMER);
    let record = async {
        let kv = js.get_key_value(sinks_runtime::config::guard::DEFAULT_BUCKET).await.ok()?;
        let entry = kv.entry(key).await.ok()??;
        serde_json::from_slice::<sinks_runtime::identity::Record>(&entry.value).ok()
    };
    match record.await {
        Some(r) => r.history.iter().map(|p| p.epoch.clone()).chain(std::iter::once(r.epoch)).collect(),
        None => vec![None],
    }
}

/// The epoch and sequence a destination key names: `stream-sequence:SOAK:7` or, in a later
/// epoch, `stream-sequence:SOAK.<tag>:7`.
fn at_of(key: &str) -> Option<At> {
    let rest = key.strip_prefix("stream-sequence:")?;
    let (stream, seq) = rest.rsplit_once(':')?;
    let seq = seq.parse().ok()?;
    match stream.split_once('.') {
        None if stream == STREAM => Some((None, seq)),
        Some((name, tag)) if name == STREAM && !tag.is_empty() => Some((Some(tag.to_owned()), seq)),
        _ => None,
    }
}

/// Compares every epoch of the stream (`earlier`: the messages of each earlier epoch, read
/// before it was deleted; the current one is read now), the destination and the DLQ, per
/// epoch and stream sequence; fills `report`.
pub(super) async fn verify(
    js: &Js,
    destination: &Destination,
    config: &Path,
    logs: &Path,
    earlier: &[Vec<(u64, bytes::Bytes)>],
    report: &mut PhaseReport,
) -> Result<()> {
    let tags = epoch_tags(js).await;
    if tags.len() != earlier.len() + 1 {
        report.violations.push(format!(
            "the stream had {} epochs, the identity record names {}",
            earlier.len() + 1,
            tags.len()
        ));
        return Ok(());
    }
    let current: Vec<u64> = sinks_testkit::read_stream(js, STREAM).await.into_iter().map(|(seq, ..)| seq).collect();
    let mut expected: Vec<At> = Vec::new();
    for (tag, epoch) in tags.iter().zip(earlier) {
        expected.extend(epoch.iter().map(|(seq, _)| (tag.clone(), *seq)));
    }
    let current_tag = tags.last().cloned().flatten();
    expected.extend(current.iter().map(|seq| (current_tag.clone(), *seq)));
    let messages = expected.len() as u64;
    if messages != report.messages {
        report
            .violations
            .push(format!("the stream's epochs hold {messages} messages, the publisher published {}", report.messages));
    }
    report.messages = messages;
    let records = match destination.target.records.read_all().await {
        Ok(r) => r,
        Err(e) => {
            report.violations.push(format!("reading the destination back failed: {e}"));
            return Ok(());
        }
    };
    let mut stored: BTreeMap<At, usize> = BTreeMap::new();
    for (key, _) in &records {
        match at_of(key) {
            Some(at) => *stored.entry(at).or_default() += 1,
            None => report.violations.push(format!("a record under an unexpected key: {key}")),
        }
    }
    let mut dead: BTreeMap<At, Vec<serde_json::Value>> = BTreeMap::new();
    for (_, _, _, body) in sinks_testkit::read_stream(js, "SOAKDLQ").await {
        let record: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let Some(seq) = record["stream_sequence"].as_u64() else {
            report.violations.push("a dead letter without a stream sequence".into());
            continue;
        };
        if record["error_type"].as_str().is_none_or(str::is_empty) || record["error"].as_str().is_none_or(str::is_empty)
        {
            report.violations.push(format!("the dead letter of {seq} names no reason"));
        }
        let tag = record["stream_epoch"].as_str().map(str::to_owned);
        dead.entry((tag, seq)).or_default().push(record);
    }
    let (mut lost, mut both, mut twice, mut ambiguous) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for at in &expected {
        let reason = dead.get(at).map(|records| DeadReason::of_all(records));
        match reason {
            Some(DeadReason::Exhausted) => report.dead_lettered_temporary += 1,
            Some(DeadReason::Permanent) => report.dead_lettered_permanent += 1,
            None => {}
        }
        let seq = at.1;
        match fate(stored.get(at).copied().unwrap_or(0), reason) {
            Fate::Delivered => report.delivered += 1,
            Fate::DeadLettered => report.dead_lettered += 1,
            Fate::StoredThoughDeadLettered => {
                report.stored_though_dead_lettered += 1;
                ambiguous.push(seq);
            }
            Fate::Lost => lost.push(seq),
            Fate::StoredAndRefused => both.push(seq),
            Fate::StoredTwice => twice.push(seq),
        }
    }
    let dead: BTreeMap<u64, Vec<serde_json::Value>> =
        dead.into_iter().filter(|((tag, _), _)| *tag == current_tag).map(|((_, seq), r)| (seq, r)).collect();
    let sample = |v: &[u64]| v.iter().take(10).map(u64::to_string).collect::<Vec<_>>().join(", ");
    if !ambiguous.is_empty() {
        report.notes.push(format!(
            "{} messages dead-lettered though stored once (ambiguous commit): {}; their dead letters: {}",
            ambiguous.len(),
            sample(&ambiguous),
            describe_dead_letters(&ambiguous, &dead)
        ));
    }
    if !lost.is_empty() {
        report.violations.push(format!("{} messages neither stored nor dead-lettered: {}", lost.len(), sample(&lost)));
    }
    if !both.is_empty() {
        report.violations.push(format!(
            "{} messages both stored and dead-lettered for a permanent reason: {}; their dead letters: {}",
            both.len(),
            sample(&both),
            describe_dead_letters(&both, &dead)
        ));
    }
    if !twice.is_empty() {
        report.violations.push(format!("{} messages stored more than once: {}", twice.len(), sample(&twice)));
    }
    if let (Some((_, _, deliveries)), _) = consumer_state(js).await {
        report.redeliveries = deliveries.saturating_sub(current.len() as u64);
    }
    report.rescued = log_lines(logs, "exhausted message rescued");
    report.rescue_dead_lettered = log_lines(logs, "exhausted message dead-lettered");
    // Reconcile reads the same destination through the sink: it must find nothing missing.
    let out = std::process::Command::new(sinks_testkit::debug_nats_sink())
        .args(["reconcile", config.to_str().unwrap_or_default()])
        .envs(destination.target.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        let tail: Vec<&str> = text.lines().rev().take(12).collect();
        report.violations.push(format!(
            "reconcile exited {:?}: {} {}",
            out.status.code(),
            tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(error_type: &str, error: &str, reason: Option<&str>) -> serde_json::Value {
        let mut r = json!({"stream_sequence": 7, "delivered": 3, "error_type": error_type, "error": error});
        if let Some(reason) = reason {
            r["reason"] = reason.into();
        }
        r
    }

    #[test]
    fn dead_letter_reasons() {
        use DeadReason::{Exhausted, Permanent};
        #[rustfmt::skip]
        let table = [
            ("mysql: connection lost on the last delivery", record("TemporarySinkError", "write batch: connection error: broken pipe", None), Exhausted),
            ("held back on the last delivery", record("HeldBackError", "held back on its last allowed delivery", None), Exhausted),
            ("the rescue's last chance failed", record("MaxDeliverExhaustedError", "max_deliver exhausted: ...", Some("max_deliver_exhausted")), Exhausted),
            ("s3: no answer", record("transport", "s3 put failed: no answer from the endpoint", None), Exhausted),
            ("s3: 503", record("status", "s3 put failed: status 503", None), Exhausted),
            ("s3: a 400", record("status", "s3 put failed: the endpoint refused the request (status 400)", None), Permanent),
            ("mysql: a value the server rejects", record("DataError", "insert: data too long: mysql error 1406", None), Permanent),
            ("a permanent sink error", record("PermanentSinkError", "endpoint rejected the message with 422", None), Permanent),
            ("a policy refusal", record("SizeLimitError", "too big", Some("size_exceeded")), Permanent),
            ("a rejected conflict", record("ConflictError", "conflicting redelivery", None), Permanent),
            ("an error type the checker does not know", record("SomethingNew", "?", None), Permanent),
            ("a temporary failure dead-lettered before its last delivery", json!({"delivered": 2, "error_type": "TemporarySinkError", "error": "x"}), Permanent),
            ("a temporary failure without a delivery count", json!({"error_type": "transport", "error": "x"}), Permanent),
            ("no error type at all", json!({"stream_sequence": 7}), Permanent),
        ];
        for (what, record, want) in &table {
            assert_eq!(DeadReason::of(record), *want, "{what}");
        }
        let exhausted = record("TemporarySinkError", "x", None);
        let permanent = record("DataError", "x", None);
        assert_eq!(DeadReason::of_all(&[exhausted.clone(), exhausted.clone()]), Exhausted);
        assert_eq!(DeadReason::of_all(&[exhausted, permanent]), Permanent, "any permanent record makes it permanent");
    }

    #[test]
    fn keys_name_their_epoch() {
        assert_eq!(at_of("stream-sequence:SOAK:7"), Some((None, 7)));
        assert_eq!(at_of("stream-sequence:SOAK.e17:7"), Some((Some("e17".into()), 7)));
        assert_eq!(at_of("stream-sequence:OTHER:7"), None);
        assert_eq!(at_of("stream-sequence:SOAK.:7"), None);
        assert_eq!(at_of("message-id:x"), None);
    }

    #[test]
    fn fates() {
        use DeadReason::{Exhausted, Permanent};
        #[rustfmt::skip]
        let table = [
            // what, times stored, dead-lettered for, fate, a violation
            ("stored once", 1, None, Fate::Delivered, false),
            ("dead-lettered only, temporary", 0, Some(Exhausted), Fate::DeadLettered, false),
            ("dead-lettered only, permanent", 0, Some(Permanent), Fate::DeadLettered, false),
            ("stored once, dead-lettered after its deliveries ran out: an ambiguous commit", 1, Some(Exhausted), Fate::StoredThoughDeadLettered, false),
            ("lost: neither stored nor dead-lettered", 0, None, Fate::Lost, true),
            ("stored twice", 2, None, Fate::StoredTwice, true),
            ("stored twice and dead-lettered, temporary", 2, Some(Exhausted), Fate::StoredTwice, true),
            ("stored twice and dead-lettered, permanent", 2, Some(Permanent), Fate::StoredTwice, true),
            ("stored once, yet dead-lettered as never writable", 1, Some(Permanent), Fate::StoredAndRefused, true),
        ];
        for (what, stored, dead, want, violation) in table {
            let got = fate(stored, dead);
            assert_eq!(got, want, "{what}");
            assert_eq!(got.is_violation(), violation, "{what}: a violation");
        }
    }
}
