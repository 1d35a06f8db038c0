//! The stream's identity, pinned: what the consumer has seen of its stream, kept where it
//! outlives the stream, so that a stream deleted and re-created, restored from a backup or
//! rewound by a crash is recognised before its reused sequences are written.
//!
//! One [`Record`] per stream and consumer lives in a JetStream key-value bucket
//! (`stream_guard.bucket`). A bucket, rather than consumer metadata or the stream itself,
//! because deleting a stream deletes its consumers with it, while the bucket is a stream of
//! its own: it survives the deletion it must recognise, every worker of the consumer reads
//! the same record, and its revisions give compare-and-set updates, so two workers never
//! overwrite each other's decision.
//!
//! The record holds the identity the consumer works in (the stream's creation time and the
//! epoch its keys are scoped to), the highest stream sequence seen and the consumer's highest
//! ack floor, the identities before it, and a change detected and not decided yet.
//! [`judge`] compares it with the live stream: a different creation time is a re-created
//! stream, a last sequence below the highest one seen is a rewound stream (restored from a
//! backup, or a tail lost by the server). Both hand out sequences that named other events.
//! [`Record::decide`] applies the operator's decision: a new epoch (the new stream's keys get
//! `{stream}.{epoch}`, so they cannot collide) or a replay (the same data restored: the key
//! space stays, and what is there already comes back as duplicates).

use async_nats::jetstream::kv::{self, CreateErrorKind, UpdateErrorKind};
use async_nats::jetstream::{self, Context};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::config::{Config, ConfigError, ConsumerMode};
use crate::setup::SetupError;

/// The record's format version.
pub const RECORD_VERSION: u32 = 1;

/// At most this many earlier identities are kept in a record (the oldest go first).
const MAX_HISTORY: usize = 32;

/// What the live stream looks like now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    /// The stream's creation time.
    pub created: OffsetDateTime,
    /// Its first sequence.
    pub first_sequence: u64,
    /// Its last sequence.
    pub last_sequence: u64,
    /// The consumer's ack floor (every sequence up to it is settled), 0 when unknown.
    pub ack_floor: u64,
}

/// How the stream changed under the consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Deleted and created again (another creation time).
    Recreated,
    /// The same stream with its last sequence below the highest one seen (restored from a
    /// backup, or its tail lost).
    Rewound,
}

impl ChangeKind {
    /// `re-created` or `rewound`, for messages.
    pub fn as_words(self) -> &'static str {
        match self {
            Self::Recreated => "deleted and re-created",
            Self::Rewound => "moved back (restored from a backup, or its tail lost)",
        }
    }
}

/// A change of identity detected and not decided yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// How it changed.
    pub kind: ChangeKind,
    /// The live stream's creation time (RFC 3339).
    pub created: String,
    /// Its first sequence when detected.
    pub first_sequence: u64,
    /// Its last sequence when detected.
    pub last_sequence: u64,
    /// When it was detected (RFC 3339).
    pub detected_at: String,
}

/// What the operator decided about a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The new stream's messages get keys of their own (`{stream}.{epoch}`).
    NewEpoch,
    /// The same data came back: keys as before; what is stored comes back as duplicates.
    Replay,
}

impl Decision {
    /// `new-epoch` or `replay`, as the command takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NewEpoch => "new-epoch",
            Self::Replay => "replay",
        }
    }
}

/// An identity the consumer worked in before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Past {
    /// That stream's creation time.
    pub created: String,
    /// The epoch its keys were scoped to (`None`: the first).
    pub epoch: Option<String>,
    /// The highest sequence seen in it.
    pub last_sequence: u64,
    /// The highest ack floor of the consumer in it.
    pub settled: u64,
    /// How it ended.
    pub ended_by: ChangeKind,
    /// What was decided.
    pub decision: Decision,
    /// When it ended (RFC 3339).
    pub ended_at: String,
}

/// One stream's identity as one consumer knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// [`RECORD_VERSION`].
    pub version: u32,
    /// The stream.
    pub stream: String,
    /// The consumer.
    pub consumer: String,
    /// The creation time of the stream the consumer works in (RFC 3339).
    pub created: String,
    /// The epoch its keys are scoped to (`None`: the first identity, keys as always).
    pub epoch: Option<String>,
    /// The highest stream sequence seen in it.
    pub last_sequence: u64,
    /// The highest ack floor of the consumer seen in it (every sequence up to it settled).
    pub settled: u64,
    /// When the record was written last (RFC 3339).
    pub updated_at: String,
    /// The identities before this one, oldest first.
    #[serde(default)]
    pub history: Vec<Past>,
    /// A change detected and not decided yet.
    #[serde(default)]
    pub pending: Option<Change>,
}

