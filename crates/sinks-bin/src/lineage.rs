//! `nats-sink query-lineage`: read-only lookups of rows the Oracle sink wrote, by an
//! allow-listed identifier (mission metadata fields, message id, subject), with the value as
//! a bind variable, a bounded limit, the table restricted to the configured ones and the
//! payload left out unless `--include-payload`. `--dry-run` prints the query without
//! connecting. Exit 2 for a configuration or usage error (including a missing Oracle Instant
//! Client), 1 when the query fails.

use std::path::Path;
use std::process::ExitCode;

use sink_oracle::lineage::{self, LineageRequest};
use sink_oracle::{OracleSink, OracleSinkConfig};
use sinks_cli::Registry;
use sinks_contract::ConfigError;

/// The options of one lookup.
#[derive(Debug)]
pub(crate) struct Options {
    /// The allow-listed field looked up (`--field`).
    pub(crate) field: String,
    /// The value, bound as `:1` (`--value`).
    pub(crate) value: String,
    /// A configured table, or `sink.table` (`--table`).
    pub(crate) table: Option<String>,
    /// Most records returned (`--limit`).
    pub(crate) limit: usize,
    /// `text` or `json` (`--format`).
    pub(crate) format: String,
    /// Select the payload column too (`--include-payload`).
    pub(crate) include_payload: bool,
    /// Print the query and connect nowhere (`--dry-run`).
    pub(crate) dry_run: bool,
}

/// How a lookup ended.
pub(crate) enum Ended {
    /// Printed; exit 0.
    Done,
    /// A configuration or usage error (exit 2).
    Config(ConfigError),
    /// The query failed (exit 1), or the driver could not be used (exit 2 when `true`).
    Failed(String, bool),
}

/// Loads the config at `path`, builds the lookup and prints its plan (`--dry-run`) or its
/// records.
#[allow(clippy::print_stdout)]
pub(crate) async fn run(registry: &Registry, path: &Path, options: Options) -> Ended {
    let config = match registry.load_config(path) {
        Ok(c) => c,
        Err(e) => return Ended::Config(e),
    };
    if config.sink.kind() != Some("oracle") {
        return Ended::Config(ConfigError::single("sink.type", "query-lineage needs an `oracle` sink"));
    }
    let sink_config = match OracleSinkConfig::from_section(&config.sink) {
        Ok(c) => c,
        Err(e) => return Ended::Config(e),
    };
    let format = options.format.trim().to_ascii_lowercase();
    if format != "text" && format != "json" {
        return Ended::Config(ConfigError::single("--format", "must be `text` or `json`"));
    }
    let sink = match OracleSink::new(sink_config) {
        Ok(s) => s,
        Err(e) => return Ended::Config(e),
    };
    let request = LineageRequest {
        field: options.field,
        value: options.value,
        table: options.table,
        limit: options.limit,
        include_payload: options.include_payload,
    };
    let query = match sink.lineage_query(&request) {
        Ok(q) => q,
        Err(e) => return Ended::Config(ConfigError::single("query-lineage", e.to_string())),
    };
    if options.dry_run {
        let plan = serde_json::json!({
            "field": query.field, "table": query.table, "limit": query.limit,
            "payload_included": query.include_payload, "binds": [":1"], "sql": query.statement.sql,
        });
        if format == "json" {
            println!("{}", serde_json::to_string_pretty(&plan).unwrap_or_default());
        } else {
            println!("Oracle lineage query dry run");
            println!("field={}", query.field);
            println!("table={}", query.table);
            println!("limit={}", query.limit);
            println!("payload_included={}", query.include_payload);
            println!("binds=:1");
            println!("{}", query.statement.sql);
        }
        return Ended::Done;
    }
    match sink.query_lineage(query).await {
        Ok(result) => {
            if format == "json" {
                println!("{}", serde_json::to_string_pretty(&result).unwrap_or_default());
            } else {
                println!("{}", lineage::render_text(&result));
            }
            Ended::Done
        }
        Err(e) => Ended::Failed(
            format!("lineage query failed: {}", e.message()),
            e.class() == sinks_contract::ErrorClass::Config,
        ),
    }
}

/// The exit code of `ended`, reporting errors.
pub(crate) fn exit(ended: Ended) -> ExitCode {
    match ended {
        Ended::Done => ExitCode::SUCCESS,
        Ended::Config(e) => sinks_cli::exit::config_failure(&e),
        Ended::Failed(message, config) => {
            sinks_cli::exit::report(&message);
            ExitCode::from(if config { 2 } else { 1 })
        }
    }
}
