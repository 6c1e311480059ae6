//! The wallet walkthrough: the correct wallet passes, each planted bug is found by its oracle
//! and replays exactly in fresh processes.

mod support;

use sim::Simulation;
use walkthroughs::wallet::{self, Variant};

const SEEDS: std::ops::Range<u64> = 0..40;

#[test]
fn the_correct_wallet_passes() {
    Simulation::new(Variant::Correct.simulation())
        .seeds(SEEDS)
        .run(|ctx| wallet::run(ctx, Variant::Correct))
        .assert_passed();
}

fn found(variant: Variant) {
    support::found(Simulation::new(variant.simulation()), variant.name(), variant.oracle(), SEEDS, move |ctx| {
        wallet::run(ctx, variant)
    });
}

#[test]
fn streams_cancelled_before_goaway_are_found() {
    found(Variant::CancelBeforeGoaway);
}

#[test]
fn a_breaker_counting_rollout_ends_is_found() {
    found(Variant::BreakerCountsRolloutEnds);
}
