//! Mission metadata profiles: the four built-in shapes the reference checks whenever an
//! object's `profile` names one, and operator-defined profiles (`mission_metadata.profiles`).
//!
//! Built-in profiles (checked whether or not `allowed_profiles` lists them):
//! - `nats-sinks.artifact-reference.v1`: `artifact_id`, `uri` (scheme `artifact`, `file`,
//!   `https`, `oci`, `s3` or `urn`; a location for `https`/`oci`/`s3`/`artifact`),
//!   `media_type`, `sha256` (64 hex digits) required; `size_bytes` (0–10 TiB), `created_at`,
//!   texts, `labels`, `encryption` optional;
//! - `nats-sinks.data-quality.v1`: scores in 0–1, `quality_source`, `assessed_at`;
//! - `nats-sinks.geo-temporal-track-fix.v1`: `track_id`, `source_system`, `event_time`
//!   required; enums, heading 0–360, latitude/longitude ranges, embedded data quality;
//! - `nats-sinks.object-relationship.v1`: `object_id`, `object_type`, `object_operation`
//!   required (relationship fields when the operation is `relationship_upsert`).
//!
//! Timestamps are accepted exactly when Python 3.11's `datetime.fromisoformat` accepts them
//! (after `Z` → `+00:00`), and URIs are split as Python's `urllib.parse.urlparse` splits them,
//! because those are what the reference runs (both emulated in [`crate::pycompat`]). The
//! profile checks are tested through [`super::mission`]'s profile table, which the reference
//! also judges. Every failure is reason
//! `mission_metadata_profile_invalid` with the failing field's path.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::pycompat;
use crate::strict_doc::{Json, has_control, key_pattern_matches, looks_secret};
use crate::violation::{Kind, Violation};
use sinks_contract::config::Issues;

/// Built-in artifact reference profile.
pub const ARTIFACT_REFERENCE_PROFILE: &str = "nats-sinks.artifact-reference.v1";
/// Built-in data quality profile.
pub const DATA_QUALITY_PROFILE: &str = "nats-sinks.data-quality.v1";
/// Built-in geo-temporal track fix profile.
pub const GEO_TEMPORAL_TRACK_FIX_PROFILE: &str = "nats-sinks.geo-temporal-track-fix.v1";
/// Built-in object relationship profile.
pub const OBJECT_RELATIONSHIP_PROFILE: &str = "nats-sinks.object-relationship.v1";
/// The built-in profiles, checked whenever an object's `profile` names one.
pub const BUILT_IN_PROFILES: [&str; 4] =
    [ARTIFACT_REFERENCE_PROFILE, DATA_QUALITY_PROFILE, GEO_TEMPORAL_TRACK_FIX_PROFILE, OBJECT_RELATIONSHIP_PROFILE];

/// Most operator-defined profiles.
pub const MAX_PROFILES: usize = 64;
/// Most fields (required plus optional) in one operator profile.
pub const MAX_PROFILE_FIELDS: usize = 128;
/// Most `enum` values of one field.
pub const MAX_ENUM_VALUES: usize = 128;
/// Largest `max_length`.
pub const MAX_FIELD_STRING_LENGTH: u64 = 4096;
/// Largest `max_items`.
pub const MAX_FIELD_ARRAY_ITEMS: u64 = 256;
/// Largest `max_fields`.
pub const MAX_FIELD_OBJECT_FIELDS: u64 = 128;
/// Largest `max_depth`.
pub const MAX_FIELD_DEPTH: u64 = 8;
/// Longest profile or field name, in characters.
pub const MAX_NAME_LENGTH: usize = 128;
/// Longest string `version`, in characters.
pub const MAX_VERSION_LENGTH: usize = 64;

