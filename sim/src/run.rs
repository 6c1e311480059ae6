//! The public entry: a [`Simulation`] run over seeds, and the [`Ctx`] each run's body gets.
//!
//! A test calls [`Simulation::run`] once with an async body. For each seed:
//! 1. one unbuffered stderr line gives the seed, the build's identity and the command that
//!    replays it — before the run, so it survives an abort;
//! 2. a fresh OS thread arms the interposition, builds a paused `current_thread` runtime seeded
//!    from the seed, and runs the body next to the harness tasks (the [`Driver`] and the
//!    deadlock watcher);
//! 3. the run ends when the body returns, an oracle calls [`Ctx::fail`], nothing runs for the
//!    horizon (*deadlock*), the fake-time limit passes (*liveness*), code panics (*panic*), or the
//!    wall-clock watchdog fires (*inconclusive*);
//! 4. the outcome carries the history hash, the schedule hash and what the interposition answered.
//!
//! Panics are caught per run, so a sweep reports every failing seed. Each failing seed is then
//! re-run in fresh processes (default 3, `SIM_CONFIRM`) and labelled "replays exactly" or
//! "replays k of n". `SIM_REPEAT=k` runs each seed k times in-process and `SIM_REPEAT_PROCESSES=n`
//! runs the whole sweep again in n fresh processes; any difference in history or schedule is a
//! *replay diverged* failure naming the first divergent event.
//!
//! Environment (each overrides the builder):
//!
//! | variable | meaning |
//! |---|---|
//! | `SIM_SEED` | one seed (decimal or `0x` hex) |
//! | `SIM_SEEDS` | `0..500`, `0..=9`, `random:200`, or a list `1,5,9` |
//! | `SIM_SHARD` | `i/n`: run only the seeds whose position is `i` modulo `n` |
//! | `SIM_MODE` | `replay` (default) or `explore` |
//! | `SIM_SWARM` | pinned swarm dimensions: `latency=0ms,replicas=1` |
//! | `SIM_REPEAT` | runs per seed in this process (self-check) |
//! | `SIM_REPEAT_PROCESSES` | fresh processes re-running the sweep (self-check) |
//! | `SIM_CONFIRM` | fresh processes re-running each failing seed (default 3) |
//! | `SIM_JOBS` | seeds run in parallel (default: available cores) |
//! | `SIM_WATCHDOG` | wall-clock bound per run (default 60s) |
//! | `SIM_SEED_LINES` | `0`: do not print the line before each seed |
//! | `SIM_JSON` | append one JSON line per seed to this file |
//! | `SIM_TRACE` | `all`: write the trace of every seed, not only failures |
//! | `SIM_LOG` | the trace's `tracing` filter (default `info`) |
//! | `SIM_ONLY` | run only the simulation with this name (others in the binary return empty reports) |

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::ops::Range;
use std::path::PathBuf;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::driver::Driver;
use crate::history::{self, Entry, Recorder};
use crate::report::{
    self, Class, Failure, Identity, Interposed, Invocation, Outcome, Replays, Report,
};
use crate::runtime::{self, Tasks, interpose};
use crate::seed::{Seed, Source, Tree};
use crate::swarm::{self, Swarm, SwarmError};
use crate::trace::{self, TraceBuf};

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
            other => Err(ConfigError::Invalid {
                var: "SIM_MODE",
                value: other.to_string(),
                expected: "replay or explore",
            }),
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
        if let Some((a, b)) = t.split_once("..=") {
            let (a, b) = (seed(a)?, seed(b)?);
            return if a <= b {
                Ok(Seeds::Range(a..b.saturating_add(1)))
            } else {
                Err(bad())
            };
        }
        if let Some((a, b)) = t.split_once("..") {
            let (a, b) = (seed(a)?, seed(b)?);
            return if a <= b {
                Ok(Seeds::Range(a..b))
            } else {
                Err(bad())
            };
        }
        t.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(seed)
            .collect::<Result<Vec<_>, _>>()
            .and_then(|v| {
                if v.is_empty() {
                    Err(bad())
                } else {
                    Ok(Seeds::List(v))
                }
            })
    }
}

impl Seeds {
    fn resolve(&self) -> Vec<Seed> {
        match self {
            Seeds::List(v) => v.iter().copied().map(Seed).collect(),
            Seeds::Range(r) => r.clone().map(Seed).collect(),
            Seeds::Random(n) => (0..*n).map(|_| Seed(os_random_u64())).collect(),
        }
    }
}

