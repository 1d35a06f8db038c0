//! The stream guard: the background task that watches the stream and the consumer under the
//! runner, and the gate the fetch loop passes before every fetch.
//!
//! Every `metrics.lag_poll_interval_seconds` (every `stream_guard.recheck_seconds` while
//! paused) the task reads the consumer (lag gauges, ack floor) and the stream, then:
//! - checks the stream's identity against its record ([`crate::identity`]): a stream that
//!   was deleted and re-created, or moved back, either starts a new epoch at once
//!   (`stream_guard.on_change = "new_epoch"`) or pauses fetching until the operator decides
//!   (`nats-sink stream-identity CONFIG --accept …`; one error line, the
//!   `stream_identity_paused` gauge, `/readyz` not ready). The epoch in force is handed to
//!   the source, which stamps it on every envelope ([`Envelope::with_stream_epoch`]);
//! - measures how close unsettled messages are to the stream's limits ([`headroom`]) and how
//!   many the stream removed before they were settled, with a warning when a limit is near.
//!
//! The identity is also checked before the first fetch and whenever the fetch loop had to
//! bind the consumer again (it is gone with a deleted stream).
//!
//! [`Envelope::with_stream_epoch`]: sinks_contract::Envelope::with_stream_epoch

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::stream::{self, DiscardPolicy};
use time::OffsetDateTime;
use tokio::sync::watch;

use crate::config::{Config, OnStreamChange};
use crate::identity::{ChangeKind, Decision, Live, Record, Store, Verdict, judge};
use crate::metrics::{CounterId, GaugeId, Metrics};
use crate::setup::SetupError;
use crate::source::GuardState;

/// The guard of one run: the identity record (when `stream_guard.identity` is on and the
/// consumer durable) and the state handed to the fetch loop and the source.
#[derive(Debug)]
pub(crate) struct Guard {
    store: Option<Store>,
    /// Reads the record and never writes it (a temporary consumer of `nats-sink replay`
    /// works in the production consumer's epoch and refuses to run when it is undecided).
    read_only: bool,
    stream: String,
    consumer: String,
    on_change: OnStreamChange,
    state: watch::Sender<GuardState>,
    metrics: Metrics,
    /// `stream_guard.rewind_confirm_seconds`.
    rewind_confirm: Duration,
    /// Since when the stream has looked moved back, while that is not yet confirmed.
    suspected: std::sync::Mutex<Option<tokio::time::Instant>>,
}

impl Guard {
    /// A guard without a record: never pauses, never scopes keys.
    pub(crate) fn off(config: &Config, metrics: Metrics) -> Self {
        Self {
            store: None,
            read_only: false,
            stream: config.nats.stream.clone(),
            consumer: config.nats.consumer.clone(),
            on_change: config.stream_guard.on_change,
            state: watch::channel(GuardState::default()).0,
            metrics,
            rewind_confirm: Duration::from_secs(config.stream_guard.rewind_confirm_seconds),
            suspected: std::sync::Mutex::new(None),
        }
    }

    /// Binds the identity bucket (see [`Store::open`]) when the section asks for it and the
    /// consumer is durable; else [`Guard::off`].
    pub(crate) async fn open(
        js: &async_nats::jetstream::Context,
        config: &Config,
        replicas: usize,
        metrics: Metrics,
    ) -> Result<Self, SetupError> {
        let mut guard = Self::off(config, metrics);
        if config.stream_guard.identity {
            guard.read_only = !config.nats.durable;
            guard.store = Some(Store::open(js, config, replicas).await?);
        }
        Ok(guard)
    }

    /// The state's receiver (the source reads the epoch, the fetch loop the pause).
    pub(crate) fn watch(&self) -> watch::Receiver<GuardState> {
        self.state.subscribe()
    }

    /// True while fetching is paused.
    pub(crate) fn paused(&self) -> bool {
        self.state.borrow().paused
    }

