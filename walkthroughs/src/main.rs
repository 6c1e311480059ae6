//! The main job: sweeps every walkthrough, correct and planted variants, and prints what it found.
//!
//! ```text
//! cargo run --release -p walkthroughs -- --seeds 300
//! cargo run --release -p walkthroughs -- --seeds 2000 --measure 20   # seeds needed to find each planted bug
//! ```
//!
//! Exits non-zero if a correct variant fails any seed or a planted bug is not found by its oracle.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use sim::{Ctx, Failure, Oracle, Report, Simulation};
use walkthroughs::{databases, orderstatus, shoppingcart, wallet};

/// Runs one seed of a variant.
type Runner = Arc<dyn Fn(Ctx) -> Pin<Box<dyn Future<Output = Result<(), Failure>>>> + Send + Sync>;

/// One variant of one walkthrough: how the main job runs and judges it.
#[derive(Clone)]
struct Case {
    walkthrough: &'static str,
    name: &'static str,
    simulation: &'static str,
    /// The oracle that must find the planted bug; `None` for a correct variant.
    oracle: Option<Oracle>,
    run: Runner,
}

/// Every walkthrough's variants, correct first in each.
fn all_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for v in shoppingcart::Variant::ALL {
        let run: Runner = Arc::new(move |ctx| Box::pin(shoppingcart::run(ctx, v)));
        cases.push(Case {
            walkthrough: "shoppingcart",
            name: v.name(),
            simulation: v.simulation(),
            oracle: v.oracle(),
            run,
        });
    }
    for v in wallet::Variant::ALL {
        let run: Runner = Arc::new(move |ctx| Box::pin(wallet::run(ctx, v)));
        cases.push(Case { walkthrough: "wallet", name: v.name(), simulation: v.simulation(), oracle: v.oracle(), run });
    }
    for v in databases::Variant::ALL {
        let run: Runner = Arc::new(move |ctx| Box::pin(databases::run(ctx, v)));
        cases.push(Case {
            walkthrough: "databases",
            name: v.name(),
            simulation: v.simulation(),
            oracle: v.oracle(),
            run,
        });
    }
    for v in orderstatus::Variant::ALL {
        let run: Runner = Arc::new(move |ctx| Box::pin(orderstatus::run(ctx, v)));
        cases.push(Case {
            walkthrough: "orderstatus",
            name: v.name(),
            simulation: v.simulation(),
            oracle: v.oracle(),
            run,
        });
    }
    cases
}

/// Sweeps every walkthrough's correct and planted variants over seeds and prints a table of what
/// it found, with the command that replays each finding.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Seeds per variant.
    #[arg(long, default_value_t = 300)]
    seeds: u64,
    /// The first seed (seeds are base..base+seeds).
    #[arg(long, default_value_t = 0)]
    base_seed: u64,
    /// Seeds run in parallel (default: available cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Also measure how many seeds it takes to find each planted bug: this many sweeps from
    /// different base seeds, each stopping at its first finding (at most --seeds seeds).
    #[arg(long)]
    measure: Option<u64>,
}

/// One row of the table.
struct Row {
    case: Case,
    report: Report,
}

impl Row {
    /// Skipped under `SIM_ONLY` (a replay of another variant).
    fn skipped(&self) -> bool {
        self.report.outcomes.is_empty()
    }

    fn ok(&self) -> bool {
        if self.skipped() {
            return true;
        }
        match &self.case.oracle {
            None => self.report.passed(),
            Some(oracle) => self.finding(oracle).is_some(),
        }
    }

    fn finding(&self, oracle: &Oracle) -> Option<&sim::Outcome> {
        self.report.failures().find(|o| o.failure.as_ref().is_some_and(|f| f.is(oracle)))
    }
}

