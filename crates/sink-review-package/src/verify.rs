//! Reading packages back and checking them: every file against the hash list, the hash
//! list against the manifest, nothing missing and nothing added. What `nats-sink
//! verify-packages` reports for a whole directory ([`verify_root`]), and what reconcile
//! reads back for one message (`Reconcile` of the sink).
//!
//! A package is **intact** when `manifest.json` and `hashes.json` parse with their schemas,
//! the manifest names the package's own id, the hash list lists `manifest.json` and every
//! file the manifest lists with the same hash, and every listed file exists as a regular file
//! with that SHA-256 and size, and no other file is there. It is **incomplete** when a listed
//! file, the manifest or the hash list is missing (or a half-written temporary directory was
//! left by a crash); **tampered** when anything is there but does not match. Reading never
//! follows a symlink and never changes anything.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::package::{self, HASHES, HASHES_SCHEMA, MANIFEST, SCHEMA};

/// Most bytes read of a manifest or a hash list (a real one is a few KiB).
const MAX_INDEX_BYTES: u64 = 1024 * 1024;

/// What one package directory was found to be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum PackageState {
    /// Every file is there and matches.
    Intact,
    /// Something is missing: a listed file, the manifest, the hash list; or the package is
    /// a temporary directory a crash left (its message is rewritten on its next delivery).
    Incomplete {
        /// What is missing, one line each.
        problems: Vec<String>,
    },
    /// Something is there that does not match: a file whose hash or size differs, a file
    /// no list names, lists that disagree, a manifest naming another package.
    Tampered {
        /// What does not match, one line each.
        problems: Vec<String>,
    },
}

impl PackageState {
    /// True for [`PackageState::Intact`].
    pub fn is_intact(&self) -> bool {
        matches!(self, Self::Intact)
    }
}

/// One package checked: where it is, what it is, and the payload fingerprint its manifest
/// records (when it could be read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageCheck {
    /// The directory's name (the package id, or a temporary name).
    pub name: String,
    /// Its state.
    #[serde(flatten)]
    pub state: PackageState,
    /// `files."payload.bin".sha256` (or `payload_sha256`) of its manifest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_sha256: Option<String>,
}

/// Every package below a root, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The root that was read.
    pub directory: PathBuf,
    /// Packages (and leftover temporary directories), by name.
    pub packages: Vec<PackageCheck>,
    /// Entries of the root that are neither (ignored by the sink; listed for the operator).
    pub other_entries: Vec<String>,
}

impl Report {
    /// How many packages are intact, incomplete and tampered.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut counts = (0, 0, 0);
        for check in &self.packages {
            match check.state {
                PackageState::Intact => counts.0 += 1,
                PackageState::Incomplete { .. } => counts.1 += 1,
                PackageState::Tampered { .. } => counts.2 += 1,
            }
        }
        counts
    }

    /// True when every package is intact.
    pub fn all_intact(&self) -> bool {
        self.packages.iter().all(|p| p.state.is_intact())
    }
}

/// True when `name` is the temporary directory of a package being written (`.pkg-….tmp`,
/// or `.pkg-….<random>.tmp` for a second delivery written at the same time).
pub fn is_temporary_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.').and_then(|rest| rest.strip_suffix(".tmp")) else {
        return false;
    };
    let (id, random) = rest.split_at_checked(36).unwrap_or((rest, ""));
    package::is_package_id(id) && (random.is_empty() || random.starts_with('.'))
}

/// Checks every package directly below `root`. An error only when `root` cannot be listed.
pub fn verify_root(root: &Path) -> io::Result<Report> {
    let mut report = Report { directory: root.to_path_buf(), ..Report::default() };
    let mut names: Vec<String> =
        fs::read_dir(root)?.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    for name in names {
        if package::is_package_id(&name) {
            let (state, payload_sha256) = check_package(&root.join(&name), &name);
            report.packages.push(PackageCheck { name, state, payload_sha256 });
        } else if is_temporary_name(&name) {
            let problems = vec![String::from(
                "a temporary package directory left by an interrupted write; its message was not acknowledged, and its next delivery rewrites it",
            )];
            report.packages.push(PackageCheck {
                name,
                state: PackageState::Incomplete { problems },
                payload_sha256: None,
            });
        } else {
            report.other_entries.push(name);
        }
    }
    Ok(report)
}

#[derive(Deserialize)]
struct Entry {
    sha256: String,
    size_bytes: u64,
}

#[derive(Deserialize)]
struct Index {
    schema: String,
    #[serde(default)]
    package_id: Option<String>,
    files: BTreeMap<String, Entry>,
    #[serde(default)]
    payload_sha256: Option<String>,
}

