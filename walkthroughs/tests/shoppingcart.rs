//! The shopping cart walkthrough: the correct cart passes, each planted bug is found by its oracle
//! and replays exactly in fresh processes.

mod support;

use sim::Simulation;
use walkthroughs::shoppingcart::{self, Variant};

const SEEDS: std::ops::Range<u64> = 0..40;

#[test]
fn the_correct_cart_passes() {
    Simulation::new(Variant::Correct.simulation())
        .seeds(SEEDS)
        .run(|ctx| shoppingcart::run(ctx, Variant::Correct))
        .assert_passed();
}

fn found(variant: Variant) {
    support::found(Simulation::new(variant.simulation()), variant.name(), variant.oracle(), SEEDS, move |ctx| {
        shoppingcart::run(ctx, variant)
    });
}

#[test]
fn the_non_atomic_idempotency_check_is_found() {
    found(Variant::NonAtomicIdempotency);
}

#[test]
fn the_missing_drain_is_found() {
    found(Variant::NoDrain);
}
