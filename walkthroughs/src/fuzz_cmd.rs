//! The main job's `fuzz` command: a fuzzing campaign ([`sim::fuzz::campaign`]) per selected
//! variant, seeded from its corpus (`fuzz/corpus/<simulation>/`), each new failure shrunk, saved
//! under `fuzz/artifacts/<simulation>/` and confirmed in fresh processes.
//!
//! ```text
//! cargo run --release -p walkthroughs -- fuzz --budget 30s --variants correct
//! cargo run --release -p walkthroughs -- fuzz --budget 10s --only shoppingcart_no_drain
//! ```
//!
//! Prints per variant: runs, runs per second, and each failure (class [oracle]) with the line
//! that replays it. Exit status 1 when a correct variant failed, 2 on bad usage; a planted bug
//! the budget did not find is printed, not an error (the sweep and the corpus gate pin those).

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sim::Simulation;
use sim::fuzz::campaign::Options;
use sim::fuzz::shrink::Budget;

use crate::replay_line::{Line, default_command};
use crate::{Case, Variants, all_cases, parse_budget};

/// `fuzz`'s arguments.
#[derive(clap::Args, Debug)]
pub struct FuzzArgs {
    /// Wall time per variant for proposing inputs, e.g. 30s or 5m (shrinking comes after).
    #[arg(long, value_parser = parse_budget)]
    pub budget: Duration,
    /// Only this simulation (by name); repeatable.
    #[arg(long)]
    pub only: Vec<String>,
    /// Which variants: all, or only the correct ones.
    #[arg(long, value_enum, default_value_t = Variants::All)]
    pub variants: Variants,
    /// The engine's seed (`SIM_FUZZ_SEED`).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Tapes of seeds 0..N seed each campaign's queue (`SIM_FUZZ_TAPES`).
    #[arg(long, default_value_t = 8)]
    pub tapes: u64,
    /// At most this many runs shrinking each failure.
    #[arg(long, default_value_t = 3000)]
    pub shrink_runs: u32,
}

/// Runs `fuzz`.
pub fn run(args: &FuzzArgs) -> ExitCode {
    let all = all_cases();
    if let Some(bad) = args.only.iter().find(|o| !all.iter().any(|c| c.simulation == o.as_str())) {
        let names: Vec<&str> = all.iter().map(|c| c.simulation).collect();
        eprintln!(
            "walkthroughs fuzz: --only {bad} names no simulation here; the simulations are: {}",
            names.join(", ")
        );
        return ExitCode::from(2);
    }
    let cases: Vec<&Case> = all
        .iter()
        .filter(|c| args.only.is_empty() || args.only.iter().any(|o| o == c.simulation))
        .filter(|c| args.variants == Variants::All || c.oracle.is_none() || !args.only.is_empty())
        .collect();
    let options = Options {
        budget: args.budget,
        runs: None,
        seed: args.seed,
        tapes: args.tapes,
        shrink: Budget { runs: args.shrink_runs, wall: Duration::from_secs(120) },
    };
    let mut correct_failed = false;
    for case in cases {
        // Each campaign on a thread of its own, as the sweeps run (fresh processes answer for
        // the first sweep of its name on their thread).
        let result = std::thread::scope(|s| {
            let campaign = s.spawn(|| campaign(case, &options));
            campaign.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        match result {
            Ok(failed) => correct_failed |= failed && case.oracle.is_none(),
            Err(message) => {
                eprintln!("walkthroughs fuzz: {}: {message}", case.simulation);
                return ExitCode::from(2);
            }
        }
    }
    if correct_failed {
        eprintln!("walkthroughs fuzz: a correct variant failed");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// One campaign; whether it found a failure.
fn campaign(case: &Case, options: &Options) -> Result<bool, String> {
    let corpus = crate::minimize_cmd::corpus(case.simulation);
    // The campaign's runs: body calls made before the budget ends (tapes included; shrinking
    // and confirming come after), read by a thread of its own when the budget's wall time is
    // up (inside a run, `Instant::now` is the simulation's clock, not the wall's).
    let calls = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&calls);
    let run = Arc::clone(&case.run);
    let body = move |ctx| {
        counter.fetch_add(1, Ordering::Relaxed);
        run(ctx)
    };
    let watched = Arc::clone(&calls);
    let budget = options.budget;
    let (done, ended) = std::sync::mpsc::channel::<()>();
    // Reads the count when the budget is up, or when the campaign returns first (a fresh
    // process replaying one input under SIM_FUZZ_INPUT runs no campaign).
    let watcher = std::thread::spawn(move || {
        let _ = ended.recv_timeout(budget);
        watched.load(Ordering::Relaxed)
    });
    let report = Simulation::new(case.simulation)
        .mode(case.mode)
        .fuzz_with(&corpus, Some(options), body)
        .map_err(|e| e.to_string());
    let _ = done.send(());
    let report = report?;
    let _read = report.passed();
    let runs = watcher.join().unwrap_or_else(|_| calls.load(Ordering::Relaxed));
    let failures: Vec<&sim::Outcome> = report.failures().collect();
    let found = failures
        .iter()
        .filter_map(|o| o.failure.as_ref())
        .map(|f| format!("{}{}", f.class, f.oracle.as_ref().map(|o| format!(" [{o}]")).unwrap_or_default()))
        .collect::<Vec<_>>();
    println!(
        "{:<14} {:<40} {:>8} runs {:>8.0} runs/s  {} failure{}{}{}",
        case.walkthrough,
        case.name,
        runs,
        runs as f64 / options.budget.as_secs_f64(),
        failures.len(),
        if failures.len() == 1 { "" } else { "s" },
        if found.is_empty() { String::new() } else { format!(": {}", found.join(", ")) },
        match (&case.oracle, failures.is_empty()) {
            (Some(_), true) => " (planted bug not found in this budget)",
            _ => "",
        }
    );
    for outcome in &failures {
        if let Some(replays) = &outcome.replays {
            println!("    {replays}");
        }
        println!("    replay: {}", main_job_line(outcome));
    }
    Ok(!failures.is_empty())
}

/// A failure's line with the main job's command (the sweep's own line reruns `fuzz …`, which
/// under `SIM_FUZZ_INPUT` also replays, but is not the line to copy).
fn main_job_line(outcome: &sim::Outcome) -> String {
    match Line::split(&outcome.replay) {
        Ok(line) => Line { env: line.env, command: default_command() }.render(),
        Err(_) => outcome.replay.clone(),
    }
}
