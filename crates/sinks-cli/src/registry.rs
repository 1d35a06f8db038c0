//! The registry of a binary: the sink kinds it has (one [`SinkFactory`] each, plus the
//! runtime's `blackhole`), the kinds it knows but lacks (named as such instead of being
//! "unknown", with the cargo feature that brings them), the subcommands it adds, and the
//! stored formats `decrypt` reads. It turns a config's `sink` section into a running sink
//! (a `fanout` over the named sinks included) and hands config loading what the runtime
//! needs to know per kind ([`Registry::load_config`]).

use std::future::Future;
use std::marker::PhantomData;
use std::path::Path;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;

use sinks_contract::{BuiltSink, Creation, DynSinkFactory, Reach, Sink};
use sinks_runtime::Config;
use sinks_runtime::blackhole::BlackholeFactory;
use sinks_runtime::config::{ConfigError, ConfigIssue, KindDefaults, OptionalWait, SinkSection};
use sinks_runtime::limit::{self, RateLimit, RateLimited};

use sinks_toolkit::encryption::Keyring;

/// A file format of a sink kind's own that `nats-sink decrypt` reads (the spool's record
/// files), registered with [`Registry::stored_format`].
pub trait StoredFormat: Send + Sync + std::fmt::Debug {
    /// The keys `config` names for this format besides its `encryption` section (a spool's
    /// `sink.encryption`); `None` when `config` is not one of this format's kind.
    fn keyring(&self, config: &Config) -> Result<Option<Keyring>, ConfigError>;

    /// The plaintext of `bytes` (whose JSON is `document`) when they are a file of this
    /// format, decrypted with `keys`; `None` when they are not one. The error is a sentence.
    fn decrypt(&self, bytes: &[u8], document: &serde_json::Value, keys: &Keyring) -> Option<Result<Vec<u8>, String>>;
}

/// Optional-target waits of the local sinks ([`Reach::Local`]).
const LOCAL_WAIT: OptionalWait = OptionalWait { minimum_wait_ms: 100, timeout_ms: 1000 };
/// Optional-target waits of the sinks behind a network hop ([`Reach::Remote`]).
const REMOTE_WAIT: OptionalWait = OptionalWait { minimum_wait_ms: 1000, timeout_ms: 5000 };

/// Sink types of the reference that nats-sinks does not implement yet: refused by name, so
/// a config written for them never runs as something else.
const NOT_YET: &[&str] = &["foundry", "gotham"];

/// The type of the active sink that writes to the named sinks (`sinks`).
const FANOUT: &str = "fanout";

/// The future a binary's own subcommand returns ([`Registry::commands`]).
pub type CommandFuture<'a> = Pin<Box<dyn Future<Output = ExitCode> + Send + 'a>>;

/// A sink kind this binary knows but was built without ([`Registry::known`]): `nats-sink
/// sinks` and a config of that `type` say which cargo feature (or release binary) brings it.
#[derive(Debug, Clone, Copy)]
pub struct Known {
    kind: &'static str,
    feature: &'static str,
    reach: Reach,
}

impl Known {
    /// The kind named `kind` in a config, built in by the cargo feature `feature` (and in the
    /// `nats-sink-<feature>` release binary); `reach` sets its waits as an optional target.
    pub fn new(kind: &'static str, feature: &'static str, reach: Reach) -> Self {
        Self { kind, feature, reach }
    }
}

/// The sink kinds, subcommands and stored formats of a binary; [`crate::main`] runs the
/// command line against it.
#[derive(Debug)]
pub struct Registry {
    blackhole: BlackholeFactory,
    factories: Vec<Box<dyn DynSinkFactory>>,
    known: Vec<Known>,
    extensions: Vec<Box<dyn Extension>>,
    formats: Vec<Box<dyn StoredFormat>>,
    about: Option<&'static str>,
    version: Option<&'static str>,
    name: Option<&'static str>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A registry with the runtime's `blackhole` only (it is always built in; like the
    /// reference, it cannot be an optional fan-out target's type).
    pub fn new() -> Self {
        Self {
            blackhole: BlackholeFactory,
            factories: Vec::new(),
            known: Vec::new(),
            extensions: Vec::new(),
            formats: Vec::new(),
            about: None,
            version: None,
            name: None,
        }
    }

    /// With the name the binary calls itself in `--help` and in every command it tells the
    /// operator to run (`sqlite-sink replay …`); by default the name it was started as.
    #[must_use]
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = Some(name);
        self
    }

