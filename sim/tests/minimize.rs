//! `SIM_DROP_FAULTS`, `SIM_MAX_OPS` and [`Simulation::minimize`] on a planted bug: a run fails
//! when the swarm's `bug.enabled` is on and the `poison` fault is installed as an operation runs.
//! Four other faults and four other swarm dimensions are there and do not matter.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sim::fault::{self, Fault, Phase, Target, Undo};
use sim::run::ConfigError;
use sim::workload::{Budget, OpCtx, OpOutcome, Operation, Workload};
use sim::{Class, Ctx, Event, Failure, Outcome, Seed, Simulation};

/// A set of named flags the faults raise; its history entries go to the run.
#[derive(Clone)]
struct Flags {
    set: Arc<Mutex<BTreeSet<&'static str>>>,
    ctx: Ctx,
}

impl Flags {
    fn raised(&self, name: &str) -> bool {
        self.set.lock().expect("flags").contains(name)
    }
}

impl Target for Flags {
    fn event(&self, phase: Phase, label: &str) -> Event {
        match phase {
            Phase::Install => Event::new("flags.at", label.to_string()),
            Phase::Release => Event::new("flags.until", label.to_string()),
        }
    }
    fn installed(&self, label: &str) {
        self.ctx.record("flags.raise", "flags", label);
    }
    fn released(&self, label: &str) {
        self.ctx.record("flags.lower", "flags", label);
    }
}

