//! What the printing commands write: text that a closed pipe ends quietly (`nats-sink
//! completions bash | head -1`), and the effective configuration in the input's format.

use std::io::Write as _;
use std::process::ExitCode;

use serde::de::{IgnoredAny, MapAccess, Visitor};

/// Writes `text` to standard output. A reader that went away (a closed pipe) ends the command
/// quietly with success, as `head` expects; any other write error is reported (exit 1).
pub(crate) fn emit(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            crate::exit::report(&format!("cannot write to standard output: {e}"));
            ExitCode::from(1)
        }
    }
}

/// The formats `show-effective-config` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ConfigFormat {
    /// JSON (the reference's layout).
    Json,
    /// TOML.
    Toml,
    /// YAML.
    Yaml,
}

impl ConfigFormat {
    /// The format of a config file, by its extension (JSON when unknown).
    pub(crate) fn of(path: &std::path::Path) -> Self {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("toml") => Self::Toml,
            Some("yaml" | "yml") => Self::Yaml,
            _ => Self::Json,
        }
    }
}

/// The top-level keys of a JSON object's text, in the order they are written.
fn key_order(text: &str) -> Vec<String> {
    struct Keys;
    impl<'de> Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut keys = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<IgnoredAny>()?;
                keys.push(key);
            }
            Ok(keys)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    serde::Deserializer::deserialize_map(&mut de, Keys).unwrap_or_default()
}

/// The order of the config's sections: as `Config` declares them, which is the order of the
/// docs (`nats`, `consumer_management`, …, `sink` last).
pub(crate) fn section_order(config: &sinks_runtime::Config) -> Vec<String> {
    key_order(&serde_json::to_string(config).unwrap_or_default())
}

/// `value` as TOML: every number as the integer or float it is (never serde_json's private
/// form of a number, which a `serde_json` with `arbitrary_precision` hands to any other
/// serializer), without its `null`s (TOML has none: an absent key is the default). `at` names
/// the value in an error.
fn toml_value(value: &serde_json::Value, at: &str) -> Result<Option<toml::Value>, String> {
    use serde_json::Value as J;
    Ok(Some(match value {
        J::Null => return Ok(None),
        J::Bool(b) => toml::Value::Boolean(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => toml::Value::Integer(i),
            (None, Some(u), _) => {
                return Err(format!(
                    "`{at}` = {u} cannot be written as TOML (its integers end at {}): use --format json or yaml",
                    i64::MAX
                ));
            }
            (None, None, Some(f)) => toml::Value::Float(f),
            (None, None, None) => return Err(format!("`{at}` = {n} is not a number TOML can hold")),
        },
        J::String(s) => toml::Value::String(s.clone()),
        J::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.extend(toml_value(item, &format!("{at}[{i}]"))?);
            }
            toml::Value::Array(out)
        }
        J::Object(map) => {
            let mut table = toml::Table::new();
            for (k, v) in map {
                if let Some(v) = toml_value(v, &format!("{at}.{k}"))? {
                    table.insert(k.clone(), v);
                }
            }
            toml::Value::Table(table)
        }
    }))
}

/// `value` as YAML, every number as the integer or float it is (see [`toml_value`]).
fn yaml_value(value: &serde_json::Value) -> serde_yaml::Value {
    use serde_json::Value as J;
    match value {
        J::Null => serde_yaml::Value::Null,
        J::Bool(b) => serde_yaml::Value::Bool(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => serde_yaml::Value::Number(i.into()),
            (None, Some(u), _) => serde_yaml::Value::Number(u.into()),
            (None, None, Some(f)) => serde_yaml::Value::Number(f.into()),
            (None, None, None) => serde_yaml::Value::String(n.to_string()),
        },
        J::String(s) => serde_yaml::Value::String(s.clone()),
        J::Array(items) => serde_yaml::Value::Sequence(items.iter().map(yaml_value).collect()),
        J::Object(map) => serde_yaml::Value::Mapping(
            map.iter().map(|(k, v)| (serde_yaml::Value::String(k.clone()), yaml_value(v))).collect(),
        ),
    }
}

