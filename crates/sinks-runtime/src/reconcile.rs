//! `nats-sink reconcile`: compares a range of the source stream with the destination, the
//! delivery ledger and the dead-letter stream, message by message.
//!
//! The stream is read with an ephemeral ordered consumer (nothing is acked, the durable
//! consumer is never touched) and checked in chunks through the sink's read-back capability
//! ([`sinks_contract::ReadBack::read`]); nothing is ever written to the destination. Memory is
//! bounded by the chunk size plus two bits per sequence of the range for the ledger and the
//! DLQ lookups. Every message lands in one [`Class`]; only the ones worth a look are handed
//! to the caller as [`Finding`]s, and the missing sequences are merged into ranges for
//! `--repair`.
//!
//! A stream that was deleted and created again (or moved back) is reported per epoch
//! ([`crate::identity`]): the stream holds only the current epoch's messages, which are read
//! back under that epoch's keys and matched with that epoch's dead letters and receipts;
//! every earlier epoch is listed with what the consumer had settled of it. While a change
//! waits for a decision, a message whose sequence names an earlier event's record is
//! [`Class::Reused`], never a conflict.

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream::consumer::{DeliverPolicy, pull::OrderedConfig};
use async_nats::jetstream::{self, Message};
use futures::StreamExt;
use serde::Serialize;
use time::OffsetDateTime;

use crate::config::Config;
use crate::ledger::{EPOCH_HEADER, OUTCOME_HEADER, SEQUENCE_HEADER, STREAM_HEADER};
use sinks_contract::envelope::{Envelope, Headers, JetStreamInfo};
use sinks_contract::sink::{DestinationRef, Presence, ReadBack, Sink};
use sinks_toolkit::subject;

/// The part of the stream to reconcile. Sequences win over times when both are given.
#[derive(Debug, Clone, Default)]
pub struct Range {
    /// First sequence.
    pub from_seq: Option<u64>,
    /// Last sequence (inclusive).
    pub to_seq: Option<u64>,
    /// First message stored at or after this time.
    pub since: Option<OffsetDateTime>,
    /// Last message stored at or before this time.
    pub until: Option<OffsetDateTime>,
}

/// What reconcile found for one stream sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// In the destination with the same content (and in the ledger, when there is one).
    PresentEqual,
    /// Not in the destination, not dead-lettered.
    Missing,
    /// In the destination under the message's key, with different content.
    Conflict,
    /// In the destination with the same content, but the ledger has no receipt for it.
    PresentNotInLedger,
    /// Not in the destination, found in the DLQ stream (or dead-lettered per the ledger).
    DeadLettered,
    /// The stream no longer holds this sequence (retention or deletion) and the ledger does
    /// not say it was delivered.
    Gone,
    /// The stream no longer holds this sequence, but the ledger has its receipt.
    GoneRecorded,
    /// The sink cannot read its destination back and nothing else settles the question.
    Unchecked,
    /// Its sequence names another event's record: the stream changed under the consumer
    /// (deleted and created again, or moved back) and no decision was made yet
    /// (`nats-sink stream-identity`). Not stored.
    Reused,
}

impl Class {
    /// The snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PresentEqual => "present_equal",
            Self::Missing => "missing",
            Self::Conflict => "conflict",
            Self::PresentNotInLedger => "present_not_in_ledger",
            Self::DeadLettered => "dead_lettered",
            Self::Gone => "gone",
            Self::GoneRecorded => "gone_recorded",
            Self::Unchecked => "unchecked",
            Self::Reused => "reused",
        }
    }
}

/// One reported message.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Stream sequence.
    pub sequence: u64,
    /// What was found.
    pub class: Class,
    /// Subject, when the stream still holds the message.
    pub subject: Option<String>,
    /// Idempotency key, when one can be derived.
    pub idempotency_key: Option<String>,
    /// Where the sink stores (or would store) it.
    pub destination: Option<DestinationRef>,
}

