//! The one allow-list of what may not run on this project's machines, and the record of
//! what did not.
//!
//! A certification clause or a live test that cannot run is a failure, with one exception:
//! what needs something no registry this project can use offers, named here with the
//! reason. Such a test says so ([`record_allowed_skip`]), and when `NATS_SINKS_SKIP_LOG`
//! names a file it appends a line there; `cargo xtask test` and `cargo xtask certify` print
//! the allow-list and what used it at the end of a run. Anything not on this list (a missing
//! tool that `cargo xtask setup` installs, a server that did not start) fails the test.

use std::io::Write as _;
use std::path::Path;

/// An entry of the allow-list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllowedSkip {
    /// Stable id, named by the tests that use it.
    pub id: &'static str,
    /// Why it cannot run here, and how to run it where it can.
    pub reason: &'static str,
}

/// Live tests and clauses against an Oracle Database.
pub const ORACLE_DATABASE: &str = "oracle-database";
/// Clause C14 (origin keys) for a sink mode without a key per event.
pub const NO_KEY_PER_EVENT: &str = "no-key-per-event";

/// Everything that may not run here, with its reason. Nothing else may skip.
pub const ALLOWED_SKIPS: &[AllowedSkip] = &[
    AllowedSkip {
        id: ORACLE_DATABASE,
        reason: "needs an Oracle Database and Oracle Instant Client, which no registry this project can use \
                 offers; set NATS_SINKS_TEST_ORACLE_DSN, _USER and _PASSWORD (with Instant Client installed) to \
                 run them; the Oracle sink is certified over its scripted driver seam meanwhile",
    },
    AllowedSkip {
        id: NO_KEY_PER_EVENT,
        reason: "clause C14 (origin keys) does not apply to a sink mode without a key of its own per event: \
                 batch mode names its objects by slot and holds the consumed stream's sequences, and the spool \
                 names its local custody copy by the delivered key and replays it into a target that keys by \
                 origin; behind a mirror or a source use one record per message (docs/topology.md)",
    },
];

/// The environment variable naming the file allowed skips are appended to.
pub const SKIP_LOG_ENV: &str = "NATS_SINKS_SKIP_LOG";

/// The allow-list entry `id`, if there is one.
pub fn allowed(id: &str) -> Option<&'static AllowedSkip> {
    ALLOWED_SKIPS.iter().find(|s| s.id == id)
}

/// Says that `what` (a test name or `sink clause`) did not run for the allow-listed reason
/// `id` (`detail` says what exactly is missing), and appends `id<TAB>what` to the skip log
/// when one is named. Panics when `id` is not on the allow-list: a skip for any other reason
/// is a failure.
#[allow(clippy::print_stderr)]
pub fn record_allowed_skip(id: &str, what: &str, detail: &str) {
    let Some(entry) = allowed(id) else {
        panic!("{what} cannot run ({detail}), and `{id}` is not on the allow-list of skips");
    };
    eprintln!("SKIPPED (allow-listed: {}) {what}: {detail}", entry.id);
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV) {
        let line = format!("{}\t{}\n", entry.id, what.replace(['\t', '\n'], " "));
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!("cannot append to the skip log {}: {e}", Path::new(&path).display());
        }
    }
}

/// What a skip log holds: `(id, what)` per allowed skip, in the order recorded. A missing
/// file is an empty log.
pub fn read_skip_log(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(id, what)| (id.to_owned(), what.to_owned()))
        .collect()
}

/// The allow-list and what used each entry, as lines for the end of a run.
pub fn summary(log: &[(String, String)]) -> Vec<String> {
    let mut out = vec!["allowed skips (the allow-list; anything else that cannot run fails):".to_owned()];
    for entry in ALLOWED_SKIPS {
        let mut used: Vec<(&str, usize)> = Vec::new();
        for (_, what) in log.iter().filter(|(id, _)| id == entry.id) {
            match used.iter_mut().find(|(w, _)| *w == what.as_str()) {
                Some((_, n)) => *n += 1,
                None => used.push((what.as_str(), 1)),
            }
        }
        out.push(format!("  {}: {}", entry.id, entry.reason));
        if used.is_empty() {
            out.push("    skipped nothing in this run".to_owned());
        } else {
            let names: Vec<String> =
                used.iter().map(|(w, n)| if *n > 1 { format!("{w} (×{n})") } else { (*w).to_owned() }).collect();
            out.push(format!("    skipped {} in this run: {}", used.len(), names.join(", ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_ids_may_skip() {
        assert!(allowed(ORACLE_DATABASE).is_some());
        assert!(allowed("oracle-nosql-proxy").is_none(), "the NoSQL tests run against a real KVLite");
        assert!(allowed("python-reference").is_none(), "a tool setup installs is never a reason to skip");
        let refused = std::panic::catch_unwind(|| record_allowed_skip("mariadb", "some_test", "not installed"));
        assert!(refused.is_err(), "an id off the list must fail the test");
    }

    #[test]
    fn the_log_round_trips_and_the_summary_names_each_entry() {
        let dir = std::env::temp_dir().join(format!("skips-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        std::fs::write(&path, "oracle-database\ta\noracle-database\tb\noracle-database\ta\n").unwrap();
        let log = read_skip_log(&path);
        assert_eq!(log.len(), 3);
        assert_eq!(log[1], ("oracle-database".into(), "b".into()));
        let text = summary(&log).join("\n");
        assert!(text.contains("skipped 2 in this run: a (×2), b"), "{text}");
        let quiet = summary(&[]).join("\n");
        assert!(quiet.contains("oracle-database") && quiet.contains("skipped nothing in this run"), "{quiet}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
