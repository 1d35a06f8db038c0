//! The module graph of every crate, read from its sources, and the tidy test that it has no
//! circle: a crate's modules form layers, as its crates do.
//!
//! Each source file is one module (`lib.rs`/`main.rs` the root, `a.rs` or `a/mod.rs` the
//! module `a`, `a/b.rs` its child `b`), found from the root through its `mod` lines (a
//! `#[path]` attribute followed; a module declared under `#[cfg(test)]` left out, with its
//! children). An edge goes from a module to each module its code names: a `use` path and an
//! inline path starting at `crate::`, `$crate::`, `super::`, `self::` or the name of a child
//! module, resolved segment by segment to the deepest module it reaches and through `pub use`
//! re-exports (named or glob) to the module that defines the item. A `mod` line is no edge;
//! comments, string literals and `#[cfg(test)]` items (the unit tests) are left out, and an
//! inline module counts as part of its file. An edge from a module to its own ancestor (a
//! child naming what its folder's `mod.rs` or the crate root holds, as `super::X`) is no step
//! up and is left out of the circles: a folder is one room. A circle is a strongly connected
//! set of more than one module; the test names each with the edges that close it, so the
//! fix (move the type both sides need down to where both can see it) can be read off.

#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path in its crate: `""` is the root, `runner::fetch` a file below it.
type ModPath = String;

/// One lexical token of Rust code, comments and literals left out.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// An identifier or keyword (`$crate` is one identifier).
    Ident(String),
    /// `::`.
    Colons,
    /// Any other punctuation character.
    Punct(char),
    /// A string, character or number literal (its text does not matter).
    Lit,
}

/// The tokens of `src`: comments (nested block comments too), string, raw string, byte and
/// character literals dropped to [`Tok::Lit`], lifetimes dropped.
fn tokens(src: &str) -> Vec<Tok> {
    let b: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident_char = |c: char| c.is_alphanumeric() || c == '_';
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i = skip_string(&b, i + 1);
            out.push(Tok::Lit);
        } else if (c == 'r' || c == 'b') && raw_string_start(&b, i).is_some() {
            let (hashes, body) = raw_string_start(&b, i).unwrap_or((0, i));
            let close: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let mut j = body;
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
            out.push(Tok::Lit);
        } else if c == 'b' && next == Some('"') {
            i = skip_string(&b, i + 2);
            out.push(Tok::Lit);
        } else if c == '\'' || (c == 'b' && next == Some('\'')) {
            let at = if c == 'b' { i + 1 } else { i };
            if b.get(at + 1) == Some(&'\\') {
                let mut j = at + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push(Tok::Lit);
            } else if b.get(at + 2) == Some(&'\'') {
                i = at + 3;
                out.push(Tok::Lit);
            } else {
                // A lifetime or label: `'a`.
                let mut j = at + 1;
                while j < b.len() && ident_char(b[j]) {
                    j += 1;
                }
                i = j;
            }
        } else if c.is_ascii_digit() {
            while i < b.len() && (ident_char(b[i]) || (b[i] == '.' && b.get(i + 1).is_some_and(char::is_ascii_digit))) {
                i += 1;
            }
            out.push(Tok::Lit);
        } else if ident_char(c) || (c == '$' && next.is_some_and(ident_char)) {
            let start = i;
            i += 1;
            while i < b.len() && ident_char(b[i]) {
                i += 1;
            }
            let word: String = b[start..i].iter().collect();
            out.push(Tok::Ident(word.trim_start_matches("r#").to_owned()));
        } else if c == ':' && next == Some(':') {
            out.push(Tok::Colons);
            i += 2;
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    out
}

