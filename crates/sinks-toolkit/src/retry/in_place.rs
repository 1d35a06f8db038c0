//! Retrying inside one write: the one in-place retry loop of every sink that retries a
//! request before it reports an outcome (HTTP, S3, NoSQL, Coherence).
//!
//! A sink hands [`InPlace::run`] one attempt (an async closure) and gets back its result or
//! the failure to report. The loop decides, after each failed attempt:
//! - a permanent failure (and, for [`Retriable::TemporaryOnly`], a configuration failure)
//!   goes back at once;
//! - after `max_retries` retries the failure goes back as it is;
//! - otherwise the wait is the backoff delay of the attempt, or the failure's own
//!   [`SinkError::retry_after`] when longer. Within a write ([`Budget::Until`]) the retry
//!   happens only when that wait is at most the backoff maximum and the wait plus the
//!   shortest attempt still ends before the write's deadline; a failure cut short this way
//!   goes back carrying the wait it needs as its `retry_after` (when that is longer than
//!   what it asked for), so the redelivery comes no sooner. Outside a write
//!   ([`Budget::Unbounded`]: reconcile's read-back) every wait is spent in place.
//!
//! Every retry is counted with [`super::note_retry_in_place`]. Where destinations differ the
//! loop takes a parameter, as Vector's `RetryLogic` does: which classes are retried
//! ([`Retriable`]), and each attempt's own timeout ([`Attempt::timeout`], for a client that
//! sets one per request).

use std::future::Future;
use std::time::{Duration, Instant};

use super::{Backoff, note_retry_in_place};
use sinks_contract::{Envelope, ErrorClass, MessageOutcome, SinkError};

/// The most a retry is granted as its shortest useful time (see [`InPlace::shortest_attempt`]).
const SHORTEST_ATTEMPT_CAP: Duration = Duration::from_millis(250);

/// Which failures are retried in place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Retriable {
    /// Every failure but a permanent one: temporary and configuration failures (a refusal at
    /// run time counts as temporary, see [`ErrorClass::Config`]). The default.
    #[default]
    NotPermanent,
    /// Temporary failures only: a configuration failure goes back at once (the HTTP sink:
    /// an endpoint refusing the credentials will not accept them a moment later).
    TemporaryOnly,
}

/// How long retries in place may go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Inside a write that must end by this instant: a wait longer than the backoff maximum,
    /// or a retry that could not finish before the instant, ends the retries and the failure
    /// goes back with the wait it needs.
    Until(Instant),
    /// Outside a write (reconcile's read-back, which has no write budget to keep): only the
    /// number of retries is bounded, and every wait, however long, is spent in place.
    Unbounded,
}

/// One sink's in-place retry settings: its backoff, how many retries, its request timeout
/// and which failures it retries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InPlace {
    backoff: Backoff,
    max_retries: u32,
    request_timeout: Duration,
    retriable: Retriable,
}

/// One attempt, as [`InPlace::run`] hands it to the sink's closure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    number: u32,
    deadline: Option<Instant>,
    request_timeout: Duration,
}

/// The loop's clock: tokio's, so tests with paused time see their waits pass.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Attempt {
    /// 1 for the first attempt, 2 for the first retry, …
    pub fn number(&self) -> u32 {
        self.number
    }

    /// True for every attempt but the first.
    pub fn is_retry(&self) -> bool {
        self.number > 1
    }

    /// The timeout this attempt should be sent with: `None` for the first (the client's
    /// configured one) and outside a write; for a retry, the request timeout, or what is
    /// left of the write's budget when that is less (but at least the shortest attempt), so
    /// a write ends in time.
    pub fn timeout(&self) -> Option<Duration> {
        let deadline = self.deadline.filter(|_| self.is_retry())?;
        let left = deadline.saturating_duration_since(now()).max(shortest(self.request_timeout));
        Some(self.request_timeout.min(left))
    }
}

fn shortest(request_timeout: Duration) -> Duration {
    request_timeout.min(SHORTEST_ATTEMPT_CAP)
}

impl InPlace {
    /// Retries with `backoff`, at most `max_retries` times, for a sink whose requests time
    /// out after `request_timeout`; temporary and configuration failures are retried.
    pub fn new(backoff: Backoff, max_retries: u32, request_timeout: Duration) -> Self {
        Self { backoff, max_retries, request_timeout, retriable: Retriable::default() }
    }

