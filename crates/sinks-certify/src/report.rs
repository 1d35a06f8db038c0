//! Certification results: per case pass / fail / allow-listed skip, per sink a report, as
//! JSON. Each clause test records its result as a file when [`RESULTS_ENV`] names a
//! directory ([`record_case`]); [`read_results`] gathers them into one report per sink, so a
//! runner that ran the sinks' certification tests through cargo (`cargo xtask certify`) can
//! draw the matrix without linking any harness.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Environment variable naming the directory where each clause test writes its result
/// (`<dir>/<sink>/<clause>.json`); unset, nothing is written.
pub const RESULTS_ENV: &str = "NATS_SINKS_CERTIFY_RESULTS";

/// One recorded clause result: the case and, for the crash clauses, the run's counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Recorded {
    sink: String,
    case: CaseResult,
    counts: Option<serde_json::Value>,
}

/// Writes `case` of `sink` (with the crash run's `counts`, if any) into the directory
/// [`RESULTS_ENV`] names; does nothing when it is unset. A result that cannot be written
/// panics: the runner would otherwise report the clause as not run.
pub fn record_case(sink: &str, case: &CaseResult, counts: Option<&serde_json::Value>) {
    if let Some(dir) = std::env::var_os(RESULTS_ENV) {
        record_case_in(Path::new(&dir), sink, case, counts);
    }
}

/// [`record_case`] into `dir`.
fn record_case_in(dir: &Path, sink: &str, case: &CaseResult, counts: Option<&serde_json::Value>) {
    let dir = dir.join(sink);
    let recorded = Recorded { sink: sink.to_owned(), case: case.clone(), counts: counts.cloned() };
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        let json = serde_json::to_vec_pretty(&recorded).map_err(std::io::Error::other)?;
        std::fs::write(dir.join(format!("{}.json", case.id)), json)
    });
    if let Err(e) = written {
        panic!("cannot record {sink} {} in {}: {e}", case.id, dir.display());
    }
}

/// The order of a clause id in a report: `C1`…`C12`, then `K1`, `K2`, then a sink's own
/// clauses (`D1`, …), each by number.
fn clause_order(id: &str) -> (u8, u32, String) {
    let rank = match id.chars().next() {
        Some('C') => 0,
        Some('K') => 1,
        _ => 2,
    };
    (rank, id[1..].parse().unwrap_or(u32::MAX), id.to_owned())
}

/// Every result recorded under `dir` ([`record_case`]), one report per sink (sorted by
/// name, clauses in clause order); the crash counts go to [`SinkReport::crash`].
pub fn read_results(dir: &Path) -> std::io::Result<Vec<SinkReport>> {
    let mut reports: Vec<SinkReport> = Vec::new();
    let mut sinks: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    sinks.sort_by_key(std::fs::DirEntry::file_name);
    for sink in sinks.iter().filter(|e| e.path().is_dir()) {
        let mut report =
            SinkReport { sink: sink.file_name().to_string_lossy().into_owned(), cases: Vec::new(), crash: None };
        for file in std::fs::read_dir(sink.path())? {
            let path = file?.path();
            let text = std::fs::read(&path)?;
            let recorded: Recorded =
                serde_json::from_slice(&text).map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
            if let Some(counts) = recorded.counts.filter(|c| !c.is_null()) {
                let crash = report.crash.get_or_insert_with(|| serde_json::json!({}));
                if let (Some(all), Some(these)) = (crash.as_object_mut(), counts.as_object()) {
                    all.extend(these.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
            report.cases.push(recorded.case);
        }
        report.cases.sort_by_key(|c| clause_order(&c.id));
        reports.push(report);
    }
    Ok(reports)
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", content = "reason", rename_all = "snake_case")]
pub enum Outcome {
    /// The clause holds.
    Pass,
    /// The clause is broken; the reason says how.
    Fail(String),
    /// The case could not run for a reason on the allow-list ([`super::skips`]); anything
    /// else that keeps a case from running is a [`Outcome::Fail`]. Never counted as a pass.
    Skip {
        /// The allow-list entry.
        allowed: String,
        /// What exactly is missing.
        reason: String,
    },
}

impl Outcome {
    /// `PASS`, `FAIL` or `SKIP`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Fail(_) => "FAIL",
            Self::Skip { .. } => "SKIP",
        }
    }
}

/// One clause's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseResult {
    /// Clause id (`C1` …, `K1` …).
    pub id: String,
    /// Clause title.
    pub title: String,
    /// What happened.
    pub outcome: Outcome,
}

impl CaseResult {
    /// A result for clause `id`.
    pub fn new(id: &str, title: &str, outcome: Outcome) -> Self {
        Self { id: id.to_owned(), title: title.to_owned(), outcome }
    }
}

/// Everything certified about one sink.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SinkReport {
    /// Sink name.
    pub sink: String,
    /// Clause results, in clause order (crash clauses appended by the crash run).
    pub cases: Vec<CaseResult>,
    /// Counts recorded by the crash certification, when it ran.
    pub crash: Option<serde_json::Value>,
}

impl SinkReport {
    /// True when no case failed (a skip is on the allow-list by construction).
    pub fn passed(&self) -> bool {
        !self.cases.iter().any(|c| matches!(c.outcome, Outcome::Fail(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_results_come_back_as_one_report_per_sink_in_clause_order() {
        let dir = tempfile::tempdir().unwrap();
        let counts = serde_json::json!({"k1": {"kills": 3}});
        for id in ["K2", "C10", "C2", "D1", "K1", "C1"] {
            let outcome = if id == "C2" { Outcome::Fail("broken".into()) } else { Outcome::Pass };
            let counts = id.starts_with('K').then_some(&counts);
            record_case_in(dir.path(), "file", &CaseResult::new(id, "t", outcome), counts);
        }
        record_case_in(dir.path(), "mysql", &CaseResult::new("C1", "t", Outcome::Pass), None);
        let reports = read_results(dir.path()).unwrap();
        assert_eq!(reports.iter().map(|r| r.sink.as_str()).collect::<Vec<_>>(), ["file", "mysql"]);
        let ids: Vec<&str> = reports[0].cases.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["C1", "C2", "C10", "K1", "K2", "D1"]);
        assert!(!reports[0].passed(), "the failed C2 is kept");
        assert!(reports[1].passed());
        assert_eq!(reports[0].crash, Some(counts));
        assert_eq!(reports[1].crash, None);
    }
}
