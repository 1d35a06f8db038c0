//! `nats-sink decrypt` of the spool's record files (`nats_sinks.spool.wrapper.v1`): the keys
//! of a spool config's `sink.encryption` join the config's own, and a spool file prints as
//! its plain record.

use sinks_cli::StoredFormat;
use sinks_contract::ConfigError;
use sinks_runtime::Config;
use sinks_toolkit::encryption::Keyring;

/// The spool's record files.
#[derive(Debug)]
pub(crate) struct SpoolFiles;

impl StoredFormat for SpoolFiles {
    fn keyring(&self, config: &Config) -> Result<Option<Keyring>, ConfigError> {
        if config.sink.kind() != Some("spool") {
            return Ok(None);
        }
        let spool = sink_spool::SpoolSinkConfig::from_section(&config.sink)?;
        Keyring::from_config(&spool.encryption, "sink.encryption").map(Some)
    }

    fn decrypt(&self, bytes: &[u8], document: &serde_json::Value, keys: &Keyring) -> Option<Result<Vec<u8>, String>> {
        if document["schema"] != sink_spool::record::WRAPPER_SCHEMA {
            return None;
        }
        let plain = sink_spool::record::unwrap(bytes, keys).map_err(|e| e.to_string()).and_then(|record| {
            let mut out = serde_json::to_vec_pretty(&record).map_err(|e| e.to_string())?;
            out.push(b'\n');
            Ok(out)
        });
        Some(plain)
    }
}
