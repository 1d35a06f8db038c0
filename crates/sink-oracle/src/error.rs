//! Classification of Oracle errors into [`SinkError`] classes, by ORA code.
//!
//! | error | class | why |
//! |---|---|---|
//! | ORA-03113, 03114, 03135 (connection lost), 12541 (no listener), 12170 (connect timeout), 12514 / 12505 (service not registered yet), 12537 / 12547 / 12560 (Oracle Net), 12516 / 12519 / 12520 (no handler), 01033 / 01034 / 01089 (starting or shutting down), 01012 (not logged on), 02396 (idle timeout), 00018 / 00020 (sessions / processes exhausted), 25408 (call not replayable) | temporary | the database comes back; the session is dropped from the pool |
//! | ORA-00060 (deadlock), 00054 / 30006 (resource busy), 04021 (lock timeout), 08177 (serialization) | temporary | the batch transaction is rolled back and run again in place (`write.rs`), then retried through redelivery |
//! | ORA-01653 / 01654 / 01688 (cannot extend), 01536 (quota exceeded), 01555 (snapshot too old) | temporary | an operator adds space; the data is fine |
//! | ORA-01017 (bad credentials), 28000 (account locked), 28001 (password expired), 01045 (no CREATE SESSION), 01031 (insufficient privileges), 00942 (no such table or view), 00904 (invalid identifier), 01950 (no tablespace privilege), 12154 (connect identifier not resolved), 00900–00936 (SQL not understood) | config | fatal at start-up (exit 2); at run time temporary with an error log, never the DLQ (fixes reference W14) |
//! | ORA-12899 (value too large), 01400 (NULL into NOT NULL), 01407 (update to NULL), 02290 (check constraint), 02291 (parent key not found), 40441 (JSON syntax error), 01461 (LONG bind), 01438 (precision), 01722 (invalid number) | permanent (data) | that row can never be written; it fails alone and its batch-mates commit |
//! | ORA-00001 (unique constraint) | per mode: see `write.rs` | on the key: the row exists (a duplicate; a concurrent insert is re-run until it is seen); on another unique constraint: that row's data (permanent); never "the whole batch succeeded" (reference W2) |
//! | DPI-1047 (Instant Client not found), DPI-1072 (client too old) | config | exit 2 with what to install and which variable points to it |
//! | DPI-1010 / DPI-1080 (not connected, connection closed), DPI-1067 (call timeout), other DPI errors | temporary | |
//! | anything else | temporary | unknown trouble is retried, never dead-lettered |
//!
//! Server messages can quote values (a payload fragment in some errors), so a message keeps
//! only the error code, our description and, for the errors that name one, the column or
//! constraint (quoted identifiers, parsed from the message).

use sinks_contract::{ErrorClass, SinkError};

use crate::driver::{DbError, DriverError};

/// ORA codes meaning "this row's data is unacceptable".
const DATA_ERRORS: [i32; 9] = [12899, 1400, 1407, 2290, 2291, 40441, 1461, 1438, 1722];
/// ORA codes meaning "the destination is misconfigured".
const CONFIG_ERRORS: [i32; 10] = [1017, 28000, 28001, 1045, 1031, 942, 904, 1950, 12154, 955];
/// ORA codes after which the session is gone (it is dropped, not returned to the pool).
const SESSION_LOST: [i32; 19] = [
    3113, 3114, 3135, 12541, 12170, 12514, 12505, 12537, 12547, 12560, 12516, 12519, 12520, 1033, 1034, 1089, 1012,
    2396, 25408,
];
/// ORA codes after which the same transaction, run again, usually succeeds.
const LOCK_RETRY: [i32; 5] = [60, 54, 30006, 4021, 8177];

/// DPI error: the Oracle Client library cannot be loaded.
pub(crate) const DPI_NO_CLIENT: i32 = 1047;

