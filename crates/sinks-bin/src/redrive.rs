//! `nats-sink redrive CONFIG`: brings back exactly the dead-lettered messages of this
//! config's stream and consumer, exactly once, through the same pipeline as `run` (policies,
//! write, commit then settle, receipts), each under its original idempotency key so that one
//! already stored counts as a duplicate.
//!
//! The records are read from the DLQ stream (`records`), selected by the filters, and those
//! already marked done (`marks`) are skipped. For each one the original comes from its stream
//! while the stream still holds that message, else from the record's payload, else it is
//! `gone`. A record whose message was redriven `--max-redrives` times already is left for a
//! person with its reason. The rest go through `sinks_runtime::runner::redrive`, per fan-out
//! target when the sink is a fan-out (a record that names the target that failed is redriven
//! to that target alone); each record is marked done only once its redrive ended durably
//! (written, found stored, or dead-lettered again with its redrive count). `--dry-run`
//! changes nothing and says what a run would do. The run ends with a table on stdout; exit 0
//! when every selected record reached an end, 1 when some were not done (run again), 2 on a
//! configuration error.

mod marks;
mod records;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use futures::StreamExt;
use sinks_runtime::RunError;
use sinks_runtime::runner::RedriveItem;

use self::marks::{Marker, Marks, Tally};
use self::records::{Filters, Origin, Record};
use crate::registry;

/// Stream reads of originals in flight at once.
const LOOKUPS_IN_FLIGHT: usize = 32;

/// The options of `nats-sink redrive`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Options {
    /// Only records with this `error_type` (repeatable).
    #[arg(long = "error-type", value_name = "TYPE")]
    error_types: Vec<String>,
    /// Only originals whose subject matches this NATS pattern (repeatable).
    #[arg(long = "subject", value_name = "PATTERN")]
    subjects: Vec<String>,
    /// Only records dead-lettered at or after this RFC 3339 time.
    #[arg(long, value_parser = crate::reconcile_cmd::parse_time)]
    since: Option<time::OffsetDateTime>,
    /// Only records dead-lettered at or before this RFC 3339 time.
    #[arg(long, value_parser = crate::reconcile_cmd::parse_time)]
    until: Option<time::OffsetDateTime>,
    /// Only originals with this stream sequence, `N` or a range `A-B` (repeatable).
    #[arg(long = "seq", value_name = "SEQ", value_parser = records::parse_seq)]
    seqs: Vec<(u64, u64)>,
    /// At most this many records (of those selected and not done yet).
    #[arg(long)]
    limit: Option<usize>,
    /// A message redriven this many times already is left for a person.
    #[arg(long, default_value_t = 3)]
    max_redrives: u32,
    /// Say what a run would do; write and mark nothing.
    #[arg(long)]
    dry_run: bool,
    /// The key-value bucket of the done markers.
    #[arg(long, default_value = "nats_sinks_redrive")]
    bucket: String,
}

/// One selected record and what became of it before the write.
#[derive(Debug)]
struct Selected {
    record: Record,
    origin: Origin,
    /// Left for a person, with why.
    left: Option<String>,
    item: Option<RedriveItem>,
}

/// Runs the command.
pub(crate) async fn run(path: &Path, options: Options) -> ExitCode {
    let config = match registry::load_config(path) {
        Ok(c) => c,
        Err(e) => return crate::config_failure(&e),
    };
    if let Err(message) = crate::init_logging(&config, None) {
        return crate::config_failure(&sinks_contract::ConfigError::single("logging.level", message));
    }
    match redrive(&config, &options).await {
        Ok(code) => code,
        Err(RunError::Config(e)) => crate::config_failure(&e),
        Err(e) => {
            crate::report(&e.to_string());
            ExitCode::from(1)
        }
    }
}

fn failed(e: impl std::fmt::Display) -> RunError {
    RunError::Unreachable(e.to_string())
}

