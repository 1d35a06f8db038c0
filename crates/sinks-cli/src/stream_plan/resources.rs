//! Everything on the server a config needs, in the order to create it: the source stream,
//! the dead-letter stream, the ledger's stream, the rescue's capture stream, the durable
//! consumer, the rescue consumer and the stream guard's bucket. Each comes as a `nats`
//! (natscli) command that runs as printed and as the JetStream API request that does the
//! same (subject and JSON body), so an administrator can apply it with either; run with
//! `consumer_management.mode: bind_only`, the sink then finds everything it checks.

use std::time::Duration;

use async_nats::jetstream::consumer::pull;
use async_nats::jetstream::stream::{self, DiscardPolicy, RetentionPolicy, StorageType};
use serde::Serialize;
use sinks_runtime::config::Config;

use super::{StreamSettings, shell_quote};

/// One thing to create.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Resource {
    /// What it is for (`source stream`, `dead-letter stream`, …).
    pub(crate) what: String,
    /// Its name.
    pub(crate) name: String,
    /// The natscli command that creates it, as it runs.
    pub(crate) nats: String,
    /// The JetStream API subject of the same request.
    pub(crate) api_subject: String,
    /// Its JSON body.
    pub(crate) api_body: serde_json::Value,
    /// `None`: needed. Else when it is needed (the rescue's, without a known `max_deliver`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) only_if: Option<String>,
}

fn command(parts: &[String]) -> String {
    parts.iter().map(|p| shell_quote(p)).collect::<Vec<_>>().join(" ")
}

fn owned(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_owned()).collect()
}

