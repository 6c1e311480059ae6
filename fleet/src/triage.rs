//! Triage of a failing seed in fresh processes: does it replay, and how often does its bug show
//! up on other seeds?
//!
//! The rule is the humus simulation-testing proposal's (4 and 4): run the seed's replay line
//! K times, each in a fresh process, and compare each run's signature and history hash with the
//! original's ("replays exactly (K of K)", or "replays j of K" when some process differed: the
//! failure depends on something outside the seed); then run K fresh seeds derived from it
//! (`Seed::child("fleet/explore/i")`) in explore mode, in one process ("explore: j of K seeds
//! fail with this signature": how common the bug is).
//!
//! A replay line is split like a POSIX shell would ([`shlex`]): leading `VAR=value` words are the
//! environment, the rest the command. `--exec PROGRAM` runs PROGRAM instead of the line's command:
//! it replaces the words up to and including the first `--` (a `cargo run … -- ARGS` or
//! `cargo test … -- FILTER` line keeps ARGS or FILTER: give the built binary), or, without `--`,
//! the whole `cargo …` command, or else the program word alone. Every run starts with no `SIM_*`
//! variable of this process, then the line's environment, `SIM_JSON` set to a file of its own,
//! `SIM_CONFIRM=0` and `SIM_REPEAT_PROCESSES=0` (a triage run confirms nothing itself).

use std::path::Path;
use std::process::Stdio;

use crate::Error;
use crate::input::{Record, parse_line};

/// A replay line as a command to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// `VAR=value` words before the command.
    pub env: Vec<(String, String)>,
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
}

impl Command {
    /// The command as a shell line (env words, program, arguments).
    pub fn to_line(&self) -> String {
        let quote = |w: &str| shlex::try_quote(w).map_or_else(|_| w.to_string(), |q| q.into_owned());
        let env = self.env.iter().map(|(k, v)| format!("{k}={}", quote(v)));
        let words = std::iter::once(quote(&self.program)).chain(self.args.iter().map(|a| quote(a)));
        env.chain(words).collect::<Vec<_>>().join(" ")
    }
}

fn is_env_word(word: &str) -> Option<(String, String)> {
    let (name, value) = word.split_once('=')?;
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    (first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')).then(|| (name.to_string(), value.to_string()))
}

/// Parses a replay line, with `--exec` applied (see the module docs).
///
/// Errors: [`Error::BadLine`] for unbalanced quotes or a line with no command.
pub fn parse(line: &str, exec: Option<&str>) -> Result<Command, Error> {
    let words = shlex::split(line).ok_or_else(|| Error::BadLine(format!("unbalanced quotes in {line:?}")))?;
    let mut words = words.into_iter().peekable();
    let mut env = Vec::new();
    while let Some(pair) = words.peek().and_then(|w| is_env_word(w)) {
        env.push(pair);
        words.next();
    }
    let rest: Vec<String> = words.collect();
    let Some(first) = rest.first() else {
        return Err(Error::BadLine(format!("no command in the replay line {line:?}")));
    };
    let (program, args) = match exec {
        None => (first.clone(), rest[1..].to_vec()),
        Some(exec) => match rest.iter().position(|w| w == "--") {
            Some(dashes) => (exec.to_string(), rest[dashes + 1..].to_vec()),
            None if first == "cargo" => (exec.to_string(), Vec::new()),
            None => (exec.to_string(), rest[1..].to_vec()),
        },
    };
    Ok(Command { env, program, args })
}

/// The failing run to triage.
#[derive(Clone, Debug)]
pub struct Target {
    /// Its simulation.
    pub simulation: String,
    /// Its seed.
    pub seed: u64,
    /// Its signature.
    pub signature: String,
    /// Its history hash.
    pub history_hash: u64,
    /// Its replay line.
    pub replay: String,
}

impl Target {
    /// The target of a failing record (`None` when it passed).
    pub fn of(record: &Record) -> Option<Target> {
        Some(Target {
            simulation: record.outcome.simulation.clone(),
            seed: record.outcome.seed.0,
            signature: record.signature.clone()?,
            history_hash: record.outcome.history_hash,
            replay: record.outcome.replay.clone(),
        })
    }
}

/// What triage found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Triage {
    /// The command run (`--exec` applied).
    pub command: String,
    /// Fresh processes that reproduced the signature and the history hash.
    pub replays_matched: u32,
    /// Fresh processes run.
    pub replays_of: u32,
    /// What differed, one note per process that did not match.
    pub replay_notes: Vec<String>,
    /// The explore-mode seeds run.
    pub explore_seeds: Vec<u64>,
    /// Explore seeds that failed with this signature.
    pub explore_matched: u32,
    /// Explore seeds that ran (reported a line).
    pub explore_ran: u32,
    /// Why the explore run reported nothing, if it did not.
    pub explore_note: Option<String>,
}

