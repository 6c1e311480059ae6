//! Reports: failure classes, the run's identity, the replay line, trace files and JSON summaries.
//!
//! A failing seed is reported with its [`Class`], the oracle that fired, the fake time, the
//! command that replays it, and whether fresh processes reproduced it ("replays exactly" or
//! "replays k of n"). Its trace is written to `<target>/sim/<test>/<seed>/trace.log`, and the last
//! lines are printed. With `SIM_JSON=<file>`, one JSON line per seed is appended to that file.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::oracle::Oracle;
use crate::seed::Seed;

/// What kind of failure a run ended with.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// An oracle found a violated guarantee.
    Correctness,
    /// Code on the run's thread panicked (a spawned task, the test body, or a caught panic).
    Panic,
    /// Every task was blocked and nothing was scheduled for the whole horizon.
    Deadlock,
    /// A node that stopped cleanly left tasks running, or a task of an ended incarnation kept running.
    Leak,
    /// Progress was not made within its bound (or the run outlived its fake-time limit).
    Liveness,
    /// The run hung in real time (a busy loop that never yields); nothing can be concluded.
    Inconclusive,
    /// The same seed gave different histories.
    ReplayDiverged,
    /// A violation excused by a broken precondition or a dependency breaking its own guarantee.
    Excused,
}

impl Class {
    /// The class's name as printed (`"replay diverged"`).
    pub fn name(self) -> &'static str {
        match self {
            Class::Correctness => "correctness",
            Class::Panic => "panic",
            Class::Deadlock => "deadlock",
            Class::Leak => "leak",
            Class::Liveness => "liveness",
            Class::Inconclusive => "inconclusive",
            Class::ReplayDiverged => "replay diverged",
            Class::Excused => "excused",
        }
    }

    /// Whether this class fails a sweep (everything but [`Class::Excused`]).
    pub fn fails(self) -> bool {
        self != Class::Excused
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a run failed: the class, the oracle that fired (if any), a message and the fake time.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{class}{}: {message}", oracle.as_ref().map(|o| format!(" [{o}]")).unwrap_or_default())]
pub struct Failure {
    /// The failure class.
    pub class: Class,
    /// The oracle (check) that fired ([`Oracle`]: compare with its constants, not by string).
    pub oracle: Option<Oracle>,
    /// What was violated, in the oracle's words.
    pub message: String,
    /// Fake time since the run started, in nanoseconds, when the failure was found.
    pub at_nanos: Option<u64>,
    /// What the failure is about beyond what its message names: operation identities
    /// (`put#3`), idempotency keys, model keys, node names. The printed trace excerpt shows the
    /// lines mentioning these and the history identities the message names
    /// ([`crate::trace::Focus`]). Added with [`Failure::about`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub focus: Vec<String>,
}

impl Failure {
    /// A failure of `class` with a message.
    pub fn new(class: Class, message: impl Into<String>) -> Failure {
        Failure { class, oracle: None, message: message.into(), at_nanos: None, focus: Vec::new() }
    }

    /// A correctness failure found by the oracle named `oracle`.
    pub fn correctness(oracle: impl Into<Oracle>, message: impl Into<String>) -> Failure {
        Failure {
            class: Class::Correctness,
            oracle: Some(oracle.into()),
            message: message.into(),
            at_nanos: None,
            focus: Vec::new(),
        }
    }

    /// A liveness failure found by the oracle named `oracle`.
    pub fn liveness(oracle: impl Into<Oracle>, message: impl Into<String>) -> Failure {
        Failure {
            class: Class::Liveness,
            oracle: Some(oracle.into()),
            message: message.into(),
            at_nanos: None,
            focus: Vec::new(),
        }
    }

    /// An excused violation: reported, but the sweep does not fail.
    pub fn excused(oracle: impl Into<Oracle>, message: impl Into<String>) -> Failure {
        Failure {
            class: Class::Excused,
            oracle: Some(oracle.into()),
            message: message.into(),
            at_nanos: None,
            focus: Vec::new(),
        }
    }

    /// Names the oracle.
    pub fn oracle(mut self, oracle: impl Into<Oracle>) -> Failure {
        self.oracle = Some(oracle.into());
        self
    }

    /// Whether `oracle` found it.
    pub fn is(&self, oracle: &Oracle) -> bool {
        self.oracle.as_ref() == Some(oracle)
    }

    /// Adds a term the failure is about (an operation `put#3`, a key, a node): the trace lines
    /// that mention it are printed with the failure ([`crate::trace::Focus`]).
    pub fn about(mut self, term: impl Into<String>) -> Failure {
        self.focus.push(term.into());
        self
    }

    /// The fake time of the failure, if known.
    pub fn at(&self) -> Option<Duration> {
        self.at_nanos.map(Duration::from_nanos)
    }
}

/// `?` on an I/O error in a run's body: a correctness failure of the oracle `io`, with the error's
/// message (`Connection refused (os error 111)`). Map errors yourself to name a better oracle.
impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::correctness("io", e.to_string())
    }
}

