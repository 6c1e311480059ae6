//! The walkthroughs' fuzz targets in the deterministic gate: every entry of
//! `fuzz/corpus/<simulation>/` runs as one run (see `sim::fuzz`). Each planted bug's corpus holds
//! its shrunk input (from the main job's `minimize`), and the same file sits in the corpus of that
//! walkthrough's correct simulation: the regression form that lands with a fix. A correct
//! variant passes every entry; a planted one fails every entry with its oracle.

use sim::{Oracle, Report, Simulation};
use walkthroughs::databases::{self, Variant as D};
use walkthroughs::orderstatus::{self, Variant as O};
use walkthroughs::shoppingcart::{self, Variant as S};
use walkthroughs::wallet::{self, Variant as W};

/// A planted variant's gate: at least one entry, and every entry fails with the planted oracle.
fn fails_with_its_oracle(report: Report, oracle: Option<Oracle>) {
    let oracle = oracle.expect("a planted variant names its oracle");
    let _read = report.passed();
    assert!(!report.outcomes.is_empty(), "{}: the corpus has no entries", report.simulation);
    for outcome in &report.outcomes {
        let failure = outcome.failure.as_ref().filter(|f| f.class.fails() && f.is(&oracle));
        assert!(
            failure.is_some(),
            "{}: {} does not fail with [{oracle}]: {:?}",
            report.simulation,
            outcome.replay,
            outcome.failure
        );
    }
}

#[test]
fn shoppingcart() {
    Simulation::new(S::Correct.simulation()).fuzz(|ctx| shoppingcart::run(ctx, S::Correct)).assert_passed();
}

#[test]
fn shoppingcart_non_atomic_idempotency() {
    let v = S::NonAtomicIdempotency;
    fails_with_its_oracle(Simulation::new(v.simulation()).fuzz(move |ctx| shoppingcart::run(ctx, v)), v.oracle());
}

#[test]
fn shoppingcart_no_drain() {
    let v = S::NoDrain;
    fails_with_its_oracle(Simulation::new(v.simulation()).fuzz(move |ctx| shoppingcart::run(ctx, v)), v.oracle());
}

#[test]
fn wallet() {
    Simulation::new(W::Correct.simulation()).fuzz(|ctx| wallet::run(ctx, W::Correct)).assert_passed();
}

#[test]
fn wallet_cancel_before_goaway() {
    let v = W::CancelBeforeGoaway;
    fails_with_its_oracle(Simulation::new(v.simulation()).fuzz(move |ctx| wallet::run(ctx, v)), v.oracle());
}

#[test]
fn wallet_breaker_counts_rollout_ends() {
    let v = W::BreakerCountsRolloutEnds;
    fails_with_its_oracle(Simulation::new(v.simulation()).fuzz(move |ctx| wallet::run(ctx, v)), v.oracle());
}

#[test]
fn databases() {
    Simulation::new(D::Correct.simulation()).fuzz(|ctx| databases::run(ctx, D::Correct)).assert_passed();
}

#[test]
fn databases_stale_secret_recreated() {
    let v = D::StaleSecretRecreated;
    fails_with_its_oracle(Simulation::new(v.simulation()).fuzz(move |ctx| databases::run(ctx, v)), v.oracle());
}

#[test]
fn databases_lease_merge_patch() {
    let v = D::LeaseMergePatch;
    fails_with_its_oracle(Simulation::new(v.simulation()).fuzz(move |ctx| databases::run(ctx, v)), v.oracle());
}

#[test]
fn orderstatus() {
    Simulation::new(O::Correct.simulation()).fuzz(|ctx| orderstatus::run(ctx, O::Correct)).assert_passed();
}

#[test]
fn orderstatus_churn() {
    Simulation::new(O::CorrectChurn.simulation()).fuzz(|ctx| orderstatus::run(ctx, O::CorrectChurn)).assert_passed();
}

#[test]
fn orderstatus_late_commit() {
    let v = O::LateCommit;
    fails_with_its_oracle(Simulation::new(v.simulation()).fuzz(move |ctx| orderstatus::run(ctx, v)), v.oracle());
}

#[test]
fn orderstatus_late_commit_churn() {
    let v = O::LateCommitChurn;
    fails_with_its_oracle(Simulation::new(v.simulation()).fuzz(move |ctx| orderstatus::run(ctx, v)), v.oracle());
}