    /// The program's name: [`Registry::name`], else the file name it was started as, else
    /// `nats-sink`.
    pub(crate) fn program(&self) -> String {
        if let Some(name) = self.name {
            return name.to_owned();
        }
        std::env::args_os()
            .next()
            .and_then(|arg| std::path::Path::new(&arg).file_name().map(|n| n.to_string_lossy().into_owned()))
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "nats-sink".to_owned())
    }

    /// With the line `--help` opens with (by default, this library's description).
    #[must_use]
    pub fn about(mut self, about: &'static str) -> Self {
        self.about = Some(about);
        self
    }

    /// With the version `--version` prints (by default, this library's): pass the binary's
    /// own, `env!("CARGO_PKG_VERSION")`.
    #[must_use]
    pub fn version(mut self, version: &'static str) -> Self {
        self.version = Some(version);
        self
    }

    /// With the sink kind `factory` builds (listed in registration order).
    #[must_use]
    pub fn with(mut self, factory: Box<dyn DynSinkFactory>) -> Self {
        self.factories.push(factory);
        self
    }

    /// With a kind this binary knows but lacks (see [`Known`]).
    #[must_use]
    pub fn known(mut self, kind: Known) -> Self {
        self.known.push(kind);
        self
    }

    /// With the subcommands of `E` (a `clap::Subcommand` enum), after the built-in ones;
    /// `run` runs the one given. It reports through [`crate::exit`] and loads configs with
    /// [`Registry::load_config`] like the built-in commands.
    #[must_use]
    pub fn commands<E>(mut self, run: for<'a> fn(E, &'a Self) -> CommandFuture<'a>) -> Self
    where
        E: clap::Subcommand + std::fmt::Debug + Send + 'static,
    {
        self.extensions.push(Box::new(Commands { run, _commands: PhantomData }));
        self
    }

    /// With a file format of a kind's own that `nats-sink decrypt` reads.
    #[must_use]
    pub fn stored_format(mut self, format: Box<dyn StoredFormat>) -> Self {
        self.formats.push(format);
        self
    }

    /// `command` with the binary's own subcommands added (the whole command line is
    /// `crate::cli::command`).
    pub(crate) fn add_commands(&self, command: clap::Command) -> clap::Command {
        self.extensions.iter().fold(command, |command, e| e.augment(command))
    }

    /// The binary's `about`, when it set one (it wins over the built-in one).
    pub(crate) fn about_text(&self) -> Option<&'static str> {
        self.about
    }

    /// The binary's `version`, when it set one.
    pub(crate) fn version_text(&self) -> Option<&'static str> {
        self.version
    }

    /// Runs the binary's own subcommand `matches` names, if it is one.
    pub(crate) fn run_extension<'a>(&'a self, matches: &clap::ArgMatches) -> Option<CommandFuture<'a>> {
        let name = matches.subcommand_name()?;
        let extension = self.extensions.iter().find(|e| e.has(name))?;
        Some(extension.run(matches, self))
    }

    /// The stored formats `decrypt` reads.
    pub(crate) fn stored_formats(&self) -> impl Iterator<Item = &dyn StoredFormat> {
        self.formats.iter().map(AsRef::as_ref)
    }

    /// The registered factories, `blackhole` first.
    fn factories(&self) -> impl Iterator<Item = &dyn DynSinkFactory> {
        std::iter::once(&self.blackhole as &dyn DynSinkFactory).chain(self.factories.iter().map(AsRef::as_ref))
    }

    fn factory(&self, kind: &str) -> Option<&dyn DynSinkFactory> {
        self.factories().find(|f| f.kind() == kind)
    }

    /// The kinds built into this binary, `blackhole` first.
    pub(crate) fn available(&self) -> Vec<&'static str> {
        self.factories().map(|f| f.kind()).collect()
    }

    /// Environment defaults of the registered kinds' drivers.
    pub(crate) fn process_defaults(&self) -> impl Iterator<Item = &'static (&'static str, &'static str)> {
        self.factories().flat_map(|f| f.process_defaults().iter())
    }

    /// What config loading needs to know about the kinds (the runtime names none): each
    /// kind's waits as an optional fan-out target, built in or only known.
    pub fn kind_defaults(&self) -> KindDefaults {
        let wait = |reach: Reach| if reach == Reach::Local { LOCAL_WAIT } else { REMOTE_WAIT };
        let built = self.factories.iter().map(|f| (f.kind(), wait(f.reach())));
        built.chain(self.known.iter().map(|k| (k.kind, wait(k.reach)))).collect()
    }

    /// Loads and validates the config at `path` as `nats-sink` does: with the kinds'
    /// defaults ([`Config::load_with`]). The sink sections are not built.
    pub fn load_config(&self, path: &Path) -> Result<Config, ConfigError> {
        Config::load_with(path, &self.kind_defaults())
    }

    /// Loads the core config and builds the active sink; both are fully validated, and every
    /// problem of both is reported at once, each with where its value came from (the file's
    /// line and column, or the environment variable).
    pub(crate) fn load(&self, path: &Path) -> Result<(Config, BuiltSink), ConfigError> {
        use sinks_runtime::config::source::annotate;
        match self.load_config(path) {
            Ok(config) => {
                let built = self.build_active(&config).map_err(|e| annotate(e, path))?;
                Ok((config, built))
            }
            Err(mut core) => {
                // The sink's own section is checked on its own, so its problems come with the
                // rest instead of after the next attempt.
                let section = sinks_runtime::config::raw_tree(path)
                    .ok()
                    .and_then(|tree| tree.get("sink").cloned())
                    .and_then(|sink| serde_json::from_value::<SinkSection>(sink).ok());
                if let Some(section) = section.filter(|s| s.kind().is_some_and(|k| k != FANOUT))
                    && let Err(e) = self.build(&section)
                {
                    for issue in annotate(e, path).issues {
                        if !core.issues.iter().any(|known| known.path == issue.path) {
                            core.issues.push(issue);
                        }
                    }
                }
                Err(core)
            }
        }
    }

    /// Parses and validates the sink section and builds the sink (no I/O yet). Its
    /// `rate_limit`, which every kind takes, is the runtime's: it is taken out of the section
    /// before the kind's factory sees it, and paces the built sink
    /// (`sinks_runtime::limit::RateLimited`); the effective config shows it again.
    pub fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError> {
        let kind = section.kind().unwrap_or_default();
        let Some(factory) = self.factory(kind) else {
            return Err(ConfigError::single("sink.type", self.unknown_kind(kind)));
        };
        let mut own = section.clone();
        let limit = own.0.remove(limit::SECTION).map(|value| RateLimit::parse("sink.rate_limit", value));
        let built = factory.build(&own);
        let (mut built, limit) = match (built, limit) {
            (Ok(built), None) => return Ok(built),
            (Ok(built), Some(Ok(limit))) => (built, limit),
            (Ok(_), Some(Err(e))) => return Err(e),
            (Err(mut e), Some(Err(more))) => {
                e.issues.extend(more.issues);
                return Err(e);
            }
            (Err(e), _) => return Err(e),
        };
        built.sink = Arc::new(RateLimited::new(built.sink, &limit));
        if let Some(effective) = built.effective.as_object_mut() {
            effective.insert(limit::SECTION.into(), serde_json::to_value(&limit).unwrap_or_default());
        }
        Ok(built)
    }

    /// What `nats-sink validate` says about the active sink of `section` beyond its type (a
    /// batch mode's objects), for a sample message of `stream` on `subject`.
    pub(crate) fn describe(&self, section: &SinkSection, stream: &str, subject: &str) -> Vec<String> {
        let mut own = section.clone();
        let limit = own.0.remove(limit::SECTION).and_then(|v| RateLimit::parse("sink.rate_limit", v).ok());
        let mut lines = self
            .factory(section.kind().unwrap_or_default())
            .map(|f| f.describe(&own, stream, subject))
            .unwrap_or_default();
        if let Some(limit) = limit {
            lines.push(format!("rate limit: {}", limit.describe()));
        }
        lines
    }

    /// `config` with every sink section's creation switch off (`nats-sink test-sink` without
    /// `--create` changes nothing), and for each switch that was on, where (`sink`,
    /// `sinks.<name>`) and what `run` would create.
    pub(crate) fn without_creation(&self, config: &Config) -> (Config, Vec<(String, Creation)>) {
        let mut dry = config.clone();
        let mut notes = Vec::new();
        let mut off = |at: &str, section: &mut SinkSection| {
            let Some(factory) = self.factory(section.kind().unwrap_or_default()) else { return };
            // The kind's config is its section without the runtime's `rate_limit` (as in `build`).
            let mut own = section.clone();
            own.0.remove(limit::SECTION);
            if let Some(creation) = factory.creation(&own) {
                section.0.insert(creation.field.clone(), false.into());
                notes.push((at.to_owned(), creation));
            }
        };
        off("sink", &mut dry.sink);
        for (name, section) in &mut dry.sinks {
            off(&format!("sinks.{name}"), section);
        }
        (dry, notes)
    }

    /// Builds the active sink of `config` (a fan-out over its named sinks when `sink.type` is
    /// `fanout`) and checks every named sink's config, naming a bad field as
    /// `sinks.<name>.<field>`.
    pub fn build_active(&self, config: &Config) -> Result<BuiltSink, ConfigError> {
        let mut children = Vec::with_capacity(config.sinks.len());
        let mut issues = Vec::new();
        for (name, section) in &config.sinks {
            match self.build_named(name, section) {
                Ok(built) => children.push((name.clone(), built)),
                Err(e) => issues.extend(e.issues),
            }
        }
        if !issues.is_empty() {
            return Err(ConfigError { issues });
        }
        if !config.sink.kind().is_some_and(|k| k.eq_ignore_ascii_case(FANOUT)) {
            return self.build(&config.sink);
        }
        if config.sink.0.keys().any(|k| k != "type") {
            let extra: Vec<&String> = config.sink.0.keys().filter(|k| *k != "type").collect();
            return Err(ConfigError::single(
                format!("sink.{}", extra[0]),
                "a fanout sink takes only `type`, named `sinks` and the routing fields",
            ));
        }
        let mut effective = serde_json::Map::new();
        let mut ddl: Option<Vec<String>> = None;
        let mut targets: Vec<(String, Arc<dyn Sink>)> = Vec::new();
        for (name, built) in children {
            effective.insert(name.clone(), built.effective);
            if let Some(statements) = built.ddl {
                ddl.get_or_insert_with(Vec::new).extend(statements);
            }
            targets.push((name, built.sink));
        }
        let fanout = sinks_runtime::fanout::FanoutSink::new(targets, config.routing.clone());
        let mut built = BuiltSink::new(fanout);
        built.effective = serde_json::json!({"sinks": effective});
        Ok(match ddl {
            Some(statements) => built.with_ddl(statements),
            None => built,
        })
    }

    /// Builds one named sink; problems are reported under `sinks.<name>`.
    pub fn build_named(&self, name: &str, section: &SinkSection) -> Result<BuiltSink, ConfigError> {
        let kind = section.kind().unwrap_or_default();
        if kind.eq_ignore_ascii_case(FANOUT) {
            return Err(ConfigError::single(format!("sinks.{name}.type"), "fanout can only be the active sink"));
        }
        self.build(section).map_err(|e| ConfigError {
            issues: e
                .issues
                .into_iter()
                .map(|issue| {
                    let field = issue.path.strip_prefix("sink").unwrap_or(&issue.path);
                    let message = match issue.message.strip_prefix("nats-sink was not compiled with") {
                        Some(rest) => {
                            format!("named sink `{name}` has type `{kind}`, but nats-sink was not compiled with{rest}")
                        }
                        None => issue.message,
                    };
                    ConfigIssue { path: format!("sinks.{name}{field}"), message }
                })
                .collect(),
        })
    }

    /// `nats-sink sinks`: every sink kind, built in or not, and for the others which cargo
    /// feature (or release binary) brings it; with `names`, only the built-in kinds, one per
    /// line.
    pub(crate) fn describe_kinds(&self, names: bool) -> String {
        let built = self.available();
        let mut out = String::new();
        for kind in &built {
            if names {
                out.push_str(&format!("{kind}\n"));
            } else {
                out.push_str(&format!("{kind}: built in\n"));
            }
        }
        if !names {
            for known in self.known.iter().filter(|k| !built.contains(&k.kind)) {
                out.push_str(&format!(
                    "{}: not in this build (cargo feature `{}`; the full nats-sink or the nats-sink-{} release binary has it)\n",
                    known.kind, known.feature, known.feature
                ));
            }
        }
        out
    }

    fn unknown_kind(&self, kind: &str) -> String {
        match self.known.iter().find(|k| k.kind == kind) {
            Some(known) => format!(
                "nats-sink was not compiled with the `{}` feature (the full nats-sink or the nats-sink-{} release binary has it; `nats-sink sinks` lists what this one has)",
                known.feature, known.feature
            ),
            None if NOT_YET.contains(&kind) => format!("sink type `{kind}` is not supported by this build yet"),
            None => format!("unknown sink type `{kind}` (available: {})", self.available().join(", ")),
        }
    }
}

