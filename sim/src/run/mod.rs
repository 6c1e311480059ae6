//! The public entry: a [`Simulation`] run over seeds, and the [`Ctx`] each run's body gets.
//!
//! A test calls [`Simulation::run`] once with an async body. For each seed:
//! 1. one unbuffered stderr line gives the seed, the commit and the command that replays it —
//!    before the run, so it survives an abort (the full build identity is printed once per sweep);
//! 2. a fresh OS thread arms the interposition, builds a paused `current_thread` runtime seeded
//!    from the seed, and runs the body next to the harness tasks (the [`crate::Driver`] and the
//!    deadlock watcher);
//! 3. the run ends when the body returns (at the end of that fake instant: the tasks already
//!    woken at it run first, without fake time advancing; then the final checks), an oracle calls
//!    [`Ctx::fail`], nothing runs for the horizon (*deadlock*), the fake-time limit passes
//!    (*liveness*), code panics (*panic*), or the wall-clock watchdog fires (*inconclusive*,
//!    saying whether the thread was busy, blocked, or still advancing fake time);
//! 4. the outcome carries the history hash, the schedule hash and what the interposition answered.
//!
//! Panics are caught per run, so a sweep reports every failing seed. Each failing seed is then
//! re-run in fresh processes (default 3, `SIM_CONFIRM`) and labelled "replays exactly" or
//! "replays k of n". `SIM_REPEAT=k` runs each seed k times in-process and `SIM_REPEAT_PROCESSES=n`
//! runs the whole sweep again in n fresh processes; any difference in history or schedule is a
//! *replay diverged* failure naming the first divergent event (a failing seed that a confirming
//! process did not reproduce too). Every fresh process first makes its own number of throw-away
//! runs, so process-wide state (a counter in a static) cannot make a leaky seed look exact.
//!
//! Environment (each overrides the builder; a value that does not parse is an error, never
//! ignored):
//!
//! | variable | meaning |
//! |---|---|
//! | `SIM_SEED` | one seed (decimal or `0x` hex); wins over `SIM_SEEDS` |
//! | `SIM_SEEDS` | `0..500`, `0..=9`, `random:200`, or a list `1,5,9` (at most [`SEEDS_MAX`]) |
//! | `SIM_SHARD` | `i/n`: run only the seeds whose position is `i` modulo `n` |
//! | `SIM_MODE` | `replay` (default) or `explore` |
//! | `SIM_SWARM` | pinned swarm dimensions: `latency=0ms,replicas=1` |
//! | `SIM_REPEAT` | runs per seed in this process (self-check) |
//! | `SIM_REPEAT_PROCESSES` | fresh processes re-running the sweep (self-check) |
//! | `SIM_CONFIRM` | fresh processes re-running each failing seed (default 3); one that does not reproduce it makes the seed *replay diverged* |
//! | `SIM_JOBS` | seeds run in parallel (default: available cores) |
//! | `SIM_WATCHDOG` | wall-clock bound per run (default 60s) |
//! | `SIM_SEED_LINES` | `0`/`off`: print neither the sweep's first line (name, seed count, identity) nor the line before each seed |
//! | `SIM_JSON` | append one JSON line per seed to this file (relative to the working directory: cargo runs tests in the package's directory) |
//! | `SIM_TRACE` | `all`: write the trace of every seed, not only failures |
//! | `SIM_LOG` | the trace's `tracing` filter (default `info`) |
//! | `SIM_ONLY` | run only the simulation with this name (others in the binary say they were skipped and return empty reports) |

mod ctx;
mod once;
mod sweep;

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub use ctx::{Ctx, NetConfigTooLate};

use crate::report::{Failure, Outcome, Report};
use crate::seed::{Seed, Source};
use crate::swarm::SwarmError;

/// The most seeds one sweep runs.
pub const SEEDS_MAX: u64 = 10_000_000;

/// How a run draws its schedule.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The schedule as drawn from the seed (default). Exact.
    #[default]
    Replay,
    /// The seed also draws perturbations (scheduler intervals, wider event spreads, yields between
    /// harness events) to widen the interleavings searched. Still exact per seed.
    Explore,
}

