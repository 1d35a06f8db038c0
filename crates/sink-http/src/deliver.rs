//! Delivering a write's requests: up to `max_concurrent_requests` in flight, in the order of
//! the envelopes' ordering keys (a request behind a temporary failure of one of its keys is
//! held back), each retried in place by `sinks_toolkit::retry::InPlace` (temporary failures
//! only, the same idempotency key, each retry's timeout within the write's budget), and a
//! timeout that may have committed inquired about once through `inquiry_url`. The answers
//! that settled messages are remembered for the ledger (`answers.rs`) once it asked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::{Method, Url};
use sinks_contract::existing::KeyBasis;
use sinks_contract::{Envelope, IdempotencyKey, MessageOutcome, SinkError};
use sinks_toolkit::in_order::{self, Finished, Ran};
use sinks_toolkit::retry::{Attempt, Backoff, Budget, InPlace, Retriable};

use crate::answers::Answers;
use crate::config::{BatchMode, HttpSinkConfig};
use crate::endpoint::{Answer, Endpoint, SendError};
use crate::error::{classify, kind_of};
use crate::outcome::{self, BatchVerdict, UnitResult};
use crate::plan::Ready;
use crate::request::{self, StatusSets};

/// What a write of the HTTP sink runs on: the config, the endpoint, the status sets, the
/// retry loop and the memory of answers for the ledger.
pub(crate) struct Inner {
    pub(crate) config: HttpSinkConfig,
    pub(crate) endpoint: Endpoint,
    pub(crate) statuses: StatusSets,
    /// In-place retries: temporary failures only (`retry.*`).
    pub(crate) retry: InPlace,
    /// How recent messages were answered, for [`sinks_contract::Destinations::destination`]; kept only once
    /// [`sinks_contract::Destinations::enable`] was called (the delivery ledger is on).
    pub(crate) answers: Answers,
    pub(crate) reporting: AtomicBool,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSink")
            .field("url", &self.endpoint.url.as_str())
            .field("method", &self.endpoint.method)
            .field("batch_mode", &self.config.batch_mode)
            .field("max_concurrent_requests", &self.config.max_concurrent_requests)
            .finish_non_exhaustive()
    }
}

/// The in-place retries of `config`'s `retry` block: temporary failures only, each attempt
/// within `request_timeout_seconds`.
pub(crate) fn in_place(config: &HttpSinkConfig) -> InPlace {
    let r = &config.retry;
    let backoff = Backoff {
        base: Duration::from_millis(r.backoff_ms),
        max: Duration::from_millis(r.max_backoff_ms),
        mode: r.backoff_mode,
        multiplier: r.backoff_multiplier,
        jitter: r.jitter,
    };
    let timeout = Duration::from_secs_f64(config.request_timeout_seconds);
    InPlace::new(backoff, r.max_retries, timeout).retrying(Retriable::TemporaryOnly)
}

/// The same outcome for every message of a request.
fn all(items: &[Ready], outcome: &dyn Fn() -> MessageOutcome) -> UnitResult {
    UnitResult::PerItem(items.iter().map(|r| (r.index, outcome())).collect())
}

/// What an inquiry found out about a key.
#[derive(Debug)]
enum Inquiry {
    Found,
    NotFound,
    Unknown(SinkError),
}

impl Inner {
    /// Sends every unit, at most `max_concurrent_requests` at once, in the order of the
    /// envelopes' ordering keys (see [`sinks_contract::ordering`]); a unit behind a temporary
    /// failure of one of its keys is held back. Results come back in unit order.
    pub(crate) async fn run(&self, batch: &[Envelope], units: Vec<Vec<Ready>>, deadline: Instant) -> Vec<UnitResult> {
        let indices: Vec<Vec<usize>> = units.iter().map(|items| items.iter().map(|r| r.index).collect()).collect();
        let keyed = units
            .into_iter()
            .map(|items| {
                let keys = items.iter().filter_map(|r| batch[r.index].order_key()).collect();
                (keys, items)
            })
            .collect();
        let ran = in_order::run_in_order(keyed, self.config.max_concurrent_requests, |items: Vec<Ready>| async move {
            let result = if items.len() == 1 && self.config.batch_mode == BatchMode::Off {
                match items.into_iter().next() {
                    Some(r) => UnitResult::PerItem(vec![(
                        r.index,
                        self.send_message(&batch[r.index], r.key, r.body, deadline).await,
                    )]),
                    None => UnitResult::PerItem(Vec::new()),
                }
            } else {
                self.send_batch(batch, items, deadline).await
            };
            Finished { failed_temporarily: result.failed_temporarily(), result }
        })
        .await;
        ran.into_iter()
            .zip(indices)
            .map(|(ran, indices)| match ran {
                Ran::Done(result) => result,
                Ran::HeldBack => {
                    UnitResult::PerItem(indices.into_iter().map(|i| (i, MessageOutcome::HeldBack)).collect())
                }
            })
            .collect()
    }

