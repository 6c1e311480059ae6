//! A sweep: the simulation with its environment applied, run over its seeds — in parallel, with
//! in-process repeats, fresh-process self-checks and confirmations, traces, JSON lines, and the
//! printed summary.
//!
//! Fresh processes are this same executable, started with `SIM_SEEDS`, `SIM_ONLY` and
//! `SIM_CHILD_OUT` (where the child writes one JSON line per seed, with its history when
//! `SIM_CHILD_HISTORY` is set) and the arguments that select the same test. A test that runs two
//! simulations of one name is answered for the one that asked: `SIM_CHILD_OCCURRENCE` says which
//! of the sweeps of that name the test's thread starts writes the lines (the others run but
//! write nothing).
//!
//! A fresh process reproduces process-wide state too: a counter in a static (the one
//! `futures::select!` seeds its shuffle from, tokio's task ids) takes the same values in a
//! process that runs the same seeds in the same order, so a history that depends on it would
//! "replay exactly". Each fresh process therefore first makes `SIM_CHILD_THROWAWAY` throw-away
//! runs of its first seed, a number drawn from the seed, different for each process of one
//! check, and (for confirmations) chosen so that no failing seed runs after as many runs as it
//! did in the original process: such state then stands elsewhere in every process, and a history
//! that depends on it diverges. The replay line is not affected (a user's replay runs the seed
//! first, in a process of its own).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::config::{self, ConfigError, Mode, Seeds};
use super::ctx::Ctx;
use super::once::{self, RunResult, RunSpec};
use super::simulation::{Body, BoxFuture, Simulation};
use crate::history::{self, Entry, History};
use crate::report::{self, Class, Failure, Identity, Invocation, Outcome, Replays, Report};
use crate::seed::{Seed, Source};
use crate::seed_base::{self, BuildBase};
use crate::swarm::{self, SwarmError};

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_parse<T: FromStr>(var: &'static str, expected: &'static str) -> Result<Option<T>, ConfigError> {
    match env_var(var) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| ConfigError::Invalid { var, value: v, expected }),
    }
}

fn env_flag(var: &'static str) -> Result<Option<bool>, ConfigError> {
    match env_var(var) {
        None => Ok(None),
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "on" | "yes" => Ok(Some(true)),
            "0" | "false" | "off" | "no" => Ok(Some(false)),
            _ => Err(ConfigError::Invalid { var, value: v, expected: "1/true/on or 0/false/off" }),
        },
    }
}

/// Applies the `SIM_*` variables that override the builder (seeds, mode, repeats, jobs, watchdog).
fn apply_env(sim: &mut Simulation) -> Result<(), ConfigError> {
    if let Some(seeds) = env_var("SIM_SEEDS") {
        sim.seeds = seeds.parse()?;
    }
    if let Some(seed) = env_parse::<Seed>("SIM_SEED", "a seed (decimal u64 or 0x hex)")? {
        sim.seeds = Seeds::List(vec![seed.0]);
    }
    if let Some(path) = env_var("SIM_FUZZ_INPUT") {
        let read = crate::input::Input::read(std::path::Path::new(&path));
        let cwd = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
        let reason = |e: std::io::Error| {
            format!(
                "SIM_FUZZ_INPUT: cannot read it: {e} (a relative path is read from the working directory, {cwd}; cargo test runs a test in its package's directory)"
            )
        };
        sim.input = Some(read.map_err(|e| ConfigError::FuzzInput { path: path.clone(), reason: reason(e) })?);
    }
    if let Some(input) = &sim.input
        && env_var("SIM_SEED").is_none()
        && env_var("SIM_SEEDS").is_none()
    {
        // A fuzz input runs once, under its root (from its file name) unless the line names one.
        sim.seeds = Seeds::List(vec![input.root.0]);
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
    if let Some(on) = env_flag("SIM_SEED_LINES")? {
        sim.seed_lines = on;
    }
    if let Some(w) = env_var("SIM_WATCHDOG") {
        sim.watchdog = swarm::parse_duration(&w).filter(|d| !d.is_zero()).ok_or(ConfigError::Invalid {
            var: "SIM_WATCHDOG",
            value: w,
            expected: "a positive duration such as 30s",
        })?;
    }
    if sim.attempt.is_none() {
        if let Some(text) = env_var("SIM_DROP_FAULTS") {
            sim.drop_faults = config::parse_drop_faults(&text)?;
        }
        if let Some(text) = env_var("SIM_MAX_OPS") {
            sim.max_ops = Some(config::parse_max_ops(&text)?);
        }
    }
    Ok(())
}

/// `SIM_TRACE`: whether every seed's trace is written.
fn trace_all_from_env() -> Result<bool, ConfigError> {
    Ok(match env_var("SIM_TRACE") {
        None => false,
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "all" | "1" | "true" | "on" => true,
            "failures" | "0" | "false" | "off" => false,
            _ => {
                return Err(ConfigError::Invalid {
                    var: "SIM_TRACE",
                    value: v,
                    expected: "all, or failures (the default)",
                });
            }
        },
    })
}

