//! Packaging checks: `cargo xtask sizes` (the slim binaries' size table in
//! docs/operations.md), `cargo xtask deploy-check` (the systemd unit, the Kubernetes
//! manifests, the overlay configs, the Helm chart and the release workflow, all checked
//! offline) and `cargo xtask package-check` (the publishable crates packaged offline, in the
//! release workflow's order).
//!
//! `sizes` builds `nats-sink` once per sink feature (and once with every sink) with the
//! `dist` profile (fat LTO, one codegen unit, stripped) and writes the table; `sizes --check`
//! recomputes each row's dependency count from `cargo tree` and fails when the table misses a
//! sink or a count has drifted. `cargo xtask test` also builds the file-only binary (beside the
//! tests, at idle priority) and fails when it is over its 9.5 MiB budget or its row is off by
//! more than 1 %, so the table cannot silently fall behind the feature list, the dependency
//! tree or the code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Every sink feature of `sinks-bin`, each of which builds a slim binary on its own.
pub(crate) const SINK_FEATURES: &[&str] =
    &["file", "mysql", "http", "s3", "spool", "coherence", "nosql", "oracle", "review_package"];

/// The file-only binary's budget, stripped: 9.5 MiB, with no dependency forked for size
/// (issue 62 moved it from issue 46's 8 MiB to 9.5 MiB when the NATS client stopped being a
/// patched copy; it was 9.75 MiB while the Delta table writer was compiled into every build
/// of the file sink, until that writer went behind the `parquet` feature; docs/operations.md,
/// docs/dependencies.md).
pub(crate) const FILE_ONLY_BUDGET: u64 = 9 * 1024 * 1024 + 512 * 1024;
/// How far a measured size may be from its row before the table counts as stale.
const ROW_TOLERANCE: f64 = 0.01;

const TABLE_BEGIN: &str = "<!-- sizes:begin (cargo xtask sizes) -->";
const TABLE_END: &str = "<!-- sizes:end -->";
const OPERATIONS_DOC: &str = "docs/operations.md";

/// Options of `cargo xtask sizes`.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct SizesArgs {
    /// Check the table against the feature list and `cargo tree` without building.
    #[arg(long)]
    pub(crate) check: bool,
    /// Rewrite only the crate counts (no builds); measured sizes are kept.
    #[arg(long)]
    pub(crate) counts_only: bool,
    /// Measure only these rows (a sink feature, or `all`); keep the table's other rows.
    #[arg(long, value_delimiter = ',')]
    pub(crate) only: Vec<String>,
    /// With `--check`: also build the file-only binary and check it against its budget and
    /// its row (what `cargo xtask test` does).
    #[arg(long, requires = "check")]
    pub(crate) build_file: bool,
}

/// One binary of the table: its features, stripped size (when measured) and crate count.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    features: String,
    size_bytes: Option<u64>,
    crates: usize,
}

fn rows_wanted() -> Vec<String> {
    let mut rows: Vec<String> = SINK_FEATURES.iter().map(|f| (*f).to_owned()).collect();
    rows.push(SINK_FEATURES.join(","));
    rows
}

/// Runs `cargo xtask sizes`.
pub(crate) fn sizes(args: &SizesArgs) -> Result<()> {
    let root = sinks_testkit::workspace_root();
    let doc_path = root.join(OPERATIONS_DOC);
    let doc = std::fs::read_to_string(&doc_path).with_context(|| format!("reading {OPERATIONS_DOC}"))?;
    if args.check {
        let measured = if args.build_file { Some(build_file_only(&root, false)?) } else { None };
        return check_sizes(&root, &doc, measured);
    }
    let target = root.join("target/sizes");
    let kept = parse_table(&doc).unwrap_or_default();
    let mut rows = Vec::new();
    for features in rows_wanted() {
        let label = if features.contains(',') { "all" } else { features.as_str() };
        if args.counts_only {
            let size_bytes = kept.iter().find(|r| r.features == features).and_then(|r| r.size_bytes);
            rows.push(Row { crates: crate_count(&root, &features)?, features, size_bytes });
            continue;
        }
        if !args.only.is_empty() && !args.only.iter().any(|o| o == label) {
            if let Some(row) = kept.iter().find(|r| r.features == features) {
                rows.push(row.clone());
            }
            continue;
        }
        let size = build_dist(&target, &features, false)?;
        let crates = crate_count(&root, &features)?;
        eprintln!("sizes: {features}: {size} bytes, {crates} crates");
        rows.push(Row { features, size_bytes: Some(size), crates });
    }
    let updated = replace_table(&doc, &render(&rows))?;
    std::fs::write(&doc_path, updated)?;
    println!("{}", render(&rows));
    Ok(())
}