/// `?` on a tonic transport error (a channel that could not be built or connected): a correctness
/// failure of the oracle `grpc`, with the error and its sources (`transport error: tcp connect
/// error: Connection refused (os error 111)`). Feature `tonic`.
#[cfg(feature = "tonic")]
impl From<tonic::transport::Error> for Failure {
    fn from(e: tonic::transport::Error) -> Failure {
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(&format!(": {s}"));
            source = s.source();
        }
        Failure::correctness("grpc", message)
    }
}

/// `?` on a gRPC status a call returned: a correctness failure of the oracle `grpc`
/// (`status Unavailable: tcp connect error`). Feature `tonic`.
#[cfg(feature = "tonic")]
impl From<tonic::Status> for Failure {
    fn from(s: tonic::Status) -> Failure {
        Failure::correctness("grpc", format!("status {:?}: {}", s.code(), s.message()))
    }
}

/// The identity of the build that ran: enough to know whether a replay runs the same code.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// The commit (`GITHUB_SHA`, else `git rev-parse HEAD`), or `unknown`.
    pub commit: String,
    /// Whether tracked files differed from the commit.
    pub dirty: bool,
    /// `rustc -V` of the compiler that built `sim`.
    pub rustc: String,
    /// The target triple.
    pub target: String,
    /// The cargo profile (`debug`, `release`, or a custom profile's directory).
    pub profile: String,
    /// The rustflags `sim` was built with.
    pub rustflags: String,
    /// Cargo features named by the simulation ([`crate::Simulation::features`]).
    pub features: Vec<String>,
    /// The test (or example/binary) running.
    pub test: String,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = self.commit.get(..12).unwrap_or(&self.commit);
        write!(
            f,
            "{} · commit {short}{} · {} · {} · {}",
            self.test,
            if self.dirty { "+dirty" } else { "" },
            self.rustc.trim_start_matches("rustc "),
            self.target,
            self.profile
        )?;
        if !self.rustflags.is_empty() {
            write!(f, " · rustflags {:?}", self.rustflags)?;
        }
        if !self.features.is_empty() {
            write!(f, " · features {}", self.features.join(","))?;
        }
        Ok(())
    }
}

