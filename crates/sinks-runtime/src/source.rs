//! The JetStream pull source: fetches messages and turns each into an [`Envelope`] (for the
//! sink) and an [`AckHandle`] (kept by the runner, which sends the message's settlement
//! through it).
//!
//! This is the only module that touches JetStream acknowledgements. `AckHandle` is
//! crate-private, so no sink crate can name it, let alone hold one. The batch the pairs make
//! belongs to the runner (`runner::batch`).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::{AckKind, Message};
use async_nats::{Client, Subject};
use futures::StreamExt;
use time::OffsetDateTime;

use sinks_contract::envelope::{Envelope, Headers, JetStreamInfo};
use sinks_policy::intake::{Arrival, Intake};
use tokio::sync::watch;

use crate::ack_subject::AckSubject;

/// What the fetch loop and the source need to know from the stream guard
/// (`runner::guard`, which sets it; the source reads it for every message).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GuardState {
    /// The epoch the stream's keys are scoped to (`None`: the first).
    pub(crate) epoch: Option<Arc<str>>,
    /// Fetching is paused: the stream's identity changed and nothing was decided.
    pub(crate) paused: bool,
    /// The creation time of the stream the consumer works in, once known (the rescue drops
    /// advisories older than it: they name an earlier stream's messages).
    pub(crate) created: Option<OffsetDateTime>,
}

/// One fetched message: the envelope the sink sees and the ack handle only the runner may use.
pub(crate) type Delivery = (Envelope, AckHandle);

/// The right to settle one message (its ack reply subject). Crate-private by design. The
/// connection is shared by every handle of a source (one reference count per message, not
/// a clone of the client's parts).
#[derive(Clone)]
pub(crate) struct AckHandle {
    client: Arc<Client>,
    reply: Subject,
}

impl std::fmt::Debug for AckHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AckHandle")
    }
}

impl AckHandle {
    /// Sends `kind` without waiting for the server.
    pub(crate) async fn send(&self, kind: AckKind) -> Result<(), async_nats::Error> {
        self.client.publish(self.reply.clone(), kind.into()).await.map_err(Into::into)
    }

    /// Sends `kind` and waits for the server's confirmation (at most `timeout`).
    pub(crate) async fn send_confirmed(&self, kind: AckKind, timeout: Duration) -> Result<(), async_nats::Error> {
        match tokio::time::timeout(timeout, self.client.request(self.reply.clone(), kind.into())).await {
            Ok(result) => result.map(|_| ()).map_err(Into::into),
            Err(_) => Err("ack confirmation timed out".into()),
        }
    }
}

/// The headers of a NATS message, as an envelope holds them.
pub(crate) fn headers_of(map: &async_nats::HeaderMap) -> Headers {
    let mut headers = Headers::new();
    for (name, values) in map.iter() {
        for value in values {
            headers.append(name.as_ref(), value.as_str());
        }
    }
    headers
}

/// The ack handle of a JetStream message the runtime consumes besides the source (a
/// captured advisory, say); `None` when it has no reply subject.
pub(crate) fn handle_of(msg: &Message) -> Option<AckHandle> {
    Some(AckHandle { client: Arc::new(msg.context.client()), reply: msg.message.reply.clone()? })
}

/// Why a fetch failed. Always retried with backoff by the runner.
#[derive(Debug, thiserror::Error)]
#[error("fetch failed: {0}")]
pub(crate) struct FetchError(String);

impl FetchError {
    /// A fetch task that did not finish (cancelled or panicked).
    pub(crate) fn from_task(e: &tokio::task::JoinError) -> Self {
        Self(format!("fetch task ended: {e}"))
    }
}

/// Pull source over one consumer.
#[derive(Debug)]
pub(crate) struct Source {
    /// The consumer fetched from; replaced when it had to be bound again (a deleted stream
    /// takes its consumers with it).
    consumer: Arc<RwLock<PullConsumer>>,
    /// The policy pipeline's intake step, which makes each message an envelope.
    intake: Intake,
    /// The connection every ack handle of this source settles through.
    client: Arc<Client>,
    /// The stream guard's state: the epoch stamped on every envelope.
    guard: watch::Receiver<GuardState>,
}

impl Source {
    /// A source over `consumer`, whose messages become envelopes through `intake`, are
    /// acknowledged through `client` and stamped with the epoch `guard` holds.
    pub(crate) fn new(
        consumer: PullConsumer,
        intake: Intake,
        client: Client,
        guard: watch::Receiver<GuardState>,
    ) -> Self {
        Self { consumer: Arc::new(RwLock::new(consumer)), intake, client: Arc::new(client), guard }
    }