    /// The same settings, retrying only the failures `retriable` names.
    #[must_use]
    pub fn retrying(self, retriable: Retriable) -> Self {
        Self { retriable, ..self }
    }

    /// The backoff schedule.
    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// The most retries after the first attempt.
    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// The shortest time worth giving a retry: the request timeout, at most 250 ms (a put
    /// takes milliseconds; the retry still runs with its own timeout).
    pub fn shortest_attempt(&self) -> Duration {
        shortest(self.request_timeout)
    }

    /// Runs `attempt` until it succeeds or the rules of this module end the retries, and
    /// returns its result or the failure to report. `what` names the request in the debug
    /// log of each retry (`"s3 write"`).
    pub async fn run<T, F, Fut>(&self, what: &str, budget: Budget, mut attempt: F) -> Result<T, SinkError>
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, SinkError>>,
    {
        let deadline = match budget {
            Budget::Until(deadline) => Some(deadline),
            Budget::Unbounded => None,
        };
        let mut number: u32 = 1;
        loop {
            let failure = match attempt(Attempt { number, deadline, request_timeout: self.request_timeout }).await {
                Ok(done) => return Ok(done),
                Err(failure) => failure,
            };
            let wait = self.backoff.delay_random(u64::from(number)).max(failure.retry_after().unwrap_or_default());
            let (wait, failure) = self.next(number, failure, wait, budget, now())?;
            tracing::debug!(attempt = number, delay_ms = wait.as_millis() as u64, error = %failure, "{what} retried in place");
            note_retry_in_place();
            tokio::time::sleep(wait).await;
            number = number.saturating_add(1);
        }
    }

    /// [`Self::run`] for one message of a write that must end by `deadline`: the outcome its
    /// attempt decided, or the failure to report as its outcome, logged (which message, never
    /// contents: a permanent failure at warn, any other at debug).
    pub async fn write<F, Fut>(&self, what: &str, envelope: &Envelope, deadline: Instant, attempt: F) -> MessageOutcome
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<MessageOutcome, SinkError>>,
    {
        let failure = match self.run(what, Budget::Until(deadline), attempt).await {
            Ok(outcome) => return outcome,
            Err(failure) => failure,
        };
        let (subject, stream_sequence) = (envelope.subject(), envelope.jetstream().stream_sequence);
        if failure.is_permanent() {
            tracing::warn!(subject, stream_sequence, error = %failure, "{what} refused");
        } else {
            tracing::debug!(subject, stream_sequence, error = %failure.display_chain(), "{what} failed");
        }
        MessageOutcome::Failed(failure)
    }

    /// After failed attempt `attempt` whose retry would wait `wait`: `Ok` to retry after
    /// that wait (the failure kept for the log), `Err` with the failure to report.
    fn next(
        &self,
        attempt: u32,
        failure: SinkError,
        wait: Duration,
        budget: Budget,
        now: Instant,
    ) -> Result<(Duration, SinkError), SinkError> {
        let retriable = match self.retriable {
            Retriable::NotPermanent => !failure.is_permanent(),
            Retriable::TemporaryOnly => failure.class() == ErrorClass::Temporary,
        };
        if !retriable || attempt > self.max_retries {
            return Err(failure);
        }
        let Budget::Until(deadline) = budget else { return Ok((wait, failure)) };
        let in_time = now.checked_add(wait.saturating_add(self.shortest_attempt())).is_some_and(|end| end <= deadline);
        if wait <= self.backoff.max && in_time {
            return Ok((wait, failure));
        }
        // A wait it could not spend here goes with it: the redelivery comes no sooner.
        let asked = failure.retry_after().unwrap_or_default();
        Err(if wait > asked { failure.with_retry_after(wait) } else { failure })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::retry::{BackoffMode, Jitter, retries_in_place};

    /// The count of retries in place is process-wide: tests that read it run one at a time.
    static COUNTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    const MS: Duration = Duration::from_millis(1);

    /// Fixed 100 ms delays (no jitter), at most 1 s; 3 retries; 100 ms requests.
    fn policy() -> InPlace {
        let backoff =
            Backoff { base: 100 * MS, max: 1000 * MS, mode: BackoffMode::Fixed, multiplier: 1.0, jitter: Jitter::None };
        InPlace::new(backoff, 3, 100 * MS)
    }

    /// What one run did: its result, the attempts made, the retries counted, the time spent.
    struct Ran {
        result: Result<&'static str, SinkError>,
        attempts: u32,
        counted: u64,
        spent: Duration,
    }

    /// Runs `policy` within `budget` (`None`: unbounded) over attempts that fail with
    /// `failures` in turn and then succeed.
    async fn run(policy: InPlace, budget: Option<Duration>, failures: Vec<SinkError>) -> Ran {
        let _serial = COUNTER.lock().await;
        let started = tokio::time::Instant::now();
        let budget = budget.map_or(Budget::Unbounded, |b| Budget::Until(now() + b));
        let calls = AtomicU32::new(0);
        let failures = std::sync::Mutex::new(failures.into_iter());
        let before = retries_in_place();
        let result = policy
            .run("test request", budget, |attempt| {
                let call = calls.fetch_add(1, Ordering::Relaxed) + 1;
                assert_eq!(attempt.number(), call, "attempts are numbered from 1");
                let next = failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner).next();
                async move { next.map_or(Ok("done"), Err) }
            })
            .await;
        Ran { result, attempts: calls.into_inner(), counted: retries_in_place() - before, spent: started.elapsed() }
    }

