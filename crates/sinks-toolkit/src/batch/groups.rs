//! The objects a [`super::BatchWriter`] is filling, in memory, and the rules of their size:
//! a [`Group`] per open object (its messages' sequences, rows, bytes and encoder), sealed
//! when full or old and handed to the commit as a [`Closing`]; the writer's [`State`] (open
//! and sealed groups, the final outcomes decided since the last flush, the manifest logs it
//! knows, the objects committed or found recently). No I/O here.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::config::BatchConfig;
use super::index::{Committed, Index, PartKey};
use super::row::Encoder;
use super::seqset::SeqSet;
use sinks_contract::error::SinkError;
use sinks_contract::sink::{MessageOutcome, Settled};

/// Recently committed or found objects remembered for `BatchWriter::destination`.
const RECENT: usize = 256;

/// An object being filled.
pub(super) struct Group {
    pub(super) id: u64,
    pub(super) key: PartKey,
    pub(super) set: SeqSet,
    pub(super) rows: u64,
    pub(super) bytes: u64,
    pub(super) opened: Instant,
    pub(super) encoder: Option<Box<dyn Encoder>>,
    pub(super) path: Option<tempfile::TempPath>,
    pub(super) closing: bool,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").field("id", &self.id).field("rows", &self.rows).finish_non_exhaustive()
    }
}

impl Group {
    /// An empty group `id` of `key`, writing through `encoder` into the temporary file `path`.
    pub(super) fn new(
        id: u64,
        key: PartKey,
        encoder: Option<Box<dyn Encoder>>,
        path: Option<tempfile::TempPath>,
    ) -> Self {
        Self { id, key, set: SeqSet::new(), rows: 0, bytes: 0, opened: Instant::now(), encoder, path, closing: false }
    }

    /// Whether a row of `size` bytes must start the next object: an object never grows past
    /// `max_bytes` (but a first row always goes in).
    pub(super) fn cannot_take(&self, size: u64, max_bytes: u64) -> bool {
        self.rows > 0 && self.bytes + size > max_bytes
    }

    /// Counts the row of `seq`, `size` bytes, as written.
    pub(super) fn add(&mut self, seq: u64, size: u64) {
        self.set.insert(seq);
        self.rows += 1;
        self.bytes += size;
    }

    /// Whether the object holds as many messages or bytes as `batch` allows: it leaves the
    /// open set (the next message starts another object) and the next flush commits it.
    pub(super) fn is_full(&self, batch: &BatchConfig) -> bool {
        self.rows >= batch.max_messages || self.bytes >= batch.max_bytes
    }
}

/// Why a message's row of `size` bytes can go in no object: more than `max_bytes`, or than
/// the sink's own limit `max_row_bytes`.
pub(super) fn row_refusal(size: u64, batch: &BatchConfig, max_row_bytes: u64) -> Option<SinkError> {
    (size > batch.max_bytes.min(max_row_bytes)).then(|| {
        SinkError::permanent(format!(
            "the message's row is {size} bytes, more than one object may hold (sink.batch.max_bytes)"
        ))
        .with_error_type("ValidationError")
    })
}

/// A sealed group on its way to being committed.
pub(super) struct Closing {
    pub(super) id: u64,
    pub(super) key: PartKey,
    pub(super) set: SeqSet,
    pub(super) rows: u64,
    pub(super) encoder: Box<dyn Encoder>,
    pub(super) path: Option<tempfile::TempPath>,
}

/// What a writer holds in memory.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) open: HashMap<PartKey, Group>,
    pub(super) sealed: Vec<Group>,
    /// Final outcomes decided since the last flush.
    pub(super) done: Vec<Settled>,
    pub(super) index: Index,
    recent: VecDeque<(String, Arc<Committed>)>,
}

impl State {
    /// Whether the message `seq` of `key` is in an open or sealed object.
    pub(super) fn pending(&self, key: &PartKey, seq: u64) -> bool {
        self.open.get(key).is_some_and(|g| g.set.contains(seq))
            || self.sealed.iter().any(|g| g.key == *key && g.set.contains(seq))
    }

