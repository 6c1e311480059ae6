//! Triage: replay lines parsed into commands, and fresh-process triage end to end on a real
//! `sim::Simulation` (the `fleet-fixture-flaky` binary, tests/fixture/flaky.rs).

use std::path::{Path, PathBuf};
use std::process::Command;

use fleet::triage::{self, parse};

const FIXTURE: &str = env!("CARGO_BIN_EXE_fleet-fixture-flaky");

fn words(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn leading_var_words_are_the_environment_and_the_rest_the_command() {
    let c =
        parse("SIM_SEED=7 SIM_SWARM='latency=5ms,replicas=2' cargo run --release -p walkthroughs -- --seeds 300", None)
            .expect("parses");
    assert_eq!(c.env, vec![("SIM_SEED".into(), "7".into()), ("SIM_SWARM".into(), "latency=5ms,replicas=2".into())]);
    assert_eq!(
        (c.program.as_str(), c.args.clone()),
        ("cargo", words(&["run", "--release", "-p", "walkthroughs", "--", "--seeds", "300"]))
    );
    let c = parse("SIM_SEED=7 /opt/my-sim A=b", None).expect("parses");
    assert_eq!(
        (c.env.len(), c.program.as_str(), c.args.clone()),
        (1, "/opt/my-sim", words(&["A=b"])),
        "only leading words are env"
    );
    assert!(parse("SIM_SEED=7 'unbalanced", None).is_err());
    assert!(parse("SIM_SEED=7", None).is_err(), "no command");
}

#[test]
fn exec_replaces_the_cargo_words_up_to_the_dashes_and_keeps_the_programs_arguments() {
    let exec = Some("target/release/walkthroughs");
    let c = parse("SIM_SEED=7 SIM_ONLY=wallet cargo run --release -p walkthroughs -- --seeds 300 --variants all", exec)
        .expect("parses");
    assert_eq!(c.program, "target/release/walkthroughs");
    assert_eq!(c.args, words(&["--seeds", "300", "--variants", "all"]));
    assert_eq!(c.env.len(), 2);
    assert_eq!(c.to_line(), "SIM_SEED=7 SIM_ONLY=wallet target/release/walkthroughs --seeds 300 --variants all");

    let test =
        parse("SIM_SEED=7 cargo test -p x --test y -- name --exact --nocapture", Some("target/debug/deps/y-0123"))
            .expect("parses");
    assert_eq!(test.env, vec![("SIM_SEED".into(), "7".into())]);
    assert_eq!(
        (test.program.as_str(), test.args.clone()),
        ("target/debug/deps/y-0123", words(&["name", "--exact", "--nocapture"]))
    );
    let test = parse("SIM_SEED=7 cargo test -p x --test y -- name --exact --nocapture", None).expect("parses");
    assert_eq!(test.program, "cargo", "without --exec the line runs as written");
    assert_eq!(test.args, words(&["test", "-p", "x", "--test", "y", "--", "name", "--exact", "--nocapture"]));

    let no_args = parse("SIM_SEED=1 SIM_ONLY=a cargo run -p fleet --bin b", Some("./b")).expect("parses");
    assert_eq!(
        (no_args.program.as_str(), no_args.args.len()),
        ("./b", 0),
        "a cargo line without -- has no program arguments"
    );
    let exe = parse("SIM_SEED=1 /old/path/walkthroughs --seeds 5", Some("./walkthroughs")).expect("parses");
    assert_eq!(
        (exe.program.as_str(), exe.args.clone()),
        ("./walkthroughs", words(&["--seeds", "5"])),
        "a binary line keeps its arguments"
    );
}

/// Runs the fixture with `SIM_JSON` into `dir/name` (no confirmations: triage does those).
fn run_fixture(dir: &Path, name: &str, only: &str, env: &[(&str, &Path)]) -> PathBuf {
    let json = dir.join(name);
    let mut c = Command::new(FIXTURE);
    c.current_dir(dir).env("SIM_JSON", &json).env("SIM_CONFIRM", "0").env("SIM_ONLY", only).env_remove("SIM_SEEDS");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("the fixture runs");
    assert_eq!(out.status.code(), Some(1), "the fixture fails some seeds: {}", String::from_utf8_lossy(&out.stderr));
    json
}

#[test]
fn a_deterministic_failure_replays_exactly_and_explore_counts_its_seeds() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let input = run_fixture(dir.path(), "shard.jsonl", "flaky_seeds", &[]);
    let mut opts = fleet::MergeOptions {
        triage: 4,
        exec: Some(FIXTURE.to_string()),
        ..fleet::MergeOptions::new(vec![input], dir.path().join("report"))
    };
    let run = fleet::merge(&opts).expect("the merge runs");
    assert_eq!(run.merged.signatures.len(), 1);
    let s = &run.merged.signatures[0];
    assert_eq!(s.signature, "flaky_seeds · correctness [planted] · seed N hit the planted bug");
    assert_eq!(s.seeds, vec![0, 3, 6, 9]);
    // The replay line names the profile the fixture was built with (`--release` under `cargo test --release`).
    let built_in = Path::new(FIXTURE).parent().and_then(Path::file_name).and_then(|n| n.to_str());
    let profile = if built_in == Some("release") { " --release" } else { "" };
    let cargo_line = format!("cargo run{profile} -p fleet --bin fleet-fixture-flaky");
    assert!(s.fastest.replay.contains(&cargo_line), "{}", s.fastest.replay);
    let t = s.triage.as_ref().expect("a new signature is triaged");
    assert_eq!(t.replay_label(), "replays exactly (4 of 4)", "{:?}", t.replay_notes);
    assert_eq!(t.command, format!("SIM_SEED={} SIM_ONLY=flaky_seeds {FIXTURE}", s.fastest.seed));
    let failing_explore = triage::explore_seeds(s.fastest.seed, 4).iter().filter(|seed| seed.is_multiple_of(3)).count();
    assert_eq!(t.explore_ran, 4, "{:?}", t.explore_note);
    assert_eq!(t.explore_label(), format!("explore: {failing_explore} of 4 seeds fail with this signature"));
    assert!(run.summary.contains(&t.label()), "{}", run.summary);

    opts.expected = vec!["flaky_seeds".into()];
    let run = fleet::merge(&opts).expect("the merge runs");
    assert!(run.merged.signatures[0].triage.is_none(), "only new signatures are triaged");
}

