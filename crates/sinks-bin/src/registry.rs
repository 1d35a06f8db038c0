//! The sink registry: turns the `sink` section into a running sink. The only place that
//! knows the full list of sink kinds; each kind is behind its own cargo feature, and a kind
//! this binary was built without is named as such instead of being "unknown".

use std::sync::Arc;

use sinks_core::config::SinkSection;
use sinks_core::{ConfigError, Sink};

/// Every feature-gated sink kind nats-sinks knows, with the cargo feature that enables it.
/// (`blackhole`, from sinks-core, is always built in.)
pub(crate) const KNOWN: &[(&str, &str)] = &[("file", "file")];

/// A validated sink: the instance and its effective config (defaults filled in).
pub(crate) struct Built {
    pub(crate) sink: Arc<dyn Sink>,
    pub(crate) effective: serde_json::Value,
}

/// Kinds compiled into this binary.
pub(crate) fn available() -> Vec<&'static str> {
    let mut kinds = vec!["blackhole"];
    if cfg!(feature = "file") {
        kinds.push("file");
    }
    kinds
}

/// Parses and validates the sink section and builds the sink (no IO yet).
pub(crate) fn build(section: &SinkSection) -> Result<Built, ConfigError> {
    let kind = section.kind().unwrap_or_default();
    match kind {
        "blackhole" => {
            let config = sinks_core::blackhole::BlackholeConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            Ok(Built { sink: Arc::new(sinks_core::blackhole::BlackholeSink::new(config)), effective })
        }
        #[cfg(feature = "file")]
        "file" => {
            let config = sink_file::FileSinkConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            Ok(Built { sink: Arc::new(sink_file::FileSink::new(config)?), effective })
        }
        other => Err(ConfigError::single("sink.type", unknown_kind(other))),
    }
}

fn unknown_kind(kind: &str) -> String {
    match KNOWN.iter().find(|(k, _)| *k == kind) {
        Some((_, feature)) => format!("nats-sink was not compiled with the `{feature}` feature"),
        None => format!("unknown sink type `{kind}` (available: {})", available().join(", ")),
    }
}
