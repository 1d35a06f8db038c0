//! Message authenticity: verifies a producer's signature on each message before anything
//! else sees it (the reference's `message_authenticity` section, byte-compatible).
//!
//! The producer signs the canonical JSON ([`crate::canonical`]) of
//! `{"algorithm", "key_id", "metadata": {<signed fields>}, "payload_sha256", "schema":
//! "nats_sinks.message_authenticity.v1", "version": 1}` with HMAC-SHA256 (shared key) or
//! Ed25519 (we hold the public key), and puts the algorithm, key id and base64 signature in
//! three headers. The first rule whose subject pattern matches decides; a message no rule
//! covers is rejected unless `unmatched_subject_action` is `allow`.
//!
//! Reason codes (the reference's): `algorithm_header_missing`, `algorithm_mismatch`,
//! `key_id_header_missing`, `key_id_mismatch`, `signature_header_missing`,
//! `signature_invalid`, `subject_not_covered_by_authenticity_policy`.
//!
//! Keys come only from environment variables named by `key_b64_env` and are read once at
//! start-up; inline `key_b64` is refused. There is no replay protection: the stream sequence
//! and timestamps are not signed (as in the reference).

use base64::Engine as _;
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Rejection, Step};
use sinks_contract::config::{ConfigError, Issues};
use sinks_contract::envelope::Envelope;
use sinks_toolkit::subject;

/// Schema name inside the signed document.
pub const SCHEMA: &str = "nats_sinks.message_authenticity.v1";
/// Largest decoded signature accepted.
pub const MAX_SIGNATURE_BYTES: usize = 1024;
/// Signed fields when a rule names none.
pub const DEFAULT_SIGNED_FIELDS: [SignedField; 2] = [SignedField::Subject, SignedField::MessageId];

/// `message_authenticity` config section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthenticityConfig {
    /// Verify signatures (default false). Needs at least one rule.
    pub enabled: bool,
    /// What happens to a message no rule covers: `reject` (default) or `allow`.
    pub unmatched_subject_action: UnmatchedAction,
    /// Header carrying the base64 signature.
    pub signature_header: String,
    /// Header naming the algorithm (`hmac-sha256` or `ed25519`).
    pub algorithm_header: String,
    /// Header naming the key id.
    pub key_id_header: String,
    /// Rules; the first whose subject matches decides.
    pub rules: Vec<AuthenticityRule>,
}

impl Default for AuthenticityConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            unmatched_subject_action: UnmatchedAction::Reject,
            signature_header: "Nats-Sinks-Authenticity-Signature".into(),
            algorithm_header: "Nats-Sinks-Authenticity-Algorithm".into(),
            key_id_header: "Nats-Sinks-Authenticity-Key-Id".into(),
            rules: Vec::new(),
        }
    }
}

/// What to do with a message that no rule (or no `pre_sink_policy` rule) covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnmatchedAction {
    /// Dead-letter it (default).
    #[default]
    Reject,
    /// Let it through unchecked.
    Allow,
}

/// One verification rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthenticityRule {
    /// Subject pattern (NATS wildcards) the rule covers.
    pub subject: String,
    /// `false` exempts matching subjects from verification (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `hmac-sha256` (default) or `ed25519` (`_` and case are normalized).
    #[serde(default)]
    pub algorithm: Algorithm,
    /// Key id the producer must name in the key id header. Required when enabled.
    #[serde(default)]
    pub key_id: Option<String>,
    /// Refused: inline key material (the reference accepts it; we do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_b64: Option<String>,
    /// Environment variable holding the base64 key: an HMAC secret of 32–1024 bytes or a
    /// 32-byte Ed25519 public key. Required when enabled.
    #[serde(default)]
    pub key_b64_env: Option<String>,
    /// Message fields covered by the signature besides the payload hash (default
    /// `["subject", "message_id"]`).
    #[serde(default = "default_signed_fields")]
    pub signed_fields: Vec<SignedField>,
}

fn yes() -> bool {
    true
}

fn default_signed_fields() -> Vec<SignedField> {
    DEFAULT_SIGNED_FIELDS.to_vec()
}

/// Signature algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum Algorithm {
    /// HMAC-SHA256 with a shared key (compared in constant time).
    #[default]
    #[serde(rename = "hmac-sha256")]
    HmacSha256,
    /// Ed25519 with the producer's public key.
    #[serde(rename = "ed25519")]
    Ed25519,
}