    /// The consumer, shared with the stream guard's task (which polls it).
    pub(crate) fn consumer(&self) -> Arc<RwLock<PullConsumer>> {
        Arc::clone(&self.consumer)
    }

    /// Fetches from `consumer` from now on.
    pub(crate) fn replace_consumer(&self, consumer: PullConsumer) {
        *self.consumer.write().unwrap_or_else(std::sync::PoisonError::into_inner) = consumer;
    }

    fn current(&self) -> PullConsumer {
        self.consumer.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Fetches up to `max` messages. Returns at once with whatever is available; when nothing
    /// is, waits up to `timeout` for the first message and then tops up. No pull request is
    /// left open at the server when this returns, so a stop right after it leaves nothing in
    /// flight.
    ///
    /// The `no_wait` requests carry an expiry too, and nats-server (2.15) keeps such a request
    /// open until it expires when it sees nothing to deliver: an empty fetch can take two
    /// `timeout`s, and the top-up can wait one (docs/performance.md, the last messages of a
    /// run). The expiry stays: without it, a `no_wait` request the server cannot answer
    /// (messages pending, `max_ack_pending` reached) is never ended, and every fetch hung until
    /// the guard below.
    pub(crate) async fn fetch(&self, max: usize, timeout: Duration) -> Result<Vec<Delivery>, FetchError> {
        // Every pull request carries an expiry, so a request lost in a disconnect ends on the
        // client's timer instead of hanging; the outer timeout is a last resort.
        let guard = timeout + Duration::from_secs(15);
        let consumer = self.current();
        let attempt = async {
            let mut out = Vec::with_capacity(max);
            self.collect(consumer.fetch().max_messages(max).expires(timeout).messages().await, &mut out).await?;
            if out.is_empty() {
                let wait = consumer.batch().max_messages(1).expires(timeout).messages().await;
                self.collect(wait, &mut out).await?;
                if !out.is_empty() && max > 1 {
                    let more = consumer.fetch().max_messages(max - 1).expires(timeout).messages().await;
                    self.collect(more, &mut out).await?;
                }
            }
            Ok(out)
        };
        tokio::time::timeout(guard, attempt).await.map_err(|_| FetchError("fetch timed out".into()))?
    }

    async fn collect<E: std::fmt::Display>(
        &self,
        batch: Result<async_nats::jetstream::consumer::pull::Batch, E>,
        out: &mut Vec<Delivery>,
    ) -> Result<(), FetchError> {
        let mut batch = batch.map_err(|e| FetchError(e.to_string()))?;
        while let Some(item) = batch.next().await {
            match item {
                Ok(msg) => out.push(self.split(msg)?),
                // Messages already received stay in `out` and are processed; the error ends
                // this fetch only.
                Err(e) if out.is_empty() => return Err(FetchError(e.to_string())),
                Err(e) => {
                    tracing::warn!(error = %e, "fetch ended early");
                    break;
                }
            }
        }
        Ok(())
    }

    /// The envelope and ack handle of `msg`.
    fn split(&self, msg: Message) -> Result<Delivery, FetchError> {
        let message = msg.message;
        let reply = message.reply.ok_or_else(|| FetchError("message has no ack subject".into()))?;
        let info = AckSubject::parse(&reply).map_err(|e| FetchError(format!("bad jetstream metadata: {e}")))?;
        let jetstream = JetStreamInfo {
            stream: info.stream.to_owned(),
            consumer: info.consumer.to_owned(),
            stream_sequence: info.stream_sequence,
            consumer_sequence: info.consumer_sequence,
            delivered: info.delivered.max(1),
            pending: info.pending,
            timestamp: Some(info.published).filter(|t| *t != OffsetDateTime::UNIX_EPOCH),
            domain: info.domain.map(str::to_owned).filter(|d| !d.is_empty()),
        };
        let headers = message.headers.as_ref().map(headers_of).unwrap_or_default();
        let epoch = self.guard.borrow().epoch.clone();
        let arrival =
            Arrival { subject: message.subject.as_str(), payload: message.payload, headers, jetstream, epoch };
        let envelope = self.intake.envelope(arrival);
        Ok((envelope, AckHandle { client: Arc::clone(&self.client), reply }))
    }
}
