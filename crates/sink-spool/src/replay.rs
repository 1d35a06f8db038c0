//! Replay: the spool's records, in `drain_ordering`, written in batches through any target
//! sink; a record is deleted only after the target committed it (or already had it).
//!
//! A crash in the middle of a replay loses nothing (a record is deleted after its commit)
//! and duplicates nothing the target cannot absorb (a committed record that was not deleted
//! yet is replayed again and the target's idempotency reports a duplicate). A temporary
//! failure stops the replay after its batch, keeping the failed records (the destination
//! is still unreachable: run it again later); a permanent failure keeps that record and
//! goes on (it needs an operator: the summary counts it). Nothing is acknowledged to NATS
//! here: the spool already did that when it took custody.

use std::time::Duration;

use sinks_contract::{Envelope, MessageOutcome, Sink};

use crate::sink::{Entry, SpoolSink};

/// Options of a replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Replay at most this many records (`None`: all).
    pub max_records: Option<usize>,
    /// Only read and decrypt, write nothing, delete nothing.
    pub dry_run: bool,
    /// Records per target write.
    pub batch_size: usize,
    /// Time budget of one target write (its in-place retries).
    pub write_budget: Duration,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self { max_records: None, dry_run: false, batch_size: 100, write_budget: Duration::from_secs(24) }
    }
}

/// What a replay did (also reported after every batch, for progress).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// Records selected for this replay.
    pub selected: usize,
    /// Records read so far.
    pub processed: usize,
    /// Committed by the target now.
    pub committed: usize,
    /// Already held by the target (duplicates, or conflicts the target kept).
    pub already_there: usize,
    /// Records deleted from the spool.
    pub deleted: usize,
    /// Temporary failures (kept; the replay stopped after their batch).
    pub failed_temporary: usize,
    /// Permanent failures (kept for an operator).
    pub failed_permanent: usize,
    /// Records that could not be read or decrypted (kept).
    pub unreadable: usize,
    /// True when a temporary failure ended the replay before every selected record.
    pub stopped_early: bool,
}

impl ReplayReport {
    /// True when every selected record reached the target.
    pub fn complete(&self) -> bool {
        !self.stopped_early && self.failed_temporary == 0 && self.failed_permanent == 0 && self.unreadable == 0
    }
}

/// Replays `spool` into `target` (opened by the caller), calling `progress` after each batch.
pub async fn replay(
    spool: &SpoolSink,
    target: &dyn Sink,
    options: &ReplayOptions,
    mut progress: impl FnMut(&ReplayReport),
) -> Result<ReplayReport, sinks_contract::SinkError> {
    let mut entries = spool.entries().await?;
    if let Some(max) = options.max_records {
        entries.truncate(max);
    }
    let mut report = ReplayReport { selected: entries.len(), ..ReplayReport::default() };
    for chunk in entries.chunks(options.batch_size.max(1)) {
        let mut readable: Vec<(Entry, Envelope)> = Vec::with_capacity(chunk.len());
        for entry in chunk {
            match spool.read(entry).await {
                Ok(envelope) => readable.push((entry.clone(), envelope)),
                Err(e) => {
                    report.unreadable += 1;
                    tracing::warn!(file = %entry.path.display(), error = %e, "spool record kept: it cannot be read");
                }
            }
        }
        report.processed += chunk.len();
        if options.dry_run || readable.is_empty() {
            progress(&report);
            continue;
        }
        let envelopes: Vec<Envelope> = readable.iter().map(|(_, e)| e.clone()).collect();
        let outcomes = sinks_contract::sink::write_isolating(target, &envelopes, options.write_budget).await;
        let mut done = Vec::new();
        for ((entry, envelope), outcome) in readable.into_iter().zip(&outcomes) {
            match outcome {
                MessageOutcome::Committed => {
                    report.committed += 1;
                    done.push(entry);
                }
                o if o.is_durable() => {
                    report.already_there += 1;
                    done.push(entry);
                }
                MessageOutcome::Failed(e) if e.is_permanent() => {
                    report.failed_permanent += 1;
                    tracing::warn!(
                        subject = envelope.subject(),
                        stream_sequence = envelope.jetstream().stream_sequence,
                        error = %e.display_chain(),
                        "spool record kept: the target refused it permanently"
                    );
                }
                MessageOutcome::Conflict(_) => {
                    report.failed_permanent += 1;
                    tracing::warn!(
                        subject = envelope.subject(),
                        stream_sequence = envelope.jetstream().stream_sequence,
                        "spool record kept: the target holds different content for its key"
                    );
                }
                _ => report.failed_temporary += 1,
            }
        }
        if spool.config().delete_after_replay {
            spool.remove(&done).await?;
            report.deleted += done.len();
        }
        progress(&report);
        if report.failed_temporary > 0 {
            report.stopped_early = report.processed < report.selected;
            tracing::warn!(
                failed = report.failed_temporary,
                "the target failed temporarily; replay stopped, run it again later"
            );
            break;
        }
    }
    Ok(report)
}
