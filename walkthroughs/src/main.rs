//! The main job: sweeps every walkthrough, correct and planted variants, and prints what it found.
//!
//! ```text
//! cargo run --release -p walkthroughs -- --seeds 300
//! cargo run --release -p walkthroughs -- --seeds 2000 --measure 20   # seeds needed to find each planted bug
//! SIM_SHARD=3/8 SIM_JSON=shard-3.jsonl cargo run --release -p walkthroughs -- \
//!     --base-seed build --budget 10m --variants correct --canary orderstatus_late_commit_churn
//! cargo run --release -p walkthroughs -- minimize '<replay line>'   # a smaller line (minimize_cmd.rs)
//! cargo run --release -p walkthroughs -- fuzz --budget 30s          # a fuzz campaign per variant (fuzz_cmd.rs)
//! ```
//!
//! Exits non-zero if a correct variant fails any seed or a planted bug is not found by its oracle
//! (under `SIM_SHARD` a planted bug missed by this shard is printed but left to the merge of all
//! shards to judge: `fleet merge --canary`); exits 2 for bad usage, including a `SIM_*` value
//! the sweeps cannot use (one line, before anything runs). Where the seeds come from, and how
//! `SIM_SEED`/`SIM_SEEDS` win over the arguments, is `seed_plan.rs`.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use sim::{Ctx, Failure, Mode, Oracle, Report, Simulation};
use walkthroughs::{databases, export, orderstatus, shoppingcart, wallet};

mod confirm;
mod fuzz_cmd;
mod minimize_cmd;
mod replay_line;
mod seed_plan;

use seed_plan::{Base, Plan, parse_base};

/// One run of a variant's body.
type BoxFuture = Pin<Box<dyn Future<Output = Result<(), Failure>>>>;

/// Runs one seed of a variant.
type Runner = Arc<dyn Fn(Ctx) -> BoxFuture + Send + Sync>;

/// One variant of one walkthrough: how the main job runs and judges it.
#[derive(Clone)]
struct Case {
    walkthrough: &'static str,
    name: &'static str,
    simulation: &'static str,
    /// The oracle that must find the planted bug; `None` for a correct variant.
    oracle: Option<Oracle>,
    /// The mode its seeds run in (`SIM_MODE` overrides): explore for the walkthrough whose bugs
    /// need another order of one node's tasks.
    mode: Mode,
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
            mode: Mode::Replay,
            run,
        });
    }
    for v in wallet::Variant::ALL {
        let run: Runner = Arc::new(move |ctx| Box::pin(wallet::run(ctx, v)));
        cases.push(Case {
            walkthrough: "wallet",
            name: v.name(),
            simulation: v.simulation(),
            oracle: v.oracle(),
            mode: Mode::Replay,
            run,
        });
    }
    for v in databases::Variant::ALL {
        let run: Runner = Arc::new(move |ctx| Box::pin(databases::run(ctx, v)));
        cases.push(Case {
            walkthrough: "databases",
            name: v.name(),
            simulation: v.simulation(),
            oracle: v.oracle(),
            mode: Mode::Replay,
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
            mode: Mode::Replay,
            run,
        });
    }
    for v in export::Variant::ALL {
        let run: Runner = Arc::new(move |ctx| Box::pin(export::run(ctx, v)));
        cases.push(Case {
            walkthrough: "export",
            name: v.name(),
            simulation: v.simulation(),
            oracle: v.oracle(),
            mode: Mode::Explore,
            run,
        });
    }
    cases
}

/// The variants `--variants` and `--canary` select, in table order.
fn selected_cases(args: &Args) -> Result<Vec<Case>, String> {
    let all = all_cases();
    for canary in &args.canary {
        if !all.iter().any(|c| c.oracle.is_some() && c.simulation == *canary) {
            let planted: Vec<&str> = all.iter().filter(|c| c.oracle.is_some()).map(|c| c.simulation).collect();
            return Err(format!("--canary {canary} names no planted variant; they are: {}", planted.join(", ")));
        }
    }
    Ok(all
        .into_iter()
        .filter(|c| {
            args.variants == Variants::All || c.oracle.is_none() || args.canary.iter().any(|n| n == c.simulation)
        })
        .collect())
}

