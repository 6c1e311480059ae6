//! What every entry of the regression benchmark shares: its command line, and the summary line
//! the runner (`regressions/runner`) reads.
//!
//! An entry is a binary whose `main` hands its [`Simulation`] and body to [`main`]:
//!
//! ```ignore
//! fn main() {
//!     regression::main(Simulation::new("hyper-3729"), |ctx| scenario(ctx));
//! }
//! ```
//!
//! `entry --seeds N` sweeps seeds `0..N` (default 100) with each failing seed confirmed in three
//! fresh processes, prints sim's usual summary on stderr, and prints one line on stdout:
//! `regression-summary {json}` with the fields [`summary`] lists. `SIM_SEED=<seed> entry` replays
//! one seed, as the replay line says. The exit code is 0 whatever the seeds did: the runner
//! decides what the entry's variant was expected to do.

use std::collections::BTreeMap;
use std::future::Future;

use sim::{Ctx, Failure, Report, Simulation};

/// The line prefix of the summary on stdout.
pub const SUMMARY_PREFIX: &str = "regression-summary ";

/// Seeds swept when `--seeds` is not given.
pub const DEFAULT_SEEDS: u64 = 100;

/// Parses `--seeds N`, runs the sweep of `simulation` over `0..N` with `body`, prints the
/// summary line, and exits (0, or 2 on a bad command line or a configuration error).
pub fn main<F, Fut>(simulation: Simulation, body: F) -> !
where
    F: Fn(Ctx) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Failure>> + 'static,
{
    let seeds = match parse_seeds(std::env::args().skip(1)) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("{e}\nusage: {} [--seeds N]   (default {DEFAULT_SEEDS})", program());
            std::process::exit(2);
        }
    };
    let report = match simulation.seeds(0..seeds).confirm(3).seed_lines(false).try_run(body) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    println!("{SUMMARY_PREFIX}{}", summary(&report));
    std::process::exit(0);
}

fn program() -> String {
    std::env::args().next().unwrap_or_else(|| "entry".to_string())
}

/// `--seeds N` (or `--seeds=N`); nothing else.
fn parse_seeds(mut args: impl Iterator<Item = String>) -> Result<u64, String> {
    let mut seeds = DEFAULT_SEEDS;
    while let Some(arg) = args.next() {
        let value = match arg.strip_prefix("--seeds=") {
            Some(v) => v.to_string(),
            None if arg == "--seeds" => args.next().ok_or("--seeds needs a number")?,
            None => return Err(format!("unknown argument {arg:?}")),
        };
        seeds = value.parse().map_err(|_| format!("--seeds takes a positive number, not {value:?}"))?;
        if seeds == 0 {
            return Err("--seeds takes a positive number, not 0".to_string());
        }
    }
    Ok(seeds)
}

/// The summary of a sweep, as one JSON object:
/// - `seeds`: seeds run; `failing`: seeds that failed;
/// - `first_seed`, `class`, `oracle`, `message`, `replay`: the first failing seed, its failure
///   class, the oracle that judged it, the failure's message and the command that replays it
///   (all `null` when no seed failed);
/// - `oracles`: failing seeds per oracle (`"drain": 3`), the entry's own and sim's built-in ones;
/// - `replayed_exactly`: failing seeds that replayed exactly in all three fresh processes;
/// - `replays`: the first failing seed's confirmation ("replays exactly (3 of 3 fresh processes)");
/// - `wall_ms_per_seed`: the mean wall time of a seed, in milliseconds (confirmations excluded).
pub fn summary(report: &Report) -> serde_json::Value {
    let failing: Vec<_> = report.failures().collect();
    let first = failing.first();
    let failure = first.and_then(|o| o.failure.as_ref());
    let mut oracles: BTreeMap<String, u64> = BTreeMap::new();
    for outcome in &failing {
        let oracle = outcome.failure.as_ref().and_then(|f| f.oracle.as_ref()).map_or("-", |o| o.as_str()).to_string();
        *oracles.entry(oracle).or_default() += 1;
    }
    let replayed_exactly =
        failing.iter().filter(|o| o.replays.as_ref().is_some_and(|r| r.of > 0 && r.matched == r.of)).count();
    let wall: u64 = report.outcomes.iter().map(|o| o.wall_nanos).sum();
    let runs = report.outcomes.len().max(1) as f64;
    serde_json::json!({
        "simulation": report.simulation,
        "seeds": report.outcomes.len(),
        "failing": failing.len(),
        "first_seed": first.map(|o| o.seed.to_string()),
        "class": failure.map(|f| f.class.name()),
        "oracle": failure.and_then(|f| f.oracle.as_ref()).map(|o| o.as_str().to_string()),
        "message": failure.map(|f| f.message.lines().next().unwrap_or_default().to_string()),
        "replay": first.map(|o| o.replay.clone()),
        "oracles": oracles,
        "replayed_exactly": replayed_exactly,
        "replays": first.and_then(|o| o.replays.as_ref()).map(|r| r.to_string()),
        "wall_ms_per_seed": wall as f64 / runs / 1e6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> impl Iterator<Item = String> {
        list.iter().map(|s| s.to_string()).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn seeds_come_from_the_command_line_with_a_default_and_clear_errors() {
        assert_eq!(parse_seeds(args(&[])), Ok(DEFAULT_SEEDS));
        assert_eq!(parse_seeds(args(&["--seeds", "7"])), Ok(7));
        assert_eq!(parse_seeds(args(&["--seeds=9"])), Ok(9));
        assert_eq!(parse_seeds(args(&["--seeds"])), Err("--seeds needs a number".to_string()));
        assert_eq!(parse_seeds(args(&["--seeds", "0"])), Err("--seeds takes a positive number, not 0".to_string()));
        assert!(parse_seeds(args(&["--seeds", "x"])).unwrap_err().contains("\"x\""));
        assert!(parse_seeds(args(&["--fast"])).unwrap_err().contains("unknown argument"));
    }
}
