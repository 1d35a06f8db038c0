//! Turns Oracle NoSQL failures (the SDK's `NoSQLError`: a code and a message) into the
//! contract's error classes.
//!
//! | failure | class |
//! |---|---|
//! | throttling: READ/WRITE_LIMIT_EXCEEDED (50, 51), SIZE_LIMIT_EXCEEDED (52), OPERATION_LIMIT_EXCEEDED (53) | temporary, at least 100 ms before the retry |
//! | REQUEST_TIMEOUT (100), a timed-out transport | temporary (a timed-out put may have committed: the redelivery finds the row and is a duplicate) |
//! | SERVER_ERROR (101, also every transport error the SDK sees: refused, reset), SERVICE_UNAVAILABLE (102), TABLE_BUSY (103), SECURITY_INFO_UNAVAILABLE (104), RETRY_AUTHENTICATION (105), TABLE_NOT_READY (26) | temporary |
//! | a non-2xx HTTP status or a response without the echoed request id (the SDK reports them as ILLEGAL_ARGUMENT) | temporary: the service never judged the row |
//! | TABLE_NOT_FOUND (2), INVALID_AUTHORIZATION (11), INSUFFICIENT_PERMISSION (12) | configuration at start-up (exit 2); temporary at run time (a configuration problem must not dead-letter live traffic) |
//! | ILLEGAL_ARGUMENT (4) from the service, ROW_SIZE_LIMIT_EXCEEDED (5), KEY_SIZE_LIMIT_EXCEEDED (6), REQUEST_SIZE_LIMIT_EXCEEDED (8), BAD_PROTOCOL_MESSAGE (17) | permanent for that message (the table's schema is checked at start-up, so a row the service refuses is that row's problem) |
//! | OPERATION_NOT_SUPPORTED (21), UNSUPPORTED_PROTOCOL (24), TABLE_EXISTS (9) and other DDL refusals | configuration |
//! | anything else (UNKNOWN_ERROR, ILLEGAL_STATE, codes this build does not know) | temporary (never assume a write failed for good) |
//!
//! Messages carry the operation and the code only: the service's text can quote row values
//! (payload content), so it is never logged or attached.

use std::time::Duration;

use oracle_nosql_rust_sdk::{NoSQLError, NoSQLErrorCode};
use sinks_contract::SinkError;

/// Least wait before retrying after throttling (the SDK gives no hint of its own).
pub(crate) const THROTTLE_DELAY: Duration = Duration::from_millis(100);

/// What a failed request tells about the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The service is throttling (a limit was exceeded).
    Throttled,
    /// No answer in time.
    Timeout,
    /// No usable answer: connection refused or reset, a server error, an HTTP error status.
    Unavailable,
    /// The table does not exist.
    TableMissing,
    /// Credentials or permissions were refused.
    Denied,
    /// The service refused this row (argument or size).
    Rejected,
    /// The service does not support what the sink asked for, or refused DDL.
    Unsupported,
    /// Anything else.
    Unknown,
}

impl Failure {
    fn error_type(self) -> &'static str {
        match self {
            Self::Throttled => "throttled",
            Self::Timeout => "timeout",
            Self::Unavailable => "unavailable",
            Self::TableMissing => "table_not_found",
            Self::Denied => "denied",
            Self::Rejected => "rejected",
            Self::Unsupported => "unsupported",
            Self::Unknown => "unknown",
        }
    }
}

/// The HTTP status of the SDK's "got unexpected http status: 503 …" message.
fn http_status(message: &str) -> Option<u16> {
    const MARKER: &str = "unexpected http status: ";
    let start = message.find(MARKER)? + MARKER.len();
    message.get(start..start + 3)?.parse().ok()
}

