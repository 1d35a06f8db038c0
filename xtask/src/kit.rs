//! `cargo xtask sink-kit`: the crates a sink written outside this repository builds on, as a
//! local registry a team can use before they are published (docs/writing-a-sink.md).
//!
//! The kit is every crate of [`KIT`] packaged as it would be published (`cargo package`, the
//! same `.crate` files `cargo publish` uploads), in cargo's local-registry layout: the
//! `.crate` files, and an `index/` with one entry per crate made from its manifest (its
//! dependencies on other kit crates point into the kit, the rest at crates.io). A sink's
//! repository names the kit in its `.cargo/config.toml` (source replacement of a registry
//! called `nats-sinks`, [`CONFIG`]) and depends on `sinks-cli = { version = "0.1", registry =
//! "nats-sinks" }`: no path into this repository, and once the crates are on crates.io, the
//! `registry` keys and that file go. `sinks-testkit` is not in the kit: an outside sink starts
//! its own nats-server in its tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The crates a sink author needs, and the workspace crates they depend on.
pub(crate) const KIT: [&str; 6] =
    ["sinks-contract", "sinks-toolkit", "sinks-certify", "sinks-policy", "sinks-runtime", "sinks-cli"];

/// The name of the registry a sink's manifest names for the kit's crates.
pub(crate) const REGISTRY: &str = "nats-sinks";

/// The `.cargo/config.toml` of a sink that takes the kit from `./nats-sinks-kit` (the
/// registry's URL is only its name in `Cargo.lock`: nothing is fetched from it).
pub(crate) const CONFIG: &str = r#"# The crates of the `nats-sinks` registry come from the kit `cargo xtask sink-kit` made in a
# nats-sinks checkout (docs/writing-a-sink.md), until they are published on crates.io: then
# delete this file and the `registry = "nats-sinks"` of each dependency.
[registries.nats-sinks]
index = "sparse+https://nats-sinks.invalid/index/"

[source.nats-sinks]
registry = "sparse+https://nats-sinks.invalid/index/"
replace-with = "nats-sinks-kit"

[source.nats-sinks-kit]
local-registry = "nats-sinks-kit"
"#;

/// crates.io's index, as an index entry names a dependency's registry.
const CRATES_IO: &str = "https://github.com/rust-lang/crates.io-index";

/// Options of `cargo xtask sink-kit`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The kit's directory (replaced); by default `target/sink-kit`.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs `cargo xtask sink-kit`.
pub(crate) fn run(args: &Args) -> Result<()> {
    let out = args.out.clone().unwrap_or_else(|| crate::target_dir().join("sink-kit"));
    let made = make(&out)?;
    eprintln!("sink-kit: {} crates in {}: {}", made.len(), out.display(), made.join(", "));
    eprintln!(
        "sink-kit: depend on `sinks-cli = {{ version = \"0.1\", registry = \"{REGISTRY}\" }}` (and the others), and \
         name the kit in your sink's .cargo/config.toml (a copy of the kit as ./nats-sinks-kit beside it):\n\n{CONFIG}"
    );
    Ok(())
}

/// Packages the kit's crates and writes them as a local registry into `out` (replacing what
/// is there); returns the `name-version` of each.
pub(crate) fn make(out: &Path) -> Result<Vec<String>> {
    let root = sinks_testkit::workspace_root();
    crate::ops::cache_patched_entries(&root)?;
    let mut args = vec!["package", "--no-verify", "--allow-dirty", "--offline", "--quiet"];
    for name in KIT {
        args.extend(["-p", name]);
    }
    crate::cargo(&args, &[])?;
    let metadata = metadata(&root)?;
    let packages = metadata["packages"].as_array().context("cargo metadata lists no packages")?;
    let members: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("removing {}", out.display()))?;
    }
    std::fs::create_dir_all(out.join("index"))?;
    let mut made = Vec::new();
    for name in KIT {
        let package = packages
            .iter()
            .find(|p| p["name"].as_str() == Some(name))
            .with_context(|| format!("{name} is not a workspace member"))?;
        let version = package["version"].as_str().unwrap_or_default();
        let file = format!("{name}-{version}.crate");
        let packed = crate::target_dir().join("package").join(&file);
        let bytes = std::fs::read(&packed).with_context(|| format!("reading {}", packed.display()))?;
        std::fs::write(out.join(&file), &bytes)?;
        let entry = index_entry(package, &members, &format!("{:x}", Sha256::digest(&bytes)))?;
        let at = out.join("index").join(index_path(name));
        std::fs::create_dir_all(at.parent().unwrap_or(out))?;
        std::fs::write(&at, format!("{}\n", serde_json::to_string(&entry)?))?;
        made.push(format!("{name}-{version}"));
    }
    Ok(made)
}

/// `cargo metadata --no-deps` of the workspace.
fn metadata(root: &Path) -> Result<Value> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Where cargo's index layout keeps the entries of crate `name`.
fn index_path(name: &str) -> PathBuf {
    let name = name.to_ascii_lowercase();
    match name.len() {
        1 => PathBuf::from("1").join(&name),
        2 => PathBuf::from("2").join(&name),
        3 => PathBuf::from("3").join(&name[..1]).join(&name),
        _ => PathBuf::from(&name[..2]).join(&name[2..4]).join(&name),
    }
}

