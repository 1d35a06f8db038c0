//! The reference's view of a configuration: the config tree filled and normalized the way
//! the Python reference's models load it (every field it knows with its default, list and
//! label shorthands expanded, route targets spelled out, optional fan-out targets given the
//! reference's waits), then redacted with the reference's rules. This is what the catalogue
//! manifest carries as `redacted_config`, so that a catalogue fed by both implementations
//! gets the same document for the same file.
//!
//! What the reference does not know (this project's extension sections and fields) is kept
//! as it was given, redacted by the same rules. The waits of optional fan-out targets come
//! from the kinds the binary registers (`KindDefaults`), which for the reference's sink types
//! are the reference's (a test of sinks-bin holds them to its table). A field this build reads differently from
//! the reference (`nats.max_reconnect_attempts` is accepted and not used) still shows the
//! reference's value: the view describes the file, not this build's behaviour.

use serde_json::{Map, Value};
use sinks_runtime::config::KindDefaults;

use super::schema::{self, Kind};

/// What the reference writes instead of a secret.
pub(crate) const REDACTED: &str = "********";

/// Parts of a key name that mark its value as secret (the reference's list).
const SENSITIVE_KEY_PARTS: [&str; 11] = [
    "password",
    "token",
    "secret",
    "private_key",
    "credentials",
    "creds",
    "cert_file",
    "key_file",
    "nkey_seed",
    "key_b64",
    "key_material",
];

/// The normalized (not yet redacted) view of `raw`, a whole config tree, with the optional
/// fan-out target waits of `kinds`.
pub(crate) fn normalized(raw: &Value, kinds: &KindDefaults) -> Value {
    let mut root = raw.as_object().cloned().unwrap_or_default();
    inline_fanout(&mut root, kinds);
    named_sink_types(&mut root, kinds);
    let mut view = normalize_model("AppConfig", Value::Object(root));
    if let Some(Value::Object(routing)) = view.get_mut("routing") {
        optional_target_waits(routing, kinds);
    }
    view
}

/// `value` redacted with the reference's rules: a key naming a secret hides its value, a
/// URL or DSN with credentials is hidden, WebSocket header values are hidden (their names
/// stay); named sinks and the target-to-type map are walked as they are.
pub(crate) fn redacted(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| {
                    let out = match (key.as_str(), item) {
                        ("sinks", Value::Object(sinks)) => {
                            Value::Object(sinks.iter().map(|(name, sink)| (name.clone(), redacted(sink))).collect())
                        }
                        ("target_sink_types", Value::Object(_)) => item.clone(),
                        _ => redacted(&redact_value(key, item)),
                    };
                    (key.clone(), out)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redacted).collect()),
        other => other.clone(),
    }
}

fn redact_value(key: &str, value: &Value) -> Value {
    if value.is_null() {
        return Value::Null;
    }
    let lower = key.to_lowercase();
    if matches!(lower.as_str(), "websocket_headers" | "websocket_headers_env")
        && let Value::Object(headers) = value
    {
        return Value::Object(headers.keys().map(|name| (name.clone(), Value::from(REDACTED))).collect());
    }
    if SENSITIVE_KEY_PARTS.iter().any(|part| lower.contains(part)) {
        return Value::from(REDACTED);
    }
    if matches!(lower.as_str(), "dsn" | "url") && value.as_str().is_some_and(|s| s.contains('@')) {
        return Value::from(REDACTED);
    }
    value.clone()
}

