//! `nats-sink`: the sink kinds of nats-sinks, each behind its own cargo feature, registered
//! with the operator commands of `sinks-cli`, plus the three commands that belong to one kind
//! (`replay-spool`, `query-lineage`, `verify-packages`). The only place that names every sink kind: a kind this
//! binary was built without is registered as known, so a config of that `type` is named as
//! such instead of being "unknown".
//!
//! Exit codes: 0 success (including a graceful stop on SIGTERM/SIGINT), 1 runtime error,
//! 2 configuration error (the message names the field). `reconcile` adds its own.

#[cfg(feature = "oracle")]
mod lineage;
mod memory;
#[cfg(feature = "spool")]
mod replay_spool;
#[cfg(feature = "spool")]
mod spool_files;
#[cfg(feature = "review_package")]
mod verify_packages;

use std::path::PathBuf;
use std::process::ExitCode;

use sinks_cli::{CommandFuture, Registry};

/// Registers the kind built by `$factory` when cargo feature `$feature` is on, else names it
/// as known (`$kind`, `$reach`).
macro_rules! kind {
    ($registry:ident, $feature:literal, $kind:literal, $reach:ident, $factory:expr) => {
        #[cfg(feature = $feature)]
        let $registry = $registry.with(Box::new($factory));
        #[cfg(not(feature = $feature))]
        let $registry = $registry.known(sinks_cli::Known::new($kind, $feature, sinks_contract::Reach::$reach));
    };
}

/// The line `nats-sink --help` opens with.
const ABOUT: &str = "The nats-sink binary: runs one configured sink against a JetStream consumer";

/// The kinds of this build, in the order `nats-sink sinks` lists them, and its own commands.
fn registry() -> Registry {
    let r = Registry::new().about(ABOUT).version(env!("CARGO_PKG_VERSION"));
    kind!(r, "file", "file", Local, sink_file::FileFactory);
    kind!(r, "mysql", "mysql", Remote, sink_mysql::MySqlFactory);
    kind!(r, "http", "http", Remote, sink_http::HttpFactory);
    kind!(r, "s3", "s3", Remote, sink_s3::S3Factory);
    kind!(r, "spool", "spool", Local, sink_spool::SpoolFactory);
    kind!(r, "coherence", "coherence", Remote, sink_coherence::CoherenceFactory);
    kind!(r, "nosql", "oracle_nosql", Remote, sink_nosql::NoSqlFactory);
    kind!(r, "oracle", "oracle", Remote, sink_oracle::OracleFactory);
    kind!(r, "review_package", "review_package", Local, sink_review_package::ReviewPackageFactory);
    #[cfg(feature = "spool")]
    let r = r.stored_format(Box::new(spool_files::SpoolFiles));
    r.commands(own)
}

/// The commands of one kind; in a build without it they say which feature brings them.
#[derive(Debug, clap::Subcommand)]
enum Own {
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
    /// Read every package of a review package sink back and check it against its
    /// manifest and hash list: exit 0 when all are intact, 1 when one is incomplete or
    /// tampered. Changes nothing. [needs the `review_package` feature]
    VerifyPackages {
        /// Config file (`sink.type = "review_package"`, or a named sink of that type).
        config: PathBuf,
        /// Check this named sink (from `sinks`) instead of the active sink.
        #[arg(long)]
        sink_name: Option<String>,
        /// `text` or `json`.
        #[arg(long, default_value = "text")]
        format: String,
    },
}

