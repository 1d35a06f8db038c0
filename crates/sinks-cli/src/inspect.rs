//! `nats-sink inspect-ordered`: a look at the messages of the configured stream and subjects
//! through an ephemeral ordered consumer. It builds no sink, creates no durable consumer and
//! acknowledges nothing (an ordered consumer has no acks), so the production consumer is not
//! touched. Payloads are shown only as size and SHA-256 unless `--include-payload` asks for
//! them; headers whose names look secret are shown as `<redacted>`.

use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sinks_runtime::config::{Config, ConfigError};
use sinks_runtime::inspect::{Connection, StoredMessage};

/// Options of the command, checked by [`Options::validate`].
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Options {
    /// Messages to show (1 to 1,000).
    #[arg(long, default_value_t = 10)]
    max_messages: usize,
    /// Largest payload shown with `--include-payload`, bytes (up to 16 MiB); longer ones are cut.
    #[arg(long, default_value_t = 1_048_576)]
    max_payload_bytes: usize,
    /// Show payloads (UTF-8 text, or base64); by default only their size and SHA-256.
    #[arg(long)]
    include_payload: bool,
    /// Stop when no message arrives for this many seconds (1 to 60).
    #[arg(long, default_value_t = 1.0)]
    timeout_seconds: f64,
    /// `text` or `jsonl`.
    #[arg(long, default_value = "text")]
    format: String,
    /// Write to this file (relative to `--output-root`) instead of standard output.
    #[arg(long)]
    output: Option<PathBuf>,
    /// The directory `--output` must stay inside.
    #[arg(long, default_value = ".local/nats-sinks/inspection")]
    output_root: PathBuf,
    /// Headers shown per message (up to 256); the rest are counted.
    #[arg(long, default_value_t = 32)]
    max_headers: usize,
    /// Longest header value shown, bytes (up to 4,096); longer ones are cut.
    #[arg(long, default_value_t = 256)]
    max_header_value_bytes: usize,
}

impl Options {
    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &str, message: &str| Err(ConfigError::single(format!("--{field}"), message.to_owned()));
        if !(1..=1000).contains(&self.max_messages) {
            return bad("max-messages", "must be between 1 and 1000");
        }
        if !(1..=16 * 1_048_576).contains(&self.max_payload_bytes) {
            return bad("max-payload-bytes", "must be between 1 and 16777216");
        }
        if !(1.0..=60.0).contains(&self.timeout_seconds) {
            return bad("timeout-seconds", "must be between 1 and 60");
        }
        if self.format != "text" && self.format != "jsonl" {
            return bad("format", "must be text or jsonl");
        }
        if self.max_headers > 256 {
            return bad("max-headers", "must be at most 256");
        }
        if !(1..=4096).contains(&self.max_header_value_bytes) {
            return bad("max-header-value-bytes", "must be between 1 and 4096");
        }
        if let Some(output) = &self.output
            && (output.is_absolute() || output.components().any(|c| matches!(c, Component::ParentDir)))
        {
            return bad("output", "must be a relative path inside --output-root, without `..`");
        }
        Ok(())
    }
}

/// Runs the inspection; `Err` holds the exit code's message and whether it was a config error.
pub(crate) async fn run(config: &Config, options: &Options) -> Result<usize, (bool, String)> {
    options.validate().map_err(|e| (true, e.to_string()))?;
    let mut out: Box<dyn Write + Send> = match &options.output {
        Some(path) => Box::new(open_output(&options.output_root, path).map_err(|e| (false, e))?),
        None => Box::new(std::io::stdout()),
    };
    let connection =
        Connection::open(&config.nats).await.map_err(|e| (false, format!("cannot connect to nats: {e}")))?;
    let filters = if config.consumer_management.filter_subjects.is_empty() {
        vec![config.nats.subject.clone()]
    } else {
        config.consumer_management.filter_subjects.clone()
    };
    let mut messages = connection.ordered(&config.nats.stream, filters).await.map_err(|e| (false, e))?;
    let idle = Duration::from_secs_f64(options.timeout_seconds);
    let mut shown = 0;
    while shown < options.max_messages {
        let message = match tokio::time::timeout(idle, messages.next()).await {
            Err(_) | Ok(None) => break,
            Ok(Some(Err(e))) => return Err((false, e)),
            Ok(Some(Ok(m))) => m,
        };
        let record = describe(&message, options);
        let line = if options.format == "jsonl" { record.to_string() } else { text(&record) };
        writeln!(out, "{line}").map_err(|e| (false, format!("cannot write the output: {e}")))?;
        shown += 1;
    }
    out.flush().map_err(|e| (false, format!("cannot write the output: {e}")))?;
    Ok(shown)
}

fn open_output(root: &Path, relative: &Path) -> Result<std::fs::File, String> {
    let path = root.join(relative);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))
}

fn cut(s: &str, max: usize) -> (String, bool) {
    if s.len() <= max {
        return (s.to_owned(), false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (s[..end].to_owned(), true)
}

/// One message as a JSON record: sequence, subject, time, headers (redacted), payload facts.
fn describe(message: &StoredMessage, options: &Options) -> Value {
    let published = message.published.and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok());
    let mut headers = serde_json::Map::new();
    let mut omitted = 0usize;
    for (name, values) in &message.headers {
        if headers.len() >= options.max_headers {
            omitted += 1;
            continue;
        }
        let shown: Vec<Value> = values
            .iter()
            .map(|v| {
                if sinks_runtime::config::redact::is_secret_key(name) || name.eq_ignore_ascii_case("authorization") {
                    Value::from("<redacted>")
                } else {
                    Value::from(cut(v, options.max_header_value_bytes).0)
                }
            })
            .collect();
        headers.insert(name.clone(), Value::from(shown));
    }
    let payload = &message.payload;
    let mut record = json!({
        "stream_sequence": message.stream_sequence,
        "subject": message.subject,
        "published": published,
        "delivered": message.delivered,
        "headers": headers,
        "headers_omitted": omitted,
        "payload_size": payload.len(),
        "payload_sha256": hex::encode(Sha256::digest(payload)),
    });
    if options.include_payload {
        let shown = &payload[..payload.len().min(options.max_payload_bytes)];
        record["payload_truncated"] = (shown.len() < payload.len()).into();
        match std::str::from_utf8(shown) {
            Ok(text) => record["payload_text"] = text.into(),
            Err(_) => record["payload_base64"] = base64::engine::general_purpose::STANDARD.encode(shown).into(),
        }
    }
    record
}

fn text(record: &Value) -> String {
    let mut line = format!(
        "#{} {} published={} size={} sha256={}",
        record["stream_sequence"],
        record["subject"].as_str().unwrap_or_default(),
        record["published"].as_str().unwrap_or("-"),
        record["payload_size"],
        record["payload_sha256"].as_str().unwrap_or_default(),
    );
    if let Some(headers) = record["headers"].as_object() {
        for (name, values) in headers {
            line.push_str(&format!(
                "\n  {name}: {}",
                values
                    .as_array()
                    .map(|v| v.iter().map(|x| x.as_str().unwrap_or_default()).collect::<Vec<_>>().join(", "))
                    .unwrap_or_default()
            ));
        }
    }
    if let Some(text) = record["payload_text"].as_str() {
        line.push_str(&format!("\n  payload: {text}"));
    } else if let Some(b64) = record["payload_base64"].as_str() {
        line.push_str(&format!("\n  payload (base64): {b64}"));
    }
    line
}
