//! The NATS side of `nats-sink redrive`: brings back exactly the dead-lettered messages of a
//! config's stream and consumer, exactly once, through the same pipeline as `run` (policies,
//! write, commit then settle, receipts), each under its original idempotency key so that one
//! already stored counts as a duplicate. The command (its flags, output and exit codes) is
//! `sinks-cli`'s; this module connects, reads and writes, and answers in plain Rust types.
//!
//! [`prepare`] reads the records from the DLQ stream (`records`), selects them by the
//! filters and skips those already marked done (`marks`). For each one the original comes
//! from its stream while the stream still holds that message, else from the record's
//! payload, else it is `gone`. A record whose message was redriven `max_redrives` times
//! already is left for a person with its reason. [`Plan::run`] sends the rest through
//! [`crate::runner::redrive`], per fan-out target when the sink is a fan-out (a record that
//! names the target that failed is redriven to that target alone); each record is marked
//! done only once its redrive ended durably (written, found stored, or dead-lettered again
//! with its redrive count). A dry run opens no bucket that is not there and changes nothing
//! ([`Plan::close`] instead of [`Plan::run`]).

mod marks;
mod records;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use sinks_contract::Sink;
use sinks_contract::config::SinkSection;

use self::marks::{Marker, Marks};
pub use self::marks::{Progress, Tally};
pub use self::records::{Filters, Origin, Record};
use crate::config::{Config, ConfigError};
use crate::connect::{self, ConnectError};
use crate::runner::{RedriveItem, RedriveMarker, RunError};

/// Stream reads of originals in flight at once.
const LOOKUPS_IN_FLIGHT: usize = 32;

/// What to redrive and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Which records (every given filter must match).
    pub filters: Filters,
    /// At most this many records (of those selected and not done yet).
    pub limit: Option<usize>,
    /// A message redriven this many times already is left for a person.
    pub max_redrives: u32,
    /// Say what a run would do: the marks bucket is not created.
    pub dry_run: bool,
    /// The key-value bucket of the done markers.
    pub bucket: String,
    /// Only the records refused as `sequence_reused`, each written under the key of the
    /// source stream's own epoch ([`crate::identity::epoch_of_stream`]): the way back from a
    /// re-created stream accepted as a replay that was none.
    pub new_epoch: bool,
}

/// One selected record and what became of it before the write.
#[derive(Debug)]
pub struct Selected {
    /// The dead-letter record.
    pub record: Record,
    /// Where its original comes from.
    pub origin: Origin,
    /// Left for a person, with why.
    pub left: Option<String>,
    /// The message to write (none when left for a person or gone).
    pub item: Option<RedriveItem>,
}

/// The records of a redrive, read and looked up; the connection stays open for
/// [`Plan::run`].
#[derive(Debug)]
pub struct Plan {
    /// The DLQ stream the records come from.
    pub dlq_stream: String,
    /// The records of this config's stream and consumer in the DLQ stream.
    pub records: usize,
    /// Of those the filters select, how many were marked done before.
    pub already: usize,
    /// Those the filters select that are not done yet (up to the limit), in DLQ order.
    pub selected: Vec<Selected>,
    /// The epoch the records are written in (`Options::new_epoch`).
    pub epoch: Option<String>,
    client: async_nats::Client,
    marks: Marks,
}

/// How a redrive run ended.
#[derive(Debug)]
pub struct Outcome {
    /// How the redriven records ended.
    pub tally: Tally,
    /// Records left for a person, with why.
    pub left: Vec<(Record, String)>,
    /// Records whose original neither the stream nor the record holds.
    pub gone: Vec<Record>,
    /// A stop request ended the run before every record was handed to the write.
    pub stopped: bool,
}

impl Outcome {
    /// True when every selected record reached an end (nothing for another run).
    pub fn complete(&self) -> bool {
        self.tally.not_done.is_empty() && !self.stopped
    }
}

fn failed(e: impl std::fmt::Display) -> RunError {
    RunError::Unreachable(e.to_string())
}