/// Classifies an SDK error without keeping its text.
pub(crate) fn failure_of(err: &NoSQLError) -> Failure {
    use NoSQLErrorCode as C;
    match err.code {
        C::ReadLimitExceeded | C::WriteLimitExceeded | C::SizeLimitExceeded | C::OperationLimitExceeded => {
            Failure::Throttled
        }
        C::RequestTimeout => Failure::Timeout,
        C::ServerError
        | C::ServiceUnavailable
        | C::TableBusy
        | C::SecurityInfoUnavailable
        | C::RetryAuthentication
        | C::TableNotReady => Failure::Unavailable,
        C::TableNotFound => Failure::TableMissing,
        C::InvalidAuthorization | C::InsufficientPermission => Failure::Denied,
        C::IllegalArgument => {
            // The SDK reports transport-level surprises with this code too.
            let m = err.message.as_str();
            match http_status(m) {
                Some(401 | 403) => Failure::Denied,
                Some(_) => Failure::Unavailable,
                None if m.contains("request_id") || m.contains("reqwest error") => Failure::Unavailable,
                None => Failure::Rejected,
            }
        }
        C::RowSizeLimitExceeded | C::KeySizeLimitExceeded | C::RequestSizeLimitExceeded | C::BadProtocolMessage => {
            Failure::Rejected
        }
        C::OperationNotSupported
        | C::UnsupportedProtocol
        | C::UnsupportedQueryVersion
        | C::TableExists
        | C::TableLimitExceeded
        | C::IndexLimitExceeded
        | C::EvolutionLimitExceeded
        | C::TableDeploymentLimitExceeded
        | C::TenantDeploymentLimitExceeded => Failure::Unsupported,
        _ => Failure::Unknown,
    }
}

/// The contract error for a failed `operation` (`put`, `get`, `get table`, …) at run time.
pub(crate) fn classify(operation: &str, err: &NoSQLError) -> SinkError {
    let failure = failure_of(err);
    let code = err.code;
    let message = |what: &str| format!("nosql {operation} failed: {what} ({code:?})");
    let error = match failure {
        Failure::Throttled => {
            SinkError::throttled(message("the service is throttling requests")).with_retry_after(THROTTLE_DELAY)
        }
        Failure::Timeout => SinkError::temporary(message("no answer in time")),
        Failure::Unavailable => SinkError::temporary(match http_status(&err.message) {
            Some(status) => message(&format!("the endpoint answered http status {status}")),
            None => message("the service is unavailable (connect, reset or server error)"),
        }),
        Failure::TableMissing => SinkError::temporary(message("the table does not exist")),
        Failure::Denied => SinkError::temporary(message("credentials or permissions were refused")),
        Failure::Rejected => SinkError::permanent(message("the service refused this row")),
        Failure::Unsupported => SinkError::config(message("the service does not support the request")),
        Failure::Unknown => SinkError::temporary(message("unrecognized error")),
    };
    error.with_error_type(failure.error_type())
}

/// The error for a start-up check: a missing table, refused credentials and unsupported
/// requests are configuration errors there (exit 2); the rest keeps its class.
pub(crate) fn classify_at_open(operation: &str, err: &NoSQLError) -> SinkError {
    let message = |what: &str| format!("nosql start-up {operation} failed: {what} ({:?})", err.code);
    match failure_of(err) {
        Failure::TableMissing => SinkError::config(message("the table does not exist (create it, or set auto_create)")),
        Failure::Denied => SinkError::config(message("credentials or permissions were refused")),
        Failure::Unsupported | Failure::Rejected => SinkError::config(message("the service refused the request")),
        _ => classify(operation, err),
    }
    .with_error_type(failure_of(err).error_type())
}

#[cfg(test)]
mod tests {
    use sinks_contract::ErrorClass;

    use super::*;

    fn err(code: NoSQLErrorCode, message: &str) -> NoSQLError {
        NoSQLError::new(code, message)
    }

    fn class(code: NoSQLErrorCode, message: &str) -> ErrorClass {
        classify("put", &err(code, message)).class()
    }

    // One test per row of the table in the module documentation.

