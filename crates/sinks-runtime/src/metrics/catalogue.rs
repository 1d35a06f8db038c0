//! The metric catalogue: every metric's name (without the namespace prefix), meaning and
//! origin, as three closed enums (counters, gauges, timings) plus the two labelled
//! families. The registry is built from these lists, and `docs/observability.md` is
//! generated from the registry, so the documentation cannot drift from the code.
//!
//! Counter names here have no `_total` suffix: the exposition formats add it (so
//! `messages_fetched` is exported as `nats_sinks_messages_fetched_total`, the reference's
//! name).

/// Where a metric's name and meaning come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The reference's catalogue (nats-sinks 0.4.3), same name and meaning.
    Reference,
    /// Added by this build.
    Extension,
}

impl Origin {
    /// `reference` or `extension`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reference => "reference",
            Self::Extension => "extension",
        }
    }
}

macro_rules! catalogue {
    ($(#[$doc:meta])* $enum:ident { $($variant:ident => ($name:literal, $origin:ident, $help:literal)),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[allow(missing_docs)]
        pub enum $enum { $($variant),* }

        impl $enum {
            /// Every metric of this kind, in catalogue order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];

            /// The name without namespace (and, for counters, without `_total`).
            pub fn name(self) -> &'static str {
                match self { $(Self::$variant => $name),* }
            }

            /// What it measures.
            pub fn help(self) -> &'static str {
                match self { $(Self::$variant => $help),* }
            }

            /// Whether the reference has it.
            pub fn origin(self) -> Origin {
                match self { $(Self::$variant => Origin::$origin),* }
            }

            /// Position in [`Self::ALL`].
            pub(crate) fn index(self) -> usize {
                self as usize
            }
        }
    };
}

