//! The merge: failing seeds grouped by signature, and runs that diverged across shards.
//!
//! Per signature ([`sim::signature`]): how many runs failed with it, the distinct seeds, the
//! first seed (the lowest), the fastest failing seed (the lowest `wall_nanos`: the cheapest to
//! replay and debug) with its replay line, the shards and commits it was seen in.
//!
//! A seed is one run only given its simulation, mode, swarm and commit: the same
//! (simulation, seed, mode, swarm) on one commit seen with two history hashes (two shards, or a
//! shard and a rerun) is nondeterminism, whatever each run's own verdict was. Each simulation
//! with such seeds gets one more signature, `"{simulation} · replay diverged across shards"`,
//! whose seeds are the diverging ones (never expected: a planted bug is not a divergence).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

use crate::input::{Inputs, Record};
use crate::trace::Tail;
use crate::triage::Triage;

/// A fast hash for the merge's maps (keys are our own strings and seeds, not an attacker's).
type Fast = xxhash_rust::xxh3::Xxh3DefaultBuilder;
type Map<K, V> = HashMap<K, V, Fast>;

/// The suffix of a divergence's signature, after the simulation's name.
pub const DIVERGED_ACROSS_SHARDS: &str = "replay diverged across shards";

/// One failing run that stands for its signature.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Example {
    /// The seed.
    pub seed: u64,
    /// Wall time of the run, in nanoseconds.
    pub wall_nanos: u64,
    /// The command that replays it.
    pub replay: String,
    /// The trace path the line names.
    pub trace: Option<PathBuf>,
    /// `replay` or `explore`.
    pub mode: String,
    /// The shard that ran it.
    pub shard: Option<String>,
    /// Its history hash, 16 hex digits.
    pub history_hash: String,
    /// Where its line was read (`file:line`).
    pub at: String,
    /// Index of its record in [`Inputs::records`].
    #[serde(skip)]
    pub record: usize,
}

/// One run of a diverging seed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DivergentRun {
    /// Its history hash, 16 hex digits.
    pub history_hash: String,
    /// Its signature, or `None` when it passed.
    pub signature: Option<String>,
    /// The shard that ran it.
    pub shard: Option<String>,
    /// Where its line was read.
    pub at: String,
}

/// A seed seen with more than one history.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Divergence {
    /// The seed.
    pub seed: u64,
    /// `replay` or `explore`.
    pub mode: String,
    /// The swarm, `name=value,…`.
    pub swarm: String,
    /// The commit both runs built.
    pub commit: String,
    /// The runs, one per distinct history.
    pub runs: Vec<DivergentRun>,
}

/// Everything known about one signature.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Signature {
    /// The signature.
    pub signature: String,
    /// Its simulation.
    pub simulation: String,
    /// The failure class's name (`replay diverged` for a divergence across shards).
    pub class: String,
    /// The oracle, when the failure names one.
    pub oracle: Option<String>,
    /// Whether this is a divergence across shards rather than a failure.
    pub diverged: bool,
    /// Its standing (set by the merge from the [`crate::verdict::Policy`]).
    pub status: Status,
    /// Failing runs with this signature (diverging seeds, for a divergence).
    pub count: usize,
    /// The distinct seeds, ascending.
    pub seeds: Vec<u64>,
    /// The run with the lowest seed (then the lowest wall time).
    pub first: Example,
    /// The run with the lowest wall time (then the lowest seed).
    pub fastest: Example,
    /// The fastest run's failure message, in full.
    pub message: String,
    /// Shards (`i/n`) it was seen in.
    pub shards: BTreeSet<String>,
    /// Commits it was seen on.
    pub commits: BTreeSet<String>,
    /// For a divergence: each diverging seed's runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub divergences: Vec<Divergence>,
    /// The trace tail of its fastest run whose trace is found ([`crate::trace`]).
    pub trace_tail: Option<Tail>,
    /// Fresh-process triage, when run ([`crate::triage`]).
    pub triage: Option<Triage>,
    /// Indices of its runs in [`Inputs::records`], fastest first.
    #[serde(skip)]
    pub runs: Vec<usize>,
}

/// Counts over one simulation's runs.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SimulationTotals {
    /// Runs (distinct lines).
    pub runs: usize,
    /// Distinct seeds.
    pub seeds: usize,
    /// Failing runs.
    pub failed: usize,
    /// Runs whose violation was excused.
    pub excused: usize,
}