fn os_random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // Called on a sweep thread, never a simulation thread: this is the OS's entropy.
    // SAFETY: the buffer is valid for 8 bytes.
    let n = unsafe { interpose::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != 8 {
        use std::hash::BuildHasher;
        return std::collections::hash_map::RandomState::new().hash_one(Instant::now());
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
    name: String,
    seeds: Seeds,
    mode: Mode,
    repeat: u32,
    repeat_processes: u32,
    confirm: u32,
    jobs: usize,
    horizon: Duration,
    time_limit: Duration,
    watchdog: Duration,
    swarm: BTreeMap<String, String>,
    features: Vec<String>,
    test_name: Option<String>,
    allow_recovered_panics: bool,
    enable_io: bool,
    trace_tail: usize,
    seed_lines: bool,
}

impl Simulation {
    /// Seeds run when neither the builder nor `SIM_SEED`/`SIM_SEEDS` says otherwise: a small
    /// fixed range, so a plain `cargo test` is a deterministic gate.
    pub const DEFAULT_SEEDS: Range<u64> = 0..32;

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
            horizon: Duration::from_secs(3600),
            time_limit: Duration::from_secs(24 * 3600),
            watchdog: Duration::from_secs(60),
            swarm: BTreeMap::new(),
            features: Vec::new(),
            test_name: None,
            allow_recovered_panics: false,
            enable_io: false,
            trace_tail: 20,
            seed_lines: true,
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
    /// *deadlock* (default 1 hour). Set it above the longest timer a node may wait on.
    pub fn horizon(mut self, horizon: Duration) -> Self {
        self.horizon = horizon;
        self
    }

    /// Fake time after which an unfinished run is a *liveness* failure (default 24 hours).
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
    /// names each test's thread after the test, so this is rarely needed).
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

    /// Whether to print the line (seed, identity, replay command) before each seed (default
    /// true; `SIM_SEED_LINES=0` turns it off). Benchmarks turn it off; everything else should not.
    pub fn seed_lines(mut self, on: bool) -> Self {
        self.seed_lines = on;
        self
    }

    /// Lines of a failing run's trace printed (default 20).
    pub fn trace_tail(mut self, lines: usize) -> Self {
        self.trace_tail = lines;
        self
    }

    /// Runs the sweep and prints its summary to stderr.
    ///
    /// # Panics
    /// On a configuration error (an unparsable `SIM_*` variable, a swarm override naming a
    /// dimension that no seed drew), with the error's message. [`Simulation::try_run`] returns it
    /// instead.
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
    pub fn try_run<F, Fut>(&self, body: F) -> Result<Report, ConfigError>
    where
        F: Fn(Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        let body: Arc<Body> = Arc::new(move |ctx| Box::pin(body(ctx)) as BoxFuture);
        Sweep::new(self)?.run(body)
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
        let spec = RunSpec::from_sim(
            self,
            Seed(0),
            self.mode,
            self.swarm.clone(),
            Some(Source::from_bytes(data.to_vec())),
        );
        run_once(spec, body, self.watchdog).outcome
    }
}

/// Everything one run needs.
#[derive(Clone)]
struct RunSpec {
    name: String,
    seed: Seed,
    mode: Mode,
    fuzz: Option<Source>,
    horizon: Duration,
    time_limit: Duration,
    swarm: BTreeMap<String, String>,
    allow_recovered_panics: bool,
    enable_io: bool,
    keep_trace: bool,
}

impl RunSpec {
    fn from_sim(
        sim: &Simulation,
        seed: Seed,
        mode: Mode,
        swarm: BTreeMap<String, String>,
        fuzz: Option<Source>,
    ) -> RunSpec {
        RunSpec {
            name: sim.name.clone(),
            seed,
            mode,
            fuzz,
            horizon: sim.horizon,
            time_limit: sim.time_limit,
            swarm,
            allow_recovered_panics: sim.allow_recovered_panics,
            enable_io: sim.enable_io,
            keep_trace: true,
        }
    }
}

/// What one run produced, beyond its public [`Outcome`].
struct RunResult {
    outcome: Outcome,
    entries: Vec<Entry>,
    trace: Vec<String>,
    swarm_drawn: Vec<String>,
    swarm_errors: Vec<SwarmError>,
}

struct Shared {
    name: String,
    seed: Seed,
    tree: Tree,
    mode: Mode,
    swarm: Swarm,
    recorder: Arc<Recorder>,
    driver: Driver,
    failure: Mutex<Option<Failure>>,
    stop: tokio::sync::Notify,
    epoch: std::time::SystemTime,
    net: std::sync::OnceLock<crate::net::Network>,
    net_config: Mutex<Option<crate::net::NetConfig>>,
}

/// The handle a run's body gets: the seed's streams, the swarm, the driver, the history.
///
/// Cheap to clone, `Send + Sync`. Inside a run, [`Ctx::current`] finds it from any task.
#[derive(Clone)]
pub struct Ctx {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("simulation", &self.shared.name)
            .field("seed", &self.shared.seed)
            .finish()
    }
}

