//! Determinism canary (claim 2 of the design): a hyper HTTP/1.1 + HTTP/2 scenario gives one
//! history per seed, repeated in this process and in three fresh processes, and different seeds
//! give different histories.

#[path = "support/hyper_scenario.rs"]
mod hyper_scenario;

use std::collections::BTreeSet;

use sim::{Class, Failure, Simulation};

#[test]
fn every_seed_replays_exactly_in_process_and_in_fresh_processes() {
    let report =
        Simulation::new("determinism_canary").seeds(0..200).repeat(2).repeat_processes(3).run(hyper_scenario::scenario);
    report.assert_passed();
    assert!(!report.outcomes.is_empty());
    let histories: BTreeSet<u64> = report.outcomes.iter().map(|o| o.history_hash).collect();
    assert_eq!(histories.len(), report.outcomes.len(), "different seeds must give different histories");
    for outcome in &report.outcomes {
        // Every client saw a response, a cancellation, an error or a closed connection for each
        // request, so the history is never trivially short.
        assert!(
            outcome.events > hyper_scenario::CLIENTS as u64,
            "seed {}: only {} events",
            outcome.seed,
            outcome.events
        );
        // The scenario reached the interposed functions: uuid/rand/HashMap keys and the clocks.
        assert!(outcome.interposed.getrandom_calls > 0, "seed {}: no getrandom call answered", outcome.seed);
        assert!(outcome.interposed.clock_reads > 0, "seed {}: no clock read answered", outcome.seed);
    }
}

/// The negative control: randomness drawn on an OS thread is outside the simulation, so the
/// self-check must report the seed as diverged, naming the first divergent event.
#[test]
fn randomness_from_an_os_thread_is_reported_as_replay_diverged() {
    let report = Simulation::new("os_thread_leak").seeds(0..3).repeat(2).confirm(0).run(|ctx| async move {
        let leaked: u64 = std::thread::spawn(rand::random::<u64>)
            .join()
            .map_err(|_| Failure::correctness("leak", "thread panicked"))?;
        ctx.record("draw", "os-thread", leaked.to_string());
        Ok(())
    });
    assert_eq!(report.failures().count(), report.outcomes.len(), "{report}");
    for outcome in report.failures() {
        let failure = outcome.failure.as_ref().expect("a failed outcome has a failure");
        assert_eq!(failure.class, Class::ReplayDiverged);
        assert_eq!(failure.oracle.as_deref(), Some("self-check"));
        assert!(failure.message.contains("first divergent event #0"), "{}", failure.message);
        assert!(failure.message.contains("draw os-thread"), "{}", failure.message);
    }
}

/// The same negative control across processes: each fresh process draws other OS randomness.
#[test]
fn randomness_from_an_os_thread_diverges_across_processes() {
    let report =
        Simulation::new("os_thread_leak_processes").seeds(0..2).repeat_processes(1).confirm(0).run(|ctx| async move {
            let leaked: u64 = std::thread::spawn(rand::random::<u64>)
                .join()
                .map_err(|_| Failure::correctness("leak", "thread panicked"))?;
            ctx.record("draw", "os-thread", leaked.to_string());
            Ok(())
        });
    assert_eq!(report.failures().count(), report.outcomes.len(), "{report}");
    for outcome in report.failures() {
        let failure = outcome.failure.as_ref().expect("a failed outcome has a failure");
        assert_eq!(failure.class, Class::ReplayDiverged);
        assert!(failure.message.starts_with("fresh process 0: first divergent event #0"), "{}", failure.message);
    }
}
