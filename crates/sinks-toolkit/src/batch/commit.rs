//! Committing a closed object: its encoder finished into the file, staged, a slot claimed
//! in the partition's manifest log (the commit point: before every attempt the known log is
//! checked for one of the object's messages, and a slot taken by another writer is read
//! before the next), then completed. A temporary failure is retried with jittered backoff for
//! `commit_retry_seconds` while the messages stay pending; an object that lost its slot to
//! one holding some of its messages is abandoned.

use std::fs::File;
use std::sync::Arc;
use std::time::Duration;

use super::encode::Encoder;
use super::engine::Inner;
use super::groups::{Closing, lock, stream_of};
use super::index::{Committed, PartKey, Slot};
use super::manifest::{MANIFEST_SCHEMA, Manifest};
use super::naming;
use super::object_log::{ObjectLog, TempObject};
use super::seqset::SeqSet;
use sinks_contract::error::SinkError;
use sinks_contract::sink::{MessageOutcome, Settled};

/// Attempts at one slot when its create was ambiguous (a timeout: it may have been made).
const AMBIGUOUS_ATTEMPTS: u32 = 3;
/// The first pause before a commit is tried again.
const FIRST_RETRY: Duration = Duration::from_millis(250);
/// The longest pause between two attempts at a commit.
const LONGEST_RETRY: Duration = Duration::from_secs(5);

/// How a claim ended.
enum Claim {
    /// This writer's manifest is at this slot.
    Slot(u64),
    /// Committed objects already hold some of the messages: the object is abandoned.
    Lost(Vec<Arc<Committed>>),
}

/// The pause before the next attempt after one that waited `delay` nominally, jittered by
/// `random` (in `0..1`): between half and all of `delay`.
fn jittered(delay: Duration, random: f64) -> Duration {
    delay.mul_f64(0.5 + random / 2.0)
}

/// The nominal delay after `delay`: twice as long, at most [`LONGEST_RETRY`].
fn next_delay(delay: Duration) -> Duration {
    (delay * 2).min(LONGEST_RETRY)
}

/// The outcomes of an object of `key` holding `set` that lost its slot to objects holding
/// some of its messages (`overlap`): those are duplicates; the rest come back and go into
/// another object. Also the number of duplicates.
fn abandoned(key: &PartKey, set: &SeqSet, overlap: &[Arc<Committed>]) -> (Vec<Settled>, u64) {
    let mut duplicates = 0u64;
    let out: Vec<Settled> = set
        .iter()
        .map(|sequence| {
            let outcome = if overlap.iter().any(|c| c.set.contains(sequence)) {
                duplicates += 1;
                MessageOutcome::Duplicate
            } else {
                MessageOutcome::temporary("the batch object lost its manifest slot to another writer's object")
            };
            Settled::new(stream_of(&key.1), sequence, outcome)
        })
        .collect();
    (out, duplicates)
}

impl<L: ObjectLog> Inner<L> {
    /// Closes one object: finish, stage, claim a slot, complete. Returns its messages'
    /// outcomes. A temporary failure is retried with backoff for `commit_retry_seconds`
    /// (the messages stay pending meanwhile); a permanent one, or one past that time,
    /// fails every message of the object.
    pub(super) async fn close(&self, c: Closing) -> Vec<Settled> {
        let Closing { id, key, set, rows, encoder, path } = c;
        let retry_for = Duration::from_secs(self.settings.batch.commit_retry_seconds);
        let settled = match self.finish(encoder).await {
            Ok(file) => self.commit_retrying(&key, &set, rows, file, path, retry_for).await,
            Err(e) => Err(e),
        };
        let settled = match settled {
            Ok(outcomes) => outcomes,
            Err(error) => {
                tracing::warn!(
                    sink = self.settings.sink,
                    rows,
                    first = set.first(),
                    last = set.last(),
                    error = %error.display_chain(),
                    "batch object not committed; its messages come back"
                );
                set.iter()
                    .map(|sequence| {
                        Settled::new(stream_of(&key.1), sequence, MessageOutcome::Failed(error.duplicate()))
                    })
                    .collect()
            }
        };
        lock(&self.state).sealed.retain(|g| g.id != id);
        settled
    }

    /// Writes out the object's last bytes: the finished file.
    async fn finish(&self, encoder: Box<dyn Encoder>) -> Result<File, SinkError> {
        crate::blocking::blocking(move || {
            encoder.finish().map_err(|e| SinkError::temporary("cannot finish the batch object").with_source(e))
        })
        .await
    }

