//! The fault harness's store faults: the damage a disk does to one node's files while the
//! node is down — a tail that never reached the disk (the stream's newest message block and
//! its Raft log's newest block cut short) or one flipped bit in the stream's newest message
//! block. The Jepsen analysis of NATS 2.12.1 lost acknowledged writes under both on a
//! minority of nodes; here they show what the sink does when NATS repairs the damage or not.
//! The file work is pure of the cluster (unit-tested on files of its own); which node and
//! when is the harness's (faults.rs).

use std::fmt;
use std::fs::OpenOptions;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use rand::Rng;
use rand::rngs::StdRng;

/// What a store fault does to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Damage {
    /// The file cut at a random point of its second half.
    Truncate,
    /// One random bit of the file flipped.
    FlipBit,
}

/// One damaged file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Damaged {
    /// The file.
    pub(crate) file: PathBuf,
    /// Its length before, bytes.
    pub(crate) before: u64,
    /// Its length after, bytes.
    pub(crate) after: u64,
    /// Where the damage starts: the new length, or the byte whose bit flipped.
    pub(crate) at: u64,
}

impl fmt::Display for Damaged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.file.file_name().unwrap_or_default().to_string_lossy();
        let dir = self.file.parent().and_then(Path::parent).and_then(Path::file_name).unwrap_or_default();
        if self.before == self.after {
            write!(f, "{}/{name}: a bit of byte {} flipped", dir.to_string_lossy(), self.at)
        } else {
            write!(f, "{}/{name}: cut from {} to {} bytes", dir.to_string_lossy(), self.before, self.after)
        }
    }
}

/// The newest (highest-numbered) `N.blk` file in `dir`, `None` when there is none.
pub(crate) fn newest_block(dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name();
            let number: u64 = name.to_str()?.strip_suffix(".blk")?.parse().ok()?;
            Some((number, e.path()))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, path)| path)
}

/// The files `damage` acts on in a node's `store` directory: the newest message block of
/// `stream` (in whichever account holds it) and, for a truncation, the newest block of the
/// stream's Raft log (`raft_group`, under the system account's `_js_`).
pub(crate) fn targets(store: &Path, stream: &str, raft_group: Option<&str>, damage: Damage) -> Vec<PathBuf> {
    let jetstream = store.join("jetstream");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&jetstream)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|account| newest_block(&account.path().join("streams").join(stream).join("msgs")))
        .collect();
    if damage == Damage::Truncate
        && let Some(group) = raft_group
        && let Some(log) = newest_block(&jetstream.join("$SYS").join("_js_").join(group).join("msgs"))
    {
        files.push(log);
    }
    files
}

/// Damages `file` as `damage` says, at a point `rng` picks.
pub(crate) fn damage(file: &Path, damage: Damage, rng: &mut StdRng) -> std::io::Result<Damaged> {
    let mut f = OpenOptions::new().read(true).write(true).open(file)?;
    let before = f.metadata()?.len();
    if before == 0 {
        return Ok(Damaged { file: file.to_owned(), before, after: before, at: 0 });
    }
    let at = match damage {
        Damage::Truncate => {
            let at = rng.random_range(before / 2..before);
            f.set_len(at)?;
            at
        }
        Damage::FlipBit => {
            let at = rng.random_range(0..before);
            let mut byte = [0u8];
            f.seek(SeekFrom::Start(at))?;
            f.read_exact(&mut byte)?;
            byte[0] ^= 1 << rng.random_range(0..8u32);
            f.seek(SeekFrom::Start(at))?;
            f.write_all(&byte)?;
            at
        }
    };
    f.sync_all()?;
    let after = f.metadata()?.len();
    Ok(Damaged { file: file.to_owned(), before, after, at })
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng as _;

    use super::*;

    /// A store laid out as nats-server lays one out: a stream's message blocks in an
    /// account's `streams/`, its Raft group's log under `$SYS/_js_/`.
    fn store(dir: &Path) -> PathBuf {
        let store = dir.join("store");
        let msgs = store.join("jetstream/$G/streams/JEPSEN/msgs");
        let log = store.join("jetstream/$SYS/_js_/S-R3F-abc/msgs");
        let other = store.join("jetstream/$G/streams/OTHER/msgs");
        for d in [&msgs, &log, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        for (d, n) in [(&msgs, 2), (&msgs, 10), (&msgs, 9), (&log, 1), (&other, 11)] {
            std::fs::write(d.join(format!("{n}.blk")), vec![0xA5u8; 1000]).unwrap();
        }
        std::fs::write(msgs.join("index.db"), b"not a block").unwrap();
        store
    }

    #[test]
    fn the_newest_block_is_the_highest_numbered_not_the_longest_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let newest = newest_block(&store.join("jetstream/$G/streams/JEPSEN/msgs")).unwrap();
        assert_eq!(newest.file_name().unwrap(), "10.blk");
        assert_eq!(newest_block(&dir.path().join("none")), None);
    }

    #[test]
    fn a_truncation_takes_the_streams_block_and_its_raft_log_a_flip_only_the_block() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let names = |files: Vec<PathBuf>| -> Vec<String> {
            files.iter().map(|f| f.strip_prefix(&store).unwrap().display().to_string()).collect()
        };
        assert_eq!(
            names(targets(&store, "JEPSEN", Some("S-R3F-abc"), Damage::Truncate)),
            ["jetstream/$G/streams/JEPSEN/msgs/10.blk", "jetstream/$SYS/_js_/S-R3F-abc/msgs/1.blk"]
        );
        assert_eq!(
            names(targets(&store, "JEPSEN", Some("S-R3F-abc"), Damage::FlipBit)),
            ["jetstream/$G/streams/JEPSEN/msgs/10.blk"]
        );
        assert!(targets(&store, "MISSING", None, Damage::Truncate).is_empty());
    }

    #[test]
    fn a_truncation_cuts_the_second_half_and_a_flip_changes_exactly_one_bit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("1.blk");
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..20 {
            std::fs::write(&file, vec![0x5Au8; 1000]).unwrap();
            let cut = damage(&file, Damage::Truncate, &mut rng).unwrap();
            assert_eq!((cut.before, cut.after), (1000, std::fs::metadata(&file).unwrap().len()));
            assert!((500..1000).contains(&cut.after), "{cut:?}");
            assert!(cut.to_string().contains("cut from 1000 to"), "{cut}");

            std::fs::write(&file, vec![0x5Au8; 1000]).unwrap();
            let flipped = damage(&file, Damage::FlipBit, &mut rng).unwrap();
            let bytes = std::fs::read(&file).unwrap();
            let bits: u32 = bytes.iter().map(|b| (b ^ 0x5A).count_ones()).sum();
            assert_eq!(bits, 1, "{flipped:?}");
            assert_ne!(bytes[flipped.at as usize], 0x5A);
            assert_eq!((flipped.before, flipped.after), (1000, 1000));
        }
    }
}
