//! `nats-sink decrypt CONFIG FILE`: reads what nats-sink (or the reference) stored and
//! prints the plaintext, with the keys the config names (read from the environment).
//!
//! Recognized inputs, in this order:
//! - a file in a stored format of a kind's own, registered as a [`StoredFormat`](crate::StoredFormat) (the spool's
//!   files, `nats_sinks.spool.wrapper.v1`, keys from `sink.encryption` of a spool config):
//!   prints the plain record;
//! - a bare encryption envelope (`{"_nats_sinks_encryption": …}`): prints the payload
//!   (version 2 needs `--subject`, `--stream` and `--sequence`, the record it belongs to);
//! - a record whose `payload` is an envelope (file, HTTP and S3 records), or a DLQ record
//!   whose `payload_base64` is one: prints the payload, bound to the record's subject,
//!   stream and sequence;
//! - an NDJSON batch object of the file or S3 sink (uncompressed: pipe a `.gz` or `.zst`
//!   through `gunzip` or `zstdcat`): prints each row's payload on a line of its own, the
//!   encrypted ones decrypted. Parquet objects are not read here (read their `payload`
//!   column with a Parquet reader and decrypt each value as a bare envelope).

use std::io::{Read, Write};
use std::path::Path;

use sinks_contract::ConfigError;
use sinks_runtime::config::Config;
use sinks_toolkit::encryption;
use sinks_toolkit::encryption::{Binding, ENVELOPE_KEY, Keyring};

use crate::Registry;

/// Where a bare envelope belongs (for version 2).
#[derive(Debug, Clone, Default)]
pub(crate) struct Context {
    pub(crate) subject: Option<String>,
    pub(crate) stream: Option<String>,
    pub(crate) sequence: Option<u64>,
}

/// Why decrypting failed: the config (exit 2) or the input (exit 1).
#[derive(Debug)]
pub(crate) enum Failure {
    Config(ConfigError),
    Input(String),
}

/// Every key `config` names: the `encryption` section's and those of the stored formats
/// (a spool's).
fn keyring(registry: &Registry, config: &Config) -> Result<Keyring, ConfigError> {
    let mut ring = Keyring::from_config(&config.encryption, "encryption")?;
    for format in registry.stored_formats() {
        if let Some(keys) = format.keyring(config)? {
            ring.extend(&keys);
        }
    }
    Ok(ring)
}

/// Decrypts `input` (a path, or `-` for stdin) and writes the plaintext to stdout.
pub(crate) fn run(registry: &Registry, config_path: &Path, input: &Path, context: &Context) -> Result<(), Failure> {
    let config = registry.load_config(config_path).map_err(Failure::Config)?;
    let ring = keyring(registry, &config).map_err(Failure::Config)?;
    if ring.key_ids().next().is_none() {
        return Err(Failure::Config(ConfigError::single(
            "encryption.key_b64_env",
            "the config names no key (encryption.key_b64_env, decrypt_keys, or a spool's sink.encryption)",
        )));
    }
    let mut bytes = Vec::new();
    let read = if input == Path::new("-") {
        std::io::stdin().read_to_end(&mut bytes)
    } else {
        std::fs::File::open(input).and_then(|mut f| f.read_to_end(&mut bytes))
    };
    read.map_err(|e| Failure::Input(format!("cannot read {}: {e}", input.display())))?;
    let plaintext = decrypt(registry, &bytes, &ring, context).map_err(Failure::Input)?;
    let mut out = std::io::stdout().lock();
    out.write_all(&plaintext).and_then(|()| out.flush()).map_err(|e| Failure::Input(format!("cannot write: {e}")))
}

/// What a stored record's payload is bound to: its subject, stream and sequence.
fn record_binding(doc: &serde_json::Value) -> Binding<'_> {
    Binding::Message {
        subject: doc["subject"].as_str().unwrap_or_default(),
        stream: doc["stream"].as_str().unwrap_or_default(),
        stream_sequence: doc["stream_sequence"].as_u64().unwrap_or_default(),
    }
}

/// The rows of an NDJSON batch object, when `text` is one (its first line is a row).
fn batch_rows(text: &str) -> Option<Vec<Result<serde_json::Value, String>>> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty()).peekable();
    let first: serde_json::Value = serde_json::from_str(lines.peek()?).ok()?;
    (first["schema"] == sinks_toolkit::batch::row::ROW_SCHEMA)
        .then(|| lines.map(|l| sinks_contract::json::parse_strict(l).map_err(|e| format!("not a row: {e}"))).collect())
}

/// The plaintext of `bytes` (see the module list).
pub(crate) fn decrypt(registry: &Registry, bytes: &[u8], ring: &Keyring, context: &Context) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "input is not UTF-8 JSON".to_owned())?;
    if let Some(rows) = batch_rows(text) {
        let mut out = Vec::new();
        for (i, row) in rows.into_iter().enumerate() {
            let row = row.map_err(|e| format!("line {}: {e}", i + 1))?;
            let plain = if row["payload"].get(ENVELOPE_KEY).is_some() {
                ring.decrypt_value(&row["payload"], record_binding(&row)).map_err(|e| format!("line {}: {e}", i + 1))?
            } else {
                row["payload"].to_string().into_bytes()
            };
            out.extend(plain);
            out.push(b'\n');
        }
        return Ok(out);
    }
    let doc = sinks_contract::json::parse_strict(text.trim_end()).map_err(|e| format!("input is not JSON: {e}"))?;
    if let Some(plain) = registry.stored_formats().find_map(|f| f.decrypt(bytes, &doc, ring)) {
        return plain;
    }
    if doc.get(ENVELOPE_KEY).is_some() {
        let binding = match (&context.subject, &context.stream, context.sequence) {
            (Some(subject), Some(stream), Some(stream_sequence)) => {
                Binding::Message { subject, stream, stream_sequence }
            }
            _ => Binding::None,
        };
        return ring.decrypt_value(&doc, binding).map_err(|e| e.to_string());
    }
    let binding = record_binding(&doc);
    if doc["payload"].get(ENVELOPE_KEY).is_some() {
        return ring.decrypt_value(&doc["payload"], binding).map_err(|e| e.to_string());
    }
    if let Some(b64) = doc["payload_base64"].as_str() {
        use base64::Engine;
        let payload = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| "payload_base64 is not base64".to_owned())?;
        if encryption::is_encrypted(&payload) {
            return ring.decrypt(&payload, binding).map_err(|e| e.to_string());
        }
    }
    Err("no encrypted payload found (expected a spool file, an encryption envelope, or a record carrying one)".into())
}