    /// Remembers that `committed` of the keyed stream `stream` was committed or found, for
    /// [`Self::recent`] (the last [`RECENT`] objects).
    pub(super) fn remember(&mut self, stream: &str, committed: &Arc<Committed>) {
        if self.recent.iter().any(|(s, c)| s == stream && Arc::ptr_eq(c, committed)) {
            return;
        }
        self.recent.push_back((stream.to_owned(), Arc::clone(committed)));
        while self.recent.len() > RECENT {
            self.recent.pop_front();
        }
    }

    /// The most recently remembered object of the keyed stream `stream` holding `sequence`.
    pub(super) fn recent(&self, stream: &str, sequence: u64) -> Option<&Arc<Committed>> {
        self.recent.iter().rev().find(|(s, c)| s == stream && c.set.contains(sequence)).map(|(_, c)| c)
    }

    /// Moves `key`'s open group, if any, to the sealed ones.
    pub(super) fn seal(&mut self, key: &PartKey) {
        if let Some(group) = self.open.remove(key) {
            self.sealed.push(group);
        }
    }

    /// Fails every message of `group` temporarily (its object cannot be committed).
    pub(super) fn fail_group(&mut self, key: &PartKey, set: &SeqSet, error: &SinkError) {
        let stream = stream_of(&key.1);
        self.done.extend(
            set.iter()
                .map(|sequence| Settled::new(stream.clone(), sequence, MessageOutcome::Failed(error.duplicate()))),
        );
    }

    /// Seals the open groups that are due (every one with `all`, else those open for
    /// `max_age`), and takes every sealed group not closing yet to close it, with the final
    /// outcomes decided since the last call.
    pub(super) fn take_due(&mut self, all: bool, max_age: Duration) -> (Vec<Closing>, Vec<Settled>) {
        let due: Vec<PartKey> =
            self.open.iter().filter(|(_, g)| all || g.opened.elapsed() >= max_age).map(|(k, _)| k.clone()).collect();
        for key in &due {
            self.seal(key);
        }
        let mut closing = Vec::new();
        for group in self.sealed.iter_mut().filter(|g| !g.closing) {
            if let Some(encoder) = group.encoder.take() {
                group.closing = true;
                closing.push(Closing {
                    id: group.id,
                    key: group.key.clone(),
                    set: group.set.clone(),
                    rows: group.rows,
                    encoder,
                    path: group.path.take(),
                });
            }
        }
        (closing, std::mem::take(&mut self.done))
    }
}

