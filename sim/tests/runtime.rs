//! The run's thread answers time and randomness from the seed; every other thread gets the real
//! ones. Panics, failures and limits end a run with the right class.

#[path = "support/profile.rs"]
mod profile;

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sim::runtime::interpose::is_simulation_thread;
use sim::{Class, Ctx, Event, Failure, Mode, Simulation};

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("runtime", what)) }
}

#[test]
fn clocks_on_the_run_thread_follow_fake_time_from_a_seeded_epoch() {
    let report = Simulation::new("clocks").seeds(0..8).run(|ctx: Ctx| async move {
        check(is_simulation_thread(), "the body runs on a simulation thread")?;
        let system_start = SystemTime::now();
        let std_start = Instant::now();
        let tokio_start = tokio::time::Instant::now();
        check(
            system_start == ctx.epoch(),
            format!("SystemTime::now() {system_start:?} is the epoch {:?} at fake time 0", ctx.epoch()),
        )?;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        check(
            std_start.elapsed() == Duration::from_millis(1500),
            format!("std Instant advanced {:?}", std_start.elapsed()),
        )?;
        check(tokio_start.elapsed() == Duration::from_millis(1500), "tokio Instant advanced 1.5s")?;
        let system_elapsed = SystemTime::now()
            .duration_since(system_start)
            .map_err(|e| Failure::correctness("runtime", e.to_string()))?;
        check(system_elapsed == Duration::from_millis(1500), format!("SystemTime advanced {system_elapsed:?}"))?;
        let year_2020 = UNIX_EPOCH + Duration::from_secs(1_577_836_800);
        let year_2030 = UNIX_EPOCH + Duration::from_secs(1_893_456_000);
        check((year_2020..=year_2030).contains(&system_start), "the epoch lies in 2020..2030")?;
        ctx.record("epoch", "run", format!("{:?}", system_start.duration_since(UNIX_EPOCH).unwrap_or_default()));
        Ok(())
    });
    report.assert_passed();
    let epochs: BTreeSet<u64> = report.outcomes.iter().map(|o| o.history_hash).collect();
    assert_eq!(epochs.len(), report.outcomes.len(), "each seed has its own epoch");
}

#[test]
fn other_threads_get_the_real_clock_and_real_randomness() {
    assert!(!is_simulation_thread());
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970");
    assert!(now > Duration::from_secs(1_735_689_600), "the test thread reads the real clock (after 2025)");
    let (a, b): (u64, u64) = (rand::random(), rand::random());
    assert_ne!(a, b);
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(20));
    assert!(start.elapsed() >= Duration::from_millis(20), "std Instant is the real monotonic clock here");

    // A thread spawned from inside a run is not a simulation thread either.
    let report = Simulation::new("spawned_thread").seeds(0..1).confirm(0).run(|_ctx| async move {
        let inside =
            std::thread::spawn(is_simulation_thread).join().map_err(|_| Failure::correctness("runtime", "join"))?;
        check(!inside, "an OS thread spawned by the body passes through")
    });
    report.assert_passed();
}

#[test]
fn randomness_on_the_run_thread_is_the_seeds() {
    let draw = |seed: u64| {
        let report = Simulation::new("randomness").seeds(seed..seed + 1).confirm(0).run(|ctx| async move {
            let value: u64 = rand::random();
            let id = uuid::Uuid::new_v4();
            let mut map = std::collections::HashMap::new();
            for k in 0..16 {
                map.insert(k, ());
            }
            let order: Vec<i32> = map.into_keys().collect();
            ctx.record("draw", "run", format!("{value} {id} {order:?}"));
            Ok(())
        });
        report.assert_passed();
        let outcome = &report.outcomes[0];
        assert!(outcome.interposed.getrandom_calls >= 2, "{:?}", outcome.interposed);
        outcome.history_hash
    };
    assert_eq!(draw(5), draw(5));
    assert_ne!(draw(5), draw(6));
}

