//! Where `nats-sink redrive` marks a dead-letter record done: a key-value bucket (default
//! `nats_sinks_redrive`), one key per record (`<DLQ stream>.<DLQ sequence>`), written only
//! after the record's redrive ended durably (the write committed, or the message's new dead
//! letter was stored; the receipt published first). The DLQ stream itself is never changed.
//! A crash between the commit and the mark brings the record back next run, and its write is
//! then a duplicate: nothing is lost and nothing is stored twice. The bucket keeps markers as
//! long as the DLQ stream keeps records (the same `max_age`).
//!
//! [`Marker`] is the runtime's `RedriveMarker`: it writes the marks, counts how each redrive
//! ended and shows the progress on stderr (a bar on a terminal, a line per tenth otherwise).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use sinks_runtime::runner::{RedriveEnd, RedriveMarker};
use time::OffsetDateTime;

/// The markers of one DLQ stream's records.
#[derive(Debug)]
pub(crate) struct Marks {
    kv: Option<kv::Store>,
    prefix: String,
}

/// The key prefix of the records of DLQ stream `stream` (a name outside the key alphabet is
/// hex-encoded).
fn prefix_of(stream: &str) -> String {
    if stream.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        stream.to_owned()
    } else {
        format!("x{}", hex::encode(stream))
    }
}

