//! The `routing` section and named sinks: which named sink(s) each message goes to, and
//! which of them must hold it before it is acknowledged (the reference's route policy).
//!
//! Both config forms are accepted: `sinks` + `routing` at the top level, and the compact form
//! inside `sink` (`{"type": "fanout", "sinks": {…}, "routes": […], "route_match_mode": …,
//! "no_match": …, "default_targets": …, "target_sink_types": …}`), which
//! [`normalize_compact_fanout`] rewrites to the top-level form before anything else reads it.
//! Values match exactly (no regular expressions); subjects with NATS wildcards.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::Issues;
use sinks_contract::envelope::Envelope;
use sinks_toolkit::metadata::Labels;
use sinks_toolkit::subject;

/// At most this many named sinks.
pub const MAX_NAMED_SINKS: usize = 64;
/// At most this many routes.
pub const MAX_ROUTES: usize = 128;
/// At most this many targets per route.
pub const MAX_TARGETS: usize = 64;
/// At most this many values per match list.
pub const MAX_MATCH_VALUES: usize = 64;
/// At most this many header matches per route.
pub const MAX_HEADERS: usize = 16;
/// Largest `minimum_wait_ms` of an optional target.
pub const MAX_MINIMUM_WAIT_MS: u64 = 60_000;
/// Largest `timeout_ms` of an optional target.
pub const MAX_TIMEOUT_MS: u64 = 300_000;

/// Headers a route may not match on: secrets and protocol headers.
pub const FORBIDDEN_HEADERS: [&str; 15] = [
    "authorization",
    "cookie",
    "proxy-authorization",
    "x-api-key",
    "x-auth-token",
    "connection",
    "content-length",
    "host",
    "sec-websocket-accept",
    "sec-websocket-extensions",
    "sec-websocket-key",
    "sec-websocket-protocol",
    "sec-websocket-version",
    "transfer-encoding",
    "upgrade",
];

/// The queue-and-wait defaults of an optional target of one sink kind: how long the write
/// waits for the target, and the cap from the start of the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalWait {
    /// Default `minimum_wait_ms`.
    pub minimum_wait_ms: u64,
    /// Default `timeout_ms`.
    pub timeout_ms: u64,
}

/// What the routing checks know about sink kinds, which the runtime does not name: the
/// binary's registry, the one place that knows every kind, supplies it (the reference's
/// table: each kind an optional target can have, with its [`OptionalWait`]).
///
/// With kinds, [`RoutingConfig::complete`] fills an optional target's unset waits from its
/// sink type, and [`RoutingConfig::validate_at`] refuses a `target_sink_types` entry naming
/// any other kind. [`KindDefaults::default`] knows no kind (a library or a test loading a
/// config without the registry): waits are then filled from nowhere and `target_sink_types`
/// is checked against the named sinks only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindDefaults {
    optional_waits: BTreeMap<String, OptionalWait>,
}

impl KindDefaults {
    /// The defaults of optional targets of sink type `kind` (compared trimmed and
    /// lowercase, as config values are), `None` for a kind this does not know.
    pub fn optional_wait(&self, kind: &str) -> Option<OptionalWait> {
        self.optional_waits.get(&kind.trim().to_lowercase()).copied()
    }

    /// The kinds known, sorted.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.optional_waits.keys().map(String::as_str)
    }
}

impl<K: Into<String>> FromIterator<(K, OptionalWait)> for KindDefaults {
    fn from_iter<I: IntoIterator<Item = (K, OptionalWait)>>(iter: I) -> Self {
        Self { optional_waits: iter.into_iter().map(|(kind, wait)| (kind.into(), wait)).collect() }
    }
}

/// `routing` config section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingConfig {
    /// Route messages (default false). Needs at least one route; acted on only when the
    /// active sink is `fanout`.
    pub enabled: bool,
    /// `first` (default): the first matching route's targets; `all`: the targets of every
    /// matching route, de-duplicated in route order.
    pub mode: RouteMode,
    /// What happens to a message no route matches: `reject` (default: dead-lettered),
    /// `ignore` (acknowledged unwritten, counted) or `default_route` (`default_targets`).
    pub no_match: NoMatch,
    /// Sink type of each target, for the optional-target wait defaults. Filled in from
    /// `sinks`; an entry must agree with the named sink's `type`.
    pub target_sink_types: BTreeMap<String, String>,
    /// Targets of messages no route matches, with `no_match: default_route` only.
    #[serde(deserialize_with = "targets")]
    pub default_targets: Vec<RouteTarget>,
    /// Routes, in order.
    pub routes: Vec<Route>,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            mode: RouteMode::First,
            no_match: NoMatch::Reject,
            target_sink_types: BTreeMap::new(),
            default_targets: Vec::new(),
            routes: Vec::new(),
        }
    }
}