/// Subcommands a binary adds ([`Registry::commands`]), type-erased.
trait Extension: Send + Sync + std::fmt::Debug {
    /// `command` with these subcommands added.
    fn augment(&self, command: clap::Command) -> clap::Command;
    /// True when `name` is one of them.
    fn has(&self, name: &str) -> bool;
    /// Runs the one `matches` names (exits with clap's message when they do not parse).
    fn run<'a>(&self, matches: &clap::ArgMatches, registry: &'a Registry) -> CommandFuture<'a>;
}

/// The subcommands of the `clap::Subcommand` enum `E` and what runs them.
struct Commands<E> {
    run: for<'a> fn(E, &'a Registry) -> CommandFuture<'a>,
    _commands: PhantomData<fn() -> E>,
}

impl<E> std::fmt::Debug for Commands<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(std::any::type_name::<E>())
    }
}

impl<E: clap::Subcommand + std::fmt::Debug + Send + 'static> Extension for Commands<E> {
    fn augment(&self, command: clap::Command) -> clap::Command {
        E::augment_subcommands(command)
    }

    fn has(&self, name: &str) -> bool {
        E::has_subcommand(name)
    }

    fn run<'a>(&self, matches: &clap::ArgMatches, registry: &'a Registry) -> CommandFuture<'a> {
        match E::from_arg_matches(matches) {
            Ok(command) => (self.run)(command, registry),
            Err(e) => e.exit(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;
    use sinks_runtime::blackhole::{BlackholeConfig, BlackholeSink};

    use super::*;
    use sinks_contract::SinkFactory;

    /// A kind on this machine that creates its `place` unless `make` is off, building a
    /// blackhole.
    #[derive(Debug)]
    struct Here;

    /// The config of `here`: whether it makes its place (on by default), and which.
    #[derive(Debug, serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct HereConfig {
        #[serde(default = "yes")]
        make: bool,
        #[serde(default)]
        place: Option<String>,
    }

    fn yes() -> bool {
        true
    }

    impl SinkFactory for Here {
        type Config = HereConfig;

        fn kind(&self) -> &'static str {
            "here"
        }

        fn build(&self, _: HereConfig) -> Result<BuiltSink, ConfigError> {
            Ok(BuiltSink::new(BlackholeSink::new(BlackholeConfig::default())))
        }

        fn reach(&self) -> Reach {
            Reach::Local
        }

        fn creation(&self, config: &HereConfig) -> Option<Creation> {
            Creation::when(config.make, "make", format!("the place {}", config.place.as_deref().unwrap_or("?")))
        }

        fn describe(&self, _: &HereConfig, stream: &str, subject: &str) -> Vec<String> {
            vec![format!("here: {stream} {subject}")]
        }

        fn process_defaults(&self) -> &'static [(&'static str, &'static str)] {
            &[("HERE_POOL", "1")]
        }
    }

    /// A remote kind with a table.
    #[derive(Debug)]
    struct There;

    impl SinkFactory for There {
        type Config = BlackholeConfig;

        fn kind(&self) -> &'static str {
            "there"
        }

        fn build(&self, config: BlackholeConfig) -> Result<BuiltSink, ConfigError> {
            Ok(BuiltSink::new(BlackholeSink::new(config)).with_ddl(vec!["CREATE TABLE t".into()]))
        }
    }

    fn registry() -> Registry {
        Registry::new()
            .with(Box::new(Here))
            .known(Known::new("far", "far-feature", Reach::Remote))
            .with(Box::new(There))
    }

    fn config(value: serde_json::Value) -> Config {
        let mut whole = json!({"nats": {"stream": "S", "consumer": "C", "subject": "s.>"}});
        whole.as_object_mut().unwrap().extend(value.as_object().unwrap().clone());
        Config::from_value(whole).unwrap()
    }

    fn section(value: serde_json::Value) -> SinkSection {
        serde_json::from_value(value).unwrap()
    }

    fn messages(e: ConfigError) -> Vec<(String, String)> {
        e.issues.into_iter().map(|i| (i.path, i.message)).collect()
    }

    #[test]
    fn the_kinds_built_in_known_and_unknown_are_told_apart() {
        let r = registry();
        assert_eq!(r.available(), ["blackhole", "here", "there"]);
        assert_eq!(
            r.describe_kinds(false),
            "blackhole: built in\nhere: built in\nthere: built in\nfar: not in this build (cargo feature \
             `far-feature`; the full nats-sink or the nats-sink-far-feature release binary has it)\n"
        );
        assert_eq!(r.describe_kinds(true), "blackhole\nhere\nthere\n");
        let refused = |kind: &str| messages(r.build(&section(json!({"type": kind}))).unwrap_err());
        assert_eq!(
            refused("far"),
            [(
                "sink.type".to_owned(),
                "nats-sink was not compiled with the `far-feature` feature (the full nats-sink or the \
                 nats-sink-far-feature release binary has it; `nats-sink sinks` lists what this one has)"
                    .to_owned()
            )]
        );
        assert_eq!(refused("gotham")[0].1, "sink type `gotham` is not supported by this build yet");
        assert_eq!(refused("ftp")[0].1, "unknown sink type `ftp` (available: blackhole, here, there)");
        let named = messages(r.build_named("n", &section(json!({"type": "far"}))).unwrap_err());
        assert_eq!(named[0].0, "sinks.n.type");
        assert!(named[0].1.starts_with("named sink `n` has type `far`, but nats-sink was not compiled with the"));
    }

    #[test]
    fn the_kinds_give_the_waits_the_descriptions_and_the_process_defaults() {
        let r = registry();
        let defaults = r.kind_defaults();
        // blackhole cannot be an optional target's type; a known kind has its waits.
        assert_eq!(defaults.kinds().collect::<Vec<_>>(), ["far", "here", "there"]);
        assert_eq!(defaults.optional_wait("here"), Some(LOCAL_WAIT));
        assert_eq!(defaults.optional_wait("far"), Some(REMOTE_WAIT));
        assert_eq!(defaults.optional_wait("there"), Some(REMOTE_WAIT));
        let here = section(json!({"type": "here"}));
        assert_eq!(r.describe(&here, "S", "s.x"), ["here: S s.x"]);
        assert!(r.describe(&section(json!({"type": "there"})), "S", "s.x").is_empty());
        assert_eq!(r.process_defaults().collect::<Vec<_>>(), [&("HERE_POOL", "1")]);
    }

    #[test]
    fn test_sink_turns_creation_off_and_says_what_run_would_create() {
        let r = registry();
        let c = config(json!({
            "sink": {"type": "here", "place": "/p"},
            "sinks": {"a": {"type": "here", "make": false}, "b": {"type": "here", "place": "/b"}, "c": {"type": "there"},
                "d": {"type": "here", "place": "/d", "rate_limit": {"messages_per_second": 5}}},
        }));
        let (dry, notes) = r.without_creation(&c);
        let said: Vec<(&str, &str, &str)> =
            notes.iter().map(|(at, c)| (at.as_str(), c.field.as_str(), c.what.as_str())).collect();
        assert_eq!(
            said,
            [
                ("sink", "make", "the place /p"),
                ("sinks.b", "make", "the place /b"),
                ("sinks.d", "make", "the place /d")
            ],
            "a rate limit is the runtime's, not the kind's: its switch is read all the same"
        );
        assert_eq!(dry.sink.0["make"], false);
        assert_eq!(dry.sinks["b"].0["make"], false);
        assert!(!dry.sinks["c"].0.contains_key("make"));
        assert_eq!(
            (dry.sinks["d"].0["make"].clone(), dry.sinks["d"].0.contains_key("rate_limit")),
            (json!(false), true)
        );
    }

    #[test]
    fn a_fanout_gathers_its_named_sinks() {
        let r = registry();
        // A fan-out takes its targets from the routes (the config is refused without them).
        let routes = |targets: &[&str]| {
            let targets: Vec<serde_json::Value> = targets.iter().map(|t| json!({"sink": t})).collect();
            json!({"enabled": true, "routes": [{"name": "r", "match": {"subject": ">"}, "targets": targets}]})
        };
        let c = config(json!({"sink": {"type": "fanout"}, "sinks": {"a": {"type": "here"}, "b": {"type": "there"}},
            "routing": routes(&["a", "b"])}));
        let built = r.build_active(&c).unwrap();
        assert_eq!(built.effective, json!({"sinks": {"a": {"make": true, "place": null}, "b": {"write_delay_ms": 0}}}));
        assert_eq!(built.ddl, Some(vec!["CREATE TABLE t".to_owned()]));
        let extra = config(
            json!({"sink": {"type": "fanout", "x": 1}, "sinks": {"a": {"type": "here"}}, "routing": routes(&["a"])}),
        );
        assert_eq!(messages(r.build_active(&extra).unwrap_err())[0].0, "sink.x");
        // Config validation refuses a named fan-out already; the registry refuses it on its own.
        let mut nested = config(json!({"sink": {"type": "here"}}));
        nested.sinks.insert("a".into(), section(json!({"type": "fanout"})));
        assert_eq!(
            messages(r.build_active(&nested).unwrap_err()),
            [("sinks.a.type".to_owned(), "fanout can only be the active sink".to_owned())]
        );
        let bad = config(json!({"sink": {"type": "here"}, "sinks": {"a": {"type": "there", "nope": 1}}}));
        assert!(messages(r.build_active(&bad).unwrap_err())[0].0.starts_with("sinks.a."));
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limit_paces_any_kind_and_every_named_sink_and_names_its_fields() {
        let r = registry();
        let limited = json!({"type": "there", "rate_limit": {"messages_per_second": 10, "burst_messages": 1}});
        let built = r.build(&section(limited.clone())).unwrap();
        assert_eq!(
            built.effective,
            json!({"write_delay_ms": 0, "rate_limit": {"messages_per_second": 10.0, "burst_messages": 1}}),
            "the effective config shows it; the kind's factory never saw it"
        );
        let batch: Vec<sinks_contract::Envelope> =
            (1..=5).map(|s| sinks_contract::testing::envelope("S", s, "s.x", "{}")).collect();
        let started = tokio::time::Instant::now();
        let outcomes = built.sink.write(&batch, std::time::Duration::from_secs(30)).await.unwrap();
        assert_eq!(outcomes.len(), 5);
        assert_eq!(started.elapsed().as_millis(), 400, "one at once, then one every 100 ms");
        assert!(r.describe(&section(limited), "S", "s.x").iter().any(|l| l.contains("10 messages/s (burst 1)")));
        let named = messages(
            r.build_named("db", &section(json!({"type": "here", "rate_limit": {"messages_per_second": 0}})))
                .unwrap_err(),
        );
        assert_eq!(
            named,
            [("sinks.db.rate_limit.messages_per_second".to_owned(), "must be a number above 0".to_owned())]
        );
        // A bad kind field and a bad rate limit are reported together.
        let both = messages(
            r.build(&section(json!({"type": "there", "nope": 1, "rate_limit": {"bytes_per_second": -1}}))).unwrap_err(),
        );
        assert_eq!(
            both.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
            ["sink.nope", "sink.rate_limit.bytes_per_second"]
        );
    }

    /// A binary's own subcommands.
    #[derive(Debug, clap::Subcommand)]
    enum Own {
        /// Says hello.
        Hello {
            /// Exit with this code.
            #[arg(long)]
            code: u8,
        },
    }

    fn hello(command: Own, registry: &Registry) -> CommandFuture<'_> {
        Box::pin(async move {
            let Own::Hello { code } = command;
            ExitCode::from(code + u8::try_from(registry.available().len()).unwrap())
        })
    }

    #[tokio::test]
    async fn a_binary_adds_subcommands_after_the_built_in_ones() {
        let r = registry().commands(hello);
        let command = crate::cli::command(&r);
        let names: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
        assert_eq!(names.first(), Some(&"run"));
        assert_eq!(names.last(), Some(&"hello"));
        // The subcommand enum's doc comment does not become the binary's `about`.
        assert_eq!(command.get_about(), <crate::cli::Cli as clap::CommandFactory>::command().get_about());
        let named = crate::cli::command(&registry().about("mine").version("9.9.9").commands(hello));
        assert_eq!((named.get_about().unwrap().to_string().as_str(), named.get_version()), ("mine", Some("9.9.9")));
        let matches = crate::cli::command(&r).try_get_matches_from(["nats-sink", "hello", "--code", "4"]).unwrap();
        assert_eq!(r.run_extension(&matches).unwrap().await, ExitCode::from(7));
        let builtin = crate::cli::command(&r).try_get_matches_from(["nats-sink", "sinks"]).unwrap();
        assert!(r.run_extension(&builtin).is_none());
    }
}
