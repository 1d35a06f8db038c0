//! The existing-key decision: what a sink reports when the key it writes already holds a
//! record, and the one policy type every sink configures it with.
//!
//! A sink finds out what the key holds and makes one call, [`decide`]: the policy, the
//! message, what its key is made of ([`KeyBasis`]), what the key holds ([`Stored`]:
//! [`Stored::compare`] of the stored payload fingerprint with the message's, or
//! [`Stored::Unchecked`]) and the record's name for messages. It answers with the message's
//! outcome, logged, by this table ([`outcome`] is the same table without the envelope, for a
//! sink that decides a whole batch of rows at once):
//!
//! | policy | same payload | different payload | cannot be compared | not compared |
//! |---|---|---|---|---|
//! | keep | duplicate | conflict, existing kept | duplicate | duplicate |
//! | replace | duplicate | conflict, overwritten | duplicate | duplicate |
//! | refuse | duplicate | conflict, rejected | permanent failure | permanent failure |
//! | any, keys from the stream sequence | duplicate | **sequence reused** (permanent failure) | as above | as above |
//!
//! **Keys from the stream sequence.** A redelivery of a message always carries the same
//! payload, so a different payload under a key made of the stream name and sequence means
//! the sequence was used again: the stream was deleted and re-created, restored from a backup
//! or lost its tail. That message is a different event, and keeping the old record while
//! acknowledging it would lose it. Whatever the policy says, it is refused with the reason
//! `sequence_reused` ([`sequence_reused`]): dead-lettered, or NAKed and reported without a
//! dead-letter stream. For the same reason a replacing policy writes conditionally under such
//! keys ([`conditional`]): it must not overwrite an earlier event before it was compared. The
//! runtime's stream-identity check stops consumption before this happens in the usual cases
//! (docs/delivery.md); this rule is what holds at the destination when it did not. A sealed
//! (encrypted) payload cannot be compared, since every delivery encrypts it anew: a
//! different sealed payload counts as one that cannot be compared.
//!
//! **Cannot be compared** (the stored record has no fingerprint, or cannot be read) is a
//! duplicate: the key is derived from the message's identity, so the record under it is most
//! likely an earlier delivery of this message, and `Duplicate` means "already committed by
//! an earlier delivery, same or unknown content". Flagging it as a conflict, or
//! dead-lettering it, would count a stored message as conflicting or lost. [`decide`] logs
//! it at warn with that reason. Only the refusing policy, which the operator chose to refuse
//! every record not proven to be this message's, fails it (permanently), as it fails any
//! existing record the sink does not compare at all.
//!
//! [`ExistingKeyPolicy`] carries the policy with the spelling of the sink's configuration
//! (the reference's words, which differ by sink: `skip_existing` / `overwrite` / `fail`,
//! `skip_existing` / `replace` / `fail_existing`, `keep_first` / `overwrite` / `dead_letter`,
//! …): one type, one meaning ([`OnExisting`]), a vocabulary per spelling, so every config of
//! the reference loads unchanged, prints back as configured, and a word a sink does not have
//! is refused naming the field.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use crate::envelope::Envelope;
use crate::error::SinkError;
use crate::idempotency::{IdempotencyKey, KeySource};
use crate::sink::{ConflictResolution, MessageOutcome};

/// The reason code of a message refused because its stream sequence was used before by a
/// different event (DLQ records, metrics).
pub use crate::idempotency::SEQUENCE_REUSED;

/// What a sink does when the key it writes already holds a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OnExisting {
    /// Keep the stored record (conditional create).
    Keep,
    /// Replace it with this message's record.
    Replace,
    /// Refuse the message unless the stored record is proven to be this message's.
    Refuse,
}

/// What the key holds, compared with the message being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// A record with the same payload (an earlier delivery of this message).
    Same,
    /// A record with a different payload.
    Different,
    /// A record the sink cannot compare: no payload fingerprint, or unreadable.
    Uncomparable,
    /// A record the sink did not compare (configured not to, such as S3's
    /// `content_check: false`, or a refusing policy that refuses any record).
    Unchecked,
}