/// The compact fan-out form (`sink.type: fanout` with `sink.sinks` and route fields) moved
/// into the top-level `sinks` and `routing` sections, as the reference does before anything
/// else.
fn inline_fanout(root: &mut Map<String, Value>, kinds: &KindDefaults) {
    let Some(Value::Object(sink)) = root.get_mut("sink") else { return };
    if sink.get("type").and_then(Value::as_str).map(|t| t.trim().to_lowercase()).as_deref() != Some("fanout") {
        return;
    }
    let inline_sinks = sink.remove("sinks");
    let fields = ["routes", "route_match_mode", "no_match", "default_targets", "target_sink_types"]
        .map(|name| (name, sink.remove(name).filter(|v| !v.is_null())));
    if let Some(sinks) = inline_sinks.filter(|v| !v.is_null()) {
        root.insert("sinks".into(), sinks);
    }
    if fields.iter().all(|(_, v)| v.is_none()) {
        return;
    }
    let mut routing = Map::new();
    routing.insert("enabled".into(), Value::Bool(true));
    let mut explicit_types = false;
    for (name, value) in fields {
        let Some(value) = value else { continue };
        explicit_types |= name == "target_sink_types";
        let target = if name == "route_match_mode" { "mode" } else { name };
        routing.insert(target.into(), value);
    }
    if !explicit_types {
        let inferred = inferred_types(root.get("sinks"), &routing, kinds);
        if !inferred.is_empty() {
            routing.insert("target_sink_types".into(), Value::Object(inferred));
        }
    }
    root.insert("routing".into(), Value::Object(routing));
}

/// Named sinks' types filled into `routing.target_sink_types` for every target the routes
/// name, where the map does not name it yet.
fn named_sink_types(root: &mut Map<String, Value>, kinds: &KindDefaults) {
    let sinks = root.get("sinks").cloned();
    let Some(Value::Object(routing)) = root.get_mut("routing") else { return };
    if !matches!(sinks, Some(Value::Object(_))) {
        return;
    }
    let inferred = inferred_types(sinks.as_ref(), routing, kinds);
    if inferred.is_empty() {
        return;
    }
    let mut types = routing.get("target_sink_types").and_then(Value::as_object).cloned().unwrap_or_default();
    for (name, kind) in inferred {
        types.entry(name).or_insert(kind);
    }
    routing.insert("target_sink_types".into(), Value::Object(types));
}

/// The type of every named sink a route (or the default) targets, for the types that have
/// optional-target waits.
fn inferred_types(sinks: Option<&Value>, routing: &Map<String, Value>, kinds: &KindDefaults) -> Map<String, Value> {
    let Some(Value::Object(sinks)) = sinks else { return Map::new() };
    let mut names: Vec<String> = target_names(routing.get("default_targets"));
    if let Some(Value::Array(routes)) = routing.get("routes") {
        for route in routes {
            names.extend(target_names(route.get("targets")));
        }
    }
    let mut out = Map::new();
    for name in names {
        let kind =
            sinks.get(&name).and_then(|s| s.get("type")).and_then(Value::as_str).map(|t| t.trim().to_lowercase());
        if let Some(kind) = kind.filter(|k| kinds.optional_wait(k).is_some()) {
            out.insert(name, Value::from(kind));
        }
    }
    out
}

/// The target names of a raw `targets` value: a name, a target object, or a list of them.
fn target_names(value: Option<&Value>) -> Vec<String> {
    let items: Vec<&Value> = match value {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(v @ (Value::String(_) | Value::Object(_))) => vec![v],
        _ => Vec::new(),
    };
    items
        .into_iter()
        .filter_map(|item| match item {
            Value::String(name) => Some(name.clone()),
            Value::Object(target) => target.get("sink").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        })
        .collect()
}

/// `value` as model `name` dumps it: every field it knows, filled and normalized; fields it
/// does not know kept as given.
fn normalize_model(name: &str, value: Value) -> Value {
    let Some(model) = schema::model(name) else { return value };
    let Value::Object(mut input) = value else { return value };
    if name == "MessageMetadataConfig" {
        standard_headers(&mut input);
    }
    let mut out = Map::new();
    for field in model.fields {
        let normalized = match input.remove(field.name) {
            Some(given) => normalize_field(name, field.name, field.kind, given),
            None => match (field.default, field.kind) {
                (Some("{}"), Kind::Model(inner)) => normalize_model(inner, Value::Object(Map::new())),
                (Some(text), _) => serde_json::from_str(text).unwrap_or(Value::Null),
                (None, _) => continue,
            },
        };
        out.insert(field.name.into(), normalized);
    }
    // Whatever the reference does not know (this project's extensions) stays as given.
    out.extend(input);
    Value::Object(out)
}

