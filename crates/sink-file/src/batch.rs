//! [`FileLog`]: the batch mode's I/O below the sink's root directory (the
//! `sinks_toolkit::batch::ObjectLog` of the file sink).
//!
//! - an object is written into a dot-named temporary file in its partition directory
//!   (`.nats-sinks-<random>.tmp`, mode 0600, invisible to `*.ndjson` and `*.parquet` globs);
//! - **stage**: the temporary file and its directory are fsynced (with `fsync`), and kept:
//!   the manifest names it, so whoever reads the manifest can complete the object;
//! - **create** (a manifest): written to a temporary file, fsynced, then moved to its name
//!   by a rename that fails when the name exists (`sinks_toolkit::files`): an atomic
//!   create-if-absent; the directory is fsynced;
//! - **complete**: the temporary file is `link`ed to the object's final name (never
//!   replacing a file), the directory fsynced, the temporary name removed.
//!
//! Directories are created one level at a time below the root, refusing symlinks, and the
//! root itself is never created here (a missing root means an unmounted volume: writes fail
//! temporarily until it is back).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use sinks_contract::{DestinationRef, SinkError};
use sinks_toolkit::batch::{ObjectLog, TempObject};
use sinks_toolkit::blocking::blocking;
use sinks_toolkit::files::{self, FileMode};
use sinks_toolkit::sink_root::sync_dir;

use crate::error::classify;

/// Prefix of the batch mode's temporary files.
const TEMP_PREFIX: &str = ".nats-sinks-";

/// The batch mode's I/O below the root.
#[derive(Debug, Clone)]
pub(crate) struct FileLog {
    root: Arc<OnceLock<PathBuf>>,
    fsync: bool,
    file_mode: FileMode,
    dir_mode: FileMode,
}

impl FileLog {
    /// Below `root` (resolved by the sink's `open`), fsyncing when `fsync`, creating files
    /// and directories with the sink's modes.
    pub(crate) fn new(root: Arc<OnceLock<PathBuf>>, fsync: bool, file_mode: FileMode, dir_mode: FileMode) -> Self {
        Self { root, fsync, file_mode, dir_mode }
    }

    fn root(&self) -> Result<PathBuf, SinkError> {
        self.root.get().cloned().ok_or_else(|| SinkError::temporary("file sink root not resolved yet"))
    }

    fn path(&self, key: &str) -> Result<PathBuf, SinkError> {
        Ok(self.root()?.join(key))
    }

    /// `key`'s directory (created), its file name, and a temp file in that directory with
    /// the sink's file mode holding `body` (synced when fsyncing): what `create` and `put`
    /// move into place. Blocking.
    fn written(&self, key: &str, body: &[u8]) -> Result<(PathBuf, String, tempfile::NamedTempFile), SinkError> {
        let (dir, name) = key.rsplit_once('/').unwrap_or(("", key));
        let dir = ensure_dirs(&self.root()?, dir, self.dir_mode)?;
        let mut temp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .suffix(".tmp")
            .tempfile_in(&dir)
            .map_err(|e| classify(e, "cannot create a temp file"))?;
        self.file_mode.apply(temp.as_file()).map_err(|e| classify(e, "cannot set a file's mode"))?;
        temp.write_all(body).map_err(|e| classify(e, "cannot write a temp file"))?;
        if self.fsync {
            temp.as_file().sync_all().map_err(|e| classify(e, "cannot fsync a temp file"))?;
        }
        Ok((dir, name.to_owned(), temp))
    }
}

/// The directory `root/rel`, created level by level (never the root itself), refusing a
/// symlink at any level.
fn ensure_dirs(root: &Path, rel: &str, mode: FileMode) -> Result<PathBuf, SinkError> {
    fs::metadata(root).map_err(|e| classify(e, "file sink root is not accessible"))?;
    let mut dir = root.to_path_buf();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        if part == "." || part == ".." {
            return Err(SinkError::permanent("refusing a path outside sink.directory"));
        }
        dir.push(part);
        match fs::symlink_metadata(&dir) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(SinkError::permanent("refusing symlinked path")),
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(SinkError::config("partition path exists and is not a directory")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => match mode.create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(classify(e, "cannot create partition directory")),
            },
            Err(e) => return Err(classify(e, "cannot inspect partition directory")),
        }
    }
    Ok(dir)
}

fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(path)
}

fn temp_of(object: &Path, staging: &serde_json::Value) -> Option<PathBuf> {
    let name = staging.get("temp")?.as_str()?;
    (name.starts_with(TEMP_PREFIX) && !name.contains('/')).then(|| parent(object).join(name))
}

#[async_trait]
impl ObjectLog for FileLog {
    async fn list(&self, dir: &str) -> Result<Vec<String>, SinkError> {
        let root = self.root()?;
        let dir = root.join(dir);
        blocking(move || match fs::read_dir(&dir) {
            Ok(entries) => Ok(entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()),
            // A partition not written yet holds nothing; a missing root (an unmounted
            // volume) is no proof of that.
            Err(e) if e.kind() == io::ErrorKind::NotFound => match fs::metadata(&root) {
                Ok(_) => Ok(Vec::new()),
                Err(e) => Err(classify(e, "file sink root is not accessible")),
            },
            Err(e) => Err(classify(e, "cannot list a partition directory")),
        })
        .await
    }

