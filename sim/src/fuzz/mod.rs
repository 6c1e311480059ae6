//! Fuzzing: a simulation body fed from an input byte slice (a choice sequence) instead of a seed,
//! a corpus of inputs per target that runs as plain `cargo test` cases, an in-process engine, and
//! a shrinker that makes a failing input small.
//!
//! Every choice a run makes comes from a [`crate::Source`]. Fed from fuzz bytes
//! ([`crate::Source::from_bytes`]) every stream of the run reads the one input in draw order, and
//! once it is used up every draw answers its simplest value (the low end of a range, `false`, the
//! first option): a shorter input is a run with fewer faults, fewer nodes and zero delays, so
//! shrinking an input simplifies the run (the "choice sequence" of Hypothesis, MacIver and
//! Donaldson, ECOOP 2020). The runtime's own randomness (`getrandom`, tokio's RNG) stays keyed
//! from the input's root seed ([`Input::root`]), so a run is a function of the bytes and the root.
//!
//! One line makes a target ([`crate::Simulation::fuzz`]):
//!
//! ```no_run
//! # async fn body(_ctx: sim::Ctx) -> Result<(), sim::Failure> { Ok(()) }
//! sim::Simulation::new("checkout").fuzz(body).assert_passed();
//! ```
//!
//! What it does depends on the environment:
//! - nothing set (the deterministic gate): every entry of the target's corpus,
//!   `fuzz/corpus/<simulation>/` under the package ([`corpus`]), runs as one run; none is a pass.
//! - `SIM_FUZZ=30s`: the in-process engine ([`engine`], [`campaign`]) for that long, seeded from
//!   seed tapes and the corpus; each new failure (by class and oracle) is shrunk ([`shrink`]),
//!   saved under `fuzz/artifacts/<simulation>/` and confirmed in fresh processes like a failing
//!   seed, with a replay line `SIM_FUZZ_INPUT=<file> …`.
//! - `SIM_FUZZ_INPUT=<file>`: that input alone (also in [`crate::Simulation::run`]).
//!
//! A failing seed becomes an input with [`crate::Simulation::tape`]: the bytes its run drew,
//! encoded as the byte feed decodes them, so the tape under the same root replays the seed's run
//! exactly; shrinking the tape is how `minimize` shrinks a seed's failure.
//!
//! Coverage-guided engines (libFuzzer through `libfuzzer-sys`) drive [`crate::Simulation::run_fuzz`]
//! from a `fuzz_target!`; see the fuzzing page of the docs for the engines evaluated on the stable
//! toolchain and the commands.

pub mod campaign;
pub mod corpus;
pub mod engine;
pub mod shrink;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::report::{Failure, Outcome, Report};
use crate::run::once::{self, RunResult, RunSpec};
use crate::run::simulation::{Body, BoxFuture};
use crate::run::sweep::Sweep;
use crate::run::{ConfigError, Seeds, Simulation};
use crate::seed::{Seed, Source, Tape};

pub use corpus::Corpus;
pub use engine::{Engine, Mutator};
pub use shrink::{Shrunk, shrink};

/// One fuzz input: the choice bytes and the root seed the runtime's own randomness is keyed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// The choice bytes, read front to back by every stream of the run.
    pub bytes: Arc<Vec<u8>>,
    /// The root seed: keys `getrandom` and tokio's RNG, which never read the bytes.
    pub root: Seed,
    /// Where it is stored (a corpus entry, an artifact), or empty when only in memory.
    pub path: PathBuf,
}

impl Input {
    /// An in-memory input.
    pub fn new(bytes: impl Into<Vec<u8>>, root: Seed) -> Input {
        Input { bytes: Arc::new(bytes.into()), root, path: PathBuf::new() }
    }