/// The `getrandom` system call made through `syscall(3)`, as the `getrandom` 0.2 crate makes it
/// (rand 0.8's `thread_rng`, `ring`, the `backoff` crate's jitter): answered from the seed on the
/// run's thread, real randomness elsewhere; other system calls through `syscall(3)` still work.
#[test]
fn the_getrandom_system_call_through_syscall_is_the_seeds_on_the_run_thread() {
    fn raw_getrandom() -> [u8; 16] {
        let mut buf = [0u8; 16];
        // SAFETY: buf is valid for 16 bytes of writes.
        let n = unsafe { libc::syscall(libc::SYS_getrandom, buf.as_mut_ptr(), buf.len(), 0) };
        assert_eq!(n, 16, "getrandom through syscall(3) answered {n}");
        buf
    }
    let draw = |seed: u64| {
        let report = Simulation::new("raw_getrandom").seeds(seed..seed + 1).confirm(0).run(|ctx| async move {
            let bytes = raw_getrandom();
            // Another system call through syscall(3) passes through: this thread's id.
            // SAFETY: gettid takes no arguments.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) };
            check(tid > 0, "gettid through syscall(3) answers")?;
            ctx.record("draw", "run", format!("{bytes:?}"));
            Ok(())
        });
        report.assert_passed();
        let outcome = &report.outcomes[0];
        assert!(outcome.interposed.getrandom_calls >= 1, "{:?}", outcome.interposed);
        outcome.history_hash
    };
    assert_eq!(draw(5), draw(5));
    assert_ne!(draw(5), draw(6));
    // Off a simulation thread the system call is the kernel's: two draws differ.
    assert_ne!(raw_getrandom(), raw_getrandom());
}

#[test]
fn a_panicking_task_ends_the_run_as_a_panic_with_its_message() {
    let report = Simulation::new("task_panic").seeds(0..2).confirm(1).run(|_ctx| async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let task = tokio::spawn(async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            panic!("handler exploded");
        });
        let _ = task.await;
        Ok(())
    });
    assert_eq!(report.failures().count(), report.outcomes.len());
    for outcome in report.failures() {
        let failure = outcome.failure.as_ref().expect("failure");
        assert_eq!(failure.class, Class::Panic, "{failure}");
        assert!(failure.message.contains("handler exploded"), "{}", failure.message);
        assert!(failure.message.contains("tests/runtime.rs"), "the message has the location: {}", failure.message);
        assert_eq!(failure.at(), Some(Duration::from_millis(15)));
        assert_eq!(outcome.replays.as_ref().map(|r| (r.matched, r.of)), Some((1, 1)));
    }
}

#[test]
fn a_recovered_panic_fails_unless_allowed() {
    let body = |_ctx: Ctx| async move {
        let caught = std::panic::catch_unwind(|| panic!("caught by a middleware"));
        check(caught.is_err(), "the panic was caught")
    };
    let report = Simulation::new("recovered_panic").seeds(0..1).confirm(0).run(body);
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("fails by default");
    assert_eq!(failure.class, Class::Panic);
    assert_eq!(failure.oracle.as_deref(), Some("recovered-panic"));
    assert!(failure.message.contains("caught by a middleware"));
    Simulation::new("recovered_panic_allowed").seeds(0..1).allow_recovered_panics(true).run(body).assert_passed();
}

#[test]
fn fail_stops_the_run_with_the_first_failure() {
    let report = Simulation::new("fail_stops").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        let oracle = ctx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            oracle.fail(Failure::correctness("first", "found at 2s"));
            oracle.fail(Failure::correctness("second", "ignored"));
        });
        tokio::time::sleep(Duration::from_secs(10)).await;
        ctx.record("unreachable", "body", "");
        Ok(())
    });
    let outcome = report.first_failure().expect("failed");
    let failure = outcome.failure.as_ref().expect("failure");
    assert_eq!(failure.oracle.as_deref(), Some("first"));
    assert_eq!(failure.at(), Some(Duration::from_secs(2)));
    assert_eq!(outcome.fake_elapsed(), Duration::from_secs(2), "the run stopped when the failure was reported");
    let trace = std::fs::read_to_string(outcome.trace.as_ref().expect("trace")).expect("trace file");
    assert!(!trace.contains("unreachable"));
}

