//! `nats-sink stream-plan`: an offline plan of everything on the server a config needs (the
//! source stream and its durable consumer, the dead-letter stream, the ledger's stream, the
//! rescue's capture stream and consumer, the stream guard's bucket; `resources`), each as a
//! `nats` command that runs as printed and as the JetStream API request, with the permissions
//! the worker needs at run time. It connects to nothing and changes nothing; its output is a
//! review artifact for whoever administers NATS, and the commands create what a
//! `bind_only` worker then finds.
//!
//! Unlike the reference's fixed list, the runtime permissions follow what this config makes
//! the worker do, every JetStream API subject it calls: consumer creation only when
//! `consumer_management.mode` may create, the DLQ subject (and the stream lookup by subject
//! that checks a stream captures it) only when dead-lettering is on, the ledger's subject
//! with the ledger, stream creation only with `stream_management.create_if_missing`, the
//! advisory subjects it subscribes to with `advisories`. With `rescue` on, the plan includes
//! the stream capturing the consumer's exhaustion advisories, the rescue consumer, the
//! commands that create both (needed before the first run with `bind_only`) and the
//! permissions the rescue uses: as needed when the config sets a `max_deliver`, and marked as
//! needed only if the consumer has one when it does not (a consumer an administrator created
//! with `--max-deliver`); `--connect` reads the existing consumer and decides
//! ([`Existing`]).

mod resources;

use serde::Serialize;
use sinks_runtime::config::{Config, ConfigError, ConsumerMode};

pub(crate) use resources::Resource;

/// Most replicas a JetStream stream may have.
const MAX_REPLICAS: u8 = 5;
/// Largest duplicate window offered, seconds (7 days).
const MAX_DUPLICATE_WINDOW_SECONDS: u64 = 604_800;
/// The usual duplicate window, seconds; a smaller one is warned about.
pub(crate) const DEFAULT_DUPLICATE_WINDOW_SECONDS: u64 = 120;
/// JetStream's storage types, the default first (`--storage`).
pub(crate) const STORAGE_TYPES: [&str; 2] = ["file", "memory"]; // JetStream's words, not a sink kind

/// Operator-chosen stream settings.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StreamSettings {
    /// `limits`, `interest` or `workqueue`.
    pub(crate) retention: String,
    /// `old` or `new`.
    pub(crate) discard: String,
    /// `file` or `memory`.
    pub(crate) storage: String,
    /// 1 to 5.
    pub(crate) replicas: u8,
    /// Duplicate-detection window, seconds.
    pub(crate) duplicate_window_seconds: u64,
}

/// The plan, in the reference's JSON shape plus the publish/subscribe split.
#[derive(Debug, Serialize)]
pub(crate) struct StreamPlan {
    stream: String,
    subjects: Vec<String>,
    durable_consumer: String,
    recommended_stream_settings: StreamSettings,
    runtime_permissions: Vec<String>,
    runtime_publish_permissions: Vec<String>,
    runtime_subscribe_permissions: Vec<String>,
    administration_permissions: Vec<String>,
    /// Everything to create, in order: each as a `nats` command and as the API request.
    create: Vec<Resource>,
    /// The exhaustion capture, when the consumer has a `max_deliver` and `rescue` is on.
    rescue: Option<RescuePlan>,
    /// The stream identity bucket, when `stream_guard.identity` is on.
    stream_guard: Option<GuardPlan>,
    notes: Vec<String>,
    warnings: Vec<String>,
}

/// The key-value bucket holding the stream's identity record (`stream_guard`).
#[derive(Debug, Serialize)]
pub(crate) struct GuardPlan {
    bucket: String,
    key: String,
}

/// The stream capturing the consumer's `MAX_DELIVERIES` advisories and the rescue consumer.
#[derive(Debug, Serialize)]
pub(crate) struct RescuePlan {
    stream: String,
    subject: String,
    consumer: String,
    /// The consumer's `max_deliver`, when known (the config's, or the existing consumer's).
    max_deliver: Option<u64>,
    /// `None`: needed. Else when it is needed (a `max_deliver` the plan cannot see offline).
    #[serde(skip_serializing_if = "Option::is_none")]
    only_if: Option<String>,
}

/// What the plan knows of the durable consumer on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Existing {
    /// Nothing: the plan is offline.
    Unknown,
    /// `--connect` found no such consumer (the config's settings will make it).
    Missing,
    /// `--connect` found it, with this `max_deliver` (`None`: unlimited).
    MaxDeliver(Option<u64>),
}