    /// Checks the live stream against the record and acts: the first record is written, an
    /// unchanged identity takes in the highest sequences, a changed one starts a new epoch or
    /// pauses (see the module docs). Races with other workers are settled by the record's
    /// revision: the loser reads the winner's record and decides on that.
    ///
    /// `live` was read before the record is loaded, so another worker may have recorded a
    /// later reading in between (its last sequence above `live`'s): a change is only judged
    /// on a reading of `stream` and `consumer` taken after the load (the fault harness found
    /// two workers starting together pausing on a stream that had not moved,
    /// docs/reliability.md).
    pub(crate) async fn check(
        &self,
        live: &Live,
        stream: &stream::Stream,
        consumer: &PullConsumer,
    ) -> Result<(), SetupError> {
        let Some(store) = &self.store else { return Ok(()) };
        if self.read_only {
            return self.check_read_only(store, live).await;
        }
        let mut live = *live;
        let mut read_after_load = false;
        for _ in 0..4 {
            let now = OffsetDateTime::now_utc();
            let (mut record, revision) = match store.load().await? {
                Some((record, revision)) => (record, Some(revision)),
                None => (Record::first(&self.stream, &self.consumer, &live, now), None),
            };
            // A change already recorded stands until it is decided: the live stream may look
            // unchanged again meanwhile (a rewound stream grows back past the old last
            // sequence), which proves nothing about the sequences it handed out.
            let mut verdict = match &record.pending {
                Some(pending) => Verdict::Changed(pending.kind),
                None => judge(&record, &live),
            };
            if record.pending.is_none() && verdict != Verdict::Same && !read_after_load {
                live = live_now(stream, consumer).await?;
                read_after_load = true;
                verdict = judge(&record, &live);
            }
            if record.pending.is_none() && !self.confirmed(verdict, &live, &record) {
                return Ok(());
            }
            let live = &live;
            let written = match verdict {
                Verdict::Same => {
                    if revision.is_none() || record.observe(live, now) {
                        store.save(&record, revision).await
                    } else {
                        Ok(0)
                    }
                }
                Verdict::Changed(kind) => {
                    let change = record.pending.clone().unwrap_or_else(|| Record::change(kind, live, now));
                    match self.on_change {
                        OnStreamChange::NewEpoch => {
                            let before = record.describe();
                            let reported = record.pending.is_some();
                            record.decide(&change, Decision::NewEpoch, live, now);
                            let saved = store.save(&record, revision).await;
                            if saved.is_ok() {
                                if !reported {
                                    self.report_change(kind, &before, live);
                                }
                                tracing::warn!(
                                    stream = %self.stream,
                                    consumer = %self.consumer,
                                    epoch = record.epoch.as_deref().unwrap_or("first"),
                                    "stream_guard.on_change is new_epoch: the new stream's keys and names carry its epoch"
                                );
                            }
                            saved
                        }
                        OnStreamChange::Pause if record.pending.is_some() => {
                            if !self.paused() {
                                // Another worker (or an earlier run) recorded it: say so here too.
                                self.report_change(kind, &record.describe(), live);
                            }
                            Ok(0)
                        }
                        OnStreamChange::Pause => {
                            let before = record.describe();
                            record.pending = Some(change);
                            let saved = store.save(&record, revision).await;
                            if saved.is_ok() {
                                self.report_change(kind, &before, live);
                            }
                            saved
                        }
                    }
                }
            };
            match written {
                Ok(_) => {
                    self.publish(&record);
                    return Ok(());
                }
                Err(Ok(_raced)) => continue,
                Err(Err(e)) => return Err(e),
            }
        }
        Err(SetupError::Unavailable("the stream identity record kept changing while it was checked".into()))
    }

