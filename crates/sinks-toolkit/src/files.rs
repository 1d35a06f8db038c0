//! Placing a written temp file at its final name without replacing what is there: the
//! atomic create-if-absent the file sink (`skip_existing`, `fail`), its batch manifests and
//! the spool's custody files all rely on; and the same for a whole directory
//! ([`place_new_dir`], the review package sink's packages).
//!
//! It also holds the modes of what a sink creates on disk ([`FileMode`]: the `file_mode` and
//! `dir_mode` settings of the file and spool sinks), applied exactly, whatever the umask.
//!
//! On Linux this is one `renameat2(RENAME_NOREPLACE)`: the temp name becomes the final name,
//! or the call fails with `EEXIST` and nothing changes. A file system without that flag
//! (`EINVAL`; some network and FUSE file systems) gets the portable form: a hard link to the
//! final name, which fails the same way when it exists, then the temp name's removal. The
//! rename changes the directory once where the link and the removal change it twice, so the
//! directory fsync that follows has less to commit.

use std::fmt;
use std::fs::{File, Permissions};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tempfile::NamedTempFile;

/// The permission bits of a file or directory a sink creates, written in a config as an
/// octal string (`"0640"`). Applied with `chmod` after creation, so the process umask does
/// not narrow them. Only the nine `rwx` bits: no set-id or sticky bit.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ModeText", into = "String")]
pub struct FileMode(u32);

/// What a mode may be written as in a config: an octal string. A number is refused with a
/// hint, because YAML and JSON read `0640` as the decimal 640 (or not at all).
#[derive(Deserialize)]
#[serde(untagged)]
enum ModeText {
    Text(String),
    Number(serde_json::Number),
}

impl FileMode {
    /// Files only the sink's user can read and write (`0600`), the default of the file and
    /// spool sinks.
    pub const PRIVATE_FILE: Self = Self(0o600);
    /// Directories only the sink's user can enter (`0700`), the default of the file and
    /// spool sinks.
    pub const PRIVATE_DIR: Self = Self(0o700);

    /// The permission bits.
    pub fn bits(self) -> u32 {
        self.0
    }

    /// True when the owner has every bit of `needed` (a sink reads its own files back, and
    /// creates files in its own directories).
    pub fn owner_has(self, needed: u32) -> bool {
        self.0 & needed == needed
    }

    /// Gives `file` this mode.
    pub fn apply(self, file: &File) -> io::Result<()> {
        file.set_permissions(Permissions::from_mode(self.0))
    }

    /// Creates the directory `path` with this mode (its parent must exist); an existing one
    /// is [`io::ErrorKind::AlreadyExists`] and keeps its mode.
    pub fn create_dir(self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)?;
        std::fs::set_permissions(path, Permissions::from_mode(self.0))
    }

    /// Creates `path` and every missing parent with this mode; existing ones keep theirs.
    pub fn create_dir_all(self, path: &Path) -> io::Result<()> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_dir() => return Ok(()),
            Ok(_) => return Err(io::Error::new(io::ErrorKind::AlreadyExists, "exists and is not a directory")),
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            Err(_) => {}
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dir_all(parent)?;
        }
        match self.create_dir(path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
            other => other,
        }
    }
}

/// Checks the `file_mode` and `dir_mode` of a sink section: the sink's own user must keep
/// reading and writing its files (it reads them back to tell duplicates) and entering and
/// writing its directories.
pub fn check_modes(file: FileMode, dir: FileMode, issues: &mut sinks_contract::Issues) {
    if !file.owner_has(0o600) {
        issues.push(
            "sink.file_mode",
            format!("{file:?} takes read or write from the sink's own user; it needs at least 0600"),
        );
    }
    if !dir.owner_has(0o700) {
        issues.push(
            "sink.dir_mode",
            format!("{dir:?} takes a permission from the sink's own user; it needs at least 0700"),
        );
    }
}

impl fmt::Debug for FileMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04o}", self.0)
    }
}

impl From<FileMode> for String {
    fn from(mode: FileMode) -> Self {
        format!("{:04o}", mode.0)
    }
}

impl TryFrom<ModeText> for FileMode {
    type Error = String;

    fn try_from(text: ModeText) -> Result<Self, String> {
        let text = match text {
            ModeText::Text(text) => text,
            ModeText::Number(n) => {
                return Err(format!("write the mode as an octal string, e.g. \"0{n}\" (a number is read as decimal)"));
            }
        };
        let digits = text.strip_prefix("0o").unwrap_or(&text);
        if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            return Err(format!("`{text}` is not an octal mode such as \"0640\""));
        }
        let bits = u32::from_str_radix(digits, 8).map_err(|e| e.to_string())?;
        if bits > 0o777 {
            return Err(format!("`{text}` sets a set-id or sticky bit; only the rwx bits (at most 0777) may be set"));
        }
        Ok(Self(bits))
    }
}

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

