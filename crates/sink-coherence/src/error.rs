//! Turns Coherence gRPC failures into the contract's error classes.
//!
//! | failure | class |
//! |---|---|
//! | `UNAVAILABLE` (connection refused or reset: member down or restarting) | temporary |
//! | `DEADLINE_EXCEEDED`, a request timeout, a stream that closed under a request | temporary (a timed-out put may have committed: the redelivery finds the entry and is a duplicate) |
//! | `RESOURCE_EXHAUSTED` (proxy overloaded) | temporary |
//! | `CANCELLED` (the proxy closing its streams on a graceful shutdown), `ABORTED`, `UNKNOWN` | temporary |
//! | `UNAUTHENTICATED`, `PERMISSION_DENIED` | configuration at start-up (exit 2), temporary at run time (never dead-lettered) |
//! | `UNIMPLEMENTED` (no Coherence gRPC proxy there) | configuration at start-up, temporary at run time |
//! | `INTERNAL` naming an unknown scope or serializer, a v1 handshake refused | configuration at start-up, temporary at run time |
//! | `INVALID_ARGUMENT`, or `INTERNAL` carrying a (de)serialization or invalid-argument failure, answering one entry's put | permanent for that message |
//! | v1 in-band error: (de)serialization or illegal argument, answering one entry's put | permanent for that message |
//! | v1 in-band error: unknown cache id, missing channel id | temporary (the stream is opened again) |
//! | v1 in-band error: anything else (for example "no storage-enabled nodes") | temporary |
//! | any other status | temporary (never assume a write failed for good) |
//!
//! Messages carry the operation, the status and a fixed description only: the proxy's own
//! texts can quote keys and values, so they are never logged or attached.

use sinks_contract::SinkError;
use tonic::Code;

/// What was being done when a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Opening a v1 stream (Init) or ensuring the cache.
    Handshake,
    /// Writing one entry.
    Write,
    /// Reading (health check, size, read-back).
    Read,
}

impl Stage {
    fn as_str(self) -> &'static str {
        match self {
            Self::Handshake => "handshake",
            Self::Write => "put",
            Self::Read => "read",
        }
    }
}

/// A failed request, without the proxy's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CohError {
    /// The call (or the v1 stream under it) ended with this gRPC status.
    #[error("grpc status {code:?}")]
    Status {
        /// The status code.
        code: Code,
        /// What the status tells beyond its code (from the proxy's message, classified).
        hint: Hint,
    },
    /// The v1 proxy answered this request with an in-band error.
    #[error("the proxy refused the request")]
    InBand {
        /// What the error message tells (classified).
        hint: Hint,
    },
    /// No answer within `request_timeout_seconds`.
    #[error("no answer within the request timeout")]
    Timeout,
    /// The v1 stream closed before the answer came.
    #[error("the stream closed before the answer")]
    Closed,
    /// An answer this client cannot read.
    #[error("unexpected answer ({0})")]
    Protocol(&'static str),
    /// The TLS or endpoint settings cannot be used.
    #[error("{0}")]
    Setup(String),
}

/// What a proxy message says, classified (the text itself is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hint {
    /// Nothing recognized.
    None,
    /// A key or value could not be (de)serialized, or an argument was invalid.
    BadEntry,
    /// The scope, serializer format or protocol is unknown to the proxy.
    BadSetup,
    /// The cache id is unknown or missing (the proxy restarted or the cache was destroyed).
    StaleCache,
}

impl Hint {
    /// Classifies a proxy message.
    pub(crate) fn of(message: &str) -> Self {
        let m = message.to_ascii_lowercase();
        if m.contains("configurablecachefactory")
            || m.contains("serializer configuration")
            || m.contains("cannot support protocol")
            || m.contains("cache name cannot be")
            || m.contains("cachename cannot be")
        {
            Self::BadSetup
        } else if m.contains("no cache proxy exist") || m.contains("missing channel id") {
            Self::StaleCache
        } else if m.contains("deserializ")
            || m.contains("serializing")
            || m.contains("invalid_argument")
            || m.contains("illegalargument")
        {
            Self::BadEntry
        } else {
            Self::None
        }
    }
}

impl CohError {
    /// The error of a gRPC status (its message classified, then dropped).
    pub(crate) fn status(status: &tonic::Status) -> Self {
        Self::Status { code: status.code(), hint: Hint::of(status.message()) }
    }

