//! The main job's `minimize` command: a failing seed's replay line in, a smaller replay line
//! that fails with the same class and oracle out, with what was removed and the choices that
//! matter in words, and a shrunk fuzz input of the same failure.
//!
//! ```text
//! cargo run --release -p walkthroughs -- minimize \
//!     'SIM_SEED=11 SIM_ONLY=shoppingcart_non_atomic_idempotency cargo run --release -p walkthroughs -- --seeds 300'
//! ```
//!
//! Two passes (see the fuzzing page of the docs):
//! 1. the coarse pass, [`sim::Simulation::minimize`]: knocks out swarm dimensions, drops faults,
//!    truncates operations, keeping a change only if the seed still fails the same way; its
//!    result is a seed line with `SIM_SWARM` / `SIM_DROP_FAULTS` / `SIM_MAX_OPS`;
//! 2. the byte pass: the seed's tape ([`sim::Simulation::tape`]) shrunk by
//!    [`sim::fuzz::shrink`] under the same predicate, saved as an artifact
//!    (`fuzz/artifacts/<simulation>/`). The tape is taken under the line's own knobs, not the
//!    coarse pass's: a knob changes the run without being a choice byte (a knocked-out swarm
//!    dimension draws nothing, a dropped fault and an operation cap draw what they would have),
//!    so a tape taken under them would replay only with them and could not land in a corpus,
//!    which holds bytes and a root and nothing else.
//!
//! Both lines are then rerun in fresh processes ([`crate::confirm`]). Exit status: 0 when a
//! smaller line was printed and the printed lines replay exactly, 1 when the line does not fail
//! (or what was printed does not replay), 2 on a line that cannot be used.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use sim::fuzz::shrink::{self, Budget};
use sim::fuzz::{Corpus, Input};
use sim::{Ctx, Mode, Outcome, Simulation};

use crate::confirm;
use crate::replay_line::{KNOBS, Line, SeedLine};
use crate::{BoxFuture, Case, all_cases};

/// `minimize`'s arguments.
#[derive(clap::Args, Debug)]
pub struct MinimizeArgs {
    /// A failing seed's replay line as the main job prints it, quoted as one argument:
    /// `SIM_SEED=… SIM_ONLY=… [SIM_SWARM=…] [SIM_DROP_FAULTS=…] [SIM_MAX_OPS=…] [SIM_MODE=…] cargo run …`.
    pub line: String,
    /// At most this many runs for the byte pass (shrinking the seed's tape); 0 skips it.
    #[arg(long, default_value_t = 3000)]
    pub shrink_runs: u32,
    /// At most this many seconds for the byte pass.
    #[arg(long, default_value_t = 120)]
    pub shrink_secs: u64,
    /// Fresh processes each printed line is replayed in.
    #[arg(long, default_value_t = 3)]
    pub replays: u32,
}

/// The variables a line's run reads from the environment; `minimize` sets them from the line.
const LINE_VARS: [&str; 6] = ["SIM_SEED", "SIM_SEEDS", "SIM_ONLY", "SIM_SHARD", "SIM_FUZZ_INPUT", "SIM_JSON"];

