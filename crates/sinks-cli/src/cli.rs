//! The command line of the built-in commands (clap derive): every subcommand and flag of
//! `nats-sink` except those a binary adds ([`crate::Registry::commands`]), and what `--help`
//! adds after the list.

use std::path::PathBuf;

use crate::{inspect, output, reconcile_cmd, redrive, stream_plan};

/// Moves events from NATS JetStream into durable destinations, acking only after commit.
#[derive(Debug, clap::Parser)]
#[command(name = "nats-sink", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Consume and write until SIGTERM/SIGINT, then finish in-flight batches and exit 0.
    Run {
        /// Config file (.json, .toml, .yaml).
        config: PathBuf,
        /// Overrides `logging.level`.
        #[arg(long)]
        log_level: Option<String>,
    },
    /// Check the config (every field, and that the environment variables it names are set);
    /// exit 2 naming every problem at once. With `--connect`, also check it against the NATS
    /// server without consuming or changing anything. With `--no-environment` (a CI pipeline
    /// without the production secrets), unset variables are notes, not errors.
    Validate {
        /// Config file (.json, .toml, .yaml).
        config: PathBuf,
        /// Also connect and check the stream, its subjects, the DLQ stream, the consumer and the
        /// exhaustion capture stream (one attempt; exit 1 when the server cannot be reached).
        #[arg(long, conflicts_with = "no_environment")]
        connect: bool,
        /// Every other check, but the environment variables the config names (secrets, keys)
        /// need not be set: each unset one is listed as a note (exit 0 when nothing else is
        /// wrong). Overrides from the environment (NATS_SINKS__…) still apply.
        #[arg(long)]
        no_environment: bool,
    },
    /// Print the config with defaults filled in and secrets redacted, in the input's format
    /// (or `--format`), sections in the order of the docs.
    ShowEffectiveConfig {
        /// Config file (.json, .toml, .yaml).
        config: PathBuf,
        /// `json`, `toml` or `yaml`; default: the config file's own format.
        #[arg(long, value_enum)]
        format: Option<output::ConfigFormat>,
    },
    /// Print (or write) the redacted data-product manifest of the config for a data
    /// catalogue (`nats_sinks.catalog_manifest.v1`, the reference's): dataset, sinks, routing,
    /// metadata and governance posture, and the redacted configuration. Reads the config only.
    /// [needs the `catalogue` feature]
    ExportCatalogueManifest {
        /// Config file.
        config: PathBuf,
        /// Write the manifest to this file instead of standard output.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Name the dataset (default: the stream's name).
        #[arg(long)]
        dataset_name: Option<String>,
        /// Replace an existing `--output` file.
        #[arg(long)]
        overwrite: bool,
    },
    /// Open the destination, run its health check and close it (NATS is not contacted).
    /// Changes nothing unless `--create` is given: what `run` would create (a missing
    /// directory, missing tables) is named instead.
    TestSink {
        /// Config file (.json, .toml, .yaml).
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
        /// Config file (.json, .toml, .yaml).
        config: PathBuf,
    },
    /// Print the plaintext of a stored record, DLQ record, encryption envelope or spool file,
    /// with the keys the config names (read from the environment).
    Decrypt {
        /// Config file (.json, .toml, .yaml; its `encryption` section, and `sink.encryption` of a spool).
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
    /// Print a plan for the stream and durable consumer the config reads: settings, the
    /// permissions the worker needs, the `nats` commands that create everything. Offline
    /// unless `--connect`, which reads the existing consumer (its max_deliver decides whether
    /// the rescue's capture stream is needed).
    StreamPlan {
        /// Config file (.json, .toml, .yaml).
        config: PathBuf,
        /// Retention policy: limits, interest or workqueue.
        #[arg(long, default_value = "limits")]
        retention: String,
        /// Discard policy: old or new.
        #[arg(long, default_value = "old")]
        discard: String,
        /// Storage: file or memory.
        #[arg(long, default_value = stream_plan::STORAGE_TYPES[0])]
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
        /// Read the existing consumer on the server (changes nothing): its max_deliver decides
        /// whether the rescue's capture stream is needed.
        #[arg(long)]
        connect: bool,
    },
    /// Show messages of the configured stream and subjects through an ephemeral ordered
    /// consumer: builds no sink, acknowledges nothing, payloads redacted unless asked for.
    InspectOrdered {
        /// Config file (.json, .toml, .yaml).
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
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell). [needs the
    /// `completions` feature]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Print the man page (roff); `cargo xtask man` writes it to target/man. [needs the
    /// `completions` feature]
    #[command(hide = true)]
    Man,
    /// Compare a range of the source stream with the destination, the ledger and the DLQ,
    /// message by message (reads only; exit 0 only when nothing is missing or conflicting).
    Reconcile {
        /// Config file (.json, .toml, .yaml).
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
        /// Config file (.json, .toml, .yaml).
        config: PathBuf,
        /// Decide the pending change.
        #[arg(long, value_enum)]
        accept: Option<Accept>,
    },
    /// Re-deliver a range of the stream to the configured sink through a temporary consumer
    /// (the production consumer is untouched; what is already there comes back as duplicates).
    Replay {
        /// Config file (.json, .toml, .yaml).
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
        /// Config file (.json, .toml, .yaml).
        config: PathBuf,
        #[command(flatten)]
        options: redrive::Options,
    },
}

/// The shells `nats-sink completions` writes a script for (clap_complete's, by the same names,
/// so that the argument parses the same in a build without the `completions` feature).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Shell {
    /// Bourne Again SHell.
    Bash,
    /// Elvish.
    Elvish,
    /// Friendly Interactive SHell.
    Fish,
    /// PowerShell.
    Powershell,
    /// Z SHell.
    Zsh,
}

