//! Classification of MySQL / MariaDB errors into [`SinkError`] classes.
//!
//! | error | class | why |
//! |---|---|---|
//! | 1213 deadlock, 1205 lock wait timeout | temporary | retrying the transaction succeeds |
//! | 1290, 1836 read-only server, 1792 read-only transaction | temporary | a failover or maintenance ends |
//! | 1040 too many connections, 1159/1161 network timeouts, 1927 connection killed, 1053 server shutdown | temporary | the server comes back |
//! | client-side connection errors (2002, 2003, 2006, 2013: refused, unreachable, gone away, lost), TLS and timeouts | temporary | the server comes back |
//! | 1045 / 1698 access denied, 1044 / 1142 / 1143 no privilege, 1049 unknown database, 1146 no such table, 1054 unknown column, 1064 syntax, 1364 missing default | config | fatal at start-up (exit 2); at run time temporary with an error log, never the DLQ (fixes reference W14) |
//! | 1406 data too long, 1048 null in a NOT NULL column, 1366 / 1292 / 1265 incorrect value, 1264 out of range, 3140 invalid JSON, 4025 CHECK constraint (MariaDB `json_valid`), 1452 / 1451 foreign key, 3819 check constraint | permanent (data) | that row can never be written; it is isolated and dead-lettered alone |
//! | 1062 duplicate key | temporary | only reachable in a race with another writer; the retry sees the row and reports a duplicate |
//! | anything else | temporary | unknown trouble is retried, never dead-lettered |
//!
//! Server messages can quote the offending value (a payload fragment), so only the error
//! code, SQLSTATE and the column name are kept.

use mysql_async::Error;
use sinks_contract::{ErrorClass, SinkError};

/// Error codes meaning "this row's data is unacceptable".
const DATA_ERRORS: [u16; 13] = [1406, 1048, 1366, 1292, 1265, 1264, 3140, 4025, 1452, 1451, 3819, 1263, 1411];
/// Error codes meaning "the destination is misconfigured".
const CONFIG_ERRORS: [u16; 10] = [1045, 1698, 1044, 1142, 1143, 1049, 1146, 1054, 1064, 1364];

/// The class of a server error code.
pub(crate) fn class_of_code(code: u16) -> ErrorClass {
    if DATA_ERRORS.contains(&code) {
        ErrorClass::Permanent
    } else if CONFIG_ERRORS.contains(&code) {
        ErrorClass::Config
    } else {
        ErrorClass::Temporary
    }
}

/// A short description of well-known codes (our words; the server's text may quote values).
fn describe(code: u16) -> &'static str {
    match code {
        1045 | 1698 => "access denied",
        1044 | 1142 | 1143 => "no privilege",
        1049 => "unknown database",
        1146 => "no such table",
        1054 => "unknown column",
        1064 => "sql syntax not understood",
        1364 => "a column without default was not given",
        1213 => "deadlock",
        1205 => "lock wait timeout",
        1290 | 1836 | 1792 => "server is read-only",
        1040 => "too many connections",
        1203 | 1226 => "the user's connection or resource limit is reached",
        1406 => "data too long for column",
        1048 => "null in a not-null column",
        1366 | 1292 | 1265 => "incorrect value",
        1264 => "value out of range",
        3140 | 4025 | 3819 => "value rejected by a check (invalid json?)",
        1452 | 1451 => "foreign key constraint",
        1062 => "duplicate key",
        _ => "server error",
    }
}

/// The config field a configuration error code is about, when it is one field's.
fn field_of(code: u16) -> Option<&'static str> {
    match code {
        1045 | 1698 => Some("sink.user"),
        1044 | 1142 | 1143 => Some("sink.user"),
        1049 => Some("sink.database"),
        1146 => Some("sink.table"),
        _ => None,
    }
}

/// True for the codes of a server at its connection limits (1040 too many connections, 1203
/// and 1226 a user's limits): back-pressure, not a failure of the rows.
fn throttles(code: u16) -> bool {
    matches!(code, 1040 | 1203 | 1226)
}

