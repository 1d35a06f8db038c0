//! Message policies: the per-message steps between fetch and sink, in the reference's order.
//!
//! 0. intake ([`intake`]): the message as it arrived becomes an envelope, its application
//!    metadata (priority, classification, labels) resolved; on fetch, rescue and redrive;
//! 1. metadata resolution: mission metadata ([`mission`]) and security labels ([`labels`]);
//! 2. message authenticity ([`authenticity`]);
//! 3. payload encryption ([`sinks_toolkit::encryption`]);
//! 4. size policy ([`size`]);
//! 5. pre-sink policy ([`presink`]);
//! 6. tamper-evident custody ([`custody`]);
//! 7. priority lanes ([`lanes`]): the order in which the batch is handed to the sink.
//!
//! Each step is a module with its own config type and a pure entry point that takes an
//! envelope and returns it (possibly enriched) or a [`Rejection`]. A rejection is that
//! message's permanent outcome: it is dead-lettered alone with the reference's reason code,
//! and its batch-mates go on. No step touches acknowledgements.
//!
//! Libraries the steps share: [`canonical`] JSON (what is signed, hashed and measured),
//! [`strict_doc`] (the strict, bounded reading of JSON documents from publishers, used by
//! mission metadata, security labels and the profiles) and [`pycompat`] (the Python 3.11
//! behaviour the reference relies on: `str.strip`, `datetime.fromisoformat`, `urlparse`).

pub mod authenticity;
pub mod canonical;
pub mod custody;
pub mod intake;
pub mod labels;
pub mod lanes;
pub mod mission;
mod object_rules;
pub mod presink;
pub mod profiles;
pub mod pycompat;
pub mod size;
pub mod strict_doc;
mod violation;

use std::borrow::Cow;
use std::fmt;

use sinks_contract::config::ConfigError;
use sinks_contract::envelope::Envelope;
use sinks_contract::error::SinkError;
use sinks_contract::ordering::OrderKey;
use sinks_toolkit::encryption::PayloadEncryption;
use sinks_toolkit::encryption::config::EncryptionConfig;

/// The policy step that rejected a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// `mission_metadata`: the resolved document is malformed or not allowed.
    MissionMetadata,
    /// `security_labels`: the resolved label object is malformed or not allowed.
    SecurityLabels,
    /// `message_authenticity`: the signature does not verify.
    Authenticity,
    /// `size_policy`: a size limit is exceeded.
    Size,
    /// `pre_sink_policy`: a required property is missing.
    PreSink,
    /// `custody`: the custody object cannot be computed (bad previous hash, input too big).
    Custody,
    /// `delivery.priority_lanes`: unknown priority with `unknown_priority_action: reject`.
    PriorityLanes,
}

impl Step {
    /// The config section of the step, e.g. `message_authenticity`.
    pub fn section(self) -> &'static str {
        match self {
            Self::MissionMetadata => "mission_metadata",
            Self::SecurityLabels => "security_labels",
            Self::Authenticity => "message_authenticity",
            Self::Size => "size_policy",
            Self::PreSink => "pre_sink_policy",
            Self::Custody => "custody",
            Self::PriorityLanes => "delivery.priority_lanes",
        }
    }

    /// The `error_type` of dead-letter records for this step (the reference's exception
    /// class names).
    pub fn error_type(self) -> &'static str {
        match self {
            Self::Size => "SizePolicyViolationError",
            Self::Authenticity | Self::PreSink => "PolicyViolationError",
            Self::MissionMetadata | Self::SecurityLabels | Self::Custody | Self::PriorityLanes => "ValidationError",
        }
    }
}

/// Why one message was refused by a policy step. Holds no payload, key or header value:
/// only the step, a stable reason code and a short description safe to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The step that refused the message.
    pub step: Step,
    /// The reference's reason code, e.g. `signature_invalid`.
    pub reason: Cow<'static, str>,
    /// A short description (field names and limits, never values from the message).
    pub detail: String,
}

impl Rejection {
    /// A rejection by `step` with reason code `reason`.
    pub fn new(step: Step, reason: impl Into<Cow<'static, str>>, detail: impl Into<String>) -> Self {
        Self { step, reason: reason.into(), detail: detail.into() }
    }

    /// The permanent error the runner dead-letters the message with.
    pub fn into_error(self) -> SinkError {
        let message = if self.detail.is_empty() {
            format!("{} rejected the message: reason={}", self.step.section(), self.reason)
        } else {
            format!("{} rejected the message: reason={}; {}", self.step.section(), self.reason, self.detail)
        };
        SinkError::permanent(message).with_error_type(self.step.error_type()).with_reason(self.reason.into_owned())
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.step.section(), self.reason)?;
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        Ok(())
    }
}

