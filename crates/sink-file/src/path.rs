//! Pure path logic: sanitized path components, file names per strategy, relative paths.
//!
//! Subjects, stream names and message ids are external input, so none of them becomes a path
//! name as is. [`safe_component`] keeps `[A-Za-z0-9._-]`, turns every run of other
//! characters into one `_`, and strips leading and trailing `.`, `_` and `-`, exactly as the
//! reference does. Unlike the reference it never maps two different values to one name:
//! when sanitizing changed the value, `-{sha256(value)[:16]}` is appended. An unchanged value
//! keeps the reference's name, so existing directories stay valid.
//!
//! Nothing here touches the filesystem.

use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};
use sinks_contract::Envelope;
use sinks_contract::idempotency::IdempotencyError;

use crate::config::FilenameStrategy;

/// Components longer than this are shortened to `{first 80}-{sha256[:32]}`.
pub(crate) const MAX_COMPONENT_LEN: usize = 120;
/// Characters kept from the value when a component is shortened.
const SHORTENED_PREFIX_LEN: usize = 80;

/// Lowercase hex SHA-256 of `data`.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

fn is_safe_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// A bounded, separator-free file name component for the untrusted `value`.
///
/// `fallback` names the kind of value (`stream`, `message`, `subject`) and is used when
/// nothing safe remains (empty, `.` or `..`): `{fallback}-{sha256[:16]}`.
pub(crate) fn safe_component(value: &str, fallback: &str) -> String {
    let mut cleaned = String::with_capacity(value.len());
    let mut in_unsafe_run = false;
    for c in value.chars() {
        if is_safe_char(c) {
            cleaned.push(c);
            in_unsafe_run = false;
        } else if !in_unsafe_run {
            // A run of unsafe characters becomes a single `_`.
            cleaned.push('_');
            in_unsafe_run = true;
        }
    }
    let cleaned = cleaned.trim_matches(['.', '_', '-']);
    let digest = sha256_hex(value.as_bytes());
    let mut out = if cleaned.is_empty() || cleaned == "." || cleaned == ".." {
        format!("{fallback}-{}", &digest[..16])
    } else if cleaned != value {
        format!("{cleaned}-{}", &digest[..16])
    } else {
        cleaned.to_owned()
    };
    if out.len() > MAX_COMPONENT_LEN {
        // The sanitized text is ASCII, so byte slicing stays on character boundaries.
        let prefix = if cleaned.len() >= SHORTENED_PREFIX_LEN { &cleaned[..SHORTENED_PREFIX_LEN] } else { cleaned };
        out = format!("{prefix}-{}", &digest[..32]);
    }
    out
}

/// The file name stem of `envelope` under `strategy`.
///
/// Missing key material (no stream sequence, no message id, or a headers-only body under the
/// payload hash) is an error: permanent for that message.
pub(crate) fn file_stem(envelope: &Envelope, strategy: FilenameStrategy) -> Result<String, IdempotencyError> {
    match strategy {
        FilenameStrategy::StreamSequence => {
            let js = envelope.jetstream();
            if js.stream.is_empty() || js.stream_sequence == 0 {
                return Err(IdempotencyError::MissingStreamSequence);
            }
            // `{stream}.{epoch}` in a later epoch: `.` is kept, and no stream name has one.
            Ok(format!("{}-{:020}", safe_component(&envelope.keyed_stream(), "stream"), js.stream_sequence))
        }
        FilenameStrategy::OriginSequence => {
            let (stream, sequence) = envelope.origin_sequence()?;
            Ok(format!("{}-{sequence:020}", safe_component(&stream, "stream")))
        }
        FilenameStrategy::MessageId => {
            let id = envelope.message_id().ok_or(IdempotencyError::MissingMessageId)?;
            Ok(format!("{}-{}", safe_component(id, "message"), &sha256_hex(id.as_bytes())[..16]))
        }
        FilenameStrategy::PayloadSha256 => {
            if envelope.presence().omitted {
                return Err(IdempotencyError::PayloadOmitted);
            }
            Ok(format!("{}-{}", safe_component(envelope.subject(), "subject"), sha256_hex(envelope.payload())))
        }
    }
}

/// Where one message goes, relative to the root directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RelativePath {
    /// Subject partition directory, when partitioning by subject.
    pub(crate) partition: Option<String>,
    /// File name: stem plus extension.
    pub(crate) file_name: String,
}