/// The config tree `value` (redacted) in `format`, its sections in `order` (others after).
pub(crate) fn render(value: &serde_json::Value, order: &[String], format: ConfigFormat) -> Result<String, String> {
    let Some(map) = value.as_object() else { return Err("the configuration is not an object".into()) };
    let mut keys: Vec<&String> = order.iter().filter(|k| map.contains_key(*k)).collect();
    keys.extend(map.keys().filter(|k| !order.contains(k)));
    let mut out = String::new();
    match format {
        ConfigFormat::Json => {
            out.push_str("{\n");
            for (i, key) in keys.iter().enumerate() {
                let pretty = serde_json::to_string_pretty(&map[*key]).map_err(|e| e.to_string())?;
                let indented = pretty.replace('\n', "\n  ");
                let comma = if i + 1 < keys.len() { "," } else { "" };
                out.push_str(&format!("  {}: {indented}{comma}\n", serde_json::Value::String((*key).clone())));
            }
            out.push_str("}\n");
        }
        ConfigFormat::Toml => {
            for key in keys {
                let Some(section) = toml_value(&map[key], key)? else { continue };
                let mut one = toml::Table::new();
                one.insert(key.clone(), section);
                let text = toml::to_string(&one).map_err(|e| format!("`{key}` cannot be written as TOML: {e}"))?;
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&text);
            }
        }
        ConfigFormat::Yaml => {
            for key in keys {
                let mut one = serde_yaml::Mapping::new();
                one.insert(serde_yaml::Value::String(key.clone()), yaml_value(&map[key]));
                out.push_str(&serde_yaml::to_string(&one).map_err(|e| e.to_string())?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sections_keep_their_order_and_every_format_reads_back_the_same() {
        let value = serde_json::json!({
            "advisories": {"enabled": false, "subjects": ["a", "b"], "ratio": 0.5, "wait": 30.0, "big": 9_007_199_254_740_993_u64},
            "nats": {"url": "nats://x:4222", "name": null},
            "sink": {"type": "file", "directory": "/out", "batch": {"max_messages": 10}},
        });
        let order = vec!["nats".to_owned(), "sink".to_owned()];
        let json = render(&value, &order, ConfigFormat::Json).unwrap();
        assert!(json.find("\"nats\"").unwrap() < json.find("\"sink\"").unwrap(), "{json}");
        assert!(json.find("\"sink\"").unwrap() < json.find("\"advisories\"").unwrap(), "unknown ones last: {json}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&json).unwrap(), value);
        let toml_text = render(&value, &order, ConfigFormat::Toml).unwrap();
        assert!(toml_text.starts_with("[nats]"), "{toml_text}");
        let back: serde_json::Value = toml::from_str(&toml_text).unwrap();
        let mut no_null = value.clone();
        no_null["nats"].as_object_mut().unwrap().remove("name");
        assert_eq!(back, no_null, "TOML drops only the nulls");
        let yaml = render(&value, &order, ConfigFormat::Yaml).unwrap();
        assert!(yaml.starts_with("nats:"), "{yaml}");
        assert_eq!(serde_yaml::from_str::<serde_json::Value>(&yaml).unwrap(), value);
    }

    #[test]
    fn the_section_order_is_the_config_s() {
        let keys = key_order(r#"{"nats": {"a": 1}, "delivery": [1, 2], "sink": null}"#);
        assert_eq!(keys, ["nats", "delivery", "sink"]);
        assert_eq!(ConfigFormat::of(std::path::Path::new("a/orders.TOML")), ConfigFormat::Toml);
        assert_eq!(ConfigFormat::of(std::path::Path::new("o.yml")), ConfigFormat::Yaml);
        assert_eq!(ConfigFormat::of(std::path::Path::new("o.json")), ConfigFormat::Json);
    }
}
