//! `nats-sink verify-packages CONFIG`: reads every package of a review package sink back
//! and checks it (every file against `hashes.json` and `manifest.json`, nothing missing,
//! nothing added; `sink_review_package::verify`), changing nothing. Prints the packages that
//! are not intact with what is wrong, then a count. Exit 0 when every package is intact, 1
//! when one is incomplete or tampered (or the directory cannot be read), 2 for a
//! configuration or usage error.

use std::path::Path;
use std::process::ExitCode;

use sink_review_package::verify::{PackageState, Report};
use sink_review_package::{ReviewPackageSink, ReviewPackageSinkConfig};
use sinks_cli::Registry;
use sinks_contract::ConfigError;

/// The kind whose packages this command reads.
const KIND: &str = "review_package";

/// Loads the config at `path`, picks the review package sink (the active one, or the named
/// one `sink_name`), checks its packages and prints the report.
#[allow(clippy::print_stdout)]
pub(crate) async fn run(registry: &Registry, path: &Path, sink_name: Option<&str>, format: &str) -> ExitCode {
    let format = format.trim().to_ascii_lowercase();
    if format != "text" && format != "json" {
        return sinks_cli::exit::config_failure(&ConfigError::single("--format", "must be `text` or `json`"));
    }
    let config = match registry.load_config(path) {
        Ok(c) => c,
        Err(e) => return sinks_cli::exit::config_failure(&e),
    };
    let (field, section) = match sink_name {
        Some(name) => match config.sinks.get(name) {
            Some(section) => (format!("sinks.{name}"), section),
            None => {
                return sinks_cli::exit::config_failure(&ConfigError::single(
                    "--sink-name",
                    format!("there is no named sink `{name}` in `sinks`"),
                ));
            }
        },
        None => (String::from("sink"), &config.sink),
    };
    if section.kind() != Some(KIND) {
        return sinks_cli::exit::config_failure(&ConfigError::single(
            format!("{field}.type"),
            "verify-packages reads the packages of a `review_package` sink (name one with --sink-name)",
        ));
    }
    let sink = match ReviewPackageSinkConfig::from_section(section).and_then(ReviewPackageSink::new) {
        Ok(sink) => sink,
        Err(e) => return sinks_cli::exit::config_failure(&e),
    };
    let report = match sink.verify().await {
        Ok(report) => report,
        Err(e) => {
            sinks_cli::exit::report(&format!("cannot read the packages: {}", e.display_chain()));
            return ExitCode::from(sinks_cli::exit::RUNTIME_ERROR);
        }
    };
    let text = if format == "json" {
        format!("{}\n", serde_json::to_string_pretty(&report).unwrap_or_default())
    } else {
        render_text(&report)
    };
    print!("{text}");
    if report.all_intact() { ExitCode::SUCCESS } else { ExitCode::from(sinks_cli::exit::RUNTIME_ERROR) }
}

/// The text report: each package that is not intact with its problems, then the counts.
pub(crate) fn render_text(report: &Report) -> String {
    let mut out = String::new();
    for check in &report.packages {
        let (word, problems) = match &check.state {
            PackageState::Intact => continue,
            PackageState::Incomplete { problems } => ("incomplete", problems),
            PackageState::Tampered { problems } => ("tampered", problems),
        };
        out.push_str(&format!("{word} {}\n", check.name));
        for problem in problems {
            out.push_str(&format!("  {problem}\n"));
        }
    }
    let (intact, incomplete, tampered) = report.counts();
    out.push_str(&format!(
        "{} packages in {}: {intact} intact, {incomplete} incomplete, {tampered} tampered\n",
        report.packages.len(),
        report.directory.display()
    ));
    if !report.other_entries.is_empty() {
        out.push_str(&format!("{} other entries (not packages) left alone\n", report.other_entries.len()));
    }
    out
}
