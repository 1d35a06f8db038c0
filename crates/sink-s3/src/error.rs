//! Turns object-store failures into the contract's error classes.
//!
//! | failure | class |
//! |---|---|
//! | connect / request / timeout / interrupted transport errors | temporary (a timed-out put may have committed: the redelivery finds the object and is a duplicate) |
//! | HTTP 429, and 503 `SlowDown` | throttled (temporary): the store's own limit, held and written again after its delay, never a delivery spent |
//! | HTTP 5xx, 408, 409, 425 | temporary |
//! | 401 / 403 (credentials, policy) and 404 on a put (bucket missing) | temporary at run time (W14: a configuration problem must not dead-letter live traffic), fatal at start-up |
//! | any other 4xx | permanent for that message |
//! | an operation the store does not implement | configuration |
//! | anything unrecognized | temporary (never assume a write failed for good) |
//!
//! Messages carry the operation and the status only: an object-store error's own text
//! quotes the request URI (the object key, built from message ids and subjects) and the
//! server's body, so it is never logged or attached.

use std::error::Error as StdError;

use sinks_contract::SinkError;

/// What a failed request tells about the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The server answered this HTTP status.
    Status(u16),
    /// The store throttled the request: 429, or 503 with the `SlowDown` code.
    Throttled,
    /// No answer: connect, request, timeout or interrupted transport error.
    Transport,
    /// Credentials were refused (401 / 403).
    Denied,
    /// The object or bucket does not exist.
    NotFound,
    /// The store does not implement the operation (e.g. conditional puts disabled).
    Unsupported,
    /// Anything else.
    Unknown,
}

/// Classifies an object-store error without keeping its text.
pub(crate) fn failure_of(err: &object_store::Error) -> Failure {
    use object_store::Error as E;
    match err {
        E::NotFound { .. } => Failure::NotFound,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => Failure::Denied,
        E::NotImplemented { .. } | E::NotSupported { .. } => Failure::Unsupported,
        E::Precondition { .. } => Failure::Status(412),
        E::NotModified { .. } => Failure::Status(304),
        E::AlreadyExists { .. } => Failure::Status(409),
        other => match chain_failure(other) {
            // Listings and multipart calls report statuses without the specific variants.
            Failure::Status(404) => Failure::NotFound,
            Failure::Status(401 | 403) => Failure::Denied,
            failure => failure,
        },
    }
}

