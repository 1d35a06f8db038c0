//! ARCHITECTURE.md kept true, as tests: its code map names every source file of every crate
//! and no file that does not exist, and its table of each crate's dependencies is what the
//! manifests declare (`XTASK_BLESS=1 cargo test -p xtask architecture` rewrites the table).

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    const DOC: &str = "ARCHITECTURE.md";
    const DEPS_BEGIN: &str = "<!-- deps:begin (generated from the manifests; checked by xtask/src/architecture.rs) -->";
    const DEPS_END: &str = "<!-- deps:end -->";

    /// The text of each `### \`<dir>\`` section of the code map, by its directory.
    fn sections(doc: &str) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for line in doc.lines() {
            if let Some(dir) = line.strip_prefix("### `").and_then(|l| l.strip_suffix('`')) {
                out.push((dir.trim_end_matches('/').to_owned(), String::new()));
            } else if line.starts_with("## ") || line.starts_with("### ") {
                out.push((String::new(), String::new()));
            } else if let Some((_, text)) = out.last_mut() {
                text.push_str(line);
                text.push('\n');
            }
        }
        out.retain(|(dir, _)| !dir.is_empty());
        out
    }

    /// Every `.rs` file below `dir`, as its path relative to `dir`.
    fn sources(dir: &Path) -> Vec<String> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
            let Ok(entries) = std::fs::read_dir(dir) else { return };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(root, &path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path.strip_prefix(root).unwrap().to_string_lossy().into_owned());
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, dir, &mut out);
        out.sort();
        out
    }

    /// The words of `text` that look like a Rust file path (`pending.rs`, `runner/pending.rs`,
    /// `bench/src/bin/raw_nosql.rs`).
    fn named_files(text: &str) -> BTreeSet<String> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '/' || c == '.' || c == '-'))
            .filter(|w| w.ends_with(".rs") && w.len() > 3)
            .map(str::to_owned)
            .collect()
    }

    /// Whether `section` names the source file `file` (relative to its crate's `src/`): by its
    /// path, by its name, or, for a `mod.rs`, by its directory (`runner/`). A crate's root
    /// files (`lib.rs`, `main.rs`) need no mention.
    fn names(section: &str, file: &str) -> bool {
        let named = named_files(section);
        let name = file.rsplit('/').next().unwrap_or(file);
        match name {
            "lib.rs" | "main.rs" if !file.contains('/') => true,
            "mod.rs" => {
                let dir = file.trim_end_matches("mod.rs");
                section.contains(&format!("`{dir}")) || section.contains(&format!(" {dir}"))
            }
            _ => named.contains(file) || named.contains(name) || named.iter().any(|n| n.ends_with(&format!("/{file}"))),
        }
    }

    /// What is wrong with the code map: files it leaves out, files it names that do not exist.
    fn code_map_problems(root: &Path, doc: &str) -> Vec<String> {
        let mut problems = Vec::new();
        let sections = sections(doc);
        let mut crates: Vec<String> = std::fs::read_dir(root.join("crates"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().join("Cargo.toml").is_file())
            .map(|e| format!("crates/{}", e.file_name().to_string_lossy()))
            .collect();
        crates.push("bench".into());
        crates.push("xtask".into());
        crates.sort();
        for krate in &crates {
            let Some((_, section)) = sections.iter().find(|(dir, _)| dir == krate) else {
                problems.push(format!("{DOC} has no code map section for `{krate}`"));
                continue;
            };
            let src = root.join(krate).join("src");
            let files = sources(&src);
            for file in &files {
                if !names(section, file) {
                    problems.push(format!("{krate}: the code map does not name src/{file}"));
                }
            }
            for named in named_files(section) {
                let exists = files.iter().any(|f| *f == named || f.ends_with(&format!("/{named}")))
                    || root.join(&named).is_file()
                    || root.join(krate).join(&named).is_file();
                if !exists {
                    problems.push(format!("{krate}: the code map names {named}, which does not exist"));
                }
            }
        }
        problems
    }

    /// The table of every workspace crate's declared normal dependencies.
    fn deps_table(meta: &serde_json::Value) -> String {
        let members: Vec<&str> =
            meta["workspace_members"].as_array().unwrap().iter().filter_map(|m| m.as_str()).collect();
        let mut rows: Vec<(String, String)> = meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| members.contains(&p["id"].as_str().unwrap()))
            .map(|p| {
                let mut deps: Vec<String> = p["dependencies"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|d| d["kind"].is_null())
                    .map(|d| {
                        let name = d["rename"].as_str().unwrap_or_else(|| d["name"].as_str().unwrap());
                        if d["optional"].as_bool() == Some(true) { format!("{name}?") } else { name.to_owned() }
                    })
                    .collect();
                deps.sort();
                deps.dedup();
                (p["name"].as_str().unwrap().to_owned(), deps.join(", "))
            })
            .collect();
        rows.sort();
        let mut out = format!(
            "{DEPS_BEGIN}\n| crate | declared normal dependencies (`?`: optional, behind a feature) |\n|---|---|\n"
        );
        for (name, deps) in rows {
            out.push_str(&format!("| {name} | {deps} |\n"));
        }
        out.push_str(DEPS_END);
        out
    }

    #[test]
    fn the_code_map_names_every_file_and_only_files_that_exist() {
        let root = sinks_testkit::workspace_root();
        let doc = std::fs::read_to_string(root.join(DOC)).unwrap();
        let problems = code_map_problems(&root, &doc);
        assert!(problems.is_empty(), "{DOC} is out of date:\n{}", problems.join("\n"));
    }

    #[test]
    fn the_checker_catches_a_missing_and_a_stale_file() {
        let root = sinks_testkit::workspace_root();
        let doc = std::fs::read_to_string(root.join(DOC)).unwrap();
        // A file the map names, renamed in the text: one file missing, one that does not exist.
        let broken = doc.replacen("`guard.rs`", "`gaurd.rs`", 1);
        assert_ne!(broken, doc, "the map names `guard.rs`");
        let problems = code_map_problems(&root, &broken);
        assert!(problems.iter().any(|p| p.contains("does not name src/runner/guard.rs")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("gaurd.rs, which does not exist")), "{problems:?}");
        let without = broken.replace("### `crates/sink-file`", "### `crates/sink-filez`");
        assert!(
            code_map_problems(&root, &without).iter().any(|p| p.contains("no code map section for `crates/sink-file`"))
        );
    }

    #[test]
    fn the_dependency_table_is_what_the_manifests_declare() {
        let root = sinks_testkit::workspace_root();
        let path = root.join(DOC);
        let doc = std::fs::read_to_string(&path).unwrap();
        let want = deps_table(&crate::tidy::tests::metadata());
        let (Some(begin), Some(end)) = (doc.find(DEPS_BEGIN), doc.find(DEPS_END)) else {
            panic!("{DOC} has no dependency table between `{DEPS_BEGIN}` and `{DEPS_END}`; it should be:\n{want}");
        };
        let have = &doc[begin..end + DEPS_END.len()];
        if have != want && std::env::var_os("XTASK_BLESS").is_some() {
            std::fs::write(&path, format!("{}{want}{}", &doc[..begin], &doc[end + DEPS_END.len()..])).unwrap();
            return;
        }
        assert_eq!(
            have, want,
            "{DOC}'s dependency table is stale (XTASK_BLESS=1 cargo test -p xtask architecture rewrites it)"
        );
    }
}
