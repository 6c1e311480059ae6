//! The wallet walkthrough: the correct wallet passes, each planted bug is found by its oracle
//! and replays exactly in fresh processes.

use sim::{Class, Simulation};
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
    let report = Simulation::new(variant.simulation()).seeds(SEEDS).run(move |ctx| wallet::run(ctx, variant));
    let outcome =
        report.failures().find(|o| o.failure.as_ref().is_some_and(|f| f.oracle.as_deref() == variant.oracle()));
    let outcome = outcome.unwrap_or_else(|| {
        panic!("{}: not found by {:?} in seeds {SEEDS:?}:\n{report}", variant.name(), variant.oracle())
    });
    let failure = outcome.failure.as_ref().expect("failure");
    assert_eq!(failure.class, Class::Correctness);
    let replays = outcome.replays.as_ref().expect("confirmed");
    assert_eq!((replays.matched, replays.of), (3, 3), "{replays}");
}

#[test]
fn streams_cancelled_before_goaway_are_found() {
    found(Variant::CancelBeforeGoaway);
}

#[test]
fn a_breaker_counting_rollout_ends_is_found() {
    found(Variant::BreakerCountsRolloutEnds);
}