/// When the capture stream is needed although the plan cannot tell.
const ONLY_IF_MAX_DELIVER: &str = "only if the consumer has a max_deliver (one an administrator set, e.g. `nats consumer add \
                                   --max-deliver`; the config sets none): `stream-plan --connect` reads it";

fn choice(value: &str, field: &str, allowed: &[&str]) -> Result<String, ConfigError> {
    let normalized = value.trim().to_ascii_lowercase();
    if allowed.contains(&normalized.as_str()) {
        Ok(normalized)
    } else {
        Err(ConfigError::single(format!("--{field}"), format!("must be one of: {}", allowed.join(", "))))
    }
}

impl StreamSettings {
    /// Validates the command-line choices.
    pub(crate) fn new(
        retention: &str,
        discard: &str,
        storage: &str,
        replicas: u8,
        duplicate_window_seconds: u64,
    ) -> Result<Self, ConfigError> {
        if !(1..=MAX_REPLICAS).contains(&replicas) {
            return Err(ConfigError::single("--replicas", format!("must be between 1 and {MAX_REPLICAS}")));
        }
        if !(1..=MAX_DUPLICATE_WINDOW_SECONDS).contains(&duplicate_window_seconds) {
            return Err(ConfigError::single(
                "--duplicate-window-seconds",
                format!("must be between 1 and {MAX_DUPLICATE_WINDOW_SECONDS}"),
            ));
        }
        Ok(Self {
            retention: choice(retention, "retention", &["limits", "interest", "workqueue"])?,
            discard: choice(discard, "discard", &["old", "new"])?,
            storage: choice(storage, "storage", &STORAGE_TYPES)?,
            replicas,
            duplicate_window_seconds,
        })
    }
}

