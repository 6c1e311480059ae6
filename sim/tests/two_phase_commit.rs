//! Planted-bug canary: the sweep finds the two-node commit protocol's bug, reports it as a
//! correctness failure of the right oracle with a replay line, and that replay line, run as a
//! subprocess, reproduces the same failure and the same trace. The fixed protocol passes the same
//! seeds.

#[path = "support/profile.rs"]
mod profile;
#[path = "../examples/two_phase_commit/protocol.rs"]
mod protocol;

use protocol::Variant;
use sim::{Class, Simulation};

const SEEDS: std::ops::Range<u64> = 0..100;

#[test]
fn planted_bug_is_found_and_its_replay_line_reproduces_it() {
    let report = Simulation::new("two_phase_commit_canary").seeds(SEEDS).run(|ctx| protocol::run(ctx, Variant::Buggy));
    let failures: Vec<_> = report.failures().collect();
    assert!(!failures.is_empty(), "the planted bug was not found in seeds {SEEDS:?}");
    for outcome in &failures {
        let failure = outcome.failure.as_ref().expect("a failed outcome has a failure");
        assert_eq!(failure.class, Class::Correctness, "seed {}: {failure}", outcome.seed);
        assert_eq!(failure.oracle.as_deref(), Some("commit-reaches-replica"), "seed {}: {failure}", outcome.seed);
        let replays = outcome.replays.as_ref().expect("failing seeds are confirmed in fresh processes");
        assert_eq!((replays.matched, replays.of), (3, 3), "seed {}: {replays}", outcome.seed);
    }

    // The replay line runs this very test for one seed; when it does, stop here.
    if std::env::var_os("TWO_PC_REPLAYED").is_some() {
        return;
    }
    let first = failures[0];
    let expected = format!(
        "SIM_SEED={} cargo test{} -p sim --test two_phase_commit -- planted_bug_is_found_and_its_replay_line_reproduces_it --exact --nocapture",
        first.seed,
        profile::cargo_flag()
    );
    assert_eq!(first.replay, expected);
    let trace_path = first.trace.clone().expect("a failing seed's trace is written");
    let trace_before = std::fs::read_to_string(&trace_path).expect("the trace file exists");
    assert!(trace_before.contains("commit-reaches-replica"), "the trace names the oracle");

    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(&first.replay)
        .env("TWO_PC_REPLAYED", "1")
        .env_remove("SIM_SEEDS")
        .output()
        .expect("the replay line runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the replay line failed:\n{stderr}");
    let summary = "sim: two_phase_commit_canary: 1 seed, 1 failed";
    assert!(stderr.contains(summary), "the replay did not reproduce the failure:\n{stderr}");
    assert!(stderr.contains(&first.failure.as_ref().expect("failure").message), "different failure message:\n{stderr}");
    let trace_after = std::fs::read_to_string(&trace_path).expect("the replay rewrote the trace");
    assert_eq!(trace_before, trace_after, "the replay's trace differs from the sweep's");
}

#[test]
fn fixed_protocol_passes_the_same_seeds() {
    let report = Simulation::new("two_phase_commit_fixed").seeds(SEEDS).run(|ctx| protocol::run(ctx, Variant::Fixed));
    report.assert_passed();
}

/// The fuzz target of the fixed protocol (one line): its corpus, `sim/fuzz/corpus/two_phase_commit_fixed/`,
/// holds the planted bug's shrunk input, the regression form that lands with the fix.
#[test]
fn fuzz_target_fixed() {
    Simulation::new("two_phase_commit_fixed").fuzz(|ctx| protocol::run(ctx, Variant::Fixed)).assert_passed();
}

/// The buggy protocol's fuzz target: every corpus entry (the shrunk failing input) still fails
/// with the planted oracle. Under `SIM_FUZZ=10s` it is a campaign that must find the bug.
#[test]
fn fuzz_target_buggy_fails_on_every_corpus_entry() {
    let report = Simulation::new("two_phase_commit_buggy").fuzz(|ctx| protocol::run(ctx, Variant::Buggy));
    let failures: Vec<_> = report.failures().collect();
    assert!(!failures.is_empty(), "the buggy protocol fails on its corpus (or a campaign finds the bug)");
    for outcome in &failures {
        let failure = outcome.failure.as_ref().expect("a failed outcome has a failure");
        assert_eq!(failure.oracle.as_deref(), Some("commit-reaches-replica"), "{failure}");
    }
    assert_eq!(failures.len(), report.outcomes.len(), "every input fails");
}
