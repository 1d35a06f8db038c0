//! Column names of the relational sinks' tables (MySQL, Oracle): one mapping, the
//! reference's upper-case defaults, shared so both sinks accept the same `columns` section.

use serde::{Deserialize, Serialize};

/// Column names of a relational sink's table (the reference's defaults).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ColumnMapping {
    /// JetStream stream name.
    pub stream_name: String,
    /// JetStream stream sequence.
    pub stream_sequence: String,
    /// Message subject.
    pub subject: String,
    /// Message id (or the payload-field key).
    pub message_id: String,
    /// Priority.
    pub priority: String,
    /// Classification.
    pub classification: String,
    /// Labels, `;`-separated.
    pub labels: String,
    /// Creation time, epoch nanoseconds.
    pub message_created_at_epoch_ns: String,
    /// JetStream timestamp, epoch nanoseconds.
    pub jetstream_timestamp_epoch_ns: String,
    /// Receive time, epoch nanoseconds.
    pub received_at_epoch_ns: String,
    /// Store time, epoch nanoseconds.
    pub stored_at_epoch_ns: String,
    /// Normalized payload (JSON).
    pub payload: String,
    /// Headers (JSON).
    pub headers: String,
    /// Standard metadata document (JSON, with `custody` when the core attached one).
    pub metadata: String,
    /// Mission metadata (JSON; SQL NULL when the message has none).
    pub mission_metadata: String,
    /// Security labels (JSON; SQL NULL when the message has none).
    pub security_labels: String,
    /// SHA-256 of the normalized payload; only written when `conflict_policy` is set.
    pub payload_sha256: String,
}

impl Default for ColumnMapping {
    fn default() -> Self {
        let s = |v: &str| v.to_owned();
        Self {
            stream_name: s("STREAM_NAME"),
            stream_sequence: s("STREAM_SEQUENCE"),
            subject: s("SUBJECT"),
            message_id: s("MESSAGE_ID"),
            priority: s("PRIORITY"),
            classification: s("CLASSIFICATION"),
            labels: s("LABELS"),
            message_created_at_epoch_ns: s("MESSAGE_CREATED_AT_EPOCH_NS"),
            jetstream_timestamp_epoch_ns: s("JETSTREAM_TIMESTAMP_EPOCH_NS"),
            received_at_epoch_ns: s("RECEIVED_AT_EPOCH_NS"),
            stored_at_epoch_ns: s("STORED_AT_EPOCH_NS"),
            payload: s("PAYLOAD_JSON"),
            headers: s("HEADERS_JSON"),
            metadata: s("METADATA_JSON"),
            mission_metadata: s("MISSION_METADATA_JSON"),
            security_labels: s("SECURITY_LABELS_JSON"),
            payload_sha256: s("PAYLOAD_SHA256"),
        }
    }
}
