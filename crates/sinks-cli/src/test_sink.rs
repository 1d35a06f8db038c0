//! `nats-sink test-sink`: open the destination, run its health check and close it, for the
//! active sink, one named sink or all of them (NATS is not contacted). Nothing is created
//! unless `--create`: each kind's creation switch ([`sinks_contract::SinkFactory::creation`])
//! is turned off, and when the destination then lacks what `run` would create (its directory,
//! its table), that is said instead of the sink's error, which would name the switch as off.
//! What is there already is not mentioned: `run` creates nothing then either.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use sinks_contract::{ConfigError, Creation, ErrorClass, Sink};

use crate::{Registry, exit, init_logging};

/// What to test: the active sink, one named sink, or every named sink.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub(crate) config: &'a Path,
    pub(crate) create: bool,
    pub(crate) sink_name: Option<String>,
    pub(crate) all_named_sinks: bool,
}

/// One sink to test: its label, where its section is (`sink`, `sinks.<name>`; a fan-out is
/// all of them), and the sink.
type Target = (String, Option<String>, Arc<dyn Sink>);

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
    // switched off.
    let (c, would) = if create { (c, Vec::new()) } else { registry.without_creation(&c) };
    let built = match registry.build_active(&c) {
        Ok(b) => b,
        Err(e) => return exit::config_failure(&e),
    };
    let fanout = c.sink.kind().is_some_and(|k| k.eq_ignore_ascii_case("fanout"));
    let targets: Vec<Target> = match (sink_name, all_named_sinks) {
        (Some(name), _) => match c.sinks.get(&name).map(|s| registry.build_named(&name, s)) {
            Some(Ok(b)) => vec![(name.clone(), Some(format!("sinks.{name}")), b.sink)],
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
                    Ok(b) => out.push((name.clone(), Some(format!("sinks.{name}")), b.sink)),
                    Err(e) => return exit::config_failure(&e),
                }
            }
            out
        }
        (None, false) => {
            let at = (!fanout).then(|| "sink".to_owned());
            vec![(built.sink.name().to_owned(), at, built.sink)]
        }
    };
    let mut code = ExitCode::SUCCESS;
    for (label, at, sink) in targets {
        let result = async {
            sink.open().await?;
            sink.health_check().await?;
            sink.close().await
        }
        .await;
        // What `run` would create for this target (a fan-out: for any of its sinks).
        let creates: Vec<&(String, Creation)> =
            would.iter().filter(|(place, _)| at.as_ref().is_none_or(|a| a == place)).collect();
        match result {
            Ok(()) => println!("sink `{label}` is reachable and healthy"),
            // What is missing is what run would create: not a failure of the config.
            Err(e) if !creates.is_empty() && e.class() == ErrorClass::Config && e.display_chain().contains("exist") => {
                for (place, creation) in creates {
                    println!(
                        "sink `{label}`: `run` would create {} ({place}.{} is on); `{} test-sink --create` creates it now",
                        creation.what,
                        creation.field,
                        sinks_runtime::program::name()
                    );
                }
            }
            Err(e) if e.class() == ErrorClass::Config => {
                exit::report(&format!("sink `{label}` configuration: {}", e.display_chain()));
                code = ExitCode::from(exit::CONFIG_ERROR);
            }
            Err(e) => {
                exit::report(&format!("sink `{label}` health check failed: {}", e.display_chain()));
                if code == ExitCode::SUCCESS {
                    code = ExitCode::from(exit::RUNTIME_ERROR);
                }
            }
        }
    }
    code
}