/// Totals of a reconcile run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Source stream.
    pub stream: String,
    /// First sequence examined.
    pub from_seq: u64,
    /// Last sequence examined.
    pub to_seq: u64,
    /// Messages per class.
    pub counts: BTreeMap<Class, u64>,
    /// Messages in the range on subjects this sink does not consume (not checked).
    pub other_subjects: u64,
    /// What the sink's read-back checks, or why it cannot.
    pub read_back: String,
    /// Whether the sink's read-back was used.
    pub destination_checked: bool,
    /// The ledger stream consulted, when a ledger is configured.
    pub ledger_stream: Option<String>,
    /// The DLQ stream consulted, when a DLQ is configured.
    pub dead_letter_stream: Option<String>,
    /// Missing sequences merged into inclusive ranges.
    pub missing_ranges: Vec<(u64, u64)>,
    /// The epoch the stream is read in (`None`: the stream's first identity, or no record).
    pub epoch: Option<String>,
    /// The stream's earlier identities, oldest first: no longer in the stream.
    pub earlier_epochs: Vec<crate::identity::Past>,
    /// A change of the stream's identity that waits for a decision, in words.
    pub undecided: Option<String>,
}

impl Summary {
    /// How many messages are in `class`.
    pub fn count(&self, class: Class) -> u64 {
        self.counts.get(&class).copied().unwrap_or(0)
    }

    /// True when nothing is missing, conflicting or under a reused sequence.
    pub fn clean(&self) -> bool {
        self.count(Class::Missing) == 0 && self.count(Class::Conflict) == 0 && self.count(Class::Reused) == 0
    }
}

/// Why reconcile could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The configuration does not fit (missing stream, bad range): exit code 2.
    #[error("{0}")]
    Config(String),
    /// NATS or the destination failed: exit code 1.
    #[error("{0}")]
    Failed(String),
}

/// Progress of a run, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Sequences examined so far.
    pub done: u64,
    /// Sequences in the range.
    pub total: u64,
}

/// One bit per sequence of `from..=to`.
#[derive(Debug)]
struct Bits {
    from: u64,
    to: u64,
    words: Vec<u64>,
}

impl Bits {
    fn new(from: u64, to: u64) -> Self {
        let len = if to >= from { (to - from) / 64 + 1 } else { 0 };
        Self { from, to, words: vec![0; len as usize] }
    }

    fn set(&mut self, seq: u64) {
        if seq >= self.from && seq <= self.to {
            let i = seq - self.from;
            self.words[(i / 64) as usize] |= 1 << (i % 64);
        }
    }

    fn get(&self, seq: u64) -> bool {
        seq >= self.from && seq <= self.to && {
            let i = seq - self.from;
            self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
        }
    }
}

/// How long a scan waits for the next message before it assumes the end was reached.
const IDLE: Duration = Duration::from_secs(10);

fn failed(e: impl std::fmt::Display) -> ReconcileError {
    ReconcileError::Failed(e.to_string())
}

/// An ordered consumer read message by message until the stream has nothing more.
struct Reader {
    messages: async_nats::jetstream::consumer::pull::Ordered,
    done: bool,
}

impl Reader {
    /// Reads `stream` from `start`, filtered to `filter` when not empty.
    async fn open(
        stream: &jetstream::stream::Stream,
        start: DeliverPolicy,
        filter: &str,
    ) -> Result<Self, ReconcileError> {
        let consumer = stream
            .create_consumer(OrderedConfig {
                filter_subject: filter.to_owned(),
                deliver_policy: start,
                description: Some("nats-sinks reconcile".into()),
                ..Default::default()
            })
            .await
            .map_err(|e| failed(format!("cannot create an ordered consumer: {e}")))?;
        let messages = consumer.messages().await.map_err(failed)?;
        Ok(Self { messages, done: false })
    }

    /// The next message and its stream sequence; `None` after the last one.
    async fn next(&mut self) -> Option<(Message, u64)> {
        while !self.done {
            let next = match tokio::time::timeout(IDLE, self.messages.next()).await {
                Ok(Some(Ok(m))) => m,
                Ok(Some(Err(e))) => {
                    tracing::debug!(error = %e, "ordered consumer hiccup; it recreates itself");
                    continue;
                }
                Ok(None) | Err(_) => {
                    self.done = true;
                    return None;
                }
            };
            let Ok(info) = next.info() else { continue };
            let seq = info.stream_sequence;
            self.done = info.pending == 0;
            return Some((next, seq));
        }
        None
    }
}