impl Algorithm {
    /// The header and config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HmacSha256 => "hmac-sha256",
            Self::Ed25519 => "ed25519",
        }
    }

    /// The algorithm `text` names: trimmed, any case, `_` for `-`. (Only ASCII letters lowercase
    /// to the letters of these names, so the comparison is ASCII's, made in place.)
    fn parse(text: &str) -> Option<Self> {
        let spelled = |name: &str| {
            let text = text.trim();
            text.len() == name.len()
                && text
                    .bytes()
                    .zip(name.bytes())
                    .all(|(t, n)| (if t == b'_' { b'-' } else { t.to_ascii_lowercase() }) == n)
        };
        [Self::HmacSha256, Self::Ed25519].into_iter().find(|algorithm| spelled(algorithm.as_str()))
    }
}

impl<'de> Deserialize<'de> for Algorithm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).ok_or_else(|| serde::de::Error::custom("must be `hmac-sha256` or `ed25519`"))
    }
}

/// A message field the signature covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignedField {
    /// The subject.
    Subject,
    /// The publisher message id (null when absent).
    MessageId,
    /// Resolved priority.
    Priority,
    /// Resolved classification.
    Classification,
    /// Resolved labels (a list).
    Labels,
    /// Resolved mission metadata.
    MissionMetadata,
    /// Resolved security labels.
    SecurityLabels,
}

impl SignedField {
    fn name(self) -> &'static str {
        match self {
            Self::Subject => "subject",
            Self::MessageId => "message_id",
            Self::Priority => "priority",
            Self::Classification => "classification",
            Self::Labels => "labels",
            Self::MissionMetadata => "mission_metadata",
            Self::SecurityLabels => "security_labels",
        }
    }

    fn value(self, envelope: &Envelope) -> Value {
        let app = envelope.app();
        match self {
            Self::Subject => envelope.subject().into(),
            Self::MessageId => envelope.message_id().into(),
            Self::Priority => app.priority.clone().into(),
            Self::Classification => app.classification.clone().into(),
            Self::Labels => app.labels.clone().into(),
            Self::MissionMetadata => envelope.mission_metadata().cloned().unwrap_or(Value::Null),
            Self::SecurityLabels => envelope.security_labels().cloned().unwrap_or(Value::Null),
        }
    }
}

impl<'de> Deserialize<'de> for SignedField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let all = [
            Self::Subject,
            Self::MessageId,
            Self::Priority,
            Self::Classification,
            Self::Labels,
            Self::MissionMetadata,
            Self::SecurityLabels,
        ];
        let wanted = text.trim().to_lowercase().replace('-', "_");
        all.into_iter().find(|f| f.name() == wanted).ok_or_else(|| {
            serde::de::Error::custom(
                "must be one of classification, labels, message_id, mission_metadata, priority, security_labels, \
                 subject",
            )
        })
    }
}

impl AuthenticityConfig {
    /// Checks the section (`path` is `message_authenticity`).
    pub fn validate_at(&self, path: &str, issues: &mut Issues) {
        let headers = [
            ("signature_header", &self.signature_header),
            ("algorithm_header", &self.algorithm_header),
            ("key_id_header", &self.key_id_header),
        ];
        for (field, value) in headers {
            check_header_name(&format!("{path}.{field}"), value, issues);
        }
        let folded: std::collections::BTreeSet<String> = headers.iter().map(|(_, h)| h.trim().to_lowercase()).collect();
        if folded.len() != headers.len() {
            issues.push(&format!("{path}.signature_header"), "the three authenticity header names must be distinct");
        }
        if self.enabled && self.rules.is_empty() {
            issues.push(&format!("{path}.rules"), "at least one rule is required when message_authenticity is enabled");
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let at = format!("{path}.rules[{i}]");
            if let Err(e) = subject::validate_pattern(&rule.subject) {
                issues.push(&format!("{at}.subject"), e.to_string());
            }
            if rule.key_b64.is_some() {
                issues.push(
                    &format!("{at}.key_b64"),
                    "inline key material is not accepted: put the base64 key in an environment variable and name \
                     it in key_b64_env",
                );
            }
            match &rule.key_id {
                Some(id) if id.trim().is_empty() => issues.push(&format!("{at}.key_id"), "must not be empty"),
                Some(id) if id.trim().chars().count() > 128 => {
                    issues.push(&format!("{at}.key_id"), "must not exceed 128 characters");
                }
                Some(id) if id.chars().any(char::is_control) => {
                    issues.push(&format!("{at}.key_id"), "must not contain control characters");
                }
                None if rule.enabled => issues.push(&format!("{at}.key_id"), "required when the rule is enabled"),
                _ => {}
            }
            match &rule.key_b64_env {
                Some(env) => sinks_contract::config::check_env_name(env, &format!("{at}.key_b64_env"), issues),
                None if rule.enabled => {
                    issues.push(&format!("{at}.key_b64_env"), "required when the rule is enabled");
                }
                None => {}
            }
            if rule.signed_fields.is_empty() {
                issues.push(&format!("{at}.signed_fields"), "must name at least one field");
            }
        }
    }

