//! Runs the command the command line names: a binary's own subcommand
//! ([`Registry::commands`]) or one of the built-in ones. The short commands are here; `run`,
//! `test-sink`, `replay`, `redrive`, `reconcile`, `decrypt`, `inspect-ordered`,
//! `stream-plan` and `export-catalogue-manifest` have modules of their own.

use std::process::ExitCode;

use clap::FromArgMatches;
use sinks_contract::ConfigError;
use sinks_runtime::RunError;
use sinks_runtime::config::redact;

#[cfg(feature = "catalogue")]
use crate::catalogue;
use crate::cli::{Accept, Cli, Command};
use crate::{
    Registry, decrypt, exit, inspect, output, reconcile_cmd, redrive, replay, run, stream_plan, test_sink, validate,
};

/// Runs the command `matches` name; returns the exit code.
pub(crate) async fn dispatch(matches: &clap::ArgMatches, registry: &Registry) -> ExitCode {
    if let Some(own) = registry.run_extension(matches) {
        return own.await;
    }
    match Cli::from_arg_matches(matches) {
        Ok(cli) => builtin(cli.command, registry).await,
        Err(e) => e.exit(),
    }
}

#[allow(clippy::print_stdout)]
async fn builtin(command: Command, registry: &Registry) -> ExitCode {
    match command {
        Command::Validate { config, connect, no_environment } => {
            validate::run(registry, validate::Request { config: &config, connect, no_environment }).await
        }
        Command::ShowEffectiveConfig { config: path, format } => match registry.load(&path) {
            Ok((c, built)) => {
                let mut value = serde_json::to_value(&c).unwrap_or_default();
                let kind = c.sink.kind().unwrap_or_default();
                let mut effective = built.effective;
                if kind.eq_ignore_ascii_case("fanout") {
                    // A fan-out's named sinks, filled in, where the config has them: top-level
                    // `sinks`, each with its type (the output reads back as the same config).
                    let named = effective.as_object_mut().and_then(|m| m.remove("sinks"));
                    if let (Some(serde_json::Value::Object(mut named)), Some(slot)) = (named, value.get_mut("sinks")) {
                        for (name, section) in &mut named {
                            if let (Some(map), Some(kind)) =
                                (section.as_object_mut(), c.sinks.get(name).and_then(|s| s.kind()))
                            {
                                map.insert("type".into(), kind.into());
                            }
                        }
                        *slot = serde_json::Value::Object(named);
                    }
                }
                if let Some(sink) = value.get_mut("sink") {
                    if let Some(map) = effective.as_object_mut() {
                        map.insert("type".into(), kind.into());
                    }
                    *sink = effective;
                }
                redact::redact(&mut value);
                let format = format.unwrap_or_else(|| output::ConfigFormat::of(&path));
                match output::render(&value, &output::section_order(&c), format) {
                    Ok(text) => output::emit(&text),
                    Err(e) => {
                        exit::report(&e);
                        ExitCode::from(1)
                    }
                }
            }
            Err(e) => exit::config_failure(&e),
        },
        #[cfg(feature = "catalogue")]
        Command::ExportCatalogueManifest { config, output, dataset_name, overwrite } => {
            catalogue::run(registry, &catalogue::Request { config, output, dataset_name, overwrite })
        }
        #[cfg(not(feature = "catalogue"))]
        Command::ExportCatalogueManifest { .. } => {
            exit::missing_build_feature("export-catalogue-manifest", "catalogue")
        }
        Command::Ddl { config } => match registry.load(&config) {
            Ok((c, built)) => match built.ddl {
                Some(statements) => {
                    for statement in statements {
                        println!("{statement};\n");
                    }
                    ExitCode::SUCCESS
                }
                None => exit::config_failure(&ConfigError::single(
                    "sink.type",
                    format!("sink `{}` has no tables, so there is no DDL", c.sink.kind().unwrap_or_default()),
                )),
            },
            Err(e) => exit::config_failure(&e),
        },
        Command::StreamPlan {
            config,
            retention,
            discard,
            storage,
            replicas,
            duplicate_window_seconds,
            format,
            connect,
        } => {
            let loaded = registry.load(&config).and_then(|(c, _)| {
                let settings = stream_plan::StreamSettings::new(
                    &retention,
                    &discard,
                    &storage,
                    replicas,
                    duplicate_window_seconds,
                )?;
                if format != "text" && format != "json" {
                    return Err(ConfigError::single("--format", "must be text or json"));
                }
                Ok((c, settings))
            });
            let (c, settings) = match loaded {
                Ok(loaded) => loaded,
                Err(e) => return exit::config_failure(&e),
            };
            let existing = if connect {
                match stream_plan::read_consumer(&c).await {
                    Ok(existing) => existing,
                    Err(message) => {
                        exit::report(&message);
                        return ExitCode::from(exit::RUNTIME_ERROR);
                    }
                }
            } else {
                stream_plan::Existing::Unknown
            };
            let planned = stream_plan::plan(&c, settings, existing);
            match planned {
                Ok(plan) if format == "json" => {
                    output::emit(&format!("{}\n", serde_json::to_string_pretty(&plan).unwrap_or_default()))
                }
                Ok(plan) => output::emit(&stream_plan::render_text(&plan)),
                Err(e) => exit::config_failure(&e),
            }
        }
        Command::StreamIdentity { config, accept } => match registry.load_config(&config) {
            Ok(c) => {
                let decision = accept.map(|a| match a {
                    Accept::NewEpoch => sinks_runtime::identity::Decision::NewEpoch,
                    Accept::Replay => sinks_runtime::identity::Decision::Replay,
                });
                match sinks_runtime::runner::stream_identity(&c, decision).await {
                    Ok(lines) => {
                        for line in lines {
                            println!("{line}");
                        }
                        ExitCode::SUCCESS
                    }
                    Err(RunError::Config(e)) => exit::config_failure(&e),
                    Err(e) => {
                        exit::report(&e.to_string());
                        ExitCode::from(1)
                    }
                }
            }
            Err(e) => exit::config_failure(&e),
        },
        Command::InspectOrdered { config, options } => match registry.load_config(&config) {
            Ok(c) => match inspect::run(&c, &options).await {
                Ok(_) => ExitCode::SUCCESS,
                Err((true, message)) => {
                    exit::report(&format!("configuration: {message}"));
                    ExitCode::from(2)
                }
                Err((false, message)) => {
                    exit::report(&message);
                    ExitCode::from(1)
                }
            },
            Err(e) => exit::config_failure(&e),
        },
        #[cfg(feature = "completions")]
        Command::Completions { shell } => {
            // Rendered whole first: clap_complete panics on a write error (a closed pipe).
            let mut script = Vec::new();
            clap_complete::generate(
                clap_complete::Shell::from(shell),
                &mut crate::cli::command(registry),
                sinks_runtime::program::name(),
                &mut script,
            );
            output::emit(&String::from_utf8_lossy(&script))
        }
        #[cfg(feature = "completions")]
        Command::Man => {
            let mut page = Vec::new();
            match clap_mangen::Man::new(crate::cli::command(registry)).render(&mut page) {
                Ok(()) => output::emit(&String::from_utf8_lossy(&page)),
                Err(e) => {
                    exit::report(&format!("cannot render the man page: {e}"));
                    ExitCode::from(1)
                }
            }
        }
        #[cfg(not(feature = "completions"))]
        Command::Completions { .. } => exit::missing_build_feature("completions", "completions"),
        #[cfg(not(feature = "completions"))]
        Command::Man => exit::missing_build_feature("man", "completions"),
        Command::Decrypt { config, file, subject, stream, sequence } => {
            let context = decrypt::Context { subject, stream, sequence };
            match decrypt::run(registry, &config, &file, &context) {
                Ok(()) => ExitCode::SUCCESS,
                Err(decrypt::Failure::Config(e)) => exit::config_failure(&e),
                Err(decrypt::Failure::Input(message)) => {
                    exit::report(&message);
                    ExitCode::from(1)
                }
            }
        }
        Command::Reconcile { config, from_seq, to_seq, since, until, format, repair, chunk } => {
            let range = sinks_runtime::reconcile::Range { from_seq, to_seq, since, until };
            reconcile_cmd::run(registry, reconcile_cmd::Request { config, range, format, repair, chunk }).await
        }
        Command::Replay { config, from_seq, to_seq, since } => {
            replay::run(registry, &config, replay::ReplayRange { from_seq, to_seq, since }).await
        }
        Command::Redrive { config, options } => redrive::run(registry, &config, options).await,
        Command::Sinks { names } => output::emit(&registry.describe_kinds(names)),
        Command::TestSink { config, create, sink_name, all_named_sinks } => {
            test_sink::run(registry, test_sink::Request { config: &config, create, sink_name, all_named_sinks }).await
        }
        Command::Run { config, log_level } => run::run(registry, &config, log_level.as_deref()).await,
    }
}