/// What a sink's keys are made of, as far as the existing-key decision cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyBasis {
    /// The stream name (or its epoch, [`Envelope::keyed_stream`]) and the stream sequence:
    /// `stream-sequence:{stream}:{seq}` keys, `{stream}-{seq}` file names, S3
    /// `stream-sequence/…` keys, relational `(stream, sequence)` key columns. A different
    /// payload under such a key is a reused sequence, never a conflict to resolve.
    StreamSequence,
    /// An identity the publisher gives (message id, a payload field, a payload hash): the
    /// configured policy decides what a different payload means.
    Publisher,
}

impl KeyBasis {
    /// The basis of an idempotency key, from its text.
    pub fn of_key(key: &IdempotencyKey) -> Self {
        if key.as_str().starts_with("stream-sequence:") { Self::StreamSequence } else { Self::Publisher }
    }
}

/// [`KeyBasis::of_key`]: a sink passes [`decide`] the key it writes under.
impl From<&IdempotencyKey> for KeyBasis {
    fn from(key: &IdempotencyKey) -> Self {
        Self::of_key(key)
    }
}

/// What `envelope`'s key is made of under `strategy`, for a sink whose keys are built from
/// the key of a [`KeySource`] (S3, NoSQL, Coherence): the stream sequence (`stream_sequence`,
/// and `idempotency_key` for a message with one, which every JetStream message has), or the
/// publisher's identity. A message without the identity the strategy needs gets no key at
/// all (it fails before any write) and counts as the publisher's.
pub fn key_basis(envelope: &Envelope, strategy: KeySource) -> KeyBasis {
    strategy.key_of(envelope).map_or(KeyBasis::Publisher, |key| KeyBasis::of_key(&key))
}

/// The key basis of `strategy` for a JetStream message (one with a stream sequence): what
/// such a sink's static capabilities assume.
pub fn strategy_basis(strategy: KeySource) -> KeyBasis {
    match strategy {
        KeySource::StreamSequence | KeySource::OriginSequence | KeySource::IdempotencyKey => KeyBasis::StreamSequence,
        KeySource::MessageId | KeySource::PayloadSha256 => KeyBasis::Publisher,
    }
}

/// True when a write under `policy` must not replace a stored record (a conditional
/// create): every policy but replace, and every policy under stream-sequence keys (a
/// replacement could destroy an earlier event before it was compared; a redelivery of the
/// same event has nothing to replace).
pub fn conditional(policy: OnExisting, basis: KeyBasis) -> bool {
    policy != OnExisting::Replace || basis == KeyBasis::StreamSequence
}

/// The permanent failure of a message whose stream-sequence key holds a different event's
/// record (`record` names the key, `"s3 object key"`): reason [`SEQUENCE_REUSED`], error
/// type `SequenceReusedError`.
pub fn sequence_reused(record: &str) -> MessageOutcome {
    MessageOutcome::Failed(
        SinkError::permanent(format!(
            "{record} already holds a different payload under this stream sequence: the sequence was used again \
             (the stream was deleted and re-created, restored or rewound); the stored record is kept"
        ))
        .with_reason(SEQUENCE_REUSED)
        .with_error_type("SequenceReusedError"),
    )
}

impl Stored {
    /// The comparison of a stored payload fingerprint (`None`: the record has none, or it
    /// could not be read) with this message's, `ours`.
    pub fn compare(stored: Option<&str>, ours: &str) -> Self {
        match stored {
            Some(stored) if stored == ours => Self::Same,
            Some(_) => Self::Different,
            None => Self::Uncomparable,
        }
    }
}