/// The commit and dirty flag, read once per process.
pub(crate) fn commit() -> &'static (String, bool) {
    static COMMIT: OnceLock<(String, bool)> = OnceLock::new();
    COMMIT.get_or_init(|| {
        let dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(&dir)
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let sha = std::env::var("GITHUB_SHA").ok().filter(|s| !s.is_empty());
        let commit = sha.clone().or_else(|| git(&["rev-parse", "HEAD"])).unwrap_or_else(|| "unknown".to_string());
        let dirty = sha.is_none() && git(&["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
        (commit, dirty)
    })
}

impl Identity {
    /// The commit and dirty flag: `commit 1a2b3c4d5e6f+dirty`.
    pub fn short(&self) -> String {
        format!("commit {}{}", self.commit.get(..12).unwrap_or(&self.commit), if self.dirty { "+dirty" } else { "" })
    }

    pub(crate) fn current(invocation: &Invocation, features: &[String]) -> Identity {
        let (commit, dirty) = commit().clone();
        Identity {
            commit,
            dirty,
            rustc: env!("SIM_BUILD_RUSTC").to_string(),
            target: env!("SIM_BUILD_TARGET").to_string(),
            profile: invocation.profile.clone(),
            rustflags: env!("SIM_BUILD_RUSTFLAGS").to_string(),
            features: features.to_vec(),
            test: invocation.display_name(),
        }
    }
}

/// What kind of cargo target is running, found from the executable's path and the test thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TargetKind {
    /// `cargo test --test <name>` (integration test), `--lib` when `lib` is set.
    Test { target: String, lib: bool, test: Option<String> },
    /// `cargo run --example <name>`.
    Example(String),
    /// `cargo run --bin <name>`.
    Bin(String),
    /// Not under cargo's layout: run the executable directly.
    Exe(PathBuf),
}

/// How this process was started, to build replay commands and to re-run a seed in a fresh
/// process.
#[derive(Clone, Debug)]
pub(crate) struct Invocation {
    pub kind: TargetKind,
    pub package: Option<String>,
    pub profile: String,
    pub exe: PathBuf,
    pub args: Vec<String>,
}

