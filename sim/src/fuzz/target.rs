//! The fuzz target: [`Simulation::fuzz`] and the corpus gate, plus one-input runs and tapes.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use super::campaign;
use super::corpus::Corpus;
use super::exec::{boxed, run_input, run_input_sweep, tape};
use crate::input::Input;
use crate::report::{Failure, Outcome, Report};
use crate::run::simulation::Body;
use crate::run::sweep::Sweep;
use crate::run::{ConfigError, Simulation};
use crate::seed::Seed;

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
        if let Some(options) = campaign {
            let mut engine = super::Mutator::new(Seed(options.seed), campaign::MAX_INPUT_LEN);
            return self.fuzz_with_engine(corpus, options, &mut engine, body);
        }
        let body = boxed(body);
        if input_requested() {
            return Sweep::new(self)?.run(body);
        }
        self.run_corpus(corpus, &body)
    }

    /// A campaign with an engine of the caller's ([`super::Engine`]): the seam for another
    /// in-process engine (a grammar, a replayed production trace). `SIM_FUZZ_INPUT` still runs
    /// that one input instead.
    ///
    /// # Errors
    /// As [`Simulation::try_fuzz`].
    #[must_use = "the report says whether an input failed: call .assert_passed() on it"]
    pub fn fuzz_with_engine<F, Fut>(
        &self,
        corpus: &Corpus,
        options: &campaign::Options,
        engine: &mut dyn super::Engine,
        body: F,
    ) -> Result<Report, ConfigError>
    where
        F: Fn(crate::Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        let body = boxed(body);
        if input_requested() {
            return Sweep::new(self)?.run(body);
        }
        campaign::run_with(self, corpus, &body, options, engine)
    }

    /// Shrinks a failing input with the span-aware shrinker ([`super::shrink::shrink_spans`]):
    /// the result still fails with the input's class and oracle. `None` when `input` does not
    /// fail. The shrunk input keeps `input`'s root.
    pub fn shrink_input<F, Fut>(&self, input: &Input, budget: super::shrink::Budget, body: F) -> Option<super::Shrunk>
    where
        F: Fn(crate::Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        let body = boxed(body);
        let failure = run_input(self, input, &body).outcome.failure.filter(|f| f.class.fails())?;
        Some(super::exec::shrink_input(self, input, &failure, budget, &body))
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
            let report = run_input_sweep(self, input, body)?;
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

    /// Runs one run whose choices come from fuzz bytes (`data`), for a cargo-fuzz/libFuzzer
    /// target: every stream of the run reads `data` in draw order, and once it is used up every
    /// draw returns its simplest value, so shrinking the input simplifies the run. The runtime's
    /// own randomness (`getrandom`, tokio's RNG) is keyed from seed 0 ([`Simulation::run_input`]
    /// under root 0).
    pub fn run_fuzz<F, Fut>(&self, data: &[u8], body: F) -> Outcome
    where
        F: Fn(crate::Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        self.run_input(&Input::new(data.to_vec(), Seed(0)), body)
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
        tape(self, seed, &boxed(body))
    }
}

/// Whether `SIM_FUZZ_INPUT` names one input to run instead (empty counts as unset).
fn input_requested() -> bool {
    std::env::var_os("SIM_FUZZ_INPUT").is_some_and(|v| !v.is_empty())
}
