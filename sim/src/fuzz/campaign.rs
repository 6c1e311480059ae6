//! A fuzzing campaign: an [`Engine`] proposes inputs for a time budget, the inputs that show new
//! behaviour join the queue, and each new failure is shrunk, saved and confirmed.
//!
//! Environment (read by [`crate::Simulation::fuzz`]):
//! - `SIM_FUZZ=30s` — run a campaign for that long (wall time);
//! - `SIM_FUZZ_RUNS=N` — stop after N runs even if time is left;
//! - `SIM_FUZZ_SEED=N` — the engine's seed (default 0): a campaign replays from it, up to wall-time
//!   cut-offs;
//! - `SIM_FUZZ_TAPES=N` — seed the queue with the tapes of seeds 0..N (default 8) besides the
//!   corpus: a tape is a real run's choice sequence, so mutations start from plausible runs;
//! - `SIM_FUZZ_SHRINK_RUNS=N` — at most N runs shrinking each failure (default 2000, or 300 s).
//!
//! The behaviour signal ([`features`]) stands in for compiler coverage: the pairs of consecutive
//! history entry kinds, bucketed by count as AFL buckets edge hits (1, 2, 3, 4–7, 8–15, 16–31,
//! 32–127, 128+), and every swarm value drawn, bucketed (integers and durations by powers of
//! two, ratios by eighths) so a continuous value does not make every run new. A failure is new when no earlier one had its class
//! and oracle.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::corpus::Corpus;
use super::engine::Engine;
use super::exec::{run_input, run_input_sweep, same_failure, shrink_input, tape};
use super::shrink::Budget;
use crate::history::Entry;
use crate::input::{Input, fnv1a};
use crate::report::{Failure, Outcome, Report};
use crate::run::simulation::Body;
use crate::run::{ConfigError, Simulation};
use crate::seed::Seed;

/// A campaign's settings (see the module docs for the variables).
#[derive(Clone, Debug)]
pub struct Options {
    /// Wall time to spend proposing inputs (shrinking and confirming come after).
    pub budget: Duration,
    /// At most this many runs.
    pub runs: Option<u64>,
    /// The engine's seed.
    pub seed: u64,
    /// Tapes of seeds `0..tapes` seed the queue.
    pub tapes: u64,
    /// What shrinking each failure may cost.
    pub shrink: Budget,
}

impl Options {
    /// The options `SIM_FUZZ*` give, or `None` without `SIM_FUZZ`.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] when a variable does not parse.
    pub fn from_env() -> Result<Option<Options>, ConfigError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let Some(budget) = var("SIM_FUZZ") else { return Ok(None) };
        let budget = crate::swarm::parse_duration(&budget).filter(|d| !d.is_zero()).ok_or(ConfigError::Invalid {
            var: "SIM_FUZZ",
            value: budget,
            expected: "a positive duration such as 30s or 10m",
        })?;
        let count = |name: &'static str| -> Result<Option<u64>, ConfigError> {
            var(name)
                .map(|v| {
                    v.trim().parse::<u64>().map_err(|_| ConfigError::Invalid {
                        var: name,
                        value: v,
                        expected: "a count",
                    })
                })
                .transpose()
        };
        Ok(Some(Options {
            budget,
            runs: count("SIM_FUZZ_RUNS")?,
            seed: var("SIM_FUZZ_SEED")
                .map(|v| {
                    v.trim().parse::<Seed>().map(|s| s.0).map_err(|_| ConfigError::Invalid {
                        var: "SIM_FUZZ_SEED",
                        value: v,
                        expected: "a seed (decimal u64 or 0x hex)",
                    })
                })
                .transpose()?
                .unwrap_or(0),
            tapes: count("SIM_FUZZ_TAPES")?.unwrap_or(8),
            shrink: match count("SIM_FUZZ_SHRINK_RUNS")? {
                Some(runs) => Budget { runs: u32::try_from(runs).unwrap_or(u32::MAX), ..Budget::default() },
                None => Budget::default(),
            },
        }))
    }
}

/// What a campaign did.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Inputs run (proposals and queue seeds; not shrinking runs).
    pub runs: u64,
    /// Wall time proposing inputs.
    pub wall: Duration,
    /// Inputs kept for new behaviour.
    pub queue: usize,
    /// Distinct behaviour features seen.
    pub features: usize,
    /// Runs spent shrinking.
    pub shrink_runs: u64,
}

