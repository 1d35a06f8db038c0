//! Pure: a write's requests planned before anything is sent. Each message's key and body are
//! built ([`prepare`]: a message without a required key, with a payload the mode refuses or
//! with a body over `max_request_bytes` fails permanently here, alone), then grouped into
//! requests ([`units`]): one per message, or in batch mode consecutive chunks of at most
//! `max_batch_items` envelopes and `max_request_bytes` bytes, in input order.

use sinks_contract::{Envelope, IdempotencyKey, SinkError};
use time::OffsetDateTime;

use crate::config::{BatchMode, HttpSinkConfig};
use crate::request;

/// A message ready to be sent.
#[derive(Debug)]
pub(crate) struct Ready {
    /// Its place in the write's batch.
    pub(crate) index: usize,
    pub(crate) key: Option<IdempotencyKey>,
    pub(crate) body: Vec<u8>,
}

/// A guess of the next body's size from the bodies built before it in the same write: what
/// the last one held besides its payload. A body is written into one buffer of the guessed
/// size instead of one that doubles from 128 bytes (five copies of a 2 KiB body).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodySize {
    /// Bytes of the last body besides its message's payload.
    besides_payload: usize,
}

impl Default for BodySize {
    /// Before the first body: the envelope document of a small message with the metadata
    /// document (about 2 KiB); a smaller body gives the rest back when it is shrunk.
    fn default() -> Self {
        Self { besides_payload: 2048 }
    }
}

impl BodySize {
    /// Room for small differences between messages of one shape (longer numbers, names).
    const SLACK: usize = 64;

    /// The buffer to write the body of `envelope` into.
    fn capacity(self, envelope: &Envelope) -> usize {
        envelope.payload().len() + self.besides_payload + Self::SLACK
    }

    /// Learns from the body just built for `envelope`.
    fn learn(&mut self, envelope: &Envelope, body: &[u8]) {
        self.besides_payload = body.len().saturating_sub(envelope.payload().len());
    }
}

/// The key and body of the message at `index`, sent at `sent_at`; a permanent failure when
/// it can never be sent. `size` guesses the body's size and learns it.
pub(crate) fn prepare(
    index: usize,
    envelope: &Envelope,
    config: &HttpSinkConfig,
    sent_at: OffsetDateTime,
    size: &mut BodySize,
) -> Result<Ready, SinkError> {
    let key = request::idempotency_key(envelope, &config.idempotency).map_err(|e| {
        SinkError::permanent(format!("no idempotency key for a required sink.idempotency: {e}"))
            .with_error_type("ValidationError")
    })?;
    let capacity = size.capacity(envelope);
    let mut body = request::message_body_sized(envelope, config, key.as_ref(), sent_at, capacity).map_err(|e| {
        let error_type = match e {
            request::RequestError::Payload(_) | request::RequestError::Encode(_) => "SerializationError",
            request::RequestError::TooLarge { .. } => "PermanentSinkError",
            request::RequestError::Origin(_) => "ValidationError",
        };
        SinkError::permanent(format!("cannot build the request body: {e}")).with_error_type(error_type)
    })?;
    if config.batch_mode != BatchMode::Off {
        // A lone item must also fit with the batch framing around it.
        let framed = body.len() + request::batch_overhead(config.batch_mode) + request::BATCH_SEPARATOR_LEN;
        if framed as u64 > config.max_request_bytes {
            return Err(SinkError::permanent(format!(
                "cannot build the request body: batch request of {framed} bytes exceeds sink.max_request_bytes ({})",
                config.max_request_bytes
            )));
        }
    }
    size.learn(envelope, &body);
    body.shrink_to_fit();
    Ok(Ready { index, key, body })
}

/// The requests of a write: one per message, or in batch mode [`chunks`].
pub(crate) fn units(ready: Vec<Ready>, config: &HttpSinkConfig) -> Vec<Vec<Ready>> {
    match config.batch_mode {
        BatchMode::Off => ready.into_iter().map(|r| vec![r]).collect(),
        mode => chunks(ready, mode, config),
    }
}