catalogue! {
    /// Unlabelled counters.
    CounterId {
        MessagesFetched => ("messages_fetched", Reference, "JetStream messages fetched by the pull consumer"),
        MessagesPrepared => ("messages_prepared", Reference, "Messages that passed the policy steps and were handed to the sink"),
        MessagesWritten => ("messages_written", Reference, "Messages the sink reported durable (committed, duplicate, or a conflict that kept or replaced a version)"),
        MessagesAcked => ("messages_acked", Reference, "Messages acknowledged to JetStream after a durable outcome or a stored dead-letter record"),
        MessagesTerminated => ("messages_terminated", Reference, "Messages terminally acknowledged (AckTerm) after a stored dead-letter record"),
        MessagesNacked => ("messages_nacked", Reference, "Messages negatively acknowledged for redelivery after a failure"),
        MessagesFailed => ("messages_failed", Reference, "Messages whose write or policy step failed, before their settlement"),
        MessagesDlq => ("messages_dlq", Reference, "Dead-letter records stored (acknowledged by their stream)"),
        BatchesFetched => ("batches_fetched", Reference, "Non-empty batches fetched from JetStream"),
        SinkBatchesWritten => ("sink_batches_written", Reference, "Batch writes in which the sink made at least one message durable"),
        SinkWriteErrors => ("sink_write_errors", Reference, "Messages the sink failed to write, of any error class"),
        DlqPublishErrors => ("dlq_publish_errors", Reference, "Dead-letter publishes that failed (the original is NAKed, never acked)"),
        AckErrors => ("ack_errors", Reference, "Ack or NAK sends that failed (the message will be redelivered)"),
        TermErrors => ("term_errors", Reference, "AckTerm sends that failed after a stored dead-letter record"),
        AckConfirmationAttempts => ("ack_confirmation_attempts", Reference, "Acks sent with delivery.ack_confirmation, waiting for the server's reply"),
        AckConfirmationSuccesses => ("ack_confirmation_successes", Reference, "Acks the server confirmed"),
        AckConfirmationTimeouts => ("ack_confirmation_timeouts", Reference, "Ack confirmations that timed out"),
        AckConfirmationFailures => ("ack_confirmation_failures", Reference, "Ack confirmations that failed for another reason"),
        InProgressAttempts => ("in_progress_attempts", Reference, "In-progress heartbeat rounds sent for batches still being written"),
        InProgressSuccesses => ("in_progress_successes", Reference, "In-progress heartbeats handed to the client (not a sink success)"),
        InProgressFailures => ("in_progress_failures", Reference, "In-progress heartbeats that could not be sent"),
        InProgressMaxHeartbeatsReached => ("in_progress_max_heartbeats_reached", Reference, "Batches that reached delivery.in_progress.max_heartbeats"),
        NatsConnectionDisconnected => ("nats_connection_disconnected", Reference, "NATS connection losses"),
        NatsConnectionReconnected => ("nats_connection_reconnected", Reference, "NATS reconnections after a loss"),
        NatsConnectionClosed => ("nats_connection_closed", Reference, "NATS connections closed"),
        NatsAsyncErrors => ("nats_async_errors", Reference, "Asynchronous NATS client and server errors reported on the connection"),
        JetstreamAdvisoriesReceived => ("jetstream_advisories_received", Reference, "JetStream advisories received on a configured subject"),
        JetstreamAdvisoriesFiltered => ("jetstream_advisories_filtered", Reference, "JetStream advisories ignored because their subject matched no configured pattern"),
        JetstreamAdvisoryParseErrors => ("jetstream_advisory_parse_errors", Reference, "JetStream advisories refused by strict parsing (size, UTF-8, JSON)"),
        JetstreamAdvisoryUnsupported => ("jetstream_advisory_unsupported", Reference, "JetStream advisories of a kind not counted separately"),
        JetstreamAdvisoryMaxDeliver => ("jetstream_advisory_max_deliver", Reference, "Max-deliver advisories: a message reached the consumer's max_deliver"),
        JetstreamAdvisoryNak => ("jetstream_advisory_nak", Reference, "NAK advisories"),
        JetstreamAdvisoryTerminated => ("jetstream_advisory_terminated", Reference, "Terminated (AckTerm) advisories"),
        JetstreamAdvisoryStreamQuorumLost => ("jetstream_advisory_stream_quorum_lost", Reference, "Stream quorum-lost advisories"),
        JetstreamAdvisoryConsumerQuorumLost => ("jetstream_advisory_consumer_quorum_lost", Reference, "Consumer quorum-lost advisories"),
        JetstreamAdvisoryStreamLeaderElected => ("jetstream_advisory_stream_leader_elected", Reference, "Stream leader-election advisories"),
        JetstreamAdvisoryConsumerLeaderElected => ("jetstream_advisory_consumer_leader_elected", Reference, "Consumer leader-election advisories"),
        JetstreamAdvisoryStreamAction => ("jetstream_advisory_stream_action", Reference, "Stream created, deleted or modified advisories"),
        JetstreamAdvisoryConsumerAction => ("jetstream_advisory_consumer_action", Reference, "Consumer created, deleted or modified advisories"),
        JetstreamAdvisoryApiAudit => ("jetstream_advisory_api_audit", Reference, "JetStream API audit advisories"),
        PolicyMessagesPassed => ("policy_messages_passed", Reference, "Messages accepted by the pre-sink policy"),
        PolicyMessagesRejected => ("policy_messages_rejected", Reference, "Messages refused by the pre-sink policy"),
        PolicyBatchesPassed => ("policy_batches_passed", Reference, "Batches with at least one message accepted by the pre-sink policy"),
        PolicyBatchesRejected => ("policy_batches_rejected", Reference, "Batches with at least one message refused by the pre-sink policy"),
        MessageAuthenticityMessagesPassed => ("message_authenticity_messages_passed", Reference, "Messages whose signature verified"),
        MessageAuthenticityMessagesRejected => ("message_authenticity_messages_rejected", Reference, "Messages refused by message authenticity"),
        MessageAuthenticityBatchesPassed => ("message_authenticity_batches_passed", Reference, "Batches with at least one message whose signature verified"),
        MessageAuthenticityBatchesRejected => ("message_authenticity_batches_rejected", Reference, "Batches with at least one message refused by message authenticity"),
        SizePolicyMessagesPassed => ("size_policy_messages_passed", Reference, "Messages within the size policy"),
        SizePolicyMessagesRejected => ("size_policy_messages_rejected", Reference, "Messages refused by the size policy"),
        SizePolicyBatchesPassed => ("size_policy_batches_passed", Reference, "Batches with at least one message within the size policy"),
        SizePolicyBatchesRejected => ("size_policy_batches_rejected", Reference, "Batches with at least one message refused by the size policy"),
        EventsStaleAtReceive => ("events_stale_at_receive", Reference, "Events at least metrics.event_stale_after_seconds old when received"),
        EventsStaleAtStore => ("events_stale_at_store", Reference, "Events at least metrics.event_stale_after_seconds old when the sink made them durable"),
        EventCreationTimestampMissing => ("event_creation_timestamp_missing", Reference, "Durable messages with neither a Nats-Time-Stamp header nor a JetStream timestamp"),
        EventCreationTimestampMalformed => ("event_creation_timestamp_malformed", Reference, "Durable messages whose Nats-Time-Stamp header is not RFC 3339 (the JetStream timestamp is used)"),
        EventCreationTimestampFuture => ("event_creation_timestamp_future", Reference, "Durable messages created more than metrics.event_future_skew_tolerance_seconds after they were received"),
        MessagesHeldBack => ("messages_held_back", Extension, "Messages held back behind a temporary failure of their ordering key (not failures of their own)"),
        MessagesLeftUnacked => ("messages_left_unacked", Extension, "Messages left for AckWait to redeliver (temporary_failure_action = ack_wait)"),
        FetchErrors => ("fetch_errors", Extension, "Fetches from JetStream that failed (retried with backoff)"),
        RetriesInPlace => ("retries_in_place", Extension, "Requests a sink retried inside one write (HTTP, S3, NoSQL, Coherence), before reporting an outcome"),
        MessagesRescued => ("messages_rescued", Extension, "Messages the server stopped redelivering (max_deliver exhausted) that the rescue made durable (committed or found already stored)"),
        MessagesRescuedDeadLettered => ("messages_rescued_dead_lettered", Extension, "Messages the server stopped redelivering whose last chance failed, dead-lettered with reason max_deliver_exhausted"),
        MessagesRescueGone => ("messages_rescue_gone", Extension, "Exhausted messages the stream no longer held when the rescue came (retention or deletion)"),
        RescueFailures => ("rescue_failures", Extension, "Rescue attempts that could neither make a message durable nor dead-letter it (retried later)"),
        TelemetryExportErrors => ("telemetry_export_errors", Extension, "OTLP exports (metrics or traces) that failed; no delivery waits on them"),
        DestinationOutagePausedSeconds => ("destination_outage_paused_seconds", Extension, "Seconds fetching was paused while the runner held messages through a destination outage (delivery.outage_hold_seconds)"),
        MessagesReleasedAfterOutageHold => ("messages_released_after_outage_hold", Extension, "Held messages released (NAKed with backoff) because the destination outage outlasted delivery.outage_hold_seconds"),
        DestinationHeldSeconds => ("destination_held_seconds", Extension, "Seconds during which the runner held at least one batch (heartbeated, no delivery used) because the destination was down or throttling"),
        DestinationThrottledSeconds => ("destination_throttled_seconds", Extension, "Seconds during which the runner held messages the destination throttled (HTTP 429, S3 SlowDown, too many connections) until its Retry-After"),
        MessagesThrottled => ("messages_throttled", Extension, "Writes of a message the destination throttled (each answer counted; the message is held and written again, never redelivered for it)"),
        RateLimitWait => ("rate_limit_wait_seconds", Extension, "Seconds writes waited for sink.rate_limit (messages or bytes per second) before they were sent"),
        StreamIdentityChanges => ("stream_identity_changes", Extension, "Changes of the consumed stream's identity found by this process: deleted and re-created, or moved back below the highest sequence seen (stream_guard)"),
        StreamMessagesRemovedUnsettled => ("stream_messages_removed_unsettled", Extension, "Messages the stream removed (limits, purge) before this consumer settled them, as far as the consumer's ack floor tells"),
    }
}