/// Renames the directory `temp` to `target` unless something exists at `target`, which is
/// then left as it is: the error is [`io::ErrorKind::AlreadyExists`] (the temp directory
/// stays, for the caller to remove). Durability is the caller's: fsync the directory's
/// files and the directory before, its parent after.
///
/// On Linux this is `renameat2(RENAME_NOREPLACE)`. Elsewhere (and on a file system without
/// the flag) a plain `rename`, which never replaces a non-empty directory (`ENOTEMPTY`,
/// `EEXIST`) nor a file (`ENOTDIR`): only an empty directory at `target` could be replaced,
/// and an empty directory holds nothing to lose.
pub fn place_new_dir(temp: &Path, target: &Path) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        use rustix::io::Errno;
        match renameat_with(CWD, temp, CWD, target, RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(()),
            Err(e) if e == Errno::INVAL || e == Errno::NOSYS => {}
            Err(e) => return Err(e.into()),
        }
    }
    match std::fs::rename(temp, target) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST | libc::ENOTDIR)) => {
            Err(io::Error::new(io::ErrorKind::AlreadyExists, e))
        }
        other => other,
    }
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

    fn mode(text: serde_json::Value) -> Result<FileMode, String> {
        serde_json::from_value(text).map_err(|e| e.to_string())
    }

    #[test]
    fn modes_are_octal_strings_of_the_rwx_bits() {
        assert_eq!(mode(serde_json::json!("0640")).unwrap().bits(), 0o640);
        assert_eq!(mode(serde_json::json!("750")).unwrap().bits(), 0o750);
        assert_eq!(mode(serde_json::json!("0o600")).unwrap().bits(), 0o600);
        assert_eq!(serde_json::to_value(FileMode(0o640)).unwrap(), "0640");
        assert!(mode(serde_json::json!(640)).unwrap_err().contains("octal string, e.g. \"0640\""));
        assert!(mode(serde_json::json!("0648")).unwrap_err().contains("not an octal mode"));
        assert!(mode(serde_json::json!("")).unwrap_err().contains("not an octal mode"));
        assert!(mode(serde_json::json!("4755")).unwrap_err().contains("set-id or sticky"));
        assert!(FileMode(0o640).owner_has(0o600) && !FileMode(0o440).owner_has(0o600));
    }

    #[test]
    fn modes_are_applied_exactly_whatever_the_umask() {
        let dir = tempfile::tempdir().expect("dir");
        // The umask of a test process is usually 022; 0666 is wider than it lets through.
        let temp = temp_with(dir.path(), b"x");
        FileMode(0o666).apply(temp.as_file()).expect("chmod");
        assert_eq!(std::fs::metadata(temp.path()).expect("stat").permissions().mode() & 0o7777, 0o666);
        let nested = dir.path().join("a/b/c");
        FileMode(0o750).create_dir_all(&nested).expect("mkdir -p");
        for d in ["a", "a/b", "a/b/c"] {
            let mode = std::fs::metadata(dir.path().join(d)).expect("stat").permissions().mode() & 0o7777;
            assert_eq!(mode, 0o750, "{d}");
        }
        // An existing directory keeps its mode.
        FileMode(0o700).create_dir_all(&nested).expect("exists");
        assert_eq!(std::fs::metadata(&nested).expect("stat").permissions().mode() & 0o7777, 0o750);
        let err = FileMode(0o700).create_dir(&nested).expect_err("exists");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
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

    fn dir_with(parent: &Path, name: &str, body: &[u8]) -> std::path::PathBuf {
        let dir = parent.join(name);
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::write(dir.join("f"), body).expect("write");
        dir
    }

    #[test]
    fn a_directory_is_placed_at_a_new_name_and_never_over_an_existing_one() {
        let root = tempfile::tempdir().expect("dir");
        let target = root.path().join("pkg");
        place_new_dir(&dir_with(root.path(), ".one.tmp", b"one"), &target).expect("placed");
        assert_eq!(std::fs::read(target.join("f")).expect("read"), b"one");
        let second = dir_with(root.path(), ".two.tmp", b"two");
        let err = place_new_dir(&second, &target).expect_err("exists");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(target.join("f")).expect("read"), b"one", "never replaced");
        assert!(second.is_dir(), "the temp directory is the caller's to remove");
        // A file at the name counts as existing too.
        std::fs::write(root.path().join("file"), b"x").expect("write");
        let err = place_new_dir(&second, &root.path().join("file")).expect_err("a file is there");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
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
