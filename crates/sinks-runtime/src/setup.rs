//! Stream and consumer setup before the first fetch.
//!
//! Streams are only looked up, unless `stream_management.create_if_missing` asks for them to
//! be created (an existing stream is never changed). The durable pull consumer is bound,
//! created or reconciled per `consumer_management.mode`, always with explicit acks; any drift
//! between the existing consumer and the config is reported field by field before a single
//! message is fetched.

use std::time::Duration;

use async_nats::jetstream::consumer::{self, AckPolicy, PullConsumer, pull};
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::stream::{self, ConsumerCreateStrictErrorKind, ConsumerUpdateErrorKind, StorageType};
use async_nats::jetstream::{self, Context};

use crate::config::{Config, ConfigError, ConfigIssue, ConsumerManagementConfig, ConsumerMode, StreamStorage};

/// Where a new consumer starts reading its stream (`RunOptions::start`; the runner re-exports
/// it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartAt {
    /// At this stream sequence (1 is the first).
    Sequence(u64),
    /// At the first message stored at or after this time.
    Time(time::OffsetDateTime),
}

/// Why setup failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The config does not match the server (missing stream or consumer, drift): exit 2.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// NATS could not answer (timeout, disconnect): retried by the caller.
    #[error("jetstream request failed: {0}")]
    Unavailable(String),
}

/// The bound consumer and the effective settings the runner needs.
#[derive(Debug)]
pub(crate) struct BoundConsumer {
    /// The pull consumer.
    pub(crate) consumer: PullConsumer,
    /// Effective `max_deliver` (`None` when unlimited).
    pub(crate) max_deliver: Option<u64>,
    /// Effective AckWait.
    pub(crate) ack_wait: Duration,
    /// What setup did: `created`, `bound`, `reconciled` or `ephemeral`.
    pub(crate) action: &'static str,
    /// The consumer's `max_ack_pending` (`None` or ≤ 0: the server's limit).
    pub(crate) max_ack_pending: Option<i64>,
}

/// One field where the existing consumer differs from the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// Field name (consumer config name).
    pub field: &'static str,
    /// What the config asks for.
    pub expected: String,
    /// What the server has.
    pub actual: String,
    /// Whether JetStream lets this field change on an existing consumer.
    pub updatable: bool,
}

/// The configuration error of `drift` on `consumer`, each field with the fix that works for
/// it: a field JetStream can change in place is fixed by `consumer_management.mode =
/// "reconcile"`; any other needs a new consumer (a new `nats.consumer`, or deleting the old
/// one). A filter drift from `nats.subject` alone names `nats.subject`.
fn drift_error(drift: &[Drift], consumer: &str, cm: &ConsumerManagementConfig) -> ConfigError {
    ConfigError {
        issues: drift
            .iter()
            .map(|d| {
                let path = if d.field == "filter_subjects" && cm.filter_subjects.is_empty() {
                    "nats.subject".to_owned()
                } else {
                    format!("consumer_management.{}", d.field)
                };
                let fix = if d.updatable && cm.mode != ConsumerMode::Reconcile {
                    " (set consumer_management.mode = \"reconcile\" to change it in place, or use a new nats.consumer)"
                } else if d.updatable {
                    ""
                } else {
                    " (cannot be changed in place: use a new nats.consumer, or delete the consumer so it is created again)"
                };
                ConfigIssue {
                    path,
                    message: format!(
                        "existing consumer `{consumer}` has {} but the config asks for {}{fix}",
                        d.actual, d.expected
                    ),
                }
            })
            .collect(),
    }
}

/// The consumer the settings ask for, as it serializes into the `config` of JetStream's
/// consumer create request (`nats-sink stream-plan` prints it; `nats consumer add --config`
/// reads it). Opaque otherwise.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(transparent)]
pub struct ConsumerPlan(pull::Config);

/// The consumer `config` asks for ([`ConsumerPlan`]), exactly as start-up creates it.
pub fn consumer_plan(config: &Config) -> ConsumerPlan {
    ConsumerPlan(desired_consumer(config))
}