impl Invocation {
    /// Reads the executable's path (`target/<profile>/deps/<name>-<hash>` is a test,
    /// `target/<profile>/examples/<name>` an example), `CARGO_PKG_NAME`, and the calling thread's
    /// name (libtest names each test's thread after the test).
    pub(crate) fn detect(test_override: Option<&str>) -> Invocation {
        let exe =
            std::env::current_exe().unwrap_or_else(|_| PathBuf::from(std::env::args().next().unwrap_or_default()));
        let args: Vec<String> = std::env::args().skip(1).collect();
        let package = std::env::var("CARGO_PKG_NAME").ok().filter(|s| !s.is_empty());
        let parent = exe.parent().map(Path::to_path_buf).unwrap_or_default();
        let parent_name = parent.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
        let stem = exe.file_stem().and_then(|n| n.to_str()).unwrap_or("").to_string();
        let profile_dir =
            if parent_name == "deps" || parent_name == "examples" { parent.parent() } else { Some(parent.as_path()) };
        let profile = profile_dir.and_then(|p| p.file_name()).and_then(|n| n.to_str()).unwrap_or("debug").to_string();
        let thread_test = std::thread::current().name().filter(|n| *n != "main").map(str::to_string);
        let test = test_override.map(str::to_string).or(thread_test);
        let in_target = profile_dir.and_then(Path::parent).is_some();
        let kind = match parent_name.as_str() {
            "deps" if in_target => {
                let target = match stem.rsplit_once('-') {
                    Some((name, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => {
                        name.to_string()
                    }
                    _ => stem.clone(),
                };
                let lib = package.as_deref().is_some_and(|p| p.replace('-', "_") == target);
                TargetKind::Test { target, lib, test }
            }
            "examples" if in_target => TargetKind::Example(stem),
            _ if package.is_some() && in_target && (profile == "debug" || profile == "release") => {
                TargetKind::Bin(stem)
            }
            _ => TargetKind::Exe(exe.clone()),
        };
        Invocation { kind, package, profile, exe, args }
    }

    /// The test's name for reports and trace directories.
    pub(crate) fn display_name(&self) -> String {
        match &self.kind {
            TargetKind::Test { target, test: Some(test), .. } => format!("{target}::{test}"),
            TargetKind::Test { target, test: None, .. } => target.clone(),
            TargetKind::Example(name) | TargetKind::Bin(name) => name.clone(),
            TargetKind::Exe(path) => path.file_name().and_then(|n| n.to_str()).unwrap_or("sim").to_string(),
        }
    }

    fn profile_flag(&self) -> String {
        match self.profile.as_str() {
            "debug" => String::new(),
            "release" => " --release".to_string(),
            other => format!(" --profile {other}"),
        }
    }

    /// The copy-paste command that replays `env` (e.g. `SIM_SEED=7`) under this invocation.
    pub(crate) fn replay_command(&self, env: &[(String, String)], features: &[String]) -> String {
        let env: String = env.iter().map(|(k, v)| format!("{k}={} ", shell_quote(v))).collect();
        let package = self.package.as_deref().map(|p| format!(" -p {p}")).unwrap_or_default();
        let features = if features.is_empty() { String::new() } else { format!(" --features {}", features.join(",")) };
        let profile = self.profile_flag();
        let args = if self.args.is_empty() {
            String::new()
        } else {
            format!(" -- {}", self.args.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" "))
        };
        match &self.kind {
            TargetKind::Test { target, lib, test } => {
                let which = if *lib { " --lib".to_string() } else { format!(" --test {target}") };
                let ignored = if self.ignored() { " --include-ignored" } else { "" };
                let filter =
                    test.as_deref().map(|t| format!(" -- {t} --exact{ignored} --nocapture")).unwrap_or_default();
                format!("{env}cargo test{profile}{package}{which}{features}{filter}")
            }
            TargetKind::Example(name) => {
                format!("{env}cargo run{profile}{package} --example {name}{features}{args}")
            }
            TargetKind::Bin(name) => {
                format!("{env}cargo run{profile}{package} --bin {name}{features}{args}")
            }
            TargetKind::Exe(path) => {
                format!("{env}{}{}", shell_quote(&path.display().to_string()), args.replacen(" --", "", 1))
            }
        }
    }

    /// Arguments that make this executable run the same simulation again (the libtest filter for
    /// a test; the original arguments otherwise).
    pub(crate) fn rerun_args(&self) -> Option<Vec<String>> {
        match &self.kind {
            TargetKind::Test { test: Some(test), .. } => {
                let mut args = vec![test.clone(), "--exact".into(), "--nocapture".into(), "--test-threads=1".into()];
                if self.ignored() {
                    args.push("--include-ignored".into());
                }
                Some(args)
            }
            TargetKind::Test { test: None, .. } => None,
            _ => Some(self.args.clone()),
        }
    }

    /// Whether libtest was asked to run ignored tests (so replays must ask too).
    fn ignored(&self) -> bool {
        self.args.iter().any(|a| a == "--ignored" || a == "--include-ignored")
    }

    /// Whether the executable is a test binary (which libtest filters by name).
    pub(crate) fn is_test(&self) -> bool {
        matches!(self.kind, TargetKind::Test { .. })
    }

    /// The directory traces go under: `<target>/sim`, with `<target>` found from the
    /// executable's path (cargo's layout: `<target>/<profile>/deps/<test>-<hash>`), else
    /// `$CARGO_TARGET_DIR/sim`, else `target/sim`; always absolute.
    pub(crate) fn trace_root(&self) -> PathBuf {
        let mut dir = self.exe.parent();
        if dir.and_then(Path::file_name).is_some_and(|n| n == "deps" || n == "examples") {
            dir = dir.and_then(Path::parent);
        }
        let root = match dir.and_then(Path::parent) {
            Some(target) if !matches!(self.kind, TargetKind::Exe(_)) => target.join("sim"),
            _ => {
                std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from).join("sim")
            }
        };
        std::path::absolute(&root).unwrap_or(root)
    }
}

/// Quotes a value for a POSIX shell when it needs it.
pub(crate) fn shell_quote(value: &str) -> String {
    if !value.is_empty() && value.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c)) {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', "'\\''"))
    }
}

