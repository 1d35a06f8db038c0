//! [`ReviewPackageHarness`]: certifies the review package sink against
//! `docs/sink-contract.md` (feature `certify`). Every fixture is a fresh temporary directory,
//! read back without the sink: each package's `manifest.json` names its stream (and epoch)
//! and sequence, and `payload.bin` is the payload, byte for byte. Dot-named entries (the
//! temporary directories of writes in progress) are skipped, as a reader of packages would.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use serde::Deserialize;
use sinks_certify::{CrashTarget, Fixture, Harness, Record, Records};
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, Sink};

use crate::{ReviewPackageSink, ReviewPackageSinkConfig};

/// The poison fixture's `max_payload_bytes`: the certification's JSON payloads are far
/// smaller, its poison is larger.
const POISON_LIMIT: u64 = 512;

/// Harness over fresh temporary directories.
#[derive(Debug, Default)]
pub struct ReviewPackageHarness;

/// Reads every package below a directory it owns (removed on drop).
struct DirReadBack {
    dir: tempfile::TempDir,
}

#[async_trait]
impl Records for DirReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        let root = self.dir.path().join("out");
        tokio::task::spawn_blocking(move || read_packages(&root)).await.map_err(|e| e.to_string())?
    }
}

#[derive(Deserialize)]
struct Manifest {
    stream: String,
    #[serde(default)]
    stream_epoch: Option<String>,
    stream_sequence: u64,
}

/// Every package below `root` (dot-named entries skipped), as `(stream-sequence key, payload
/// bytes)`: the key of the manifest's stream (`{stream}.{epoch}` when it names an epoch) and
/// sequence, and the bytes of `payload.bin`.
pub fn read_packages(root: &Path) -> Result<Vec<Record>, String> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot list {}: {e}", root.display())),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let dir: PathBuf = entry.path();
        let manifest = std::fs::read(dir.join("manifest.json")).map_err(|e| format!("{}: {e}", dir.display()))?;
        let manifest: Manifest = serde_json::from_slice(&manifest)
            .map_err(|e| format!("{} has no readable manifest: {e}", dir.display()))?;
        let stream = match &manifest.stream_epoch {
            Some(epoch) => format!("{}.{epoch}", manifest.stream),
            None => manifest.stream,
        };
        let payload = std::fs::read(dir.join("payload.bin")).map_err(|e| format!("{}: {e}", dir.display()))?;
        out.push((format!("stream-sequence:{stream}:{}", manifest.stream_sequence), Bytes::from(payload)));
    }
    Ok(out)
}

async fn fixture(adjust: impl FnOnce(&mut ReviewPackageSinkConfig)) -> Result<Fixture, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut config = ReviewPackageSinkConfig::new(dir.path().join("out"));
    adjust(&mut config);
    let sink = ReviewPackageSink::new(config).map_err(|e| e.to_string())?;
    sink.open().await.map_err(|e| e.display_chain())?;
    Ok(Fixture { sink: Arc::new(sink), records: Box::new(DirReadBack { dir }) })
}

#[async_trait]
impl Harness for ReviewPackageHarness {
    fn name(&self) -> &'static str {
        "review_package"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        fixture(|_| {}).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        let fx = fixture(|c| c.max_payload_bytes = POISON_LIMIT).await.ok()?;
        let too_large = vec![b'x'; 4 * POISON_LIMIT as usize];
        Some((fx, envelope(sinks_certify::CERT_STREAM, 7, "cert.poison", too_large)))
    }

    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        Some(fixture(|c| c.key_strategy = sinks_contract::idempotency::KeySource::OriginSequence).await)
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        // The root was opened, then its volume "went away": the directory is gone.
        let dir = tempfile::tempdir().ok()?;
        let sink = ReviewPackageSink::new(ReviewPackageSinkConfig::new(dir.path().join("out"))).ok()?;
        sink.open().await.ok()?;
        drop(dir);
        Some(Arc::new(sink))
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let sink_section = serde_json::json!({
            "type": "review_package",
            "enabled": true,
            "directory": dir.path().join("out"),
            "fsync": true,
        });
        Ok(CrashTarget { sink_section, records: Box::new(DirReadBack { dir }), env: Vec::new() })
    }
}