/// The pull consumer config the settings ask for.
pub(crate) fn desired_consumer(config: &Config) -> pull::Config {
    let cm = &config.consumer_management;
    let filters = cm.effective_filters(&config.nats.subject);
    let (filter_subject, filter_subjects) =
        if filters.len() == 1 { (filters[0].clone(), Vec::new()) } else { (String::new(), filters) };
    let durable = config.nats.durable.then(|| config.nats.consumer.clone());
    pull::Config {
        durable_name: durable.clone(),
        name: durable,
        description: Some("nats-sinks".into()),
        ack_policy: AckPolicy::Explicit,
        deliver_policy: match cm.deliver_policy {
            crate::config::DeliverPolicy::All => consumer::DeliverPolicy::All,
            crate::config::DeliverPolicy::Last => consumer::DeliverPolicy::Last,
            crate::config::DeliverPolicy::New => consumer::DeliverPolicy::New,
            crate::config::DeliverPolicy::LastPerSubject => consumer::DeliverPolicy::LastPerSubject,
        },
        replay_policy: match cm.replay_policy {
            crate::config::ReplayPolicy::Instant => consumer::ReplayPolicy::Instant,
            crate::config::ReplayPolicy::Original => consumer::ReplayPolicy::Original,
        },
        filter_subject,
        filter_subjects,
        ack_wait: cm.ack_wait_seconds.map(Duration::from_secs_f64).unwrap_or_default(),
        max_deliver: cm.max_deliver.unwrap_or_default(),
        backoff: cm.backoff_seconds.iter().flatten().map(|s| Duration::from_secs_f64(*s)).collect(),
        max_ack_pending: cm.max_ack_pending.unwrap_or_default(),
        max_waiting: cm.max_waiting.unwrap_or_default(),
        headers_only: cm.headers_only.unwrap_or_default(),
        num_replicas: cm.num_replicas.unwrap_or_default(),
        memory_storage: cm.memory_storage.unwrap_or_default(),
        metadata: cm.metadata.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        inactive_threshold: if config.nats.durable { Duration::ZERO } else { Duration::from_secs(300) },
        ..Default::default()
    }
}

/// Compares an existing consumer with the config: always the pull shape, ack policy,
/// deliver and replay policy and filters; optional fields only when the config sets them.
pub(crate) fn detect_drift(
    existing: &consumer::Config,
    cm: &ConsumerManagementConfig,
    nats_subject: &str,
) -> Vec<Drift> {
    let mut drift = Vec::new();
    let mut check = |field: &'static str, expected: String, actual: String, updatable: bool| {
        if expected != actual {
            drift.push(Drift { field, expected, actual, updatable });
        }
    };
    check(
        "deliver_subject",
        "none (pull)".into(),
        existing.deliver_subject.clone().unwrap_or_else(|| "none (pull)".into()),
        false,
    );
    check("ack_policy", "explicit".into(), format!("{:?}", existing.ack_policy).to_lowercase(), false);
    let dp = format!("{:?}", cm.deliver_policy);
    let dp_actual = match existing.deliver_policy {
        consumer::DeliverPolicy::All => "All",
        consumer::DeliverPolicy::Last => "Last",
        consumer::DeliverPolicy::New => "New",
        consumer::DeliverPolicy::LastPerSubject => "LastPerSubject",
        _ => "by_start_sequence_or_time",
    };
    check("deliver_policy", dp, dp_actual.into(), false);
    check("replay_policy", format!("{:?}", cm.replay_policy), format!("{:?}", existing.replay_policy), false);
    let mut want = cm.effective_filters(nats_subject);
    want.sort();
    let mut have: Vec<String> = if existing.filter_subjects.is_empty() {
        if existing.filter_subject.is_empty() { Vec::new() } else { vec![existing.filter_subject.clone()] }
    } else {
        existing.filter_subjects.clone()
    };
    have.sort();
    check("filter_subjects", format!("{want:?}"), format!("{have:?}"), true);
    if let Some(secs) = cm.ack_wait_seconds {
        check("ack_wait_seconds", format!("{secs}"), format!("{}", existing.ack_wait.as_secs_f64()), true);
    }
    if let Some(m) = cm.max_deliver {
        check("max_deliver", m.to_string(), existing.max_deliver.to_string(), true);
    }
    if let Some(b) = &cm.backoff_seconds {
        let have: Vec<f64> = existing.backoff.iter().map(Duration::as_secs_f64).collect();
        check("backoff_seconds", format!("{b:?}"), format!("{have:?}"), true);
    }
    if let Some(m) = cm.max_ack_pending {
        check("max_ack_pending", m.to_string(), existing.max_ack_pending.to_string(), true);
    }
    if let Some(m) = cm.max_waiting {
        check("max_waiting", m.to_string(), existing.max_waiting.to_string(), false);
    }
    if let Some(h) = cm.headers_only {
        check("headers_only", h.to_string(), existing.headers_only.to_string(), true);
    }
    if let Some(n) = cm.num_replicas {
        check("num_replicas", n.to_string(), existing.num_replicas.to_string(), true);
    }
    if let Some(m) = cm.memory_storage {
        check("memory_storage", m.to_string(), existing.memory_storage.to_string(), false);
    }
    if !cm.metadata.is_empty() {
        // The server adds its own keys (`_nats.ver`, `_nats.level`, …): not the config's to check.
        let have: std::collections::BTreeMap<_, _> =
            existing.metadata.iter().filter(|(k, _)| !k.starts_with("_nats.")).collect();
        let want: std::collections::BTreeMap<_, _> = cm.metadata.iter().collect();
        check("metadata", format!("{want:?}"), format!("{have:?}"), true);
    }
    drift
}

