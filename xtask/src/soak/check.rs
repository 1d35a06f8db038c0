//! The soak's checker: the stream against the destination (read back without the sink) and
//! the DLQ, per stream sequence, and `nats-sink reconcile` against both.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use async_nats::jetstream::Context as Js;

use super::faults::Destination;
use super::{CONSUMER, PhaseReport, STREAM};

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

/// Compares the stream, the destination and the DLQ; fills `report`.
pub(super) async fn verify(
    js: &Js,
    destination: &Destination,
    config: &Path,
    logs: &Path,
    report: &mut PhaseReport,
) -> Result<()> {
    let stream = sinks_testkit::read_stream(js, STREAM).await;
    let messages = stream.len() as u64;
    if messages != report.messages {
        report
            .violations
            .push(format!("the stream holds {messages} messages, the publisher published {}", report.messages));
    }
    report.messages = messages;
    let records = match destination.target.read_back.read_all().await {
        Ok(r) => r,
        Err(e) => {
            report.violations.push(format!("reading the destination back failed: {e}"));
            return Ok(());
        }
    };
    let prefix = format!("stream-sequence:{STREAM}:");
    let mut stored: BTreeMap<u64, usize> = BTreeMap::new();
    for (key, _) in &records {
        match key.strip_prefix(&prefix).and_then(|n| n.parse::<u64>().ok()) {
            Some(seq) => *stored.entry(seq).or_default() += 1,
            None => report.violations.push(format!("a record under an unexpected key: {key}")),
        }
    }
    let mut dead: BTreeMap<u64, Vec<serde_json::Value>> = BTreeMap::new();
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
        dead.entry(seq).or_default().push(record);
    }
    let (mut lost, mut both, mut twice) = (Vec::new(), Vec::new(), Vec::new());
    for (seq, _, _, _) in &stream {
        match (stored.get(seq).copied().unwrap_or(0), dead.contains_key(seq)) {
            (1, false) => report.delivered += 1,
            (0, true) => report.dead_lettered += 1,
            (0, false) => lost.push(*seq),
            (_, true) => both.push(*seq),
            (_, false) => twice.push(*seq),
        }
    }
    let sample = |v: &[u64]| v.iter().take(10).map(u64::to_string).collect::<Vec<_>>().join(", ");
    if !lost.is_empty() {
        report.violations.push(format!("{} messages neither stored nor dead-lettered: {}", lost.len(), sample(&lost)));
    }
    if !both.is_empty() {
        report.violations.push(format!(
            "{} messages both stored and dead-lettered: {}; their dead letters: {}",
            both.len(),
            sample(&both),
            describe_dead_letters(&both, &dead)
        ));
    }
    if !twice.is_empty() {
        report.violations.push(format!("{} messages stored more than once: {}", twice.len(), sample(&twice)));
    }
    if let (Some((_, _, deliveries)), _) = consumer_state(js).await {
        report.redeliveries = deliveries.saturating_sub(messages);
    }
    report.rescued = log_lines(logs, "exhausted message rescued");
    report.rescue_dead_lettered = log_lines(logs, "exhausted message dead-lettered");
    // Reconcile reads the same destination through the sink: it must find nothing missing.
    let out = std::process::Command::new(crate::debug_nats_sink())
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