#[test]
fn a_run_past_its_time_limit_is_a_liveness_failure() {
    let report = Simulation::new("time_limit").seeds(0..1).confirm(0).time_limit(Duration::from_secs(60)).run(
        |_ctx| async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        },
    );
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("fails");
    assert_eq!(failure.class, Class::Liveness);
    assert_eq!(failure.oracle.as_deref(), Some("time-limit"));
    assert_eq!(failure.at(), Some(Duration::from_secs(60)));
}

#[test]
fn events_due_together_run_in_an_order_the_seed_picks() {
    let order = |seed: u64| {
        let report = Simulation::new("ties").seeds(seed..seed + 1).confirm(0).run(|ctx: Ctx| async move {
            for name in ["a", "b", "c", "d", "e"] {
                ctx.driver().at(Duration::from_millis(10), Event::new("tie", name));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            let names: Vec<String> = ctx.history().entries().map(|e| e.identity.clone()).collect();
            check(names.len() == 5, format!("five events fired: {names:?}"))?;
            ctx.record("order", "ties", names.join(""));
            Ok(())
        });
        report.assert_passed();
        report.outcomes[0].history_hash
    };
    assert_eq!(order(1), order(1), "the same seed, the same order");
    let orders: BTreeSet<u64> = (0..10).map(order).collect();
    assert!(orders.len() > 1, "different seeds pick different orders");
}

#[test]
fn explore_mode_perturbs_the_schedule_and_still_replays_exactly() {
    let scenario = |ctx: Ctx| async move {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for task in 0..6u32 {
            let tx = tx.clone();
            tokio::spawn(async move {
                for step in 0..4u32 {
                    tokio::time::sleep(Duration::from_millis(u64::from(step % 2))).await;
                    let _ = tx.send((task, step));
                    tokio::task::yield_now().await;
                }
            });
        }
        drop(tx);
        let mut seen = Vec::new();
        while let Some(item) = rx.recv().await {
            seen.push(item);
        }
        ctx.record("interleaving", "tasks", format!("{seen:?}"));
        Ok(())
    };
    let replay = Simulation::new("explore_off").seeds(0..20).repeat(2).run(scenario);
    replay.assert_passed();
    let explore = Simulation::new("explore_on").seeds(0..20).mode(Mode::Explore).repeat(2).run(scenario);
    explore.assert_passed();
    let replay_histories: BTreeSet<u64> = replay.outcomes.iter().map(|o| o.history_hash).collect();
    let explore_histories: BTreeSet<u64> = explore.outcomes.iter().map(|o| o.history_hash).collect();
    assert!(
        explore_histories.len() > replay_histories.len(),
        "explore finds more interleavings: {} vs {}",
        explore_histories.len(),
        replay_histories.len()
    );
}

#[test]
fn tracing_output_is_stamped_with_fake_time_in_the_trace() {
    let report = Simulation::new("tracing_fake_time").seeds(0..1).confirm(0).run(|_ctx| async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        tracing::info!(answer = 42, "hello from the run");
        Err(Failure::correctness("show-trace", "fail so the trace is written"))
    });
    let outcome = report.first_failure().expect("failed");
    let trace = std::fs::read_to_string(outcome.trace.as_ref().expect("trace")).expect("trace file");
    let line = trace.lines().find(|l| l.contains("hello from the run")).expect("the log line is in the trace");
    assert!(line.starts_with("[    1.500000s]"), "{line}");
    assert!(line.contains("answer=42"), "{line}");
    let replay = format!(
        "# replay: SIM_SEED=0 cargo test{} -p sim --test runtime -- tracing_output_is_stamped_with_fake_time_in_the_trace --exact",
        profile::cargo_flag()
    );
    assert!(trace.contains(&replay), "{replay:?} not in:\n{trace}");
}