fn unavailable(e: impl std::fmt::Display) -> SetupError {
    SetupError::Unavailable(e.to_string())
}

async fn create_stream(js: &Context, name: &str, subjects: Vec<String>, config: &Config) -> Result<(), SetupError> {
    let sm = &config.stream_management;
    let cfg = stream::Config {
        name: name.to_owned(),
        subjects,
        storage: match sm.storage {
            StreamStorage::File => StorageType::File,
            StreamStorage::Memory => StorageType::Memory,
        },
        max_age: sm.max_age_seconds.map(Duration::from_secs).unwrap_or_default(),
        duplicate_window: sm.duplicate_window_seconds.map(Duration::from_secs).unwrap_or_default(),
        ..Default::default()
    };
    js.get_or_create_stream(cfg).await.map_err(unavailable)?;
    tracing::info!(stream = name, "created stream (stream_management.create_if_missing)");
    Ok(())
}

async fn stream_exists(js: &Context, name: &str) -> Result<bool, SetupError> {
    match js.get_stream(name).await {
        Ok(_) => Ok(true),
        Err(e) => match e.kind() {
            GetStreamErrorKind::JetStream(j) if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND => Ok(false),
            _ => Err(unavailable(e)),
        },
    }
}

/// Looks up (or, when opted in, creates) the source stream and the DLQ stream.
pub(crate) async fn ensure_streams(js: &Context, config: &Config) -> Result<stream::Stream, SetupError> {
    let sm = &config.stream_management;
    let name = &config.nats.stream;
    if !stream_exists(js, name).await? {
        if !sm.create_if_missing {
            return Err(ConfigError::single(
                "nats.stream",
                format!("stream `{name}` does not exist (streams are never created unless stream_management.create_if_missing is set)"),
            )
            .into());
        }
        let subjects = if sm.subjects.is_empty() { vec![config.nats.subject.clone()] } else { sm.subjects.clone() };
        if let Some(e) = consumed_again(config, &subjects) {
            return Err(e.into());
        }
        create_stream(js, name, subjects, config).await?;
    }
    if let (Some(dl_stream), Some(subject)) = (&sm.dead_letter_stream, &config.dead_letter.subject)
        && sm.create_if_missing
        && !stream_exists(js, dl_stream).await?
    {
        create_stream(js, dl_stream, vec![subject.clone()], config).await?;
    }
    let stream = js.get_stream(name).await.map_err(unavailable)?;
    check_subjects(&stream.cached_info().config.subjects, config)?;
    check_dead_letter_stream(js, config).await?;
    Ok(stream)
}