    #[test]
    fn throttling_is_temporary_with_a_delay() {
        for code in [
            NoSQLErrorCode::ReadLimitExceeded,
            NoSQLErrorCode::WriteLimitExceeded,
            NoSQLErrorCode::SizeLimitExceeded,
            NoSQLErrorCode::OperationLimitExceeded,
        ] {
            let e = classify("put", &err(code, "limit"));
            assert_eq!(e.class(), ErrorClass::Temporary, "{code:?}");
            assert_eq!(e.retry_after(), Some(THROTTLE_DELAY));
            assert_eq!(e.error_type(), "throttled");
            assert!(e.is_throttled());
        }
    }

    #[test]
    fn timeouts_are_temporary() {
        assert_eq!(class(NoSQLErrorCode::RequestTimeout, "reqwest error: operation timed out"), ErrorClass::Temporary);
        assert_eq!(classify("put", &err(NoSQLErrorCode::RequestTimeout, "x")).error_type(), "timeout");
    }

    #[test]
    fn unavailable_and_transport_errors_are_temporary() {
        for code in [
            NoSQLErrorCode::ServerError,
            NoSQLErrorCode::ServiceUnavailable,
            NoSQLErrorCode::TableBusy,
            NoSQLErrorCode::SecurityInfoUnavailable,
            NoSQLErrorCode::RetryAuthentication,
            NoSQLErrorCode::TableNotReady,
        ] {
            assert_eq!(class(code, "reqwest error: error sending request"), ErrorClass::Temporary, "{code:?}");
        }
    }

    #[test]
    fn http_statuses_and_missing_request_ids_are_temporary() {
        let status = err(
            NoSQLErrorCode::IllegalArgument,
            "got unexpected http status: 503 Service Unavailable, response text: x",
        );
        let e = classify("put", &status);
        assert_eq!(e.class(), ErrorClass::Temporary);
        assert!(e.message().contains("503"));
        assert!(!e.message().contains("response text"), "server text is not echoed");
        let rid = err(NoSQLErrorCode::IllegalArgument, "can't get request_id from response: missing");
        assert_eq!(classify("put", &rid).class(), ErrorClass::Temporary);
    }

    #[test]
    fn missing_table_and_refused_credentials_are_config_at_open_temporary_later() {
        for (code, message) in [
            (NoSQLErrorCode::TableNotFound, "Table not found: t"),
            (NoSQLErrorCode::InvalidAuthorization, "bad token"),
            (NoSQLErrorCode::InsufficientPermission, "no"),
            (NoSQLErrorCode::IllegalArgument, "got unexpected http status: 401 Unauthorized"),
        ] {
            let e = err(code, message);
            assert_eq!(classify_at_open("get table", &e).class(), ErrorClass::Config, "{code:?}");
            assert_eq!(classify("put", &e).class(), ErrorClass::Temporary, "{code:?}");
        }
    }

    #[test]
    fn refused_rows_are_permanent() {
        for code in [
            NoSQLErrorCode::IllegalArgument,
            NoSQLErrorCode::RowSizeLimitExceeded,
            NoSQLErrorCode::KeySizeLimitExceeded,
            NoSQLErrorCode::RequestSizeLimitExceeded,
            NoSQLErrorCode::BadProtocolMessage,
        ] {
            let e = classify("put", &err(code, "Illegal value: secret-payload-text"));
            assert_eq!(e.class(), ErrorClass::Permanent, "{code:?}");
            assert!(!e.display_chain().contains("secret-payload-text"), "server text is not echoed");
        }
    }

    #[test]
    fn unsupported_requests_are_configuration_errors() {
        for code in
            [NoSQLErrorCode::OperationNotSupported, NoSQLErrorCode::UnsupportedProtocol, NoSQLErrorCode::TableExists]
        {
            assert_eq!(class(code, "x"), ErrorClass::Config, "{code:?}");
        }
    }

    #[test]
    fn anything_else_is_temporary() {
        for code in [NoSQLErrorCode::UnknownError, NoSQLErrorCode::IllegalState, NoSQLErrorCode::UnknownOperation] {
            assert_eq!(class(code, "x"), ErrorClass::Temporary, "{code:?}");
        }
    }
}
