//! The orderstatus walkthrough: the correct service passes every seed under both swarms; the
//! planted late commit (humus #757) is found by Q2 under both and replays exactly in fresh
//! processes.

mod support;

use sim::{Class, Simulation};
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
    support::found(Simulation::new(variant.simulation()), variant.name(), variant.oracle(), SEEDS, move |ctx| {
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

/// Fresh seeds whose final log holds an order event twice: the idempotent producer's epoch bump
/// after a message timeout re-stamped a possibly persisted retry (librdkafka#4953). The
/// list-append check excuses the copy (same producer id, higher epoch): the seed passes, and is
/// reported excused, not silently clean.
#[test]
fn a_copy_appended_again_after_an_epoch_bump_is_excused() {
    for (variant, seed) in [(Variant::Correct, 13760669910876886691), (Variant::CorrectChurn, 13760669910876886377)] {
        let report =
            Simulation::new(variant.simulation()).seeds(vec![seed]).run(move |ctx| orderstatus::run(ctx, variant));
        report.assert_passed();
        let failure = report.outcomes[0].failure.as_ref().expect("the duplicate is reported as excused");
        assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Excused, Some("list-append")), "{failure}");
        assert!(failure.message.contains("rule 2 value-at-two-offsets"), "{failure}");
        assert!(failure.message.contains("librdkafka#4953"), "{failure}");
    }
}

/// A fresh churn seed where a lifecycle partition of projector-0 (13.176s, for 4.806s) outlasted
/// the fault window: the heal at 15s left it in force until 17.983s, so Q9's bound started while
/// the projector was cut off. `System::heal` now lifts it, and the seed passes.
#[test]
fn a_lifecycle_partition_ends_at_the_heal_q9_measures_from() {
    Simulation::new(Variant::CorrectChurn.simulation())
        .seeds(vec![13760669910876886148])
        .run(move |ctx| orderstatus::run(ctx, Variant::CorrectChurn))
        .assert_passed();
}