/// What `nats-sink validate --connect` checks against the server, changing nothing: the
/// stream exists (or would be created) and captures the consumer's subjects; with the DLQ
/// on, a stream captures `dead_letter.subject`; an existing consumer matches the config (its
/// drift, with the fix, is the error), a missing one would be created (or, with `bind_only`,
/// is an error); the exhaustion capture stream likewise. Returns what start-up would do, as
/// lines for the operator.
pub(crate) async fn preflight(js: &Context, config: &Config) -> Result<Vec<String>, SetupError> {
    let mut notes = Vec::new();
    let name = &config.nats.stream;
    let stream = match js.get_stream(name).await {
        Ok(stream) => stream,
        Err(e) if matches!(e.kind(), GetStreamErrorKind::JetStream(j) if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND) =>
        {
            if !config.stream_management.create_if_missing {
                return Err(ConfigError::single(
                    "nats.stream",
                    format!("stream `{name}` does not exist (streams are never created unless stream_management.create_if_missing is set)"),
                )
                .into());
            }
            let sm = &config.stream_management;
            let subjects = if sm.subjects.is_empty() { vec![config.nats.subject.clone()] } else { sm.subjects.clone() };
            if let Some(e) = consumed_again(config, &subjects) {
                return Err(e.into());
            }
            notes.push(format!(
                "stream `{name}` does not exist yet: run creates it (stream_management.create_if_missing)"
            ));
            plan_dead_letter_stream(js, config, &mut notes).await?;
            plan_guard_bucket(js, config, &mut notes).await?;
            if config.nats.durable {
                notes.push(format!(
                    "consumer `{}` does not exist yet: run creates it in stream `{name}`",
                    config.nats.consumer
                ));
            }
            if let Some(max) = config.consumer_management.max_deliver.filter(|m| *m > 0 && config.rescue.enabled) {
                let capture = config.rescue.stream_name(name, &config.nats.consumer);
                notes.push(format!("run creates stream `{capture}` to capture exhaustions (max_deliver {max})"));
            }
            return Ok(notes);
        }
        Err(e) => return Err(unavailable(e)),
    };
    let subjects = stream.cached_info().config.subjects.clone();
    check_subjects(&subjects, config)?;
    notes.push(format!("stream `{name}` captures {}", subjects.join(", ")));
    let replicas = stream.cached_info().config.num_replicas;
    let sync = crate::durability::server_sync(config.nats.monitoring_url.as_deref()).await;
    match crate::durability::lint(name, replicas, &sync) {
        Some(warning) => notes.push(format!("warning: {warning}")),
        None if replicas >= 3 => notes.push(format!(
            "stream `{name}` has {replicas} replicas: acknowledged messages survive a server's power loss"
        )),
        None => notes.push(format!("the server syncs every write of stream `{name}` to disk (sync_interval: always)")),
    }
    plan_dead_letter_stream(js, config, &mut notes).await?;
    plan_guard_bucket(js, config, &mut notes).await?;
    let cm = &config.consumer_management;
    let consumer = &config.nats.consumer;
    let max_deliver = match stream.consumer_info(consumer).await {
        Ok(info) => {
            let drift = detect_drift(&info.config, cm, &config.nats.subject);
            let blocking: Vec<Drift> =
                drift.iter().filter(|d| cm.mode != ConsumerMode::Reconcile || !d.updatable).cloned().collect();
            if !blocking.is_empty() {
                return Err(drift_error(&blocking, consumer, cm).into());
            }
            if drift.is_empty() {
                notes.push(format!("consumer `{consumer}` exists and matches the config"));
            } else {
                notes.push(format!("consumer `{consumer}` exists; run reconciles {} field(s)", drift.len()));
            }
            u64::try_from(info.config.max_deliver).ok().filter(|m| *m > 0)
        }
        Err(e) if e.kind() == jetstream::context::ConsumerInfoErrorKind::NotFound => {
            if cm.mode == ConsumerMode::BindOnly {
                return Err(ConfigError::single(
                    "nats.consumer",
                    format!("consumer `{consumer}` does not exist in stream `{name}` and consumer_management.mode is bind_only"),
                )
                .into());
            }
            notes.push(format!("consumer `{consumer}` does not exist yet: run creates it"));
            cm.max_deliver.and_then(|m| u64::try_from(m).ok()).filter(|m| *m > 0)
        }
        Err(e) => return Err(unavailable(e)),
    };
    if let Some(max) = max_deliver.filter(|_| config.rescue.enabled && config.nats.durable) {
        let capture = config.rescue.stream_name(name, consumer);
        match js.get_stream(&capture).await {
            Ok(_) => notes.push(format!("exhaustions (max_deliver {max}) are captured in stream `{capture}`")),
            Err(_) if cm.mode == ConsumerMode::BindOnly => {
                return Err(ConfigError::single(
                    "rescue.stream",
                    format!("stream `{capture}` does not exist and consumer_management.mode is bind_only: create it (`{} stream-plan --connect` prints the command for this consumer's max_deliver) or set rescue.enabled = false", crate::program::name()),
                )
                .into());
            }
            Err(_) => notes.push(format!("run creates stream `{capture}` to capture exhaustions (max_deliver {max})")),
        }
    }
    Ok(notes)
}