/// Reads a regular file without following a symlink, at most `limit` bytes (`Ok(None)`:
/// missing).
fn read_file(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, String> {
    let file = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(String::from("is a symlink")),
        Err(e) => return Err(format!("cannot be read ({e})")),
    };
    let meta = file.metadata().map_err(|e| format!("cannot be read ({e})"))?;
    if !meta.is_file() {
        return Err(String::from("is not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| format!("cannot be read ({e})"))?;
    if bytes.len() as u64 > limit {
        return Err(String::from("is larger than expected"));
    }
    Ok(Some(bytes))
}

/// SHA-256 and size of a regular file, streamed (`Ok(None)`: missing).
fn hash_file(path: &Path) -> Result<Option<(String, u64)>, String> {
    use sha2::{Digest, Sha256};
    let mut file: File =
        match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(String::from("is a symlink")),
            Err(e) => return Err(format!("cannot be read ({e})")),
        };
    if !file.metadata().map_err(|e| format!("cannot be read ({e})"))?.is_file() {
        return Err(String::from("is not a regular file"));
    }
    let mut hasher = Sha256::new();
    let size = io::copy(&mut file, &mut hasher).map_err(|e| format!("cannot be read ({e})"))?;
    Ok(Some((hex::encode(hasher.finalize()), size)))
}

/// Reads and parses an index file (`manifest.json`, `hashes.json`) of `schema`.
fn read_index(dir: &Path, name: &str, schema: &str, missing: &mut Vec<String>, bad: &mut Vec<String>) -> Option<Index> {
    match read_file(&dir.join(name), MAX_INDEX_BYTES) {
        Ok(None) => {
            missing.push(format!("{name} is missing"));
            None
        }
        Err(why) => {
            bad.push(format!("{name} {why}"));
            None
        }
        Ok(Some(bytes)) => match serde_json::from_slice::<Index>(&bytes) {
            Ok(index) if index.schema == schema => Some(index),
            Ok(index) => {
                bad.push(format!("{name} has schema {:?}, not {schema}", index.schema));
                None
            }
            Err(e) => {
                bad.push(format!("{name} is not a readable {schema} document ({e})"));
                None
            }
        },
    }
}

/// Checks the package directory `dir` named `name`: its state, and the payload fingerprint
/// its manifest records.
pub fn check_package(dir: &Path, name: &str) -> (PackageState, Option<String>) {
    let (mut missing, mut bad) = (Vec::new(), Vec::new());
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return (PackageState::Tampered { problems: vec![String::from("the package is a symlink")] }, None);
        }
        Ok(meta) if !meta.is_dir() => {
            return (PackageState::Tampered { problems: vec![String::from("the package is not a directory")] }, None);
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return (PackageState::Incomplete { problems: vec![String::from("the package is missing")] }, None);
        }
        Err(e) => {
            return (PackageState::Tampered { problems: vec![format!("the package cannot be read ({e})")] }, None);
        }
    }
    let manifest = read_index(dir, MANIFEST, SCHEMA, &mut missing, &mut bad);
    let hashes = read_index(dir, HASHES, HASHES_SCHEMA, &mut missing, &mut bad);
    let payload_sha256 = manifest
        .as_ref()
        .and_then(|m| m.files.get(package::PAYLOAD).map(|e| e.sha256.clone()).or(m.payload_sha256.clone()));
    if let Some(manifest) = &manifest
        && manifest.package_id.as_deref() != Some(name)
    {
        bad.push(format!(
            "manifest.json names package {:?}, not this one",
            manifest.package_id.as_deref().unwrap_or("")
        ));
    }
    // The list every file is checked against: the hash list, else the manifest's.
    let listed: BTreeMap<&str, &Entry> = match (&hashes, &manifest) {
        (Some(hashes), _) => hashes.files.iter().map(|(k, v)| (k.as_str(), v)).collect(),
        (None, Some(manifest)) => manifest.files.iter().map(|(k, v)| (k.as_str(), v)).collect(),
        (None, None) => BTreeMap::new(),
    };
    if let (Some(hashes), Some(manifest)) = (&hashes, &manifest) {
        if !hashes.files.contains_key(MANIFEST) {
            bad.push(String::from("hashes.json does not list manifest.json"));
        }
        for (file, entry) in &manifest.files {
            match hashes.files.get(file) {
                Some(h) if h.sha256 == entry.sha256 && h.size_bytes == entry.size_bytes => {}
                Some(_) => bad.push(format!("{file}: manifest.json and hashes.json disagree")),
                None => bad.push(format!("{file}: listed in manifest.json, not in hashes.json")),
            }
        }
        for file in hashes.files.keys().filter(|f| f.as_str() != MANIFEST) {
            if !manifest.files.contains_key(file) {
                bad.push(format!("{file}: listed in hashes.json, not in manifest.json"));
            }
        }
    }
    for (file, entry) in &listed {
        if !package::FILE_NAMES.contains(file) || *file == HASHES {
            bad.push(format!("{file}: not a package file"));
            continue;
        }
        match hash_file(&dir.join(file)) {
            Ok(None) => missing.push(format!("{file} is missing")),
            Err(why) => bad.push(format!("{file} {why}")),
            Ok(Some((sha, size))) if sha != entry.sha256 || size != entry.size_bytes => {
                bad.push(format!("{file}: SHA-256 or size differs from the recorded one"));
            }
            Ok(Some(_)) => {}
        }
    }
    if let Ok(entries) = fs::read_dir(dir) {
        let mut extra: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != HASHES && n != MANIFEST && !listed.contains_key(n.as_str()))
            .collect();
        extra.sort();
        bad.extend(extra.into_iter().map(|n| format!("{n}: a file no list names")));
    }
    let state = if !bad.is_empty() {
        bad.extend(missing);
        PackageState::Tampered { problems: bad }
    } else if !missing.is_empty() {
        PackageState::Incomplete { problems: missing }
    } else {
        PackageState::Intact
    };
    (state, payload_sha256)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names() {
        let id = format!("pkg-{}", "a".repeat(32));
        assert!(is_temporary_name(&format!(".{id}.tmp")));
        assert!(is_temporary_name(&format!(".{id}.x1Y2z3.tmp")));
        assert!(!is_temporary_name(&id));
        assert!(!is_temporary_name(".nats-sinks-healthcheck.abc.tmp"));
        assert!(!is_temporary_name(&format!(".{id}")));
        assert!(!is_temporary_name(&format!(".{id}x.tmp")));
    }
}
