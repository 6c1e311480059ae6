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
        assert!(failure.message.starts_with("fresh process 0 (after "), "{}", failure.message);
        assert!(failure.message.contains("): first divergent event #0"), "{}", failure.message);
    }
}

/// How many times each process-wide-state case below is checked, each in a sweep of its own.
const TRIES: usize = 10;

/// 32 unbiased two-way selects whose picks the history records. `futures::select!` draws its
/// branch order from a thread-local RNG seeded from a counter the whole process shares (one
/// value per thread that selects; futures-util 0.3.34), so its picks depend on how many runs
/// came before, not on the seed; `tokio::select!` draws from the runtime's seeded RNG.
async fn selects(ctx: sim::Ctx, futures_select: bool, fail: bool) -> Result<(), Failure> {
    let mut picks = String::with_capacity(32);
    for _ in 0..32 {
        let pick = if futures_select {
            futures::select! {
                a = futures::future::ready('a') => a,
                b = futures::future::ready('b') => b,
            }
        } else {
            tokio::select! {
                a = std::future::ready('a') => a,
                b = std::future::ready('b') => b,
            }
        };
        picks.push(pick);
    }
    ctx.record("select", "body", picks);
    if fail { Err(Failure::correctness("planted", "fails on every seed")) } else { Ok(()) }
}

/// A failing seed whose history depends on `futures::select!`'s process-wide counter is not
/// "replays exactly" even though each fresh process runs the same seeds in the same order: each
/// confirms it after its own number of throw-away runs. Checked in `TRIES` sweeps, so the seed
/// stands at a different place in this process's counter each time.
#[test]
fn a_failing_seed_using_futures_select_is_reported_as_diverged_by_the_confirmation_every_time() {
    let mut verdicts = Vec::new();
    for t in 0..TRIES {
        let report =
            Simulation::new(format!("futures_select_confirm_{t}")).seeds(3..4).run(|ctx| selects(ctx, true, true));
        verdicts.push(report.first_failure().and_then(|o| Some((o.failure.clone()?, o.replays.clone()?))));
    }
    // Checked after the loop: a fresh process runs this test too, and must reach its sweep.
    let diverged = verdicts.iter().flatten().filter(|(f, _)| f.class == Class::ReplayDiverged).count();
    eprintln!("futures::select! confirmation: diverged {diverged} of {TRIES} tries");
    for (t, verdict) in verdicts.iter().enumerate() {
        let (failure, replays) = verdict.as_ref().unwrap_or_else(|| panic!("try {t}: the seed passed"));
        assert_eq!(
            (failure.class, failure.oracle.as_deref()),
            (Class::ReplayDiverged, Some("self-check")),
            "try {t}: {failure}"
        );
        assert!(
            failure.message.starts_with("correctness [planted]: fails on every seed, but fresh processes replay it"),
            "try {t}: {failure}"
        );
        assert!(failure.message.contains("throw-away run"), "try {t}: {failure}");
        assert!(
            failure.message.contains("first divergent event #0") && failure.message.contains("select body"),
            "try {t}: {failure}"
        );
        assert!(replays.matched < replays.of && replays.of == 3, "try {t}: {replays}");
    }
}

/// The same failing body with `tokio::select!` (seeded) replays exactly, throw-away runs or not.
#[test]
fn a_failing_seed_using_tokio_select_still_replays_exactly() {
    let mut verdicts = Vec::new();
    for t in 0..3 {
        let report =
            Simulation::new(format!("tokio_select_confirm_{t}")).seeds(3..4).run(|ctx| selects(ctx, false, true));
        verdicts.push(report.first_failure().and_then(|o| Some((o.failure.clone()?, o.replays.clone()?))));
    }
    for (t, verdict) in verdicts.iter().enumerate() {
        let (failure, replays) = verdict.as_ref().unwrap_or_else(|| panic!("try {t}: the seed passed"));
        assert_eq!(
            (failure.class, failure.oracle.as_deref()),
            (Class::Correctness, Some("planted")),
            "try {t}: {failure}"
        );
        assert_eq!(replays.to_string(), "replays exactly (3 of 3 fresh processes)", "try {t}");
    }
}

/// A single passing seed using `futures::select!` fails the self-check, in process
/// (`SIM_REPEAT`) and across fresh processes (`SIM_REPEAT_PROCESSES`), every time.
#[test]
fn a_passing_seed_using_futures_select_fails_the_self_check_every_time() {
    let mut verdicts = Vec::new();
    for t in 0..TRIES {
        let across = Simulation::new(format!("futures_select_processes_{t}"))
            .seeds(3..4)
            .repeat_processes(3)
            .confirm(0)
            .run(|ctx| selects(ctx, true, false));
        let within = Simulation::new(format!("futures_select_repeat_{t}"))
            .seeds(3..4)
            .repeat(2)
            .confirm(0)
            .run(|ctx| selects(ctx, true, false));
        verdicts.push((
            across.first_failure().and_then(|o| o.failure.clone()),
            within.first_failure().and_then(|o| o.failure.clone()),
        ));
    }
    let diverged = verdicts.iter().filter(|(a, w)| a.is_some() && w.is_some()).count();
    eprintln!("futures::select! self-check: diverged {diverged} of {TRIES} tries");
    for (t, (across, within)) in verdicts.iter().enumerate() {
        let across = across.as_ref().unwrap_or_else(|| panic!("try {t}: passed the fresh-process self-check"));
        assert_eq!(across.class, Class::ReplayDiverged, "try {t}: {across}");
        // The first fresh process that differed names it (at most one can match this process).
        assert!(across.message.starts_with("fresh process "), "try {t}: {across}");
        assert!(across.message.contains(" throw-away run"), "try {t}: {across}");
        assert!(
            across.message.contains("first divergent event #0") && across.message.contains("select body"),
            "try {t}: {across}"
        );
        let within = within.as_ref().unwrap_or_else(|| panic!("try {t}: passed the in-process self-check"));
        assert_eq!(within.class, Class::ReplayDiverged, "try {t}: {within}");
        assert!(within.message.starts_with("repeated in this process: first divergent event #0"), "try {t}: {within}");
    }
}

/// The control: with `tokio::select!` the same single seed passes both self-checks.
#[test]
fn a_passing_seed_using_tokio_select_passes_the_self_check() {
    Simulation::new("tokio_select_self_check")
        .seeds(3..4)
        .repeat(2)
        .repeat_processes(3)
        .run(|ctx| selects(ctx, false, false))
        .assert_passed();
}