/// The index just past the closing quote of a string whose body starts at `i`.
fn skip_string(b: &[char], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// At `i`, a raw string's opening (`r"`, `r#"`, `br##"` …): its number of `#` and the index
/// of its body.
fn raw_string_start(b: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if b[j] == 'b' {
        j += 1;
    }
    if b.get(j) != Some(&'r') || (i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')) {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while b.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (b.get(j) == Some(&'"')).then_some((hashes, j + 1))
}

/// The tokens of `toks` with every `#[cfg(test)]` item left out (the attribute, the item and
/// its body), and every `#[cfg(…test…)]` one, which only a test build compiles.
fn without_test_items(toks: &[Tok]) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i] == Tok::Punct('#') && toks.get(i + 1) == Some(&Tok::Punct('[')) {
            let end = matching(toks, i + 1);
            let attr = &toks[i + 2..end.min(toks.len())];
            let is_test_cfg = attr.first() == Some(&Tok::Ident("cfg".into()))
                && attr.contains(&Tok::Ident("test".into()))
                && !attr.contains(&Tok::Ident("not".into()));
            if is_test_cfg {
                i = item_end(toks, end + 1);
                continue;
            }
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out
}

/// The index of the bracket closing the one at `open` (`(`, `[` or `{`).
fn matching(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// The index just past the item that starts at `from` (its `;` or its closing `}`; further
/// attributes belong to it).
fn item_end(toks: &[Tok], from: usize) -> usize {
    let mut j = from;
    while j < toks.len() {
        match toks[j] {
            Tok::Punct(';') => return j + 1,
            Tok::Punct('{') | Tok::Punct('(') | Tok::Punct('[') => {
                let close = matching(toks, j);
                if toks[j] == Tok::Punct('{') {
                    return close + 1;
                }
                j = close + 1;
            }
            _ => j += 1,
        }
    }
    toks.len()
}

/// What one file of a crate holds, as the graph needs it.
#[derive(Debug, Default)]
struct Module {
    /// The file, relative to the crate.
    file: String,
    /// The code, without comments, literals and test items.
    toks: Vec<Tok>,
    /// The child modules declared in it (`mod a;`), by name.
    children: BTreeSet<String>,
    /// The items it defines at its top level (functions, types, traits, constants, macros).
    items: BTreeSet<String>,
    /// Its `use` paths, each with whether it re-exports (`pub use`) and the name it binds.
    uses: Vec<UsePath>,
}

/// One path of a `use` declaration.
#[derive(Debug, Clone)]
struct UsePath {
    segments: Vec<String>,
    /// The name it binds (`as` or the last segment; `*` for a glob).
    binds: String,
    /// Declared `pub` (in any form): others may name it through this module.
    public: bool,
    /// The inline-module depth it sits at within its file.
    depth: usize,
}

/// The paths of a `use` tree starting at `toks[i]` (just after `use`), up to its `;`.
fn use_paths(toks: &[Tok], i: usize) -> (Vec<(Vec<String>, String)>, usize) {
    fn tree(toks: &[Tok], mut i: usize, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) -> usize {
        let mut path = prefix.to_vec();
        loop {
            match toks.get(i) {
                Some(Tok::Colons) => i += 1,
                Some(Tok::Punct('{')) => {
                    i += 1;
                    loop {
                        match toks.get(i) {
                            Some(Tok::Punct('}')) => return i + 1,
                            Some(Tok::Punct(',')) => i += 1,
                            None => return i,
                            _ => i = tree(toks, i, &path, out),
                        }
                    }
                }
                Some(Tok::Punct('*')) => {
                    out.push((path, "*".into()));
                    return i + 1;
                }
                Some(Tok::Ident(word)) if word == "as" => {
                    let alias = match toks.get(i + 1) {
                        Some(Tok::Ident(a)) => a.clone(),
                        _ => String::new(),
                    };
                    if path.last().is_some_and(|l| l == "self") {
                        path.pop();
                    }
                    out.push((path, alias));
                    return i + 2;
                }
                Some(Tok::Ident(word)) => {
                    path.push(word.clone());
                    i += 1;
                }
                _ => {
                    if path.last().is_some_and(|l| l == "self") {
                        path.pop();
                    }
                    let binds = path.last().cloned().unwrap_or_default();
                    if !path.is_empty() {
                        out.push((path, binds));
                    }
                    return i;
                }
            }
        }
    }
    let mut out = Vec::new();
    let end = tree(toks, i, &[], &mut out);
    (out, end)
}

/// Whether the `use` at `toks[at]` is declared `pub` in any form (`pub`, `pub(crate)`,
/// `pub(in path)`): the tokens just before it, back to the previous item, hold `pub`.
fn declared_pub(toks: &[Tok], at: usize) -> bool {
    let mut j = at;
    while j > 0 && at - j < 8 {
        j -= 1;
        match &toks[j] {
            Tok::Ident(w) if w == "pub" => return true,
            Tok::Ident(_) | Tok::Colons | Tok::Punct('(' | ')') => {}
            _ => return false,
        }
    }
    false
}

/// Reads one file's module facts from its source.
fn module(file: &str, source: &str) -> Module {
    let toks = without_test_items(&tokens(source));
    let mut m = Module { file: file.to_owned(), ..Module::default() };
    let mut depth = 0usize; // brace depth
    let mut inline: Vec<usize> = Vec::new(); // brace depths at which inline modules opened
    let mut i = 0;
    let ident = |j: usize| match toks.get(j) {
        Some(Tok::Ident(w)) => Some(w.as_str()),
        _ => None,
    };
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
            }
            Tok::Ident(w) if w == "mod" => {
                if let Some(name) = ident(i + 1) {
                    match toks.get(i + 2) {
                        Some(Tok::Punct(';')) if inline.is_empty() && depth == 0 => {
                            m.children.insert(name.to_owned());
                        }
                        Some(Tok::Punct('{')) => {
                            inline.push(depth);
                        }
                        _ => {}
                    }
                }
            }
            Tok::Ident(w) if w == "use" && !matches!(toks.get(i.wrapping_sub(1)), Some(Tok::Colons)) => {
                let public = declared_pub(&toks, i);
                let (paths, end) = use_paths(&toks, i + 1);
                for (segments, binds) in paths {
                    m.uses.push(UsePath { segments, binds, public, depth: inline.len() });
                }
                i = end;
                continue;
            }
            Tok::Ident(w)
                if depth == 0
                    && matches!(
                        w.as_str(),
                        "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union"
                    ) =>
            {
                if let Some(name) = ident(i + 1) {
                    m.items.insert(name.to_owned());
                }
            }
            Tok::Ident(w) if w == "macro_rules" => {
                if let Some(name) = ident(i + 2) {
                    m.items.insert(name.to_owned());
                }
            }
            _ => {}
        }
        i += 1;
    }
    m.toks = toks;
    m
}

