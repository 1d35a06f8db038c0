//! The sink author's guide covers its example: every name `examples/out-of-tree-sink` imports
//! from a crate of this workspace (its `use sinks_…` lines, sources and tests) is named in
//! `docs/writing-a-sink.md`, in a code span, so a reader of the example finds what each one
//! is for. A test, like the tidy rules (the module is compiled for tests only).

/// The names a Rust source imports from the workspace's `sinks_*` crates: the last segment of
/// every path of its `use sinks_…;` statements (`self` stands for its module, `A as B` is
/// `A`, a glob names nothing), without repeats, in order of appearance.
fn imported_names(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("use sinks_") {
        let starts_line = rest[..at].rsplit('\n').next().is_some_and(|before| before.trim().is_empty());
        let after = &rest[at + "use ".len()..];
        let Some(end) = after.find(';') else { break };
        if starts_line {
            let tree = after[..end].split_whitespace().collect::<Vec<_>>().join(" ");
            leaves(&tree, "", &mut names);
        }
        rest = &after[end..];
    }
    let mut seen = std::collections::BTreeSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// Adds the leaf names of the use tree `tree` (whitespace collapsed) to `out`; `parent` is the
/// last segment before it, which `self` stands for.
fn leaves(tree: &str, parent: &str, out: &mut Vec<String>) {
    for item in split_top(tree) {
        match item.find('{') {
            Some(open) => {
                let path = item[..open].trim().trim_end_matches("::");
                let inner = item[open + 1..].trim_end().strip_suffix('}').unwrap_or(&item[open + 1..]);
                let last = path.rsplit("::").next().unwrap_or(parent);
                leaves(inner, last, out);
            }
            None => {
                let path = item.split(" as ").next().unwrap_or(item).trim();
                let last = path.rsplit("::").next().unwrap_or(path);
                match last {
                    "" | "*" => {}
                    "self" => out.push(parent.to_owned()),
                    name => out.push(name.to_owned()),
                }
            }
        }
    }
}

/// The comma-separated items of a use tree, ignoring the commas inside braces.
fn split_top(tree: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0usize);
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&tree[start..]);
    items.into_iter().map(str::trim).filter(|i| !i.is_empty()).collect()
}

/// True when `name` is a whole identifier inside one of the code spans of `markdown` (an
/// inline span or a fenced block).
fn mentions(markdown: &str, name: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    markdown.split('`').skip(1).step_by(2).any(|span| {
        span.match_indices(name).any(|(i, _)| {
            let before = span[..i].chars().next_back();
            let after = span[i + name.len()..].chars().next();
            !before.is_some_and(word) && !after.is_some_and(word)
        })
    })
}

/// The names of `sources` that `markdown` does not mention, each once.
fn unexplained(sources: &[String], markdown: &str) -> Vec<String> {
    let mut missing: Vec<String> =
        sources.iter().flat_map(|s| imported_names(s)).filter(|n| !mentions(markdown, n)).collect();
    missing.sort();
    missing.dedup();
    missing
}

mod tests {
    use super::*;

    /// Every Rust file of the example's `src` and `tests`, as text.
    fn example_sources() -> Vec<String> {
        fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
            let Ok(entries) = std::fs::read_dir(dir) else { return };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(std::fs::read_to_string(&path).unwrap());
                }
            }
        }
        let example = sinks_testkit::workspace_root().join("examples/out-of-tree-sink");
        let mut out = Vec::new();
        walk(&example.join("src"), &mut out);
        walk(&example.join("tests"), &mut out);
        assert!(out.len() >= 6, "found too few files of the example");
        out
    }

    #[test]
    fn the_guide_names_every_workspace_item_the_example_imports() {
        let guide = std::fs::read_to_string(sinks_testkit::workspace_root().join("docs/writing-a-sink.md")).unwrap();
        let sources = example_sources();
        let imported: Vec<String> = sources.iter().flat_map(|s| imported_names(s)).collect();
        assert!(imported.len() > 10, "the example imports more than {imported:?}");
        let missing = unexplained(&sources, &guide);
        assert!(
            missing.is_empty(),
            "docs/writing-a-sink.md does not name what examples/out-of-tree-sink imports: {missing:?} (say in a code span what each is for)"
        );
    }

    #[test]
    fn the_extractor_reads_every_shape_of_use_line() {
        let source = "//! doc\n\
            use std::path::PathBuf;\n\
            use sinks_contract::config::{ConfigError, Issues};\n\
            use sinks_contract::{\n    BatchResult, idempotency::{self, KeySource},\n    Sink as _,\n};\n\
            use sinks_certify::*;\n\
            use sinks_cli::Registry as Kinds;\n\
            // use sinks_contract::Commented;\n\
            let x = \"use sinks_contract::Quoted;\";\n\
            use sinks_contract::config::ConfigError;\n";
        assert_eq!(
            imported_names(source),
            ["ConfigError", "Issues", "BatchResult", "idempotency", "KeySource", "Sink", "Registry"]
        );
    }

    #[test]
    fn a_name_the_guide_does_not_mention_is_caught() {
        let sources = vec!["use sinks_contract::{Sink, ReadBack};\nuse sinks_certify::Records;\n".to_owned()];
        let guide = "A sink implements `Sink`; `sinks_certify::Records` reads a destination. ReadBack in prose only.";
        assert_eq!(unexplained(&sources, guide), ["ReadBack"]);
        let covered = format!("{guide} `Sink::read_back` returns a `ReadBack`.");
        assert!(unexplained(&sources, &covered).is_empty());
        // A longer identifier that contains the name is not a mention of it.
        assert_eq!(unexplained(&sources, "`Sinks` `ReadBacks` `Records`"), ["ReadBack", "Sink"]);
    }
}