/// Refuses a consumer filter that no subject of the stream overlaps: it could never match a
/// message (the server refuses it too, with a message naming neither field). A filter that
/// overlaps the stream's subjects is accepted, as the server accepts it (`>` over a stream of
/// `secure.>` and `public.>`). A stream without subjects of its own (sourced or mirrored) is
/// not checked.
fn check_subjects(stream_subjects: &[String], config: &Config) -> Result<(), ConfigError> {
    if stream_subjects.is_empty() {
        return Ok(());
    }
    let filters = config.consumer_management.effective_filters(&config.nats.subject);
    let missing: Vec<&String> =
        filters.iter().filter(|f| !stream_subjects.iter().any(|s| sinks_toolkit::subject::overlaps(s, f))).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let field = if config.consumer_management.filter_subjects.is_empty() {
        "nats.subject"
    } else {
        "consumer_management.filter_subjects"
    };
    Err(ConfigError::single(
        field,
        format!(
            "no subject of stream `{}` overlaps {}; its subjects are {}: point the field at subjects the stream holds, or nats.stream at the stream that captures them",
            config.nats.stream,
            missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "),
            stream_subjects.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "),
        ),
    ))
}

/// What `validate --connect` says of the DLQ stream: one captures `dead_letter.subject`, or
/// run creates it (`stream_management.dead_letter_stream` with `create_if_missing`), as run
/// would; else the error run would stop with.
async fn plan_dead_letter_stream(js: &Context, config: &Config, notes: &mut Vec<String>) -> Result<(), SetupError> {
    let (true, Some(subject)) = (config.dead_letter.enabled, config.dead_letter.subject.as_deref()) else {
        return Ok(());
    };
    let sm = &config.stream_management;
    if let (true, Some(dl_stream)) = (sm.create_if_missing, &sm.dead_letter_stream)
        && !stream_exists(js, dl_stream).await?
    {
        notes.push(format!(
            "stream `{dl_stream}` does not exist yet: run creates it to capture dead_letter.subject `{subject}` \
             (stream_management.dead_letter_stream)"
        ));
        return Ok(());
    }
    check_dead_letter_stream(js, config).await?;
    notes.push(format!("a stream captures dead_letter.subject `{subject}`"));
    Ok(())
}

/// What `validate --connect` says of the stream guard's bucket: there, created by run, or (in
/// `bind_only`) the error run would stop with.
async fn plan_guard_bucket(js: &Context, config: &Config, notes: &mut Vec<String>) -> Result<(), SetupError> {
    let program = crate::program::name();
    let guard = &config.stream_guard;
    if !guard.identity {
        notes.push("stream_guard.identity is off: a re-created stream is caught only at the destination".into());
        return Ok(());
    }
    match js.get_key_value(&guard.bucket).await {
        Ok(_) => notes.push(format!("the stream's identity is pinned in key-value bucket `{}`", guard.bucket)),
        Err(_) if config.consumer_management.mode == ConsumerMode::BindOnly => {
            return Err(ConfigError::single(
                "stream_guard.bucket",
                format!(
                    "key-value bucket `{}` does not exist and consumer_management.mode is bind_only: create it \
                     (`{program} stream-plan` prints the command) or set stream_guard.identity = false",
                    guard.bucket
                ),
            )
            .into());
        }
        Err(_) => notes.push(format!("run creates key-value bucket `{}` for the stream's identity", guard.bucket)),
    }
    Ok(())
}

/// With the DLQ on, some stream must capture `dead_letter.subject`, else every dead letter
/// would fail (and its message be NAKed for ever). Unknown when the server does not say
/// (no permission to list streams): then a warning.
async fn check_dead_letter_stream(js: &Context, config: &Config) -> Result<(), SetupError> {
    let (true, Some(subject)) = (config.dead_letter.enabled, config.dead_letter.subject.as_deref()) else {
        return Ok(());
    };
    match js.stream_by_subject(subject).await {
        Ok(stream) if stream == config.nats.stream => match consumed_again(config, &[subject.to_owned()]) {
            Some(e) => Err(e.into()),
            None => Ok(()),
        },
        Ok(_) => Ok(()),
        Err(e) if e.kind() == jetstream::context::GetStreamByNameErrorKind::NotFound => Err(ConfigError::single(
            "dead_letter.subject",
            format!(
                "no stream captures `{subject}`: every dead letter would fail; create one (`{} stream-plan` plans it) or set stream_management.dead_letter_stream with create_if_missing",
                crate::program::name()
            ),
        )
        .into()),
        Err(e) => {
            tracing::warn!(subject, error = %e, "cannot tell whether a stream captures dead_letter.subject");
            Ok(())
        }
    }
}