/// How many fresh processes reproduced a failing seed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Replays {
    /// Processes that gave the same class and history hash.
    pub matched: u32,
    /// Processes run.
    pub of: u32,
    /// For a process that differed: what differed (class, or the first divergent event).
    pub divergence: Option<String>,
}

impl fmt::Display for Replays {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.of == 0 {
            return match &self.divergence {
                Some(why) => write!(f, "not confirmed in a fresh process: {why}"),
                None => f.write_str("not confirmed in a fresh process"),
            };
        }
        if self.matched == self.of {
            write!(f, "replays exactly ({} of {} fresh processes)", self.matched, self.of)
        } else {
            write!(f, "replays {} of {}", self.matched, self.of)?;
            if let Some(d) = &self.divergence {
                write!(f, "; {d}")?;
            }
            Ok(())
        }
    }
}

/// Counts of what the interposition answered during a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Interposed {
    /// `getrandom`/`getentropy` calls answered from the seed.
    pub getrandom_calls: u64,
    /// Bytes answered.
    pub getrandom_bytes: u64,
    /// Clock reads answered from the fake clock.
    pub clock_reads: u64,
}

/// Hashes travel as 16 hex digits in JSON: a `u64` above 2^53 does not survive JSON numbers.
mod hex64 {
    pub fn serialize<S: serde::Serializer>(value: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{value:016x}"))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        u64::from_str_radix(&text, 16).map_err(serde::de::Error::custom)
    }
}

/// One fault a run scheduled with [`crate::fault::at`], as [`crate::Outcome::faults`] lists it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FaultRecord {
    /// Its number: 1 for the run's first [`crate::fault::at`], in scheduling order (what `SIM_DROP_FAULTS`
    /// names).
    pub number: usize,
    /// What it does ([`crate::fault::Fault::describe`]).
    pub label: String,
    /// When it was scheduled to install: fake time since the run started, in nanoseconds.
    pub at_nanos: u64,
    /// Whether `SIM_DROP_FAULTS` dropped it (its events fired and did nothing).
    pub dropped: bool,
}

/// The outcome of one seed.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    /// The simulation's name.
    pub simulation: String,
    /// The seed.
    pub seed: Seed,
    /// How it failed, or `None` when it passed.
    pub failure: Option<Failure>,
    /// The history's chained hash.
    #[serde(with = "hex64")]
    pub history_hash: u64,
    /// The number of history events.
    pub events: u64,
    /// The schedule hash: the sequence of polled tasks.
    #[serde(with = "hex64")]
    pub schedule_hash: u64,
    /// Task polls.
    pub polls: u64,
    /// Fake time the run covered, in nanoseconds.
    pub fake_nanos: u64,
    /// Wall time the run took, in nanoseconds.
    pub wall_nanos: u64,
    /// The swarm, as `name=value,…`.
    pub swarm: String,
    /// Every swarm dimension the run drew, with its simplest value as `SIM_SWARM` text (an
    /// integer's, duration's or ratio's low end, `false` for a flag, a choice's first option):
    /// what [`crate::Simulation::minimize`] knocks a dimension out to.
    #[serde(default)]
    pub swarm_simplest: BTreeMap<String, String>,
    /// Every fault the run scheduled with [`crate::fault::at`], in scheduling order (numbered
    /// from 1, as `SIM_DROP_FAULTS` names them).
    #[serde(default)]
    pub faults: Vec<FaultRecord>,
    /// Operations started by the run's [`crate::workload::Workload::run`] calls (at most
    /// `SIM_MAX_OPS` each).
    #[serde(default)]
    pub operations: u64,
    /// What the interposition answered.
    pub interposed: Interposed,
    /// The command that replays this seed.
    pub replay: String,
    /// Fresh-process confirmation of a failure.
    pub replays: Option<Replays>,
    /// Where the trace was written (failures only).
    pub trace: Option<PathBuf>,
}

impl Outcome {
    /// Whether the seed failed (an excused violation does not).
    pub fn failed(&self) -> bool {
        self.failure.as_ref().is_some_and(|f| f.class.fails())
    }

