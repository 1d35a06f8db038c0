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
    /// is, waits up to `timeout` for the first message to arrive and returns with it. No pull
    /// request is left open at the server when this returns, so a stop right after it leaves
    /// nothing in flight.
    ///
    /// One `no_wait` request with `timeout` as its expiry does all of that on nats-server
    /// 2.15: it answers with what is deliverable at once, and when nothing is, it holds the
    /// request until the first message arrives (delivers it and ends, 404) or the expiry
    /// passes (408). The expiry is required: without one, a request the server cannot answer
    /// (messages pending, `max_ack_pending` reached) is never ended. A server that answers an
    /// empty `no_wait` request at once instead (well before its expiry) gets a second request
    /// that waits up to `timeout` for one message, so that this never turns into a busy loop.
    ///
    /// Earlier this always followed an empty `no_wait` request with that waiting request and
    /// topped up after it with another `no_wait` one: as the server holds an empty `no_wait`
    /// request, an idle fetch took two `timeout`s and a top-up that found nothing waited a
    /// whole `timeout` before the message it followed could be written (docs/performance.md,
    /// "One pull request per fetch").
    pub(crate) async fn fetch(&self, max: usize, timeout: Duration) -> Result<Vec<Delivery>, FetchError> {
        // Every pull request carries an expiry, so a request lost in a disconnect ends on the
        // client's timer instead of hanging; the outer timeout is a last resort.
        let guard = timeout + Duration::from_secs(15);
        let consumer = self.current();
        let attempt = async {
            let mut out = Vec::with_capacity(max);
            let asked = tokio::time::Instant::now();
            self.collect(consumer.fetch().max_messages(max).expires(timeout).messages().await, &mut out).await?;
            if out.is_empty() && asked.elapsed() < timeout / 2 {
                let wait = consumer.batch().max_messages(1).expires(timeout).messages().await;
                self.collect(wait, &mut out).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A source over a new durable consumer of a new stream on `server`, the stream's
    /// subject, and a subscription that sees every pull request made on the consumer.
    async fn source(server: &sinks_testkit::NatsServer) -> (Source, String, async_nats::Subscriber) {
        let (client, js) = (server.client().await, server.js().await);
        let name = sinks_testkit::unique("FETCH");
        let subject = format!("{}.events", name.to_lowercase());
        let stream = sinks_testkit::stream_with_subjects(&js, &name, &[&subject]).await;
        let consumer = sinks_testkit::durable_pull_consumer(&stream, "sink").await;
        let requests = client.subscribe(format!("$JS.API.CONSUMER.MSG.NEXT.{name}.sink")).await.unwrap();
        client.flush().await.unwrap();
        let (_, guard) = watch::channel(GuardState::default());
        let source = Source::new(consumer, Intake::default(), client, guard);
        (source, subject, requests)
    }

    /// The pull requests seen so far (each is seen once; a short wait lets the last arrive).
    async fn requests_seen(requests: &mut async_nats::Subscriber) -> usize {
        let mut seen = 0;
        while tokio::time::timeout(Duration::from_millis(200), requests.next()).await.is_ok_and(|r| r.is_some()) {
            seen += 1;
        }
        seen
    }

    /// An idle fetch is one pull request that the server holds until its expiry (not a
    /// `no_wait` request followed by a waiting one: two expiries); a message arriving while it
    /// is held is returned at once, by the same request; messages already there come at once.
    #[tokio::test]
    async fn a_fetch_is_one_pull_request_which_waits_for_the_first_message() {
        let server = sinks_testkit::NatsServer::start();
        let (source, subject, mut requests) = source(&server).await;
        let js = server.js().await;

        let idle = source.fetch(10, Duration::from_millis(300)).await.unwrap();
        assert!(idle.is_empty());
        assert_eq!(requests_seen(&mut requests).await, 1, "an idle fetch makes one pull request");

        let timeout = Duration::from_secs(20);
        let asked = tokio::time::Instant::now();
        let publisher = {
            let (js, subject) = (js.clone(), subject.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                js.publish(subject, "arrives while the fetch waits".into()).await.unwrap().await.unwrap();
            })
        };
        let arrived = source.fetch(10, timeout).await.unwrap();
        let took = asked.elapsed();
        publisher.await.unwrap();
        assert_eq!(arrived.len(), 1);
        assert_eq!(arrived[0].0.jetstream().stream_sequence, 1);
        assert!(took < timeout / 2, "the message that arrived was returned after {took:?}, not at once");
        assert_eq!(requests_seen(&mut requests).await, 1, "the waiting request returned the arrival");

        for i in 0..3 {
            js.publish(subject.clone(), format!("there already {i}").into()).await.unwrap().await.unwrap();
        }
        let ready = source.fetch(10, timeout).await.unwrap();
        let sequences: Vec<u64> = ready.iter().map(|(e, _)| e.jetstream().stream_sequence).collect();
        assert_eq!(sequences, [2, 3, 4]);
        assert_eq!(requests_seen(&mut requests).await, 1);
    }
}
