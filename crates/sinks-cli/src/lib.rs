//! The operator commands of `nats-sink` as a library: a binary registers the sink kinds it
//! has and gets every command for them.
//!
//! ```no_run
//! # #[derive(Debug)] struct MyFactory;
//! # impl sinks_contract::SinkFactory for MyFactory {
//! #     type Config = serde_json::Value;
//! #     fn kind(&self) -> &'static str { "mine" }
//! #     fn build(&self, _: serde_json::Value) -> Result<sinks_contract::BuiltSink, sinks_contract::ConfigError> { unimplemented!() }
//! # }
//! fn main() -> std::process::ExitCode {
//!     sinks_cli::main(sinks_cli::Registry::new().with(Box::new(MyFactory)))
//! }
//! ```
//!
//! [`main`] parses the command line and runs `run`, `validate`, `show-effective-config`,
//! `export-catalogue-manifest`,
//! `test-sink`, `ddl`, `decrypt`, `stream-plan`, `inspect-ordered`, `sinks`, `completions`,
//! `man`, `reconcile`, `stream-identity`, `replay` and `redrive` for the kinds of the [`Registry`]
//! (each a [`sinks_contract::SinkFactory`]; the runtime's `blackhole` and the `fanout` of
//! named sinks are always there), plus the subcommands the binary adds
//! ([`Registry::commands`]). `run` serves `/metrics`, `/healthz` and `/readyz` while it runs
//! (`metrics.listen`) and logs to standard error (`logging`).
//!
//! Exit codes ([`exit`]): 0 success (including a graceful stop on SIGTERM/SIGINT), 1 runtime
//! error, 2 configuration error (the message names the field); `reconcile` adds 3 and 4 (see
//! `docs/ledger.md`), `redrive` 5 (`docs/redrive.md`). Every command's `--help` ends with the
//! codes it can return. Every message names the program by the name it was started as (or
//! [`Registry::name`]).
//!
//! This crate names no sink kind (`xtask/src/tidy.rs` checks it), and its public API holds
//! no async-nats type.

#[cfg(feature = "catalogue")]
mod catalogue;
mod cli;
mod decrypt;
mod dispatch;
pub mod exit;
mod http;
mod inspect;
mod logging;
mod output;
mod process;
mod reconcile_cmd;
mod redrive;
mod registry;
mod replay;
mod run;
mod stream_plan;
mod test_sink;
mod validate;

use std::process::ExitCode;

pub use logging::init_logging;
pub use registry::{CommandFuture, Known, Registry, StoredFormat};

/// Runs the command line of the process against `registry` and returns the exit code.
///
/// Call it from the binary's `main` before anything starts a thread: it applies the process
/// settings first (the C allocator's arenas, and the environment defaults of the registered
/// kinds' drivers, [`sinks_contract::SinkFactory::process_defaults`]), then starts the async
/// runtime.
pub fn main(registry: Registry) -> ExitCode {
    // Every message names this program (`sqlite-sink replay …`), the runtime's included.
    sinks_runtime::program::set_name(&registry.program());
    let matches = cli::command(&registry).after_help(cli::after_help(&registry)).get_matches();
    process::apply_before_threads(&registry);
    // Blocking threads do file I/O and fsyncs; 16 keep enough fsyncs in flight for the
    // filesystem to commit them together, while each extra thread costs resident memory.
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().max_blocking_threads(16).build() {
        Ok(rt) => rt,
        Err(e) => {
            exit::report(&format!("cannot start the async runtime: {e}"));
            return ExitCode::from(1);
        }
    };
    runtime.block_on(dispatch::dispatch(&matches, &registry))
}