/// A crate's modules, read from its files.
#[derive(Debug, Default)]
pub(crate) struct Crate {
    modules: BTreeMap<ModPath, Module>,
}

/// Whether `ancestor` contains `module` (the root contains every module).
fn is_ancestor(ancestor: &str, module: &str) -> bool {
    ancestor.is_empty() || module.strip_prefix(ancestor).is_some_and(|rest| rest.starts_with("::"))
}

/// The parent of a module path (`a::b` → `a`, `a` → the root).
fn parent(path: &str) -> &str {
    path.rfind("::").map_or("", |at| &path[..at])
}

fn child(path: &str, name: &str) -> ModPath {
    if path.is_empty() { name.to_owned() } else { format!("{path}::{name}") }
}

impl Crate {
    /// Reads the crate whose root file is `root_file` (relative paths, read through `read`),
    /// following its `mod` lines.
    fn read(root_file: &str, read: &dyn Fn(&str) -> Option<String>) -> Self {
        let mut modules = BTreeMap::new();
        let mut todo: Vec<(ModPath, String)> = vec![(String::new(), root_file.to_owned())];
        while let Some((path, file)) = todo.pop() {
            let Some(source) = read(&file) else { continue };
            let m = module(&file, &source);
            let dir = {
                let f = Path::new(&file);
                let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let base = f.parent().unwrap_or(Path::new(""));
                if path.is_empty() || name == "mod.rs" {
                    base.to_path_buf()
                } else {
                    base.join(f.file_stem().unwrap_or_default())
                }
            };
            let declared = declared_paths(&source);
            for name in &m.children {
                let child_file = match declared.get(name) {
                    Some(p) => Path::new(&file).parent().unwrap_or(Path::new("")).join(p),
                    None => {
                        let flat = dir.join(format!("{name}.rs"));
                        if read(&flat.to_string_lossy()).is_some() { flat } else { dir.join(name).join("mod.rs") }
                    }
                };
                todo.push((child(&path, name), child_file.to_string_lossy().into_owned()));
            }
            modules.insert(path, m);
        }
        // A child that could not be read (a test module, a missing file) is no module.
        let known: BTreeSet<ModPath> = modules.keys().cloned().collect();
        for (path, m) in &mut modules {
            m.children.retain(|c| known.contains(&child(path, c)));
        }
        Self { modules }
    }

