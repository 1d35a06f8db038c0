//! What start-up tells the operator: the servers it reaches (host and port, never
//! credentials), the one line that says what this run consumes and where it writes, and the
//! warnings about settings that work but will surprise (numbers included).

use std::time::Duration;

use crate::config::{Config, SinkSection, redact};

/// `host:port` of every configured NATS server, without scheme, credentials or path.
pub(crate) fn servers(config: &Config) -> String {
    config.nats.servers().iter().map(|url| host_port(url)).collect::<Vec<_>>().join(",")
}

/// `host:port` of one server URL (`nats://user:pass@host:4222/x` → `host:4222`).
pub(crate) fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split(['/', '?']).next().unwrap_or(rest).to_owned()
}

/// Fields of a sink section that say where it writes (never secrets: the section is
/// redacted first).
const LOCATORS: [&str; 16] = [
    "directory",
    "url",
    "endpoint",
    "bucket",
    "prefix",
    "host",
    "port",
    "database",
    "table",
    "table_name",
    "cache_name",
    "namespace",
    "dsn",
    "service_name",
    "region",
    "mode",
];

/// The destination in one short, redacted phrase: the sink's type and where it writes.
pub(crate) fn destination(section: &SinkSection) -> String {
    let mut value = serde_json::Value::Object(section.0.clone());
    redact::redact(&mut value);
    let mut parts = vec![section.kind().unwrap_or("?").to_owned()];
    for key in LOCATORS {
        match value.get(key) {
            Some(serde_json::Value::String(s)) => parts.push(format!("{key}={s}")),
            Some(v @ serde_json::Value::Number(_)) => parts.push(format!("{key}={v}")),
            _ => {}
        }
    }
    parts.join(" ")
}

/// The warnings of settings that will not do what the operator likely expects, each with
/// its numbers: a consumer that hands out fewer messages than the batches want, AckWait
/// shorter than the write floor, a DLQ that is off.
pub(crate) fn warnings(config: &Config, max_ack_pending: Option<i64>, ack_wait: Duration) -> Vec<String> {
    let mut out = Vec::new();
    let delivery = &config.delivery;
    let wanted = delivery.batch_size * (delivery.max_in_flight_batches + 1);
    if let Some(pending) = max_ack_pending.filter(|p| *p > 0)
        && (pending as usize) < wanted
    {
        out.push(format!(
            "the consumer hands out at most {pending} unacknowledged messages (max_ack_pending), but \
             delivery.batch_size {} with {} batches in flight (and one fetched ahead) wants up to {wanted}: \
             fetches will come back short; raise consumer_management.max_ack_pending or lower the batches",
            delivery.batch_size, delivery.max_in_flight_batches
        ));
    }
    if ack_wait < Duration::from_millis(1250) && !delivery.in_progress.enabled {
        out.push(format!(
            "the consumer's AckWait is {} ms: a write gets at least 1000 ms, more than 80 % of it; \
             raise consumer_management.ack_wait_seconds",
            ack_wait.as_millis()
        ));
    }
    if !config.dead_letter.enabled {
        out.push(
            "dead_letter.enabled is false (the reference's default): a message that can never be written is \
             retried for ever; set dead_letter.enabled and dead_letter.subject to set it aside"
                .to_owned(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: serde_json::Value) -> Config {
        let mut v = serde_json::json!({
            "nats": {"url": "nats://nats.example:4222", "stream": "S", "consumer": "c", "subject": "s.>"},
            "sink": {"type": "http", "url": "https://user:pw@api.example/ingest", "headers_env": {"Authorization": "TOKEN"}, "max_retries": 3},
        });
        if let (Some(b), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                b.insert(k.clone(), x.clone());
            }
        }
        Config::from_value(v).unwrap()
    }

    #[test]
    fn servers_and_destination_never_show_credentials() {
        let c = config(serde_json::json!({}));
        assert_eq!(servers(&c), "nats.example:4222");
        // The config refuses credentials in `nats.url`; the log line would drop them anyway.
        assert_eq!(host_port("nats://app:secret@nats.example:4222"), "nats.example:4222");
        assert_eq!(host_port("tls://a:1/x?y"), "a:1");
        assert_eq!(host_port("b:2"), "b:2");
        let d = destination(&c.sink);
        assert_eq!(d, "http url=https://********@api.example/ingest");
        let file = SinkSection(serde_json::json!({"type": "file", "directory": "/out"}).as_object().unwrap().clone());
        assert_eq!(destination(&file), "file directory=/out");
    }

    #[test]
    fn warnings_give_numbers() {
        let c = config(serde_json::json!({"delivery": {"batch_size": 500, "max_in_flight_batches": 4}}));
        let w = warnings(&c, Some(1000), Duration::from_secs(30));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("at most 1000") && w[0].contains("wants up to 2500"), "{}", w[0]);
        assert!(w[1].contains("dead_letter.enabled is false"));
        let calm = config(serde_json::json!({"dead_letter": {"enabled": true, "subject": "dlq.s"}}));
        assert!(warnings(&calm, None, Duration::from_secs(30)).is_empty());
        assert!(warnings(&calm, None, Duration::from_secs(1))[0].contains("AckWait is 1000 ms"));
    }
}