    /// Whether `verdict` stands: true for a re-created stream and an unchanged one (which
    /// ends a suspicion), and for a stream that has looked moved back for
    /// `stream_guard.rewind_confirm_seconds`. The first sight of a moved-back stream pauses
    /// fetching without recording anything and says so; a later check past the period
    /// confirms it, an unchanged reading before then resumes fetching.
    fn confirmed(&self, verdict: Verdict, live: &Live, record: &Record) -> bool {
        let mut suspected = self.suspected.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if verdict != Verdict::Changed(ChangeKind::Rewound) || self.rewind_confirm.is_zero() {
            if suspected.take().is_some() {
                tracing::info!(
                    stream = %self.stream,
                    last_sequence = live.last_sequence,
                    "the stream no longer looks moved back (a reading that was behind); fetching resumes"
                );
                self.state.send_modify(|s| s.paused = false);
            }
            return true;
        }
        match *suspected {
            Some(since) if since.elapsed() >= self.rewind_confirm => {
                *suspected = None;
                true
            }
            Some(_) => false,
            None => {
                *suspected = Some(tokio::time::Instant::now());
                tracing::warn!(
                    stream = %self.stream,
                    consumer = %self.consumer,
                    last_sequence = live.last_sequence,
                    recorded_last_sequence = record.last_sequence,
                    confirm_s = self.rewind_confirm.as_secs(),
                    "the stream looks moved back; fetching is paused until it is confirmed or the reading catches up"
                );
                self.state.send_modify(|s| s.paused = true);
                false
            }
        }
    }

    /// The check of a temporary consumer: the production consumer's epoch when its record
    /// names the live stream; a configuration error when the stream changed and nothing was
    /// decided (the record is not this run's to decide).
    async fn check_read_only(&self, store: &Store, live: &Live) -> Result<(), SetupError> {
        let Some((record, _)) = store.load().await? else {
            return Ok(());
        };
        let verdict =
            if record.pending.is_some() { Verdict::Changed(ChangeKind::Recreated) } else { judge(&record, live) };
        if let Verdict::Changed(_) = verdict {
            return Err(crate::config::ConfigError::single(
                "nats.stream",
                format!(
                    "stream `{}` changed under consumer `{}` and no decision was made ({}): run `{} \
                     stream-identity CONFIG` first",
                    self.stream,
                    self.consumer,
                    record.describe(),
                    crate::program::name()
                ),
            )
            .into());
        }
        self.publish(&record);
        Ok(())
    }

    /// The one error line of a change, and its counter.
    fn report_change(&self, kind: ChangeKind, before: &str, live: &Live) {
        self.metrics.inc(CounterId::StreamIdentityChanges, 1);
        let now_is = format!(
            "created {}, sequences {}..={}",
            live.created.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
            live.first_sequence,
            live.last_sequence
        );
        let todo = match self.on_change {
            OnStreamChange::Pause => format!(
                "fetching is paused and nothing is acknowledged: run `{} stream-identity CONFIG --accept new-epoch` \
                 (new events get keys of their own) or `--accept replay` (the same data was restored), or set \
                 stream_guard.on_change = \"new_epoch\"",
                crate::program::name()
            ),
            OnStreamChange::NewEpoch => "a new epoch starts (stream_guard.on_change = \"new_epoch\")".to_owned(),
        };
        tracing::error!(
            stream = %self.stream,
            consumer = %self.consumer,
            change = kind.as_words(),
            was = %before,
            now = %now_is,
            "the stream changed under the consumer: its sequences name earlier events; {todo}"
        );
    }

    /// Hands the record's state to the fetch loop and the source, and the gauge.
    fn publish(&self, record: &Record) {
        let paused = record.pending.is_some();
        let epoch: Option<Arc<str>> = record.epoch.as_deref().map(Arc::from);
        let was_paused = self.state.borrow().paused;
        if was_paused && !paused {
            tracing::info!(
                stream = %self.stream,
                consumer = %self.consumer,
                epoch = record.epoch.as_deref().unwrap_or("first"),
                "the stream's identity was decided; fetching resumes"
            );
        }
        self.metrics.set(GaugeId::StreamIdentityPaused, if paused { 1.0 } else { 0.0 });
        self.metrics.status().set_identity_paused(paused);
        let created = time::OffsetDateTime::parse(&record.created, &time::format_description::well_known::Rfc3339).ok();
        self.state.send_if_modified(|s| {
            let next = GuardState { epoch, paused, created };
            let changed = *s != next;
            *s = next;
            changed
        });
    }