    /// Reads the crate whose root file is `root` from disk.
    pub(crate) fn from_disk(root: &Path) -> Self {
        let dir = root.parent().unwrap_or(Path::new("")).to_path_buf();
        let name = root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Self::read(&name, &|file| std::fs::read_to_string(dir.join(file)).ok())
    }

    /// The module a path names, from module `at` at inline depth `depth`: `None` for a path
    /// outside the crate (another crate, a local name).
    fn resolve(&self, at: &str, depth: usize, segments: &[String], hops: usize) -> Option<ModPath> {
        let first = segments.first()?;
        let mut rest = &segments[1..];
        let mut cur: ModPath = match first.as_str() {
            "crate" | "$crate" => String::new(),
            "self" => at.to_owned(),
            "super" => {
                let mut cur = at.to_owned();
                let mut supers: usize = 1;
                while rest.first().is_some_and(|s| s == "super") {
                    supers += 1;
                    rest = &rest[1..];
                }
                // The first supers of an inline module leave the inline modules of its file.
                for _ in 0..supers.saturating_sub(depth) {
                    cur = parent(&cur).to_owned();
                }
                cur
            }
            name if depth == 0 && self.modules.get(at).is_some_and(|m| m.children.contains(name)) => child(at, name),
            _ => return None,
        };
        for seg in rest {
            if seg == "self" {
                continue;
            }
            let module = self.modules.get(&cur)?;
            if module.children.contains(seg) {
                cur = child(&cur, seg);
                continue;
            }
            if module.items.contains(seg) || hops > 8 {
                return Some(cur);
            }
            // Through a re-export: named first, then globs whose module has the name.
            if let Some(re) = module.uses.iter().find(|u| u.public && &u.binds == seg) {
                return self.resolve(&cur, re.depth, &re.segments, hops + 1).or(Some(cur));
            }
            for glob in module.uses.iter().filter(|u| u.public && u.binds == "*") {
                let Some(target) = self.resolve(&cur, glob.depth, &glob.segments, hops + 1) else { continue };
                let has = self.modules.get(&target).is_some_and(|t| {
                    t.items.contains(seg)
                        || t.children.contains(seg)
                        || t.uses.iter().any(|u| u.public && &u.binds == seg)
                });
                if has && target != cur {
                    return self.resolve(&target, 0, &["self".into(), seg.clone()], hops + 1);
                }
            }
            return Some(cur);
        }
        Some(cur)
    }