    /// One message, with in-place retries (`sinks_toolkit::retry::InPlace`: temporary
    /// failures only, the same idempotency key, each retry's timeout within the write's
    /// budget) and the inquiry after an ambiguous timeout.
    async fn send_message(
        &self,
        envelope: &Envelope,
        key: Option<IdempotencyKey>,
        body: Vec<u8>,
        deadline: Instant,
    ) -> MessageOutcome {
        let body = Bytes::from(body);
        let basis = outcome::basis_of(key.as_ref());
        let key = key.as_ref().map(IdempotencyKey::as_str);
        // One inquiry per message, whichever attempt timed out first.
        let inquired = AtomicBool::new(false);
        let attempt = |attempt| self.attempt_message(envelope, (key, basis), &body, attempt, &inquired);
        self.retry.write("http request", envelope, deadline, attempt).await
    }

    /// One attempt of one message: the outcome the endpoint's answer decides, or the failure
    /// (for the retry loop to judge). A timeout that may have committed is inquired about
    /// once: found is a duplicate, not found is sent again at once.
    async fn attempt_message(
        &self,
        envelope: &Envelope,
        (key, basis): (Option<&str>, KeyBasis),
        body: &Bytes,
        attempt: Attempt,
        inquired: &AtomicBool,
    ) -> Result<MessageOutcome, SinkError> {
        loop {
            let sent = self
                .endpoint
                .send(
                    self.endpoint.method.clone(),
                    &self.endpoint.url,
                    Some(body.clone()),
                    (key, Some(envelope)),
                    request::CONTENT_TYPE_JSON,
                    attempt.timeout(),
                )
                .await;
            let err = match sent {
                Ok(answer) => return self.answered(envelope, (key, basis), &answer),
                Err(SendError::Setup(e)) => return Err(e),
                Err(SendError::Http(err)) => err,
            };
            let (Some(template), Some(key)) = (&self.config.inquiry_url, key) else { return Err(classify(err)) };
            if !kind_of(&err).ambiguous || inquired.swap(true, Ordering::Relaxed) {
                return Err(classify(err));
            }
            match self.inquire(template, key).await {
                Inquiry::Found => {
                    tracing::debug!(
                        subject = envelope.subject(),
                        stream_sequence = envelope.jetstream().stream_sequence,
                        "timed out, but the endpoint has the key: duplicate"
                    );
                    return Ok(MessageOutcome::Duplicate);
                }
                Inquiry::NotFound => {
                    tracing::debug!(
                        subject = envelope.subject(),
                        stream_sequence = envelope.jetstream().stream_sequence,
                        "timed out and the endpoint lacks the key: sending again"
                    );
                }
                Inquiry::Unknown(e) => return Err(e),
            }
        }
    }

    /// What the endpoint's answer to one message (its key, and what that key is made of)
    /// means; the answer is remembered when it settled the message.
    fn answered(
        &self,
        envelope: &Envelope,
        (key, basis): (Option<&str>, KeyBasis),
        answer: &Answer,
    ) -> Result<MessageOutcome, SinkError> {
        let outcome = outcome::of_message(envelope, (key.is_some(), basis), answer, &self.statuses)?;
        self.remember(envelope, answer);
        Ok(outcome)
    }

    /// Keeps the answer that settled `envelope` for [`sinks_contract::Destinations::destination`], when it will be
    /// asked.
    fn remember(&self, envelope: &Envelope, answer: &Answer) {
        if self.reporting.load(Ordering::Relaxed) {
            self.answers.record(envelope, answer.settled());
        }
    }

    /// Several envelopes in one request: the answer applies to all of them.
    async fn send_batch(&self, batch: &[Envelope], items: Vec<Ready>, deadline: Instant) -> UnitResult {
        let keys: Option<Vec<&str>> = items.iter().map(|r| r.key.as_ref().map(IdempotencyKey::as_str)).collect();
        let key = keys.map(request::batch_key);
        let key = key.as_ref().map(IdempotencyKey::as_str);
        let body = Bytes::from(request::batch_body(items.iter().map(|r| r.body.as_slice()), self.config.batch_mode));
        let attempt = |attempt| self.attempt_batch(batch, &items, key, &body, attempt);
        match self.retry.run("http batch request", Budget::Until(deadline), attempt).await {
            Ok(result) => result,
            Err(failure) => {
                tracing::debug!(messages = items.len(), error = %failure.display_chain(), "batch request failed");
                all(&items, &|| MessageOutcome::Failed(failure.duplicate()))
            }
        }
    }