/// One message after the policy steps.
#[derive(Debug)]
pub enum Prepared {
    /// Ready for the sink: the enriched (and possibly encrypted) envelope.
    Ready(Envelope),
    /// Refused: dead-letter it alone. The envelope is encrypted when encryption is on, even
    /// if the refusal came before the encryption step, so no record carries plaintext the
    /// sink would not have seen.
    Rejected {
        /// The envelope to dead-letter.
        envelope: Envelope,
        /// Why.
        rejection: Rejection,
    },
}

/// The config sections of the policy steps, as the runtime's configuration holds them
/// (`sinks_runtime::Config::policy_sections`).
#[derive(Debug, Clone, Copy)]
pub struct Sections<'a> {
    /// `message_metadata`.
    pub message_metadata: &'a sinks_toolkit::metadata::MessageMetadataConfig,
    /// `mission_metadata`.
    pub mission_metadata: &'a mission::MissionMetadataConfig,
    /// `security_labels`.
    pub security_labels: &'a labels::SecurityLabelsConfig,
    /// `message_authenticity`.
    pub message_authenticity: &'a authenticity::AuthenticityConfig,
    /// `encryption`.
    pub encryption: &'a EncryptionConfig,
    /// `size_policy`.
    pub size_policy: &'a size::SizePolicyConfig,
    /// `pre_sink_policy`.
    pub pre_sink_policy: &'a presink::PreSinkPolicyConfig,
    /// `custody`.
    pub custody: &'a custody::CustodyConfig,
    /// `delivery.priority_lanes`.
    pub priority_lanes: &'a lanes::PriorityLanesConfig,
}

/// Every configured step, in the reference's order, ready to run (keys read, configs
/// checked). Built once at start-up.
#[derive(Debug, Default)]
pub struct Pipeline {
    intake: intake::Intake,
    mission: Option<mission::MissionMetadataConfig>,
    labels: Option<labels::SecurityLabelsConfig>,
    authenticity: Option<authenticity::Authenticator>,
    encryption: Option<PayloadEncryption>,
    size: Option<size::SizePolicyConfig>,
    presink: Option<presink::PreSinkPolicyConfig>,
    custody: Option<custody::CustodyConfig>,
    lanes: Option<lanes::PriorityLanesConfig>,
}

impl Pipeline {
    /// The steps `config` enables. Reads every key from the environment; a missing or bad
    /// key is an error naming its field.
    pub fn from_config(config: Sections<'_>) -> Result<Self, ConfigError> {
        Self::from_config_with(config, &|name| std::env::var(name).ok())
    }

    /// [`Pipeline::from_config`] reading the keys' variables through `lookup` (`nats-sink
    /// validate --no-environment` checks everything else with stand-in keys).
    pub fn from_config_with(
        config: Sections<'_>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let on = |enabled: bool| enabled.then_some(());
        Ok(Self {
            intake: intake::Intake::new(config.message_metadata),
            mission: on(config.mission_metadata.enabled).map(|()| config.mission_metadata.clone()),
            labels: on(config.security_labels.enabled).map(|()| config.security_labels.clone()),
            authenticity: authenticity::Authenticator::from_config_with(
                config.message_authenticity,
                "message_authenticity",
                lookup,
            )?,
            encryption: PayloadEncryption::from_config_with(config.encryption, "encryption", lookup)?,
            size: on(config.size_policy.enabled).map(|()| config.size_policy.clone()),
            presink: on(config.pre_sink_policy.enabled).map(|()| config.pre_sink_policy.clone()),
            custody: on(config.custody.enabled).map(|()| config.custody.clone()),
            lanes: on(config.priority_lanes.enabled).map(|()| config.priority_lanes.clone()),
        })
    }

    /// The intake step, which builds every envelope the other steps see.
    pub fn intake(&self) -> &intake::Intake {
        &self.intake
    }

    /// The payload encryption step, if any.
    pub fn encryption(&self) -> Option<&PayloadEncryption> {
        self.encryption.as_ref()
    }

    /// Names of the enabled steps in order (for the start-up log).
    pub fn steps(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut add = |on: bool, name| {
            if on {
                out.push(name);
            }
        };
        add(self.mission.is_some(), "mission_metadata");
        add(self.labels.is_some(), "security_labels");
        add(self.authenticity.is_some(), "message_authenticity");
        add(self.encryption.is_some(), "encryption");
        add(self.size.is_some(), "size_policy");
        add(self.presink.is_some(), "pre_sink_policy");
        add(self.custody.is_some(), "custody");
        add(self.lanes.is_some(), "priority_lanes");
        out
    }