/// True when `e` is a data error of one row.
pub(crate) fn is_data_error(e: &Error) -> bool {
    matches!(e, Error::Server(s) if class_of_code(s.code) == ErrorClass::Permanent)
}

/// The column named in a server message (`column 'X'` or ``column `X` ``), if any.
fn column_in(message: &str) -> Option<&str> {
    let at = message.find("column ")? + "column ".len();
    let rest = &message[at..];
    let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '`')?;
    let name = &rest[1..];
    let end = name.find(quote)?;
    Some(&name[..end])
}

/// Wraps a driver error into a [`SinkError`] of its class. `action` says what the sink was
/// doing (lowercase, no trailing period). Never includes quoted values from the server.
pub(crate) fn classify(e: &Error, action: &str) -> SinkError {
    match e {
        Error::Server(s) => {
            let column = column_in(&s.message).map(|c| format!(", column {c}")).unwrap_or_default();
            let message =
                format!("{action}: {}: mysql error {} (sqlstate {}{column})", describe(s.code), s.code, s.state);
            match class_of_code(s.code) {
                ErrorClass::Permanent => SinkError::permanent(message).with_error_type("DataError"),
                ErrorClass::Config => match field_of(s.code) {
                    Some(field) => SinkError::config(message).with_field(field),
                    None => SinkError::config(message),
                },
                ErrorClass::Temporary if throttles(s.code) => SinkError::throttled(message),
                ErrorClass::Temporary => SinkError::temporary(message),
            }
        }
        Error::Io(io) => SinkError::temporary(format!("{action}: connection error: {io}")),
        Error::Driver(d) => SinkError::temporary(format!("{action}: driver error: {d}")),
        Error::Url(u) => SinkError::config(format!("{action}: bad connection settings: {u}")),
        Error::Other(o) => SinkError::temporary(format!("{action}: {o}")),
    }
}

#[cfg(test)]
mod tests {
    use mysql_async::ServerError;

    use super::*;

    fn server(code: u16, message: &str) -> Error {
        Error::Server(ServerError { code, message: message.into(), state: "HY000".into() })
    }

    #[test]
    fn connection_limits_are_throttling() {
        for code in [1040, 1203, 1226] {
            let e = classify(&server(code, "too many"), "writing");
            assert!(e.is_throttled() && !e.is_permanent(), "{code}");
        }
        assert!(!classify(&server(1213, "deadlock"), "writing").is_throttled());
    }

    #[test]
    fn classification_table() {
        use ErrorClass::*;
        for (code, class) in [
            (1213, Temporary),
            (1205, Temporary),
            (1290, Temporary),
            (1836, Temporary),
            (1040, Temporary),
            (1053, Temporary),
            (1062, Temporary),
            (1045, Config),
            (1698, Config),
            (1044, Config),
            (1049, Config),
            (1146, Config),
            (1054, Config),
            (1064, Config),
            (1142, Config),
            (1406, Permanent),
            (1048, Permanent),
            (1366, Permanent),
            (1292, Permanent),
            (1264, Permanent),
            (3140, Permanent),
            (4025, Permanent),
            (1452, Permanent),
            (9999, Temporary),
        ] {
            assert_eq!(class_of_code(code), class, "{code}");
            assert_eq!(classify(&server(code, "x"), "writing").class(), class, "{code}");
        }
        let io = Error::Io(mysql_async::IoError::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)));
        assert_eq!(classify(&io, "connecting").class(), Temporary);
    }

    #[test]
    fn values_quoted_by_the_server_never_reach_the_message() {
        let e = server(1366, "Incorrect string value: '\\xF0\\x9F secret payload' for column `PAYLOAD_JSON` at row 3");
        let s = classify(&e, "inserting rows");
        assert_eq!(
            s.message(),
            "inserting rows: incorrect value: mysql error 1366 (sqlstate HY000, column PAYLOAD_JSON)"
        );
        assert!(!s.display_chain().contains("secret"));
        assert_eq!(s.error_type(), "DataError");
        let dup = server(1062, "Duplicate entry 'order-42-secret' for key 'PRIMARY'");
        assert!(!classify(&dup, "x").display_chain().contains("secret"));
    }
}