#[test]
fn swarm_dimensions_are_drawn_per_seed_and_can_be_pinned() {
    let body = |ctx: Ctx| async move {
        let latency = ctx.swarm().duration("latency", Duration::ZERO..=Duration::from_millis(50));
        let replicas = ctx.swarm().int("replicas", 1..=3);
        ctx.record("swarm", "dims", format!("{latency:?} {replicas}"));
        Ok(())
    };
    let free = Simulation::new("swarm_free").seeds(0..64).run(body);
    free.assert_passed();
    let swarms: BTreeSet<&str> = free.outcomes.iter().map(|o| o.swarm.as_str()).collect();
    assert!(swarms.len() > 10, "{swarms:?}");
    assert!(swarms.iter().any(|s| s.contains("latency=0ms")), "zero latency is drawn: {swarms:?}");
    assert!(swarms.iter().any(|s| s.contains("replicas=1")), "one replica is drawn: {swarms:?}");

    let pinned = Simulation::new("swarm_pinned").seeds(0..8).swarm("latency", "0ms").swarm("replicas", "1").run(body);
    pinned.assert_passed();
    assert!(pinned.outcomes.iter().all(|o| o.swarm == "latency=0ms,replicas=1"));

    let bad = Simulation::new("swarm_bad").seeds(0..1).swarm("replicas", "three").try_run(body);
    assert_eq!(
        bad.err().map(|e| e.to_string()),
        Some("swarm dimension \"replicas\": cannot use \"three\" as an integer".to_string())
    );
    let unknown = Simulation::new("swarm_unknown").seeds(0..1).swarm("latncy", "0ms").try_run(body);
    let message = unknown.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("\"latncy\"") && message.contains("\"latency\""), "{message}");
}

#[test]
fn fuzz_bytes_drive_the_run_and_exhausted_bytes_give_the_simplest_run() {
    let body = |ctx: Ctx| async move {
        let replicas = ctx.swarm().int("replicas", 1..=5);
        let latency = ctx.swarm().duration("latency", Duration::ZERO..=Duration::from_millis(40));
        let faults = ctx.source("faults").below(10);
        ctx.record("drawn", "fuzz", format!("{replicas} {latency:?} {faults}"));
        if replicas == 5 && faults == 7 {
            return Err(Failure::correctness("fuzz", "the fuzzer found the corner"));
        }
        Ok(())
    };
    let sim = Simulation::new("fuzzed");
    let simplest = sim.run_fuzz(&[], body);
    assert!(simplest.failure.is_none());
    assert_eq!(simplest.swarm, "latency=0ms,replicas=1", "no bytes: every dimension at its low end");
    assert_eq!(sim.run_fuzz(&[9, 9, 9], body).history_hash, sim.run_fuzz(&[9, 9, 9], body).history_hash);
    // Bytes chosen to hit the corner: replicas' edge draw 2 ("high end"), latency's edge draw 0
    // ("low end"), then faults = 7.
    let found = sim.run_fuzz(&[2, 0, 7], body);
    assert_eq!(found.failure.map(|f| f.class), Some(Class::Correctness), "{}", found.swarm);
}

#[test]
fn panics_are_still_caught_after_a_library_installs_its_own_panic_hook() {
    let body = |_ctx: Ctx| async move {
        let caught = std::panic::catch_unwind(|| panic!("caught after a hook change"));
        check(caught.is_err(), "the panic was caught")
    };
    let first = Simulation::new("hook_before").seeds(0..1).confirm(0).run(body);
    assert!(first.first_failure().is_some());
    // What color-eyre, tracing-panic and friends do.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| previous(info)));
    let second = Simulation::new("hook_after").seeds(0..1).confirm(0).run(body);
    let failure = second.first_failure().and_then(|o| o.failure.clone()).expect("still detected");
    assert_eq!(failure.oracle.as_deref(), Some("recovered-panic"));
    assert!(failure.message.contains("caught after a hook change"), "{}", failure.message);
}
