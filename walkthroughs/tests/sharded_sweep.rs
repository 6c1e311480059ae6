//! The main job sharded as a fleet runs it: `SIM_SHARD=i/n` processes over one seed range find
//! exactly what one unsharded process finds, seeds come from the build when asked, and a
//! budget runs rounds.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// A planted variant that fails on several of the first seeds (its bug is found in a few).
const PLANTED: &str = "wallet_cancel_before_goaway";

fn main_job(env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_walkthroughs"));
    cmd.args(args);
    for var in ["SIM_SEED", "SIM_SEEDS", "SIM_ONLY", "SIM_SHARD", "SIM_JSON", "SIM_SEED_SALT"] {
        cmd.env_remove(var);
    }
    for var in ["GITHUB_SHA", "GITHUB_EVENT_NAME", "GITHUB_JOB"] {
        cmd.env_remove(var);
    }
    // Confirmations re-run failing seeds in fresh processes: not what these tests are about.
    cmd.env("SIM_CONFIRM", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the walkthroughs binary runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect()
}

/// Per seed: the history hash and the failure's signature (if it failed).
fn by_seed(lines: &[Value]) -> BTreeMap<u64, (String, Option<String>)> {
    let mut out = BTreeMap::new();
    for line in lines {
        let seed = line["seed"].as_u64().expect("a seed");
        let entry =
            (line["history_hash"].as_str().expect("a hash").to_string(), line["signature"].as_str().map(String::from));
        assert!(out.insert(seed, entry).is_none(), "seed {seed} ran twice: {line}");
    }
    out
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("walkthroughs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

#[test]
fn eight_shards_find_the_same_failing_seeds_and_signatures_as_one_unsharded_run() {
    let dir = temp_dir("shards");
    let all = dir.join("all.jsonl");
    let (code, text) =
        main_job(&[("SIM_ONLY", PLANTED), ("SIM_JSON", all.to_str().expect("utf-8"))], &["--seeds", "24"]);
    assert_eq!(code, Some(0), "the planted bug is found in 24 seeds: {text}");
    let unsharded = by_seed(&lines(&all));
    assert_eq!(unsharded.keys().copied().collect::<Vec<_>>(), (0..24).collect::<Vec<_>>());
    let failing = unsharded.values().filter(|(_, sig)| sig.is_some()).count();
    assert!(failing >= 2, "several seeds fail, so the comparison compares something: {unsharded:?}");

    let mut sharded = BTreeMap::new();
    for i in 0..8 {
        let file = dir.join(format!("shard-{i}.jsonl"));
        let shard = format!("{i}/8");
        let (code, text) = main_job(
            &[("SIM_ONLY", PLANTED), ("SIM_SHARD", &shard), ("SIM_JSON", file.to_str().expect("utf-8"))],
            &["--seeds", "24"],
        );
        // A shard that misses the planted bug does not fail: the merge judges the canary.
        assert_eq!(code, Some(0), "shard {shard}: {text}");
        let shard_lines = lines(&file);
        assert_eq!(shard_lines.len(), 3, "shard {shard} runs 3 of the 24 seeds");
        for line in &shard_lines {
            assert_eq!(line["shard"], Value::String(shard.clone()), "{line}");
            assert_eq!(line["seed"].as_u64().map(|s| s % 8), Some(i), "{line}");
        }
        for (seed, entry) in by_seed(&shard_lines) {
            assert!(sharded.insert(seed, entry).is_none(), "seed {seed} ran in two shards");
        }
    }
    assert_eq!(sharded, unsharded, "the shards' union is the unsharded run, seed by seed");

    // And `fleet merge` of the eight shard files reports what it reports for the one file:
    // the same signatures with the same counts, seeds and first seeds (the fastest seed is
    // chosen by wall time, which differs between runs).
    let merge = |inputs: Vec<std::path::PathBuf>, out: &str| {
        let run = fleet::merge(&fleet::MergeOptions {
            canaries: vec![PLANTED.parse().expect("a canary")],
            ..fleet::MergeOptions::new(inputs, dir.join(out))
        })
        .expect("the merge runs");
        assert_eq!(run.exit(), fleet::Exit::Clean, "the canary is found: {}", run.summary);
        let table: Vec<(String, usize, Vec<u64>, u64)> = run
            .merged
            .signatures
            .iter()
            .map(|s| (s.signature.clone(), s.count, s.seeds.clone(), s.first.seed))
            .collect();
        table
    };
    let shard_files = (0..8).map(|i| dir.join(format!("shard-{i}.jsonl"))).collect();
    let merged_shards = merge(shard_files, "report-shards");
    assert!(!merged_shards.is_empty());
    assert_eq!(merged_shards, merge(vec![all], "report-all"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn seeds_from_the_build_differ_by_event_and_are_printed() {
    let dir = temp_dir("build-base");
    let mut firsts = Vec::new();
    for event in ["push", "merge_group"] {
        let file = dir.join(format!("{event}.jsonl"));
        let (code, text) = main_job(
            &[
                ("SIM_ONLY", "wallet"),
                ("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567"),
                ("GITHUB_EVENT_NAME", event),
                ("GITHUB_JOB", "fleet"),
                ("SIM_JSON", file.to_str().expect("utf-8")),
            ],
            &["--base-seed", "build", "--seeds", "2"],
        );
        assert_eq!(code, Some(0), "{text}");
        assert!(
            text.contains("seed base 0x") && text.contains(&format!("event {event}, job fleet")),
            "the base line is printed: {text}"
        );
        let seeds: Vec<u64> = lines(&file).iter().map(|l| l["seed"].as_u64().expect("a seed")).collect();
        assert_eq!(seeds.len(), 2);
        assert_eq!(seeds[1], seeds[0].wrapping_add(1), "seeds count up from the base");
        let base = sim::seed_base::BuildBase::derive("0123456789abcdef0123456789abcdef01234567", event, "fleet", "");
        assert_eq!(seeds[0], base.base, "the printed inputs re-derive the base");
        for line in lines(&file) {
            assert_eq!(line["seed_base"], format!("{:016x}", base.base), "each line names the base: {line}");
        }
        assert!(!text.contains("warning: the commit is unknown"), "GITHUB_SHA names the commit: {text}");
        firsts.push(seeds[0]);
    }
    assert_ne!(firsts[0], firsts[1], "a merge queue's run and a push of one SHA run different seeds");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_budget_runs_rounds_from_the_next_seeds_up_to_the_round_cap() {
    let dir = temp_dir("budget");
    let file = dir.join("rounds.jsonl");
    let (code, text) = main_job(
        &[("SIM_JSON", file.to_str().expect("utf-8")), ("SIM_ONLY", "wallet")],
        &["--seeds", "2", "--base-seed", "100", "--budget", "1h", "--rounds", "3", "--variants", "correct"],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("3 rounds of 2 seeds per variant"), "{text}");
    let mut wallet: Vec<u64> = lines(&file)
        .iter()
        .filter(|l| l["simulation"] == "wallet")
        .map(|l| l["seed"].as_u64().expect("a seed"))
        .collect();
    wallet.sort_unstable();
    assert_eq!(wallet, (100..106).collect::<Vec<_>>(), "round r runs base + r·seeds: {text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_canary_runs_with_the_correct_variants_and_a_wrong_name_is_refused() {
    let (code, text) = main_job(&[], &["--variants", "correct", "--canary", "wallet_cancel_before_goway"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--canary wallet_cancel_before_goway names no planted variant"), "{text}");
    assert!(text.contains(PLANTED), "the planted variants are listed: {text}");

    let dir = temp_dir("canary");
    let file = dir.join("canary.jsonl");
    let (code, text) = main_job(
        &[("SIM_JSON", file.to_str().expect("utf-8")), ("SIM_SHARD", "0/1")],
        &["--seeds", "1", "--variants", "correct", "--canary", PLANTED],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("walkthroughs: shard 0/1 (SIM_SHARD): of each round's seeds, those at positions 0 mod 1"),
        "{text}"
    );
    let mut simulations: Vec<String> =
        lines(&file).iter().map(|l| l["simulation"].as_str().expect("a name").to_string()).collect();
    simulations.sort();
    simulations.dedup();
    assert!(simulations.contains(&PLANTED.to_string()), "{simulations:?}");
    assert!(!simulations.iter().any(|s| s == "wallet_breaker_counts_rollout_ends"), "{simulations:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failures_of_later_rounds_are_confirmed_in_fresh_processes_too() {
    let dir = temp_dir("rounds-confirmed");
    let file = dir.join("rounds.jsonl");
    let (code, text) = main_job(
        &[("SIM_ONLY", PLANTED), ("SIM_CONFIRM", "1"), ("SIM_JSON", file.to_str().expect("utf-8"))],
        &["--seeds", "4", "--budget", "1h", "--rounds", "3"],
    );
    assert_eq!(code, Some(0), "{text}");
    let failing: Vec<Value> = lines(&file).into_iter().filter(|l| !l["signature"].is_null()).collect();
    assert!(failing.iter().any(|l| l["seed"].as_u64() >= Some(4)), "a later round fails too: {text}");
    for line in &failing {
        assert_eq!(line["replays"]["matched"], 1, "seed {} replays in its fresh process: {text}", line["seed"]);
        assert_eq!(line["replays"]["of"], 1, "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_replay_line_replays_in_a_shell_a_shard_left_sim_shard_in() {
    // Seed 3 of the planted variant fails; shard 1/8 would not hold it (position 0 of one seed).
    let (code, text) = main_job(&[("SIM_ONLY", PLANTED), ("SIM_SEED", "3"), ("SIM_SHARD", "1/8")], &["--seeds", "300"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("seed 3: correctness [goaway-first]"), "the seed ran and failed: {text}");
}

#[test]
fn a_shard_with_no_seeds_in_a_round_stops_instead_of_spinning() {
    let (code, text) = main_job(
        &[("SIM_ONLY", "wallet"), ("SIM_SHARD", "5/9")],
        &["--seeds", "4", "--budget", "1h", "--rounds", "1000"],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("budget 3600s: 1 round of 4 seeds per variant, 0 seeds run"), "{text}");
}

#[test]
fn a_build_base_without_a_commit_is_warned_about() {
    // A shipped binary outside a checkout: no GITHUB_SHA, and git finds no repository (it looks
    // no further up than the ceiling).
    let dir = temp_dir("no-commit");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_walkthroughs"));
    cmd.args(["--base-seed", "build", "--seeds", "1"]).current_dir(&dir).env("SIM_ONLY", "wallet");
    for var in ["SIM_SEED", "SIM_SEEDS", "SIM_SHARD", "SIM_JSON", "SIM_SEED_SALT", "GITHUB_SHA", "CARGO_MANIFEST_DIR"] {
        cmd.env_remove(var);
    }
    let out = cmd
        .env("SIM_CONFIRM", "0")
        .env("GIT_CEILING_DIRECTORIES", &dir)
        .output()
        .expect("the walkthroughs binary runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("from commit unknown,"), "{text}");
    assert!(text.contains("walkthroughs: warning: the commit is unknown") && text.contains("set GITHUB_SHA"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