/// Which matching routes count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteMode {
    /// The first matching route.
    First,
    /// Every matching route.
    All,
}

/// What happens to a message no route matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoMatch {
    /// Dead-letter it (reason `no_route_matched`).
    Reject,
    /// Acknowledge it without writing it anywhere (counted).
    Ignore,
    /// Send it to `default_targets`.
    DefaultRoute,
}

/// One route.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Unique route name (`^[A-Za-z][A-Za-z0-9_.:-]{0,127}$`).
    pub name: String,
    /// What a message must look like; at least one criterion.
    #[serde(rename = "match")]
    pub matcher: RouteMatch,
    /// Where matching messages go: a name, a target object, or a list of them.
    #[serde(deserialize_with = "targets")]
    pub targets: Vec<RouteTarget>,
}

/// Match criteria; all given criteria must hold.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouteMatch {
    /// Subject pattern (NATS wildcards).
    pub subject: Option<String>,
    /// The message's priority is one of these (exact, case-sensitive).
    #[serde(deserialize_with = "strings")]
    pub priority: Vec<String>,
    /// The message's classification is one of these (exact, case-sensitive).
    #[serde(deserialize_with = "strings")]
    pub classification: Vec<String>,
    /// The message carries every one of these labels.
    pub labels_all: Labels,
    /// The message carries at least one of these labels.
    pub labels_any: Labels,
    /// The message carries none of these labels.
    pub labels_none: Labels,
    /// Header values (name case-insensitive, value exact).
    pub headers: Vec<HeaderMatch>,
}

/// A header criterion: the header is present with one of `values`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderMatch {
    /// Header name (an HTTP token; secret and protocol headers are refused).
    pub name: String,
    /// Accepted values (exact).
    #[serde(deserialize_with = "strings")]
    pub values: Vec<String>,
}

/// One target of a route: a named sink and whether the acknowledgement waits for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteTarget {
    /// Named sink.
    pub sink: String,
    /// The message is acknowledged only once this target holds it (default true).
    #[serde(default = "yes")]
    pub required: bool,
    /// Optional targets only: how long the acknowledgement waits for this target (default
    /// by sink type, see [`KindDefaults`]).
    #[serde(default)]
    pub minimum_wait_ms: Option<u64>,
    /// Optional targets only: the longest the wait may last from the start of the write.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

fn yes() -> bool {
    true
}

/// Targets given as a name, a target object, or a list of either.
fn targets<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<RouteTarget>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum One {
        Name(String),
        Target(RouteTarget),
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Many {
        One(One),
        List(Vec<One>),
    }
    let to_target = |one: One| match one {
        One::Name(sink) => RouteTarget { sink, required: true, minimum_wait_ms: None, timeout_ms: None },
        One::Target(t) => t,
    };
    Ok(match Option::<Many>::deserialize(d)? {
        None => Vec::new(),
        Some(Many::One(one)) => vec![to_target(one)],
        Some(Many::List(list)) => list.into_iter().map(to_target).collect(),
    })
}

/// A string or a list of strings.
fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum S {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<S>::deserialize(d)? {
        None => Vec::new(),
        Some(S::One(s)) => vec![s],
        Some(S::Many(v)) => v,
    })
}

/// True for a valid route, target or named-sink name.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

/// Rewrites the compact fan-out form (`sink.sinks`, `sink.routes`, …) into top-level
/// `sinks` and `routing`, naming the field when both forms are given.
pub fn normalize_compact_fanout(config: &mut Value) -> Result<(), super::ConfigError> {
    let Some(root) = config.as_object_mut() else { return Ok(()) };
    let is_fanout = root
        .get("sink")
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("fanout"));
    if !is_fanout {
        return Ok(());
    }
    let Some(Value::Object(sink)) = root.get_mut("sink") else { return Ok(()) };
    let inline_sinks = sink.remove("sinks");
    let fields = [
        ("routes", "routes"),
        ("route_match_mode", "mode"),
        ("no_match", "no_match"),
        ("default_targets", "default_targets"),
        ("target_sink_types", "target_sink_types"),
    ];
    let mut inline_routing = serde_json::Map::new();
    for (from, to) in fields {
        if let Some(v) = sink.remove(from) {
            inline_routing.insert(to.to_owned(), v);
        }
    }
    if let Some(sinks) = inline_sinks {
        if root.contains_key("sinks") {
            return Err(super::ConfigError::single(
                "sink.sinks",
                "give the named sinks either in sink.sinks or in top-level sinks, not both",
            ));
        }
        root.insert("sinks".into(), sinks);
    }
    if !inline_routing.is_empty() {
        if root.contains_key("routing") {
            return Err(super::ConfigError::single(
                "sink.routes",
                "give the routes either inside sink (compact fan-out form) or in top-level routing, not both",
            ));
        }
        inline_routing.insert("enabled".into(), Value::Bool(true));
        root.insert("routing".into(), Value::Object(inline_routing));
    }
    Ok(())
}