    /// What verification does, for `nats-sink validate`.
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![format!(
            "message authenticity: headers {} / {} / {}; subjects no rule covers are {}",
            self.algorithm_header,
            self.key_id_header,
            self.signature_header,
            match self.unmatched_subject_action {
                UnmatchedAction::Reject => "dead-lettered (subject_not_covered_by_authenticity_policy)",
                UnmatchedAction::Allow => "let through unverified",
            }
        )];
        for (i, rule) in self.rules.iter().enumerate() {
            let what = if rule.enabled {
                let fields: Vec<&str> = rule.signed_fields.iter().map(|f| f.name()).collect();
                format!(
                    "verify {} with key id {} (key from ${}), signing payload_sha256 + [{}]",
                    rule.algorithm.as_str(),
                    rule.key_id.as_deref().unwrap_or("?"),
                    rule.key_b64_env.as_deref().unwrap_or("?"),
                    fields.join(", ")
                )
            } else {
                "exempt: not verified".to_owned()
            };
            out.push(format!("  rule {} (first match wins) `{}`: {what}", i + 1, rule.subject));
        }
        out
    }
}

fn check_header_name(path: &str, name: &str, issues: &mut Issues) {
    if name.trim().is_empty() {
        issues.push(path, "must not be empty");
    } else if name.chars().any(char::is_control) {
        issues.push(path, "must not contain control characters");
    }
}

/// The canonical signed document of `envelope` (what the producer signs).
pub fn signed_document(envelope: &Envelope, algorithm: Algorithm, key_id: &str, fields: &[SignedField]) -> Value {
    let mut metadata = serde_json::Map::new();
    for field in fields {
        metadata.insert(field.name().to_owned(), field.value(envelope));
    }
    json!({
        "schema": SCHEMA,
        "version": 1,
        "algorithm": algorithm.as_str(),
        "key_id": key_id,
        "payload_sha256": hex::encode(Sha256::digest(envelope.payload())),
        "metadata": metadata,
    })
}

/// The bytes that are signed: the canonical JSON of [`signed_document`]. `None` when the
/// document cannot be rendered (a NaN cannot occur in resolved metadata, but is not
/// assumed).
pub fn signed_bytes(
    envelope: &Envelope,
    algorithm: Algorithm,
    key_id: &str,
    fields: &[SignedField],
) -> Option<Vec<u8>> {
    with_signed_bytes(envelope, algorithm, key_id, fields, <[u8]>::to_vec)
}

/// Calls `f` with the signed bytes of `envelope`, written straight from the envelope's fields
/// into this thread's rendering buffer (the bytes of `canonical::to_vec(&signed_document(..))`,
/// with no document built).
fn with_signed_bytes<R>(
    envelope: &Envelope,
    algorithm: Algorithm,
    key_id: &str,
    fields: &[SignedField],
    f: impl FnOnce(&[u8]) -> R,
) -> Option<R> {
    let payload_sha256 = crate::canonical::lower_hex(&Sha256::digest(envelope.payload()));
    let document = SignedDocument {
        algorithm: algorithm.as_str(),
        key_id,
        metadata: SignedMetadata { envelope, fields },
        payload_sha256: &payload_sha256,
        schema: SCHEMA,
        version: 1,
    };
    crate::canonical::with_buf(|buf| {
        crate::canonical::serialize_into(&document, &[], buf).ok().map(|()| f(buf.bytes()))
    })
}

/// [`signed_document`], borrowed from the envelope (fields in key order).
#[derive(Serialize)]
struct SignedDocument<'a> {
    algorithm: &'a str,
    key_id: &'a str,
    metadata: SignedMetadata<'a>,
    payload_sha256: &'a str,
    schema: &'a str,
    version: u32,
}

