//! `nats-sink reconcile`: per-message comparison of a stream range with the destination, the
//! ledger and the DLQ (see `docs/ledger.md`), and `--repair`, which prints the `nats-sink
//! replay` commands for the missing ranges (it re-publishes nothing itself).
//!
//! Exit codes: 0 nothing missing or conflicting (and nothing gone or unchecked); 1 missing or
//! conflicting messages; 2 configuration error; 3 only sequences the stream no longer holds
//! (gone, no receipt in the ledger); 4 the destination cannot be read back and nothing else
//! settled some messages (unchecked).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};
use sinks_runtime::reconcile::{self, Class, Finding, Range, ReconcileError};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::{Registry, exit};

/// Output format of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// One line per finding, then the totals.
    Text,
    /// One JSON document.
    Json,
}

/// What `nats-sink reconcile` was asked.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) config: PathBuf,
    pub(crate) range: Range,
    pub(crate) format: Format,
    /// `Some(None)`: print the repair commands; `Some(Some(file))`: write them to `file`.
    pub(crate) repair: Option<Option<PathBuf>>,
    pub(crate) chunk: usize,
}

/// Parses an RFC 3339 time argument.
pub(crate) fn parse_time(text: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(text, &Rfc3339).map_err(|e| format!("`{text}` is not an RFC 3339 time ({e})"))
}

fn line(f: &Finding) -> String {
    let destination = f.destination.as_ref().map(|d| serde_json::to_string(d).unwrap_or_default()).unwrap_or_default();
    format!(
        "{}\t{}\t{}\t{}",
        f.sequence,
        f.class.as_str(),
        f.subject.as_deref().unwrap_or("-"),
        if destination.is_empty() { "-".to_owned() } else { destination }
    )
}

/// Runs the command; returns the exit code.
#[allow(clippy::print_stdout)]
pub(crate) async fn run(registry: &Registry, request: Request) -> ExitCode {
    let (config, built) = match registry.load(&request.config) {
        Ok(v) => v,
        Err(e) => return exit::config_failure(&e),
    };
    let _ = crate::init_logging(&config, Some("warn"));
    if let Err(e) = built.sink.open().await {
        exit::report(&format!("cannot open the destination: {}", e.display_chain()));
        return ExitCode::from(if e.class() == sinks_contract::ErrorClass::Config { 2 } else { 1 });
    }
    let bar = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} reconciling [{bar:40}] {pos}/{len} sequences ({per_sec}, eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    let mut findings: Vec<Finding> = Vec::new();
    let stdout = std::io::stdout();
    let format = request.format;
    let result = reconcile::reconcile(
        &config,
        built.sink.as_ref(),
        request.range,
        request.chunk.max(1),
        |f| match format {
            Format::Text => {
                let text = line(f);
                match &bar {
                    Some(bar) => bar.suspend(|| {
                        let _ = writeln!(stdout.lock(), "{text}");
                    }),
                    None => {
                        let _ = writeln!(stdout.lock(), "{text}");
                    }
                }
            }
            Format::Json => findings.push(f.clone()),
        },
        |p| {
            if let Some(bar) = &bar {
                bar.set_length(p.total);
                bar.set_position(p.done);
            }
        },
    )
    .await;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let _ = built.sink.close().await;
    let summary = match result {
        Ok(s) => s,
        Err(ReconcileError::Config(m)) => {
            exit::report(&format!("configuration: {m}"));
            return ExitCode::from(2);
        }
        Err(ReconcileError::Failed(m)) => {
            exit::report(&m);
            return ExitCode::from(1);
        }
    };
    let config_arg = request.config.display().to_string();
    let commands = reconcile::repair_commands(&config_arg, &summary.missing_ranges);
    match format {
        Format::Json => {
            let doc = serde_json::json!({
                "summary": summary,
                "clean": summary.clean(),
                "findings": findings,
                "repair": commands,
            });
            println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        Format::Text => {
            println!(
                "stream {} sequences {}..={}: destination {}: {}",
                summary.stream,
                summary.from_seq,
                summary.to_seq,
                if summary.destination_checked { "checked" } else { "NOT CHECKED" },
                summary.read_back
            );
            println!(
                "ledger: {}; dead-letter stream: {}",
                summary.ledger_stream.as_deref().unwrap_or("not configured"),
                summary.dead_letter_stream.as_deref().unwrap_or("not configured")
            );
            let classes = [
                Class::PresentEqual,
                Class::Missing,
                Class::Conflict,
                Class::PresentNotInLedger,
                Class::DeadLettered,
                Class::Gone,
                Class::GoneRecorded,
                Class::Unchecked,
                Class::Reused,
            ];
            // Epoch by epoch: the earlier ones are no longer in the stream.
            for past in &summary.earlier_epochs {
                println!(
                    "epoch {} (stream created {}): sequences 1..={} no longer in the stream, settled through {}; ended {} \
                     ({}), decided {}",
                    past.epoch.as_deref().unwrap_or("first"),
                    past.created,
                    past.last_sequence,
                    past.settled,
                    past.ended_at,
                    past.ended_by.as_words(),
                    past.decision.as_str()
                );
            }
            if !summary.earlier_epochs.is_empty() || summary.epoch.is_some() {
                println!("epoch {} (the stream now):", summary.epoch.as_deref().unwrap_or("first"));
            }
            if let Some(undecided) = &summary.undecided {
                println!(
                    "{undecided}: a sequence an earlier event used counts as reused ({} stream-identity)",
                    sinks_runtime::program::name()
                );
            }
            let counts: Vec<String> = classes.iter().map(|c| format!("{}={}", c.as_str(), summary.count(*c))).collect();
            println!("{}", counts.join(" "));
            if summary.other_subjects > 0 {
                println!("{} messages on subjects this sink does not consume were skipped", summary.other_subjects);
            }
        }
    }
    if let Some(target) = &request.repair
        && let Err(message) = write_repair(target.as_deref(), &commands, format)
    {
        exit::report(&message);
        return ExitCode::from(1);
    }
    if !summary.clean() {
        ExitCode::from(exit::RUNTIME_ERROR)
    } else if summary.count(Class::Gone) > 0 {
        ExitCode::from(exit::RECONCILE_GONE)
    } else if summary.count(Class::Unchecked) > 0 {
        ExitCode::from(exit::RECONCILE_UNCHECKED)
    } else {
        ExitCode::SUCCESS
    }
}

#[allow(clippy::print_stdout)]
fn write_repair(file: Option<&Path>, commands: &[String], format: Format) -> Result<(), String> {
    match file {
        Some(path) => {
            let mut text =
                format!("#!/bin/sh\n# written by {} reconcile --repair\nset -e\n", sinks_runtime::program::name());
            for c in commands {
                text.push_str(c);
                text.push('\n');
            }
            std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
        }
        // In JSON mode the commands are part of the document.
        None if format == Format::Json => Ok(()),
        None => {
            if commands.is_empty() {
                println!("repair: nothing to replay");
            }
            for c in commands {
                println!("{c}");
            }
            Ok(())
        }
    }
}