/// The class of an ORA code (ORA-00001 is classified by the write path, not here).
pub(crate) fn class_of_code(code: i32) -> ErrorClass {
    if DATA_ERRORS.contains(&code) {
        ErrorClass::Permanent
    } else if CONFIG_ERRORS.contains(&code) || (900..=936).contains(&code) {
        ErrorClass::Config
    } else {
        ErrorClass::Temporary
    }
}

/// True when the session cannot be used after `code`.
pub(crate) fn breaks_session(code: i32) -> bool {
    SESSION_LOST.contains(&code)
}

/// True when running the batch transaction again may succeed at once.
pub(crate) fn is_lock_retry(e: &DriverError) -> bool {
    e.ora_code().is_some_and(|c| LOCK_RETRY.contains(&c))
}

/// True for a data error of one row.
pub(crate) fn is_data_error(code: i32) -> bool {
    class_of_code(code) == ErrorClass::Permanent
}

/// A short description of well-known codes (our words).
fn describe(code: i32) -> &'static str {
    match code {
        1 => "unique constraint violated",
        60 => "deadlock",
        54 | 30006 => "resource busy",
        3113 | 3114 | 3135 => "connection to the database lost",
        12541 => "no listener",
        12170 => "connect timeout",
        12514 | 12505 => "service not known to the listener",
        1033 | 1034 | 1089 => "database starting or shutting down",
        1017 => "invalid username or password",
        28000 => "account locked",
        28001 => "password expired",
        1045 => "user lacks CREATE SESSION",
        1031 => "insufficient privileges",
        942 => "table or view does not exist",
        904 => "invalid identifier (a mapped column is missing)",
        955 => "name already used by an existing object",
        12154 => "connect identifier not resolved (check sink.dsn and sink.config_dir)",
        1950 => "no privileges on tablespace",
        12899 => "value too large for column",
        1400 | 1407 => "null in a not-null column",
        2290 => "check constraint violated (invalid json?)",
        2291 => "parent key not found",
        40441 => "json syntax error",
        1461 => "value too long for a varchar2 bind",
        1438 => "number larger than the column allows",
        1722 => "invalid number",
        c if (900..=936).contains(&c) => "sql not understood",
        _ => "database error",
    }
}

/// Hints for configuration errors (what to check), our words.
fn hint(code: i32) -> &'static str {
    match code {
        1017 | 28000 | 28001 => "; check sink.user, the variable named by sink.password_env and the wallet settings",
        942 => {
            "; create it (`nats-sink ddl CONFIG` prints the statements) or set sink.auto_create, and check the schema owner and grants"
        }
        904 => "; the table does not match the column mapping: compare it with `nats-sink ddl CONFIG`",
        1031 | 1950 | 1045 => "; grant the runtime user the privileges listed in docs/oracle-sink.md",
        _ => "",
    }
}

/// The identifier the message names: the last `"…"`-quoted name (12899, 01400) or the
/// `(OWNER.NAME)` of a constraint (00001, 02290, 02291).
pub(crate) fn named_object(e: &DbError) -> Option<String> {
    let m = &e.message;
    let ok =
        |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '#' | '.'));
    match e.code {
        12899 | 1400 | 1407 => {
            let start = m.find('"')?;
            let end = m.rfind('"')?;
            let name = m.get(start + 1..end)?.replace("\".\"", ".");
            ok(&name).then_some(name)
        }
        1 | 2290 | 2291 => {
            let start = m.find('(')? + 1;
            let end = start + m[start..].find(')')?;
            let name = &m[start..end];
            ok(name).then(|| name.to_owned())
        }
        _ => None,
    }
}

fn ora(code: i32) -> String {
    format!("ORA-{code:05}")
}

/// Wraps a database error into a [`SinkError`] of its class. `action` says what the sink
/// was doing (lowercase). Never includes the server's message text.
pub(crate) fn classify_db(e: &DbError, action: &str) -> SinkError {
    let named = named_object(e).map(|n| format!(", {n}")).unwrap_or_default();
    let message = format!("{action}: {}: {}{named}{}", describe(e.code), ora(e.code), hint(e.code));
    match class_of_code(e.code) {
        ErrorClass::Permanent => SinkError::permanent(message).with_error_type("DataError"),
        ErrorClass::Config => SinkError::config(message),
        ErrorClass::Temporary => SinkError::temporary(message),
    }
}

