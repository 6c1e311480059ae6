//! A sweep: the simulation with its environment applied, run over its seeds — in parallel, with
//! in-process repeats, fresh-process self-checks and confirmations, traces, JSON lines, and the
//! printed summary.
//!
//! Fresh processes are this same executable, started with `SIM_SEEDS`, `SIM_ONLY` and
//! `SIM_CHILD_OUT` (where the child writes one JSON line per seed, with its history when
//! `SIM_CHILD_HISTORY` is set) and the arguments that select the same test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::once::{self, RunResult, RunSpec};
use super::{Body, ConfigError, Mode, Seeds, Simulation};
use crate::history::{self, Entry};
use crate::report::{self, Class, Failure, Identity, Invocation, Outcome, Replays, Report};
use crate::seed::Seed;
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

/// One line a child process writes per seed.
#[derive(serde::Serialize, serde::Deserialize)]
struct ChildLine {
    outcome: Outcome,
    history: Option<Vec<Entry>>,
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
    trace_all: bool,
    skip: Option<String>,
    shard_note: Option<String>,
}

impl Sweep {
    pub(crate) fn new(sim: &Simulation) -> Result<Sweep, ConfigError> {
        let mut sim = sim.clone();
        let skip = env_var("SIM_ONLY").filter(|only| *only != sim.name);
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
        let trace_all = match env_var("SIM_TRACE") {
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
        };
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
        let mut swarm = sim.swarm.clone();
        if let Some(text) = env_var("SIM_SWARM") {
            let overrides = swarm::parse_overrides(&text)?;
            swarm.extend(overrides);
        }
        let mut seeds = sim.seeds.resolve()?;
        let mut shard_note = None;
        if let Some(shard) = env_var("SIM_SHARD") {
            let bad = || ConfigError::Invalid { var: "SIM_SHARD", value: shard.clone(), expected: "i/n with i < n" };
            let (i, n) = shard.split_once('/').ok_or_else(bad)?;
            let (i, n): (usize, usize) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
            if n == 0 || i >= n {
                return Err(bad());
            }
            let all = seeds.len();
            seeds = seeds.into_iter().enumerate().filter(|(k, _)| k % n == i).map(|(_, s)| s).collect();
            shard_note = Some(format!("shard {i}/{n}: {} of {all} seeds", seeds.len()));
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
            trace_all,
            skip,
            shard_note,
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
        self.invocation.replay_command(&self.replay_env(seed), &self.sim.features)
    }

    fn spec(&self, seed: Seed) -> RunSpec {
        let mut spec = RunSpec::from_sim(&self.sim, seed, self.swarm.clone());
        spec.keep_trace = self.child_out.is_none() || self.child_history;
        spec.trace_all = self.trace_all;
        spec
    }

    pub(crate) fn run(self, body: Arc<Body>) -> Result<Report, ConfigError> {
        let started = Instant::now();
        if let Some(only) = &self.skip {
            if self.child_out.is_none() {
                report::stderr_line(&format!("sim: {}: skipped (SIM_ONLY={only})", self.sim.name));
            }
            return Ok(Report {
                simulation: self.sim.name.clone(),
                identity: self.identity,
                outcomes: Vec::new(),
                wall: Duration::ZERO,
            });
        }
        if self.child_out.is_none() && self.sim.seed_lines {
            let shard = self.shard_note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
            let n = self.seeds.len();
            report::stderr_line(&format!(
                "sim: {}: {n} seed{}{shard} · {}",
                self.sim.name,
                if n == 1 { "" } else { "s" },
                self.identity
            ));
        }
        let results = self.sweep(&body);
        let mut drawn = BTreeSet::new();
        for result in &results {
            if let Some(e) = result.swarm_errors.iter().find(|e| matches!(e, SwarmError::Value { .. })) {
                return Err(ConfigError::Swarm(e.clone()));
            }
            drawn.extend(result.swarm_drawn.iter().cloned());
        }
        let unknown: Vec<String> = self.swarm.keys().filter(|k| !drawn.contains(*k)).cloned().collect();
        if !unknown.is_empty() && !results.is_empty() {
            return Err(ConfigError::Swarm(SwarmError::Unknown { unknown, known: drawn.into_iter().collect() }));
        }

        if let Some(path) = &self.child_out {
            self.write_child(path, &results);
        }
        let mut outcomes = Vec::with_capacity(results.len());
        let trace_root = self.invocation.trace_root();
        let mut failing_entries: BTreeMap<Seed, Vec<Entry>> = BTreeMap::new();
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
        if self.child_out.is_none() {
            for outcome in &outcomes {
                if let Err(e) = report::append_json(outcome, &self.identity) {
                    report::stderr_line(&format!("sim: could not append to SIM_JSON: {e}"));
                }
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
                        let result = self.run_repeated(seed, body);
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

    fn run_repeated(&self, seed: Seed, body: &Arc<Body>) -> RunResult {
        let mut first = once::run_once(self.spec(seed), Arc::clone(body), self.sim.watchdog);
        for _ in 1..self.sim.repeat {
            if first.outcome.failure.as_ref().is_some_and(|f| f.class == Class::Inconclusive) {
                break;
            }
            let again = once::run_once(self.spec(seed), Arc::clone(body), self.sim.watchdog);
            if let Some(divergence) = compare(&first.outcome, &first.entries, &again.outcome, &again.entries) {
                first.outcome.failure = Some(
                    Failure::new(Class::ReplayDiverged, format!("repeated in this process: {divergence}"))
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
                Err(e) => report::stderr_line(&format!("sim: could not encode a child result: {e}")),
            }
        }
        if let Err(e) = std::fs::write(path, text) {
            report::stderr_line(&format!("sim: could not write SIM_CHILD_OUT {}: {e}", path.display()));
        }
    }

    /// Runs `seeds` in a fresh process of this executable; returns its lines by seed.
    fn run_child(&self, seeds: &[Seed], with_history: bool) -> Result<BTreeMap<Seed, ChildLine>, String> {
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
            .env("SIM_MODE", if self.sim.mode == Mode::Explore { "explore" } else { "replay" })
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
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
    /// all of them) and labels each "replays exactly" or "replays k of n". Inconclusive seeds
    /// are not re-run (a fresh process would hang just as long).
    fn confirm_failures(&self, outcomes: &mut [Outcome], entries: &BTreeMap<Seed, Vec<Entry>>) {
        let confirmable =
            |o: &Outcome| o.failed() && o.failure.as_ref().is_some_and(|f| f.class != Class::Inconclusive);
        let failing: Vec<Seed> = outcomes.iter().filter(|o| confirmable(o)).map(|o| o.seed).collect();
        for outcome in outcomes.iter_mut().filter(|o| o.failed()) {
            let note = (!confirmable(outcome)).then(|| "inconclusive runs are not re-run".to_string());
            outcome.replays = Some(Replays { matched: 0, of: 0, divergence: note });
        }
        if failing.is_empty() {
            return;
        }
        for _ in 0..self.sim.confirm {
            let lines = match self.run_child(&failing, true) {
                Ok(lines) => lines,
                Err(e) => {
                    for outcome in outcomes.iter_mut().filter(|o| confirmable(o)) {
                        if let Some(replays) = outcome.replays.as_mut() {
                            replays.divergence.get_or_insert_with(|| e.clone());
                        }
                    }
                    return;
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
                            Failure::new(Class::ReplayDiverged, format!("self-check process could not run: {e}"))
                                .oracle("self-check"),
                        );
                    }
                    return;
                }
            };
            for outcome in outcomes.iter_mut() {
                let Some(child) = lines.get(&outcome.seed) else { continue };
                let same = child.outcome.history_hash == outcome.history_hash
                    && child.outcome.schedule_hash == outcome.schedule_hash;
                if same || outcome.failure.as_ref().is_some_and(|f| f.class == Class::ReplayDiverged) {
                    continue;
                }
                // Name the first divergent event: run the seed once more here and once in a fresh
                // process, both keeping their histories.
                let mine = once::run_once(self.spec(outcome.seed), Arc::clone(body), self.sim.watchdog);
                let theirs = self.run_child(&[outcome.seed], true).ok().and_then(|mut l| l.remove(&outcome.seed));
                let detail = theirs
                    .and_then(|c| history::diff(&mine.entries, c.history.as_deref().unwrap_or(&[])))
                    .map(|d| d.to_string())
                    .unwrap_or_else(|| describe_hash_difference(outcome, &child.outcome));
                outcome.failure = Some(
                    Failure::new(Class::ReplayDiverged, format!("fresh process {process}: {detail}"))
                        .oracle("self-check"),
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
        for outcome in report.failures().take(usize::from(self.sim.trace_tail > 0)) {
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
