//! Outage reporting: failed writes are logged per batch or, during a destination outage
//! (every message of a batch failed temporarily), once when it starts, once per
//! [`OUTAGE_LOG_INTERVAL`] with what failed meanwhile, and once when a batch makes messages
//! durable with no temporary failure (it has recovered). Each line carries counts, the first
//! and last stream sequence, the error class and the reason; per-message detail is at debug
//! level (in `settle::settle_one`).
//!
//! [`Outage::observe`] is the state machine (pure: the caller gives the time); [`Line::log`]
//! writes what it decided; [`track_outage`] does both for a written batch.
//!
//! [`Holds`] is the state of the outage holds (`hold`): how many batches and messages hold
//! through an outage now, the pause the fetch loop waits on, and the hold's own log lines and
//! gauges. A leaf of the runner: the run's context keeps both states, and the tasks that
//! change them depend on this module, not the other way round.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sinks_contract::envelope::Envelope;
use sinks_contract::error::ErrorClass;
use sinks_contract::sink::MessageOutcome;
use tokio::sync::watch;

use crate::metrics::{CounterId, GaugeId, Metrics};

/// How often a continuing destination outage is summarized in the log.
pub(super) const OUTAGE_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A destination outage in progress: batches in which nothing could be written.
#[derive(Debug, Default)]
pub(super) struct Outage {
    /// When the outage began (`None`: no outage).
    since: Option<Instant>,
    /// Failed batches and messages since it began.
    batches: u64,
    messages: u64,
    /// What failed since the last log line.
    window: Failures,
    /// When the last line was logged.
    logged: Option<Instant>,
}

/// The failed messages of one or more batches, for one log line.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Failures {
    /// Batches with failures.
    pub(super) batches: u64,
    /// Failed messages.
    pub(super) messages: u64,
    /// Lowest stream sequence that failed.
    pub(super) first_sequence: u64,
    /// Highest stream sequence that failed.
    pub(super) last_sequence: u64,
    /// Class of the reported failure.
    pub(super) class: Option<ErrorClass>,
    /// Reason of the reported failure.
    pub(super) reason: String,
}

impl Failures {
    /// The failures of one batch (sequences, the first failure's class and reason).
    pub(super) fn of(envelopes: &[Envelope], outcomes: &[MessageOutcome]) -> Self {
        let mut f = Self::default();
        for (envelope, outcome) in envelopes.iter().zip(outcomes) {
            let MessageOutcome::Failed(e) = outcome else { continue };
            let seq = envelope.jetstream().stream_sequence;
            if f.messages == 0 {
                f.first_sequence = seq;
                f.last_sequence = seq;
                f.class = Some(e.class());
                f.reason = e.display_chain();
            }
            f.first_sequence = f.first_sequence.min(seq);
            f.last_sequence = f.last_sequence.max(seq);
            f.messages += 1;
        }
        f.batches = u64::from(f.messages > 0);
        f
    }

    /// Adds `other` (later failures): counts and sequence range grow, the latest reason wins.
    pub(super) fn add(&mut self, other: Self) {
        if self.messages == 0 {
            *self = other;
            return;
        }
        self.batches += other.batches;
        self.messages += other.messages;
        self.first_sequence = self.first_sequence.min(other.first_sequence);
        self.last_sequence = self.last_sequence.max(other.last_sequence);
        if other.class.is_some() {
            self.class = other.class;
            self.reason = other.reason;
        }
    }

    /// The class's name in log lines.
    pub(super) fn class_name(&self) -> &'static str {
        match self.class {
            Some(ErrorClass::Temporary) | None => "temporary",
            Some(ErrorClass::Permanent) => "permanent",
            Some(ErrorClass::Config) => "config",
        }
    }

    fn config_error(&self) -> bool {
        self.class == Some(ErrorClass::Config)
    }
}