impl RoutingConfig {
    /// Fills `target_sink_types` from the named sinks' types (reference behaviour) and the
    /// optional targets' unset waits from those types' defaults in `kinds`. Run before
    /// [`RoutingConfig::validate_at`].
    pub fn complete(&mut self, sinks: &BTreeMap<String, String>, kinds: &KindDefaults) {
        for name in self.target_names() {
            if let Some(kind) = sinks.get(&name) {
                self.target_sink_types.entry(name).or_insert_with(|| kind.clone());
            }
        }
        let types = self.target_sink_types.clone();
        for target in self.routes.iter_mut().flat_map(|r| r.targets.iter_mut()).chain(self.default_targets.iter_mut()) {
            if target.required {
                continue;
            }
            if let Some(defaults) = types.get(&target.sink).and_then(|t| kinds.optional_wait(t)) {
                target.minimum_wait_ms.get_or_insert(defaults.minimum_wait_ms);
                target.timeout_ms.get_or_insert(defaults.timeout_ms);
            }
        }
    }

    /// Every target name, de-duplicated in first-seen order (default targets first).
    pub fn target_names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in self.default_targets.iter().chain(self.routes.iter().flat_map(|r| r.targets.iter())) {
            if !out.contains(&t.sink) {
                out.push(t.sink.clone());
            }
        }
        out
    }

    /// Checks the section against the named sinks (`name → type`), the active sink type and
    /// the sink kinds (`kinds`, see [`KindDefaults`]).
    pub fn validate_at(
        &self,
        sinks: &BTreeMap<String, String>,
        active: Option<&str>,
        kinds: &KindDefaults,
        issues: &mut Issues,
    ) {
        let p = "routing";
        if sinks.len() > MAX_NAMED_SINKS {
            issues.push("sinks", format!("at most {MAX_NAMED_SINKS} named sinks (got {})", sinks.len()));
        }
        for (name, kind) in sinks {
            if !valid_name(name) {
                issues.push(&format!("sinks.{name}"), "a sink name starts with a letter and holds only letters, digits, `_`, `.`, `:` or `-` (at most 128)");
            }
            if kind.eq_ignore_ascii_case("fanout") {
                issues.push(&format!("sinks.{name}.type"), "fanout can only be the active sink");
            }
        }
        if self.enabled && self.routes.is_empty() {
            issues.push(&format!("{p}.routes"), "at least one route is required when routing is enabled");
        }
        if self.routes.len() > MAX_ROUTES {
            issues.push(&format!("{p}.routes"), format!("at most {MAX_ROUTES} routes"));
        }
        match (self.no_match, self.default_targets.is_empty()) {
            (NoMatch::DefaultRoute, true) => {
                issues.push(&format!("{p}.default_targets"), "required with no_match: default_route")
            }
            (NoMatch::Reject | NoMatch::Ignore, false) => {
                issues.push(&format!("{p}.default_targets"), "only valid with no_match: default_route");
            }
            _ => {}
        }
        let mut names = BTreeSet::new();
        for (i, route) in self.routes.iter().enumerate() {
            let at = format!("{p}.routes[{i}]");
            if !valid_name(&route.name) {
                issues.push(
                    &format!("{at}.name"),
                    "a route name starts with a letter and holds only letters, digits, `_`, `.`, `:` or `-`",
                );
            } else if !names.insert(route.name.as_str()) {
                issues.push(&format!("{at}.name"), format!("duplicate route name `{}`", route.name));
            }
            route.matcher.validate_at(&format!("{at}.match"), issues);
            validate_targets(&format!("{at}.targets"), &route.targets, &self.target_sink_types, sinks, issues);
        }
        if !self.default_targets.is_empty() {
            validate_targets(
                &format!("{p}.default_targets"),
                &self.default_targets,
                &self.target_sink_types,
                sinks,
                issues,
            );
        }
        if kinds.kinds().next().is_some() {
            for (name, kind) in &self.target_sink_types {
                if kinds.optional_wait(kind).is_none() {
                    let allowed: Vec<&str> = kinds.kinds().collect();
                    issues.push(
                        &format!("{p}.target_sink_types.{name}"),
                        format!("must be one of {}", allowed.join(", ")),
                    );
                }
            }
        }
        if !sinks.is_empty() {
            for (name, kind) in &self.target_sink_types {
                match sinks.get(name) {
                    None => issues.push(&format!("{p}.target_sink_types.{name}"), "not a named sink"),
                    Some(actual) if !actual.eq_ignore_ascii_case(kind.trim()) => issues.push(
                        &format!("{p}.target_sink_types.{name}"),
                        format!("says `{kind}` but sinks.{name}.type is `{actual}`"),
                    ),
                    Some(_) => {}
                }
            }
        }
        if active.is_some_and(|a| a.eq_ignore_ascii_case("fanout")) {
            if sinks.is_empty() {
                issues.push("sinks", "sink.type fanout needs named sinks (top-level sinks or sink.sinks)");
            }
            if !self.enabled {
                issues.push(
                    &format!("{p}.enabled"),
                    "sink.type fanout needs routing enabled (or the compact form's routes)",
                );
            }
        }
    }

    /// The targets of one message, with the no-match action when no route matched.
    pub fn select(&self, envelope: &Envelope) -> Selection {
        let mut targets: Vec<RouteTarget> = Vec::new();
        let mut matched = Vec::new();
        for route in &self.routes {
            if !route.matcher.matches(envelope) {
                continue;
            }
            matched.push(route.name.as_str());
            for t in &route.targets {
                if !targets.iter().any(|x| x.sink == t.sink) {
                    targets.push(t.clone());
                }
            }
            if self.mode == RouteMode::First {
                break;
            }
        }
        if !matched.is_empty() {
            return Selection::Targets(targets);
        }
        match self.no_match {
            NoMatch::DefaultRoute => Selection::Targets(self.default_targets.clone()),
            NoMatch::Ignore => Selection::Ignore,
            NoMatch::Reject => Selection::Reject,
        }
    }

    /// The route table for `nats-sink validate`, with warnings (unreachable routes, routing
    /// that the active sink will not apply).
    pub fn describe(&self, active: Option<&str>) -> (Vec<String>, Vec<String>) {
        let mut lines = Vec::new();
        let mut warnings = Vec::new();
        if !self.enabled {
            return (lines, warnings);
        }
        if !active.is_some_and(|a| a.eq_ignore_ascii_case("fanout")) {
            warnings.push(format!(
                "routing is enabled but the active sink is `{}`, not `fanout`: routes are checked but not applied (every \
                 message goes to the active sink)",
                active.unwrap_or("?")
            ));
        }
        lines.push(format!(
            "routing: mode {}, no match -> {}",
            match self.mode {
                RouteMode::First => "first (the first matching route)",
                RouteMode::All => "all (every matching route)",
            },
            match self.no_match {
                NoMatch::Reject => "dead-lettered (no_route_matched)".to_owned(),
                NoMatch::Ignore => "acknowledged unwritten (counted)".to_owned(),
                NoMatch::DefaultRoute => format!("default targets {}", describe_targets(&self.default_targets)),
            }
        ));
        for (i, route) in self.routes.iter().enumerate() {
            lines.push(format!(
                "  route {} `{}`: {} -> {}",
                i + 1,
                route.name,
                route.matcher.describe(),
                describe_targets(&route.targets)
            ));
            if self.mode == RouteMode::First
                && let Some(earlier) = self.routes[..i].iter().find(|e| e.matcher.covers(&route.matcher))
            {
                warnings.push(format!(
                    "route `{}` is unreachable: every message it matches is taken first by route `{}` (mode first)",
                    route.name, earlier.name
                ));
            }
        }
        (lines, warnings)
    }
}

