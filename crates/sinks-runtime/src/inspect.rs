//! Read-only looks at a stream for the operator commands: a [`Connection`] that hides the
//! NATS client, the messages of a stream through an ephemeral ordered consumer
//! (`nats-sink inspect-ordered`: no acks, nothing left behind on the server), and how far a
//! consumer has got ([`Connection::consumer_progress`], which `nats-sink replay` watches).
//! Everything here reads; nothing acknowledges, creates a durable consumer or publishes.

use async_nats::jetstream;
use async_nats::jetstream::consumer::pull::{Ordered, OrderedConfig};
use futures::StreamExt;
use time::OffsetDateTime;

use crate::config::NatsConfig;
use crate::connect::ConnectError;

/// A connection to the NATS server a config names (opaque: the client stays inside the
/// runtime). Dropping it closes the connection.
#[derive(Debug, Clone)]
pub struct Connection {
    js: jetstream::Context,
}

impl Connection {
    /// Connects once with the `nats` section's settings (secrets from the environment).
    pub async fn open(nats: &NatsConfig) -> Result<Self, ConnectError> {
        let client = crate::connect::connect(nats).await?;
        Ok(Self { js: jetstream::new(client) })
    }

    /// The messages of `stream` on `filter_subjects` from its first one, through an ephemeral
    /// ordered consumer. The error is a sentence for the operator.
    pub async fn ordered(&self, stream: &str, filter_subjects: Vec<String>) -> Result<OrderedMessages, String> {
        let handle = self.js.get_stream(stream).await.map_err(|e| format!("cannot read stream `{stream}`: {e}"))?;
        let config = OrderedConfig { filter_subjects, ..OrderedConfig::default() };
        let consumer = handle
            .create_consumer(config)
            .await
            .map_err(|e| format!("cannot create an ordered consumer (the server must support them): {e}"))?;
        let messages = consumer.messages().await.map_err(|e| format!("cannot read messages: {e}"))?;
        Ok(OrderedMessages { messages })
    }

    /// The `max_deliver` of `consumer` of `stream` as the server has it: `Ok(None)` when the
    /// stream or the consumer does not exist, `Ok(Some(None))` when it redelivers without
    /// limit. The error is a sentence for the operator.
    pub async fn consumer_max_deliver(&self, stream: &str, consumer: &str) -> Result<Option<Option<u64>>, String> {
        use async_nats::jetstream::context::{ConsumerInfoErrorKind, GetStreamErrorKind};
        let handle = match self.js.get_stream(stream).await {
            Ok(handle) => handle,
            Err(e) if matches!(e.kind(), GetStreamErrorKind::JetStream(j) if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(format!("cannot read stream `{stream}`: {e}")),
        };
        match handle.consumer_info(consumer).await {
            Ok(info) => Ok(Some(u64::try_from(info.config.max_deliver).ok().filter(|m| *m > 0))),
            Err(e) if e.kind() == ConsumerInfoErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read consumer `{consumer}` of stream `{stream}`: {e}")),
        }
    }

    /// How far `consumer` of `stream` has got; `None` when either cannot be read now.
    pub async fn consumer_progress(&self, stream: &str, consumer: &str) -> Option<ConsumerProgress> {
        let stream = self.js.get_stream(stream).await.ok()?;
        let info = stream.consumer_info(consumer).await.ok()?;
        Some(ConsumerProgress {
            pending: info.num_pending,
            ack_pending: info.num_ack_pending as u64,
            delivered_consumer_sequence: info.delivered.consumer_sequence,
            ack_floor_stream_sequence: info.ack_floor.stream_sequence,
        })
    }
}

/// Messages of a stream in order ([`Connection::ordered`]).
pub struct OrderedMessages {
    messages: Ordered,
}

impl std::fmt::Debug for OrderedMessages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OrderedMessages")
    }
}

impl OrderedMessages {
    /// The next message, `None` at the end of the subscription; the error is a sentence.
    pub async fn next(&mut self) -> Option<Result<StoredMessage, String>> {
        let message = match self.messages.next().await? {
            Ok(message) => message,
            Err(e) => return Some(Err(format!("reading the stream failed: {e}"))),
        };
        let (stream_sequence, published, delivered) = match message.info() {
            Ok(info) => (Some(info.stream_sequence), Some(info.published), Some(info.delivered)),
            Err(_) => (None, None, None),
        };
        let headers = message
            .headers
            .iter()
            .flat_map(|map| map.iter())
            .map(|(name, values)| (name.to_string(), values.iter().map(|v| v.as_str().to_owned()).collect()))
            .collect();
        Some(Ok(StoredMessage {
            subject: message.subject.to_string(),
            stream_sequence,
            published,
            delivered,
            headers,
            payload: message.payload.clone(),
        }))
    }
}

/// One message as the stream stores it ([`OrderedMessages::next`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoredMessage {
    /// Its subject.
    pub subject: String,
    /// Its stream sequence, when the server said.
    pub stream_sequence: Option<u64>,
    /// When the stream stored it, when the server said.
    pub published: Option<OffsetDateTime>,
    /// How often it was delivered to this consumer, when the server said.
    pub delivered: Option<i64>,
    /// Its headers, each name with its values, in the order the client holds them.
    pub headers: Vec<(String, Vec<String>)>,
    /// Its payload.
    pub payload: bytes::Bytes,
}

/// How far a consumer has got ([`Connection::consumer_progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerProgress {
    /// Messages not delivered yet.
    pub pending: u64,
    /// Messages delivered and not acknowledged yet.
    pub ack_pending: u64,
    /// Consumer sequence of the last delivery (0 before the first).
    pub delivered_consumer_sequence: u64,
    /// Stream sequence below which every message is acknowledged.
    pub ack_floor_stream_sequence: u64,
}