/// One operator-defined profile (`mission_metadata.profiles[]`). An object whose `profile`
/// equals `name` must satisfy it; other objects are not affected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetadataProfile {
    /// Profile name (a letter, then letters, digits, `_ . : -`; ≤ 128 characters).
    pub name: String,
    /// When set, the object's `profile_version` must equal it (an integer ≥ 0 or a string
    /// of ≤ 64 characters).
    #[serde(default)]
    pub version: Option<ProfileVersion>,
    /// Fields the object must have, each checked against its rule.
    #[serde(default)]
    pub required_fields: Vec<ProfileField>,
    /// Fields checked against their rule when present.
    #[serde(default)]
    pub optional_fields: Vec<ProfileField>,
    /// `allow` (default): other root fields are accepted; `forbid`: only `profile`,
    /// `profile_version` (when `version` is set) and the listed fields may appear.
    #[serde(default)]
    pub unknown_fields: UnknownFields,
    /// Deepest nesting of the whole object (0–8).
    #[serde(default)]
    pub max_depth: Option<u64>,
    /// Most root fields (0–128).
    #[serde(default)]
    pub max_fields: Option<u64>,
}

/// A profile version: an integer or a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProfileVersion {
    /// An integer version, e.g. `1`.
    Number(i64),
    /// A string version, e.g. `"2026.1"` (trimmed).
    Text(String),
}

/// What an operator profile does with root fields it does not list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnknownFields {
    /// Accept them.
    #[default]
    Allow,
    /// Refuse the object.
    Forbid,
}

/// The JSON type a profile field must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// A JSON array.
    Array,
    /// `true` or `false`.
    Boolean,
    /// A number written without fraction or exponent.
    Integer,
    /// `null`.
    Null,
    /// Any number.
    Number,
    /// A JSON object.
    Object,
    /// A string.
    String,
}

impl FieldType {
    fn name(self) -> &'static str {
        match self {
            Self::Array => "array",
            Self::Boolean => "boolean",
            Self::Integer => "integer",
            Self::Null => "null",
            Self::Number => "number",
            Self::Object => "object",
            Self::String => "string",
        }
    }

    fn described(self) -> &'static str {
        match self {
            Self::Array => "an array",
            Self::Boolean => "a boolean",
            Self::Integer => "an integer",
            Self::Null => "null",
            Self::Number => "a number",
            Self::Object => "an object",
            Self::String => "a string",
        }
    }

    fn accepts(self, value: &Json) -> bool {
        matches!(
            (self, value),
            (Self::Array, Json::Array(_))
                | (Self::Boolean, Json::Bool(_))
                | (Self::Integer, Json::Int(_))
                | (Self::Null, Json::Null)
                | (Self::Number, Json::Int(_) | Json::Float(_))
                | (Self::Object, Json::Object(_))
                | (Self::String, Json::Str(_))
        )
    }
}

/// The rule for one root field of an operator profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileField {
    /// Root field name (as profile names; not `profile`, not secret-looking).
    pub name: String,
    /// Required JSON type: `array`, `boolean`, `integer`, `null`, `number`, `object` or
    /// `string`.
    #[serde(rename = "type")]
    pub kind: FieldType,
    /// Longest string, in characters (0–4096; `string` fields only).
    #[serde(default)]
    pub max_length: Option<u64>,
    /// When not empty, the value must equal one of these JSON scalars (≤ 128; numbers
    /// compare by value, `1` equals `1.0`).
    #[serde(rename = "enum", default, deserialize_with = "null_as_empty")]
    pub allowed_values: Vec<Value>,
    /// Most array items (0–256; `array` fields only).
    #[serde(default)]
    pub max_items: Option<u64>,
    /// Deepest nesting of the value (0–8).
    #[serde(default)]
    pub max_depth: Option<u64>,
    /// Most object fields (0–128; `object` fields only).
    #[serde(default)]
    pub max_fields: Option<u64>,
}

fn null_as_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Value>, D::Error> {
    Ok(Option::<Vec<Value>>::deserialize(deserializer)?.unwrap_or_default())
}

