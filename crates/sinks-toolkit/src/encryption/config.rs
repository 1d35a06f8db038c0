//! `encryption` section: payload encryption before any sink sees the data (the reference's
//! fields, plus key rotation and an AAD-bound envelope version). The same type configures
//! the spool sink's record encryption (`sink.encryption`).
//!
//! Key material only ever comes from environment variables (`key_b64_env`); an inline
//! `key_b64`, which the reference accepts, is refused so that no key sits in a config file.

use serde::{Deserialize, Deserializer, Serialize};

use crate::subject;
use sinks_contract::config::Issues;

/// The AEAD algorithm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// AES-256 in Galois/Counter Mode (16-byte tag).
    #[default]
    #[serde(rename = "aes-256-gcm")]
    Aes256Gcm,
    /// AES-256 in Counter with CBC-MAC mode (tag of `tag_length` bytes).
    #[serde(rename = "aes-256-ccm")]
    Aes256Ccm,
}

impl Algorithm {
    /// The name written into envelopes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aes256Gcm => "aes-256-gcm",
            Self::Aes256Ccm => "aes-256-ccm",
        }
    }

    /// Parses a name the way the reference does: case-insensitive, `_` as `-`.
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "aes-256-gcm" => Some(Self::Aes256Gcm),
            "aes-256-ccm" => Some(Self::Aes256Ccm),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Algorithm {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Self::parse(&name).ok_or_else(|| serde::de::Error::custom("must be `aes-256-gcm` or `aes-256-ccm`"))
    }
}

/// Tag lengths AES-CCM accepts.
pub const CCM_TAG_LENGTHS: [u8; 7] = [4, 6, 8, 10, 12, 14, 16];

/// `encryption` (and the spool's `sink.encryption`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EncryptionConfig {
    /// Encrypt every subject no rule matches (default false).
    pub enabled: bool,
    /// `aes-256-gcm` (default) or `aes-256-ccm`; case and `_` are normalized.
    pub algorithm: Algorithm,
    /// Non-secret identifier of the active key, written into every envelope (≤ 128
    /// characters; default `default`). Readers pick the key by it.
    pub key_id: String,
    /// Refused: key material is only accepted from the environment (`key_b64_env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_b64: Option<String>,
    /// Environment variable holding the base64 of exactly 32 key bytes.
    pub key_b64_env: Option<String>,
    /// Nonce length, 7–13 bytes (default 12; AES-GCM needs at least 8).
    pub nonce_size_bytes: u8,
    /// How each nonce is made: `derived` (default: from the key, the record the ciphertext
    /// belongs to and the plaintext, so every delivery of one message seals to the same bytes
    /// and a redelivery sends the same content) or `random` (fresh OS randomness each time,
    /// as the reference does: the sealed body differs on every delivery).
    pub nonce: NonceMode,
    /// AES-CCM tag length: 4, 6, 8, 10, 12, 14 or 16 (default 16). AES-GCM always uses 16.
    pub tag_length: u8,
    /// Per-subject rules: the first matching rule decides; a disabled rule passes its
    /// subjects through; unmatched subjects follow `enabled`. Omitted fields inherit.
    pub rules: Vec<EncryptionRule>,
    /// Envelope version written: 1 (default, the reference's `nats_sinks.encrypted_payload.v1`,
    /// readable by the reference) or 2 (nats-sinks: the ciphertext is bound to its record —
    /// subject, stream and stream sequence — as AAD, and the plaintext hash is not written).
    /// Readers accept both.
    pub format_version: u8,
    /// Older keys accepted for decryption only (key rotation): `{key_id, key_b64_env}`.
    pub decrypt_keys: Vec<DecryptKey>,
}

impl Default for EncryptionConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            algorithm: Algorithm::Aes256Gcm,
            key_id: "default".into(),
            key_b64: None,
            key_b64_env: None,
            nonce_size_bytes: 12,
            nonce: NonceMode::default(),
            tag_length: 16,
            rules: Vec::new(),
            format_version: 1,
            decrypt_keys: Vec::new(),
        }
    }
}

/// How a cipher makes its nonces (`encryption.nonce`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NonceMode {
    /// A synthetic nonce: the first `nonce_size_bytes` of HMAC-SHA256, under a key derived
    /// from the encryption key, of the record the ciphertext belongs to (subject, stream,
    /// sequence; or the spool record's identity), the key id, the envelope version and the
    /// plaintext. The same message and payload always seal to the same envelope (a
    /// redelivery sends byte-identical content); two different plaintexts or records get
    /// nonces as unrelated as random ones (the SIV construction of RFC 5297 and AES-GCM-SIV:
    /// a repeated nonce only ever repeats the same plaintext, which leaks only that the two
    /// are equal).
    #[default]
    Derived,
    /// Fresh OS randomness per encryption (the reference's behaviour).
    Random,
}