/// The index entry of workspace `package` (from `cargo metadata`), whose `.crate` file has
/// the SHA-256 `cksum`: its normal and build dependencies (a workspace member is in the kit,
/// the rest on crates.io; dev-dependencies are not resolved for a registry crate) and its
/// features.
fn index_entry(package: &Value, members: &[&str], cksum: &str) -> Result<Value> {
    let name = package["name"].as_str().unwrap_or_default();
    let mut deps = Vec::new();
    for dep in package["dependencies"].as_array().into_iter().flatten() {
        let kind = dep["kind"].as_str().unwrap_or("normal");
        if kind == "dev" {
            continue;
        }
        let crate_name = dep["name"].as_str().unwrap_or_default();
        let registry = if members.contains(&crate_name) {
            if !KIT.contains(&crate_name) {
                bail!("{name} depends on {crate_name}, a workspace crate the kit does not have (kit::KIT)");
            }
            Value::Null
        } else {
            json!(CRATES_IO)
        };
        let (as_name, package_name) = match dep["rename"].as_str() {
            Some(rename) => (rename, json!(crate_name)),
            None => (crate_name, Value::Null),
        };
        deps.push(json!({
            "name": as_name,
            "req": dep["req"],
            "features": dep["features"],
            "optional": dep["optional"],
            "default_features": dep["uses_default_features"],
            "target": dep["target"],
            "kind": kind,
            "registry": registry,
            "package": package_name,
        }));
    }
    let features: BTreeMap<String, Value> =
        package["features"].as_object().map(|f| f.clone().into_iter().collect()).unwrap_or_default();
    Ok(json!({
        "name": name,
        "vers": package["version"],
        "deps": deps,
        "cksum": cksum,
        "features": features,
        "yanked": false,
        "links": package["links"],
        "rust_version": package["rust_version"],
        "v": 2,
    }))
}

/// `lock` (a `Cargo.lock`'s text) without the packages of the kit's registry: a kit made from
/// another commit holds other files under the same versions, whose checksums a lock pins, so
/// a sink that takes a new kit lets cargo record its crates again (everything else stays
/// pinned).
pub(crate) fn without_kit_entries(lock: &str) -> String {
    let mut out = String::new();
    for (i, package) in lock.split("\n[[package]]\n").enumerate() {
        let of_kit = i > 0 && package.lines().any(|l| l.starts_with("source = ") && l.contains("nats-sinks.invalid"));
        if of_kit {
            continue;
        }
        if i > 0 {
            out.push_str("\n[[package]]\n");
        }
        out.push_str(package);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_paths_follow_cargo_s_layout() {
        assert_eq!(index_path("a"), PathBuf::from("1/a"));
        assert_eq!(index_path("ab"), PathBuf::from("2/ab"));
        assert_eq!(index_path("abc"), PathBuf::from("3/a/abc"));
        assert_eq!(index_path("sinks-cli"), PathBuf::from("si/nk/sinks-cli"));
    }

    #[test]
    fn an_entry_points_kit_crates_into_the_kit_and_the_rest_at_crates_io() {
        let package = json!({
            "name": "sinks-cli", "version": "0.1.0", "links": null, "rust_version": "1.89",
            "features": {"completions": ["dep:clap_complete"]},
            "dependencies": [
                {"name": "sinks-runtime", "req": "^0.1.0", "kind": null, "rename": null, "optional": false,
                 "uses_default_features": true, "features": [], "target": null},
                {"name": "clap_complete", "req": "^4", "kind": null, "rename": null, "optional": true,
                 "uses_default_features": true, "features": [], "target": null},
                {"name": "tempfile", "req": "^3", "kind": "dev", "rename": null, "optional": false,
                 "uses_default_features": true, "features": [], "target": null},
            ],
        });
        let entry = index_entry(&package, &["sinks-cli", "sinks-runtime", "sinks-testkit"], "ab12").unwrap();
        let deps = entry["deps"].as_array().unwrap();
        assert_eq!(deps.len(), 2, "no dev-dependency: {deps:?}");
        assert_eq!(deps[0]["registry"], Value::Null, "in the kit");
        assert_eq!(deps[0]["kind"], "normal");
        assert_eq!(deps[1]["registry"], CRATES_IO);
        assert_eq!((entry["cksum"].as_str(), entry["v"].as_u64()), (Some("ab12"), Some(2)));
        let outside = json!({"name": "sinks-cli", "version": "0.1.0", "dependencies": [
            {"name": "sinks-testkit", "req": "*", "kind": null, "rename": null, "optional": false,
             "uses_default_features": true, "features": [], "target": null}]});
        assert!(index_entry(&outside, &["sinks-cli", "sinks-testkit"], "x").is_err(), "a member outside the kit");
    }

    #[test]
    fn a_lock_forgets_the_kit_and_keeps_the_rest() {
        let lock = "version = 4\n\n[[package]]\nname = \"a\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n[[package]]\nname = \"sinks-cli\"\nversion = \"0.1.0\"\nsource = \"sparse+https://nats-sinks.invalid/index/\"\nchecksum = \"x\"\n\n[[package]]\nname = \"b\"\nversion = \"2.0.0\"\n";
        let kept = without_kit_entries(lock);
        assert!(
            !kept.contains("sinks-cli") && kept.contains("name = \"a\"") && kept.contains("name = \"b\""),
            "{kept}"
        );
        assert_eq!(without_kit_entries(&kept), kept);
    }
}
