//! What the tests of sinks-cli share: a sink kind of their own (`store`: a directory the test
//! names, so no sink crate is needed), the registry a test binary of the library is built on,
//! that binary run as a child process, and the small harness the command tests run under.
//!
//! The `store` kind's factory is the one place the tests meet the `SinkFactory` trait: a
//! change of the trait is made here once.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sinks_cli::{Known, Registry};
use sinks_contract::{
    BatchResult, BuiltSink, ConfigError, Creation, Envelope, MessageOutcome, Reach, Sink, SinkError, SinkFactory,
    SinkSection,
};

/// The test kind's `type`.
pub const KIND: &str = "store";
/// The name the test registry gives its program.
pub const PROGRAM_NAME: &str = "store-sink";
/// The version the test registry gives its program.
pub const VERSION: &str = "0.0.0-test";
/// A kind the test registry knows without its factory, and the feature that would bring it.
pub const KNOWN_KIND: (&str, &str) = ("teleport", "teleport-feature");

/// The `store` kind's section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// Where the store is.
    pub directory: PathBuf,
    /// Create the directory at open when it is missing (default true).
    #[serde(default = "on")]
    pub create_directory: bool,
    /// Messages per write, at least 1 (default 1,000).
    #[serde(default = "default_capacity")]
    pub capacity: u64,
    /// The variable holding the store's token (a secret's variable name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
}

fn on() -> bool {
    true
}

fn default_capacity() -> u64 {
    1_000
}

/// A sink that stores nothing but needs its directory: opening it creates the directory when
/// `create_directory` is on, and fails as a configuration error when it is missing otherwise.
#[derive(Debug)]
pub struct StoreSink(StoreConfig);

#[async_trait]
impl Sink for StoreSink {
    fn name(&self) -> &str {
        KIND
    }

    async fn open(&self) -> Result<(), SinkError> {
        let dir = &self.0.directory;
        if !dir.is_dir() && self.0.create_directory {
            std::fs::create_dir_all(dir)
                .map_err(|e| SinkError::temporary(format!("cannot create {}", dir.display())).with_source(e))?;
        }
        if dir.is_dir() {
            Ok(())
        } else {
            Err(SinkError::config(format!("the directory {} does not exist", dir.display())))
        }
    }

    async fn write(&self, batch: &[Envelope], _: Duration) -> BatchResult {
        Ok(batch.iter().map(|_| MessageOutcome::Committed).collect())
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        if self.0.directory.is_dir() { Ok(()) } else { Err(SinkError::temporary("the store directory is gone")) }
    }
}

/// The `store` kind's factory.
#[derive(Debug)]
pub struct StoreFactory;

impl SinkFactory for StoreFactory {
    type Config = StoreConfig;

    fn kind(&self) -> &'static str {
        KIND
    }

    fn build(&self, config: StoreConfig) -> Result<BuiltSink, ConfigError> {
        if config.capacity == 0 {
            return Err(ConfigError::single("sink.capacity", "must be at least 1"));
        }
        Ok(BuiltSink::new(StoreSink(config)))
    }

    fn reach(&self) -> Reach {
        Reach::Local
    }

    fn creation(&self, config: &StoreConfig) -> Option<Creation> {
        Creation::when(
            config.create_directory,
            "create_directory",
            format!("the directory {}", config.directory.display()),
        )
    }

    fn describe(&self, config: &StoreConfig, stream: &str, _subject: &str) -> Vec<String> {
        vec![format!("a message of {stream} is stored below {}", config.directory.display())]
    }
}

/// The registry of the test program: the `store` kind, one known kind without its factory,
/// the program's own name and version.
pub fn registry() -> Registry {
    Registry::new().name(PROGRAM_NAME).version(VERSION).with(Box::new(StoreFactory)).known(Known::new(
        KNOWN_KIND.0,
        KNOWN_KIND.1,
        Reach::Remote,
    ))
}

/// A section of `value` (an object).
pub fn section(value: serde_json::Value) -> SinkSection {
    serde_json::from_value(value).unwrap()
}

/// A config of the `store` kind below `dir` (its store at `dir/store`), with `nats` members
/// and `extra` top-level members added (JSON text, each ending in a comma when not empty).
pub fn config(dir: &Path, nats: &str, extra: &str) -> String {
    format!(
        r#"{{"nats": {{"stream": "ORDERS", "consumer": "c", "subject": "orders.*"{nats}}}, {extra} "sink": {{"type": "store", "directory": "{}"}}}}"#,
        dir.join("store").display()
    )
}

/// Writes `text` to `dir/name`.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The variable that makes a command-test binary the test program instead of the tests.
const AS_PROGRAM: &str = "SINKS_CLI_TEST_AS_PROGRAM";

/// Runs the test program (`sinks_cli::main` on [`registry`]) with `args`.
pub fn program(args: &[&str]) -> Output {
    program_with(args, &[])
}

/// [`program`] with the environment variables `envs` set.
pub fn program_with(args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(args)
        .env(AS_PROGRAM, "1")
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

/// Standard output and error of `out`, as text.
pub fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// One test of a command-test binary.
pub type Test = (&'static str, fn());

/// The `main` of a command-test binary (`harness = false`: its own command line is the
/// program's when it runs as the program). Started with [`AS_PROGRAM`] set it is the test
/// program; else it runs `tests` as libtest does, for `cargo test` and `cargo nextest`:
/// `--list` (`name: test` lines, none with `--ignored`), name filters (`--exact` for a whole
/// name), one line per test and exit code 101 when one failed.
pub fn main(tests: &[Test]) -> ExitCode {
    if std::env::var_os(AS_PROGRAM).is_some() {
        return sinks_cli::main(registry());
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        if !args.iter().any(|a| a == "--ignored") {
            for (name, _) in tests {
                println!("{name}: test");
            }
        }
        return ExitCode::SUCCESS;
    }
    let exact = args.iter().any(|a| a == "--exact");
    let (mut filters, mut skip): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    let mut words = args.iter().map(String::as_str);
    while let Some(word) = words.next() {
        match word {
            "--skip" => skip.extend(words.next()),
            "--test-threads" | "--format" | "--color" | "--logfile" | "-Z" => {
                words.next();
            }
            flag if flag.starts_with('-') => {}
            filter => filters.push(filter),
        }
    }
    let matches = |name: &str, pattern: &str| if exact { name == pattern } else { name.contains(pattern) };
    let chosen: Vec<&Test> = tests
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| matches(name, f)))
        .filter(|(name, _)| !skip.iter().any(|s| matches(name, s)))
        .collect();
    println!("\nrunning {} tests", chosen.len());
    let mut failed = Vec::new();
    for (name, test) in &chosen {
        let passed = std::panic::catch_unwind(test).is_ok();
        println!("test {name} ... {}", if passed { "ok" } else { "FAILED" });
        if !passed {
            failed.push(*name);
        }
    }
    let verdict = if failed.is_empty() { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {verdict}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out\n",
        chosen.len() - failed.len(),
        failed.len(),
        tests.len() - chosen.len()
    );
    if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(101) }
}