/// Builds `nats-sink` with `features` and the `dist` profile into `target` (as the table's
/// rows are built); at idle priority when `idle` (Linux `SCHED_IDLE` through `chrt`, else
/// `nice -n 19`): it then takes only CPU time that nothing else wants. Returns the stripped
/// binary's size in bytes.
fn build_dist(target: &Path, features: &str, idle: bool) -> Result<u64> {
    let mut cmd = cargo_command(idle);
    cmd.args(["build", "--locked", "--quiet", "--profile", "dist", "-p", "sinks-bin", "--no-default-features"])
        .args(["--features", features, "--target-dir"])
        .arg(target)
        .current_dir(sinks_testkit::workspace_root());
    let status = cmd.status().with_context(|| format!("building the `{features}` dist binary"))?;
    if !status.success() {
        bail!("building the `{features}` dist binary failed ({status})");
    }
    let binary = target.join("dist/nats-sink");
    Ok(std::fs::metadata(&binary).with_context(|| format!("reading {}", binary.display()))?.len())
}

/// A `cargo` command (the one running xtask), at idle priority when `idle`: Linux
/// `SCHED_IDLE` through `chrt`, else `nice -n 19`, so that it takes only CPU time nothing
/// else wants.
pub(crate) fn cargo_command(idle: bool) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    if idle && Path::new("/usr/bin/chrt").exists() {
        let mut c = Command::new("/usr/bin/chrt");
        c.args(["--idle", "0", &cargo]);
        c
    } else if idle {
        let mut c = Command::new("nice");
        c.args(["-n", "19", &cargo]);
        c
    } else {
        Command::new(&cargo)
    }
}

/// Builds the file-only `dist` binary into target/sizes (see [`build_dist`]); its size.
pub(crate) fn build_file_only(root: &Path, idle: bool) -> Result<u64> {
    let size = build_dist(&root.join("target/sizes"), "file", idle)?;
    eprintln!("sizes: the file-only dist binary is {size} bytes");
    Ok(size)
}

/// The problems of a measured file-only binary: over its budget, or off its row by more
/// than [`ROW_TOLERANCE`].
fn file_only_problems(size: u64, row: Option<&Row>) -> Vec<String> {
    let mut problems = Vec::new();
    if size > FILE_ONLY_BUDGET {
        problems.push(format!(
            "the file-only binary is {size} bytes, over its budget of {FILE_ONLY_BUDGET} (9.5 MiB): \
             see docs/operations.md for what each choice costs"
        ));
    }
    match row.and_then(|r| r.size_bytes) {
        Some(listed) if (size as f64 - listed as f64).abs() / listed as f64 > ROW_TOLERANCE => problems.push(format!(
            "`file`: the table says {}, this build measures {} (run `cargo xtask sizes --only file`)",
            megabytes(listed),
            megabytes(size)
        )),
        Some(_) => {}
        None => problems.push("`file`: the table has no measured size (run `cargo xtask sizes --only file`)".into()),
    }
    problems
}

fn megabytes(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / 1_000_000.0)
}

/// `sizes --check`: every row present with its crate count; with `measured` (the file-only
/// binary's size), that binary within its budget and its row.
pub(crate) fn check_sizes(root: &Path, doc: &str, measured: Option<u64>) -> Result<()> {
    let table = parse_table(doc)?;
    let mut problems = Vec::new();
    if let Some(size) = measured {
        problems.extend(file_only_problems(size, table.iter().find(|r| r.features == "file")));
    }
    for features in rows_wanted() {
        let crates = crate_count(root, &features)?;
        match table.iter().find(|r| r.features == features) {
            None => problems.push(format!("no row for features `{features}`")),
            Some(row) if row.crates != crates => {
                problems.push(format!("`{features}`: the table says {} crates, cargo tree counts {crates}", row.crates))
            }
            Some(row) if row.size_bytes.is_none() => {
                let label = if features.contains(',') { "all" } else { features.as_str() };
                eprintln!("sizes: `{features}` has no measured size yet (run `cargo xtask sizes --only {label}`)");
            }
            Some(_) => {}
        }
    }
    if !problems.is_empty() {
        bail!("{OPERATIONS_DOC} is out of date (run `cargo xtask sizes`): {}", problems.join("; "));
    }
    eprintln!("sizes: the table in {OPERATIONS_DOC} matches the features and the dependency tree");
    Ok(())
}

