//! Classification of the review package sink's filesystem errors into `SinkError` classes:
//! the errno table of `sinks_toolkit::fs_errors`, shared with the file sink (a full disk, an
//! I/O error and a vanished directory are temporary; permission, read-only and unusable file
//! systems are configuration errors; a directory or symlink where a file goes is permanent;
//! anything unknown is retried, never dead-lettered), and what preparing the root at start-up
//! makes of them.

use std::io;

use sinks_contract::{ErrorClass, SinkError};
pub(crate) use sinks_toolkit::fs_errors::{class_of, classify};

/// An error preparing the root at start-up: what only the configuration (or the machine's
/// set-up) can fix is a configuration error of `sink.directory` (a permission refused, a
/// read-only file system, a part of the path that is a regular file); the rest (a full disk,
/// an I/O error) can heal by itself and is retried.
pub(crate) fn open_error(e: io::Error, what: &str) -> SinkError {
    let class = match e.raw_os_error() {
        Some(libc::ENOTDIR) => ErrorClass::Config,
        _ => class_of(&e),
    };
    match class {
        ErrorClass::Temporary => SinkError::temporary(what.to_owned()),
        ErrorClass::Permanent | ErrorClass::Config => SinkError::config(what.to_owned()).with_field("sink.directory"),
    }
    .with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_up_errors_are_configuration_errors_unless_they_can_heal() {
        let e = open_error(io::Error::from_raw_os_error(libc::EACCES), "cannot create `x`");
        assert_eq!((e.class(), e.field()), (ErrorClass::Config, Some("sink.directory")));
        assert_eq!(open_error(io::Error::from_raw_os_error(libc::ENOTDIR), "x").class(), ErrorClass::Config);
        assert_eq!(open_error(io::Error::from_raw_os_error(libc::ENOSPC), "x").class(), ErrorClass::Temporary);
        assert_eq!(classify(io::Error::from_raw_os_error(libc::EIO), "x").class(), ErrorClass::Temporary);
    }
}
