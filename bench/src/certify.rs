//! `cargo xtask certify [--sink NAME]`: every sink against the contract clauses and the
//! crash clauses, run through cargo: each sink crate's own certification tests
//! (`cargo nextest run -p sink-X --test certify`: C1–C12 in process through its harness, K1
//! and K2 with the real `nats-sink` killed and stopped, and a sink's own clauses such as the
//! NoSQL sink's D1 and D2, which kill its store). Each test records its result
//! (`sinks_certify::record_case`); this command links no harness: it reads the records and
//! prints a sink × clause matrix, writes `target/certify/report.json` and `report.md`, and
//! fails on any FAIL, a clause that could not run or was not recorded included.
//! `--results DIR` draws the matrix from the records of a run that already happened (`cargo
//! xtask test` runs the same tests in its nextest phase, at CI's size). A SKIP is only ever an
//! entry of the allow-list (`sinks_certify::skips`): shown with its reason, never counted as
//! a pass, and the allow-list is printed at the end with what used it. A clause that held
//! against a scripted backend rather than the real destination (`oracle-scripted`: the
//! Oracle sink over its scripted driver seam) is shown as `SCR`, never as PASS; the matrix
//! shows `—` where a sink has no such clause.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use sinks_certify::{self as certify, CaseResult, Outcome, SinkReport};
use sinks_testkit::Plan;

/// Options of `cargo xtask certify`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Certify only this sink.
    #[arg(long)]
    sink: Option<String>,
    /// Messages published for the kill -9 phase (at least 20,000 for a certification).
    #[arg(long, default_value_t = Plan::FULL.messages)]
    messages: usize,
    /// SIGKILLs during the kill -9 phase (at least 5).
    #[arg(long, default_value_t = Plan::FULL.kills)]
    kills: usize,
    /// Messages published for the graceful-stop phase.
    #[arg(long, default_value_t = Plan::FULL.graceful_messages)]
    graceful_messages: usize,
    /// Run nothing: draw the matrix from the results recorded in this directory (by `cargo
    /// xtask test`'s nextest run).
    #[arg(long, value_name = "DIR", conflicts_with = "sink")]
    results: Option<PathBuf>,
}

/// Every certified sink: its name in the reports and the crate whose `tests/certify.rs`
/// certifies it. `oracle-scripted` is the Oracle sink over the scripted driver seam (always
/// runs; its passes are labelled as scripted; its crash clauses are the allow-listed
/// `oracle-database` skip); `oracle` is the live harness (every clause is that skip unless
/// `NATS_SINKS_TEST_ORACLE_DSN`, `_USER` and `_PASSWORD` name a database).
const SINKS: [(&str, &str); 10] = [
    ("file", "sink-file"),
    ("mysql", "sink-mysql"),
    ("http", "sink-http"),
    ("s3", "sink-s3"),
    ("spool", "sink-spool"),
    ("coherence", "sink-coherence"),
    ("nosql", "sink-nosql"),
    ("oracle-scripted", "sink-oracle"),
    ("oracle", "sink-oracle"),
    ("review_package", "sink-review-package"),
];

/// The clauses every report of `sink` must hold: C1–C12; K1 and K2 for the sinks of
/// [`SINKS`] (the other rows are a sink's second mode, certified by the contract clauses);
/// D1 and D2 for the NoSQL sink.
fn required(sink: &str) -> Vec<String> {
    let mut ids: Vec<String> = certify::CLAUSES.iter().map(|(id, _, _)| (*id).to_owned()).collect();
    if SINKS.iter().any(|(name, _)| *name == sink) {
        ids.extend(["K1".to_owned(), "K2".to_owned()]);
    }
    if sink == "nosql" {
        ids.extend(["D1".to_owned(), "D2".to_owned()]);
    }
    ids
}

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

/// Runs `cargo xtask certify`.
pub(crate) fn run(args: Args) -> Result<()> {
    let (reports, ran) = match &args.results {
        Some(dir) => (complete(certify::read_results(dir)?, &expected(None)), Ok(())),
        None => certify_through_cargo(&args)?,
    };
    let dir = write_reports(&reports)?;
    println!("{}", matrix(&reports));
    println!("reports: {}/report.json, {}/report.md", dir.display(), dir.display());
    for line in skip_summary(&reports) {
        println!("{line}");
    }
    if !reports.iter().all(SinkReport::passed) {
        bail!("certification failed");
    }
    // Every clause was recorded and held, yet the tests failed: a test outside the clauses.
    ran
}

/// The sink names a run must report: `only`, or every sink of [`SINKS`].
fn expected(only: Option<&str>) -> Vec<&'static str> {
    SINKS.iter().map(|(name, _)| *name).filter(|name| only.is_none_or(|o| o == *name)).collect()
}

