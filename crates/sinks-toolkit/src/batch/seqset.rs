//! [`SeqSet`]: a set of stream sequences as sorted, disjoint, non-adjacent ranges, with a
//! compact text form for manifests (`1-5,9,12-20`).

use std::fmt;

/// A set of stream sequences.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqSet {
    /// Sorted, disjoint, non-adjacent inclusive ranges.
    ranges: Vec<(u64, u64)>,
    len: u64,
}

impl SeqSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `seq`; returns false when it was there already. Appending in increasing order
    /// (the usual case) is O(1).
    pub fn insert(&mut self, seq: u64) -> bool {
        if let Some(last) = self.ranges.last_mut() {
            if seq == last.1.wrapping_add(1) && last.1 != u64::MAX {
                last.1 = seq;
                self.len += 1;
                return true;
            }
            if seq > last.1 {
                self.ranges.push((seq, seq));
                self.len += 1;
                return true;
            }
        } else {
            self.ranges.push((seq, seq));
            self.len = 1;
            return true;
        }
        let i = self.ranges.partition_point(|r| r.1 < seq);
        if i < self.ranges.len() && self.ranges[i].0 <= seq {
            return false;
        }
        let joins_left = i > 0 && self.ranges[i - 1].1 + 1 == seq;
        let joins_right = i < self.ranges.len() && self.ranges[i].0 == seq + 1;
        match (joins_left, joins_right) {
            (true, true) => {
                self.ranges[i - 1].1 = self.ranges[i].1;
                self.ranges.remove(i);
            }
            (true, false) => self.ranges[i - 1].1 = seq,
            (false, true) => self.ranges[i].0 = seq,
            (false, false) => self.ranges.insert(i, (seq, seq)),
        }
        self.len += 1;
        true
    }

    /// Whether `seq` is in the set.
    pub fn contains(&self, seq: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.1 < seq);
        i < self.ranges.len() && self.ranges[i].0 <= seq
    }

    /// How many sequences it holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The smallest sequence.
    pub fn first(&self) -> Option<u64> {
        self.ranges.first().map(|r| r.0)
    }

    /// The largest sequence.
    pub fn last(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.1)
    }

    /// How many ranges (the memory it takes, in pairs).
    pub fn ranges(&self) -> usize {
        self.ranges.len()
    }

    /// Every sequence, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.ranges.iter().flat_map(|&(a, b)| a..=b)
    }

    /// True when the two sets share a sequence.
    pub fn intersects(&self, other: &Self) -> bool {
        let (mut i, mut j) = (0, 0);
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a, b) = (self.ranges[i], other.ranges[j]);
            if a.1 < b.0 {
                i += 1;
            } else if b.1 < a.0 {
                j += 1;
            } else {
                return true;
            }
        }
        false
    }

    /// Parses the text form written by `Display`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut set = Self::new();
        if text.is_empty() {
            return Ok(set);
        }
        let mut previous: Option<u64> = None;
        for part in text.split(',') {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a, b),
                None => (part, part),
            };
            let num = |s: &str| s.parse::<u64>().map_err(|_| format!("`{part}` is not a sequence or range"));
            let (a, b) = (num(a)?, num(b)?);
            if a > b || previous.is_some_and(|p| a <= p.saturating_add(1)) {
                return Err("ranges must be increasing, disjoint and not adjacent".into());
            }
            set.ranges.push((a, b));
            set.len += b - a + 1;
            previous = Some(b);
        }
        Ok(set)
    }
}

impl fmt::Display for SeqSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

impl FromIterator<u64> for SeqSet {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Self {
        let mut set = Self::new();
        for seq in iter {
            set.insert(seq);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn behaves_like_a_btreeset() {
        // A fixed pseudo-random walk over inserts, checked against BTreeSet.
        let mut set = SeqSet::new();
        let mut model = BTreeSet::new();
        let mut x: u64 = 12345;
        for _ in 0..5000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let seq = (x >> 33) % 400;
            assert_eq!(set.insert(seq), model.insert(seq), "insert {seq}");
        }
        assert_eq!(set.len(), model.len() as u64);
        assert_eq!(set.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
        for seq in 0..410 {
            assert_eq!(set.contains(seq), model.contains(&seq), "contains {seq}");
        }
        assert_eq!(set.first(), model.first().copied());
        assert_eq!(set.last(), model.last().copied());
        let text = set.to_string();
        assert_eq!(SeqSet::parse(&text).unwrap(), set, "text form round-trips");
    }

    #[test]
    fn text_form_and_intersections() {
        let set: SeqSet = [1, 2, 3, 5, 9, 10].into_iter().collect();
        assert_eq!(set.to_string(), "1-3,5,9-10");
        assert_eq!(set.ranges(), 3);
        assert!(SeqSet::parse("").unwrap().is_empty());
        for bad in ["3-1", "1,1", "1-3,4", "x", "1-", "5,2"] {
            assert!(SeqSet::parse(bad).is_err(), "{bad}");
        }
        let other: SeqSet = [4, 6, 7, 8].into_iter().collect();
        assert!(!set.intersects(&other));
        let touching: SeqSet = [8, 9].into_iter().collect();
        assert!(set.intersects(&touching));
        let appended: SeqSet = (100..=100_000).collect();
        assert_eq!(appended.ranges(), 1, "a contiguous run is one range");
        let mut max = SeqSet::new();
        assert!(max.insert(u64::MAX) && max.insert(u64::MAX - 1) && !max.insert(u64::MAX));
        assert_eq!(max.to_string(), format!("{}-{}", u64::MAX - 1, u64::MAX));
    }
}