impl Triage {
    /// `replays exactly (K of K)` or `replays j of K`.
    pub fn replay_label(&self) -> String {
        if self.replays_matched == self.replays_of {
            format!("replays exactly ({} of {})", self.replays_matched, self.replays_of)
        } else {
            format!("replays {} of {}", self.replays_matched, self.replays_of)
        }
    }

    /// `explore: j of K seeds fail with this signature`.
    pub fn explore_label(&self) -> String {
        format!("explore: {} of {} seeds fail with this signature", self.explore_matched, self.explore_seeds.len())
    }

    /// Both labels: `replays exactly (4 of 4); explore: 1 of 4 seeds fail with this signature`.
    pub fn label(&self) -> String {
        format!("{}; {}", self.replay_label(), self.explore_label())
    }

    /// Whether every fresh process reproduced it.
    pub fn exact(&self) -> bool {
        self.replays_matched == self.replays_of
    }
}

/// The `K` explore seeds derived from `seed`.
pub fn explore_seeds(seed: u64, k: u32) -> Vec<u64> {
    (0..k).map(|i| sim::Seed(seed).child(&format!("fleet/explore/{i}")).0).collect()
}

/// One line a triage run reported.
struct Reported {
    simulation: String,
    seed: u64,
    signature: Option<String>,
    history_hash: u64,
}

/// The fastest run of one `signatures.json` entry ([`crate::merge::Signature`]).
fn of_entry(entry: &serde_json::Value) -> Result<Target, Error> {
    let text = |v: &serde_json::Value, what: &str| {
        v.as_str().map(str::to_string).ok_or_else(|| Error::BadLine(format!("a signatures.json entry without {what}")))
    };
    let signature = text(&entry["signature"], "its signature")?;
    if entry["diverged"] == true {
        return Err(Error::BadLine(format!(
            "{signature:?} is a divergence across shards, not one failure: replay each of its divergences' seeds \
             on two machines instead"
        )));
    }
    let fastest = &entry["fastest"];
    let hash = text(&fastest["history_hash"], "fastest.history_hash")?;
    Ok(Target {
        simulation: text(&entry["simulation"], "its simulation")?,
        seed: fastest["seed"]
            .as_u64()
            .ok_or_else(|| Error::BadLine("a signatures.json entry without fastest.seed".into()))?,
        history_hash: u64::from_str_radix(&hash, 16)
            .map_err(|_| Error::BadLine(format!("fastest.history_hash {hash:?} is not 16 hex digits")))?,
        replay: text(&fastest["replay"], "fastest.replay")?,
        signature,
    })
}

/// Whether `program` can be started: a path that exists as a file, or a name found on `PATH`.
fn startable(program: &str) -> Result<(), Error> {
    let cannot = |reason: &str| Error::CannotStart { program: program.to_string(), reason: reason.to_string() };
    if program.contains('/') {
        return if Path::new(program).is_file() { Ok(()) } else { Err(cannot("no such file")) };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| dir.join(program).is_file()) {
        Ok(())
    } else {
        Err(cannot("not found on PATH"))
    }
}

/// Runs `command` once with `env` on top of its own; returns the lines it wrote to its `SIM_JSON`.
fn run_once(command: &Command, drop: &[&str], env: &[(&str, String)]) -> Result<Vec<Reported>, String> {
    let json = tempfile::Builder::new()
        .prefix("fleet-triage-")
        .suffix(".jsonl")
        .tempfile()
        .map_err(|e| format!("no temporary SIM_JSON file: {e}"))?;
    let mut child = std::process::Command::new(&command.program);
    child.args(&command.args).stdin(Stdio::null());
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(|n| n.starts_with("SIM_")) {
            child.env_remove(name);
        }
    }
    child.envs(command.env.iter().filter(|(k, _)| !drop.contains(&k.as_str())).map(|(k, v)| (k, v)));
    child.envs(env.iter().map(|(k, v)| (k, v)));
    child.env("SIM_JSON", json.path()).env("SIM_CONFIRM", "0").env("SIM_REPEAT_PROCESSES", "0");
    let output = child.output().map_err(|e| format!("could not start {}: {e}", command.program))?;
    let lines = read_reported(json.path());
    if lines.is_empty() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("{} wrote no JSON line ({}; stderr: {last})", command.program, output.status));
    }
    Ok(lines)
}

fn read_reported(path: &Path) -> Vec<Reported> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| parse_line(l).ok())
        .map(|p| {
            let r = p.at(crate::input::Origin { file: 0, line: 0 }, "");
            Reported {
                simulation: r.outcome.simulation,
                seed: r.outcome.seed.0,
                signature: r.signature,
                history_hash: r.outcome.history_hash,
            }
        })
        .collect()
}