impl FromStr for Mode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "replay" | "" => Ok(Mode::Replay),
            "explore" => Ok(Mode::Explore),
            other => {
                Err(ConfigError::Invalid { var: "SIM_MODE", value: other.to_string(), expected: "replay or explore" })
            }
        }
    }
}

/// Which seeds a sweep runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seeds {
    /// These seeds, in this order.
    List(Vec<u64>),
    /// A half-open range.
    Range(Range<u64>),
    /// This many fresh seeds from the OS's entropy (printed, so each replays).
    Random(usize),
}

impl From<Range<u64>> for Seeds {
    fn from(r: Range<u64>) -> Seeds {
        Seeds::Range(r)
    }
}

impl From<std::ops::RangeInclusive<u64>> for Seeds {
    fn from(r: std::ops::RangeInclusive<u64>) -> Seeds {
        Seeds::Range(*r.start()..r.end().saturating_add(1))
    }
}

impl From<Vec<u64>> for Seeds {
    fn from(v: Vec<u64>) -> Seeds {
        Seeds::List(v)
    }
}

impl FromStr for Seeds {
    type Err = ConfigError;
    /// `0..500`, `0..=9`, `random:200`, `42`, or `1,5,9`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let bad = || ConfigError::Invalid {
            var: "SIM_SEEDS",
            value: s.to_string(),
            expected: "a range 0..500 or 0..=9, random:N, or a list 1,5,9",
        };
        let seed = |x: &str| x.parse::<Seed>().map(|s| s.0).map_err(|_| bad());
        if let Some(count) = t.strip_prefix("random:") {
            return count.trim().parse().map(Seeds::Random).map_err(|_| bad());
        }
        let backwards = || ConfigError::Invalid {
            var: "SIM_SEEDS",
            value: s.to_string(),
            expected: "a range whose start is not above its end (0..500, 0..=9)",
        };
        if let Some((a, b)) = t.split_once("..=") {
            let (a, b) = (seed(a)?, seed(b)?);
            return if a <= b { Ok(Seeds::Range(a..b.saturating_add(1))) } else { Err(backwards()) };
        }
        if let Some((a, b)) = t.split_once("..") {
            let (a, b) = (seed(a)?, seed(b)?);
            return if a <= b { Ok(Seeds::Range(a..b)) } else { Err(backwards()) };
        }
        let items: Vec<&str> = t.split(',').map(str::trim).collect();
        if items.iter().any(|x| x.is_empty()) {
            return Err(bad());
        }
        items.into_iter().map(seed).collect::<Result<Vec<_>, _>>().map(Seeds::List)
    }
}

