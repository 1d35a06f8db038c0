//! What the bench reads about a measured process from `/proc`: peak RSS and CPU time,
//! and the machine's CPU counters around one contender (the Coherence member-load table).

use std::process::Command;
use std::time::Duration;

/// Peak RSS in KiB (`VmHWM`) and user + system CPU of `pid`, in clock ticks' resolution.
pub(crate) fn proc_stats(pid: u32) -> (u64, Duration) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name: utime and stime are the 12th and 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let hz = clock_ticks();
    (hwm, Duration::from_secs_f64(ticks as f64 / hz as f64))
}

/// On-CPU time of the live threads of `pid` to the nanosecond (the first field of each
/// thread's `schedstat`), or `None` where the kernel does not keep it. Finer than
/// [`proc_stats`]'s clock ticks (10 ms: ±2 % of a 100,000-message blackhole run), so two
/// processes' CPU per message can be compared; threads that already exited are not counted.
pub(super) fn on_cpu(pid: u32) -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    (total > 0).then(|| Duration::from_nanos(total))
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`), 100 where it cannot be read.
pub(super) fn clock_ticks() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// CPU counters at one moment: a process's CPU time (exited threads included, which
/// matters for a JVM whose pools start and stop threads) and the machine's busy and total
/// time from `/proc/stat`, in clock ticks.
pub(super) struct Load {
    process: Option<Duration>,
    busy: u64,
    total: u64,
}

/// What the Coherence member spent while one contender ran.
pub(super) struct MemberLoad {
    name: String,
    /// Member CPU per message, ms.
    ms_per_message: f64,
    /// Member CPU over the window, as a share of all cores.
    member_share: f64,
    /// Busy share of the whole machine over the window.
    machine_busy: f64,
}

impl Load {
    pub(super) fn now(pid: Option<u32>) -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let ticks: Vec<u64> =
            stat.lines().next().unwrap_or_default().split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
        let total = ticks.iter().sum();
        // idle and iowait
        let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
        Self { process: pid.map(|p| proc_stats(p).1), busy: total - idle, total }
    }

    pub(super) fn since(&self, before: &Self, name: &str, messages: usize) -> MemberLoad {
        let member = match (self.process, before.process) {
            (Some(after), Some(before)) => after.saturating_sub(before),
            _ => Duration::ZERO,
        };
        let window = self.total.saturating_sub(before.total).max(1) as f64;
        let hz = clock_ticks() as f64;
        MemberLoad {
            name: name.to_owned(),
            ms_per_message: member.as_secs_f64() * 1e3 / messages.max(1) as f64,
            // `window` counts ticks of every core together.
            member_share: member.as_secs_f64() * hz / window,
            machine_busy: self.busy.saturating_sub(before.busy) as f64 / window,
        }
    }
}

/// The Coherence suite's member-load table: where the machine's CPU went while each
/// contender ran (the member shares the cores with the sink and nats-server).
pub(super) fn render_member_load(rows: &[MemberLoad]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "\nCoherence member load while each contender ran (from its start to its last ack):\n\n\
         | contender | member CPU ms/msg | member share of all cores | machine busy |\n|---|---:|---:|---:|\n",
    );
    for r in rows {
        md.push_str(&format!(
            "| {} | {:.2} | {:.0} % | {:.0} % |\n",
            r.name,
            r.ms_per_message,
            r.member_share * 100.0,
            r.machine_busy * 100.0
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Load, clock_ticks};

    #[test]
    fn member_load_is_cpu_per_message_and_shares_of_the_window() {
        let hz = clock_ticks();
        let before = Load { process: Some(Duration::from_secs(1)), busy: 50, total: 1_000 };
        // A window of 4 s of core time (2 cores for 2 s): the member used 2 s of it, the
        // machine was busy for 3 s of it.
        let after = Load { process: Some(Duration::from_secs(3)), busy: 50 + 3 * hz, total: 1_000 + 4 * hz };
        let load = after.since(&before, "x", 1_000);
        assert_eq!(load.name, "x");
        assert!((load.ms_per_message - 2.0).abs() < 1e-9, "{}", load.ms_per_message);
        assert!((load.member_share - 0.5).abs() < 1e-9, "{}", load.member_share);
        assert!((load.machine_busy - 0.75).abs() < 1e-9, "{}", load.machine_busy);
        // Without the member's process the member's columns are zero, not garbage.
        let gone = Load { process: None, busy: 50 + 3 * hz, total: 1_000 + 4 * hz }.since(&before, "y", 1_000);
        assert_eq!(gone.ms_per_message, 0.0);
        assert!((gone.machine_busy - 0.75).abs() < 1e-9);
    }
}
