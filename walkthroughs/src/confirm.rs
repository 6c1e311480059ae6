//! Whether a printed replay line replays: runs it `k` times in fresh processes of this executable
//! (its variables as the environment, every other `SIM_*` variable removed, `SIM_CONFIRM=0`,
//! `SIM_JSON` to a temp file) and compares each process's JSON line with the run made in this
//! process: the same history hash, class and oracle is an exact replay, as a sweep's own
//! confirmation judges it (see `sim::run::sweep`).

use std::process::{Command, Stdio};

use crate::replay_line::Line;

/// What `k` fresh processes of a line gave.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// Processes whose run matched (history hash, class, oracle).
    pub matched: u32,
    /// Processes started.
    pub of: u32,
    /// Why the first process that did not match did not, if one did not.
    pub first_mismatch: Option<String>,
}

impl Verdict {
    /// Whether every process matched.
    pub fn exact(&self) -> bool {
        self.matched == self.of && self.of > 0
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.exact() {
            write!(f, "replays exactly ({} of {})", self.matched, self.of)
        } else {
            write!(f, "replays {} of {}", self.matched, self.of)?;
            match &self.first_mismatch {
                Some(why) => write!(f, " ({why})"),
                None => Ok(()),
            }
        }
    }
}

/// What the comparison reads from an outcome: `history_hash`, class and oracle as JSON text.
fn key(outcome: &serde_json::Value) -> (String, String, String) {
    let text = |v: Option<&serde_json::Value>| v.map_or_else(|| "null".to_string(), ToString::to_string);
    let failure = outcome.get("failure");
    (
        text(outcome.get("history_hash")),
        text(failure.and_then(|f| f.get("class"))),
        text(failure.and_then(|f| f.get("oracle"))),
    )
}

/// Runs `line` in `k` fresh processes and compares each with `expected` (the in-process run).
pub fn replay(line: &Line, simulation: &str, expected: &sim::Outcome, k: u32) -> Verdict {
    let want = key(&serde_json::to_value(expected).unwrap_or_default());
    let mut verdict = Verdict { matched: 0, of: k, first_mismatch: None };
    for process in 0..k {
        let got = run_once(line, simulation, process);
        let mismatch = match got {
            Ok(got) if key(&got) == want => None,
            Ok(got) => Some(format!("process {}: got {:?}, this process {:?}", process + 1, key(&got), want)),
            Err(e) => Some(format!("process {}: {e}", process + 1)),
        };
        match mismatch {
            None => verdict.matched += 1,
            Some(why) => {
                verdict.first_mismatch.get_or_insert(why);
            }
        }
    }
    verdict
}

/// One fresh process: its JSON line for `simulation`.
fn run_once(line: &Line, simulation: &str, process: u32) -> Result<serde_json::Value, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let json = std::env::temp_dir().join(format!("walkthroughs-replay-{}-{process}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&json);
    let mut command = Command::new(&exe);
    command.args(line.exe_args());
    for (name, _) in std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v))) {
        if name.starts_with("SIM_") {
            command.env_remove(name);
        }
    }
    command.envs(line.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    command.env("SIM_JSON", &json).env("SIM_CONFIRM", "0").stdin(Stdio::null()).stdout(Stdio::null());
    let output = command.stderr(Stdio::piped()).output().map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let text = std::fs::read_to_string(&json).unwrap_or_default();
    let _ = std::fs::remove_file(&json);
    let found = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v.get("simulation").and_then(|s| s.as_str()) == Some(simulation));
    found.ok_or_else(|| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(2).collect();
        format!("no JSON line for {simulation} (exit {}; last lines: {})", output.status, tail.join(" | "))
    })
}
