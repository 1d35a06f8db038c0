//! The phases of `cargo xtask test` and their wall times: each phase is timed as it runs, and
//! the table is printed at the end whether the run passed or failed (CI's log ends with it).
//! Each row also gives how busy the machine's CPUs were during the phase (from `/proc/stat`):
//! a long phase with idle CPUs waits, one near 100 % computes, which says where CI time can
//! still be taken out.

use std::time::{Duration, Instant};

use anyhow::Result;

/// The phases run so far, in order.
#[derive(Debug)]
pub(crate) struct Phases {
    started: Instant,
    rows: Vec<Row>,
}

/// One phase: its name, how long it took, how busy the CPUs were and whether it passed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    name: String,
    took: Duration,
    /// The share of all CPUs' time spent busy (not idle, not waiting for I/O) during the
    /// phase, in percent; `None` where `/proc/stat` cannot be read.
    busy: Option<u32>,
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
        let before = cpu_times();
        let result = phase();
        let busy = before.zip(cpu_times()).and_then(|(a, b)| busy_percent(a, b));
        self.rows.push(Row { name: name.to_owned(), took: began.elapsed(), busy, passed: result.is_ok() });
        result
    }

    /// Starts phase `name` on a thread of its own, beside the phases that follow it; its row
    /// is recorded by [`Phases::join`] (named "… (beside)"), with its own time.
    pub(crate) fn beside<T: Send + 'static>(
        name: &str,
        phase: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Beside<T> {
        eprintln!("== phase (beside the next ones): {name}");
        let handle = std::thread::spawn(move || {
            let began = Instant::now();
            let before = cpu_times();
            let result = phase();
            let busy = before.zip(cpu_times()).and_then(|(a, b)| busy_percent(a, b));
            (result, began.elapsed(), busy)
        });
        Beside { name: name.to_owned(), handle }
    }

    /// Waits for a phase started by [`Phases::beside`], records its row and returns its result.
    pub(crate) fn join<T>(&mut self, beside: Beside<T>) -> Result<T> {
        let name = format!("{} (beside)", beside.name);
        let Ok((result, took, busy)) = beside.handle.join() else {
            self.rows.push(Row { name: name.clone(), took: Duration::ZERO, busy: None, passed: false });
            anyhow::bail!("phase `{}` panicked", beside.name);
        };
        self.rows.push(Row { name, took, busy, passed: result.is_ok() });
        result
    }

    /// The table (Markdown), with the run's total.
    pub(crate) fn table(&self) -> String {
        render(&self.rows, self.started.elapsed())
    }
}

/// A phase running beside others ([`Phases::beside`]): its name and its thread, which returns
/// its result, its time and how busy the CPUs were meanwhile.
pub(crate) struct Beside<T> {
    name: String,
    handle: std::thread::JoinHandle<(Result<T>, Duration, Option<u32>)>,
}

/// The CPUs' (busy, total) time so far, in clock ticks: `/proc/stat`'s first line.
fn cpu_times() -> Option<(u64, u64)> {
    parse_cpu_line(std::fs::read_to_string("/proc/stat").ok()?.lines().next()?)
}

/// (busy, total) ticks of a `/proc/stat` `cpu` line: busy is every column but idle (the 4th)
/// and iowait (the 5th). Pure.
fn parse_cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<u64> = fields.map(str::parse).collect::<Result<_, _>>().ok()?;
    let total: u64 = ticks.iter().sum();
    let waiting = ticks.get(3)? + ticks.get(4).copied().unwrap_or(0);
    Some((total - waiting, total))
}

/// The busy share between two readings, in percent. Pure.
fn busy_percent(before: (u64, u64), after: (u64, u64)) -> Option<u32> {
    let total = after.1.checked_sub(before.1).filter(|t| *t > 0)?;
    let busy = after.0.checked_sub(before.0)?;
    u32::try_from(busy * 100 / total).ok()
}

/// The Markdown table of `rows`, ending with `total`. Pure.
fn render(rows: &[Row], total: Duration) -> String {
    let mut out = String::from("| phase | seconds | cpu busy | result |\n|---|---:|---:|---|\n");
    for row in rows {
        let result = if row.passed { "ok" } else { "FAILED" };
        let busy = row.busy.map_or_else(|| "?".to_owned(), |b| format!("{b} %"));
        out.push_str(&format!("| {} | {:.0} | {busy} | {result} |\n", row.name, row.took.as_secs_f64()));
    }
    out.push_str(&format!("| total | {:.0} | | |\n", total.as_secs_f64()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_each_phase_in_order_with_its_result_and_the_total() {
        let rows = [
            Row { name: "clippy".into(), took: Duration::from_millis(12_400), busy: Some(97), passed: true },
            Row { name: "nextest".into(), took: Duration::from_secs(300), busy: None, passed: false },
        ];
        let table = render(&rows, Duration::from_secs(400));
        assert_eq!(
            table,
            "| phase | seconds | cpu busy | result |\n|---|---:|---:|---|\n| clippy | 12 | 97 % | ok |\n\
             | nextest | 300 | ? | FAILED |\n| total | 400 | | |\n"
        );
    }

    #[test]
    fn a_phase_beside_the_others_is_recorded_when_joined_with_its_own_time_and_result() {
        let mut phases = Phases::start();
        let ok = Phases::beside("slow", || {
            std::thread::sleep(Duration::from_millis(50));
            Ok(7)
        });
        let failing = Phases::beside("failing", || -> Result<()> { anyhow::bail!("no such tool") });
        phases.run("meanwhile", || Ok(())).unwrap();
        assert_eq!(phases.join(ok).unwrap(), 7);
        assert!(phases.join(failing).is_err());
        let names: Vec<(&str, bool)> = phases.rows.iter().map(|r| (r.name.as_str(), r.passed)).collect();
        assert_eq!(names, [("meanwhile", true), ("slow (beside)", true), ("failing (beside)", false)]);
        assert!(phases.rows[1].took >= Duration::from_millis(50), "the beside phase's own time");
    }

    #[test]
    fn cpu_busy_is_every_tick_but_idle_and_iowait_between_two_readings() {
        // user nice system idle iowait irq softirq steal
        let a = parse_cpu_line("cpu  100 0 50 800 50 0 0 0 0 0").unwrap();
        let b = parse_cpu_line("cpu  400 0 150 1000 50 0 0 0 0 0").unwrap();
        assert_eq!(a, (150, 1000));
        assert_eq!(b, (550, 1600));
        assert_eq!(busy_percent(a, b), Some(66));
        assert_eq!(busy_percent(a, a), None, "no time passed");
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4 5"), None, "only the machine's line");
        assert!(cpu_times().is_some(), "this machine has /proc/stat");
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