/// Sweeps every walkthrough's correct and planted variants over seeds and prints a table of what
/// it found, with the command that replays each finding.
#[derive(Parser, Debug)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Args {
    /// Instead of the sweep: minimize a replay line, or run fuzz campaigns.
    #[command(subcommand)]
    command: Option<Command>,
    /// Seeds per variant (per round, with --budget); at least 1.
    #[arg(long, default_value_t = 300, value_parser = seed_plan::parse_count)]
    seeds: u64,
    /// The first seed (seeds are base..base+seeds): a number, or `build` for the seed base this
    /// build derives from the commit, CI event, CI job and SIM_SEED_SALT (printed).
    #[arg(long, default_value = "0", value_parser = parse_base)]
    base_seed: Base,
    /// Keep running rounds of --seeds seeds per variant (round r from base + r·seeds) until this
    /// much wall time is spent, e.g. 10m or 90s; the round in progress finishes its variant.
    #[arg(long, value_parser = parse_budget)]
    budget: Option<Duration>,
    /// With --budget: at most this many rounds (at least 1), even if budget is left.
    #[arg(long, requires = "budget", value_parser = seed_plan::parse_count)]
    rounds: Option<u64>,
    /// Which variants run: all, or only the correct ones (fresh-seed fleets hunt real bugs).
    #[arg(long, value_enum, default_value_t = Variants::All)]
    variants: Variants,
    /// A planted variant that runs even with --variants correct (a fleet's canary), by its
    /// simulation name; repeatable.
    #[arg(long)]
    canary: Vec<String>,
    /// Seeds run in parallel (default: available cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Also measure how many seeds it takes to find each planted bug: this many sweeps from
    /// different base seeds, each stopping at its first finding (at most --seeds seeds).
    #[arg(long)]
    measure: Option<u64>,
}

/// The main job's commands besides the sweep.
#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Makes a failing seed's replay line smaller (same class and oracle) and prints what it
    /// removed, the choices that matter, a smaller seed line and a shrunk fuzz input's line.
    Minimize(minimize_cmd::MinimizeArgs),
    /// Runs a fuzz campaign per selected variant for a budget each.
    Fuzz(fuzz_cmd::FuzzArgs),
}

fn parse_budget(text: &str) -> Result<Duration, String> {
    sim::swarm::parse_duration(text)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{text:?}: expected a positive duration such as 10m, 90s or 1h"))
}

/// `--variants`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Variants {
    All,
    Correct,
}

/// One row of the table: a variant and its sweeps (one per round).
struct Row {
    case: Case,
    /// Each round's report, holding its failing outcomes only ([`Row::add`]).
    reports: Vec<Report>,
    /// Seeds run, over every round.
    ran: usize,
    /// The seeds' wall time, summed.
    seed_wall: Duration,
}

impl Row {
    fn new(case: Case) -> Row {
        Row { case, reports: Vec::new(), ran: 0, seed_wall: Duration::ZERO }
    }

    /// Adds a round: its seeds are counted and timed, and only its failing outcomes are kept (a
    /// budget run holds hundreds of rounds; a passing seed's outcome is never printed).
    fn add(&mut self, mut report: Report) {
        self.ran += report.outcomes.len();
        self.seed_wall += report.outcomes.iter().map(sim::Outcome::wall).sum::<Duration>();
        report.outcomes.retain(sim::Outcome::failed);
        self.reports.push(report);
    }

    fn failures(&self) -> impl Iterator<Item = &sim::Outcome> {
        self.reports.iter().flat_map(|r| r.failures())
    }

    /// Skipped under `SIM_ONLY` (a replay of another variant).
    fn skipped(&self) -> bool {
        self.ran == 0
    }

    /// Whether the row is as it should be: a correct variant passed every seed, a planted bug was
    /// found (`sharded`: or this shard missed it, which the merge of all shards judges).
    fn ok(&self, sharded: bool) -> bool {
        // Every report is read (a failing report dropped unread panics).
        let verdicts: Vec<bool> = self.reports.iter().map(Report::passed).collect();
        let passed = verdicts.iter().all(|p| *p);
        if self.skipped() {
            return true;
        }
        match &self.case.oracle {
            None => passed,
            Some(oracle) => sharded || self.finding(oracle).is_some(),
        }
    }

