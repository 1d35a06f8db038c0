//! Exit codes and the error lines of the commands. Every command exits 0 on success, 1 on a
//! runtime error and 2 on a configuration or usage error (each problem on a line of its own,
//! naming its field); `reconcile` adds 3 and 4 (`docs/ledger.md`) and `redrive` adds 5
//! (`docs/redrive.md`). [`CODES`] is the table `--help` prints. A binary's own subcommands
//! ([`crate::Registry::commands`]) report through these so every command reads alike.

use std::process::ExitCode;

use sinks_contract::ConfigError;

/// A runtime error: something failed that a correct config cannot prevent (exit 1).
pub const RUNTIME_ERROR: u8 = 1;
/// A configuration or usage error (exit 2).
pub const CONFIG_ERROR: u8 = 2;
/// `reconcile`: nothing missing or conflicting, but some sequences are gone from the stream
/// with no receipt to show where they went (exit 3).
pub const RECONCILE_GONE: u8 = 3;
/// `reconcile`: the destination cannot be read back, so some messages are unchecked (exit 4).
pub const RECONCILE_UNCHECKED: u8 = 4;
/// `redrive`: every selected record reached an end, but dead letters remain: messages that
/// failed again, records left for a person, or originals that are gone (exit 5).
pub const REDRIVE_LEFT: u8 = 5;

/// Every exit code and what it means, for `--help` (the README has the same table).
pub const CODES: &[(u8, &str)] = &[
    (0, "success (a graceful stop on SIGTERM/SIGINT included)"),
    (
        RUNTIME_ERROR,
        "runtime error (reconcile: messages missing or conflicting; redrive: some records not done, run it again)",
    ),
    (CONFIG_ERROR, "configuration or usage error, naming the field"),
    (RECONCILE_GONE, "reconcile: only sequences the stream no longer holds, with no receipt"),
    (RECONCILE_UNCHECKED, "reconcile: the destination cannot be read back (unchecked)"),
    (REDRIVE_LEFT, "redrive: dead letters remain (failed again, left for a person, or gone)"),
];

/// The exit codes a command can end with, as `--help` lists them: 0, 1, 2 and `more`.
pub(crate) fn codes_help(more: &[u8]) -> String {
    let mut text = String::from("Exit codes:");
    for (code, meaning) in CODES.iter().filter(|(c, _)| *c <= CONFIG_ERROR || more.contains(c)) {
        text.push_str(&format!("\n  {code}  {meaning}"));
    }
    text
}

/// Writes `error: <message>` to standard error.
#[allow(clippy::print_stderr)]
pub fn report(message: &str) {
    eprintln!("error: {message}");
}

/// Reports every issue of `e` (`error: configuration: …`) and returns exit code 2.
pub fn config_failure(e: &ConfigError) -> ExitCode {
    for issue in &e.issues {
        report(&format!("configuration: {issue}"));
    }
    ExitCode::from(CONFIG_ERROR)
}

/// A command this build lacks: which cargo feature (and release binary) brings it. Exit 2.
pub fn missing_feature(command: &str, feature: &str) -> ExitCode {
    report(&format!(
        "`{} {command}` is not in this build: it needs the `{feature}` cargo feature (the full nats-sink, or the \
         nats-sink-{feature} release binary, has it)",
        sinks_runtime::program::name()
    ));
    ExitCode::from(CONFIG_ERROR)
}

/// A command of a feature that is not a sink kind (no slim release binary has it): the full
/// nats-sink, built with the default features, has it. Exit 2.
pub fn missing_build_feature(command: &str, feature: &str) -> ExitCode {
    report(&format!(
        "`{} {command}` is not in this build: it needs the `{feature}` cargo feature (the full nats-sink, \
         built with the default features, has it)",
        sinks_runtime::program::name()
    ));
    ExitCode::from(CONFIG_ERROR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_lists_the_codes_it_can_return() {
        let plain = codes_help(&[]);
        assert_eq!(plain.lines().count(), 4, "{plain}");
        assert!(plain.contains("\n  2  configuration"), "{plain}");
        let reconcile = codes_help(&[RECONCILE_GONE, RECONCILE_UNCHECKED]);
        assert!(reconcile.contains("\n  3  reconcile") && reconcile.contains("\n  4  reconcile"), "{reconcile}");
        assert!(!reconcile.contains("\n  5"), "{reconcile}");
        assert!(codes_help(&[REDRIVE_LEFT]).contains("\n  5  redrive: dead letters remain"));
    }
}
