//! `sqlite-sink`: the operator commands of nats-sinks (`run`, `validate`, `replay`,
//! `reconcile`, …) for a binary that has one sink kind, `sqlite`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let registry = sinks_cli::Registry::new()
        .about("The sqlite-sink binary: runs a SQLite sink against a JetStream consumer")
        .version(env!("CARGO_PKG_VERSION"))
        .with(Box::new(sqlite_sink::SqliteFactory));
    sinks_cli::main(registry)
}