/// Checks `mission_metadata.profiles` (at `path`).
pub(crate) fn validate_profiles(path: &str, profiles: &[MetadataProfile], issues: &mut Issues) {
    if profiles.len() > MAX_PROFILES {
        issues.push(path, format!("must not define more than {MAX_PROFILES} profiles"));
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, profile) in profiles.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let name = pycompat::strip(&profile.name);
        if let Some(problem) = name_problem(name) {
            issues.push(&format!("{at}.name"), problem);
        } else if names.contains(&name) {
            issues.push(&format!("{at}.name"), "duplicates an earlier profile name");
        }
        names.push(name);
        match &profile.version {
            Some(ProfileVersion::Number(n)) if *n < 0 => issues.push(&format!("{at}.version"), "must not be negative"),
            Some(ProfileVersion::Text(text)) => {
                let text = pycompat::strip(text);
                if text.is_empty() {
                    issues.push(&format!("{at}.version"), "must not be empty");
                } else if has_control(text) {
                    issues.push(&format!("{at}.version"), "must not contain control characters");
                } else if text.chars().count() > MAX_VERSION_LENGTH {
                    issues.push(&format!("{at}.version"), format!("must not exceed {MAX_VERSION_LENGTH} characters"));
                }
            }
            _ => {}
        }
        if let Some(depth) = profile.max_depth {
            issues.range(&format!("{at}.max_depth"), depth, 0, MAX_FIELD_DEPTH);
        }
        if let Some(fields) = profile.max_fields {
            issues.range(&format!("{at}.max_fields"), fields, 0, MAX_FIELD_OBJECT_FIELDS);
        }
        if profile.required_fields.len() + profile.optional_fields.len() > MAX_PROFILE_FIELDS {
            issues.push(&at, format!("must not define more than {MAX_PROFILE_FIELDS} fields"));
        }
        let mut field_names: Vec<&str> = Vec::new();
        let lists = [("required_fields", &profile.required_fields), ("optional_fields", &profile.optional_fields)];
        for (list, fields) in lists {
            for (j, field) in fields.iter().enumerate() {
                let at = format!("{at}.{list}[{j}]");
                let name = pycompat::strip(&field.name);
                if field_names.contains(&name) {
                    issues.push(&format!("{at}.name"), "is defined more than once in this profile");
                }
                field_names.push(name);
                validate_field(&at, field, issues);
            }
        }
    }
}

fn validate_field(at: &str, field: &ProfileField, issues: &mut Issues) {
    let name = pycompat::strip(&field.name);
    let problem = text_problem(name).or_else(|| {
        if name == "profile" {
            Some("must not redefine the reserved profile field".to_owned())
        } else if !key_pattern_matches(name) {
            Some(PATTERN_PROBLEM.to_owned())
        } else if looks_secret(name) {
            Some("looks secret-like and is not allowed".to_owned())
        } else {
            None
        }
    });
    if let Some(problem) = problem {
        issues.push(&format!("{at}.name"), problem);
    }
    let limits = [
        ("max_length", field.max_length, MAX_FIELD_STRING_LENGTH, Some(FieldType::String)),
        ("max_items", field.max_items, MAX_FIELD_ARRAY_ITEMS, Some(FieldType::Array)),
        ("max_depth", field.max_depth, MAX_FIELD_DEPTH, None),
        ("max_fields", field.max_fields, MAX_FIELD_OBJECT_FIELDS, Some(FieldType::Object)),
    ];
    for (key, value, max, only_for) in limits {
        let Some(value) = value else { continue };
        issues.range(&format!("{at}.{key}"), value, 0, max);
        if let Some(kind) = only_for
            && field.kind != kind
        {
            issues.push(&format!("{at}.{key}"), format!("requires type `{}`", kind.name()));
        }
    }
    if field.allowed_values.len() > MAX_ENUM_VALUES {
        issues.push(&format!("{at}.enum"), format!("must not exceed {MAX_ENUM_VALUES} values"));
    }
    for (k, value) in field.allowed_values.iter().enumerate() {
        if matches!(value, Value::Array(_) | Value::Object(_)) {
            issues.push(&format!("{at}.enum[{k}]"), "must be a JSON scalar (string, number, boolean or null)");
        }
    }
}