/// Checks `SIM_LOG` parses and `SIM_JSON` can be appended to.
fn check_log_and_json() -> Result<(), ConfigError> {
    if let Some(log) = env_var("SIM_LOG")
        && tracing_subscriber::filter::Targets::from_str(&log).is_err()
    {
        return Err(ConfigError::Invalid {
            var: "SIM_LOG",
            value: log,
            expected: "a tracing target list such as info or warn,my_crate=debug",
        });
    }
    if let Some(path) = env_var("SIM_JSON") {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| ConfigError::Json { path: path.clone(), reason: e.to_string() })?;
    }
    Ok(())
}

/// The shard a sweep runs (`SIM_SHARD=i/n`).
struct Shard {
    /// `i/n`, as each JSON line names it.
    label: String,
    /// `shard i/n: k of m seeds`, printed with the sweep's first line.
    note: String,
}

/// `SIM_SHARD=i/n`: the seeds at positions `i` modulo `n`, and the [`Shard`].
fn shard(mut seeds: Vec<Seed>) -> Result<(Vec<Seed>, Option<Shard>), ConfigError> {
    let mut shard_note = None;
    if let Some((i, n)) = config::shard_from_env()? {
        let all = seeds.len();
        seeds = seeds.into_iter().enumerate().filter(|(k, _)| k % n == i).map(|(_, s)| s).collect();
        shard_note =
            Some(Shard { label: format!("{i}/{n}"), note: format!("shard {i}/{n}: {} of {all} seeds", seeds.len()) });
    }
    Ok((seeds, shard_note))
}

/// One line a child process writes per seed.
#[derive(serde::Serialize, serde::Deserialize)]
struct ChildLine {
    outcome: Outcome,
    history: Option<Vec<Entry>>,
}

thread_local! {
    /// Sweeps started on this thread, by simulation name (see [`Sweep::occurrence`]).
    static OCCURRENCES: std::cell::RefCell<BTreeMap<String, u32>> = const { std::cell::RefCell::new(BTreeMap::new()) };
}

/// The simulation with its environment applied.
pub(crate) struct Sweep {
    sim: Simulation,
    seeds: Vec<Seed>,
    swarm: BTreeMap<String, String>,
    invocation: Invocation,
    identity: Identity,
    child_out: Option<PathBuf>,
    child_history: bool,
    /// Runs of the first seed made and thrown away before the sweep (fresh processes only).
    child_throwaway: u32,
    /// How many sweeps of this simulation's name this thread started before this one: a test
    /// may run two simulations of one name, and a fresh process answers for the same one.
    occurrence: u32,
    /// In a fresh process: the occurrence whose results go to `SIM_CHILD_OUT`.
    child_occurrence: u32,
    trace_all: bool,
    skip: Option<String>,
    /// The shard, under `SIM_SHARD`.
    shard_note: Option<Shard>,
    /// The build's seed base, when the seeds are `build:N`.
    seed_base: Option<BuildBase>,
    /// The seed base each JSON line names: `seed_base`'s, or the builder's
    /// ([`Simulation::seed_base`]) when its seeds run.
    line_seed_base: Option<u64>,
}

impl Sweep {
    pub(crate) fn new(sim: &Simulation) -> Result<Sweep, ConfigError> {
        let mut sim = sim.clone();
        let skip = env_var("SIM_ONLY").filter(|only| *only != sim.name);
        let builder_seeds = sim.seeds.clone();
        apply_env(&mut sim)?;
        // The builder's seed base names the seeds only when no variable chose others.
        let builder_base = sim.seed_base.filter(|_| sim.seeds == builder_seeds);
        if sim.attempt.is_some() {
            // A minimizer's attempt runs the seed it names, whatever SIM_SEED(S) say, and in this
            // process only (a fresh process would not know the attempt's overrides).
            sim.seeds = builder_seeds;
            sim.confirm = 0;
            sim.repeat_processes = 0;
        }
        let trace_all = trace_all_from_env()?;
        check_log_and_json()?;
        let mut swarm = sim.swarm.clone();
        if let Some(attempt) = &sim.attempt {
            swarm.extend(attempt.clone());
        } else if let Some(text) = env_var("SIM_SWARM") {
            let overrides = swarm::parse_overrides(&text)?;
            swarm.extend(overrides);
        }
        let seed_base = matches!(sim.seeds, Seeds::Build(_)).then(seed_base::build_base);
        let line_seed_base = seed_base.as_ref().map(|b| b.base).or(builder_base);
        let (seeds, shard_note) =
            if sim.attempt.is_some() { (sim.seeds.resolve()?, None) } else { shard(sim.seeds.resolve()?)? };
        let child_out = env_var("SIM_CHILD_OUT").map(PathBuf::from);
        let child_throwaway = env_parse::<u32>("SIM_CHILD_THROWAWAY", "a count")?.unwrap_or(0);
        if child_out.is_some() {
            sim.confirm = 0;
            sim.repeat_processes = 0;
        }
        let child_occurrence = env_parse::<u32>("SIM_CHILD_OCCURRENCE", "a count")?.unwrap_or(0);
        let occurrence = OCCURRENCES.with(|o| {
            let mut o = o.borrow_mut();
            let n = o.entry(sim.name.clone()).or_insert(0);
            *n += 1;
            *n - 1
        });
        let invocation = Invocation::detect(sim.test_name.as_deref());
        let identity = Identity::current(&invocation, &sim.features);
        Ok(Sweep {
            occurrence,
            child_occurrence,
            child_history: env_var("SIM_CHILD_HISTORY").is_some(),
            child_throwaway: if child_out.is_some() { child_throwaway } else { 0 },
            sim,
            seeds,
            swarm,
            invocation,
            identity,
            child_out,
            trace_all,
            skip,
            shard_note,
            seed_base,
            line_seed_base,
        })
    }