    /// Fake time the run covered.
    pub fn fake_elapsed(&self) -> Duration {
        Duration::from_nanos(self.fake_nanos)
    }

    /// Wall time the run took.
    pub fn wall(&self) -> Duration {
        Duration::from_nanos(self.wall_nanos)
    }
}

/// The outcome of a sweep: every seed's [`Outcome`], in seed order as given.
///
/// A failing report must be looked at: one dropped before [`Report::assert_passed`],
/// [`Report::passed`], [`Report::failures`] or [`Report::first_failure`] was called on it (or on
/// a clone) panics, with the failure summary in the message, so a test that forgets its
/// assertion fails instead of passing silently — and `cargo test` shows the summary even though
/// it captured the sweep's output. Reading the public fields does not count: they say what ran,
/// not whether it failed. A passing report may be dropped unread, and a report dropped while the
/// thread is already panicking (a failed assertion) stays quiet.
#[must_use = "a sweep's report says whether it failed: call .assert_passed() on it (or read .passed() / .failures())"]
#[derive(Clone, Debug)]
pub struct Report {
    /// The simulation's name.
    pub simulation: String,
    /// The identity of the build that ran.
    pub identity: Identity,
    /// One outcome per seed.
    pub outcomes: Vec<Outcome>,
    /// Wall time of the whole sweep, confirmations included.
    pub wall: Duration,
    /// Whether the verdict was read (shared by clones: reading either counts).
    inspected: Arc<AtomicBool>,
}

impl Report {
    pub(crate) fn new(simulation: String, identity: Identity, outcomes: Vec<Outcome>, wall: Duration) -> Report {
        Report { simulation, identity, outcomes, wall, inspected: Arc::new(AtomicBool::new(false)) }
    }

    fn inspect(&self) {
        self.inspected.store(true, Ordering::Relaxed);
    }

    /// The seeds that failed (excused violations excluded). Counts as checking the report.
    pub fn failures(&self) -> impl Iterator<Item = &Outcome> {
        self.inspect();
        self.failed_outcomes()
    }

    /// The failing seeds, without counting as a check (printing a report is not checking it).
    pub(crate) fn failed_outcomes(&self) -> impl Iterator<Item = &Outcome> {
        self.outcomes.iter().filter(|o| o.failed())
    }

    /// The first failing seed, if any. Counts as checking the report.
    pub fn first_failure(&self) -> Option<&Outcome> {
        self.failures().next()
    }

    /// Whether every seed passed (or was excused). Counts as checking the report.
    pub fn passed(&self) -> bool {
        self.failures().next().is_none()
    }

    /// Panics unless every seed passed, with the failure summary (as printed to stderr when the
    /// sweep ended) in the message: the count, each failing seed's failure, confirmation, replay
    /// line and trace.
    #[track_caller]
    pub fn assert_passed(&self) {
        if !self.passed() {
            panic!("{}", self.failure_message(None));
        }
    }

    /// The panic message of a failing report: a headline, then the summary.
    fn failure_message(&self, why: Option<&str>) -> String {
        let failed = self.failed_outcomes().count();
        let mut text = format!("simulation {}: {failed} of {} seeds failed", self.simulation, self.outcomes.len());
        if let Some(why) = why {
            text.push_str(why);
        }
        text.push('\n');
        text.push_str(&self.to_string());
        text
    }
}