catalogue! {
    /// Unlabelled gauges.
    GaugeId {
        CurrentBatchMessages => ("current_batch_messages", Reference, "Messages in the batch fetched last"),
        LastSinkSuccessEpochSeconds => ("last_sink_success_epoch_seconds", Reference, "Unix time of the latest ack after a durable outcome"),
        CurrentInProgressBatchesActive => ("current_in_progress_batches_active", Reference, "Batches kept alive by in-progress heartbeats right now"),
        BatchesInFlight => ("batches_in_flight", Extension, "Batches fetched and not yet settled"),
        HeldBackMessages => ("held_back_messages", Extension, "Messages held back right now, waiting for an earlier message of their ordering key"),
        PendingMessages => ("pending_messages", Extension, "Messages a holding sink took into objects not committed yet (batch mode), kept unacknowledged and heartbeated by the runner"),
        ConsumerNumPending => ("consumer_num_pending", Extension, "Messages in the stream not yet delivered to the consumer (polled every metrics.lag_poll_interval_seconds)"),
        ConsumerNumAckPending => ("consumer_num_ack_pending", Extension, "Messages delivered and not yet acknowledged (polled every metrics.lag_poll_interval_seconds)"),
        NatsConnected => ("nats_connected", Extension, "1 while the NATS connection is up"),
        Ready => ("ready", Extension, "1 while /readyz answers 200: connected, consumer bound, sink opened and healthy"),
        DestinationOutage => ("destination_outage", Extension, "1 while the runner holds messages through a destination outage (fetching paused, held messages heartbeated, the destination probed)"),
        OutageHeldMessages => ("outage_held_messages", Extension, "Messages held unacknowledged through a destination outage right now"),
        StreamIdentityPaused => ("stream_identity_paused", Extension, "1 while fetching is paused because the stream's identity changed and no decision was made (stream_guard.on_change, nats-sink stream-identity)"),
        StreamOldestUnsettledAgeSeconds => ("stream_oldest_unsettled_age_seconds", Extension, "Age of the oldest message in the stream this consumer has not settled (polled every metrics.lag_poll_interval_seconds)"),
        StreamRetentionAgeUsedRatio => ("stream_retention_age_used_ratio", Extension, "The oldest unsettled message's age over the stream's max_age (1: it is about to be removed unsettled; 0 without the limit)"),
        StreamRetentionMsgsUsedRatio => ("stream_retention_msgs_used_ratio", Extension, "Unsettled messages over the stream's max_msgs with discard old (0 without the limit)"),
        StreamRetentionBytesUsedRatio => ("stream_retention_bytes_used_ratio", Extension, "Estimated bytes of unsettled messages over the stream's max_bytes with discard old (0 without the limit)"),
    }
}

