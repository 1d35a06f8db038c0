//! The manifest: what one batch object holds, and the commit point of that object.
//!
//! **The protocol** (per partition and keyed stream: a later epoch of a stream has a log of
//! its own; [`super::engine`] runs it, a sink's
//! [`super::ObjectLog`] does the I/O):
//!
//! 1. The object is built in a local temporary file while messages arrive. When it closes
//!    it is *staged*: made durable where another process can complete it (the S3 sink
//!    uploads the file as the parts of a multipart upload to the object's final key, which
//!    stays invisible until completed; the file sink fsyncs the temporary file next to the
//!    final name).
//! 2. Its manifest is created at the next free slot of the partition's manifest log with a
//!    conditional create (`If-None-Match: *`; `link` on a filesystem). That create is the
//!    commit: whoever creates slot `n` owns it. Before trying slot `n` the writer has read
//!    every manifest below `n` (its index) and checked that none holds one of its sequences;
//!    when slot `n` turns out taken it reads the new manifests, and if one of them holds one
//!    of its sequences it abandons its object (discards the staging) and reports those
//!    messages as duplicates and the rest as temporary failures (they come back and go into
//!    a later object); otherwise it tries the next slot. So the manifests of a partition,
//!    in slot order, never share a sequence, however the messages were grouped and however
//!    many writers there are.
//! 3. The object is completed (the multipart upload completed; the temporary file linked to
//!    its final name and removed): only now is it visible, and only now are its messages
//!    acknowledged.
//!
//! A crash between 2 and 3 leaves a manifest whose object is not visible yet: whoever
//! reads that manifest next (the restarted process, when a redelivered message falls into
//! it) completes the object from the staging the manifest names ("roll forward") before
//! reporting any of its messages as duplicates. A manifest whose object is missing and
//! whose staging is gone (removed by hand or by a lifecycle rule) is void: it holds nothing.
//! A crash before 2 leaves only a staging, which no manifest names: invisible to readers
//! (an incomplete multipart upload, a dot-named temporary file), removed by a lifecycle
//! rule or by hand.

use serde::{Deserialize, Serialize};

use super::config::{BatchCompression, Format};
use super::seqset::SeqSet;

/// Schema of a manifest document.
pub const MANIFEST_SCHEMA: &str = "nats_sinks.batch.manifest.v1";

/// A manifest document (JSON, compact).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_SCHEMA`].
    pub schema: String,
    /// The stream the sequences belong to: its name, or `{stream}.{epoch}` in a later epoch
    /// of it (`Envelope::keyed_stream`).
    pub stream: String,
    /// The partition (rendered template) the object is in.
    pub partition: String,
    /// This manifest's slot in the partition's log.
    pub slot: u64,
    /// The object's key relative to the sink's root or prefix (`partition/name`).
    pub object: String,
    /// The object's format.
    pub format: Format,
    /// Its compression.
    pub compression: BatchCompression,
    /// Smallest sequence held.
    pub first: u64,
    /// Largest sequence held.
    pub last: u64,
    /// How many rows (messages) it holds.
    pub rows: u64,
    /// The object's size in bytes.
    pub bytes: u64,
    /// Every sequence it holds, as ranges (`1-5,9`).
    pub sequences: String,
    /// Where the object was staged, in the sink's own terms (an upload id and its parts; a
    /// temporary file name): what completing it again needs. Also tells the writer, after
    /// an ambiguous create, whether the slot is its own.
    pub staging: serde_json::Value,
}

impl Manifest {
    /// The sequence set, parsed.
    pub fn sequence_set(&self) -> Result<SeqSet, String> {
        SeqSet::parse(&self.sequences)
    }

    /// The document's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses a stored manifest, checking its schema and its sequences.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let manifest: Self = serde_json::from_slice(bytes).map_err(|e| format!("not a manifest: {e}"))?;
        if manifest.schema != MANIFEST_SCHEMA {
            return Err(format!("unknown manifest schema `{}`", manifest.schema));
        }
        let set = manifest.sequence_set()?;
        if set.first() != Some(manifest.first) || set.last() != Some(manifest.last) || set.len() != manifest.rows {
            return Err("manifest sequences disagree with its first, last and rows".into());
        }
        Ok(manifest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_inconsistent_documents() {
        let set: SeqSet = [3, 4, 5, 9].into_iter().collect();
        let m = Manifest {
            schema: MANIFEST_SCHEMA.into(),
            stream: "S".into(),
            partition: "S/2026".into(),
            slot: 2,
            object: "S/2026/S-00000000000000000003-00000000000000000009.ndjson".into(),
            format: Format::Ndjson,
            compression: BatchCompression::None,
            first: 3,
            last: 9,
            rows: 4,
            bytes: 100,
            sequences: set.to_string(),
            staging: serde_json::json!({"temp": ".x.tmp"}),
        };
        let back = Manifest::from_bytes(&m.to_bytes()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.sequence_set().unwrap(), set);
        let wrong_rows = Manifest { rows: 5, ..m.clone() };
        assert!(Manifest::from_bytes(&wrong_rows.to_bytes()).is_err());
        let wrong_schema = Manifest { schema: "x".into(), ..m };
        assert!(Manifest::from_bytes(&wrong_schema.to_bytes()).is_err());
        assert!(Manifest::from_bytes(b"{}").is_err());
    }
}
