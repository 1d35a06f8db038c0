//! Priority lanes: the order in which one fetched batch is handed to the sink (the
//! reference's `delivery.priority_lanes`). Each message's priority (case-folded) picks a
//! lane; lanes are drained by weighted round-robin in config order, so a heavy lane moves
//! faster without starving the others. Nothing crosses batch boundaries and acknowledgement
//! is unchanged.
//!
//! One difference from the reference: messages that share an ordering key
//! (`delivery.ordering_key`, the subject by default) keep their stream order. The lane order
//! decides which *positions* a key's messages get; the key's messages fill those positions in
//! stream order. With `ordering_key: none` the lane order is used as is.
//!
//! Reason codes (per message, only with `unknown_priority_action: reject` or an unusable
//! value): `priority_not_allowed`, `priority_too_long`, `priority_has_control_characters`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Rejection, Step};
use sinks_contract::config::Issues;
use sinks_contract::envelope::Envelope;
use sinks_contract::ordering::OrderKey;

/// `delivery.priority_lanes` config section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PriorityLanesConfig {
    /// Reorder each batch by lane (default false).
    pub enabled: bool,
    /// Lane for messages without a priority, or with an unknown one under `default_lane`.
    pub default_lane: String,
    /// `default_lane` (default) or `reject` (dead-letter messages whose priority no lane
    /// lists).
    pub unknown_priority_action: UnknownPriority,
    /// Longest priority value accepted (1–256, default 64).
    pub max_priority_value_length: u64,
    /// Lanes in drain order (default one lane `default`).
    pub lanes: Vec<Lane>,
}

impl Default for PriorityLanesConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            default_lane: "default".into(),
            unknown_priority_action: UnknownPriority::DefaultLane,
            max_priority_value_length: 64,
            lanes: vec![Lane { name: "default".into(), priorities: Vec::new(), weight: 1 }],
        }
    }
}

/// What happens to a message whose priority no lane lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownPriority {
    /// It goes to the default lane.
    DefaultLane,
    /// It is dead-lettered (`priority_not_allowed`).
    Reject,
}

/// One lane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lane {
    /// Lane name (`^[a-z][a-z0-9_-]{0,63}$`, after trimming and lowercasing).
    pub name: String,
    /// Priority values of this lane (case-folded; each value in at most one lane).
    #[serde(default)]
    pub priorities: Vec<String>,
    /// Messages taken from this lane per round (1–100, default 1).
    #[serde(default = "one")]
    pub weight: u64,
}

fn one() -> u64 {
    1
}

fn lane_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn fold(value: &str) -> String {
    value.trim().to_lowercase()
}

impl PriorityLanesConfig {
    /// Checks the section (`path` is `delivery.priority_lanes`).
    pub fn validate_at(&self, path: &str, issues: &mut Issues) {
        issues.range(&format!("{path}.max_priority_value_length"), self.max_priority_value_length, 1, 256);
        let mut names = std::collections::BTreeSet::new();
        let mut owner: BTreeMap<String, String> = BTreeMap::new();
        for (i, lane) in self.lanes.iter().enumerate() {
            let at = format!("{path}.lanes[{i}]");
            let name = fold(&lane.name);
            if !lane_name_ok(&name) {
                issues.push(
                    &format!("{at}.name"),
                    "must start with a lowercase letter and hold only lowercase letters, digits, `_` or `-` (at most \
                     64)",
                );
            }
            if !names.insert(name.clone()) {
                issues.push(&format!("{at}.name"), format!("duplicate lane name `{name}`"));
            }
            issues.range(&format!("{at}.weight"), lane.weight, 1, 100);
            for (p, priority) in lane.priorities.iter().enumerate() {
                let field = format!("{at}.priorities[{p}]");
                let value = fold(priority);
                if value.is_empty() {
                    issues.push(&field, "must not be empty");
                } else if value.chars().any(char::is_control) {
                    issues.push(&field, "must not contain control characters");
                } else if value.chars().count() as u64 > self.max_priority_value_length {
                    issues.push(
                        &field,
                        format!("must not exceed max_priority_value_length ({})", self.max_priority_value_length),
                    );
                } else if let Some(other) = owner.get(&value).filter(|o| **o != name) {
                    issues.push(&field, format!("priority `{value}` is already in lane `{other}`"));
                } else {
                    owner.insert(value, name.clone());
                }
            }
        }
        if !names.contains(&fold(&self.default_lane)) {
            issues.push(&format!("{path}.default_lane"), format!("`{}` is not one of the lanes", self.default_lane));
        }
    }