    /// Waits until fetching is not paused; false when a stop came first.
    pub(crate) async fn wait_open(&self, stop: &watch::Receiver<bool>) -> bool {
        let mut state = self.state.subscribe();
        let mut stop = stop.clone();
        tokio::select! {
            result = state.wait_for(|s| !s.paused) => result.is_ok(),
            _ = stop.wait_for(|s| *s) => false,
        }
    }
}

/// The live identity of `stream` now, with `consumer`'s ack floor; unavailable while the
/// answer comes from a replica that knows no leader ([`leader_answered`]).
pub(crate) async fn live_now(stream: &stream::Stream, consumer: &PullConsumer) -> Result<Live, SetupError> {
    let unavailable = |e: &dyn std::fmt::Display| SetupError::Unavailable(e.to_string());
    let info = stream.get_info().await.map_err(|e| unavailable(&e))?;
    let floor = consumer.get_info().await.map_err(|e| unavailable(&e))?.ack_floor.stream_sequence;
    live_of(&info, floor)
        .ok_or_else(|| unavailable(&"the stream has no leader now (a replica answered with its own state)"))
}

/// Whether `info` can tell the stream's identity: a replicated stream's info names its leader.
/// A replica that cannot reach a leader (cut off from the others, or during an election)
/// answers a stream info request with its own state, which can be behind the stream's: its
/// last sequence then looks like a stream that moved back (the fault harness found the guard
/// pausing a sink whose server was cut off, docs/reliability.md). Such an answer is not used
/// to judge the stream; the next poll asks again. Pure.
pub(crate) fn leader_answered(info: &stream::Info) -> bool {
    info.config.num_replicas <= 1
        || info.cluster.as_ref().and_then(|c| c.leader.as_deref()).is_some_and(|leader| !leader.is_empty())
}

/// The live identity of `info`, with the consumer's ack floor; `None` when the answer came
/// from a replica that knows no leader ([`leader_answered`]), which cannot tell the identity.
/// Every reader of the identity goes through here, so none can judge a stream by such an
/// answer. Pure.
pub(crate) fn live_of(info: &stream::Info, ack_floor: u64) -> Option<Live> {
    leader_answered(info).then_some(Live {
        created: info.created,
        first_sequence: info.state.first_sequence,
        last_sequence: info.state.last_sequence,
        ack_floor,
    })
}

/// How much of each stream limit that removes messages the unsettled ones use: `None` for a
/// limit the stream does not have (or, for counts and bytes, one that discards new messages
/// instead of old ones).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Headroom {
    /// The oldest unsettled message's age, seconds.
    pub(crate) oldest_age: Option<f64>,
    /// `oldest_age / max_age`.
    pub(crate) age: Option<f64>,
    /// Unsettled messages over `max_msgs`.
    pub(crate) msgs: Option<f64>,
    /// Their estimated bytes over `max_bytes`.
    pub(crate) bytes: Option<f64>,
}