/// Wraps any driver error into a [`SinkError`] of its class.
pub(crate) fn classify(e: &DriverError, action: &str) -> SinkError {
    match e {
        DriverError::Db(d) => classify_db(d, action),
        DriverError::Client { code, .. } if *code == DPI_NO_CLIENT => SinkError::config(format!(
            "{action}: DPI-1047: the Oracle Client library (libclntsh) cannot be loaded: install Oracle Instant Client \
             (Basic or Basic Light, 19c or later) and point LD_LIBRARY_PATH at its directory (or run ldconfig for it)"
        )),
        DriverError::Client { code: 1072, .. } => SinkError::config(format!(
            "{action}: DPI-1072: the installed Oracle Client is too old: install Oracle Instant Client 19c or later"
        )),
        DriverError::Client { code, .. } => {
            SinkError::temporary(format!("{action}: oracle client error DPI-{code:04}"))
        }
        DriverError::Other(m) => SinkError::temporary(format!("{action}: driver error: {m}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_table() {
        use ErrorClass::*;
        for (code, class) in [
            (3113, Temporary),
            (3114, Temporary),
            (12541, Temporary),
            (12170, Temporary),
            (60, Temporary),
            (54, Temporary),
            (30006, Temporary),
            (1653, Temporary),
            (1017, Config),
            (942, Config),
            (904, Config),
            (1031, Config),
            (12154, Config),
            (933, Config),
            (12899, Permanent),
            (1400, Permanent),
            (2290, Permanent),
            (40441, Permanent),
            (2291, Permanent),
            (1461, Permanent),
            (99999, Temporary),
        ] {
            assert_eq!(class_of_code(code), class, "ORA-{code:05}");
            assert_eq!(classify(&DriverError::Db(DbError::new(code, 0, "x")), "writing").class(), class, "{code}");
        }
        for code in [3113, 12541, 1033] {
            assert!(breaks_session(code));
        }
        assert!(!breaks_session(12899));
        assert!(is_lock_retry(&DriverError::Db(DbError::new(60, 0, "deadlock"))));
        let missing = DriverError::Client { code: 1047, message: "DPI-1047: Cannot locate".into() };
        let e = classify(&missing, "connecting to oracle");
        assert_eq!(e.class(), Config);
        assert!(e.message().contains("Instant Client") && e.message().contains("LD_LIBRARY_PATH"), "{}", e.message());
        assert_eq!(classify(&DriverError::Client { code: 1080, message: String::new() }, "x").class(), Temporary);
        assert_eq!(classify(&DriverError::Other("boom".into()), "x").class(), Temporary);
    }

    #[test]
    fn values_quoted_by_the_server_never_reach_the_message() {
        let e = DbError::new(
            12899,
            3,
            "ORA-12899: value too large for column \"APP\".\"EVENTS\".\"SUBJECT\" (actual: 57, maximum: 24)",
        );
        let s = classify_db(&e, "writing to EVENTS");
        assert_eq!(s.message(), "writing to EVENTS: value too large for column: ORA-12899, APP.EVENTS.SUBJECT");
        assert_eq!(s.error_type(), "DataError");
        let secret = DbError::new(1722, 0, "ORA-01722: invalid number 'secret-42'");
        assert!(!classify_db(&secret, "x").display_chain().contains("secret"));
        let dup = DbError::new(1, 0, "ORA-00001: unique constraint (APP.EVENTS_PK) violated");
        assert_eq!(named_object(&dup).as_deref(), Some("APP.EVENTS_PK"));
        let odd = DbError::new(1, 0, "ORA-00001: unique constraint (weird name') violated");
        assert_eq!(named_object(&odd), None);
    }
}