    /// True when the v1 stream this came from must be opened again.
    pub(crate) fn breaks_stream(&self) -> bool {
        matches!(
            self,
            Self::Status { .. }
                | Self::Timeout
                | Self::Closed
                | Self::Protocol(_)
                | Self::InBand { hint: Hint::StaleCache }
        )
    }
}

/// How a failure is classed, before the stage decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Worth retrying.
    Transient,
    /// The deployment refuses this client or setup: configuration at start-up.
    Refused,
    /// This entry can never be written.
    BadEntry,
}

fn kind(err: &CohError) -> Kind {
    match err {
        CohError::Status { code, hint } => match (code, hint) {
            (Code::Unauthenticated | Code::PermissionDenied | Code::Unimplemented, _) => Kind::Refused,
            (Code::Internal | Code::InvalidArgument | Code::FailedPrecondition | Code::NotFound, Hint::BadSetup) => {
                Kind::Refused
            }
            (Code::InvalidArgument, _) | (Code::Internal, Hint::BadEntry) => Kind::BadEntry,
            _ => Kind::Transient,
        },
        CohError::InBand { hint: Hint::BadEntry } => Kind::BadEntry,
        CohError::InBand { hint: Hint::BadSetup } | CohError::Setup(_) => Kind::Refused,
        CohError::InBand { .. } | CohError::Timeout | CohError::Closed | CohError::Protocol(_) => Kind::Transient,
    }
}

fn describe(err: &CohError) -> String {
    match err {
        CohError::Status { code, .. } => {
            let what = match code {
                Code::Unavailable => "the proxy is unreachable (refused, reset or restarting)",
                Code::DeadlineExceeded => "the request deadline passed",
                Code::ResourceExhausted => "the proxy is overloaded or the message is too large",
                Code::Cancelled => "the proxy cancelled the call (shutting down)",
                Code::Unauthenticated | Code::PermissionDenied => "the proxy refused this client's credentials",
                Code::Unimplemented => "the endpoint does not offer the Coherence gRPC protocol",
                Code::InvalidArgument => "the proxy refused the request as invalid",
                Code::Internal => "the proxy failed the request",
                _ => "the call failed",
            };
            format!("{what} (grpc {code:?})")
        }
        CohError::InBand { hint } => match hint {
            Hint::BadEntry => "the proxy cannot deserialize the entry".into(),
            Hint::BadSetup => "the proxy refused the scope, format or cache".into(),
            Hint::StaleCache => "the proxy no longer knows the cache id".into(),
            Hint::None => "the proxy failed the request".into(),
        },
        CohError::Timeout | CohError::Closed | CohError::Protocol(_) | CohError::Setup(_) => err.to_string(),
    }
}

fn error_type(err: &CohError) -> &'static str {
    match err {
        CohError::Status { .. } => "grpc_status",
        CohError::InBand { .. } => "in_band",
        CohError::Timeout => "timeout",
        CohError::Closed => "stream_closed",
        CohError::Protocol(_) => "protocol",
        CohError::Setup(_) => "setup",
    }
}

/// The contract error for a failure during `stage` at run time.
pub(crate) fn classify(stage: Stage, err: &CohError) -> SinkError {
    let message = format!("coherence {} failed: {}", stage.as_str(), describe(err));
    let error = match (kind(err), stage) {
        (Kind::BadEntry, Stage::Write) => SinkError::permanent(message),
        (Kind::Refused, _) if matches!(err, CohError::Setup(_)) => SinkError::config(message),
        _ => SinkError::temporary(message),
    };
    error.with_error_type(error_type(err))
}

/// The contract error for a failure of the start-up check: refusals (credentials, protocol,
/// scope, serializer) are configuration errors there (exit 2); the rest keeps its class.
pub(crate) fn classify_at_open(err: &CohError) -> SinkError {
    match kind(err) {
        Kind::Refused => SinkError::config(format!("coherence start-up check failed: {}", describe(err)))
            .with_error_type(error_type(err)),
        _ => classify(Stage::Handshake, err),
    }
}

#[cfg(test)]
mod tests {
    use sinks_contract::ErrorClass;

    use super::*;

    fn status(code: Code, message: &str) -> CohError {
        CohError::status(&tonic::Status::new(code, message))
    }

