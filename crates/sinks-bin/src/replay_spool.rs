//! `nats-sink replay-spool SPOOL_CONFIG TARGET_CONFIG [--max-records N] [--dry-run]`: the
//! spool's records into the target sink of another config, in batches of the target's
//! `delivery.batch_size`, deleting each record only after the target committed it. A
//! progress bar on a terminal, one structured log line per batch otherwise.

use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use sinks_contract::{ConfigError, ErrorClass};

use crate::registry;

/// How a replay ended.
#[derive(Debug)]
pub(crate) enum Ended {
    /// Every selected record reached the target (or a dry run read them all).
    Complete(String),
    /// Some records are still in the spool (summary).
    Incomplete(String),
    /// A configuration problem (exit 2).
    Config(ConfigError),
    /// The spool or the target failed (exit 1).
    Failed(String),
}

/// Runs the replay.
pub(crate) async fn run(spool_path: &Path, target_path: &Path, max_records: Option<usize>, dry_run: bool) -> Ended {
    match replay(spool_path, target_path, max_records, dry_run).await {
        Ok(ended) | Err(ended) => ended,
    }
}

async fn replay(
    spool_path: &Path,
    target_path: &Path,
    max_records: Option<usize>,
    dry_run: bool,
) -> Result<Ended, Ended> {
    let spool_config = crate::registry::load_config(spool_path).map_err(Ended::Config)?;
    if spool_config.sink.kind() != Some("spool") {
        return Err(Ended::Config(ConfigError::single(
            "sink.type",
            "the first config must be a spool's (sink.type = \"spool\")",
        )));
    }
    let spool = sink_spool::SpoolSink::new(
        sink_spool::SpoolSinkConfig::from_section(&spool_config.sink).map_err(Ended::Config)?,
    )
    .map_err(Ended::Config)?;
    let target_config = crate::registry::load_config(target_path).map_err(Ended::Config)?;
    if target_config.sink.kind() == Some("spool") {
        return Err(Ended::Config(ConfigError::single("sink.type", "the target of a replay cannot be another spool")));
    }
    let _ = crate::init_logging(&target_config, None);
    // A target in batch mode answers each batch with final outcomes (one object per batch):
    // a record is deleted only after its object committed.
    let target =
        sinks_toolkit::holding::Durable::wrap(registry::build(&target_config.sink).map_err(Ended::Config)?.sink);
    let open = |e: sinks_contract::SinkError, what: &str| {
        if e.class() == ErrorClass::Config {
            Ended::Config(ConfigError::single(what, e.display_chain()))
        } else {
            Ended::Failed(format!("{what}: {}", e.display_chain()))
        }
    };
    sinks_contract::Sink::open(&spool).await.map_err(|e| open(e, "spool"))?;
    if !dry_run {
        target.open().await.map_err(|e| open(e, "target sink"))?;
    }
    let options = sink_spool::ReplayOptions {
        max_records,
        dry_run,
        batch_size: target_config.delivery.batch_size,
        ..sink_spool::ReplayOptions::default()
    };
    let bar = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} records {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    let report = sink_spool::replay(&spool, target.as_ref(), &options, |r| match &bar {
        Some(bar) => {
            bar.set_length(r.selected as u64);
            bar.set_position(r.processed as u64);
            bar.set_message(format!("({} committed, {} already there)", r.committed, r.already_there));
        }
        None => tracing::info!(
            processed = r.processed,
            selected = r.selected,
            committed = r.committed,
            already_there = r.already_there,
            deleted = r.deleted,
            failed_temporary = r.failed_temporary,
            failed_permanent = r.failed_permanent,
            unreadable = r.unreadable,
            "replay progress"
        ),
    })
    .await
    .map_err(|e| Ended::Failed(format!("replay: {}", e.display_chain())))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let _ = target.close().await;
    let summary = format!(
        "{}{} of {} records: {} committed, {} already in the target, {} deleted from the spool, {} failed temporarily, \
         {} refused permanently, {} unreadable{}",
        if dry_run { "dry run: read " } else { "replayed " },
        report.processed,
        report.selected,
        report.committed,
        report.already_there,
        report.deleted,
        report.failed_temporary,
        report.failed_permanent,
        report.unreadable,
        if report.stopped_early { "; stopped early (run it again when the target is reachable)" } else { "" },
    );
    Ok(if report.complete() { Ended::Complete(summary) } else { Ended::Incomplete(summary) })
}