    /// The identity of the build that runs this sweep.
    pub(crate) fn identity(&self) -> &Identity {
        &self.identity
    }

    /// What each JSON line says about this sweep.
    fn labels(&self) -> report::LineLabels<'_> {
        report::LineLabels {
            mode: match self.sim.mode {
                Mode::Replay => "replay",
                Mode::Explore => "explore",
            },
            shard: self.shard_note.as_ref().map(|s| s.label.as_str()),
            seed_base: self.line_seed_base,
        }
    }

    /// The environment that replays `seed`.
    fn replay_env(&self, seed: Seed) -> Vec<(String, String)> {
        let mut env = vec![("SIM_SEED".to_string(), seed.to_string())];
        // A simulation built in explore mode runs so when SIM_MODE is unset: a replay-mode run of
        // it (SIM_MODE=replay) must say so too.
        if self.sim.mode == Mode::Explore || env_var("SIM_MODE").is_some() {
            let mode = if self.sim.mode == Mode::Explore { "explore" } else { "replay" };
            env.push(("SIM_MODE".to_string(), mode.to_string()));
        }
        match &self.sim.attempt {
            Some(attempt) if !attempt.is_empty() => {
                let text = attempt.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
                env.push(("SIM_SWARM".to_string(), text));
            }
            Some(_) => {}
            None => {
                if let Some(text) = env_var("SIM_SWARM") {
                    env.push(("SIM_SWARM".to_string(), text));
                }
            }
        }
        if !self.sim.drop_faults.is_empty() {
            env.push(("SIM_DROP_FAULTS".to_string(), config::format_drop_faults(&self.sim.drop_faults)));
        }
        if let Some(n) = self.sim.max_ops {
            env.push(("SIM_MAX_OPS".to_string(), n.to_string()));
        }
        if let Some(input) = &self.sim.input {
            env.push(("SIM_FUZZ_INPUT".to_string(), input.path.display().to_string()));
        }
        if !self.invocation.is_test() {
            env.push(("SIM_ONLY".to_string(), self.sim.name.clone()));
        }
        env
    }

    fn replay_line(&self, seed: Seed) -> String {
        self.invocation.replay_command(&self.replay_env(seed), &self.sim.features)
    }

    fn spec(&self, seed: Seed) -> RunSpec {
        let mut spec = RunSpec::from_sim(&self.sim, seed, self.swarm.clone());
        spec.keep_trace = (self.child_out.is_none() || self.child_history) && self.sim.attempt.is_none();
        spec.trace_all = self.trace_all;
        spec.fuzz = self.sim.input.as_ref().map(|input| Source::from_bytes(input.bytes.to_vec()));
        spec
    }

    pub(crate) fn run(self, body: Arc<Body>) -> Result<Report, ConfigError> {
        let started = Instant::now();
        if let Some(only) = &self.skip {
            if self.child_out.is_none() {
                report::stderr_line(&format!("sim: {}: skipped (SIM_ONLY={only})", self.sim.name));
            }
            return Ok(Report::new(self.sim.name.clone(), self.identity, Vec::new(), Duration::ZERO));
        }
        if self.child_out.is_none() && self.sim.seed_lines {
            let shard = self.shard_note.as_ref().map(|s| format!(" ({})", s.note)).unwrap_or_default();
            let n = self.seeds.len();
            let what = match &self.sim.input {
                Some(input) => format!(
                    "fuzz input {} ({} byte{})",
                    input.path.display(),
                    input.len(),
                    if input.len() == 1 { "" } else { "s" }
                ),
                None => format!("{n} seed{}", if n == 1 { "" } else { "s" }),
            };
            report::stderr_line(&format!("sim: {}: {what}{shard} · {}", self.sim.name, self.identity));
        }
        if let Some(base) = &self.seed_base
            && self.child_out.is_none()
        {
            report::stderr_line(&format!("sim: {}: {base}", self.sim.name));
            if let Some(warning) = base.warning() {
                report::stderr_line(&format!("sim: {}: warning: {warning}", self.sim.name));
            }
        }
        if let Some(&first) = self.seeds.first() {
            for _ in 0..self.child_throwaway {
                drop(once::run_once(self.spec(first), Arc::clone(&body), self.sim.watchdog));
            }
        }
        let results = self.sweep(&body);
        self.check_swarm(&results)?;

        if let Some(path) = &self.child_out
            && self.occurrence == self.child_occurrence
        {
            self.write_child(path, &results);
        }
        let mut outcomes = Vec::with_capacity(results.len());
        let trace_root = self.invocation.trace_root();
        // The histories compared later: the failing seeds' (confirmation), every seed's when
        // fresh processes repeat the sweep (to name the first divergent event).
        let mut kept_entries: BTreeMap<Seed, Vec<Entry>> = BTreeMap::new();
        for mut result in results {
            result.outcome.replay = self.replay_line(result.outcome.seed);
            if !result.trace.is_empty() && self.child_out.is_none() {
                let header = self.trace_header(&result.outcome);
                match report::write_trace(&trace_root, &self.sim.name, result.outcome.seed, &header, &result.trace) {
                    Ok(path) => result.outcome.trace = Some(path),
                    Err(e) => report::stderr_line(&format!(
                        "sim: could not write the trace of seed {}: {e}",
                        result.outcome.seed
                    )),
                }
            }
            if self.keeps_history(&result.outcome) {
                kept_entries.insert(result.outcome.seed, std::mem::take(&mut result.history).into_entries());
            }
            outcomes.push(result.outcome);
        }

        if self.sim.repeat_processes > 0 {
            self.repeat_in_processes(&mut outcomes, &kept_entries);
        }
        if self.sim.confirm > 0 {
            self.confirm_failures(&mut outcomes, &kept_entries);
        }
        // A fault number past the run's faults drops nothing: say so rather than let the replay
        // line carry it silently.
        if let Some(last) = self.sim.drop_faults.last()
            && self.child_out.is_none()
            && self.sim.attempt.is_none()
            && let Some(o) = outcomes.iter().find(|o| o.faults.len() < *last)
        {
            report::stderr_line(&format!(
                "sim: {}: SIM_DROP_FAULTS names fault {last}, but seed {} scheduled {} fault{}: numbers past that drop nothing",
                self.sim.name,
                o.seed,
                o.faults.len(),
                if o.faults.len() == 1 { "" } else { "s" }
            ));
        }
        // A minimizer's attempts are its own business: no JSON line, no summary each.
        let quiet = self.child_out.is_some() || self.sim.attempt.is_some();
        if !quiet {
            for outcome in &outcomes {
                if let Err(e) = report::append_json(outcome, &self.identity, &self.labels()) {
                    report::stderr_line(&format!("sim: could not append to SIM_JSON: {e}"));
                }
            }
        }
        let report = Report::new(self.sim.name.clone(), self.identity.clone(), outcomes, started.elapsed());
        if !quiet {
            self.print(&report);
        }
        Ok(report)
    }

    /// A swarm override that no seed could use (a bad value) or that names no drawn dimension.
    fn check_swarm(&self, results: &[RunResult]) -> Result<(), ConfigError> {
        let mut drawn = BTreeSet::new();
        for result in results {
            if let Some(e) = result.swarm_errors.iter().find(|e| matches!(e, SwarmError::Value { .. })) {
                return Err(ConfigError::Swarm(e.clone()));
            }
            drawn.extend(result.swarm_drawn.iter().cloned());
        }
        let unknown: Vec<String> = self.swarm.keys().filter(|k| !drawn.contains(*k)).cloned().collect();
        if !unknown.is_empty() && !results.is_empty() {
            return Err(ConfigError::Swarm(SwarmError::Unknown { unknown, known: drawn.into_iter().collect() }));
        }
        Ok(())
    }

    fn trace_header(&self, outcome: &Outcome) -> Vec<String> {
        vec![
            format!("# simulation {} · seed {}", self.sim.name, outcome.seed),
            format!("# identity: {}", self.identity),
            format!("# swarm: {}", outcome.swarm),
            format!("# outcome: {}", outcome.failure.as_ref().map_or_else(|| "passed".to_string(), |f| f.to_string())),
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
        let failed = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let results: Mutex<Vec<(usize, RunResult)>> = Mutex::new(Vec::with_capacity(self.seeds.len()));
        let jobs = self.sim.jobs.min(self.seeds.len()).max(1);
        let progress = Progress::new(self.sim.progress && self.child_out.is_none(), &self.sim.name, self.seeds.len());
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                scope.spawn(|| {
                    loop {
                        if self.sim.stop_after_failures.is_some_and(|n| failed.load(Ordering::Relaxed) >= n) {
                            break;
                        }
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&seed) = self.seeds.get(index) else { break };
                        if self.sim.seed_lines {
                            report::stderr_line(&format!(
                                "sim: seed {seed} · {} · replay: {}",
                                self.identity.short(),
                                self.replay_line(seed)
                            ));
                        }
                        let mut result = self.run_repeated(seed, body);
                        if !self.keeps_history(&result.outcome) {
                            // A passing seed's history is never read again: dropping it here keeps
                            // a long sweep's memory flat (it is 0.1–1 MB a seed in the walkthroughs).
                            result.history = History::new();
                        }
                        if result.outcome.failed() {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                        progress.update(finished, failed.load(Ordering::Relaxed));
                        results.lock().unwrap_or_else(|p| p.into_inner()).push((index, result));
                    }
                });
            }
        });
        progress.finish();
        let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
        results.sort_by_key(|(index, _)| *index);
        results.into_iter().map(|(_, r)| r).collect()
    }

    /// Whether a seed's history is read after the sweep: a failing seed's (confirmation in
    /// fresh processes), every seed's when fresh processes repeat the sweep or a parent process
    /// asked this child for histories.
    fn keeps_history(&self, outcome: &Outcome) -> bool {
        outcome.failed() || self.sim.repeat_processes > 0 || (self.child_out.is_some() && self.child_history)
    }

    fn run_repeated(&self, seed: Seed, body: &Arc<Body>) -> RunResult {
        let mut first = once::run_once(self.spec(seed), Arc::clone(body), self.sim.watchdog);
        for _ in 1..self.sim.repeat {
            if first.outcome.failure.as_ref().is_some_and(|f| f.class == Class::Inconclusive) {
                break;
            }
            let again = once::run_once(self.spec(seed), Arc::clone(body), self.sim.watchdog);
            // The entries are made only when the histories differ (to name the first divergence).
            let entries = |r: &RunResult| -> Vec<Entry> {
                if first.outcome.history_hash == again.outcome.history_hash {
                    Vec::new()
                } else {
                    r.history.entries().collect()
                }
            };
            if let Some(divergence) = compare(&first.outcome, &entries(&first), &again.outcome, &entries(&again)) {
                first.outcome.failure = Some(
                    Failure::new(Class::ReplayDiverged, format!("repeated in this process: {divergence}"))
                        .oracle(crate::oracle::Oracle::SELF_CHECK),
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
                history: self.child_history.then(|| result.history.entries().collect()),
            };
            match serde_json::to_string(&line) {
                Ok(json) => {
                    text.push_str(&json);
                    text.push('\n');
                }
                Err(e) => report::stderr_line(&format!("sim: could not encode a child result: {e}")),
            }
        }
        if let Err(e) = std::fs::write(path, text) {
            report::stderr_line(&format!("sim: could not write SIM_CHILD_OUT {}: {e}", path.display()));
        }
    }

    /// Runs `seeds` in a fresh process of this executable, after `throwaway` runs of the first
    /// one; returns its lines by seed.
    fn run_child(
        &self,
        seeds: &[Seed],
        with_history: bool,
        throwaway: u32,
    ) -> Result<BTreeMap<Seed, ChildLine>, String> {
        let args = self
            .invocation
            .rerun_args()
            .ok_or("this test's name is unknown (name the thread's test with Simulation::test_name)")?;
        static CHILD: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!("sim-child-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let file = format!(
            "{}-{}.jsonl",
            self.sim.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
            CHILD.fetch_add(1, Ordering::Relaxed)
        );
        let out = dir.join(file);
        let list = seeds.iter().map(Seed::to_string).collect::<Vec<_>>().join(",");
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
            .env("SIM_CHILD_THROWAWAY", throwaway.to_string())
            .env("SIM_CHILD_OCCURRENCE", self.occurrence.to_string())
            .env("SIM_MODE", if self.sim.mode == Mode::Explore { "explore" } else { "replay" })
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        // A fuzz input is a file the fresh process reads; it runs that input as its only sweep.
        match self.sim.input.as_ref().filter(|i| !i.path.as_os_str().is_empty()) {
            Some(input) => command.env("SIM_FUZZ_INPUT", &input.path).env("SIM_CHILD_OCCURRENCE", "0"),
            None => command.env_remove("SIM_FUZZ_INPUT"),
        };
        if with_history {
            command.env("SIM_CHILD_HISTORY", "1");
        } else {
            command.env_remove("SIM_CHILD_HISTORY");
        }
        let output = command.output().map_err(|e| format!("cannot start {}: {e}", self.invocation.exe.display()))?;
        let text = std::fs::read_to_string(&out).map_err(|_| {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("sim: seed")).rev().take(3).collect();
            format!(
                "the fresh process ({} {}) ran no simulation named {:?} — is the test filtered out, #[ignore]d, or named \
                 differently (Simulation::test_name)? exit {}; its last lines: {}",
                self.invocation.exe.display(),
                args.join(" "),
                self.sim.name,
                output.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            )
        })?;
        let _ = std::fs::remove_file(&out);
        let mut lines = BTreeMap::new();
        for line in text.lines() {
            let parsed: ChildLine = serde_json::from_str(line).map_err(|e| format!("unreadable child result: {e}"))?;
            lines.insert(parsed.outcome.seed, parsed);
        }
        Ok(lines)
    }

    /// Re-runs every failing seed in `confirm` fresh processes (one process per round, running
    /// all of them, each after its own number of throw-away runs: see the module's docs) and
    /// labels each "replays exactly" or "replays k of n". A seed that any process did not
    /// reproduce is a *replay diverged* failure (oracle `self-check`), its message giving the
    /// original failure and the first divergent event: its replay line cannot be trusted.
    /// Inconclusive seeds are not re-run (a fresh process would hang just as long).
    fn confirm_failures(&self, outcomes: &mut [Outcome], entries: &BTreeMap<Seed, Vec<Entry>>) {
        let confirmable =
            |o: &Outcome| o.failed() && o.failure.as_ref().is_some_and(|f| f.class != Class::Inconclusive);
        // Each failing seed with the number of runs this process started before it (sequentially).
        let failing: Vec<(Seed, u64)> = outcomes
            .iter()
            .enumerate()
            .filter(|(_, o)| confirmable(o))
            .map(|(index, o)| (o.seed, index as u64 * u64::from(self.sim.repeat)))
            .collect();
        for outcome in outcomes.iter_mut().filter(|o| o.failed()) {
            let note = (!confirmable(outcome)).then(|| "inconclusive runs are not re-run".to_string());
            outcome.replays = Some(Replays { matched: 0, of: 0, divergence: note });
        }
        let Some(&(first, _)) = failing.first() else { return };
        // A fresh process runs the j-th failing seed after `throwaway + j` runs: avoid the counts
        // that would repeat a seed's original position.
        let taken: BTreeSet<u64> =
            failing.iter().enumerate().filter_map(|(j, &(_, before))| before.checked_sub(j as u64)).collect();
        let seeds: Vec<Seed> = failing.iter().map(|&(seed, _)| seed).collect();
        for (round, throwaway) in throwaway_runs(self.sim.confirm, first, &taken).into_iter().enumerate() {
            let lines = match self.run_child(&seeds, true, throwaway) {
                Ok(lines) => lines,
                Err(e) => {
                    for outcome in outcomes.iter_mut().filter(|o| confirmable(o)) {
                        if let Some(replays) = outcome.replays.as_mut() {
                            replays.divergence.get_or_insert_with(|| e.clone());
                        }
                    }
                    break;
                }
            };
            for outcome in outcomes.iter_mut().filter(|o| confirmable(o)) {
                let verdict = match lines.get(&outcome.seed) {
                    None => Some("the fresh process did not run the seed".to_string()),
                    Some(child) => {
                        let class = |o: &Outcome| o.failure.as_ref().map(|f| f.class);
                        let mine = entries.get(&outcome.seed).map(Vec::as_slice).unwrap_or(&[]);
                        match compare(outcome, mine, &child.outcome, child.history.as_deref().unwrap_or(&[])) {
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
                let replays = outcome.replays.get_or_insert(Replays { matched: 0, of: 0, divergence: None });
                replays.of += 1;
                match verdict {
                    None => replays.matched += 1,
                    Some(d) => {
                        replays.divergence.get_or_insert(format!("{} {d}", after_throwaway(round, throwaway)));
                    }
                }
            }
        }
        for outcome in outcomes.iter_mut().filter(|o| confirmable(o)) {
            let Some(replays) = outcome.replays.as_ref().filter(|r| r.of > 0 && r.matched < r.of) else { continue };
            let Some(original) = outcome.failure.take_if(|f| f.class != Class::ReplayDiverged) else { continue };
            let mut diverged = Failure::new(
                Class::ReplayDiverged,
                format!(
                    "{original}, but fresh processes replay it {} of {}: {}",
                    replays.matched,
                    replays.of,
                    replays.divergence.as_deref().unwrap_or("they differ")
                ),
            )
            .oracle(crate::oracle::Oracle::SELF_CHECK);
            diverged.at_nanos = original.at_nanos;
            outcome.failure = Some(diverged);
        }
    }

    /// Re-runs the whole sweep in fresh processes (each after its own number of throw-away runs)
    /// and marks seeds whose hashes differ as *replay diverged*, naming the first divergent event
    /// against this process's history.
    fn repeat_in_processes(&self, outcomes: &mut [Outcome], entries: &BTreeMap<Seed, Vec<Entry>>) {
        let seeds: Vec<Seed> = outcomes.iter().map(|o| o.seed).collect();
        let Some(&first) = seeds.first() else { return };
        // Any count but 0 moves every seed off its position here.
        let throwaways = throwaway_runs(self.sim.repeat_processes, first, &BTreeSet::from([0]));
        for (process, throwaway) in throwaways.into_iter().enumerate() {
            let lines = match self.run_child(&seeds, false, throwaway) {
                Ok(lines) => lines,
                Err(e) => {
                    report::stderr_line(&format!("sim: self-check process {process} failed: {e}"));
                    for outcome in outcomes.iter_mut().filter(|o| o.failure.is_none()) {
                        outcome.failure = Some(
                            Failure::new(Class::ReplayDiverged, format!("self-check process could not run: {e}"))
                                .oracle(crate::oracle::Oracle::SELF_CHECK),
                        );
                    }
                    return;
                }
            };
            for (index, outcome) in outcomes.iter_mut().enumerate() {
                let Some(child) = lines.get(&outcome.seed) else { continue };
                let same = child.outcome.history_hash == outcome.history_hash
                    && child.outcome.schedule_hash == outcome.schedule_hash;
                if same || outcome.failure.as_ref().is_some_and(|f| f.class == Class::ReplayDiverged) {
                    continue;
                }
                // Name the first divergent event: run the seed again in a fresh process that keeps
                // its history, after as many runs as it had in the process that differed.
                let before = throwaway.saturating_add(u32::try_from(index).unwrap_or(u32::MAX)).min(THROWAWAY_RUNS_MAX);
                let theirs =
                    self.run_child(&[outcome.seed], true, before).ok().and_then(|mut l| l.remove(&outcome.seed));
                let mine = entries.get(&outcome.seed).map(Vec::as_slice).unwrap_or(&[]);
                let detail = theirs
                    .and_then(|c| history::diff(mine, c.history.as_deref().unwrap_or(&[])))
                    .map(|d| d.to_string())
                    .unwrap_or_else(|| describe_hash_difference(outcome, &child.outcome));
                outcome.failure = Some(
                    Failure::new(Class::ReplayDiverged, format!("{} {detail}", after_throwaway(process, throwaway)))
                        .oracle(crate::oracle::Oracle::SELF_CHECK),
                );
            }
        }
    }

    fn print(&self, report: &Report) {
        let mut text = report.to_string();
        let abandoned = once::abandoned_threads();
        if abandoned > 0 {
            text.push_str(&format!(
                "  note: {abandoned} run thread(s) abandoned by the watchdog are still running and using CPU; later seeds' wall times (and watchdogs) suffer\n"
            ));
        }
        for outcome in report.failed_outcomes().take(usize::from(self.sim.trace_tail > 0)) {
            if let Some(path) = &outcome.trace
                && let Ok(content) = std::fs::read_to_string(path)
            {
                text.push_str(&crate::trace::excerpt_for(
                    &content,
                    outcome.failure.as_ref(),
                    outcome.seed,
                    self.sim.trace_tail,
                ));
            }
        }
        eprint!("{text}");
    }
}

/// A progress line on stderr for sweeps longer than a second (redrawn in place on a terminal,
/// one line per tenth otherwise).
struct Progress {
    on: bool,
    name: String,
    total: usize,
    started: Instant,
    tty: bool,
    last_tenth: AtomicUsize,
    shown: std::sync::atomic::AtomicBool,
}

impl Progress {
    fn new(on: bool, name: &str, total: usize) -> Progress {
        use std::io::IsTerminal;
        Progress {
            on,
            name: name.to_string(),
            total,
            started: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            last_tenth: AtomicUsize::new(0),
            shown: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn update(&self, done: usize, failed: usize) {
        if !self.on || self.started.elapsed() < Duration::from_secs(1) {
            return;
        }
        let elapsed = self.started.elapsed().as_secs_f64();
        let rate = done as f64 / elapsed.max(1e-9);
        let left = (self.total.saturating_sub(done)) as f64 / rate.max(1e-9);
        let line = format!(
            "sim: {}: {done}/{} seeds, {failed} failed, {elapsed:.0}s, ~{left:.0}s left",
            self.name, self.total
        );
        if self.tty {
            let width = 30;
            let filled = done * width / self.total.max(1);
            let bar: String = "#".repeat(filled) + &"-".repeat(width - filled);
            eprint!("\r[{bar}] {line}\x1b[K");
            self.shown.store(true, Ordering::Relaxed);
        } else {
            let tenth = done * 10 / self.total.max(1);
            if tenth > self.last_tenth.fetch_max(tenth, Ordering::Relaxed) {
                report::stderr_line(&line);
            }
        }
    }

    fn finish(&self) {
        if self.shown.load(Ordering::Relaxed) {
            eprint!("\r\x1b[K");
        }
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

/// The most throw-away runs a fresh process makes before its seeds.
const THROWAWAY_RUNS_MAX: u32 = 64;

/// How many throw-away runs each of `processes` fresh processes makes before its seeds: pairwise
/// different, so that at most one process can stand where the original did whatever process-wide
/// state a run advances; at least 1; outside `taken` (counts that would repeat a seed's original
/// position) while there are counts left up to [`THROWAWAY_RUNS_MAX`]; starting from a count in
/// 1..=4 drawn from `seed`, so the check itself replays.
fn throwaway_runs(processes: u32, seed: Seed, taken: &BTreeSet<u64>) -> Vec<u32> {
    let span = THROWAWAY_RUNS_MAX.max(processes);
    let start = (seed.child("sim.self-check.throwaway").0 % 4) as u32;
    let counts = (0..span).map(|k| 1 + (start + k) % span);
    let mut chosen: Vec<u32> =
        counts.clone().filter(|n| !taken.contains(&u64::from(*n))).take(processes as usize).collect();
    for n in counts {
        if chosen.len() >= processes as usize {
            break;
        }
        if !chosen.contains(&n) {
            chosen.push(n);
        }
    }
    chosen
}

/// "fresh process 2 (after 3 throw-away runs):"
fn after_throwaway(process: usize, throwaway: u32) -> String {
    format!("fresh process {process} (after {throwaway} throw-away run{}):", if throwaway == 1 { "" } else { "s" })
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

/// Running a simulation: the sweep over its seeds, or one run from fuzz bytes.
impl Simulation {
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
        Sweep::new(self)?.run(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throwaway_counts_differ_per_process_avoid_the_original_positions_and_replay() {
        for seed in 0..50 {
            let taken = BTreeSet::from([0, 2, 3]);
            let counts = throwaway_runs(5, Seed(seed), &taken);
            assert_eq!(counts.len(), 5);
            assert_eq!(counts.iter().collect::<BTreeSet<_>>().len(), 5, "pairwise different: {counts:?}");
            assert!(counts.iter().all(|n| (1..=THROWAWAY_RUNS_MAX).contains(n)), "{counts:?}");
            assert!(counts.iter().all(|n| !taken.contains(&u64::from(*n))), "{counts:?}");
            assert_eq!(counts, throwaway_runs(5, Seed(seed), &taken), "drawn from the seed");
        }
        let starts: BTreeSet<u32> = (0..50).map(|s| throwaway_runs(1, Seed(s), &BTreeSet::new())[0]).collect();
        assert_eq!(starts, BTreeSet::from([1, 2, 3, 4]), "the first count is drawn from the seed");
    }

    #[test]
    fn throwaway_counts_stay_pairwise_different_when_every_count_is_taken() {
        let taken: BTreeSet<u64> = (0..=u64::from(THROWAWAY_RUNS_MAX)).collect();
        let counts = throwaway_runs(3, Seed(7), &taken);
        assert_eq!(counts.iter().collect::<BTreeSet<_>>().len(), 3, "{counts:?}");
        let many = throwaway_runs(THROWAWAY_RUNS_MAX + 6, Seed(7), &BTreeSet::new());
        assert_eq!(many.iter().collect::<BTreeSet<_>>().len(), many.len(), "more processes than the limit");
    }
}

#[cfg(test)]
mod history_retention {
    use super::*;

    /// A long sweep (a fleet shard's budget) must not hold every seed's history until it ends:
    /// only a failing seed's is read again (confirmation), so only it is kept.
    #[test]
    fn a_sweep_keeps_the_histories_of_failing_seeds_only() {
        let sim = Simulation::new("sweep_history_retention").seeds(0..6u64).confirm(0).progress(false).jobs(2);
        let sweep = Sweep::new(&sim).expect("a plain simulation");
        let body: Arc<Body> = Arc::new(|ctx: Ctx| {
            Box::pin(async move {
                for i in 0..20 {
                    ctx.record("op", "client", format!("write {i}"));
                }
                if ctx.seed().0.is_multiple_of(3) { Err(Failure::new(Class::Correctness, "planted")) } else { Ok(()) }
            }) as BoxFuture
        });
        let results = sweep.sweep(&body);
        assert_eq!(results.len(), 6);
        for result in &results {
            let failed = result.outcome.failed();
            assert_eq!(failed, result.outcome.seed.0.is_multiple_of(3), "seed {}", result.outcome.seed);
            if failed {
                assert!(
                    result.history.entries().count() >= 20,
                    "a failing seed's history is kept for its confirmation"
                );
            } else {
                assert!(result.history.is_empty(), "seed {}: a passing seed's history was kept", result.outcome.seed);
            }
            assert!(result.outcome.events >= 20, "the outcome still counts the history's events");
        }
    }
}