/// The line one written batch adds to the log.
#[derive(Debug, PartialEq)]
pub(super) enum Line {
    /// Nothing in the batch could be written: an outage begins.
    Unavailable(Failures),
    /// The outage goes on: what failed since the last line.
    StillUnavailable {
        /// Since the outage began.
        outage_seconds: u64,
        /// What failed since the last line.
        failures: Failures,
    },
    /// The outage is over.
    Recovered {
        /// How long it lasted.
        outage_seconds: u64,
        /// Batches that failed during it.
        failed_batches: u64,
        /// Messages that failed during it.
        failed_messages: u64,
    },
    /// Outside an outage, some messages of the batch were not written.
    NotWritten {
        /// What failed.
        failures: Failures,
        /// How many messages the batch made durable.
        written: usize,
    },
}

impl Outage {
    /// Takes in the outcomes of one written batch at `now`; returns the line to log, if any.
    /// An outage begins with a batch in which every message failed temporarily (or was held
    /// back behind such a failure) and ends with a batch that made something durable and had
    /// no temporary failure. A redelivered batch whose already-written messages come back as
    /// duplicates while the rest still fails is part of the outage, not its end.
    pub(super) fn observe(
        &mut self,
        envelopes: &[Envelope],
        outcomes: &[MessageOutcome],
        now: Instant,
    ) -> Option<Line> {
        let failures = Failures::of(envelopes, outcomes);
        let any_temporary = outcomes.iter().any(MessageOutcome::failed_temporarily);
        let all_temporary =
            any_temporary && outcomes.iter().all(|o| o.failed_temporarily() || matches!(o, MessageOutcome::HeldBack));
        let any_durable = outcomes.iter().any(MessageOutcome::is_durable);
        if let Some(since) = self.since {
            let outage_seconds = now.duration_since(since).as_secs();
            if any_durable && !any_temporary {
                let line =
                    Line::Recovered { outage_seconds, failed_batches: self.batches, failed_messages: self.messages };
                *self = Self::default();
                return Some(line);
            }
            if failures.messages == 0 {
                return None;
            }
            self.batches += 1;
            self.messages += failures.messages;
            self.window.add(failures);
            let due = self.logged.is_some_and(|at| now.duration_since(at) >= OUTAGE_LOG_INTERVAL);
            if !due {
                return None;
            }
            self.logged = Some(now);
            return Some(Line::StillUnavailable { outage_seconds, failures: std::mem::take(&mut self.window) });
        }
        if failures.messages == 0 {
            return None;
        }
        if all_temporary {
            *self = Self {
                since: Some(now),
                logged: Some(now),
                batches: 1,
                messages: failures.messages,
                ..Self::default()
            };
            return Some(Line::Unavailable(failures));
        }
        let written = outcomes.iter().filter(|o| o.is_durable()).count();
        Some(Line::NotWritten { failures, written })
    }
}

impl Line {
    /// Writes the line for sink `sink`.
    pub(super) fn log(&self, sink: &str) {
        match self {
            Self::Unavailable(f) if f.config_error() => {
                tracing::error!(sink, messages = f.messages, first_sequence = f.first_sequence, last_sequence = f.last_sequence, class = f.class_name(), reason = %f.reason, "destination unavailable: nothing in the batch could be written (destination configuration error; retried)");
            }
            Self::Unavailable(f) => {
                tracing::warn!(sink, messages = f.messages, first_sequence = f.first_sequence, last_sequence = f.last_sequence, class = f.class_name(), reason = %f.reason, "destination unavailable: nothing in the batch could be written");
            }
            Self::StillUnavailable { outage_seconds, failures: f } => tracing::warn!(
                sink,
                outage_seconds,
                batches = f.batches,
                messages = f.messages,
                first_sequence = f.first_sequence,
                last_sequence = f.last_sequence,
                class = f.class_name(),
                reason = %f.reason,
                "destination still unavailable"
            ),
            Self::Recovered { outage_seconds, failed_batches, failed_messages } => {
                tracing::info!(sink, outage_seconds, failed_batches, failed_messages, "destination recovered")
            }
            Self::NotWritten { failures: f, written } if f.config_error() => {
                tracing::error!(sink, failed = f.messages, written, first_sequence = f.first_sequence, last_sequence = f.last_sequence, class = f.class_name(), reason = %f.reason, "messages of the batch were not written (destination configuration error; retried)");
            }
            Self::NotWritten { failures: f, written } => {
                tracing::warn!(sink, failed = f.messages, written, first_sequence = f.first_sequence, last_sequence = f.last_sequence, class = f.class_name(), reason = %f.reason, "messages of the batch were not written");
            }
        }
    }
}