    /// Reads a stored input. Its root comes from the file name (`<hash>-root<N>`; otherwise 0).
    ///
    /// # Errors
    /// [`ConfigError::FuzzInput`] when the file cannot be read.
    pub fn read(path: &Path) -> Result<Input, ConfigError> {
        let bytes = std::fs::read(path)
            .map_err(|e| ConfigError::FuzzInput { path: path.display().to_string(), reason: e.to_string() })?;
        let root = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit_once("-root"))
            .and_then(|(_, r)| r.parse::<u64>().ok())
            .map_or(Seed(0), Seed);
        Ok(Input { bytes: Arc::new(bytes), root, path: path.to_path_buf() })
    }

    /// The file name it is stored under: a hash of the bytes, and the root unless it is 0.
    pub fn file_name(&self) -> String {
        let hash = fnv1a(&self.bytes);
        match self.root.0 {
            0 => format!("{hash:016x}"),
            root => format!("{hash:016x}-root{root}"),
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it has no bytes (the simplest run).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// FNV-1a 64 over `bytes`: a stable name for an input.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A run of one input, with what the engine and the shrinker read from it.
pub(crate) fn run_input(sim: &Simulation, input: &Input, body: &Arc<Body>) -> RunResult {
    let mut spec = RunSpec::from_sim(sim, input.root, sim.swarm.clone());
    spec.fuzz = Some(Source::from_bytes(input.bytes.to_vec()));
    spec.keep_trace = false;
    once::run_once(spec, Arc::clone(body), sim.watchdog)
}

/// Whether two failures are the same for shrinking and deduplication: the same class and oracle.
pub(crate) fn same_failure(a: &Failure, b: &Failure) -> bool {
    a.class == b.class && a.oracle == b.oracle
}

fn boxed<F, Fut>(body: F) -> Arc<Body>
where
    F: Fn(crate::Ctx) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Failure>> + 'static,
{
    Arc::new(move |ctx| Box::pin(body(ctx)) as BoxFuture)
}

/// Fuzz targets, inputs and tapes.
impl Simulation {
    /// The one-line fuzz target (see the [module docs](crate::fuzz)): runs the corpus (the
    /// gate), or the engine under `SIM_FUZZ=<duration>`, or one input under `SIM_FUZZ_INPUT`.
    /// The report holds one outcome per input run (the engine's: its shrunk failures).
    ///
    /// # Panics
    /// On a configuration error, with its message ([`Simulation::try_fuzz`] returns it).
    #[track_caller]
    #[must_use = "the report says whether an input failed: call .assert_passed() on it"]
    pub fn fuzz<F, Fut>(&self, body: F) -> Report
    where
        F: Fn(crate::Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        match self.try_fuzz(body) {
            Ok(report) => report,
            Err(e) => panic!("simulation {}: {e}", self.name),
        }
    }

    /// [`Simulation::fuzz`], returning configuration errors.
    ///
    /// # Errors
    /// [`ConfigError`] for an unreadable corpus or input, a bad `SIM_FUZZ` budget, or any
    /// `SIM_*` error a sweep reports.
    #[must_use = "the report says whether an input failed: call .assert_passed() on it"]
    pub fn try_fuzz<F, Fut>(&self, body: F) -> Result<Report, ConfigError>
    where
        F: Fn(crate::Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        let options = campaign::Options::from_env()?;
        self.fuzz_with(&Corpus::for_simulation(&self.name), options.as_ref(), body)
    }

    /// The fuzz target with its corpus and campaign given rather than taken from the
    /// environment: with `campaign` a campaign, without it the corpus gate; `SIM_FUZZ_INPUT`
    /// still runs that one input instead.
    ///
    /// # Errors
    /// As [`Simulation::try_fuzz`].
    #[must_use = "the report says whether an input failed: call .assert_passed() on it"]
    pub fn fuzz_with<F, Fut>(
        &self,
        corpus: &Corpus,
        campaign: Option<&campaign::Options>,
        body: F,
    ) -> Result<Report, ConfigError>
    where
        F: Fn(crate::Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        let body = boxed(body);
        if std::env::var_os("SIM_FUZZ_INPUT").is_some() {
            return Sweep::new(self)?.run(body);
        }
        match campaign {
            Some(options) => campaign::run(self, corpus, &body, options),
            None => self.run_corpus(corpus, &body),
        }
    }

    /// Runs every entry of `corpus` as a sweep of one input (replay line, confirmation in fresh
    /// processes and JSON line as for a seed) and gathers them into one report.
    pub(crate) fn run_corpus(&self, corpus: &Corpus, body: &Arc<Body>) -> Result<Report, ConfigError> {
        let started = Instant::now();
        let entries = corpus.entries()?;
        if entries.is_empty() {
            crate::report::stderr_line(&format!(
                "sim: {}: no corpus entries in {} (SIM_FUZZ=30s explores; failures it shrinks go to {})",
                self.name,
                corpus.dir().display(),
                corpus.artifacts().display()
            ));
        }
        let mut outcomes = Vec::new();
        let mut identity = None;
        for input in entries {
            let report = self.input_sweep(input).run(Arc::clone(body))?;
            let _read = report.passed();
            identity.get_or_insert_with(|| report.identity.clone());
            outcomes.extend(report.outcomes.iter().cloned());
        }
        let identity = match identity {
            Some(identity) => identity,
            None => Sweep::new(&self.clone().seeds(0..1))?.identity().clone(),
        };
        Ok(Report::new(self.name.clone(), identity, outcomes, started.elapsed()))
    }

    /// A simulation that runs `input` (under its root seed) instead of seeds.
    pub(crate) fn input_sweep(&self, input: Input) -> InputSweep {
        let mut sim = self.clone();
        sim.seeds = Seeds::List(vec![input.root.0]);
        sim.input = Some(input);
        InputSweep { sim }
    }

    /// Runs one input (bytes under a root seed) and returns its outcome; no replay line, no
    /// confirmation (the engine's and the shrinker's inner loop).
    pub fn run_input<F, Fut>(&self, input: &Input, body: F) -> Outcome
    where
        F: Fn(crate::Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        run_input(self, input, &boxed(body)).outcome
    }

    /// Runs `seed` and returns its outcome and its tape: the choice bytes its run drew, in draw
    /// order, encoded as the byte feed decodes them. `Input::new(tape, seed)` replays the run
    /// exactly (the same history hash), and shrinking the tape shrinks the failure.
    pub fn tape<F, Fut>(&self, seed: Seed, body: F) -> (Outcome, Input)
    where
        F: Fn(crate::Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        let (outcome, input) = tape(self, seed, &boxed(body));
        (outcome, input)
    }
}

/// [`Simulation::tape`] on a boxed body.
pub(crate) fn tape(sim: &Simulation, seed: Seed, body: &Arc<Body>) -> (Outcome, Input) {
    let recorded = Tape::new();
    let mut spec = RunSpec::from_sim(sim, seed, sim.swarm.clone());
    spec.record = Some(recorded.clone());
    spec.keep_trace = false;
    let result = once::run_once(spec, Arc::clone(body), sim.watchdog);
    (result.outcome, Input::new(recorded.bytes(), seed))
}

/// A simulation set to run one input: a sweep of one "seed" (the input's root).
pub(crate) struct InputSweep {
    sim: Simulation,
}

impl InputSweep {
    /// Runs it like any sweep (confirmation, replay line naming `SIM_FUZZ_INPUT`).
    pub(crate) fn run(&self, body: Arc<Body>) -> Result<Report, ConfigError> {
        Sweep::new(&self.sim)?.run(body)
    }
}