    /// One row per line of the table in the module docs: (failure, stage, class at run
    /// time, class at start-up).
    #[test]
    fn class_table() {
        use ErrorClass::{Config, Permanent, Temporary};
        let rows: Vec<(CohError, Stage, ErrorClass, ErrorClass)> = vec![
            (status(Code::Unavailable, "Connection refused"), Stage::Write, Temporary, Temporary),
            (status(Code::DeadlineExceeded, ""), Stage::Write, Temporary, Temporary),
            (CohError::Timeout, Stage::Write, Temporary, Temporary),
            (CohError::Closed, Stage::Write, Temporary, Temporary),
            (status(Code::ResourceExhausted, ""), Stage::Write, Temporary, Temporary),
            (status(Code::Cancelled, "Received RST_STREAM with error code 8"), Stage::Write, Temporary, Temporary),
            (status(Code::Aborted, ""), Stage::Write, Temporary, Temporary),
            (status(Code::Unknown, ""), Stage::Write, Temporary, Temporary),
            (status(Code::Unauthenticated, ""), Stage::Write, Temporary, Config),
            (status(Code::PermissionDenied, ""), Stage::Write, Temporary, Config),
            (status(Code::Unimplemented, ""), Stage::Handshake, Temporary, Config),
            (
                status(
                    Code::Internal,
                    "io.grpc.StatusRuntimeException: INVALID_ARGUMENT: cannot locate ConfigurableCacheFactory with scope name nosuch",
                ),
                Stage::Handshake,
                Temporary,
                Config,
            ),
            (
                status(
                    Code::Internal,
                    "java.lang.IllegalStateException: Cannot find a serializer configuration for name 'bogus'",
                ),
                Stage::Read,
                Temporary,
                Config,
            ),
            (status(Code::InvalidArgument, "bad key"), Stage::Write, Permanent, Temporary),
            (
                status(Code::Internal, "UNKNOWN: Caught an exception while serializing or deserializing: x"),
                Stage::Write,
                Permanent,
                Temporary,
            ),
            (
                CohError::InBand { hint: Hint::of("Could not deserialize to type class java.lang.Object") },
                Stage::Write,
                Permanent,
                Temporary,
            ),
            (
                CohError::InBand { hint: Hint::of("No cache proxy exist for id 12345 request=Put") },
                Stage::Write,
                Temporary,
                Temporary,
            ),
            (
                CohError::InBand {
                    hint: Hint::of("Missing channel id in request, has an EnsureCache request been sentPut"),
                },
                Stage::Write,
                Temporary,
                Temporary,
            ),
            (
                CohError::InBand { hint: Hint::of("No storage-enabled nodes exist for service PartitionedCache") },
                Stage::Write,
                Temporary,
                Temporary,
            ),
            (status(Code::Internal, "something else"), Stage::Write, Temporary, Temporary),
            (status(Code::DataLoss, ""), Stage::Write, Temporary, Temporary),
            (CohError::Protocol("no cache id"), Stage::Handshake, Temporary, Temporary),
            (CohError::Setup("tls_ca_file cannot be read".into()), Stage::Handshake, Config, Config),
        ];
        for (err, stage, run, open) in rows {
            let classified = classify(stage, &err);
            assert_eq!(classified.class(), run, "{err:?} at run time");
            assert_eq!(classify_at_open(&err).class(), open, "{err:?} at start-up");
            assert!(classified.message().starts_with("coherence "));
            for server_text in ["nosuch", "bogus", "RST_STREAM", "12345", "java."] {
                assert!(!classified.message().contains(server_text), "server text is not echoed: {classified}");
            }
        }
    }

    #[test]
    fn a_poison_entry_is_permanent_only_when_writing_it() {
        let bad = CohError::InBand { hint: Hint::BadEntry };
        assert_eq!(classify(Stage::Write, &bad).class(), ErrorClass::Permanent);
        assert_eq!(classify(Stage::Read, &bad).class(), ErrorClass::Temporary);
        assert_eq!(classify(Stage::Handshake, &bad).class(), ErrorClass::Temporary);
    }

    #[test]
    fn stale_streams_are_reopened() {
        assert!(CohError::InBand { hint: Hint::StaleCache }.breaks_stream());
        assert!(CohError::Timeout.breaks_stream());
        assert!(!CohError::InBand { hint: Hint::BadEntry }.breaks_stream());
    }
}
