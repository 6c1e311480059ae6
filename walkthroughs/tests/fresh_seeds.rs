//! Seeds that fresh-seed fleet runs (issue 16, 2026-12-02) found failing in CORRECT variants,
//! pinned after their fix. Each was a false positive of an oracle or of a workload's bookkeeping,
//! not a bug of the service; the cause and the fix are in the commit that added the seed:
//!
//! - orderstatus Q8: a member id was charged to the incarnation that first appeared with it in a
//!   generation, not to the one the coordinator handed it out to (a crashed incarnation's held
//!   JoinGroup completes after its crash).
//! - shoppingcart failed-took-no-effect: a refusal (401, 409) of a retry after an unanswered
//!   attempt said nothing about that attempt, which may still be in flight; the operation is
//!   indeterminate, not failed.
//! - databases rotation-kept: convergence was judged while a stale-list fault outlived the heal.
//!
//! Seeds carry their full value: they came from `--base-seed build`, so `SIM_SEED=<seed>
//! SIM_ONLY=<simulation> cargo run --release -p walkthroughs --` replays each one.

use sim::Simulation;
use walkthroughs::{databases, orderstatus, shoppingcart};

/// Runs `seeds` of an orderstatus variant and asserts every one passes.
fn orderstatus_passes(variant: orderstatus::Variant, seeds: Vec<u64>) {
    Simulation::new(variant.simulation()).seeds(seeds).run(move |ctx| orderstatus::run(ctx, variant)).assert_passed();
}

#[test]
fn orderstatus_q8_ids_handed_out_before_a_crash_are_the_crashed_incarnations() {
    orderstatus_passes(
        orderstatus::Variant::Correct,
        vec![13760669910876886033, 13760669910876886260, 13760669910876886511],
    );
    orderstatus_passes(orderstatus::Variant::CorrectChurn, vec![13760669910876886842]);
}

#[test]
fn shoppingcart_a_refusal_after_an_unanswered_checkout_is_indeterminate() {
    // A 401 (…6357, …6429, …6938) or a 409 (…9838: the unanswered attempt charged items added
    // after the retry found the cart empty) after an unanswered attempt.
    Simulation::new(shoppingcart::Variant::Correct.simulation())
        .seeds(vec![13760669910876886357, 13760669910876886429, 13760669910876886938, 17532222858353959838])
        .run(|ctx| shoppingcart::run(ctx, shoppingcart::Variant::Correct))
        .assert_passed();
}

#[test]
fn databases_convergence_is_judged_after_the_last_api_fault() {
    Simulation::new(databases::Variant::Correct.simulation())
        .seeds(vec![13760669910876886068])
        .run(|ctx| databases::run(ctx, databases::Variant::Correct))
        .assert_passed();
}

#[test]
fn orderstatus_a_broker_stopping_mid_handshake_resets_the_clients_connection() {
    // Not an oracle's false positive but the simulated network's: a listener closed while a
    // connection to it was half-open left that connection answering nothing (Linux answers the
    // dialer's ACK with RST), so a projector's Fetch (…6070) or coordinator lookup (…6531) sent
    // to a broker that stopped waited out its 60 s socket.timeout.ms. sim/tests/net_listener_close.rs.
    orderstatus_passes(orderstatus::Variant::Correct, vec![17532222858353956070, 17532222858353956531]);
}

#[test]
fn orderstatus_q8_a_member_out_of_the_group_at_its_stop_or_kept_alive_by_its_answer() {
    // A second fresh-seed run's (2026-12-03), three causes. The coordinator expired a follower waiting in
    // SyncGroup together with a leader that never synced (…6254): Kafka's propagateAssignment
    // restarts the session of a member it answers. The client dropped its member id on a
    // session timeout checked while rejoining (churn …4805, …5767): librdkafka checks it in join
    // state STEADY only. And Q8 judged ids the client had lost before its stop (…5761, churn
    // …6562 at the stop's instant; churn …6543, …6997, …8104, …8488, …8839, …8954, …60285
    // after the leave or never), and a removal from a rebalance during the drain (churn …9384).
    orderstatus_passes(orderstatus::Variant::Correct, vec![17532222858353955761, 17532222858353956254]);
    orderstatus_passes(
        orderstatus::Variant::CorrectChurn,
        vec![
            17532222858353954805,
            17532222858353955767,
            17532222858353956543,
            17532222858353956562,
            17532222858353956997,
            17532222858353958104,
            17532222858353958488,
            17532222858353958839,
            17532222858353958954,
            17532222858353959384,
            17532222858353960285,
        ],
    );
}

#[test]
fn orderstatus_q8_a_drain_that_timed_out_on_a_commit_records_it_unknown() {
    // A commit fault (NOT_COORDINATOR, with a partition) kept the drain's synchronous commit
    // unanswered until the drain timed out; the history then held no commit at all for offsets
    // the client still sent before leaving (…7614; churn …7503, …7728, …4071).
    orderstatus_passes(orderstatus::Variant::Correct, vec![17532222858353957614]);
    orderstatus_passes(
        orderstatus::Variant::CorrectChurn,
        vec![17532222858353957503, 17532222858353957728, 17532222858353954071],
    );
}

#[test]
fn orderstatus_q9_the_run_goes_on_until_the_group_caught_up_after_the_heal() {
    // Every acknowledged order was served 140–570 ms after the heal, so the run stopped with a
    // record whose produce was not acknowledged still waiting: Q9 could not judge ("run until
    // heal + bound"). The run now settles (kafkasim's `Recorder::settle`) before it stops.
    orderstatus_passes(
        orderstatus::Variant::CorrectChurn,
        vec![4870878224190567374, 4870878224190567764, 4870878224190573600],
    );
}

#[test]
fn orderstatus_q2_a_member_that_lost_its_assignment_commits_nothing_more() {
    // A draining member's session expired; its next commits went out as a non-member
    // (generation -1), which Kafka accepts for an empty group, and moved the committed offset
    // back. The service now stops committing once `assignment_lost()` says so, and the client
    // marks the assignment lost the moment it loses it, as librdkafka does (also while an eager
    // revoke still waits for the application).
    orderstatus_passes(orderstatus::Variant::CorrectChurn, vec![4870878224190565993, 4870878224190574757]);
}

#[test]
fn orderstatus_q9_a_connect_begun_in_a_partition_is_given_up_at_the_setup_timeout() {
    // A projector's connect, begun while it was cut off, waited for its next SYN retransmission
    // 6.8 s after the heal: the client lacked librdkafka's socket.connection.setup.timeout.ms.
    // It has it now; the projectors set 2 s and Q9's bound counts it.
    orderstatus_passes(orderstatus::Variant::CorrectChurn, vec![6259301049052119562]);
}
