//! The Python reference's configuration models (nats-sinks 0.4.3, `core/config.py`) as data:
//! every model's fields, what each holds, and its default, as `AppConfig.model_dump(mode=
//! "json")` writes it. [`super::view`] fills a config tree from it the way the reference's
//! models do. Generated from the reference's own models (each field's annotation and default),
//! and held to the reference's output by `crates/sinks-bin/tests/catalogue_manifest.rs`.

/// What a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A value kept as given (after the field's normalization, [`super::view`]).
    Scalar,
    /// A number (or list of numbers) the reference keeps as a float: `5` is written `5.0`.
    Float,
    /// One model.
    Model(&'static str),
    /// A list of models.
    Models(&'static str),
    /// A sink section: kept as given (the reference's `SinkConfig` allows any field), its
    /// `type` stripped and lowercased.
    Sink,
    /// An object of sink sections by name.
    Sinks,
}

/// One field of a model.
#[derive(Debug)]
pub(super) struct Field {
    /// The field's name.
    pub(super) name: &'static str,
    /// What it holds.
    pub(super) kind: Kind,
    /// Its default as JSON text (`{}` for a model field: the model's own defaults); `None`
    /// for a required field.
    pub(super) default: Option<&'static str>,
}

/// One model: its fields in the reference's order.
#[derive(Debug)]
pub(super) struct Model {
    /// The model's class name.
    pub(super) name: &'static str,
    /// Its fields.
    pub(super) fields: &'static [Field],
}

/// The model named `name`.
pub(super) fn model(name: &str) -> Option<&'static Model> {
    MODELS.iter().find(|m| m.name == name)
}