/// Reads `stream` from `start` (filtered to `filter` when not empty) through an ephemeral
/// ordered consumer and calls `each` until it returns `false` or the stream has nothing more
/// ([`crate::redrive`] reads the dead-letter stream with it too).
pub(crate) async fn scan(
    stream: &jetstream::stream::Stream,
    start: DeliverPolicy,
    filter: &str,
    mut each: impl FnMut(&Message, u64) -> bool,
) -> Result<(), ReconcileError> {
    let mut reader = Reader::open(stream, start, filter).await?;
    while let Some((m, seq)) = reader.next().await {
        if !each(&m, seq) {
            break;
        }
    }
    Ok(())
}

/// The stream that captures `subject`, if any and not empty.
pub(crate) async fn stream_for(
    js: &jetstream::Context,
    subject: &str,
) -> Result<Option<jetstream::stream::Stream>, ReconcileError> {
    match js.stream_by_subject(subject).await {
        Ok(name) => {
            let mut stream = js.get_stream(&name).await.map_err(failed)?;
            let empty = stream.info().await.map_err(failed)?.state.messages == 0;
            // An empty stream has nothing to scan (and an ordered consumer would only wait).
            Ok(if empty { None } else { Some(stream) })
        }
        Err(e) => {
            tracing::warn!(subject, error = %e, "no stream captures this subject");
            Ok(None)
        }
    }
}

/// Runs a reconcile of `range` for `sink` under `config`. `report` receives every finding
/// that is not [`Class::PresentEqual`], in stream order; `progress` is called after each
/// chunk. `chunk` is the number of messages read back at once.
pub async fn reconcile(
    config: &Config,
    sink: &dyn Sink,
    range: Range,
    chunk: usize,
    mut report: impl FnMut(&Finding),
    mut progress: impl FnMut(Progress),
) -> Result<Summary, ReconcileError> {
    let client = crate::connect::connect(&config.nats).await.map_err(|e| failed(format!("{e:?}")))?;
    let js = jetstream::new(client.clone());
    // The same keys the run derives: a mirror's or a sourced stream's messages under their origin.
    let origins = crate::origin::Resolver::prepare(client, js.clone(), &config.nats.stream).await;
    let mut source = js
        .get_stream(&config.nats.stream)
        .await
        .map_err(|e| ReconcileError::Config(format!("stream `{}`: {e}", config.nats.stream)))?;
    let state = source.info().await.map_err(failed)?.state.clone();
    let identity = read_identity(&js, config).await;
    let epoch: Option<std::sync::Arc<str>> =
        identity.as_ref().and_then(|r| r.epoch.as_deref()).map(std::sync::Arc::from);
    let undecided = identity
        .as_ref()
        .and_then(|r| r.pending.as_ref())
        .map(|p| format!("the stream was {} (detected {}) and no decision was made", p.kind.as_words(), p.detected_at));
    let (from, to) = resolve_range(&source, &state, &range).await?;
    let ledger = ledger_bits(&js, config, from, to, epoch.as_deref()).await?;
    let dead_letters = dead_letter_bits(&js, config, from, to, epoch.as_deref()).await?;

    let read_back = sink.read_back();
    let (destination_checked, read_back_text) = match read_back {
        Some(reads) => (true, reads.checks()),
        None => (false, sinks_contract::cannot_read_back(sink)),
    };
    let mut summary = Summary {
        stream: config.nats.stream.clone(),
        from_seq: from,
        to_seq: to,
        counts: BTreeMap::new(),
        other_subjects: 0,
        read_back: read_back_text,
        destination_checked,
        ledger_stream: ledger.stream,
        dead_letter_stream: dead_letters.stream,
        missing_ranges: Vec::new(),
        epoch: epoch.as_deref().map(str::to_owned),
        earlier_epochs: identity.map(|r| r.history).unwrap_or_default(),
        undecided: undecided.clone(),
    };
    if to < from {
        return Ok(summary);
    }
    let classifier = Classifier {
        recorded: &ledger.recorded,
        ledger_dead: &ledger.dead,
        dead: &dead_letters.dead,
        ledger: summary.ledger_stream.is_some(),
        undecided: undecided.is_some(),
    };
    let reader = if state.messages == 0 || from > state.last_sequence {
        None
    } else {
        Some(Reader::open(&source, DeliverPolicy::ByStartSequence { start_sequence: from }, "").await?)
    };
    let scan = RangeScan {
        config,
        sink,
        read_back,
        classifier: &classifier,
        origins: origins.as_ref(),
        epoch,
        from,
        to,
        until: range.until,
        chunk,
    };
    scan.run(reader, &mut summary, &mut report, &mut progress).await?;
    summary.missing_ranges = merge_missing(std::mem::take(&mut summary.missing_ranges));
    Ok(summary)
}