thread_local! {
    static CURRENT_RUN: RefCell<Option<Ctx>> = const { RefCell::new(None) };
    static RUN_PANICS: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

impl Ctx {
    /// The run on this thread, if the thread runs one.
    pub fn try_current() -> Option<Ctx> {
        CURRENT_RUN
            .try_with(|c| c.try_borrow().ok().and_then(|c| c.clone()))
            .ok()
            .flatten()
    }

    /// The run on this thread.
    ///
    /// # Panics
    /// Outside a simulation run.
    #[track_caller]
    pub fn current() -> Ctx {
        Ctx::try_current().expect("sim::Ctx::current() called outside a simulation run")
    }

    /// The simulation's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The run's root seed.
    pub fn seed(&self) -> Seed {
        self.shared.seed
    }

    /// The run's mode.
    pub fn mode(&self) -> Mode {
        self.shared.mode
    }

    /// The stream for a `/`-separated label path (see [`crate::seed`]).
    pub fn source(&self, label: &str) -> Source {
        self.shared.tree.source(label)
    }

    /// The run's swarm.
    pub fn swarm(&self) -> &Swarm {
        &self.shared.swarm
    }

    /// The run's event queue.
    pub fn driver(&self) -> &Driver {
        &self.shared.driver
    }

    /// Fake time since the run started.
    pub fn elapsed(&self) -> Duration {
        self.shared.recorder.elapsed()
    }

    /// `SystemTime::now()` at the start of the run (drawn from the seed).
    pub fn epoch(&self) -> std::time::SystemTime {
        self.shared.epoch
    }

    /// Appends an event to the history (and the trace) at the current fake time; returns its
    /// index.
    pub fn record(&self, kind: &str, identity: &str, detail: impl AsRef<str>) -> u64 {
        self.shared
            .recorder
            .record_at(self.elapsed(), kind, identity, detail.as_ref())
    }

    /// Ends the run with `failure` (the first failure reported wins). The run stops at the next
    /// point where the harness runs; the failure is recorded in the history.
    pub fn fail(&self, mut failure: Failure) {
        let at = self.elapsed();
        failure.at_nanos.get_or_insert(at.as_nanos() as u64);
        let mut slot = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            self.shared.recorder.record_at(
                at,
                "failure",
                failure.class.name(),
                &failure.to_string(),
            );
            *slot = Some(failure);
            self.shared.stop.notify_one();
        }
    }

    /// Whether a failure was reported.
    pub fn failed(&self) -> bool {
        self.shared
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// A copy of the history so far.
    pub fn history(&self) -> history::History {
        self.shared.recorder.snapshot()
    }

    pub(crate) fn recorder(&self) -> Arc<Recorder> {
        Arc::clone(&self.shared.recorder)
    }

    /// The run's simulated network, made on first use with links drawn from
    /// [`crate::net::NetConfig::from_swarm`] (or the config given to [`Ctx::set_net_config`]).
    pub fn net(&self) -> &crate::net::Network {
        self.shared.net.get_or_init(|| {
            let config = self
                .shared
                .net_config
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            let config = config.unwrap_or_else(|| crate::net::NetConfig::from_swarm(self.swarm()));
            crate::net::Network::new(self, config)
        })
    }

    /// Chooses the network's link parameters instead of drawing them from the swarm.
    ///
    /// # Panics
    /// If the network was already made ([`Ctx::net`] was called).
    pub fn set_net_config(&self, config: crate::net::NetConfig) {
        assert!(
            self.shared.net.get().is_none(),
            "Ctx::set_net_config: the run's network already exists; configure it before the first Ctx::net()"
        );
        *self
            .shared
            .net_config
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(config);
    }
}

/// Polls the body and counts its polls as activity (the body is not a tokio task).
struct Counted {
    inner: BoxFuture,
    tasks: Tasks,
}

impl Future for Counted {
    type Output = Result<(), Failure>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.tasks.root_polled();
        self.inner.as_mut().poll(cx)
    }
}

enum Ending {
    Returned(Result<(), Failure>),
    Stopped,
    TimeLimit,
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = format!(
                "panicked at {}: {}",
                info.location()
                    .map_or_else(|| "(unknown)".to_string(), |l| l.to_string()),
                info.payload_as_str().unwrap_or("(non-string payload)")
            );
            let recorded = RUN_PANICS
                .try_with(|p| match p.try_borrow_mut() {
                    Ok(mut p) => p.as_mut().map(|list| list.push(message.clone())).is_some(),
                    Err(_) => false,
                })
                .unwrap_or(false);
            if recorded {
                if let Some(ctx) = Ctx::try_current() {
                    ctx.shared
                        .recorder
                        .record_at(ctx.elapsed(), "panic", "", &message);
                }
            } else {
                previous(info);
            }
        }));
    });
}

/// Declares a deadlock when no task (other than this watcher) was polled for `horizon` of fake
/// time and no harness event is pending. Paused time jumps straight to the next timer when every
/// task is idle, so a blocked run reaches the horizon at once in wall time.
async fn watch_horizon(ctx: Ctx, tasks: Tasks, horizon: Duration) {
    let start = tokio::time::Instant::now();
    loop {
        let last = tasks.last_active();
        let mut deadline = last.unwrap_or(start) + horizon;
        if let Some(due) = ctx.driver().next_due() {
            // The event's own firing is activity: look again just after it.
            deadline = deadline.max(start + due + Duration::from_millis(1));
        }
        tokio::time::sleep_until(deadline).await;
        if tasks.last_active() == last && ctx.driver().pending() == 0 {
            let live = tasks.live();
            let mut message = format!(
                "nothing ran for {} of fake time and no harness event is pending; blocked: the run's body",
                swarm::format_duration(horizon)
            );
            for task in live.iter().take(16) {
                message.push_str(&format!(
                    ", task #{} spawned at {}",
                    task.ordinal, task.spawned_at
                ));
            }
            if live.len() > 16 {
                message.push_str(&format!(" and {} more tasks", live.len() - 16));
            }
            ctx.fail(Failure::new(Class::Deadlock, message).oracle("horizon"));
            return;
        }
    }
}

/// Runs one seed on a fresh thread under the wall-clock watchdog.
fn run_once(spec: RunSpec, body: Arc<Body>, watchdog: Duration) -> RunResult {
    install_panic_hook();
    let (tx, rx) = std::sync::mpsc::channel();
    let seed = spec.seed;
    let name = spec.name.clone();
    let started = Instant::now();
    let spawned = std::thread::Builder::new()
        .name(format!("sim-{}-seed-{seed}", spec.name))
        .stack_size(16 << 20)
        .spawn(move || {
            let result = run_on_this_thread(spec, body);
            let _ = tx.send(result);
        });
    let timed_out = |message: String| RunResult {
        outcome: Outcome {
            simulation: name.clone(),
            seed,
            failure: Some(Failure::new(Class::Inconclusive, message).oracle("watchdog")),
            history_hash: 0,
            events: 0,
            schedule_hash: 0,
            polls: 0,
            fake_nanos: 0,
            wall_nanos: started.elapsed().as_nanos() as u64,
            swarm: String::new(),
            interposed: Interposed::default(),
            replay: String::new(),
            replays: None,
            trace: None,
        },
        entries: Vec::new(),
        trace: Vec::new(),
        swarm_drawn: Vec::new(),
        swarm_errors: Vec::new(),
    };
    if let Err(e) = spawned {
        return timed_out(format!("could not start the run's thread: {e}"));
    }
    match rx.recv_timeout(watchdog) {
        Ok(result) => result,
        Err(_) => timed_out(format!(
            "the run did not finish within the {} wall-clock watchdog: a task that never yields (a busy loop, \
             blocking I/O, a std lock held across an await) stops the whole simulation",
            swarm::format_duration(watchdog)
        )),
    }
}