/// Builds the plan from a validated config and what is known of the consumer; pure.
pub(crate) fn plan(config: &Config, settings: StreamSettings, existing: Existing) -> Result<StreamPlan, ConfigError> {
    let stream = config.nats.stream.clone();
    if stream.is_empty() || stream.chars().any(|c| c.is_whitespace() || c.is_control() || ".*>/\\".contains(c)) {
        return Err(ConfigError::single(
            "nats.stream",
            "must not be empty or contain whitespace, control characters, '.', '*', '>' or slashes",
        ));
    }
    let consumer = config.nats.consumer.clone();
    let subjects = if config.consumer_management.filter_subjects.is_empty() {
        vec![config.nats.subject.clone()]
    } else {
        config.consumer_management.filter_subjects.clone()
    };

    let mut publish = vec![
        // The account's JetStream domain (origin keys of a stream in a domain name it).
        "$JS.API.INFO".to_owned(),
        format!("$JS.API.STREAM.INFO.{stream}"),
        // The stream guard reads the oldest unsettled message's time (a stream with max_age).
        format!("$JS.API.STREAM.MSG.GET.{stream}"),
        format!("$JS.API.CONSUMER.INFO.{stream}.{consumer}"),
        format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"),
        format!("$JS.ACK.{stream}.{consumer}.>"),
    ];
    if config.consumer_management.mode != ConsumerMode::BindOnly {
        publish.push(format!("$JS.API.CONSUMER.CREATE.{stream}.{consumer}"));
        publish.push(format!("$JS.API.CONSUMER.CREATE.{stream}.{consumer}.>"));
    }
    if config.dead_letter.enabled
        && let Some(subject) = &config.dead_letter.subject
    {
        publish.push(subject.clone());
        // Start-up checks that a stream captures it (streams listed by subject).
        publish.push("$JS.API.STREAM.NAMES".to_owned());
    }
    if config.ledger.enabled
        && let Some(subject) = &config.ledger.subject
    {
        publish.push(subject.clone());
    }
    if config.stream_management.create_if_missing {
        publish.push(format!("$JS.API.STREAM.CREATE.{stream}"));
        if let Some(dlq_stream) = &config.stream_management.dead_letter_stream {
            publish.push(format!("$JS.API.STREAM.INFO.{dlq_stream}"));
            publish.push(format!("$JS.API.STREAM.CREATE.{dlq_stream}"));
        }
    }
    let rescue = rescue_plan(config, existing);
    if let Some(r) = &rescue {
        publish.extend([
            format!("$JS.API.STREAM.INFO.{}", r.stream),
            format!("$JS.API.CONSUMER.INFO.{}.{}", r.stream, r.consumer),
            format!("$JS.API.CONSUMER.MSG.NEXT.{}.{}", r.stream, r.consumer),
            format!("$JS.ACK.{}.{}.>", r.stream, r.consumer),
        ]);
        if config.consumer_management.mode != ConsumerMode::BindOnly {
            publish.push(format!("$JS.API.STREAM.CREATE.{}", r.stream));
            publish.push(format!("$JS.API.CONSUMER.CREATE.{}.{}", r.stream, r.consumer));
        }
    }
    let guard = guard_plan(config);
    if let Some(g) = &guard {
        let kv = format!("KV_{}", g.bucket);
        publish.extend([
            format!("$JS.API.STREAM.INFO.{kv}"),
            format!("$JS.API.STREAM.MSG.GET.{kv}"),
            format!("$JS.API.DIRECT.GET.{kv}.>"),
            format!("$KV.{}.{}", g.bucket, g.key),
        ]);
        if config.consumer_management.mode != ConsumerMode::BindOnly {
            publish.push(format!("$JS.API.STREAM.CREATE.{kv}"));
        }
    }
    let mut subscribe = vec!["_INBOX.>".to_owned()];
    if config.advisories.enabled {
        subscribe.extend(config.advisories.subjects.iter().cloned());
    }
    let mut seen = std::collections::BTreeSet::new();
    publish.retain(|p| seen.insert(p.clone()));
    let runtime = publish.iter().chain(&subscribe).cloned().collect();

    let administration = vec![
        format!("$JS.API.STREAM.CREATE.{stream}"),
        format!("$JS.API.STREAM.UPDATE.{stream}"),
        format!("$JS.API.STREAM.INFO.{stream}"),
        "$JS.API.STREAM.NAMES".to_owned(),
        format!("$JS.API.CONSUMER.CREATE.{stream}.{consumer}"),
        format!("$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{consumer}"),
    ];
    let program = sinks_runtime::program::name();
    let mut notes = vec![
        match existing {
            Existing::Unknown => format!("offline plan: {program} connected to nothing and changed nothing to produce it"),
            Existing::Missing => format!(
                "{program} read the server (changing nothing): consumer `{consumer}` does not exist yet, so the config's \
                 settings make it"
            ),
            Existing::MaxDeliver(max) => format!(
                "{program} read the server (changing nothing): consumer `{consumer}` exists with max_deliver {}",
                max.map_or_else(|| "unlimited".to_owned(), |m| m.to_string())
            ),
        },
        "apply stream and consumer changes with a separate administrative identity".to_owned(),
        format!(
            "if `{stream}` is a mirror or is sourced from other streams, also allow `$JS.API.STREAM.INFO.<name>` for each \
             stream it follows (and their own origins): the worker reads them to key each event by its origin \
             (docs/topology.md); without them an origin_sequence key is refused, never guessed"
        ),
        "the worker acknowledges only after its destination committed; no stream setting changes that".to_owned(),
        match config.consumer_management.mode {
            ConsumerMode::BindOnly => "consumer_management.mode is bind_only: create the durable consumer before the first run".to_owned(),
            _ => "the worker creates the durable consumer when it is missing (consumer_management.mode); with bind_only it needs no CREATE permission".to_owned(),
        },
    ];
    notes.push(match (&rescue, config.rescue.enabled) {
        (Some(r), _) if config.consumer_management.mode == ConsumerMode::BindOnly => format!(
            "rescue: with bind_only, create the capture stream and the rescue consumer (above) before the first run, or \
             the worker refuses to start{}",
            r.only_if.as_ref().map_or_else(String::new, |when| format!(" ({when})"))
        ),
        (Some(_), _) => "rescue: the worker creates the capture stream and the rescue consumer when they are missing; never delete the capture stream while messages can still exhaust their deliveries".to_owned(),
        (None, false) => "rescue is off: a message whose last allowed delivery is lost to a crash is dropped by the server".to_owned(),
        (None, true) => "rescue is not needed: the consumer redelivers without limit (no max_deliver)".to_owned(),
    });
    notes.push(match &guard {
        Some(g) => format!(
            "stream guard: the stream's identity is pinned in key-value bucket `{}` (key `{}`); {}",
            g.bucket,
            g.key,
            if config.consumer_management.mode == ConsumerMode::BindOnly {
                "with bind_only, create it (above) before the first run"
            } else {
                "the worker creates it when it is missing"
            }
        ),
        None => "stream_guard.identity is off: a stream deleted and re-created is caught only at the destination (sequence_reused)".to_owned(),
    });
    let create =
        resources::resources(config, &settings, rescue.as_ref().map(|r| (r.max_deliver, r.only_if.as_deref())));
    Ok(StreamPlan {
        warnings: warnings(&config.nats.stream, &settings),
        stream_guard: guard,
        stream,
        subjects,
        durable_consumer: consumer,
        recommended_stream_settings: settings,
        runtime_permissions: runtime,
        runtime_publish_permissions: publish,
        runtime_subscribe_permissions: subscribe,
        administration_permissions: administration,
        create,
        rescue,
        notes,
    })
}

