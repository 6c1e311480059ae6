//! JSON lines for the tests, written the way `sim` writes them: a real [`sim::Outcome`]
//! serialized with serde, flattened with `class`, `oracle`, `signature`, `identity`, `mode`,
//! `shard` (as `sim::report::append_json` does), plus older lines without the newer fields.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use sim::report::{Identity, Interposed};
use sim::{Failure, Outcome, Seed};

/// A passing outcome of `simulation` at `seed`, with a history hash derived from the seed.
pub fn outcome(simulation: &str, seed: u64) -> Outcome {
    Outcome {
        simulation: simulation.to_string(),
        seed: Seed(seed),
        failure: None,
        history_hash: Seed(seed).child(simulation).0,
        events: 40,
        schedule_hash: 0x5eed,
        polls: 300,
        fake_nanos: 2_000_000_000,
        wall_nanos: 1_000_000 + seed,
        swarm: "latency=5ms".to_string(),
        swarm_simplest: Default::default(),
        faults: Vec::new(),
        operations: 0,
        interposed: Interposed::default(),
        replay: format!("SIM_SEED={seed} SIM_ONLY={simulation} cargo run --release -p walkthroughs --"),
        replays: None,
        trace: None,
    }
}

/// The same outcome, failing.
pub fn failing(simulation: &str, seed: u64, failure: Failure) -> Outcome {
    let mut o = outcome(simulation, seed);
    o.trace = Some(PathBuf::from(format!("/home/runner/work/app/target/sim/{simulation}/{seed}/trace.log")));
    o.failure = Some(failure);
    o
}

pub fn identity(commit: &str) -> Identity {
    Identity {
        commit: commit.to_string(),
        dirty: false,
        rustc: "rustc 1.91.0".into(),
        target: "x86_64-unknown-linux-gnu".into(),
        profile: "release".into(),
        rustflags: "--cfg tokio_unstable".into(),
        features: vec![],
        test: "walkthroughs".into(),
    }
}

/// A line as the current `sim` writes it, with `shard` when given.
pub fn line(o: &Outcome, shard: Option<&str>) -> String {
    let labels = sim::report::LineLabels { mode: "replay", shard, seed_base: None };
    sim::report::json_line(o, &identity("1a2b3c4d5e6f77889900"), &labels)
}

/// A line as an older `sim` wrote it: the outcome, `class`, `oracle`, `identity`; no
/// `signature`, `mode` or `shard`.
pub fn older_line(o: &Outcome) -> String {
    let mut value = serde_json::to_value(o).expect("an outcome serializes");
    let f = o.failure.as_ref();
    value["class"] = serde_json::to_value(f.map(|f| f.class)).expect("a class serializes");
    value["oracle"] = serde_json::to_value(f.and_then(|f| f.oracle.as_deref())).expect("an oracle serializes");
    value["identity"] = serde_json::to_value(identity("1a2b3c4d5e6f77889900")).expect("an identity serializes");
    value.to_string()
}

/// Writes `lines` (one per line) to `dir/name`, creating directories.
pub fn write(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("a directory");
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).expect("a file is written");
    path
}

/// Merge options over `inputs`, the report in `dir/report`.
pub fn options(dir: &Path, inputs: &[&Path]) -> fleet::MergeOptions {
    fleet::MergeOptions::new(inputs.iter().map(|p| p.to_path_buf()).collect(), dir.join("report"))
}

pub fn idempotency(message: &str) -> Failure {
    Failure::correctness("idempotency", message)
}