/// Raises a flag while installed.
struct Raise(&'static str);

impl Fault<Flags> for Raise {
    fn describe(&self) -> String {
        format!("raise {}", self.0)
    }
    fn install(&self, flags: &Flags) -> Undo<Flags> {
        flags.set.lock().expect("flags").insert(self.0);
        let name = self.0;
        Box::new(move |flags: &Flags| {
            flags.set.lock().expect("flags").remove(name);
        })
    }
}

/// The faults in scheduling order: fault 3 is the poison.
const FAULTS: [(&str, u64); 5] = [("noise-1", 1), ("noise-2", 2), ("poison", 5), ("noise-3", 3), ("noise-4", 4)];

struct Model {
    flags: Flags,
    bug: bool,
}

async fn put(op: OpCtx<Model>) -> OpOutcome {
    let (poisoned, bug) = {
        let model = op.model();
        (model.flags.raised("poison"), model.bug)
    };
    if bug && poisoned {
        op.ctx().fail(Failure::correctness("poisoned", format!("put#{} ran with the poison raised", op.id())));
    }
    OpOutcome::Ok("stored".into())
}

/// The planted bug's body; keeps the history's lines in `HISTORIES` under the simulation's name.
async fn body(ctx: Ctx) -> Result<(), Failure> {
    let swarm = ctx.swarm();
    let bug = swarm.flag("bug.enabled", 0.9);
    let _ = swarm.int("noise.count", 1..=9);
    let _ = swarm.flag("noise.flag", 0.9);
    let _ = swarm.duration("noise.delay", Duration::ZERO..=Duration::from_millis(50));
    let _ = swarm.choice("noise.mode", &["plain", "fancy", "odd"]);
    let flags = Flags { set: Arc::default(), ctx: ctx.clone() };
    for (name, at) in FAULTS {
        fault::at(ctx.driver(), &flags, Duration::from_secs(at), Raise(name)).lasting(Duration::from_secs(60));
    }
    let workload = Workload::new(Model { flags, bug }).op(Operation::new("put", 1, put));
    let budget = Budget { ops: 30, window: Duration::from_secs(20), drain: Duration::from_secs(5) };
    workload.run(&ctx, budget).await;
    tokio::time::sleep_until(tokio::time::Instant::now() + Duration::from_secs(70)).await;
    let lines = ctx.history().entries().map(|e| format!("{} {} {}", e.kind, e.identity, e.detail)).collect();
    HISTORIES.lock().expect("histories").insert(ctx.name().to_string(), lines);
    Ok(())
}

static HISTORIES: Mutex<BTreeMap<String, Vec<String>>> = Mutex::new(BTreeMap::new());

fn one(sim: Simulation, seed: u64) -> Outcome {
    let report = sim.seeds(seed..seed + 1).confirm(0).seed_lines(false).trace_tail(0).run(body);
    let _ = report.passed();
    report.outcomes.first().cloned().expect("one seed ran")
}

fn class_oracle(outcome: &Outcome) -> Option<(Class, String)> {
    outcome.failure.as_ref().map(|f| (f.class, f.oracle.as_deref().unwrap_or("").to_string()))
}

/// A seed whose run fails with every noise dimension above its simplest.
fn noisy_failing_seed() -> u64 {
    let report = Simulation::new("minimize-scan").seeds(0..64).confirm(0).seed_lines(false).trace_tail(0).run(body);
    let _ = report.passed();
    let noisy = |o: &Outcome| {
        let drawn = sim::swarm::parse_overrides(&o.swarm).expect("the outcome's swarm parses");
        ["noise.count", "noise.flag", "noise.delay", "noise.mode"]
            .iter()
            .all(|d| drawn.get(*d) != o.swarm_simplest.get(*d))
    };
    let found = report.outcomes.iter().find(|o| o.failed() && noisy(o)).expect("a noisy failing seed in 0..64");
    found.seed.0
}

#[test]
fn fault_numbers_are_stable_and_a_dropped_fault_leaves_no_install() {
    let clean = || Simulation::new("minimize-numbers").swarm("bug.enabled", "false");
    let all = one(clean(), 3);
    let dropped = one(clean().drop_faults([3]), 3);
    assert!(!all.failed() && !dropped.failed(), "bug.enabled=false passes");
    let labels = |o: &Outcome| o.faults.iter().map(|f| (f.number, f.label.clone(), f.at_nanos)).collect::<Vec<_>>();
    let expected: Vec<_> =
        FAULTS.iter().enumerate().map(|(i, (n, at))| (i + 1, format!("raise {n}"), at * 1_000_000_000)).collect();
    assert_eq!(labels(&all), expected, "numbered from 1 in scheduling order");
    assert_eq!(labels(&dropped), expected, "dropping one renumbers none");
    let marks: Vec<bool> = dropped.faults.iter().map(|f| f.dropped).collect();
    assert_eq!(marks, [false, false, true, false, false]);
    assert!(all.faults.iter().all(|f| !f.dropped));
    assert!(dropped.replay.contains("SIM_DROP_FAULTS=3 "), "{}", dropped.replay);

    let history = HISTORIES.lock().expect("histories")["minimize-numbers"].clone();
    assert!(history.iter().any(|l| l == "fault 3 dropped: raise poison"), "{history:#?}");
    assert!(!history.iter().any(|l| l.contains("raise poison") && l.starts_with("flags.")), "{history:#?}");
    let raised = history.iter().filter(|l| l.starts_with("flags.raise ")).count();
    assert_eq!(raised, 4, "the other four still install: {history:#?}");
}

#[test]
fn max_operations_starts_the_earliest_operations_unchanged() {
    let capped = one(Simulation::new("minimize-cap").swarm("bug.enabled", "false").max_operations(4), 5);
    assert_eq!(capped.operations, 4);
    assert!(capped.replay.contains("SIM_MAX_OPS=4 "), "{}", capped.replay);
    let capped_ops = HISTORIES.lock().expect("histories")["minimize-cap"].clone();
    let full = one(Simulation::new("minimize-cap").swarm("bug.enabled", "false"), 5);
    assert_eq!(full.operations, 30);
    let full_ops = HISTORIES.lock().expect("histories")["minimize-cap"].clone();
    let starts = |h: &[String]| h.iter().filter(|l| l.starts_with("op.start ")).cloned().collect::<Vec<_>>();
    assert_eq!(starts(&capped_ops).len(), 4);
    assert_eq!(starts(&capped_ops)[..], starts(&full_ops)[..4], "the first four starts are the uncapped run's");
}

#[test]
fn minimize_keeps_the_failure_and_removes_what_does_not_matter() {
    let seed = noisy_failing_seed();
    let sim = Simulation::new("minimize-bug");
    let m = sim.minimize(Seed(seed), body).expect("the seed fails");
    let target = (Class::Correctness, "poisoned".to_string());
    assert_eq!(class_oracle(&m.original), Some(target.clone()));
    assert_eq!(class_oracle(&m.minimized), Some(target.clone()));
    assert_eq!((m.target_class, m.target_oracle.as_deref()), (Class::Correctness, Some("poisoned")));

    for dim in ["noise.count", "noise.flag", "noise.delay", "noise.mode"] {
        assert_eq!(m.swarm.get(dim), m.minimized.swarm_simplest.get(dim), "{dim} knocked out: {:?}", m.swarm);
    }
    assert!(!m.swarm.contains_key("bug.enabled"), "the bug's flag stays on: {:?}", m.swarm);
    assert_eq!(m.dropped_faults, [1, 2, 4, 5], "only the poison is left");
    let left: Vec<&str> = m.minimized.faults.iter().filter(|f| !f.dropped).map(|f| f.label.as_str()).collect();
    assert_eq!(left, ["raise poison"]);
    let cap = m.max_ops.expect("operations were cut");
    assert!(cap < m.original.operations && cap >= 1, "{cap} of {}", m.original.operations);
    assert_eq!(m.minimized.operations, cap);
    assert!(m.removed.iter().any(|r| r.starts_with("swarm noise.count ") && r.ends_with("→ 1")), "{:?}", m.removed);
    assert!(m.removed.contains(&"fault 1: raise noise-1 at 1.000s".to_string()), "{:?}", m.removed);
    assert!(m.removed.contains(&format!("operations 30 → {cap}")), "{:?}", m.removed);
    let words = m.describe();
    assert!(words.contains("faults left: fault 3: raise poison at 5.000s"), "{words}");
    assert!(words.contains(&format!("operations: {cap}")), "{words}");
    assert!(m.runs > 5, "{} runs", m.runs);

    // The replay line's environment, fed back through the builder, fails the same way, exactly.
    let env: BTreeMap<&str, &str> = m
        .replay_line()
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter(|(k, _)| k.starts_with("SIM_"))
        .collect();
    assert_eq!(env.get("SIM_SEED").copied(), Some(seed.to_string().as_str()));
    let mut again = Simulation::new("minimize-bug");
    for (k, v) in sim::swarm::parse_overrides(env["SIM_SWARM"]).expect("SIM_SWARM parses") {
        again = again.swarm(k, v);
    }
    let drop: Vec<usize> = env["SIM_DROP_FAULTS"].split(',').map(|n| n.parse().expect("a number")).collect();
    assert_eq!(drop, m.dropped_faults);
    again = again.drop_faults(drop).max_operations(env["SIM_MAX_OPS"].parse().expect("a count"));
    let replayed = one(again, seed);
    assert_eq!(class_oracle(&replayed), Some(target));
    assert_eq!(replayed.history_hash, m.minimized.history_hash, "replays exactly");
}

#[test]
fn a_passing_seed_has_nothing_to_minimize() {
    let sim = Simulation::new("minimize-pass").swarm("bug.enabled", "false");
    let err = sim.minimize(Seed(1), body).expect_err("passes");
    assert!(matches!(err, ConfigError::NothingToMinimize { .. }), "{err}");
    assert!(err.to_string().contains("seed 1 does not fail (passed)"), "{err}");
}

/// Run by the cases below in a process of its own, with the variables set.
#[test]
fn probe() {
    if std::env::var_os("KNOBS_PROBE").is_none() {
        return;
    }
    let report = Simulation::new("knobs-probe").swarm("bug.enabled", "false").seeds(2..3).confirm(0).run(body);
    report.assert_passed();
    let outcome = &report.outcomes[0];
    let dropped: Vec<usize> = outcome.faults.iter().filter(|f| f.dropped).map(|f| f.number).collect();
    eprintln!("probe: dropped {dropped:?} operations {} replay {}", outcome.operations, outcome.replay);
}

fn probe_with(vars: &[(&str, &str)]) -> (bool, String) {
    let exe = std::env::current_exe().expect("the test binary");
    let mut command = Command::new(exe);
    command.args(["probe", "--exact", "--nocapture"]).env("KNOBS_PROBE", "1");
    for (k, v) in vars {
        command.env(k, v);
    }
    let output = command.output().expect("runs");
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn the_variables_apply_and_go_into_the_replay_line_and_bad_values_are_errors() {
    let (ok, stderr) = probe_with(&[("SIM_DROP_FAULTS", "2,5"), ("SIM_MAX_OPS", "3")]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("probe: dropped [2, 5] operations 3 replay "), "{stderr}");
    assert!(stderr.contains("SIM_DROP_FAULTS=2,5 SIM_MAX_OPS=3 "), "{stderr}");
    for (var, value, expected) in [
        ("SIM_DROP_FAULTS", "0", "SIM_DROP_FAULTS=\"0\": expected fault numbers such as 2,5"),
        ("SIM_DROP_FAULTS", "2;5", "SIM_DROP_FAULTS=\"2;5\": expected fault numbers such as 2,5"),
        ("SIM_MAX_OPS", "-1", "SIM_MAX_OPS=\"-1\": expected a count"),
    ] {
        let (ok, stderr) = probe_with(&[(var, value)]);
        assert!(!ok, "{var}={value} was accepted:\n{stderr}");
        assert!(stderr.contains(expected), "{var}={value}: no clear error ({expected:?}) in:\n{stderr}");
    }
}
