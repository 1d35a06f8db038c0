//! `nats-sink`: run one sink against a JetStream pull consumer, or check its configuration.
//!
//! Exit codes: 0 success (including a graceful stop on SIGTERM/SIGINT), 1 runtime error,
//! 2 configuration error (the message names the field). `reconcile` adds its own (see
//! `reconcile_cmd`).

mod decrypt;
mod http;
mod inspect;
#[cfg(feature = "oracle")]
mod lineage;
mod memory;
mod output;
mod reconcile_cmd;
mod redrive;
mod registry;
mod replay;
#[cfg(feature = "spool")]
mod replay_spool;
mod stream_plan;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{CommandFactory, Parser, Subcommand};
use sinks_contract::ConfigError;
use sinks_runtime::RunError;
use sinks_runtime::config::{Config, LogFormat, redact};
use sinks_runtime::metrics::Metrics;
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
    /// Check the config (every field, and that the environment variables it names are set);
    /// exit 2 naming the field on error. With `--connect`, also check it against the NATS
    /// server without consuming or changing anything.
    Validate {
        /// Config file.
        config: PathBuf,
        /// Also connect and check the stream, its subjects, the DLQ stream, the consumer and the
        /// exhaustion capture stream (one attempt; exit 1 when the server cannot be reached).
        #[arg(long)]
        connect: bool,
    },
    /// Print the config with defaults filled in and secrets redacted, in the input's format
    /// (or `--format`), sections in the order of the docs.
    ShowEffectiveConfig {
        /// Config file.
        config: PathBuf,
        /// `json`, `toml` or `yaml`; default: the config file's own format.
        #[arg(long, value_enum)]
        format: Option<output::ConfigFormat>,
    },
    /// Open the destination, run its health check and close it (NATS is not contacted).
    /// Changes nothing unless `--create` is given: what `run` would create (a missing
    /// directory, missing tables) is named instead.
    TestSink {
        /// Config file.
        config: PathBuf,
        /// Also create what `run` would create (the directory, the tables).
        #[arg(long)]
        create: bool,
        /// Test this named sink (from `sinks`) instead of the active sink.
        #[arg(long, conflicts_with = "all_named_sinks")]
        sink_name: Option<String>,
        /// Test every named sink, one after another.
        #[arg(long)]
        all_named_sinks: bool,
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
    /// Print an offline plan for the stream and durable consumer the config reads: settings,
    /// the permissions the worker needs, a `nats stream add` example. Connects to nothing.
    StreamPlan {
        /// Config file.
        config: PathBuf,
        /// Retention policy: limits, interest or workqueue.
        #[arg(long, default_value = "limits")]
        retention: String,
        /// Discard policy: old or new.
        #[arg(long, default_value = "old")]
        discard: String,
        /// Storage: file or memory.
        #[arg(long, default_value = "file")]
        storage: String,
        /// Replicas, 1 to 5.
        #[arg(long, default_value_t = 1)]
        replicas: u8,
        /// Duplicate-detection window, seconds (1 to 604,800).
        #[arg(long, default_value_t = stream_plan::DEFAULT_DUPLICATE_WINDOW_SECONDS)]
        duplicate_window_seconds: u64,
        /// `text` or `json`.
        #[arg(long, default_value = "text")]
        format: String,
    },
    /// Show messages of the configured stream and subjects through an ephemeral ordered
    /// consumer: builds no sink, acknowledges nothing, payloads redacted unless asked for.
    InspectOrdered {
        /// Config file.
        config: PathBuf,
        #[command(flatten)]
        options: inspect::Options,
    },
    /// The sink kinds this binary has, and for every other one which cargo feature (or release
    /// binary) brings it.
    Sinks {
        /// Print only the names of the kinds built in, one per line.
        #[arg(long)]
        names: bool,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff); `cargo xtask man` writes it to target/man.
    #[command(hide = true)]
    Man,
    /// Compare a range of the source stream with the destination, the ledger and the DLQ,
    /// message by message (reads only; exit 0 only when nothing is missing or conflicting).
    Reconcile {
        /// Config file.
        config: PathBuf,
        /// First stream sequence.
        #[arg(long, conflicts_with = "since")]
        from_seq: Option<u64>,
        /// Last stream sequence (inclusive).
        #[arg(long, conflicts_with = "until")]
        to_seq: Option<u64>,
        /// First message stored at or after this RFC 3339 time.
        #[arg(long, value_parser = reconcile_cmd::parse_time)]
        since: Option<time::OffsetDateTime>,
        /// Last message stored at or before this RFC 3339 time.
        #[arg(long, value_parser = reconcile_cmd::parse_time)]
        until: Option<time::OffsetDateTime>,
        /// Report format.
        #[arg(long, value_enum, default_value = "text")]
        format: reconcile_cmd::Format,
        /// Print (or write to FILE) the `nats-sink replay` commands for the missing ranges.
        #[arg(long, value_name = "FILE", num_args = 0..=1)]
        repair: Option<Option<PathBuf>>,
        /// Messages read back from the destination at once.
        #[arg(long, default_value_t = 1000)]
        chunk: usize,
    },
    /// Show the identity the consumer pinned for its stream (creation time, epoch, sequences,
    /// earlier identities) against the live stream; with `--accept`, decide a change that
    /// paused the workers: `new-epoch` (the new stream's events get keys of their own) or
    /// `replay` (the same data was restored: keys as before, stored events come back as
    /// duplicates).
    StreamIdentity {
        /// Config file.
        config: PathBuf,
        /// Decide the pending change.
        #[arg(long, value_enum)]
        accept: Option<Accept>,
    },
    /// Re-deliver a range of the stream to the configured sink through a temporary consumer
    /// (the production consumer is untouched; what is already there comes back as duplicates).
    Replay {
        /// Config file.
        config: PathBuf,
        /// First stream sequence (this or `--since`).
        #[arg(long, conflicts_with = "since")]
        from_seq: Option<u64>,
        /// Last stream sequence (inclusive); without it, up to the end of the stream.
        #[arg(long)]
        to_seq: Option<u64>,
        /// First message stored at or after this RFC 3339 time.
        #[arg(long, value_parser = reconcile_cmd::parse_time)]
        since: Option<time::OffsetDateTime>,
    },
    /// Bring back exactly the dead-lettered messages of this config's stream and consumer,
    /// exactly once, through the same pipeline; each dead-letter record is marked done once
    /// its message is stored (or dead-lettered again). The same command again resumes.
    Redrive {
        /// Config file.
        config: PathBuf,
        #[command(flatten)]
        options: redrive::Options,
    },
    /// Replay a spool's records into the sink of another config, deleting each record
    /// only after the target committed it. [needs the `spool` feature]
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
    /// Read-only lookup of rows the Oracle sink wrote, by an allow-listed identifier (value
    /// bound, limit bounded, payload omitted unless asked for). [needs the `oracle` feature]
    QueryLineage {
        /// Config file (`sink.type = "oracle"`).
        config: PathBuf,
        /// Field: a mission metadata identifier (mission_id, correlation_id, track_id, …),
        /// message_id or subject.
        #[arg(long)]
        field: String,
        /// Value to look up (a bind variable, at most 512 characters).
        #[arg(long)]
        value: String,
        /// Table: `sink.table` (default) or one of `sink.table_routes[].table`.
        #[arg(long)]
        table: Option<String>,
        /// Most records, 1 to 1000.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// `text` or `json`.
        #[arg(long, default_value = "text")]
        format: String,
        /// Include the payload column.
        #[arg(long)]
        include_payload: bool,
        /// Print the query without connecting.
        #[arg(long)]
        dry_run: bool,
    },
}