/// Distinct crates (name and version) in the normal and build dependencies of the binary.
fn crate_count(root: &Path, features: &str) -> Result<usize> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--locked", "-p", "sinks-bin", "--no-default-features", "--features", features])
        .args(["-e", "normal,build", "--prefix", "none", "-f", "{p}"])
        .current_dir(root)
        .output()
        .context("running cargo tree")?;
    if !out.status.success() {
        bail!("cargo tree failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let crates: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            Some(format!("{} {}", parts.next()?, parts.next()?))
        })
        .collect();
    Ok(crates.len())
}

fn render(rows: &[Row]) -> String {
    let mut md = String::from("| binary | features | stripped size | crates |\n|---|---|---:|---:|\n");
    for row in rows {
        let name = if row.features.contains(',') { "every sink".to_owned() } else { format!("{} only", row.features) };
        let size = row.size_bytes.map_or("not measured".to_owned(), megabytes);
        md.push_str(&format!("| {name} | `{}` | {size} | {} |\n", row.features, row.crates));
    }
    md
}

fn parse_table(doc: &str) -> Result<Vec<Row>> {
    let (start, end) = table_span(doc)?;
    let mut rows = Vec::new();
    for line in doc[start..end].lines().filter(|l| l.starts_with('|')).skip(2) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() != 4 {
            bail!("{OPERATIONS_DOC}: malformed size row `{line}`");
        }
        let size_bytes = cells[2]
            .strip_suffix(" MB")
            .and_then(|mb| mb.parse::<f64>().ok())
            .map(|mb| (mb * 1_000_000.0).round() as u64);
        rows.push(Row {
            features: cells[1].trim_matches('`').to_owned(),
            size_bytes,
            crates: cells[3].parse().with_context(|| format!("{OPERATIONS_DOC}: crate count in `{line}`"))?,
        });
    }
    Ok(rows)
}

fn table_span(doc: &str) -> Result<(usize, usize)> {
    let start = doc.find(TABLE_BEGIN).context("docs/operations.md has no sizes table marker")? + TABLE_BEGIN.len();
    let end = doc[start..].find(TABLE_END).context("docs/operations.md has no end marker for the sizes table")? + start;
    Ok((start, end))
}

fn replace_table(doc: &str, table: &str) -> Result<String> {
    let (start, end) = table_span(doc)?;
    Ok(format!("{}\n{}{}", &doc[..start], table, &doc[end..]))
}

