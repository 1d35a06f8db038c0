//! The Oracle suite's phases (as `oracle_scripted` prints them) and its report section.

/// One phase of the Oracle suite, as `oracle_scripted` prints it (see that program).
#[derive(Debug, Clone)]
pub(super) struct OraclePhase {
    /// The phase's name.
    pub(super) phase: String,
    /// Rows written.
    pub(super) rows: u64,
    /// CPU time per row.
    pub(super) cpu_us: f64,
    /// Wall time inside the scripted database's calls, per row.
    pub(super) backend_us: f64,
    /// The phase's wall time.
    pub(super) wall_s: f64,
}

impl OraclePhase {
    /// One line of `oracle_scripted`'s output, or `None` when it is not a phase.
    pub(super) fn parse(line: &str) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        Some(Self {
            phase: v["phase"].as_str()?.to_owned(),
            rows: v["rows"].as_u64()?,
            cpu_us: v["cpu_us_per_row"].as_f64()?,
            backend_us: v["backend_us_per_row"].as_f64()?,
            wall_s: v["wall_s"].as_f64()?,
        })
    }
}

/// The Oracle suite's section of the report.
pub(super) fn render_oracle(phases: &[OraclePhase]) -> String {
    if phases.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "\n## Oracle sink over the scripted driver seam\n\nCPU time of one process per row (user + system); backend: wall time inside the scripted database's calls (on a busy machine it includes preemption, which makes \"above backend\" read low). No Oracle database could be run here: these numbers are the framework's cost, not database throughput.\n\n| phase | rows | CPU µs/row | backend µs/row | CPU above backend µs/row | wall s |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for p in phases {
        md.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            p.phase,
            p.rows,
            p.cpu_us,
            p.backend_us,
            p.cpu_us - p.backend_us,
            p.wall_s
        ));
    }
    let find = |name: &str| phases.iter().find(|p| p.phase == name);
    if let Some(d) = find("direct") {
        md.push_str(&format!(
            "\nOracle sink write path above the backend: {:.2} µs/row (target ≤ 10).\n",
            d.cpu_us - d.backend_us
        ));
    }
    if let (Some(o), Some(b)) = (find("runner-oracle"), find("runner-blackhole")) {
        md.push_str(&format!(
            "Runner + Oracle sink above the backend: {:.2} µs/row, of which the runner alone (blackhole sink): {:.2} µs/row; the Oracle sink adds {:.2} µs/row.\n",
            o.cpu_us - o.backend_us,
            b.cpu_us,
            o.cpu_us - o.backend_us - b.cpu_us
        ));
    }
    md
}