fn run_on_this_thread(spec: RunSpec, body: Arc<Body>) -> RunResult {
    let wall = Instant::now();
    let thread_sim = interpose::ThreadSim::new(spec.seed);
    let armed = interpose::Armed::new(&thread_sim);
    RUN_PANICS.with(|p| *p.borrow_mut() = Some(Vec::new()));
    let trace = Arc::new(TraceBuf::new());
    let tracing_guard = trace::install(Arc::clone(&trace));
    let tree = match &spec.fuzz {
        Some(fuzz) => Tree::fuzzed(spec.seed, fuzz.clone()),
        None => Tree::new(spec.seed),
    };
    let swarm = Swarm::new(tree.clone(), spec.swarm.clone());
    let tasks = Tasks::default();
    let config = runtime::Config {
        seed: spec.seed,
        explore: spec.mode == Mode::Explore,
        enable_io: spec.enable_io,
    };
    let shared_slot: Arc<Mutex<Option<Arc<Shared>>>> = Arc::new(Mutex::new(None));

    let ending = match runtime::build(&config, &tasks) {
        Err(e) => Err(format!("could not build the run's runtime: {e}")),
        Ok(rt) => {
            let slot = Arc::clone(&shared_slot);
            let tasks2 = tasks.clone();
            let spec2 = spec.clone();
            let sim_ref = &thread_sim;
            let trace = Arc::clone(&trace);
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                rt.block_on(async move {
                    let start = tokio::time::Instant::now();
                    sim_ref.go_live(start.into_std());
                    let recorder = Arc::new(Recorder::new(Arc::clone(&trace), start));
                    let explore = spec2.mode == Mode::Explore;
                    let driver =
                        Driver::new(Arc::clone(&recorder), tree.prng("driver/ties"), explore);
                    let shared = Arc::new(Shared {
                        name: spec2.name.clone(),
                        seed: spec2.seed,
                        tree,
                        mode: spec2.mode,
                        swarm,
                        recorder,
                        driver: driver.clone(),
                        failure: Mutex::new(None),
                        stop: tokio::sync::Notify::new(),
                        epoch: sim_ref.epoch(),
                        net: std::sync::OnceLock::new(),
                        net_config: Mutex::new(None),
                    });
                    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&shared));
                    let ctx = Ctx {
                        shared: Arc::clone(&shared),
                    };
                    CURRENT_RUN.with(|c| *c.borrow_mut() = Some(ctx.clone()));
                    let driver_task = tokio::spawn(driver.run());
                    tasks2.mark_harness(driver_task.id());
                    let watcher =
                        tokio::spawn(watch_horizon(ctx.clone(), tasks2.clone(), spec2.horizon));
                    tasks2.set_watcher(watcher.id());
                    let root = Counted {
                        inner: body(ctx.clone()),
                        tasks: tasks2,
                    };
                    let ending = tokio::select! {
                        biased;
                        () = shared.stop.notified() => Ending::Stopped,
                        result = root => Ending::Returned(result),
                        () = tokio::time::sleep(spec2.time_limit) => Ending::TimeLimit,
                    };
                    let elapsed = ctx.elapsed();
                    // Pending events may hold the network (and the network the driver): drop
                    // them so nothing of this run outlives it.
                    shared.driver.clear();
                    (ending, elapsed)
                })
            }));
            thread_sim.freeze();
            // Dropping the runtime drops every task still alive; a panic in a destructor is a
            // panic of the run.
            let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(rt)));
            match (result, dropped) {
                (Ok(ending), Ok(())) => Ok(ending),
                (Ok(_), Err(_)) => {
                    Err("a task's destructor panicked while the runtime shut down".to_string())
                }
                (Err(payload), _) => Err(panic_text(payload.as_ref())),
            }
        }
    };
    CURRENT_RUN.with(|c| *c.borrow_mut() = None);
    let panics = RUN_PANICS
        .with(|p| p.borrow_mut().take())
        .unwrap_or_default();
    let shared = shared_slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(tracing_guard);
    drop(armed);

    let fake = match &ending {
        Ok((_, elapsed)) => *elapsed,
        Err(_) => Duration::from_nanos(last_event_nanos(&shared)),
    };
    let recorded_failure = shared
        .as_ref()
        .and_then(|s| s.failure.lock().unwrap_or_else(|p| p.into_inner()).clone());
    let at = |mut f: Failure| {
        f.at_nanos.get_or_insert(fake.as_nanos() as u64);
        f
    };
    let failure = match ending {
        Err(message) => {
            let first = panics.first().cloned().unwrap_or(message);
            Some(at(Failure::new(Class::Panic, first).oracle("panic")))
        }
        Ok((Ending::Stopped, _)) => recorded_failure,
        Ok((Ending::Returned(result), _)) => match (recorded_failure, result) {
            (Some(f), _) => Some(f),
            (None, Err(f)) => Some(at(f)),
            (None, Ok(())) if !panics.is_empty() && !spec.allow_recovered_panics => {
                Some(at(Failure::new(
                    Class::Panic,
                    format!(
                        "a panic was caught and the run went on (recovered panic): {}",
                        panics[0]
                    ),
                )
                .oracle("recovered-panic")))
            }
            (None, Ok(())) => None,
        },
        Ok((Ending::TimeLimit, _)) => recorded_failure.or_else(|| {
            Some(at(Failure::liveness(
                "time-limit",
                format!(
                    "the run was still going after its fake-time limit of {}",
                    swarm::format_duration(spec.time_limit)
                ),
            )))
        }),
    };
    let history = shared
        .as_ref()
        .map(|s| s.recorder.snapshot())
        .unwrap_or_default();
    let (polls, schedule_hash) = tasks.schedule();
    let swarm = shared.as_ref().map(|s| s.swarm.clone());
    let outcome = Outcome {
        simulation: spec.name.clone(),
        seed: spec.seed,
        failure,
        history_hash: history.hash(),
        events: history.len(),
        schedule_hash,
        polls,
        fake_nanos: fake.as_nanos() as u64,
        wall_nanos: wall.elapsed().as_nanos() as u64,
        swarm: swarm.as_ref().map(Swarm::describe).unwrap_or_default(),
        interposed: Interposed {
            getrandom_calls: thread_sim.getrandom_calls.get(),
            getrandom_bytes: thread_sim.getrandom_bytes.get(),
            clock_reads: thread_sim.clock_reads.get(),
        },
        replay: String::new(),
        replays: None,
        trace: None,
    };
    let keep_trace = spec.keep_trace && (outcome.failure.is_some() || trace_all());
    RunResult {
        entries: history.entries().cloned().collect(),
        trace: if keep_trace {
            trace.lines()
        } else {
            Vec::new()
        },
        swarm_drawn: swarm
            .as_ref()
            .map(|s| s.values().into_keys().collect())
            .unwrap_or_default(),
        swarm_errors: swarm.as_ref().map(Swarm::errors).unwrap_or_default(),
        outcome,
    }
}

