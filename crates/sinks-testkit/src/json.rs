//! JSON helpers for tests that build a config: one object merged into another.

/// `patch` merged into `base`: objects key by key (recursively), anything else replaced.
pub fn merge_json(base: &mut serde_json::Value, patch: serde_json::Value) {
    match (base, patch) {
        (serde_json::Value::Object(base), serde_json::Value::Object(patch)) => {
            for (key, value) in patch {
                merge_json(base.entry(key).or_insert(serde_json::Value::Null), value);
            }
        }
        (base, patch) => *base = patch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_merge_key_by_key_and_the_rest_is_replaced() {
        let mut base = json!({"delivery": {"batch_size": 500, "max_in_flight_batches": 4}, "sink": {"type": "file"}});
        merge_json(
            &mut base,
            json!({"delivery": {"ordering_key": "none", "batch_size": 50}, "sink": "x", "metrics": {"enabled": true}}),
        );
        assert_eq!(
            base,
            json!({"delivery": {"batch_size": 50, "max_in_flight_batches": 4, "ordering_key": "none"}, "sink": "x",
                   "metrics": {"enabled": true}})
        );
        let mut scalar = json!(1);
        merge_json(&mut scalar, json!({"a": 1}));
        assert_eq!(scalar, json!({"a": 1}), "an object replaces a scalar");
    }
}
