//! `nats-sink`: run one sink against a JetStream pull consumer, or check its configuration.
//!
//! Exit codes: 0 success (including a graceful stop on SIGTERM/SIGINT), 1 runtime error,
//! 2 configuration error (the message names the field).

mod decrypt;
mod http;
mod registry;
#[cfg(feature = "spool")]
mod replay_spool;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use sinks_core::config::{Config, LogFormat, redact};
use sinks_core::metrics::Metrics;
use sinks_core::{ConfigError, RunError};
use tracing_subscriber::EnvFilter;

/// Moves events from NATS JetStream into durable destinations, acking only after commit.
#[derive(Debug, Parser)]
#[command(name = "nats-sink", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Consume and write until SIGTERM/SIGINT, then finish in-flight batches and exit 0.
    Run {
        /// Config file (.json, .toml, .yaml).
        config: PathBuf,
        /// Overrides `logging.level`.
        #[arg(long)]
        log_level: Option<String>,
    },
    /// Check the config without connecting anywhere; exit 2 naming the field on error.
    Validate {
        /// Config file.
        config: PathBuf,
    },
    /// Print the config with defaults filled in and secrets redacted.
    ShowEffectiveConfig {
        /// Config file.
        config: PathBuf,
    },
    /// Open the destination, run its health check and close it (NATS is not contacted).
    TestSink {
        /// Config file.
        config: PathBuf,
    },
    /// Print the CREATE TABLE statements of the configured tables (relational sinks).
    Ddl {
        /// Config file.
        config: PathBuf,
    },
    /// Print the plaintext of a stored record, DLQ record, encryption envelope or spool file,
    /// with the keys the config names (read from the environment).
    Decrypt {
        /// Config file (its `encryption` section, and `sink.encryption` of a spool).
        config: PathBuf,
        /// The file to decrypt, or `-` for standard input.
        file: PathBuf,
        /// Subject of the record a bare version-2 envelope belongs to.
        #[arg(long)]
        subject: Option<String>,
        /// Stream of that record.
        #[arg(long)]
        stream: Option<String>,
        /// Stream sequence of that record.
        #[arg(long)]
        sequence: Option<u64>,
    },
    /// Replay a spool's records into the sink of another config, deleting each record
    /// only after the target committed it.
    #[cfg(feature = "spool")]
    ReplaySpool {
        /// Config of the spool (`sink.type = "spool"`).
        spool_config: PathBuf,
        /// Config whose `sink` receives the records.
        target_config: PathBuf,
        /// Replay at most this many records.
        #[arg(long)]
        max_records: Option<usize>,
        /// Read and decrypt every record, write and delete nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Blocking threads do file I/O and fsyncs; 16 keep enough fsyncs in flight for the
    // filesystem to commit them together, while each extra thread costs resident memory.
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().max_blocking_threads(16).build() {
        Ok(rt) => rt,
        Err(e) => {
            report(&format!("cannot start the async runtime: {e}"));
            return ExitCode::from(1);
        }
    };
    runtime.block_on(dispatch(cli.command))
}

#[allow(clippy::print_stderr)]
fn report(message: &str) {
    eprintln!("error: {message}");
}

fn config_failure(e: &ConfigError) -> ExitCode {
    for issue in &e.issues {
        report(&format!("configuration: {issue}"));
    }
    ExitCode::from(2)
}

/// Loads the core config and the sink config; both are fully validated.
fn load(path: &Path) -> Result<(Config, registry::Built), ConfigError> {
    let config = Config::load(path)?;
    let built = registry::build(&config.sink)?;
    Ok((config, built))
}

