//! The main job's binary as a user drives it: replay lines, `SIM_ONLY` typos, bad `SIM_*` values
//! and arguments, and `SIM_SEEDS` given with `--seeds`/`--budget`.

use std::process::Command;

fn main_job(env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_walkthroughs"));
    cmd.args(args).env_remove("SIM_SEED").env_remove("SIM_SEEDS").env_remove("SIM_ONLY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the walkthroughs binary runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

#[test]
fn a_sim_only_naming_no_simulation_is_refused_with_the_names() {
    let (code, text) = main_job(&[("SIM_ONLY", "shopingcart")], &["--seeds", "3"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("SIM_ONLY=shopingcart names no simulation here"), "{text}");
    assert!(text.contains("shoppingcart_non_atomic_idempotency"), "the names are listed: {text}");
}

#[test]
fn a_replay_line_copied_from_a_measuring_run_replays_and_skips_the_measurement() {
    let (code, text) = main_job(
        &[("SIM_SEED", "3"), ("SIM_ONLY", "wallet_cancel_before_goaway"), ("SIM_CONFIRM", "0")],
        &["--seeds", "300", "--measure", "2"],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("seed 3: correctness [goaway-first]"), "{text}");
    assert!(text.contains("--measure skipped"), "{text}");
    assert!(!text.contains("median"), "no measurement from a replay: {text}");
}

#[test]
fn bad_seed_and_shard_values_are_one_line_and_exit_2_not_a_panic() {
    let bad = [
        ("SIM_SHARD", "8/8"),
        ("SIM_SHARD", "0/0"),
        ("SIM_SHARD", "a/b"),
        ("SIM_SHARD", "1/1"),
        ("SIM_SHARD", "3"),
        ("SIM_SHARD", "-1/8"),
        ("SIM_SEEDS", "build:0"),
        ("SIM_SEEDS", "build:x"),
        ("SIM_SEED", "x"),
    ];
    for (var, value) in bad {
        let (code, text) = main_job(&[(var, value), ("SIM_ONLY", "wallet")], &["--seeds", "2"]);
        assert_eq!(code, Some(2), "{var}={value}: {text}");
        assert!(!text.contains("panicked"), "{var}={value}: {text}");
        assert!(
            text.starts_with(&format!("walkthroughs: {var}=")) || text.contains(&format!("({var}={value})")),
            "{text}"
        );
        assert_eq!(text.trim().lines().count(), 1, "one line: {text}");
    }
    // A value only a sweep checks (here SIM_SWARM) is one line too, naming the simulation.
    let (code, text) = main_job(&[("SIM_SWARM", "nope"), ("SIM_ONLY", "wallet")], &["--seeds", "1"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(!text.contains("panicked") && text.contains("walkthroughs: simulation shoppingcart: SIM_SWARM"), "{text}");
}

#[test]
fn zero_seeds_or_rounds_are_refused_naming_the_argument() {
    let (code, text) = main_job(&[], &["--seeds", "0"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("'--seeds <SEEDS>': 0 runs nothing"), "{text}");
    assert!(!text.contains("SIM_SEEDS") && !text.contains("panicked"), "{text}");
    let (code, text) = main_job(&[], &["--budget", "1s", "--rounds", "0"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("'--rounds <ROUNDS>': 0 runs nothing"), "{text}");
}

#[test]
fn sim_seeds_wins_over_seeds_and_budget_and_the_header_says_so() {
    let file = std::env::temp_dir().join(format!("walkthroughs-sim-seeds-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let (code, text) = main_job(
        &[
            ("SIM_SEEDS", "0..3"),
            ("SIM_ONLY", "wallet"),
            ("SIM_CONFIRM", "0"),
            ("SIM_JSON", file.to_str().expect("utf-8")),
        ],
        &["--seeds", "8", "--budget", "1h", "--variants", "correct"],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("walkthroughs: SIM_SEEDS=0..3: each variant runs these seeds once; it wins over --seeds, --base-seed, --budget and --rounds"),
        "{text}"
    );
    assert!(!text.contains("(--base-seed)") && !text.contains("budget 3600s"), "no misreported base or rounds: {text}");
    let json = std::fs::read_to_string(&file).expect("SIM_JSON written");
    let mut seeds: Vec<u64> = json
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line")["seed"].as_u64().expect("a seed"))
        .collect();
    seeds.sort_unstable();
    assert_eq!(seeds, vec![0, 1, 2], "SIM_SEEDS's seeds, once: {text}");
    let _ = std::fs::remove_file(&file);
}