/// The headroom of the stream `info` for a consumer whose ack floor is `ack_floor` and whose
/// oldest unsettled message was stored at `oldest` (when there is one). Unsettled messages
/// are those after the ack floor still in the stream; their bytes are estimated from the
/// stream's average message size. Pure.
pub(crate) fn headroom(
    info: &stream::Info,
    ack_floor: u64,
    oldest: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> Headroom {
    let state = &info.state;
    let config = &info.config;
    let from = ack_floor.saturating_add(1).max(state.first_sequence);
    let unsettled = if state.messages == 0 || from > state.last_sequence {
        0
    } else {
        (state.last_sequence - from + 1).min(state.messages)
    };
    let oldest_age = oldest.filter(|_| unsettled > 0).map(|t| ((now - t).as_seconds_f64()).max(0.0));
    let discard_old = config.discard == DiscardPolicy::Old;
    let age = (!config.max_age.is_zero()).then(|| oldest_age.unwrap_or(0.0) / config.max_age.as_secs_f64());
    let msgs = (discard_old && config.max_messages > 0).then(|| unsettled as f64 / config.max_messages as f64);
    let bytes = (discard_old && config.max_bytes > 0).then(|| {
        let average = if state.messages == 0 { 0.0 } else { state.bytes as f64 / state.messages as f64 };
        unsettled as f64 * average / config.max_bytes as f64
    });
    Headroom { oldest_age, age, msgs, bytes }
}

/// Messages the stream removed before the consumer settled them, since the last poll:
/// sequences after the ack floor and below the stream's first sequence, not counted before
/// (`counted_through` is the highest sequence counted so far). The ack floor is the one of
/// the previous poll: nats-server moves a consumer's ack floor up to the stream's first
/// sequence when it removes messages, so the current floor hides them. Exact while the
/// consumer settles nothing (a destination outage, the case that loses messages); an upper
/// bound otherwise, as acks sent between two polls are not subtracted. Pure.
pub(crate) fn removed_unsettled(first_sequence: u64, ack_floor: u64, counted_through: u64) -> (u64, u64) {
    let gone_through = first_sequence.saturating_sub(1);
    let from = ack_floor.max(counted_through);
    if gone_through > from { (gone_through - from, gone_through) } else { (0, counted_through.max(ack_floor)) }
}

/// The background task: lag gauges, the identity check and the headroom, every
/// `metrics.lag_poll_interval_seconds` (`stream_guard.recheck_seconds` while paused), until
/// a stop is requested. A failed poll keeps the last values and tries again next time.
pub(crate) async fn watch_stream(
    guard: Arc<Guard>,
    consumer: Arc<std::sync::RwLock<PullConsumer>>,
    mut stream: stream::Stream,
    metrics: Metrics,
    config: Config,
    mut stop: watch::Receiver<bool>,
) {
    let every = Duration::from_secs(config.metrics.lag_poll_interval_seconds);
    let recheck = Duration::from_secs(config.stream_guard.recheck_seconds);
    let warn_at = config.stream_guard.retention_warning_ratio;
    let mut warned = false;
    let mut counted_through = 0u64;
    let mut previous_floor: Option<u64> = None;
    let mut reminded = tokio::time::Instant::now();
    loop {
        let mut current = consumer.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let ack_floor = match tokio::time::timeout(Duration::from_secs(5), current.info()).await {
            Ok(Ok(info)) => {
                let (pending, ack_pending) = (info.num_pending, info.num_ack_pending as u64);
                metrics.status().set_lag(pending, ack_pending);
                metrics.set(GaugeId::ConsumerNumPending, pending as f64);
                metrics.set(GaugeId::ConsumerNumAckPending, ack_pending as f64);
                Some(info.ack_floor.stream_sequence)
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "consumer info poll failed");
                None
            }
            Err(_) => {
                tracing::debug!("consumer info poll timed out");
                None
            }
        };
        if let Some(ack_floor) = ack_floor {
            match tokio::time::timeout(Duration::from_secs(5), stream.info()).await {
                Ok(Ok(info)) => match live_of(info, ack_floor) {
                    None => tracing::debug!(
                        "stream info came from a replica that knows no leader; the identity is checked at the next poll"
                    ),
                    Some(live) => {
                        let info = info.clone();
                        if let Err(e) = guard.check(&live, &stream, &current).await {
                            tracing::warn!(error = %e, "checking the stream's identity failed; trying again at the next poll");
                        }
                        let oldest = oldest_unsettled(&stream, &info, ack_floor).await;
                        let room = headroom(&info, ack_floor, oldest, OffsetDateTime::now_utc());
                        warned = record_headroom(&metrics, &config.nats.stream, &room, warn_at, warned);
                        let floor = previous_floor.unwrap_or(ack_floor).min(ack_floor);
                        previous_floor = Some(ack_floor);
                        let (removed, through) = removed_unsettled(info.state.first_sequence, floor, counted_through);
                        counted_through = through;
                        if removed > 0 {
                            metrics.inc(CounterId::StreamMessagesRemovedUnsettled, removed);
                            tracing::warn!(
                                stream = %config.nats.stream,
                                removed,
                                first_sequence = info.state.first_sequence,
                                ack_floor,
                                "the stream removed messages this consumer had not settled (its limits or a purge): \
                                 they are gone from the stream; `reconcile` shows them as gone"
                            );
                        }
                    }
                },
                Ok(Err(e)) => tracing::debug!(error = %e, "stream info poll failed"),
                Err(_) => tracing::debug!("stream info poll timed out"),
            }
        }
        let paused = guard.paused();
        if paused {
            // Waiting for a decision is progress, not a wedged loop.
            metrics.status().progress();
            if reminded.elapsed() >= Duration::from_secs(300) {
                reminded = tokio::time::Instant::now();
                tracing::warn!(
                    stream = %config.nats.stream,
                    "still paused: the stream's identity changed and no decision was made (the stream-identity command)"
                );
            }
        }
        tokio::select! {
            () = tokio::time::sleep(if paused { recheck } else { every }) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// When the oldest message after the ack floor was stored: the stream's first timestamp when
/// that is the first message, else read from the stream (`None` when nothing is unsettled,
/// the stream has no age limit, or the read failed).
async fn oldest_unsettled(stream: &stream::Stream, info: &stream::Info, ack_floor: u64) -> Option<OffsetDateTime> {
    let next = ack_floor.saturating_add(1);
    if info.config.max_age.is_zero() || info.state.messages == 0 || next > info.state.last_sequence {
        return None;
    }
    if next <= info.state.first_sequence {
        return Some(info.state.first_timestamp);
    }
    match tokio::time::timeout(Duration::from_secs(5), stream.get_raw_message(next)).await {
        Ok(Ok(message)) => Some(message.time),
        _ => None,
    }
}

/// Sets the headroom gauges and warns once when a limit passes `warn_at` (and once when all
/// are back below it). Returns whether a warning is standing.
fn record_headroom(metrics: &Metrics, stream: &str, room: &Headroom, warn_at: f64, warned: bool) -> bool {
    metrics.set(GaugeId::StreamOldestUnsettledAgeSeconds, room.oldest_age.unwrap_or(0.0));
    metrics.set(GaugeId::StreamRetentionAgeUsedRatio, room.age.unwrap_or(0.0));
    metrics.set(GaugeId::StreamRetentionMsgsUsedRatio, room.msgs.unwrap_or(0.0));
    metrics.set(GaugeId::StreamRetentionBytesUsedRatio, room.bytes.unwrap_or(0.0));
    let near: Vec<String> = [("max_age", room.age), ("max_msgs", room.msgs), ("max_bytes", room.bytes)]
        .into_iter()
        .filter_map(|(limit, used)| used.filter(|u| *u >= warn_at).map(|u| format!("{limit} {:.0} %", u * 100.0)))
        .collect();
    match (near.is_empty(), warned) {
        (false, false) => {
            tracing::warn!(
                stream,
                used = %near.join(", "),
                oldest_unsettled_age_s = room.oldest_age.unwrap_or(0.0).round(),
                "unsettled messages come close to the stream's limits: they are removed unsettled when a limit is \
                 reached; speed the sink up, add workers, or raise the limit"
            );
            true
        }
        (true, true) => {
            tracing::info!(stream, "unsettled messages are back below the stream's limits");
            false
        }
        _ => warned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(messages: u64, first: u64, last: u64, bytes: u64, tweak: impl FnOnce(&mut stream::Config)) -> stream::Info {
        let mut value = serde_json::json!({
            "config": {"name": "S", "subjects": ["s.>"], "retention": "limits", "max_consumers": -1, "max_msgs": -1,
                       "max_bytes": -1, "max_age": 0, "max_msgs_per_subject": -1, "max_msg_size": -1, "discard": "old",
                       "storage": "file", "num_replicas": 1, "duplicate_window": 120000000000_u64},
            "created": "2026-12-04T10:00:00Z",
            "state": {"messages": messages, "bytes": bytes, "first_seq": first, "first_ts": "2026-12-04T10:00:00Z",
                      "last_seq": last, "last_ts": "2026-12-04T11:00:00Z", "consumer_count": 1},
        });
        let mut parsed: stream::Info = serde_json::from_value(value.take()).unwrap();
        tweak(&mut parsed.config);
        parsed
    }

    fn at(unix: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(unix).unwrap()
    }

    #[test]
    fn headroom_by_limit() {
        let now = at(1_000);
        let none = headroom(&info(100, 1, 100, 10_000, |_| {}), 50, Some(at(900)), now);
        assert_eq!((none.age, none.msgs, none.bytes), (None, None, None), "no limits, nothing to use up");
        assert_eq!(none.oldest_age, Some(100.0));
        let limited = |c: &mut stream::Config| {
            c.max_age = Duration::from_secs(200);
            c.max_messages = 100;
            c.max_bytes = 20_000;
        };
        // 50 unsettled of 100 messages (100 bytes each), the oldest 100 s old.
        let half = headroom(&info(100, 1, 100, 10_000, limited), 50, Some(at(900)), now);
        assert_eq!((half.age, half.msgs, half.bytes), (Some(0.5), Some(0.5), Some(0.25)));
        // Everything settled: nothing is at risk whatever its age.
        let done = headroom(&info(100, 1, 100, 10_000, limited), 100, Some(at(0)), now);
        assert_eq!((done.age, done.msgs, done.oldest_age), (Some(0.0), Some(0.0), None));
        // An ack floor below the first sequence counts only what is still in the stream.
        let behind = headroom(&info(10, 91, 100, 1_000, limited), 20, Some(at(990)), now);
        assert_eq!(behind.msgs, Some(0.1));
        // Discard new: counts and bytes never remove unsettled messages; age still does.
        let discard_new = headroom(
            &info(100, 1, 100, 10_000, |c| {
                limited(c);
                c.discard = DiscardPolicy::New;
            }),
            50,
            Some(at(900)),
            now,
        );
        assert_eq!((discard_new.age, discard_new.msgs, discard_new.bytes), (Some(0.5), None, None));
    }

    #[test]
    fn only_an_answer_naming_the_leader_tells_a_replicated_streams_identity() {
        let single = info(10, 1, 10, 100, |_| {});
        assert!(leader_answered(&single), "a stream of one replica has no election to wait for");
        let mut replicated = info(10, 1, 10, 100, |c| c.num_replicas = 3);
        assert!(!leader_answered(&replicated), "no cluster info: a replica's own view");
        assert_eq!(live_of(&replicated, 5), None, "a replica's own view tells no identity");
        replicated.cluster = Some(stream::ClusterInfo { leader: Some(String::new()), ..Default::default() });
        assert!(!leader_answered(&replicated), "an empty leader: none known");
        assert_eq!(live_of(&replicated, 5), None);
        replicated.cluster = Some(stream::ClusterInfo { leader: Some("n1".into()), ..Default::default() });
        assert!(leader_answered(&replicated));
        let live = live_of(&replicated, 5).expect("the leader's answer tells the identity");
        assert_eq!((live.last_sequence, live.ack_floor), (replicated.state.last_sequence, 5));
        assert_eq!(live_of(&single, 7).map(|l| l.ack_floor), Some(7));
    }

    /// Two workers of one consumer, against a private server: the second records a reading
    /// taken after the first one's; the first then checks its older reading. Its last
    /// sequence is below the record's, yet the stream did not move: no change, no pause.
    /// Then readings that stay behind the record (as a lagging or cut-off leader's do): a
    /// pause at once, a change only once `rewind_confirm_seconds` have passed.
    #[tokio::test]
    async fn a_reading_older_than_another_workers_record_is_no_change() {
        let server = sinks_testkit::NatsServer::start();
        let js = server.js().await;
        let name = sinks_testkit::unique("GUARDRACE");
        let subject = format!("{}.events", name.to_lowercase());
        let stream = sinks_testkit::stream_with_subjects(&js, &name, &[&subject]).await;
        let consumer = sinks_testkit::durable_pull_consumer(&stream, "sink").await;
        let config = Config::from_value(serde_json::json!({
            "nats": {"url": server.url(), "stream": name, "consumer": "sink", "subject": subject},
            "stream_guard": {"bucket": sinks_testkit::unique("guard"), "rewind_confirm_seconds": 1},
            "sink": {"type": "memory"},
        }))
        .unwrap();
        let metrics = || Metrics::new(&config.metrics);
        let (first, second) = (
            Guard::open(&js, &config, 1, metrics()).await.unwrap(),
            Guard::open(&js, &config, 1, metrics()).await.unwrap(),
        );
        let publish = |n: usize| {
            let (js, subject) = (js.clone(), subject.clone());
            async move {
                for i in 0..n {
                    js.publish(subject.clone(), format!("event {i}").into()).await.unwrap().await.unwrap();
                }
            }
        };
        publish(3).await;
        let older = live_now(&stream, &consumer).await.unwrap();
        publish(3).await;
        let newer = live_now(&stream, &consumer).await.unwrap();
        assert!(older.last_sequence < newer.last_sequence);
        second.check(&newer, &stream, &consumer).await.unwrap();
        first.check(&older, &stream, &consumer).await.unwrap();
        assert!(!first.paused(), "a reading older than the record was judged a stream that moved back");
        assert!(!second.paused());

        // A reading that stays behind the record: paused at once, nothing recorded; caught up
        // before `rewind_confirm_seconds`, fetching resumes; still behind after it, a change.
        let ahead = |by: u64| Live { last_sequence: newer.last_sequence + by, ..newer };
        second.check(&ahead(5), &stream, &consumer).await.unwrap();
        first.check(&newer, &stream, &consumer).await.unwrap();
        assert!(first.paused(), "a stream that looks moved back must pause fetching at once");
        let pending = || async { first.store.as_ref().unwrap().load().await.unwrap().unwrap().0.pending };
        assert_eq!(pending().await, None, "a suspicion is not recorded");
        publish(5).await;
        let caught_up = live_now(&stream, &consumer).await.unwrap();
        first.check(&caught_up, &stream, &consumer).await.unwrap();
        assert!(!first.paused(), "a reading that caught up must resume fetching");
        second.check(&ahead(50), &stream, &consumer).await.unwrap();
        first.check(&caught_up, &stream, &consumer).await.unwrap();
        assert!(first.paused());
        assert_eq!(pending().await, None);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        first.check(&caught_up, &stream, &consumer).await.unwrap();
        assert!(first.paused());
        assert_eq!(pending().await.map(|c| c.kind), Some(ChangeKind::Rewound), "confirmed after the period");
    }

    #[test]
    fn removed_before_settled_is_counted_once() {
        // (first sequence, ack floor, counted through) → (removed now, counted through after)
        let rows = [
            ((1, 0, 0), (0, 0)),
            ((11, 10, 0), (0, 10)),
            ((21, 10, 10), (10, 20)),
            ((21, 10, 20), (0, 20)),
            ((31, 25, 20), (5, 30)),
            ((5, 40, 30), (0, 40)),
        ];
        for ((first, floor, through), want) in rows {
            assert_eq!(removed_unsettled(first, floor, through), want, "first {first} floor {floor} through {through}");
        }
    }
}
