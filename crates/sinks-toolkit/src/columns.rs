//! The relational sinks' tables (MySQL, Oracle): the column mapping with the reference's
//! upper-case defaults, and the logical fields of a row in bind order, shared so both sinks
//! accept the same `columns` section and map a message the same way.

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

/// The logical fields of a row, in the order values are bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// JetStream stream name.
    StreamName,
    /// JetStream stream sequence.
    StreamSequence,
    /// Message subject.
    Subject,
    /// Message id (or the payload-field key).
    MessageId,
    /// Priority.
    Priority,
    /// Classification.
    Classification,
    /// Labels.
    Labels,
    /// Creation time.
    CreatedAt,
    /// JetStream timestamp.
    JetStreamTimestamp,
    /// Receive time.
    ReceivedAt,
    /// Store time.
    StoredAt,
    /// Normalized payload (JSON).
    Payload,
    /// Headers (JSON).
    Headers,
    /// Standard metadata document (JSON).
    Metadata,
    /// Mission metadata (JSON).
    MissionMetadata,
    /// Security labels (JSON).
    SecurityLabels,
    /// SHA-256 of the normalized payload.
    PayloadSha256,
}

impl Field {
    /// Every field; `PayloadSha256` only takes part with a conflict policy.
    pub const ALL: [Self; 17] = [
        Self::StreamName,
        Self::StreamSequence,
        Self::Subject,
        Self::MessageId,
        Self::Priority,
        Self::Classification,
        Self::Labels,
        Self::CreatedAt,
        Self::JetStreamTimestamp,
        Self::ReceivedAt,
        Self::StoredAt,
        Self::Payload,
        Self::Headers,
        Self::Metadata,
        Self::MissionMetadata,
        Self::SecurityLabels,
        Self::PayloadSha256,
    ];

    /// `(config field name, column)` of this field in `mapping`.
    pub fn column(self, m: &ColumnMapping) -> (&'static str, &str) {
        match self {
            Self::StreamName => ("stream_name", &m.stream_name),
            Self::StreamSequence => ("stream_sequence", &m.stream_sequence),
            Self::Subject => ("subject", &m.subject),
            Self::MessageId => ("message_id", &m.message_id),
            Self::Priority => ("priority", &m.priority),
            Self::Classification => ("classification", &m.classification),
            Self::Labels => ("labels", &m.labels),
            Self::CreatedAt => ("message_created_at_epoch_ns", &m.message_created_at_epoch_ns),
            Self::JetStreamTimestamp => ("jetstream_timestamp_epoch_ns", &m.jetstream_timestamp_epoch_ns),
            Self::ReceivedAt => ("received_at_epoch_ns", &m.received_at_epoch_ns),
            Self::StoredAt => ("stored_at_epoch_ns", &m.stored_at_epoch_ns),
            Self::Payload => ("payload", &m.payload),
            Self::Headers => ("headers", &m.headers),
            Self::Metadata => ("metadata", &m.metadata),
            Self::MissionMetadata => ("mission_metadata", &m.mission_metadata),
            Self::SecurityLabels => ("security_labels", &m.security_labels),
            Self::PayloadSha256 => ("payload_sha256", &m.payload_sha256),
        }
    }

    /// True for the JSON document columns.
    pub fn is_json(self) -> bool {
        matches!(self, Self::Payload | Self::Headers | Self::Metadata | Self::MissionMetadata | Self::SecurityLabels)
    }
}