/// Runs one of [`Own`].
#[allow(
    unused_variables,
    reason = "a build without the spool, oracle or review_package feature ignores their arguments"
)]
fn own(command: Own, registry: &Registry) -> CommandFuture<'_> {
    Box::pin(async move {
        match command {
            #[cfg(not(feature = "spool"))]
            Own::ReplaySpool { .. } => sinks_cli::exit::missing_feature("replay-spool", "spool"),
            #[cfg(feature = "spool")]
            Own::ReplaySpool { spool_config, target_config, max_records, dry_run } => {
                replay_spool::run(registry, &spool_config, &target_config, max_records, dry_run).await
            }
            #[cfg(not(feature = "oracle"))]
            Own::QueryLineage { .. } => sinks_cli::exit::missing_feature("query-lineage", "oracle"),
            #[cfg(feature = "oracle")]
            Own::QueryLineage { config, field, value, table, limit, format, include_payload, dry_run } => {
                let options = lineage::Options { field, value, table, limit, format, include_payload, dry_run };
                lineage::exit(lineage::run(registry, &config, options).await)
            }
            #[cfg(not(feature = "review_package"))]
            Own::VerifyPackages { .. } => sinks_cli::exit::missing_feature("verify-packages", "review_package"),
            #[cfg(feature = "review_package")]
            Own::VerifyPackages { config, sink_name, format } => {
                verify_packages::run(registry, &config, sink_name.as_deref(), &format).await
            }
        }
    })
}

fn main() -> ExitCode {
    sinks_cli::main(registry())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The reference's optional-target defaults by sink type, which lived in sinks-runtime
    /// (`routing::OPTIONAL_DEFAULTS`) before the registrations supplied them; built in or
    /// not, every kind has them.
    #[test]
    fn kind_defaults_are_the_references() {
        let kinds = registry().kind_defaults();
        let got: Vec<(&str, u64, u64)> = kinds
            .kinds()
            .map(|k| {
                let wait = kinds.optional_wait(k).unwrap();
                (k, wait.minimum_wait_ms, wait.timeout_ms)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("coherence", 1000, 5000),
                ("file", 100, 1000),
                ("http", 1000, 5000),
                ("mysql", 1000, 5000),
                ("oracle", 1000, 5000),
                ("oracle_nosql", 1000, 5000),
                // Not in the reference's table (its fan-out gives review_package no waits of
                // its own); a local directory, waited for like file and spool.
                ("review_package", 100, 1000),
                ("s3", 1000, 5000),
                ("spool", 100, 1000),
            ]
        );
    }

    /// A config loaded as the binary loads it gets the waits and the type check; the same
    /// config loaded without the kinds gets neither.
    #[test]
    fn the_binary_loads_with_the_kinds() {
        use sinks_runtime::Config;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fanout.json");
        let config = json!({
            "nats": {"stream": "S", "consumer": "C", "subject": "s.>"},
            "sink": {"type": "fanout"},
            "sinks": {"f": {"type": "file", "directory": "/tmp/f"}, "h": {"type": "http", "url": "http://127.0.0.1/"}},
            "routing": {"enabled": true, "routes": [{"name": "r", "match": {"subject": ">"},
                "targets": [{"sink": "f", "required": false}, {"sink": "h", "required": false}]}]}
        });
        std::fs::write(&path, config.to_string()).unwrap();
        let waits = |c: &Config| -> Vec<(Option<u64>, Option<u64>)> {
            c.routing.routes[0].targets.iter().map(|t| (t.minimum_wait_ms, t.timeout_ms)).collect()
        };
        let loaded = registry().load_config(&path).unwrap();
        assert_eq!(waits(&loaded), [(Some(100), Some(1000)), (Some(1000), Some(5000))]);
        assert_eq!(waits(&Config::load(&path).unwrap()), [(None, None), (None, None)]);
        let mut typed = config;
        typed["routing"]["target_sink_types"] = json!({"f": "file", "h": "ftp"});
        std::fs::write(&path, typed.to_string()).unwrap();
        let issues: Vec<(String, String)> =
            registry().load_config(&path).unwrap_err().issues.into_iter().map(|i| (i.path, i.message)).collect();
        let unknown = "must be one of coherence, file, http, mysql, oracle, oracle_nosql, review_package, s3, spool";
        // The message names the kinds, then where in the file the value is.
        assert!(
            issues.iter().any(|(path, message)| path == "routing.target_sink_types.h" && message.starts_with(unknown)),
            "{issues:?}"
        );
        let issues = Config::load(&path).unwrap_err().issues;
        assert!(!issues.iter().any(|i| i.message.starts_with(unknown)), "{issues:?}");
    }
}