/// What the server has of the durable consumer `config` names (`stream-plan --connect`):
/// connects once and reads, changing nothing. The error is a sentence for the operator.
pub(crate) async fn read_consumer(config: &Config) -> Result<Existing, String> {
    let connection = sinks_runtime::inspect::Connection::open(&config.nats)
        .await
        .map_err(|e| format!("cannot read the consumer: {e}"))?;
    Ok(match connection.consumer_max_deliver(&config.nats.stream, &config.nats.consumer).await? {
        None => Existing::Missing,
        Some(max) => Existing::MaxDeliver(max),
    })
}

/// The stream identity bucket of `config`, when `stream_guard.identity` is on.
fn guard_plan(config: &Config) -> Option<GuardPlan> {
    let guard = &config.stream_guard;
    if !guard.identity {
        return None;
    }
    Some(GuardPlan {
        bucket: guard.bucket.clone(),
        key: sinks_runtime::identity::record_key(&config.nats.stream, &config.nats.consumer),
    })
}

/// The exhaustion capture of `config` with `rescue` on (and a durable consumer), whenever a
/// `max_deliver` may apply: the existing consumer's when known, else the config's, else (an
/// offline plan without one) marked as needed only if the consumer turns out to have one.
fn rescue_plan(config: &Config, existing: Existing) -> Option<RescuePlan> {
    let rescue = &config.rescue;
    if !rescue.enabled || !config.nats.durable {
        return None;
    }
    let configured = config.consumer_management.max_deliver.and_then(|m| u64::try_from(m).ok()).filter(|m| *m > 0);
    let (max_deliver, only_if) = match existing {
        Existing::MaxDeliver(None) => return None,
        Existing::MaxDeliver(Some(max)) => (Some(max), None),
        Existing::Missing => (Some(configured?), None),
        Existing::Unknown => match configured {
            Some(max) => (Some(max), None),
            None => (None, Some(ONLY_IF_MAX_DELIVER.to_owned())),
        },
    };
    let (stream, consumer) = (&config.nats.stream, &config.nats.consumer);
    let capture = rescue.stream_name(stream, consumer);
    let subject = sinks_runtime::config::rescue::RescueConfig::advisory_subject(stream, consumer);
    let rescue_consumer = rescue.consumer_name(consumer);
    Some(RescuePlan { stream: capture, subject, consumer: rescue_consumer, max_deliver, only_if })
}

fn warnings(stream: &str, settings: &StreamSettings) -> Vec<String> {
    let mut warnings = Vec::new();
    if settings.replicas == 1 {
        warnings.push("replicas 1 keeps one copy: fine at the edge, no redundancy in a cluster".to_owned());
    }
    // Offline, the server's sync setting is unknown (`validate --connect` reads it).
    let sync = sinks_runtime::durability::SyncSetting::Unknown(format!(
        "stream-plan does not read it; `{} validate --connect` with nats.monitoring_url does",
        sinks_runtime::program::name()
    ));
    if settings.storage == STORAGE_TYPES[0]
        && let Some(lint) = sinks_runtime::durability::lint(stream, usize::from(settings.replicas), &sync)
    {
        warnings.push(lint);
    }
    if settings.storage == "memory" {
        warnings.push("memory storage does not survive a server restart".to_owned());
    }
    if settings.discard == "new" {
        warnings
            .push("discard new refuses publishes at the limits: producers must handle that backpressure".to_owned());
    }
    if settings.retention == "interest" {
        warnings.push(
            "interest retention deletes a message once every consumer acked it: nothing is left to replay or reconcile"
                .to_owned(),
        );
    }
    if settings.retention == "workqueue" {
        warnings.push(
            "workqueue retention allows one consumer per subject: other sinks cannot read the same events".to_owned(),
        );
    }
    if settings.duplicate_window_seconds < DEFAULT_DUPLICATE_WINDOW_SECONDS {
        warnings.push(format!(
            "a duplicate window under {DEFAULT_DUPLICATE_WINDOW_SECONDS} s may be shorter than producer retries"
        ));
    }
    warnings
}