/// Runs the certification tests of the selected sinks through cargo with the plan of `args`;
/// returns the recorded reports and whether the tests passed.
fn certify_through_cargo(args: &Args) -> Result<(Vec<SinkReport>, Result<()>)> {
    let plan = Plan { messages: args.messages, kills: args.kills, graceful_messages: args.graceful_messages };
    if plan.messages < Plan::FULL.messages || plan.kills < Plan::FULL.kills {
        eprintln!("note: fewer than 20,000 messages or 5 kills is a smoke run, not a certification");
    }
    let names = expected(args.sink.as_deref());
    if names.is_empty() {
        let known: Vec<&str> = SINKS.iter().map(|(n, _)| *n).collect();
        bail!("no sink named {:?}; known: {}", args.sink, known.join(", "));
    }
    let mut packages: Vec<&str> =
        SINKS.iter().filter(|(name, _)| names.contains(name)).map(|(_, package)| *package).collect();
    packages.dedup();
    // The clauses run under cargo-nextest: without it, one line says what installs it (not a
    // matrix of clauses that did not run).
    let nextest = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !nextest {
        bail!(
            "cargo-nextest is not installed: `cargo xtask certify` installs it (pinned), as `cargo xtask setup` does"
        );
    }
    // The crash clauses run the `nats-sink` this build makes.
    crate::cargo(&["build", "--quiet", "-p", "sinks-bin"], &[])?;
    let results = sinks_testkit::workspace_root().join("target/certify/results");
    let _ = std::fs::remove_dir_all(&results);
    std::fs::create_dir_all(&results)?;
    let mut nextest = vec!["nextest", "run", "--no-fail-fast", "--test", "certify"];
    for package in &packages {
        nextest.extend(["-p", package]);
    }
    let mut env = plan.env();
    env.push((certify::RESULTS_ENV, results.display().to_string()));
    let ran = crate::cargo(&nextest, &env);
    let mut reports = certify::read_results(&results)?;
    // The package's other rows (a second mode) stay; a selected sink's absence is a FAIL.
    if args.sink.is_some() {
        reports.retain(|r| names.iter().any(|n| r.sink == *n || r.sink.starts_with(&format!("{n}-"))));
    }
    Ok((complete(reports, &names), ran))
}

/// `reports` with every required clause present: a clause with no record (its test did not
/// run or did not finish) is a FAIL, as is a sink of `names` with no report at all.
fn complete(mut reports: Vec<SinkReport>, names: &[&str]) -> Vec<SinkReport> {
    for name in names {
        if !reports.iter().any(|r| r.sink == *name) {
            reports.push(SinkReport { sink: (*name).to_owned(), cases: Vec::new(), crash: None });
        }
    }
    for report in &mut reports {
        for id in required(&report.sink) {
            if !report.cases.iter().any(|c| c.id == id) {
                let fail = Outcome::Fail("not recorded: its test did not run to the end".into());
                report.cases.push(CaseResult::new(&id, "(not run)", fail));
            }
        }
    }
    let order = |name: &str| SINKS.iter().position(|(n, _)| name == *n || name.starts_with(&format!("{n}-")));
    reports.sort_by_key(|r| (order(&r.sink).unwrap_or(usize::MAX), r.sink.clone()));
    reports
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
    let dir: &Path = &sinks_testkit::workspace_root().join("target/certify");
    std::fs::create_dir_all(dir)?;
    let mut json = serde_json::to_value(reports)?;
    if let Some(all) = json.as_array_mut() {
        for (value, report) in all.iter_mut().zip(reports) {
            value["backend"] = if scripted(report) { "scripted" } else { "live" }.into();
        }
    }
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&json)?)?;
    std::fs::write(dir.join("report.md"), markdown(reports))?;
    Ok(dir.to_path_buf())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn report(sink: &str, ids: &[&str]) -> SinkReport {
        let cases = ids.iter().map(|id| CaseResult::new(id, "t", Outcome::Pass)).collect();
        SinkReport { sink: sink.to_owned(), cases, crash: None }
    }

    fn contract() -> Vec<&'static str> {
        certify::CLAUSES.iter().map(|(id, _, _)| *id).collect()
    }

    #[test]
    fn a_clause_or_a_sink_without_a_record_fails_the_matrix() {
        let mut full = contract();
        full.extend(["K1", "K2"]);
        let mut nosql = full.clone();
        nosql.extend(["D1", "D2"]);
        // Everything recorded: every report passes, and a second mode needs no crash clauses.
        let all: Vec<SinkReport> = SINKS
            .iter()
            .map(|(name, _)| report(name, if *name == "nosql" { &nosql } else { &full }))
            .chain([report("file-batch", &contract())])
            .collect();
        let done = complete(all.clone(), &expected(None));
        assert!(done.iter().all(SinkReport::passed));
        assert_eq!(done[1].sink, "file-batch", "a second mode sits under its sink");
        // K2 of the file sink never recorded (its test was killed): FAIL, and the matrix says so.
        let mut broken = all.clone();
        broken[0].cases.retain(|c| c.id != "K2");
        let done = complete(broken, &expected(None));
        assert!(!done[0].passed());
        assert!(matrix(&done).contains("file FAIL K2"), "{}", matrix(&done));
        // A sink with no record at all (its crate's tests did not build): every clause fails.
        let without_mysql: Vec<SinkReport> = all.into_iter().filter(|r| r.sink != "mysql").collect();
        let done = complete(without_mysql, &expected(None));
        let mysql = done.iter().find(|r| r.sink == "mysql").unwrap();
        assert_eq!(mysql.cases.len(), full.len());
        assert!(!mysql.passed());
    }

    #[test]
    fn a_selected_sink_is_the_only_one_expected() {
        assert_eq!(expected(Some("nosql")), ["nosql"]);
        assert!(expected(Some("kafka")).is_empty());
        assert_eq!(expected(None).len(), SINKS.len());
    }
}