/// The error when dead-letter records would be consumed again: the consumed stream captures
/// `dead_letter.subject` (one of `stream_subjects`, the subjects it has or would be created
/// with, matches it) and the consumer's filters match it too. `None` otherwise: a
/// `dead_letter.subject` that `nats.subject` matches is fine while another stream captures it.
pub(crate) fn consumed_again(config: &Config, stream_subjects: &[String]) -> Option<ConfigError> {
    let (true, Some(dlq)) = (config.dead_letter.enabled, config.dead_letter.subject.as_deref()) else {
        return None;
    };
    let captured = stream_subjects.iter().any(|s| sinks_toolkit::subject::matches(s, dlq));
    let filters = config.consumer_management.effective_filters(&config.nats.subject);
    let filter = filters.iter().find(|f| sinks_toolkit::subject::matches(f, dlq))?;
    captured.then(|| {
        ConfigError::single(
            "dead_letter.subject",
            format!(
                "stream `{}` captures `{dlq}` and the consumer's filter `{filter}` matches it: every dead-letter \
                 record would be consumed again as an event; put dead letters on a subject outside the stream \
                 (e.g. `dlq.{}`) captured by a stream of their own",
                config.nats.stream,
                config.nats.stream.to_ascii_lowercase()
            ),
        )
    })
}

/// Binds, creates or reconciles the consumer per `consumer_management.mode`.
///
/// Safe with many workers starting at once on one durable consumer: a missing consumer is
/// created with JetStream's create-only action, so a worker that loses the race to another
/// one never overwrites the consumer the winner created; it reads the consumer again and binds
/// to it (or reports drift) like any later worker. Reconciling uses the update-only action,
/// which never recreates a consumer (a consumer deleted meanwhile is created afresh on the
/// next pass instead).
pub(crate) async fn ensure_consumer(stream: &stream::Stream, config: &Config) -> Result<BoundConsumer, SetupError> {
    ensure_consumer_from(stream, config, None, None).await
}

/// [`ensure_consumer`], with a start position that replaces the configured deliver policy
/// and a name for an ephemeral consumer (`nats-sink replay` creates a temporary consumer
/// at a sequence or a time).
pub(crate) async fn ensure_consumer_from(
    stream: &stream::Stream,
    config: &Config,
    start: Option<StartAt>,
    ephemeral_name: Option<String>,
) -> Result<BoundConsumer, SetupError> {
    let mut desired = desired_consumer(config);
    match start {
        Some(StartAt::Sequence(start_sequence)) => {
            desired.deliver_policy = consumer::DeliverPolicy::ByStartSequence { start_sequence };
        }
        Some(StartAt::Time(start_time)) => desired.deliver_policy = consumer::DeliverPolicy::ByStartTime { start_time },
        None => {}
    }
    if !config.nats.durable && ephemeral_name.is_some() {
        desired.name = ephemeral_name;
    }
    let cm = &config.consumer_management;
    let name = &config.nats.consumer;
    if !config.nats.durable {
        let consumer = stream.create_consumer(desired).await.map_err(unavailable)?;
        return finish(consumer, "ephemeral").await;
    }
    // Two passes at most: the second only after losing a create or update race.
    for pass in 0..2 {
        let existing = match stream.consumer_info(name).await {
            Ok(info) => Some(info),
            Err(e) if e.kind() == jetstream::context::ConsumerInfoErrorKind::NotFound => None,
            Err(e) => return Err(unavailable(e)),
        };
        let Some(existing) = existing else {
            if cm.mode == ConsumerMode::BindOnly {
                return Err(ConfigError::single(
                    "nats.consumer",
                    format!(
                        "consumer `{name}` does not exist in stream `{}` and consumer_management.mode is bind_only",
                        config.nats.stream
                    ),
                )
                .into());
            }
            match stream.create_consumer_strict(desired.clone()).await {
                Ok(consumer) => {
                    tracing::info!(consumer = %name, "created durable pull consumer");
                    return finish(consumer, "created").await;
                }
                // Another worker created it with a different config in the meantime: look again.
                Err(e) if e.kind() == ConsumerCreateStrictErrorKind::AlreadyExists && pass == 0 => {
                    tracing::info!(consumer = %name, "consumer was created concurrently by another worker; binding");
                    continue;
                }
                Err(e) => return Err(unavailable(e)),
            }
        };
        let drift = detect_drift(&existing.config, cm, &config.nats.subject);
        if drift.is_empty() {
            let consumer = stream.get_consumer(name).await.map_err(unavailable)?;
            return finish(consumer, "bound").await;
        }
        let fixed: Vec<Drift> = drift.iter().filter(|d| !d.updatable).cloned().collect();
        if cm.mode != ConsumerMode::Reconcile || !fixed.is_empty() {
            let report = if cm.mode == ConsumerMode::Reconcile { fixed } else { drift };
            return Err(drift_error(&report, name, cm).into());
        }
        for d in &drift {
            tracing::warn!(field = d.field, expected = %d.expected, actual = %d.actual, "reconciling consumer field");
        }
        match stream.update_consumer(desired.clone()).await {
            Ok(consumer) => return finish(consumer, "reconciled").await,
            // Deleted since we read it: the next pass creates it.
            Err(e) if e.kind() == ConsumerUpdateErrorKind::DoesNotExist && pass == 0 => continue,
            Err(e) => return Err(unavailable(e)),
        }
    }
    Err(SetupError::Unavailable(format!("consumer `{name}` kept changing while it was set up")))
}