fn last_event_nanos(shared: &Option<Arc<Shared>>) -> u64 {
    shared.as_ref().map_or(0, |s| {
        s.recorder
            .snapshot()
            .entries()
            .last()
            .map_or(0, |e| e.at_nanos)
    })
}

fn trace_all() -> bool {
    std::env::var("SIM_TRACE").is_ok_and(|v| v == "all")
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic payload)".to_string())
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_parse<T: FromStr>(
    var: &'static str,
    expected: &'static str,
) -> Result<Option<T>, ConfigError> {
    match env_var(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| ConfigError::Invalid {
                var,
                value: v,
                expected,
            }),
    }
}

/// One line a child process writes per seed.
#[derive(serde::Serialize, serde::Deserialize)]
struct ChildLine {
    outcome: Outcome,
    history: Option<Vec<Entry>>,
}

/// A sweep: the simulation with its environment applied.
struct Sweep {
    sim: Simulation,
    seeds: Vec<Seed>,
    swarm: BTreeMap<String, String>,
    invocation: Invocation,
    identity: Identity,
    child_out: Option<PathBuf>,
    child_history: bool,
    skip: bool,
}

impl Sweep {
    fn new(sim: &Simulation) -> Result<Sweep, ConfigError> {
        let mut sim = sim.clone();
        let skip = env_var("SIM_ONLY").is_some_and(|only| only != sim.name);
        if let Some(seeds) = env_var("SIM_SEEDS") {
            sim.seeds = seeds.parse()?;
        }
        if let Some(seed) = env_parse::<Seed>("SIM_SEED", "a seed (decimal u64 or 0x hex)")? {
            sim.seeds = Seeds::List(vec![seed.0]);
        }
        if let Some(mode) = env_var("SIM_MODE") {
            sim.mode = mode.parse()?;
        }
        if let Some(k) = env_parse::<u32>("SIM_REPEAT", "a count")? {
            sim.repeat = k.max(1);
        }
        if let Some(n) = env_parse::<u32>("SIM_REPEAT_PROCESSES", "a count")? {
            sim.repeat_processes = n;
        }
        if let Some(n) = env_parse::<u32>("SIM_CONFIRM", "a count")? {
            sim.confirm = n;
        }
        if let Some(n) = env_parse::<usize>("SIM_JOBS", "a count")? {
            sim.jobs = n.max(1);
        }
        if let Some(on) = env_var("SIM_SEED_LINES") {
            sim.seed_lines = !matches!(on.trim(), "0" | "false" | "off" | "no");
        }
        if let Some(w) = env_var("SIM_WATCHDOG") {
            sim.watchdog = swarm::parse_duration(&w).ok_or(ConfigError::Invalid {
                var: "SIM_WATCHDOG",
                value: w,
                expected: "a duration such as 30s",
            })?;
        }
        let mut swarm = sim.swarm.clone();
        if let Some(text) = env_var("SIM_SWARM") {
            swarm.extend(swarm::parse_overrides(&text)?);
        }
        let mut seeds = sim.seeds.resolve();
        if let Some(shard) = env_var("SIM_SHARD") {
            let bad = || ConfigError::Invalid {
                var: "SIM_SHARD",
                value: shard.clone(),
                expected: "i/n with i < n",
            };
            let (i, n) = shard.split_once('/').ok_or_else(bad)?;
            let (i, n): (usize, usize) = (
                i.trim().parse().map_err(|_| bad())?,
                n.trim().parse().map_err(|_| bad())?,
            );
            if n == 0 || i >= n {
                return Err(bad());
            }
            seeds = seeds
                .into_iter()
                .enumerate()
                .filter(|(k, _)| k % n == i)
                .map(|(_, s)| s)
                .collect();
        }
        let child_out = env_var("SIM_CHILD_OUT").map(PathBuf::from);
        if child_out.is_some() {
            sim.confirm = 0;
            sim.repeat_processes = 0;
        }
        let invocation = Invocation::detect(sim.test_name.as_deref());
        let identity = Identity::current(&invocation, &sim.features);
        Ok(Sweep {
            child_history: env_var("SIM_CHILD_HISTORY").is_some(),
            sim,
            seeds,
            swarm,
            invocation,
            identity,
            child_out,
            skip,
        })
    }