/// A failing report nobody checked fails the thread that dropped it (see [`Report`]).
impl Drop for Report {
    fn drop(&mut self) {
        // A clone still alive may yet be checked; a thread already unwinding has failed anyway
        // (and a second panic would abort the process).
        if self.inspected.load(Ordering::Relaxed)
            || Arc::strong_count(&self.inspected) > 1
            || std::thread::panicking()
            || self.failed_outcomes().next().is_none()
        {
            return;
        }
        panic!(
            "{}",
            self.failure_message(Some(
                ", and the report was dropped unchecked: call .assert_passed() on what Simulation::run returns \
                 (or read .passed() / .failures())"
            ))
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failed: Vec<&Outcome> = self.failed_outcomes().collect();
        let excused =
            self.outcomes.iter().filter(|o| o.failure.as_ref().is_some_and(|f| f.class == Class::Excused)).count();
        writeln!(
            f,
            "sim: {}: {} seed{}, {} failed{}, {:.2}s",
            self.simulation,
            self.outcomes.len(),
            if self.outcomes.len() == 1 { "" } else { "s" },
            failed.len(),
            if excused > 0 { format!(", {excused} excused") } else { String::new() },
            self.wall.as_secs_f64()
        )?;
        const SHOWN_MAX: usize = 10;
        for outcome in failed.iter().take(SHOWN_MAX) {
            let failure = outcome.failure.as_ref().expect("a failed outcome has a failure");
            let at =
                failure.at().map(|d| format!(" (at {})", crate::history::format_elapsed(d).trim())).unwrap_or_default();
            writeln!(f, "  seed {}{at}: {failure}", outcome.seed)?;
            if let Some(replays) = &outcome.replays {
                writeln!(f, "    {replays}")?;
            }
            writeln!(f, "    replay: {}", outcome.replay)?;
            if let Some(trace) = &outcome.trace {
                writeln!(f, "    trace:  {}", trace.display())?;
            }
        }
        if failed.len() > SHOWN_MAX {
            let rest: Vec<String> = failed[SHOWN_MAX..].iter().map(|o| o.seed.to_string()).collect();
            writeln!(f, "  … and {} more failing seeds: {}", rest.len(), rest.join(" "))?;
        }
        Ok(())
    }
}

/// Writes a run's trace to `<root>/<simulation>/<seed>/trace.log`; returns the path.
pub(crate) fn write_trace(
    root: &Path,
    test: &str,
    seed: Seed,
    header: &[String],
    lines: &[String],
) -> std::io::Result<PathBuf> {
    let dir = root.join(sanitize(test)).join(seed.to_string());
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("trace.log");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    for line in header.iter().chain(lines) {
        writeln!(file, "{line}")?;
    }
    file.flush()?;
    Ok(path)
}

fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

/// What a `SIM_JSON` line says about the sweep that ran the seed, beyond its [`Outcome`].
#[derive(Clone, Copy, Debug, Default)]
pub struct LineLabels<'a> {
    /// `replay` or `explore` (empty: `replay`).
    pub mode: &'a str,
    /// `SIM_SHARD`'s `i/n`, when sharded.
    pub shard: Option<&'a str>,
    /// The build's seed base, when the seeds came from it (`SIM_SEEDS=build:N`).
    pub seed_base: Option<u64>,
}

/// The `SIM_JSON` line of `outcome`, without its newline: the outcome's fields flattened, with
/// `class`, `oracle`, `signature` ([`crate::signature`]), `identity`, `mode`, and `shard` and
/// `seed_base` (16 hex digits) when set. The fields are listed in the book's environment page;
/// `fleet merge` reads them.
pub fn json_line(outcome: &Outcome, identity: &Identity, labels: &LineLabels<'_>) -> String {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        #[serde(flatten)]
        outcome: &'a Outcome,
        class: Option<Class>,
        oracle: Option<&'a str>,
        signature: Option<String>,
        identity: &'a Identity,
        mode: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        shard: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        seed_base: Option<String>,
    }
    let failure = outcome.failure.as_ref();
    let line = Line {
        outcome,
        class: failure.map(|f| f.class),
        oracle: failure.and_then(|f| f.oracle.as_deref()),
        signature: outcome.signature(),
        identity,
        mode: if labels.mode.is_empty() { "replay" } else { labels.mode },
        shard: labels.shard,
        seed_base: labels.seed_base.map(|b| format!("{b:016x}")),
    };
    serde_json::to_string(&line).expect("an outcome serializes: its fields are strings and numbers")
}

