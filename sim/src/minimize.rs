//! Coarse minimization of a failing seed: [`Simulation::minimize`] keeps the seed and makes its
//! run smaller by the knobs a seed's run has, keeping each change only if the run still fails
//! the same way (the same [`Class`] and the same oracle).
//!
//! The passes follow the humus simulation-testing proposal's list for `u64` seeds, each with a
//! knob that leaves the rest of the run in place:
//! 1. **swarm**: each dimension the run drew whose value is not its simplest is knocked out to
//!    the simplest (`SIM_SWARM`), one at a time, cumulatively. Each dimension draws from its own
//!    stream ([`crate::swarm`]), so knocking one out does not reshuffle the others. Dimensions
//!    the builder pins ([`Simulation::swarm`]) are left as the test chose them.
//! 2. **faults**: the run's faults ([`crate::fault::at`], numbered from 1) are dropped by delta
//!    debugging (`SIM_DROP_FAULTS`): all of them, then halves, quarters, … one at a time.
//!    A dropped fault's events still fire, doing nothing, so the others keep their places.
//! 3. **operations**: the workload is cut to the fewest operations that still fail, by binary
//!    search below the run's [`Outcome::operations`] (`SIM_MAX_OPS`; the operations that start
//!    first keep their times and choices, see [`crate::workload`]). This assumes fewer
//!    operations fail less often; a failure that needs a later operation is kept as it is.
//!
//! The passes repeat, at most three rounds, until a round removes nothing: a swarm dimension a
//! dropped fault needed can go in the next round. Every attempt is a one-seed sweep with no confirmations, on a thread of its own (a sweep's
//! fresh processes answer for the first sweep of its name on their thread), with the knobs set
//! on the builder, never in the environment. The result is small, not minimal: a failure that
//! needs two faults together survives dropping either only if delta debugging tries the pair.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::oracle::Oracle;
use crate::report::{Class, Failure, Outcome};
use crate::run::{ConfigError, Ctx, Simulation};
use crate::seed::Seed;
use crate::swarm::{self, SwarmError};

/// A failing seed made smaller by [`Simulation::minimize`]: what was kept and what was removed.
#[derive(Clone, Debug)]
pub struct Minimized {
    /// The seed (unchanged).
    pub seed: Seed,
    /// The failure's class, kept by every accepted change.
    pub target_class: Class,
    /// The failure's oracle (`None`: a failure no oracle named), kept by every accepted change.
    pub target_oracle: Option<Oracle>,
    /// The seed's run before minimizing.
    pub original: Outcome,
    /// The smallest run found that fails the same way.
    pub minimized: Outcome,
    /// The swarm overrides the minimized run has (`SIM_SWARM`): the dimensions knocked out, and
    /// any `SIM_SWARM` the process started with, limited to dimensions the run draws.
    pub swarm: BTreeMap<String, String>,
    /// The fault numbers dropped (`SIM_DROP_FAULTS`), ascending.
    pub dropped_faults: Vec<usize>,
    /// The operation cap (`SIM_MAX_OPS`), if one was kept.
    pub max_ops: Option<u64>,
    /// What was removed, in words, in the order removed: `swarm nemesis.count 4 → 0`,
    /// `fault 3: partition [kv-0] at 3.200s`, `operations 50 → 7`.
    pub removed: Vec<String>,
    /// Runs made, the first (the seed as given) included.
    pub runs: u32,
    /// Wall time the minimization took.
    pub wall: Duration,
}

impl Minimized {
    /// The command that replays the minimized run (its `SIM_SEED`, `SIM_SWARM`,
    /// `SIM_DROP_FAULTS` and `SIM_MAX_OPS`).
    pub fn replay_line(&self) -> &str {
        &self.minimized.replay
    }

    /// The choices that matter, in words: the failure, the swarm values left above their
    /// simplest, the faults left (number, time, label), the operations left, what was removed
    /// and the replay line. Several lines, each ending in a newline.
    pub fn describe(&self) -> String {
        let m = &self.minimized;
        let mut text = String::new();
        let failure = m.failure.as_ref().map_or_else(|| "no failure".to_string(), Failure::to_string);
        let _ = writeln!(text, "{} seed {}: {failure}", m.simulation, self.seed);
        let drawn = swarm::parse_overrides(&m.swarm).unwrap_or_default();
        let kept: Vec<String> = drawn
            .iter()
            .filter_map(|(k, v)| {
                let simplest = m.swarm_simplest.get(k)?;
                (simplest != v).then(|| format!("{k}={v} (simplest {simplest})"))
            })
            .collect();
        let _ = writeln!(text, "  swarm left above simplest: {}", list_or_none(&kept));
        let faults: Vec<String> = m.faults.iter().filter(|f| !f.dropped).map(fault_words).collect();
        let _ = writeln!(text, "  faults left: {}", list_or_none(&faults));
        let _ = writeln!(text, "  operations: {}", m.operations);
        let _ = writeln!(text, "  removed: {}", list_or_none(&self.removed));
        let _ = writeln!(text, "  {} runs in {:.1}s", self.runs, self.wall.as_secs_f64());
        let _ = writeln!(text, "  replay: {}", self.replay_line());
        text
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() { "none".to_string() } else { items.join("; ") }
}

/// `fault 3: partition [kv-0] at 3.200s`.
fn fault_words(fault: &crate::fault::FaultRecord) -> String {
    format!("fault {}: {} at {:.3}s", fault.number, fault.label, Duration::from_nanos(fault.at_nanos).as_secs_f64())
}

/// The knobs one attempt runs with.
#[derive(Clone, Debug, Default)]
struct Knobs {
    swarm: BTreeMap<String, String>,
    drop_faults: BTreeSet<usize>,
    max_ops: Option<u64>,
}

/// One attempt: the seed's run under a simulation with the attempt's knobs.
type Attempt<'a> = dyn Fn(&Simulation) -> Result<Outcome, ConfigError> + 'a;

/// The minimizer's state: the simulation, the body, the target, the best run so far.
struct Search<'a> {
    sim: &'a Simulation,
    seed: Seed,
    run: Box<Attempt<'a>>,
    target: (Class, Option<Oracle>),
    knobs: Knobs,
    best: Outcome,
    removed: Vec<String>,
    runs: u32,
}