/// Runs `minimize`. Must be called before this process starts any thread: it sets the line's
/// knobs as this process's environment, as the line would run.
pub fn run(args: &MinimizeArgs) -> ExitCode {
    let line = match SeedLine::parse(&args.line) {
        Ok(line) => line,
        Err(message) => return usage(&message),
    };
    let cases = all_cases();
    let Some(case) = cases.iter().find(|c| c.simulation == line.only) else {
        let names: Vec<&str> = cases.iter().map(|c| c.simulation).collect();
        return usage(&format!(
            "SIM_ONLY={} names no simulation here; the simulations are: {}",
            line.only,
            names.join(", ")
        ));
    };
    set_line_env(&line);
    let mode =
        if line.knobs.get("SIM_MODE").is_some_and(|m| m.trim() == "explore") { Mode::Explore } else { Mode::Replay };
    let sim = Simulation::new(case.simulation).mode(mode);
    println!("minimize: {} seed {} ({} / {})", case.simulation, line.seed, case.walkthrough, case.name);
    let minimized = match sim.minimize(line.seed, body(case)) {
        Ok(m) => m,
        Err(e @ sim::run::ConfigError::NothingToMinimize { .. }) => {
            eprintln!("walkthroughs minimize: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => return usage(&e.to_string()),
    };
    print_coarse(&minimized);
    let seed_line = smaller_seed_line(&minimized, &line);
    println!("smaller seed line ({} runs, {:.1}s):", minimized.runs, minimized.wall.as_secs_f64());
    println!("  {}", seed_line.render());
    let bytes = if args.shrink_runs == 0 {
        None
    } else {
        byte_pass(
            case,
            &line,
            &minimized,
            Budget { runs: args.shrink_runs, wall: Duration::from_secs(args.shrink_secs) },
        )
    };
    let smaller = !minimized.removed.is_empty() || bytes.as_ref().is_some_and(|b| b.after < b.before);
    let mut replays = true;
    let verdict = confirm::replay(&seed_line, case.simulation, &minimized.minimized, args.replays);
    println!("seed line {verdict}");
    replays &= verdict.exact();
    if let Some(bytes) = &bytes {
        let verdict = confirm::replay(&bytes.line, case.simulation, &bytes.outcome, args.replays);
        println!("input line {verdict}");
        replays &= verdict.exact();
    }
    if !smaller {
        println!("nothing smaller found: the line is as small as these passes make it");
    }
    if smaller && replays { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn usage(message: &str) -> ExitCode {
    eprintln!("walkthroughs minimize: {message}");
    ExitCode::from(2)
}

/// Clears the variables a line sets and sets the line's knobs, so attempts run as the line does.
fn set_line_env(line: &SeedLine) {
    for name in LINE_VARS.iter().chain(KNOBS.iter()) {
        // SAFETY: called from `main` before this process starts any thread (see `run`), so no
        // other thread reads or writes the environment meanwhile.
        unsafe { std::env::remove_var(name) };
    }
    for (name, value) in &line.knobs {
        // SAFETY: as above.
        unsafe { std::env::set_var(name, value) };
    }
}

/// The case's body as the simulation builders take it.
fn body(case: &Case) -> impl Fn(Ctx) -> BoxFuture + Send + Sync + Clone + 'static {
    let run = Arc::clone(&case.run);
    move |ctx| run(ctx)
}

/// Faults left, swarm dimensions above their simplest value, operations started: the sizes the
/// coarse pass shrinks.
fn sizes(o: &Outcome) -> (usize, usize, u64) {
    let drawn = sim::swarm::parse_overrides(&o.swarm).unwrap_or_default();
    let above = drawn.iter().filter(|(k, v)| o.swarm_simplest.get(*k).is_some_and(|s| s != *v)).count();
    (o.faults.iter().filter(|f| !f.dropped).count(), above, o.operations)
}

fn print_coarse(m: &sim::Minimized) {
    let ((f0, s0, o0), (f1, s1, o1)) = (sizes(&m.original), sizes(&m.minimized));
    println!("coarse pass: faults {f0} → {f1}, swarm dimensions above simplest {s0} → {s1}, operations {o0} → {o1}");
    println!("removed ({}):", if m.removed.is_empty() { "nothing" } else { "in the order removed" });
    for item in &m.removed {
        println!("  - {item}");
    }
    println!("choices that matter:");
    // `describe` ends with the replay line of this process's invocation (`… -- minimize …`);
    // the smaller line below is the one to copy.
    for text in m.describe().lines().filter(|l| !l.trim_start().starts_with("replay:")) {
        println!("  {text}");
    }
}

/// The minimized run's line: its seed, the knobs it kept (as the library prints them), the
/// simulation, and the original line's command.
fn smaller_seed_line(m: &sim::Minimized, line: &SeedLine) -> Line {
    let printed = Line::split(m.replay_line()).map(|l| l.env).unwrap_or_default();
    let mut env = vec![("SIM_SEED".to_string(), m.seed.to_string())];
    env.extend(printed.into_iter().filter(|(k, _)| KNOBS.contains(&k.as_str())));
    env.push(("SIM_ONLY".to_string(), line.only.clone()));
    Line { env, command: line.command.clone() }
}

/// The byte pass's result: the shrunk input's line and its in-process outcome.
struct Bytes {
    before: usize,
    after: usize,
    line: Line,
    outcome: Outcome,
}

/// Tapes the seed under the line's knobs, shrinks the tape, saves and prints it.
fn byte_pass(case: &Case, line: &SeedLine, m: &sim::Minimized, budget: Budget) -> Option<Bytes> {
    let sim = line_simulation(case, line);
    let (outcome, tape) = sim.tape(line.seed, body(case));
    let same = |o: &Outcome| {
        o.failed() && o.failure.as_ref().is_some_and(|f| (f.class, &f.oracle) == (m.target_class, &m.target_oracle))
    };
    if !same(&outcome) {
        println!("byte pass skipped: the seed's tape run did not fail the same way ({:?})", outcome.failure);
        return None;
    }
    let shrunk = shrink::shrink(&tape.bytes, budget, |candidate| {
        same(&sim.run_input(&Input::new(candidate.to_vec(), tape.root), body(case)))
    });
    let small = Input::new(shrunk.bytes.clone(), tape.root);
    let outcome = sim.run_input(&small, body(case));
    let saved = match corpus(case.simulation).add_artifact(&small) {
        Ok(saved) => saved,
        Err(e) => {
            println!("byte pass: {e}");
            return None;
        }
    };
    // Relative to the working directory when inside it, as the library prints corpus paths.
    let path = std::path::absolute(&saved.path).unwrap_or(saved.path);
    let cwd = std::env::current_dir().unwrap_or_default();
    let path = path.strip_prefix(&cwd).map(std::path::Path::to_path_buf).unwrap_or(path);
    println!(
        "input: {} → {} bytes in {} runs ({:.1}s){}; saved {}",
        shrunk.original_len,
        shrunk.bytes.len(),
        shrunk.runs,
        shrunk.wall.as_secs_f64(),
        if shrunk.budget_spent { ", budget spent" } else { "" },
        path.display()
    );
    if let Some(f) = &outcome.failure {
        println!("  fails: {f}");
    }
    let mut env = vec![("SIM_SEED".to_string(), tape.root.to_string())];
    env.push(("SIM_FUZZ_INPUT".to_string(), path.display().to_string()));
    env.extend(line.knobs.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.push(("SIM_ONLY".to_string(), case.simulation.to_string()));
    let input_line = Line { env, command: line.command.clone() };
    println!("input line:");
    println!("  {}", input_line.render());
    Some(Bytes { before: shrunk.original_len, after: shrunk.bytes.len(), line: input_line, outcome })
}

/// The simulation as the line runs it (its knobs on the builder, where tapes read them).
fn line_simulation(case: &Case, line: &SeedLine) -> Simulation {
    let mut sim = Simulation::new(case.simulation).confirm(0);
    if let Some(swarm) = line.knobs.get("SIM_SWARM") {
        for (k, v) in sim::swarm::parse_overrides(swarm).unwrap_or_default() {
            sim = sim.swarm(k, v);
        }
    }
    if let Some(ops) = line.knobs.get("SIM_MAX_OPS").and_then(|n| n.trim().parse().ok()) {
        sim = sim.max_operations(ops);
    }
    if let Some(drop) = line.knobs.get("SIM_DROP_FAULTS") {
        sim = sim.drop_faults(drop.split(',').filter_map(|n| n.trim().parse().ok()));
    }
    if line.knobs.get("SIM_MODE").is_some_and(|m| m.trim() == "explore") {
        sim = sim.mode(Mode::Explore);
    }
    sim
}

/// The simulation's corpus: `SIM_CORPUS`, else the package's `fuzz/` (cargo sets
/// `CARGO_MANIFEST_DIR` for `cargo run`), else this source tree's.
pub fn corpus(simulation: &str) -> Corpus {
    let from_env =
        ["SIM_CORPUS", "CARGO_MANIFEST_DIR"].iter().any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    if from_env {
        Corpus::for_simulation(simulation)
    } else {
        Corpus::at(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz"), simulation)
    }
}
