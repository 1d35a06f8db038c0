//! The broker durability lint: a stream with one replica on a server that does not fsync
//! every write can lose messages it already acknowledged to their publisher.
//!
//! nats-server writes stream data to disk at once but syncs it only every `sync_interval`
//! (two minutes by default), so after a power loss or kernel crash the last minutes of a
//! single-replica stream can be gone, before any sink saw them: nothing downstream can bring
//! them back. With three replicas a write is acknowledged once a majority holds it; with
//! `jetstream { sync_interval: always }` every write is synced before it is acknowledged.
//!
//! The sink learns the server's setting from its monitoring endpoint (`nats.monitoring_url`,
//! `/varz`: `jetstream.config.sync_always` and `sync_interval`). It cannot learn it over the
//! client protocol, so without that URL (or in a build without the `monitoring` feature)
//! the setting is unknown, and the lint says so together with the default it must assume.

use std::time::Duration;

/// What the server does about syncing stream writes to disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncSetting {
    /// Every write is synced before it is acknowledged (`sync_interval: always`).
    Always,
    /// Writes are synced every this long.
    Interval(Duration),
    /// Not known; the text says why.
    Unknown(String),
}

/// nats-server's default `sync_interval`.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(120);

/// The warning for stream `stream` with `replicas` replicas on a server with `sync`, or
/// `None` when an acknowledged write survives a power loss (three replicas or more, or every
/// write synced). Pure.
pub fn lint(stream: &str, replicas: usize, sync: &SyncSetting) -> Option<String> {
    if replicas >= 3 || *sync == SyncSetting::Always {
        return None;
    }
    let fix = "set `jetstream { sync_interval: always }` in the server's configuration, or give the stream 3 replicas";
    let shape = if replicas <= 1 { "one replica".to_owned() } else { format!("{replicas} replicas") };
    Some(match sync {
        SyncSetting::Always => return None,
        SyncSetting::Interval(every) => format!(
            "stream `{stream}` has {shape} and the server syncs writes to disk only every {} s (sync_interval): \
             a message acknowledged to its publisher can vanish on power loss before any sink sees it; {fix}",
            every.as_secs()
        ),
        SyncSetting::Unknown(why) => format!(
            "stream `{stream}` has {shape} and the server's sync setting is unknown ({why}); nats-server syncs writes \
             to disk every {} s by default, so a message acknowledged to its publisher can vanish on power loss before \
             any sink sees it; {fix} (set nats.monitoring_url to let the sink read the setting from /varz)",
            DEFAULT_SYNC_INTERVAL.as_secs()
        ),
    })
}

/// Reads the setting from a `/varz` document: `sync_always` true, else `sync_interval`
/// (nanoseconds; absent means the default). Pure.
pub fn from_varz(varz: &serde_json::Value) -> SyncSetting {
    let Some(config) = varz.get("jetstream").and_then(|j| j.get("config")) else {
        return SyncSetting::Unknown("/varz shows no JetStream configuration".into());
    };
    if config.get("sync_always").and_then(serde_json::Value::as_bool) == Some(true) {
        return SyncSetting::Always;
    }
    match config.get("sync_interval").and_then(serde_json::Value::as_u64) {
        Some(ns) => SyncSetting::Interval(Duration::from_nanos(ns)),
        None => SyncSetting::Interval(DEFAULT_SYNC_INTERVAL),
    }
}

/// The server's setting, read from `monitoring_url` (see the module docs).
pub async fn server_sync(monitoring_url: Option<&str>) -> SyncSetting {
    let Some(url) = monitoring_url else {
        return SyncSetting::Unknown("nats.monitoring_url is not set".into());
    };
    read_varz(url).await
}

#[cfg(feature = "monitoring")]
async fn read_varz(url: &str) -> SyncSetting {
    let endpoint = format!("{}/varz", url.trim_end_matches('/'));
    let client = match reqwest::Client::builder().timeout(Duration::from_secs(5)).build() {
        Ok(c) => c,
        Err(e) => return SyncSetting::Unknown(format!("cannot make an HTTP client: {e}")),
    };
    let answer = async {
        let response = client.get(&endpoint).send().await?.error_for_status()?;
        response.bytes().await
    };
    match answer.await {
        Ok(body) => match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(varz) => from_varz(&varz),
            Err(e) => SyncSetting::Unknown(format!("{endpoint} is not JSON: {e}")),
        },
        Err(e) => SyncSetting::Unknown(format!("cannot read {endpoint}: {e}")),
    }
}

#[cfg(not(feature = "monitoring"))]
async fn read_varz(_url: &str) -> SyncSetting {
    SyncSetting::Unknown("this build reads no /varz: it was built without the `monitoring` feature".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lint_by_replicas_and_setting() {
        let every = SyncSetting::Interval(Duration::from_secs(120));
        let unknown = SyncSetting::Unknown("nats.monitoring_url is not set".into());
        // (replicas, setting, warned?)
        let rows = [
            (1, SyncSetting::Always, false),
            (1, every.clone(), true),
            (1, unknown.clone(), true),
            (2, every.clone(), true),
            (3, every.clone(), false),
            (3, unknown.clone(), false),
            (5, every.clone(), false),
        ];
        for (replicas, sync, warned) in rows {
            assert_eq!(lint("S", replicas, &sync).is_some(), warned, "{replicas} {sync:?}");
        }
        let text = lint("ORDERS", 1, &every).unwrap();
        assert!(text.contains("every 120 s") && text.contains("sync_interval: always") && text.contains("3 replicas"));
        let text = lint("ORDERS", 1, &unknown).unwrap();
        assert!(text.contains("unknown (nats.monitoring_url is not set)") && text.contains("monitoring_url"), "{text}");
    }

    #[test]
    fn the_setting_from_varz() {
        let varz = |config: serde_json::Value| serde_json::json!({"jetstream": {"config": config}});
        assert_eq!(
            from_varz(&varz(serde_json::json!({"sync_interval": 120_000_000_000_u64}))),
            SyncSetting::Interval(Duration::from_secs(120))
        );
        assert_eq!(
            from_varz(&varz(serde_json::json!({"sync_interval": 120_000_000_000_u64, "sync_always": true}))),
            SyncSetting::Always
        );
        assert_eq!(from_varz(&varz(serde_json::json!({}))), SyncSetting::Interval(DEFAULT_SYNC_INTERVAL));
        assert!(matches!(from_varz(&serde_json::json!({"server_id": "x"})), SyncSetting::Unknown(_)));
    }
}
