//! Fuzzing the two-node commit example: tapes replay their seeds exactly, a failing tape shrinks
//! and still fails the same way, the corpus gate runs entries (a failing one with a replay line
//! naming its file), and a bounded campaign finds the planted bug, shrinks it and saves it.

#[path = "../examples/two_phase_commit/protocol.rs"]
mod protocol;

use protocol::Variant;
use sim::fuzz::campaign::Options;
use sim::fuzz::shrink::{self, Budget};
use sim::fuzz::{Corpus, Input};
use sim::{Class, Seed, Simulation};

const ORACLE: &str = "commit-reaches-replica";

fn buggy() -> Simulation {
    Simulation::new("two_phase_commit_fuzz").confirm(0)
}

fn fails_the_same_way(outcome: &sim::Outcome) -> bool {
    outcome.failure.as_ref().is_some_and(|f| f.class == Class::Correctness && f.oracle.as_deref() == Some(ORACLE))
}

#[test]
fn a_seeds_tape_replays_its_run_exactly() {
    let sim = buggy();
    let mut failing = 0;
    for seed in 0..40 {
        let (outcome, tape) = sim.tape(Seed(seed), |ctx| protocol::run(ctx, Variant::Buggy));
        assert!(!tape.is_empty(), "seed {seed} drew nothing");
        assert_eq!(tape.root, Seed(seed));
        let replayed = sim.run_input(&tape, |ctx| protocol::run(ctx, Variant::Buggy));
        assert_eq!(replayed.history_hash, outcome.history_hash, "seed {seed}: the tape's run differs");
        assert_eq!(replayed.failure, outcome.failure, "seed {seed}");
        failing += usize::from(outcome.failed());
    }
    assert!(failing > 0, "some of 40 seeds hit the planted bug");
}

#[test]
fn a_failing_tape_shrinks_and_still_fails_with_its_oracle() {
    let sim = buggy();
    let (outcome, tape) = (0..200)
        .map(|seed| sim.tape(Seed(seed), |ctx| protocol::run(ctx, Variant::Buggy)))
        .find(|(outcome, _)| fails_the_same_way(outcome))
        .expect("a seed in 0..200 hits the planted bug");
    let shrunk = shrink::shrink(&tape.bytes, Budget::default(), |bytes| {
        fails_the_same_way(
            &sim.run_input(&Input::new(bytes.to_vec(), tape.root), |ctx| protocol::run(ctx, Variant::Buggy)),
        )
    });
    assert!(shrunk.bytes.len() < tape.len(), "seed {}: {} bytes did not shrink", outcome.seed, tape.len());
    let by_draws =
        sim.shrink_input(&tape, Budget::default(), |ctx| protocol::run(ctx, Variant::Buggy)).expect("it fails");
    assert!(by_draws.bytes.len() < tape.len(), "the draw-aware shrinker shrinks too");
    assert!(fails_the_same_way(
        &sim.run_input(&Input::new(by_draws.bytes.clone(), tape.root), |ctx| protocol::run(ctx, Variant::Buggy))
    ));
    let small = Input::new(shrunk.bytes.clone(), tape.root);
    assert!(fails_the_same_way(&sim.run_input(&small, |ctx| protocol::run(ctx, Variant::Buggy))));
    assert!(!sim.run_input(&small, |ctx| protocol::run(ctx, Variant::Fixed)).failed(), "the fixed protocol passes it");
}

#[test]
fn the_corpus_gate_runs_every_entry_and_names_a_failing_entrys_file() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let corpus = Corpus::at(dir.path(), "two_phase_commit_fuzz");
    let empty = buggy().fuzz_with(&corpus, None, |ctx| protocol::run(ctx, Variant::Buggy)).expect("runs");
    assert!(empty.passed() && empty.outcomes.is_empty(), "no entries, nothing run");

    let sim = buggy();
    let failing = (0..200)
        .map(|seed| sim.tape(Seed(seed), |ctx| protocol::run(ctx, Variant::Buggy)))
        .find(|(outcome, _)| fails_the_same_way(outcome))
        .expect("a failing seed")
        .1;
    let failing = corpus.add(&failing).expect("written");
    corpus.add(&Input::new(Vec::new(), Seed(0))).expect("written");
    let fixed = buggy().fuzz_with(&corpus, None, |ctx| protocol::run(ctx, Variant::Fixed)).expect("runs");
    assert_eq!(fixed.outcomes.len(), 2);
    fixed.assert_passed();
    let report = buggy().fuzz_with(&corpus, None, |ctx| protocol::run(ctx, Variant::Buggy)).expect("runs");
    let failures: Vec<_> = report.failures().collect();
    assert_eq!(failures.len(), 1, "only the failing tape fails");
    assert!(fails_the_same_way(failures[0]));
    let line = &failures[0].replay;
    assert!(line.contains(&format!("SIM_FUZZ_INPUT={}", failing.path.display())), "{line}");
    assert!(line.starts_with(&format!("SIM_SEED={} ", failing.root)), "{line}");
}

#[test]
fn a_bounded_campaign_finds_the_planted_bug_shrinks_and_saves_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let corpus = Corpus::at(dir.path(), "two_phase_commit_fuzz");
    let options = Options {
        budget: std::time::Duration::from_secs(120),
        runs: Some(150),
        seed: 1,
        tapes: 4,
        shrink: Budget { runs: 400, wall: std::time::Duration::from_secs(120) },
    };
    let report = buggy().fuzz_with(&corpus, Some(&options), |ctx| protocol::run(ctx, Variant::Buggy)).expect("runs");
    let failures: Vec<_> = report.failures().collect();
    assert_eq!(failures.len(), 1, "one failure per class and oracle");
    assert!(fails_the_same_way(failures[0]));
    let saved = corpus.artifact_entries().expect("readable");
    assert_eq!(saved.len(), 1);
    assert!(failures[0].replay.contains("SIM_FUZZ_INPUT="), "{}", failures[0].replay);
    let fixed = buggy().fuzz_with(&corpus, Some(&options), |ctx| protocol::run(ctx, Variant::Fixed)).expect("runs");
    assert!(fixed.passed(), "the fixed protocol has nothing to find");
}

/// An engine that proposes only the empty input: the seam takes any engine.
struct Empty(u32);

impl sim::fuzz::Engine for Empty {
    fn name(&self) -> &str {
        "empty"
    }
    fn next(&mut self, _queue: &[Input]) -> Input {
        self.0 += 1;
        Input::new(Vec::new(), Seed(0))
    }
}

#[test]
fn a_campaign_runs_the_callers_engine() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let corpus = Corpus::at(dir.path(), "two_phase_commit_fuzz");
    let options = Options {
        budget: std::time::Duration::from_secs(60),
        runs: Some(20),
        seed: 0,
        tapes: 0,
        shrink: Budget::default(),
    };
    let mut engine = Empty(0);
    let report = buggy()
        .fuzz_with_engine(&corpus, &options, &mut engine, |ctx| protocol::run(ctx, Variant::Fixed))
        .expect("runs");
    assert!(report.passed());
    assert_eq!(engine.0, 19, "20 runs: the empty queue seed, then 19 proposals");
}