/// The signed fields of an envelope, as a map of field name to value.
struct SignedMetadata<'a> {
    envelope: &'a Envelope,
    fields: &'a [SignedField],
}

impl Serialize for SignedMetadata<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (envelope, app) = (self.envelope, self.envelope.app());
        let mut map = s.serialize_map(Some(self.fields.len()))?;
        for field in self.fields {
            let name = field.name();
            match field {
                SignedField::Subject => map.serialize_entry(name, envelope.subject())?,
                SignedField::MessageId => map.serialize_entry(name, &envelope.message_id())?,
                SignedField::Priority => map.serialize_entry(name, &app.priority)?,
                SignedField::Classification => map.serialize_entry(name, &app.classification)?,
                SignedField::Labels => map.serialize_entry(name, &app.labels)?,
                SignedField::MissionMetadata => map.serialize_entry(name, &envelope.mission_metadata())?,
                SignedField::SecurityLabels => map.serialize_entry(name, &envelope.security_labels())?,
            }
        }
        map.end()
    }
}

/// The base64 HMAC-SHA256 signature a producer puts in the signature header (for
/// producers written in Rust, and for tests).
pub fn hmac_signature_b64(envelope: &Envelope, key: &[u8], key_id: &str, fields: &[SignedField]) -> String {
    let bytes = signed_bytes(envelope, Algorithm::HmacSha256, key_id, fields).unwrap_or_default();
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("hmac accepts keys of any length");
    mac.update(&bytes);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// A rule ready to verify: its config and the key read from the environment.
#[derive(Clone)]
struct Prepared {
    rule: AuthenticityRule,
    key: Option<VerifyKey>,
}

#[derive(Clone)]
enum VerifyKey {
    Hmac(Vec<u8>),
    Ed25519(VerifyingKey),
}

/// The verifier: rules with their keys, read once at start-up.
#[derive(Clone)]
pub struct Authenticator {
    config: AuthenticityConfig,
    rules: Vec<Prepared>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("rules", &self.rules.len()).finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Reads every enabled rule's key from its environment variable; `None` when disabled.
    /// A missing or malformed key is a config error naming the field (never the value).
    pub fn from_config(config: &AuthenticityConfig, path: &str) -> Result<Option<Self>, ConfigError> {
        Self::from_config_with(config, path, |name| std::env::var(name).ok())
    }

    /// [`Authenticator::from_config`] reading variables through `lookup`.
    pub fn from_config_with(
        config: &AuthenticityConfig,
        path: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, ConfigError> {
        if !config.enabled {
            return Ok(None);
        }
        let mut rules = Vec::with_capacity(config.rules.len());
        for (i, rule) in config.rules.iter().enumerate() {
            let key = match (&rule.key_b64_env, rule.enabled) {
                (Some(env), true) => {
                    let field = format!("{path}.rules[{i}].key_b64_env");
                    let text = lookup(env)
                        .ok_or_else(|| ConfigError::single(&field, format!("environment variable {env} is not set")))?;
                    Some(read_key(env, &text, rule.algorithm, &field)?)
                }
                _ => None,
            };
            // The signed fields in key order (stable: a repeated field keeps its place), as
            // the canonical writer puts them: it then has nothing to sort per message.
            let mut rule = rule.clone();
            rule.signed_fields.sort_by_key(|f| f.name());
            rules.push(Prepared { rule, key });
        }
        Ok(Some(Self { config: config.clone(), rules }))
    }

    /// Verifies one message. `Ok(())` lets it through.
    pub fn check(&self, envelope: &Envelope) -> Result<(), Rejection> {
        let reject = |reason: &'static str, rule: &str| {
            Err(Rejection::new(Step::Authenticity, reason, format!("rule subject `{rule}`")))
        };
        let Some(prepared) = self.rules.iter().find(|p| subject::matches(&p.rule.subject, envelope.subject())) else {
            return match self.config.unmatched_subject_action {
                UnmatchedAction::Allow => Ok(()),
                UnmatchedAction::Reject => reject("subject_not_covered_by_authenticity_policy", "<unmatched>"),
            };
        };
        let rule = &prepared.rule;
        let Some(key) = &prepared.key else { return Ok(()) };
        let header = |name: &str| envelope.headers().get(name).map(str::trim).filter(|v| !v.is_empty());
        let Some(algorithm) = header(&self.config.algorithm_header) else {
            return reject("algorithm_header_missing", &rule.subject);
        };
        if Algorithm::parse(algorithm) != Some(rule.algorithm) {
            return reject("algorithm_mismatch", &rule.subject);
        }
        let Some(key_id) = header(&self.config.key_id_header) else {
            return reject("key_id_header_missing", &rule.subject);
        };
        if Some(key_id) != rule.key_id.as_deref().map(str::trim) {
            return reject("key_id_mismatch", &rule.subject);
        }
        let Some(signature) = header(&self.config.signature_header) else {
            return reject("signature_header_missing", &rule.subject);
        };
        let signature = decode_signature(signature);
        let valid = with_signed_bytes(envelope, rule.algorithm, key_id, &rule.signed_fields, |bytes| {
            verify(key, bytes, &signature)
        })
        .unwrap_or(false);
        if valid { Ok(()) } else { reject("signature_invalid", &rule.subject) }
    }
}

/// Decodes the signature header; anything malformed or oversized becomes an empty
/// signature, which never verifies.
fn decode_signature(text: &str) -> Vec<u8> {
    if text.len() > 4 * MAX_SIGNATURE_BYTES.div_ceil(3) {
        return Vec::new();
    }
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()
        .filter(|s| s.len() <= MAX_SIGNATURE_BYTES)
        .unwrap_or_default()
}

fn verify(key: &VerifyKey, message: &[u8], signature: &[u8]) -> bool {
    match key {
        VerifyKey::Hmac(secret) => {
            let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(secret) else { return false };
            mac.update(message);
            // Constant-time comparison.
            mac.verify_slice(signature).is_ok()
        }
        VerifyKey::Ed25519(public) => {
            Signature::from_slice(signature).is_ok_and(|sig| public.verify(message, &sig).is_ok())
        }
    }
}

fn read_key(env: &str, text: &str, algorithm: Algorithm, path: &str) -> Result<VerifyKey, ConfigError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| ConfigError::single(path, format!("environment variable {env} is not valid base64")))?;
    match algorithm {
        Algorithm::HmacSha256 if (32..=1024).contains(&bytes.len()) => Ok(VerifyKey::Hmac(bytes)),
        Algorithm::HmacSha256 => Err(ConfigError::single(
            path,
            format!("environment variable {env} must decode to 32-1024 bytes for hmac-sha256 (got {})", bytes.len()),
        )),
        Algorithm::Ed25519 => {
            let raw: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
                ConfigError::single(
                    path,
                    format!("environment variable {env} must decode to exactly 32 bytes for an ed25519 public key"),
                )
            })?;
            VerifyingKey::from_bytes(&raw).map(VerifyKey::Ed25519).map_err(|_| {
                ConfigError::single(path, format!("environment variable {env} is not a valid ed25519 public key"))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::{Signer, SigningKey};

    use super::*;
    use sinks_contract::envelope::Headers;
    use sinks_contract::testing::envelope_with;

    fn env(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    const HMAC_KEY: [u8; 32] = [7u8; 32];

    fn config(rules: Vec<AuthenticityRule>) -> AuthenticityConfig {
        AuthenticityConfig { enabled: true, rules, ..AuthenticityConfig::default() }
    }

    fn rule(subject: &str, algorithm: Algorithm, env: &str) -> AuthenticityRule {
        AuthenticityRule {
            subject: subject.into(),
            enabled: true,
            algorithm,
            key_id: Some("k1".into()),
            key_b64: None,
            key_b64_env: Some(env.into()),
            signed_fields: default_signed_fields(),
        }
    }

    fn signed(subject: &str, headers: Headers) -> Envelope {
        envelope_with("S", 1, subject, &br#"{"a":1}"#[..], headers, 1)
    }

    #[test]
    fn reason_codes_in_the_reference_order() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let auth = Authenticator::from_config_with(
            &config(vec![rule("orders.>", Algorithm::HmacSha256, "HMAC_KEY")]),
            "message_authenticity",
            env(&[("HMAC_KEY", b64(&HMAC_KEY))]),
        )
        .unwrap()
        .unwrap();
        let base = signed("orders.eu", Headers::new());
        let good = hmac_signature_b64(&base, &HMAC_KEY, "k1", &DEFAULT_SIGNED_FIELDS);
        let h = |alg: Option<&str>, kid: Option<&str>, sig: Option<&str>| {
            let mut h = Headers::new();
            if let Some(a) = alg {
                h.append("Nats-Sinks-Authenticity-Algorithm", a);
            }
            if let Some(k) = kid {
                h.append("nats-sinks-authenticity-key-id", k);
            }
            if let Some(s) = sig {
                h.append("Nats-Sinks-Authenticity-Signature", s);
            }
            h
        };
        let table: Vec<(&str, Headers, Option<&str>)> = vec![
            ("orders.eu", h(Some("HMAC_SHA256"), Some("k1"), Some(&good)), None),
            ("orders.eu", h(None, Some("k1"), Some(&good)), Some("algorithm_header_missing")),
            ("orders.eu", h(Some("  "), Some("k1"), Some(&good)), Some("algorithm_header_missing")),
            ("orders.eu", h(Some("ed25519"), Some("k1"), Some(&good)), Some("algorithm_mismatch")),
            ("orders.eu", h(Some("hmac-sha256"), None, Some(&good)), Some("key_id_header_missing")),
            ("orders.eu", h(Some("hmac-sha256"), Some("k2"), Some(&good)), Some("key_id_mismatch")),
            ("orders.eu", h(Some("hmac-sha256"), Some("k1"), None), Some("signature_header_missing")),
            ("orders.eu", h(Some("hmac-sha256"), Some("k1"), Some("not base64!")), Some("signature_invalid")),
            ("orders.eu", h(Some("hmac-sha256"), Some("k1"), Some(&b64(&[0u8; 32]))), Some("signature_invalid")),
            // The signature covers the subject: the same headers on another subject fail.
            ("orders.us", h(Some("hmac-sha256"), Some("k1"), Some(&good)), Some("signature_invalid")),
            (
                "audit.x",
                h(Some("hmac-sha256"), Some("k1"), Some(&good)),
                Some("subject_not_covered_by_authenticity_policy"),
            ),
        ];
        for (subject, headers, want) in table {
            let got = auth.check(&signed(subject, headers)).err().map(|r| r.reason.into_owned());
            assert_eq!(got.as_deref(), want, "{subject}");
        }
    }

    #[test]
    fn ed25519_verifies_with_the_public_key_only() {
        let signing = SigningKey::from_bytes(&[9u8; 32]);
        let public = base64::engine::general_purpose::STANDARD.encode(signing.verifying_key().as_bytes());
        let mut r = rule(">", Algorithm::Ed25519, "ED_KEY");
        r.signed_fields = vec![SignedField::Subject, SignedField::Labels, SignedField::Priority];
        let auth = Authenticator::from_config_with(&config(vec![r.clone()]), "m", env(&[("ED_KEY", public)]))
            .unwrap()
            .unwrap();
        let unsigned = signed("a.b", Headers::new());
        let bytes = signed_bytes(&unsigned, Algorithm::Ed25519, "k1", &r.signed_fields).unwrap();
        let sig = base64::engine::general_purpose::STANDARD.encode(signing.sign(&bytes).to_bytes());
        let headers = Headers::new()
            .with("Nats-Sinks-Authenticity-Algorithm", "ed25519")
            .with("Nats-Sinks-Authenticity-Key-Id", "k1")
            .with("Nats-Sinks-Authenticity-Signature", sig.clone());
        assert_eq!(auth.check(&signed("a.b", headers.clone())), Ok(()));
        let tampered = envelope_with("S", 1, "a.b", &br#"{"a":2}"#[..], headers, 1);
        assert_eq!(auth.check(&tampered).unwrap_err().reason, "signature_invalid");
    }

    #[test]
    fn unmatched_allow_disabled_rule_and_keys_at_start() {
        let mut c = config(vec![AuthenticityRule {
            enabled: false,
            key_id: None,
            key_b64_env: None,
            ..rule("x.>", Algorithm::HmacSha256, "U")
        }]);
        c.unmatched_subject_action = UnmatchedAction::Allow;
        let auth = Authenticator::from_config_with(&c, "m", env(&[])).unwrap().unwrap();
        assert_eq!(auth.check(&signed("x.y", Headers::new())), Ok(()), "exempt rule");
        assert_eq!(auth.check(&signed("z", Headers::new())), Ok(()), "unmatched allowed");
        let missing = config(vec![rule(">", Algorithm::HmacSha256, "UNSET")]);
        let err = Authenticator::from_config_with(&missing, "message_authenticity", env(&[])).unwrap_err().to_string();
        assert!(err.contains("message_authenticity.rules[0].key_b64_env") && err.contains("is not set"), "{err}");
        let short = config(vec![rule(">", Algorithm::HmacSha256, "SHORT")]);
        let err =
            Authenticator::from_config_with(&short, "m", env(&[("SHORT", "c2hvcnQ=".into())])).unwrap_err().to_string();
        assert!(err.contains("32-1024 bytes") && !err.contains("c2hvcnQ"), "{err}");
    }

    #[test]
    fn config_validation_names_fields() {
        let mut c = config(vec![]);
        c.key_id_header = c.signature_header.to_uppercase();
        let mut issues = Issues::default();
        c.validate_at("message_authenticity", &mut issues);
        let paths: Vec<String> = issues.finish().unwrap_err().issues.into_iter().map(|i| i.path).collect();
        assert_eq!(paths, ["message_authenticity.signature_header", "message_authenticity.rules"]);
        let mut c = config(vec![AuthenticityRule {
            key_b64: Some("AAAA".into()),
            key_id: None,
            ..rule("a..b", Algorithm::HmacSha256, "1X")
        }]);
        c.rules[0].signed_fields.clear();
        let mut issues = Issues::default();
        c.validate_at("message_authenticity", &mut issues);
        let paths: Vec<String> = issues.finish().unwrap_err().issues.into_iter().map(|i| i.path).collect();
        assert_eq!(
            paths,
            [
                "message_authenticity.rules[0].subject",
                "message_authenticity.rules[0].key_b64",
                "message_authenticity.rules[0].key_id",
                "message_authenticity.rules[0].key_b64_env",
                "message_authenticity.rules[0].signed_fields",
            ]
        );
    }

    #[test]
    fn signed_fields_parse_like_the_reference() {
        let r: AuthenticityRule =
            serde_json::from_value(json!({"subject": ">", "key_id": "k", "key_b64_env": "K", "signed_fields": ["Message-ID", "mission_metadata"]}))
                .unwrap();
        assert_eq!(r.signed_fields, [SignedField::MessageId, SignedField::MissionMetadata]);
        assert!(
            serde_json::from_value::<AuthenticityRule>(json!({"subject": ">", "signed_fields": ["payload"]})).is_err()
        );
        let r: AuthenticityRule = serde_json::from_value(json!({"subject": ">", "algorithm": "ED25519"})).unwrap();
        assert_eq!(r.algorithm, Algorithm::Ed25519);
    }

    fn fields() -> impl proptest::prelude::Strategy<Value = Vec<SignedField>> {
        use SignedField::*;
        proptest::collection::vec(
            proptest::sample::select(vec![
                Subject,
                MessageId,
                Priority,
                Classification,
                Labels,
                MissionMetadata,
                SecurityLabels,
            ]),
            0..9,
        )
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        #[test]
        fn streamed_signed_bytes_are_the_rendered_signed_document(
            e in crate::canonical::arbitrary::envelope(),
            fields in fields(),
            ed in proptest::prelude::any::<bool>(),
            key_id in "[ -~]{0,12}",
        ) {
            let algorithm = if ed { Algorithm::Ed25519 } else { Algorithm::HmacSha256 };
            let tree = crate::canonical::to_vec(&signed_document(&e, algorithm, &key_id, &fields)).ok();
            proptest::prop_assert_eq!(signed_bytes(&e, algorithm, &key_id, &fields), tree);
        }

        #[test]
        fn algorithm_names_parse_as_by_a_lowercased_copy(
            text in proptest::prelude::prop_oneof![
                "[ \t]{0,2}(?i)(hmac[-_]sha256|ed25519|hmac[-_]sha25|ed2551)[ \t]{0,2}",
                proptest::prelude::any::<String>(),
                "[\u{212a}\u{130}hHmMaAcC_-]{0,12}",
            ]
        ) {
            let by_copy = match text.trim().to_lowercase().replace('_', "-").as_str() {
                "hmac-sha256" => Some(Algorithm::HmacSha256),
                "ed25519" => Some(Algorithm::Ed25519),
                _ => None,
            };
            proptest::prop_assert_eq!(Algorithm::parse(&text), by_copy, "{:?}", text);
        }
    }
}
