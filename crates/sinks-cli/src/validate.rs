//! `nats-sink validate`: every check of a config at once, offline (every field, the rules
//! between them, the sink's own section, the environment variables it names and the keys they
//! hold), what each enabled message policy will do and the route table; with `--connect`, the
//! config against the NATS server too, changing nothing. With `--no-environment` (a CI
//! pipeline that validates configs without the production secrets), an unset variable is a
//! note instead of an error and the keys' checks run on stand-in keys.

use std::path::Path;
use std::process::ExitCode;

use sinks_contract::{ConfigError, ConfigIssue};
use sinks_runtime::{Config, RunError};

use crate::{Registry, exit};

/// A key every key check accepts, standing in for an unset variable under
/// `--no-environment`: 32 bytes (an AES-256 key, an HMAC key long enough) that are also a
/// valid Ed25519 public key (the curve's base point).
const STAND_IN_KEY: &str = "WGZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmY=";

/// What `validate` was asked.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub(crate) config: &'a Path,
    pub(crate) connect: bool,
    pub(crate) no_environment: bool,
}

/// The problems of `c` that depend on the environment: with it, the unset variables and the
/// keys that do not read are errors; without it (`no_environment`), the unset variables are
/// notes and only a key that is set and malformed is an error.
fn environment(c: &Config, no_environment: bool) -> (Vec<ConfigIssue>, Vec<ConfigIssue>) {
    let (mut errors, notes) =
        if no_environment { (Vec::new(), c.unset_variables()) } else { (c.unset_secrets(), Vec::new()) };
    let lookup = |name: &str| std::env::var(name).ok().or_else(|| no_environment.then(|| STAND_IN_KEY.to_owned()));
    if let Err(e) = sinks_policy::Pipeline::from_config_with(c.policy_sections(), &lookup) {
        for issue in e.issues {
            if !notes.iter().chain(&errors).any(|known| known.path == issue.path) {
                errors.push(issue);
            }
        }
    }
    (errors, notes)
}

/// Runs the command; returns the exit code.
#[allow(clippy::print_stdout)]
pub(crate) async fn run(registry: &Registry, request: Request<'_>) -> ExitCode {
    let c = match registry.load(request.config) {
        Ok((c, _)) => c,
        Err(e) => return exit::config_failure(&e),
    };
    let (errors, notes) = environment(&c, request.no_environment);
    if !errors.is_empty() {
        return exit::config_failure(&ConfigError { issues: errors });
    }
    if request.connect {
        match sinks_runtime::runner::check_against_server(&c).await {
            Ok(lines) => {
                for line in lines {
                    println!("{line}");
                }
            }
            Err(RunError::Config(e)) => return exit::config_failure(&e),
            Err(e) => {
                exit::report(&e.to_string());
                return ExitCode::from(exit::RUNTIME_ERROR);
            }
        }
    }
    println!(
        "configuration is valid: sink={} stream={} consumer={} subject={} dead_letter={}",
        c.sink.kind().unwrap_or_default(),
        c.nats.stream,
        c.nats.consumer,
        c.nats.subject,
        if c.dead_letter.enabled { c.dead_letter.subject.as_deref().unwrap_or_default() } else { "disabled" },
    );
    for note in &notes {
        println!("note: {note} (not checked: --no-environment; run and `validate` without it need it set)");
    }
    for line in registry.describe(&c.sink, &c.nats.stream, &c.nats.subject) {
        println!("{line}");
    }
    let (routes, warnings) = c.routing.describe(c.sink.kind());
    for line in routes {
        println!("{line}");
    }
    for warning in warnings.into_iter().chain(sinks_runtime::runner::config_warnings(&c)) {
        println!("warning: {warning}");
    }
    let policies = sinks_policy::describe(c.policy_sections());
    if !policies.is_empty() {
        println!("message policies, in the order they run:");
        for line in policies {
            println!("  {line}");
        }
    }
    ExitCode::SUCCESS
}