catalogue! {
    /// Histograms (seconds).
    TimingId {
        NatsFetchSeconds => ("nats_fetch_seconds", Reference, "Seconds one fetch from JetStream took (empty fetches wait up to delivery.batch_timeout_ms)"),
        SinkBatchWriteSeconds => ("sink_batch_write_seconds", Reference, "Seconds one batch write took, retries in place and bisection included"),
        MessageAckSeconds => ("message_ack_seconds", Reference, "Seconds the settlements of one batch took to send"),
        MessageTermSeconds => ("message_term_seconds", Reference, "Seconds one AckTerm took to send"),
        AckConfirmationSeconds => ("ack_confirmation_seconds", Reference, "Seconds until the server confirmed an ack"),
        InProgressHeartbeatSeconds => ("in_progress_heartbeat_seconds", Reference, "Seconds one in-progress heartbeat round took"),
        RetryBackoffDelaySeconds => ("retry_backoff_delay_seconds", Reference, "Redelivery delays chosen for NAKed messages"),
        EventAgeAtReceiveSeconds => ("event_age_at_receive_seconds", Reference, "Event age when received: receive time minus creation time (Nats-Time-Stamp, else the JetStream timestamp)"),
        EventAgeAtStoreSeconds => ("event_age_at_store_seconds", Reference, "Event age when the sink made it durable"),
        EventSourceClockSkewSeconds => ("event_source_clock_skew_seconds", Reference, "How far in the future creation timestamps were, for messages created after they were received"),
        EndToEndLatencySeconds => ("end_to_end_latency_seconds", Extension, "Seconds from the JetStream timestamp to the ack, for messages acked after a durable outcome"),
    }
}

/// The labelled families (extension): bounded label sets only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FamilyId {
    /// Outcomes by class and sink (later: target).
    Outcomes,
    /// DLQ records by reason.
    DlqRecords,
}

impl FamilyId {
    /// Every family.
    pub const ALL: &'static [Self] = &[Self::Outcomes, Self::DlqRecords];

    /// The name without namespace and `_total`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Outcomes => "outcomes",
            Self::DlqRecords => "dlq_records",
        }
    }

    /// What it counts.
    pub fn help(self) -> &'static str {
        match self {
            Self::Outcomes => "Messages by the outcome the sink reported and the sink that reported it",
            Self::DlqRecords => "Dead-letter records stored, by reason",
        }
    }

    /// Its labels and their values.
    pub fn labels(self) -> &'static str {
        match self {
            Self::Outcomes => {
                "`class` (committed, duplicate, conflict, failed_temporary, failed_permanent, held_back, pending), `sink` (the sink's name)"
            }
            Self::DlqRecords => {
                "`reason` (a policy reason code such as signature_invalid, or sink_permanent, retries_exhausted, conflict_rejected, held_back_last_delivery; at most 64 values, then other)"
            }
        }
    }
}

