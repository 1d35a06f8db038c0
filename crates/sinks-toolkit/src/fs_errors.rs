//! Classification of filesystem errors into [`SinkError`] classes, for the sinks that write
//! local files (the file sink, the review package sink).
//!
//! A file write fails because of the destination, almost never because of the message, so
//! unknown errors are retried rather than dead-lettered. The OS error number decides when it
//! is known; otherwise the [`std::io::ErrorKind`] does (some helpers wrap OS errors and keep
//! only the kind).
//!
//! | error | class | why |
//! |---|---|---|
//! | `ENOSPC`, `EDQUOT` (`StorageFull`, `QuotaExceeded`) | temporary | disk or quota full; space can be freed and the write retried |
//! | `EIO` | temporary | device error; it may clear (remount, failover) and redelivery is safe |
//! | `ENOENT`, `ENOTDIR` (`NotFound`, `NotADirectory`) | temporary | the root or a directory below it vanished (removed, unmounted); a sink does not recreate its root behind a missing mount |
//! | `EAGAIN`, `EINTR`, `EBUSY`, `ETIMEDOUT`, `ESTALE`, `EMFILE`, `ENFILE`, `ENOMEM` | temporary | transient resource or network-filesystem conditions |
//! | `EACCES`, `EPERM` (`PermissionDenied`) | config | the root is not writable by this process; an operator fixes it. Counted as a temporary failure at run time (retried with a loud log), fatal in `open` |
//! | `EROFS` (`ReadOnlyFilesystem`) | config | the filesystem is mounted read-only; same handling as permission errors |
//! | `ENAMETOOLONG` (`InvalidFilename`) | config | the sinks bound their names (file sink components ≤ 120 bytes, package ids 36), so only an overlong root path gets here |
//! | `EXDEV`, `EOPNOTSUPP`, `EINVAL` (`CrossesDevices`, `Unsupported`) | config | the filesystem cannot hard-link, rename in place or fsync a directory |
//! | `EISDIR` (`IsADirectory`) | permanent | a directory occupies this message's file name; retrying this message cannot succeed |
//! | `ELOOP` | permanent | a symlink sits where this message's file goes; the sink refuses to follow it |
//! | anything else | temporary | unknown destination trouble is retried, never dead-lettered |

use std::io;

use sinks_contract::{ErrorClass, SinkError};

/// The class of a filesystem error (see the module table).
pub fn class_of(err: &io::Error) -> ErrorClass {
    if let Some(code) = err.raw_os_error() {
        return class_of_errno(code);
    }
    match err.kind() {
        io::ErrorKind::PermissionDenied
        | io::ErrorKind::ReadOnlyFilesystem
        | io::ErrorKind::InvalidFilename
        | io::ErrorKind::CrossesDevices
        | io::ErrorKind::Unsupported => ErrorClass::Config,
        io::ErrorKind::IsADirectory => ErrorClass::Permanent,
        _ => ErrorClass::Temporary,
    }
}

fn class_of_errno(code: i32) -> ErrorClass {
    match code {
        libc::EACCES
        | libc::EPERM
        | libc::EROFS
        | libc::ENAMETOOLONG
        | libc::EXDEV
        | libc::EOPNOTSUPP
        | libc::EINVAL => ErrorClass::Config,
        libc::EISDIR | libc::ELOOP => ErrorClass::Permanent,
        // ENOSPC, EDQUOT, EIO, ENOENT, ENOTDIR, EAGAIN, EINTR, EBUSY, ETIMEDOUT, ESTALE,
        // EMFILE, ENFILE, ENOMEM and everything unknown.
        _ => ErrorClass::Temporary,
    }
}

/// Wraps `err` into a [`SinkError`] of its class, with `action` (what the sink was doing,
/// lowercase, no trailing period) as the message and `err` as the source.
pub fn classify(err: io::Error, action: &str) -> SinkError {
    let error = match class_of(&err) {
        ErrorClass::Temporary => SinkError::temporary(action),
        ErrorClass::Permanent => SinkError::permanent(action),
        ErrorClass::Config => SinkError::config(action),
    };
    error.with_source(err)
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
            (libc::ENOTDIR, ErrorClass::Temporary),
            (libc::EAGAIN, ErrorClass::Temporary),
            (libc::EINTR, ErrorClass::Temporary),
            (libc::EBUSY, ErrorClass::Temporary),
            (libc::ETIMEDOUT, ErrorClass::Temporary),
            (libc::ESTALE, ErrorClass::Temporary),
            (libc::EMFILE, ErrorClass::Temporary),
            (libc::ENFILE, ErrorClass::Temporary),
            (libc::ENOMEM, ErrorClass::Temporary),
            (libc::EACCES, ErrorClass::Config),
            (libc::EPERM, ErrorClass::Config),
            (libc::EROFS, ErrorClass::Config),
            (libc::ENAMETOOLONG, ErrorClass::Config),
            (libc::EXDEV, ErrorClass::Config),
            (libc::EOPNOTSUPP, ErrorClass::Config),
            (libc::EINVAL, ErrorClass::Config),
            (libc::EISDIR, ErrorClass::Permanent),
            (libc::ELOOP, ErrorClass::Permanent),
            (libc::EPROTO, ErrorClass::Temporary),
        ];
        for (code, class) in table {
            let err = io::Error::from_raw_os_error(code);
            assert_eq!(class_of(&err), class, "{err}");
        }
    }

    #[test]
    fn kind_table_for_wrapped_errors() {
        let table = [
            (io::ErrorKind::StorageFull, ErrorClass::Temporary),
            (io::ErrorKind::QuotaExceeded, ErrorClass::Temporary),
            (io::ErrorKind::NotFound, ErrorClass::Temporary),
            (io::ErrorKind::NotADirectory, ErrorClass::Temporary),
            (io::ErrorKind::Interrupted, ErrorClass::Temporary),
            (io::ErrorKind::Other, ErrorClass::Temporary),
            (io::ErrorKind::PermissionDenied, ErrorClass::Config),
            (io::ErrorKind::ReadOnlyFilesystem, ErrorClass::Config),
            (io::ErrorKind::InvalidFilename, ErrorClass::Config),
            (io::ErrorKind::CrossesDevices, ErrorClass::Config),
            (io::ErrorKind::Unsupported, ErrorClass::Config),
            (io::ErrorKind::IsADirectory, ErrorClass::Permanent),
        ];
        for (kind, class) in table {
            let err = io::Error::new(kind, "wrapped by a helper");
            assert_eq!(class_of(&err), class, "{kind:?}");
        }
    }

    #[test]
    fn classify_keeps_message_and_source() {
        let e = classify(io::Error::from_raw_os_error(libc::ENOSPC), "cannot write temp file");
        assert_eq!(e.class(), ErrorClass::Temporary);
        assert_eq!(e.message(), "cannot write temp file");
        assert!(e.display_chain().starts_with("cannot write temp file: "));
        assert!(classify(io::Error::from_raw_os_error(libc::EISDIR), "x").is_permanent());
        assert_eq!(classify(io::Error::from_raw_os_error(libc::EROFS), "x").class(), ErrorClass::Config);
    }
}
