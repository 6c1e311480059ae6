//! What the walkthrough tests share: a planted bug must be found by its oracle, as a correctness
//! failure, and replay exactly in fresh processes.

use std::future::Future;

use sim::{Class, Ctx, Failure, Simulation};

/// Sweeps `seeds` of `simulation` and asserts that `oracle` found the planted bug `name`, and that
/// the finding replayed exactly in 3 of 3 fresh processes.
pub fn found<F, Fut>(
    simulation: Simulation,
    name: &str,
    oracle: Option<sim::Oracle>,
    seeds: std::ops::Range<u64>,
    run: F,
) where
    F: Fn(Ctx) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Failure>> + 'static,
{
    let report = simulation.seeds(seeds.clone()).run(run);
    let outcome = report.failures().find(|o| o.failure.as_ref().is_some_and(|f| f.oracle == oracle));
    let outcome = outcome.unwrap_or_else(|| panic!("{name}: not found by {oracle:?} in seeds {seeds:?}:\n{report}"));
    let failure = outcome.failure.as_ref().expect("failure");
    assert_eq!(failure.class, Class::Correctness);
    let replays = outcome.replays.as_ref().expect("confirmed");
    assert_eq!((replays.matched, replays.of), (3, 3), "{replays}");
}
