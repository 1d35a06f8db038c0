//! Classification of the review package sink's filesystem errors into `SinkError` classes:
//! the one errno table of `sinks_toolkit::fs_errors`, shared with the file and spool sinks (a
//! full disk, an I/O error and a vanished directory are temporary; permission, read-only and
//! unusable file systems are configuration errors; a directory or symlink where a file goes,
//! a path too long or a file too large are permanent for that message; anything unknown is
//! retried, never dead-lettered). Preparing the root at start-up is `sinks_toolkit::sink_root`.

pub(crate) use sinks_toolkit::fs_errors::classify;