/// Quotes `s` for a POSIX shell when it holds anything but safe characters.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.,/:=@%+".contains(c)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The plan as text for a terminal.
pub(crate) fn render_text(plan: &StreamPlan) -> String {
    let mut out = String::from("JetStream stream plan (offline)\n");
    out.push_str(&format!("stream: {}\ndurable consumer: {}\nsubjects:\n", plan.stream, plan.durable_consumer));
    for s in &plan.subjects {
        out.push_str(&format!("  - {s}\n"));
    }
    let s = &plan.recommended_stream_settings;
    out.push_str(&format!(
        "recommended stream settings:\n  retention: {}\n  discard: {}\n  storage: {}\n  replicas: {}\n  duplicate_window_seconds: {}\n",
        s.retention, s.discard, s.storage, s.replicas, s.duplicate_window_seconds
    ));
    let section = |out: &mut String, title: &str, items: &[String]| {
        out.push_str(title);
        out.push('\n');
        for item in items {
            out.push_str(&format!("  - {item}\n"));
        }
    };
    section(&mut out, "runtime permissions, publish:", &plan.runtime_publish_permissions);
    section(&mut out, "runtime permissions, subscribe:", &plan.runtime_subscribe_permissions);
    section(&mut out, "administration permissions (a separate identity):", &plan.administration_permissions);
    if let Some(r) = &plan.rescue {
        out.push_str(&format!(
            "exhaustion capture (rescue):\n  stream: {}\n  subject: {}\n  rescue consumer: {}\n",
            r.stream, r.subject, r.consumer
        ));
        match (&r.only_if, r.max_deliver) {
            (Some(when), _) => out.push_str(&format!("  needed {when}\n")),
            (None, Some(max)) => out.push_str(&format!("  needed: the consumer has max_deliver {max}\n")),
            (None, None) => {}
        }
    }
    if let Some(g) = &plan.stream_guard {
        out.push_str(&format!("stream identity (stream_guard):\n  bucket: {}\n  key: {}\n", g.bucket, g.key));
    }
    out.push_str("create, in this order, with the nats CLI (natscli; NATS_URL or --server names the server):\n");
    for r in &plan.create {
        let when = r.only_if.as_ref().map_or_else(String::new, |w| format!(" (needed {w})"));
        out.push_str(&format!("  # {}: {}{when}\n  {}\n", r.what, r.name, r.nats));
    }
    out.push_str("or with the JetStream API (request on the subject, JSON body):\n");
    for r in &plan.create {
        out.push_str(&format!("  {} {}\n", r.api_subject, r.api_body));
    }
    section(&mut out, "notes:", &plan.notes);
    if !plan.warnings.is_empty() {
        section(&mut out, "warnings:", &plan.warnings);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(extra: serde_json::Value) -> Config {
        let mut base = serde_json::json!({
            "nats": {"url": "nats://127.0.0.1:4222", "stream": "ORDERS", "consumer": "orders-sink", "subject": "orders.>"},
            "sink": {"type": "blackhole"}
        });
        if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        Config::from_value(base).unwrap()
    }

    fn defaults() -> StreamSettings {
        StreamSettings::new("limits", "old", "file", 1, 120).unwrap()
    }

    #[test]
    fn permissions_follow_what_the_config_makes_the_worker_do() {
        let p = plan(&config(serde_json::json!({})), defaults(), Existing::Unknown).unwrap();
        assert!(p.runtime_publish_permissions.contains(&"$JS.API.CONSUMER.MSG.NEXT.ORDERS.orders-sink".to_owned()));
        assert!(p.runtime_publish_permissions.contains(&"$JS.API.CONSUMER.CREATE.ORDERS.orders-sink".to_owned()));
        assert!(
            !p.runtime_publish_permissions.contains(&"$JS.API.STREAM.CREATE.ORDERS".to_owned()),
            "no stream creation"
        );
        assert!(
            p.runtime_publish_permissions.contains(&"$JS.API.STREAM.CREATE.KV_nats_sinks_stream_guard".to_owned()),
            "the guard's bucket is made by the worker outside bind_only"
        );
        assert_eq!(p.runtime_subscribe_permissions, ["_INBOX.>"]);
        assert_eq!(p.subjects, ["orders.>"]);

        let bind = config(serde_json::json!({
            "consumer_management": {"mode": "bind_only", "filter_subjects": ["orders.eu.>", "orders.us.>"]},
            "dead_letter": {"enabled": true, "subject": "dlq.orders"}
        }));
        let p = plan(&bind, defaults(), Existing::Unknown).unwrap();
        assert!(!p.runtime_publish_permissions.iter().any(|x| x.contains("CONSUMER.CREATE")));
        assert!(p.runtime_publish_permissions.contains(&"dlq.orders".to_owned()));
        assert!(
            p.runtime_publish_permissions.contains(&"$JS.API.STREAM.NAMES".to_owned()),
            "start-up looks up the stream that captures the DLQ subject"
        );
        let full = config(serde_json::json!({
            "ledger": {"enabled": true, "subject": "ledger.orders"},
            "advisories": {"enabled": true, "subjects": ["$JS.EVENT.ADVISORY.CONSUMER.>"]},
        }));
        let all = plan(&full, defaults(), Existing::Unknown).unwrap();
        assert!(all.runtime_publish_permissions.contains(&"ledger.orders".to_owned()));
        assert!(!all.runtime_publish_permissions.contains(&"$JS.API.STREAM.NAMES".to_owned()), "no DLQ, no lookup");
        assert_eq!(all.runtime_subscribe_permissions, ["_INBOX.>", "$JS.EVENT.ADVISORY.CONSUMER.>"]);
        let unique: std::collections::BTreeSet<&String> = all.runtime_publish_permissions.iter().collect();
        assert_eq!(unique.len(), all.runtime_publish_permissions.len(), "each subject once");
        assert_eq!(p.subjects, ["orders.eu.>", "orders.us.>"]);
        assert!(p.create[0].nats.contains("--subjects 'orders.eu.>,orders.us.>'"), "{}", p.create[0].nats);
    }

    #[test]
    fn with_a_max_deliver_the_plan_has_the_capture_stream_and_its_permissions() {
        // No max_deliver in the config: the capture is planned, marked as needed only if the
        // consumer has one; --connect decides by the consumer on the server.
        let p = plan(&config(serde_json::json!({})), defaults(), Existing::Unknown).unwrap();
        let r = p.rescue.as_ref().unwrap();
        assert!(r.only_if.as_deref().is_some_and(|w| w.contains("--connect")), "{:?}", r.only_if);
        assert!(p.create.iter().any(|c| c.what.contains("capture") && c.only_if.is_some()));
        assert!(render_text(&p).contains("(needed only if the consumer has a max_deliver"), "{}", render_text(&p));
        let unlimited = plan(&config(serde_json::json!({})), defaults(), Existing::MaxDeliver(None)).unwrap();
        assert!(unlimited.rescue.is_none() && !unlimited.create.iter().any(|c| c.what.contains("capture")));
        let set_by_admin = plan(&config(serde_json::json!({})), defaults(), Existing::MaxDeliver(Some(5))).unwrap();
        let r = set_by_admin.rescue.as_ref().unwrap();
        assert_eq!((r.max_deliver, r.only_if.as_deref()), (Some(5), None));
        assert!(plan(&config(serde_json::json!({})), defaults(), Existing::Missing).unwrap().rescue.is_none());
        let bind = config(serde_json::json!({"consumer_management": {"mode": "bind_only", "max_deliver": 3}}));
        let p = plan(&bind, defaults(), Existing::Unknown).unwrap();
        let r = p.rescue.as_ref().unwrap();
        assert_eq!(r.stream, "NATS_SINKS_RESCUE_ORDERS_orders-sink");
        assert_eq!(r.subject, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.orders-sink");
        let made: Vec<&str> = p.create.iter().map(|c| c.nats.as_str()).collect();
        assert!(made.iter().any(|c| c.starts_with("nats stream add NATS_SINKS_RESCUE_ORDERS_orders-sink --subjects '$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.orders-sink'")), "{made:?}");
        assert!(
            made.iter().any(|c| c.contains("consumer add NATS_SINKS_RESCUE_ORDERS_orders-sink orders-sink_rescue")),
            "{made:?}"
        );
        for needed in [
            "$JS.API.STREAM.MSG.GET.ORDERS",
            "$JS.API.CONSUMER.MSG.NEXT.NATS_SINKS_RESCUE_ORDERS_orders-sink.orders-sink_rescue",
        ] {
            assert!(p.runtime_publish_permissions.contains(&needed.to_owned()), "{needed}");
        }
        assert!(
            !p.runtime_publish_permissions.iter().any(|x| x.contains("STREAM.CREATE")),
            "bind_only creates nothing"
        );
        assert!(render_text(&p).contains("exhaustion capture (rescue)"));
        let off = config(serde_json::json!({"consumer_management": {"max_deliver": 3}, "rescue": {"enabled": false}}));
        let p = plan(&off, defaults(), Existing::Unknown).unwrap();
        assert!(p.rescue.is_none());
        assert!(p.notes.iter().any(|n| n.contains("rescue is off")));
    }

    #[test]
    fn choices_are_checked_and_risky_ones_warned_about() {
        assert_eq!(StreamSettings::new("limits", "old", "file", 6, 120).unwrap_err().issues[0].path, "--replicas");
        assert_eq!(StreamSettings::new("forever", "old", "file", 1, 120).unwrap_err().issues[0].path, "--retention");
        assert_eq!(
            StreamSettings::new("limits", "old", "file", 1, 0).unwrap_err().issues[0].path,
            "--duplicate-window-seconds"
        );
        let risky = StreamSettings::new("WorkQueue", "new", "memory", 3, 30).unwrap();
        assert_eq!(risky.retention, "workqueue");
        let p = plan(&config(serde_json::json!({})), risky, Existing::Unknown).unwrap();
        assert_eq!(p.warnings.len(), 4, "{:?}", p.warnings);
        let single = plan(&config(serde_json::json!({})), defaults(), Existing::Unknown).unwrap();
        assert!(single.warnings.iter().any(|w| w.contains("sync setting is unknown")), "{:?}", single.warnings);
        let calm = plan(
            &config(serde_json::json!({})),
            StreamSettings::new("limits", "old", "file", 3, 120).unwrap(),
            Existing::Unknown,
        )
        .unwrap();
        assert!(calm.warnings.is_empty(), "{:?}", calm.warnings);
        assert!(render_text(&calm).contains("nats stream add ORDERS --subjects 'orders.>' --retention limits"));
    }

    #[test]
    fn everything_the_config_needs_is_planned_in_order() {
        let full = config(serde_json::json!({
            "consumer_management": {"mode": "bind_only", "max_deliver": 5, "ack_wait_seconds": 10},
            "dead_letter": {"enabled": true, "subject": "dlq.orders"},
            "ledger": {"enabled": true, "subject": "ledger.orders"},
        }));
        let p = plan(&full, defaults(), Existing::Unknown).unwrap();
        let what: Vec<&str> = p.create.iter().map(|c| c.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "source stream",
                "dead-letter stream",
                "ledger stream",
                "exhaustion capture stream (rescue)",
                "durable consumer",
                "rescue consumer",
                "stream guard bucket"
            ]
        );
        let consumer = &p.create[4];
        assert_eq!(
            consumer.nats,
            "nats consumer add ORDERS orders-sink --pull --ack explicit --deliver all --replay instant --filter 'orders.>' \
             --wait 10000ms --max-deliver 5 --description nats-sinks --defaults"
        );
        assert_eq!(consumer.api_subject, "$JS.API.CONSUMER.CREATE.ORDERS.orders-sink");
        assert_eq!(consumer.api_body["config"]["max_deliver"], 5);
        assert_eq!(p.create[1].api_body["subjects"], serde_json::json!(["dlq.orders"]));
        assert_eq!(p.create[6].nats, "nats kv add nats_sinks_stream_guard --history 5 --replicas 1 --storage file");
        let text = render_text(&p);
        assert!(
            text.contains("# dead-letter stream: ORDERS_DLQ\n  nats stream add ORDERS_DLQ --subjects dlq.orders"),
            "{text}"
        );
        assert!(text.contains("$JS.API.STREAM.CREATE.ORDERS_LEDGER {"), "{text}");
    }
}