/// What [`judge`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The stream the record names.
    Same,
    /// Another identity.
    Changed(ChangeKind),
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

fn parse(t: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(t, &Rfc3339).ok()
}

/// Compares `record` with the live stream: another creation time is a re-created stream; a
/// last sequence below the highest one seen is a rewound stream. Pure.
pub fn judge(record: &Record, live: &Live) -> Verdict {
    if parse(&record.created) != Some(live.created) {
        Verdict::Changed(ChangeKind::Recreated)
    } else if live.last_sequence < record.last_sequence {
        Verdict::Changed(ChangeKind::Rewound)
    } else {
        Verdict::Same
    }
}

/// The epoch tag of a new epoch after `change`: `e` and the new stream's creation time in
/// Unix nanoseconds (two workers deciding on their own agree on it); after a rewind, which
/// keeps the creation time, also `r` and the detection time in Unix milliseconds. Only
/// characters every destination keeps in a name.
pub fn epoch_tag(change: &Change) -> String {
    let created = parse(&change.created).map_or(0, OffsetDateTime::unix_timestamp_nanos);
    match change.kind {
        ChangeKind::Recreated => format!("e{created}"),
        ChangeKind::Rewound => {
            let detected = parse(&change.detected_at).map_or(0, |t| t.unix_timestamp_nanos() / 1_000_000);
            format!("e{created}r{detected}")
        }
    }
}

/// The epoch tag a stream created at `created` gets when a new epoch is decided for it after
/// a re-creation (the same as [`epoch_tag`] gives): what `redrive --new-epoch` writes under
/// after a `replay` that should have been a new epoch.
pub fn epoch_of_stream(created: OffsetDateTime) -> String {
    format!("e{}", created.unix_timestamp_nanos())
}

impl Record {
    /// The first record of `stream` and `consumer`: the live identity, first epoch.
    pub fn first(stream: &str, consumer: &str, live: &Live, now: OffsetDateTime) -> Self {
        Self {
            version: RECORD_VERSION,
            stream: stream.to_owned(),
            consumer: consumer.to_owned(),
            created: rfc3339(live.created),
            epoch: None,
            last_sequence: live.last_sequence,
            settled: live.ack_floor,
            updated_at: rfc3339(now),
            history: Vec::new(),
            pending: None,
        }
    }

    /// Takes in what the live stream of the same identity shows: the highest last sequence
    /// and ack floor. True when the record changed (and should be written).
    pub fn observe(&mut self, live: &Live, now: OffsetDateTime) -> bool {
        let (last, settled) = (self.last_sequence.max(live.last_sequence), self.settled.max(live.ack_floor));
        if (last, settled) == (self.last_sequence, self.settled) {
            return false;
        }
        (self.last_sequence, self.settled, self.updated_at) = (last, settled, rfc3339(now));
        true
    }

    /// The change the live stream is, as it will be recorded.
    pub fn change(kind: ChangeKind, live: &Live, now: OffsetDateTime) -> Change {
        Change {
            kind,
            created: rfc3339(live.created),
            first_sequence: live.first_sequence,
            last_sequence: live.last_sequence,
            detected_at: rfc3339(now),
        }
    }

    /// Applies `decision` to `change`: the current identity goes to the history and the
    /// changed stream becomes the one the consumer works in, in a new epoch or (a replay) the
    /// same one. Clears `pending`.
    pub fn decide(&mut self, change: &Change, decision: Decision, live: &Live, now: OffsetDateTime) {
        self.history.push(Past {
            created: self.created.clone(),
            epoch: self.epoch.clone(),
            last_sequence: self.last_sequence,
            settled: self.settled,
            ended_by: change.kind,
            decision,
            ended_at: rfc3339(now),
        });
        if self.history.len() > MAX_HISTORY {
            self.history.remove(0);
        }
        if decision == Decision::NewEpoch {
            self.epoch = Some(epoch_tag(change));
        }
        self.created = change.created.clone();
        self.last_sequence = live.last_sequence;
        self.settled = live.ack_floor;
        self.updated_at = rfc3339(now);
        self.pending = None;
    }