/// Runs `cargo xtask deploy-check`: every deployment artifact, checked offline. With
/// `prebuilt`, the `nats-sink` in `target/debug` is used as it is (`cargo xtask test` runs this
/// right after the tests, on the binary their build made); otherwise it is built first.
pub(crate) fn deploy_check(prebuilt: bool) -> Result<()> {
    let root = sinks_testkit::workspace_root();
    let tools = crate::setup::deploy_tools()?;
    if !prebuilt {
        crate::cargo(&["build", "--locked", "-p", "sinks-bin"], &[])?;
    }
    let nats_sink = crate::debug_nats_sink();
    let scratch = tempfile::tempdir()?;

    // systemd: the unit with the binary path pointed at the built binary (verify checks that
    // the executable exists), for a named instance.
    let unit = std::fs::read_to_string(root.join("deploy/systemd/nats-sink@.service"))?;
    let unit_path = scratch.path().join("nats-sink@orders.service");
    std::fs::write(&unit_path, unit.replace("/usr/local/bin/nats-sink", &nats_sink.display().to_string()))?;
    run(Command::new("systemd-analyze").arg("verify").arg(&unit_path), "systemd-analyze verify")?;
    eprintln!("deploy-check: systemd unit verified");

    // Kubernetes: render every overlay, validate every object against the API schema, and
    // validate each overlay's nats-sink config with the binary.
    let overlays = root.join("deploy/kubernetes/overlays");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&overlays)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    names.sort();
    for overlay in &names {
        let name = overlay.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let rendered = output(tools.kustomize(overlay), "kustomize build")?;
        let file = scratch.path().join(format!("{name}.yaml"));
        std::fs::write(&file, rendered)?;
        run(
            Command::new(&tools.kubernetes_validate).args(["--strict", "-k", KUBERNETES_VERSION]).arg(&file),
            "kubernetes-validate",
        )?;
        let config = overlay.join("config.json");
        run(&mut validate_command(&nats_sink, &config)?, &format!("nats-sink validate {name}"))?;
        eprintln!(
            "deploy-check: overlay {name} renders, validates against Kubernetes {KUBERNETES_VERSION}, config valid"
        );
    }
    let wanted: BTreeSet<String> = SINK_FEATURES.iter().map(|s| (*s).to_owned()).collect();
    let have: BTreeSet<String> =
        names.iter().filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())).collect();
    if let Some(missing) = wanted.difference(&have).next() {
        bail!("deploy/kubernetes/overlays has no overlay for the `{missing}` sink");
    }

    helm_check(&root, &tools, &nats_sink, scratch.path())?;

    // Prometheus: the alert rules load, and their unit tests (each alert fires on the series
    // that should raise it, and only on those) pass.
    let rules = root.join("deploy/prometheus");
    run(
        Command::new("promtool").arg("check").arg("rules").arg(rules.join("nats-sink-alerts.yaml")),
        "promtool check rules",
    )?;
    run(
        Command::new("promtool").arg("test").arg("rules").arg("nats-sink-alerts.test.yaml").current_dir(&rules),
        "promtool test rules",
    )?;
    eprintln!("deploy-check: the Prometheus alert rules load and pass their unit tests");

    // The GitHub workflows.
    run(Command::new(&tools.actionlint).current_dir(&root), "actionlint")?;
    eprintln!("deploy-check: workflows pass actionlint");
    Ok(())
}

/// `nats-sink validate CONFIG` with every variable the config names (the values of its
/// `*_env` fields) set to a placeholder: in the cluster they come from a Secret, and
/// `validate` refuses a config whose variables are unset.
fn validate_command(nats_sink: &Path, config: &Path) -> Result<Command> {
    let text = std::fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", config.display()))?;
    let mut names = BTreeSet::new();
    env_names(&value, false, &mut names);
    let mut command = Command::new(nats_sink);
    command.arg("validate").arg(config);
    for name in names {
        command.env(name, "deploy-check-placeholder");
    }
    Ok(command)
}

/// The variable names in `value`: string values of fields ending in `_env`, and the values
/// of maps under such fields (`headers_env`: header → variable).
fn env_names(value: &serde_json::Value, under_env: bool, names: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::String(s) if under_env => {
            names.insert(s.clone());
        }
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                env_names(v, under_env || key.ends_with("_env"), names);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| env_names(v, under_env, names)),
        _ => {}
    }
}

/// The Kubernetes API version the manifests are validated against.
const KUBERNETES_VERSION: &str = "1.34.1";

/// The Helm chart, relative to the workspace root; `ci/<sink>-values.yaml` holds one
/// example values file per sink feature.
const HELM_CHART: &str = "deploy/helm/nats-sink";

