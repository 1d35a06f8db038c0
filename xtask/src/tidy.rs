//! Tidy rules, enforced as a test so `cargo nextest run` checks them: every Rust file opens
//! with a `//!` doc line, no test is ignored or marked should-panic, every crate
//! uses the workspace lints, every sink crate has the same file roles (including its
//! certification harness and `tests/certify.rs`), every publishable crate has complete
//! crates.io metadata, and the crate boundaries hold: a sink crate's normal dependencies
//! reach neither async-nats, the runtime, the policy crate nor another sink; the contract,
//! toolkit, certification and policy crates reach none of async-nats, figment and
//! prometheus-client; the contract stays under its caps (dependencies, lines); the core
//! crates and the CLI library name no sink kind; the runtime's and the CLI library's public
//! API holds no async-nats type; and no product source file is over 1,200 lines.

#[cfg(test)]
pub(crate) mod tests {
    use std::path::{Path, PathBuf};

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("target") {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    fn files() -> Vec<PathBuf> {
        let root = sinks_testkit::workspace_root();
        let mut out = Vec::new();
        rust_files(&root.join("crates"), &mut out);
        rust_files(&root.join("bench"), &mut out);
        rust_files(&root.join("xtask"), &mut out);
        rust_files(&root.join("fuzz"), &mut out);
        assert!(out.len() > 10, "found too few Rust files under {}", root.display());
        out
    }

    #[test]
    fn every_file_starts_with_a_module_doc() {
        let bad: Vec<_> = files()
            .into_iter()
            .filter(|p| !std::fs::read_to_string(p).unwrap_or_default().starts_with("//!"))
            .collect();
        assert!(bad.is_empty(), "files without a leading `//!` doc: {bad:?}");
    }

    #[test]
    fn no_test_is_hidden_or_inverted() {
        let ignore = ["#[", "ignore]"].concat();
        let should_panic = ["#[", "should_panic"].concat();
        let bad: Vec<_> = files()
            .into_iter()
            .filter(|p| {
                let text = std::fs::read_to_string(p).unwrap_or_default();
                text.contains(&ignore) || text.contains(&should_panic)
            })
            .collect();
        assert!(bad.is_empty(), "files with ignored or should_panic tests: {bad:?}");
    }

    #[test]
    fn every_crate_uses_workspace_lints() {
        let root = sinks_testkit::workspace_root();
        let mut manifests: Vec<PathBuf> =
            std::fs::read_dir(root.join("crates")).unwrap().flatten().map(|e| e.path().join("Cargo.toml")).collect();
        manifests.push(root.join("bench/Cargo.toml"));
        manifests.push(root.join("xtask/Cargo.toml"));
        for m in manifests {
            let text = std::fs::read_to_string(&m).unwrap();
            assert!(text.contains("[lints]\nworkspace = true"), "{} lacks `[lints] workspace = true`", m.display());
        }
    }

    #[test]
    fn sink_crates_share_file_roles() {
        let root = sinks_testkit::workspace_root();
        let sinks: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("sink-")))
            .collect();
        assert!(!sinks.is_empty());
        for sink in sinks {
            let roles =
                ["src/lib.rs", "src/config.rs", "src/sink.rs", "src/error.rs", "src/factory.rs", "src/certify.rs"];
            for role in roles.into_iter().chain(["tests/certify.rs"]) {
                assert!(sink.join(role).is_file(), "{} lacks {role}", sink.display());
            }
        }
    }

    #[test]
    fn publishable_crates_have_complete_metadata() {
        let root = sinks_testkit::workspace_root();
        for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
            let manifest = entry.path().join("Cargo.toml");
            let text = std::fs::read_to_string(&manifest).unwrap();
            if text.contains("\npublish = false") {
                continue;
            }
            for key in [
                "\ndescription = ",
                "\nlicense.workspace = true",
                "\nrepository.workspace = true",
                "\nreadme.workspace = true",
                "\nkeywords = ",
                "\ncategories = ",
                "\n[package.metadata.docs.rs]",
            ] {
                assert!(text.contains(key), "{} lacks `{}` (crates.io metadata)", manifest.display(), key.trim());
            }
        }
    }

    /// `cargo metadata` of the workspace (resolved, with dependency kinds), for the host
    /// platform: offline, cargo has only the packages a build here downloaded, and not those
    /// of other platforms (Android's, Windows') that an unfiltered resolve lists.
    pub(crate) fn metadata() -> serde_json::Value {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
        let version = std::process::Command::new(rustc).arg("-vV").output().expect("run rustc -vV");
        let version = String::from_utf8_lossy(&version.stdout).into_owned();
        let host = version.lines().find_map(|l| l.strip_prefix("host: ")).expect("rustc -vV names the host").trim();
        let out = std::process::Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--locked", "--offline", "--filter-platform", host])
            .current_dir(sinks_testkit::workspace_root())
            .output()
            .expect("run cargo metadata");
        assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON")
    }

    /// Package name of every node, and the names of what each depends on through normal
    /// (non-dev, non-build) edges, transitively.
    fn normal_closure(meta: &serde_json::Value, package: &str) -> std::collections::BTreeSet<String> {
        use std::collections::{BTreeMap, BTreeSet};
        let names: BTreeMap<&str, &str> = meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
            .collect();
        let nodes: BTreeMap<&str, Vec<&str>> = meta["resolve"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                let normal = n["deps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()))
                    .map(|d| d["pkg"].as_str().unwrap())
                    .collect();
                (n["id"].as_str().unwrap(), normal)
            })
            .collect();
        let start = names.iter().find(|(_, n)| **n == package).map(|(id, _)| *id).expect("package in the workspace");
        let (mut seen, mut todo) = (BTreeSet::new(), vec![start]);
        while let Some(id) = todo.pop() {
            for dep in nodes.get(id).into_iter().flatten() {
                if seen.insert(*dep) {
                    todo.push(dep);
                }
            }
        }
        seen.into_iter().map(|id| names[id].to_owned()).collect()
    }

    fn sink_crates(meta: &serde_json::Value) -> Vec<String> {
        let members: Vec<&str> =
            meta["workspace_members"].as_array().unwrap().iter().filter_map(|m| m.as_str()).collect();
        meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| members.contains(&p["id"].as_str().unwrap()))
            .filter_map(|p| p["name"].as_str())
            .filter(|n| n.starts_with("sink-"))
            .map(str::to_owned)
            .collect()
    }

    /// Why `package`'s normal dependency closure breaks its boundary (`forbidden` names).
    fn reaches(meta: &serde_json::Value, package: &str, forbidden: &[&str]) -> Vec<String> {
        let closure = normal_closure(meta, package);
        forbidden.iter().filter(|f| closure.contains(**f)).map(|f| format!("{package} reaches {f}")).collect()
    }

    /// The workspace's packages that xtask may depend on: itself and the test support built
    /// without its `certify` feature. Every other member (`sinks-*`, `sink-*`, and
    /// `sinks-bench`, which links them) is the product or links it.
    const XTASK_MAY_USE: [&str; 2] = ["xtask", "sinks-testkit"];

    /// The workspace members among the packages of `tree` (`cargo tree --prefix none
    /// --format {p}`: one `name vX (path)` a line) that xtask may not use.
    fn product_crates_in(tree: &str, members: &[&str]) -> Vec<String> {
        let mut bad: Vec<String> = tree
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .filter(|name| members.contains(name) && !XTASK_MAY_USE.contains(name))
            .map(str::to_owned)
            .collect();
        bad.sort();
        bad.dedup();
        bad
    }

    /// `cargo xtask` compiles no product code: the tree cargo builds for xtask alone (its
    /// own feature resolution, which `cargo tree -p` shares with `cargo run -p`; the
    /// workspace-wide resolve of `cargo metadata` would show sinks-testkit's `certify`
    /// feature, which other members turn on) holds no workspace member but sinks-testkit.
    #[test]
    fn xtask_depends_on_no_product_crate() {
        let meta = metadata();
        let members: Vec<&str> = meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| meta["workspace_members"].as_array().unwrap().contains(&p["id"]))
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(members.contains(&"sinks-contract") && members.contains(&"sinks-bench"), "{members:?}");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = std::process::Command::new(cargo)
            .args(["tree", "-p", "xtask", "-e", "normal,build", "--prefix", "none", "--format", "{p}"])
            .args(["--locked", "--offline"])
            .current_dir(sinks_testkit::workspace_root())
            .output()
            .expect("run cargo tree");
        assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
        let tree = String::from_utf8_lossy(&out.stdout);
        assert!(tree.lines().any(|l| l.starts_with("sinks-testkit ")), "xtask's tree lacks sinks-testkit:\n{tree}");
        let bad = product_crates_in(&tree, &members);
        assert!(
            bad.is_empty(),
            "xtask's dependency tree holds product crates {bad:?}: what links the product belongs in sinks-bench \
             (run through `cargo xtask`), and sinks-testkit is used without its `certify` feature"
        );
        // The checker catches what it is there for: a sink and the contract under the
        // test support, but not the support itself or a crate from the registry.
        let sample = "xtask v0.1.0 (/w/xtask)\nsinks-testkit v0.1.0 (/w/crates/sinks-testkit)\n\
                      sinks-contract v0.1.0 (/w/crates/sinks-contract)\nsink-file v0.1.0 (/w/crates/sink-file)\n\
                      tokio v1.54.0\nsinks-contract v0.1.0 (/w/crates/sinks-contract) (*)\n";
        assert_eq!(product_crates_in(sample, &members), ["sink-file", "sinks-contract"]);
    }

    #[test]
    fn a_sink_crate_never_sees_nats_the_runtime_or_another_sink() {
        let meta = metadata();
        let sinks = sink_crates(&meta);
        assert!(sinks.len() >= 8, "found too few sink crates: {sinks:?}");
        let mut bad = Vec::new();
        for sink in &sinks {
            let mut forbidden = vec!["async-nats", "sinks-runtime", "sinks-policy", "figment", "prometheus-client"];
            forbidden.extend(sinks.iter().filter(|other| *other != sink).map(String::as_str));
            bad.extend(reaches(&meta, sink, &forbidden));
            assert!(normal_closure(&meta, sink).contains("sinks-contract"), "{sink} does not depend on sinks-contract");
        }
        assert!(bad.is_empty(), "crate boundaries broken: {bad:?}");
    }

    #[test]
    fn the_contract_and_the_policies_stay_free_of_the_runtime() {
        let meta = metadata();
        let forbidden = ["async-nats", "figment", "prometheus-client", "sinks-runtime", "sinks-testkit"];
        let mut bad = reaches(&meta, "sinks-contract", &forbidden);
        bad.extend(reaches(&meta, "sinks-contract", &["sinks-policy", "sinks-toolkit", "sinks-certify"]));
        bad.extend(reaches(&meta, "sinks-toolkit", &forbidden));
        bad.extend(reaches(&meta, "sinks-toolkit", &["sinks-policy", "sinks-certify"]));
        bad.extend(reaches(&meta, "sinks-certify", &forbidden));
        bad.extend(reaches(&meta, "sinks-policy", &forbidden));
        assert!(bad.is_empty(), "crate boundaries broken: {bad:?}");
        // The checker catches what it is there for: the runtime does reach async-nats.
        assert!(!reaches(&meta, "sinks-runtime", &["async-nats"]).is_empty());
    }

    /// Most normal dependencies the contract may declare: every one is also a dependency of
    /// every sink author.
    pub(crate) const CONTRACT_MAX_DEPENDENCIES: usize = 11;
    /// Most lines of the contract's sources (tests included): the trait, the envelope, the
    /// outcomes, errors, keys, payload modes, ordering keys and the config section fit. Raised
    /// from 3,000 when the envelope's attached documents became `json::JsonDoc` (canonical
    /// text, value on demand: 2,952 lines to 3,060), a type of the envelope, not a mechanic;
    /// and to 3,200 for the envelope's `Origin` (where an event was first stored, the key of
    /// `origin_sequence`) and the throttled failure class (3,097 to about 3,160); to 3,300
    /// for `Envelope::at_origin` (the event as its origin stored it, what an origin-keyed sink
    /// writes, so one event has one content whatever path delivered it: 3,244) and for reading
    /// a section with its problems (`config::deserialize_salvaged`: `validate` reports every
    /// problem at once); to 4,100 when the existing-key decision moved here from the toolkit
    /// (`existing.rs`, 600 lines with its tests: what a sink reports when its key already holds
    /// a record is part of what every sink author needs, and the toolkit's dependencies are
    /// not) and the factory became typed by the kind's config (3,993).
    pub(crate) const CONTRACT_MAX_LINES: usize = 4_100;

    /// The normal (non-dev, non-build) dependencies `package` declares, optional ones included.
    fn declared_dependencies(meta: &serde_json::Value, package: &str) -> Vec<String> {
        let p = meta["packages"].as_array().unwrap().iter().find(|p| p["name"] == package).expect("package");
        p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Lines of every Rust file below `crates/<package>/src`.
    fn source_lines(package: &str) -> usize {
        let mut files = Vec::new();
        rust_files(&sinks_testkit::workspace_root().join("crates").join(package).join("src"), &mut files);
        files.iter().map(|f| std::fs::read_to_string(f).unwrap().lines().count()).sum()
    }

    #[test]
    fn the_contract_stays_small() {
        let meta = metadata();
        let deps = declared_dependencies(&meta, "sinks-contract");
        assert!(
            deps.len() <= CONTRACT_MAX_DEPENDENCIES,
            "sinks-contract declares {} dependencies (cap {CONTRACT_MAX_DEPENDENCIES}): {deps:?}; a mechanic belongs in sinks-toolkit",
            deps.len()
        );
        let lines = source_lines("sinks-contract");
        assert!(
            lines <= CONTRACT_MAX_LINES,
            "sinks-contract has {lines} lines (cap {CONTRACT_MAX_LINES}); a mechanic belongs in sinks-toolkit"
        );
        // The checker catches what it is there for: the toolkit is over both caps.
        assert!(declared_dependencies(&meta, "sinks-toolkit").len() > CONTRACT_MAX_DEPENDENCIES);
        assert!(source_lines("sinks-toolkit") > CONTRACT_MAX_LINES);
    }

    /// Files whose `impl Sink` is a destination of its own, not a wrapper of another sink.
    const LEAF_SINKS: [&str; 3] =
        ["crates/sinks-runtime/src/blackhole.rs", "crates/sinks-certify/src/memory_sink.rs", "src/sink.rs"];

    /// The `impl … Sink for …` lines of `text` outside test modules that lack the lint which
    /// makes a forgotten method an error, each as its line number.
    fn unchecked_sink_impls(text: &str) -> Vec<usize> {
        let product = text.split("#[cfg(test)]").next().unwrap_or_default();
        let lines: Vec<&str> = product.lines().collect();
        let mut bad = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let l = line.trim_start();
            if l.starts_with("impl") && (l.contains(" Sink for ") || l.contains("::Sink for ")) {
                let above = &lines[i.saturating_sub(4)..i];
                if !above.iter().any(|a| a.contains("#[deny(clippy::missing_trait_methods)]")) {
                    bad.push(i + 1);
                }
            }
        }
        bad
    }

    #[test]
    fn every_sink_wrapper_forwards_every_method() {
        let root = sinks_testkit::workspace_root();
        let mut files = Vec::new();
        for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
            rust_files(&entry.path().join("src"), &mut files);
        }
        let mut bad = Vec::new();
        let mut wrappers = 0;
        for file in files {
            let rel = file.strip_prefix(&root).unwrap().display().to_string();
            let is_leaf = LEAF_SINKS.iter().any(|leaf| {
                rel == *leaf || (leaf.starts_with("src/") && rel.starts_with("crates/sink-") && rel.ends_with(leaf))
            });
            let text = std::fs::read_to_string(&file).unwrap();
            if text.contains("#[deny(clippy::missing_trait_methods)]") {
                wrappers += 1;
            }
            if !is_leaf {
                bad.extend(unchecked_sink_impls(&text).into_iter().map(|line| format!("{rel}:{line}")));
            }
        }
        assert!(bad.is_empty(), "wrappers of a sink must deny clippy::missing_trait_methods: {bad:?}");
        // Arc and Box (contract), Durable (toolkit), fan-out (runtime), the replay bound (bin).
        assert!(wrappers >= 4, "found only {wrappers} files with checked wrappers");
        // The checker catches what it is there for.
        let unchecked = "struct W;\n#[async_trait]\nimpl Sink for W {\n}\n";
        assert_eq!(unchecked_sink_impls(unchecked), vec![3]);
        let checked = "#[deny(clippy::missing_trait_methods)]\n#[async_trait]\nimpl Sink for W {\n}\n";
        assert!(unchecked_sink_impls(checked).is_empty());
    }

    /// Destination sink kinds, as a config's `type` names them.
    const SINK_KINDS: [&str; 9] =
        ["file", "mysql", "oracle", "http", "s3", "spool", "coherence", "oracle_nosql", "review_package"];

    /// `"kind"` literals outside test modules (everything from the first `#[cfg(test)]` on),
    /// except on a line that says it holds `not a sink kind` (JetStream's storage type `file`).
    fn kind_literals(text: &str) -> Vec<&'static str> {
        let product = text.split("#[cfg(test)]").next().unwrap_or_default();
        let lines: Vec<&str> = product.lines().filter(|l| !l.contains("not a sink kind")).collect();
        SINK_KINDS.iter().copied().filter(|k| lines.iter().any(|l| l.contains(&format!("\"{k}\"")))).collect()
    }

    #[test]
    fn the_core_crates_name_no_sink_kind() {
        let root = sinks_testkit::workspace_root();
        let mut bad = Vec::new();
        // (The policy crate is not checked: its URI profiles name schemes such as `file` and
        // `s3`, which are not sink kinds.)
        for krate in ["sinks-contract", "sinks-toolkit", "sinks-certify", "sinks-runtime", "sinks-cli"] {
            let mut files = Vec::new();
            rust_files(&root.join("crates").join(krate).join("src"), &mut files);
            assert!(!files.is_empty(), "no sources under {krate}");
            for file in files {
                let kinds = kind_literals(&std::fs::read_to_string(&file).unwrap());
                if !kinds.is_empty() {
                    bad.push(format!("{} names {kinds:?}", file.display()));
                }
            }
        }
        assert!(bad.is_empty(), "only the sink crates and the registrations of sinks-bin name sink kinds: {bad:?}");
        // The checker catches what it is there for.
        assert_eq!(kind_literals("const D: [(&str, u64); 1] = [(\"mysql\", 5)];"), vec!["mysql"]);
        assert!(kind_literals("fn f() {}\n#[cfg(test)]\nmod tests { const T: &str = \"file\"; }").is_empty());
        assert!(kind_literals("const S: &str = \"file\"; // JetStream's, not a sink kind").is_empty());
    }

    /// `text` with the contents of its string and character literals removed (raw strings
    /// too) and its line comments cut off, so neither a message nor a comment counts as a
    /// signature.
    fn code_only(text: &str) -> String {
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        let word = |c: char| c.is_alphanumeric() || c == '_';
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            if c == '/' && next == Some('/') {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            } else if c == 'r' && matches!(next, Some('#' | '"')) && !(i > 0 && word(chars[i - 1])) {
                let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
                let start = i + 2 + hashes;
                let body: String = chars.get(start..).unwrap_or_default().iter().collect();
                let len = body.find(&close).map_or(body.chars().count(), |at| body[..at].chars().count());
                out.push_str("\"\"");
                i = start + len + close.chars().count();
            } else if c == '"' {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                out.push_str("\"\"");
                i += 1;
            } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
                // A character literal ('"', '\n'); a lifetime has no closing quote.
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                out.push_str("' '");
                i += 1;
            } else {
                out.push(c);
                i += 1;
            }
        }
        out
    }

    /// The names `text` imports from async-nats (`use async_nats::…;`): each leaf, rename and
    /// module named through `self`. A `use` can follow an item in the text between two `;`
    /// (`}` then `use …`), so it is looked for anywhere in it, not only at its start.
    fn nats_imports(text: &str) -> Vec<String> {
        let mut names = Vec::new();
        for statement in text.split(';') {
            let Some(at) = statement.find("use async_nats") else { continue };
            if statement[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let tree = &statement[at + "use async_nats".len()..];
            for part in tree.split(['{', '}', ',']) {
                let part = part.trim();
                if let Some((_, rename)) = part.split_once(" as ") {
                    names.push(rename.trim().to_owned());
                    continue;
                }
                let segments: Vec<&str> = part.split("::").map(str::trim).filter(|s| !s.is_empty()).collect();
                match segments.as_slice() {
                    [.., parent, "self"] => names.push((*parent).to_owned()),
                    [.., leaf] if *leaf != "*" && *leaf != "self" => names.push((*leaf).to_owned()),
                    _ => {}
                }
            }
        }
        names
    }

    /// True when `signature` names async-nats: a path through `async_nats` or `jetstream::`,
    /// or a name `imports` brought in (not the name of a parameter or field, and not the last
    /// segment of another path).
    fn names_nats(signature: &str, imports: &[String]) -> bool {
        if signature.contains("async_nats") || signature.contains("jetstream::") {
            return true;
        }
        let word = |c: char| c.is_alphanumeric() || c == '_';
        imports.iter().any(|name| {
            signature.match_indices(name.as_str()).any(|(at, _)| {
                let before = signature[..at].chars().next_back();
                let rest = &signature[at + name.len()..];
                let after = rest.chars().next();
                let is_binding = rest.starts_with(':') && !rest.starts_with("::");
                !before.is_some_and(|c| word(c) || c == ':') && !after.is_some_and(word) && !is_binding
            })
        })
    }

    /// The public items of `text` (outside test modules; with the workspace's
    /// `unreachable_pub` lint every `pub` item is reachable) whose signature names an
    /// async-nats type, each as its line number: functions and methods, types, fields,
    /// constants, re-exports, whole enums and traits, and trait impls of this file's public
    /// types. `pub(crate)` items are not public API.
    fn nats_in_public_items(text: &str) -> Vec<usize> {
        let product = code_only(text.split("#[cfg(test)]").next().unwrap_or_default());
        let imports = nats_imports(&product);
        let lines: Vec<&str> = product.lines().collect();
        let public_types: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.trim_start().strip_prefix("pub struct ").or(l.trim_start().strip_prefix("pub enum ")))
            .map(|rest| rest.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or_default())
            .collect();
        // The text from line `i` to the first line ending in one of `ends`.
        let until = |i: usize, ends: &[char]| -> String {
            let mut joined = String::new();
            for line in &lines[i..] {
                joined.push_str(line.trim());
                joined.push(' ');
                if ends.iter().any(|e| line.trim_end().ends_with(*e)) {
                    break;
                }
            }
            joined
        };
        let mut bad = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let item = line.trim_start();
            let signature = if let Some(rest) = item.strip_prefix("pub ") {
                let keyword = rest.split_whitespace().next().unwrap_or_default();
                match keyword {
                    "fn" | "async" | "const" | "unsafe" | "type" | "static" | "use" | "mod" => {
                        until(i, &['{', ';']).split('{').next().unwrap_or_default().to_owned()
                    }
                    "enum" | "trait" => {
                        let (mut depth, mut body) = (0i32, String::new());
                        for line in &lines[i..] {
                            depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
                            body.push_str(line);
                            body.push(' ');
                            if depth == 0 && (body.contains('{') || line.trim_end().ends_with(';')) {
                                break;
                            }
                        }
                        body
                    }
                    "struct" => {
                        let header = until(i, &['{', ';']);
                        match header.split_once('(') {
                            // A tuple struct: only its `pub` fields are public.
                            Some((name, fields)) => {
                                let public: Vec<&str> =
                                    fields.split(',').filter(|f| f.trim_start().starts_with("pub ")).collect();
                                format!("{name} {}", public.join(","))
                            }
                            _ => header.split('{').next().unwrap_or_default().to_owned(),
                        }
                    }
                    // A field: `pub name: Type,`.
                    field if field.ends_with(':') => until(i, &[',', '{', ';']),
                    _ => continue,
                }
            } else if item.starts_with("impl") && item.contains(" for ") {
                let header = until(i, &['{']);
                let target = header.split(" for ").nth(1).unwrap_or_default();
                let name = target.trim().split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or_default();
                if !public_types.contains(&name) {
                    continue;
                }
                header.split('{').next().unwrap_or_default().to_owned()
            } else {
                continue;
            };
            if names_nats(&signature, &imports) {
                bad.push(i + 1);
            }
        }
        bad
    }

    /// The runtime and the CLI library keep async-nats out of their public API: a caller
    /// names only their own types (`StartAt`, `inspect::Connection`), so the NATS client can
    /// change without breaking a binary built on them.
    #[test]
    fn no_async_nats_type_in_the_public_api() {
        let root = sinks_testkit::workspace_root();
        let mut bad = Vec::new();
        for krate in ["sinks-runtime", "sinks-cli"] {
            let mut files = Vec::new();
            rust_files(&root.join("crates").join(krate).join("src"), &mut files);
            assert!(!files.is_empty(), "no sources under {krate}");
            for file in files {
                let lines = nats_in_public_items(&std::fs::read_to_string(&file).unwrap());
                bad.extend(lines.into_iter().map(|l| format!("{}:{l}", file.strip_prefix(&root).unwrap().display())));
            }
        }
        assert!(bad.is_empty(), "async-nats types in the public API (make them pub(crate) or wrap them): {bad:?}");
        // The checker catches what it is there for: the run options as they were, a client
        // returned, an imported context taken, a public field and an enum variant, but not
        // private or crate-visible items, messages, comments or parameter names.
        let old_options = "pub struct RunOptions {\n    /// Where.\n    pub start: Option<async_nats::jetstream::consumer::DeliverPolicy>,\n}\n";
        assert_eq!(nats_in_public_items(old_options), vec![3]);
        let client = "pub async fn connect(cfg: &NatsConfig) -> Result<async_nats::Client, ConnectError> {\n}";
        assert_eq!(nats_in_public_items(client), vec![1]);
        let imported = "use async_nats::jetstream::{self, Context};\npub fn open(\n    js: &Context,\n) -> Self {\n}\n";
        assert_eq!(nats_in_public_items(imported), vec![2]);
        let variant = "use async_nats::Subscriber;\npub enum E {\n    A(Subscriber),\n}\npub struct Bound {\n    pub consumer: PullConsumer,\n}\nuse async_nats::jetstream::consumer::PullConsumer;";
        assert_eq!(nats_in_public_items(variant), vec![2, 6]);
        let quiet = "use async_nats::jetstream::stream;\npub(crate) fn f(s: &stream::Stream) {}\npub struct Handle(jetstream::Context);\n\
                     /// Reads async_nats answers.\npub fn g(stream: &str) -> String { \"jetstream::x\".into() }\n\
                     fn h() -> async_nats::Client {}\npub fn q() -> char { '\"' }\npub const R: &str = r#\"async_nats::\"#;\n";
        assert!(nats_in_public_items(quiet).is_empty(), "{:?}", nats_in_public_items(quiet));
    }

    /// Asserts that sinks-certify's `file` defines `pub const NAME: &str = "value";`: xtask
    /// links no sinks-certify, so it names the variables the tests read itself.
    fn sinks_certify_defines(file: &str, name: &str, value: &str) {
        let source = sinks_testkit::workspace_root().join("crates/sinks-certify/src").join(file);
        let text = std::fs::read_to_string(&source).unwrap();
        let defined = format!("pub const {name}: &str = \"{value}\";");
        assert!(text.contains(&defined), "{} does not define `{defined}`", source.display());
    }

    /// The skip log's variable is the one the tests write to.
    #[test]
    fn the_skip_log_variable_is_the_one_sinks_certify_defines() {
        sinks_certify_defines("skips.rs", "SKIP_LOG_ENV", crate::SKIP_LOG_ENV);
    }

    /// The certification's results directory is the one the clause tests record in.
    #[test]
    fn the_certify_results_variable_is_the_one_sinks_certify_defines() {
        sinks_certify_defines("report.rs", "RESULTS_ENV", crate::CERTIFY_RESULTS_ENV);
    }

    /// Most lines of any product source file: a longer one mixes concerns.
    pub(crate) const MAX_FILE_LINES: usize = 1_200;

    #[test]
    fn no_product_source_file_is_over_1200_lines() {
        let root = sinks_testkit::workspace_root();
        let mut files = Vec::new();
        for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
            rust_files(&entry.path().join("src"), &mut files);
        }
        rust_files(&root.join("bench/src"), &mut files);
        rust_files(&root.join("xtask/src"), &mut files);
        assert!(files.len() > 50, "found too few source files");
        let long: Vec<String> = files
            .iter()
            .filter_map(|f| {
                let lines = std::fs::read_to_string(f).unwrap().lines().count();
                (lines > MAX_FILE_LINES).then(|| format!("{} ({lines} lines)", f.display()))
            })
            .collect();
        assert!(long.is_empty(), "split these by concern: {long:?}");
    }
}
