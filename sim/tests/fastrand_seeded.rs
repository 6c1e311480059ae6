//! fastrand's thread-local generator is seeded from the run's seed: draws from it (and from
//! `fastrand::Rng::new()`, which forks it, as backon's jitter does) replay exactly within a process
//! and across fresh processes, and differ between seeds.

use std::collections::BTreeSet;

use sim::Simulation;

#[test]
fn fastrand_draws_replay_in_process_and_across_processes() {
    let report = Simulation::new("fastrand_seeded").seeds(0..20).repeat(2).repeat_processes(2).run(|ctx| async move {
        let mut forked = fastrand::Rng::new();
        for i in 0..8 {
            ctx.record("fastrand", &i.to_string(), format!("{} {}", fastrand::u64(..), forked.u32(..)));
        }
        Ok(())
    });
    report.assert_passed();
    let hashes: BTreeSet<u64> = report.outcomes.iter().map(|o| o.history_hash).collect();
    assert_eq!(hashes.len(), report.outcomes.len(), "different seeds must give different draws");
}