    async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, SinkError> {
        let path = self.path(key)?;
        blocking(move || match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(classify(e, "cannot read a manifest")),
        })
        .await
    }

    async fn create(&self, key: &str, body: Vec<u8>) -> Result<bool, SinkError> {
        let (log, key) = (self.clone(), key.to_owned());
        blocking(move || {
            let (dir, name, temp) = log.written(&key, &body)?;
            let created = match files::place_new(temp, &dir.join(&name)) {
                Ok(()) => true,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
                Err(e) => return Err(classify(e, "cannot move a manifest into place")),
            };
            if created && log.fsync {
                sync_dir(&dir)?;
            }
            Ok(created)
        })
        .await
    }

    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), SinkError> {
        let (log, key) = (self.clone(), key.to_owned());
        blocking(move || {
            let (dir, name, temp) = log.written(&key, &body)?;
            // A rename replaces the old file atomically: readers see it whole.
            temp.persist(dir.join(&name)).map_err(|e| classify(e.error, "cannot move a file into place"))?;
            if log.fsync {
                sync_dir(&dir)?;
            }
            Ok(())
        })
        .await
    }

    fn temp(&self, partition: &str) -> Result<TempObject, SinkError> {
        let dir = ensure_dirs(&self.root()?, partition, self.dir_mode)?;
        let temp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .suffix(".tmp")
            .tempfile_in(&dir)
            .map_err(|e| classify(e, "cannot create a batch file's temp file"))?;
        self.file_mode.apply(temp.as_file()).map_err(|e| classify(e, "cannot set a batch file's mode"))?;
        let (file, path) = temp.into_parts();
        Ok(TempObject { file, path: Some(path) })
    }

    async fn stage(&self, _key: &str, temp: TempObject, _size: u64) -> Result<serde_json::Value, SinkError> {
        let fsync = self.fsync;
        blocking(move || {
            let TempObject { file, path } = temp;
            let path = path.ok_or_else(|| SinkError::temporary("a batch file's temp file has no name"))?;
            if fsync {
                file.sync_all().map_err(|e| classify(e, "cannot fsync a batch file"))?;
            }
            let path = path.keep().map_err(|e| classify(e.error, "cannot keep a batch file's temp file"))?;
            if fsync {
                sync_dir(parent(&path))?;
            }
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            Ok(serde_json::json!({ "temp": name }))
        })
        .await
    }

    async fn complete(&self, key: &str, staging: &serde_json::Value) -> Result<bool, SinkError> {
        let object = self.path(key)?;
        let temp = temp_of(&object, staging).ok_or_else(|| SinkError::permanent("manifest names no temp file"))?;
        let fsync = self.fsync;
        blocking(move || {
            let linked = match fs::hard_link(&temp, &object) {
                Ok(()) => true,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => true,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // The temp file is gone: completed by someone else, or lost.
                    return Ok(fs::symlink_metadata(&object).is_ok());
                }
                Err(e) => return Err(classify(e, "cannot link a batch file into place")),
            };
            if fsync {
                sync_dir(parent(&object))?;
            }
            if let Err(e) = fs::remove_file(&temp)
                && e.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(error = %e, "cannot remove a batch file's temp file");
            }
            Ok(linked)
        })
        .await
    }

    async fn discard(&self, key: &str, staging: &serde_json::Value) {
        let Ok(object) = self.path(key) else { return };
        let Some(temp) = temp_of(&object, staging) else { return };
        let removed = blocking(move || fs::remove_file(&temp).map_err(|e| classify(e, "cannot remove"))).await;
        if let Err(e) = removed {
            tracing::warn!(error = %e.display_chain(), "a discarded batch file's temp file was not removed");
        }
    }

    async fn fetch(&self, key: &str) -> Result<Option<File>, SinkError> {
        let path = self.path(key)?;
        blocking(move || match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&path) {
            Ok(file) => Ok(Some(file)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(classify(e, "cannot open a batch file")),
        })
        .await
    }

    fn destination(&self, key: &str) -> DestinationRef {
        let path = self.root.get().map(|r| r.join(key)).unwrap_or_else(|| PathBuf::from(key));
        DestinationRef::File { path: path.display().to_string() }
    }
}