/// Every metric's name as the reference writes it: without the namespace, counters (and the
/// labelled families) with `_total`. The names `opentelemetry.metrics.allowed_metrics` and
/// `denied_metrics` take.
pub fn reference_names() -> Vec<String> {
    let mut names: Vec<String> = CounterId::ALL.iter().map(|c| format!("{}_total", c.name())).collect();
    names.extend(GaugeId::ALL.iter().map(|g| g.name().to_owned()));
    names.extend(TimingId::ALL.iter().map(|t| t.name().to_owned()));
    names.extend(FamilyId::ALL.iter().map(|f| format!("{}_total", f.name())));
    names
}

/// True when `pattern` (a name of [`reference_names`], or a prefix ending in `*`) matches a
/// metric of the catalogue.
pub fn is_catalogue_name(pattern: &str) -> bool {
    reference_names().iter().any(|n| crate::config::otel::name_matches(pattern, n))
}

/// The metric a legacy alias repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aliased {
    /// A counter.
    Counter(CounterId),
    /// A gauge.
    Gauge(GaugeId),
    /// A histogram.
    Timing(TimingId),
}

impl Aliased {
    /// The repeated metric's name (without namespace and `_total`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Counter(c) => c.name(),
            Self::Gauge(g) => g.name(),
            Self::Timing(t) => t.name(),
        }
    }
}

/// The reference's legacy metric names, which its runner still writes into the snapshot file
/// next to the current ones (its `nats-sink-metrics show --include-legacy` reads them; its
/// exporters leave them out). Each carries the value of the metric it repeats, in the
/// snapshot file only: `/metrics` exports the current names.
pub const LEGACY_ALIASES: &[(&str, Aliased)] = &[
    ("messages_received", Aliased::Counter(CounterId::MessagesPrepared)),
    ("batches_written", Aliased::Counter(CounterId::SinkBatchesWritten)),
    ("batch_write_seconds", Aliased::Timing(TimingId::SinkBatchWriteSeconds)),
    ("last_success_timestamp", Aliased::Gauge(GaugeId::LastSinkSuccessEpochSeconds)),
    ("current_batch_size", Aliased::Gauge(GaugeId::CurrentBatchMessages)),
];

/// The bucket bounds of latency histograms (seconds).
pub const LATENCY_BUCKETS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

/// The bucket bounds of event-age and clock-skew histograms (seconds).
pub const AGE_BUCKETS: &[f64] =
    &[0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 21_600.0, 86_400.0, 604_800.0];

impl TimingId {
    /// The bucket bounds of this histogram.
    pub fn buckets(self) -> &'static [f64] {
        match self {
            Self::EventAgeAtReceiveSeconds | Self::EventAgeAtStoreSeconds | Self::EventSourceClockSkewSeconds => {
                AGE_BUCKETS
            }
            _ => LATENCY_BUCKETS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_well_formed() {
        let mut names: Vec<&str> = CounterId::ALL.iter().map(|c| c.name()).collect();
        names.extend(GaugeId::ALL.iter().map(|g| g.name()));
        names.extend(TimingId::ALL.iter().map(|t| t.name()));
        names.extend(FamilyId::ALL.iter().map(|f| f.name()));
        names.extend(LEGACY_ALIASES.iter().map(|(alias, _)| *alias));
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "duplicate metric names");
        for n in names {
            assert!(n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'), "{n}");
            assert!(!n.ends_with("_total"), "{n}: the encoder adds _total");
        }
        for (i, c) in CounterId::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
        assert!(TimingId::ALL.iter().all(|t| t.name().ends_with("_seconds")));
    }

    #[test]
    fn every_metric_the_shipped_alert_rules_name_is_in_the_catalogue() {
        let rules =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus/nats-sink-alerts.yaml");
        let text = std::fs::read_to_string(&rules).unwrap_or_else(|e| panic!("{}: {e}", rules.display()));
        let known = reference_names();
        let mut named = 0;
        for (at, _) in text.match_indices("nats_sinks_") {
            let name: String = text[at + "nats_sinks_".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            assert!(
                known.contains(&name),
                "deploy/prometheus/nats-sink-alerts.yaml names `nats_sinks_{name}`, not a metric"
            );
            named += 1;
        }
        assert!(named >= 5, "the rules name the metrics they alert on ({named} found)");
    }
}