/// Every model of the reference's configuration, by class name; `AppConfig` is the root.
pub(super) static MODELS: &[Model] = &[
    Model {
        name: "AckConfirmationConfig",
        fields: &[
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "timeout_ms", kind: Kind::Scalar, default: Some(r#"1000"#) },
            Field { name: "unsupported_action", kind: Kind::Scalar, default: Some(r#""fail""#) },
        ],
    },
    Model {
        name: "AppConfig",
        fields: &[
            Field { name: "advisories", kind: Kind::Model("JetStreamAdvisoryConfig"), default: Some(r#"{}"#) },
            Field {
                name: "consumer_management",
                kind: Kind::Model("ConsumerManagementConfig"),
                default: Some(r#"{}"#),
            },
            Field { name: "custody", kind: Kind::Model("CustodyConfig"), default: Some(r#"{}"#) },
            Field { name: "dead_letter", kind: Kind::Model("DeadLetterConfig"), default: Some(r#"{}"#) },
            Field { name: "delivery", kind: Kind::Model("DeliveryConfig"), default: Some(r#"{}"#) },
            Field { name: "encryption", kind: Kind::Model("EncryptionConfig"), default: Some(r#"{}"#) },
            Field { name: "logging", kind: Kind::Model("LoggingConfig"), default: Some(r#"{}"#) },
            Field {
                name: "message_authenticity",
                kind: Kind::Model("MessageAuthenticityConfig"),
                default: Some(r#"{}"#),
            },
            Field { name: "message_metadata", kind: Kind::Model("MessageMetadataConfig"), default: Some(r#"{}"#) },
            Field { name: "metrics", kind: Kind::Model("MetricsConfig"), default: Some(r#"{}"#) },
            Field { name: "mission_metadata", kind: Kind::Model("MissionMetadataConfig"), default: Some(r#"{}"#) },
            Field { name: "nats", kind: Kind::Model("NatsConfig"), default: None },
            Field { name: "plugins", kind: Kind::Model("SinkPluginConfig"), default: Some(r#"{}"#) },
            Field { name: "pre_sink_policy", kind: Kind::Model("PreSinkPolicyConfig"), default: Some(r#"{}"#) },
            Field { name: "push_consumer", kind: Kind::Model("PushConsumerConfig"), default: Some(r#"{}"#) },
            Field { name: "routing", kind: Kind::Model("RoutingMatchPolicyConfig"), default: Some(r#"{}"#) },
            Field { name: "security_labels", kind: Kind::Model("SecurityLabelProfileConfig"), default: Some(r#"{}"#) },
            Field { name: "sink", kind: Kind::Sink, default: None },
            Field { name: "sinks", kind: Kind::Sinks, default: Some(r#"{}"#) },
            Field { name: "size_policy", kind: Kind::Model("SizePolicyConfig"), default: Some(r#"{}"#) },
        ],
    },
    Model {
        name: "ConsumerManagementConfig",
        fields: &[
            Field { name: "ack_wait_seconds", kind: Kind::Float, default: Some(r#"null"#) },
            Field { name: "backoff_seconds", kind: Kind::Float, default: Some(r#"null"#) },
            Field { name: "deliver_policy", kind: Kind::Scalar, default: Some(r#""all""#) },
            Field { name: "filter_subjects", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "headers_only", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "max_ack_pending", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "max_deliver", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "max_waiting", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "memory_storage", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "metadata", kind: Kind::Scalar, default: Some(r#"{}"#) },
            Field { name: "mode", kind: Kind::Scalar, default: Some(r#""create_if_missing""#) },
            Field { name: "num_replicas", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "replay_policy", kind: Kind::Scalar, default: Some(r#""instant""#) },
        ],
    },
    Model {
        name: "CustodyConfig",
        fields: &[
            Field { name: "algorithm", kind: Kind::Scalar, default: Some(r#""sha256""#) },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "hash_metadata", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "hash_payload", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "include_previous_hash", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "key_id", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "max_hash_input_bytes", kind: Kind::Scalar, default: Some(r#"16777216"#) },
            Field {
                name: "previous_hash_header",
                kind: Kind::Scalar,
                default: Some(r#""Nats-Sinks-Previous-Custody-Hash""#),
            },
        ],
    },
    Model {
        name: "DeadLetterConfig",
        fields: &[
            Field { name: "ack_term_after_publish", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "include_error", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "include_headers", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "include_payload", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "subject", kind: Kind::Scalar, default: Some(r#"null"#) },
        ],
    },
    Model {
        name: "DeliveryConfig",
        fields: &[
            Field { name: "ack_confirmation", kind: Kind::Model("AckConfirmationConfig"), default: Some(r#"{}"#) },
            Field { name: "ack_policy", kind: Kind::Scalar, default: Some(r#""after_sink_commit""#) },
            Field { name: "batch_size", kind: Kind::Scalar, default: Some(r#"100"#) },
            Field { name: "batch_timeout_ms", kind: Kind::Scalar, default: Some(r#"1000"#) },
            Field { name: "in_progress", kind: Kind::Model("InProgressConfig"), default: Some(r#"{}"#) },
            Field { name: "max_in_flight_batches", kind: Kind::Scalar, default: Some(r#"1"#) },
            Field { name: "max_retries", kind: Kind::Scalar, default: Some(r#"5"#) },
            Field { name: "prefer_safe_duplication", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "priority_lanes", kind: Kind::Model("PriorityLanesConfig"), default: Some(r#"{}"#) },
            Field { name: "retry_backoff_max_ms", kind: Kind::Scalar, default: Some(r#"60000"#) },
            Field { name: "retry_backoff_mode", kind: Kind::Scalar, default: Some(r#""exponential""#) },
            Field { name: "retry_backoff_ms", kind: Kind::Scalar, default: Some(r#"1000"#) },
            Field { name: "retry_backoff_multiplier", kind: Kind::Float, default: Some(r#"2.0"#) },
            Field { name: "retry_jitter", kind: Kind::Scalar, default: Some(r#""full""#) },
            Field { name: "temporary_failure_action", kind: Kind::Scalar, default: Some(r#""nak""#) },
        ],
    },
    Model {
        name: "EncryptionConfig",
        fields: &[
            Field { name: "algorithm", kind: Kind::Scalar, default: Some(r#""aes-256-gcm""#) },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "key_b64", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "key_b64_env", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "key_id", kind: Kind::Scalar, default: Some(r#""default""#) },
            Field { name: "nonce_size_bytes", kind: Kind::Scalar, default: Some(r#"12"#) },
            Field { name: "rules", kind: Kind::Models("EncryptionRuleConfig"), default: Some(r#"[]"#) },
            Field { name: "tag_length", kind: Kind::Scalar, default: Some(r#"16"#) },
        ],
    },
    Model {
        name: "EncryptionRuleConfig",
        fields: &[
            Field { name: "algorithm", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "key_b64", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "key_b64_env", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "key_id", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "nonce_size_bytes", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "subject", kind: Kind::Scalar, default: None },
            Field { name: "tag_length", kind: Kind::Scalar, default: Some(r#"null"#) },
        ],
    },
    Model {
        name: "InProgressConfig",
        fields: &[
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "interval_ms", kind: Kind::Scalar, default: Some(r#"5000"#) },
            Field { name: "max_heartbeats", kind: Kind::Scalar, default: Some(r#"12"#) },
            Field { name: "shutdown_timeout_ms", kind: Kind::Scalar, default: Some(r#"5000"#) },
        ],
    },
    Model {
        name: "JetStreamAdvisoryConfig",
        fields: &[
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "log_events", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "max_payload_bytes", kind: Kind::Scalar, default: Some(r#"65536"#) },
            Field {
                name: "subjects",
                kind: Kind::Scalar,
                default: Some(
                    r#"["$JS.EVENT.ADVISORY.API","$JS.EVENT.ADVISORY.API.>","$JS.EVENT.ADVISORY.STREAM.CREATED.*","$JS.EVENT.ADVISORY.STREAM.DELETED.*","$JS.EVENT.ADVISORY.STREAM.MODIFIED.*","$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.*","$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.*","$JS.EVENT.ADVISORY.CONSUMER.CREATED.*.*","$JS.EVENT.ADVISORY.CONSUMER.DELETED.*.*","$JS.EVENT.ADVISORY.CONSUMER.MODIFIED.*.*","$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.*.*","$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.*.*","$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.*.*","$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.*.*","$JS.EVENT.ADVISORY.CONSUMER.QUORUM_LOST.*.*"]"#,
                ),
            },
        ],
    },
    Model {
        name: "LoggingConfig",
        fields: &[
            Field { name: "level", kind: Kind::Scalar, default: Some(r#""INFO""#) },
            Field { name: "payload_logging", kind: Kind::Scalar, default: Some(r#"false"#) },
        ],
    },
    Model {
        name: "MessageAuthenticityConfig",
        fields: &[
            Field {
                name: "algorithm_header",
                kind: Kind::Scalar,
                default: Some(r#""Nats-Sinks-Authenticity-Algorithm""#),
            },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "key_id_header", kind: Kind::Scalar, default: Some(r#""Nats-Sinks-Authenticity-Key-Id""#) },
            Field { name: "rules", kind: Kind::Models("MessageAuthenticityRuleConfig"), default: Some(r#"[]"#) },
            Field {
                name: "signature_header",
                kind: Kind::Scalar,
                default: Some(r#""Nats-Sinks-Authenticity-Signature""#),
            },
            Field { name: "unmatched_subject_action", kind: Kind::Scalar, default: Some(r#""reject""#) },
        ],
    },
    Model {
        name: "MessageAuthenticityRuleConfig",
        fields: &[
            Field { name: "algorithm", kind: Kind::Scalar, default: Some(r#""hmac-sha256""#) },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "key_b64", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "key_b64_env", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "key_id", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "signed_fields", kind: Kind::Scalar, default: Some(r#"["subject","message_id"]"#) },
            Field { name: "subject", kind: Kind::Scalar, default: None },
        ],
    },
    Model {
        name: "MessageMetadataConfig",
        fields: &[
            Field {
                name: "classification",
                kind: Kind::Model("MessageMetadataFieldConfig"),
                default: Some(r#"{"default":null,"header":"Nats-Sinks-Classification"}"#),
            },
            Field {
                name: "labels",
                kind: Kind::Model("MessageMetadataLabelsConfig"),
                default: Some(r#"{"default":[],"header":"Nats-Sinks-Labels"}"#),
            },
            Field {
                name: "priority",
                kind: Kind::Model("MessageMetadataFieldConfig"),
                default: Some(r#"{"default":null,"header":"Nats-Sinks-Priority"}"#),
            },
            Field { name: "rules", kind: Kind::Models("MessageMetadataRuleConfig"), default: Some(r#"[]"#) },
        ],
    },
    Model {
        name: "MessageMetadataFieldConfig",
        fields: &[
            Field { name: "default", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "header", kind: Kind::Scalar, default: None },
        ],
    },
    Model {
        name: "MessageMetadataLabelsConfig",
        fields: &[
            Field { name: "default", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "header", kind: Kind::Scalar, default: None },
        ],
    },
    Model {
        name: "MessageMetadataRuleConfig",
        fields: &[
            Field { name: "classification", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "labels", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "priority", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "subject", kind: Kind::Scalar, default: None },
        ],
    },
    Model {
        name: "MetadataProfileFieldConfig",
        fields: &[
            Field { name: "enum", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "max_depth", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "max_fields", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "max_items", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "max_length", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "name", kind: Kind::Scalar, default: None },
            Field { name: "type", kind: Kind::Scalar, default: None },
        ],
    },
    Model {
        name: "MetricsConfig",
        fields: &[
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "event_freshness_enabled", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "event_future_skew_tolerance_seconds", kind: Kind::Float, default: Some(r#"5.0"#) },
            Field { name: "event_stale_after_seconds", kind: Kind::Float, default: Some(r#"300.0"#) },
            Field { name: "namespace", kind: Kind::Scalar, default: Some(r#""nats_sinks""#) },
            Field { name: "snapshot_file", kind: Kind::Scalar, default: Some(r#"null"#) },
        ],
    },
    Model {
        name: "MissionMetadataConfig",
        fields: &[
            Field { name: "allowed_profiles", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "default", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "header", kind: Kind::Scalar, default: Some(r#""Nats-Sinks-Mission-Metadata""#) },
            Field { name: "max_bytes", kind: Kind::Scalar, default: Some(r#"8192"#) },
            Field { name: "profiles", kind: Kind::Models("MissionMetadataProfileConfig"), default: Some(r#"[]"#) },
            Field { name: "rules", kind: Kind::Models("MissionMetadataRuleConfig"), default: Some(r#"[]"#) },
        ],
    },
    Model {
        name: "MissionMetadataProfileConfig",
        fields: &[
            Field { name: "max_depth", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "max_fields", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "name", kind: Kind::Scalar, default: None },
            Field { name: "optional_fields", kind: Kind::Models("MetadataProfileFieldConfig"), default: Some(r#"[]"#) },
            Field { name: "required_fields", kind: Kind::Models("MetadataProfileFieldConfig"), default: Some(r#"[]"#) },
            Field { name: "unknown_fields", kind: Kind::Scalar, default: Some(r#""allow""#) },
            Field { name: "version", kind: Kind::Scalar, default: Some(r#"null"#) },
        ],
    },
    Model {
        name: "MissionMetadataRuleConfig",
        fields: &[
            Field { name: "metadata", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "subject", kind: Kind::Scalar, default: None },
        ],
    },
    Model {
        name: "NatsConfig",
        fields: &[
            Field { name: "allow_reconnect", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "connect_timeout_seconds", kind: Kind::Scalar, default: Some(r#"2"#) },
            Field { name: "consumer", kind: Kind::Scalar, default: None },
            Field { name: "creds_file", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "drain_timeout_seconds", kind: Kind::Scalar, default: Some(r#"30"#) },
            Field { name: "durable", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "max_outstanding_pings", kind: Kind::Scalar, default: Some(r#"2"#) },
            Field { name: "max_reconnect_attempts", kind: Kind::Scalar, default: Some(r#"60"#) },
            Field { name: "name", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "nkey_seed_file", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "no_echo", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "password", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "password_env", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "pending_size_bytes", kind: Kind::Scalar, default: Some(r#"2097152"#) },
            Field { name: "ping_interval_seconds", kind: Kind::Scalar, default: Some(r#"120"#) },
            Field { name: "reconnect_time_wait_seconds", kind: Kind::Scalar, default: Some(r#"2"#) },
            Field { name: "stream", kind: Kind::Scalar, default: None },
            Field { name: "subject", kind: Kind::Scalar, default: None },
            Field { name: "tls_ca_file", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "tls_cert_file", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "tls_key_file", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "tls_verify", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "token", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "token_env", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "url", kind: Kind::Scalar, default: Some(r#""nats://localhost:4222""#) },
            Field { name: "urls", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "user", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "websocket_headers", kind: Kind::Scalar, default: Some(r#"{}"#) },
            Field { name: "websocket_headers_env", kind: Kind::Scalar, default: Some(r#"{}"#) },
        ],
    },
    Model {
        name: "PreSinkPolicyConfig",
        fields: &[
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "rules", kind: Kind::Models("PreSinkPolicyRuleConfig"), default: Some(r#"[]"#) },
            Field { name: "unmatched_subject_action", kind: Kind::Scalar, default: Some(r#""reject""#) },
        ],
    },
    Model {
        name: "PreSinkPolicyRuleConfig",
        fields: &[
            Field { name: "allowed_mission_metadata_keys", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "max_payload_bytes", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "require_classification", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "require_encrypted_payload", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "require_mission_metadata", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "require_priority", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "required_labels", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "subject", kind: Kind::Scalar, default: Some(r#"">""#) },
        ],
    },
    Model {
        name: "PriorityLaneConfig",
        fields: &[
            Field { name: "name", kind: Kind::Scalar, default: None },
            Field { name: "priorities", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "weight", kind: Kind::Scalar, default: Some(r#"1"#) },
        ],
    },
    Model {
        name: "PriorityLanesConfig",
        fields: &[
            Field { name: "default_lane", kind: Kind::Scalar, default: Some(r#""default""#) },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field {
                name: "lanes",
                kind: Kind::Models("PriorityLaneConfig"),
                default: Some(r#"[{"name":"default","priorities":[],"weight":1}]"#),
            },
            Field { name: "max_priority_value_length", kind: Kind::Scalar, default: Some(r#"64"#) },
            Field { name: "unknown_priority_action", kind: Kind::Scalar, default: Some(r#""default_lane""#) },
        ],
    },
    Model {
        name: "PushConsumerConfig",
        fields: &[
            Field { name: "deliver_group", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "deliver_subject", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "drain_timeout_ms", kind: Kind::Scalar, default: Some(r#"30000"#) },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "flow_control", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "idle_heartbeat_seconds", kind: Kind::Float, default: Some(r#"null"#) },
            Field { name: "manual_ack", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "pending_bytes_limit", kind: Kind::Scalar, default: Some(r#"67108864"#) },
            Field { name: "pending_msgs_limit", kind: Kind::Scalar, default: Some(r#"1024"#) },
            Field { name: "queue_overflow_action", kind: Kind::Scalar, default: Some(r#""nak""#) },
        ],
    },
    Model {
        name: "RouteHeaderMatchConfig",
        fields: &[
            Field { name: "name", kind: Kind::Scalar, default: None },
            Field { name: "values", kind: Kind::Scalar, default: None },
        ],
    },
    Model {
        name: "RouteMatchConfig",
        fields: &[
            Field { name: "classification", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "headers", kind: Kind::Models("RouteHeaderMatchConfig"), default: Some(r#"[]"#) },
            Field { name: "labels_all", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "labels_any", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "labels_none", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "priority", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "subject", kind: Kind::Scalar, default: Some(r#"null"#) },
        ],
    },
    Model {
        name: "RoutePolicyRouteConfig",
        fields: &[
            Field { name: "match", kind: Kind::Model("RouteMatchConfig"), default: None },
            Field { name: "name", kind: Kind::Scalar, default: None },
            Field { name: "targets", kind: Kind::Models("RouteTargetConfig"), default: None },
        ],
    },
    Model {
        name: "RouteTargetConfig",
        fields: &[
            Field { name: "minimum_wait_ms", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "required", kind: Kind::Scalar, default: Some(r#"true"#) },
            Field { name: "sink", kind: Kind::Scalar, default: None },
            Field { name: "timeout_ms", kind: Kind::Scalar, default: Some(r#"null"#) },
        ],
    },
    Model {
        name: "RoutingMatchPolicyConfig",
        fields: &[
            Field { name: "default_targets", kind: Kind::Models("RouteTargetConfig"), default: Some(r#"[]"#) },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "mode", kind: Kind::Scalar, default: Some(r#""first""#) },
            Field { name: "no_match", kind: Kind::Scalar, default: Some(r#""reject""#) },
            Field { name: "routes", kind: Kind::Models("RoutePolicyRouteConfig"), default: Some(r#"[]"#) },
            Field { name: "target_sink_types", kind: Kind::Scalar, default: Some(r#"{}"#) },
        ],
    },
    Model {
        name: "SecurityLabelProfileConfig",
        fields: &[
            Field { name: "allowed_classifications", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "allowed_handling_caveats", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "allowed_priorities", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "allowed_releasability", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "allowed_retention_categories", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "default", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "header", kind: Kind::Scalar, default: Some(r#""Nats-Sinks-Security-Labels""#) },
            Field { name: "max_bytes", kind: Kind::Scalar, default: Some(r#"8192"#) },
            Field { name: "rules", kind: Kind::Models("SecurityLabelRuleConfig"), default: Some(r#"[]"#) },
        ],
    },
    Model {
        name: "SecurityLabelRuleConfig",
        fields: &[
            Field { name: "profile", kind: Kind::Scalar, default: Some(r#"null"#) },
            Field { name: "subject", kind: Kind::Scalar, default: None },
        ],
    },
    Model {
        name: "SinkPluginConfig",
        fields: &[
            Field { name: "allowed_sinks", kind: Kind::Scalar, default: Some(r#"[]"#) },
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "require_production_ready", kind: Kind::Scalar, default: Some(r#"true"#) },
        ],
    },
    Model {
        name: "SizePolicyConfig",
        fields: &[
            Field { name: "enabled", kind: Kind::Scalar, default: Some(r#"false"#) },
            Field { name: "max_batch_messages", kind: Kind::Scalar, default: Some(r#"10000"#) },
            Field { name: "max_header_count", kind: Kind::Scalar, default: Some(r#"128"#) },
            Field { name: "max_header_name_bytes", kind: Kind::Scalar, default: Some(r#"256"#) },
            Field { name: "max_header_value_bytes", kind: Kind::Scalar, default: Some(r#"8192"#) },
            Field { name: "max_headers_bytes", kind: Kind::Scalar, default: Some(r#"65536"#) },
            Field { name: "max_label_bytes", kind: Kind::Scalar, default: Some(r#"128"#) },
            Field { name: "max_label_count", kind: Kind::Scalar, default: Some(r#"64"#) },
            Field { name: "max_labels_bytes", kind: Kind::Scalar, default: Some(r#"4096"#) },
            Field { name: "max_mission_metadata_bytes", kind: Kind::Scalar, default: Some(r#"8192"#) },
            Field { name: "max_normalized_record_bytes", kind: Kind::Scalar, default: Some(r#"20971520"#) },
            Field { name: "max_payload_bytes", kind: Kind::Scalar, default: Some(r#"16777216"#) },
            Field { name: "max_standard_metadata_bytes", kind: Kind::Scalar, default: Some(r#"262144"#) },
        ],
    },
];