#[cfg(test)]
mod tests {
    //! Table mode with a lost commit answer: a [`FileLog`] whose table-log creates land and
    //! then report an error (fault injection; the directory is real).
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicU32, Ordering};

    use sinks_contract::existing::OnExisting;
    use sinks_contract::sink::{FlushScope, MessageOutcome};
    use sinks_contract::testing::envelope;
    use sinks_toolkit::batch::{BatchConfig, BatchWriter, Format, Settings, TableConfig};

    use super::*;
    use crate::FileSinkConfig;

    /// A [`FileLog`] whose next `lose` creates of a `_delta_log/` entry are made and then
    /// answered with an error, as when the response to a conditional put is lost.
    #[derive(Debug)]
    struct LostAnswers {
        inner: FileLog,
        lose: AtomicU32,
    }

    #[async_trait]
    impl ObjectLog for LostAnswers {
        async fn list(&self, dir: &str) -> Result<Vec<String>, SinkError> {
            self.inner.list(dir).await
        }
        async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, SinkError> {
            self.inner.read(key).await
        }
        async fn create(&self, key: &str, body: Vec<u8>) -> Result<bool, SinkError> {
            let created = self.inner.create(key, body).await?;
            let lost = key.starts_with("_delta_log/")
                && self.lose.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
            if lost {
                return Err(SinkError::temporary("connection reset while the answer was on its way"));
            }
            Ok(created)
        }
        async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), SinkError> {
            self.inner.put(key, body).await
        }
        fn temp(&self, partition: &str) -> Result<TempObject, SinkError> {
            self.inner.temp(partition)
        }
        async fn stage(&self, key: &str, temp: TempObject, size: u64) -> Result<serde_json::Value, SinkError> {
            self.inner.stage(key, temp, size).await
        }
        async fn complete(&self, key: &str, staging: &serde_json::Value) -> Result<bool, SinkError> {
            self.inner.complete(key, staging).await
        }
        async fn discard(&self, key: &str, staging: &serde_json::Value) {
            self.inner.discard(key, staging).await;
        }
        async fn fetch(&self, key: &str) -> Result<Option<File>, SinkError> {
            self.inner.fetch(key).await
        }
        fn destination(&self, key: &str) -> DestinationRef {
            self.inner.destination(key)
        }
    }

    /// The `add` paths of every log entry, and the `txn` versions in entry order.
    fn added(root: &Path) -> (Vec<String>, Vec<u64>) {
        let mut names: Vec<PathBuf> =
            fs::read_dir(root.join("_delta_log")).unwrap().flatten().map(|e| e.path()).collect();
        names.sort();
        let mut paths = Vec::new();
        let mut txns = Vec::new();
        for name in names {
            for line in fs::read_to_string(name).unwrap().lines() {
                let action: serde_json::Value = serde_json::from_str(line).unwrap();
                if let Some(p) = action["add"]["path"].as_str() {
                    paths.push(p.to_owned());
                }
                if let Some(v) = action["txn"]["version"].as_u64() {
                    txns.push(v);
                }
            }
        }
        paths.sort();
        (paths, txns)
    }

    #[tokio::test]
    async fn a_lost_commit_answer_does_not_commit_the_slot_again() {
        let dir = tempfile::tempdir().unwrap();
        let defaults = FileSinkConfig::new(dir.path());
        let root = Arc::new(OnceLock::new());
        root.set(dir.path().to_path_buf()).unwrap();
        let log = LostAnswers {
            inner: FileLog::new(root, false, defaults.file_mode, defaults.dir_mode),
            // The table's creation, then the first two objects' commits.
            lose: AtomicU32::new(3),
        };
        let batch = BatchConfig {
            format: Format::Parquet,
            max_messages: 5,
            partition_template: "kind={subject_token[1]}".into(),
            table: Some(TableConfig::default()),
            ..BatchConfig::default()
        };
        let settings = Settings {
            batch,
            payload_mode: sinks_contract::payload::PayloadMode::default(),
            policy: OnExisting::Keep,
            content_check: true,
            max_row_bytes: u64::MAX,
            sink: "file",
            record: "batch file",
        };
        let writer = BatchWriter::new(log, settings);
        writer.open().await.unwrap();
        let batch: Vec<_> = (1..=15).map(|s| envelope("ORDERS", s, "orders.a", format!(r#"{{"s":{s}}}"#))).collect();
        assert!(writer.write(&batch).await.iter().all(|o| matches!(o, MessageOutcome::Pending)));
        let settled = writer.flush(FlushScope::All).await;
        assert_eq!(settled.len(), 15);
        assert!(settled.iter().all(|s| matches!(s.outcome, MessageOutcome::Committed)), "{settled:?}");
        assert_eq!(writer.log().lose.load(Ordering::SeqCst), 0, "three answers were lost");
        let (paths, txns) = added(dir.path());
        let mut distinct = paths.clone();
        distinct.dedup();
        assert_eq!(paths, distinct, "no object added twice");
        assert_eq!(paths.len(), 3, "three objects of five messages: {paths:?}");
        // Slots 0, 1 and 2, in one to three entries (concurrent closes share one).
        assert!(txns.windows(2).all(|w| w[0] < w[1]), "txn versions only grow: {txns:?}");
        assert_eq!(txns.last(), Some(&2), "{txns:?}");
        // Redelivered: found stored, and the table needs nothing more.
        let again = writer.write(&batch[..3]).await;
        assert!(again.iter().all(|o| matches!(o, MessageOutcome::Duplicate)), "{again:?}");
        assert_eq!(added(dir.path()).1, txns, "no commit after the redelivery");
    }
}