impl Seeds {
    /// How many seeds this is.
    pub fn len(&self) -> u64 {
        match self {
            Seeds::List(v) => v.len() as u64,
            Seeds::Range(r) => r.end.saturating_sub(r.start),
            Seeds::Random(n) => *n as u64,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The seeds themselves.
    ///
    /// # Errors
    /// [`ConfigError::NoSeeds`] when empty; [`ConfigError::TooManySeeds`] above [`SEEDS_MAX`].
    pub fn resolve(&self) -> Result<Vec<Seed>, ConfigError> {
        match self.len() {
            0 => Err(ConfigError::NoSeeds(format!("{self:?}"))),
            n if n > SEEDS_MAX => Err(ConfigError::TooManySeeds(n)),
            _ => Ok(match self {
                Seeds::List(v) => v.iter().copied().map(Seed).collect(),
                Seeds::Range(r) => r.clone().map(Seed).collect(),
                Seeds::Random(n) => (0..*n).map(|_| Seed(os_random_u64())).collect(),
            }),
        }
    }
}

fn os_random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // Called on a sweep thread, never a simulation thread: this is the OS's entropy.
    // SAFETY: the buffer is valid for 8 bytes.
    let n = unsafe { crate::runtime::interpose::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != 8 {
        use std::hash::BuildHasher;
        return std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    }
    u64::from_le_bytes(bytes)
}

/// A configuration error: an environment variable or builder value that cannot be used.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ConfigError {
    /// A variable's value does not parse.
    #[error("{var}={value:?}: expected {expected}")]
    Invalid {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it takes.
        expected: &'static str,
    },
    /// The seeds to run are none.
    #[error("no seeds to run ({0}): give SIM_SEEDS a non-empty range or list")]
    NoSeeds(String),
    /// More seeds than [`SEEDS_MAX`].
    #[error("{0} seeds is more than one sweep runs (SEEDS_MAX = 10000000): shard it with SIM_SHARD=i/n")]
    TooManySeeds(u64),
    /// `SIM_JSON` names a file that cannot be appended to.
    #[error("SIM_JSON={path:?}: cannot append to it: {reason}")]
    Json {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// A swarm override is wrong.
    #[error(transparent)]
    Swarm(#[from] SwarmError),
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<(), Failure>>>>;
type Body = dyn Fn(Ctx) -> BoxFuture + Send + Sync;

/// A simulation: a name, its seeds and bounds, run with an async body per seed.
///
/// ```no_run
/// use std::time::Duration;
/// use sim::{Failure, Simulation};
///
/// let report = Simulation::new("ping").seeds(0..100).run(|ctx| async move {
///     let latency = ctx.swarm().duration("latency", Duration::ZERO..=Duration::from_millis(50));
///     tokio::time::sleep(latency).await;
///     ctx.record("ping", "client", format!("after {latency:?}"));
///     if ctx.elapsed() < latency {
///         return Err(Failure::correctness("clock", "time went backwards"));
///     }
///     Ok(())
/// });
/// report.assert_passed();
/// ```
#[derive(Clone, Debug)]
pub struct Simulation {
    pub(crate) name: String,
    pub(crate) seeds: Seeds,
    pub(crate) mode: Mode,
    pub(crate) repeat: u32,
    pub(crate) repeat_processes: u32,
    pub(crate) confirm: u32,
    pub(crate) jobs: usize,
    pub(crate) horizon: Duration,
    pub(crate) time_limit: Duration,
    pub(crate) watchdog: Duration,
    pub(crate) swarm: BTreeMap<String, String>,
    pub(crate) features: Vec<String>,
    pub(crate) test_name: Option<String>,
    pub(crate) allow_recovered_panics: bool,
    pub(crate) enable_io: bool,
    pub(crate) trace_tail: usize,
    pub(crate) seed_lines: bool,
    pub(crate) progress: bool,
    pub(crate) stop_after_failures: Option<usize>,
}

impl Simulation {
    /// Seeds run when neither the builder nor `SIM_SEED`/`SIM_SEEDS` says otherwise: a small
    /// fixed range, so a plain `cargo test` is a deterministic gate.
    pub const DEFAULT_SEEDS: Range<u64> = 0..32;
    /// The default deadlock horizon: fake time with nothing polled and nothing scheduled.
    pub const DEFAULT_HORIZON: Duration = Duration::from_secs(600);
    /// The default fake-time limit of a run.
    pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(3600);
    /// The default wall-clock watchdog of a run.
    pub const DEFAULT_WATCHDOG: Duration = Duration::from_secs(60);

    /// A simulation named `name` (the trace directory and `SIM_ONLY` use it).
    pub fn new(name: impl Into<String>) -> Simulation {
        Simulation {
            name: name.into(),
            seeds: Seeds::Range(Self::DEFAULT_SEEDS),
            mode: Mode::Replay,
            repeat: 1,
            repeat_processes: 0,
            confirm: 3,
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            horizon: Self::DEFAULT_HORIZON,
            time_limit: Self::DEFAULT_TIME_LIMIT,
            watchdog: Self::DEFAULT_WATCHDOG,
            swarm: BTreeMap::new(),
            features: Vec::new(),
            test_name: None,
            allow_recovered_panics: false,
            enable_io: false,
            trace_tail: 20,
            seed_lines: true,
            progress: false,
            stop_after_failures: None,
        }
    }

    /// The seeds to run (`SIM_SEED`/`SIM_SEEDS` override).
    pub fn seeds(mut self, seeds: impl Into<Seeds>) -> Self {
        self.seeds = seeds.into();
        self
    }

    /// Replay (default) or explore (`SIM_MODE` overrides).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Runs each seed `k` times in this process and compares histories (`SIM_REPEAT`).
    pub fn repeat(mut self, k: u32) -> Self {
        self.repeat = k.max(1);
        self
    }

    /// Re-runs the sweep in `n` fresh processes and compares histories (`SIM_REPEAT_PROCESSES`).
    pub fn repeat_processes(mut self, n: u32) -> Self {
        self.repeat_processes = n;
        self
    }

    /// Fresh processes that re-run each failing seed (default 3; `SIM_CONFIRM`).
    pub fn confirm(mut self, n: u32) -> Self {
        self.confirm = n;
        self
    }

    /// Seeds run in parallel, each on its own thread (default: available cores; `SIM_JOBS`).
    pub fn jobs(mut self, jobs: usize) -> Self {
        self.jobs = jobs.max(1);
        self
    }

    /// Fake time with no task polled and no harness event pending after which a run is a
    /// *deadlock* (default [`Simulation::DEFAULT_HORIZON`], 10 minutes). Set it above the longest
    /// timer a node may wait on with nothing else happening.
    pub fn horizon(mut self, horizon: Duration) -> Self {
        self.horizon = horizon;
        self
    }

    /// Fake time after which an unfinished run is a *liveness* failure (default
    /// [`Simulation::DEFAULT_TIME_LIMIT`], 1 hour). A periodic 1 ms timer costs about a second of
    /// wall time per simulated hour in a debug build: keep the limit near what the test needs.
    pub fn time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = limit;
        self
    }

    /// Wall-clock time after which a run is *inconclusive* (default 60 s; `SIM_WATCHDOG`).
    pub fn watchdog(mut self, watchdog: Duration) -> Self {
        self.watchdog = watchdog;
        self
    }

    /// Pins a swarm dimension (`SIM_SWARM` overrides per name).
    pub fn swarm(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.swarm.insert(name.into(), value.into());
        self
    }

    /// Cargo features the test needs; they go into the replay line (`--features a,b`).
    pub fn features(mut self, features: &[&str]) -> Self {
        self.features = features.iter().map(|f| f.to_string()).collect();
        self
    }

    /// The libtest name of the calling test, when the thread name does not give it (libtest
    /// names each test's thread after the test, so this is needed only when the simulation runs
    /// on a thread of your own).
    pub fn test_name(mut self, name: impl Into<String>) -> Self {
        self.test_name = Some(name.into());
        self
    }

    /// Lets panics that code caught itself (`catch_unwind`, a panic-catching middleware) pass.
    /// By default any panic on the run's thread fails the run.
    pub fn allow_recovered_panics(mut self, allow: bool) -> Self {
        self.allow_recovered_panics = allow;
        self
    }

    /// Enables tokio's I/O driver in the run's runtime (real sockets; such runs cannot replay
    /// exactly). Off by default: simulated networks need none.
    pub fn enable_io(mut self, enable: bool) -> Self {
        self.enable_io = enable;
        self
    }

    /// Lines of a failing run's trace printed (default 20).
    pub fn trace_tail(mut self, lines: usize) -> Self {
        self.trace_tail = lines;
        self
    }

    /// Whether to print the sweep's first line (name, seed count, identity) and the line (seed,
    /// commit, replay command) before each seed (default true; `SIM_SEED_LINES=0` turns them off).
    /// Failures print their replay line either way.
    pub fn seed_lines(mut self, on: bool) -> Self {
        self.seed_lines = on;
        self
    }

    /// Shows a progress bar on stderr for sweeps that take over a second (redrawn in place on a
    /// terminal; a line per tenth of the seeds otherwise). Off by default.
    pub fn progress(mut self, on: bool) -> Self {
        self.progress = on;
        self
    }

    /// Stops starting new seeds once `n` have failed (seeds already running finish): for
    /// measuring how many seeds it takes to find a bug. The report holds the seeds that ran.
    pub fn stop_after_failures(mut self, n: usize) -> Self {
        self.stop_after_failures = Some(n.max(1));
        self
    }

    /// Runs the sweep, prints its summary to stderr, and returns the [`Report`]: check it with
    /// [`Report::assert_passed`]. A failing report dropped unchecked panics (see [`Report`]), so a
    /// forgotten assertion fails the test rather than passing it.
    ///
    /// # Panics
    /// On a configuration error (an unparsable `SIM_*` variable, no seeds, a swarm override naming
    /// a dimension that no seed drew), with the error's message. [`Simulation::try_run`] returns
    /// it instead.
    #[track_caller]
    #[must_use = "the report says whether the sweep failed: call .assert_passed() on it"]
    pub fn run<F, Fut>(&self, body: F) -> Report
    where
        F: Fn(Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        match self.try_run(body) {
            Ok(report) => report,
            Err(e) => panic!("simulation {}: {e}", self.name),
        }
    }

    /// Runs the sweep (see [`Simulation::run`]).
    ///
    /// # Errors
    /// [`ConfigError`] when a `SIM_*` variable or a swarm override cannot be used.
    #[must_use = "the report says whether the sweep failed: call .assert_passed() on it"]
    pub fn try_run<F, Fut>(&self, body: F) -> Result<Report, ConfigError>
    where
        F: Fn(Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        let body: Arc<Body> = Arc::new(move |ctx| Box::pin(body(ctx)) as BoxFuture);
        sweep::Sweep::new(self)?.run(body)
    }

    /// Runs one run whose choices come from fuzz bytes (`data`), for a cargo-fuzz/libFuzzer
    /// target: every stream of the run reads `data` in draw order, and once it is used up every
    /// draw returns its simplest value, so shrinking the input simplifies the run. The runtime's
    /// own randomness (`getrandom`, tokio's RNG) is keyed from seed 0.
    pub fn run_fuzz<F, Fut>(&self, data: &[u8], body: F) -> Outcome
    where
        F: Fn(Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        let body: Arc<Body> = Arc::new(move |ctx| Box::pin(body(ctx)) as BoxFuture);
        let mut spec = once::RunSpec::from_sim(self, Seed(0), self.swarm.clone());
        spec.fuzz = Some(Source::from_bytes(data.to_vec()));
        once::run_once(spec, body, self.watchdog).outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_every_documented_form() {
        assert_eq!("0..5".parse::<Seeds>(), Ok(Seeds::Range(0..5)));
        assert_eq!("3..=4".parse::<Seeds>(), Ok(Seeds::Range(3..5)));
        assert_eq!("random:7".parse::<Seeds>(), Ok(Seeds::Random(7)));
        assert_eq!("42".parse::<Seeds>(), Ok(Seeds::List(vec![42])));
        assert_eq!("1, 5,0x10".parse::<Seeds>(), Ok(Seeds::List(vec![1, 5, 16])));
        for bad in ["", "5..1", "a..b", "random:x", "1,,3", "1,x"] {
            let err = bad.parse::<Seeds>().expect_err(bad);
            assert!(err.to_string().starts_with("SIM_SEEDS="), "{err}");
        }
        assert_eq!(Seeds::Random(5).resolve().map(|s| s.len()), Ok(5));
    }

    #[test]
    fn empty_and_huge_seed_sets_are_errors() {
        assert!(matches!("5..5".parse::<Seeds>().and_then(|s| s.resolve()), Err(ConfigError::NoSeeds(_))));
        let Err(ConfigError::Invalid { expected, .. }) = "5..2".parse::<Seeds>() else { panic!("5..2 parsed") };
        assert!(expected.contains("start is not above its end"), "{expected}");
        assert!(matches!("random:0".parse::<Seeds>().and_then(|s| s.resolve()), Err(ConfigError::NoSeeds(_))));
        assert!(matches!(
            "0..=18446744073709551615".parse::<Seeds>().and_then(|s| s.resolve()),
            Err(ConfigError::TooManySeeds(_))
        ));
        assert!(matches!(
            "0..100000000000".parse::<Seeds>().and_then(|s| s.resolve()),
            Err(ConfigError::TooManySeeds(100_000_000_000))
        ));
    }

    #[test]
    fn modes_parse() {
        assert_eq!("explore".parse::<Mode>(), Ok(Mode::Explore));
        assert_eq!("replay".parse::<Mode>(), Ok(Mode::Replay));
        assert!("fast".parse::<Mode>().is_err());
    }
}