/// The Helm part of `deploy-check`: for every `ci/*-values.yaml` of the chart, `helm lint
/// --strict` with it, `helm template` it, validate every rendered object against the API
/// schema, and validate the config of the rendered ConfigMap with `nats-sink validate`.
/// Fails naming the values file (and the object, when one is at fault).
fn helm_check(root: &Path, tools: &crate::setup::DeployTools, nats_sink: &Path, scratch: &Path) -> Result<()> {
    let chart = root.join(HELM_CHART);
    let ci = chart.join("ci");
    let mut values: Vec<PathBuf> = std::fs::read_dir(&ci)
        .with_context(|| format!("reading {HELM_CHART}/ci"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().ends_with("-values.yaml")))
        .collect();
    values.sort();
    for sink in SINK_FEATURES {
        if !ci.join(format!("{sink}-values.yaml")).is_file() {
            bail!("{HELM_CHART}/ci has no {sink}-values.yaml for the `{sink}` sink");
        }
    }
    // helm keeps no state between these commands: its cache and config go to the scratch dir.
    let helm = |args: &[&str], values: Option<&Path>| {
        let mut cmd = Command::new(&tools.helm);
        cmd.args(args)
            .arg(&chart)
            .args(["--kube-version", KUBERNETES_VERSION])
            .env("HELM_CACHE_HOME", scratch.join("helm/cache"))
            .env("HELM_CONFIG_HOME", scratch.join("helm/config"))
            .env("HELM_DATA_HOME", scratch.join("helm/data"));
        if let Some(values) = values {
            cmd.arg("--values").arg(values);
        }
        cmd
    };
    // With the default values (no sink chosen) the chart's required-value failures are lint
    // information, not errors; the metadata and template syntax are still checked.
    helm_output(helm(&["lint", "--strict", "--quiet"], None), &format!("helm lint --strict {HELM_CHART}"))?;
    for file in &values {
        let name = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let sink = name.trim_end_matches("-values.yaml");
        let label = format!("{HELM_CHART}/ci/{name}");
        helm_output(helm(&["lint", "--strict", "--quiet"], Some(file)), &format!("helm lint --strict with {label}"))?;
        // A release name is a DNS label: `review_package` is released as `review-package`.
        let release = format!("nats-sink-{}", sink.replace('_', "-"));
        let rendered = helm_output(
            helm(&["template", &release, "--namespace", "nats-sinks"], Some(file)),
            &format!("helm template with {label}"),
        )?;
        let rendered = String::from_utf8(rendered).with_context(|| format!("helm template with {label}: not utf-8"))?;
        let manifest = scratch.join(format!("helm-{sink}.yaml"));
        std::fs::write(&manifest, &rendered)?;
        validate_objects(tools, &manifest, &label)?;
        let (configmap, config) = rendered_config(&rendered).with_context(|| format!("{label}: rendered manifests"))?;
        let config_path = scratch.join(format!("helm-{sink}-config.json"));
        std::fs::write(&config_path, config)?;
        run(
            &mut validate_command(nats_sink, &config_path)?,
            &format!("nats-sink validate of configmap/{configmap} rendered with {label}"),
        )?;
        eprintln!(
            "deploy-check: chart with {name} lints, renders, validates against Kubernetes {KUBERNETES_VERSION}, config valid"
        );
    }
    Ok(())
}

/// Runs a helm command and returns its standard output; on failure the error is one line:
/// `what` and helm's messages (stdout then stderr, blank lines and the `--debug` hint left out).
fn helm_output(mut cmd: Command, what: &str) -> Result<Vec<u8>> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let lines: Vec<&str> =
            text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("Use --debug flag")).collect();
        bail!("{what} failed: {}", lines.join("; "));
    }
    Ok(out.stdout)
}

/// Validates every object of `manifest` against the Kubernetes API schema; on failure the
/// error names `label` and keeps only the validator's lines about failing objects (each names
/// its kind and name).
fn validate_objects(tools: &crate::setup::DeployTools, manifest: &Path, label: &str) -> Result<()> {
    let out = Command::new(&tools.kubernetes_validate)
        .args(["--strict", "-k", KUBERNETES_VERSION])
        .arg(manifest)
        .output()
        .context("running kubernetes-validate")?;
    if !out.status.success() {
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let problems: Vec<&str> = text.lines().filter(|l| !l.starts_with("INFO")).collect();
        bail!("kubernetes-validate of the objects rendered with {label} failed: {}", problems.join("; "));
    }
    Ok(())
}

