//! Running one input or recording one seed's tape: the inner loop of the engine and the shrinker.

use std::future::Future;
use std::sync::Arc;

use crate::input::Input;
use crate::report::{Failure, Outcome, Report};
use crate::run::once::{self, RunResult, RunSpec};
use crate::run::simulation::{Body, BoxFuture};
use crate::run::sweep::Sweep;
use crate::run::{ConfigError, Seeds, Simulation};
use crate::seed::{Seed, Source, Tape};

/// A run of one input, with what the engine and the shrinker read from it.
pub(crate) fn run_input(sim: &Simulation, input: &Input, body: &Arc<Body>) -> RunResult {
    run_input_spans(sim, input, body).0
}

/// [`run_input`] and the byte ranges the run's draws read ([`Source::spans`]).
pub(crate) fn run_input_spans(
    sim: &Simulation,
    input: &Input,
    body: &Arc<Body>,
) -> (RunResult, Vec<std::ops::Range<usize>>) {
    let mut spec = RunSpec::from_sim(sim, input.root, sim.swarm.clone());
    let feed = Source::from_bytes(input.bytes.to_vec());
    spec.fuzz = Some(feed.clone());
    spec.keep_trace = false;
    let result = once::run_once(spec, Arc::clone(body), sim.watchdog);
    (result, feed.spans())
}

/// Shrinks `input`, which fails like `failure`, with the span-aware shrinker: each candidate is
/// a run, kept when it fails the same way.
pub(crate) fn shrink_input(
    sim: &Simulation,
    input: &Input,
    failure: &Failure,
    budget: super::shrink::Budget,
    body: &Arc<Body>,
) -> super::shrink::Shrunk {
    let (_, spans) = run_input_spans(sim, input, body);
    super::shrink::shrink_spans(&input.bytes, spans, budget, |candidate| {
        let (result, spans) = run_input_spans(sim, &Input::new(candidate.to_vec(), input.root), body);
        let fails = result.outcome.failure.as_ref().is_some_and(|f| same_failure(f, failure));
        fails.then_some(spans)
    })
}

/// Whether two failures are the same for shrinking and deduplication: the same class and oracle.
pub(crate) fn same_failure(a: &Failure, b: &Failure) -> bool {
    a.class == b.class && a.oracle == b.oracle
}

pub(crate) fn boxed<F, Fut>(body: F) -> Arc<Body>
where
    F: Fn(crate::Ctx) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Failure>> + 'static,
{
    Arc::new(move |ctx| Box::pin(body(ctx)) as BoxFuture)
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

/// Runs `input` (under its root seed) instead of seeds, as a sweep: confirmation in fresh
/// processes and a replay line naming `SIM_FUZZ_INPUT`.
pub(crate) fn run_input_sweep(sim: &Simulation, input: Input, body: &Arc<Body>) -> Result<Report, ConfigError> {
    let mut sim = sim.clone();
    sim.seeds = Seeds::List(vec![input.root.0]);
    sim.input = Some(input);
    Sweep::new(&sim)?.run(Arc::clone(body))
}