/// Locks `m`, whether or not a panic poisoned it.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The stream name in a keyed stream (`{stream}` or `{stream}.{epoch}`, a stream name
/// cannot contain `.`): what the runner names a pending message by
/// ([`crate::holding::key_of`]), so [`Settled`] outcomes carry it.
pub(super) fn stream_of(keyed: &str) -> String {
    keyed.split('.').next().unwrap_or(keyed).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::config::{BatchCompression, Format};
    use crate::batch::encode::encoder;

    fn key(partition: &str) -> PartKey {
        (partition.to_owned(), "ORDERS".to_owned())
    }

    fn committed(object: &str, sequences: &[u64]) -> Arc<Committed> {
        let mut set = SeqSet::new();
        for s in sequences {
            set.insert(*s);
        }
        Arc::new(Committed {
            object: object.into(),
            format: Format::Ndjson,
            compression: BatchCompression::None,
            set,
            bytes: 0,
            rows: 0,
        })
    }

    fn group(id: u64, partition: &str, sequences: &[u64]) -> Group {
        let file = tempfile::tempfile().unwrap();
        let mut g = Group::new(id, key(partition), Some(encoder(&BatchConfig::default(), file).unwrap()), None);
        for s in sequences {
            g.add(*s, 10);
        }
        g
    }

    #[test]
    fn settled_outcomes_name_the_stream_without_its_epoch() {
        for (keyed, stream) in [("ORDERS", "ORDERS"), ("ORDERS.e17", "ORDERS"), ("A_B-c.e1r2", "A_B-c")] {
            assert_eq!(stream_of(keyed), stream, "{keyed}");
        }
        let e = sinks_contract::testing::envelope("ORDERS", 5, "o", "{}").with_stream_epoch(Some("e17".into()));
        assert_eq!(crate::holding::key_of(&e).0, stream_of(&e.keyed_stream()), "the runner's pending key");
    }

    #[test]
    fn an_object_never_grows_past_its_caps_but_takes_a_first_row() {
        let batch = BatchConfig { max_messages: 3, max_bytes: 100, ..BatchConfig::default() };
        let mut g = Group::new(1, key("p"), None, None);
        assert!(!g.cannot_take(500, batch.max_bytes), "a first row always goes in");
        g.add(7, 60);
        assert!(g.cannot_take(41, batch.max_bytes));
        assert!(!g.cannot_take(40, batch.max_bytes));
        assert!(!g.is_full(&batch));
        g.add(8, 40);
        assert!(g.is_full(&batch), "full by bytes");
        let mut g = Group::new(2, key("p"), None, None);
        for s in 1..=3 {
            assert!(!g.is_full(&batch));
            g.add(s, 1);
        }
        assert!(g.is_full(&batch), "full by messages");
        assert_eq!((g.rows, g.bytes, g.set.len()), (3, 3, 3));
    }

    #[test]
    fn a_row_larger_than_an_object_or_the_sinks_limit_is_refused() {
        let batch = BatchConfig { max_bytes: 100, ..BatchConfig::default() };
        assert!(row_refusal(100, &batch, 1_000).is_none());
        let e = row_refusal(101, &batch, 1_000).unwrap();
        assert!(e.is_permanent() && e.to_string().contains("101 bytes"), "{e}");
        assert_eq!(e.error_type(), "ValidationError");
        assert!(row_refusal(60, &batch, 50).is_some(), "the sink's own limit");
    }

    #[test]
    fn a_message_is_pending_while_its_object_is_open_or_sealed() {
        let mut state = State::default();
        state.open.insert(key("a"), group(1, "a", &[1, 2]));
        assert!(state.pending(&key("a"), 2));
        assert!(!state.pending(&key("b"), 2), "another partition");
        state.seal(&key("a"));
        assert!(state.open.is_empty() && state.pending(&key("a"), 1), "sealed, still pending");
        state.seal(&key("a"));
        assert_eq!(state.sealed.len(), 1, "sealing nothing changes nothing");
        state.fail_group(&key("a"), &state.sealed[0].set.clone(), &SinkError::temporary("disk full"));
        assert_eq!(state.done.len(), 2);
        assert!(state.done.iter().all(|s| s.stream == "ORDERS" && s.outcome.failed_temporarily()));
    }

    #[test]
    fn a_flush_takes_what_is_due_once_with_the_outcomes_decided_so_far() {
        let mut state = State::default();
        state.open.insert(key("a"), group(1, "a", &[1]));
        state.open.insert(key("b"), group(2, "b", &[2]));
        state.done.push(Settled::new("ORDERS", 9, MessageOutcome::Committed));
        let (closing, done) = state.take_due(false, Duration::from_secs(3600));
        assert!(closing.is_empty(), "nothing is old enough");
        assert_eq!(done.len(), 1);
        state.seal(&key("b"));
        let (closing, done) = state.take_due(false, Duration::from_secs(3600));
        assert_eq!(closing.iter().map(|c| c.id).collect::<Vec<_>>(), vec![2], "the sealed one");
        assert!(done.is_empty());
        assert!(state.sealed.iter().all(|g| g.closing), "it stays sealed until it is committed");
        let (closing, _) = state.take_due(true, Duration::from_secs(3600));
        assert_eq!(
            closing.iter().map(|c| c.id).collect::<Vec<_>>(),
            vec![1],
            "every open one, the closing one not again"
        );
        assert!(state.open.is_empty());
    }

    #[test]
    fn recent_objects_are_remembered_once_and_bounded() {
        let mut state = State::default();
        let first = committed("p/1-2", &[1, 2]);
        state.remember("ORDERS", &first);
        state.remember("ORDERS", &first);
        assert_eq!(state.recent.len(), 1);
        assert_eq!(state.recent("ORDERS", 2).map(|c| c.object.as_str()), Some("p/1-2"));
        assert!(state.recent("ORDERS.e2", 2).is_none(), "another epoch's sequence 2 is another message");
        assert!(state.recent("ORDERS", 3).is_none());
        for n in 0..RECENT as u64 {
            state.remember("ORDERS", &committed(&format!("p/{n}"), &[100 + n]));
        }
        assert_eq!(state.recent.len(), RECENT);
        assert!(state.recent("ORDERS", 1).is_none(), "the oldest is forgotten");
        assert!(state.recent("ORDERS", 100).is_some());
    }
}