    /// The identity in words, for logs and the command: creation time, epoch, sequences.
    pub fn describe(&self) -> String {
        format!(
            "created {}, epoch {}, last sequence {}, settled through {}",
            self.created,
            self.epoch.as_deref().unwrap_or("first"),
            self.last_sequence,
            self.settled
        )
    }
}

/// The key of `stream` and `consumer` in the bucket: both names as they are when they hold
/// only letters, digits, `_` and `-`, else `=` and their hex; joined with `.`.
pub fn record_key(stream: &str, consumer: &str) -> String {
    let part = |name: &str| {
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            name.to_owned()
        } else {
            format!("={}", hex::encode(name))
        }
    };
    format!("{}.{}", part(stream), part(consumer))
}

/// The bucket of identity records, and this consumer's key in it.
#[derive(Clone)]
pub(crate) struct Store {
    kv: kv::Store,
    key: String,
    bucket: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("bucket", &self.bucket).field("key", &self.key).finish()
    }
}

fn unavailable(e: impl std::fmt::Display) -> SetupError {
    SetupError::Unavailable(e.to_string())
}

/// A record written meanwhile by another worker: read it again and decide on that.
#[derive(Debug)]
pub(crate) struct Raced;

impl Store {
    /// Binds the bucket of `config.stream_guard` (creating it, with `replicas`, in the
    /// `create_if_missing` and `reconcile` consumer modes; in `bind_only` a missing bucket
    /// is a configuration error naming the fix).
    pub(crate) async fn open(js: &Context, config: &Config, replicas: usize) -> Result<Self, SetupError> {
        let program = crate::program::name();
        let bucket = config.stream_guard.bucket.clone();
        let key = record_key(&config.nats.stream, &config.nats.consumer);
        let kv = match js.get_key_value(&bucket).await {
            Ok(kv) => kv,
            Err(e) if e.kind() == jetstream::context::KeyValueErrorKind::GetBucket => {
                if config.consumer_management.mode == ConsumerMode::BindOnly {
                    return Err(ConfigError::single(
                        "stream_guard.bucket",
                        format!(
                            "key-value bucket `{bucket}` does not exist and consumer_management.mode is bind_only: \
                             create it (`{program} stream-plan` prints the command) or set stream_guard.identity = false"
                        ),
                    )
                    .into());
                }
                let created = js
                    .create_key_value(kv::Config {
                        bucket: bucket.clone(),
                        description: "nats-sinks: the identity of each consumed stream, per consumer".into(),
                        history: 5,
                        storage: jetstream::stream::StorageType::File,
                        num_replicas: replicas.max(1),
                        ..Default::default()
                    })
                    .await
                    .map_err(unavailable)?;
                tracing::info!(bucket = %bucket, "created the stream identity bucket");
                created
            }
            Err(e) => return Err(unavailable(e)),
        };
        Ok(Self { kv, key, bucket })
    }

    /// The bucket's name.
    pub(crate) fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The record and its revision, if there is one.
    pub(crate) async fn load(&self) -> Result<Option<(Record, u64)>, SetupError> {
        let Some(entry) = self.kv.entry(self.key.clone()).await.map_err(unavailable)? else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        let record: Record = serde_json::from_slice(&entry.value).map_err(|e| {
            SetupError::Config(ConfigError::single(
                "stream_guard.bucket",
                format!("the identity record `{}` in bucket `{}` is not readable: {e}", self.key, self.bucket),
            ))
        })?;
        Ok(Some((record, entry.revision)))
    }

    /// Writes `record`: created when `revision` is `None`, else only over that revision.
    /// `Err(Ok(Raced))` when another worker wrote first.
    pub(crate) async fn save(&self, record: &Record, revision: Option<u64>) -> Result<u64, Result<Raced, SetupError>> {
        let value = Bytes::from(serde_json::to_vec(record).unwrap_or_default());
        match revision {
            None => match self.kv.create(&self.key, value).await {
                Ok(r) => Ok(r),
                Err(e) if e.kind() == CreateErrorKind::AlreadyExists => Err(Ok(Raced)),
                Err(e) => Err(Err(unavailable(e))),
            },
            Some(revision) => match self.kv.update(&self.key, value, revision).await {
                Ok(r) => Ok(r),
                Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => Err(Ok(Raced)),
                Err(e) => Err(Err(unavailable(e))),
            },
        }
    }
}