const PATTERN_PROBLEM: &str =
    "must start with a letter and contain only letters, digits, underscores, dots, colons or hyphens";

/// Problems with a trimmed profile or field name common to both.
fn text_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("must not be empty".to_owned())
    } else if has_control(name) {
        Some("must not contain control characters".to_owned())
    } else if name.chars().count() > MAX_NAME_LENGTH {
        Some(format!("must not exceed {MAX_NAME_LENGTH} characters"))
    } else {
        None
    }
}

fn name_problem(name: &str) -> Option<String> {
    text_problem(name).or_else(|| (!key_pattern_matches(name)).then(|| PATTERN_PROBLEM.to_owned()))
}

impl MetadataProfile {
    /// One line for `nats-sink validate`.
    pub fn describe(&self) -> String {
        let version = match &self.version {
            Some(ProfileVersion::Number(n)) => format!(" (profile_version {n})"),
            Some(ProfileVersion::Text(t)) => format!(" (profile_version `{}`)", pycompat::strip(t)),
            None => String::new(),
        };
        let list = |fields: &[ProfileField]| {
            if fields.is_empty() {
                "none".to_owned()
            } else {
                fields
                    .iter()
                    .map(|f| format!("{} ({})", pycompat::strip(&f.name), f.kind.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        let unknown = match self.unknown_fields {
            UnknownFields::Allow => "allowed",
            UnknownFields::Forbid => "forbidden",
        };
        format!(
            "operator profile `{}`{version}: required {}; optional {}; other fields {unknown}",
            pycompat::strip(&self.name),
            list(&self.required_fields),
            list(&self.optional_fields)
        )
    }

    fn check(&self, object: &Json) -> Result<(), Violation> {
        let name = pycompat::strip(&self.name);
        if let Some(version) = &self.version {
            let expected = match version {
                ProfileVersion::Number(n) => Json::Int(i128::from(*n)),
                ProfileVersion::Text(t) => Json::Str(pycompat::strip(t).to_owned()),
            };
            if !object.get("profile_version").unwrap_or(&Json::Null).py_eq(&expected) {
                return Err(fail(".profile_version", format!("must match the version of profile {name}")));
            }
        }
        let Json::Object(members) = object else { return Ok(()) };
        if let Some(max) = self.max_fields
            && members.len() as u64 > max
        {
            return Err(fail("", format!("object exceeds {max} fields (profile {name})")));
        }
        if let Some(max) = self.max_depth
            && object.depth() as u64 > max
        {
            return Err(fail("", format!("exceeds nesting depth {max} (profile {name})")));
        }
        for field in &self.required_fields {
            let field_name = pycompat::strip(&field.name);
            match object.get(field_name) {
                None => return Err(fail(&format!(".{field_name}"), format!("is required by profile {name}"))),
                Some(value) => field.check(field_name, value)?,
            }
        }
        for field in &self.optional_fields {
            let field_name = pycompat::strip(&field.name);
            if let Some(value) = object.get(field_name) {
                field.check(field_name, value)?;
            }
        }
        if self.unknown_fields == UnknownFields::Forbid {
            let listed = |key: &str| {
                key == "profile"
                    || (key == "profile_version" && self.version.is_some())
                    || self.required_fields.iter().chain(&self.optional_fields).any(|f| pycompat::strip(&f.name) == key)
            };
            if let Some((key, _)) = members.iter().find(|(key, _)| !listed(key)) {
                return Err(fail(&format!(".{key}"), format!("is not allowed by profile {name}")));
            }
        }
        Ok(())
    }
}

impl ProfileField {
    fn check(&self, name: &str, value: &Json) -> Result<(), Violation> {
        let at = format!(".{name}");
        if !self.kind.accepts(value) {
            return Err(fail(&at, format!("must be {}", self.kind.described())));
        }
        if !self.allowed_values.is_empty() && !self.allowed_values.iter().any(|v| value.py_eq(&Json::from_value(v))) {
            return Err(fail(&at, "must be one of the configured enum values"));
        }
        match value {
            Json::Str(s) if self.max_length.is_some_and(|max| s.chars().count() as u64 > max) => {
                return Err(fail(&at, format!("must not exceed {} characters", self.max_length.unwrap_or(0))));
            }
            Json::Array(items) if self.max_items.is_some_and(|max| items.len() as u64 > max) => {
                return Err(fail(&at, format!("array exceeds {} items", self.max_items.unwrap_or(0))));
            }
            Json::Object(members) if self.max_fields.is_some_and(|max| members.len() as u64 > max) => {
                return Err(fail(&at, format!("object exceeds {} fields", self.max_fields.unwrap_or(0))));
            }
            _ => {}
        }
        if let Some(max) = self.max_depth
            && value.depth() as u64 > max
        {
            return Err(fail(&at, format!("exceeds nesting depth {max}")));
        }
        Ok(())
    }
}

/// Checks `object` against the operator profile its `profile` names, if any.
pub(crate) fn check_operator(profiles: &[MetadataProfile], object: &Json) -> Result<(), Violation> {
    let Some(name) = object.get("profile").and_then(Json::as_str) else { return Ok(()) };
    match profiles.iter().find(|p| pycompat::strip(&p.name) == name) {
        Some(profile) => profile.check(object),
        None => Ok(()),
    }
}

fn fail(at: &str, message: impl Into<String>) -> Violation {
    Violation { kind: Kind::ProfileInvalid, at: at.to_owned(), message: message.into() }
}

// ---------------------------------------------------------------------------------------
// Built-in profiles.

/// Checks `object` against the built-in profile its `profile` names, if any.
pub(crate) fn check_built_in(object: &Json) -> Result<(), Violation> {
    match object.get("profile").and_then(Json::as_str) {
        Some(ARTIFACT_REFERENCE_PROFILE) => artifact_reference(object),
        Some(DATA_QUALITY_PROFILE) => data_quality(object, ""),
        Some(GEO_TEMPORAL_TRACK_FIX_PROFILE) => track_fix(object),
        Some(OBJECT_RELATIONSHIP_PROFILE) => object_relationship(object),
        _ => Ok(()),
    }
}

const DATA_QUALITY_SCORES: [&str; 8] =
    ["accuracy", "completeness", "confidence", "consistency", "granularity", "timeliness", "uniqueness", "validity"];
const URI_SCHEMES: [&str; 6] = ["artifact", "file", "https", "oci", "s3", "urn"];
const URI_SCHEMES_WITH_LOCATION: [&str; 4] = ["artifact", "https", "oci", "s3"];
const POSITION_KINDS: [&str; 6] = ["artifact_reference", "coordinates", "grid", "none", "redacted", "reference"];
const PRECISION_CATEGORIES: [&str; 5] = ["full", "grid", "redacted", "reduced", "reference"];
const REDACTION_LEVELS: [&str; 4] = ["none", "reduced_precision", "reference_only", "withheld"];
const OBJECT_OPERATIONS: [&str; 5] = ["delete", "quality_update", "relationship_upsert", "tombstone", "upsert"];
const MAX_ARTIFACT_SIZE_BYTES: i128 = 10 * 1024 * 1024 * 1024 * 1024;

fn path(base: &str, field: &str) -> String {
    format!("{base}.{field}")
}

fn require_text<'a>(object: &'a Json, base: &str, field: &str, max: usize) -> Result<&'a str, Violation> {
    match object.get(field) {
        Some(Json::Str(s)) if !pycompat::strip(s).is_empty() => {
            if s.chars().count() > max {
                return Err(fail(&path(base, field), format!("must not exceed {max} characters")));
            }
            Ok(s)
        }
        _ => Err(fail(&path(base, field), "must be a non-empty string")),
    }
}

fn optional_text(object: &Json, base: &str, field: &str) -> Result<(), Violation> {
    match object.get_some(field) {
        None => Ok(()),
        Some(Json::Str(s)) if !pycompat::strip(s).is_empty() => {
            if s.chars().count() > 256 {
                return Err(fail(&path(base, field), "must not exceed 256 characters"));
            }
            Ok(())
        }
        Some(_) => Err(fail(&path(base, field), "must be a non-empty string when present")),
    }
}

fn require_timestamp(object: &Json, base: &str, field: &str) -> Result<(), Violation> {
    let text = require_text(object, base, field, 64)?;
    check_timestamp(text, base, field)
}

fn optional_timestamp(object: &Json, base: &str, field: &str) -> Result<(), Violation> {
    match object.get_some(field) {
        None => Ok(()),
        Some(Json::Str(text)) => check_timestamp(text, base, field),
        Some(_) => Err(fail(&path(base, field), "must be an ISO-8601 timestamp string")),
    }
}

fn check_timestamp(text: &str, base: &str, field: &str) -> Result<(), Violation> {
    if pycompat::fromisoformat_accepts(&text.replace('Z', "+00:00")) {
        Ok(())
    } else {
        Err(fail(&path(base, field), "must be an ISO-8601 timestamp"))
    }
}

fn optional_score(object: &Json, base: &str, field: &str) -> Result<(), Violation> {
    match object.get_some(field) {
        None => Ok(()),
        Some(value) => match value.as_number() {
            None => Err(fail(&path(base, field), "must be a numeric score from 0.0 to 1.0")),
            Some(x) if !(0.0..=1.0).contains(&x) => Err(fail(&path(base, field), "must be between 0.0 and 1.0")),
            Some(_) => Ok(()),
        },
    }
}

fn optional_enum(object: &Json, base: &str, field: &str, allowed: &[&str]) -> Result<(), Violation> {
    match object.get_some(field) {
        None => Ok(()),
        Some(Json::Str(s)) if allowed.contains(&s.as_str()) => Ok(()),
        Some(_) => Err(fail(&path(base, field), format!("must be one of: {}", allowed.join(", ")))),
    }
}

fn string_list(object: &Json, base: &str, field: &str) -> Result<(), Violation> {
    match object.get_some(field) {
        None => Ok(()),
        Some(Json::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                if item.as_str().is_none_or(|s| pycompat::strip(s).is_empty()) {
                    return Err(fail(&format!("{base}.{field}[{i}]"), "must be a non-empty string"));
                }
            }
            Ok(())
        }
        Some(_) => Err(fail(&path(base, field), "must be a list of strings")),
    }
}

fn artifact_reference(object: &Json) -> Result<(), Violation> {
    require_text(object, "", "artifact_id", 256)?;
    let uri = require_text(object, "", "uri", 2048)?;
    let pycompat::UrlParts { scheme, has_netloc: has_location } =
        pycompat::urlparse(uri).ok_or_else(|| fail(".uri", "is not a URL Python's urlparse accepts"))?;
    if !URI_SCHEMES.contains(&scheme.as_str()) {
        return Err(fail(".uri", format!("must use one of these schemes: {}", URI_SCHEMES.join(", "))));
    }
    if URI_SCHEMES_WITH_LOCATION.contains(&scheme.as_str()) && !has_location {
        return Err(fail(".uri", format!("must include a location for scheme {scheme}")));
    }
    require_text(object, "", "media_type", 128)?;
    let digest = require_text(object, "", "sha256", 64)?;
    if !(digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err(fail(".sha256", "must be a 64 character SHA-256 hex digest"));
    }
    match object.get_some("size_bytes") {
        None => {}
        Some(Json::Int(n)) if (0..=MAX_ARTIFACT_SIZE_BYTES).contains(n) => {}
        Some(Json::Int(_)) => return Err(fail(".size_bytes", "is outside the supported range")),
        Some(_) => return Err(fail(".size_bytes", "must be an integer when present")),
    }
    optional_timestamp(object, "", "created_at")?;
    for field in ["source", "relationship", "retention_category", "classification"] {
        optional_text(object, "", field)?;
    }
    string_list(object, "", "labels")?;
    match object.get_some("encryption") {
        None | Some(Json::Object(_)) => Ok(()),
        Some(_) => Err(fail(".encryption", "must be an object when present")),
    }
}

fn data_quality(object: &Json, base: &str) -> Result<(), Violation> {
    for field in DATA_QUALITY_SCORES {
        optional_score(object, base, field)?;
    }
    optional_text(object, base, "quality_source")?;
    optional_timestamp(object, base, "assessed_at")
}

fn embedded_data_quality(object: &Json) -> Result<(), Violation> {
    match object.get_some("data_quality") {
        None => Ok(()),
        Some(quality @ Json::Object(_)) => data_quality(quality, ".data_quality"),
        Some(_) => Err(fail(".data_quality", "must be an object when present")),
    }
}

fn number_field(object: &Json, base: &str, field: &str, allow_negative: bool) -> Result<(), Violation> {
    match object.get_some(field) {
        None => Ok(()),
        Some(value) => match value.as_number() {
            None => Err(fail(&path(base, field), "must be numeric when present")),
            Some(x) if !allow_negative && x < 0.0 => Err(fail(&path(base, field), "must not be negative")),
            Some(_) => Ok(()),
        },
    }
}

fn coordinate(object: &Json, field: &str, min: f64, max: f64) -> Result<(), Violation> {
    let base = ".position_reference";
    match object.get_some(field) {
        None => Ok(()),
        Some(value) => match value.as_number() {
            None => Err(fail(&path(base, field), "must be numeric when present")),
            Some(x) if x < min || x > max => Err(fail(&path(base, field), format!("must be between {min} and {max}"))),
            Some(_) => Ok(()),
        },
    }
}

fn track_fix(object: &Json) -> Result<(), Violation> {
    require_text(object, "", "track_id", 256)?;
    require_text(object, "", "source_system", 256)?;
    require_timestamp(object, "", "event_time")?;
    optional_timestamp(object, "", "receive_time")?;
    optional_enum(object, "", "position_kind", &POSITION_KINDS)?;
    optional_enum(object, "", "precision_category", &PRECISION_CATEGORIES)?;
    optional_enum(object, "", "redaction_level", &REDACTION_LEVELS)?;
    optional_score(object, "", "confidence")?;
    number_field(object, "", "speed", false)?;
    number_field(object, "", "altitude_or_elevation", true)?;
    match object.get_some("heading") {
        None => {}
        Some(value) => match value.as_number() {
            None => return Err(fail(".heading", "must be numeric when present")),
            Some(x) if !(0.0..=360.0).contains(&x) => return Err(fail(".heading", "must be between 0 and 360")),
            Some(_) => {}
        },
    }
    if let Some(position @ Json::Object(_)) = object.get("position_reference") {
        coordinate(position, "latitude", -90.0, 90.0)?;
        coordinate(position, "longitude", -180.0, 180.0)?;
    }
    if !matches!(object.get_some("synthetic"), None | Some(Json::Bool(_))) {
        return Err(fail(".synthetic", "must be a boolean when present"));
    }
    embedded_data_quality(object)
}

fn object_relationship(object: &Json) -> Result<(), Violation> {
    require_text(object, "", "object_id", 256)?;
    require_text(object, "", "object_type", 256)?;
    for field in ["object_version", "correlation_id", "source_system", "owner", "schema_profile", "schema_version"] {
        optional_text(object, "", field)?;
    }
    optional_timestamp(object, "", "event_time")?;
    optional_timestamp(object, "", "receive_time")?;
    let operation = require_text(object, "", "object_operation", 256)?;
    if !OBJECT_OPERATIONS.contains(&operation) {
        return Err(fail(".object_operation", format!("must be one of: {}", OBJECT_OPERATIONS.join(", "))));
    }
    if !matches!(object.get_some("tombstone"), None | Some(Json::Bool(_))) {
        return Err(fail(".tombstone", "must be a boolean when present"));
    }
    if operation == "relationship_upsert" {
        for field in ["relationship_id", "relationship_type", "source_object_id", "target_object_id"] {
            require_text(object, "", field, 256)?;
        }
    }
    embedded_data_quality(object)
}
