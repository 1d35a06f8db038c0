//! `nats-sink test-sink`: open the destination, run its health check and close it, for the
//! active sink, one named sink or all of them (NATS is not contacted). Nothing is created
//! unless `--create`: each kind's creation switch ([`sinks_contract::SinkFactory::creation`])
//! is turned off, and what `run` would create is said instead.

use std::path::Path;
use std::process::ExitCode;

use sinks_contract::ConfigError;

use crate::{Registry, exit, init_logging};

/// What to test: the active sink, one named sink, or every named sink.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub(crate) config: &'a Path,
    pub(crate) create: bool,
    pub(crate) sink_name: Option<String>,
    pub(crate) all_named_sinks: bool,
}

/// Runs the test; returns the exit code.
#[allow(clippy::print_stdout)]
pub(crate) async fn run(registry: &Registry, request: Request<'_>) -> ExitCode {
    let Request { config, create, sink_name, all_named_sinks } = request;
    let (c, _) = match registry.load(config) {
        Ok(v) => v,
        Err(e) => return exit::config_failure(&e),
    };
    let _ = init_logging(&c, None);
    // Without --create nothing is created: the sinks are opened with their creation
    // switched off, and what `run` would create is said.
    let (c, would) = if create { (c, Vec::new()) } else { registry.without_creation(&c) };
    let built = match registry.build_active(&c) {
        Ok(b) => b,
        Err(e) => return exit::config_failure(&e),
    };
    let targets: Vec<(String, std::sync::Arc<dyn sinks_contract::Sink>)> = match (sink_name, all_named_sinks) {
        (Some(name), _) => match c.sinks.get(&name).map(|s| registry.build_named(&name, s)) {
            Some(Ok(b)) => vec![(name, b.sink)],
            Some(Err(e)) => return exit::config_failure(&e),
            None => {
                let known: Vec<&str> = c.sinks.keys().map(String::as_str).collect();
                return exit::config_failure(&ConfigError::single(
                    "sinks",
                    format!("no named sink `{name}` (named sinks: {})", known.join(", ")),
                ));
            }
        },
        (None, true) if c.sinks.is_empty() => {
            return exit::config_failure(&ConfigError::single("sinks", "the config has no named sinks"));
        }
        (None, true) => {
            let mut out = Vec::new();
            for (name, section) in &c.sinks {
                match registry.build_named(name, section) {
                    Ok(b) => out.push((name.clone(), b.sink)),
                    Err(e) => return exit::config_failure(&e),
                }
            }
            out
        }
        (None, false) => vec![(built.sink.name().to_owned(), built.sink)],
    };
    for note in &would {
        println!("would create: {note}; `nats-sink test-sink --create` creates it now");
    }
    let mut code = ExitCode::SUCCESS;
    for (label, sink) in targets {
        let result = async {
            sink.open().await?;
            sink.health_check().await?;
            sink.close().await
        }
        .await;
        match result {
            Ok(()) => println!("sink `{label}` is reachable and healthy"),
            // What is missing is what run would create: not a failure of the config.
            Err(e)
                if !would.is_empty()
                    && e.class() == sinks_contract::ErrorClass::Config
                    && e.display_chain().contains("exist") =>
            {
                println!("sink `{label}`: {} (test-sink changes nothing without --create)", e.display_chain());
            }
            Err(e) if e.class() == sinks_contract::ErrorClass::Config => {
                exit::report(&format!("sink `{label}` configuration: {}", e.display_chain()));
                code = ExitCode::from(2);
            }
            Err(e) => {
                exit::report(&format!("sink `{label}` health check failed: {}", e.display_chain()));
                if code == ExitCode::SUCCESS {
                    code = ExitCode::from(1);
                }
            }
        }
    }
    code
}