/// Triages `target`: `k` fresh-process replays and one process of `k` explore seeds.
///
/// Errors: [`Error::NoRuns`] for `k == 0`; [`Error::BadLine`] when its replay line does not
/// parse; [`Error::CannotStart`] when its program is not there. A process that reports nothing
/// counts as not reproducing (its note says why).
pub fn triage(target: &Target, k: u32, exec: Option<&str>) -> Result<Triage, Error> {
    if k == 0 {
        return Err(Error::NoRuns);
    }
    let command = parse(&target.replay, exec)?;
    startable(&command.program)?;
    let mut triage = Triage {
        command: command.to_line(),
        replays_matched: 0,
        replays_of: k,
        replay_notes: Vec::new(),
        explore_seeds: explore_seeds(target.seed, k),
        explore_matched: 0,
        explore_ran: 0,
        explore_note: None,
    };
    for run in 1..=k {
        let note = match run_once(&command, &[], &[]) {
            Err(why) => Some(why),
            Ok(lines) => match lines.iter().find(|l| l.simulation == target.simulation && l.seed == target.seed) {
                None => Some(format!("no line for {} seed {}", target.simulation, target.seed)),
                Some(l) if l.signature.as_deref() != Some(target.signature.as_str()) => {
                    Some(l.signature.as_ref().map_or_else(|| "passed".to_string(), |s| format!("failed as {s}")))
                }
                Some(l) if l.history_hash != target.history_hash => {
                    Some(format!("history {:016x} instead of {:016x}", l.history_hash, target.history_hash))
                }
                Some(_) => None,
            },
        };
        match note {
            None => triage.replays_matched += 1,
            Some(n) => triage.replay_notes.push(format!("process {run}: {n}")),
        }
    }
    if k > 0 {
        let list = triage.explore_seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        let env = [("SIM_SEEDS", list), ("SIM_MODE", "explore".to_string())];
        match run_once(&command, &["SIM_SEED", "SIM_SEEDS", "SIM_MODE"], &env) {
            Err(why) => triage.explore_note = Some(why),
            Ok(lines) => {
                let ours = lines
                    .iter()
                    .filter(|l| l.simulation == target.simulation && triage.explore_seeds.contains(&l.seed));
                for l in ours {
                    triage.explore_ran += 1;
                    triage.explore_matched += u32::from(l.signature.as_deref() == Some(target.signature.as_str()));
                }
            }
        }
    }
    Ok(triage)
}

/// The failing runs `fleet triage --line` names, one per signature (its fastest): the value
/// itself when it is a JSON object, else the lines of the file it names. Besides `SIM_JSON`
/// lines, a merge's `signatures.json` is taken (its new signatures' fastest runs), and so is one
/// of its entries (`jq -c '.signatures[0]' fleet-report/signatures.json`: its fastest run,
/// whatever its status).
///
/// Errors: [`Error::BadLine`] for a value that is neither, a line that does not parse, a
/// divergence's entry, or no failing line.
pub fn targets(line_or_file: &str) -> Result<Vec<Target>, Error> {
    let text = if line_or_file.trim_start().starts_with('{') {
        line_or_file.to_string()
    } else {
        std::fs::read_to_string(line_or_file)
            .map_err(|e| Error::BadLine(format!("{line_or_file:?} is not a JSON line, nor a file ({e})")))?
    };
    if let Ok(document) = serde_json::from_str::<serde_json::Value>(&text) {
        if let Some(entries) = document.get("signatures").and_then(|v| v.as_array()) {
            let new: Vec<&serde_json::Value> = entries.iter().filter(|e| e["status"] == "new").collect();
            let targets =
                new.iter().filter(|e| e["diverged"] != true).map(|e| of_entry(e)).collect::<Result<Vec<_>, _>>()?;
            if targets.is_empty() {
                return Err(Error::BadLine(format!(
                    "{line_or_file}: no new signature to triage ({} signatures, {} new divergences); pick one entry: \
                     --line \"$(jq -c '.signatures[N]' {line_or_file})\"",
                    entries.len(),
                    new.len()
                )));
            }
            return Ok(targets);
        }
        if document.get("fastest").is_some() {
            return of_entry(&document).map(|t| vec![t]);
        }
    }
    let mut fastest: Vec<(u64, Target)> = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let parsed = parse_line(line).map_err(|e| Error::BadLine(format!("line {}: {e}", n + 1)))?;
        let record = parsed.at(crate::input::Origin { file: 0, line: n + 1 }, "");
        let Some(target) = Target::of(&record) else { continue };
        let wall = record.outcome.wall_nanos;
        match fastest.iter_mut().find(|(_, t)| t.signature == target.signature) {
            Some(slot) if (wall, target.seed) < (slot.0, slot.1.seed) => *slot = (wall, target),
            Some(_) => {}
            None => fastest.push((wall, target)),
        }
    }
    if fastest.is_empty() {
        return Err(Error::BadLine("no failing line (every seed passed)".to_string()));
    }
    Ok(fastest.into_iter().map(|(_, t)| t).collect())
}