    /// [`Self::commit`], tried again while it fails temporarily and `retry_for` lasts, with
    /// jittered backoff from 250 ms to 5 s. Each attempt stages from the same finished file.
    async fn commit_retrying(
        &self,
        key: &PartKey,
        set: &SeqSet,
        rows: u64,
        file: File,
        mut path: Option<tempfile::TempPath>,
        retry_for: Duration,
    ) -> Result<Vec<Settled>, SinkError> {
        let deadline = tokio::time::Instant::now() + retry_for;
        let mut delay = FIRST_RETRY;
        let mut attempt = 1u32;
        loop {
            // The first attempt stages the finished file itself; a later one a fresh copy of
            // it (a failed attempt may have consumed or removed its temp name).
            let temp = match path.take() {
                Some(path) => TempObject {
                    file: file
                        .try_clone()
                        .map_err(|e| SinkError::temporary("cannot reopen a batch object").with_source(e))?,
                    path: Some(path),
                },
                None if attempt == 1 => TempObject {
                    file: file
                        .try_clone()
                        .map_err(|e| SinkError::temporary("cannot reopen a batch object").with_source(e))?,
                    path: None,
                },
                None => self.copy_of(&file, &key.0).await?,
            };
            let error = match self.commit(key, set, rows, temp).await {
                Ok(settled) => {
                    if attempt > 1 {
                        tracing::info!(
                            sink = self.settings.sink,
                            attempt,
                            rows,
                            "batch object committed after retries"
                        );
                    }
                    return Ok(settled);
                }
                Err(e) => e,
            };
            let pause = jittered(delay, rand::random::<f64>());
            if error.is_permanent() || tokio::time::Instant::now() + pause >= deadline {
                return Err(error);
            }
            tracing::warn!(
                sink = self.settings.sink,
                attempt,
                retry_in_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX),
                error = %error.display_chain(),
                "batch object not committed yet; its messages stay pending and the commit is retried"
            );
            tokio::time::sleep(pause).await;
            delay = next_delay(delay);
            attempt += 1;
        }
    }

    /// A new temp object of `partition` holding the bytes of `file`.
    async fn copy_of(&self, file: &File, partition: &str) -> Result<TempObject, SinkError> {
        let mut temp = self.log.temp(partition)?;
        let mut source =
            file.try_clone().map_err(|e| SinkError::temporary("cannot reopen a batch object").with_source(e))?;
        crate::blocking::blocking(move || {
            use std::io::{Seek, Write};
            source
                .rewind()
                .and_then(|()| std::io::copy(&mut source, &mut temp.file))
                .and_then(|_| temp.file.flush())
                .map_err(|e| SinkError::temporary("cannot copy a batch object for another attempt").with_source(e))?;
            Ok(temp)
        })
        .await
    }

    /// One attempt to commit the finished object `temp`: stage, claim a slot, complete.
    async fn commit(
        &self,
        key: &PartKey,
        set: &SeqSet,
        rows: u64,
        temp: TempObject,
    ) -> Result<Vec<Settled>, SinkError> {
        let (Some(first), Some(last)) = (set.first(), set.last()) else { return Ok(Vec::new()) };
        let size = temp.file.metadata().map(|m| m.len()).unwrap_or_default();
        let s = &self.settings;
        let object = naming::join(&key.0, &naming::object_name(&key.1, first, last, s.batch.extension()));
        let staging = self.log.stage(&object, temp, size).await?;
        super::crash_point::reached("staged");
        let manifest = Manifest {
            schema: MANIFEST_SCHEMA.into(),
            stream: key.1.clone(),
            partition: key.0.clone(),
            slot: 0,
            object: object.clone(),
            format: s.batch.format,
            compression: s.batch.effective_compression(),
            first,
            last,
            rows,
            bytes: size,
            sequences: set.to_string(),
            staging: staging.clone(),
        };
        let guard = self.lock_for(key);
        let claimed = {
            let _claiming = guard.lock().await;
            self.claim(key, set, manifest).await
        };
        let slot = match claimed {
            Ok(Claim::Slot(slot)) => slot,
            Ok(Claim::Lost(overlap)) => {
                self.log.discard(&object, &staging).await;
                // Reported duplicates are acknowledged: the objects holding them must be in
                // the table first (a retried commit whose table commit failed lands here).
                self.sync_table(key).await?;
                return Ok(self.abandoned(key, set, &overlap));
            }
            Err(e) => {
                self.log.discard(&object, &staging).await;
                return Err(e);
            }
        };
        super::crash_point::reached("claimed");
        // Committed: from here on the manifest names this object, and whoever reads the
        // manifest completes it if this process cannot.
        if !self.log.complete(&object, &staging).await? {
            return Err(SinkError::temporary("the staged batch object vanished before it was completed"));
        }
        let committed = Arc::new(Committed {
            object,
            format: s.batch.format,
            compression: s.batch.effective_compression(),
            set: set.clone(),
            bytes: size,
            rows,
        });
        {
            let mut state = lock(&self.state);
            if let Some(part) = state.index.get_mut(key) {
                part.insert(slot, Slot::Committed(Arc::clone(&committed)));
            }
            state.remember(&key.1, &committed);
        }
        // Table mode: the object joins the table before any of its messages is acknowledged.
        // A failure here retries the whole commit, which finds this slot and lands above.
        self.sync_table(key).await?;
        super::crash_point::reached("settled");
        tracing::debug!(sink = s.sink, slot, rows, first, last, bytes = size, "batch object committed");
        Ok(set.iter().map(|sequence| Settled::new(stream_of(&key.1), sequence, MessageOutcome::Committed)).collect())
    }

    /// Claims the next free slot of `key`'s manifest log for `manifest` (the caller holds
    /// the partition's lock): before every attempt the whole known log is checked for one
    /// of `set`'s sequences, and a slot taken by another writer is read before the next.
    async fn claim(&self, key: &PartKey, set: &SeqSet, mut manifest: Manifest) -> Result<Claim, SinkError> {
        let mut ambiguous = 0;
        loop {
            self.ensure_loaded_locked(key).await?;
            let (slot, overlap) = {
                let mut state = lock(&self.state);
                let part = state.index.get_mut(key).ok_or_else(|| SinkError::temporary("manifest log evicted"))?;
                (part.next_slot(), part.overlapping(set))
            };
            if !overlap.is_empty() {
                return Ok(Claim::Lost(overlap));
            }
            manifest.slot = slot;
            let name = format!("{}/{}", naming::manifest_dir(&key.0, &key.1), naming::manifest_name(slot));
            match self.log.create(&name, manifest.to_bytes()).await {
                Ok(true) => return Ok(Claim::Slot(slot)),
                Ok(false) => {}
                Err(e) => {
                    // The create may have been made: the slot's manifest tells whose it is.
                    ambiguous += 1;
                    match self.log.read(&name).await {
                        Ok(Some(b)) if Manifest::from_bytes(&b).is_ok_and(|m| m.staging == manifest.staging) => {
                            return Ok(Claim::Slot(slot));
                        }
                        Ok(Some(_)) => {}
                        Ok(None) if ambiguous < AMBIGUOUS_ATTEMPTS => continue,
                        _ => return Err(e),
                    }
                }
            }
            self.refresh(key).await?;
        }
    }

    /// [`abandoned`], logged.
    fn abandoned(&self, key: &PartKey, set: &SeqSet, overlap: &[Arc<Committed>]) -> Vec<Settled> {
        let (out, duplicates) = abandoned(key, set, overlap);
        tracing::info!(
            sink = self.settings.sink,
            rows = set.len(),
            duplicates,
            "batch object abandoned: another writer committed some of its messages first; the rest come back"
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::config::{BatchCompression, Format};

    fn committed(sequences: impl IntoIterator<Item = u64>) -> Arc<Committed> {
        let mut set = SeqSet::new();
        for s in sequences {
            set.insert(s);
        }
        Arc::new(Committed {
            object: "p/x".into(),
            format: Format::Ndjson,
            compression: BatchCompression::None,
            set,
            bytes: 0,
            rows: 0,
        })
    }

    #[test]
    fn commit_retries_back_off_from_a_quarter_second_to_five_seconds_jittered() {
        let mut delay = FIRST_RETRY;
        let mut seen = Vec::new();
        for _ in 0..8 {
            seen.push(delay.as_millis());
            delay = next_delay(delay);
        }
        assert_eq!(seen, vec![250, 500, 1_000, 2_000, 4_000, 5_000, 5_000, 5_000]);
        assert_eq!(jittered(Duration::from_secs(2), 0.0), Duration::from_secs(1), "at least half");
        assert_eq!(jittered(Duration::from_secs(2), 1.0), Duration::from_secs(2), "at most all");
        assert_eq!(jittered(Duration::from_secs(2), 0.5), Duration::from_millis(1_500));
    }

    #[test]
    fn an_abandoned_object_settles_what_others_hold_as_duplicates_and_the_rest_comes_back() {
        let key = ("p".to_owned(), "ORDERS.e2".to_owned());
        let mut set = SeqSet::new();
        for s in 1..=5 {
            set.insert(s);
        }
        let (settled, duplicates) = abandoned(&key, &set, &[committed([2, 3]), committed([5, 9])]);
        assert_eq!(duplicates, 3);
        let summary: Vec<(u64, bool)> =
            settled.iter().map(|s| (s.sequence, matches!(s.outcome, MessageOutcome::Duplicate))).collect();
        assert_eq!(summary, vec![(1, false), (2, true), (3, true), (4, false), (5, true)]);
        assert!(settled.iter().all(|s| s.stream == "ORDERS"), "named by the stream, without its epoch");
        assert!(settled.iter().filter(|s| s.sequence == 4).all(|s| s.outcome.failed_temporarily()));
        let (settled, duplicates) = abandoned(&key, &set, &[]);
        assert_eq!((settled.len(), duplicates), (5, 0));
    }
}