impl Marks {
    /// Opens `bucket` for DLQ stream `dlq`; creates it (with the DLQ stream's replicas and
    /// `max_age`) when `create`, else a missing bucket means no record is marked yet.
    pub(crate) async fn open(
        js: &jetstream::Context,
        bucket: &str,
        dlq: &jetstream::stream::Info,
        create: bool,
    ) -> Result<Self, String> {
        let prefix = prefix_of(&dlq.config.name);
        let kv = match js.get_key_value(bucket).await {
            Ok(kv) => Some(kv),
            Err(e) if e.kind() == jetstream::context::KeyValueErrorKind::GetBucket && !create => None,
            Err(e) if e.kind() == jetstream::context::KeyValueErrorKind::GetBucket => {
                let created = js
                    .create_key_value(kv::Config {
                        bucket: bucket.to_owned(),
                        description: "nats-sinks: dead-letter records redriven (nats-sink redrive)".into(),
                        history: 1,
                        max_age: dlq.config.max_age,
                        storage: jetstream::stream::StorageType::File,
                        num_replicas: dlq.config.num_replicas.max(1),
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| format!("cannot create the redrive bucket `{bucket}`: {e}"))?;
                tracing::info!(bucket, "created the redrive bucket");
                Some(created)
            }
            Err(e) => return Err(format!("cannot open the redrive bucket `{bucket}`: {e}")),
        };
        Ok(Self { kv, prefix })
    }

    /// The DLQ sequences marked done, with how each ended.
    pub(crate) async fn done(&self) -> Result<BTreeMap<u64, String>, String> {
        let mut done = BTreeMap::new();
        let Some(kv) = &self.kv else { return Ok(done) };
        let mut keys = match kv.keys().await {
            Ok(keys) => keys,
            Err(e) => return Err(format!("cannot list the redrive bucket: {e}")),
        };
        let head = format!("{}.", self.prefix);
        let mut mine = BTreeSet::new();
        while let Some(key) = keys.next().await {
            let key = key.map_err(|e| format!("cannot list the redrive bucket: {e}"))?;
            if let Some(seq) = key.strip_prefix(&head).and_then(|s| s.parse::<u64>().ok()) {
                mine.insert((seq, key));
            }
        }
        for (seq, key) in mine {
            let end = match kv.get(&key).await {
                Ok(Some(value)) => serde_json::from_slice::<serde_json::Value>(&value)
                    .ok()
                    .and_then(|v| v["end"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "done".into()),
                Ok(None) => continue,
                Err(e) => return Err(format!("cannot read the redrive bucket: {e}")),
            };
            done.insert(seq, end);
        }
        Ok(done)
    }

    fn key(&self, dlq_seq: u64) -> String {
        format!("{}.{dlq_seq}", self.prefix)
    }
}

/// How the redrives of a run ended, so far.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    /// Written.
    pub(crate) redriven: u64,
    /// Already stored.
    pub(crate) duplicates: u64,
    /// Dead-lettered again.
    pub(crate) failed_again: u64,
    /// Not done (the record stays as it was), with why: DLQ sequence → reason.
    pub(crate) not_done: BTreeMap<u64, String>,
}

/// The run's `RedriveMarker`.
#[derive(Debug)]
pub(crate) struct Marker {
    marks: Marks,
    /// The original's stream sequence and the record's redrive count, per DLQ sequence.
    records: BTreeMap<u64, (u64, u32)>,
    tally: Mutex<Tally>,
    bar: Option<ProgressBar>,
    total: u64,
}

impl Marker {
    /// A marker writing into `marks`, for `records` (DLQ sequence → original's sequence and
    /// redrive count), showing progress over their number.
    pub(crate) fn new(marks: Marks, records: BTreeMap<u64, (u64, u32)>) -> Self {
        let total = records.len() as u64;
        let bar = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template("{bar:40} {pos}/{len} dead letters redriven {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        });
        Self { marks, records, tally: Mutex::new(Tally::default()), bar, total }
    }

    /// How the redrives ended so far.
    pub(crate) fn tally(&self) -> Tally {
        self.tally.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Stops the progress bar.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    #[allow(clippy::print_stderr)]
    fn progress(&self, ended: u64) {
        match &self.bar {
            Some(bar) => bar.set_position(ended),
            None if self.total > 0 && (ended * 10 / self.total) != ((ended - 1) * 10 / self.total) => {
                eprintln!("redrive: {ended}/{} dead letters", self.total);
            }
            None => {}
        }
    }
}

#[async_trait::async_trait]
impl RedriveMarker for Marker {
    async fn end(&self, ticket: u64, end: RedriveEnd) -> Result<(), String> {
        let result = match (&end, &self.marks.kv) {
            (RedriveEnd::NotDone(_), _) => Ok(()),
            (_, None) => Err("no redrive bucket".to_owned()),
            (_, Some(kv)) => {
                let label = match &end {
                    RedriveEnd::Redriven => "redriven",
                    RedriveEnd::Duplicate => "duplicate",
                    _ => "dead_lettered_again",
                };
                let (seq, count) = self.records.get(&ticket).copied().unwrap_or_default();
                let value = serde_json::json!({
                    "end": label,
                    "stream_sequence": seq,
                    "redrive_count": count,
                    "at": sinks_toolkit::metadata::rfc3339(OffsetDateTime::now_utc()),
                });
                kv.put(self.marks.key(ticket), serde_json::to_vec(&value).unwrap_or_default().into())
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("cannot mark dead letter {ticket} done: {e}"))
            }
        };
        let ended = {
            let mut tally = self.tally.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match (&result, end) {
                (Err(e), _) => {
                    tally.not_done.insert(ticket, e.clone());
                }
                (Ok(()), RedriveEnd::Redriven) => tally.redriven += 1,
                (Ok(()), RedriveEnd::Duplicate) => tally.duplicates += 1,
                (Ok(()), RedriveEnd::DeadLetteredAgain) => tally.failed_again += 1,
                (Ok(()), RedriveEnd::NotDone(why)) => {
                    tally.not_done.insert(ticket, why);
                }
            }
            tally.redriven + tally.duplicates + tally.failed_again + tally.not_done.len() as u64
        };
        self.progress(ended);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stay_in_the_key_alphabet() {
        assert_eq!(prefix_of("ORDERS_DLQ-1"), "ORDERS_DLQ-1");
        assert_eq!(prefix_of("DLQ.é"), format!("x{}", hex::encode("DLQ.é")));
    }
}
