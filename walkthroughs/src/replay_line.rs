//! Replay lines as the main job prints them: `SIM_SEED=11 SIM_ONLY=<simulation> cargo run
//! --release -p walkthroughs -- --seeds 300`, split into their leading `VAR=value` words and the
//! command that follows (the words are split as a POSIX shell would, by `shlex`).
//!
//! `minimize` reads a line ([`SeedLine::parse`]); both `minimize` and `fuzz` print lines
//! ([`Line::render`]) and rerun them in fresh processes of this executable
//! ([`crate::confirm`]).

use std::collections::BTreeMap;

/// A replay line split into its environment words, in order, and the command after them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// The leading `VAR=value` words, in order.
    pub env: Vec<(String, String)>,
    /// The words after them (`cargo run … -- --seeds 300`, or an executable's path and its
    /// arguments); empty when the line is only variables.
    pub command: Vec<String>,
}

/// The variables `minimize` reads from a line; any other is refused.
pub const MINIMIZE_VARS: [&str; 6] =
    ["SIM_SEED", "SIM_ONLY", "SIM_SWARM", "SIM_DROP_FAULTS", "SIM_MAX_OPS", "SIM_MODE"];

/// The knobs a smaller line may carry, in the order they are printed.
pub const KNOBS: [&str; 4] = ["SIM_SWARM", "SIM_DROP_FAULTS", "SIM_MAX_OPS", "SIM_MODE"];

impl Line {
    /// Splits `text`; errors name what could not be read.
    ///
    /// # Errors
    /// Unbalanced quotes, or no `VAR=value` word at the start.
    pub fn split(text: &str) -> Result<Line, String> {
        let words = shlex::split(text).ok_or_else(|| format!("{text:?}: unbalanced quotes in the replay line"))?;
        let mut env = Vec::new();
        let mut rest = words.into_iter().peekable();
        while let Some((name, value)) = rest.peek().and_then(|w| env_word(w)) {
            env.push((name, value));
            rest.next();
        }
        if env.is_empty() {
            return Err(format!(
                "{text:?}: a replay line starts with its variables, e.g. SIM_SEED=11 SIM_ONLY=shoppingcart_no_drain \
                 cargo run --release -p walkthroughs -- --seeds 300"
            ));
        }
        Ok(Line { env, command: rest.collect() })
    }

    /// The value of `name` (the last one when repeated).
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The arguments that run this line's command as this executable: what follows `--` in a
    /// `cargo run` command, or what follows the executable's path; none for a line of variables.
    pub fn exe_args(&self) -> Vec<String> {
        match self.command.first().map(String::as_str) {
            None => Vec::new(),
            Some("cargo") => self.command.iter().skip_while(|w| *w != "--").skip(1).cloned().collect(),
            Some(_) => self.command[1..].to_vec(),
        }
    }