/// The outcome for a message whose key holds `stored`, under `policy` and keys made of
/// `basis` (the table in the module docs). `record` names what the key is in failure
/// messages (`"s3 object key"`).
pub fn outcome(policy: OnExisting, basis: KeyBasis, stored: Stored, record: &str) -> MessageOutcome {
    match (policy, stored) {
        (_, Stored::Same) => MessageOutcome::Duplicate,
        (_, Stored::Different) if basis == KeyBasis::StreamSequence => sequence_reused(record),
        (OnExisting::Keep, Stored::Different) => MessageOutcome::Conflict(ConflictResolution::KeptExisting),
        (OnExisting::Replace, Stored::Different) => MessageOutcome::Conflict(ConflictResolution::Overwritten),
        (OnExisting::Refuse, Stored::Different) => MessageOutcome::Conflict(ConflictResolution::Rejected),
        (OnExisting::Refuse, Stored::Uncomparable) => {
            MessageOutcome::permanent(format!("{record} already exists with content this sink cannot compare"))
        }
        (OnExisting::Refuse, Stored::Unchecked) => MessageOutcome::permanent(format!("{record} already exists")),
        (OnExisting::Keep | OnExisting::Replace, Stored::Uncomparable | Stored::Unchecked) => MessageOutcome::Duplicate,
    }
}

/// The one call of a sink whose key already holds a record: the outcome of `envelope`
/// under `policy` (an [`OnExisting`] or a configured [`ExistingKeyPolicy`]), its key made of
/// `basis` (a [`KeyBasis`], or the [`IdempotencyKey`] itself), the key holding `stored`; `record` names what the key is in messages (`"sqlite
/// row"`). The table is in the module docs. Logged: a conflict at warn (which message and
/// what was done, never contents), a reused sequence at error, and a record that cannot be
/// compared reported as a duplicate at warn with the reason. A different sealed payload
/// cannot be compared (every delivery encrypts anew).
pub fn decide(
    policy: impl Into<OnExisting>,
    envelope: &Envelope,
    basis: impl Into<KeyBasis>,
    stored: Stored,
    record: &str,
) -> MessageOutcome {
    let (policy, basis) = (policy.into(), basis.into());
    let stored = if stored == Stored::Different && envelope.is_sealed() { Stored::Uncomparable } else { stored };
    let decided = outcome(policy, basis, stored, record);
    let subject = envelope.subject();
    let stream_sequence = envelope.jetstream().stream_sequence;
    match &decided {
        MessageOutcome::Conflict(resolution) => {
            tracing::warn!(subject, stream_sequence, resolution = ?resolution, "{record} already holds a different payload");
        }
        MessageOutcome::Failed(e) if e.reason() == Some(SEQUENCE_REUSED) => {
            tracing::error!(
                subject,
                stream = %envelope.jetstream().stream,
                stream_sequence,
                reason = SEQUENCE_REUSED,
                "{record} already holds a different event under this stream sequence; the message is refused, the stored record kept"
            );
        }
        MessageOutcome::Duplicate if stored == Stored::Uncomparable => {
            tracing::warn!(
                subject,
                stream_sequence,
                reason = "the key is derived from the message's identity: most likely an earlier delivery of it",
                "{record} already holds a record this sink cannot compare; reported as a duplicate"
            );
        }
        _ => {}
    }
    decided
}

/// One spelling of [`OnExisting`] in a sink's configuration: the words, in the order a
/// refusal lists them, and what each means.
pub trait Vocabulary: Copy + Eq + Hash + fmt::Debug + Send + Sync + 'static {
    /// The type name serde's messages use (`DuplicatePolicy`, `ConflictPolicy`).
    const TYPE: &'static str;
    /// The configuration's words.
    const NAMES: &'static [&'static str];
    /// What each word of [`Self::NAMES`] means, position by position.
    const ACTIONS: &'static [OnExisting];
}

/// A sink's existing-key policy ([`OnExisting`]) in its configuration's words `V`.
///
/// Each vocabulary has one constant per word, named like the word
/// (`ExistingKeyPolicy::<SkipReplaceFailExisting>::FailExisting`); sinks export the type
/// under the name their configuration uses (`pub type DuplicatePolicy = …`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExistingKeyPolicy<V> {
    action: OnExisting,
    words: PhantomData<fn() -> V>,
}