/// The range's first and last sequence in a stream with `state`: sequences win over times
/// (the first message stored at or after `since`, else the first sequence); the last is
/// `to_seq` or the stream's last.
async fn resolve_range(
    source: &jetstream::stream::Stream,
    state: &jetstream::stream::State,
    range: &Range,
) -> Result<(u64, u64), ReconcileError> {
    let (first, last) = (state.first_sequence, state.last_sequence);
    let from = match (range.from_seq, range.since) {
        (Some(f), _) => f.max(1),
        (None, Some(t)) => {
            let mut found = None;
            if state.messages > 0 {
                scan(source, DeliverPolicy::ByStartTime { start_time: t }, "", |_, seq| {
                    found = Some(seq);
                    false
                })
                .await?;
            }
            found.unwrap_or(last + 1)
        }
        (None, None) => first.max(1),
    };
    let to = range.to_seq.map_or(last, |t| t.min(last));
    if range.to_seq.is_some_and(|t| t < from) {
        return Err(ReconcileError::Config("--to-seq is before --from-seq".into()));
    }
    Ok((from, to))
}

/// What the delivery ledger says of a range.
struct LedgerBits {
    /// The sequences with a receipt.
    recorded: Bits,
    /// The sequences whose receipt says dead-lettered.
    dead: Bits,
    /// The stream the receipts were read from, when there is one.
    stream: Option<String>,
}

/// Reads the ledger's receipts of `config`'s stream in `epoch` for `from..=to`.
async fn ledger_bits(
    js: &jetstream::Context,
    config: &Config,
    from: u64,
    to: u64,
    epoch: Option<&str>,
) -> Result<LedgerBits, ReconcileError> {
    let mut bits = LedgerBits { recorded: Bits::new(from, to), dead: Bits::new(from, to), stream: None };
    if let (true, Some(subject)) = (config.ledger.enabled, config.ledger.subject.as_deref())
        && to >= from
        && let Some(stream) = stream_for(js, subject).await?
    {
        bits.stream = Some(stream.cached_info().config.name.clone());
        scan(&stream, DeliverPolicy::All, subject, |m, _| {
            let headers = m.headers.as_ref();
            let get = |name: &str| headers.and_then(|h| h.get(name)).map(|v| v.as_str().to_owned());
            if get(STREAM_HEADER).as_deref() == Some(config.nats.stream.as_str())
                && get(EPOCH_HEADER).as_deref() == epoch
                && let Some(seq) = get(SEQUENCE_HEADER).and_then(|s| s.parse::<u64>().ok())
            {
                bits.recorded.set(seq);
                if get(OUTCOME_HEADER).as_deref() == Some("dead_lettered") {
                    bits.dead.set(seq);
                }
            }
            true
        })
        .await?;
    }
    Ok(bits)
}

/// What the dead-letter stream says of a range.
struct DeadLetterBits {
    /// The sequences with a dead-letter record.
    dead: Bits,
    /// The stream the records were read from, when there is one.
    stream: Option<String>,
}

