//! The orderstatus walkthrough: the correct service passes every seed under both swarms; the
//! planted late commit (humus #757) is found by Q2 under both and replays exactly in fresh
//! processes.

mod support;

use sim::Simulation;
use walkthroughs::orderstatus::{self, Variant};

const SEEDS: std::ops::Range<u64> = 0..20;

fn passes(variant: Variant) {
    Simulation::new(variant.simulation()).seeds(SEEDS).run(move |ctx| orderstatus::run(ctx, variant)).assert_passed();
}

#[test]
fn the_correct_service_passes_the_default_swarm() {
    passes(Variant::Correct);
}

#[test]
fn the_correct_service_passes_the_churn_swarm() {
    passes(Variant::CorrectChurn);
}

fn found(variant: Variant) {
    support::found(variant.simulation(), variant.name(), variant.oracle(), SEEDS, move |ctx| {
        orderstatus::run(ctx, variant)
    });
}

#[test]
fn a_late_commit_after_a_rebalance_is_found_in_the_default_swarm() {
    found(Variant::LateCommit);
}

#[test]
fn a_late_commit_after_a_rebalance_is_found_in_the_churn_swarm() {
    found(Variant::LateCommitChurn);
}