#[cfg(feature = "completions")]
impl From<Shell> for clap_complete::Shell {
    fn from(shell: Shell) -> Self {
        match shell {
            Shell::Bash => Self::Bash,
            Shell::Elvish => Self::Elvish,
            Shell::Fish => Self::Fish,
            Shell::Powershell => Self::PowerShell,
            Shell::Zsh => Self::Zsh,
        }
    }
}

/// A decision about a changed stream (`nats-sink stream-identity --accept`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Accept {
    /// A new epoch: keys and names of the new stream's events carry its epoch.
    NewEpoch,
    /// A replay of the same data: keys as before.
    Replay,
}

/// The whole command line of `registry`'s binary: the built-in subcommands, then the
/// binary's own. The binary's `about` and `version` win over the built-in ones, and over the
/// doc comment of a binary's subcommand enum (which clap would make the `about`).
pub(crate) fn command(registry: &crate::Registry) -> clap::Command {
    let command = <Cli as clap::CommandFactory>::command().name(sinks_runtime::program::name());
    let about = command.get_about().cloned();
    let long_about = command.get_long_about().cloned();
    let command = with_subcommand_help(registry.add_commands(command));
    let command = match registry.about_text().map(clap::builder::StyledStr::from).or(about) {
        Some(about) => command.about(about),
        None => command.about(None::<&'static str>),
    };
    let command = match long_about {
        Some(long_about) => command.long_about(long_about),
        None => command.long_about(None::<&'static str>),
    };
    match registry.version_text() {
        Some(version) => command.version(version),
        None => command,
    }
}

/// What `--help` adds: the sinks built into this binary and the environment override
/// convention.
pub(crate) fn after_help(registry: &crate::Registry) -> String {
    let codes: Vec<u8> = crate::exit::CODES.iter().map(|(c, _)| *c).collect();
    format!(
        "Sinks built into this binary: {}.\n\n{CONFIG_FILES}\n\n\
         Every config field can be overridden from the environment: NATS_SINKS__<SECTION>__<FIELD>=value \
         (double underscores separate the path, e.g. NATS_SINKS__DELIVERY__BATCH_SIZE=100), plus the \
         reference's fixed names such as NATS_SINKS_NATS_URL. Secrets are only ever read from the \
         environment variables named by `*_env` fields.\n\n{}",
        registry.available().join(", "),
        crate::exit::codes_help(&codes)
    )
}

/// What every command that reads a config says about its formats.
const CONFIG_FILES: &str = "Config files: JSON (the Python reference's layout), TOML or YAML, by extension \
                            (.json, .toml, .yaml or .yml).";

/// The codes a built-in command can exit with beyond 0, 1 and 2.
fn more_codes(command: &str) -> &'static [u8] {
    match command {
        "reconcile" => &[crate::exit::RECONCILE_GONE, crate::exit::RECONCILE_UNCHECKED],
        "redrive" => &[crate::exit::REDRIVE_LEFT],
        _ => &[],
    }
}

/// `command` with every subcommand's own `--help` (a binary's own ones included) ending in the
/// config formats (when it reads a config) and the exit codes it can return.
pub(crate) fn with_subcommand_help(mut command: clap::Command) -> clap::Command {
    for sub in command.get_subcommands_mut() {
        let reads_config = sub.get_arguments().any(|a| a.get_id().as_str().ends_with("config"));
        let codes = crate::exit::codes_help(more_codes(sub.get_name()));
        let text = if reads_config { format!("{CONFIG_FILES}\n\n{codes}") } else { codes };
        *sub = std::mem::take(sub).after_help(text);
    }
    command
}