/// Reads the dead-letter records of `config`'s stream in `epoch` for `from..=to`.
async fn dead_letter_bits(
    js: &jetstream::Context,
    config: &Config,
    from: u64,
    to: u64,
    epoch: Option<&str>,
) -> Result<DeadLetterBits, ReconcileError> {
    let mut bits = DeadLetterBits { dead: Bits::new(from, to), stream: None };
    if let (true, Some(subject)) = (config.dead_letter.enabled, config.dead_letter.subject.as_deref())
        && to >= from
        && let Some(stream) = stream_for(js, subject).await?
    {
        bits.stream = Some(stream.cached_info().config.name.clone());
        scan(&stream, DeliverPolicy::All, subject, |m, _| {
            if let Ok(record) = serde_json::from_slice::<serde_json::Value>(&m.payload)
                && record["stream"].as_str() == Some(config.nats.stream.as_str())
                && record["stream_epoch"].as_str() == epoch
                && let Some(seq) = record["stream_sequence"].as_u64()
            {
                bits.dead.set(seq);
            }
            true
        })
        .await?;
    }
    Ok(bits)
}

/// The read of the stream itself over a resolved range, and what each chunk is checked with.
struct RangeScan<'a> {
    config: &'a Config,
    sink: &'a dyn Sink,
    read_back: Option<&'a dyn ReadBack>,
    classifier: &'a Classifier<'a>,
    origins: Option<&'a crate::origin::Resolver>,
    epoch: Option<std::sync::Arc<str>>,
    /// The resolved range, `from..=to`.
    from: u64,
    to: u64,
    /// `--until`: the scan ends at the last message stored before it.
    until: Option<OffsetDateTime>,
    /// Messages read back at once.
    chunk: usize,
}

impl RangeScan<'_> {
    /// Reads `from..=to` (nothing without a `reader`) chunk by chunk, checking each chunk of
    /// the consumed subjects against the destination. Gaps in the sequence are what retention
    /// (or a deletion) removed: gone. A time range ends at the last message stored before
    /// `--until`.
    async fn run(
        &self,
        mut reader: Option<Reader>,
        summary: &mut Summary,
        report: &mut impl FnMut(&Finding),
        progress: &mut impl FnMut(Progress),
    ) -> Result<(), ReconcileError> {
        let (from, to, chunk) = (self.from, self.to, self.chunk);
        let total = to - from + 1;
        let filters = self.config.consumer_management.effective_filters(&self.config.nats.subject);
        let mut expected = from;
        let mut batch: Vec<Envelope> = Vec::with_capacity(chunk);
        let mut last_seen = None;
        while let Some(reader) = reader.as_mut() {
            let Some((m, seq)) = reader.next().await else { break };
            if seq > to || self.until.is_some_and(|u| m.info().is_ok_and(|i| i.published > u)) {
                break;
            }
            if seq > expected {
                // The chunk before the gap first, so findings come in stream order.
                self.check(&mut batch, summary, report).await?;
                report_gone(expected, seq - 1, self.classifier, summary, report);
            }
            expected = seq + 1;
            last_seen = Some(seq);
            if !filters.iter().any(|f| subject::matches(f, &m.subject)) {
                summary.other_subjects += 1;
            } else if let Some(e) = envelope_of(&m, &self.config.nats.stream) {
                let e = e.with_stream_epoch(self.epoch.clone());
                batch.push(match self.origins {
                    Some(origins) => origins.resolve(e).await,
                    None => e,
                });
            }
            if batch.len() >= chunk {
                self.check(&mut batch, summary, report).await?;
                progress(Progress { done: seq - from + 1, total });
            }
            if seq >= to {
                break;
            }
        }
        self.check(&mut batch, summary, report).await?;
        if self.until.is_some() {
            summary.to_seq = last_seen.unwrap_or(from.saturating_sub(1)).max(from);
        } else if expected <= to {
            report_gone(expected, to, self.classifier, summary, report);
        }
        progress(Progress { done: total, total });
        Ok(())
    }

    /// Checks the chunk read so far and empties it.
    async fn check(
        &self,
        batch: &mut Vec<Envelope>,
        summary: &mut Summary,
        report: &mut impl FnMut(&Finding),
    ) -> Result<(), ReconcileError> {
        let chunk = std::mem::take(batch);
        check_chunk(self.sink, self.read_back, &chunk, self.classifier, summary, report).await
    }
}

/// Reports `from..=to` as no longer in the stream.
fn report_gone(from: u64, to: u64, ctx: &Classifier<'_>, summary: &mut Summary, report: &mut impl FnMut(&Finding)) {
    for seq in from..=to {
        let class = if ctx.recorded.get(seq) { Class::GoneRecorded } else { Class::Gone };
        *summary.counts.entry(class).or_insert(0) += 1;
        report(&Finding { sequence: seq, class, subject: None, idempotency_key: None, destination: None });
    }
}