    /// The environment that replays `seed`.
    fn replay_env(&self, seed: Seed) -> Vec<(String, String)> {
        let mut env = vec![("SIM_SEED".to_string(), seed.to_string())];
        if self.sim.mode == Mode::Explore {
            env.push(("SIM_MODE".to_string(), "explore".to_string()));
        }
        if let Some(text) = env_var("SIM_SWARM") {
            env.push(("SIM_SWARM".to_string(), text));
        }
        if !self.invocation.is_test() {
            env.push(("SIM_ONLY".to_string(), self.sim.name.clone()));
        }
        env
    }

    fn replay_line(&self, seed: Seed) -> String {
        self.invocation
            .replay_command(&self.replay_env(seed), &self.sim.features)
    }

    fn spec(&self, seed: Seed) -> RunSpec {
        let mut spec = RunSpec::from_sim(&self.sim, seed, self.sim.mode, self.swarm.clone(), None);
        spec.keep_trace = self.child_out.is_none() || self.child_history;
        spec
    }

    fn run(self, body: Arc<Body>) -> Result<Report, ConfigError> {
        let started = Instant::now();
        if self.skip {
            return Ok(Report {
                simulation: self.sim.name.clone(),
                identity: self.identity,
                outcomes: Vec::new(),
                wall: Duration::ZERO,
            });
        }
        let results = self.sweep(&body);
        let mut drawn = BTreeSet::new();
        for result in &results {
            if let Some(e) = result
                .swarm_errors
                .iter()
                .find(|e| matches!(e, SwarmError::Value { .. }))
            {
                return Err(ConfigError::Swarm(e.clone()));
            }
            drawn.extend(result.swarm_drawn.iter().cloned());
        }
        let unknown: Vec<String> = self
            .swarm
            .keys()
            .filter(|k| !drawn.contains(*k))
            .cloned()
            .collect();
        if !unknown.is_empty() && !results.is_empty() {
            return Err(ConfigError::Swarm(SwarmError::Unknown {
                unknown,
                known: drawn.into_iter().collect(),
            }));
        }

        if let Some(path) = &self.child_out {
            self.write_child(path, &results);
        }
        let mut outcomes = Vec::with_capacity(results.len());
        let trace_root = self.invocation.trace_root();
        let test = self.sim.name.clone();
        let mut failing_entries: BTreeMap<Seed, Vec<Entry>> = BTreeMap::new();
        for mut result in results {
            result.outcome.replay = self.replay_line(result.outcome.seed);
            if !result.trace.is_empty() && self.child_out.is_none() {
                let header = self.trace_header(&result.outcome);
                match report::write_trace(
                    &trace_root,
                    &test,
                    result.outcome.seed,
                    &header,
                    &result.trace,
                ) {
                    Ok(path) => result.outcome.trace = Some(path),
                    Err(e) => report::stderr_line(&format!(
                        "sim: could not write the trace of seed {}: {e}",
                        result.outcome.seed
                    )),
                }
            }
            if result.outcome.failed() {
                failing_entries.insert(result.outcome.seed, std::mem::take(&mut result.entries));
            }
            outcomes.push(result.outcome);
        }

        if self.sim.repeat_processes > 0 {
            self.repeat_in_processes(&mut outcomes, &body);
        }
        if self.sim.confirm > 0 {
            self.confirm_failures(&mut outcomes, &failing_entries);
        }
        for outcome in &outcomes {
            if self.child_out.is_none()
                && let Err(e) = report::append_json(outcome, &self.identity)
            {
                report::stderr_line(&format!("sim: could not append to SIM_JSON: {e}"));
            }
        }
        let report = Report {
            simulation: self.sim.name.clone(),
            identity: self.identity.clone(),
            outcomes,
            wall: started.elapsed(),
        };
        if self.child_out.is_none() {
            self.print(&report);
        }
        Ok(report)
    }

    fn trace_header(&self, outcome: &Outcome) -> Vec<String> {
        vec![
            format!("# simulation {} · seed {}", self.sim.name, outcome.seed),
            format!("# identity: {}", self.identity),
            format!("# swarm: {}", outcome.swarm),
            format!(
                "# outcome: {}",
                outcome
                    .failure
                    .as_ref()
                    .map_or_else(|| "passed".to_string(), |f| f.to_string())
            ),
            format!(
                "# history: {} events, hash {:016x}; schedule: {} polls, hash {:016x}",
                outcome.events, outcome.history_hash, outcome.polls, outcome.schedule_hash
            ),
            format!("# replay: {}", outcome.replay),
        ]
    }