/// Appends `outcome`'s [`json_line`] to the file `SIM_JSON` names (if set).
pub(crate) fn append_json(outcome: &Outcome, identity: &Identity, labels: &LineLabels<'_>) -> std::io::Result<()> {
    let Some(path) = std::env::var_os("SIM_JSON").filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let mut text = json_line(outcome, identity, labels);
    text.push('\n');
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(text.as_bytes())
}

/// Writes one unbuffered line to the process's standard error (not captured by libtest, so it
/// is there even if the process aborts).
pub(crate) fn stderr_line(line: &str) {
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    let _ = std::io::stderr().write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "tonic")]
    #[test]
    fn question_mark_on_tonic_errors_is_a_grpc_correctness_failure_with_the_sources() {
        fn body() -> Result<(), Failure> {
            Err(tonic::Status::unavailable("tcp connect error"))?;
            Ok(())
        }
        let f = body().unwrap_err();
        assert_eq!((f.class, f.oracle.as_deref()), (Class::Correctness, Some("grpc")));
        assert_eq!(f.message, "status Unavailable: tcp connect error");

        let bad = tonic::transport::Endpoint::from_shared("not a uri".to_string()).unwrap_err();
        let f = Failure::from(bad);
        assert_eq!(f.oracle.as_deref(), Some("grpc"));
        assert_eq!(f.message, "invalid URI: invalid uri character", "the error, then its source");
    }

    fn invocation(kind: TargetKind, profile: &str) -> Invocation {
        Invocation {
            kind,
            package: Some("shop".into()),
            profile: profile.into(),
            exe: PathBuf::from("/x/target/debug/deps/t-0123456789abcdef"),
            args: vec![],
        }
    }

    #[test]
    fn replay_commands_name_the_target_profile_and_features() {
        let env = vec![("SIM_SEED".to_string(), "7".to_string())];
        let test =
            invocation(TargetKind::Test { target: "cart".into(), lib: false, test: Some("checkout".into()) }, "debug");
        assert_eq!(
            test.replay_command(&env, &[]),
            "SIM_SEED=7 cargo test -p shop --test cart -- checkout --exact --nocapture"
        );
        let lib =
            invocation(TargetKind::Test { target: "shop".into(), lib: true, test: Some("a::b".into()) }, "release");
        assert_eq!(
            lib.replay_command(&env, &["planted".into()]),
            "SIM_SEED=7 cargo test --release -p shop --lib --features planted -- a::b --exact --nocapture"
        );
        let mut example = invocation(TargetKind::Example("sweep".into()), "release");
        example.args = vec!["--seeds".into(), "300".into()];
        assert_eq!(
            example.replay_command(&env, &[]),
            "SIM_SEED=7 cargo run --release -p shop --example sweep -- --seeds 300"
        );
        let exe = invocation(TargetKind::Exe(PathBuf::from("/opt/my sim")), "debug");
        assert_eq!(exe.replay_command(&env, &[]), "SIM_SEED=7 '/opt/my sim'");
        let custom = invocation(TargetKind::Bin("main".into()), "bench-fast");
        assert_eq!(
            custom.replay_command(&[("SIM_SWARM".into(), "a=1,b=2ms".into())], &[]),
            "SIM_SWARM=a=1,b=2ms cargo run --profile bench-fast -p shop --bin main"
        );
    }

    #[test]
    fn shell_quoting_only_where_needed() {
        assert_eq!(shell_quote("plain-value_1.2"), "plain-value_1.2");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn classes_print_their_names_and_excused_does_not_fail() {
        assert_eq!(Class::ReplayDiverged.to_string(), "replay diverged");
        assert!(!Class::Excused.fails());
        assert!(Class::Deadlock.fails());
        let f = Failure::correctness(crate::oracle::Oracle::IDEMPOTENCY, "charged twice");
        assert_eq!(f.to_string(), "correctness [idempotency]: charged twice");
    }
}
