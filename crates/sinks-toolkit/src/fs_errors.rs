//! Classification of filesystem errors into [`SinkError`] classes: the one table every sink
//! that writes local files uses (the file, review package and spool sinks).
//!
//! A file write fails because of the destination, almost never because of the message, so
//! unknown errors are retried rather than dead-lettered. The OS error number decides when it
//! is known; otherwise the [`std::io::ErrorKind`] does (some helpers wrap OS errors and keep
//! only the kind). The three classes, as the runner treats them:
//!
//! - **temporary**: the destination is out and can come back by itself (a full disk, a
//!   failing device, a vanished mount). Retried, the outage held and waited out; retried at
//!   start-up too.
//! - **config**: the destination is out until an operator changes something (a permission,
//!   a read-only mount, a filesystem that cannot do what the sink needs). At run time waited
//!   out like a temporary outage, logged at error level, never dead-lettered; at start-up
//!   fatal, naming `sink.directory`.
//! - **permanent**: this message's own path cannot be written, whatever happens to the
//!   destination; other messages still can. The message is dead-lettered alone.
//!
//! | error | class | why |
//! |---|---|---|
//! | `ENOSPC`, `EDQUOT` (`StorageFull`, `QuotaExceeded`) | temporary | disk or quota full; space can be freed and the write retried |
//! | `EIO` | temporary | device error; it may clear (remount, failover) and redelivery is safe |
//! | `ENOENT`, `ENOTDIR` (`NotFound`, `NotADirectory`) | temporary | the root or a directory below it vanished (removed, unmounted); a sink does not recreate its root behind a missing mount. At start-up `ENOTDIR` (a part of `sink.directory` is a regular file) is a configuration error ([`open_error`]) |
//! | `EAGAIN`, `EINTR`, `EBUSY`, `ETIMEDOUT`, `ESTALE`, `EMFILE`, `ENFILE`, `ENOMEM` | temporary | transient resource or network-filesystem conditions |
//! | `EEXIST`, `ENOTEMPTY` | temporary | the placement ([`crate::files`]) answers these itself; one that gets here is retried |
//! | `EACCES`, `EPERM` (`PermissionDenied`) | config | the root is not writable by this process; an operator fixes it |
//! | `EROFS` (`ReadOnlyFilesystem`) | config | the filesystem is mounted read-only (by an operator, or by the kernel after errors); waited out at run time like a full disk, but nothing but a remount ends it |
//! | `EXDEV`, `EOPNOTSUPP`, `EINVAL` (`CrossesDevices`, `Unsupported`) | config | the filesystem cannot hard-link, rename in place or fsync a directory |
//! | `ENAMETOOLONG` (`InvalidFilename`) | permanent | this message's path is longer than the filesystem takes (the sinks bound each name they make, so a long root plus a message's own partitions gets here); a shorter path of another message still fits. An overlong root alone fails at start-up |
//! | `EFBIG` (`FileTooLarge`) | permanent | this message's file is larger than the filesystem takes; smaller ones still fit |
//! | `EISDIR` (`IsADirectory`) | permanent | a directory occupies this message's file name; retrying this message cannot succeed |
//! | `ELOOP` | permanent | a symlink sits where this message's file goes (opened with `O_NOFOLLOW`); the sink refuses to follow it |
//! | anything else | temporary | unknown destination trouble is retried, never dead-lettered |
//!
//! At start-up ([`open_error`]) a permanent error is as fatal as a configuration error: the
//! root itself is at fault.

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
        | io::ErrorKind::CrossesDevices
        | io::ErrorKind::Unsupported => ErrorClass::Config,
        io::ErrorKind::InvalidFilename | io::ErrorKind::FileTooLarge | io::ErrorKind::IsADirectory => {
            ErrorClass::Permanent
        }
        _ => ErrorClass::Temporary,
    }
}

