//! The reference's metrics snapshot file (`nats_sinks.metrics.snapshot.v1`), which its
//! `nats-sink-metrics show` reads: counters, gauges and observation summaries (count, sum,
//! min, max, last) of every unlabelled metric plus the reference's legacy names (which its
//! tool shows with `--include-legacy`), written periodically and atomically (a
//! temporary file in the same directory, fsynced, mode 0600, renamed over the old one)
//! instead of on every increment (reference weakness W8). The labelled families stay out:
//! the reference's loader accepts labelled rows only under its own metric names.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::{Aliased, CounterId, GaugeId, LEGACY_ALIASES, Metrics, TimingId};

/// The snapshot schema name.
pub const SCHEMA: &str = "nats_sinks.metrics.snapshot.v1";

fn finite(v: f64) -> f64 {
    if v.is_finite() { v } else { 0.0 }
}

/// The snapshot document of `metrics` now.
pub fn document(metrics: &Metrics) -> Value {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
    let mut counters: Map<String, Value> =
        CounterId::ALL.iter().map(|c| (format!("{}_total", c.name()), json!(metrics.counter(*c)))).collect();
    let mut gauges: Map<String, Value> =
        GaugeId::ALL.iter().map(|g| (g.name().to_owned(), json!(finite(metrics.gauge(*g))))).collect();
    let summary = |t: TimingId| {
        let s = metrics.summary(t);
        json!({
            "count": s.count as f64,
            "sum": finite(s.sum),
            "min": finite(s.min),
            "max": finite(s.max),
            "last": finite(s.last),
        })
    };
    let mut observations: Map<String, Value> =
        TimingId::ALL.iter().map(|t| (t.name().to_owned(), summary(*t))).collect();
    // The reference's legacy names, written next to the current ones as its runner does.
    for (alias, aliased) in LEGACY_ALIASES {
        match aliased {
            Aliased::Counter(c) => counters.insert(format!("{alias}_total"), json!(metrics.counter(*c))),
            Aliased::Gauge(g) => gauges.insert((*alias).to_owned(), json!(finite(metrics.gauge(*g)))),
            Aliased::Timing(t) => observations.insert((*alias).to_owned(), summary(*t)),
        };
    }
    json!({
        "schema": SCHEMA,
        "namespace": metrics.config().namespace,
        "generated_at_epoch_seconds": now,
        "counters": counters,
        "gauges": gauges,
        "observations": observations,
    })
}

/// Writes `value` to `path` atomically: parent directories created, a temporary file in the
/// same directory written, fsynced and set to mode 0600, then renamed over `path`.
pub fn write_atomic(path: &Path, value: &Value) -> std::io::Result<()> {
    let name = path
        .file_name()
        .filter(|n| *n != "." && *n != "..")
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "snapshot path must name a file"))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let mut text = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    text.push(b'\n');
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .suffix(".tmp")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .tempfile_in(&dir)?;
    tmp.write_all(&text)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Writes the snapshot of `metrics` to `path` every `every` until `stop` turns true, then
/// once more. A failed write is logged (once per failure streak) and retried next time.
pub async fn keep_writing(metrics: Metrics, path: PathBuf, every: Duration, mut stop: watch::Receiver<bool>) {
    let mut failing = false;
    loop {
        let stopping = tokio::select! {
            () = tokio::time::sleep(every) => false,
            _ = stop.wait_for(|s| *s) => true,
        };
        let doc = document(&metrics);
        let target = path.clone();
        let result = tokio::task::spawn_blocking(move || write_atomic(&target, &doc))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        match result {
            Ok(()) if failing => {
                failing = false;
                tracing::info!(path = %path.display(), "metrics snapshot written again");
            }
            Ok(()) => {}
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(path = %path.display(), error = %e, "cannot write the metrics snapshot; retrying");
            }
            Err(_) => {}
        }
        if stopping {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MetricsConfig;

    #[test]
    fn document_has_the_reference_shape() {
        let m = Metrics::new(&MetricsConfig { enabled: true, ..MetricsConfig::default() });
        m.inc(CounterId::MessagesFetched, 4);
        m.observe(TimingId::NatsFetchSeconds, 0.25);
        let doc = document(&m);
        assert_eq!(doc["schema"], SCHEMA);
        assert_eq!(doc["namespace"], "nats_sinks");
        assert!(doc["generated_at_epoch_seconds"].as_f64().unwrap() > 1.7e9);
        assert_eq!(doc["counters"]["messages_fetched_total"], 4);
        assert_eq!(doc["gauges"]["current_batch_messages"], 0.0);
        let fetch = &doc["observations"]["nats_fetch_seconds"];
        assert_eq!((fetch["count"].as_f64(), fetch["max"].as_f64()), (Some(1.0), Some(0.25)));
        assert_eq!(doc["observations"]["sink_batch_write_seconds"]["min"], 0.0);
    }

    #[test]
    fn legacy_names_repeat_their_metric() {
        let m = Metrics::new(&MetricsConfig { enabled: true, ..MetricsConfig::default() });
        m.inc(CounterId::MessagesPrepared, 7);
        m.inc(CounterId::SinkBatchesWritten, 2);
        m.set(GaugeId::CurrentBatchMessages, 50.0);
        m.set(GaugeId::LastSinkSuccessEpochSeconds, 1.8e9);
        m.observe(TimingId::SinkBatchWriteSeconds, 0.5);
        let doc = document(&m);
        assert_eq!(doc["counters"]["messages_received_total"], 7);
        assert_eq!(doc["counters"]["batches_written_total"], 2);
        assert_eq!(doc["gauges"]["current_batch_size"], 50.0);
        assert_eq!(doc["gauges"]["last_success_timestamp"], 1.8e9);
        assert_eq!(doc["observations"]["batch_write_seconds"]["max"], 0.5);
    }

    #[test]
    fn writes_atomically_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/metrics.json");
        write_atomic(&path, &json!({"a": 1})).unwrap();
        write_atomic(&path, &json!({"a": 2})).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":2}\n");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("sub")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
        assert!(write_atomic(&dir.path().join(".."), &json!({})).is_err());
    }
}
