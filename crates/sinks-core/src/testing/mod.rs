//! Test helpers for sink crates and for the runner: envelope builders and an in-memory sink.
//! Enabled by the `testing` feature; not part of the stable API.

mod memory_sink;

pub use memory_sink::{FaultPlan, MemorySink};

use crate::envelope::{Envelope, Headers, JetStreamInfo};

/// An envelope from stream `stream` at sequence `seq`, first delivery, with no headers.
pub fn envelope(stream: &str, seq: u64, subject: &str, payload: impl Into<bytes::Bytes>) -> Envelope {
    envelope_with(stream, seq, subject, payload, Headers::new(), 1)
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
