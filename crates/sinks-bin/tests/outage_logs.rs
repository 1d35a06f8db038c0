//! Logs stay readable under failure: the file sink's disk is full for 15 s while 3,000
//! messages flow. The outage is handled (temporary, nothing dead-lettered, every file there
//! once space returns) and the log shows it in a handful of lines: "destination
//! unavailable", a summary per interval with counts, sequences, class and reason, and
//! "destination recovered"; never one warning per message per attempt.
//!
//! The disk is a real tmpfs of 64 MiB mounted over the output directory and filled with a
//! ballast file (writes fail with `ENOSPC`), when this process may mount (root with
//! `CAP_SYS_ADMIN`, as on the project's machines and CI). Elsewhere the output directory is
//! replaced by a regular file for the same 15 s (writes fail with `ENOTDIR`): the same
//! temporary-failure path through the sink and the runner, and the test says which one ran.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sinks_testkit::{read_stream, stream_with_subjects, unique, wait_until};
use support::{Sink, env, json, records, sequences};

const MESSAGES: usize = 3000;
const OUTAGE: Duration = Duration::from_secs(15);

/// How the destination is taken away.
enum Outage {
    /// A tmpfs mounted at the output directory; the ballast fills it.
    DiskFull { mount: PathBuf, ballast: PathBuf },
    /// The output directory moved aside and a regular file put in its place.
    NotADirectory { out: PathBuf, away: PathBuf },
}

impl Outage {
    /// A tmpfs over `out` when mounting works here, else the directory-replacement outage.
    fn prepare(out: &Path) -> Self {
        std::fs::create_dir_all(out).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs"])
            .arg(out)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if mounted {
            eprintln!("outage: a full 64 MiB tmpfs (ENOSPC)");
            Self::DiskFull { mount: out.to_path_buf(), ballast: out.join(".ballast") }
        } else {
            eprintln!("outage: cannot mount a tmpfs here; the output directory becomes a file (ENOTDIR)");
            Self::NotADirectory { out: out.to_path_buf(), away: out.with_extension("away") }
        }
    }

    /// Takes the space (or the directory) away.
    fn begin(&self) {
        match self {
            Self::DiskFull { ballast, .. } => {
                let mut f = std::fs::File::create(ballast).unwrap();
                let chunk = vec![0u8; 1 << 20];
                // Fill every last page: whole MiBs first, then single bytes.
                while f.write_all(&chunk).is_ok() {}
                while f.write_all(&[0]).is_ok() {}
                let _ = f.sync_all();
            }
            Self::NotADirectory { out, away } => {
                std::fs::rename(out, away).unwrap();
                std::fs::write(out, b"not a directory").unwrap();
            }
        }
    }

    /// Gives it back.
    fn end(&self) {
        match self {
            Self::DiskFull { ballast, .. } => std::fs::remove_file(ballast).unwrap(),
            Self::NotADirectory { out, away } => {
                std::fs::remove_file(out).unwrap();
                std::fs::rename(away, out).unwrap();
            }
        }
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        if let Self::DiskFull { mount, .. } = self {
            let _ = Command::new("umount").arg("-l").arg(&*mount).status();
        }
    }
}

#[tokio::test]
async fn a_full_disk_for_15_seconds_is_a_few_log_lines_not_one_per_message() {
    let e = env().await;
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    // A tenth before the outage, the rest while the disk is full: a sink that is fast here
    // would otherwise write all of them before the ballast takes the space.
    let before = MESSAGES / 10;
    e.publish(before, json).await;
    let outage = Outage::prepare(&e.out());
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out()}),
        serde_json::json!({
            "delivery": {"batch_size": 50, "max_in_flight_batches": 2},
            "dead_letter": {"enabled": true, "subject": dlq_subject},
            "logging": {"level": "INFO", "format": "json", "summary_interval_seconds": 5},
            "metrics": {"lag_poll_interval_seconds": 1},
        }),
    );
    let sink = Sink::start(&config, e.dir.path(), &[]);
    assert!(
        wait_until(Duration::from_secs(60), || async { records(&e.out()).len() >= before }).await,
        "no progress before the outage; log:\n{}",
        sink.logs()
    );
    outage.begin();
    e.publish_range(before, MESSAGES, json).await;
    tokio::time::sleep(OUTAGE).await;
    outage.end();
    let done =
        wait_until(Duration::from_secs(120), || async { records(&e.out()).len() >= MESSAGES && e.settled().await })
            .await;
    assert!(done, "not everything arrived after the outage; log:\n{}", sink.logs());
    let log_path = sink.log.clone();
    assert_eq!(sink.terminate(), Some(0));
    let seqs = sequences(&e.out());
    assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), (1..=MESSAGES as u64).collect::<Vec<_>>());
    assert!(seqs.values().all(|n| *n == 1), "exactly one file per message");
    assert!(read_stream(&e.js, &dlq_stream).await.is_empty(), "a full disk dead-letters nothing");

    let logs = std::fs::read_to_string(log_path).unwrap();
    let lines: Vec<serde_json::Value> = logs.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let level = |l: &serde_json::Value| l["level"].as_str().unwrap_or_default().to_owned();
    let message = |l: &serde_json::Value| l["message"].as_str().unwrap_or_default().to_owned();
    let warns: Vec<&serde_json::Value> = lines.iter().filter(|l| level(l) == "WARN" || level(l) == "ERROR").collect();
    eprintln!("{} warn/error lines of {} in all", warns.len(), lines.len());
    for w in &warns {
        eprintln!("  {w}");
    }
    // One outage, one start line and one end line (a second pair only if the disk was still
    // filling when a batch got through); never a start without its end.
    let count = |prefix: &str| lines.iter().filter(|l| message(l).starts_with(prefix)).count();
    let (starts, ends) = (count("destination unavailable"), count("destination recovered"));
    eprintln!("{starts} \"destination unavailable\" and {ends} \"destination recovered\" lines");
    assert!(starts == ends && (1..=2).contains(&starts), "{starts} starts, {ends} ends:\n{logs}");
    let unavailable = lines.iter().position(|l| message(l).starts_with("destination unavailable"));
    let recovered = lines.iter().position(|l| message(l).starts_with("destination recovered"));
    assert!(unavailable.is_some() && recovered > unavailable, "the outage and its end are logged, in order:\n{logs}");
    // The start line says what failed, where, and why, with counts.
    let start = &lines[unavailable.unwrap()];
    for field in ["messages", "first_sequence", "last_sequence", "class", "reason"] {
        assert!(!start[field].is_null(), "`{field}` missing from {start}");
    }
    assert_eq!(start["class"], "temporary", "{start}");
    // 15 s of outage: the start, a summary per 10 s interval, the end; nothing per message.
    assert!(warns.len() <= 12, "{} warn/error lines for a 15 s outage:\n{logs}", warns.len());
    assert!(
        warns.iter().all(|w| !message(w).starts_with("write failed")),
        "no per-message write failures at warn:\n{logs}"
    );
    let summary = lines.iter().find(|l| message(l).starts_with("summary")).expect("periodic summary lines");
    for field in ["messages_per_second", "acked", "dead_lettered", "num_pending"] {
        assert!(!summary[field].is_null(), "`{field}` missing from {summary}");
    }
}
