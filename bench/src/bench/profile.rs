//! `cargo xtask bench --profile`: where a contender's CPU goes.
//!
//! Each measured process gets a `perf record` (Debian's `linux-perf`) attached to its pid from
//! its spawn until its last message is acknowledged; `perf report` then lists its top frames
//! by self time, per shared object and symbol, into `target/bench/<log>.profile.txt`, and the
//! report carries the first lines of each. The measurement itself is unchanged (perf samples
//! at a low rate and runs in its own process, whose CPU is not counted), but it does share the
//! two cores: compare profiled runs with profiled runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};

/// Set once by `bench --profile`.
static ON: AtomicBool = AtomicBool::new(false);

/// Sampling frequency (Hz): enough samples over a run of seconds, little extra load.
const FREQUENCY: &str = "499";

/// Frames shown in the report per profiled contender.
pub(super) const TOP_FRAMES: usize = 25;

/// Turns profiling on for this run; fails when `perf` cannot record here.
pub(super) fn enable() -> Result<()> {
    let ok = Command::new("perf")
        .args(["record", "-q", "-F", FREQUENCY, "-o", "/dev/null", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        bail!(
            "--profile needs `perf` (Debian: apt-get install linux-perf) and the right to record (kernel.perf_event_paranoid ≤ 1, or root)"
        );
    }
    ON.store(true, Ordering::Relaxed);
    Ok(())
}

/// A `perf record` attached to one process.
#[derive(Debug)]
pub(super) struct Recording {
    perf: Child,
    data: PathBuf,
    summary: PathBuf,
}

/// Starts recording `pid` into `<log>.perf.data` when profiling is on.
pub(super) fn attach(pid: u32, log: &Path) -> Result<Option<Recording>> {
    if !ON.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let data = log.with_extension("perf.data");
    let summary = log.with_extension("profile.txt");
    let perf = Command::new("perf")
        .args(["record", "-q", "-F", FREQUENCY, "--call-graph", "dwarf,16384", "-p", &pid.to_string(), "-o"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting perf record")?;
    Ok(Some(Recording { perf, data, summary }))
}

impl Recording {
    /// Stops the recording and writes `<log>.profile.txt`: the top frames by self time, and
    /// the same samples folded by caller (children included). Returns the first
    /// [`TOP_FRAMES`] lines of the self-time list.
    pub(super) fn finish(mut self) -> Result<String> {
        // perf writes its file on SIGINT.
        let _ = Command::new("kill").args(["-INT", &self.perf.id().to_string()]).status();
        let _ = self.perf.wait();
        let report = |children: bool| -> Result<String> {
            let out = Command::new("perf")
                .args(["report", "--stdio", "-q", "--percent-limit", "0.3", "--sort", "dso,symbol", "-g", "none"])
                .arg(if children { "--children" } else { "--no-children" })
                .arg("-i")
                .arg(&self.data)
                .stderr(Stdio::null())
                .output()
                .context("running perf report")?;
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        };
        let own = report(false)?;
        let inclusive = report(true)?;
        std::fs::write(
            &self.summary,
            format!("# self time per frame\n{own}\n# with the time of the frames it calls (children)\n{inclusive}"),
        )?;
        // The raw samples are large: the summary is kept, the data only for `perf report` by hand.
        Ok(top(&own, TOP_FRAMES))
    }
}

/// The first `n` sample lines of a `perf report --stdio` listing, shortened: the percentage,
/// the shared object and the symbol, without perf's padding and comments.
pub(super) fn top(report: &str, n: usize) -> String {
    report
        .lines()
        .map(str::trim)
        .filter(|l| l.split_whitespace().next().is_some_and(|p| p.ends_with('%')))
        .take(n)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The report's section of profiles: each profiled contender's top frames.
pub(super) fn render(results: &[super::Measurement]) -> String {
    let mut md = String::new();
    for m in results {
        if let Some(frames) = &m.profile {
            if md.is_empty() {
                md.push_str("\n## Profiles (perf, self time per frame)\n");
            }
            md.push_str(&format!("\n{}:\n\n```text\n{frames}\n```\n", m.name));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::top;

    #[test]
    fn the_top_frames_are_the_sample_lines_in_order_without_perfs_padding() {
        let report = "# comment\n\n    12.50%  nats-sink  [.] tokio::runtime::park\n     3.10%  [kernel.kallsyms]  [k] do_syscall_64\n\n     1.00%  libc.so.6  [.] malloc\n";
        assert_eq!(
            top(report, 2),
            "12.50% nats-sink [.] tokio::runtime::park\n3.10% [kernel.kallsyms] [k] do_syscall_64"
        );
        assert_eq!(top(report, 10).lines().count(), 3);
        assert_eq!(top("# nothing sampled\n", 5), "");
    }
}
