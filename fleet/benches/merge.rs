//! The merge of 10^5 JSON lines, end to end: `cargo bench -p fleet --bench merge`.
//!
//! Writes 100,000 lines as `sim` writes them (`Outcome` flattened with `class`, `oracle`,
//! `signature`, `identity`, `mode`, `shard`, `seed_base`) into 8 shard files in a temporary
//! directory: 1% of the seeds fail, across 50 signatures (10 simulations × 5 message shapes).
//! Then runs [`fleet::merge`] (read, parse, dedup, group, trace lookup, summary, the three
//! output files) several times and prints the median wall time and lines per second.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sim::report::{Identity, Interposed};
use sim::{Failure, Outcome, Seed};

const LINES: u64 = 100_000;
const SHARDS: u64 = 8;
const RUNS: usize = 7;
/// Five message shapes (digits would be normalized away, so words).
const SHAPES: [&str; 5] = ["charged", "acknowledged but lost", "applied", "read back stale", "answered twice"];

fn identity() -> Identity {
    Identity {
        commit: "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b".into(),
        dirty: false,
        rustc: "rustc 1.91.0 (f8297e351 2025-10-28)".into(),
        target: "x86_64-unknown-linux-gnu".into(),
        profile: "release".into(),
        rustflags: "--cfg tokio_unstable".into(),
        features: vec![],
        test: "walkthroughs".into(),
    }
}

fn outcome(seed: u64, failure: Option<Failure>, simulation: &str) -> Outcome {
    let mix = Seed(seed).child("bench").0;
    let trace =
        failure.as_ref().map(|_| PathBuf::from(format!("/runner/work/x/target/sim/{simulation}/{seed}/trace.log")));
    Outcome {
        simulation: simulation.to_string(),
        seed: Seed(seed),
        failure,
        history_hash: mix,
        events: 200 + mix % 800,
        schedule_hash: mix.rotate_left(17),
        polls: 5_000 + mix % 20_000,
        fake_nanos: 30_000_000_000 + mix % 1_000_000_000,
        wall_nanos: 2_000_000 + mix % 50_000_000,
        swarm: format!("latency={}ms,replicas={},loss=0.0{}", mix % 50, 1 + mix % 5, mix % 9),
        swarm_simplest: Default::default(),
        faults: Vec::new(),
        operations: 0,
        interposed: Interposed { getrandom_calls: mix % 40, getrandom_bytes: mix % 1280, clock_reads: mix % 9000 },
        replay: format!(
            "SIM_SEED={seed} SIM_ONLY={simulation} cargo run --release -p walkthroughs -- --base-seed build --seeds 12500"
        ),
        replays: None,
        trace,
    }
}

fn write_inputs(dir: &std::path::Path) {
    let identity = identity();
    let simulations: Vec<String> = (0..10).map(|i| format!("walkthrough_{i}")).collect();
    let mut files: Vec<_> = (0..SHARDS)
        .map(|i| {
            let path = dir.join(format!("shard-{i}")).join("sim.jsonl");
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("a shard dir");
            std::io::BufWriter::new(std::fs::File::create(path).expect("a shard file"))
        })
        .collect();
    for seed in 0..LINES {
        let simulation = &simulations[(seed % 10) as usize];
        let failure = Seed(seed).child("fails").0.is_multiple_of(100).then(|| {
            let shape = SHAPES[(Seed(seed).child("shape").0 % 5) as usize];
            Failure::correctness("idempotency", format!("put#{} {shape} {} times", seed % 97, 2 + seed % 3))
        });
        let o = outcome(seed, failure, simulation);
        let shard = format!("{}/{SHARDS}", seed % SHARDS);
        let labels =
            sim::report::LineLabels { mode: "replay", shard: Some(&shard), seed_base: Some(0x00c0_ffee_00c0_ffee) };
        let line = sim::report::json_line(&o, &identity, &labels);
        let file = &mut files[(seed % SHARDS) as usize];
        file.write_all(line.as_bytes()).expect("a line is written");
        file.write_all(b"\n").expect("a line is written");
    }
    for mut f in files {
        f.flush().expect("flushed");
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let inputs = dir.path().join("artifacts");
    write_inputs(&inputs);
    let bytes: u64 = (0..SHARDS)
        .map(|i| std::fs::metadata(inputs.join(format!("shard-{i}/sim.jsonl"))).expect("written").len())
        .sum();
    let options = fleet::MergeOptions::new(vec![inputs], dir.path().join("report"));
    let mut times: Vec<Duration> = Vec::new();
    let mut signatures = 0;
    for _ in 0..RUNS {
        let started = Instant::now();
        let run = fleet::merge(&options).expect("the merge runs");
        times.push(started.elapsed());
        signatures = run.merged.signatures.len();
        assert_eq!(run.merged.totals.runs as u64, LINES, "every line is one run");
    }
    times.sort();
    let median = times[RUNS / 2];
    println!(
        "fleet merge: {LINES} lines ({:.1} MB, {SHARDS} shard files, {signatures} signatures): median {:.0} ms of {RUNS} runs (min {:.0} ms, max {:.0} ms), {:.0} lines/s",
        bytes as f64 / 1e6,
        median.as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        times[RUNS - 1].as_secs_f64() * 1e3,
        LINES as f64 / median.as_secs_f64()
    );
}