/// Batch mode: consecutive chunks of at most `max_batch_items` envelopes and
/// `max_request_bytes` bytes, in input order.
fn chunks(ready: Vec<Ready>, mode: BatchMode, config: &HttpSinkConfig) -> Vec<Vec<Ready>> {
    let max_items = config.max_batch_items;
    let max_bytes = usize::try_from(config.max_request_bytes).unwrap_or(usize::MAX);
    let mut chunks = Vec::new();
    let mut current: Vec<Ready> = Vec::new();
    let mut size = request::batch_overhead(mode);
    for r in ready {
        let cost = r.body.len() + request::BATCH_SEPARATOR_LEN;
        if !current.is_empty() && (current.len() >= max_items || size + cost > max_bytes) {
            chunks.push(std::mem::take(&mut current));
            size = request::batch_overhead(mode);
        }
        size += cost;
        current.push(r);
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::testing::{envelope, envelope_at};

    fn config() -> HttpSinkConfig {
        HttpSinkConfig::new("https://h.example/x")
    }

    fn ready(index: usize, size: usize) -> Ready {
        Ready { index, key: None, body: vec![b'x'; size] }
    }

    fn shape(units: &[Vec<Ready>]) -> Vec<Vec<usize>> {
        units.iter().map(|u| u.iter().map(|r| r.index).collect()).collect()
    }

    #[test]
    fn one_request_per_message_without_batch_mode() {
        let planned = units((0..3).map(|i| ready(i, 10)).collect(), &config());
        assert_eq!(shape(&planned), vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn batch_mode_chunks_by_items_and_bytes_in_input_order() {
        let c = HttpSinkConfig { batch_mode: BatchMode::JsonArray, max_batch_items: 2, ..config() };
        let planned = units((0..5).map(|i| ready(i, 10)).collect(), &c);
        assert_eq!(shape(&planned), vec![vec![0, 1], vec![2, 3], vec![4]]);
        // Bytes: the framing and a separator per item count against max_request_bytes.
        let overhead = request::batch_overhead(BatchMode::Ndjson);
        let item = 10 + request::BATCH_SEPARATOR_LEN;
        let c = HttpSinkConfig {
            batch_mode: BatchMode::Ndjson,
            max_batch_items: 100,
            max_request_bytes: (overhead + 2 * item) as u64,
            ..config()
        };
        let planned = units((0..5).map(|i| ready(i, 10)).collect(), &c);
        assert_eq!(shape(&planned), vec![vec![0, 1], vec![2, 3], vec![4]]);
        // An item bigger than the cap still goes, alone.
        let sizes = [10, 500, 10];
        let planned = units(sizes.iter().enumerate().map(|(i, s)| ready(i, *s)).collect(), &c);
        assert_eq!(shape(&planned), vec![vec![0], vec![1], vec![2]]);
        assert!(chunks(Vec::new(), BatchMode::Ndjson, &c).is_empty());
    }

    #[test]
    fn a_message_that_can_never_be_sent_fails_permanently_alone() {
        let keyless = envelope("ORDERS", 1, "orders.created", "{}");
        let mut by_id = config();
        by_id.idempotency.strategy = crate::config::KeyStrategy::MessageId;
        let e = prepare(4, &keyless, &by_id, OffsetDateTime::now_utc(), &mut BodySize::default());
        let e = e.expect_err("a required key is missing");
        assert!(e.is_permanent() && e.to_string().contains("no idempotency key"), "{e}");
        assert_eq!(e.error_type(), "ValidationError");

        let big = envelope("ORDERS", 1, "orders.created", format!("\"{}\"", "x".repeat(2_000)));
        let small = HttpSinkConfig { max_request_bytes: 1_000, ..config() };
        let e = prepare(0, &big, &small, OffsetDateTime::now_utc(), &mut BodySize::default())
            .expect_err("over max_request_bytes");
        assert!(e.is_permanent() && e.to_string().contains("cannot build the request body"), "{e}");
        assert_eq!(e.error_type(), "PermanentSinkError");
    }

    #[test]
    fn the_size_guess_learns_the_last_body_and_leaves_it_unchanged() {
        let c = config();
        // One fixed time: now's fraction of a second varies in length from call to call.
        let at = OffsetDateTime::now_utc().replace_nanosecond(123_456_789).unwrap();
        let mut size = BodySize::default();
        let mut bodies = Vec::new();
        for (seq, payload) in [(1, "{}"), (2, r#"{"note":"a longer payload than the first"}"#), (3, "{}")] {
            let e = envelope_at("ORDERS", seq, "orders.created", payload, at);
            let key = request::idempotency_key(&e, &c.idempotency).unwrap();
            let r = prepare(0, &e, &c, at, &mut size).unwrap();
            assert_eq!(r.body, request::message_body(&e, &c, key.as_ref(), at).unwrap(), "the same bytes");
            assert_eq!(size.besides_payload, r.body.len() - payload.len());
            let next = envelope_at("ORDERS", seq, "orders.created", payload, at);
            assert!(size.capacity(&next) >= r.body.len(), "the same message again fits the guess");
            bodies.push(r.body);
        }
        assert_eq!(bodies[0].len(), bodies[2].len());
    }

    #[test]
    fn in_batch_mode_a_lone_item_must_fit_with_the_framing() {
        let message = envelope("ORDERS", 1, "orders.created", "{}");
        let c = HttpSinkConfig { batch_mode: BatchMode::JsonArray, ..config() };
        let r = prepare(2, &message, &c, OffsetDateTime::now_utc(), &mut BodySize::default()).unwrap();
        assert_eq!(r.index, 2);
        assert_eq!(r.key.as_ref().map(IdempotencyKey::as_str), Some("stream-sequence:ORDERS:1"));
        let framed = r.body.len() + request::batch_overhead(BatchMode::JsonArray) + request::BATCH_SEPARATOR_LEN;
        let tight = HttpSinkConfig { max_request_bytes: framed as u64 - 1, ..c.clone() };
        let e = prepare(2, &message, &tight, OffsetDateTime::now_utc(), &mut BodySize::default())
            .expect_err("framing exceeds the cap");
        assert!(e.to_string().contains("batch request of"), "{e}");
        let exact = HttpSinkConfig { max_request_bytes: framed as u64, ..c };
        assert!(prepare(2, &message, &exact, OffsetDateTime::now_utc(), &mut BodySize::default()).is_ok());
    }
}
