//! Classification of the spool's filesystem errors into [`SinkError`] classes.
//!
//! A spool write fails because of the local disk, not because of the message, so unknown
//! errors are retried, never dead-lettered.
//!
//! | error | class | why |
//! |---|---|---|
//! | `EACCES`, `EPERM`, `EROFS` | config | the directory is not writable by this process; fatal in `open`, retried (loudly) at run time |
//! | `EXDEV`, `EOPNOTSUPP`, `EINVAL` | config | the filesystem cannot hard-link or fsync a directory |
//! | `ENOSPC`, `EDQUOT`, `EIO`, `ENOENT` and everything else | temporary | a full or failing disk, a vanished directory: retried; nothing is acknowledged that is not spooled |
//! | the spool's own `max_records` / `max_bytes` reached | temporary | fail closed until replay frees space |

use std::io;

use sinks_contract::{ErrorClass, SinkError};

/// The class of a filesystem error (see the module table).
pub(crate) fn class_of(err: &io::Error) -> ErrorClass {
    match err.raw_os_error() {
        Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::EXDEV | libc::EOPNOTSUPP | libc::EINVAL) => {
            ErrorClass::Config
        }
        Some(_) => ErrorClass::Temporary,
        None => match err.kind() {
            io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem | io::ErrorKind::Unsupported => {
                ErrorClass::Config
            }
            _ => ErrorClass::Temporary,
        },
    }
}

/// Wraps `err` into a [`SinkError`] of its class, with `action` as the message.
pub(crate) fn classify(err: io::Error, action: &str) -> SinkError {
    match class_of(&err) {
        ErrorClass::Config => SinkError::config(action),
        ErrorClass::Permanent => SinkError::permanent(action),
        ErrorClass::Temporary => SinkError::temporary(action),
    }
    .with_source(err)
}

/// The error of a full spool.
pub(crate) fn full(what: &str) -> SinkError {
    SinkError::temporary(format!("spool is full ({what}); replay it to free space"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_table() {
        let table = [
            (libc::ENOSPC, ErrorClass::Temporary),
            (libc::EDQUOT, ErrorClass::Temporary),
            (libc::EIO, ErrorClass::Temporary),
            (libc::ENOENT, ErrorClass::Temporary),
            (libc::EACCES, ErrorClass::Config),
            (libc::EPERM, ErrorClass::Config),
            (libc::EROFS, ErrorClass::Config),
            (libc::EXDEV, ErrorClass::Config),
            (libc::EOPNOTSUPP, ErrorClass::Config),
            (libc::EINVAL, ErrorClass::Config),
            (libc::EAGAIN, ErrorClass::Temporary),
        ];
        for (code, class) in table {
            assert_eq!(class_of(&io::Error::from_raw_os_error(code)), class, "errno {code}");
        }
        assert_eq!(class_of(&io::Error::from(io::ErrorKind::PermissionDenied)), ErrorClass::Config);
        assert_eq!(class_of(&io::Error::other("x")), ErrorClass::Temporary);
        assert!(full("records").message().contains("spool is full"));
    }
}