impl<V> ExistingKeyPolicy<V> {
    const fn of(action: OnExisting) -> Self {
        Self { action, words: PhantomData }
    }

    /// What the policy does.
    pub fn on_existing(self) -> OnExisting {
        self.action
    }

    /// True when writes must not replace a stored record (conditional creates).
    pub fn is_conditional(self) -> bool {
        self.action != OnExisting::Replace
    }
}

impl<V: Vocabulary> ExistingKeyPolicy<V> {
    /// `action` in these words, if the vocabulary has a word for it.
    pub fn new(action: OnExisting) -> Option<Self> {
        V::ACTIONS.contains(&action).then(|| Self::of(action))
    }

    fn index(self) -> usize {
        V::ACTIONS.iter().position(|a| *a == self.action).unwrap_or_default()
    }

    /// The value as configured.
    pub fn as_str(self) -> &'static str {
        V::NAMES.get(self.index()).copied().unwrap_or_default()
    }
}

/// What a configured policy does, for [`decide`].
impl<V> From<ExistingKeyPolicy<V>> for OnExisting {
    fn from(policy: ExistingKeyPolicy<V>) -> Self {
        policy.action
    }
}

/// Keep the stored record: every vocabulary's default (`skip_existing`).
impl<V> Default for ExistingKeyPolicy<V> {
    fn default() -> Self {
        Self::of(OnExisting::Keep)
    }
}

impl<V: Vocabulary> fmt::Debug for ExistingKeyPolicy<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<V: Vocabulary> Serialize for ExistingKeyPolicy<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let index = self.index();
        serializer.serialize_unit_variant(V::TYPE, u32::try_from(index).unwrap_or_default(), self.as_str())
    }
}

impl<'de, V: Vocabulary> Deserialize<'de> for ExistingKeyPolicy<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Reads a unit variant the way a derived enum does, so messages name the same words.
        struct Words<V>(PhantomData<fn() -> V>);

        impl<'de, V: Vocabulary> de::Visitor<'de> for Words<V> {
            type Value = ExistingKeyPolicy<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "enum {}", V::TYPE)
            }

            fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
                let (word, variant): (String, _) = data.variant()?;
                let Some(index) = V::NAMES.iter().position(|n| *n == word) else {
                    return Err(de::Error::unknown_variant(&word, V::NAMES));
                };
                de::VariantAccess::unit_variant(variant)?;
                Ok(ExistingKeyPolicy::of(V::ACTIONS[index]))
            }
        }

        deserializer.deserialize_enum(V::TYPE, V::NAMES, Words(PhantomData))
    }
}