impl Search<'_> {
    /// Runs the seed with `knobs`; whether it failed the same way, with its outcome.
    fn try_knobs(&mut self, mut knobs: Knobs) -> Result<Option<(Knobs, Outcome)>, ConfigError> {
        loop {
            let mut sim = self.sim.clone().seeds(self.seed.0..self.seed.0.saturating_add(1));
            sim.attempt = Some(knobs.swarm.clone());
            sim.drop_faults = knobs.drop_faults.clone();
            sim.max_ops = knobs.max_ops;
            self.runs += 1;
            match (self.run)(&sim) {
                // A knocked-out dimension can stop another from being drawn: unpin that one.
                Err(ConfigError::Swarm(SwarmError::Unknown { unknown, .. }))
                    if unknown.iter().any(|u| knobs.swarm.contains_key(u)) =>
                {
                    knobs.swarm.retain(|k, _| !unknown.contains(k));
                }
                Err(e) => return Err(e),
                Ok(outcome) => {
                    let same = outcome.failed()
                        && outcome
                            .failure
                            .as_ref()
                            .is_some_and(|f| (f.class, &f.oracle) == (self.target.0, &self.target.1));
                    // Keep only overrides of dimensions this run drew, so its replay line runs.
                    knobs.swarm.retain(|k, _| outcome.swarm_simplest.contains_key(k));
                    return Ok(same.then_some((knobs, outcome)));
                }
            }
        }
    }

    /// Tries `knobs`; on the same failure makes them current and records `removed`.
    fn accept_if_same(
        &mut self,
        knobs: Knobs,
        removed: impl FnOnce(&Outcome) -> Vec<String>,
    ) -> Result<bool, ConfigError> {
        let before = self.best.clone();
        match self.try_knobs(knobs)? {
            Some((knobs, outcome)) => {
                self.removed.extend(removed(&before));
                self.knobs = knobs;
                self.best = outcome;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Pass 1: each drawn dimension above its simplest, knocked out in name order (dimensions
    /// a knock-out makes the run draw are tried too).
    fn knock_out_swarm(&mut self) -> Result<(), ConfigError> {
        let mut tried = BTreeSet::new();
        loop {
            let drawn = swarm::parse_overrides(&self.best.swarm).unwrap_or_default();
            let next = self.best.swarm_simplest.iter().find(|(name, simplest)| {
                !tried.contains(*name) && !self.sim.swarm.contains_key(*name) && drawn.get(*name) != Some(*simplest)
            });
            let Some((name, simplest)) = next.map(|(n, s)| (n.clone(), s.clone())) else { return Ok(()) };
            tried.insert(name.clone());
            let was = drawn.get(&name).cloned().unwrap_or_default();
            let mut knobs = self.knobs.clone();
            knobs.swarm.insert(name.clone(), simplest.clone());
            self.accept_if_same(knobs, |_| vec![format!("swarm {name} {was} → {simplest}")])?;
        }
    }

    /// Pass 2: delta debugging over the faults not dropped yet: all, then halves, … singles.
    fn drop_faults(&mut self) -> Result<(), ConfigError> {
        let mut chunks = 1;
        loop {
            let live: Vec<usize> = self.best.faults.iter().filter(|f| !f.dropped).map(|f| f.number).collect();
            if live.is_empty() {
                return Ok(());
            }
            let n = chunks.min(live.len());
            for part in live.chunks(live.len().div_ceil(n)) {
                let mut knobs = self.knobs.clone();
                knobs.drop_faults.extend(part.iter().copied());
                self.accept_if_same(knobs, |before| {
                    before.faults.iter().filter(|f| part.contains(&f.number)).map(fault_words).collect()
                })?;
            }
            if n == live.len() {
                return Ok(());
            }
            chunks = n * 2;
        }
    }

    /// Pass 3: the fewest operations that still fail, by binary search below the current count.
    fn truncate_operations(&mut self) -> Result<(), ConfigError> {
        let ops = self.best.operations;
        let (mut lo, mut hi) = (0, ops);
        let mut found: Option<(Knobs, Outcome)> = None;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let knobs = Knobs { max_ops: Some(mid), ..self.knobs.clone() };
            match self.try_knobs(knobs)? {
                Some(kept) => {
                    hi = mid;
                    found = Some(kept);
                }
                None => lo = mid + 1,
            }
        }
        if let Some((knobs, outcome)) = found {
            self.removed.push(format!("operations {ops} → {}", outcome.operations));
            self.knobs = knobs;
            self.best = outcome;
        }
        Ok(())
    }
}

impl Simulation {
    /// Makes failing `seed` smaller (see [`crate::minimize`]): runs it, takes its failure's class
    /// and oracle as the target, then knocks out swarm dimensions, drops faults and truncates
    /// operations, keeping each change only if the run still fails the same way. Starts from the
    /// builder's knobs with `SIM_SWARM`, `SIM_DROP_FAULTS` and `SIM_MAX_OPS` applied over them;
    /// other `SIM_*` variables apply to every attempt as to any sweep (but seeds, shards,
    /// confirmations and fresh processes do not: each attempt runs `seed` once, here).
    ///
    /// # Errors
    /// [`ConfigError`] when a `SIM_*` variable or a swarm override cannot be used, and
    /// [`ConfigError::NothingToMinimize`] when the seed does not fail.
    pub fn minimize<F, Fut>(&self, seed: Seed, body: F) -> Result<Minimized, ConfigError>
    where
        F: Fn(Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Failure>> + 'static,
    {
        let started = Instant::now();
        let body = Arc::new(body);
        let mut base = self.clone().confirm(0).seed_lines(false).progress(false).trace_tail(0);
        if base.test_name.is_none() {
            // Attempts run on threads of their own: name the test the replay line reruns.
            base.test_name = std::thread::current().name().filter(|n| *n != "main").map(str::to_string);
        }
        let run = move |sim: &Simulation| -> Result<Outcome, ConfigError> {
            let body = Arc::clone(&body);
            std::thread::scope(|scope| {
                let attempt = std::thread::Builder::new()
                    .name("sim-minimize".to_string())
                    .spawn_scoped(scope, move || sim.try_run(move |ctx| body(ctx)))
                    .expect("the OS starts a thread for a minimizer's attempt");
                let mut report = attempt.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
                let _ = report.passed();
                Ok::<_, ConfigError>(std::mem::take(&mut report.outcomes).into_iter().next())
            })?
            .ok_or_else(|| ConfigError::NoSeeds(format!("the attempt at seed {seed} ran no seed (SIM_ONLY?)")))
        };
        let knobs = start_knobs(&base)?;
        let mut first = base.clone().seeds(seed.0..seed.0.saturating_add(1));
        first.attempt = Some(knobs.swarm.clone());
        first.drop_faults = knobs.drop_faults.clone();
        first.max_ops = knobs.max_ops;
        let original = run(&first)?;
        let target = match original.failure.as_ref().filter(|_| original.failed()) {
            Some(f) => (f.class, f.oracle.clone()),
            None => {
                return Err(ConfigError::NothingToMinimize {
                    simulation: self.name.clone(),
                    seed,
                    outcome: original.failure.as_ref().map_or_else(|| "passed".to_string(), Failure::to_string),
                });
            }
        };
        let mut search = Search {
            sim: &base,
            seed,
            run: Box::new(run),
            target,
            knobs,
            best: original.clone(),
            removed: Vec::new(),
            runs: 1,
        };
        // Rounds until one removes nothing (at most 3): a dimension kept because a fault needed
        // it may go once that fault is dropped.
        for _ in 0..3 {
            let removed = search.removed.len();
            search.knock_out_swarm()?;
            search.drop_faults()?;
            search.truncate_operations()?;
            if search.removed.len() == removed {
                break;
            }
        }
        let Search { target, knobs, best, removed, runs, .. } = search;
        Ok(Minimized {
            seed,
            target_class: target.0,
            target_oracle: target.1,
            original,
            minimized: best,
            swarm: knobs.swarm,
            dropped_faults: knobs.drop_faults.into_iter().collect(),
            max_ops: knobs.max_ops,
            removed,
            runs,
            wall: started.elapsed(),
        })
    }
}

/// The knobs the minimizer starts from: the builder's, with `SIM_SWARM`, `SIM_DROP_FAULTS` and
/// `SIM_MAX_OPS` applied over them (attempts do not read these variables again).
fn start_knobs(sim: &Simulation) -> Result<Knobs, ConfigError> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let swarm = match var("SIM_SWARM") {
        Some(text) => swarm::parse_overrides(&text)?,
        None => BTreeMap::new(),
    };
    let drop_faults = match var("SIM_DROP_FAULTS") {
        Some(text) => crate::run::parse_drop_faults(&text)?,
        None => sim.drop_faults.clone(),
    };
    let max_ops = match var("SIM_MAX_OPS") {
        Some(text) => Some(crate::run::parse_max_ops(&text)?),
        None => sim.max_ops,
    };
    Ok(Knobs { swarm, drop_faults, max_ops })
}