    fn temporary() -> SinkError {
        SinkError::temporary("busy")
    }

    #[tokio::test(start_paused = true)]
    async fn counts_every_retry_and_waits_the_backoff() {
        let ran = run(policy(), Some(Duration::from_secs(10)), vec![temporary(), temporary()]).await;
        assert_eq!(ran.result.unwrap(), "done");
        assert_eq!(ran.attempts, 3);
        assert_eq!(ran.counted, 2, "each retry is noted for retries_in_place_total");
        assert_eq!(ran.spent, 200 * MS, "two fixed delays of 100 ms");
    }

    #[tokio::test(start_paused = true)]
    async fn honours_retry_after_when_longer_than_the_delay() {
        let asked = temporary().with_retry_after(300 * MS);
        let ran = run(policy(), Some(Duration::from_secs(10)), vec![asked]).await;
        assert_eq!(ran.result.unwrap(), "done");
        assert_eq!((ran.attempts, ran.counted), (2, 1));
        assert_eq!(ran.spent, 300 * MS, "the failure's Retry-After, not the 100 ms delay");
        // A shorter Retry-After does not shorten the backoff delay.
        let ran = run(policy(), Some(Duration::from_secs(10)), vec![temporary().with_retry_after(10 * MS)]).await;
        assert_eq!(ran.spent, 100 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_over_the_backoff_maximum_is_handed_back_not_spent() {
        let ran = run(policy(), Some(Duration::from_secs(60)), vec![temporary().with_retry_after(5000 * MS)]).await;
        let failure = ran.result.unwrap_err();
        assert_eq!((ran.attempts, ran.counted, ran.spent), (1, 0, Duration::ZERO));
        assert_eq!(failure.retry_after(), Some(5000 * MS), "the wait it asked for goes with it");
        assert_eq!(failure.class(), ErrorClass::Temporary);
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_the_budget_and_hands_back_the_wait_it_needs() {
        // 100 ms wait + 100 ms shortest attempt fit in 250 ms once, not twice.
        let ran = run(policy(), Some(250 * MS), vec![temporary(), temporary()]).await;
        let failure = ran.result.unwrap_err();
        assert_eq!((ran.attempts, ran.counted, ran.spent), (2, 1, 100 * MS));
        assert_eq!(failure.retry_after(), Some(100 * MS), "cut short: the redelivery waits the delay");
        // No time for even one retry.
        let ran = run(policy(), Some(150 * MS), vec![temporary()]).await;
        assert_eq!((ran.attempts, ran.counted), (1, 0));
        assert_eq!(ran.result.unwrap_err().retry_after(), Some(100 * MS));
        // A longer wait the failure already asked for is kept as it is.
        let ran = run(policy(), Some(150 * MS), vec![temporary().with_retry_after(120 * MS)]).await;
        assert_eq!(ran.result.unwrap_err().retry_after(), Some(120 * MS));
    }

    #[tokio::test(start_paused = true)]
    async fn exhausted_retries_hand_back_the_failure_unchanged() {
        let ran = run(policy(), Some(Duration::from_secs(10)), (0..5).map(|_| temporary()).collect()).await;
        let failure = ran.result.unwrap_err();
        assert_eq!((ran.attempts, ran.counted), (4, 3), "the first attempt and max_retries = 3 retries");
        assert_eq!(failure.retry_after(), None, "not cut short: the runner's own backoff applies");
        let none = InPlace::new(*policy().backoff(), 0, 100 * MS);
        let ran = run(none, Some(Duration::from_secs(10)), vec![temporary()]).await;
        assert_eq!((ran.attempts, ran.counted), (1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_failures_are_never_retried() {
        for retriable in [Retriable::NotPermanent, Retriable::TemporaryOnly] {
            let ran =
                run(policy().retrying(retriable), Some(Duration::from_secs(10)), vec![SinkError::permanent("bad")])
                    .await;
            let failure = ran.result.unwrap_err();
            assert!(failure.is_permanent());
            assert_eq!((ran.attempts, ran.counted, failure.retry_after()), (1, 0, None), "{retriable:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn configuration_failures_are_retried_unless_temporary_only() {
        let refused = || SinkError::config("refused");
        let ran = run(policy(), Some(Duration::from_secs(10)), vec![refused()]).await;
        assert_eq!((ran.attempts, ran.counted), (2, 1));
        let ran =
            run(policy().retrying(Retriable::TemporaryOnly), Some(Duration::from_secs(10)), vec![refused()]).await;
        assert_eq!((ran.attempts, ran.counted), (1, 0));
        assert_eq!(ran.result.unwrap_err().class(), ErrorClass::Config);
    }

    #[tokio::test(start_paused = true)]
    async fn unbounded_retries_spend_every_wait_and_stop_at_max_retries() {
        let long = || temporary().with_retry_after(5000 * MS);
        let ran = run(policy(), None, vec![long(), long()]).await;
        assert_eq!(ran.result.unwrap(), "done");
        assert_eq!((ran.attempts, ran.counted, ran.spent), (3, 2, 10_000 * MS));
        let ran = run(policy(), None, (0..4).map(|_| long()).collect()).await;
        assert_eq!(ran.result.unwrap_err().retry_after(), Some(5000 * MS));
        assert_eq!(ran.attempts, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_write_reports_its_outcome_or_its_failure() {
        let _serial = COUNTER.lock().await;
        let e = sinks_contract::testing::envelope("S", 1, "s", "{}");
        let deadline = now() + Duration::from_secs(10);
        let calls = AtomicU32::new(0);
        let outcome = policy()
            .write("test write", &e, deadline, |_| {
                let first = calls.fetch_add(1, Ordering::Relaxed) == 0;
                async move { if first { Err(temporary()) } else { Ok(MessageOutcome::Duplicate) } }
            })
            .await;
        assert!(matches!(outcome, MessageOutcome::Duplicate), "{outcome:?}");
        let failed = policy().write("test write", &e, deadline, |_| async { Err(SinkError::permanent("bad")) }).await;
        assert!(matches!(failed, MessageOutcome::Failed(f) if f.is_permanent()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_gets_the_request_timeout_or_what_is_left() {
        let attempt = |number, left: Option<Duration>| Attempt {
            number,
            deadline: left.map(|l| now() + l),
            request_timeout: 2000 * MS,
        };
        assert_eq!(attempt(1, Some(Duration::from_secs(10))).timeout(), None, "the first uses the client's");
        assert_eq!(attempt(2, Some(Duration::from_secs(10))).timeout(), Some(2000 * MS));
        assert_eq!(attempt(2, Some(700 * MS)).timeout(), Some(700 * MS), "what is left of the budget");
        assert_eq!(attempt(2, Some(10 * MS)).timeout(), Some(250 * MS), "never less than the shortest attempt");
        assert_eq!(attempt(2, None).timeout(), None, "no budget: the client's");
        assert!(attempt(2, None).is_retry() && !attempt(1, None).is_retry());
    }
}