/// The stream's identity record of this consumer, when the guard keeps one and it can be
/// read (reconcile only reads it).
async fn read_identity(js: &jetstream::Context, config: &Config) -> Option<crate::identity::Record> {
    if !config.stream_guard.identity {
        return None;
    }
    let kv = js.get_key_value(&config.stream_guard.bucket).await.ok()?;
    let key = crate::identity::record_key(&config.nats.stream, &config.nats.consumer);
    let entry = kv.entry(key).await.ok()??;
    serde_json::from_slice(&entry.value).ok()
}

/// What the ledger and the DLQ say, for classifying one message.
struct Classifier<'a> {
    recorded: &'a Bits,
    ledger_dead: &'a Bits,
    dead: &'a Bits,
    ledger: bool,
    /// The stream changed and nothing was decided: a different record is another event's.
    undecided: bool,
}

impl Classifier<'_> {
    fn dead_lettered(&self, seq: u64) -> bool {
        self.dead.get(seq) || self.ledger_dead.get(seq)
    }

    fn classify(&self, seq: u64, presence: Option<Presence>) -> Class {
        match presence {
            Some(Presence::Equal) if self.ledger && !self.recorded.get(seq) => Class::PresentNotInLedger,
            Some(Presence::Equal) => Class::PresentEqual,
            Some(Presence::Different) if self.dead_lettered(seq) && self.undecided => Class::DeadLettered,
            Some(Presence::Different) if self.undecided => Class::Reused,
            Some(Presence::Different) => Class::Conflict,
            Some(Presence::Missing) if self.dead_lettered(seq) => Class::DeadLettered,
            Some(Presence::Missing) => Class::Missing,
            // The destination cannot be read back (or not this message): the DLQ and the
            // ledger decide.
            None | Some(Presence::Unchecked) if self.dead_lettered(seq) => Class::DeadLettered,
            None | Some(Presence::Unchecked) if self.ledger && !self.recorded.get(seq) => Class::Missing,
            None | Some(Presence::Unchecked) => Class::Unchecked,
        }
    }
}

async fn check_chunk(
    sink: &dyn Sink,
    read_back: Option<&dyn ReadBack>,
    batch: &[Envelope],
    ctx: &Classifier<'_>,
    summary: &mut Summary,
    report: &mut impl FnMut(&Finding),
) -> Result<(), ReconcileError> {
    if batch.is_empty() {
        return Ok(());
    }
    let presence: Vec<Option<Presence>> = match read_back {
        Some(reads) => {
            let found = reads
                .read(batch)
                .await
                .map_err(|e| failed(format!("reading the destination back failed: {}", e.display_chain())))?;
            if found.len() != batch.len() {
                return Err(failed("the sink's read-back returned a misaligned answer"));
            }
            found.into_iter().map(Some).collect()
        }
        None => vec![None; batch.len()],
    };
    for (envelope, presence) in batch.iter().zip(presence) {
        let seq = envelope.jetstream().stream_sequence;
        let class = ctx.classify(seq, presence);
        *summary.counts.entry(class).or_insert(0) += 1;
        if class == Class::Missing {
            summary.missing_ranges.push((seq, seq));
            if summary.missing_ranges.len() > 4096 {
                summary.missing_ranges = merge_missing(std::mem::take(&mut summary.missing_ranges));
            }
        }
        if class != Class::PresentEqual {
            report(&Finding {
                sequence: seq,
                class,
                subject: Some(envelope.subject().to_owned()),
                idempotency_key: envelope.idempotency_key().ok().map(|k| k.to_string()),
                destination: sink
                    .destinations()
                    .and_then(|d| d.destination(envelope, &sinks_contract::MessageOutcome::Committed)),
            });
        }
    }
    Ok(())
}

