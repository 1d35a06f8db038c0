//! `cargo xtask certify [--sink NAME]`: every sink against the contract clauses
//! (in-process, through each sink crate's harness) and the crash certification (the real
//! binary, killed and restarted). Prints a sink × clause matrix, writes
//! `target/certify/report.json` and `report.md`, and fails on any FAIL (a clause that could
//! not run included). A SKIP is only ever an entry of the allow-list
//! (`sinks_certify::skips`): shown with its reason, never counted as a pass, and
//! the allow-list is printed at the end with what used it. A clause that held against a scripted backend
//! rather than the real destination (`oracle-scripted`: the Oracle sink over its scripted
//! driver seam) is shown as `SCR`, never as PASS. A sink may have clauses of its own after
//! K1 and K2 (the NoSQL sink's D1 and D2 kill its store: `certify/nosql.rs`); the matrix shows
//! `—` where a sink has no such clause.

use std::path::PathBuf;

use anyhow::{Result, bail};
use sinks_certify::{self as certify, Harness, Outcome, SinkReport};

use crate::crash::{self, Plan};

mod nosql;

/// Options of `cargo xtask certify`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Certify only this sink.
    #[arg(long)]
    sink: Option<String>,
    /// Messages published for the kill -9 phase (at least 20,000 for a certification).
    #[arg(long, default_value_t = 20_000)]
    messages: usize,
    /// SIGKILLs during the kill -9 phase (at least 5).
    #[arg(long, default_value_t = 5)]
    kills: usize,
    /// Messages published for the graceful-stop phase.
    #[arg(long, default_value_t = 5_000)]
    graceful_messages: usize,
}

/// Every certified sink's name. `oracle-scripted` is the Oracle sink over the scripted driver
/// seam (always runs; its passes are labelled as scripted; its crash clauses are the
/// allow-listed `oracle-database` skip); `oracle` is the live harness (every clause is that
/// skip unless `NATS_SINKS_TEST_ORACLE_DSN`, `_USER` and `_PASSWORD` name a database).
const SINKS: [&str; 9] = ["file", "mysql", "http", "s3", "spool", "coherence", "nosql", "oracle-scripted", "oracle"];

/// True when `report` comes from a scripted backend, not the real destination.
fn scripted(report: &SinkReport) -> bool {
    report.sink.ends_with("-scripted")
}

/// The label of `outcome` in `report`: a pass against a scripted backend is `SCR`.
fn label(report: &SinkReport, outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Pass if scripted(report) => "SCR",
        other => other.label(),
    }
}

/// The harness of sink `name`, on the run's servers (`cargo xtask test` names them in the
/// environment) or on servers started for this process.
async fn harness(name: &str) -> Result<Box<dyn Harness>> {
    Ok(match name {
        "file" => Box::new(sink_file::certify::FileHarness),
        "mysql" => {
            let addr = sinks_testkit::shared_mysql().map_err(|e| anyhow::anyhow!("no MariaDB for mysql: {e}"))?;
            Box::new(sink_mysql::certify::MySqlHarness::new(sink_mysql::certify::TestServer::new(addr.host, addr.port)))
        }
        "http" => Box::new(sink_http::certify::HttpHarness::new(sinks_testkit::shared_http().base_url())),
        "oracle-scripted" => Box::new(sink_oracle::certify::ScriptedHarness),
        "oracle" => Box::new(sink_oracle::certify::LiveHarness::from_env().await),
        "spool" => Box::new(sink_spool::certify::SpoolHarness),
        "s3" => {
            let server = sinks_testkit::shared_s3().await.map_err(|e| anyhow::anyhow!("no S3 server for s3: {e}"))?;
            Box::new(sink_s3::certify::S3Harness::new(
                server.endpoint,
                server.filer,
                sinks_testkit::S3_ACCESS_KEY_ID,
                sinks_testkit::S3_SECRET_ACCESS_KEY,
            ))
        }
        "coherence" => {
            let address = sinks_testkit::shared_coherence()
                .await
                .map_err(|e| anyhow::anyhow!("no Coherence member for coherence: {e}"))?;
            Box::new(sink_coherence::certify::CoherenceHarness::new(address))
        }
        // The real Oracle NoSQL Database: the run's KVLite + proxy, or one for this process.
        "nosql" => {
            let endpoint =
                sinks_testkit::shared_kvlite().await.map_err(|e| anyhow::anyhow!("no KVLite for nosql: {e}"))?;
            Box::new(sink_nosql::certify::NoSqlHarness::live(endpoint))
        }
        other => bail!("no sink named {other:?}; known: {}", SINKS.join(", ")),
    })
}