impl RelativePath {
    /// The relative path as a `PathBuf`.
    pub(crate) fn to_path_buf(&self) -> PathBuf {
        let mut path = PathBuf::new();
        if let Some(p) = &self.partition {
            path.push(p);
        }
        path.push(&self.file_name);
        path
    }
}

/// The relative path of `envelope`: `[<safe(subject)>/]<stem><extension>`.
pub(crate) fn relative_path(
    envelope: &Envelope,
    strategy: FilenameStrategy,
    extension: &str,
    partition_by_subject: bool,
) -> Result<RelativePath, IdempotencyError> {
    let file_name = format!("{}{extension}", file_stem(envelope, strategy)?);
    let subject = match strategy {
        FilenameStrategy::OriginSequence => envelope.origin_subject(),
        _ => envelope.subject(),
    };
    let partition = partition_by_subject.then(|| safe_component(subject, "subject"));
    Ok(RelativePath { partition, file_name })
}

/// True when `relative` is made only of plain names (no root, `.`, `..` or prefix), so that
/// joining it to the root can never leave the root.
pub(crate) fn is_confined(relative: &Path) -> bool {
    relative.components().count() > 0 && relative.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Name prefix of the temp file for `file_name`: `.{file_name}.`, shortened so that the
/// temp name (prefix, random part and `.tmp`) stays well under 255 bytes.
pub(crate) fn temp_prefix(file_name: &str) -> String {
    const MAX: usize = 200;
    let mut end = file_name.len().min(MAX);
    while !file_name.is_char_boundary(end) {
        end -= 1;
    }
    format!(".{}.", &file_name[..end])
}

#[cfg(test)]
mod tests {
    use sinks_contract::Headers;
    use sinks_contract::testing::{envelope, envelope_with};

    use super::*;

    fn d16(s: &str) -> String {
        sha256_hex(s.as_bytes())[..16].to_owned()
    }

    #[test]
    fn sanitizer_table() {
        let long_ok = "a".repeat(200);
        let long_lossy = format!("{}/x", "b".repeat(150));
        let table: Vec<(&str, String)> = vec![
            ("orders.created", "orders.created".into()),
            ("ORDERS_1-x", "ORDERS_1-x".into()),
            ("a/b", format!("a_b-{}", d16("a/b"))),
            ("a//:b", format!("a_b-{}", d16("a//:b"))),
            ("a_/b", format!("a__b-{}", d16("a_/b"))),
            ("..", format!("subject-{}", d16(".."))),
            (".", format!("subject-{}", d16("."))),
            ("", format!("subject-{}", d16(""))),
            ("../../etc/passwd", format!("etc_passwd-{}", d16("../../etc/passwd"))),
            ("_x_", format!("x-{}", d16("_x_"))),
            ("héllo wörld", format!("h_llo_w_rld-{}", d16("héllo wörld"))),
            ("日本", format!("subject-{}", d16("日本"))),
            (&long_ok, format!("{}-{}", "a".repeat(80), &sha256_hex(long_ok.as_bytes())[..32])),
            (&long_lossy, format!("{}-{}", "b".repeat(80), &sha256_hex(long_lossy.as_bytes())[..32])),
        ];
        for (input, expected) in table {
            let got = safe_component(input, "subject");
            assert_eq!(got, expected, "{input:?}");
            assert!(got.len() <= MAX_COMPONENT_LEN, "{input:?}");
            assert!(got.chars().all(is_safe_char), "{input:?}");
            assert!(is_confined(Path::new(&got)), "{input:?}");
        }
    }

    #[test]
    fn long_lossy_component_near_the_limit_stays_bounded() {
        let value = format!("{} ", "c".repeat(110));
        let got = safe_component(&value, "message");
        assert_eq!(got.len(), 80 + 1 + 32);
    }

    #[test]
    fn values_differing_only_in_a_sanitized_char_get_different_names() {
        for (a, b) in [("a/b", "a:b"), ("x y", "x\ty"), ("_id", "id"), ("é", "è")] {
            assert_ne!(safe_component(a, "message"), safe_component(b, "message"), "{a:?} {b:?}");
            let ea = envelope("S", 1, a, "{}");
            let eb = envelope("S", 1, b, "{}");
            assert_ne!(
                file_stem(&ea, FilenameStrategy::PayloadSha256).expect("stem"),
                file_stem(&eb, FilenameStrategy::PayloadSha256).expect("stem"),
                "payload_sha256 {a:?} {b:?}"
            );
            let ia = envelope_with("S", 1, "s", "{}", Headers::new().with("Nats-Msg-Id", a), 1);
            let ib = envelope_with("S", 1, "s", "{}", Headers::new().with("Nats-Msg-Id", b), 1);
            if ia.message_id().is_some() && ib.message_id().is_some() {
                assert_ne!(
                    file_stem(&ia, FilenameStrategy::MessageId).expect("stem"),
                    file_stem(&ib, FilenameStrategy::MessageId).expect("stem"),
                );
            }
        }
    }

    #[test]
    fn stems_per_strategy() {
        let e =
            envelope_with("ORDERS", 42, "orders.created", "{\"a\":1}", Headers::new().with("Nats-Msg-Id", "id-1"), 1);
        assert_eq!(file_stem(&e, FilenameStrategy::StreamSequence).expect("seq"), "ORDERS-00000000000000000042");
        assert_eq!(file_stem(&e, FilenameStrategy::MessageId).expect("id"), format!("id-1-{}", d16("id-1")));
        assert_eq!(
            file_stem(&e, FilenameStrategy::PayloadSha256).expect("sha"),
            format!("orders.created-{}", sha256_hex(b"{\"a\":1}"))
        );
        // A later epoch of the stream names its files apart; the message id and payload
        // names do not depend on the stream.
        let later = e.clone().with_stream_epoch(Some("e17".into()));
        assert_eq!(
            file_stem(&later, FilenameStrategy::StreamSequence).expect("seq"),
            "ORDERS.e17-00000000000000000042"
        );
        for other in [FilenameStrategy::MessageId, FilenameStrategy::PayloadSha256] {
            assert_eq!(file_stem(&later, other), file_stem(&e, other), "{other:?}");
        }
        let id_200 = "z".repeat(200);
        let long = envelope_with("S", 1, "s", "{}", Headers::new().with("Nats-Msg-Id", id_200.as_str()), 1);
        let stem = file_stem(&long, FilenameStrategy::MessageId).expect("long id");
        assert_eq!(stem, format!("{}-{}-{}", "z".repeat(80), &sha256_hex(id_200.as_bytes())[..32], d16(&id_200)));
    }

    #[test]
    fn missing_key_material_is_an_error() {
        let no_id = envelope("ORDERS", 1, "orders", "{}");
        assert_eq!(file_stem(&no_id, FilenameStrategy::MessageId), Err(IdempotencyError::MissingMessageId));
        let no_seq = envelope("", 0, "orders", "{}");
        assert_eq!(file_stem(&no_seq, FilenameStrategy::StreamSequence), Err(IdempotencyError::MissingStreamSequence));
        let headers_only = envelope_with("ORDERS", 1, "orders", "", Headers::new().with("Nats-Msg-Size", "12"), 1);
        assert_eq!(file_stem(&headers_only, FilenameStrategy::PayloadSha256), Err(IdempotencyError::PayloadOmitted));
    }

    #[test]
    fn relative_paths() {
        let e = envelope("ORDERS", 7, "orders/../x", "{}");
        let rel = relative_path(&e, FilenameStrategy::StreamSequence, ".json", true).expect("path");
        let partition = format!("orders_.._x-{}", d16("orders/../x"));
        assert_eq!(rel.partition.as_deref(), Some(partition.as_str()));
        assert_eq!(rel.to_path_buf(), Path::new(&partition).join("ORDERS-00000000000000000007.json"));
        assert!(is_confined(&rel.to_path_buf()));
        let flat = relative_path(&e, FilenameStrategy::StreamSequence, ".json.gz", false).expect("path");
        assert_eq!(flat.to_path_buf(), Path::new("ORDERS-00000000000000000007.json.gz"));
        assert!(!is_confined(Path::new("../x")));
        assert!(!is_confined(Path::new("/x")));
        assert!(!is_confined(Path::new("")));
    }

    #[test]
    fn temp_prefix_is_bounded() {
        assert_eq!(temp_prefix("a.json"), ".a.json.");
        assert_eq!(temp_prefix(&"x".repeat(300)).len(), 202);
        let uni = format!("{}é", "x".repeat(199));
        assert!(temp_prefix(&uni).len() <= 202);
    }
}