/// The name and `config.json` of the one ConfigMap in helm's rendered `manifests`.
fn rendered_config(manifests: &str) -> Result<(String, String)> {
    use serde::Deserialize;
    let mut configs = Vec::new();
    for document in serde_yaml::Deserializer::from_str(manifests) {
        let object = serde_yaml::Value::deserialize(document).context("parsing the yaml")?;
        if object.get("kind").and_then(serde_yaml::Value::as_str) != Some("ConfigMap") {
            continue;
        }
        let name = object.get("metadata").and_then(|m| m.get("name")).and_then(serde_yaml::Value::as_str);
        let config = object.get("data").and_then(|d| d.get("config.json")).and_then(serde_yaml::Value::as_str);
        let name = name.unwrap_or("?").to_owned();
        match config {
            Some(config) => configs.push((name, config.to_owned())),
            None => bail!("configmap/{name} has no data key config.json"),
        }
    }
    match configs.len() {
        1 => Ok(configs.remove(0)),
        n => bail!("{n} ConfigMaps with a config.json rendered, expected one"),
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let program = cmd.get_program().to_string_lossy().into_owned();
            bail!("{program} is not installed: {}", system_tool_hint(&program));
        }
        Err(e) => return Err(e).with_context(|| format!("running {what}")),
    };
    if !out.status.success() {
        bail!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// A crate replaced by `[patch.crates-io]` is built from its local copy, so a build never
/// reads its registry entry; packaging resolves it against crates.io as publishing will, and
/// offline that needs the entry cached (a fresh machine has none): this reads it once.
pub(crate) fn cache_patched_entries(root: &Path) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).context("reading Cargo.toml")?;
    for name in patched_crates(&manifest) {
        let mut info = Command::new(&cargo);
        info.args(["info", "--quiet", "--registry", "crates-io", &name]).current_dir(std::env::temp_dir());
        output(info, &format!("cargo info {name}"))?;
    }
    Ok(())
}

/// What installs a system tool `deploy-check` runs (a Debian package: it needs root, so
/// `.ci/run` installs it, not `cargo xtask setup`).
fn system_tool_hint(program: &str) -> &'static str {
    match program {
        "promtool" => "`apt-get install prometheus` installs it (as .ci/run does)",
        "systemd-analyze" => "`apt-get install systemd` installs it",
        _ => "`cargo xtask setup` installs the tools it can; .ci/run lists the Debian packages",
    }
}

/// The names of the crates the manifest's `[patch.crates-io]` section replaces.
fn patched_crates(manifest: &str) -> Vec<String> {
    let Some(start) = manifest.find("\n[patch.crates-io]") else { return Vec::new() };
    manifest[start + 1..]
        .lines()
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter_map(|l| {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                return None;
            }
            l.split('=').next().map(|n| n.trim().trim_matches('"').to_owned())
        })
        .filter(|n| !n.is_empty())
        .collect()
}

fn output(mut cmd: Command, what: &str) -> Result<Vec<u8>> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(out.stdout)
}

/// Runs `cargo xtask man`: the man page of `nats-sink`, generated from its clap definitions,
/// to `target/man/nats-sink.1`.
pub(crate) fn man() -> Result<()> {
    let root = sinks_testkit::workspace_root();
    crate::cargo(&["build", "--locked", "-p", "sinks-bin"], &[])?;
    let page = output(
        {
            let mut cmd = Command::new(crate::debug_nats_sink());
            cmd.arg("man");
            cmd
        },
        "nats-sink man",
    )?;
    let dir = root.join("target/man");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("nats-sink.1");
    std::fs::write(&path, page)?;
    println!("{}", path.display());
    Ok(())
}