/// Runs `cargo xtask certify` (the tools installed by xtask first).
pub(crate) fn run(args: Args) -> Result<()> {
    if args.messages < 20_000 || args.kills < 5 {
        eprintln!("note: fewer than 20,000 messages or 5 kills is a smoke run, not a certification");
    }
    let selected: Vec<&str> = SINKS.into_iter().filter(|n| args.sink.as_deref().is_none_or(|s| s == *n)).collect();
    if selected.is_empty() {
        bail!("no sink named {:?}; known: {}", args.sink, SINKS.join(", "));
    }
    crate::cargo(&["build", "--quiet", "-p", "sinks-bin"], &[])?;
    let bin = sinks_testkit::debug_nats_sink();
    let plan = Plan { messages: args.messages, kills: args.kills, graceful_messages: args.graceful_messages };
    let rt = tokio::runtime::Runtime::new()?;
    let mut reports = Vec::new();
    for name in selected {
        let harness = rt.block_on(harness(name))?;
        eprintln!("certifying {name}: contract clauses");
        let mut report = rt.block_on(certify::run_all(harness.as_ref()));
        eprintln!("certifying {name}: crash certification ({} messages, {} kills)", plan.messages, plan.kills);
        let (cases, counts) = rt.block_on(crash::certify(harness.as_ref(), &bin, plan));
        report.cases.extend(cases);
        report.crash = Some(counts);
        if name == "nosql" {
            eprintln!("certifying nosql: the store and the proxy killed (D1, D2)");
            let (cases, counts) = rt.block_on(nosql::certify(&bin));
            report.cases.extend(cases);
            if let Some(crash) = report.crash.as_mut().and_then(serde_json::Value::as_object_mut) {
                crash.insert("store_kills".into(), counts);
            }
        }
        reports.push(report);
    }
    let dir = write_reports(&reports)?;
    println!("{}", matrix(&reports));
    println!("reports: {}/report.json, {}/report.md", dir.display(), dir.display());
    for line in skip_summary(&reports) {
        println!("{line}");
    }
    if reports.iter().all(SinkReport::passed) { Ok(()) } else { bail!("certification failed") }
}

/// The allow-list, and which clauses of `reports` it skipped.
fn skip_summary(reports: &[SinkReport]) -> Vec<String> {
    let log: Vec<(String, String)> = reports
        .iter()
        .flat_map(|r| {
            r.cases.iter().filter_map(move |c| match &c.outcome {
                Outcome::Skip { allowed, .. } => Some((allowed.clone(), format!("{} {}", r.sink, c.id))),
                _ => None,
            })
        })
        .collect();
    certify::skips::summary(&log)
}

fn write_reports(reports: &[SinkReport]) -> Result<PathBuf> {
    let dir = sinks_testkit::workspace_root().join("target/certify");
    std::fs::create_dir_all(&dir)?;
    let mut json = serde_json::to_value(reports)?;
    if let Some(all) = json.as_array_mut() {
        for (value, report) in all.iter_mut().zip(reports) {
            value["backend"] = if scripted(report) { "scripted" } else { "live" }.into();
        }
    }
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&json)?)?;
    std::fs::write(dir.join("report.md"), markdown(reports))?;
    Ok(dir)
}

