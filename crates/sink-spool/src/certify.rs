//! [`SpoolHarness`]: certifies the spool sink against `docs/sink-contract.md` (feature
//! `certify`). Every fixture is a fresh temporary directory with encrypted records, read
//! back by decrypting the files directly, without the sink.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use bytes::Bytes;
use sinks_certify::{CrashTarget, Fixture, Harness, Record, Records};
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, PayloadMode, Sink};
use sinks_toolkit::encryption::{Key, Keyring};

use crate::{SpoolSink, SpoolSinkConfig, record};

/// Environment variable the crash certification passes the record key in.
pub const KEY_ENV: &str = "NATS_SINKS_CERT_SPOOL_KEY_B64";
/// Key id of the certification key.
pub const KEY_ID: &str = "cert-spool";

/// The certification key (fixed: it only has to be known to the harness).
pub fn key_b64() -> String {
    base64::engine::general_purpose::STANDARD.encode([0x5au8; 32])
}

fn key() -> Key {
    Key::from_b64(&key_b64()).unwrap_or_else(|e| unreachable!("{e}"))
}

/// An encrypted spool config for `directory`, keyed by [`KEY_ENV`].
pub fn config(directory: PathBuf) -> SpoolSinkConfig {
    let mut c = SpoolSinkConfig::plaintext(directory);
    c.allow_unencrypted = false;
    c.encryption.enabled = true;
    c.encryption.key_id = KEY_ID.into();
    c.encryption.key_b64_env = Some(KEY_ENV.into());
    c
}

/// Every record in `dir` as `(idempotency key, original payload)`.
pub fn read_spool(dir: &Path, keyring: &Keyring) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e.to_string()),
    };
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.starts_with('.') || !name.ends_with(record::FILE_SUFFIX) {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
        let plain = record::unwrap(&bytes, keyring).map_err(|e| format!("{}: {e}", path.display()))?;
        let key = plain["idempotency_key"].as_str().unwrap_or_default().to_owned();
        out.push((key, Bytes::from(record::payload_bytes(&plain).map_err(|e| e.to_string())?)));
    }
    Ok(out)
}

/// Harness over fresh temporary spool directories.
#[derive(Debug, Default)]
pub struct SpoolHarness;

struct DirReadBack {
    dir: tempfile::TempDir,
}

#[async_trait]
impl Records for DirReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        let root = self.dir.path().join("spool");
        let mut keyring = Keyring::new();
        keyring.insert(KEY_ID, key());
        tokio::task::spawn_blocking(move || read_spool(&root, &keyring)).await.map_err(|e| e.to_string())?
    }
}

async fn fixture(mode: PayloadMode) -> Result<Fixture, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut c = config(dir.path().join("spool"));
    c.payload_mode = mode;
    let sink = SpoolSink::new(c).map_err(|e| e.to_string())?.with_key(key());
    sink.open().await.map_err(|e| e.display_chain())?;
    Ok(Fixture { sink: Arc::new(sink), records: Box::new(DirReadBack { dir }) })
}

#[async_trait]
impl Harness for SpoolHarness {
    fn name(&self) -> &'static str {
        "spool"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        fixture(PayloadMode::JsonOrEnvelope).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        let fx = fixture(PayloadMode::JsonOnly).await.ok()?;
        Some((fx, envelope(sinks_certify::CERT_STREAM, 7, "cert.poison", "this is not json")))
    }

    fn no_key_per_event(&self) -> Option<&'static str> {
        Some(
            "the spool is custody, not the destination: it names its copy by the delivered key and keeps \
                  the origin, which replay restores for a target keyed by origin_sequence",
        )
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        // The spool's volume went away after start-up: the directory is gone.
        let dir = tempfile::tempdir().ok()?;
        let sink = SpoolSink::new(config(dir.path().join("spool"))).ok()?.with_key(key());
        sink.open().await.ok()?;
        drop(dir);
        Some(Arc::new(sink))
    }

    fn secrets(&self) -> Vec<String> {
        vec![key_b64()]
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let sink_section = serde_json::json!({
            "type": "spool",
            "directory": dir.path().join("spool"),
            "encryption": {"enabled": true, "key_id": KEY_ID, "key_b64_env": KEY_ENV},
        });
        Ok(CrashTarget {
            sink_section,
            records: Box::new(DirReadBack { dir }),
            env: vec![(KEY_ENV.to_owned(), key_b64())],
        })
    }
}