/// Logs the failed writes of a written batch (see the module documentation) and turns the
/// health status down when an outage begins and up when it ends.
pub(super) fn track_outage(
    outage: &Mutex<Outage>,
    sink: &str,
    metrics: &Metrics,
    envelopes: &[Envelope],
    outcomes: &[MessageOutcome],
    now: Instant,
) {
    let mut outage = outage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(line) = outage.observe(envelopes, outcomes, now) else { return };
    // Logged with the lock held, so the lines keep the order of the states they report.
    line.log(sink);
    let healthy = match line {
        Line::Unavailable(_) => false,
        Line::Recovered { .. } => true,
        Line::StillUnavailable { .. } | Line::NotWritten { .. } => return,
    };
    metrics.status().set_sink_healthy(healthy);
}

/// The holds of a run: how many batches and messages hold now, since when, and the pause the
/// fetch loop waits on.
#[derive(Debug)]
pub(super) struct Holds {
    state: Mutex<State>,
    pause: watch::Sender<bool>,
    /// Where the hold's lines and gauges go.
    metrics: Metrics,
    /// The sink, as the lines name it.
    sink: String,
    /// `delivery.outage_hold_seconds`, as the first line says.
    limit_s: u64,
}

#[derive(Debug, Default)]
struct State {
    batches: usize,
    pausing: usize,
    /// Batches held for throttling (every held message throttled).
    throttling: usize,
    messages: usize,
    since: Option<Instant>,
    logged: Option<Instant>,
    /// When the paused time was last added to its counter.
    counted: Option<Instant>,
    /// When the held and throttled times were last added to their counters.
    held_counted: Option<Instant>,
    throttled_counted: Option<Instant>,
    released: u64,
    /// The kind of the hold that began the current period (for its lines).
    kind: Option<HoldKind>,
}

/// Why a batch is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HoldKind {
    /// The destination is down.
    Outage,
    /// The destination throttled every held message (its own limit).
    Throttled,
}

/// Adds the whole seconds since `*since` to `counter` and moves `*since` on by them.
fn count_seconds(metrics: &Metrics, counter: CounterId, since: &mut Option<Instant>, now: Instant) {
    if let Some(at) = *since {
        let whole = now.duration_since(at).as_secs();
        if whole > 0 {
            metrics.inc(counter, whole);
            *since = Some(at + Duration::from_secs(whole));
        }
    }
}

/// How a batch's hold ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    /// A write made the held messages durable (or failed them for another reason).
    Recovered,
    /// `delivery.outage_hold_seconds` passed.
    Released,
    /// The destination took other writes (or answered its health check with nothing else to
    /// try), yet held messages kept failing: they fail on their own, not for an outage.
    NotAnOutage,
    /// A stop was requested.
    Stopped,
}

