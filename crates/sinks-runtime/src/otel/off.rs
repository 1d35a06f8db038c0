//! A build without the `otel` feature: no OpenTelemetry crates, no exporter, no span. An
//! `opentelemetry` section that enables anything stops start-up with a configuration error
//! naming the feature; the runner's trace plumbing is typed by the uninhabited [`Traces`],
//! so it is never entered.

use sinks_contract::envelope::Envelope;
use sinks_contract::sink::MessageOutcome;

use super::{Fate, Ids};
use crate::config::{Config, ConfigError};
use crate::metrics::Metrics;

/// No exporters: this build has none.
#[derive(Debug, Default)]
pub struct Telemetry;

impl Telemetry {
    /// Refuses an `opentelemetry` section that enables anything.
    pub fn start(config: &Config, _metrics: &Metrics, _sink: &str) -> Result<Self, ConfigError> {
        if config.opentelemetry.active() {
            return Err(ConfigError::single(
                "opentelemetry",
                format!(
                    "this build has no OpenTelemetry export (build {} with the `otel` feature, on by default)",
                    crate::program::name()
                ),
            ));
        }
        Ok(Self)
    }

    /// Never any spans.
    pub fn traces(&self) -> Option<std::sync::Arc<Traces>> {
        None
    }

    /// Nothing to stop.
    pub fn shutdown(self) {}
}

/// The spans of a run: none can exist in this build.
#[derive(Debug)]
pub enum Traces {}

/// A message's span: only [`Traces`] makes one, and none can exist in this build.
#[derive(Debug)]
pub(crate) struct MessageSpan(Ids);

/// A batch write's span: only [`Traces`] makes one, and none can exist in this build.
#[derive(Debug)]
pub(crate) struct WriteSpan(Ids);

impl MessageSpan {
    pub(crate) fn ids(&self) -> Ids {
        self.0
    }
}

impl WriteSpan {
    pub(crate) fn ids(&self) -> Ids {
        self.0
    }

    pub(crate) fn end(self, _messages: usize) {}
}

impl Traces {
    pub(crate) fn begin(&self, _envelopes: &[Envelope]) {
        match *self {}
    }

    pub(crate) fn ids(&self, _seq: u64) -> Option<Ids> {
        match *self {}
    }

    pub(crate) fn refused(&self, _seq: u64, _step: &'static str, _reason: &str) {
        match *self {}
    }

    pub(crate) fn write_span(&self, _envelopes: &[Envelope]) -> WriteSpan {
        match *self {}
    }

    pub(crate) fn written(&self, _envelopes: &[Envelope], _outcomes: &[MessageOutcome]) {
        match *self {}
    }

    pub(crate) fn take(&self, _seq: u64) -> Option<MessageSpan> {
        match *self {}
    }
}

/// Ends a message's span: none can exist in this build.
pub(crate) fn finish(_message: MessageSpan, _fate: Fate, _reason: Option<&str>) {}
