//! What the bench reads about a measured process from `/proc`: peak RSS and CPU time.

use std::process::Command;
use std::time::Duration;

/// Peak RSS in KiB (`VmHWM`) and user + system CPU of `pid`, in clock ticks' resolution.
pub(super) fn proc_stats(pid: u32) -> (u64, Duration) {
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