/// Connects, reads the dead-letter records of `config`'s stream and consumer, selects them
/// by `options` and looks up each one's original. `None` when the dead-letter stream is
/// empty (or no stream captures its subject).
pub async fn prepare(config: &Config, options: &Options) -> Result<Option<Plan>, RunError> {
    let client = connect::connect(&config.nats).await.map_err(|e| match e {
        ConnectError::Config(e) => RunError::Config(e),
        ConnectError::Unreachable(e) => failed(format!("cannot reach nats: {e}")),
    })?;
    let js = async_nats::jetstream::new(client.clone());
    let started = std::time::Instant::now();
    let read = records::read(&js, config).await.map_err(|e| {
        if e.starts_with("dead_letter") { RunError::Config(ConfigError::single("dead_letter", e)) } else { failed(e) }
    })?;
    let Some((mut dlq, all)) = read else {
        let _ = client.drain().await;
        return Ok(None);
    };
    tracing::info!(records = all.len(), took_ms = started.elapsed().as_millis() as u64, "dead-letter records read");
    let dlq_info = dlq.info().await.map_err(failed)?.clone();
    let source =
        js.get_stream(&config.nats.stream).await.map_err(|e| failed(format!("stream {}: {e}", config.nats.stream)))?;
    let epoch = options.new_epoch.then(|| crate::identity::epoch_of_stream(source.cached_info().created));
    let marks = Marks::open(&js, &options.bucket, &dlq_info, !options.dry_run).await.map_err(failed)?;
    let done = marks.done().await.map_err(failed)?;
    let reused = |r: &Record| r.reason.as_deref() == Some(sinks_contract::existing::SEQUENCE_REUSED);
    let matching: Vec<&Record> =
        all.iter().filter(|r| options.filters.matches(r) && (!options.new_epoch || reused(r))).collect();
    let already = matching.iter().filter(|r| done.contains_key(&r.dlq_seq)).count();
    let todo: Vec<&Record> = matching
        .into_iter()
        .filter(|r| !done.contains_key(&r.dlq_seq))
        .take(options.limit.unwrap_or(usize::MAX))
        .collect();
    // The originals are looked up side by side (one stream read each), in record order.
    let lookups = futures::stream::iter(todo.iter().map(|r| records::original(&source, config, r, epoch.as_deref())))
        .buffered(LOOKUPS_IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    tracing::info!(selected = todo.len(), took_ms = started.elapsed().as_millis() as u64, "originals looked up");
    let mut selected = Vec::new();
    for (record, found) in todo.into_iter().zip(lookups) {
        let found = found.map_err(failed)?;
        let over = record.redrive_count >= options.max_redrives;
        let left = if over {
            Some(format!(
                "redriven {} times already (--max-redrives {}); last error: {}",
                record.redrive_count,
                options.max_redrives,
                record.error.as_deref().unwrap_or(&record.error_type)
            ))
        } else {
            found.refused
        };
        let item = if left.is_some() { None } else { found.item };
        selected.push(Selected { record: record.clone(), origin: found.origin, left, item });
    }
    Ok(Some(Plan {
        dlq_stream: dlq_info.config.name.clone(),
        records: all.len(),
        already,
        selected,
        epoch,
        client,
        marks,
    }))
}

impl Plan {
    /// Ends a plan that is not run (a dry run): closes the connection, changes nothing.
    pub async fn close(self) {
        let _ = self.client.drain().await;
    }

    /// Redrives the selected records under `config` (the one [`prepare`] read them for).
    /// `sink_for` builds the sink a group of records is written to: the active sink
    /// (`None`), or the named sink of a fan-out target a record names. `progress` is told
    /// how many redrives ended so far; `stop` resolving ends the run between chunks.
    pub async fn run(
        self,
        config: &Config,
        mut sink_for: impl FnMut(Option<(&str, &SinkSection)>) -> Result<Arc<dyn Sink>, ConfigError>,
        progress: Progress,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Outcome, RunError> {
        // Group what can be written by the sink it goes to: per fan-out target when the sink
        // is a fan-out and the record names the target that failed.
        let fanout = config.sink.kind() == Some("fanout");
        let mut groups: BTreeMap<Option<String>, Vec<RedriveItem>> = BTreeMap::new();
        let mut left: Vec<(Record, String)> = Vec::new();
        let mut gone: Vec<Record> = Vec::new();
        let mut counts_of = BTreeMap::new();
        for s in self.selected {
            match (s.left, s.item) {
                (Some(why), _) => left.push((s.record, why)),
                (None, None) => gone.push(s.record),
                (None, Some(item)) => {
                    let target = if fanout { s.record.target.clone() } else { None };
                    if let Some(t) = &target
                        && !config.sinks.contains_key(t)
                    {
                        left.push((s.record, format!("its fan-out target `{t}` is not in the config's sinks")));
                        continue;
                    }
                    counts_of.insert(s.record.dlq_seq, (s.record.stream_sequence, s.record.redrive_count));
                    groups.entry(target).or_default().push(item);
                }
            }
        }
        let marker = Arc::new(Marker::new(self.marks, counts_of, progress));
        let stopping = Arc::new(tokio::sync::Notify::new());
        let signal = {
            let stopping = Arc::clone(&stopping);
            tokio::spawn(async move {
                stop.await;
                stopping.notify_waiters();
            })
        };
        let mut stopped = false;
        for (target, items) in groups {
            let sink = match &target {
                Some(t) => sink_for(Some((t.as_str(), &config.sinks[t]))),
                None => sink_for(None),
            };
            let sink = match sink {
                Ok(sink) => sink,
                Err(e) => {
                    signal.abort();
                    return Err(RunError::Config(e));
                }
            };
            tracing::info!(sink = sink.name(), target = ?target, messages = items.len(), "redriving");
            let wanted = items.len();
            let stopping = Arc::clone(&stopping);
            let handed = crate::runner::redrive(
                config.clone(),
                sink,
                items,
                Arc::clone(&marker) as Arc<dyn RedriveMarker>,
                async move { stopping.notified().await },
            )
            .await;
            let handed = match handed {
                Ok(handed) => handed,
                Err(e) => {
                    signal.abort();
                    return Err(e);
                }
            };
            if handed < wanted {
                stopped = true;
                break;
            }
        }
        signal.abort();
        let tally = marker.tally();
        let _ = self.client.drain().await;
        Ok(Outcome { tally, left, gone, stopped })
    }
}
