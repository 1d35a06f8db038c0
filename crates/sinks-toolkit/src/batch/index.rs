//! What the batch writer knows about committed objects: per partition and stream, the
//! manifest log read from the destination ([`PartIndex`], one entry per slot), and the
//! payload fingerprints of objects read back for content checks ([`Fingerprints`]). Both
//! are caches with bounded size: a partition that is evicted is read again from the
//! destination the next time a message needs it, which is always correct, only slower.
//!
//! Pure bookkeeping: no I/O (the engine reads the destination and fills these in).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use super::config::{BatchCompression, Format};
use super::seqset::SeqSet;

/// A partition and a stream: the unit of one manifest log.
pub type PartKey = (String, String);

/// Partitions kept at most (the least recently used ones go first).
const MAX_PARTITIONS: usize = 4096;
/// Sequence ranges kept at most over all partitions (16 bytes each).
const MAX_RANGES: usize = 1 << 20;
/// Fingerprints kept at most over all objects read back.
const MAX_FINGERPRINTS: usize = 1 << 18;

/// One slot of a manifest log.
#[derive(Debug, Clone)]
pub enum Slot {
    /// A committed object: visible (or completed when its manifest was read) and holding
    /// these sequences.
    Committed(Arc<Committed>),
    /// A manifest whose object never became visible and can no longer be completed: it
    /// holds nothing.
    Void,
}

/// A committed object as its manifest describes it.
#[derive(Debug)]
pub struct Committed {
    /// The object key, relative to the sink's root or prefix.
    pub object: String,
    /// Its format.
    pub format: Format,
    /// Its compression.
    pub compression: BatchCompression,
    /// The sequences it holds.
    pub set: SeqSet,
    /// Its size in bytes.
    pub bytes: u64,
    /// Rows it holds.
    pub rows: u64,
}

/// The manifest log of one partition and stream, as far as it was read.
#[derive(Debug, Default)]
pub struct PartIndex {
    slots: BTreeMap<u64, Slot>,
    max_last: u64,
    ranges: usize,
    touched: u64,
}

impl PartIndex {
    /// Adds (or replaces) `slot`.
    pub fn insert(&mut self, slot: u64, entry: Slot) {
        if let Slot::Committed(c) = &entry {
            self.max_last = self.max_last.max(c.set.last().unwrap_or(0));
            self.ranges += c.set.ranges();
        }
        if let Some(Slot::Committed(old)) = self.slots.insert(slot, entry) {
            self.ranges = self.ranges.saturating_sub(old.set.ranges());
        }
    }

    /// The entry of `slot`, when it was read.
    pub fn slot(&self, slot: u64) -> Option<&Slot> {
        self.slots.get(&slot)
    }

    /// Whether `slot` was read.
    pub fn has(&self, slot: u64) -> bool {
        self.slots.contains_key(&slot)
    }

    /// The slot a new manifest is tried at: one past the highest known.
    pub fn next_slot(&self) -> u64 {
        self.slots.keys().next_back().map_or(0, |s| s + 1)
    }

    /// The committed object holding `seq`, if any.
    pub fn lookup(&self, seq: u64) -> Option<&Arc<Committed>> {
        if seq > self.max_last {
            return None;
        }
        self.slots.values().find_map(|slot| match slot {
            Slot::Committed(c) if c.set.contains(seq) => Some(c),
            _ => None,
        })
    }

    /// The committed objects sharing a sequence with `set`.
    pub fn overlapping(&self, set: &SeqSet) -> Vec<Arc<Committed>> {
        self.slots
            .values()
            .filter_map(|slot| match slot {
                Slot::Committed(c) if c.set.intersects(set) => Some(Arc::clone(c)),
                _ => None,
            })
            .collect()
    }

    /// The slots it knows.
    pub fn slots(&self) -> impl Iterator<Item = u64> + '_ {
        self.slots.keys().copied()
    }

    /// How many slots it knows.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when it knows no slot.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

/// Every partition index the writer holds, bounded in partitions and ranges.
#[derive(Debug, Default)]
pub struct Index {
    parts: HashMap<PartKey, PartIndex>,
    clock: u64,
}

impl Index {
    /// The index of `key`, marked as used now.
    pub fn get_mut(&mut self, key: &PartKey) -> Option<&mut PartIndex> {
        self.clock += 1;
        let clock = self.clock;
        let part = self.parts.get_mut(key)?;
        part.touched = clock;
        Some(part)
    }

    /// Whether `key` is loaded.
    pub fn contains(&self, key: &PartKey) -> bool {
        self.parts.contains_key(key)
    }