#[allow(clippy::print_stdout)]
async fn redrive(config: &sinks_runtime::Config, options: &Options) -> Result<ExitCode, RunError> {
    let client = sinks_runtime::connect::connect(&config.nats).await.map_err(|e| match e {
        sinks_runtime::connect::ConnectError::Config(e) => RunError::Config(e),
        sinks_runtime::connect::ConnectError::Unreachable(e) => failed(format!("cannot reach nats: {e}")),
    })?;
    let js = async_nats::jetstream::new(client.clone());
    let started = std::time::Instant::now();
    let read = records::read(&js, config).await.map_err(|e| {
        if e.starts_with("dead_letter") {
            RunError::Config(sinks_contract::ConfigError::single("dead_letter", e))
        } else {
            failed(e)
        }
    })?;
    let Some((mut dlq, all)) = read else {
        println!("redrive: the dead-letter stream is empty; nothing to redrive");
        return Ok(ExitCode::SUCCESS);
    };
    tracing::info!(records = all.len(), took_ms = started.elapsed().as_millis() as u64, "dead-letter records read");
    let dlq_info = dlq.info().await.map_err(failed)?.clone();
    let source =
        js.get_stream(&config.nats.stream).await.map_err(|e| failed(format!("stream {}: {e}", config.nats.stream)))?;
    let marks = Marks::open(&js, &options.bucket, &dlq_info, !options.dry_run).await.map_err(failed)?;
    let done = marks.done().await.map_err(failed)?;
    let filters = Filters {
        error_types: options.error_types.clone(),
        subjects: options.subjects.clone(),
        since: options.since,
        until: options.until,
        seqs: options.seqs.clone(),
    };
    let matching: Vec<&Record> = all.iter().filter(|r| filters.matches(r)).collect();
    let already = matching.iter().filter(|r| done.contains_key(&r.dlq_seq)).count();
    let todo: Vec<&Record> = matching
        .into_iter()
        .filter(|r| !done.contains_key(&r.dlq_seq))
        .take(options.limit.unwrap_or(usize::MAX))
        .collect();
    // The originals are looked up side by side (one stream read each), in record order.
    let lookups = futures::stream::iter(todo.iter().map(|r| records::original(&source, config, r)))
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
    let name = dlq_info.config.name.clone();
    println!(
        "redrive of {}/{} from dead-letter stream {name}: {} records of this consumer, {} selected, {} of them done before",
        config.nats.stream,
        config.nats.consumer,
        all.len(),
        selected.len() + already,
        already
    );
    if options.dry_run {
        dry_run(&selected);
        let _ = client.drain().await;
        return Ok(ExitCode::SUCCESS);
    }
    // Group what can be written by the sink it goes to: per fan-out target when the sink is
    // a fan-out and the record names the target that failed.
    let fanout = config.sink.kind() == Some("fanout");
    let mut groups: BTreeMap<Option<String>, Vec<RedriveItem>> = BTreeMap::new();
    let mut left: Vec<(Record, String)> = Vec::new();
    let mut gone: Vec<Record> = Vec::new();
    let mut counts_of = BTreeMap::new();
    for s in selected {
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
    let marker = Arc::new(Marker::new(marks, counts_of));
    let stop = Arc::new(tokio::sync::Notify::new());
    let signal = {
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            crate::shutdown_signal().await;
            stop.notify_waiters();
        })
    };
    let mut stopped = false;
    for (target, items) in groups {
        let built = match &target {
            Some(t) => registry::build_named(t, &config.sinks[t]),
            None => registry::build_active(config),
        };
        let built = built.map_err(RunError::Config)?;
        tracing::info!(sink = built.sink.name(), target = ?target, messages = items.len(), "redriving");
        let wanted = items.len();
        let stop = Arc::clone(&stop);
        let handed = sinks_runtime::runner::redrive(
            config.clone(),
            built.sink,
            items,
            Arc::clone(&marker) as Arc<dyn sinks_runtime::runner::RedriveMarker>,
            async move { stop.notified().await },
        )
        .await?;
        if handed < wanted {
            stopped = true;
            break;
        }
    }
    signal.abort();
    marker.finish();
    let tally = marker.tally();
    table(&tally, &left, &gone, stopped);
    let _ = client.drain().await;
    Ok(if tally.not_done.is_empty() && !stopped { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The closing table of a real run, and what needs a look.
#[allow(clippy::print_stdout)]
fn table(tally: &Tally, left: &[(Record, String)], gone: &[Record], stopped: bool) {
    println!("{:<20}{:>8}", "redriven", tally.redriven);
    println!("{:<20}{:>8}", "duplicates", tally.duplicates);
    println!("{:<20}{:>8}", "failed again", tally.failed_again);
    println!("{:<20}{:>8}", "gone", gone.len());
    println!("{:<20}{:>8}", "left for a person", left.len());
    println!("{:<20}{:>8}", "not done", tally.not_done.len());
    for (r, why) in left {
        println!(
            "left for a person: dead letter {} (stream sequence {}, subject {}): {why}",
            r.dlq_seq, r.stream_sequence, r.subject
        );
    }
    for r in gone {
        println!(
            "gone: dead letter {} (stream sequence {}, subject {}): the stream no longer holds it and the record has no payload",
            r.dlq_seq, r.stream_sequence, r.subject
        );
    }
    for (seq, why) in &tally.not_done {
        println!("not done: dead letter {seq}: {why} (run the same command again)");
    }
    if stopped {
        println!("stopped before every record was redriven; run the same command again to go on");
    }
}

/// What a run would do: each selected record, and counts by error type, subject and origin.
#[allow(clippy::print_stdout)]
fn dry_run(selected: &[Selected]) {
    println!("dry run: nothing is written and nothing is marked");
    for s in selected {
        let r = &s.record;
        let fate = match (&s.left, &s.item) {
            (Some(why), _) => format!("left for a person: {why}"),
            (None, None) => "gone".to_owned(),
            (None, Some(_)) => "would be redriven".to_owned(),
        };
        println!(
            "  dead letter {} stream sequence {} subject {} error_type {} redrives {} original {}: {fate}",
            r.dlq_seq,
            r.stream_sequence,
            r.subject,
            if r.error_type.is_empty() { "-" } else { &r.error_type },
            r.redrive_count,
            s.origin.label()
        );
    }
    let records = || selected.iter().map(|s| &s.record);
    println!("by error type:");
    for (label, n) in records::count_by(records(), |r| r.error_type.clone()) {
        println!("  {:<40}{n:>8}", if label.is_empty() { "-" } else { &label });
    }
    println!("by subject:");
    for (label, n) in records::count_by(records(), |r| r.subject.clone()) {
        println!("  {label:<40}{n:>8}");
    }
    let mut origins: BTreeMap<&str, usize> = BTreeMap::new();
    for s in selected {
        *origins.entry(s.origin.label()).or_insert(0) += 1;
    }
    println!("originals:");
    for (label, n) in origins {
        println!("  {label:<40}{n:>8}");
    }
    let would = selected.iter().filter(|s| s.item.is_some()).count();
    let left = selected.iter().filter(|s| s.left.is_some()).count();
    println!("would redrive {would}, left for a person {left}");
}