    /// Runs every seed (`repeat` times each) on `jobs` worker threads.
    fn sweep(&self, body: &Arc<Body>) -> Vec<RunResult> {
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<(usize, RunResult)>> =
            Mutex::new(Vec::with_capacity(self.seeds.len()));
        let jobs = self.sim.jobs.min(self.seeds.len()).max(1);
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                scope.spawn(|| {
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&seed) = self.seeds.get(index) else {
                            break;
                        };
                        if self.sim.seed_lines {
                            report::stderr_line(&format!(
                                "sim: seed {seed} · {} · replay: {}",
                                self.identity,
                                self.replay_line(seed)
                            ));
                        }
                        let result = self.run_repeated(seed, body);
                        results
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((index, result));
                    }
                });
            }
        });
        let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
        results.sort_by_key(|(index, _)| *index);
        results.into_iter().map(|(_, r)| r).collect()
    }

    fn run_repeated(&self, seed: Seed, body: &Arc<Body>) -> RunResult {
        let mut first = run_once(self.spec(seed), Arc::clone(body), self.sim.watchdog);
        for _ in 1..self.sim.repeat {
            if first
                .outcome
                .failure
                .as_ref()
                .is_some_and(|f| f.class == Class::Inconclusive)
            {
                break;
            }
            let again = run_once(self.spec(seed), Arc::clone(body), self.sim.watchdog);
            if let Some(divergence) = compare(
                &first.outcome,
                &first.entries,
                &again.outcome,
                &again.entries,
            ) {
                first.outcome.failure = Some(
                    Failure::new(
                        Class::ReplayDiverged,
                        format!("repeated in this process: {divergence}"),
                    )
                    .oracle("self-check"),
                );
                break;
            }
        }
        first
    }

    fn write_child(&self, path: &PathBuf, results: &[RunResult]) {
        let mut text = String::new();
        for result in results {
            let line = ChildLine {
                outcome: result.outcome.clone(),
                history: self.child_history.then(|| result.entries.clone()),
            };
            match serde_json::to_string(&line) {
                Ok(json) => {
                    text.push_str(&json);
                    text.push('\n');
                }
                Err(e) => {
                    report::stderr_line(&format!("sim: could not encode a child result: {e}"))
                }
            }
        }
        if let Err(e) = std::fs::write(path, text) {
            report::stderr_line(&format!(
                "sim: could not write SIM_CHILD_OUT {}: {e}",
                path.display()
            ));
        }
    }

    /// Runs `seeds` in a fresh process of this executable; returns its lines by seed.
    fn run_child(
        &self,
        seeds: &[Seed],
        with_history: bool,
    ) -> Result<BTreeMap<Seed, ChildLine>, String> {
        let args = self
            .invocation
            .rerun_args()
            .ok_or("the test's name is unknown (set Simulation::test_name)")?;
        static CHILD: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!("sim-child-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let out = dir.join(format!(
            "{}-{}.jsonl",
            self.sim
                .name
                .replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
            CHILD.fetch_add(1, Ordering::Relaxed)
        ));
        let list = seeds
            .iter()
            .map(Seed::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let mut command = std::process::Command::new(&self.invocation.exe);
        command
            .args(&args)
            .env("SIM_SEEDS", list)
            .env_remove("SIM_SEED")
            .env_remove("SIM_SHARD")
            .env_remove("SIM_JSON")
            .env("SIM_ONLY", &self.sim.name)
            .env("SIM_CHILD_OUT", &out)
            .env("SIM_REPEAT", "1")
            .env(
                "SIM_MODE",
                if self.sim.mode == Mode::Explore {
                    "explore"
                } else {
                    "replay"
                },
            )
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if with_history {
            command.env("SIM_CHILD_HISTORY", "1");
        } else {
            command.env_remove("SIM_CHILD_HISTORY");
        }
        let output = command
            .output()
            .map_err(|e| format!("cannot start {}: {e}", self.invocation.exe.display()))?;
        let text = std::fs::read_to_string(&out).map_err(|e| {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            format!(
                "the fresh process wrote no result ({e}; exit {}): {}",
                output.status,
                tail.join(" | ")
            )
        })?;
        let _ = std::fs::remove_file(&out);
        let mut lines = BTreeMap::new();
        for line in text.lines() {
            let parsed: ChildLine =
                serde_json::from_str(line).map_err(|e| format!("unreadable child result: {e}"))?;
            lines.insert(parsed.outcome.seed, parsed);
        }
        Ok(lines)
    }

    /// Re-runs every failing seed in `confirm` fresh processes (one process per round, running
    /// all of them) and labels each "replays exactly" or "replays k of n".
    fn confirm_failures(&self, outcomes: &mut [Outcome], entries: &BTreeMap<Seed, Vec<Entry>>) {
        let failing: Vec<Seed> = outcomes
            .iter()
            .filter(|o| o.failed())
            .map(|o| o.seed)
            .collect();
        if failing.is_empty() {
            return;
        }
        for outcome in outcomes.iter_mut().filter(|o| o.failed()) {
            outcome.replays = Some(Replays {
                matched: 0,
                of: 0,
                divergence: None,
            });
        }
        for _ in 0..self.sim.confirm {
            let lines = match self.run_child(&failing, true) {
                Ok(lines) => lines,
                Err(e) => {
                    for outcome in outcomes.iter_mut().filter(|o| o.failed()) {
                        if let Some(replays) = outcome.replays.as_mut() {
                            replays
                                .divergence
                                .get_or_insert_with(|| format!("not confirmed: {e}"));
                        }
                    }
                    return;
                }
            };
            for outcome in outcomes.iter_mut().filter(|o| o.failed()) {
                let child = lines.get(&outcome.seed);
                let verdict = match child {
                    None => Some("the fresh process did not run the seed".to_string()),
                    Some(child) => {
                        let class = |o: &Outcome| o.failure.as_ref().map(|f| f.class);
                        let mine = entries.get(&outcome.seed).map(Vec::as_slice).unwrap_or(&[]);
                        match compare(
                            outcome,
                            mine,
                            &child.outcome,
                            child.history.as_deref().unwrap_or(&[]),
                        ) {
                            Some(diff) => Some(diff),
                            None if class(outcome) != class(&child.outcome) => Some(format!(
                                "the fresh process ended with {}",
                                child
                                    .outcome
                                    .failure
                                    .as_ref()
                                    .map_or_else(|| "no failure".to_string(), |f| f.to_string())
                            )),
                            None => None,
                        }
                    }
                };
                let replays = outcome.replays.get_or_insert(Replays {
                    matched: 0,
                    of: 0,
                    divergence: None,
                });
                replays.of += 1;
                match verdict {
                    None => replays.matched += 1,
                    Some(d) => {
                        replays.divergence.get_or_insert(d);
                    }
                }
            }
        }
    }

    /// Re-runs the whole sweep in fresh processes and marks seeds whose hashes differ.
    fn repeat_in_processes(&self, outcomes: &mut [Outcome], body: &Arc<Body>) {
        let seeds: Vec<Seed> = outcomes.iter().map(|o| o.seed).collect();
        for process in 0..self.sim.repeat_processes {
            let lines = match self.run_child(&seeds, false) {
                Ok(lines) => lines,
                Err(e) => {
                    report::stderr_line(&format!("sim: self-check process {process} failed: {e}"));
                    for outcome in outcomes.iter_mut().filter(|o| o.failure.is_none()) {
                        outcome.failure = Some(
                            Failure::new(
                                Class::ReplayDiverged,
                                format!("self-check process could not run: {e}"),
                            )
                            .oracle("self-check"),
                        );
                    }
                    return;
                }
            };
            for outcome in outcomes.iter_mut() {
                let Some(child) = lines.get(&outcome.seed) else {
                    continue;
                };
                let same = child.outcome.history_hash == outcome.history_hash
                    && child.outcome.schedule_hash == outcome.schedule_hash;
                if same
                    || outcome
                        .failure
                        .as_ref()
                        .is_some_and(|f| f.class == Class::ReplayDiverged)
                {
                    continue;
                }
                // Name the first divergent event: run the seed once more here and once in a fresh
                // process, both keeping their histories.
                let mine = run_once(self.spec(outcome.seed), Arc::clone(body), self.sim.watchdog);
                let theirs = self
                    .run_child(&[outcome.seed], true)
                    .ok()
                    .and_then(|mut l| l.remove(&outcome.seed));
                let detail = theirs
                    .and_then(|c| history::diff(&mine.entries, c.history.as_deref().unwrap_or(&[])))
                    .map(|d| d.to_string())
                    .unwrap_or_else(|| describe_hash_difference(outcome, &child.outcome));
                outcome.failure = Some(
                    Failure::new(
                        Class::ReplayDiverged,
                        format!("fresh process {process}: {detail}"),
                    )
                    .oracle("self-check"),
                );
            }
        }
    }

    fn print(&self, report: &Report) {
        let mut text = report.to_string();
        for outcome in report.failures().take(1) {
            if let Some(path) = &outcome.trace
                && let Ok(content) = std::fs::read_to_string(path)
            {
                let lines: Vec<&str> = content.lines().collect();
                let tail = &lines[lines.len().saturating_sub(self.sim.trace_tail)..];
                text.push_str(&format!(
                    "  last {} lines of the trace of seed {}:\n",
                    tail.len(),
                    outcome.seed
                ));
                for line in tail {
                    text.push_str("    ");
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
        eprint!("{text}");
    }
}

fn describe_hash_difference(a: &Outcome, b: &Outcome) -> String {
    if a.history_hash != b.history_hash {
        format!(
            "history hash {:016x} ({} events) ≠ {:016x} ({} events)",
            a.history_hash, a.events, b.history_hash, b.events
        )
    } else {
        format!(
            "histories equal, schedule hash {:016x} ({} polls) ≠ {:016x} ({} polls)",
            a.schedule_hash, a.polls, b.schedule_hash, b.polls
        )
    }
}

/// `None` when two runs of one seed agree on history and schedule; else what differs.
fn compare(a: &Outcome, a_entries: &[Entry], b: &Outcome, b_entries: &[Entry]) -> Option<String> {
    if a.history_hash == b.history_hash && a.schedule_hash == b.schedule_hash {
        return None;
    }
    if a.history_hash != b.history_hash
        && let Some(d) = history::diff(a_entries, b_entries)
    {
        return Some(d.to_string());
    }
    Some(describe_hash_difference(a, b))
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
        assert_eq!(
            "1, 5,0x10".parse::<Seeds>(),
            Ok(Seeds::List(vec![1, 5, 16]))
        );
        for bad in ["", "5..1", "a..b", "random:x", "1,,x"] {
            let err = bad.parse::<Seeds>().expect_err(bad);
            assert!(err.to_string().starts_with("SIM_SEEDS="), "{err}");
        }
        assert_eq!(Seeds::Random(5).resolve().len(), 5);
    }

    #[test]
    fn modes_parse() {
        assert_eq!("explore".parse::<Mode>(), Ok(Mode::Explore));
        assert_eq!("replay".parse::<Mode>(), Ok(Mode::Replay));
        assert!("fast".parse::<Mode>().is_err());
    }
}