fn describe_targets(targets: &[RouteTarget]) -> String {
    let parts: Vec<String> = targets
        .iter()
        .map(|t| {
            if t.required {
                format!("{} (required)", t.sink)
            } else {
                format!(
                    "{} (optional, waits {} ms, at most {} ms)",
                    t.sink,
                    t.minimum_wait_ms.unwrap_or(0),
                    t.timeout_ms.unwrap_or(0)
                )
            }
        })
        .collect();
    parts.join(", ")
}

fn validate_targets(
    at: &str,
    targets: &[RouteTarget],
    types: &BTreeMap<String, String>,
    sinks: &BTreeMap<String, String>,
    issues: &mut Issues,
) {
    if targets.is_empty() {
        issues.push(at, "at least one target is required");
    }
    if targets.len() > MAX_TARGETS {
        issues.push(at, format!("at most {MAX_TARGETS} targets"));
    }
    let mut seen = BTreeSet::new();
    for (j, t) in targets.iter().enumerate() {
        let tp = format!("{at}[{j}]");
        if !valid_name(&t.sink) {
            issues.push(
                &format!("{tp}.sink"),
                "a target names a sink: a letter, then letters, digits, `_`, `.`, `:` or `-`",
            );
        }
        if !seen.insert(t.sink.as_str()) {
            issues.push(&format!("{tp}.sink"), format!("target `{}` appears twice", t.sink));
        } else if !sinks.is_empty() && !sinks.contains_key(&t.sink) {
            let known: Vec<&str> = sinks.keys().map(String::as_str).collect();
            issues
                .push(&format!("{tp}.sink"), format!("`{}` is not a named sink (sinks: {})", t.sink, known.join(", ")));
        }
        if t.required {
            if t.minimum_wait_ms.is_some() || t.timeout_ms.is_some() {
                issues.push(
                    &format!("{tp}.required"),
                    "minimum_wait_ms and timeout_ms are only valid on optional targets (required: false)",
                );
            }
            continue;
        }
        match (t.minimum_wait_ms, t.timeout_ms) {
            (Some(wait), Some(timeout)) => {
                issues.range(&format!("{tp}.minimum_wait_ms"), wait, 0, MAX_MINIMUM_WAIT_MS);
                issues.range(&format!("{tp}.timeout_ms"), timeout, 0, MAX_TIMEOUT_MS);
                if timeout < wait {
                    issues.push(&format!("{tp}.timeout_ms"), "must be at least minimum_wait_ms");
                }
            }
            _ if !types.contains_key(&t.sink) => issues.push(
                &format!("{tp}.minimum_wait_ms"),
                format!(
                    "optional target `{}` needs minimum_wait_ms and timeout_ms, or a sink type to take them from",
                    t.sink
                ),
            ),
            _ => {}
        }
    }
}