/// Runs `cargo xtask package-check`: every publishable crate packages (`cargo package
/// --no-verify --offline`, the workspace's own crates resolved from each other), and the
/// release workflow publishes exactly those crates, each after the workspace crates it depends
/// on.
pub(crate) fn package_check() -> Result<()> {
    let root = sinks_testkit::workspace_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut metadata = Command::new(&cargo);
    metadata.args(["metadata", "--format-version", "1", "--no-deps", "--offline"]).current_dir(&root);
    let metadata: serde_json::Value = serde_json::from_slice(&output(metadata, "cargo metadata")?)?;
    let packages = metadata["packages"].as_array().context("cargo metadata lists no packages")?;
    let members: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    // `publish = false` reads as an empty registry list; absent, as null.
    let publishable: Vec<&serde_json::Value> = packages.iter().filter(|p| p["publish"].is_null()).collect();
    let private: Vec<&str> =
        packages.iter().filter(|p| !p["publish"].is_null()).filter_map(|p| p["name"].as_str()).collect();
    for name in ["sinks-testkit", "sinks-bench", "xtask"] {
        if !private.contains(&name) {
            bail!("{name} must stay `publish = false`");
        }
    }

    // The release workflow's publish order.
    let workflow = std::fs::read_to_string(root.join(".github/workflows/release.yml"))?;
    let list = workflow
        .split_once("for crate in ")
        .and_then(|(_, rest)| rest.split_once("; do"))
        .map(|(list, _)| list)
        .context("release.yml has no `for crate in …; do` publish loop")?;
    let order: Vec<&str> = list.split_whitespace().filter(|w| *w != "\\").collect();
    let wanted: BTreeSet<&str> = publishable.iter().filter_map(|p| p["name"].as_str()).collect();
    let listed: BTreeSet<&str> = order.iter().copied().collect();
    if wanted != listed {
        bail!(
            "release.yml publishes {listed:?}, but the publishable crates are {wanted:?} (`publish = false` marks the others)"
        );
    }
    for package in &publishable {
        let name = package["name"].as_str().unwrap_or_default();
        let at = order.iter().position(|c| *c == name).unwrap_or_default();
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            if dep["kind"].as_str() == Some("dev") || !members.contains(dep_name) || dep_name == name {
                continue;
            }
            if !order[..at].contains(&dep_name) {
                bail!("release.yml publishes {name} before {dep_name}, which it depends on");
            }
        }
    }
    eprintln!("package-check: release.yml publishes the {} publishable crates in dependency order", order.len());

    cache_patched_entries(&root)?;
    let mut args = vec!["package", "--workspace", "--no-verify", "--allow-dirty", "--offline", "--quiet"];
    for name in &private {
        args.extend(["--exclude", name]);
    }
    crate::cargo(&args, &[])?;
    eprintln!("package-check: {} crates packaged into target/package", order.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_is_one_line_naming_what_installs_it() {
        let e = run(&mut Command::new("nats-sinks-no-such-tool"), "a tool").unwrap_err().to_string();
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.starts_with("nats-sinks-no-such-tool is not installed: ") && e.contains("cargo xtask setup"), "{e}");
        assert!(system_tool_hint("promtool").contains("apt-get install prometheus"));
    }

    #[test]
    fn the_file_only_binary_fails_over_its_budget_or_off_its_row() {
        let row =
            |mb: f64| Row { features: "file".into(), size_bytes: Some((mb * 1_000_000.0).round() as u64), crates: 1 };
        assert!(file_only_problems(8_272_504, Some(&row(8.27))).is_empty());
        assert!(file_only_problems(9_961_472, Some(&row(9.96))).is_empty(), "9.5 MiB exactly is within");
        // Over 9.5 MiB, even when the table agrees.
        let over = file_only_problems(9_961_473, Some(&row(9.96)));
        assert_eq!(over.len(), 1, "{over:?}");
        assert!(over[0].contains("over its budget"), "{over:?}");
        // Under budget, but the table is stale (more than 1 % off), either way.
        for listed in [8.0, 8.5] {
            let stale = file_only_problems(8_272_504, Some(&row(listed)));
            assert_eq!(stale.len(), 1, "{stale:?}");
            assert!(stale[0].contains("cargo xtask sizes --only file"), "{stale:?}");
        }
        assert_eq!(file_only_problems(8_272_504, None).len(), 1, "no row");
    }

    #[test]
    fn sizes_read_back_as_written() {
        let rows = vec![
            Row { features: "file".into(), size_bytes: Some(8_272_504), crates: 250 },
            Row { features: "mysql".into(), size_bytes: None, crates: 290 },
        ];
        let doc = format!("x\n{TABLE_BEGIN}\nold\n{TABLE_END}\ny\n");
        let back = parse_table(&replace_table(&doc, &render(&rows)).unwrap()).unwrap();
        assert_eq!(back[0].size_bytes, Some(8_270_000), "two decimals of MB");
        assert_eq!(back[1], rows[1]);
    }

    #[test]
    fn patched_crates_are_read_from_the_patch_section_only() {
        let manifest = "[workspace]\nmembers = []\n\n[patch.crates-io]\n# vendored\n\"a-crate\" = { path = \"v/a\" }\nb = { git = \"x\" }\n\n[profile.dist]\nlto = \"fat\"\n";
        assert_eq!(patched_crates(manifest), ["a-crate", "b"]);
        assert!(patched_crates("[workspace]\nmembers = []\n").is_empty());
        // The workspace's own manifest: only the vendored NoSQL SDK (a durability fix,
        // docs/nosql-sink.md); no dependency is forked for size (docs/dependencies.md).
        let ours = std::fs::read_to_string(sinks_testkit::workspace_root().join("Cargo.toml")).unwrap();
        assert_eq!(patched_crates(&ours), ["oracle-nosql-rust-sdk"]);
    }
}