    /// Stores a freshly read index for `key`, evicting the least recently used partitions
    /// (never `keep`) while the bounds are exceeded.
    pub fn put(&mut self, key: PartKey, mut part: PartIndex, keep: &[&PartKey]) {
        self.clock += 1;
        part.touched = self.clock;
        self.parts.insert(key.clone(), part);
        loop {
            let ranges: usize = self.parts.values().map(|p| p.ranges).sum();
            if self.parts.len() <= MAX_PARTITIONS && ranges <= MAX_RANGES {
                break;
            }
            let victim = self
                .parts
                .iter()
                .filter(|(k, _)| **k != key && !keep.contains(k))
                .min_by_key(|(_, p)| p.touched)
                .map(|(k, _)| k.clone());
            match victim {
                Some(victim) => {
                    self.parts.remove(&victim);
                }
                None => break,
            }
        }
    }

    /// How many partitions are loaded.
    pub fn partitions(&self) -> usize {
        self.parts.len()
    }
}

/// Payload fingerprints (`stream_sequence → payload_sha256`) of objects read back, bounded.
#[derive(Debug, Default)]
pub struct Fingerprints {
    objects: HashMap<String, Arc<HashMap<u64, String>>>,
    order: VecDeque<String>,
    entries: usize,
}

impl Fingerprints {
    /// The fingerprints of `object`, when they were read.
    pub fn get(&self, object: &str) -> Option<Arc<HashMap<u64, String>>> {
        self.objects.get(object).cloned()
    }

    /// Keeps the fingerprints of `object`, dropping the oldest objects beyond the bound.
    pub fn put(&mut self, object: String, prints: Arc<HashMap<u64, String>>) {
        self.entries += prints.len();
        if self.objects.insert(object.clone(), prints).is_none() {
            self.order.push_back(object);
        }
        while self.entries > MAX_FINGERPRINTS && self.order.len() > 1 {
            if let Some(old) = self.order.pop_front()
                && let Some(gone) = self.objects.remove(&old)
            {
                self.entries -= gone.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(object: &str, seqs: &[u64]) -> Slot {
        Slot::Committed(Arc::new(Committed {
            object: object.into(),
            format: Format::Ndjson,
            compression: BatchCompression::None,
            set: seqs.iter().copied().collect(),
            bytes: 0,
            rows: 0,
        }))
    }

    #[test]
    fn lookups_and_overlaps_follow_the_slots() {
        let mut p = PartIndex::default();
        assert_eq!(p.next_slot(), 0);
        p.insert(0, committed("a", &[1, 2, 3, 10]));
        p.insert(1, Slot::Void);
        p.insert(2, committed("b", &[4, 5, 11]));
        assert_eq!(p.next_slot(), 3);
        assert_eq!(p.lookup(10).map(|c| c.object.as_str()), Some("a"));
        assert_eq!(p.lookup(11).map(|c| c.object.as_str()), Some("b"));
        assert!(p.lookup(6).is_none() && p.lookup(12).is_none());
        let ours: SeqSet = [6, 7, 11].into_iter().collect();
        let hits: Vec<String> = p.overlapping(&ours).iter().map(|c| c.object.clone()).collect();
        assert_eq!(hits, ["b"]);
        assert!(p.overlapping(&[6, 7].into_iter().collect()).is_empty());
    }

    #[test]
    fn the_least_recently_used_partition_is_evicted_first() {
        let mut index = Index::default();
        let key = |i: usize| (format!("p{i}"), "S".to_owned());
        for i in 0..MAX_PARTITIONS {
            index.put(key(i), PartIndex::default(), &[]);
        }
        assert!(index.get_mut(&key(0)).is_some(), "touch p0");
        index.put(key(MAX_PARTITIONS), PartIndex::default(), &[]);
        assert_eq!(index.partitions(), MAX_PARTITIONS);
        assert!(index.contains(&key(0)), "recently used");
        assert!(!index.contains(&key(1)), "least recently used, evicted");
        let k2 = key(2);
        index.put(key(MAX_PARTITIONS + 1), PartIndex::default(), &[&k2]);
        assert!(index.contains(&k2) && !index.contains(&key(3)), "a kept partition is never evicted");
    }

    #[test]
    fn fingerprints_stay_bounded() {
        let mut f = Fingerprints::default();
        let prints = |n: u64| Arc::new((0..n).map(|s| (s, String::new())).collect::<HashMap<_, _>>());
        f.put("a".into(), prints(MAX_FINGERPRINTS as u64 / 2));
        f.put("b".into(), prints(MAX_FINGERPRINTS as u64 / 2));
        assert!(f.get("a").is_some());
        f.put("c".into(), prints(10));
        assert!(f.get("a").is_none() && f.get("b").is_some() && f.get("c").is_some());
    }
}