    /// What the lanes do, for `nats-sink validate`.
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![format!(
            "priority lanes: each batch written in weighted round-robin lane order (same ordering key keeps stream \
             order); no priority -> `{}`; unknown priority -> {}",
            self.default_lane,
            match self.unknown_priority_action {
                UnknownPriority::DefaultLane => format!("`{}`", self.default_lane),
                UnknownPriority::Reject => "dead-lettered (priority_not_allowed)".to_owned(),
            }
        )];
        for lane in &self.lanes {
            out.push(format!("  lane `{}` weight {}: [{}]", lane.name, lane.weight, lane.priorities.join(", ")));
        }
        out
    }

    /// The index of the default lane.
    pub fn default_index(&self) -> usize {
        let default = fold(&self.default_lane);
        self.lanes.iter().position(|l| fold(&l.name) == default).unwrap_or(0)
    }

    /// The lane (index into `lanes`) of one message.
    pub fn assign(&self, envelope: &Envelope) -> Result<usize, Rejection> {
        let Some(priority) = envelope.app().priority.as_deref().map(str::trim).filter(|p| !p.is_empty()) else {
            return Ok(self.default_index());
        };
        if priority.chars().count() as u64 > self.max_priority_value_length {
            return Err(Rejection::new(
                Step::PriorityLanes,
                "priority_too_long",
                format!("limit {} characters", self.max_priority_value_length),
            ));
        }
        if priority.chars().any(char::is_control) {
            return Err(Rejection::new(Step::PriorityLanes, "priority_has_control_characters", ""));
        }
        let value = fold(priority);
        match self.lanes.iter().position(|l| l.priorities.iter().any(|p| fold(p) == value)) {
            Some(lane) => Ok(lane),
            None if self.unknown_priority_action == UnknownPriority::Reject => {
                Err(Rejection::new(Step::PriorityLanes, "priority_not_allowed", "no lane lists this priority"))
            }
            None => Ok(self.default_index()),
        }
    }

    /// The write order of a batch: `lanes[i]` is message `i`'s lane, `keys[i]` its ordering
    /// key. Returns the message indexes in the order to write them.
    pub fn order(&self, lanes: &[usize], keys: &[Option<OrderKey>]) -> Vec<usize> {
        let mut buckets: Vec<std::collections::VecDeque<usize>> = vec![Default::default(); self.lanes.len().max(1)];
        let last = buckets.len() - 1;
        for (i, &lane) in lanes.iter().enumerate() {
            buckets[lane.min(last)].push_back(i);
        }
        let mut drained = Vec::with_capacity(lanes.len());
        while drained.len() < lanes.len() {
            for (lane, bucket) in self.lanes.iter().zip(buckets.iter_mut()) {
                for _ in 0..lane.weight.max(1) {
                    let Some(i) = bucket.pop_front() else { break };
                    drained.push(i);
                }
            }
        }
        // Messages that share a key keep stream order: the key's messages fill the positions
        // its members were given, in ascending (stream) index.
        let mut by_key: BTreeMap<OrderKey, Vec<usize>> = BTreeMap::new();
        for (i, key) in keys.iter().enumerate() {
            if let Some(k) = key {
                by_key.entry(*k).or_default().push(i);
            }
        }
        let mut next: BTreeMap<OrderKey, usize> = BTreeMap::new();
        drained
            .into_iter()
            .map(|i| match keys[i] {
                Some(k) => {
                    let slot = next.entry(k).or_insert(0);
                    let member = by_key[&k][*slot];
                    *slot += 1;
                    member
                }
                None => i,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use sinks_contract::envelope::{AppMetadata, Headers};
    use sinks_contract::testing::envelope_with;

    fn lanes() -> PriorityLanesConfig {
        serde_json::from_value(json!({
            "enabled": true,
            "default_lane": "routine",
            "lanes": [
                {"name": "flash", "priorities": ["Flash", "immediate"], "weight": 3},
                {"name": "routine", "priorities": ["routine"], "weight": 1}
            ]
        }))
        .unwrap()
    }

    fn with_priority(p: Option<&str>) -> Envelope {
        envelope_with("S", 1, "a", &b"{}"[..], Headers::new(), 1)
            .with_app_metadata(AppMetadata { priority: p.map(str::to_owned), ..AppMetadata::default() })
    }

    #[test]
    fn assignment_table() {
        let mut c = lanes();
        let table: &[(Option<&str>, Result<usize, &str>)] = &[
            (Some("FLASH"), Ok(0)),
            (Some(" immediate "), Ok(0)),
            (Some("routine"), Ok(1)),
            (None, Ok(1)),
            (Some("bulk"), Ok(1)),
        ];
        for (p, want) in table {
            assert_eq!(c.assign(&with_priority(*p)).map_err(|r| r.reason.into_owned()), want.map_err(str::to_owned));
        }
        c.unknown_priority_action = UnknownPriority::Reject;
        assert_eq!(c.assign(&with_priority(Some("bulk"))).unwrap_err().reason, "priority_not_allowed");
        assert_eq!(c.assign(&with_priority(Some(&"x".repeat(65)))).unwrap_err().reason, "priority_too_long");
        assert_eq!(c.assign(&with_priority(None)), Ok(1), "no priority is never rejected");
    }

    #[test]
    fn weighted_round_robin_and_per_key_order() {
        let c = lanes();
        // Lanes of 8 messages: r f r f f f r f (r = routine, f = flash).
        let lane_of = [1, 0, 1, 0, 0, 0, 1, 0];
        let none = [None; 8];
        // Rounds: 3 flash, 1 routine, 3 flash, 1 routine, then the last routine.
        assert_eq!(c.order(&lane_of, &none), [1, 3, 4, 0, 5, 7, 2, 6]);
        // All on one key: stream order is kept whatever the lanes say.
        let same = [Some(OrderKey::subject("a")); 8];
        assert_eq!(c.order(&lane_of, &same), [0, 1, 2, 3, 4, 5, 6, 7]);
        // Two keys: key A = messages 0..4, key B = 4..8. Positions from the lane order
        // [1,3,4,0,5,7,2,6] are A,A,B,A,B,B,A,B; each key fills its positions in stream order.
        let (a, b) = (Some(OrderKey::subject("a")), Some(OrderKey::subject("b")));
        let two = [a, a, a, a, b, b, b, b];
        assert_eq!(c.order(&lane_of, &two), [0, 1, 4, 2, 5, 6, 3, 7]);
    }

    #[test]
    fn config_checks() {
        let c: PriorityLanesConfig = serde_json::from_value(json!({
            "enabled": true, "default_lane": "nope",
            "lanes": [{"name": "A b", "priorities": ["x"], "weight": 0}, {"name": "c", "priorities": ["X"]}]
        }))
        .unwrap();
        let mut issues = Issues::default();
        c.validate_at("delivery.priority_lanes", &mut issues);
        let paths: Vec<String> = issues.finish().unwrap_err().issues.into_iter().map(|i| i.path).collect();
        assert_eq!(
            paths,
            [
                "delivery.priority_lanes.lanes[0].name",
                "delivery.priority_lanes.lanes[0].weight",
                "delivery.priority_lanes.lanes[1].priorities[0]",
                "delivery.priority_lanes.default_lane",
            ]
        );
        let mut issues = Issues::default();
        PriorityLanesConfig::default().validate_at("p", &mut issues);
        assert!(issues.finish().is_ok());
    }
}