/// Where exhaustions of the consumer are captured: the stream holding its `MAX_DELIVERIES`
/// advisories, the rescue consumer reading it, and the source stream the rescued messages
/// are read from.
#[derive(Debug)]
pub(crate) struct Capture {
    /// The capture stream's name.
    pub(crate) stream: String,
    /// The durable pull consumer of the capture stream that the rescue task reads.
    pub(crate) consumer: PullConsumer,
    /// The source stream (messages are read back by stream sequence).
    pub(crate) source: stream::Stream,
}

/// Makes sure a stream captures the consumer's exhaustion advisories, and binds the rescue
/// consumer to it: creates both when missing in the `create_if_missing` and `reconcile`
/// modes; in `bind_only` both must exist (`nats-sink stream-plan` prints the commands), unless
/// `rescue.enabled` is false. `None` when there is nothing to capture: rescue off, no
/// `max_deliver`, or an ephemeral consumer. An existing capture stream is never changed; one
/// that does not capture the advisory subject is a configuration error naming it.
pub(crate) async fn ensure_capture(
    js: &Context,
    source: &stream::Stream,
    config: &Config,
    max_deliver: Option<u64>,
) -> Result<Option<Capture>, SetupError> {
    let program = crate::program::name();
    let rescue = &config.rescue;
    if max_deliver.is_none() || !config.nats.durable {
        return Ok(None);
    }
    if !rescue.enabled {
        tracing::warn!(
            max_deliver,
            "rescue.enabled is false: a message whose last allowed delivery is lost to a crash is dropped by the server"
        );
        return Ok(None);
    }
    let (stream, consumer) = (&config.nats.stream, &config.nats.consumer);
    let name = rescue.stream_name(stream, consumer);
    let subject = crate::config::rescue::RescueConfig::advisory_subject(stream, consumer);
    let bind_only = config.consumer_management.mode == ConsumerMode::BindOnly;
    let capture = match js.get_stream(&name).await {
        Ok(mut existing) => {
            let info = existing.info().await.map_err(unavailable)?;
            if !info.config.subjects.iter().any(|s| sinks_toolkit::subject::contains(s, &subject)) {
                return Err(ConfigError::single(
                    "rescue.stream",
                    format!(
                        "stream `{name}` exists but does not capture `{subject}` (its subjects: {:?})",
                        info.config.subjects
                    ),
                )
                .into());
            }
            existing
        }
        Err(e) if matches!(e.kind(), GetStreamErrorKind::JetStream(j) if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND) =>
        {
            if bind_only {
                return Err(ConfigError::single(
                    "rescue.stream",
                    format!(
                        "stream `{name}` capturing `{subject}` does not exist and consumer_management.mode is bind_only: \
                         create it (`{program} stream-plan --connect` prints the command for this consumer's max_deliver) or set rescue.enabled = false"
                    ),
                )
                .into());
            }
            let replicas = source.cached_info().config.num_replicas;
            let cfg = stream::Config {
                name: name.clone(),
                subjects: vec![subject.clone()],
                storage: StorageType::File,
                max_age: Duration::from_secs(rescue.max_age_seconds),
                num_replicas: replicas.max(1),
                description: Some(format!("nats-sinks: exhaustion advisories of consumer {consumer} on {stream}")),
                ..Default::default()
            };
            let created = js.get_or_create_stream(cfg).await.map_err(unavailable)?;
            tracing::info!(stream = %name, subject = %subject, "created the exhaustion capture stream");
            created
        }
        Err(e) => return Err(unavailable(e)),
    };
    let rescue_consumer = rescue.consumer_name(consumer);
    let consumer = match capture.get_consumer::<pull::Config>(&rescue_consumer).await {
        Ok(c) => c,
        Err(_) if bind_only => {
            return Err(ConfigError::single(
                "rescue.consumer",
                format!(
                    "consumer `{rescue_consumer}` of stream `{name}` does not exist and consumer_management.mode is \
                     bind_only: create it (`{program} stream-plan --connect` prints the command for this consumer's max_deliver) or set rescue.enabled = false"
                ),
            )
            .into());
        }
        Err(_) => {
            let desired = pull::Config {
                durable_name: Some(rescue_consumer.clone()),
                name: Some(rescue_consumer.clone()),
                description: Some("nats-sinks rescue".into()),
                ack_policy: AckPolicy::Explicit,
                ack_wait: Duration::from_secs(60),
                ..Default::default()
            };
            match capture.create_consumer_strict(desired).await {
                Ok(c) => c,
                // Another worker made it first.
                Err(e) if e.kind() == ConsumerCreateStrictErrorKind::AlreadyExists => {
                    capture.get_consumer(&rescue_consumer).await.map_err(unavailable)?
                }
                Err(e) => return Err(unavailable(e)),
            }
        }
    };
    Ok(Some(Capture { stream: name, consumer, source: source.clone() }))
}

