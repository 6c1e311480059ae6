//! The [`Simulation`] builder: a name, its seeds and bounds (run with [`Simulation::run`], in
//! [`super::sweep`]).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::time::Duration;

use super::config::{Mode, Seeds};
use super::ctx::Ctx;
use crate::report::Failure;

pub(crate) type BoxFuture = Pin<Box<dyn Future<Output = Result<(), Failure>>>>;
pub(crate) type Body = dyn Fn(Ctx) -> BoxFuture + Send + Sync;

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
    /// Fault numbers (1-based) dropped from every run (`SIM_DROP_FAULTS`).
    pub(crate) drop_faults: BTreeSet<usize>,
    /// The most operations each `Workload::run` starts (`SIM_MAX_OPS`).
    pub(crate) max_ops: Option<u64>,
    /// Set by [`Simulation::minimize`] for its attempts: these swarm overrides win over
    /// `SIM_SWARM` and go into the replay line's `SIM_SWARM`, and `SIM_DROP_FAULTS`/`SIM_MAX_OPS`
    /// and the seed variables are not read (the minimizer read them once).
    pub(crate) attempt: Option<BTreeMap<String, String>>,
    /// One fuzz input run instead of seeds (`SIM_FUZZ_INPUT`, [`crate::fuzz`]).
    pub(crate) input: Option<crate::input::Input>,
    /// The build seed base the builder's seeds were drawn from ([`Simulation::seed_base`]).
    pub(crate) seed_base: Option<u64>,
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
            drop_faults: BTreeSet::new(),
            max_ops: None,
            attempt: None,
            input: None,
            seed_base: None,
        }
    }

    /// The seeds to run (`SIM_SEED`/`SIM_SEEDS` override).
    pub fn seeds(mut self, seeds: impl Into<Seeds>) -> Self {
        self.seeds = seeds.into();
        self
    }

    /// Says the builder's seeds were drawn from this build seed base ([`crate::seed_base`]), as
    /// the main job's `--base-seed build` draws each round's range from it: each `SIM_JSON` line
    /// names it (`seed_base`), as a `SIM_SEEDS=build:N` sweep's lines do. Not named when
    /// `SIM_SEED`, `SIM_SEEDS` or `SIM_FUZZ_INPUT` choose other seeds.
    pub fn seed_base(mut self, base: u64) -> Self {
        self.seed_base = Some(base);
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

    /// Drops these faults from every run (`SIM_DROP_FAULTS=2,5` overrides): the run's faults
    /// scheduled with [`crate::fault::at`] are numbered from 1 in scheduling order (as
    /// [`crate::Outcome::faults`] lists them); a dropped one's install and release events still
    /// fire but do nothing, and the history records `fault N dropped: <label>`. The replay line
    /// carries `SIM_DROP_FAULTS`.
    pub fn drop_faults(mut self, numbers: impl IntoIterator<Item = usize>) -> Self {
        self.drop_faults = numbers.into_iter().collect();
        self
    }

    /// Starts at most `n` operations in each [`crate::workload::Workload::run`] (`SIM_MAX_OPS`
    /// overrides): the schedule is drawn in full, and only its first `n` operations start, at the
    /// times and with the choices they have without the cap. The replay line carries
    /// `SIM_MAX_OPS`.
    pub fn max_operations(mut self, n: u64) -> Self {
        self.max_ops = Some(n);
        self
    }

    /// Stops starting new seeds once `n` have failed (seeds already running finish): for
    /// measuring how many seeds it takes to find a bug. The report holds the seeds that ran.
    pub fn stop_after_failures(mut self, n: usize) -> Self {
        self.stop_after_failures = Some(n.max(1));
        self
    }
}
