//! No long function in the runtime's forward path: a tidy test that every function of
//! `crates/sinks-runtime/src` is at most [`MAX_LINES`] lines, counted from the line of its
//! `fn` to the line of its closing brace (a nested function counts inside its outer one and
//! on its own). A longer function is split into named steps, or named in [`ALLOWED`] with the
//! reason it is long.
//!
//! The counter reads the source as text: comments, string and character literals are blanked
//! first (their line breaks kept), so a brace or a `fn` inside one counts for nothing. A `fn`
//! without a body (a trait method's declaration) and a function pointer type (`fn(u8)`) are
//! not functions here.

#![cfg(test)]

use std::path::{Path, PathBuf};

/// The most lines a runtime function may span.
pub(crate) const MAX_LINES: usize = 100;

/// Runtime functions allowed to be longer, as `(file below crates/sinks-runtime/src, name,
/// why)`.
const ALLOWED: &[(&str, &str, &str)] = &[];

/// A function found in a source text: its name, the line of its `fn` (1-based) and its
/// length in lines.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// `src` with every comment, string literal (raw and byte strings too) and character literal
/// replaced by spaces, line breaks kept; lifetimes stay.
fn blank(src: &str) -> Vec<char> {
    let b: Vec<char> = src.chars().collect();
    let mut out = b.clone();
    let wipe = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in out.iter_mut().take(to.min(b.len())).skip(from) {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        let after_ident = i > 0 && ident(b[i - 1]);
        if c == '/' && next == Some('/') {
            let end = b[i..].iter().position(|&c| c == '\n').map_or(b.len(), |p| i + p);
            wipe(&mut out, i, end);
            i = end;
        } else if c == '/' && next == Some('*') {
            let (mut j, mut depth) = (i, 0usize);
            while j < b.len() {
                if b[j] == '/' && b.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if b[j] == '*' && b.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            wipe(&mut out, i, j);
            i = j;
        } else if !after_ident && let Some((hashes, body)) = raw_string_start(&b, i) {
            let mut j = body;
            while j < b.len()
                && !(b[j] == '"' && b[j + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes)
            {
                j += 1;
            }
            let end = (j + 1 + hashes).min(b.len());
            wipe(&mut out, i, end);
            i = end;
        } else if c == '"' || (!after_ident && c == 'b' && next == Some('"')) {
            let mut j = if c == 'b' { i + 2 } else { i + 1 };
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            wipe(&mut out, i, j + 1);
            i = j + 1;
        } else if c == '\'' {
            // A character literal (`'a'`, `'\n'`, `'\u{1F600}'`, `'{'`), or a lifetime / label.
            let end = if next == Some('\\') {
                b[i + 2..].iter().position(|&c| c == '\'').map(|p| i + 2 + p + 1)
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 3)
            } else {
                None
            };
            match end {
                Some(end) => {
                    wipe(&mut out, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// At `i`, the start of a raw string (`r"`, `r#"`, `br##"`…): its number of `#` and where
/// its body begins.
fn raw_string_start(b: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if b.get(j) == Some(&'b') {
        j += 1;
    }
    if b.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|&&c| c == '#').count();
    (b.get(j + hashes) == Some(&'"')).then_some((hashes, j + hashes + 1))
}

/// Every function with a body in `src`.
fn functions(src: &str) -> Vec<Function> {
    let b = blank(src);
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let line_of = |at: usize| b[..at].iter().filter(|&&c| c == '\n').count() + 1;
    let mut out = Vec::new();
    for i in 0..b.len() {
        let starts_fn = b[i..].starts_with(&['f', 'n'])
            && (i == 0 || !ident(b[i - 1]))
            && b.get(i + 2).is_some_and(|c| c.is_whitespace());
        if !starts_fn {
            continue;
        }
        let mut j = i + 2;
        while j < b.len() && b[j].is_whitespace() {
            j += 1;
        }
        let name: String = b[j..].iter().take_while(|&&c| ident(c)).collect();
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        // The body's `{`, or the `;` of a declaration, outside the parameters and brackets.
        let mut depth = 0i32;
        let mut k = j + name.len();
        while k < b.len() {
            match b[k] {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '{' | ';' if depth == 0 => break,
                _ => {}
            }
            k += 1;
        }
        if k >= b.len() || b[k] == ';' {
            continue;
        }
        let mut braces = 0usize;
        let mut end = k;
        while end < b.len() {
            match b[end] {
                '{' => braces += 1,
                '}' => {
                    braces -= 1;
                    if braces == 0 {
                        break;
                    }
                }
                _ => {}
            }
            end += 1;
        }
        let (first, last) = (line_of(i), line_of(end.min(b.len() - 1)));
        out.push(Function { name, line: first, lines: last - first + 1 });
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The functions of the files below `dir` longer than `max` lines and not in `allowed`, as
/// `file:line name (n lines)`.
fn too_long(dir: &Path, max: usize, allowed: &[(&str, &str, &str)]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let rel = path.strip_prefix(dir).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for f in functions(&text) {
            let excused = allowed.iter().any(|(file, name, _)| *file == rel && *name == f.name);
            if f.lines > max && !excused {
                out.push(format!("{rel}:{} {} ({} lines)", f.line, f.name, f.lines));
            }
        }
    }
    out
}

#[test]
fn no_runtime_function_is_over_the_limit() {
    let dir = sinks_testkit::workspace_root().join("crates/sinks-runtime/src");
    let files = {
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        files
    };
    assert!(files.len() > 20, "found too few runtime sources under {}", dir.display());
    let long = too_long(&dir, MAX_LINES, ALLOWED);
    assert!(
        long.is_empty(),
        "runtime functions over {MAX_LINES} lines (split them into named steps, or name them in ALLOWED in \
         xtask/src/fn_length.rs with the reason): {long:?}"
    );
    for (file, name, why) in ALLOWED {
        assert!(!why.is_empty(), "ALLOWED names {file}::{name} without a reason");
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        assert!(
            functions(&text).iter().any(|f| f.name == *name && f.lines > MAX_LINES),
            "ALLOWED names {file}::{name}, which is gone or no longer over {MAX_LINES} lines"
        );
    }
}

#[test]
fn a_function_is_counted_from_fn_to_its_closing_brace() {
    let src = "//! doc\n\
               fn short() {\n    let _ = 1;\n}\n\
               \n\
               pub(crate) async fn long<T: Fn(u8) -> u8>(\n    f: T,\n    x: [u8; 2],\n) -> u8\nwhere\n    T: Copy,\n{\n    let _ = \"{ not a brace\";\n    let _ = '{';\n    // } nor this\n    /* { nor } this */\n    let _ = r#\"}\"#;\n    fn inner() {}\n    f(x[0])\n}\n\
               trait T {\n    fn declared(&self);\n    fn defaulted(&self) -> fn(u8) -> u8 {\n        |x| x\n    }\n}\n";
    let found = functions(src);
    let f = |name: &str, line: usize, lines: usize| Function { name: name.into(), line, lines };
    assert_eq!(found, vec![f("short", 2, 3), f("long", 6, 15), f("inner", 18, 1), f("defaulted", 23, 3)], "{src}");
}

#[test]
fn a_long_function_is_named_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("runner")).unwrap();
    let body = "    step();\n".repeat(101);
    std::fs::write(
        dir.path().join("runner/mod.rs"),
        format!("//! a\nfn fine() {{\n    step();\n}}\n\nfn run_inner() {{\n{body}}}\n"),
    )
    .unwrap();
    std::fs::write(dir.path().join("ok.rs"), "//! b\nfn exactly() {\n".to_owned() + &"    x();\n".repeat(98) + "}\n")
        .unwrap();
    assert_eq!(too_long(dir.path(), 100, &[]), vec!["runner/mod.rs:6 run_inner (103 lines)".to_owned()]);
    assert_eq!(too_long(dir.path(), 100, &[("runner/mod.rs", "run_inner", "why")]), Vec::<String>::new());
    assert_eq!(
        too_long(dir.path(), 99, &[("runner/mod.rs", "run_inner", "why")]),
        vec!["ok.rs:2 exactly (100 lines)".to_owned()]
    );
}