#[allow(clippy::print_stdout)]
async fn dispatch(command: Command) -> ExitCode {
    match command {
        Command::Validate { config } => match load(&config) {
            Ok((c, _)) => {
                println!(
                    "configuration is valid: sink={} stream={} consumer={} subject={} dead_letter={}",
                    c.sink.kind().unwrap_or_default(),
                    c.nats.stream,
                    c.nats.consumer,
                    c.nats.subject,
                    if c.dead_letter.enabled {
                        c.dead_letter.subject.as_deref().unwrap_or_default()
                    } else {
                        "disabled"
                    },
                );
                let policies = sinks_core::policy::describe(&c);
                if !policies.is_empty() {
                    println!("message policies, in the order they run:");
                    for line in policies {
                        println!("  {line}");
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => config_failure(&e),
        },
        Command::ShowEffectiveConfig { config } => match load(&config) {
            Ok((c, built)) => {
                let mut value = serde_json::to_value(&c).unwrap_or_default();
                if let Some(sink) = value.get_mut("sink") {
                    let mut effective = built.effective;
                    if let Some(map) = effective.as_object_mut() {
                        map.insert("type".into(), c.sink.kind().unwrap_or_default().into());
                    }
                    *sink = effective;
                }
                redact::redact(&mut value);
                println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
                ExitCode::SUCCESS
            }
            Err(e) => config_failure(&e),
        },
        Command::Ddl { config } => match load(&config) {
            Ok((c, built)) => match built.ddl {
                Some(statements) => {
                    for statement in statements {
                        println!("{statement};\n");
                    }
                    ExitCode::SUCCESS
                }
                None => config_failure(&ConfigError::single(
                    "sink.type",
                    format!("sink `{}` has no tables, so there is no DDL", c.sink.kind().unwrap_or_default()),
                )),
            },
            Err(e) => config_failure(&e),
        },
        Command::Decrypt { config, file, subject, stream, sequence } => {
            let context = decrypt::Context { subject, stream, sequence };
            match decrypt::run(&config, &file, &context) {
                Ok(()) => ExitCode::SUCCESS,
                Err(decrypt::Failure::Config(e)) => config_failure(&e),
                Err(decrypt::Failure::Input(message)) => {
                    report(&message);
                    ExitCode::from(1)
                }
            }
        }
        #[cfg(feature = "spool")]
        Command::ReplaySpool { spool_config, target_config, max_records, dry_run } => {
            match replay_spool::run(&spool_config, &target_config, max_records, dry_run).await {
                replay_spool::Ended::Complete(summary) => {
                    println!("{summary}");
                    ExitCode::SUCCESS
                }
                replay_spool::Ended::Incomplete(summary) => {
                    println!("{summary}");
                    ExitCode::from(1)
                }
                replay_spool::Ended::Config(e) => config_failure(&e),
                replay_spool::Ended::Failed(message) => {
                    report(&message);
                    ExitCode::from(1)
                }
            }
        }
        Command::TestSink { config } => {
            let (c, built) = match load(&config) {
                Ok(v) => v,
                Err(e) => return config_failure(&e),
            };
            let _ = init_logging(&c, None);
            let sink = built.sink;
            let result = async {
                sink.open().await?;
                sink.health_check().await?;
                sink.close().await
            }
            .await;
            match result {
                Ok(()) => {
                    println!("sink `{}` is reachable and healthy", sink.name());
                    ExitCode::SUCCESS
                }
                Err(e) if e.class() == sinks_core::ErrorClass::Config => {
                    report(&format!("sink configuration: {}", e.display_chain()));
                    ExitCode::from(2)
                }
                Err(e) => {
                    report(&format!("sink health check failed: {}", e.display_chain()));
                    ExitCode::from(1)
                }
            }
        }
        Command::Run { config, log_level } => {
            let (c, built) = match load(&config) {
                Ok(v) => v,
                Err(e) => return config_failure(&e),
            };
            if let Err(message) = init_logging(&c, log_level.as_deref()) {
                return config_failure(&ConfigError::single("logging.level", message));
            }
            tracing::info!(version = env!("CARGO_PKG_VERSION"), sink = built.sink.name(), "starting nats-sink");
            let metrics = Metrics::new(&c.metrics);
            let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
            let server = match c.metrics.listen_addr() {
                Some(addr) => match http::bind(addr).await {
                    Ok(listener) => {
                        let bound = listener.local_addr().map_or_else(|_| addr.to_string(), |a| a.to_string());
                        tracing::info!(address = %bound, "serving /metrics, /healthz and /readyz");
                        let mut stop = stop_rx.clone();
                        Some(http::serve(listener, metrics.clone(), async move {
                            let _ = stop.wait_for(|s| *s).await;
                        }))
                    }
                    Err(e) => {
                        let e = ConfigError::single("metrics.listen", format!("cannot listen on {addr}: {e}"));
                        tracing::error!(error = %e, "configuration error");
                        return config_failure(&e);
                    }
                },
                None => None,
            };
            let every = Duration::from_secs(c.logging.summary_interval_seconds);
            let summary = (!every.is_zero()).then(|| tokio::spawn(log_summaries(metrics.clone(), every, stop_rx)));
            let result = sinks_core::runner::run_observed(c, built.sink, metrics, shutdown_signal()).await;
            let _ = stop_tx.send(true);
            for task in [server, summary].into_iter().flatten() {
                let _ = task.await;
            }
            match result {
                Ok(_) => ExitCode::SUCCESS,
                Err(RunError::Config(e)) => {
                    tracing::error!(error = %e, "configuration error");
                    config_failure(&e)
                }
                Err(e) => {
                    tracing::error!(error = %e, "stopped with an error");
                    report(&e.to_string());
                    ExitCode::from(1)
                }
            }
        }
    }
}

/// Installs the tracing subscriber (stderr; text or JSON). `RUST_LOG` refines the level.
pub(crate) fn init_logging(config: &Config, level_override: Option<&str>) -> Result<(), String> {
    let mut logging = config.logging.clone();
    if let Some(level) = level_override {
        logging.level = level.to_owned();
    }
    let level = logging.filter_directive().ok_or_else(|| format!("unknown log level `{}`", logging.level))?;
    // The NATS client's own info lines repeat ours; keep its warnings and errors.
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(format!("{level},async_nats=warn")));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let result = match logging.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    result.map_err(|e| e.to_string())
}

/// Logs one info line every `every` (messages acked per second over the interval, totals,
/// consumer lag, dead letters), so a tailing operator sees progress without metrics.
async fn log_summaries(metrics: Metrics, every: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
    use std::sync::atomic::Ordering::Relaxed;
    let stats = std::sync::Arc::clone(metrics.stats());
    let mut last = (Instant::now(), stats.acked.load(Relaxed));
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let now = Instant::now();
        let acked = stats.acked.load(Relaxed);
        let rate = (acked - last.1) as f64 / now.duration_since(last.0).as_secs_f64().max(1e-3);
        last = (now, acked);
        let messages_per_second = (rate * 10.0).round() / 10.0;
        let (fetched, naked) = (stats.fetched.load(Relaxed), stats.naked.load(Relaxed));
        let dead_lettered = stats.dead_lettered.load(Relaxed);
        let ready = metrics.status().readiness().ready;
        match metrics.status().lag() {
            Some((num_pending, num_ack_pending)) => tracing::info!(
                messages_per_second,
                fetched,
                acked,
                naked,
                dead_lettered,
                num_pending,
                num_ack_pending,
                ready,
                "summary"
            ),
            None => tracing::info!(messages_per_second, fetched, acked, naked, dead_lettered, ready, "summary"),
        }
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers; stop with SIGKILL only");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("received SIGTERM"),
        _ = int.recv() => tracing::info!("received SIGINT"),
    }
}
