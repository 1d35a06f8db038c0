//! `dead_letter` section: where the records of messages that cannot be written are
//! published and what they carry. A configuration type, kept with the others below the
//! publisher that reads it (`crate::dlq`, which re-exports it under its earlier path).

use serde::{Deserialize, Serialize};

/// `dead_letter` config section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeadLetterConfig {
    /// Publish permanently failing messages to `subject` (which a stream must capture).
    pub enabled: bool,
    /// Subject the records are published on; required when enabled.
    pub subject: Option<String>,
    /// Include the original payload as `payload_base64`.
    pub include_payload: bool,
    /// Include the original headers.
    pub include_headers: bool,
    /// Include `error_type` and `error`.
    pub include_error: bool,
    /// Terminate (`+TERM`) the original after the record is stored, instead of acking it.
    pub ack_term_after_publish: bool,
    /// What a record carries for a payload that payload encryption covers: `ciphertext`
    /// (default: the encryption envelope, never the plaintext) or `omit` (no payload at all;
    /// `payload_unavailable_reason: "encrypted_payload_omitted"`). nats-sinks extension.
    pub encrypted_payload: EncryptedPayload,
}

/// What a DLQ record carries for an encrypted payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EncryptedPayload {
    /// The encryption envelope (ciphertext), as the sink received it.
    #[default]
    Ciphertext,
    /// Nothing.
    Omit,
}

impl Default for DeadLetterConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            subject: None,
            include_payload: true,
            include_headers: true,
            include_error: true,
            ack_term_after_publish: false,
            encrypted_payload: EncryptedPayload::Ciphertext,
        }
    }
}
