//! The directory a file-system sink writes below (`sink.directory` of the file sink and the
//! review package sink): resolved (a leading `~` is `$HOME`, as the reference's
//! `expanduser`), created when allowed (its parent fsynced), probed at start-up and by the
//! health check with a file of a record's size (written, fsynced with `fsync`, removed), and
//! directories fsynced with the errno classes of [`crate::fs_errors`].
//!
//! Start-up errors are classed by [`crate::fs_errors::open_error`]: what only the
//! configuration or the machine's set-up can fix is a configuration error of `sink.directory`;
//! the rest (a full disk, an I/O error) can heal by itself and is retried.

use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use sinks_contract::SinkError;

use crate::files::FileMode;
use crate::fs_errors::{classify, open_error};

/// Prefix of the probe files the start-up and the health check write (never a record's or a
/// package's name: a listing of the root skips them).
pub const PROBE_PREFIX: &str = ".nats-sinks-healthcheck.";

/// Bytes a health probe writes: as much as a small record, so that a full disk fails it (an
/// empty file can still be made on a full disk: it needs an inode, no block).
pub const PROBE_BYTES: usize = 4096;

/// The config field every start-up error names.
const FIELD: &str = "sink.directory";

/// `path` with a leading `~` replaced by `$HOME` (unchanged without one, or without `HOME`).
pub fn expand_home(path: &Path) -> PathBuf {
    let Ok(rest) = path.strip_prefix("~") else {
        return path.to_path_buf();
    };
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => PathBuf::from(home).join(rest),
        _ => path.to_path_buf(),
    }
}

/// Fsyncs directory `dir` (its entries made durable), classed as a write error.
pub fn sync_dir(dir: &Path) -> Result<(), SinkError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| classify(e, "cannot fsync directory"))
}

/// The root `directory` names, resolved: created with `dir_mode` when missing and `create`
/// allows it (its parent fsynced with `fsync`), canonical, and shown writable by a probe file
/// made and removed. Errors name `sink.directory`.
pub fn prepare(directory: &Path, create: bool, dir_mode: FileMode, fsync: bool) -> Result<PathBuf, SinkError> {
    let dir = expand_home(directory);
    let shown = dir.display();
    match fs::metadata(&dir) {
        Ok(meta) if !meta.is_dir() => {
            return Err(SinkError::config(format!("`{shown}` is not a directory")).with_field(FIELD));
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if !create {
                return Err(SinkError::config(format!(
                    "`{shown}` does not exist and sink.create_directory is false: create it, or set sink.create_directory = true"
                ))
                .with_field(FIELD));
            }
            dir_mode.create_dir_all(&dir).map_err(|e| open_error(e, &format!("cannot create `{shown}`")))?;
            if fsync
                && let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty())
                && let Err(e) = sync_dir(parent)
            {
                tracing::warn!(error = %e.display_chain(), "cannot fsync the parent of sink.directory");
            }
        }
        Err(e) => return Err(open_error(e, &format!("cannot access `{shown}`"))),
    }
    let root = fs::canonicalize(&dir).map_err(|e| open_error(e, &format!("cannot resolve `{shown}`")))?;
    let probe = tempfile::Builder::new()
        .prefix(PROBE_PREFIX)
        .suffix(".tmp")
        .tempfile_in(&root)
        .map_err(|e| open_error(e, &format!("`{shown}` is not writable")))?;
    if let Err(e) = probe.close() {
        tracing::warn!(error = %e, "cannot remove the start-up probe file");
    }
    Ok(root)
}

/// The health check of a root: a probe file of [`PROBE_BYTES`] written (fsynced with
/// `fsync`) and removed in `root`, or, before the sink opened, in the resolved `directory`.
/// Every failure is temporary (the sink is not healthy now); `what` names the root in the
/// messages (`file sink root`).
pub fn probe(root: Option<&Path>, directory: &Path, fsync: bool, what: &str) -> Result<(), SinkError> {
    let unhealthy = |e: io::Error, message: String| SinkError::temporary(message).with_source(e);
    let root = match root {
        Some(root) => root.to_path_buf(),
        None => {
            fs::canonicalize(expand_home(directory)).map_err(|e| unhealthy(e, format!("{what} is not accessible")))?
        }
    };
    let mut probe = tempfile::Builder::new()
        .prefix(PROBE_PREFIX)
        .suffix(".tmp")
        .tempfile_in(&root)
        .map_err(|e| unhealthy(e, format!("cannot create a probe file in the {what}")))?;
    probe
        .as_file_mut()
        .write_all(&[0u8; PROBE_BYTES])
        .map_err(|e| unhealthy(e, format!("cannot write a probe file in the {what} (disk full?)")))?;
    if fsync {
        probe.as_file().sync_all().map_err(|e| unhealthy(e, "cannot fsync the probe file".to_owned()))?;
    }
    probe.close().map_err(|e| unhealthy(e, "cannot remove the probe file".to_owned()))
}

#[cfg(test)]
mod tests {
    use sinks_contract::ErrorClass;

    use super::*;

    #[test]
    fn home_expansion() {
        assert_eq!(expand_home(Path::new("/abs/dir")), PathBuf::from("/abs/dir"));
        assert_eq!(expand_home(Path::new("rel")), PathBuf::from("rel"));
        if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            assert_eq!(expand_home(Path::new("~/out")), PathBuf::from(home).join("out"));
        }
    }

    #[test]
    fn a_root_is_created_only_when_allowed_probed_and_left_clean() {
        let base = tempfile::tempdir().unwrap();
        let wanted = base.path().join("a/b");
        let refused = prepare(&wanted, false, FileMode::PRIVATE_DIR, true).unwrap_err();
        assert_eq!((refused.class(), refused.field()), (ErrorClass::Config, Some(FIELD)));
        assert!(!wanted.exists());
        let root = prepare(&wanted, true, FileMode::PRIVATE_DIR, true).unwrap();
        assert_eq!(root, fs::canonicalize(&wanted).unwrap());
        probe(Some(&root), &wanted, true, "test root").unwrap();
        probe(None, &wanted, false, "test root").unwrap();
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0, "no probe file left behind");
        let file = base.path().join("plain");
        fs::write(&file, b"x").unwrap();
        let not_dir = prepare(&file, true, FileMode::PRIVATE_DIR, false).unwrap_err();
        assert!(not_dir.to_string().contains("is not a directory"), "{not_dir}");
        let gone = probe(None, &base.path().join("missing"), false, "test root").unwrap_err();
        assert_eq!(gone.class(), ErrorClass::Temporary);
        assert!(gone.to_string().contains("test root is not accessible"), "{gone}");
    }
}