async fn finish(mut consumer: PullConsumer, action: &'static str) -> Result<BoundConsumer, SetupError> {
    let info = consumer.info().await.map_err(unavailable)?.clone();
    Ok(BoundConsumer {
        consumer,
        max_deliver: u64::try_from(info.config.max_deliver).ok().filter(|m| *m > 0),
        ack_wait: if info.config.ack_wait.is_zero() { Duration::from_secs(30) } else { info.config.ack_wait },
        action,
        max_ack_pending: Some(info.config.max_ack_pending).filter(|m| *m > 0),
    })
}

#[cfg(test)]
mod concurrent_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_names_every_differing_field() {
        let existing = consumer::Config {
            durable_name: Some("c".into()),
            ack_policy: AckPolicy::All,
            deliver_policy: consumer::DeliverPolicy::New,
            filter_subject: "orders.x".into(),
            max_deliver: 3,
            ack_wait: Duration::from_secs(30),
            ..Default::default()
        };
        let cm = ConsumerManagementConfig { max_deliver: Some(5), ack_wait_seconds: Some(30.0), ..Default::default() };
        let fields: Vec<(&str, bool)> =
            detect_drift(&existing, &cm, "orders.*").iter().map(|d| (d.field, d.updatable)).collect();
        assert_eq!(
            fields,
            [("ack_policy", false), ("deliver_policy", false), ("filter_subjects", true), ("max_deliver", true)]
        );
        let err = drift_error(&detect_drift(&existing, &cm, "orders.*"), "c", &cm);
        assert_eq!(err.issues[0].path, "consumer_management.ack_policy");
        assert!(err.issues[0].message.contains("cannot be changed in place: use a new nats.consumer"));
        // A filter that drifted because nats.subject changed names nats.subject, and the fix.
        assert_eq!(err.issues[2].path, "nats.subject");
        assert!(
            err.issues[2].message.contains("consumer_management.mode = \"reconcile\""),
            "{}",
            err.issues[2].message
        );
    }

    #[test]
    fn the_servers_own_metadata_is_no_drift() {
        let mut metadata = std::collections::HashMap::new();
        metadata.insert("team".to_owned(), "orders".to_owned());
        metadata.insert("_nats.ver".to_owned(), "2.15.1".to_owned());
        metadata.insert("_nats.level".to_owned(), "5".to_owned());
        let existing = consumer::Config {
            ack_policy: AckPolicy::Explicit,
            filter_subject: "orders.*".into(),
            metadata,
            ..Default::default()
        };
        let cm = ConsumerManagementConfig {
            metadata: [("team".to_owned(), "orders".to_owned())].into_iter().collect(),
            ..Default::default()
        };
        assert!(detect_drift(&existing, &cm, "orders.*").is_empty());
    }

    #[test]
    fn matching_consumer_has_no_drift() {
        let existing = consumer::Config {
            ack_policy: AckPolicy::Explicit,
            filter_subject: "orders.*".into(),
            max_deliver: -1,
            ..Default::default()
        };
        assert!(detect_drift(&existing, &ConsumerManagementConfig::default(), "orders.*").is_empty());
    }
}
