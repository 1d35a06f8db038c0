//! The phases of `cargo xtask test` and their wall times: each phase is timed as it runs, and
//! the table is printed at the end whether the run passed or failed (CI's log ends with it).

use std::time::{Duration, Instant};

use anyhow::Result;

/// The phases run so far, in order.
#[derive(Debug)]
pub(crate) struct Phases {
    started: Instant,
    rows: Vec<Row>,
}

/// One phase: its name, how long it took and whether it passed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    name: String,
    took: Duration,
    passed: bool,
}

impl Phases {
    /// Starts the clock of the whole run.
    pub(crate) fn start() -> Self {
        Self { started: Instant::now(), rows: Vec::new() }
    }

    /// Runs phase `name` and records its time and result; returns its result.
    pub(crate) fn run<T>(&mut self, name: &str, phase: impl FnOnce() -> Result<T>) -> Result<T> {
        eprintln!("== phase: {name}");
        let began = Instant::now();
        let result = phase();
        self.rows.push(Row { name: name.to_owned(), took: began.elapsed(), passed: result.is_ok() });
        result
    }

    /// The table (Markdown), with the run's total.
    pub(crate) fn table(&self) -> String {
        render(&self.rows, self.started.elapsed())
    }
}

/// The Markdown table of `rows`, ending with `total`. Pure.
fn render(rows: &[Row], total: Duration) -> String {
    let mut out = String::from("| phase | seconds | result |\n|---|---:|---|\n");
    for row in rows {
        let result = if row.passed { "ok" } else { "FAILED" };
        out.push_str(&format!("| {} | {:.0} | {result} |\n", row.name, row.took.as_secs_f64()));
    }
    out.push_str(&format!("| total | {:.0} | |\n", total.as_secs_f64()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_each_phase_in_order_with_its_result_and_the_total() {
        let rows = [
            Row { name: "clippy".into(), took: Duration::from_millis(12_400), passed: true },
            Row { name: "nextest".into(), took: Duration::from_secs(300), passed: false },
        ];
        let table = render(&rows, Duration::from_secs(400));
        assert_eq!(
            table,
            "| phase | seconds | result |\n|---|---:|---|\n| clippy | 12 | ok |\n| nextest | 300 | FAILED |\n\
             | total | 400 | |\n"
        );
    }

    #[test]
    fn a_phase_is_recorded_with_the_result_it_returned() {
        let mut phases = Phases::start();
        assert_eq!(phases.run("one", || Ok(7)).unwrap(), 7);
        assert!(phases.run("two", || -> Result<()> { anyhow::bail!("broken") }).is_err());
        let names: Vec<(&str, bool)> = phases.rows.iter().map(|r| (r.name.as_str(), r.passed)).collect();
        assert_eq!(names, [("one", true), ("two", false)]);
        assert!(phases.table().contains("| two |") && phases.table().contains("FAILED"));
    }
}