/// Declares a vocabulary: its marker type, its words, and one constant per word.
macro_rules! vocabulary {
    (
        $(#[$doc:meta])*
        $name:ident as $type_name:literal {
            $( $(#[$word_doc:meta])* $word:ident = $spelling:literal => $action:ident, )+
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name;

        impl Vocabulary for $name {
            const TYPE: &'static str = $type_name;
            const NAMES: &'static [&'static str] = &[$($spelling),+];
            const ACTIONS: &'static [OnExisting] = &[$(OnExisting::$action),+];
        }

        #[allow(non_upper_case_globals, reason = "named like the words, as the enum variants the configs had")]
        impl ExistingKeyPolicy<$name> {
            $(
                $(#[$word_doc])*
                pub const $word: Self = Self::of(OnExisting::$action);
            )+
        }
    };
}

vocabulary! {
    /// `skip_existing` / `overwrite` / `fail` (the file sink).
    SkipOverwriteFail as "DuplicatePolicy" {
        /// `skip_existing`: keep the stored record (the default).
        SkipExisting = "skip_existing" => Keep,
        /// `overwrite`: replace it atomically.
        Overwrite = "overwrite" => Replace,
        /// `fail`: refuse the message as a permanent failure.
        Fail = "fail" => Refuse,
    }
}

vocabulary! {
    /// `skip_existing` / `fail` (the spool sink: a spooled record is never replaced).
    SkipOrFail as "DuplicatePolicy" {
        /// `skip_existing`: keep the stored record (the default).
        SkipExisting = "skip_existing" => Keep,
        /// `fail`: refuse the message as a permanent failure.
        Fail = "fail" => Refuse,
    }
}

vocabulary! {
    /// `skip_existing` / `replace` / `fail_existing` (the S3, NoSQL and Coherence sinks).
    SkipReplaceFailExisting as "DuplicatePolicy" {
        /// `skip_existing`: conditional create; the stored record is kept (the default).
        SkipExisting = "skip_existing" => Keep,
        /// `replace`: the newest delivery replaces the record.
        Replace = "replace" => Replace,
        /// `fail_existing`: conditional create; a record not proven to be this message's
        /// fails it.
        FailExisting = "fail_existing" => Refuse,
    }
}

vocabulary! {
    /// `keep_first` / `overwrite` / `dead_letter` (the relational sinks' `conflict_policy`).
    KeepFirstOverwriteDeadLetter as "ConflictPolicy" {
        /// `keep_first`: keep the stored row; the message is acknowledged and the conflict
        /// counted and logged.
        KeepFirst = "keep_first" => Keep,
        /// `overwrite`: replace the stored row with the new content.
        Overwrite = "overwrite" => Replace,
        /// `dead_letter`: keep the stored row and send the new message to the dead-letter
        /// queue.
        DeadLetter = "dead_letter" => Refuse,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OutcomeClass;
    use crate::sink::ConflictResolution::{KeptExisting, Overwritten, Rejected};

    /// What an outcome is, in one comparable word.
    fn shape(outcome: &MessageOutcome) -> String {
        match outcome {
            MessageOutcome::Conflict(KeptExisting) => "kept".into(),
            MessageOutcome::Conflict(Overwritten) => "overwritten".into(),
            MessageOutcome::Conflict(Rejected) => "rejected".into(),
            MessageOutcome::Failed(e) if e.is_permanent() => format!("permanent: {}", e.message()),
            other => format!("{:?}", other.class()),
        }
    }

    #[test]
    fn the_decision_table() {
        use OnExisting::{Keep, Refuse, Replace};
        use Stored::{Different, Same, Unchecked, Uncomparable};
        let rows = [
            (Keep, Same, "Duplicate"),
            (Keep, Different, "kept"),
            (Keep, Uncomparable, "Duplicate"),
            (Keep, Unchecked, "Duplicate"),
            (Replace, Same, "Duplicate"),
            (Replace, Different, "overwritten"),
            (Replace, Uncomparable, "Duplicate"),
            (Replace, Unchecked, "Duplicate"),
            (Refuse, Same, "Duplicate"),
            (Refuse, Different, "rejected"),
            (Refuse, Uncomparable, "permanent: key already exists with content this sink cannot compare"),
            (Refuse, Unchecked, "permanent: key already exists"),
        ];
        for (policy, stored, want) in rows {
            assert_eq!(shape(&outcome(policy, KeyBasis::Publisher, stored, "key")), want, "{policy:?} / {stored:?}");
        }
        let e = crate::testing::envelope("S", 1, "s", "{}");
        for (policy, stored, want) in rows {
            assert_eq!(
                shape(&decide(policy, &e, KeyBasis::Publisher, stored, "key")),
                want,
                "decide agrees: {policy:?} / {stored:?}"
            );
        }
        assert_eq!(outcome(Keep, KeyBasis::Publisher, Uncomparable, "key").class(), OutcomeClass::Duplicate);
    }

    #[test]
    fn under_stream_sequence_keys_a_different_payload_is_a_reused_sequence_whatever_the_policy() {
        use OnExisting::{Keep, Refuse, Replace};
        use Stored::{Different, Same, Unchecked, Uncomparable};
        let e = crate::testing::envelope("S", 1, "s", "{}");
        for policy in [Keep, Replace, Refuse] {
            let decided = decide(policy, &e, KeyBasis::StreamSequence, Different, "key");
            let MessageOutcome::Failed(error) = &decided else { panic!("{policy:?}: {decided:?}") };
            assert!(error.is_permanent() && error.reason() == Some(SEQUENCE_REUSED), "{policy:?}: {error:?}");
            assert_eq!(error.error_type(), "SequenceReusedError");
            assert!(!decided.is_durable(), "never acknowledged as stored");
            assert_eq!(shape(&outcome(policy, KeyBasis::StreamSequence, Same, "key")), "Duplicate");
            // What cannot be compared keeps its meaning (the identity check guards it).
            assert_eq!(
                shape(&outcome(policy, KeyBasis::StreamSequence, Uncomparable, "key")),
                shape(&outcome(policy, KeyBasis::Publisher, Uncomparable, "key"))
            );
            assert_eq!(
                shape(&outcome(policy, KeyBasis::StreamSequence, Unchecked, "key")),
                shape(&outcome(policy, KeyBasis::Publisher, Unchecked, "key"))
            );
        }
        // A replacing policy writes conditionally under such keys only.
        assert!(conditional(Replace, KeyBasis::StreamSequence) && !conditional(Replace, KeyBasis::Publisher));
        assert!(conditional(Keep, KeyBasis::Publisher) && conditional(Refuse, KeyBasis::Publisher));
        // A sealed payload differs on every delivery: it cannot be compared.
        let sealed = e.clone().with_sealed_payload(bytes::Bytes::from_static(b"{\"ciphertext\":1}"));
        assert_eq!(shape(&decide(Keep, &sealed, KeyBasis::StreamSequence, Different, "key")), "Duplicate");
        // A configured policy is passed as it is.
        let configured = ExistingKeyPolicy::<KeepFirstOverwriteDeadLetter>::DeadLetter;
        assert_eq!(shape(&decide(configured, &e, KeyBasis::Publisher, Different, "key")), "rejected");
        // So is the key written under: its basis is read from it.
        let key = e.idempotency_key().unwrap();
        let reused = shape(&decide(configured, &e, &key, Stored::compare(Some("ab"), "cd"), "key"));
        assert!(
            reused.starts_with("permanent: key already holds a different payload under this stream sequence"),
            "{reused}"
        );
    }

    #[test]
    fn the_basis_of_a_key_is_read_from_its_text() {
        let e = crate::testing::envelope("S", 9, "s", "{}");
        assert_eq!(KeyBasis::of_key(&e.idempotency_key().unwrap()), KeyBasis::StreamSequence);
        assert_eq!(KeyBasis::of_key(&IdempotencyKey::message_id("m")), KeyBasis::Publisher);
        assert_eq!(KeyBasis::of_key(&IdempotencyKey::payload_sha256("s", b"x")), KeyBasis::Publisher);
    }

    #[test]
    fn the_key_basis_follows_the_strategy_and_the_message() {
        use crate::Headers;
        use crate::testing::envelope_with;
        let id = || Headers::new().with("Nats-Msg-Id", "m-7");
        let e = envelope_with("S", 7, "o", "{}", id(), 1);
        let id_only = envelope_with("", 0, "o", "{}", id(), 1);
        let anonymous = envelope_with("", 0, "o", "{}", Headers::new(), 1);
        let rows = [
            (KeySource::IdempotencyKey, &e, KeyBasis::StreamSequence),
            (KeySource::IdempotencyKey, &id_only, KeyBasis::Publisher),
            (KeySource::IdempotencyKey, &anonymous, KeyBasis::Publisher),
            (KeySource::StreamSequence, &e, KeyBasis::StreamSequence),
            // No stream sequence: no key at all, which counts as the publisher's.
            (KeySource::StreamSequence, &id_only, KeyBasis::Publisher),
            (KeySource::MessageId, &e, KeyBasis::Publisher),
            (KeySource::PayloadSha256, &e, KeyBasis::Publisher),
        ];
        for (strategy, envelope, want) in rows {
            assert_eq!(key_basis(envelope, strategy), want, "{strategy:?} {:?}", envelope.jetstream().stream);
        }
        // What the static capabilities assume is what a JetStream message gets.
        for strategy in
            [KeySource::IdempotencyKey, KeySource::StreamSequence, KeySource::MessageId, KeySource::PayloadSha256]
        {
            assert_eq!(strategy_basis(strategy), key_basis(&e, strategy), "{strategy:?}");
        }
    }

    #[test]
    fn fingerprints_compare() {
        assert_eq!(Stored::compare(Some("ab"), "ab"), Stored::Same);
        assert_eq!(Stored::compare(Some("ab"), "cd"), Stored::Different);
        assert_eq!(Stored::compare(None, "ab"), Stored::Uncomparable);
    }

    type Objects = ExistingKeyPolicy<SkipReplaceFailExisting>;
    type Spool = ExistingKeyPolicy<SkipOrFail>;
    type Relational = ExistingKeyPolicy<KeepFirstOverwriteDeadLetter>;

    #[test]
    fn every_word_reads_and_prints_back_as_configured() {
        fn round_trip<V: Vocabulary>() {
            for (word, action) in V::NAMES.iter().zip(V::ACTIONS) {
                let parsed: ExistingKeyPolicy<V> = serde_json::from_value(serde_json::json!(word)).unwrap();
                assert_eq!(parsed.on_existing(), *action, "{word}");
                assert_eq!(parsed.as_str(), *word);
                assert_eq!(serde_json::to_value(parsed).unwrap(), serde_json::json!(word));
                assert_eq!(format!("{parsed:?}"), *word);
            }
        }
        round_trip::<SkipOverwriteFail>();
        round_trip::<SkipOrFail>();
        round_trip::<SkipReplaceFailExisting>();
        round_trip::<KeepFirstOverwriteDeadLetter>();
        assert_eq!(Objects::default(), Objects::SkipExisting);
        assert_eq!(Spool::default().as_str(), "skip_existing");
        assert!(Objects::FailExisting.is_conditional() && !Objects::Replace.is_conditional());
        assert_eq!(Relational::DeadLetter.on_existing(), OnExisting::Refuse);
        assert_eq!(Spool::new(OnExisting::Replace), None, "the spool has no word for replacing");
    }

    #[test]
    fn a_word_of_another_vocabulary_is_refused_like_a_derived_enum() {
        let refused = |value: serde_json::Value| match serde_json::from_value::<Spool>(value) {
            Err(e) => e.to_string(),
            Ok(p) => panic!("accepted {p:?}"),
        };
        assert_eq!(
            refused(serde_json::json!("replace")),
            "unknown variant `replace`, expected `skip_existing` or `fail`"
        );
        let three = serde_json::from_value::<Objects>(serde_json::json!("overwrite")).unwrap_err().to_string();
        assert_eq!(three, "unknown variant `overwrite`, expected one of `skip_existing`, `replace`, `fail_existing`");
        // The externally tagged form a derived enum reads (the config reference probes it).
        assert!(refused(serde_json::json!({"__probe__": true})).starts_with("unknown variant `__probe__`"));
        let wrong = serde_json::from_value::<Relational>(serde_json::json!({"keep_first": 1})).unwrap_err();
        assert!(wrong.to_string().contains("invalid type"), "{wrong}");
        assert_eq!(serde_json::from_value::<Option<Relational>>(serde_json::Value::Null).unwrap(), None);
    }

    #[test]
    fn the_word_constants_match_patterns() {
        let kind = |p: Objects| match p {
            Objects::Replace => "unconditional",
            _ => "conditional",
        };
        assert_eq!(kind(Objects::Replace), "unconditional");
        assert_eq!(kind(Objects::FailExisting), "conditional");
    }
}