impl RouteMatch {
    fn validate_at(&self, at: &str, issues: &mut Issues) {
        let labels = |l: &Labels| l.normalized();
        let (all, any, none) = (labels(&self.labels_all), labels(&self.labels_any), labels(&self.labels_none));
        let has_criterion = self.subject.is_some()
            || !self.priority.is_empty()
            || !self.classification.is_empty()
            || !all.is_empty()
            || !any.is_empty()
            || !none.is_empty()
            || !self.headers.is_empty();
        if !has_criterion {
            issues.push(at, "a route match needs at least one criterion");
        }
        if let Some(s) = &self.subject
            && let Err(e) = subject::validate_pattern(s)
        {
            issues.push(&format!("{at}.subject"), e.to_string());
        }
        for (field, values) in [("priority", &self.priority), ("classification", &self.classification)] {
            if values.len() > MAX_MATCH_VALUES {
                issues.push(&format!("{at}.{field}"), format!("at most {MAX_MATCH_VALUES} values"));
            }
            for v in values.iter() {
                if v.trim().is_empty() {
                    issues.push(&format!("{at}.{field}"), "values must not be empty");
                } else if v.chars().any(char::is_control) {
                    issues.push(&format!("{at}.{field}"), "values must not contain control characters");
                } else if v.chars().count() > 512 {
                    issues.push(&format!("{at}.{field}"), "values must be at most 512 characters");
                }
            }
        }
        for (field, l, list) in [
            ("labels_all", &self.labels_all, &all),
            ("labels_any", &self.labels_any, &any),
            ("labels_none", &self.labels_none, &none),
        ] {
            if let Some(item) = l.item_with_separator() {
                issues.push(&format!("{at}.{field}"), format!("array item `{item}` contains `;`"));
            }
            if list.len() > MAX_MATCH_VALUES {
                issues.push(&format!("{at}.{field}"), format!("at most {MAX_MATCH_VALUES} values"));
            }
            if list.iter().any(|v| v.chars().count() > 128) {
                issues.push(&format!("{at}.{field}"), "labels must be at most 128 characters");
            }
        }
        if all.iter().any(|l| none.contains(l)) {
            issues.push(&format!("{at}.labels_none"), "labels_all and labels_none must not overlap");
        }
        if !any.is_empty() && any.iter().all(|l| none.contains(l)) {
            issues.push(&format!("{at}.labels_any"), "labels_any cannot be entirely blocked by labels_none");
        }
        if self.headers.len() > MAX_HEADERS {
            issues.push(&format!("{at}.headers"), format!("at most {MAX_HEADERS} headers"));
        }
        let mut seen = BTreeSet::new();
        for (k, h) in self.headers.iter().enumerate() {
            let hp = format!("{at}.headers[{k}].name");
            let token = !h.name.is_empty()
                && h.name.len() <= 128
                && h.name.chars().all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+.^_`|~-".contains(c));
            if !token {
                issues.push(&hp, "must be an HTTP token name");
            } else if FORBIDDEN_HEADERS.contains(&h.name.to_ascii_lowercase().as_str()) {
                issues.push(&hp, format!("routes must not match on `{}` (a secret-bearing or protocol header); publish a non-secret routing hint instead", h.name));
            }
            if !seen.insert(h.name.to_ascii_lowercase()) {
                issues.push(&hp, "duplicate header name");
            }
            if h.values.is_empty() {
                issues.push(&format!("{at}.headers[{k}].values"), "at least one value is required");
            }
        }
    }

    /// True when `envelope` satisfies every criterion.
    pub fn matches(&self, envelope: &Envelope) -> bool {
        let app = envelope.app();
        let one_of =
            |set: &[String], value: &Option<String>| set.is_empty() || value.as_ref().is_some_and(|v| set.contains(v));
        if self.subject.as_deref().is_some_and(|s| !subject::matches(s, envelope.subject())) {
            return false;
        }
        if !one_of(&self.priority, &app.priority) || !one_of(&self.classification, &app.classification) {
            return false;
        }
        let has = |l: &String| app.labels.contains(l);
        let (all, any, none) =
            (self.labels_all.normalized(), self.labels_any.normalized(), self.labels_none.normalized());
        if !all.iter().all(has) || (!any.is_empty() && !any.iter().any(has)) || none.iter().any(has) {
            return false;
        }
        self.headers.iter().all(|h| envelope.headers().get(&h.name).is_some_and(|v| h.values.iter().any(|x| x == v)))
    }

    /// True when every message `later` matches is also matched by `self`.
    fn covers(&self, later: &Self) -> bool {
        let subject_ok = match (&self.subject, &later.subject) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => subject::contains(a, b),
        };
        let set_ok = |mine: &[String], theirs: &[String]| {
            mine.is_empty() || (!theirs.is_empty() && theirs.iter().all(|v| mine.contains(v)))
        };
        let (all, any, none) =
            (self.labels_all.normalized(), self.labels_any.normalized(), self.labels_none.normalized());
        let (l_all, l_none) = (later.labels_all.normalized(), later.labels_none.normalized());
        subject_ok
            && set_ok(&self.priority, &later.priority)
            && set_ok(&self.classification, &later.classification)
            && all.iter().all(|l| l_all.contains(l))
            && (any.is_empty() || any.iter().any(|l| l_all.contains(l)))
            && none.iter().all(|l| l_none.contains(l))
            && self.headers.iter().all(|h| {
                later
                    .headers
                    .iter()
                    .any(|x| x.name.eq_ignore_ascii_case(&h.name) && x.values.iter().all(|v| h.values.contains(v)))
            })
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = &self.subject {
            parts.push(format!("subject {s}"));
        }
        if !self.priority.is_empty() {
            parts.push(format!("priority in [{}]", self.priority.join(", ")));
        }
        if !self.classification.is_empty() {
            parts.push(format!("classification in [{}]", self.classification.join(", ")));
        }
        for (what, l) in [("all of", &self.labels_all), ("any of", &self.labels_any), ("none of", &self.labels_none)] {
            let l = l.normalized();
            if !l.is_empty() {
                parts.push(format!("labels {what} [{}]", l.join(", ")));
            }
        }
        for h in &self.headers {
            parts.push(format!("header {} in [{}]", h.name, h.values.join(", ")));
        }
        parts.join(" and ")
    }
}

/// Where one message goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// These targets (never empty for a matched route).
    Targets(Vec<RouteTarget>),
    /// Nowhere: acknowledge it unwritten.
    Ignore,
    /// Nowhere: dead-letter it.
    Reject,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use sinks_contract::envelope::{AppMetadata, Headers};
    use sinks_contract::testing::envelope_with;

    fn routing(v: Value) -> RoutingConfig {
        serde_json::from_value(v).unwrap()
    }

    /// Kinds as the binary's registry supplies them (a part of the reference's table).
    fn kinds() -> KindDefaults {
        let wait = |minimum_wait_ms, timeout_ms| OptionalWait { minimum_wait_ms, timeout_ms };
        [("file", wait(100, 1000)), ("http", wait(1000, 5000)), ("mysql", wait(1000, 5000))].into_iter().collect()
    }

    fn msg(
        subject: &str,
        priority: Option<&str>,
        classification: Option<&str>,
        labels: &[&str],
        headers: Headers,
    ) -> Envelope {
        envelope_with("S", 1, subject, &b"{}"[..], headers, 1).with_app_metadata(AppMetadata {
            priority: priority.map(str::to_owned),
            classification: classification.map(str::to_owned),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        })
    }

    fn names(s: &Selection) -> Vec<(String, bool)> {
        match s {
            Selection::Targets(t) => t.iter().map(|t| (t.sink.clone(), t.required)).collect(),
            Selection::Ignore => vec![("<ignore>".into(), false)],
            Selection::Reject => vec![("<reject>".into(), false)],
        }
    }

    #[test]
    fn selection_table() {
        let mut r = routing(json!({
            "enabled": true, "mode": "first", "no_match": "reject",
            "routes": [
                {"name": "secret", "match": {"subject": "m.>", "classification": ["NATO SECRET"], "labels_all": "sensor;audit"},
                 "targets": ["db", {"sink": "audit", "required": false, "minimum_wait_ms": 10, "timeout_ms": 20}]},
                {"name": "hint", "match": {"headers": [{"name": "X-Route", "values": "web"}], "labels_none": ["private"]},
                 "targets": "hook"},
                {"name": "all", "match": {"subject": "m.>"}, "targets": ["db", "hook"]}
            ]
        }));
        let secret = msg("m.a", None, Some("NATO SECRET"), &["audit", "sensor"], Headers::new());
        let web = msg("x", None, None, &[], Headers::new().with("x-route", "web"));
        let private_web = msg("x", None, None, &["private"], Headers::new().with("X-Route", "web"));
        let plain = msg("m.b", None, Some("NATO secret"), &["sensor", "audit"], Headers::new());
        let none = msg("other", None, None, &[], Headers::new());
        let table: Vec<(&Envelope, Vec<(&str, bool)>)> = vec![
            (&secret, vec![("db", true), ("audit", false)]),
            (&web, vec![("hook", true)]),
            (&private_web, vec![("<reject>", false)]),
            (&plain, vec![("db", true), ("hook", true)]),
            (&none, vec![("<reject>", false)]),
        ];
        for (e, want) in &table {
            let want: Vec<(String, bool)> = want.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect();
            assert_eq!(names(&r.select(e)), want, "{}", e.subject());
        }
        r.mode = RouteMode::All;
        assert_eq!(names(&r.select(&secret)), [("db".into(), true), ("audit".into(), false), ("hook".into(), true)]);
        r.no_match = NoMatch::Ignore;
        assert_eq!(names(&r.select(&none)), [("<ignore>".into(), false)]);
    }

    #[test]
    fn compact_form_moves_to_the_top_and_types_fill_defaults() {
        let mut v = json!({"sink": {"type": "fanout", "route_match_mode": "all",
            "sinks": {"f": {"type": "file", "directory": "/x"}, "h": {"type": "http", "url": "http://127.0.0.1/"}},
            "routes": [{"name": "r", "match": {"subject": ">"}, "targets": ["f", {"sink": "h", "required": false}]}]}});
        normalize_compact_fanout(&mut v).unwrap();
        assert_eq!(v["sink"], json!({"type": "fanout"}));
        assert_eq!(v["routing"]["mode"], "all");
        assert_eq!(v["routing"]["enabled"], true);
        let mut r: RoutingConfig = serde_json::from_value(v["routing"].clone()).unwrap();
        let sinks: BTreeMap<String, String> = [("f".into(), "file".into()), ("h".into(), "http".into())].into();
        r.complete(&sinks, &kinds());
        assert_eq!(r.routes[0].targets[1].minimum_wait_ms, Some(1000));
        assert_eq!(r.routes[0].targets[1].timeout_ms, Some(5000));
        let mut issues = Issues::default();
        r.validate_at(&sinks, Some("fanout"), &kinds(), &mut issues);
        assert!(issues.finish().is_ok());
        let mut both = json!({"sink": {"type": "fanout", "sinks": {}}, "sinks": {}});
        assert_eq!(normalize_compact_fanout(&mut both).unwrap_err().issues[0].path, "sink.sinks");
    }

    #[test]
    fn validation_names_every_field() {
        let r = routing(json!({
            "enabled": true, "no_match": "ignore", "default_targets": ["a"],
            "target_sink_types": {"a": "mysql", "zz": "ftp"},
            "routes": [
                {"name": "1bad", "match": {}, "targets": []},
                {"name": "ok", "match": {"labels_all": ["x"], "labels_none": ["x"], "headers": [{"name": "Authorization", "values": ["t"]}]},
                 "targets": ["a", "a", {"sink": "b", "required": true, "timeout_ms": 5}, {"sink": "c", "required": false}]}
            ]
        }));
        let sinks: BTreeMap<String, String> = [("a".into(), "file".into()), ("b".into(), "fanout".into())].into();
        let mut issues = Issues::default();
        r.validate_at(&sinks, Some("fanout"), &kinds(), &mut issues);
        let paths: Vec<String> = issues.finish().unwrap_err().issues.into_iter().map(|i| i.path).collect();
        for want in [
            "sinks.b.type",
            "routing.default_targets",
            "routing.routes[0].name",
            "routing.routes[0].match",
            "routing.routes[0].targets",
            "routing.routes[1].match.labels_none",
            "routing.routes[1].match.headers[0].name",
            "routing.routes[1].targets[1].sink",
            "routing.routes[1].targets[2].required",
            "routing.routes[1].targets[3].minimum_wait_ms",
            "routing.routes[1].targets[3].sink",
            "routing.target_sink_types.zz",
        ] {
            assert!(paths.iter().any(|p| p == want), "missing {want} in {paths:?}");
        }
        assert!(paths.iter().any(|p| p == "routing.target_sink_types.a"), "type disagrees with sinks.a: {paths:?}");
    }

    #[test]
    fn unreachable_routes_and_inactive_routing_are_warned_about() {
        let r = routing(json!({"enabled": true, "routes": [
            {"name": "wide", "match": {"subject": "a.>"}, "targets": "x"},
            {"name": "narrow", "match": {"subject": "a.b.*", "priority": ["high"]}, "targets": "y"},
            {"name": "other", "match": {"subject": "b.>"}, "targets": "y"}
        ]}));
        let (lines, warnings) = r.describe(Some("fanout"));
        assert!(
            lines.iter().any(|l| l.contains("route 2 `narrow`: subject a.b.* and priority in [high] -> y (required)")),
            "{lines:?}"
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("`narrow` is unreachable") && warnings[0].contains("`wide`"));
        let (_, warnings) = r.describe(Some("file"));
        assert!(warnings.iter().any(|w| w.contains("not applied")), "{warnings:?}");
    }

    #[test]
    fn waits_and_type_checks_come_from_the_kinds_given() {
        let r = routing(json!({"enabled": true,
            "target_sink_types": {"m": " MySQL ", "x": "ftp"},
            "routes": [{"name": "r", "match": {"subject": ">"}, "targets": [
                {"sink": "f", "required": false},
                {"sink": "m", "required": false, "timeout_ms": 7000},
                {"sink": "x", "required": false},
                "f2"]}]}));
        let sinks: BTreeMap<String, String> =
            [("f".into(), "file".into()), ("m".into(), "mysql".into()), ("x".into(), "ftp".into())].into();
        let waits = |r: &RoutingConfig| -> Vec<(Option<u64>, Option<u64>)> {
            r.routes[0].targets.iter().map(|t| (t.minimum_wait_ms, t.timeout_ms)).collect()
        };
        let paths = |r: &RoutingConfig, kinds: &KindDefaults| -> Vec<(String, String)> {
            let mut issues = Issues::default();
            r.validate_at(&sinks, Some("fanout"), kinds, &mut issues);
            issues
                .finish()
                .err()
                .map(|e| e.issues)
                .unwrap_or_default()
                .into_iter()
                .map(|i| (i.path, i.message))
                .collect()
        };
        let mut with = r.clone();
        with.complete(&sinks, &kinds());
        assert_eq!(with.target_sink_types["f"], "file", "filled in from sinks");
        assert_eq!(with.target_sink_types["m"], " MySQL ", "an entry given is kept");
        assert_eq!(waits(&with), [(Some(100), Some(1000)), (Some(1000), Some(7000)), (None, None), (None, None)]);
        let issues = paths(&with, &kinds());
        assert!(
            issues.contains(&("routing.target_sink_types.x".into(), "must be one of file, http, mysql".into())),
            "{issues:?}"
        );
        assert!(!issues.iter().any(|(p, _)| p == "routing.target_sink_types.m"), "{issues:?}");
        // Knowing no kind: nothing filled, no entry refused for its kind.
        let mut without = r;
        without.complete(&sinks, &KindDefaults::default());
        assert_eq!(waits(&without), [(None, None), (None, Some(7000)), (None, None), (None, None)]);
        assert!(
            !paths(&without, &KindDefaults::default()).iter().any(|(p, _)| p.starts_with("routing.target_sink_types"))
        );
        assert_eq!(kinds().optional_wait("\tHTTP "), Some(OptionalWait { minimum_wait_ms: 1000, timeout_ms: 5000 }));
        assert_eq!(KindDefaults::default().optional_wait("file"), None);
    }

    /// Route shadowing asks `sinks_toolkit::subject::contains`, which replaced a copy of it
    /// here (`pattern_covers`, the same answer for every pattern of up to four tokens).
    #[test]
    fn subject_cover_table() {
        let m = |s: &str| RouteMatch { subject: Some(s.to_owned()), ..RouteMatch::default() };
        for (a, b, want) in [
            (">", "a", true),
            (">", "a.b.>", true),
            (">", ">", true),
            ("a.>", "a.b", true),
            ("a.>", "a.*", true),
            ("a.>", "a", false),
            ("a.b.>", "a.>", false),
            ("a.*", "a.b", true),
            ("a.*", "a.*", true),
            ("a.*", "a.>", false),
            ("a.*", "a.b.c", false),
            ("*", ">", false),
            ("a.b", "a.*", false),
            ("a.*.c", "a.x.c", true),
            ("a.b", "a.b", true),
        ] {
            assert_eq!(m(a).covers(&m(b)), want, "{a} covers {b}");
        }
        assert!(RouteMatch::default().covers(&m("a")) && !m("a").covers(&RouteMatch::default()));
    }
}