    fn finding(&self, oracle: &Oracle) -> Option<&sim::Outcome> {
        self.failures().find(|o| o.failure.as_ref().is_some_and(|f| f.is(oracle)))
    }
}

/// One sweep of a variant; `seed_base` is the build base its seeds were drawn from. A
/// configuration error (a `SIM_*` value the sweep cannot use) is one line naming the simulation.
fn sweep(
    args: &Args,
    case: &Case,
    seeds: std::ops::Range<u64>,
    seed_base: Option<u64>,
    stop_early: bool,
) -> Result<Report, String> {
    let mut sim = Simulation::new(case.simulation)
        .mode(case.mode)
        .seeds(seeds)
        .seed_lines(false)
        .progress(!stop_early)
        .trace_tail(0);
    if let Some(base) = seed_base {
        sim = sim.seed_base(base);
    }
    if let Some(jobs) = args.jobs {
        sim = sim.jobs(jobs);
    }
    if stop_early {
        sim = sim.stop_after_failures(1).jobs(1).confirm(0);
    }
    let run = Arc::clone(&case.run);
    sim.try_run(move |ctx| run(ctx)).map_err(|e| format!("simulation {}: {e}", case.simulation))
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

fn main() -> ExitCode {
    let args = Args::parse();
    match &args.command {
        // Before any thread starts: `minimize` sets the line's knobs as the environment.
        Some(Command::Minimize(minimize)) => return minimize_cmd::run(minimize),
        Some(Command::Fuzz(fuzz)) => return fuzz_cmd::run(fuzz),
        None => {}
    }
    // A replay line names one simulation: a name that matches none would skip every row and pass.
    let only = std::env::var("SIM_ONLY").ok().filter(|o| !o.is_empty());
    if let Some(only) = &only
        && !all_cases().iter().any(|c| c.simulation == only)
    {
        let names: Vec<&str> = all_cases().iter().map(|c| c.simulation).collect();
        eprintln!("walkthroughs: SIM_ONLY={only} names no simulation here; the simulations are: {}", names.join(", "));
        return ExitCode::from(2);
    }
    let cases = match selected_cases(&args) {
        Ok(cases) => cases,
        Err(message) => {
            eprintln!("walkthroughs: {message}");
            return ExitCode::from(2);
        }
    };
    let plan = match Plan::new(&args.base_seed) {
        Ok(plan) => plan,
        Err(message) => {
            eprintln!("walkthroughs: {message}");
            return ExitCode::from(2);
        }
    };
    for line in plan.header() {
        println!("walkthroughs: {line}");
    }
    let base = plan.base();
    let sharded = plan.shard.is_some();
    let seeds_given = plan.seeds_from_env();
    let replaying = only.is_some() || seeds_given;
    let started = Instant::now();
    let mut rows: Vec<Row> = cases.into_iter().map(Row::new).collect();
    let mut round = 0u64;
    loop {
        let start = base.wrapping_add(round.wrapping_mul(args.seeds));
        // A shard given fewer positions than a round holds runs nothing: no point in more rounds.
        let mut ran_any = false;
        for row in &mut rows {
            // Each round on a thread of its own: a sweep's fresh processes (confirmations) run
            // one round and answer for the first sweep of its name on their thread, so every
            // round must be the first of its name on its thread too.
            let range = start..start.saturating_add(args.seeds);
            let report = std::thread::scope(|s| {
                let round = s.spawn(|| sweep(&args, &row.case, range, plan.line_seed_base(), false));
                round.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            });
            match report {
                Ok(report) => {
                    ran_any |= !report.outcomes.is_empty();
                    row.add(report);
                }
                Err(message) => {
                    eprintln!("walkthroughs: {message}");
                    return ExitCode::from(2);
                }
            }
        }
        round += 1;
        if !ran_any {
            break;
        }
        // A replay runs its seed once; a budget runs rounds until it is spent.
        match args.budget {
            Some(budget) if !seeds_given && started.elapsed() < budget && args.rounds.is_none_or(|r| round < r) => {
                continue;
            }
            _ => break,
        }
    }
    if let Some(budget) = args.budget.filter(|_| !seeds_given) {
        let seeds: usize = rows.iter().map(|r| r.ran).sum();
        println!(
            "walkthroughs: budget {budget:?}: {round} round{} of {} seeds per variant, {seeds} seeds run in {:.1}s",
            if round == 1 { "" } else { "s" },
            args.seeds,
            started.elapsed().as_secs_f64()
        );
    }
    print_table(&rows, sharded);
    print_findings(&rows);
    if args.measure.is_some() && replaying {
        println!();
        println!(
            "--measure skipped: SIM_ONLY/SIM_SEED/SIM_SEEDS choose the seeds (a replay), and measuring sweeps its own"
        );
    } else if let Some(sweeps) = args.measure
        && let Err(message) = measure(&args, sweeps)
    {
        eprintln!("walkthroughs: {message}");
        return ExitCode::from(2);
    }
    print_crash_stats();
    println!("total {:.1}s", started.elapsed().as_secs_f64());
    if rows.iter().all(|row| row.ok(sharded)) {
        ExitCode::SUCCESS
    } else {
        eprintln!("walkthroughs: a correct variant failed or a planted bug was not found");
        ExitCode::FAILURE
    }
}

/// One line per variant: seeds, failures, the first failing seed, its class and oracle, time.
fn print_table(rows: &[Row], sharded: bool) {
    let classes: Vec<String> = rows
        .iter()
        .map(|row| {
            row.failures().next().and_then(|o| o.failure.as_ref()).map_or("-".to_string(), |f| {
                format!("{}{}", f.class, f.oracle.as_ref().map(|o| format!(" [{o}]")).unwrap_or_default())
            })
        })
        .collect();
    // Columns as wide as their longest cell, so long variant names keep the table aligned.
    let name_w = rows.iter().map(|r| r.case.name.chars().count()).max().unwrap_or(0).max(7);
    let class_w = classes.iter().map(|c| c.chars().count()).max().unwrap_or(0).max(14);
    // Seeds from `--base-seed build` run to 20 digits.
    let first_w =
        rows.iter().filter_map(|r| r.failures().next().map(|o| o.seed.to_string().len())).max().unwrap_or(0).max(5);
    println!();
    println!(
        "{:<14} {:<name_w$} {:>6} {:>9} {:>first_w$} {:<class_w$} {:>8} {:>10}  verdict",
        "walkthrough", "variant", "seeds", "failures", "first", "class [oracle]", "seconds", "ms/seed"
    );
    for (row, class) in rows.iter().zip(classes) {
        let first = row.failures().next();
        let ran = row.ran;
        let per_seed = row.seed_wall / ran.max(1) as u32;
        let verdict = match (&row.case.oracle, row.ok(false)) {
            _ if row.skipped() => "skipped",
            (None, true) => "passed",
            (None, false) => "FAILED",
            (Some(_), true) => "found",
            (Some(_), false) if sharded => "not found in this shard",
            (Some(_), false) => "NOT FOUND",
        };
        let wall: Duration = row.reports.iter().map(|r| r.wall).sum();
        println!(
            "{:<14} {:<name_w$} {:>6} {:>9} {:>first_w$} {:<class_w$} {:>8.1} {:>10.2}  {verdict}",
            row.case.walkthrough,
            row.case.name,
            ran,
            row.failures().count(),
            first.map_or("-".to_string(), |o| o.seed.to_string()),
            class,
            wall.as_secs_f64(),
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
            None => row.failures().take(5).collect(),
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
fn measure(args: &Args, sweeps: u64) -> Result<(), String> {
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
            let report = sweep(args, &case, base..base + args.seeds, None, true)?;
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
    Ok(())
}

/// What crashes did to tasks and sockets across the whole sweep.
fn print_crash_stats() {
    let stats = &shoppingcart::CRASH_STATS;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    println!();
    println!(
        "crashed nodes (the shopping cart's sweeps): {} incarnations crashed or killed, {} of their tasks aborted at the crash; tasks of ended incarnations polled afterwards: {}; network operations refused from ended incarnations: {}",
        load(&stats.crashes),
        load(&stats.aborted_tasks),
        load(&stats.zombie_polls),
        load(&stats.stale_operations)
    );
}
