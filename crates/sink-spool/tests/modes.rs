//! The modes of what the spool creates: `file_mode` for its records and `dir_mode` for the
//! spool directory it creates, default private (`0600`, `0700`), applied exactly whatever
//! the umask.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sink_spool::{SpoolSink, SpoolSinkConfig};
use sinks_contract::testing::{self, classes, envelope};
use sinks_contract::{OutcomeClass, SinkSection};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Spools two messages into `root` (created by the sink) with `extra` settings; the modes
/// of the directory and of every record.
async fn spooled(root: &Path, extra: serde_json::Value) -> (u32, Vec<u32>) {
    let mut doc = serde_json::json!({"directory": root, "allow_unencrypted": true});
    doc.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let section: SinkSection = serde_json::from_value(doc).unwrap();
    let sink = testing::opened(SpoolSink::new(SpoolSinkConfig::from_section(&section).unwrap()).unwrap()).await;
    let outcomes = testing::write(&sink, &[envelope("S", 1, "a.x", "{}"), envelope("S", 2, "a.x", "{}")]).await;
    assert_eq!(classes(&outcomes), vec![OutcomeClass::Committed; 2]);
    let records: Vec<u32> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| mode(&p))
        .collect();
    assert_eq!(records.len(), 2, "two records in {}", root.display());
    (mode(root), records)
}

#[tokio::test]
async fn records_and_the_spool_directory_are_private_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let (root, records) = spooled(&dir.path().join("spool"), serde_json::json!({})).await;
    assert_eq!(root, 0o700);
    assert_eq!(records, [0o600, 0o600]);
}

#[tokio::test]
async fn configured_modes_apply_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let extra = serde_json::json!({"file_mode": "0664", "dir_mode": "0775"});
    let (root, records) = spooled(&dir.path().join("spool"), extra).await;
    assert_eq!(root, 0o775);
    assert_eq!(records, [0o664, 0o664]);
}
