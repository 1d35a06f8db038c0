//! Where a bad value came from: the environment variable that set it, or the line and column
//! of its key in the config file. An operator looking for a typo is sent to the right place:
//! a misspelled `NATS_SINKS__SINK__DIRECTROY` is not in the file at all.

use std::path::Path;

use super::{ConfigError, FIXED_ENV};
use sinks_contract::config::wording::{AT, SET_BY};

/// Every config path the environment sets now, with the variable that sets it (the
/// `NATS_SINKS__…` convention and the reference's fixed names).
pub(super) fn env_paths() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(key, _)| key.into_string().ok())
        .filter_map(|key| {
            if let Some(rest) = key.strip_prefix("NATS_SINKS__") {
                let path = rest.split("__").map(str::to_ascii_lowercase).collect::<Vec<_>>().join(".");
                return Some((path, key));
            }
            FIXED_ENV.iter().find(|(name, _)| key.eq_ignore_ascii_case(name)).map(|(_, path)| ((*path).to_owned(), key))
        })
        .collect()
}

/// Appends to every issue whose field an environment variable set (in `env`) which variable
/// that is: the field is then not in the file, and the message says where it came from.
pub(super) fn name_env_sources(mut e: ConfigError, env: &[(String, String)]) -> ConfigError {
    for issue in &mut e.issues {
        let set = env.iter().find(|(path, _)| issue.path == *path || issue.path.starts_with(&format!("{path}.")));
        if let Some((_, var)) = set {
            issue.message.push_str(&format!("{SET_BY}{var})"));
        }
    }
    e
}

/// The issues of `e` with where each value came from: the environment variable that set it,
/// else its place in `path` (`orders.toml:12:5`) when the key can be found there.
pub fn annotate(e: ConfigError, path: &Path) -> ConfigError {
    let mut e = name_env_sources(e, &env_paths());
    let Ok(text) = std::fs::read_to_string(path) else { return e };
    let ext = path.extension().and_then(|x| x.to_str()).unwrap_or_default().to_ascii_lowercase();
    let name = path.display();
    for issue in &mut e.issues {
        if issue.message.contains(SET_BY) || issue.message.contains(AT) {
            continue;
        }
        if let Some((line, column)) = locate(&text, &ext, &issue.path) {
            issue.message.push_str(&format!("{AT}{name}:{line}:{column})"));
        }
    }
    e
}

/// The line and column (1-based) of the key `path` names in a config `text` of format `ext`
/// (`json`, `toml`, `yaml`/`yml`): the first line holding the last segment as a key, after the
/// line of each earlier segment in turn (a section header counts). `None` when it is not
/// there (a default, or set elsewhere). Indices (`routes[2]`) are skipped. Pure.
pub fn locate(text: &str, ext: &str, path: &str) -> Option<(usize, usize)> {
    let segments: Vec<&str> =
        path.split('.').map(|s| s.split('[').next().unwrap_or(s)).filter(|s| !s.is_empty()).collect();
    // Where the search goes on: after the previous segment's key, on the same line or later
    // (JSON and inline tables nest on one line).
    let (mut from_line, mut from_column) = (0, 0);
    let mut found = None;
    for segment in segments {
        let (line, column) = text.lines().enumerate().skip(from_line).find_map(|(i, l)| {
            let skip = if i == from_line { from_column.min(l.len()) } else { 0 };
            let shifted = if skip > 0 { ext == "json" || ext == "toml" } else { true };
            if !shifted {
                return None;
            }
            key_at(&l[skip..], ext, segment).map(|c| (i, c + skip))
        })?;
        (from_line, from_column) = (line, column + segment.len() + 1);
        found = Some((line + 1, column + 1));
    }
    found
}

/// The byte column where `line` holds `key` as a key in format `ext`, if it does.
fn key_at(line: &str, ext: &str, key: &str) -> Option<usize> {
    let indent = line.len() - line.trim_start().len();
    let rest = line.trim_start();
    let after = |tail: &str| {
        tail.trim_start().starts_with(match ext {
            "toml" => "=",
            _ => ":",
        })
    };
    match ext {
        "json" => {
            let quoted = format!("\"{key}\"");
            let at = line.find(&quoted)?;
            after(&line[at + quoted.len()..]).then_some(at)
        }
        "toml" => {
            // `[a.b]` / `[[a]]` headers name a section; `key =` or `"key" =` a field.
            let header = rest.trim_start_matches('[').trim_end().trim_end_matches(']');
            if rest.starts_with('[') && header.split('.').any(|p| p.trim().trim_matches('"') == key) {
                return Some(indent);
            }
            for candidate in [key.to_owned(), format!("\"{key}\"")] {
                if let Some(tail) = rest.strip_prefix(&candidate)
                    && after(tail)
                {
                    return Some(indent);
                }
            }
            None
        }
        _ => {
            let rest = rest.strip_prefix("- ").unwrap_or(rest);
            let shift = line.len() - rest.len();
            for candidate in [key.to_owned(), format!("\"{key}\""), format!("'{key}'")] {
                if let Some(tail) = rest.strip_prefix(&candidate)
                    && after(tail)
                {
                    return Some(shift);
                }
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_in_each_format_under_their_sections() {
        let toml = "[nats]\nurl = \"nats://x\"\nstream = \"S\"\n\n[sink]\ntype = \"file\"\ndirectroy = \"/x\"\n\n[sink.batch]\nmax_messages = 0\n";
        assert_eq!(locate(toml, "toml", "sink.directroy"), Some((7, 1)));
        assert_eq!(locate(toml, "toml", "sink.batch.max_messages"), Some((10, 1)));
        assert_eq!(locate(toml, "toml", "nats.stream"), Some((3, 1)));
        assert_eq!(locate(toml, "toml", "sink.missing"), None, "a default is in no line");
        let json = "{\n  \"nats\": {\"stream\": \"S\"},\n  \"sink\": {\n    \"type\": \"file\",\n    \"directroy\": \"/x\"\n  }\n}\n";
        assert_eq!(locate(json, "json", "sink.directroy"), Some((5, 5)));
        assert_eq!(locate(json, "json", "nats.stream"), Some((2, 12)));
        let yaml = "nats:\n  stream: S\nsink:\n  type: file\n  directroy: /x\nroutes:\n  - sink: a\n    subject: b\n";
        assert_eq!(locate(yaml, "yaml", "sink.directroy"), Some((5, 3)));
        assert_eq!(locate(yaml, "yaml", "routes[0].subject"), Some((8, 5)));
        assert_eq!(locate(yaml, "yml", "routes[0].sink"), Some((7, 5)));
        // The same key under another section is not taken.
        let twice = "[nats]\nname = \"a\"\n[sink]\nname = \"b\"\n";
        assert_eq!(locate(twice, "toml", "sink.name"), Some((4, 1)));
    }

    #[test]
    fn a_value_from_the_environment_names_its_variable_not_the_file() {
        let e = ConfigError::single("sink.directroy", "unknown field `directroy`, expected `directory`");
        let env = [("sink.directroy".to_owned(), "NATS_SINKS__SINK__DIRECTROY".to_owned())];
        let named = name_env_sources(e, &env);
        assert!(named.issues[0].message.ends_with("(set by the environment variable NATS_SINKS__SINK__DIRECTROY)"));
        let shown = named.issues[0].to_string();
        assert!(
            shown.contains("did you mean `directory`?") && shown.contains("NATS_SINKS__SINK__DIRECTROY"),
            "{shown}"
        );
    }
}
