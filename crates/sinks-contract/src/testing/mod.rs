//! Test helpers for sink crates and for the runner: envelope builders (the in-memory sink
//! is `sinks_certify::MemorySink`).
//! Enabled by the `testing` feature; not part of the stable API.

use crate::envelope::{Envelope, Headers, JetStreamInfo};

/// An envelope from stream `stream` at sequence `seq`, first delivery, with no headers.
pub fn envelope(stream: &str, seq: u64, subject: &str, payload: impl Into<bytes::Bytes>) -> Envelope {
    envelope_with(stream, seq, subject, payload, Headers::new(), 1)
}

/// An envelope like [`envelope`] published and received at `at` rather than now, for a test
/// that compares bodies holding timestamps (now's fraction of a second varies in length).
pub fn envelope_at(
    stream: &str,
    seq: u64,
    subject: &str,
    payload: impl Into<bytes::Bytes>,
    at: time::OffsetDateTime,
) -> Envelope {
    let mut e = envelope(stream, seq, subject, payload).with_received_at(at);
    e.jetstream.timestamp = Some(at);
    e
}

/// An envelope with explicit headers and delivery count.
pub fn envelope_with(
    stream: &str,
    seq: u64,
    subject: &str,
    payload: impl Into<bytes::Bytes>,
    headers: Headers,
    delivered: u64,
) -> Envelope {
    Envelope::new(
        subject,
        payload,
        headers,
        JetStreamInfo {
            stream: stream.to_owned(),
            consumer: "test-consumer".to_owned(),
            stream_sequence: seq,
            consumer_sequence: seq,
            delivered,
            pending: 0,
            timestamp: Some(time::OffsetDateTime::now_utc()),
            domain: None,
        },
    )
}

/// The same event delivered again `later`: through another consumer, at a later consumer
/// sequence, the next delivery count; everything of the event itself unchanged.
pub fn redelivery(first: &Envelope, later: time::Duration) -> Envelope {
    let mut again = first.clone().with_received_at(first.received_at() + later);
    let js = &mut again.jetstream;
    js.consumer = format!("{}-again", js.consumer);
    js.consumer_sequence += 7;
    js.delivered += 1;
    js.pending += 3;
    again
}

/// Opens `sink`, panicking with the error when it cannot be opened.
pub async fn opened<S: crate::Sink>(sink: S) -> S {
    if let Err(e) = sink.open().await {
        panic!("open failed: {}", e.display_chain());
    }
    sink
}

/// Writes `batch` and returns its per-message outcomes, asserting the sink answered with one
/// outcome per envelope (a batch-level error panics with its message).
pub async fn write(sink: &dyn crate::Sink, batch: &[Envelope]) -> Vec<crate::MessageOutcome> {
    match sink.write(batch, crate::DEFAULT_BUDGET).await {
        Ok(outcomes) => {
            assert_eq!(outcomes.len(), batch.len(), "one outcome per envelope");
            outcomes
        }
        Err(e) => panic!("expected per-message outcomes, got a batch error: {}", e.display_chain()),
    }
}

/// The contract classes of `outcomes`.
pub fn classes(outcomes: &[crate::MessageOutcome]) -> Vec<crate::OutcomeClass> {
    outcomes.iter().map(crate::MessageOutcome::class).collect()
}

/// The error of a failed outcome (panics on any other outcome).
pub fn error_of(outcome: &crate::MessageOutcome) -> &crate::SinkError {
    match outcome {
        crate::MessageOutcome::Failed(e) => e,
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// The optional capabilities of a sink called as if they were methods of the sink, for
/// tests: each asks the sink for its capability and fails the way a caller would see it
/// when the sink does not have it.
#[async_trait::async_trait]
pub trait SinkExt {
    /// [`crate::ReadBack::read`] through [`crate::Sink::read_back`]; a sink that cannot
    /// read back answers with a permanent error saying so ([`crate::cannot_read_back`]).
    async fn read_back_batch(&self, batch: &[Envelope]) -> Result<Vec<crate::Presence>, crate::SinkError>;

    /// [`crate::Holding::flush`] through [`crate::Sink::holding`]; nothing for a sink that
    /// does not hold messages.
    async fn flush_held(&self, scope: crate::FlushScope) -> Vec<crate::Settled>;

    /// [`crate::Destinations::destination`] through [`crate::Sink::destinations`].
    fn destination_of(&self, envelope: &Envelope, outcome: &crate::MessageOutcome) -> Option<crate::DestinationRef>;

    /// [`crate::Destinations::enable`] through [`crate::Sink::destinations`].
    fn enable_destinations(&self);

    /// What [`crate::Sink::read_back`] says is checked, or why nothing is.
    fn read_back_text(&self) -> String;

    /// The final outcome of every message of `batch` by stream sequence, as a runner would
    /// see them: written in writes of `chunk` messages, each followed by a flush of what is
    /// due, then everything held flushed. Panics when a write fails as a whole.
    async fn write_chunked(
        &self,
        batch: &[Envelope],
        chunk: usize,
    ) -> std::collections::BTreeMap<u64, crate::MessageOutcome>;
}

#[async_trait::async_trait]
impl<S: crate::Sink + ?Sized> SinkExt for S {
    async fn read_back_batch(&self, batch: &[Envelope]) -> Result<Vec<crate::Presence>, crate::SinkError> {
        match self.read_back() {
            Some(reads) => reads.read(batch).await,
            None => Err(crate::SinkError::permanent(crate::cannot_read_back(self))),
        }
    }

    async fn flush_held(&self, scope: crate::FlushScope) -> Vec<crate::Settled> {
        match self.holding() {
            Some(holding) => holding.flush(scope).await,
            None => Vec::new(),
        }
    }

    fn destination_of(&self, envelope: &Envelope, outcome: &crate::MessageOutcome) -> Option<crate::DestinationRef> {
        self.destinations().and_then(|d| d.destination(envelope, outcome))
    }

    fn enable_destinations(&self) {
        if let Some(d) = self.destinations() {
            d.enable();
        }
    }

    fn read_back_text(&self) -> String {
        self.read_back().map_or_else(|| crate::cannot_read_back(self), |reads| reads.checks())
    }

    async fn write_chunked(
        &self,
        batch: &[Envelope],
        chunk: usize,
    ) -> std::collections::BTreeMap<u64, crate::MessageOutcome> {
        let mut out = std::collections::BTreeMap::new();
        for part in batch.chunks(chunk.max(1)) {
            let outcomes = self.write(part, crate::DEFAULT_BUDGET).await.expect("a write of the whole batch failed");
            for (e, o) in part.iter().zip(outcomes) {
                if !matches!(o, crate::MessageOutcome::Pending) {
                    out.insert(e.jetstream().stream_sequence, o);
                }
            }
            for settled in self.flush_held(crate::FlushScope::Due).await {
                out.insert(settled.sequence, settled.outcome);
            }
        }
        for settled in self.flush_held(crate::FlushScope::All).await {
            out.insert(settled.sequence, settled.outcome);
        }
        out
    }
}