fn normalize_field(model: &str, field: &str, kind: Kind, value: Value) -> Value {
    let value = field_rule(model, field, value);
    match (kind, value) {
        (_, Value::Null) => Value::Null,
        (Kind::Scalar, v) => v,
        (Kind::Float, v) => floats(v),
        (Kind::Model(inner), v) => normalize_model(inner, v),
        (Kind::Models(inner), Value::Array(items)) => {
            Value::Array(items.into_iter().map(|item| normalize_model(inner, item)).collect())
        }
        (Kind::Sink, v) => sink(v),
        (Kind::Sinks, Value::Object(items)) => Value::Object(items.into_iter().map(|(k, s)| (k, sink(s))).collect()),
        (_, v) => v,
    }
}

/// A sink section as the reference keeps it: as given, `type` stripped and lowercased.
fn sink(value: Value) -> Value {
    let Value::Object(mut map) = value else { return value };
    if let Some(Value::String(kind)) = map.get_mut("type") {
        *kind = kind.trim().to_lowercase();
    }
    Value::Object(map)
}

/// Integers as floats (the reference's float fields): `5` is `5.0`.
fn floats(value: Value) -> Value {
    match value {
        Value::Number(n) if n.is_i64() || n.is_u64() => n.as_f64().map_or(Value::Number(n), Value::from),
        Value::Array(items) => Value::Array(items.into_iter().map(floats).collect()),
        other => other,
    }
}

/// The reference's normalization of one field (its `mode="before"` validators), for the
/// fields that change what they are given.
fn field_rule(model: &str, field: &str, value: Value) -> Value {
    match (model, field) {
        ("MessageMetadataLabelsConfig", "default")
        | ("MessageMetadataRuleConfig", "labels")
        | ("RouteMatchConfig", "labels_all" | "labels_any" | "labels_none")
        | ("PreSinkPolicyRuleConfig", "required_labels") => labels(&value),
        ("MessageMetadataFieldConfig", "default") | ("MessageMetadataRuleConfig", "priority" | "classification") => {
            metadata_text(&value).map_or(Value::Null, Value::from)
        }
        ("RouteMatchConfig", "priority" | "classification") | ("MissionMetadataConfig", "allowed_profiles") => {
            distinct(&value, |s| Some(s.to_owned()))
        }
        ("PriorityLaneConfig", "priorities") => distinct(&value, |s| Some(s.to_lowercase())),
        ("SinkPluginConfig", "allowed_sinks") => distinct(&value, |s| Some(s.to_lowercase())),
        ("EncryptionConfig" | "EncryptionRuleConfig" | "MessageAuthenticityRuleConfig", "algorithm") => match value {
            Value::String(s) => Value::from(s.trim().to_lowercase().replace('_', "-")),
            other => other,
        },
        ("LoggingConfig", "level") => match value {
            Value::String(s) => Value::from(s.trim().to_uppercase()),
            other => other,
        },
        ("RoutePolicyRouteConfig", "targets") | ("RoutingMatchPolicyConfig", "default_targets") => targets(value),
        ("RoutingMatchPolicyConfig", "target_sink_types") => match value {
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| {
                        let v = v.as_str().map_or(v.clone(), |s| Value::from(s.trim().to_lowercase()));
                        (k, v)
                    })
                    .collect(),
            ),
            Value::Null => Value::Object(Map::new()),
            other => other,
        },
        _ => value,
    }
}

/// A metadata value as the reference keeps one: text, trimmed; blank is none.
fn metadata_text(value: &Value) -> Option<String> {
    let text = match value {
        Value::Null => return None,
        Value::String(s) => s.trim().to_owned(),
        other => other.to_string().trim().to_owned(),
    };
    (!text.is_empty()).then_some(text)
}

/// Labels: a `;`-separated text or a list, items trimmed, blanks dropped, first of each kept.
fn labels(value: &Value) -> Value {
    let items: Vec<Value> = match value {
        Value::Null => Vec::new(),
        Value::String(s) => s.split(';').map(Value::from).collect(),
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    };
    let mut out: Vec<String> = Vec::new();
    for item in &items {
        if let Some(text) = metadata_text(item)
            && !out.contains(&text)
        {
            out.push(text);
        }
    }
    Value::from(out)
}

