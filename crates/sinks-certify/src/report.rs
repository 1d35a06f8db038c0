//! Certification results: per case pass / fail / allow-listed skip, per sink a report, as
//! JSON.

use serde::{Deserialize, Serialize};

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