    /// The line as a shell command, values quoted where a shell needs it.
    pub fn render(&self) -> String {
        self.env
            .iter()
            .map(|(k, v)| format!("{k}={}", quote(v)))
            .chain(self.command.iter().map(|w| quote(w)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `NAME=value` with an upper-case shell name: a variable word.
fn env_word(word: &str) -> Option<(String, String)> {
    let (name, value) = word.split_once('=')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    let shell_name = (first.is_ascii_uppercase() || first == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    shell_name.then(|| (name.to_string(), value.to_string()))
}

fn quote(word: &str) -> String {
    shlex::try_quote(word).map_or_else(|_| word.to_string(), |q| q.into_owned())
}

/// The command the main job's lines end with when a line gives none: this build's profile.
pub fn default_command() -> Vec<String> {
    let mut words = vec!["cargo".to_string(), "run".to_string()];
    if !cfg!(debug_assertions) {
        words.push("--release".to_string());
    }
    words.extend(["-p", "walkthroughs", "--", "--seeds", "300"].map(String::from));
    words
}

/// A seed's replay line as `minimize` takes it: the seed, the simulation and the knobs.
#[derive(Clone, Debug)]
pub struct SeedLine {
    /// `SIM_SEED`.
    pub seed: sim::Seed,
    /// `SIM_ONLY`: the simulation.
    pub only: String,
    /// `SIM_SWARM`, `SIM_DROP_FAULTS`, `SIM_MAX_OPS`, `SIM_MODE` as given (checked by the run).
    pub knobs: BTreeMap<String, String>,
    /// The command after the variables (the main job's default when the line has none).
    pub command: Vec<String>,
}

impl SeedLine {
    /// Reads a line for `minimize`.
    ///
    /// # Errors
    /// The message to print: what is missing or bad, and what a line looks like.
    pub fn parse(text: &str) -> Result<SeedLine, String> {
        let line = Line::split(text)?;
        if let Some((name, _)) = line.env.iter().find(|(k, _)| !MINIMIZE_VARS.contains(&k.as_str())) {
            let why = if name == "SIM_FUZZ_INPUT" {
                " (that line replays a fuzz input, which is already shrunk)".to_string()
            } else {
                String::new()
            };
            return Err(format!("{name} is not a variable minimize reads{why}; it reads {}", MINIMIZE_VARS.join(", ")));
        }
        let seed = line.var("SIM_SEED").ok_or("the line has no SIM_SEED=<seed>: minimize needs the failing seed")?;
        let seed: sim::Seed = seed.parse().map_err(|e| format!("SIM_SEED={seed}: {e}"))?;
        let only = line
            .var("SIM_ONLY")
            .filter(|o| !o.is_empty())
            .ok_or("the line has no SIM_ONLY=<simulation>: minimize needs the simulation the seed failed in")?
            .to_string();
        if let Some(mode) = line.var("SIM_MODE") {
            mode.parse::<sim::Mode>().map_err(|e| format!("SIM_MODE={mode}: {e}"))?;
        }
        if let Some(swarm) = line.var("SIM_SWARM") {
            sim::swarm::parse_overrides(swarm).map_err(|e| format!("SIM_SWARM={swarm}: {e}"))?;
        }
        if let Some(drop) = line.var("SIM_DROP_FAULTS")
            && drop.split(',').any(|n| n.trim().parse::<usize>().ok().is_none_or(|n| n == 0))
        {
            return Err(format!("SIM_DROP_FAULTS={drop}: expected fault numbers from 1, such as 2,5"));
        }
        if let Some(ops) = line.var("SIM_MAX_OPS") {
            ops.trim().parse::<u64>().map_err(|_| format!("SIM_MAX_OPS={ops}: expected a count of operations"))?;
        }
        let knobs = KNOBS.iter().filter_map(|k| line.var(k).map(|v| (k.to_string(), v.to_string()))).collect();
        let command = if line.command.is_empty() { default_command() } else { line.command };
        Ok(SeedLine { seed, only, knobs, command })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_main_job_line_splits_into_variables_and_command() {
        let line = Line::split(
            "SIM_SEED=11 SIM_SWARM='a=1,b=2' SIM_ONLY=x cargo run --release -p walkthroughs -- --seeds 300",
        )
        .expect("a line");
        assert_eq!(line.var("SIM_SWARM"), Some("a=1,b=2"));
        assert_eq!(line.exe_args(), vec!["--seeds", "300"]);
        assert_eq!(Line::split(&line.render()).expect("renders back"), line);
        let exe = Line::split("SIM_SEED=3 SIM_ONLY=x /t/release/walkthroughs --seeds 30").expect("a line");
        assert_eq!(exe.exe_args(), vec!["--seeds", "30"]);
    }

    #[test]
    fn minimize_refuses_lines_without_seed_or_simulation_and_unknown_variables() {
        let err = |t: &str| SeedLine::parse(t).expect_err(t);
        assert!(err("SIM_ONLY=x cargo run").contains("no SIM_SEED"));
        assert!(err("SIM_SEED=1 cargo run").contains("no SIM_ONLY"));
        assert!(err("SIM_SEED=x1 SIM_ONLY=x").contains("SIM_SEED=x1"));
        assert!(err("SIM_SEED=1 SIM_ONLY=x SIM_MAX_OPS=many").contains("SIM_MAX_OPS=many"));
        assert!(err("SIM_SEED=1 SIM_ONLY=x SIM_DROP_FAULTS=0,2").contains("SIM_DROP_FAULTS=0,2"));
        assert!(err("SIM_SEED=1 SIM_ONLY=x SIM_FUZZ_INPUT=f").contains("fuzz input"));
        assert!(err("cargo run").contains("starts with its variables"));
        assert!(err("SIM_SEED='1").contains("unbalanced"));
        let ok = SeedLine::parse("SIM_SEED=0x10 SIM_ONLY=x SIM_MAX_OPS=4").expect("valid");
        assert_eq!((ok.seed, ok.only.as_str()), (sim::Seed(16), "x"));
        assert_eq!(ok.knobs.get("SIM_MAX_OPS").map(String::as_str), Some("4"));
        assert_eq!(ok.command, default_command());
    }
}