/// A text or a list of texts as a list, each trimmed (and mapped), first of each kept.
fn distinct(value: &Value, map: impl Fn(&str) -> Option<String>) -> Value {
    let items: Vec<&Value> = match value {
        Value::Null => Vec::new(),
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if let Some(text) = metadata_text(item).and_then(|t| map(&t))
            && !out.contains(&text)
        {
            out.push(text);
        }
    }
    Value::from(out)
}

/// Route targets: a name, a target object or a list of them, as a list of target objects.
fn targets(value: Value) -> Value {
    let items = match value {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        other => vec![other],
    };
    Value::Array(
        items
            .into_iter()
            .map(|item| match item {
                Value::String(name) => serde_json::json!({"sink": name}),
                other => other,
            })
            .collect(),
    )
}

/// Optional targets without explicit waits get the waits of their sink type, as the
/// reference's routing policy fills them (when routing is on or has default targets).
fn optional_target_waits(routing: &mut Map<String, Value>, kinds: &KindDefaults) {
    let enabled = routing.get("enabled").and_then(Value::as_bool).unwrap_or(false);
    let has_defaults = routing.get("default_targets").and_then(Value::as_array).is_some_and(|d| !d.is_empty());
    if !enabled && !has_defaults {
        return;
    }
    let types = routing.get("target_sink_types").and_then(Value::as_object).cloned().unwrap_or_default();
    let fill = |target: &mut Value| {
        let Value::Object(target) = target else { return };
        if target.get("required").and_then(Value::as_bool).unwrap_or(true) {
            return;
        }
        let kind = target.get("sink").and_then(Value::as_str).and_then(|s| types.get(s)).and_then(Value::as_str);
        let Some(wait) = kind.and_then(|k| kinds.optional_wait(k)) else {
            return;
        };
        for (key, wait) in [("minimum_wait_ms", wait.minimum_wait_ms), ("timeout_ms", wait.timeout_ms)] {
            if target.get(key).is_none_or(Value::is_null) {
                target.insert(key.into(), Value::from(wait));
            }
        }
    };
    if let Some(Value::Array(defaults)) = routing.get_mut("default_targets") {
        defaults.iter_mut().for_each(fill);
    }
    if let Some(Value::Array(routes)) = routing.get_mut("routes") {
        for route in routes {
            if let Some(Value::Array(targets)) = route.get_mut("targets") {
                targets.iter_mut().for_each(fill);
            }
        }
    }
}