    /// Runs every step on one message; `position` is its index in the fetched batch.
    pub fn prepare(&self, envelope: Envelope, position: usize) -> Prepared {
        let reject = |envelope: Envelope, rejection: Rejection, encrypted: bool| {
            let envelope = match (&self.encryption, encrypted) {
                (Some(encryption), false) => encryption.apply(envelope),
                _ => envelope,
            };
            Prepared::Rejected { envelope, rejection }
        };
        // 1. Metadata resolution.
        let mut envelope = envelope;
        if let Some(mission) = &self.mission {
            match mission.resolve(envelope.subject(), envelope.headers()) {
                Ok(doc) => envelope = envelope.with_mission_metadata_doc(doc),
                Err(rejection) => return reject(envelope, rejection, false),
            }
        }
        if let Some(labels) = &self.labels {
            match labels.resolve(envelope.subject(), envelope.headers(), envelope.app()) {
                Ok(doc) => envelope = envelope.with_security_labels_doc(doc),
                Err(rejection) => return reject(envelope, rejection, false),
            }
        }
        // 2. Authenticity, over the payload as published.
        if let Some(auth) = &self.authenticity
            && let Err(rejection) = auth.check(&envelope)
        {
            return reject(envelope, rejection, false);
        }
        // 3. Encryption: from here on the payload is what the sink stores.
        if let Some(encryption) = &self.encryption {
            envelope = encryption.apply(envelope);
        }
        // 4-6. Size, pre-sink policy, custody.
        let checks = [
            self.size.as_ref().map(|s| s.check(&envelope, position)),
            self.presink.as_ref().map(|p| p.check(&envelope)),
        ];
        if let Some(Err(rejection)) = checks.into_iter().flatten().find(Result::is_err) {
            return reject(envelope, rejection, true);
        }
        if let Some(custody) = &self.custody {
            match custody.compute(&envelope) {
                Ok(object) => envelope = envelope.with_custody_doc(Some(std::sync::Arc::new(object))),
                Err(rejection) => return reject(envelope, rejection, true),
            }
        }
        // 7. Priority lane: only its refusals here; the order is set per written batch.
        match self.lanes.as_ref().map(|l| l.assign(&envelope)) {
            Some(Err(rejection)) => reject(envelope, rejection, true),
            _ => Prepared::Ready(envelope),
        }
    }

    /// The order to write `batch` in (indexes into it), or `None` to keep stream order.
    /// Messages that share an ordering key keep their relative order.
    pub fn write_order(&self, batch: &[Envelope]) -> Option<Vec<usize>> {
        let lanes = self.lanes.as_ref()?;
        let lane_of: Vec<usize> =
            batch.iter().map(|e| lanes.assign(e).unwrap_or_else(|_| lanes.default_index())).collect();
        let keys: Vec<Option<OrderKey>> = batch.iter().map(Envelope::order_key).collect();
        Some(lanes.order(&lane_of, &keys))
    }
}

/// What every enabled policy will do, for `nats-sink validate`; empty when none is on.
pub fn describe(config: Sections<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if config.mission_metadata.enabled {
        out.extend(config.mission_metadata.describe());
    }
    if config.security_labels.enabled {
        out.extend(config.security_labels.describe());
    }
    if config.message_authenticity.enabled {
        out.extend(config.message_authenticity.describe());
    }
    if config.encryption.is_active() {
        out.push(format!(
            "payload encryption: {} with key id {}, envelope version {} ({} subject rules)",
            config.encryption.algorithm.as_str(),
            config.encryption.key_id,
            config.encryption.format_version,
            config.encryption.rules.len()
        ));
    }
    if config.size_policy.enabled {
        out.extend(config.size_policy.describe());
    }
    if config.pre_sink_policy.enabled {
        out.extend(config.pre_sink_policy.describe());
    }
    if config.custody.enabled {
        out.extend(config.custody.describe());
    }
    if config.priority_lanes.enabled {
        out.extend(config.priority_lanes.describe());
    }
    out
}

/// Runs one of the cross-check scripts in `tests/reference/` with the reference's Python
/// (installed by `cargo xtask setup`) and returns its stdout; fails `test` when the reference
/// is not installed.
#[cfg(test)]
pub(crate) fn reference_script(test: &str, script: &str, args: &[&str], stdin: Option<String>) -> String {
    use std::io::Write as _;
    let python = sinks_testkit::reference_python().unwrap_or_else(|reason| sinks_testkit::cannot_run(test, reason));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference").join(script);
    let mut child = std::process::Command::new(python)
        .arg(&path)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the reference's python");
    let input = stdin.unwrap_or_default();
    let mut pipe = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("run the reference's python");
    writer.join().expect("stdin writer").expect("write stdin");
    assert!(out.status.success(), "{script} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 output")
}