/// Merges adjacent or overlapping inclusive ranges.
fn merge_missing(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// The envelope of a message read by the ordered consumer, as the sink would have seen it.
fn envelope_of(m: &Message, stream: &str) -> Option<Envelope> {
    let info = m.info().ok()?;
    let jetstream = JetStreamInfo {
        stream: stream.to_owned(),
        consumer: String::new(),
        stream_sequence: info.stream_sequence,
        consumer_sequence: 0,
        delivered: 1,
        pending: 0,
        timestamp: Some(info.published).filter(|t| *t != OffsetDateTime::UNIX_EPOCH),
        domain: None,
    };
    let mut headers = Headers::new();
    if let Some(map) = &m.headers {
        for (name, values) in map.iter() {
            for value in values {
                headers.append(name.as_ref(), value.as_str());
            }
        }
    }
    Some(Envelope::new(m.subject.as_str(), m.payload.clone(), headers, jetstream))
}

/// The `replay` command lines of this program ([`crate::program::name`]: `nats-sink replay`,
/// `sqlite-sink replay`, …) that re-deliver `ranges` under `config_path`.
pub fn repair_commands(config_path: &str, ranges: &[(u64, u64)]) -> Vec<String> {
    let program = crate::program::name();
    ranges
        .iter()
        .map(|(a, b)| format!("{program} replay {} --from-seq {a} --to-seq {b}", shell_quote(config_path)))
        .collect()
}

fn shell_quote(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge() {
        assert_eq!(merge_missing(vec![(5, 5), (1, 1), (2, 2), (7, 9), (8, 8)]), vec![(1, 2), (5, 5), (7, 9)]);
        assert!(merge_missing(vec![]).is_empty());
    }

    #[test]
    fn bits_cover_the_range_only() {
        let mut b = Bits::new(10, 200);
        b.set(10);
        b.set(200);
        b.set(201);
        b.set(9);
        assert!(b.get(10) && b.get(200));
        assert!(!b.get(11) && !b.get(201) && !b.get(9));
    }

    #[test]
    fn classification_table() {
        let mut recorded = Bits::new(1, 10);
        let mut dead = Bits::new(1, 10);
        let none = Bits::new(1, 10);
        recorded.set(1);
        dead.set(2);
        let with_ledger =
            Classifier { recorded: &recorded, ledger_dead: &none, dead: &dead, ledger: true, undecided: false };
        let without = Classifier { recorded: &none, ledger_dead: &none, dead: &dead, ledger: false, undecided: false };
        let undecided = Classifier { recorded: &none, ledger_dead: &none, dead: &dead, ledger: false, undecided: true };
        use Class::*;
        let table = [
            (&with_ledger, 1, Some(Presence::Equal), PresentEqual),
            (&with_ledger, 3, Some(Presence::Equal), PresentNotInLedger),
            (&without, 3, Some(Presence::Equal), PresentEqual),
            (&with_ledger, 1, Some(Presence::Different), Conflict),
            (&with_ledger, 2, Some(Presence::Missing), DeadLettered),
            (&with_ledger, 3, Some(Presence::Missing), Missing),
            (&with_ledger, 3, Some(Presence::Unchecked), Missing),
            (&with_ledger, 2, Some(Presence::Unchecked), DeadLettered),
            (&with_ledger, 1, Some(Presence::Unchecked), Unchecked),
            (&without, 3, Some(Presence::Unchecked), Unchecked),
            (&with_ledger, 1, None, Unchecked),
            (&with_ledger, 3, None, Missing),
            (&without, 3, None, Unchecked),
            (&without, 2, None, DeadLettered),
            // The stream changed and nothing was decided: another event's record.
            (&undecided, 1, Some(Presence::Different), Reused),
            (&undecided, 2, Some(Presence::Different), DeadLettered),
            (&undecided, 3, Some(Presence::Equal), PresentEqual),
        ];
        for (c, seq, presence, want) in table {
            assert_eq!(c.classify(seq, presence), want, "{seq} {presence:?}");
        }
    }

    #[test]
    fn repair_commands_quote_paths() {
        let c = repair_commands("/etc/my sink.json", &[(3, 3), (10, 12)]);
        assert_eq!(c[0], "nats-sink replay '/etc/my sink.json' --from-seq 3 --to-seq 3");
        assert_eq!(c[1], "nats-sink replay '/etc/my sink.json' --from-seq 10 --to-seq 12");
    }
}