    /// One attempt of a batch request: what the answer decides for all its envelopes, or the
    /// failure (for the retry loop to judge).
    async fn attempt_batch(
        &self,
        batch: &[Envelope],
        items: &[Ready],
        key: Option<&str>,
        body: &Bytes,
        attempt: Attempt,
    ) -> Result<UnitResult, SinkError> {
        let content_type = match self.config.batch_mode {
            BatchMode::Ndjson => request::CONTENT_TYPE_NDJSON,
            _ => request::CONTENT_TYPE_JSON,
        };
        let sent = self
            .endpoint
            .send(
                self.endpoint.method.clone(),
                &self.endpoint.url,
                Some(body.clone()),
                (key, None),
                content_type,
                attempt.timeout(),
            )
            .await;
        let answer = match sent {
            Ok(answer) => answer,
            Err(SendError::Setup(e)) => return Err(e),
            Err(SendError::Http(err)) => return Err(classify(err)),
        };
        let outcome: fn() -> MessageOutcome =
            match outcome::of_batch(&answer, &self.statuses, key.is_some(), items.len())? {
                BatchVerdict::Committed => || MessageOutcome::Committed,
                BatchVerdict::Duplicate => || MessageOutcome::Duplicate,
                BatchVerdict::EachByKey => {
                    for r in items {
                        self.remember(&batch[r.index], &answer);
                    }
                    let judged = items
                        .iter()
                        .map(|r| {
                            (
                                r.index,
                                outcome::conflict(&batch[r.index], outcome::basis_of(r.key.as_ref()), answer.status),
                            )
                        })
                        .collect();
                    return Ok(UnitResult::PerItem(judged));
                }
                BatchVerdict::Rejected(e) => return Ok(UnitResult::BatchRejected(e)),
            };
        for r in items {
            self.remember(&batch[r.index], &answer);
        }
        Ok(all(items, &outcome))
    }

    /// Asks `inquiry_url` whether `key` was committed.
    async fn inquire(&self, template: &str, key: &str) -> Inquiry {
        let unknown = |e: SinkError| {
            Inquiry::Unknown(
                SinkError::temporary(
                    "request timed out and the inquiry could not tell whether the endpoint committed it",
                )
                .with_source(e),
            )
        };
        let url = match Url::parse(&request::inquiry_url(template, key)) {
            Ok(url) => url,
            Err(e) => return unknown(SinkError::config(format!("sink.inquiry_url does not form a URL ({e})"))),
        };
        match self.endpoint.send(Method::GET, &url, None, (None, None), request::CONTENT_TYPE_JSON, None).await {
            Ok(answer) if (200..300).contains(&answer.status) => Inquiry::Found,
            Ok(answer) if answer.status == 404 => Inquiry::NotFound,
            Ok(answer) => unknown(SinkError::temporary(format!("inquiry answered {}", answer.status))),
            Err(SendError::Setup(e)) => unknown(e),
            Err(SendError::Http(e)) => unknown(classify(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_block_becomes_the_in_place_loop_of_temporary_failures() {
        let mut c = HttpSinkConfig::new("https://h.example/x");
        c.retry.max_retries = 4;
        c.retry.backoff_ms = 20;
        c.retry.max_backoff_ms = 900;
        c.request_timeout_seconds = 0.1;
        let retry = in_place(&c);
        assert_eq!(retry.max_retries(), 4);
        assert_eq!(retry.backoff().base, Duration::from_millis(20));
        assert_eq!(retry.backoff().max, Duration::from_millis(900));
        assert_eq!(retry.shortest_attempt(), Duration::from_millis(100), "the request timeout bounds an attempt");
        let every_class = InPlace::new(*retry.backoff(), 4, Duration::from_millis(100));
        assert_ne!(retry, every_class, "a configuration failure is not retried in place");
        assert_eq!(retry, every_class.retrying(Retriable::TemporaryOnly));
    }

    #[test]
    fn every_message_of_a_request_gets_the_same_outcome() {
        let items: Vec<Ready> = [3, 5].into_iter().map(|index| Ready { index, key: None, body: Vec::new() }).collect();
        let UnitResult::PerItem(outcomes) = all(&items, &|| MessageOutcome::Duplicate) else { panic!("per item") };
        assert_eq!(outcomes.len(), 2);
        assert!(matches!(outcomes[..], [(3, MessageOutcome::Duplicate), (5, MessageOutcome::Duplicate)]));
    }
}