impl Stats {
    /// Runs per second of wall time.
    pub fn runs_per_second(&self) -> f64 {
        self.runs as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// The behaviour features of one run: history kind pairs bucketed by count, swarm values, and
/// the failure's class and oracle.
pub fn features(entries: &[Entry], outcome: &Outcome) -> Vec<u64> {
    let mut pairs: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    let mut previous = "";
    for entry in entries {
        *pairs.entry((previous, entry.kind.as_str())).or_insert(0) += 1;
        previous = entry.kind.as_str();
    }
    let bucket = |n: u32| match n {
        0..=3 => n,
        4..=7 => 4,
        8..=15 => 5,
        16..=31 => 6,
        32..=127 => 7,
        _ => 8,
    };
    let mut out: Vec<u64> =
        pairs.into_iter().map(|((a, b), n)| fnv1a(format!("{a}\u{1}{b}\u{1}{}", bucket(n)).as_bytes())).collect();
    out.extend(
        outcome
            .swarm
            .split(',')
            .filter_map(|v| v.split_once('='))
            .map(|(name, value)| fnv1a(format!("swarm\u{1}{name}\u{1}{}", swarm_bucket(value)).as_bytes())),
    );
    if let Some(f) = &outcome.failure {
        out.push(fnv1a(format!("failure\u{1}{}\u{1}{:?}", f.class, f.oracle).as_bytes()));
    }
    out
}

/// A swarm value's bucket, so continuous values do not make every run look new: integers and
/// durations by powers of two (0, 1, 2–3, 4–7, …; durations in nanoseconds), ratios by eighths,
/// flags and choices as themselves.
fn swarm_bucket(value: &str) -> String {
    let log2 = |n: u64| 64 - n.leading_zeros();
    if let Ok(n) = value.parse::<u64>() {
        return format!("int {}", log2(n));
    }
    if let Ok(r) = value.parse::<f64>() {
        return format!("ratio {}", (r.clamp(0.0, 1.0) * 8.0).floor());
    }
    if let Some(d) = crate::swarm::parse_duration(value) {
        return format!("duration {}", log2(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)));
    }
    value.to_string()
}

/// The longest input the in-process [`super::Mutator`] grows (64 KiB).
pub const MAX_INPUT_LEN: usize = 64 * 1024;

/// Runs a campaign of `options` on `sim` with `engine`; returns the report of its shrunk,
/// confirmed failures (empty when none) and prints a summary line.
///
/// # Errors
/// [`ConfigError`] when the corpus cannot be read or an artifact cannot be written.
pub(crate) fn run_with(
    sim: &Simulation,
    corpus: &Corpus,
    body: &Arc<Body>,
    options: &Options,
    engine: &mut dyn Engine,
) -> Result<Report, ConfigError> {
    let started = Instant::now();
    let mut stats = Stats::default();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut queue: Vec<Input> = Vec::new();
    let mut found: Vec<(Failure, Input)> = Vec::new();
    let mut consider = |input: Input, stats: &mut Stats, queue: &mut Vec<Input>| {
        let result = run_input(sim, &input, body);
        stats.runs += 1;
        let new = features(&result.history.entries().collect::<Vec<_>>(), &result.outcome)
            .into_iter()
            .filter(|f| seen.insert(*f))
            .count();
        if let Some(failure) = result.outcome.failure.as_ref().filter(|f| f.class.fails()) {
            if !found.iter().any(|(f, _)| same_failure(f, failure)) {
                found.push((failure.clone(), input.clone()));
            }
        } else if new > 0 || queue.is_empty() {
            queue.push(input);
        }
    };
    let mut seeds: Vec<Input> = corpus.entries()?;
    for seed in 0..options.tapes {
        seeds.push(tape(sim, Seed(seed), body).1);
    }
    seeds.push(Input::new(Vec::new(), Seed(0)));
    for input in seeds {
        consider(input, &mut stats, &mut queue);
    }
    let within = |stats: &Stats| started.elapsed() < options.budget && options.runs.is_none_or(|r| stats.runs < r);
    while within(&stats) {
        let next = engine.next(&queue);
        consider(next, &mut stats, &mut queue);
    }
    stats.wall = started.elapsed();
    stats.queue = queue.len();
    stats.features = seen.len();
    let mut outcomes = Vec::new();
    let mut identity = None;
    for (failure, input) in found {
        let shrunk = shrink_input(sim, &input, &failure, options.shrink, body);
        stats.shrink_runs += u64::from(shrunk.runs);
        let saved = corpus.add_artifact(&Input::new(shrunk.bytes.clone(), input.root))?;
        crate::report::stderr_line(&format!(
            "sim: {}: fuzz: {} [{}] shrunk {} → {} bytes in {} runs ({:.1}s){}; saved {}",
            sim.name,
            failure.class,
            failure.oracle.as_ref().map_or("-".to_string(), ToString::to_string),
            shrunk.original_len,
            shrunk.bytes.len(),
            shrunk.runs,
            shrunk.wall.as_secs_f64(),
            if shrunk.budget_spent { " (budget spent)" } else { "" },
            saved.path.display()
        ));
        let report = run_input_sweep(sim, saved, body)?;
        let _read = report.passed();
        identity.get_or_insert_with(|| report.identity.clone());
        outcomes.extend(report.outcomes.iter().cloned());
    }
    crate::report::stderr_line(&format!(
        "sim: {}: fuzz ({}): {} runs in {:.1}s ({:.0} runs/s), queue {}, {} features, {} failure{} ({} shrinking runs)",
        sim.name,
        engine.name(),
        stats.runs,
        stats.wall.as_secs_f64(),
        stats.runs_per_second(),
        stats.queue,
        stats.features,
        outcomes.iter().filter(|o| o.failed()).count(),
        if outcomes.len() == 1 { "" } else { "s" },
        stats.shrink_runs
    ));
    let identity = match identity {
        Some(identity) => identity,
        None => crate::run::sweep::Sweep::new(&sim.clone().seeds(0..1))?.identity().clone(),
    };
    Ok(Report::new(sim.name.clone(), identity, outcomes, started.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::swarm_bucket;

    #[test]
    fn swarm_values_bucket_by_powers_of_two_eighths_or_themselves() {
        assert_eq!(swarm_bucket("0"), "int 0");
        assert_eq!(swarm_bucket("5"), swarm_bucket("7"));
        assert_ne!(swarm_bucket("7"), swarm_bucket("8"));
        assert_eq!(swarm_bucket("0.26"), swarm_bucket("0.3"));
        assert_ne!(swarm_bucket("0.1"), swarm_bucket("0.9"));
        assert_eq!(swarm_bucket("3884539ns"), swarm_bucket("3000000ns"));
        assert_ne!(swarm_bucket("0ms"), swarm_bucket("1ms"));
        assert_eq!(swarm_bucket("true"), "true");
        assert_eq!(swarm_bucket("range"), "range");
    }
}
