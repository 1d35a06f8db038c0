//! ARCHITECTURE.md kept true, as tests: its code map names every source file of every crate
//! and no file that does not exist, and its table of each crate's dependencies is what the
//! manifests declare (`XTASK_BLESS=1 cargo test -p xtask architecture` rewrites the table).
//! The claims of its prose a test can read are read too: the number of floors it states is
//! the number of floors of the product crates' graph, every line or dependency cap it states
//! is the constant the tidy test enforces, and every repository path it quotes (`crates/…`,
//! `xtask/…`, `docs/…`) exists.

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

    /// Counts ARCHITECTURE.md may spell in words.
    const NUMBER_WORDS: [&str; 13] =
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];

    /// The number `word` spells: digits (with thousands commas) or a number word.
    fn number(word: &str) -> Option<usize> {
        let word = word.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_ascii_lowercase();
        NUMBER_WORDS.iter().position(|w| *w == word).or_else(|| word.replace(',', "").parse().ok())
    }

    /// The crates of the product: every workspace member but the test servers, the bench and
    /// xtask, which stand apart.
    const APART: [&str; 3] = ["sinks-testkit", "sinks-bench", "xtask"];

    /// The floors of the product crates' graph: a crate with no product dependency is on the
    /// first floor, any other one floor above its highest dependency (optional ones included:
    /// a sink crate's `certify` feature brings sinks-certify).
    fn floors(meta: &serde_json::Value) -> usize {
        let members: Vec<&str> =
            meta["workspace_members"].as_array().unwrap().iter().filter_map(|m| m.as_str()).collect();
        let product: std::collections::BTreeMap<String, Vec<String>> = meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| members.contains(&p["id"].as_str().unwrap()))
            .filter(|p| !APART.contains(&p["name"].as_str().unwrap()))
            .map(|p| {
                let deps = p["dependencies"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|d| d["kind"].is_null())
                    .map(|d| d["name"].as_str().unwrap().to_owned())
                    .collect();
                (p["name"].as_str().unwrap().to_owned(), deps)
            })
            .collect();
        fn floor(name: &str, graph: &std::collections::BTreeMap<String, Vec<String>>, depth: usize) -> usize {
            assert!(depth <= graph.len(), "the crate graph has a cycle through {name}");
            let deps = graph.get(name).map(Vec::as_slice).unwrap_or_default();
            1 + deps.iter().filter(|d| graph.contains_key(*d)).map(|d| floor(d, graph, depth + 1)).max().unwrap_or(0)
        }
        product.keys().map(|name| floor(name, &product, 0)).max().unwrap_or(0)
    }

    /// What is wrong with the floors `doc` states (`N floors`) for a graph of `floors`.
    fn floor_problems(doc: &str, floors: usize) -> Vec<String> {
        let words: Vec<&str> = doc.split_whitespace().collect();
        let stated: Vec<usize> =
            words.windows(2).filter(|w| w[1].starts_with("floors")).filter_map(|w| number(w[0])).collect();
        if stated.is_empty() {
            return vec![format!("{DOC} states no number of floors; the crate graph has {floors}")];
        }
        stated
            .into_iter()
            .filter(|n| *n != floors)
            .map(|n| format!("{DOC} states {n} floors; the crate graph has {floors}"))
            .collect()
    }

    /// What is wrong with the caps `doc` states: `over N lines` is the cap of every file,
    /// `at N lines` the contract's, `N dependencies` after such a cap the contract's.
    fn cap_problems(doc: &str, file_lines: usize, contract_lines: usize, contract_deps: usize) -> Vec<String> {
        let words: Vec<&str> = doc.split_whitespace().collect();
        let mut problems = Vec::new();
        let mut stated = 0;
        for (i, w) in words.iter().enumerate().skip(2) {
            let Some(n) = number(words[i - 1]) else { continue };
            let before = words[i - 2];
            let (what, cap) = if w.starts_with("lines") && before == "over" {
                ("file", file_lines)
            } else if w.starts_with("lines") && before == "than" && words[i - 3] == "longer" {
                ("function", crate::fn_length::MAX_LINES)
            } else if w.starts_with("lines") && (before == "at" || before == "about") {
                ("contract", contract_lines)
            } else if w.starts_with("dependencies") && before == "and" && words[i - 3].starts_with("lines") {
                ("contract's dependency", contract_deps)
            } else {
                continue;
            };
            stated += 1;
            if before == "about" {
                problems.push(format!("{DOC} states the {what} cap as about {n}: a cap is exact ({cap})"));
            } else if n != cap {
                problems.push(format!("{DOC} states the {what} cap as {n}; the tidy test enforces {cap}"));
            }
        }
        if stated == 0 {
            problems.push(format!("{DOC} states no cap"));
        }
        problems
    }

    /// The repository paths `doc` quotes (`crates/…`, `xtask/…`, `docs/…` in backticks) that do
    /// not exist below `root`. A placeholder (`<sink>`) or a pattern (`*`) is no path.
    fn missing_paths(root: &Path, doc: &str) -> Vec<String> {
        doc.split('`')
            .skip(1)
            .step_by(2)
            .filter(|quoted| ["crates/", "xtask/", "docs/"].iter().any(|p| quoted.starts_with(p)))
            .filter(|quoted| !quoted.contains(['<', '*', ' ']))
            .map(|quoted| quoted.split("::").next().unwrap_or(quoted))
            .filter(|path| !root.join(path).exists())
            .map(|path| format!("{DOC} quotes `{path}`, which does not exist"))
            .collect()
    }

    #[test]
    fn the_floors_stated_are_the_floors_of_the_crate_graph() {
        let root = sinks_testkit::workspace_root();
        let doc = std::fs::read_to_string(root.join(DOC)).unwrap();
        let floors = floors(&crate::tidy::tests::metadata());
        assert!(floors >= 5, "the product has at least the contract, toolkit, runtime, CLI and binary floors");
        let problems = floor_problems(&doc, floors);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        // The check catches a wrong count, in words or digits, and a missing one.
        assert_eq!(
            floor_problems("Five floors, no arrow up", 6),
            ["ARCHITECTURE.md states 5 floors; the crate graph has 6"]
        );
        assert!(!floor_problems("6 floors, no arrow up", 7).is_empty());
        assert!(floor_problems("Six floors.", 6).is_empty());
        assert!(!floor_problems("Floors, no arrow up", 6).is_empty());
    }

    #[test]
    fn every_cap_stated_is_the_one_the_tidy_test_enforces() {
        use crate::tidy::tests::{CONTRACT_MAX_DEPENDENCIES, CONTRACT_MAX_LINES, MAX_FILE_LINES};
        let root = sinks_testkit::workspace_root();
        let doc = std::fs::read_to_string(root.join(DOC)).unwrap();
        let caps = (MAX_FILE_LINES, CONTRACT_MAX_LINES, CONTRACT_MAX_DEPENDENCIES);
        let problems = cap_problems(&doc, caps.0, caps.1, caps.2);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        // The check catches each wrong cap.
        let wrong = "no source file over 1,000 lines; a tidy test caps it at 3,000 lines and\nten dependencies";
        let problems = cap_problems(wrong, 1_200, 3_300, 11);
        assert_eq!(problems.len(), 3, "{problems:?}");
        let function = cap_problems("no function of the runtime longer than 120 lines", 1_200, 3_300, 11);
        assert_eq!(function, [format!("{DOC} states the function cap as 120; the tidy test enforces 100")]);
        assert!(
            problems[0].contains("file cap as 1000") && problems[1].contains("contract cap as 3000"),
            "{problems:?}"
        );
        assert!(problems[2].contains("dependency cap as 10"), "{problems:?}");
        assert!(cap_problems("caps it at about 3,300 lines", 1_200, 3_300, 11)[0].contains("a cap is exact"));
        assert!(cap_problems("no file over 1,200 lines", 1_200, 3_300, 11).is_empty());
        assert!(!cap_problems("no cap here", 1_200, 3_300, 11).is_empty());
    }

    #[test]
    fn every_repository_path_quoted_exists() {
        let root = sinks_testkit::workspace_root();
        let doc = std::fs::read_to_string(root.join(DOC)).unwrap();
        let problems = missing_paths(&root, &doc);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        // The check catches a path that does not exist, and reads past a placeholder.
        let sample = "`xtask/src/tidy.rs`, `crates/sinks-bin/deploy/grafana-dashboard.json`, `docs/<page>.md`, \
                      `crates/sinks-runtime/src/runner/settle.rs::Planner::plan`, `runner/gone.rs`";
        assert_eq!(
            missing_paths(&root, sample),
            ["ARCHITECTURE.md quotes `crates/sinks-bin/deploy/grafana-dashboard.json`, which does not exist"]
        );
    }
}