/// The reference's message metadata sections take the standard header when a config sets
/// only a default.
fn standard_headers(section: &mut Map<String, Value>) {
    for (field, header) in [
        ("priority", "Nats-Sinks-Priority"),
        ("classification", "Nats-Sinks-Classification"),
        ("labels", "Nats-Sinks-Labels"),
    ] {
        if let Some(Value::Object(map)) = section.get_mut(field) {
            map.entry("header").or_insert_with(|| Value::from(header));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sinks_runtime::config::OptionalWait;

    use super::*;

    /// Two kinds with the waits of the reference's local and networked sinks.
    fn kinds() -> KindDefaults {
        [
            ("disk", OptionalWait { minimum_wait_ms: 100, timeout_ms: 1000 }),
            ("remote", OptionalWait { minimum_wait_ms: 1000, timeout_ms: 5000 }),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn every_model_a_field_names_exists() {
        for model in schema::MODELS {
            for field in model.fields {
                if let Kind::Model(m) | Kind::Models(m) = field.kind {
                    assert!(schema::model(m).is_some(), "{}.{} names {m}", model.name, field.name);
                }
                if let Some(text) = field.default {
                    assert!(serde_json::from_str::<Value>(text).is_ok(), "{}.{}", model.name, field.name);
                }
            }
        }
    }

    #[test]
    fn a_minimal_config_is_filled_with_the_references_defaults() {
        let view = normalized(
            &json!({"nats": {"stream": "S", "consumer": "c", "subject": "s.>"}, "sink": {"type": " Disk ", "directory": "out"}}),
            &kinds(),
        );
        assert_eq!(view["sink"], json!({"type": "disk", "directory": "out"}));
        assert_eq!(view["nats"]["max_reconnect_attempts"], 60);
        assert_eq!(view["delivery"]["retry_backoff_multiplier"], 2.0);
        assert_eq!(view["message_metadata"]["priority"], json!({"default": null, "header": "Nats-Sinks-Priority"}));
        assert_eq!(view["routing"]["target_sink_types"], json!({}));
        assert_eq!(view["sinks"], json!({}));
        assert_eq!(view["advisories"]["subjects"].as_array().map(Vec::len), Some(15));
    }

    #[test]
    fn shorthands_are_spelled_out() {
        let view = normalized(
            &json!({
                "nats": {"stream": "S", "consumer": "c", "subject": "s.>"},
                "logging": {"level": " debug "},
                "delivery": {"retry_backoff_multiplier": 3},
                "message_metadata": {"labels": {"default": "a; b;;a"}, "priority": {"default": "  "},
                                     "rules": [{"subject": "s.x", "labels": "x;y"}]},
                "encryption": {"algorithm": "AES_256_GCM"},
                "sink": {"type": "fanout", "sinks": {"f": {"type": "disk", "directory": "o"}, "x": {"type": "custom"}},
                         "routes": [{"name": "r", "match": {"priority": "urgent"}, "targets": ["x", {"sink": "f", "required": false}]}]}
            }),
            &kinds(),
        );
        assert_eq!(view["logging"]["level"], "DEBUG");
        assert_eq!(view["delivery"]["retry_backoff_multiplier"], 3.0);
        assert_eq!(view["message_metadata"]["labels"], json!({"default": ["a", "b"], "header": "Nats-Sinks-Labels"}));
        assert_eq!(view["message_metadata"]["priority"]["default"], Value::Null);
        assert_eq!(view["message_metadata"]["rules"][0]["labels"], json!(["x", "y"]));
        assert_eq!(view["encryption"]["algorithm"], "aes-256-gcm");
        assert_eq!(view["sink"], json!({"type": "fanout"}));
        assert_eq!(view["sinks"]["f"]["directory"], "o");
        let routing = &view["routing"];
        assert_eq!(routing["enabled"], true);
        assert_eq!(routing["target_sink_types"], json!({"f": "disk"}), "x has no waits: it is not a fan-out kind");
        assert_eq!(routing["routes"][0]["match"]["priority"], json!(["urgent"]));
        assert_eq!(
            routing["routes"][0]["targets"][0],
            json!({"sink": "x", "required": true, "minimum_wait_ms": null, "timeout_ms": null})
        );
        assert_eq!(
            routing["routes"][0]["targets"][1],
            json!({"sink": "f", "required": false, "minimum_wait_ms": 100, "timeout_ms": 1000})
        );
    }

    #[test]
    fn redaction_follows_the_references_rules() {
        let view = redacted(&json!({
            "nats": {"password_env": "P", "token": null, "url": "nats://u:p@h:4222",
                     "websocket_headers": {"X-Route": "edge"}, "stream": "S"},
            "sinks": {"db": {"dsn": "user/pass@db", "wallet_password_env": "W", "table": "T"}},
            "routing": {"target_sink_types": {"db": "oracle"}},
            "encryption": {"rules": [{"key_b64_env": "K"}]},
            "ledger": {"api_key": "x"}
        }));
        assert_eq!(view["nats"]["password_env"], REDACTED);
        assert_eq!(view["nats"]["token"], Value::Null);
        assert_eq!(view["nats"]["url"], REDACTED);
        assert_eq!(view["nats"]["websocket_headers"], json!({"X-Route": REDACTED}));
        assert_eq!(view["nats"]["stream"], "S");
        assert_eq!(view["sinks"]["db"], json!({"dsn": REDACTED, "wallet_password_env": REDACTED, "table": "T"}));
        assert_eq!(view["routing"]["target_sink_types"]["db"], "oracle");
        assert_eq!(view["encryption"]["rules"][0]["key_b64_env"], REDACTED);
        assert_eq!(view["ledger"]["api_key"], "x", "not a part the reference hides");
    }
}
