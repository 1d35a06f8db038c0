//! `sinks-bench`: the workflows of `cargo xtask` that link the product, in a package of their
//! own so that `xtask` itself depends on no product crate (`cargo xtask setup` compiles none).
//! Not published; run through `cargo xtask`, which installs the tools a command needs and then
//! forwards it here with the same arguments:
//!
//! - `bench`: throughput ratios against the raw async-nats ceiling and the Python reference
//!   (docs/performance.md); the raw-ceiling programs are this package's other binaries
//!   (`src/bin/`).
//! - `compare`: the core contenders of a base revision's build and the work tree's, in
//!   alternating pairs (`cargo xtask bench --compare REV`).
//! - `certify`: the sink contract and crash certification of every sink
//!   (docs/certification.md).
//! - `soak`: the chaos soak (docs/reliability.md).
//! - `jepsen`: the fault harness (partitions, pauses, kills, step-downs in a cluster of
//!   network namespaces; docs/reliability.md).
//! - `config-reference`: checks (or, with `--bless`, writes) docs/config-reference.md
//!   against the config types; a step of `cargo xtask docs`.
//! - `skips`: the allow-list of skips and what used it, from a skip log; the end of
//!   `cargo xtask test`.
//!
//! Every error is reported as one line (`error: …`, causes joined with `: `), exit code 1.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod certify;
mod config_ref;
mod jepsen;
mod latency;
mod soak;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

// Named like the command that runs it, so that `--help` reads as `cargo xtask <cmd>`.
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "The workflows of `cargo xtask` that link the product"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Certify sinks: contract clauses and crash certification.
    Certify(certify::Args),
    /// Measure throughput against the raw ceiling (and, optionally, the Python reference).
    Bench(bench::Args),
    /// The core contenders of two `nats-sink` builds in alternating pairs (`cargo xtask bench
    /// --compare REV` builds them and runs this).
    Compare(bench::compare::Args),
    /// Latency under sustained load: p50/p99/p99.9 publish → acknowledged at fractions of each
    /// contender's maximum rate (`cargo xtask bench --latency`).
    Latency(latency::Args),
    /// The chaos soak: faults injected at random (seeded) while the sink runs; every message
    /// must end in the destination exactly once or in the DLQ.
    Soak(soak::Args),
    /// The fault harness: a three-node cluster in network namespaces under seeded
    /// partitions, pauses, kills and step-downs; NATS's losses apart from the sink's.
    Jepsen(jepsen::Args),
    /// Check docs/config-reference.md against the config types (`--bless` writes it).
    ConfigReference(config_ref::Args),
    /// Print the allow-list of skips and what used each entry, from the skip log `log`.
    Skips {
        /// The skip log (`NATS_SINKS_SKIP_LOG` of the run).
        log: PathBuf,
    },
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Cmd::Certify(args) => certify::run(args),
        Cmd::Bench(args) => bench::run(args),
        Cmd::Compare(args) => bench::compare::run(args),
        Cmd::Latency(args) => latency::run(args),
        Cmd::Soak(args) => soak::run(args),
        Cmd::Jepsen(args) => jepsen::run(args),
        Cmd::ConfigReference(args) => config_ref::run(&args),
        Cmd::Skips { log } => {
            for line in sinks_certify::skips::summary(&sinks_certify::skips::read_skip_log(&log)) {
                eprintln!("{line}");
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `cargo` with `args` from the workspace root, failing on a non-zero exit.
pub(crate) fn cargo(args: &[&str], envs: &[(&str, String)]) -> Result<()> {
    sinks_testkit::cargo(args, envs).map_err(anyhow::Error::msg)
}