/// A decision about a changed stream (`nats-sink stream-identity --accept`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Accept {
    /// A new epoch: keys and names of the new stream's events carry its epoch.
    NewEpoch,
    /// A replay of the same data: keys as before.
    Replay,
}

/// What `--help` adds: the sinks built into this binary and the environment override
/// convention.
fn after_help() -> String {
    format!(
        "Sinks built into this binary: {}.\n\n\
         Every config field can be overridden from the environment: NATS_SINKS__<SECTION>__<FIELD>=value \
         (double underscores separate the path, e.g. NATS_SINKS__DELIVERY__BATCH_SIZE=100), plus the \
         reference's fixed names such as NATS_SINKS_NATS_URL. Secrets are only ever read from the \
         environment variables named by `*_env` fields.\n\n\
         Exit codes: 0 success, 1 runtime error, 2 configuration error (naming the field).",
        registry::available().join(", ")
    )
}

fn main() -> ExitCode {
    let matches = Cli::command().after_help(after_help()).get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    memory::apply_before_threads();
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

/// A command this build lacks: which feature (and release binary) brings it. Exit 2.
#[allow(dead_code, reason = "used only by builds without one of the features")]
fn missing_feature(command: &str, feature: &str) -> ExitCode {
    report(&format!(
        "`nats-sink {command}` is not in this build: it needs the `{feature}` cargo feature (the full nats-sink, or the \
         nats-sink-{feature} release binary, has it)"
    ));
    ExitCode::from(2)
}

fn config_failure(e: &ConfigError) -> ExitCode {
    for issue in &e.issues {
        report(&format!("configuration: {issue}"));
    }
    ExitCode::from(2)
}

/// Loads the core config and the sink config; both are fully validated, and every problem of
/// both is reported at once, each with where its value came from (the file's line and column,
/// or the environment variable).
fn load(path: &Path) -> Result<(Config, registry::Built), ConfigError> {
    match registry::load_config(path) {
        Ok(config) => {
            let built =
                registry::build_active(&config).map_err(|e| sinks_runtime::config::source::annotate(e, path))?;
            Ok((config, built))
        }
        Err(mut core) => {
            // The sink's own section is checked on its own, so its problems come with the
            // rest instead of after the next attempt.
            let section = sinks_runtime::config::raw_tree(path)
                .ok()
                .and_then(|tree| tree.get("sink").cloned())
                .and_then(|sink| serde_json::from_value::<sinks_runtime::config::SinkSection>(sink).ok());
            if let Some(section) = section.filter(|s| s.kind().is_some_and(|k| k != "fanout"))
                && let Err(e) = registry::build(&section)
            {
                for issue in sinks_runtime::config::source::annotate(e, path).issues {
                    if !core.issues.iter().any(|known| known.path == issue.path) {
                        core.issues.push(issue);
                    }
                }
            }
            Err(core)
        }
    }
}

#[allow(clippy::print_stdout)]
async fn dispatch(command: Command) -> ExitCode {
    match command {
        Command::Validate { config, connect } => match load(&config).and_then(|loaded| {
            // The variables the config names must be set now (run would fail on them), and
            // the policy and encryption keys must read.
            let unset = loaded.0.unset_secrets();
            if !unset.is_empty() {
                return Err(ConfigError { issues: unset });
            }
            sinks_policy::Pipeline::from_config(loaded.0.policy_sections())?;
            Ok(loaded)
        }) {
            Ok((c, _)) => {
                if connect {
                    match sinks_runtime::runner::check_against_server(&c).await {
                        Ok(notes) => {
                            for note in notes {
                                println!("{note}");
                            }
                        }
                        Err(RunError::Config(e)) => return config_failure(&e),
                        Err(e) => {
                            report(&e.to_string());
                            return ExitCode::from(1);
                        }
                    }
                }
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
                for line in registry::describe_batch(&c.sink, &c.nats.stream, &c.nats.subject) {
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
            Err(e) => config_failure(&e),
        },
        Command::ShowEffectiveConfig { config: path, format } => match load(&path) {
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
                let format = format.unwrap_or_else(|| output::ConfigFormat::of(&path));
                match output::render(&value, &output::section_order(&c), format) {
                    Ok(text) => output::emit(&text),
                    Err(e) => {
                        report(&e);
                        ExitCode::from(1)
                    }
                }
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
        Command::StreamPlan { config, retention, discard, storage, replicas, duplicate_window_seconds, format } => {
            let planned = load(&config).and_then(|(c, _)| {
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
                stream_plan::plan(&c, settings)
            });
            match planned {
                Ok(plan) if format == "json" => {
                    output::emit(&format!("{}\n", serde_json::to_string_pretty(&plan).unwrap_or_default()))
                }
                Ok(plan) => output::emit(&stream_plan::render_text(&plan)),
                Err(e) => config_failure(&e),
            }
        }
        Command::StreamIdentity { config, accept } => match registry::load_config(&config) {
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
                    Err(RunError::Config(e)) => config_failure(&e),
                    Err(e) => {
                        report(&e.to_string());
                        ExitCode::from(1)
                    }
                }
            }
            Err(e) => config_failure(&e),
        },
        Command::InspectOrdered { config, options } => match registry::load_config(&config) {
            Ok(c) => match inspect::run(&c, &options).await {
                Ok(_) => ExitCode::SUCCESS,
                Err((true, message)) => {
                    report(&format!("configuration: {message}"));
                    ExitCode::from(2)
                }
                Err((false, message)) => {
                    report(&message);
                    ExitCode::from(1)
                }
            },
            Err(e) => config_failure(&e),
        },
        Command::Completions { shell } => {
            // Rendered whole first: clap_complete panics on a write error (a closed pipe).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "nats-sink", &mut script);
            output::emit(&String::from_utf8_lossy(&script))
        }
        Command::Man => {
            let mut page = Vec::new();
            match clap_mangen::Man::new(Cli::command()).render(&mut page) {
                Ok(()) => output::emit(&String::from_utf8_lossy(&page)),
                Err(e) => {
                    report(&format!("cannot render the man page: {e}"));
                    ExitCode::from(1)
                }
            }
        }
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
        #[cfg(not(feature = "spool"))]
        Command::ReplaySpool { .. } => missing_feature("replay-spool", "spool"),
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
        Command::Reconcile { config, from_seq, to_seq, since, until, format, repair, chunk } => {
            let range = sinks_runtime::reconcile::Range { from_seq, to_seq, since, until };
            reconcile_cmd::run(reconcile_cmd::Request { config, range, format, repair, chunk }).await
        }
        Command::Redrive { config, options } => redrive::run(&config, options).await,
        Command::Replay { config, from_seq, to_seq, since } => {
            replay::run(&config, replay::ReplayRange { from_seq, to_seq, since }).await
        }
        #[cfg(not(feature = "oracle"))]
        Command::QueryLineage { .. } => missing_feature("query-lineage", "oracle"),
        Command::Sinks { names } => output::emit(&registry::describe_kinds(names)),
        #[cfg(feature = "oracle")]
        Command::QueryLineage { config, field, value, table, limit, format, include_payload, dry_run } => {
            let options = lineage::Options { field, value, table, limit, format, include_payload, dry_run };
            lineage::exit(lineage::run(&config, options).await, report, config_failure)
        }
        Command::TestSink { config, create, sink_name, all_named_sinks } => {
            let (c, _) = match load(&config) {
                Ok(v) => v,
                Err(e) => return config_failure(&e),
            };
            let _ = init_logging(&c, None);
            // Without --create nothing is created: the sinks are opened with their creation
            // switched off, and what `run` would create is said.
            let (c, would) = if create { (c, Vec::new()) } else { registry::without_creation(&c) };
            let built = match registry::build_active(&c) {
                Ok(b) => b,
                Err(e) => return config_failure(&e),
            };
            let targets: Vec<(String, std::sync::Arc<dyn sinks_contract::Sink>)> = match (sink_name, all_named_sinks) {
                (Some(name), _) => match c.sinks.get(&name).map(|s| registry::build_named(&name, s)) {
                    Some(Ok(b)) => vec![(name, b.sink)],
                    Some(Err(e)) => return config_failure(&e),
                    None => {
                        let known: Vec<&str> = c.sinks.keys().map(String::as_str).collect();
                        return config_failure(&ConfigError::single(
                            "sinks",
                            format!("no named sink `{name}` (named sinks: {})", known.join(", ")),
                        ));
                    }
                },
                (None, true) if c.sinks.is_empty() => {
                    return config_failure(&ConfigError::single("sinks", "the config has no named sinks"));
                }
                (None, true) => {
                    let mut out = Vec::new();
                    for (name, section) in &c.sinks {
                        match registry::build_named(name, section) {
                            Ok(b) => out.push((name.clone(), b.sink)),
                            Err(e) => return config_failure(&e),
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
                        report(&format!("sink `{label}` configuration: {}", e.display_chain()));
                        code = ExitCode::from(2);
                    }
                    Err(e) => {
                        report(&format!("sink `{label}` health check failed: {}", e.display_chain()));
                        if code == ExitCode::SUCCESS {
                            code = ExitCode::from(1);
                        }
                    }
                }
            }
            code
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
                        tracing::error!(field = "metrics.listen", "configuration error: cannot listen on {addr}: {e}");
                        return ExitCode::from(2);
                    }
                },
                None => None,
            };
            let every = Duration::from_secs(c.logging.summary_interval_seconds);
            let summary = (!every.is_zero()).then(|| tokio::spawn(log_summaries(metrics.clone(), every, stop_rx)));
            let result = sinks_runtime::runner::run_observed(
                c,
                built.sink,
                metrics,
                sinks_runtime::RunOptions::default(),
                shutdown_signal(),
            )
            .await;
            let _ = stop_tx.send(true);
            for task in [server, summary].into_iter().flatten() {
                let _ = task.await;
            }
            // Logging is on: each problem is one log line (not also a second copy on stderr).
            match result {
                Ok(_) => ExitCode::SUCCESS,
                Err(RunError::Config(e)) => {
                    for issue in &e.issues {
                        tracing::error!(field = %issue.path, "configuration error: {issue}");
                    }
                    ExitCode::from(2)
                }
                Err(e) => {
                    tracing::error!(error = %e, "stopped with an error");
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
    let format = tracing_subscriber::fmt::format();
    let result = match logging.format {
        LogFormat::Text => builder.event_format(WithTrace(format.with_ansi(ansi))).try_init(),
        LogFormat::Json => builder.json().event_format(WithTrace(format.json().flatten_event(true))).try_init(),
    };
    result.map_err(|e| e.to_string())
}

/// An event format that adds the trace and span ids of the message (or batch write) being
/// handled, when traces are on (`sinks_runtime::otel::current`): first in a JSON line
/// (`{"trace_id":"…","span_id":"…",…}`), last in a text line. Other lines are unchanged.
#[derive(Debug)]
struct WithTrace<F>(F);

impl<S, N, F> tracing_subscriber::fmt::FormatEvent<S, N> for WithTrace<F>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
    F: tracing_subscriber::fmt::FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let Some(ids) = sinks_runtime::otel::current() else { return self.0.format_event(ctx, writer, event) };
        let mut line = String::with_capacity(256);
        self.0.format_event(ctx, tracing_subscriber::fmt::format::Writer::new(&mut line), event)?;
        let (trace_id, span_id) = (ids.trace_hex(), ids.span_hex());
        match line.strip_prefix('{') {
            Some(rest) => write!(writer, "{{\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\",{rest}"),
            None => {
                let body = line.strip_suffix('\n').unwrap_or(&line);
                writeln!(writer, "{body} trace_id={trace_id} span_id={span_id}")
            }
        }
    }
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
        let (fetched, nacked) = (stats.fetched.load(Relaxed), stats.nacked.load(Relaxed));
        let dead_lettered = stats.dead_lettered.load(Relaxed);
        let ready = metrics.status().readiness().ready;
        match metrics.status().lag() {
            Some((num_pending, num_ack_pending)) => tracing::info!(
                messages_per_second,
                fetched,
                acked,
                nacked,
                dead_lettered,
                num_pending,
                num_ack_pending,
                ready,
                "summary"
            ),
            None => tracing::info!(messages_per_second, fetched, acked, nacked, dead_lettered, ready, "summary"),
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