/// One `encryption.rules[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncryptionRule {
    /// NATS subject pattern (`*`, `>`).
    pub subject: String,
    /// False: matching subjects pass through unencrypted (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Overrides `algorithm`.
    #[serde(default)]
    pub algorithm: Option<Algorithm>,
    /// Overrides `key_id`.
    #[serde(default)]
    pub key_id: Option<String>,
    /// Refused, as the top-level `key_b64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_b64: Option<String>,
    /// Overrides `key_b64_env`.
    #[serde(default)]
    pub key_b64_env: Option<String>,
    /// Overrides `nonce_size_bytes`.
    #[serde(default)]
    pub nonce_size_bytes: Option<u8>,
    /// Overrides `tag_length`.
    #[serde(default)]
    pub tag_length: Option<u8>,
}

fn yes() -> bool {
    true
}

/// A decryption-only key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecryptKey {
    /// The key's identifier, as written in the envelopes it encrypted.
    pub key_id: String,
    /// Environment variable holding the base64 of its 32 bytes.
    pub key_b64_env: String,
}

/// The concrete settings one message is encrypted with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Algorithm.
    pub algorithm: Algorithm,
    /// Key identifier.
    pub key_id: String,
    /// Variable holding the key.
    pub key_b64_env: String,
    /// Nonce length.
    pub nonce_size_bytes: u8,
    /// Tag length (16 for GCM).
    pub tag_length: u8,
    /// How nonces are made.
    pub nonce: NonceMode,
}

impl EncryptionConfig {
    /// True when some message could be encrypted (the section or a rule is enabled).
    pub fn is_active(&self) -> bool {
        self.enabled || self.rules.iter().any(|r| r.enabled)
    }

    /// The policy of the top level (for unmatched subjects, and for the spool).
    pub fn default_policy(&self) -> Option<Policy> {
        Some(Policy {
            algorithm: self.algorithm,
            key_id: self.key_id.clone(),
            key_b64_env: self.key_b64_env.clone()?,
            nonce_size_bytes: self.nonce_size_bytes,
            tag_length: self.effective_tag(self.algorithm, self.tag_length),
            nonce: self.nonce,
        })
    }

    /// The policy of rule `rule` (its fields over the top level's), when it encrypts.
    pub fn rule_policy(&self, rule: &EncryptionRule) -> Option<Policy> {
        if !rule.enabled {
            return None;
        }
        let algorithm = rule.algorithm.unwrap_or(self.algorithm);
        Some(Policy {
            algorithm,
            key_id: rule.key_id.clone().unwrap_or_else(|| self.key_id.clone()),
            key_b64_env: rule.key_b64_env.clone().or_else(|| self.key_b64_env.clone())?,
            nonce_size_bytes: rule.nonce_size_bytes.unwrap_or(self.nonce_size_bytes),
            tag_length: self.effective_tag(algorithm, rule.tag_length.unwrap_or(self.tag_length)),
            nonce: self.nonce,
        })
    }

    fn effective_tag(&self, algorithm: Algorithm, tag: u8) -> u8 {
        match algorithm {
            Algorithm::Aes256Gcm => 16,
            Algorithm::Aes256Ccm => tag,
        }
    }

    /// Checks the section at `path` (`encryption` or `sink.encryption`).
    pub fn validate_at(&self, path: &str, issues: &mut Issues) {
        let inline = "inline key material is not accepted: put the base64 key in an environment variable and \
                      name it in key_b64_env";
        if self.key_b64.is_some() {
            issues.push(&format!("{path}.key_b64"), inline);
        }
        check_key_id(&format!("{path}.key_id"), &self.key_id, issues);
        if let Some(env) = &self.key_b64_env {
            sinks_contract::config::check_env_name(env, &format!("{path}.key_b64_env"), issues);
        }
        check_sizes(path, self.algorithm, self.nonce_size_bytes, self.tag_length, issues);
        if self.enabled && self.key_b64_env.is_none() {
            issues.push(&format!("{path}.key_b64_env"), "required when encryption is enabled");
        }
        if !matches!(self.format_version, 1 | 2) {
            issues.push(&format!("{path}.format_version"), "must be 1 (the reference's envelope) or 2 (AAD-bound)");
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let at = format!("{path}.rules[{i}]");
            if let Err(e) = subject::validate_pattern(&rule.subject) {
                issues.push(&format!("{at}.subject"), e.to_string());
            }
            if rule.key_b64.is_some() {
                issues.push(&format!("{at}.key_b64"), inline);
            }
            if let Some(id) = &rule.key_id {
                check_key_id(&format!("{at}.key_id"), id, issues);
            }
            if let Some(env) = &rule.key_b64_env {
                sinks_contract::config::check_env_name(env, &format!("{at}.key_b64_env"), issues);
            }
            let algorithm = rule.algorithm.unwrap_or(self.algorithm);
            let nonce = rule.nonce_size_bytes.unwrap_or(self.nonce_size_bytes);
            let tag = rule.tag_length.unwrap_or(self.tag_length);
            check_sizes(&at, algorithm, nonce, tag, issues);
            if rule.enabled && rule.key_b64_env.is_none() && self.key_b64_env.is_none() {
                issues.push(
                    &format!("{at}.key_b64_env"),
                    "required: the rule encrypts and no top-level encryption.key_b64_env is configured",
                );
            }
        }
        let mut ids = std::collections::BTreeSet::new();
        for (i, key) in self.decrypt_keys.iter().enumerate() {
            let at = format!("{path}.decrypt_keys[{i}]");
            check_key_id(&format!("{at}.key_id"), &key.key_id, issues);
            sinks_contract::config::check_env_name(&key.key_b64_env, &format!("{at}.key_b64_env"), issues);
            if !ids.insert(key.key_id.as_str()) {
                issues.push(&format!("{at}.key_id"), "appears twice");
            }
        }
    }
}