/// natscli's spelling of a duration: whole seconds.
fn duration(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

/// A stream of `subjects` under the operator's `settings` (retention and discard only for the
/// source stream; the others keep what they hold, old first).
fn stream(
    what: &str,
    name: &str,
    subjects: &[String],
    settings: &StreamSettings,
    source: bool,
    max_age: Option<Duration>,
) -> Resource {
    let retention = if source { settings.retention.as_str() } else { "limits" };
    let discard = if source { settings.discard.as_str() } else { "old" };
    let window = Duration::from_secs(settings.duplicate_window_seconds);
    let mut parts = owned(&["nats", "stream", "add", name, "--subjects"]);
    parts.push(subjects.join(","));
    parts.extend(owned(&["--retention", retention, "--discard", discard, "--storage", &settings.storage]));
    parts.extend([
        "--replicas".to_owned(),
        settings.replicas.to_string(),
        "--dupe-window".to_owned(),
        duration(window),
    ]);
    if let Some(age) = max_age {
        parts.extend(["--max-age".to_owned(), duration(age)]);
    }
    parts.push("--defaults".to_owned());
    let config = stream::Config {
        name: name.to_owned(),
        subjects: subjects.to_vec(),
        retention: match retention {
            "interest" => RetentionPolicy::Interest,
            "workqueue" => RetentionPolicy::WorkQueue,
            _ => RetentionPolicy::Limits,
        },
        discard: if discard == "new" { DiscardPolicy::New } else { DiscardPolicy::Old },
        storage: if settings.storage == "memory" { StorageType::Memory } else { StorageType::File },
        num_replicas: usize::from(settings.replicas),
        duplicate_window: window,
        max_age: max_age.unwrap_or_default(),
        ..Default::default()
    };
    Resource {
        what: what.to_owned(),
        name: name.to_owned(),
        nats: command(&parts),
        api_subject: format!("$JS.API.STREAM.CREATE.{name}"),
        api_body: serde_json::to_value(&config).unwrap_or_default(),
        only_if: None,
    }
}

/// The durable consumer `config` reads, as start-up makes it (`setup::consumer_plan`): only
/// what the config sets is given, so the sink's drift check finds nothing to complain about.
fn consumer(config: &Config) -> Resource {
    let cm = &config.consumer_management;
    let desired = sinks_runtime::setup::consumer_plan(config);
    let (stream, name) = (&config.nats.stream, &config.nats.consumer);
    let deliver = match cm.deliver_policy {
        sinks_runtime::config::DeliverPolicy::All => "all",
        sinks_runtime::config::DeliverPolicy::Last => "last",
        sinks_runtime::config::DeliverPolicy::New => "new",
        sinks_runtime::config::DeliverPolicy::LastPerSubject => "subject",
    };
    let replay = match cm.replay_policy {
        sinks_runtime::config::ReplayPolicy::Instant => "instant",
        sinks_runtime::config::ReplayPolicy::Original => "original",
    };
    let nats = if cm.backoff_seconds.is_some() {
        // natscli makes backoff policies of its own; an explicit list goes in as JSON.
        let json = serde_json::to_string(&desired).unwrap_or_default();
        format!(
            "nats consumer add {} {} --config /dev/stdin <<'EOF'\n{json}\nEOF",
            shell_quote(stream),
            shell_quote(name)
        )
    } else {
        let mut parts = owned(&["nats", "consumer", "add", stream, name, "--pull", "--ack", "explicit"]);
        parts.extend(owned(&["--deliver", deliver, "--replay", replay]));
        for filter in cm.effective_filters(&config.nats.subject) {
            parts.extend(["--filter".to_owned(), filter]);
        }
        if let Some(secs) = cm.ack_wait_seconds {
            parts.extend(["--wait".to_owned(), format!("{}ms", (secs * 1000.0).round() as u64)]);
        }
        if let Some(m) = cm.max_deliver {
            parts.extend(["--max-deliver".to_owned(), m.to_string()]);
        }
        if let Some(m) = cm.max_ack_pending {
            parts.extend(["--max-pending".to_owned(), m.to_string()]);
        }
        if let Some(m) = cm.max_waiting {
            parts.extend(["--max-waiting".to_owned(), m.to_string()]);
        }
        match cm.headers_only {
            Some(true) => parts.push("--headers-only".to_owned()),
            Some(false) => parts.push("--no-headers-only".to_owned()),
            None => {}
        }
        if let Some(n) = cm.num_replicas {
            parts.extend(["--replicas".to_owned(), n.to_string()]);
        }
        if cm.memory_storage == Some(true) {
            parts.push("--memory".to_owned());
        }
        for (k, v) in &cm.metadata {
            parts.extend(["--metadata".to_owned(), format!("{k}:{v}")]);
        }
        parts.extend(owned(&["--description", "nats-sinks", "--defaults"]));
        command(&parts)
    };
    Resource {
        what: "durable consumer".into(),
        name: name.clone(),
        nats,
        api_subject: format!("$JS.API.CONSUMER.CREATE.{stream}.{name}"),
        api_body: serde_json::json!({"stream_name": stream, "config": desired, "action": "create"}),
        only_if: None,
    }
}

/// The rescue consumer of the capture stream `capture`.
fn rescue_consumer(capture: &str, name: &str) -> Resource {
    let parts = owned(&[
        "nats",
        "consumer",
        "add",
        capture,
        name,
        "--pull",
        "--ack",
        "explicit",
        "--deliver",
        "all",
        "--wait",
        "60s",
        "--max-deliver=-1",
        "--description",
        "nats-sinks rescue",
        "--defaults",
    ]);
    let desired = pull::Config {
        durable_name: Some(name.to_owned()),
        name: Some(name.to_owned()),
        description: Some("nats-sinks rescue".into()),
        ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
        ack_wait: Duration::from_secs(60),
        ..Default::default()
    };
    Resource {
        what: "rescue consumer".into(),
        name: name.to_owned(),
        nats: command(&parts),
        api_subject: format!("$JS.API.CONSUMER.CREATE.{capture}.{name}"),
        api_body: serde_json::json!({"stream_name": capture, "config": desired, "action": "create"}),
        only_if: None,
    }
}

/// The stream guard's key-value bucket: the stream `KV_<bucket>` as natscli and async-nats
/// make it.
fn bucket(name: &str, replicas: u8) -> Resource {
    let mut parts =
        owned(&["nats", "kv", "add", name, "--history", "5", "--replicas", &replicas.to_string(), "--storage"]);
    parts.push(super::STORAGE_TYPES[0].to_owned());
    let config = stream::Config {
        name: format!("KV_{name}"),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 5,
        discard: DiscardPolicy::New,
        storage: StorageType::File,
        num_replicas: usize::from(replicas),
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        duplicate_window: Duration::from_secs(120),
        max_age: Duration::ZERO,
        description: Some("nats-sinks: the identity of each consumed stream, per consumer".into()),
        ..Default::default()
    };
    Resource {
        what: "stream guard bucket".into(),
        name: name.to_owned(),
        nats: command(&parts),
        api_subject: format!("$JS.API.STREAM.CREATE.KV_{name}"),
        api_body: serde_json::to_value(&config).unwrap_or_default(),
        only_if: None,
    }
}

/// The name of the stream that captures the dead letters: `stream_management.dead_letter_stream`
/// when set, else `<stream>_DLQ`.
pub(crate) fn dead_letter_stream(config: &Config) -> String {
    config.stream_management.dead_letter_stream.clone().unwrap_or_else(|| format!("{}_DLQ", config.nats.stream))
}

/// The name of the stream that keeps the ledger's receipts: `<stream>_LEDGER`.
pub(crate) fn ledger_stream(config: &Config) -> String {
    format!("{}_LEDGER", config.nats.stream)
}

/// Everything `config` needs on the server, in the order to create it; `rescue` is the
/// rescue's `max_deliver` and when it is needed (see `super::RescuePlan`), when it applies.
pub(crate) fn resources(
    config: &Config,
    settings: &StreamSettings,
    rescue: Option<(Option<u64>, Option<&str>)>,
) -> Vec<Resource> {
    let mut out = Vec::new();
    let source_subjects = if config.stream_management.subjects.is_empty() {
        config.consumer_management.effective_filters(&config.nats.subject)
    } else {
        config.stream_management.subjects.clone()
    };
    out.push(stream("source stream", &config.nats.stream, &source_subjects, settings, true, None));
    if let (true, Some(subject)) = (config.dead_letter.enabled, &config.dead_letter.subject) {
        out.push(stream(
            "dead-letter stream",
            &dead_letter_stream(config),
            std::slice::from_ref(subject),
            settings,
            false,
            None,
        ));
    }
    if let (true, Some(subject)) = (config.ledger.enabled, &config.ledger.subject) {
        out.push(stream("ledger stream", &ledger_stream(config), std::slice::from_ref(subject), settings, false, None));
    }
    let capture = rescue.map(|_| config.rescue.stream_name(&config.nats.stream, &config.nats.consumer));
    let only_if = rescue.and_then(|(_, when)| when.map(str::to_owned));
    if let Some(capture) = &capture {
        let subject =
            sinks_runtime::config::rescue::RescueConfig::advisory_subject(&config.nats.stream, &config.nats.consumer);
        let age = Duration::from_secs(config.rescue.max_age_seconds);
        let mut made = stream("exhaustion capture stream (rescue)", capture, &[subject], settings, false, Some(age));
        made.only_if.clone_from(&only_if);
        out.push(made);
    }
    if config.nats.durable {
        out.push(consumer(config));
    }
    if let Some(capture) = &capture {
        let mut made = rescue_consumer(capture, &config.rescue.consumer_name(&config.nats.consumer));
        made.only_if = only_if;
        out.push(made);
    }
    if config.stream_guard.identity {
        out.push(bucket(&config.stream_guard.bucket, settings.replicas));
    }
    out
}
