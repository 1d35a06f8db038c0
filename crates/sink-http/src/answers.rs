//! The answers that settled recent messages (status and response id header), kept so the
//! delivery ledger's receipt can name them as the message's destination reference
//! (`Destinations::destination` is asked after the write returned, with the outcome only).
//!
//! Kept only when the ledger will ask (`Destinations::enable`): without it a sink would
//! hold about 12 MiB of answers nobody reads and pay a map insert per message. Bounded: the
//! oldest entries are forgotten past [`CAPACITY`] messages. An entry asked for after it was
//! forgotten reports the URL alone.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use sinks_contract::Envelope;

/// Messages remembered (a few runner batches' worth).
pub(crate) const CAPACITY: usize = 65_536;
/// Longest response id kept, in bytes (longer values are cut at a character boundary).
const MAX_RESPONSE_ID: usize = 256;

/// How the endpoint answered the request that settled a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settled {
    /// HTTP status.
    pub(crate) status: u16,
    /// Value of `response_id_header`, when configured and sent.
    pub(crate) response_id: Option<String>,
}

/// `(keyed stream, stream sequence)` → answer, oldest forgotten first. The keyed stream
/// (`{stream}.{epoch}` in a later epoch, `Envelope::keyed_stream`) keeps a later epoch's
/// message from being given an earlier event's answer.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    log: Mutex<Log>,
}

#[derive(Debug, Default)]
struct Log {
    by_message: HashMap<(String, u64), Settled>,
    order: VecDeque<(String, u64)>,
}

fn id_of(envelope: &Envelope) -> (String, u64) {
    (envelope.keyed_stream().into_owned(), envelope.jetstream().stream_sequence)
}

impl Answers {
    /// Remembers how `envelope`'s request was answered (the latest answer wins).
    pub(crate) fn record(&self, envelope: &Envelope, settled: Settled) {
        let id = id_of(envelope);
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if log.by_message.insert(id.clone(), settled).is_none() {
            log.order.push_back(id);
        }
        while log.order.len() > CAPACITY {
            if let Some(old) = log.order.pop_front() {
                log.by_message.remove(&old);
            }
        }
    }

    /// How `envelope`'s request was answered, if still remembered.
    pub(crate) fn get(&self, envelope: &Envelope) -> Option<Settled> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner).by_message.get(&id_of(envelope)).cloned()
    }
}

/// A response id header value as reported: trimmed, without control characters, at most
/// 256 bytes; `None` when nothing is left.
pub(crate) fn response_id(value: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(value);
    let text = text.trim();
    if text.is_empty() || text.chars().any(char::is_control) {
        return None;
    }
    let mut end = text.len().min(MAX_RESPONSE_ID);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(text[..end].to_owned())
}

#[cfg(test)]
mod tests {
    use sinks_contract::testing::envelope;

    use super::*;

    #[test]
    fn answers_are_bounded_and_the_latest_wins() {
        let answers = Answers::default();
        let first = envelope("S", 1, "a", "{}");
        answers.record(&first, Settled { status: 503, response_id: None });
        answers.record(&first, Settled { status: 201, response_id: Some("r-1".into()) });
        assert_eq!(answers.get(&first), Some(Settled { status: 201, response_id: Some("r-1".into()) }));
        for seq in 2..=(CAPACITY as u64 + 1) {
            answers.record(&envelope("S", seq, "a", "{}"), Settled { status: 201, response_id: None });
        }
        assert_eq!(answers.get(&first), None, "the oldest is forgotten");
        assert!(answers.get(&envelope("S", 2, "a", "{}")).is_some());
        assert!(answers.get(&envelope("OTHER", 2, "a", "{}")).is_none(), "per stream");
        let last = CAPACITY as u64 + 1;
        let later = envelope("S", last, "a", "{}").with_stream_epoch(Some("e9".into()));
        assert!(answers.get(&later).is_none(), "per epoch of the stream");
        answers.record(&later, Settled { status: 202, response_id: None });
        assert_eq!(answers.get(&later).map(|s| s.status), Some(202));
        assert_eq!(answers.get(&envelope("S", last, "a", "{}")).map(|s| s.status), Some(201), "the earlier one kept");
    }

    #[test]
    fn response_ids_are_trimmed_and_bounded() {
        assert_eq!(response_id(b"  rec-7 ").as_deref(), Some("rec-7"));
        assert_eq!(response_id(b""), None);
        assert_eq!(response_id(b"a\x01b"), None);
        let long = "é".repeat(200);
        let cut = response_id(long.as_bytes()).unwrap();
        assert!(cut.len() <= 256 && cut.chars().all(|c| c == 'é'), "{}", cut.len());
    }
}