/// The class of an OS error number (see the module table).
pub fn class_of_errno(code: i32) -> ErrorClass {
    match code {
        libc::EACCES | libc::EPERM | libc::EROFS | libc::EXDEV | libc::EOPNOTSUPP | libc::EINVAL => ErrorClass::Config,
        libc::ENAMETOOLONG | libc::EFBIG | libc::EISDIR | libc::ELOOP => ErrorClass::Permanent,
        // ENOSPC, EDQUOT, EIO, ENOENT, ENOTDIR, EAGAIN, EINTR, EBUSY, ETIMEDOUT, ESTALE,
        // EMFILE, ENFILE, ENOMEM, EEXIST, ENOTEMPTY and everything unknown.
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

/// An error preparing the root (`sink.directory`) at start-up: what only the configuration
/// or the machine's set-up can fix is a configuration error of `sink.directory` (a
/// permission refused, a read-only file system, a part of the path that is a regular file:
/// `ENOTDIR`, which while writing means a directory removed underneath and is retried then;
/// an overlong path). The rest (a full disk, an I/O error) can heal by itself and is
/// retried.
pub fn open_error(err: io::Error, action: &str) -> SinkError {
    let class = match err.raw_os_error() {
        Some(libc::ENOTDIR) => ErrorClass::Config,
        _ => class_of(&err),
    };
    match class {
        ErrorClass::Temporary => SinkError::temporary(action),
        ErrorClass::Permanent | ErrorClass::Config => SinkError::config(action).with_field("sink.directory"),
    }
    .with_source(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every errno a sink writing local files can meet (open, create, write, fsync, rename,
    /// link, mkdir, readdir, canonicalize, unlink on Linux), with its class.
    #[test]
    fn every_errno_the_sinks_can_meet_has_one_class() {
        use ErrorClass::{Config, Permanent, Temporary};
        let table = [
            // The destination is out and can come back by itself.
            (libc::ENOSPC, Temporary),
            (libc::EDQUOT, Temporary),
            (libc::EIO, Temporary),
            (libc::ENOENT, Temporary),
            (libc::ENOTDIR, Temporary),
            (libc::EAGAIN, Temporary),
            (libc::EINTR, Temporary),
            (libc::EBUSY, Temporary),
            (libc::ETIMEDOUT, Temporary),
            (libc::ESTALE, Temporary),
            (libc::EMFILE, Temporary),
            (libc::ENFILE, Temporary),
            (libc::ENOMEM, Temporary),
            (libc::EEXIST, Temporary),
            (libc::ENOTEMPTY, Temporary),
            (libc::EMLINK, Temporary),
            (libc::ETXTBSY, Temporary),
            (libc::ENXIO, Temporary),
            (libc::ENODEV, Temporary),
            (libc::EPROTO, Temporary),
            (libc::ENOLCK, Temporary),
            (libc::EBADF, Temporary),
            // Out until an operator changes something.
            (libc::EACCES, Config),
            (libc::EPERM, Config),
            (libc::EROFS, Config),
            (libc::EXDEV, Config),
            (libc::EOPNOTSUPP, Config),
            (libc::EINVAL, Config),
            // This message's path cannot be written.
            (libc::ENAMETOOLONG, Permanent),
            (libc::EFBIG, Permanent),
            (libc::EISDIR, Permanent),
            (libc::ELOOP, Permanent),
        ];
        for (code, class) in table {
            let err = io::Error::from_raw_os_error(code);
            assert_eq!(class_of(&err), class, "{err}");
            assert_eq!(class_of_errno(code), class, "{err}");
        }
    }

    /// A helper that keeps only the kind gets the class its errno would have.
    #[test]
    fn kind_table_for_wrapped_errors() {
        let table = [
            (io::ErrorKind::StorageFull, libc::ENOSPC),
            (io::ErrorKind::QuotaExceeded, libc::EDQUOT),
            (io::ErrorKind::NotFound, libc::ENOENT),
            (io::ErrorKind::NotADirectory, libc::ENOTDIR),
            (io::ErrorKind::Interrupted, libc::EINTR),
            (io::ErrorKind::PermissionDenied, libc::EACCES),
            (io::ErrorKind::ReadOnlyFilesystem, libc::EROFS),
            (io::ErrorKind::CrossesDevices, libc::EXDEV),
            (io::ErrorKind::Unsupported, libc::EOPNOTSUPP),
            (io::ErrorKind::InvalidFilename, libc::ENAMETOOLONG),
            (io::ErrorKind::FileTooLarge, libc::EFBIG),
            (io::ErrorKind::IsADirectory, libc::EISDIR),
        ];
        for (kind, code) in table {
            assert_eq!(io::Error::from_raw_os_error(code).kind(), kind, "errno {code}");
            let err = io::Error::new(kind, "wrapped by a helper");
            assert_eq!(class_of(&err), class_of_errno(code), "{kind:?}");
        }
        assert_eq!(class_of(&io::Error::other("x")), ErrorClass::Temporary);
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

    #[test]
    fn start_up_errors_are_configuration_errors_unless_they_can_heal() {
        let e = open_error(io::Error::from_raw_os_error(libc::EACCES), "cannot create `x`");
        assert_eq!((e.class(), e.field()), (ErrorClass::Config, Some("sink.directory")));
        assert_eq!(open_error(io::Error::from_raw_os_error(libc::ENOTDIR), "x").class(), ErrorClass::Config);
        assert_eq!(open_error(io::Error::from_raw_os_error(libc::ENAMETOOLONG), "x").class(), ErrorClass::Config);
        let full = open_error(io::Error::from_raw_os_error(libc::ENOSPC), "x");
        assert_eq!((full.class(), full.field()), (ErrorClass::Temporary, None));
    }
}