fn check_key_id(path: &str, id: &str, issues: &mut Issues) {
    if id.trim().is_empty() {
        issues.push(path, "must not be empty");
    } else if id.chars().count() > 128 {
        issues.push(path, "must not exceed 128 characters");
    } else if id.chars().any(char::is_control) {
        issues.push(path, "must not contain control characters");
    }
}

fn check_sizes(path: &str, algorithm: Algorithm, nonce: u8, tag: u8, issues: &mut Issues) {
    let (min, max) = match algorithm {
        Algorithm::Aes256Gcm => (8, 13),
        Algorithm::Aes256Ccm => (7, 13),
    };
    if !(min..=max).contains(&nonce) {
        issues.push(
            &format!("{path}.nonce_size_bytes"),
            format!("must be in {min}..={max} for {} (got {nonce})", algorithm.as_str()),
        );
    }
    if !CCM_TAG_LENGTHS.contains(&tag) {
        issues.push(&format!("{path}.tag_length"), "must be one of 4, 6, 8, 10, 12, 14, 16");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues_of(value: serde_json::Value) -> Vec<String> {
        let config: EncryptionConfig = match serde_json::from_value(value) {
            Ok(c) => c,
            Err(e) => return vec![format!("parse: {e}")],
        };
        let mut issues = Issues::default();
        config.validate_at("encryption", &mut issues);
        match issues.finish() {
            Ok(()) => Vec::new(),
            Err(e) => e.issues.into_iter().map(|i| i.path).collect(),
        }
    }

    #[test]
    fn validation_table() {
        let cases: &[(serde_json::Value, &[&str])] = &[
            (serde_json::json!({}), &[]),
            (serde_json::json!({"enabled": true, "key_b64_env": "K"}), &[]),
            (serde_json::json!({"enabled": true}), &["encryption.key_b64_env"]),
            (serde_json::json!({"enabled": true, "key_b64": "AAAA", "key_b64_env": "K"}), &["encryption.key_b64"]),
            (serde_json::json!({"key_b64_env": "bad name"}), &["encryption.key_b64_env"]),
            (serde_json::json!({"algorithm": "AES_256_CCM", "nonce_size_bytes": 7, "tag_length": 8}), &[]),
            (serde_json::json!({"nonce_size_bytes": 7}), &["encryption.nonce_size_bytes"]),
            (serde_json::json!({"tag_length": 5}), &["encryption.tag_length"]),
            (serde_json::json!({"key_id": ""}), &["encryption.key_id"]),
            (serde_json::json!({"format_version": 3}), &["encryption.format_version"]),
            (serde_json::json!({"rules": [{"subject": "a.>"}]}), &["encryption.rules[0].key_b64_env"]),
            (serde_json::json!({"rules": [{"subject": "a.>", "enabled": false}]}), &[]),
            (serde_json::json!({"rules": [{"subject": "a..b", "enabled": false}]}), &["encryption.rules[0].subject"]),
            (serde_json::json!({"key_b64_env": "K", "rules": [{"subject": "a.>"}]}), &[]),
            (
                serde_json::json!({"decrypt_keys": [{"key_id": "old", "key_b64_env": "A"}, {"key_id": "old", "key_b64_env": "B"}]}),
                &["encryption.decrypt_keys[1].key_id"],
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(issues_of(value.clone()), *expected, "{value}");
        }
    }

    #[test]
    fn rules_inherit_and_gcm_tags_are_16() {
        let c: EncryptionConfig = serde_json::from_value(serde_json::json!({
            "key_id": "top", "key_b64_env": "TOP", "tag_length": 8,
            "rules": [{"subject": "s.>", "algorithm": "aes-256-ccm"}, {"subject": "p.>", "enabled": false}]
        }))
        .unwrap();
        let ccm = c.rule_policy(&c.rules[0]).unwrap();
        assert_eq!(
            (ccm.algorithm, ccm.key_id.as_str(), ccm.key_b64_env.as_str(), ccm.tag_length),
            (Algorithm::Aes256Ccm, "top", "TOP", 8)
        );
        assert_eq!(c.rule_policy(&c.rules[1]), None);
        assert_eq!(c.default_policy().unwrap().tag_length, 16, "GCM always writes 16");
        assert!(c.is_active());
    }
}
