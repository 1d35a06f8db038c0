//! [`SinkError`]: the closed set of failure classes every sink maps its driver errors into.
//!
//! Sinks classify where the error happens (see each sink's `error.rs`); the runner and the
//! ACK gate read only the class. A duplicate key is not an error: it is the
//! `MessageOutcome::Duplicate` outcome.

use std::time::Duration;

/// Boxed error source kept for diagnostics.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// How a failure should be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// Retrying the same write later may succeed (timeouts, unreachable destination,
    /// deadlocks, 429/503). Redelivered with backoff; never dead-lettered early.
    Temporary,
    /// Retrying can never succeed for this message (bad data, rejected by the destination).
    /// Dead-lettered alone.
    Permanent,
    /// The destination is misconfigured (bad credentials, missing database or table).
    /// Fatal at start-up (exit 2); at run time treated as temporary with a loud log, so a
    /// configuration mistake never dead-letters live traffic.
    Config,
}

/// A classified failure reported by a sink or by the core.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SinkError {
    class: ErrorClass,
    message: String,
    error_type: Option<&'static str>,
    // What few errors carry lives behind one box: `SinkError` travels in every `Result` of
    // a write path, and stays small.
    extra: Option<Box<Extra>>,
    retry_after: Option<Duration>,
    #[source]
    source: Option<BoxError>,
}

/// The rarer attachments of a [`SinkError`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Extra {
    /// A stable reason code.
    reason: Option<String>,
    /// The fan-out target that failed.
    target: Option<String>,
    /// The configuration field the error is about.
    field: Option<String>,
    /// The destination as a whole failed (every message of its write failed temporarily),
    /// not this message.
    outage: bool,
    /// Throttled by the destination's own limits ([`SinkError::throttled`]).
    throttled: bool,
}

impl SinkError {
    fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        Self { class, message: message.into(), error_type: None, extra: None, retry_after: None, source: None }
    }

    /// A temporary failure: retry later.
    pub fn temporary(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Temporary, message)
    }

    /// The destination refused the write for its own limits (HTTP 429, S3 `SlowDown`, "too many
    /// connections"): temporary, and the runner holds the message (no delivery used) until
    /// [`SinkError::retry_after`] instead of redelivering it against `max_deliver`.
    pub fn throttled(message: impl Into<String>) -> Self {
        let mut e = Self::new(ErrorClass::Temporary, message);
        e.extra.get_or_insert_default().throttled = true;
        e
    }

    /// A permanent failure: this message can never be written.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Permanent, message)
    }

    /// A destination configuration failure.
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Config, message)
    }

    /// Attaches the underlying error.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Asks for a minimum delay before the retry (e.g. HTTP `Retry-After`).
    #[must_use]
    pub fn with_retry_after(mut self, delay: Duration) -> Self {
        self.retry_after = Some(delay);
        self
    }

    /// Overrides the error type name recorded in DLQ records (e.g. `SerializationError`).
    #[must_use]
    pub fn with_error_type(mut self, name: &'static str) -> Self {
        self.error_type = Some(name);
        self
    }

    /// Attaches a stable reason code (e.g. `signature_invalid`), written as `reason` in the
    /// dead-letter record.
    #[must_use]
    pub fn with_reason(mut self, code: impl Into<String>) -> Self {
        self.extra.get_or_insert_default().reason = Some(code.into());
        self
    }

    /// Names the fan-out target (named sink) that failed, written as `target` in the
    /// dead-letter record.
    #[must_use]
    pub fn with_target(mut self, name: impl Into<String>) -> Self {
        self.extra.get_or_insert_default().target = Some(name.into());
        self
    }

    /// The fan-out target that failed, if any.
    pub fn target(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.target.as_deref())
    }

    /// Marks a temporary failure as the destination's, not the message's: every message of
    /// the write failed temporarily (a fan-out target down, say). The runner may then hold the
    /// message through the outage instead of redelivering it.
    #[must_use]
    pub fn with_outage(mut self) -> Self {
        self.extra.get_or_insert_default().outage = true;
        self
    }

    /// True when the failure was marked as the destination's ([`SinkError::with_outage`]).
    pub fn is_outage(&self) -> bool {
        self.extra.as_ref().is_some_and(|x| x.outage)
    }

    /// True when the destination throttled the write ([`SinkError::throttled`]).
    pub fn is_throttled(&self) -> bool {
        self.extra.as_ref().is_some_and(|x| x.throttled)
    }

    /// Names the configuration field (`sink.directory`, `sink.table`, …) a configuration
    /// error is about, so that start-up can report it as that field's error.
    pub fn with_field(mut self, path: impl Into<String>) -> Self {
        self.extra.get_or_insert_default().field = Some(path.into());
        self
    }

    /// The configuration field this error is about, if the sink named one.
    pub fn field(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.field.as_deref())
    }

    /// The stable reason code, if one was attached.
    pub fn reason(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.reason.as_deref())
    }

    /// The failure class.
    pub fn class(&self) -> ErrorClass {
        self.class
    }

    /// True for [`ErrorClass::Permanent`].
    pub fn is_permanent(&self) -> bool {
        self.class == ErrorClass::Permanent
    }

    /// The message without the source chain.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Requested minimum retry delay, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// Error type name for DLQ records and the `Nats-Sinks-Error-Type` header.
    pub fn error_type(&self) -> &'static str {
        self.error_type.unwrap_or(match self.class {
            ErrorClass::Temporary => "TemporarySinkError",
            ErrorClass::Permanent => "PermanentSinkError",
            ErrorClass::Config => "ConfigurationError",
        })
    }

    /// The message followed by every source in the chain, separated by `: `.
    pub fn display_chain(&self) -> String {
        let mut out = self.message.clone();
        let mut next = self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static));
        while let Some(err) = next {
            out.push_str(": ");
            out.push_str(&err.to_string());
            next = err.source();
        }
        out
    }

    /// A copy with the same class, type, reason, target and delay and a new message (the
    /// sources are rendered into the new message by the caller when wanted).
    pub fn rephrased(&self, message: impl Into<String>) -> Self {
        Self { message: message.into(), source: None, ..self.duplicate() }
    }

    /// A copy with the same class, message, type and delay (sources are not cloneable and
    /// are rendered into the message).
    pub fn duplicate(&self) -> Self {
        Self {
            class: self.class,
            message: self.display_chain(),
            error_type: self.error_type,
            extra: self.extra.clone(),
            retry_after: self.retry_after,
            source: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_and_types() {
        let io = std::io::Error::other("disk full");
        let e = SinkError::temporary("writing file").with_source(io);
        assert_eq!(e.display_chain(), "writing file: disk full");
        assert_eq!(e.to_string(), "writing file");
        assert_eq!(e.error_type(), "TemporarySinkError");
        let t = SinkError::throttled("endpoint answered 429").with_retry_after(Duration::from_secs(2));
        assert!(t.is_throttled() && !t.is_permanent() && !t.is_outage());
        assert!(t.duplicate().is_throttled() && t.rephrased("x").is_throttled(), "copies keep the mark");
        assert!(!SinkError::temporary("down").is_throttled());
        let p = SinkError::permanent("bad").with_error_type("SerializationError");
        assert_eq!(p.error_type(), "SerializationError");
        assert!(p.duplicate().is_permanent());
    }
}