/// Counts over all inputs.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Totals {
    /// Non-blank lines read.
    pub lines: usize,
    /// Distinct runs.
    pub runs: usize,
    /// Lines dropped as repeats.
    pub duplicates: usize,
    /// Lines that did not parse.
    pub malformed: usize,
    /// Files read.
    pub files: usize,
    /// Per simulation.
    pub simulations: BTreeMap<String, SimulationTotals>,
    /// Shards seen (`i/n`).
    pub shards: BTreeSet<String>,
    /// Runs with no shard.
    pub unsharded_runs: usize,
    /// Commits seen.
    pub commits: BTreeSet<String>,
    /// Seed bases seen.
    pub seed_bases: BTreeSet<String>,
}

/// The merge's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Merged {
    /// Counts.
    pub totals: Totals,
    /// Signatures: new first, then canary, expected, known; by count, descending.
    pub signatures: Vec<Signature>,
}

fn example(index: usize, record: &Record, inputs: &Inputs) -> Example {
    let o = &record.outcome;
    Example {
        seed: o.seed.0,
        wall_nanos: o.wall_nanos,
        replay: o.replay.clone(),
        trace: o.trace.clone(),
        mode: record.mode.clone(),
        shard: record.shard.clone(),
        history_hash: format!("{:016x}", o.history_hash),
        at: at(record, inputs),
        record: index,
    }
}

fn at(record: &Record, inputs: &Inputs) -> String {
    format!("{}:{}", inputs.files[record.origin.file].display(), record.origin.line)
}

/// Builds a signature from the indices of its runs (at least one).
fn signature_of(name: String, runs: &[usize], inputs: &Inputs, diverged: bool) -> Signature {
    let records = &inputs.records;
    let first = *runs
        .iter()
        .min_by_key(|&&i| (records[i].outcome.seed, records[i].outcome.wall_nanos))
        .expect("a signature has at least one run");
    let fastest = *runs
        .iter()
        .min_by_key(|&&i| (records[i].outcome.wall_nanos, records[i].outcome.seed))
        .expect("a signature has at least one run");
    let seeds: BTreeSet<u64> = runs.iter().map(|&i| records[i].outcome.seed.0).collect();
    let failure = records[fastest].outcome.failure.as_ref();
    Signature {
        signature: name,
        simulation: records[fastest].outcome.simulation.clone(),
        class: if diverged {
            "replay diverged".to_string()
        } else {
            failure.map(|f| f.class.name().to_string()).unwrap_or_default()
        },
        oracle: if diverged { None } else { failure.and_then(|f| f.oracle.as_ref()).map(|o| o.as_str().to_string()) },
        diverged,
        status: Status::New,
        count: if diverged { seeds.len() } else { runs.len() },
        seeds: seeds.into_iter().collect(),
        first: example(first, &records[first], inputs),
        fastest: example(fastest, &records[fastest], inputs),
        message: failure.map(|f| f.message.clone()).unwrap_or_default(),
        shards: runs.iter().filter_map(|&i| records[i].shard.clone()).collect(),
        commits: runs.iter().map(|&i| records[i].commit.clone()).collect(),
        divergences: Vec::new(),
        trace_tail: None,
        triage: None,
        runs: {
            let mut runs = runs.to_vec();
            runs.sort_by_key(|&i| (records[i].outcome.wall_nanos, records[i].outcome.seed));
            runs
        },
    }
}