/// `nats-sink stream-identity`: what the record says and what the live stream is; with
/// `decision`, applies it to the change waiting for one (or to a change found now). Returns
/// the lines to print. Writes nothing without a decision.
pub(crate) async fn operate(
    js: &Context,
    config: &Config,
    decision: Option<Decision>,
) -> Result<Vec<String>, SetupError> {
    let (stream_name, consumer_name) = (&config.nats.stream, &config.nats.consumer);
    let stream = js.get_stream(stream_name).await.map_err(|e| {
        SetupError::Config(ConfigError::single("nats.stream", format!("cannot read stream `{stream_name}`: {e}")))
    })?;
    let info = stream.get_info().await.map_err(unavailable)?;
    let ack_floor = match stream.consumer_info(consumer_name).await {
        Ok(c) => c.ack_floor.stream_sequence,
        Err(_) => 0,
    };
    let live = Live {
        created: info.created,
        first_sequence: info.state.first_sequence,
        last_sequence: info.state.last_sequence,
        ack_floor,
    };
    let store = Store::open(js, config, info.config.num_replicas).await?;
    let mut lines = vec![format!(
        "stream `{stream_name}` now: created {}, sequences {}..={}; consumer `{consumer_name}` settled through {ack_floor}",
        rfc3339(live.created),
        live.first_sequence,
        live.last_sequence
    )];
    let Some((mut record, revision)) = store.load().await? else {
        lines.push(format!(
            "no identity record in bucket `{}` yet: the next run pins this stream as the first epoch",
            store.bucket()
        ));
        return Ok(lines);
    };
    lines.push(format!("recorded: {}", record.describe()));
    for past in &record.history {
        lines.push(format!(
            "  before: created {}, epoch {}, last sequence {}, settled through {}; ended {} ({}), decided {}",
            past.created,
            past.epoch.as_deref().unwrap_or("first"),
            past.last_sequence,
            past.settled,
            past.ended_at,
            past.ended_by.as_words(),
            past.decision.as_str()
        ));
    }
    let now = OffsetDateTime::now_utc();
    let change = match (&record.pending, judge(&record, &live)) {
        (Some(pending), _) => Some(pending.clone()),
        (None, Verdict::Changed(kind)) => Some(Record::change(kind, &live, now)),
        (None, Verdict::Same) => None,
    };
    match (change, decision) {
        (None, Some(Decision::NewEpoch)) if record.history.last().is_some_and(|p| p.decision == Decision::Replay) => {
            let past = record.history.last().map(|p| p.ended_at.clone()).unwrap_or_default();
            lines.push(format!(
                "the stream is the one recorded: nothing to decide. It was decided `replay` ({past}); if that was wrong, \
                 the new events it refused as sequence_reused come back, each under a key of this stream's own epoch, \
                 with `{} redrive CONFIG --new-epoch` (docs/redrive.md); the new events stored meanwhile keep their keys",
                crate::program::name()
            ));
        }
        (None, _) => lines.push("the stream is the one recorded: nothing to decide".into()),
        (Some(change), None) => lines.push(format!(
            "the stream was {} ({}): undecided; fetching is paused until `--accept new-epoch` or `--accept replay`",
            change.kind.as_words(),
            change.detected_at
        )),
        (Some(change), Some(decision)) => {
            record.decide(&change, decision, &live, now);
            match store.save(&record, Some(revision)).await {
                Ok(_) => lines.push(format!(
                    "decided {}: the consumer now works in {} (running workers resume within stream_guard.recheck_seconds)",
                    decision.as_str(),
                    record.describe()
                )),
                Err(Ok(Raced)) => {
                    return Err(SetupError::Unavailable(
                        "the identity record changed while it was decided (another worker or operator); run the command again"
                            .into(),
                    ));
                }
                Err(Err(e)) => return Err(e),
            }
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(unix: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(unix).unwrap()
    }

    fn live(created: i64, last: u64, floor: u64) -> Live {
        Live { created: at(created), first_sequence: 1, last_sequence: last, ack_floor: floor }
    }

    #[test]
    fn the_verdict_table() {
        let record = Record::first("ORDERS", "sink", &live(100, 40, 40), at(200));
        // (live stream, verdict)
        let rows = [
            (live(100, 40, 40), Verdict::Same),
            (live(100, 90, 60), Verdict::Same),
            (live(100, 39, 39), Verdict::Changed(ChangeKind::Rewound)),
            (live(100, 0, 0), Verdict::Changed(ChangeKind::Rewound)),
            (live(101, 40, 40), Verdict::Changed(ChangeKind::Recreated)),
            (live(99, 100, 0), Verdict::Changed(ChangeKind::Recreated)),
        ];
        for (l, want) in rows {
            assert_eq!(judge(&record, &l), want, "{l:?}");
        }
        // The creation time compares as a time, not as text.
        let mut other_text = record.clone();
        other_text.created = "1970-01-01T00:01:40.000000000Z".into();
        assert_eq!(judge(&other_text, &live(100, 40, 40)), Verdict::Same);
    }

    #[test]
    fn observing_keeps_the_highest_sequences_and_says_when_to_write() {
        let mut record = Record::first("S", "c", &live(1, 10, 5), at(2));
        assert!(!record.observe(&live(1, 10, 5), at(3)), "nothing new");
        assert!(record.observe(&live(1, 12, 4), at(4)));
        assert_eq!((record.last_sequence, record.settled), (12, 5), "an ack floor never moves back");
        assert_eq!(record.updated_at, rfc3339(at(4)));
    }

    #[test]
    fn a_new_epoch_scopes_keys_and_a_replay_keeps_them() {
        let old = Record::first("S", "c", &live(100, 40, 40), at(150));
        let recreated = live(300, 40, 0);
        let change = Record::change(ChangeKind::Recreated, &recreated, at(310));
        let mut epoch = old.clone();
        epoch.pending = Some(change.clone());
        epoch.decide(&change, Decision::NewEpoch, &recreated, at(320));
        assert_eq!(epoch.epoch.as_deref(), Some("e300000000000"));
        assert_eq!(judge(&epoch, &recreated), Verdict::Same, "the decided identity is the live one");
        assert_eq!((epoch.last_sequence, epoch.settled, epoch.pending.as_ref()), (40, 0, None));
        assert_eq!(epoch.history.len(), 1);
        assert_eq!(epoch.history[0].epoch, None);
        assert_eq!(epoch.history[0].last_sequence, 40);
        assert_eq!(epoch.history[0].decision, Decision::NewEpoch);
        let mut replay = old.clone();
        replay.decide(&change, Decision::Replay, &recreated, at(320));
        assert_eq!(replay.epoch, None, "a replay keeps the key space");
        // A rewind keeps the creation time; its epoch carries the detection time too.
        let rewound = live(100, 30, 30);
        let back = Record::change(ChangeKind::Rewound, &rewound, at(400));
        assert_eq!(epoch_tag(&back), "e100000000000r400000");
        // A second change after a new epoch gets yet another tag.
        let again = live(500, 5, 0);
        epoch.decide(&Record::change(ChangeKind::Recreated, &again, at(510)), Decision::NewEpoch, &again, at(510));
        assert_eq!(epoch.epoch.as_deref(), Some("e500000000000"));
        assert_eq!(epoch.history.len(), 2);
    }

    #[test]
    fn the_history_is_bounded() {
        let mut record = Record::first("S", "c", &live(1, 1, 1), at(1));
        for i in 2..(MAX_HISTORY as i64 + 10) {
            let l = live(i, 1, 1);
            record.decide(&Record::change(ChangeKind::Recreated, &l, at(i)), Decision::NewEpoch, &l, at(i));
        }
        assert_eq!(record.history.len(), MAX_HISTORY);
        assert_eq!(record.history.last().unwrap().created, rfc3339(at(MAX_HISTORY as i64 + 8)));
    }

    #[test]
    fn record_keys_are_valid_bucket_keys_and_never_merge_two_names() {
        assert_eq!(record_key("ORDERS", "sink-1"), "ORDERS.sink-1");
        let odd = record_key("A@B", "c");
        assert_eq!(odd, format!("={}.c", hex::encode("A@B")));
        assert!(odd.chars().all(|c| c.is_ascii_alphanumeric() || "-_=.".contains(c)));
        assert_ne!(record_key("a_b", "c"), record_key("a", "b_c"));
    }

    #[test]
    fn the_record_reads_back_as_written() {
        let record = Record::first("S", "c", &live(7, 3, 2), at(9));
        let text = serde_json::to_string(&record).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), record);
        assert!(text.contains(r#""epoch":null"#) && text.contains(r#""pending":null"#), "{text}");
    }
}