    /// Every module's edges: the modules its code names (itself left out).
    pub(crate) fn graph(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut graph = BTreeMap::new();
        for (path, m) in &self.modules {
            let mut edges = BTreeSet::new();
            for u in &m.uses {
                edges.extend(self.resolve(path, u.depth, &u.segments, 0));
            }
            // Inline paths: `crate::…`, `super::…` and a child's name, each followed by `::`.
            let toks = &m.toks;
            let mut depth = 0usize;
            let mut inline: Vec<usize> = Vec::new();
            let mut i = 0;
            while i < toks.len() {
                match &toks[i] {
                    Tok::Punct('{') => depth += 1,
                    Tok::Punct('}') => {
                        depth = depth.saturating_sub(1);
                        if inline.last() == Some(&depth) {
                            inline.pop();
                        }
                    }
                    Tok::Ident(w) if w == "mod" && toks.get(i + 2) == Some(&Tok::Punct('{')) => inline.push(depth),
                    Tok::Ident(w) if w == "use" => {
                        i = use_paths(toks, i + 1).1;
                        continue;
                    }
                    Tok::Ident(w)
                        if toks.get(i + 1) == Some(&Tok::Colons)
                            && !matches!(toks.get(i.wrapping_sub(1)), Some(Tok::Colons)) =>
                    {
                        let mut segments = vec![w.clone()];
                        let mut j = i + 1;
                        while toks.get(j) == Some(&Tok::Colons) {
                            match toks.get(j + 1) {
                                Some(Tok::Ident(s)) => segments.push(s.clone()),
                                _ => break,
                            }
                            j += 2;
                        }
                        edges.extend(self.resolve(path, inline.len(), &segments, 0));
                        i = j;
                        continue;
                    }
                    _ => {}
                }
                i += 1;
            }
            edges.remove(path);
            graph.insert(path.clone(), edges);
        }
        graph
    }

    /// The file of a module.
    fn file(&self, path: &str) -> &str {
        self.modules.get(path).map_or("?", |m| m.file.as_str())
    }

    /// The circles of the crate: each strongly connected set of more than one module, as its
    /// files, with the edges between them (`a.rs -> b.rs`).
    pub(crate) fn circles(&self) -> Vec<(Vec<String>, Vec<String>)> {
        let mut graph = self.graph();
        // A module naming its own ancestor is no step up: a folder's `mod.rs` (or the crate
        // root) holds what its children share, and they see it as `super::…`.
        for (from, edges) in &mut graph {
            edges.retain(|to| !is_ancestor(to, from));
        }
        strongly_connected(&graph)
            .into_iter()
            .filter(|set| set.len() > 1)
            .map(|set| {
                let files = set.iter().map(|p| self.file(p).to_owned()).collect();
                let mut edges = Vec::new();
                for from in &set {
                    for to in graph.get(from).into_iter().flatten().filter(|t| set.contains(*t)) {
                        edges.push(format!("{} -> {}", self.file(from), self.file(to)));
                    }
                }
                (files, edges)
            })
            .collect()
    }

    /// How many modules the crate has.
    pub(crate) fn len(&self) -> usize {
        self.modules.len()
    }
}

/// `#[path = "…"]` attributes on `mod` lines: module name → the path written.
fn declared_paths(source: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut pending: Option<String> = None;
    for line in source.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#[path = \"") {
            pending = rest.split('"').next().map(str::to_owned);
        } else if let Some(p) = pending.take() {
            let decl = line.trim_start_matches("pub(crate) ").trim_start_matches("pub ");
            if let Some(name) = decl.strip_prefix("mod ").and_then(|n| n.strip_suffix(';')) {
                out.insert(name.trim().to_owned(), p);
            } else if line.starts_with("#[") {
                pending = Some(p);
            }
        }
    }
    out
}

/// Tarjan's strongly connected components of `graph`, each as a sorted set.
fn strongly_connected(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<BTreeSet<ModPath>> {
    struct State<'g> {
        graph: &'g BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'g str, (usize, usize)>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        next: usize,
        out: Vec<BTreeSet<ModPath>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        s.index.insert(v, (s.next, s.next));
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low_w = s.index[w].1;
                let e = s.index.get_mut(v).expect("visited");
                e.1 = e.1.min(low_w);
            } else if s.on_stack.contains(w) {
                let idx_w = s.index[w].0;
                let e = s.index.get_mut(v).expect("visited");
                e.1 = e.1.min(idx_w);
            }
        }
        let (idx, low) = s.index[v];
        if idx == low {
            let mut set = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                set.insert(w.to_owned());
                if w == v {
                    break;
                }
            }
            s.out.push(set);
        }
    }
    let mut s =
        State { graph, index: BTreeMap::new(), stack: Vec::new(), on_stack: BTreeSet::new(), next: 0, out: Vec::new() };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The crate roots of the workspace: each member's `src/lib.rs`, `src/main.rs` and
