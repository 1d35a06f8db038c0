//! What is wrong with a mission metadata or security label object ([`Violation`]), and the
//! reason code each of the two steps reports for it ([`Kind::mission_code`],
//! [`Kind::labels_code`]). The document problems of [`crate::strict_doc`] convert into
//! violations; mission metadata, security labels and the profiles add their own kinds.

use crate::strict_doc::{DocError, Problem};

/// What is wrong with an object. Each kind maps to one reason code per step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    HeaderTooLarge,
    /// A problem of the document itself ([`crate::strict_doc`]).
    Document(Problem),
    NotObject,
    ProfileNotAllowed,
    ProfileInvalid,
    TooLarge,
    // Security labels only.
    UnknownField,
    WrongProfile,
    InvalidField,
    ValueTooLong,
    TooManyValues,
    SeparatorInItem,
    ValueNotAllowed,
}

impl Kind {
    /// Every kind, for tests that check the code lists.
    #[cfg(test)]
    pub(crate) const ALL: [Self; 23] = [
        Self::HeaderTooLarge,
        Self::Document(Problem::InvalidJson),
        Self::Document(Problem::AmbiguousJson),
        Self::NotObject,
        Self::Document(Problem::DepthExceeded),
        Self::Document(Problem::TooManyFields),
        Self::Document(Problem::TooManyItems),
        Self::Document(Problem::InvalidKey),
        Self::Document(Problem::SecretKey),
        Self::Document(Problem::StringTooLong),
        Self::Document(Problem::ControlCharacters),
        Self::Document(Problem::IntegerOutOfRange),
        Self::Document(Problem::NonFiniteNumber),
        Self::ProfileNotAllowed,
        Self::ProfileInvalid,
        Self::TooLarge,
        Self::UnknownField,
        Self::WrongProfile,
        Self::InvalidField,
        Self::ValueTooLong,
        Self::TooManyValues,
        Self::SeparatorInItem,
        Self::ValueNotAllowed,
    ];

    /// The `mission_metadata` reason code.
    pub(crate) fn mission_code(self) -> &'static str {
        match self {
            Self::HeaderTooLarge => "mission_metadata_header_too_large",
            Self::Document(Problem::InvalidJson) => "mission_metadata_invalid_json",
            Self::Document(Problem::AmbiguousJson) => "mission_metadata_ambiguous_json",
            Self::NotObject => "mission_metadata_not_object",
            Self::Document(Problem::DepthExceeded) => "mission_metadata_depth_exceeded",
            Self::Document(Problem::TooManyFields) => "mission_metadata_too_many_fields",
            Self::Document(Problem::TooManyItems) => "mission_metadata_too_many_items",
            Self::Document(Problem::InvalidKey) => "mission_metadata_invalid_key",
            Self::Document(Problem::SecretKey) => "mission_metadata_secret_key",
            Self::Document(Problem::StringTooLong) => "mission_metadata_string_too_long",
            Self::Document(Problem::ControlCharacters) => "mission_metadata_control_characters",
            Self::Document(Problem::IntegerOutOfRange) => "mission_metadata_integer_out_of_range",
            Self::Document(Problem::NonFiniteNumber) => "mission_metadata_non_finite_number",
            Self::ProfileNotAllowed => "mission_metadata_profile_not_allowed",
            Self::ProfileInvalid => "mission_metadata_profile_invalid",
            Self::TooLarge => "mission_metadata_too_large",
            // Label-only kinds never arise from mission metadata checks.
            Self::UnknownField
            | Self::WrongProfile
            | Self::InvalidField
            | Self::ValueTooLong
            | Self::TooManyValues
            | Self::SeparatorInItem
            | Self::ValueNotAllowed => "mission_metadata_profile_invalid",
        }
    }

    /// The `security_labels` reason code.
    pub(crate) fn labels_code(self) -> &'static str {
        match self {
            Self::HeaderTooLarge => "security_labels_header_too_large",
            // The reference refuses duplicate keys as invalid JSON in this header.
            Self::Document(Problem::InvalidJson | Problem::AmbiguousJson) => "security_labels_invalid_json",
            Self::NotObject => "security_labels_not_object",
            Self::Document(Problem::DepthExceeded) => "security_labels_depth_exceeded",
            Self::Document(Problem::TooManyFields) => "security_labels_too_many_fields",
            Self::Document(Problem::TooManyItems) => "security_labels_too_many_items",
            Self::Document(Problem::InvalidKey) => "security_labels_invalid_key",
            Self::Document(Problem::SecretKey) => "security_labels_secret_key",
            Self::Document(Problem::StringTooLong) => "security_labels_string_too_long",
            Self::Document(Problem::ControlCharacters) => "security_labels_control_characters",
            Self::Document(Problem::IntegerOutOfRange) => "security_labels_integer_out_of_range",
            Self::Document(Problem::NonFiniteNumber) => "security_labels_non_finite_number",
            Self::ProfileNotAllowed | Self::ProfileInvalid => "security_labels_profile_invalid",
            Self::TooLarge => "security_labels_too_large",
            Self::UnknownField => "security_labels_unknown_field",
            Self::WrongProfile => "security_labels_wrong_profile",
            Self::InvalidField => "security_labels_invalid_field",
            Self::ValueTooLong => "security_labels_value_too_long",
            Self::TooManyValues => "security_labels_too_many_values",
            Self::SeparatorInItem => "security_labels_separator_in_item",
            Self::ValueNotAllowed => "security_labels_value_not_allowed",
        }
    }
}

/// One problem: its kind, where (a relative path such as `.a.b[2]`, empty for the root)
/// and a description that holds field names and limits only.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Violation {
    pub(crate) kind: Kind,
    pub(crate) at: String,
    pub(crate) message: String,
}

impl Violation {
    pub(crate) fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self { kind, at: String::new(), message: message.into() }
    }

    /// The same problem seen from the parent: `segment` (`.key` or `[i]`) prepended.
    pub(crate) fn under(mut self, segment: &str) -> Self {
        self.at.insert_str(0, segment);
        self
    }

    /// The problem at member `key` of the object being checked.
    pub(crate) fn at_key(kind: Kind, key: &str, message: impl Into<String>) -> Self {
        Self { kind, at: format!(".{key}"), message: message.into() }
    }

    /// Rejection detail: `source` (e.g. `header`), the path and the message.
    pub(crate) fn detail(&self, source: &str) -> String {
        format!("{source}{}: {}", self.at, self.message)
    }
}

impl From<DocError> for Violation {
    fn from(e: DocError) -> Self {
        Self { kind: Kind::Document(e.problem), at: e.at, message: e.message }
    }
}