/// Every clause of `reports`, `(id, title)`, in the order they first appear.
fn clause_ids(reports: &[SinkReport]) -> Vec<(&str, &str)> {
    let mut ids: Vec<(&str, &str)> = Vec::new();
    for c in reports.iter().flat_map(|r| &r.cases) {
        if !ids.iter().any(|(id, _)| *id == c.id) {
            ids.push((&c.id, &c.title));
        }
    }
    ids
}

/// The label of clause `id` in `report`, `—` when the sink has no such clause.
fn cell(report: &SinkReport, id: &str) -> &'static str {
    report.cases.iter().find(|c| c.id == id).map_or("—", |c| label(report, &c.outcome))
}

/// The sink × clause matrix as plain text.
fn matrix(reports: &[SinkReport]) -> String {
    if reports.is_empty() {
        return String::new();
    }
    let ids = clause_ids(reports);
    let mut out = format!("{:<16}", "sink");
    for (id, _) in &ids {
        out.push_str(&format!(" {id:>4}"));
    }
    out.push('\n');
    for r in reports {
        out.push_str(&format!("{:<16}", r.sink));
        for (id, _) in &ids {
            out.push_str(&format!(" {:>4}", cell(r, id)));
        }
        out.push('\n');
    }
    for r in reports {
        for c in &r.cases {
            match &c.outcome {
                Outcome::Fail(reason) => {
                    out.push_str(&format!("{} FAIL {} ({}): {reason}\n", r.sink, c.id, c.title));
                }
                Outcome::Skip { allowed, reason } => {
                    out.push_str(&format!(
                        "{} SKIP {} ({}): allow-listed `{allowed}`: {reason}\n",
                        r.sink, c.id, c.title
                    ));
                }
                Outcome::Pass => {}
            }
        }
    }
    out
}

fn markdown(reports: &[SinkReport]) -> String {
    let mut md = String::from(
        "# Certification report\n\nPASS: held against the real destination. SCR: held against a scripted backend only (not a live pass). SKIP: not run, for a reason on the allow-list (below). FAIL: did not hold, or could not run.\n\n",
    );
    if !reports.is_empty() {
        let ids = clause_ids(reports);
        md.push_str("| sink |");
        for (id, _) in &ids {
            md.push_str(&format!(" {id} |"));
        }
        md.push_str("\n|---|");
        md.push_str(&"---|".repeat(ids.len()));
        md.push('\n');
        for r in reports {
            md.push_str(&format!("| {} |", r.sink));
            for (id, _) in &ids {
                md.push_str(&format!(" {} |", cell(r, id)));
            }
            md.push('\n');
        }
        md.push_str("\n| clause | title |\n|---|---|\n");
        for (id, title) in &ids {
            md.push_str(&format!("| {id} | {title} |\n"));
        }
    }
    for r in reports {
        md.push_str(&format!("\n## {}\n\n", r.sink));
        for c in &r.cases {
            match &c.outcome {
                Outcome::Pass if scripted(r) => {
                    md.push_str(&format!(
                        "- {} SCR (passed against the scripted backend, not a live destination)\n",
                        c.id
                    ));
                }
                Outcome::Pass => md.push_str(&format!("- {} PASS\n", c.id)),
                Outcome::Fail(reason) => md.push_str(&format!("- {} FAIL: {reason}\n", c.id)),
                Outcome::Skip { allowed, reason } => {
                    md.push_str(&format!("- {} SKIP (allow-listed `{allowed}`): {reason}\n", c.id));
                }
            }
        }
        if let Some(crash) = &r.crash {
            md.push_str(&format!(
                "\nCrash certification counts:\n\n```json\n{}\n```\n",
                serde_json::to_string_pretty(crash).unwrap_or_default()
            ));
        }
    }
    md.push_str("\n## Allowed skips\n\n```\n");
    for line in skip_summary(reports) {
        md.push_str(&line);
        md.push('\n');
    }
    md.push_str("```\n");
    md
}