#[test]
fn a_failure_that_depends_on_state_outside_the_seed_replays_only_some_of_the_time() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let counter = dir.path().join("counter");
    // The original run reads 0 (even: fails) and leaves 1; fresh processes then read 1, 2, 3, 4.
    let input = run_fixture(dir.path(), "disk.jsonl", "flaky_disk", &[("FLAKY_COUNTER", &counter)]);
    let out = Command::new(env!("CARGO_BIN_EXE_fleet"))
        .args(["triage", "--k", "4", "--exec", FIXTURE, "--line"])
        .arg(&input)
        .env("FLAKY_COUNTER", &counter)
        .output()
        .expect("fleet triage runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a line that does not replay exactly exits 1: {stdout}");
    assert!(stdout.contains("flaky_disk · correctness [planted] · the counter on disk was even · seed 0"), "{stdout}");
    assert!(stdout.contains("\n  replays 2 of 4\n"), "{stdout}");
    assert!(stdout.contains("process 1: passed") && stdout.contains("process 3: passed"), "{stdout}");
    assert!(stdout.contains("explore: "), "{stdout}");
}

#[test]
fn triage_of_a_line_that_passed_or_does_not_parse_is_bad_usage() {
    let run = |line: &str| {
        Command::new(env!("CARGO_BIN_EXE_fleet")).args(["triage", "--line", line]).output().expect("fleet triage runs")
    };
    let passed = r#"{"simulation":"a","seed":1,"failure":null,"history_hash":"0000000000000001","events":0,"schedule_hash":"0000000000000000","polls":0,"fake_nanos":0,"wall_nanos":0,"swarm":"","interposed":{"getrandom_calls":0,"getrandom_bytes":0,"clock_reads":0},"replay":"SIM_SEED=1 x","replays":null,"trace":null}"#;
    let out = run(passed);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no failing line"));
    assert_eq!(run("{not json").status.code(), Some(3));
    assert_eq!(run("/no/such/file").status.code(), Some(3));
}

#[test]
fn triage_that_cannot_run_anything_is_bad_usage_not_a_verdict() {
    let failing = r#"{"simulation":"a","seed":1,"failure":{"class":"correctness","oracle":"o","message":"m","at_nanos":null},"history_hash":"0000000000000001","events":0,"schedule_hash":"0000000000000000","polls":0,"fake_nanos":0,"wall_nanos":0,"swarm":"","interposed":{"getrandom_calls":0,"getrandom_bytes":0,"clock_reads":0},"replay":"SIM_SEED=1 /no/such/program --seeds 3","replays":null,"trace":null}"#;
    let out = Command::new(env!("CARGO_BIN_EXE_fleet")).args(["triage", "--line", failing]).output().expect("runs");
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot start \"/no/such/program\""));
    let out = Command::new(env!("CARGO_BIN_EXE_fleet"))
        .args(["triage", "--k", "0", "--exec", FIXTURE, "--line", failing])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--k 0 runs nothing"));
}

#[test]
fn a_signatures_json_and_one_of_its_entries_are_triaged_like_lines() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let input = run_fixture(dir.path(), "shard.jsonl", "flaky_seeds", &[]);
    let run = fleet::merge(&fleet::MergeOptions::new(vec![input], dir.path().join("report"))).expect("the merge runs");
    let fastest = &run.merged.signatures[0].fastest;
    let file = dir.path().join("report/signatures.json");
    let targets = triage::targets(file.to_str().expect("utf-8")).expect("signatures.json is taken");
    assert_eq!(targets.len(), 1, "its one new signature");
    assert_eq!(
        (targets[0].seed, targets[0].history_hash),
        (fastest.seed, u64::from_str_radix(&fastest.history_hash, 16).expect("hex"))
    );

    // One entry, as `jq -c '.signatures[0]'` prints it, through the binary.
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("written")).expect("JSON");
    let entry = document["signatures"][0].to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_fleet"))
        .args(["triage", "--k", "2", "--exec", FIXTURE, "--line", &entry])
        .output()
        .expect("fleet triage runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains(&format!("seed {}\n", fastest.seed)) && stdout.contains("replays exactly (2 of 2)"),
        "{stdout}"
    );

    // A divergence's entry is not one failure.
    let mut diverged = document["signatures"][0].clone();
    diverged["diverged"] = serde_json::Value::Bool(true);
    let err = triage::targets(&diverged.to_string()).expect_err("a divergence is refused");
    assert!(err.to_string().contains("is a divergence across shards"), "{err}");
}