/// `src/bin/*.rs`.
fn roots(workspace: &Path) -> Vec<PathBuf> {
    let mut members: Vec<PathBuf> =
        std::fs::read_dir(workspace.join("crates")).into_iter().flatten().flatten().map(|e| e.path()).collect();
    members.push(workspace.join("bench"));
    members.push(workspace.join("xtask"));
    members.sort();
    let mut out = Vec::new();
    for m in members {
        for root in ["src/lib.rs", "src/main.rs"] {
            if m.join(root).is_file() {
                out.push(m.join(root));
            }
        }
        let mut bins: Vec<PathBuf> = std::fs::read_dir(m.join("src/bin"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        bins.sort();
        out.extend(bins);
    }
    out
}

mod tests {
    use super::*;

    fn krate(files: &[(&str, &str)]) -> Crate {
        let files: BTreeMap<String, String> = files.iter().map(|(f, s)| ((*f).to_owned(), (*s).to_owned())).collect();
        Crate::read("lib.rs", &|f| files.get(f).cloned())
    }

    fn edges(c: &Crate, from: &str) -> Vec<String> {
        c.graph().get(from).map(|e| e.iter().cloned().collect()).unwrap_or_default()
    }

    /// No crate of the workspace has a circle of modules.
    #[test]
    fn no_crate_has_a_circle_of_modules() {
        let workspace = sinks_testkit::workspace_root();
        let mut problems = Vec::new();
        let mut modules = 0;
        for root in roots(&workspace) {
            let c = Crate::from_disk(&root);
            modules += c.len();
            for (files, closing) in c.circles() {
                let at = root.parent().and_then(Path::parent).unwrap_or(&workspace);
                let at = at.strip_prefix(&workspace).unwrap_or(at).display().to_string();
                problems.push(format!(
                    "{at}: {} modules in a circle ({}): {}",
                    files.len(),
                    files.join(", "),
                    closing.join("; ")
                ));
            }
        }
        assert!(modules > 300, "read too few modules: {modules}");
        assert!(problems.is_empty(), "import circles (move what both sides need down):\n{}", problems.join("\n"));
    }

    #[test]
    fn modules_are_found_through_their_mod_lines() {
        let c = krate(&[
            ("lib.rs", "//! Root.\nmod a;\npub mod b;\n#[cfg(test)]\nmod tests;\n#[path = \"elsewhere/c.rs\"]\nmod c;"),
            ("a.rs", "mod inner;"),
            ("a/inner.rs", ""),
            ("b/mod.rs", "mod d;"),
            ("b/d.rs", ""),
            ("tests.rs", "use crate::a::X;"),
            ("elsewhere/c.rs", ""),
        ]);
        let found: Vec<&str> = c.modules.keys().map(String::as_str).collect();
        assert_eq!(found, ["", "a", "a::inner", "b", "b::d", "c"]);
        assert_eq!(c.file("b::d"), "b/d.rs");
        assert_eq!(c.file("c"), "elsewhere/c.rs");
    }

    #[test]
    fn paths_resolve_to_the_module_that_defines_the_item() {
        let c = krate(&[
            ("lib.rs", "mod runner;\nmod dlq;\nmod config;\npub use runner::StartAt;\npub struct Root;"),
            (
                "runner/mod.rs",
                "mod fetch;\nmod stats;\npub use stats::RunStats;\npub enum StartAt {}\nfn f() { fetch::go(); }",
            ),
            ("runner/fetch.rs", "use super::RunStats;\nfn go() { let _ = crate::config::Config; }"),
            ("runner/stats.rs", "pub struct RunStats;"),
            ("dlq.rs", "pub fn reason() {}\nuse crate::{config::{self, Config}, StartAt as S};"),
            ("config.rs", "pub struct Config;\n// crate::runner::X in a comment\nconst T: &str = \"crate::dlq::x\";"),
        ]);
        assert_eq!(edges(&c, "runner::fetch"), ["config", "runner::stats"], "through the re-export to stats");
        assert_eq!(edges(&c, "runner"), ["runner::fetch", "runner::stats"]);
        assert_eq!(edges(&c, "dlq"), ["config", "runner"], "a group, `self`, and a re-export of the root");
        assert!(edges(&c, "config").is_empty(), "comments and strings are no edges");
        assert_eq!(edges(&c, ""), ["runner"]);
        assert!(c.circles().is_empty());
    }

    #[test]
    fn the_check_finds_a_circle_through_a_use_line_an_inline_path_or_a_parent_item() {
        // A leaf type in a higher module: the child names its parent's item, the parent its child.
        let up = krate(&[
            ("lib.rs", "mod runner;\nmod source;"),
            ("runner/mod.rs", "mod fetch;\npub struct GuardState;\nfn f() { fetch::go() }"),
            ("runner/fetch.rs", "fn go() { crate::source::fetch(); }"),
            ("source.rs", "use crate::runner::GuardState;\npub fn fetch() {}"),
        ]);
        let circles = up.circles();
        assert_eq!(circles.len(), 1, "{circles:?}");
        assert_eq!(circles[0].0, ["runner/mod.rs", "runner/fetch.rs", "source.rs"]);
        assert!(circles[0].1.contains(&"source.rs -> runner/mod.rs".to_owned()), "{circles:?}");
        // Two siblings naming each other: one by `use`, one inline through `super::`.
        let pair = krate(&[
            ("lib.rs", "mod config;\nmod sql;"),
            ("config.rs", "use crate::sql::quote;\npub struct Table;"),
            ("sql.rs", "pub fn quote(t: &super::config::Table) {}"),
        ]);
        assert_eq!(pair.circles().len(), 1);
        // The same two with the unit tests and an inline module naming the other: no circle.
        let fine = krate(&[
            ("lib.rs", "mod config;\nmod sql;"),
            ("config.rs", "pub struct Table;\n#[cfg(test)]\nmod tests {\n    use crate::sql::quote;\n}"),
            (
                "sql.rs",
                "pub fn quote(t: &super::config::Table) {}\nmod inner {\n    use super::quote;\n    fn g() { super::super::config::Table; }\n}",
            ),
        ]);
        assert!(fine.circles().is_empty(), "{:?}", fine.graph());
        assert_eq!(edges(&fine, "sql"), ["config"]);
        // A folder's children naming what its `mod.rs` holds, which names them back: no circle
        // (the folder is one room), and a module outside may name it too.
        let folder = krate(&[
            ("lib.rs", "mod batch;\nmod source;"),
            ("batch/mod.rs", "mod encode;\nmod parquet;\npub use encode::encoder;\npub trait Encoder {}"),
            ("batch/encode.rs", "use super::Encoder;\npub fn encoder() { super::parquet::new(); }"),
            ("batch/parquet.rs", "use crate::batch::Encoder;\npub fn new() {}"),
            ("source.rs", "use crate::batch::Encoder;"),
        ]);
        assert!(folder.circles().is_empty(), "{:?}", folder.graph());
        assert_eq!(edges(&folder, "batch::parquet"), ["batch"], "the edge is there, only not a step up");
    }

    #[test]
    fn literals_and_lifetimes_are_not_code() {
        let t = tokens(
            "fn f<'a>(x: &'a str) { let c = '\"'; let s = r#\"crate::x\"#; let b = b'\\''; /* crate::y /* */ */ }",
        );
        assert!(!t.contains(&Tok::Ident("crate".into())), "{t:?}");
        assert!(t.contains(&Tok::Ident("str".into())), "{t:?}");
        let glob = module("m.rs", "pub use self::a::*;\npub(crate) use b::{C as D, self};\nuse e::F;");
        let binds: Vec<(&str, bool)> = glob.uses.iter().map(|u| (u.binds.as_str(), u.public)).collect();
        assert_eq!(binds, [("*", true), ("D", true), ("b", true), ("F", false)]);
    }
}