fn sweep(args: &Args, case: &Case, seeds: std::ops::Range<u64>, stop_early: bool) -> Report {
    let mut sim = Simulation::new(case.simulation).seeds(seeds).seed_lines(false).progress(!stop_early).trace_tail(0);
    if let Some(jobs) = args.jobs {
        sim = sim.jobs(jobs);
    }
    if stop_early {
        sim = sim.stop_after_failures(1).jobs(1).confirm(0);
    }
    let run = Arc::clone(&case.run);
    sim.run(move |ctx| run(ctx))
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

fn main() -> ExitCode {
    let args = Args::parse();
    // A replay line names one simulation: a name that matches none would skip every row and pass.
    let only = std::env::var("SIM_ONLY").ok().filter(|o| !o.is_empty());
    if let Some(only) = &only
        && !all_cases().iter().any(|c| c.simulation == only)
    {
        let names: Vec<&str> = all_cases().iter().map(|c| c.simulation).collect();
        eprintln!("walkthroughs: SIM_ONLY={only} names no simulation here; the simulations are: {}", names.join(", "));
        return ExitCode::from(2);
    }
    let seeds = args.base_seed..args.base_seed.saturating_add(args.seeds);
    let started = Instant::now();
    let mut rows = Vec::new();
    for case in all_cases() {
        let report = sweep(&args, &case, seeds.clone(), false);
        rows.push(Row { case, report });
    }
    print_table(&rows);
    print_findings(&rows);
    let replaying = only.is_some() || std::env::var_os("SIM_SEED").is_some() || std::env::var_os("SIM_SEEDS").is_some();
    if args.measure.is_some() && replaying {
        println!();
        println!(
            "--measure skipped: SIM_ONLY/SIM_SEED/SIM_SEEDS choose the seeds (a replay), and measuring sweeps its own"
        );
    } else if let Some(sweeps) = args.measure {
        measure(&args, sweeps);
    }
    print_crash_stats();
    println!("total {:.1}s", started.elapsed().as_secs_f64());
    if rows.iter().all(Row::ok) {
        ExitCode::SUCCESS
    } else {
        eprintln!("walkthroughs: a correct variant failed or a planted bug was not found");
        ExitCode::FAILURE
    }
}

/// One line per variant: seeds, failures, the first failing seed, its class and oracle, time.
fn print_table(rows: &[Row]) {
    println!();
    println!(
        "{:<14} {:<40} {:>6} {:>9} {:>6} {:<46} {:>8} {:>10}  verdict",
        "walkthrough", "variant", "seeds", "failures", "first", "class [oracle]", "seconds", "ms/seed"
    );
    for row in rows {
        let first = row.report.first_failure();
        let class = first.and_then(|o| o.failure.as_ref()).map_or("-".to_string(), |f| {
            format!("{}{}", f.class, f.oracle.as_ref().map(|o| format!(" [{o}]")).unwrap_or_default())
        });
        let ran = row.report.outcomes.len().max(1);
        let per_seed = row.report.outcomes.iter().map(|o| o.wall()).sum::<Duration>() / ran as u32;
        let verdict = match (&row.case.oracle, row.ok()) {
            _ if row.skipped() => "skipped",
            (None, true) => "passed",
            (None, false) => "FAILED",
            (Some(_), true) => "found",
            (Some(_), false) => "NOT FOUND",
        };
        println!(
            "{:<14} {:<40} {:>6} {:>9} {:>6} {:<46} {:>8.1} {:>10.2}  {verdict}",
            row.case.walkthrough,
            row.case.name,
            row.report.outcomes.len(),
            row.report.failures().count(),
            first.map_or("-".to_string(), |o| o.seed.to_string()),
            class,
            row.report.wall.as_secs_f64(),
            per_seed.as_secs_f64() * 1000.0,
        );
    }
    println!();
}

/// Each planted bug's finding (or a correct variant's first failures) with its replay line.
fn print_findings(rows: &[Row]) {
    for row in rows {
        let shown = match &row.case.oracle {
            Some(oracle) => row.finding(oracle).into_iter().collect::<Vec<_>>(),
            None => row.report.failures().take(5).collect(),
        };
        for outcome in shown {
            let failure = outcome.failure.as_ref().map_or(String::new(), |f| f.to_string());
            println!("{} / {} — seed {}: {failure}", row.case.walkthrough, row.case.name, outcome.seed);
            if let Some(replays) = &outcome.replays {
                println!("    {replays}");
            }
            println!("    replay: {}", outcome.replay);
            if let Some(trace) = &outcome.trace {
                println!("    trace:  {}", trace.display());
            }
        }
    }
}

/// `--measure`: how many seeds each planted bug takes to find, over `sweeps` sweeps from
/// different base seeds.
fn measure(args: &Args, sweeps: u64) {
    println!();
    println!(
        "seeds needed to find each planted bug ({sweeps} sweeps from different base seeds, at most {} seeds each):",
        args.seeds
    );
    for case in all_cases().into_iter().filter(|c| c.oracle.is_some()) {
        let mut needed = Vec::new();
        let mut missed = 0;
        let mut walls = Vec::new();
        for k in 0..sweeps {
            let base = 1_000_000 * (k + 1);
            let report = sweep(args, &case, base..base + args.seeds, true);
            walls.extend(report.outcomes.iter().map(|o| o.wall()));
            match report.failures().find(|o| o.failure.as_ref().is_some_and(|f| f.oracle == case.oracle)) {
                Some(found) => needed.push(found.seed.0.saturating_sub(base) + 1),
                None => missed += 1,
            }
        }
        let per_seed = walls.iter().sum::<Duration>() / walls.len().max(1) as u32;
        let (lo, hi) = (needed.iter().min().copied().unwrap_or(0), needed.iter().max().copied().unwrap_or(0));
        println!(
            "  {:<14} {:<40} median {:>5} seeds (min {lo}, max {hi}; not found in {missed} of {sweeps}); {:.2} ms per seed",
            case.walkthrough,
            case.name,
            median(needed),
            per_seed.as_secs_f64() * 1000.0
        );
    }
}

/// What crashes did to tasks and sockets across the whole sweep.
fn print_crash_stats() {
    let stats = &shoppingcart::CRASH_STATS;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    println!();
    println!(
        "crashed nodes: {} incarnations crashed or killed, {} of their tasks aborted at the crash; tasks of ended incarnations polled afterwards: {}; network operations refused from ended incarnations: {}",
        load(&stats.crashes),
        load(&stats.aborted_tasks),
        load(&stats.zombie_polls),
        load(&stats.stale_operations)
    );
}
