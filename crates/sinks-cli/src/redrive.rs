//! `nats-sink redrive CONFIG`: brings back exactly the dead-lettered messages of this
//! config's stream and consumer, exactly once, through the same pipeline as `run`
//! (`sinks_runtime::redrive` reads the records, finds the originals, writes and marks; see
//! `docs/redrive.md`). This module is the command: its flags, the sinks it builds through the
//! registry (the active sink, or a fan-out's named target), the progress on stderr (a bar on
//! a terminal, a line per tenth otherwise) and the output. `--dry-run` changes nothing and
//! says what a run would do. `--new-epoch` is the way back from a re-created stream accepted
//! as a replay: the records refused as `sequence_reused` are written under the key of the
//! stream's own epoch. The run ends with a table on stdout; exit 0 when every selected record
//! was stored (or found stored), 5 when every one reached an end but dead letters remain
//! (failed again, left for a person, gone: a job can tell), 1 when some were not done (run
//! again), 2 on a configuration error.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};
use sinks_runtime::RunError;
use sinks_runtime::redrive::{Filters, Outcome, Record, Selected};

use crate::{Registry, exit};

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
    #[arg(long = "seq", value_name = "SEQ", value_parser = parse_seq)]
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
    /// Only the records refused as `sequence_reused`, each written under a key of the stream's
    /// own epoch: the way back after a re-created stream was accepted as a replay
    /// (`stream-identity --accept replay`) that it was not (docs/redrive.md).
    #[arg(long)]
    new_epoch: bool,
}

impl Options {
    /// The runtime's options.
    fn to_runtime(&self) -> sinks_runtime::redrive::Options {
        sinks_runtime::redrive::Options {
            filters: Filters {
                error_types: self.error_types.clone(),
                subjects: self.subjects.clone(),
                since: self.since,
                until: self.until,
                seqs: self.seqs.clone(),
            },
            limit: self.limit,
            max_redrives: self.max_redrives,
            dry_run: self.dry_run,
            bucket: self.bucket.clone(),
            new_epoch: self.new_epoch,
        }
    }
}

/// Parses `--seq`: `N`, `A-B` or `A..B` (inclusive).
fn parse_seq(text: &str) -> Result<(u64, u64), String> {
    let num = |s: &str| s.trim().parse::<u64>().map_err(|_| format!("`{text}` is not a sequence or a range A-B"));
    let (a, b) = match text.split_once("..").or_else(|| text.split_once('-')) {
        Some((a, b)) => (num(a)?, num(b)?),
        None => {
            let n = num(text)?;
            (n, n)
        }
    };
    if a == 0 || b < a {
        return Err(format!("`{text}`: sequences start at 1 and a range must not be empty"));
    }
    Ok((a, b))
}

/// Runs the command.
pub(crate) async fn run(registry: &Registry, path: &Path, options: Options) -> ExitCode {
    let config = match registry.load_config(path) {
        Ok(c) => c,
        Err(e) => return exit::config_failure(&e),
    };
    if let Err(message) = crate::init_logging(&config, None) {
        return exit::config_failure(&sinks_contract::ConfigError::single("logging.level", message));
    }
    match redrive(registry, &config, &options).await {
        Ok(code) => code,
        Err(RunError::Config(e)) => exit::config_failure(&e),
        Err(e) => {
            exit::report(&e.to_string());
            ExitCode::from(1)
        }
    }
}

#[allow(clippy::print_stdout)]
async fn redrive(registry: &Registry, config: &sinks_runtime::Config, options: &Options) -> Result<ExitCode, RunError> {
    let Some(plan) = sinks_runtime::redrive::prepare(config, &options.to_runtime()).await? else {
        println!("redrive: the dead-letter stream is empty; nothing to redrive");
        return Ok(ExitCode::SUCCESS);
    };
    println!(
        "redrive of {}/{} from dead-letter stream {}: {} records of this consumer, {} selected, {} of them done before",
        config.nats.stream,
        config.nats.consumer,
        plan.dlq_stream,
        plan.records,
        plan.selected.len() + plan.already,
        plan.already
    );
    if let Some(epoch) = &plan.epoch {
        println!("--new-epoch: the records refused as sequence_reused are written under keys of epoch {epoch}");
    }
    if plan.selected.is_empty() {
        // A run still ends with its (empty) table; a dry run has nothing to list.
        println!("nothing to redrive: every selected record is done");
    }
    if options.dry_run && plan.selected.is_empty() {
        plan.close().await;
        return Ok(ExitCode::SUCCESS);
    }
    if options.dry_run {
        dry_run(&plan.selected);
        plan.close().await;
        return Ok(ExitCode::SUCCESS);
    }
    let bar = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        ProgressBar::new(0).with_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} dead letters redriven {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        )
    });
    let outcome = plan
        .run(
            config,
            |target| match target {
                Some((name, section)) => registry.build_named(name, section).map(|b| b.sink),
                None => registry.build_active(config).map(|b| b.sink),
            },
            progress(bar.clone()),
            crate::run::shutdown_signal(),
        )
        .await?;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    table(&outcome);
    Ok(exit_code(&outcome))
}

/// 1 while some records are not done (run again), 5 when all reached an end but dead letters
/// remain (failed again, left for a person, gone), else 0.
fn exit_code(outcome: &Outcome) -> ExitCode {
    if !outcome.complete() {
        ExitCode::from(exit::RUNTIME_ERROR)
    } else if outcome.tally.failed_again > 0 || !outcome.left.is_empty() || !outcome.gone.is_empty() {
        ExitCode::from(exit::REDRIVE_LEFT)
    } else {
        ExitCode::SUCCESS
    }
}

/// The progress of a run on stderr: `bar` on a terminal, else a line per tenth.
#[allow(clippy::print_stderr)]
fn progress(bar: Option<ProgressBar>) -> sinks_runtime::redrive::Progress {
    Box::new(move |ended, total| match &bar {
        Some(bar) => {
            bar.set_length(total);
            bar.set_position(ended);
        }
        None if total > 0 && (ended * 10 / total) != ((ended - 1) * 10 / total) => {
            eprintln!("redrive: {ended}/{total} dead letters");
        }
        None => {}
    })
}

/// The closing table of a real run, and what needs a look.
#[allow(clippy::print_stdout)]
fn table(outcome: &Outcome) {
    let Outcome { tally, left, gone, stopped } = outcome;
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
    if tally.failed_again > 0 {
        println!(
            "failed again: {} dead-lettered again with their redrive count; fix the cause, then redrive again",
            tally.failed_again
        );
    }
    if *stopped {
        println!("stopped before every record was redriven; run the same command again to go on");
    }
}

/// Counts of `records` by a label, for the dry run.
fn count_by<'a>(
    records: impl Iterator<Item = &'a Record>,
    label: impl Fn(&Record) -> String,
) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for r in records {
        *counts.entry(label(r)).or_insert(0) += 1;
    }
    counts
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
    for (label, n) in count_by(records(), |r| r.error_type.clone()) {
        println!("  {:<40}{n:>8}", if label.is_empty() { "-" } else { &label });
    }
    println!("by subject:");
    for (label, n) in count_by(records(), |r| r.subject.clone()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_parse() {
        assert_eq!(parse_seq("5"), Ok((5, 5)));
        assert_eq!(parse_seq("5-9"), Ok((5, 9)));
        assert_eq!(parse_seq("5..9"), Ok((5, 9)));
        assert!(parse_seq("9-5").is_err());
        assert!(parse_seq("0").is_err());
        assert!(parse_seq("x").is_err());
    }
}