/// Walks the source chain for a transport error or a status line.
fn chain_failure(err: &(dyn StdError + 'static)) -> Failure {
    let mut current: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = current {
        if e.downcast_ref::<object_store::client::HttpError>().is_some() {
            return Failure::Transport;
        }
        let text = e.to_string();
        if let Some(status) = status_in(&text) {
            if status == 429 || (status == 503 && text.contains("SlowDown")) {
                return Failure::Throttled;
            }
            return Failure::Status(status);
        }
        current = e.source();
    }
    Failure::Unknown
}

/// The status of object_store's request error texts ("Server returned non-2xx status code:
/// 503 Service Unavailable: …" / "… error response: …").
fn status_in(text: &str) -> Option<u16> {
    const MARKER: &str = "status code: ";
    let start = text.find(MARKER)? + MARKER.len();
    let digits = text.get(start..start + 3)?;
    digits.parse().ok().filter(|s| (100..600).contains(s))
}

/// True when a status is worth retrying.
fn retryable(status: u16) -> bool {
    status >= 500 || matches!(status, 408 | 409 | 425 | 429)
}

/// The contract error for a failed `operation` (`put`, `head`, `get`, `copy`, …).
pub(crate) fn classify(operation: &str, err: &object_store::Error) -> SinkError {
    let failure = failure_of(err);
    let message = |what: String| format!("s3 {operation} failed: {what}");
    let error = match failure {
        Failure::Transport => {
            SinkError::temporary(message("no answer from the endpoint (connect, reset or timeout)".into()))
        }
        Failure::Throttled => SinkError::throttled(message("the store is throttling requests (slow down)".into())),
        Failure::Status(s) if retryable(s) => SinkError::temporary(message(format!("status {s}"))),
        Failure::Status(s) if s < 400 => SinkError::temporary(message(format!("unexpected status {s}"))),
        Failure::Status(s) => SinkError::permanent(message(format!("the endpoint refused the request (status {s})"))),
        Failure::Denied => SinkError::temporary(message("credentials or bucket policy refused the request".into())),
        Failure::NotFound => SinkError::temporary(message("the bucket does not exist".into())),
        Failure::Unsupported => SinkError::config(message("the endpoint does not support the operation".into())),
        Failure::Unknown => SinkError::temporary(message("unrecognized error".into())),
    };
    error.with_error_type(match failure {
        Failure::Transport => "transport",
        Failure::Throttled => "throttled",
        Failure::Status(_) => "status",
        Failure::Denied => "denied",
        Failure::NotFound => "not_found",
        Failure::Unsupported => "unsupported",
        Failure::Unknown => "unknown",
    })
}

/// The error for a start-up probe: denial, a missing bucket and unsupported operations are
/// configuration errors there (exit 2); the rest keeps its class.
pub(crate) fn classify_at_open(err: &object_store::Error) -> SinkError {
    match failure_of(err) {
        Failure::Denied => SinkError::config("s3 start-up check failed: credentials or bucket policy refused access"),
        Failure::NotFound => SinkError::config("s3 start-up check failed: the bucket does not exist"),
        _ => classify("start-up check", err),
    }
}

#[cfg(test)]
mod tests {
    use sinks_contract::ErrorClass;

    use super::*;

    fn generic(text: &str) -> object_store::Error {
        object_store::Error::Generic { store: "S3", source: text.to_owned().into() }
    }

    #[test]
    fn status_texts() {
        assert_eq!(status_in("Server returned non-2xx status code: 503 Service Unavailable: x"), Some(503));
        assert_eq!(status_in("Server returned non-2xx status code: 400 Bad Request: "), Some(400));
        assert_eq!(status_in("nothing here"), None);
        assert_eq!(status_in("status code: abc"), None);
    }

    #[test]
    fn class_table() {
        let path = || "k".to_owned();
        let rows: Vec<(object_store::Error, ErrorClass)> = vec![
            (generic("Server returned non-2xx status code: 503 Service Unavailable: "), ErrorClass::Temporary),
            (generic("Server returned non-2xx status code: 500 Internal Server Error: "), ErrorClass::Temporary),
            (generic("Server returned non-2xx status code: 429 Too Many Requests: "), ErrorClass::Temporary),
            (generic("Server returned non-2xx status code: 408 Request Timeout: "), ErrorClass::Temporary),
            (generic("Server returned non-2xx status code: 400 Bad Request: "), ErrorClass::Permanent),
            (generic("Server returned non-2xx status code: 413 Payload Too Large: "), ErrorClass::Permanent),
            (generic("something odd"), ErrorClass::Temporary),
            (generic("Server returned non-2xx status code: 404 Not Found: "), ErrorClass::Temporary),
            (generic("Server returned non-2xx status code: 403 Forbidden: "), ErrorClass::Temporary),
            (object_store::Error::NotFound { path: path(), source: "x".into() }, ErrorClass::Temporary),
            (object_store::Error::PermissionDenied { path: path(), source: "x".into() }, ErrorClass::Temporary),
            (object_store::Error::Unauthenticated { path: path(), source: "x".into() }, ErrorClass::Temporary),
            (object_store::Error::AlreadyExists { path: path(), source: "x".into() }, ErrorClass::Temporary),
            (
                object_store::Error::NotImplemented { operation: "x".into(), implementer: "S3".into() },
                ErrorClass::Config,
            ),
        ];
        for text in [
            "Server returned non-2xx status code: 429 Too Many Requests: ",
            "Server returned non-2xx status code: 503 Service Unavailable: <Error><Code>SlowDown</Code></Error>",
        ] {
            assert!(classify("put", &generic(text)).is_throttled(), "{text}");
        }
        assert!(
            !classify("put", &generic("Server returned non-2xx status code: 503 Service Unavailable: ")).is_throttled()
        );
        for (err, class) in rows {
            let classified = classify("put", &err);
            assert_eq!(classified.class(), class, "{err}");
            assert!(classified.message().starts_with("s3 put failed: "));
            assert!(!classified.message().contains("Bad Request"), "server text is not echoed");
        }
    }

    #[test]
    fn start_up_denial_and_missing_bucket_are_config_errors() {
        let denied = object_store::Error::PermissionDenied { path: "k".into(), source: "x".into() };
        assert_eq!(classify_at_open(&denied).class(), ErrorClass::Config);
        let missing = object_store::Error::NotFound { path: "k".into(), source: "x".into() };
        assert_eq!(classify_at_open(&missing).class(), ErrorClass::Config);
        let listing = generic("Server returned non-2xx status code: 404 Not Found: ");
        assert_eq!(classify_at_open(&listing).class(), ErrorClass::Config);
        assert_eq!(
            classify_at_open(&generic("Server returned non-2xx status code: 503 x")).class(),
            ErrorClass::Temporary
        );
    }
}
