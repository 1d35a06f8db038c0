//! `nats-sink stream-plan`: an offline plan of everything on the server a config needs (the
//! source stream and its durable consumer, the dead-letter stream, the ledger's stream, the
//! rescue's capture stream and consumer, the stream guard's bucket; `resources`), each as a
//! `nats` command that runs as printed and as the JetStream API request, with the permissions
//! the worker needs at run time. It connects to nothing and changes nothing; its output is a
//! review artifact for whoever administers NATS, and the commands create what a
//! `bind_only` worker then finds.
//!
//! Unlike the reference's fixed list, the runtime permissions follow what this config makes
//! the worker do: consumer creation only when `consumer_management.mode` may create, the DLQ
//! subject only when dead-lettering is on, stream creation only with
//! `stream_management.create_if_missing`. With a `max_deliver` and `rescue` on, the plan
//! includes the stream capturing the consumer's exhaustion advisories, the rescue consumer,
//! the commands that create both (needed before the first run with `bind_only`) and the
//! permissions the rescue uses.

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
}

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
            storage: choice(storage, "storage", &["file", "memory"])?,
            replicas,
            duplicate_window_seconds,
        })
    }
}

/// Builds the plan from a validated config; pure.
pub(crate) fn plan(config: &Config, settings: StreamSettings) -> Result<StreamPlan, ConfigError> {
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
        format!("$JS.API.STREAM.INFO.{stream}"),
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
    }
    if config.stream_management.create_if_missing {
        publish.push(format!("$JS.API.STREAM.CREATE.{stream}"));
        if let Some(dlq_stream) = &config.stream_management.dead_letter_stream {
            publish.push(format!("$JS.API.STREAM.INFO.{dlq_stream}"));
            publish.push(format!("$JS.API.STREAM.CREATE.{dlq_stream}"));
        }
    }
    let rescue = rescue_plan(config);
    if let Some(r) = &rescue {
        publish.extend([
            format!("$JS.API.STREAM.INFO.{}", r.stream),
            format!("$JS.API.STREAM.MSG.GET.{stream}"),
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
    let subscribe = vec!["_INBOX.>".to_owned()];
    let runtime = publish.iter().chain(&subscribe).cloned().collect();

    let administration = vec![
        format!("$JS.API.STREAM.CREATE.{stream}"),
        format!("$JS.API.STREAM.UPDATE.{stream}"),
        format!("$JS.API.STREAM.INFO.{stream}"),
        "$JS.API.STREAM.NAMES".to_owned(),
        format!("$JS.API.CONSUMER.CREATE.{stream}.{consumer}"),
        format!("$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{consumer}"),
    ];
    let mut notes = vec![
        "offline plan: nats-sink connected to nothing and changed nothing to produce it".to_owned(),
        "apply stream and consumer changes with a separate administrative identity".to_owned(),
        "the worker acknowledges only after its destination committed; no stream setting changes that".to_owned(),
        match config.consumer_management.mode {
            ConsumerMode::BindOnly => "consumer_management.mode is bind_only: create the durable consumer before the first run".to_owned(),
            _ => "the worker creates the durable consumer when it is missing (consumer_management.mode); with bind_only it needs no CREATE permission".to_owned(),
        },
    ];
    notes.push(match (&rescue, config.rescue.enabled) {
        (Some(_), _) if config.consumer_management.mode == ConsumerMode::BindOnly => {
            "rescue: with bind_only, create the capture stream and the rescue consumer (above) before the first run, or the worker refuses to start".to_owned()
        }
        (Some(_), _) => "rescue: the worker creates the capture stream and the rescue consumer when they are missing; never delete the capture stream while messages can still exhaust their deliveries".to_owned(),
        (None, false) => "rescue is off: a message whose last allowed delivery is lost to a crash is dropped by the server".to_owned(),
        (None, true) => "rescue applies when the consumer has a max_deliver (consumer_management.max_deliver, or an existing consumer's): the worker then captures its exhaustion advisories".to_owned(),
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
    let create = resources::resources(config, &settings);
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

/// The exhaustion capture of `config`, when it has a `max_deliver` and `rescue` is on.
fn rescue_plan(config: &Config) -> Option<RescuePlan> {
    let rescue = &config.rescue;
    config.consumer_management.max_deliver.filter(|m| *m > 0 && rescue.enabled && config.nats.durable)?;
    let (stream, consumer) = (&config.nats.stream, &config.nats.consumer);
    let capture = rescue.stream_name(stream, consumer);
    let subject = sinks_runtime::config::rescue::RescueConfig::advisory_subject(stream, consumer);
    let rescue_consumer = rescue.consumer_name(consumer);
    Some(RescuePlan { stream: capture, subject, consumer: rescue_consumer })
}

fn warnings(stream: &str, settings: &StreamSettings) -> Vec<String> {
    let mut warnings = Vec::new();
    if settings.replicas == 1 {
        warnings.push("replicas 1 keeps one copy: fine at the edge, no redundancy in a cluster".to_owned());
    }
    // Offline, the server's sync setting is unknown (`validate --connect` reads it).
    let sync = sinks_runtime::durability::SyncSetting::Unknown(
        "stream-plan connects to nothing; `nats-sink validate --connect` with nats.monitoring_url reads it".into(),
    );
    if settings.storage == "file"
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
    }
    if let Some(g) = &plan.stream_guard {
        out.push_str(&format!("stream identity (stream_guard):\n  bucket: {}\n  key: {}\n", g.bucket, g.key));
    }
    out.push_str("create, in this order, with the nats CLI (natscli; NATS_URL or --server names the server):\n");
    for r in &plan.create {
        out.push_str(&format!("  # {}: {}\n  {}\n", r.what, r.name, r.nats));
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
        let p = plan(&config(serde_json::json!({})), defaults()).unwrap();
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
        let p = plan(&bind, defaults()).unwrap();
        assert!(!p.runtime_publish_permissions.iter().any(|x| x.contains("CONSUMER.CREATE")));
        assert!(p.runtime_publish_permissions.contains(&"dlq.orders".to_owned()));
        assert_eq!(p.subjects, ["orders.eu.>", "orders.us.>"]);
        assert!(p.create[0].nats.contains("--subjects 'orders.eu.>,orders.us.>'"), "{}", p.create[0].nats);
    }

    #[test]
    fn with_a_max_deliver_the_plan_has_the_capture_stream_and_its_permissions() {
        let p = plan(&config(serde_json::json!({})), defaults()).unwrap();
        assert!(p.rescue.is_none(), "no max_deliver: nothing to capture");
        let bind = config(serde_json::json!({"consumer_management": {"mode": "bind_only", "max_deliver": 3}}));
        let p = plan(&bind, defaults()).unwrap();
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
        let p = plan(&off, defaults()).unwrap();
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
        let p = plan(&config(serde_json::json!({})), risky).unwrap();
        assert_eq!(p.warnings.len(), 4, "{:?}", p.warnings);
        let single = plan(&config(serde_json::json!({})), defaults()).unwrap();
        assert!(single.warnings.iter().any(|w| w.contains("sync setting is unknown")), "{:?}", single.warnings);
        let calm = plan(&config(serde_json::json!({})), StreamSettings::new("limits", "old", "file", 3, 120).unwrap())
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
        let p = plan(&full, defaults()).unwrap();
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
