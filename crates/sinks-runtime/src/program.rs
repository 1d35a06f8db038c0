//! The name of the running program, for the commands the runtime's messages tell an operator
//! to run (`nats-sink stream-plan`, or `sqlite-sink stream-plan` in a binary of its own built
//! on `sinks-cli`). Set once, before anything runs, by `sinks_cli::main`.

use std::sync::OnceLock;

static NAME: OnceLock<String> = OnceLock::new();

/// The program's name: what [`set_name`] set, else `nats-sink`.
pub fn name() -> &'static str {
    NAME.get().map_or("nats-sink", String::as_str)
}

/// Sets the program's name; the first call wins (later ones change nothing).
pub fn set_name(name: &str) {
    let _ = NAME.set(name.to_owned());
}