impl Holds {
    /// No holds yet, of sink `sink` holding at most `limit_s` seconds, recorded in `metrics`.
    pub(super) fn new(metrics: Metrics, sink: &str, limit_s: u64) -> Self {
        let (state, pause) = (Mutex::default(), watch::channel(false).0);
        Self { state, pause, metrics, sink: sink.to_owned(), limit_s }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// True while a held batch pauses fetching.
    pub(super) fn paused(&self) -> bool {
        *self.pause.borrow()
    }

    /// Waits until fetching is not paused; false when a stop came first.
    pub(super) async fn wait_open(&self, stop: &watch::Receiver<bool>) -> bool {
        let mut state = self.pause.subscribe();
        let mut stop = stop.clone();
        tokio::select! {
            result = state.wait_for(|p| !*p) => result.is_ok(),
            _ = stop.wait_for(|s| *s) => false,
        }
    }

    /// True while a batch is held.
    pub(super) fn active(&self) -> bool {
        self.lock().batches > 0
    }

    /// Counts messages the destination throttled.
    pub(super) fn note_throttled(&self, messages: usize) {
        if messages > 0 {
            self.metrics.inc(CounterId::MessagesThrottled, messages as u64);
        }
    }

    /// A batch starts holding `batch` for `reason`; `pause`: fetching pauses meanwhile, else
    /// `fetching` says why it goes on.
    pub(super) fn enter(&self, batch: &[Envelope], (pause, fetching): (bool, &str), reason: &str, kind: HoldKind) {
        let messages = batch.len();
        let now = Instant::now();
        let mut s = self.lock();
        s.batches += 1;
        s.messages += messages;
        s.pausing += usize::from(pause);
        if kind == HoldKind::Throttled {
            if s.throttling == 0 {
                s.throttled_counted = Some(now);
            }
            s.throttling += 1;
        }
        if s.since.is_none() {
            s.since = Some(now);
            s.logged = Some(now);
            s.counted = Some(now);
            s.held_counted = Some(now);
            s.kind = Some(kind);
            if kind == HoldKind::Throttled {
                tracing::warn!(
                    sink = self.sink.as_str(),
                    messages,
                    first_sequence = batch.first().map_or(0, |e| e.jetstream().stream_sequence),
                    last_sequence = batch.last().map_or(0, |e| e.jetstream().stream_sequence),
                    fetching = if pause { "paused" } else { fetching },
                    hold_limit_s = self.limit_s,
                    reason,
                    "destination throttling: holding the throttled messages unacknowledged (in-progress heartbeats, no \
                     delivery used) until its Retry-After"
                );
            } else {
                tracing::warn!(
                    sink = self.sink.as_str(),
                    messages,
                    first_sequence = batch.first().map_or(0, |e| e.jetstream().stream_sequence),
                    last_sequence = batch.last().map_or(0, |e| e.jetstream().stream_sequence),
                    class = "temporary",
                    fetching = if pause { "paused" } else { fetching },
                    hold_limit_s = self.limit_s,
                    reason,
                    "destination unavailable: holding the batch unacknowledged (in-progress heartbeats, no delivery \
                 used) and probing the destination"
                );
            }
        }
        self.metrics.set(GaugeId::DestinationOutage, 1.0);
        self.metrics.set(GaugeId::OutageHeldMessages, s.messages as f64);
        self.metrics.status().set_outage_paused(true);
        if pause {
            self.pause.send_if_modified(|p| !std::mem::replace(p, true));
        }
    }

    /// The line per interval, and the paused seconds.
    pub(super) fn tick(&self, reason: &str) {
        let now = Instant::now();
        let mut s = self.lock();
        if s.pausing > 0 {
            count_seconds(&self.metrics, CounterId::DestinationOutagePausedSeconds, &mut s.counted, now);
        }
        count_seconds(&self.metrics, CounterId::DestinationHeldSeconds, &mut s.held_counted, now);
        if s.throttling > 0 {
            count_seconds(&self.metrics, CounterId::DestinationThrottledSeconds, &mut s.throttled_counted, now);
        }
        if s.logged.is_some_and(|at| now.duration_since(at) >= OUTAGE_LOG_INTERVAL) {
            s.logged = Some(now);
            let outage_seconds = s.since.map_or(0, |t| now.duration_since(t).as_secs());
            let (batches, messages) = (s.batches, s.messages);
            let sink = self.sink.as_str();
            if s.kind == Some(HoldKind::Throttled) {
                tracing::warn!(
                    sink,
                    outage_seconds,
                    batches,
                    messages,
                    reason,
                    "destination still throttling: messages held, fetching paused"
                );
            } else {
                tracing::warn!(
                    sink,
                    outage_seconds,
                    batches,
                    messages,
                    reason,
                    "destination still unavailable: messages held, fetching paused"
                );
            }
        }
    }

    pub(super) fn leave(&self, messages: usize, pause: bool, ended: Ended, kind: HoldKind) {
        let now = Instant::now();
        let mut s = self.lock();
        s.batches -= 1;
        s.messages -= messages;
        s.pausing -= usize::from(pause);
        if kind == HoldKind::Throttled {
            s.throttling -= 1;
            if s.throttling == 0 {
                let since = s.throttled_counted.take();
                if let Some(at) = since {
                    self.metrics.inc(CounterId::DestinationThrottledSeconds, now.duration_since(at).as_secs());
                }
            }
        }
        if ended == Ended::Released {
            s.released += messages as u64;
            self.metrics.inc(CounterId::MessagesReleasedAfterOutageHold, messages as u64);
        }
        self.metrics.set(GaugeId::OutageHeldMessages, s.messages as f64);
        if s.pausing == 0 {
            if let Some(counted) = s.counted {
                self.metrics.inc(CounterId::DestinationOutagePausedSeconds, now.duration_since(counted).as_secs());
            }
            self.pause.send_if_modified(|p| std::mem::replace(p, false));
        }
        if s.batches > 0 {
            return;
        }
        if let Some(at) = s.held_counted {
            self.metrics.inc(CounterId::DestinationHeldSeconds, now.duration_since(at).as_secs());
        }
        let outage_seconds = s.since.map_or(0, |t| now.duration_since(t).as_secs());
        match ended {
            Ended::Recovered if s.kind == Some(HoldKind::Throttled) => tracing::info!(
                sink = self.sink.as_str(),
                throttled_seconds = outage_seconds,
                "destination throttling over: the held messages were written; fetching resumes"
            ),
            Ended::Recovered => tracing::info!(
                sink = self.sink.as_str(),
                outage_seconds,
                released = s.released,
                "destination recovered: the held messages were written; fetching resumes"
            ),
            Ended::Released => tracing::warn!(
                sink = self.sink.as_str(),
                outage_seconds,
                released = s.released,
                "destination outage outlasted delivery.outage_hold_seconds: held messages released for redelivery \
                 (NAKed with backoff); fetching resumes"
            ),
            Ended::Stopped => tracing::info!(
                sink = self.sink.as_str(),
                outage_seconds,
                "stopping during a destination outage: held messages settled as usual (they come back)"
            ),
            Ended::NotAnOutage => tracing::warn!(
                sink = self.sink.as_str(),
                outage_seconds,
                "the destination takes writes but some held messages keep failing: they fail on their own and are \
                 settled as usual (NAKed with backoff, dead-lettered on their last delivery); fetching resumes"
            ),
        }
        *s = State::default();
        self.metrics.set(GaugeId::DestinationOutage, 0.0);
        self.metrics.status().set_outage_paused(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::error::SinkError;
    use sinks_contract::testing::envelope;

    /// A written batch from `first` on, one outcome per message by letter: `c` committed,
    /// `d` duplicate, `t` temporary failure (reason `t<seq>`), `p` permanent, `g`
    /// configuration error, `h` held back.
    fn written(first: u64, outcomes: &str) -> (Vec<Envelope>, Vec<MessageOutcome>) {
        outcomes
            .chars()
            .zip(first..)
            .map(|(c, seq)| {
                let outcome = match c {
                    'c' => MessageOutcome::Committed,
                    'd' => MessageOutcome::Duplicate,
                    't' => MessageOutcome::Failed(SinkError::temporary(format!("t{seq}"))),
                    'p' => MessageOutcome::Failed(SinkError::permanent(format!("p{seq}"))),
                    'g' => MessageOutcome::Failed(SinkError::config(format!("g{seq}"))),
                    'h' => MessageOutcome::HeldBack,
                    other => panic!("{other}"),
                };
                (envelope("S", seq, "s.a", "{}"), outcome)
            })
            .unzip()
    }

    fn failures(batches: u64, messages: u64, seqs: (u64, u64), class: ErrorClass, reason: &str) -> Failures {
        Failures {
            batches,
            messages,
            first_sequence: seqs.0,
            last_sequence: seqs.1,
            class: Some(class),
            reason: reason.into(),
        }
    }

    #[test]
    fn failures_of_a_batch_and_of_a_window() {
        let (e, o) = written(10, "ctcpt");
        let f = Failures::of(&e, &o);
        assert_eq!(f, failures(1, 3, (11, 14), ErrorClass::Temporary, "t11"), "the first failure is reported");
        assert_eq!(Failures::of(&e[..1], &o[..1]), Failures::default(), "nothing failed: no batch counted");
        let mut window = Failures::default();
        window.add(f);
        let (e, o) = written(5, "gc");
        window.add(Failures::of(&e, &o));
        assert_eq!(window, failures(2, 4, (5, 14), ErrorClass::Config, "g5"), "counts add up, the latest reason wins");
        assert_eq!(window.class_name(), "config");
        window.add(Failures::default());
        assert_eq!(window.reason, "g5", "a window without failures keeps the reason");
    }

    #[test]
    fn an_outage_is_logged_when_it_begins_every_interval_and_when_it_ends() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let temporary = ErrorClass::Temporary;
        // (what, seconds after t0, batch (first sequence, outcomes), line)
        type Row = (&'static str, u64, (u64, &'static str), Option<Line>);
        let table: Vec<Row> = vec![
            ("a batch that was written logs nothing", 0, (1, "cc"), None),
            (
                "some failures outside an outage: one line for the batch",
                0,
                (3, "ctp"),
                Some(Line::NotWritten { failures: failures(1, 2, (4, 5), temporary, "t4"), written: 1 }),
            ),
            (
                "every message failed temporarily (or was held back): the outage begins",
                1,
                (6, "tth"),
                Some(Line::Unavailable(failures(1, 2, (6, 7), temporary, "t6"))),
            ),
            ("more failures within the interval: counted, not logged", 5, (9, "t"), None),
            ("a batch of duplicates that still has a temporary failure: still the outage", 8, (10, "dt"), None),
            ("a batch held back entirely: nothing new", 9, (12, "h"), None),
            (
                "the interval has passed: what failed since the outage began",
                11,
                (13, "tt"),
                Some(Line::StillUnavailable {
                    outage_seconds: 10,
                    failures: failures(3, 4, (9, 14), temporary, "t13"),
                }),
            ),
            ("within the next interval: counted", 20, (15, "t"), None),
            (
                "the next interval: only what failed since the last line",
                21,
                (16, "t"),
                Some(Line::StillUnavailable {
                    outage_seconds: 20,
                    failures: failures(2, 2, (15, 16), temporary, "t16"),
                }),
            ),
            (
                "a durable batch without a temporary failure ends it, with totals",
                25,
                (17, "cp"),
                Some(Line::Recovered { outage_seconds: 24, failed_batches: 6, failed_messages: 8 }),
            ),
            (
                "after the outage, a partial failure is a batch line again",
                26,
                (19, "tc"),
                Some(Line::NotWritten { failures: failures(1, 1, (19, 19), temporary, "t19"), written: 1 }),
            ),
            (
                "a configuration error begins an outage too",
                27,
                (21, "g"),
                Some(Line::Unavailable(failures(1, 1, (21, 21), ErrorClass::Config, "g21"))),
            ),
        ];
        let mut outage = Outage::default();
        for (what, at, (first, outcomes), want) in table {
            let (e, o) = written(first, outcomes);
            assert_eq!(outage.observe(&e, &o, t0 + s(at)), want, "{what}");
        }
    }

    #[test]
    fn a_permanent_failure_alone_is_not_an_outage() {
        let t0 = Instant::now();
        let mut outage = Outage::default();
        let (e, o) = written(1, "p");
        let line = outage.observe(&e, &o, t0);
        assert!(matches!(line, Some(Line::NotWritten { written: 0, .. })), "{line:?}");
        let (e, o) = written(2, "c");
        assert_eq!(outage.observe(&e, &o, t0), None, "no outage to recover from");
    }
}