/// Merges the inputs' records; each signature's status comes from `status_of` (the policy's,
/// [`crate::verdict::Policy::status`]).
pub fn merge(inputs: &Inputs, status_of: impl Fn(&Signature) -> Status) -> Merged {
    let mut totals = Totals {
        lines: inputs.lines,
        runs: inputs.records.len(),
        duplicates: inputs.duplicates,
        malformed: inputs.malformed_count,
        files: inputs.files.len(),
        ..Totals::default()
    };
    let mut per_simulation: Map<&str, (SimulationTotals, HashSet<u64, Fast>)> = Map::default();
    let mut shards: HashSet<&str, Fast> = HashSet::default();
    let mut commits: HashSet<&str, Fast> = HashSet::default();
    let mut seed_bases: HashSet<&str, Fast> = HashSet::default();
    let mut by_signature: Map<&str, Vec<usize>> = Map::default();
    // A run's first record, and the records of runs seen more than once (by their first).
    let mut by_run: Map<(&str, u64, &str, &str, &str), usize> = Map::default();
    let mut repeated: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, r) in inputs.records.iter().enumerate() {
        let o = &r.outcome;
        let (sim, seeds) = per_simulation.entry(&o.simulation).or_default();
        sim.runs += 1;
        sim.failed += usize::from(r.signature.is_some());
        sim.excused += usize::from(o.failure.is_some() && !o.failed());
        seeds.insert(o.seed.0);
        match &r.shard {
            Some(s) => drop(shards.insert(s)),
            None => totals.unsharded_runs += 1,
        }
        commits.insert(&r.commit);
        seed_bases.extend(r.seed_base.as_deref());
        if let Some(sig) = &r.signature {
            by_signature.entry(sig).or_default().push(i);
        }
        let first = *by_run.entry((&o.simulation, o.seed.0, &r.mode, &o.swarm, &r.commit)).or_insert(i);
        if first != i {
            repeated.entry(first).or_insert_with(|| vec![first]).push(i);
        }
    }
    for (name, (mut sim, seeds)) in per_simulation {
        sim.seeds = seeds.len();
        totals.simulations.insert(name.to_string(), sim);
    }
    let owned = |set: HashSet<&str, Fast>| set.into_iter().map(str::to_string).collect::<BTreeSet<String>>();
    (totals.shards, totals.commits, totals.seed_bases) = (owned(shards), owned(commits), owned(seed_bases));
    let mut signatures: Vec<Signature> =
        by_signature.into_iter().map(|(name, runs)| signature_of(name.to_string(), &runs, inputs, false)).collect();
    signatures.extend(divergences(repeated, inputs));
    for s in &mut signatures {
        s.status = status_of(s);
    }
    signatures.sort_by(|a, b| {
        (a.status, std::cmp::Reverse(a.count), &a.signature).cmp(&(b.status, std::cmp::Reverse(b.count), &b.signature))
    });
    Merged { totals, signatures }
}

/// One signature per simulation whose seeds were seen with different histories, from the runs
/// seen more than once.
fn divergences(repeated: BTreeMap<usize, Vec<usize>>, inputs: &Inputs) -> Vec<Signature> {
    let records = &inputs.records;
    let mut per_simulation: BTreeMap<&str, (Vec<usize>, Vec<Divergence>)> = BTreeMap::new();
    for runs in repeated.into_values() {
        let hashes: BTreeSet<u64> = runs.iter().map(|&i| records[i].outcome.history_hash).collect();
        if hashes.len() < 2 {
            continue;
        }
        let r = &records[runs[0]];
        let entry = per_simulation.entry(&r.outcome.simulation).or_default();
        entry.0.extend(&runs);
        entry.1.push(Divergence {
            seed: r.outcome.seed.0,
            mode: r.mode.clone(),
            swarm: r.outcome.swarm.clone(),
            commit: r.commit.clone(),
            runs: runs
                .iter()
                .map(|&i| DivergentRun {
                    history_hash: format!("{:016x}", records[i].outcome.history_hash),
                    signature: records[i].signature.clone(),
                    shard: records[i].shard.clone(),
                    at: at(&records[i], inputs),
                })
                .collect(),
        });
    }
    per_simulation
        .into_iter()
        .map(|(simulation, (runs, mut found))| {
            found.sort_by_key(|d| d.seed);
            let mut s = signature_of(format!("{simulation} · {DIVERGED_ACROSS_SHARDS}"), &runs, inputs, true);
            s.message = format!(
                "{} seed{} ran with different histories on one commit (first: seed {})",
                found.len(),
                if found.len() == 1 { "" } else { "s" },
                found[0].seed
            );
            s.divergences = found;
            s
        })
        .collect()
}

/// A signature's standing.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Not expected, not known: fails the merge (exit 1).
    New,
    /// A canary's failure.
    Canary,
    /// A failure of an `--expected` simulation.
    Expected,
    /// Listed in a `--known` file.
    Known,
}

impl Status {
    /// Its name as printed.
    pub fn name(self) -> &'static str {
        match self {
            Status::New => "new",
            Status::Canary => "canary",
            Status::Expected => "expected",
            Status::Known => "known",
        }
    }
}
