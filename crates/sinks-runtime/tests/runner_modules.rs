//! The runner's modules form layers, never a cycle: read from the sources under
//! `src/runner/`, every `super::<name>` path a module's code names (in a `use` line or
//! inline, grouped `super::{a, b}` too, and `crate::runner::<name>`) is an edge to the
//! sibling module `<name>`, or to the parent (`mod.rs`) when `<name>` is an item of it; the
//! parent's edges are the children it names. Comments and each file's `#[cfg(test)] mod
//! tests` are left out (a doc link is no dependency; a child test module's `use super::*`
//! is its own parent). The check fails naming one cycle, as a path of modules.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Module name → the modules its code names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The code of a module: its comments and its unit-test module (a top-level
/// `#[cfg(test)]` followed by `mod tests {`, `pub(super) mod tests {` …) left out.
fn code(source: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let end =
        lines.windows(2).position(|w| w[0] == "#[cfg(test)]" && w[1].ends_with("mod tests {")).unwrap_or(lines.len());
    lines[..end].iter().filter(|l| !l.trim_start().starts_with("//")).copied().collect::<Vec<_>>().join("\n")
}

/// The names a path prefix (`super::`, `crate::runner::`) is followed by in `code`: one
/// name, or each first name of a group `{a, b::c}`.
fn named_after(code: &str, prefix: &str) -> Vec<String> {
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        // `super::` inside a longer name (`xsuper::`) is not the path.
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            names.extend(inner.split(',').map(|part| ident(part.trim())).filter(|n| !n.is_empty()));
        } else {
            names.push(ident(rest));
        }
    }
    names
}

/// The dependency graph of the modules `sources` holds (`mod` is the parent).
fn graph(sources: &BTreeMap<String, String>) -> Graph {
    let children: BTreeSet<&str> = sources.keys().map(String::as_str).filter(|m| *m != "mod").collect();
    let mut graph = Graph::new();
    for (module, source) in sources {
        let code = code(source);
        let mut edges = BTreeSet::new();
        if module == "mod" {
            // The parent names its children as `child::…` (and `self::child::…`); a
            // `mod child;` line declares it.
            for child in &children {
                let used = code.lines().filter(|l| !l.trim_start().starts_with("mod ")).any(|l| {
                    l.match_indices(&format!("{child}::"))
                        .any(|(at, _)| !l[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_'))
                });
                if used {
                    edges.insert((*child).to_owned());
                }
            }
        } else {
            for name in named_after(&code, "super::").into_iter().chain(named_after(&code, "crate::runner::")) {
                let to = if children.contains(name.as_str()) { name } else { "mod".to_owned() };
                if &to != module {
                    edges.insert(to);
                }
            }
        }
        graph.insert(module.clone(), edges);
    }
    graph
}

/// One cycle of `graph`, as the modules along it (the first repeated at the end), if any.
fn cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        graph: &Graph,
        at: &str,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(at) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|m| m == at).unwrap_or(0);
                let mut found: Vec<String> = path[from..].to_vec();
                found.push(at.to_owned());
                return Some(found);
            }
            None => {}
        }
        marks.insert(at.to_owned(), Mark::Open);
        path.push(at.to_owned());
        for next in graph.get(at).into_iter().flatten() {
            if let Some(found) = visit(graph, next, marks, path) {
                return Some(found);
            }
        }
        path.pop();
        marks.insert(at.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph.keys().find_map(|start| visit(graph, start, &mut marks, &mut Vec::new()))
}

fn sources(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files.iter().map(|(m, s)| ((*m).to_owned(), (*s).to_owned())).collect()
}

#[test]
fn the_runner_has_no_module_cycle() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/runner");
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            modules.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    assert!(modules.len() > 10 && modules.contains_key("mod"), "read the runner: {:?}", modules.keys());
    let graph = graph(&modules);
    if let Some(found) = cycle(&graph) {
        panic!("the runner's modules depend on each other in a cycle: {}", found.join(" -> "));
    }
    // The check sees the edges it must (a `use` line, an inline path).
    assert!(graph["fetch"].contains("forward"), "{graph:?}");
    assert!(graph["forward"].contains("pending"), "an inline `super::pending::hold`: {graph:?}");
}

#[test]
fn the_check_finds_a_cycle_through_a_use_line_an_inline_path_a_group_or_the_parent() {
    // The two modules that imported each other before (batch.rs and pending.rs): one through
    // a `use` line, the other through an inline path.
    let two = sources(&[
        ("mod", "mod batch;\nmod pending;\nfn run() { batch::process(); }"),
        ("batch", "use super::context::Ctx;\nfn process() { super::pending::hold(); }"),
        ("pending", "use super::batch::{Batch, plan_written};"),
        ("context", ""),
    ]);
    assert_eq!(cycle(&graph(&two)).unwrap(), ["batch", "pending", "batch"]);
    // A group names each of its modules; the parent's items are the parent.
    let grouped = sources(&[
        ("mod", "fn f() { a::x(); }"),
        ("a", "use super::{b, c::D};"),
        ("b", "use super::c::E;"),
        ("c", "use super::RunStats;"),
    ]);
    assert_eq!(cycle(&graph(&grouped)).unwrap(), ["a", "b", "c", "mod", "a"]);
    // Layers: no cycle; and neither a doc link nor a unit test's `use super::*` is an edge.
    let layered = sources(&[
        ("mod", "mod a;\nmod b;\nfn f() { a::x(); b::y(); }"),
        ("a", "//! See [`super::b::y`].\nuse super::b::Y;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}"),
        (
            "b",
            "/// Not [`super::a`].\npub(super) struct Y;\n#[cfg(test)]\npub(super) mod tests {\n    use super::super::a::x;\n}",
        ),
    ]);
    let g = graph(&layered);
    assert_eq!(cycle(&g), None, "{g:?}");
    assert_eq!(g["a"], BTreeSet::from(["b".to_owned()]));
    assert!(g["b"].is_empty(), "{g:?}");
}
