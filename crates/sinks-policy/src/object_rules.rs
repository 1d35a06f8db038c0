//! The generic checks of a metadata object, shared by mission metadata and security labels:
//! the reference's bounds (`strict_doc::check`), its allowed and built-in profiles, the
//! operator's profiles and the size of the canonical rendering, in the reference's order
//! ([`check_object`]); [`normalize_object`] also keeps the checked object as the document a
//! step attaches (its canonical text, rendered where the size is checked and measured by it).
//! [`normalized_allow_list`] is the reference's reading of every allow-list of both.

use sinks_contract::json::JsonDoc;

use crate::canonical;
use crate::profiles::{self, MetadataProfile};
use crate::pycompat;
use crate::strict_doc::{self, Json, Problem};
use crate::violation::{Kind, Violation};

/// An allow-list as the reference uses it: entries trimmed, blanks dropped, de-duplicated.
pub(crate) fn normalized_allow_list(entries: &[String]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for entry in entries.iter().map(|e| pycompat::strip(e)) {
        if !entry.is_empty() && !out.contains(&entry) {
            out.push(entry);
        }
    }
    out
}

/// What an object is checked against besides the generic bounds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ObjectRules<'a> {
    /// Largest canonical rendering, in bytes.
    pub(crate) max_bytes: u64,
    /// Allowed `profile` values (raw config entries; empty = any).
    pub(crate) allowed_profiles: &'a [String],
    /// Operator-defined profiles.
    pub(crate) profiles: &'a [MetadataProfile],
    /// A string holds a lone surrogate: refused where the size is measured.
    pub(crate) unencodable: bool,
}

impl ObjectRules<'_> {
    /// Only the generic bounds and the built-in profiles, within `max_bytes`.
    pub(crate) fn generic(max_bytes: u64) -> ObjectRules<'static> {
        ObjectRules { max_bytes, allowed_profiles: &[], profiles: &[], unencodable: false }
    }
}

/// Validates an object with the reference's generic checks (in its order: bounds, then
/// `allowed_profiles`, built-in profiles, operator profiles, size) and returns it as a
/// document to attach: its canonical text, its value parsed only when a sink asks for it.
pub(crate) fn normalize_object(value: &Json, rules: &ObjectRules<'_>) -> Result<JsonDoc, Violation> {
    // Rendered where the size is checked (after the bounds), and measured by its rendering.
    let mut rendered = None;
    check_object_sized(value, rules, || {
        // Strict JSON holds no NaN or infinity, so a document always renders.
        let doc = canonical::doc_of(value).ok();
        let size = doc.as_ref().and_then(JsonDoc::canonical).map_or(u64::MAX, |text| text.len() as u64);
        rendered = doc;
        size
    })?;
    rendered.ok_or_else(|| Violation::new(Kind::Document(Problem::NonFiniteNumber), "holds nan or infinity"))
}

/// [`normalize_object`]'s checks alone, building nothing: the size is the length of the
/// canonical rendering, counted as the object serializes (a length does not depend on key
/// order, so the members are not sorted either).
pub(crate) fn check_object(value: &Json, rules: &ObjectRules<'_>) -> Result<(), Violation> {
    check_object_sized(value, rules, || canonical::len_of(value))
}

/// [`check_object`] with the canonical length given by `size`, called only when the checks
/// reach the size (after the bounds and the profiles).
fn check_object_sized(value: &Json, rules: &ObjectRules<'_>, size: impl FnOnce() -> u64) -> Result<(), Violation> {
    if !matches!(value, Json::Object(_)) {
        return Err(Violation::new(Kind::NotObject, "must be a JSON object"));
    }
    strict_doc::check(value)?;
    let allowed = normalized_allow_list(rules.allowed_profiles);
    if !allowed.is_empty() {
        let ok = value.get("profile").and_then(Json::as_str).is_some_and(|p| allowed.contains(&p));
        if !ok {
            return Err(Violation::at_key(
                Kind::ProfileNotAllowed,
                "profile",
                format!("must be one of the configured values: {}", sorted_list(&allowed)),
            ));
        }
    }
    profiles::check_built_in(value)?;
    profiles::check_operator(rules.profiles, value)?;
    if rules.unencodable {
        return Err(Violation::new(
            Kind::Document(Problem::InvalidJson),
            "not valid JSON: a string holds a lone surrogate escape, which UTF-8 cannot encode",
        ));
    }
    let size = size();
    if size > rules.max_bytes {
        return Err(Violation::new(
            Kind::TooLarge,
            format!("canonical JSON is {size} bytes, over max_bytes {}", rules.max_bytes),
        ));
    }
    Ok(())
}

/// `items` sorted and comma-joined (config vocabulary only, never message values).
pub(crate) fn sorted_list(items: &[&str]) -> String {
    let mut sorted = items.to_vec();
    sorted.sort_unstable();
    sorted.join(", ")
}
