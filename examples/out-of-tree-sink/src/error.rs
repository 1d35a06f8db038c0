//! How SQLite's errors map onto the contract's three failure classes. The runner reads only
//! the class: temporary is retried later, permanent is dead-lettered alone, configuration
//! stops start-up (and counts as temporary at run time).

use rusqlite::ErrorCode;
use sinks_contract::SinkError;

/// Classifies a SQLite error met while doing `what` (a lowercase phrase: "inserting a row").
/// The message never holds a payload: SQLite's errors do not quote bound values.
pub fn classify(what: &str, error: rusqlite::Error) -> SinkError {
    let message = format!("sqlite: {what}");
    let classified = match error.sqlite_error_code() {
        // This row can never be stored: too big for the database, or refused by a constraint.
        Some(ErrorCode::TooBig | ErrorCode::ConstraintViolation | ErrorCode::TypeMismatch) => {
            SinkError::permanent(message)
        }
        // The database itself is wrong: not a database, read-only, not allowed.
        Some(ErrorCode::NotADatabase | ErrorCode::ReadOnly | ErrorCode::PermissionDenied) => SinkError::config(message),
        // Busy, locked, disk full, I/O errors, a file that cannot be opened right now, and
        // anything unknown: a later retry may succeed.
        _ => SinkError::temporary(message),
    };
    classified.with_source(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::ErrorClass;

    fn sqlite(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    #[test]
    fn classes_follow_the_error_code() {
        assert_eq!(classify("x", sqlite(rusqlite::ffi::SQLITE_BUSY)).class(), ErrorClass::Temporary);
        assert_eq!(classify("x", sqlite(rusqlite::ffi::SQLITE_CANTOPEN)).class(), ErrorClass::Temporary);
        assert_eq!(classify("x", sqlite(rusqlite::ffi::SQLITE_TOOBIG)).class(), ErrorClass::Permanent);
        assert_eq!(classify("x", sqlite(rusqlite::ffi::SQLITE_READONLY)).class(), ErrorClass::Config);
        assert_eq!(
            classify("inserting a row", sqlite(rusqlite::ffi::SQLITE_BUSY)).message(),
            "sqlite: inserting a row"
        );
    }
}
