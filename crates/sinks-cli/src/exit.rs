//! Exit codes and the error lines of the commands: 0 success, 1 a runtime error, 2 a
//! configuration or usage error (each problem on a line of its own, naming its field).
//! `reconcile` adds 3 and 4 (`docs/ledger.md`). A binary's own subcommands
//! ([`crate::Registry::commands`]) report through these so every command reads alike.

use std::process::ExitCode;

use sinks_contract::ConfigError;

/// A runtime error: something failed that a correct config cannot prevent (exit 1).
pub const RUNTIME_ERROR: u8 = 1;
/// A configuration or usage error (exit 2).
pub const CONFIG_ERROR: u8 = 2;

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
        "`nats-sink {command}` is not in this build: it needs the `{feature}` cargo feature (the full nats-sink, or the \
         nats-sink-{feature} release binary, has it)"
    ));
    ExitCode::from(CONFIG_ERROR)
}

/// A command of a feature that is not a sink kind (no slim release binary has it): the full
/// nats-sink, built with the default features, has it. Exit 2.
pub fn missing_build_feature(command: &str, feature: &str) -> ExitCode {
    report(&format!(
        "`nats-sink {command}` is not in this build: it needs the `{feature}` cargo feature (the full nats-sink, \
         built with the default features, has it)"
    ));
    ExitCode::from(CONFIG_ERROR)
}
