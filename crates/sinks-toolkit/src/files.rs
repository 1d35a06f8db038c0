//! Placing a written temp file at its final name without replacing what is there: the
//! atomic create-if-absent the file sink (`skip_existing`, `fail`), its batch manifests and
//! the spool's custody files all rely on.
//!
//! On Linux this is one `renameat2(RENAME_NOREPLACE)`: the temp name becomes the final name,
//! or the call fails with `EEXIST` and nothing changes. A file system without that flag
//! (`EINVAL`; some network and FUSE file systems) gets the portable form: a hard link to the
//! final name, which fails the same way when it exists, then the temp name's removal. The
//! rename changes the directory once where the link and the removal change it twice, so the
//! directory fsync that follows has less to commit.

use std::io;
use std::path::Path;

use tempfile::NamedTempFile;

/// Moves `temp` to `target` unless something exists at `target`, which is then left as it
/// is: the error is [`io::ErrorKind::AlreadyExists`]. On every error the temp file is
/// removed. Durability is the caller's: fsync the file before and the directory after.
pub fn place_new(temp: NamedTempFile, target: &Path) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        use rustix::io::Errno;
        match renameat_with(CWD, temp.path(), CWD, target, RenameFlags::NOREPLACE) {
            Ok(()) => {
                // The temp name is gone with the rename: nothing is left to remove.
                let _moved = temp.into_temp_path().keep();
                return Ok(());
            }
            Err(e) if e == Errno::INVAL || e == Errno::NOSYS => {}
            Err(e) => {
                discard(temp);
                return Err(e.into());
            }
        }
    }
    let linked = std::fs::hard_link(temp.path(), target);
    discard(temp);
    linked
}

/// Removes a temp file; a failure to do so is only worth a warning.
fn discard(temp: NamedTempFile) {
    let path = temp.path().to_path_buf();
    if let Err(e) = temp.close() {
        tracing::warn!(error = %e, file = %path.display(), "cannot remove temp file");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_with(dir: &Path, body: &[u8]) -> NamedTempFile {
        let mut temp = tempfile::Builder::new().prefix(".t").tempfile_in(dir).expect("temp file");
        temp.write_all(body).expect("write");
        temp
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_new_name_gets_the_temp_files_bytes_and_the_temp_name_is_gone() {
        let dir = tempfile::tempdir().expect("dir");
        let target = dir.path().join("a.json");
        place_new(temp_with(dir.path(), b"one"), &target).expect("placed");
        assert_eq!(std::fs::read(&target).expect("read"), b"one");
        assert_eq!(names(dir.path()), ["a.json"], "no temp file is left");
    }

    #[test]
    fn an_existing_name_is_kept_and_reported_and_the_temp_file_removed() {
        let dir = tempfile::tempdir().expect("dir");
        let target = dir.path().join("a.json");
        std::fs::write(&target, b"first").expect("write");
        let err = place_new(temp_with(dir.path(), b"second"), &target).expect_err("exists");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&target).expect("read"), b"first", "never replaced");
        assert_eq!(names(dir.path()), ["a.json"], "no temp file is left");
    }

    #[test]
    fn a_symlink_at_the_name_counts_as_existing_and_is_not_followed() {
        let dir = tempfile::tempdir().expect("dir");
        let elsewhere = dir.path().join("elsewhere");
        let target = dir.path().join("a.json");
        std::os::unix::fs::symlink(&elsewhere, &target).expect("symlink");
        let err = place_new(temp_with(dir.path(), b"x"), &target).expect_err("exists");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert!(!elsewhere.exists(), "nothing was written through the dangling link");
    }

    #[test]
    fn any_other_failure_is_returned_and_the_temp_file_removed() {
        let dir = tempfile::tempdir().expect("dir");
        let target = dir.path().join("missing-dir").join("a.json");
        let err = place_new(temp_with(dir.path(), b"x"), &target).expect_err("no such dir");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(names(dir.path()).is_empty(), "the temp file was removed");
    }
}
