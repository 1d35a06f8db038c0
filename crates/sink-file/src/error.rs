//! Classification of the file sink's filesystem errors into `SinkError` classes: the
//! errno table of `sinks_toolkit::fs_errors`, which the review package sink shares (full
//! disk, I/O error and a vanished directory are temporary; permission, read-only and
//! unusable file systems are configuration errors; a directory or symlink where the
//! message's file goes is permanent; anything unknown is retried).

pub(crate) use sinks_toolkit::fs_errors::classify;
