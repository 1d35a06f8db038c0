//! The spool's errors: its filesystem errors are classified by the one errno table of
//! `sinks_toolkit::fs_errors`, shared with the file and review package sinks (a full or
//! failing disk and a vanished directory are temporary, and nothing is acknowledged that is
//! not spooled; permission, read-only and unusable file systems are configuration errors,
//! fatal in `open` and retried loudly at run time; a directory or symlink where a spool file
//! goes, a path too long or a file too large are permanent for that message; anything
//! unknown is retried, never dead-lettered). A full spool (its own `max_records` /
//! `max_bytes`) is temporary: it fails closed until replay frees space.

use sinks_contract::SinkError;
pub(crate) use sinks_toolkit::fs_errors::{classify, open_error};

/// The error of a full spool.
pub(crate) fn full(what: &str) -> SinkError {
    SinkError::temporary(format!("spool is full ({what}); replay it to free space"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_spool_is_temporary() {
        let e = full("records");
        assert!(e.message().contains("spool is full"));
        assert_eq!(e.class(), sinks_contract::ErrorClass::Temporary);
    }
}
