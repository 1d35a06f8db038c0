//! The modes of what the file sink creates: `file_mode` and `dir_mode`, default private
//! (`0600` files, `0700` directories), applied exactly whatever the umask, in both layouts
//! (one file per message, batch files with their manifests), and refused when they would
//! lock the sink out of its own files.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sink_file::{FileSink, FileSinkConfig};
use sinks_contract::testing::{self, SinkExt as _, classes, envelope};
use sinks_contract::{FlushScope, OutcomeClass, SinkSection};

/// Every file and directory below `root` (not `root` itself) with its mode bits.
fn modes(root: &Path) -> Vec<(PathBuf, bool, u32)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            out.push((path.clone(), meta.is_dir(), meta.permissions().mode() & 0o7777));
            if meta.is_dir() {
                todo.push(path);
            }
        }
    }
    out
}

fn section(root: &Path, extra: serde_json::Value) -> SinkSection {
    let mut doc = serde_json::json!({"directory": root});
    doc.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    serde_json::from_value(doc).unwrap()
}

/// Writes three messages on two subjects through a sink configured with `extra` below a
/// `root` that does not exist yet, flushing a batch-mode sink; the modes of what it made.
async fn written(extra: serde_json::Value) -> (tempfile::TempDir, PathBuf, Vec<(PathBuf, bool, u32)>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("out");
    let config = FileSinkConfig::from_section(&section(&root, extra)).unwrap();
    let sink = testing::opened(FileSink::new(config).unwrap()).await;
    let batch = [envelope("S", 1, "a.x", "{}"), envelope("S", 2, "b.y", "{}"), envelope("S", 3, "a.x", "{}")];
    let outcomes = testing::write(&sink, &batch).await;
    let mut settled: Vec<OutcomeClass> = classes(&outcomes);
    if settled.contains(&OutcomeClass::Pending) {
        settled = sink.flush_held(FlushScope::All).await.iter().map(|s| s.outcome.class()).collect();
    }
    assert_eq!(settled, vec![OutcomeClass::Committed; 3]);
    let root_mode = std::fs::metadata(&root).unwrap().permissions().mode() & 0o7777;
    let mut all = modes(&root);
    all.push((root.clone(), true, root_mode));
    (dir, root, all)
}

fn assert_modes(all: &[(PathBuf, bool, u32)], file: u32, dir: u32) {
    let files = all.iter().filter(|(_, is_dir, _)| !is_dir).count();
    assert!(files >= 2, "files were written: {all:?}");
    for (path, is_dir, mode) in all {
        let want = if *is_dir { dir } else { file };
        assert_eq!(*mode, want, "{} is {mode:04o}, not {want:04o}", path.display());
    }
}

#[tokio::test]
async fn files_and_directories_are_private_by_default() {
    let (_dir, _root, all) = written(serde_json::json!({})).await;
    assert_modes(&all, 0o600, 0o700);
}

#[tokio::test]
async fn configured_modes_apply_exactly_to_files_and_created_directories() {
    // 0664 is wider than the usual umask (022) lets a plain create through.
    let (_dir, _root, all) = written(serde_json::json!({"file_mode": "0664", "dir_mode": "0775"})).await;
    assert_modes(&all, 0o664, 0o775);
}

#[tokio::test]
async fn batch_files_and_their_manifests_take_the_modes_too() {
    let batch = serde_json::json!({"max_messages": 2, "max_age_ms": 1000, "partition_template": "{subject_token[1]}"});
    let (_dir, root, all) =
        written(serde_json::json!({"mode": "batch", "batch": batch, "file_mode": "0640", "dir_mode": "0750"})).await;
    let manifests =
        all.iter().filter(|(p, is_dir, _)| !is_dir && p.to_string_lossy().contains("/_nats-sinks/")).count();
    assert!(manifests >= 2, "manifests were written below {}: {all:?}", root.display());
    assert_modes(&all, 0o640, 0o750);
}

#[test]
fn modes_that_lock_the_sink_out_or_are_not_octal_strings_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |extra: serde_json::Value| -> Vec<(String, String)> {
        let e = FileSinkConfig::from_section(&section(dir.path(), extra)).unwrap_err();
        e.issues.into_iter().map(|i| (i.path, i.message)).collect()
    };
    let got = refused(serde_json::json!({"file_mode": "0440", "dir_mode": "0500"}));
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].0, "sink.file_mode");
    assert!(got[0].1.contains("needs at least 0600"), "{got:?}");
    assert_eq!(got[1].0, "sink.dir_mode");
    let got = refused(serde_json::json!({"file_mode": 640}));
    assert!(got[0].0.starts_with("sink.file_mode") && got[0].1.contains("octal string"), "{got:?}");
    let got = refused(serde_json::json!({"dir_mode": "4755"}));
    assert!(got[0].0.starts_with("sink.dir_mode") && got[0].1.contains("set-id or sticky"), "{got:?}");
}
