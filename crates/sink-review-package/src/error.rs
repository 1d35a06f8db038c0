//! Classification of the review package sink's filesystem errors into `SinkError` classes:
//! the errno table of `sinks_toolkit::fs_errors`, shared with the file sink (a full disk, an
//! I/O error and a vanished directory are temporary; permission, read-only and unusable file
//! systems are configuration errors; a directory or symlink where a file goes is permanent;
//! anything unknown is retried, never dead-lettered). Preparing the root at start-up classes
//! its errors in `sinks_toolkit::sink_root`.

pub(crate) use sinks_toolkit::fs_errors::classify;
